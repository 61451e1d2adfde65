//! libuv, as Node exports it: the handles a connection on the JS thread's
//! own event loop needs (a socket watcher, timers, a check and an idle
//! handle to flush what one turn produced, an async handle to be woken from
//! Tokio), each allocated at the size libuv reports and freed in its close
//! callback.
//!
//! Every function here must be called on the thread that runs the loop the
//! handle belongs to (the JS thread of one Node environment), except
//! [`AsyncSlot::send`], which libuv allows from any thread.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

/// `uv_loop_t`, opaque.
pub type Loop = napi::sys::uv_loop_s;

/// Node's libuv, linked from the `node` binary at load time.
mod ffi {
    use super::*;

    pub type Cb = unsafe extern "C" fn(*mut c_void);
    pub type PollCb = unsafe extern "C" fn(*mut c_void, c_int, c_int);
    pub type CloseCb = unsafe extern "C" fn(*mut c_void);

    extern "C" {
        pub fn uv_handle_size(kind: c_int) -> usize;
        pub fn uv_handle_set_data(handle: *mut c_void, data: *mut c_void);
        pub fn uv_handle_get_data(handle: *const c_void) -> *mut c_void;
        pub fn uv_close(handle: *mut c_void, cb: Option<CloseCb>);
        pub fn uv_ref(handle: *mut c_void);
        pub fn uv_unref(handle: *mut c_void);
        pub fn uv_now(loop_: *const Loop) -> u64;
        pub fn uv_update_time(loop_: *mut Loop);

        pub fn uv_poll_init_socket(loop_: *mut Loop, handle: *mut c_void, socket: c_int) -> c_int;
        pub fn uv_poll_start(handle: *mut c_void, events: c_int, cb: PollCb) -> c_int;

        pub fn uv_timer_init(loop_: *mut Loop, handle: *mut c_void) -> c_int;
        pub fn uv_timer_start(handle: *mut c_void, cb: Cb, timeout: u64, repeat: u64) -> c_int;
        pub fn uv_timer_stop(handle: *mut c_void) -> c_int;

        pub fn uv_check_init(loop_: *mut Loop, handle: *mut c_void) -> c_int;
        pub fn uv_check_start(handle: *mut c_void, cb: Cb) -> c_int;
        pub fn uv_check_stop(handle: *mut c_void) -> c_int;

        pub fn uv_idle_init(loop_: *mut Loop, handle: *mut c_void) -> c_int;
        pub fn uv_idle_start(handle: *mut c_void, cb: Cb) -> c_int;
        pub fn uv_idle_stop(handle: *mut c_void) -> c_int;

        pub fn uv_async_init(loop_: *mut Loop, handle: *mut c_void, cb: Cb) -> c_int;
        pub fn uv_async_send(handle: *mut c_void) -> c_int;
    }
}

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

