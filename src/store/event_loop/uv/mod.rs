//! libuv, as Node exports it: the handles a connection on the JS thread's
//! own event loop needs, each a type of its own ([`Poll`] a socket watcher,
//! [`Timer`], [`Check`] and [`Idle`] to flush what one turn produced,
//! [`Async`] to be woken from Tokio), so a call meant for one kind of handle
//! cannot be made on another. Each is allocated at the size libuv reports,
//! given its callback when it is made, and freed in its close callback.
//!
//! Every function here must be called on the thread that runs the loop the
//! handle belongs to (the JS thread of one Node environment), except
//! [`AsyncSlot::send`], which libuv allows from any thread.
//!
//! In the addon the symbols are Node's own, found when Node loads it (on
//! Windows, by [`load`], before a loop is first used); the crate's tests
//! link the system's libuv instead and run a loop of their own.

use std::ffi::c_void;

mod ffi;
mod handle;
mod poll;
mod timer;
mod turn;
mod wake;

pub use self::ffi::{load, Cb, Loop, OsSock, PollCb};
pub use self::handle::{CloseGroup, UvError};
pub use self::poll::{Poll, READABLE, WRITABLE};
pub use self::timer::Timer;
pub use self::turn::{Check, Idle};
pub use self::wake::{Async, AsyncSlot};

/// The owner pointer a callback's handle carries.
///
/// # Safety
/// `raw` is a live handle made by one of the typed constructors above.
pub unsafe fn data_of(raw: *mut c_void) -> *mut c_void {
    // SAFETY: as the caller promises.
    unsafe { ffi::uv_handle_get_data(raw) }
}

/// Milliseconds of the loop's clock, read now. The loop caches its clock at
/// the start of each iteration, so after JS blocked the thread (a long
/// synchronous call) the cached time is behind: a deadline counted from it
/// would already have passed when the loop next looks.
///
/// # Safety
/// `loop_` is this thread's live loop, and this is its thread.
pub unsafe fn now(loop_: *mut Loop) -> u64 {
    // SAFETY: as the caller promises.
    unsafe {
        ffi::uv_update_time(loop_);
        ffi::uv_now(loop_)
    }
}
