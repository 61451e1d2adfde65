//! A socket watcher.

use std::ffi::{c_int, c_void};
use std::rc::Rc;

use super::ffi::{self, Loop, PollCb};
use super::handle::{any_handle, checked, CloseGroup, Handle, UvError, UV_POLL};

/// `uv_poll_event` bits.
pub const READABLE: c_int = 1;
pub const WRITABLE: c_int = 2;

/// A socket watcher, calling its callback with the events that happened.
pub struct Poll {
    handle: Handle,
    cb: PollCb,
}
any_handle!(Poll);

impl Poll {
    /// A watcher of the socket `socket` (its descriptor), whose callbacks
    /// find their owner through `data`.
    ///
    /// # Safety
    /// For every constructor of a typed handle: `loop_` is this thread's live loop; `data` is what `cb` expects to
    /// find with [`data_of`] for as long as the handle is open. For a poll
    /// handle, `socket` also stays open until the handle is closed.
    pub unsafe fn new(
        loop_: *mut Loop, socket: ffi::OsSock, data: *mut c_void, cb: PollCb,
    ) -> Result<Poll, UvError> {
        // SAFETY: as the caller promises; the init matches the kind.
        let handle = unsafe {
            Handle::new(UV_POLL, data, |h| {
                ffi::uv_poll_init_socket(loop_, h, socket)
            })
        }?;
        Ok(Poll { handle, cb })
    }

    /// Watch the socket for `events` (`READABLE`, `WRITABLE`), replacing
    /// what it watched.
    pub fn start(&self, events: c_int) -> Result<(), UvError> {
        // SAFETY: a live poll handle, with the callback it was made for.
        checked(unsafe { ffi::uv_poll_start(self.handle.raw, events, self.cb) })
    }
}
