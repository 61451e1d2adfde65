//! The end of a loop turn: a check handle runs there (what one turn
//! produced goes out in one write), and an idle handle, while started, has
//! the loop poll without blocking, so that check runs in this iteration.

use std::ffi::c_void;
use std::rc::Rc;

use super::ffi::{self, Cb, Loop};
use super::handle::{any_handle, checked, stopped, CloseGroup, Handle, UvError, UV_CHECK, UV_IDLE};

/// Calls its callback once per loop iteration, right after polling for I/O.
pub struct Check {
    handle: Handle,
    cb: Cb,
}
any_handle!(Check);

impl Check {
    /// # Safety
    /// See [`super::Poll::new`].
    pub unsafe fn new(loop_: *mut Loop, data: *mut c_void, cb: Cb) -> Result<Check, UvError> {
        // SAFETY: as the caller promises; the init matches the kind.
        let handle = unsafe { Handle::new(UV_CHECK, data, |h| ffi::uv_check_init(loop_, h)) }?;
        Ok(Check { handle, cb })
    }

    pub fn start(&self) -> Result<(), UvError> {
        // SAFETY: a live check handle.
        checked(unsafe { ffi::uv_check_start(self.handle.raw, self.cb) })
    }

    pub fn stop(&self) {
        // SAFETY: a live check handle.
        stopped(unsafe { ffi::uv_check_stop(self.handle.raw) });
    }
}

/// While started, the loop polls for I/O without blocking: what a check
/// handle is to do happens in this iteration, not after the next event.
pub struct Idle {
    handle: Handle,
}
any_handle!(Idle);

unsafe extern "C" fn idle_does_nothing(_handle: *mut c_void) {}

impl Idle {
    /// # Safety
    /// See [`super::Poll::new`] (an idle handle's callback does nothing with `data`).
    pub unsafe fn new(loop_: *mut Loop) -> Result<Idle, UvError> {
        // SAFETY: as the caller promises; the init matches the kind.
        let handle = unsafe {
            Handle::new(UV_IDLE, std::ptr::null_mut(), |h| {
                ffi::uv_idle_init(loop_, h)
            })
        }?;
        Ok(Idle { handle })
    }

    pub fn start(&self) -> Result<(), UvError> {
        // SAFETY: a live idle handle.
        checked(unsafe { ffi::uv_idle_start(self.handle.raw, idle_does_nothing) })
    }

    pub fn stop(&self) {
        // SAFETY: a live idle handle.
        stopped(unsafe { ffi::uv_idle_stop(self.handle.raw) });
    }
}
