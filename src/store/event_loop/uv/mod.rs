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
//! In the addon the symbols are Node's own, found when Node loads it; the
//! crate's tests link the system's libuv instead and run a loop of their own.

use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::fmt;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

/// `uv_loop_t`, opaque.
pub type Loop = napi::sys::uv_loop_s;

mod ffi;

pub use ffi::{Cb, PollCb};

/// `uv_handle_type` values (uv.h).
const UV_ASYNC: c_int = 1;
const UV_CHECK: c_int = 2;
const UV_IDLE: c_int = 6;
const UV_POLL: c_int = 8;
const UV_TIMER: c_int = 13;

/// `uv_poll_event` bits.
pub const READABLE: c_int = 1;
pub const WRITABLE: c_int = 2;

/// A libuv call that failed: its (negative) error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UvError(pub c_int);

impl fmt::Display for UvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: uv_err_name takes any code and returns a static string (a
        // leaked one for codes it does not know), or null.
        let name = unsafe { ffi::uv_err_name(self.0) };
        if name.is_null() {
            return write!(f, "libuv error {}", self.0);
        }
        // SAFETY: a non-null, NUL-terminated string libuv never frees.
        let name = unsafe { CStr::from_ptr(name) };
        write!(f, "libuv error {} ({})", self.0, name.to_string_lossy())
    }
}

/// A libuv return code as a Result.
fn checked(code: c_int) -> Result<(), UvError> {
    if code == 0 {
        Ok(())
    } else {
        Err(UvError(code))
    }
}

/// A `uv_*_stop` return code. libuv's stop functions return 0 for every
/// handle that was initialised (stopping one that is not active is a no-op),
/// and ours are, while their owner lives: anything else is a libuv that
/// breaks its own contract, and there is nothing to undo, so it is only
/// checked in debug builds.
fn stopped(code: c_int) {
    debug_assert_eq!(code, 0, "a libuv stop function failed");
}

/// One libuv handle of any kind, owned: closed (and its memory freed by
/// libuv's close callback) when dropped, or by [`Handle::close_in`] as part
/// of a group that says when the last of its handles is closed. Only the
/// typed handles below hold one, so which libuv calls it takes is known.
struct Handle {
    raw: *mut c_void,
    size: usize,
}

/// Handles being closed together, and what to do once the last is.
pub struct CloseGroup {
    open: Cell<usize>,
    then: Cell<Option<Box<dyn FnOnce()>>>,
}

impl CloseGroup {
    pub fn new(then: impl FnOnce() + 'static) -> Rc<CloseGroup> {
        Rc::new(CloseGroup {
            open: Cell::new(0),
            then: Cell::new(Some(Box::new(then))),
        })
    }

    /// Call `then` now if no handle of the group is still closing.
    pub fn done_adding(self: &Rc<Self>) {
        if self.open.get() == 0 {
            if let Some(then) = self.then.take() {
                then();
            }
        }
    }
}

/// What a closing handle's data slot holds until libuv's close callback.
struct Closing {
    size: usize,
    group: Option<Rc<CloseGroup>>,
}

unsafe extern "C" fn free_handle(raw: *mut c_void) {
    // SAFETY: libuv calls this once, after the handle is closed; its data
    // slot holds the `Closing` box `close_raw` put there.
    let closing = unsafe { Box::from_raw(ffi::uv_handle_get_data(raw).cast::<Closing>()) };
    // SAFETY: `raw` is the allocation `Handle::new` made with `layout(closing.size)`,
    // and libuv no longer uses it once the close callback runs.
    unsafe { std::alloc::dealloc(raw.cast(), layout(closing.size)) };
    if let Some(group) = closing.group {
        group.open.set(group.open.get() - 1);
        group.done_adding();
    }
}

fn layout(size: usize) -> std::alloc::Layout {
    // A handle is a C struct of pointers and integers: pointer alignment.
    std::alloc::Layout::from_size_align(size.max(1), std::mem::align_of::<usize>())
        .unwrap_or(std::alloc::Layout::new::<usize>())
}

