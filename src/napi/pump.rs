//! Settling the promises of Tokio-driven operations on the JS thread, in
//! batches, through one threadsafe function per store.
//!
//! napi-rs's `spawn_future_with_callback` makes a threadsafe function (and so
//! a libuv async handle) for every promise, opened and closed on the JS
//! thread: a few microseconds per server command, paid on the one thread every
//! lock shares. Here a store keeps one. A finished operation queues its result
//! and signals only when the queue was empty; the JS thread then settles every
//! queued promise in one turn. The threadsafe function is referenced (keeps
//! the event loop alive) only while some operation is in flight, as a pending
//! promise must; an idle store lets the process exit.
//!
//! Teardown: when a worker's environment goes away, Node finalizes the
//! threadsafe function; later completions find it closing and are dropped,
//! with their promises (which nobody can observe any more).

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::*;
use napi::sys;

use super::errors::new_error;
use crate::error::Code;

/// Turns an operation's outcome into the JS value that resolves (Ok) or
/// rejects (Err) its promise. Runs on the JS thread.
pub type Settle = Box<dyn FnOnce(&Env) -> std::result::Result<sys::napi_value, Error> + Send>;

struct Done {
    deferred: Deferred,
    settle: Settle,
}

struct Deferred(sys::napi_deferred);
// SAFETY: a napi_deferred is only used on the JS thread (in `drain`); it
// merely travels through Tokio.
unsafe impl Send for Deferred {}

/// What the threadsafe function's callback reaches through its context.
struct Queue {
    state: Mutex<State>,
    /// Operations started and not yet settled (JS thread only).
    in_flight: AtomicUsize,
}

struct State {
    done: Vec<Done>,
    /// Null once Node has finalized it (or we released it): it must never be
    /// called after that, so it is read and called under this lock, and
    /// nulled under it too.
    tsfn: Tsfn,
    /// The store is gone: release the function once nothing is in flight.
    orphaned: bool,
}

struct Tsfn(sys::napi_threadsafe_function);
// SAFETY: napi_call_threadsafe_function may be called from any thread; the
// other calls on it happen on the JS thread, under the state lock.
unsafe impl Send for Tsfn {}

pub struct Pump {
    queue: Arc<Queue>,
}

impl Pump {
    /// Made on the JS thread of the environment whose promises it settles.
    pub fn new(env: &Env) -> Result<Self> {
        let queue = Arc::new(Queue {
            state: Mutex::new(State {
                done: Vec::new(),
                tsfn: Tsfn(ptr::null_mut()),
                orphaned: false,
            }),
            in_flight: AtomicUsize::new(0),
        });
        let context = Arc::into_raw(Arc::clone(&queue)) as *mut c_void;
        let mut name = ptr::null_mut();
        let mut tsfn = ptr::null_mut();
        // SAFETY: on the JS thread with its live env; `context` is an owned
        // reference to the queue that Node hands back to `drain` and, once,
        // to `finalize` (which takes it back).
        let created = unsafe {
            sys::napi_create_string_utf8(env.raw(), c"keel-lock:settle".as_ptr(), 16, &mut name)
                == sys::Status::napi_ok
                && sys::napi_create_threadsafe_function(
                    env.raw(),
                    ptr::null_mut(),
                    ptr::null_mut(),
                    name,
                    0,
                    1,
                    context,
                    Some(finalize),
                    context,
                    Some(drain),
                    &mut tsfn,
                ) == sys::Status::napi_ok
        };
        if !created {
            // The context's reference goes with the function that never was.
            // SAFETY: no function was made, so nothing else will take this reference.
            drop(unsafe { Arc::from_raw(context as *const Queue) });
            return Err(Error::new(
                Status::GenericFailure,
                "could not make the threadsafe function that settles promises",
            ));
        }
        // Idle until an operation is in flight.
        // SAFETY: `tsfn` was just made on this thread with this env.
        unsafe { sys::napi_unref_threadsafe_function(env.raw(), tsfn) };
        if let Ok(mut state) = queue.state.lock() {
            state.tsfn = Tsfn(tsfn);
        }
        Ok(Pump { queue })
    }

    fn tsfn(&self) -> sys::napi_threadsafe_function {
        self.queue
            .state
            .lock()
            .map_or(ptr::null_mut(), |state| state.tsfn.0)
    }

    /// A promise settled by what `future` yields, through this pump. Call on the JS thread.
    pub fn promise<F>(&self, env: &Env, future: F) -> Result<sys::napi_value>
    where
        F: std::future::Future<Output = Settle> + Send + 'static,
    {
        let tsfn = self.tsfn();
        if tsfn.is_null() {
            return Err(Error::new(
                Status::Closing,
                "the environment is shutting down",
            ));
        }
        let mut deferred = ptr::null_mut();
        let mut promise = ptr::null_mut();
        // SAFETY: on the JS thread, with its live env.
        check_status!(unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) })?;
        let mut task = Task {
            queue: Arc::clone(&self.queue),
            deferred: Some(Deferred(deferred)),
        };
        napi::bindgen_prelude::spawn(async move {
            let settle = future.await;
            task.finish(settle);
        });
        // Counted once it is surely running (spawn may panic, and a panic is
        // turned into a JS error): `drain` cannot run meanwhile, as this is
        // the JS thread.
        if self.queue.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            // SAFETY: `tsfn` is not null (checked above) and not finalized:
            // finalizing happens on this thread, so not during this call.
            unsafe { sys::napi_ref_threadsafe_function(env.raw(), tsfn) };
        }
        Ok(promise)
    }
}

impl Drop for Pump {
    /// The store is gone (its handle was collected): let the threadsafe
    /// function go now, or once the operations still in flight are settled.
    fn drop(&mut self) {
        let Ok(mut state) = self.queue.state.lock() else {
            return;
        };
        state.orphaned = true;
        if self.queue.in_flight.load(Ordering::Acquire) == 0 {
            release(&mut state);
        }
    }
}

