//! A server connection driven by the JS thread's own event loop: no thread
//! hop per command. A store that rides it says how its requests are written
//! and its answers read ([`Wire`]).
//!
//! Requests are written, and answers read, in libuv callbacks on the loop
//! Node already runs (`uv_poll` on the socket, as zeromq.js does), and each
//! answer settles its promise right there. What one turn of the loop
//! produced goes out in one write: the requests a batch of answers set off
//! (their promises' continuations run before the poll callback returns) are
//! written at its end, and requests made anywhere else are written by a
//! check handle at the end of the same loop iteration. Opening a connection
//! (DNS, TCP, TLS handshake, logging in) waits on the network, so it runs
//! on Tokio and hands the socket over ([`Wire::open`]).
//!
//! Read in this order: [`wire`] (the protocol seam), this file (the store's
//! side of a set of connections), [`due`] (what a connection hands back: answers
//! due to JS, a connection to open), [`conn`] (one connection's state:
//! requests waiting, what happens when the socket answers, breaks or is too
//! slow, or a request is one the server would not read),
//! [`stream`] (TCP or a unix socket), [`socket`] (bytes in and out, plain
//! or TLS), [`callbacks`] (the libuv
//! callbacks, and an engine made with its handles), [`engine`] (what the
//! callbacks drive: writing at the end of a turn, the timer, delivering
//! outcomes to JS inside a callback scope, so promise continuations run),
//! [`uv`] (the typed libuv handles), [`host`] (what a connection needs from
//! the runtime whose loop drives it: Node's, in the napi surface; the
//! tests', their own libuv loop).
//!
//! Lifetime: the handles are closed by `close()`, by the store being
//! collected, or by the environment's async cleanup hook (a worker thread
//! ending), whichever comes first; an idle connection keeps nothing alive.

mod callbacks;
mod conn;
mod due;
mod engine;
pub mod host;
mod opening;
mod socket;
mod stream;
#[cfg(test)]
pub mod tests;
pub mod uv;
mod wire;

use std::mem::ManuallyDrop;
use std::rc::Rc;
use std::sync::Arc;
use std::thread::{self, ThreadId};

pub use self::due::Reply;
use self::engine::Engine;
use self::host::MakeHost;
pub use self::opening::{connect_tcp, start_tls, Refusals};
pub use self::stream::Stream;
pub use self::wire::{error, Endpoint, Failure, Named, Opened, Opening, Verdict, Wire};
use super::{route, Done, LocalOp, Op, StoreResult};

/// The store's side: usable from any thread's point of view (the store
/// is), acted on only on the thread whose loop drives it.
pub struct Direct<W: Wire> {
    thread: ThreadId,
    local: ManuallyDrop<Local<W>>,
}

/// The connections, on their own thread: one or more. A request of a key
/// always goes to that key's connection, so one key's requests reach the
/// server in the order they were made (a connection answers in order); one
/// of no key to the connection with the fewest waiting.
pub struct Local<W: Wire>(Rc<Connections<W>>);

struct Connections<W: Wire> {
    target: Arc<W::Target>,
    endpoint: Rc<Endpoint>,
    engines: Vec<Rc<Engine<W>>>,
}

// SAFETY: `local` is only touched on `thread` (checked in `local`); off it,
// `Direct` is an inert value, and dropping it there leaks it instead of
// touching the Rcs (see `Drop`).
unsafe impl<W: Wire> Send for Direct<W> {}
// SAFETY: as for Send.
unsafe impl<W: Wire> Sync for Direct<W> {}

