//! Waking the loop from another thread (Tokio, where connections open).

use std::ffi::c_void;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use super::ffi::{self, Cb, Loop};
use super::handle::{any_handle, CloseGroup, Handle, UvError, UV_ASYNC};

/// An async handle: woken from other threads through its [`AsyncSlot`].
pub struct Async {
    handle: Handle,
}
any_handle!(Async);

/// What other threads wake the loop through. The pointer is nulled under
/// the lock before the handle is closed, so a late `send` from another
/// thread never reaches a closed handle.
#[derive(Clone)]
pub struct AsyncSlot(Arc<Mutex<SendPtr>>);

struct SendPtr(*mut c_void);
// SAFETY: the pointer is only used under the mutex, and uv_async_send may be
// called from any thread while the handle is open.
unsafe impl Send for SendPtr {}

impl AsyncSlot {
    /// # Safety
    /// See [`super::Poll::new`]. [`AsyncSlot::disarm`] must be called before the
    /// returned handle is closed.
    pub unsafe fn new(
        loop_: *mut Loop, data: *mut c_void, cb: Cb,
    ) -> Result<(AsyncSlot, Async), UvError> {
        // SAFETY: as the caller promises; the init matches the kind.
        let handle = unsafe { Handle::new(UV_ASYNC, data, |h| ffi::uv_async_init(loop_, h, cb)) }?;
        let slot = AsyncSlot(Arc::new(Mutex::new(SendPtr(handle.raw))));
        Ok((slot, Async { handle }))
    }

    /// Wake the loop: its callback runs there soon. From any thread; a no-op
    /// once closed. libuv's send fails only for a handle that is not an
    /// async one, which the slot's type rules out: checked in debug builds.
    pub fn send(&self) {
        if let Ok(slot) = self.0.lock() {
            if !slot.0.is_null() {
                // SAFETY: open (not nulled), and uv_async_send is thread-safe.
                let sent = unsafe { ffi::uv_async_send(slot.0) };
                debug_assert_eq!(sent, 0, "uv_async_send on an async handle failed");
            }
        }
    }

    /// No `send` reaches the handle from now on: call before closing it.
    pub fn disarm(&self) {
        if let Ok(mut slot) = self.0.lock() {
            slot.0 = std::ptr::null_mut();
        }
    }
}
