//! What every kind of handle shares: an owned libuv handle, sized by
//! libuv and freed in its close callback, closed alone or as one of a group;
//! libuv's error codes.

use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::fmt;
use std::rc::Rc;

use super::ffi;

/// `uv_handle_type` values (uv.h).
pub(super) const UV_ASYNC: c_int = 1;
pub(super) const UV_CHECK: c_int = 2;
pub(super) const UV_IDLE: c_int = 6;
pub(super) const UV_POLL: c_int = 8;
pub(super) const UV_TIMER: c_int = 13;

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
pub(super) fn checked(code: c_int) -> Result<(), UvError> {
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
pub(super) fn stopped(code: c_int) {
    debug_assert_eq!(code, 0, "a libuv stop function failed");
}

/// One libuv handle of any kind, owned: closed (and its memory freed by
/// libuv's close callback) when dropped, or by [`Handle::close_in`] as part
/// of a group that says when the last of its handles is closed. Only the
/// typed handles below hold one, so which libuv calls it takes is known.
pub(super) struct Handle {
    pub(super) raw: *mut c_void,
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
    pub(super) unsafe fn new(
        kind: c_int, data: *mut c_void, init: impl FnOnce(*mut c_void) -> c_int,
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

    pub(super) fn set_ref(&self, keep_alive: bool) {
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

    pub(super) fn close_in(self, group: &Rc<CloseGroup>) {
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

pub(super) use any_handle;