impl<W: Wire> Direct<W> {
    /// `connections` connections to `target` (the server `endpoint`), each
    /// on the loop of a host `make_host` makes (each opened on first use); on
    /// the thread of that loop.
    pub fn new(
        make_host: MakeHost<'_>, target: W::Target, endpoint: Endpoint, connections: usize,
    ) -> Result<Direct<W>, String> {
        let (target, endpoint) = (Arc::new(target), Rc::new(endpoint));
        let engines = (0..connections.max(1))
            .map(|_| {
                let host = make_host(W::RESOURCE)?;
                callbacks::engine(host, Arc::clone(&target), Rc::clone(&endpoint))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let connections = Connections {
            target,
            endpoint,
            engines,
        };
        Ok(Direct {
            thread: thread::current().id(),
            local: ManuallyDrop::new(Local(Rc::new(connections))),
        })
    }

    /// The connections, if this is the thread they belong to.
    pub fn local(&self) -> Option<Local<W>> {
        (thread::current().id() == self.thread).then(|| Local(Rc::clone(&self.local.0)))
    }

    /// An operation on the connections (`start`, given them and whom to
    /// tell), settled on this thread; or, off the thread they belong to, the
    /// error of the operation `name` used from another.
    pub fn operation<T: 'static>(
        &self, name: &str, start: impl FnOnce(Local<W>, Done<T>) + 'static,
    ) -> Op<T> {
        match self.local() {
            Some(local) => Op::Local(LocalOp::new(move |done| start(local, done))),
            None => Op::Ready(Err(error::<W>(
                W::CODE,
                name,
                "used from a thread other than the one it was made on",
            ))),
        }
    }

    /// [`Local::sent`] from any thread: at once off the connections' own
    /// thread (nothing of it is sent from there).
    pub fn sent(&self, key: &str) -> super::Op<()> {
        self.local()
            .map_or(super::Op::Ready(Ok(())), |local| local.sent(key))
    }

    /// Close the connections; requests waiting fail as closed, later ones too.
    pub fn close(&self) {
        if let Some(local) = self.local() {
            for engine in &local.0.engines {
                engine.close(false);
            }
        }
    }
}

impl<W: Wire> Clone for Local<W> {
    fn clone(&self) -> Self {
        Local(Rc::clone(&self.0))
    }
}

impl<W: Wire> Local<W> {
    /// Send `request` about `key` on the key's connection; `reply` is called
    /// with its answer (or why there is none), on this thread. Always the
    /// same connection for the same key: spread by the least loaded, a
    /// give-back sent after an acquire that timed out on a stalled
    /// connection would run first elsewhere, and the acquire after it would
    /// take the key for an owner nobody has.
    pub fn submit_keyed(&self, key: &str, request: W::Request, reply: Reply<W>) {
        let engines = &self.0.engines;
        if let Some(engine) = engines.get(route(key, engines.len())) {
            engine.submit(request, reply);
        }
    }

    /// Send `request`, which concerns no key, on the connection with the
    /// fewest waiting; `reply` as for [`Local::submit_keyed`].
    pub fn submit(&self, request: W::Request, reply: Reply<W>) {
        let engine = self
            .0
            .engines
            .iter()
            .min_by_key(|engine| engine.conn.borrow().live)
            .map(Rc::clone);
        if let Some(engine) = engine {
            engine.submit(request, reply);
        }
    }

    /// Send `request` on `key`'s connection (None: the one with the fewest
    /// waiting); `read` makes its answer the operation's outcome (given these
    /// connections: to name the server, or to send more), and `done` is
    /// told it, or why there is none, on this thread.
    pub fn request<T: 'static>(
        &self, key: Option<&str>, request: W::Request,
        read: impl FnOnce(&Local<W>, W::Answer) -> StoreResult<T> + 'static, done: Done<T>,
    ) {
        let connections = self.clone();
        let reply: Reply<W> =
            Box::new(move |outcome| done(outcome.and_then(|answer| read(&connections, answer))));
        match key {
            Some(key) => self.submit_keyed(key, request, reply),
            None => self.submit(request, reply),
        }
    }

    /// Settles once everything submitted so far on `key`'s connection is
    /// written to its socket (in the kernel's send buffer: it reaches the
    /// server even if the process exits next; on a server that drops what
    /// follows an answer it cannot write, also once nothing ahead of the
    /// last request awaits its answer: [`Wire::RUNS_WHAT_IT_READ`]), or
    /// never will be (the connection failed, which the requests' own
    /// replies report): at once when nothing waits to be written.
    pub fn sent(&self, key: &str) -> Op<()> {
        let engines = &self.0.engines;
        let Some(engine) = engines.get(route(key, engines.len())) else {
            return Op::Ready(Ok(()));
        };
        let mark = engine.conn.borrow().last_submitted();
        if !engine.conn.borrow().unsent(mark) {
            return Op::Ready(Ok(()));
        }
        let engine = Rc::clone(engine);
        Op::Local(LocalOp::new(move |done: Done<()>| {
            engine.when_sent(Box::new(move || done(Ok(()))));
        }))
    }

    /// Where the connections go, and how.
    pub fn target(&self) -> &W::Target {
        &self.0.target
    }

    /// The same, to keep (for connections of the store's own beside these).
    pub fn shared_target(&self) -> Arc<W::Target> {
        Arc::clone(&self.0.target)
    }

    /// The server as error messages name it.
    pub fn display(&self) -> &str {
        &self.0.endpoint.display
    }
}

impl<W: Wire> Drop for Direct<W> {
    fn drop(&mut self) {
        if thread::current().id() != self.thread {
            // Not ours to touch from here: leaked, not raced.
            return;
        }
        // SAFETY: taken once, here, and `self.local` is not used after.
        let local = unsafe { ManuallyDrop::take(&mut self.local) };
        for engine in &local.0.engines {
            engine.close_when_collected();
        }
    }
}