/// One libuv handle of any kind, owned: made with one of the constructors
/// below, closed (and its memory freed by libuv's close callback) when
/// dropped, or by [`Handle::close_in`] as part of a group that says when the
/// last of its handles is closed. `data` is a pointer the callbacks find the
/// owner by.
pub struct Handle {
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
    // slot holds the `Closing` box `close_raw` put there, and `raw` is the
    // allocation `Handle::new` made with that size.
    let closing = unsafe { Box::from_raw(ffi::uv_handle_get_data(raw).cast::<Closing>()) };
    // SAFETY: as above.
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
    /// A zeroed allocation for a handle of `kind`, initialised by `init`.
    ///
    /// # Safety
    /// `init` is the matching `uv_*_init` on this thread's live loop.
    unsafe fn new(kind: c_int, init: impl FnOnce(*mut c_void) -> c_int) -> Option<Handle> {
        // SAFETY: uv_handle_size is a pure lookup.
        let size = unsafe { ffi::uv_handle_size(kind) };
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout(size)) }.cast::<c_void>();
        if raw.is_null() {
            return None;
        }
        if init(raw) != 0 {
            // SAFETY: libuv failed to init it, so it does not know it: ours to free.
            unsafe { std::alloc::dealloc(raw.cast(), layout(size)) };
            return None;
        }
        Some(Handle { raw, size })
    }

    pub fn set_data(&self, data: *mut c_void) {
        // SAFETY: `raw` is a live, initialised handle.
        unsafe { ffi::uv_handle_set_data(self.raw, data) }
    }

    /// Whether it keeps the loop alive while active.
    pub fn set_ref(&self, keep_alive: bool) {
        // SAFETY: `raw` is a live, initialised handle.
        unsafe {
            if keep_alive {
                ffi::uv_ref(self.raw)
            } else {
                ffi::uv_unref(self.raw)
            }
        }
    }

    /// Close it as one of `group`.
    pub fn close_in(self, group: &Rc<CloseGroup>) {
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

/// The owner pointer a callback's handle carries.
///
/// # Safety
/// `raw` is a live handle whose data was set with [`Handle::set_data`].
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

/// A socket watcher.
///
/// # Safety (for the constructors below)
/// `loop_` is this thread's live loop.
pub unsafe fn poll(loop_: *mut Loop, fd: c_int) -> Option<Handle> {
    // SAFETY: as the caller promises; the handle memory is zeroed and sized by libuv.
    unsafe { Handle::new(UV_POLL, |h| ffi::uv_poll_init_socket(loop_, h, fd)) }
}

/// # Safety
/// See [`poll`].
pub unsafe fn timer(loop_: *mut Loop) -> Option<Handle> {
    // SAFETY: as the caller promises.
    unsafe { Handle::new(UV_TIMER, |h| ffi::uv_timer_init(loop_, h)) }
}

/// # Safety
/// See [`poll`].
pub unsafe fn check(loop_: *mut Loop) -> Option<Handle> {
    // SAFETY: as the caller promises.
    unsafe { Handle::new(UV_CHECK, |h| ffi::uv_check_init(loop_, h)) }
}

/// # Safety
/// See [`poll`].
pub unsafe fn idle(loop_: *mut Loop) -> Option<Handle> {
    // SAFETY: as the caller promises.
    unsafe { Handle::new(UV_IDLE, |h| ffi::uv_idle_init(loop_, h)) }
}

impl Handle {
    /// Watch the socket for `events`.
    pub fn poll_start(&self, events: c_int, cb: PollCb) -> c_int {
        // SAFETY: a live poll handle.
        unsafe { ffi::uv_poll_start(self.raw, events, cb) }
    }

    /// Call `cb` once, `ms` from now (restarting the timer if it runs).
    pub fn timer_start(&self, cb: Cb, ms: u64) {
        // SAFETY: a live timer handle.
        unsafe { ffi::uv_timer_start(self.raw, cb, ms, 0) };
    }

    pub fn timer_stop(&self) {
        // SAFETY: a live timer handle.
        unsafe { ffi::uv_timer_stop(self.raw) };
    }

    pub fn check_start(&self, cb: Cb) {
        // SAFETY: a live check handle.
        unsafe { ffi::uv_check_start(self.raw, cb) };
    }

    pub fn check_stop(&self) {
        // SAFETY: a live check handle.
        unsafe { ffi::uv_check_stop(self.raw) };
    }

    pub fn idle_start(&self, cb: Cb) {
        // SAFETY: a live idle handle.
        unsafe { ffi::uv_idle_start(self.raw, cb) };
    }

    pub fn idle_stop(&self) {
        // SAFETY: a live idle handle.
        unsafe { ffi::uv_idle_stop(self.raw) };
    }
}

/// An async handle other threads wake the loop through. The pointer is
/// nulled under the lock before the handle is closed, so a late `send` from
/// another thread never reaches a closed handle.
#[derive(Clone)]
pub struct AsyncSlot(Arc<Mutex<SendPtr>>);

struct SendPtr(*mut c_void);
// SAFETY: the pointer is only used under the mutex, and uv_async_send may be
// called from any thread while the handle is open.
unsafe impl Send for SendPtr {}

impl AsyncSlot {
    /// # Safety
    /// `loop_` is this thread's live loop. [`AsyncSlot::disarm`] must be
    /// called before the returned handle is closed.
    pub unsafe fn new(loop_: *mut Loop, cb: Cb) -> Option<(AsyncSlot, Handle)> {
        // SAFETY: as the caller promises.
        let handle = unsafe { Handle::new(UV_ASYNC, |h| ffi::uv_async_init(loop_, h, cb)) }?;
        Some((AsyncSlot(Arc::new(Mutex::new(SendPtr(handle.raw)))), handle))
    }

    /// Wake the loop: its callback runs there soon. From any thread; a no-op
    /// once closed.
    pub fn send(&self) {
        if let Ok(slot) = self.0.lock() {
            if !slot.0.is_null() {
                // SAFETY: open (not nulled), and uv_async_send is thread-safe.
                unsafe { ffi::uv_async_send(slot.0) };
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
