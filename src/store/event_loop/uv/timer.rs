//! The one timer of a connection: every deadline's.

use std::ffi::c_void;
use std::rc::Rc;

use super::ffi::{self, Cb, Loop};
use super::handle::{any_handle, checked, stopped, CloseGroup, Handle, UvError, UV_TIMER};

/// A one-shot timer.
pub struct Timer {
    handle: Handle,
    cb: Cb,
}
any_handle!(Timer);

impl Timer {
    /// # Safety
    /// See [`super::Poll::new`].
    pub unsafe fn new(loop_: *mut Loop, data: *mut c_void, cb: Cb) -> Result<Timer, UvError> {
        // SAFETY: as the caller promises; the init matches the kind.
        let handle = unsafe { Handle::new(UV_TIMER, data, |h| ffi::uv_timer_init(loop_, h)) }?;
        Ok(Timer { handle, cb })
    }

    /// Call the callback once, `ms` from now (restarting the timer if it runs).
    pub fn start(&self, ms: u64) -> Result<(), UvError> {
        // SAFETY: a live timer handle.
        checked(unsafe { ffi::uv_timer_start(self.handle.raw, self.cb, ms, 0) })
    }

    pub fn stop(&self) {
        // SAFETY: a live timer handle.
        stopped(unsafe { ffi::uv_timer_stop(self.handle.raw) });
    }
}
