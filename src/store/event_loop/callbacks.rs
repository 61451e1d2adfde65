//! The libuv callbacks: each finds its engine through its handle's data
//! and holds it for the call.

use std::ffi::c_void;
use std::rc::Rc;

use napi::sys;

use super::conn::Next;
use super::engine::{deliver, Engine};
use super::uv;
use super::Wire;

/// The engine a handle belongs to, held for the callback.
///
/// # Safety
/// `handle` is a live handle of an engine (its data set to `Rc::as_ptr`),
/// which is alive: handles are closed before the last reference goes.
unsafe fn engine_of<W: Wire>(handle: *mut c_void) -> Rc<Engine<W>> {
    // SAFETY: as the caller promises.
    unsafe {
        let ptr = uv::data_of(handle) as *const Engine<W>;
        Rc::increment_strong_count(ptr);
        Rc::from_raw(ptr)
    }
}

pub(super) unsafe extern "C" fn on_poll<W: Wire>(handle: *mut c_void, status: i32, events: i32) {
    // SAFETY: libuv calls this with our live poll handle.
    let engine = unsafe { engine_of::<W>(handle) };
    let next = if status < 0 {
        engine
            .conn
            .borrow_mut()
            .broke("the socket reported an error")
    } else if events & uv::READABLE != 0 {
        engine.conn.borrow_mut().read()
    } else {
        Next::default()
    };
    // Replies first: their continuations make the next commands, which are
    // then written together, here.
    engine.in_poll.set(true);
    engine.follow(next, true);
    engine.in_poll.set(false);
    engine.write_now();
}

pub(super) unsafe extern "C" fn on_check<W: Wire>(handle: *mut c_void) {
    // SAFETY: libuv calls this with our live check handle.
    let engine = unsafe { engine_of::<W>(handle) };
    if let Some(handles) = engine.handles.borrow().as_ref() {
        handles.check.check_stop();
        handles.idle.idle_stop();
    }
    engine.flush_armed.set(false);
    engine.write_now();
}

pub(super) unsafe extern "C" fn on_idle(_handle: *mut c_void) {}

pub(super) unsafe extern "C" fn on_timer<W: Wire>(handle: *mut c_void) {
    // SAFETY: libuv calls this with our live timer handle.
    let engine = unsafe { engine_of::<W>(handle) };
    engine.timer_at.set(None);
    let next = engine.conn.borrow_mut().expire(engine.now());
    engine.follow(next, true);
}

pub(super) unsafe extern "C" fn on_wake<W: Wire>(handle: *mut c_void) {
    // SAFETY: libuv calls this with our live async handle.
    let engine = unsafe { engine_of::<W>(handle) };
    let opened = engine.opened.lock().ok().and_then(|mut slot| slot.take());
    if let Some(opened) = opened {
        engine.install(opened);
    }
}

pub(super) unsafe extern "C" fn on_collected<W: Wire>(handle: *mut c_void) {
    // SAFETY: libuv calls this with our live check handle.
    let engine = unsafe { engine_of::<W>(handle) };
    let due = engine.conn.borrow_mut().close();
    engine.in_callback_scope(|| deliver(due));
    engine.shut();
}

/// The environment is going away (a worker thread ending, the process
/// exiting): close everything; waiting commands are dropped with it.
pub(super) unsafe extern "C" fn on_env_exit<W: Wire>(
    _hook: sys::napi_async_cleanup_hook_handle,
    data: *mut c_void,
) {
    // SAFETY: `data` is the engine the hook was added for; the hook is removed
    // before the engine is dropped, so it is alive.
    let engine = unsafe {
        let ptr = data as *const Engine<W>;
        Rc::increment_strong_count(ptr);
        Rc::from_raw(ptr)
    };
    drop(engine.conn.borrow_mut().close());
    engine.shut();
}