/// Under the state lock: hand the threadsafe function back to Node (which
/// then finalizes it), and never touch it again.
fn release(state: &mut State) {
    if !state.tsfn.0.is_null() {
        // SAFETY: not null, so not finalized yet (finalize nulls it under the
        // lock we hold); released once, as it is nulled right after.
        unsafe {
            sys::napi_release_threadsafe_function(
                state.tsfn.0,
                sys::ThreadsafeFunctionReleaseMode::release,
            )
        };
        state.tsfn = Tsfn(ptr::null_mut());
    }
}

/// One operation's way back: it settles its promise, even if its future is
/// dropped without finishing (a panic while dropping it, a runtime shutting
/// down), so the promise is never left pending and the count never stuck.
struct Task {
    queue: Arc<Queue>,
    deferred: Option<Deferred>,
}

impl Task {
    fn finish(&mut self, settle: Settle) {
        if let Some(deferred) = self.deferred.take() {
            self.queue.complete(Done { deferred, settle });
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.finish(Box::new(|env| {
            Err(new_error(
                env,
                false,
                Some(Code::Internal),
                "a lock store operation was abandoned before it finished",
            ))
        }));
    }
}

impl Queue {
    /// From any thread: queue a finished operation; wake the JS thread if it
    /// is not already due to drain the queue.
    fn complete(&self, done: Done) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if state.tsfn.0.is_null() {
            return; // the environment is gone, and so is whoever awaited this
        }
        state.done.push(done);
        if state.done.len() == 1 {
            // Fails only while the environment is being torn down.
            // SAFETY: not null under the state lock, so Node has not
            // finalized it; calling it is allowed from any thread.
            unsafe {
                sys::napi_call_threadsafe_function(
                    state.tsfn.0,
                    ptr::null_mut(),
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            };
        }
    }
}

/// On the JS thread: settle everything queued.
unsafe extern "C" fn drain(
    env: sys::napi_env, _js_callback: sys::napi_value, context: *mut c_void, _data: *mut c_void,
) {
    // Null while the environment is torn down: nothing can be settled then.
    if env.is_null() || context.is_null() {
        return;
    }
    // (Checked first: after `finalize`, Node calls this with a null env and
    // a context that may be gone.)
    // SAFETY: `context` is the queue reference the function was made with,
    // alive until `finalize`, which Node runs after the last `drain`.
    let queue = unsafe { &*(context as *const Queue) };
    let (batch, tsfn) = match queue.state.lock() {
        Ok(mut state) => (std::mem::take(&mut state.done), state.tsfn.0),
        Err(_) => return,
    };
    let settled = batch.len();
    let env_ref = Env::from_raw(env);
    for Done { deferred, settle } in batch {
        // A panic here must not unwind into Node.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| settle(&env_ref)));
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(_) => Err(new_error(
                &env_ref,
                false,
                Some(Code::Internal),
                "internal error while settling a lock store operation",
            )),
        };
        // SAFETY: on the JS thread with its live env; each deferred is settled once.
        unsafe { settle_deferred(env, deferred.0, outcome) };
    }
    if settled > 0 && queue.in_flight.fetch_sub(settled, Ordering::AcqRel) == settled {
        // SAFETY: Node is calling us through `tsfn`, so it is alive, and this is its thread.
        unsafe { sys::napi_unref_threadsafe_function(env, tsfn) };
        if let Ok(mut state) = queue.state.lock() {
            if state.orphaned {
                release(&mut state);
            }
        }
    }
}

/// Resolve or reject one promise. An exception left pending by making the
/// value would make napi refuse: it is cleared and the promise rejected with
/// it, so no promise is stranded.
pub(super) unsafe fn settle_deferred(
    env: sys::napi_env, deferred: sys::napi_deferred,
    outcome: std::result::Result<sys::napi_value, Error>,
) {
    // SAFETY: the caller's contract: the JS thread's live env and an unsettled deferred.
    let status = unsafe {
        match outcome {
            Ok(value) => sys::napi_resolve_deferred(env, deferred, value),
            Err(error) => {
                let value = JsError::from(error).into_value(env);
                if value.is_null() {
                    sys::Status::napi_generic_failure
                } else {
                    sys::napi_reject_deferred(env, deferred, value)
                }
            }
        }
    };
    if status == sys::Status::napi_ok {
        return;
    }
    let mut reason = ptr::null_mut();
    let mut pending = false;
    // SAFETY: as above; the deferred is still unsettled, as the first try failed.
    unsafe {
        sys::napi_is_exception_pending(env, &mut pending);
        if pending {
            sys::napi_get_and_clear_last_exception(env, &mut reason);
        }
        if reason.is_null() {
            let mut message = ptr::null_mut();
            let text = c"a lock store operation's result could not be delivered";
            sys::napi_create_string_utf8(
                env,
                text.as_ptr(),
                text.count_bytes() as isize,
                &mut message,
            );
            sys::napi_create_error(env, ptr::null_mut(), message, &mut reason);
        }
        sys::napi_reject_deferred(env, deferred, reason);
    }
}

/// Node is finalizing the threadsafe function: no call may reach it after
/// this, and the queue it kept is let go.
unsafe extern "C" fn finalize(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is the reference `Pump::new` gave Node; finalize runs once.
    let queue = unsafe { Arc::from_raw(data as *const Queue) };
    let stale = match queue.state.lock() {
        Ok(mut state) => {
            state.tsfn = Tsfn(ptr::null_mut());
            std::mem::take(&mut state.done)
        }
        Err(_) => Vec::new(),
    };
    drop(stale);
    drop(queue);
}
