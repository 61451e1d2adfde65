//! A Redis connection driven by the JS thread's own event loop: no thread
//! hop per command.
//!
//! Commands are written, and replies read, in libuv callbacks on the loop
//! Node already runs (`uv_poll` on the socket, as zeromq.js does), and each
//! reply settles its promise right there. What one turn of the loop
//! produced goes out in one write: the commands a batch of replies set off
//! (their promises' continuations run before the poll callback returns) are
//! written at its end, and commands made anywhere else are written by a
//! check handle at the end of the same loop iteration. Opening a connection
//! (DNS, TCP, TLS handshake, `AUTH`/`SELECT`) waits on the network, so it
//! runs on Tokio and hands the socket over ([`connect`]).
//!
//! Read in this order: [`conn`] (the state: commands waiting, what happens
//! when the socket answers, breaks or is too slow), [`socket`] (bytes in
//! and out, plain or TLS), [`request`] (a command kept so it can be sent
//! again), [`connect`], and this file (the callbacks, and delivering
//! outcomes to JS inside a callback scope, so promise continuations run).
//!
//! Lifetime: the handles are closed by `close()`, by the store being
//! collected, or by the environment's async cleanup hook (a worker thread
//! ending), whichever comes first; an idle connection keeps nothing alive.

mod callbacks;
mod conn;
pub mod connect;
mod engine;
mod request;
mod socket;

use std::mem::ManuallyDrop;
use std::rc::Rc;
use std::thread::{self, ThreadId};

use napi::sys;
use redis::Value;

use self::callbacks::{on_collected, on_idle};
use self::conn::Reply;
use self::connect::Target;
use self::engine::{deliver, Engine};
pub use self::request::{scripts, Request};
use crate::store::redis::errors::server_error;
use crate::store::{BackendError, Done, LocalOp, Op, StoreError};

/// The store's side: usable from any thread's point of view (the store
/// is), acted on only on the thread whose loop drives it.
pub struct Direct {
    thread: ThreadId,
    engine: ManuallyDrop<Rc<Engine>>,
}

// SAFETY: `engine` is only touched on `thread` (checked in `on_thread`); off
// it, `Direct` is an inert value, and dropping it there leaks it instead of
// touching the Rc (see `Drop`).
unsafe impl Send for Direct {}
// SAFETY: as for Send.
unsafe impl Sync for Direct {}

impl Direct {
    /// A connection to `target` on `env`'s loop (opened on first use).
    pub fn new(
        env: sys::napi_env,
        target: Target,
        command_timeout_ms: u64,
    ) -> Result<Direct, String> {
        Ok(Direct {
            thread: thread::current().id(),
            engine: ManuallyDrop::new(Engine::new(env, target, command_timeout_ms)?),
        })
    }

    fn on_thread(&self) -> Option<&Rc<Engine>> {
        (thread::current().id() == self.thread).then_some(&*self.engine)
    }

    /// Send `request`; its reply becomes the operation's answer through `read`.
    pub fn send<T: 'static>(
        &self,
        request: Request,
        read: impl FnOnce(Value) -> Result<T, &'static str> + 'static,
    ) -> Op<T> {
        let Some(engine) = self.on_thread() else {
            return Op::Ready(Err(StoreError::Backend(BackendError {
                code: "ERR_LOCK_STORE_REDIS",
                message: format!(
                    "RedisLockStore.{}: used from a thread other than the one it was made on",
                    request.name
                ),
            })));
        };
        let engine = Rc::clone(engine);
        Op::Local(LocalOp::new(move |done: Done<T>| {
            let name = request.name;
            let display = engine.conn.borrow().target.display.clone();
            let reply: Reply = Box::new(move |outcome| {
                done(outcome.and_then(|value| match value {
                    Value::ServerError(e) => Err(server_error(name, &display, &e)),
                    value => read(value).map_err(|what| {
                        StoreError::Backend(BackendError {
                            code: "ERR_LOCK_STORE_REDIS",
                            message: format!("RedisLockStore.{name}: {display} answered {what}"),
                        })
                    }),
                }))
            });
            engine.submit(request, reply);
        }))
    }

    /// Close the connection; commands waiting fail as closed, later ones too.
    pub fn close(&self) {
        if let Some(engine) = self.on_thread() {
            let due = engine.conn.borrow_mut().close();
            deliver(due);
            engine.shut();
        }
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        if thread::current().id() != self.thread {
            // Not ours to touch from here: leaked, not raced.
            return;
        }
        // SAFETY: taken once, here, and `self.engine` is not used after.
        let engine = unsafe { ManuallyDrop::take(&mut self.engine) };
        // The store was collected: close at the end of this loop iteration,
        // in a callback where waiting commands can be failed into JS.
        let open = match engine.handles.borrow().as_ref() {
            Some(handles) => {
                handles.check.check_start(on_collected);
                handles.idle.idle_start(on_idle);
                true
            }
            None => false,
        };
        if open {
            *engine.keep.borrow_mut() = Some(Rc::clone(&engine));
        }
    }
}