impl Handle {
    /// A zeroed allocation for a handle of `kind`, initialised by `init`,
    /// carrying `data` for its callbacks, and not keeping the loop alive.
    ///
    /// # Safety
    /// `init` is the `uv_*_init` of `kind` on this thread's live loop.
    unsafe fn new(
        kind: c_int,
        data: *mut c_void,
        init: impl FnOnce(*mut c_void) -> c_int,
    ) -> Result<Handle, UvError> {
        // SAFETY: uv_handle_size is a pure lookup, and `kind` a handle type.
        let size = unsafe { ffi::uv_handle_size(kind) };
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout(size)) }.cast::<c_void>();
        if raw.is_null() {
            std::alloc::handle_alloc_error(layout(size));
        }
        if let Err(e) = checked(init(raw)) {
            // SAFETY: libuv failed to init it, so it does not know it: ours to free.
            unsafe { std::alloc::dealloc(raw.cast(), layout(size)) };
            return Err(e);
        }
        // SAFETY: `raw` is a live, initialised handle on this thread.
        unsafe {
            ffi::uv_handle_set_data(raw, data);
            ffi::uv_unref(raw);
        }
        Ok(Handle { raw, size })
    }

    fn set_ref(&self, keep_alive: bool) {
        // SAFETY: `raw` is a live, initialised handle (not closing: closing
        // consumes its owner).
        unsafe {
            if keep_alive {
                ffi::uv_ref(self.raw)
            } else {
                ffi::uv_unref(self.raw)
            }
        }
    }

    fn close_in(self, group: &Rc<CloseGroup>) {
        group.open.set(group.open.get() + 1);
        let (raw, size) = (self.raw, self.size);
        std::mem::forget(self);
        close_raw(raw, size, Some(Rc::clone(group)));
    }
}

/// Hand a live handle to libuv to close (once); its memory goes in the close callback.
fn close_raw(raw: *mut c_void, size: usize, group: Option<Rc<CloseGroup>>) {
    let closing = Box::into_raw(Box::new(Closing { size, group }));
    // SAFETY: a live handle, closed once (its owner is consumed); no callback
    // of its owner runs after uv_close, so the data slot can carry the
    // `Closing` box to `free_handle`.
    unsafe {
        ffi::uv_handle_set_data(raw, closing.cast());
        ffi::uv_close(raw, Some(free_handle));
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        close_raw(self.raw, self.size, None);
    }
}

/// What every typed handle can do whatever its kind: keep the loop alive or
/// not, and be closed as one of a group.
macro_rules! any_handle {
    ($kind:ident) => {
        impl $kind {
            /// Whether it keeps the loop alive while active (made: it does not).
            pub fn set_ref(&self, keep_alive: bool) {
                self.handle.set_ref(keep_alive);
            }

            /// Close it as one of `group`.
            pub fn close_in(self, group: &Rc<CloseGroup>) {
                self.handle.close_in(group);
            }
        }
    };
}

/// A socket watcher, calling its callback with the events that happened.
pub struct Poll {
    handle: Handle,
    cb: PollCb,
}
any_handle!(Poll);

impl Poll {
    /// A watcher of `fd`, whose callbacks find their owner through `data`.
    ///
    /// # Safety
    /// For every constructor of a typed handle: `loop_` is this thread's live loop; `data` is what `cb` expects to
    /// find with [`data_of`] for as long as the handle is open. For a poll
    /// handle, `fd` also stays open until the handle is closed.
    pub unsafe fn new(
        loop_: *mut Loop,
        fd: c_int,
        data: *mut c_void,
        cb: PollCb,
    ) -> Result<Poll, UvError> {
        // SAFETY: as the caller promises; the init matches the kind.
        let handle =
            unsafe { Handle::new(UV_POLL, data, |h| ffi::uv_poll_init_socket(loop_, h, fd)) }?;
        Ok(Poll { handle, cb })
    }

    /// Watch the socket for `events` (`READABLE`, `WRITABLE`), replacing
    /// what it watched.
    pub fn start(&self, events: c_int) -> Result<(), UvError> {
        // SAFETY: a live poll handle, with the callback it was made for.
        checked(unsafe { ffi::uv_poll_start(self.handle.raw, events, self.cb) })
    }
}

/// A one-shot timer.
pub struct Timer {
    handle: Handle,
    cb: Cb,
}
any_handle!(Timer);

impl Timer {
    /// # Safety
    /// See [`Poll::new`].
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

/// Calls its callback once per loop iteration, right after polling for I/O.
pub struct Check {
    handle: Handle,
    cb: Cb,
}
any_handle!(Check);

impl Check {
    /// # Safety
    /// See [`Poll::new`].
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
    /// See [`Poll::new`] (an idle handle's callback does nothing with `data`).
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

/// An async handle: woken from other threads through its [`AsyncSlot`].
pub struct Async {
    handle: Handle,
}
any_handle!(Async);

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
    /// See [`Poll::new`]. [`AsyncSlot::disarm`] must be called before the
    /// returned handle is closed.
    pub unsafe fn new(
        loop_: *mut Loop,
        data: *mut c_void,
        cb: Cb,
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
