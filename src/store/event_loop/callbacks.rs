//! The libuv callbacks, and the making of an engine with its handles, each
//! given its callback here: a callback finds its engine through its handle's
//! data and holds it for the call. This module sits above `engine`, which
//! never names a callback.

use std::ffi::c_void;
use std::rc::Rc;
use std::sync::Arc;

use super::due::Next;
use super::engine::{Engine, Handles};
use super::host::Host;
use super::uv;
use super::wire::{Endpoint, Wire};

/// A connection to `target` on `host`'s loop, with its handles (opened on
/// first use).
pub(super) fn engine<W: Wire>(
    host: Box<dyn Host>, target: Arc<W::Target>, endpoint: Rc<Endpoint>,
) -> Result<Rc<Engine<W>>, String> {
    let engine = Engine::<W>::new(host, target, endpoint, on_poll::<W>);
    let (loop_, data) = (engine.loop_, engine.data());
    // SAFETY: the host's loop is this thread's live loop; `data` is the
    // engine, which outlives its handles (they are closed before the last
    // reference goes: `Engine::keep`), and each callback reads it as one.
    let made = unsafe {
        (|| {
            let (wake_slot, wake) = uv::AsyncSlot::new(loop_, data, on_wake::<W>)?;
            Ok::<_, uv::UvError>(Handles {
                timer: uv::Timer::new(loop_, data, on_timer::<W>)?,
                check: uv::Check::new(loop_, data, on_check::<W>)?,
                idle: uv::Idle::new(loop_)?,
                wake,
                wake_slot,
            })
        })()
    };
    match made {
        Ok(handles) => {
            engine.set_handles(handles);
            Ok(engine)
        }
        Err(e) => Err(format!(
            "could not make the event-loop handles of the connection: {e}"
        )),
    }
}

/// The engine a handle belongs to, held for the callback.
///
/// # Safety
/// `handle` is a live handle of an engine (its data set to `Rc::as_ptr`),
/// which is alive: handles are closed before the last reference goes.
unsafe fn engine_of<W: Wire>(handle: *mut c_void) -> Rc<Engine<W>> {
    // SAFETY: as the caller promises: the pointer came from `Rc::as_ptr` of a
    // live `Rc<Engine<W>>`, so a strong count can be added and taken back.
    unsafe {
        let ptr = uv::data_of(handle) as *const Engine<W>;
        Rc::increment_strong_count(ptr);
        Rc::from_raw(ptr)
    }
}

/// How many replies are handed to JS before what they sent is written:
/// measured with 64 loops on the fastest server store (`bench/`, scenario 2), 16 to 48
/// keep both the server and this thread busy; 32 did best.
const ANSWERED_BEFORE_A_WRITE: usize = 32;

unsafe extern "C" fn on_poll<W: Wire>(handle: *mut c_void, status: i32, events: i32) {
    // SAFETY: libuv calls this with our live poll handle.
    let engine = unsafe { engine_of::<W>(handle) };
    let next = if status < 0 {
        let why = format!("the socket reported an error: {}", uv::UvError(status));
        engine.conn.borrow_mut().broke(&why)
    } else if events & uv::READABLE != 0 {
        engine.conn.borrow_mut().read()
    } else {
        Next::default()
    };
    // Replies first, a slice at a time: their continuations make the next
    // commands, which are written after each slice, so the server works
    // through them while this thread answers the rest (all answered before
    // one write, the two would take turns, each idle while the other works).
    let Next {
        mut connect,
        mut due,
    } = next;
    loop {
        let rest = due.split_off(due.len().min(ANSWERED_BEFORE_A_WRITE));
        engine.in_poll.set(true);
        engine.follow(Next { connect, due }, true);
        engine.in_poll.set(false);
        engine.write_now(true);
        if rest.is_empty() {
            break;
        }
        (connect, due) = (false, rest);
    }
}

unsafe extern "C" fn on_check<W: Wire>(handle: *mut c_void) {
    // SAFETY: libuv calls this with our live check handle.
    let engine = unsafe { engine_of::<W>(handle) };
    engine.stop_flush();
    if engine.collected.get() {
        engine.close(true);
    } else {
        engine.write_now(true);
    }
}

unsafe extern "C" fn on_timer<W: Wire>(handle: *mut c_void) {
    // SAFETY: libuv calls this with our live timer handle.
    let engine = unsafe { engine_of::<W>(handle) };
    engine.timer_at.set(None);
    let next = engine.conn.borrow_mut().expire(engine.now());
    engine.follow(next, true);
}

unsafe extern "C" fn on_wake<W: Wire>(handle: *mut c_void) {
    // SAFETY: libuv calls this with our live async handle.
    let engine = unsafe { engine_of::<W>(handle) };
    let opened = engine.opened.lock().ok().and_then(|mut slot| slot.take());
    if let Some(opened) = opened {
        engine.install(opened);
    }
}
