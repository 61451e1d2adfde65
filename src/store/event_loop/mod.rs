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
//! Read in this order: this file (the protocol seam, and the store's side
//! of a set of connections), [`due`] (what a connection hands back: answers
//! due to JS, a connection to open), [`conn`] (one connection's state:
//! requests waiting, what happens when the socket answers, breaks or is too
//! slow, or a request is one the server would not read),
//! [`socket`] (bytes in and out, plain or TLS), [`callbacks`] (the libuv
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
#[cfg(test)]
pub mod tests;
pub mod uv;

use std::ffi::CStr;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::thread::{self, ThreadId};

use bytes::BytesMut;

pub use self::due::Reply;
use self::engine::Engine;
use self::host::MakeHost;
pub use self::opening::{connect_tcp, start_tls, Refusals};
use super::{route, BackendError, Code, Done, LocalOp, Op, StoreError};

/// A connected, greeted socket, in non-blocking mode, ready for the event
/// loop, with what its protocol made of it as it opened (`P`, its
/// [`Wire::Prepared`]).
pub struct Opened<P> {
    pub tcp: std::net::TcpStream,
    pub tls: Option<rustls::ClientConnection>,
    /// The server process serving the connection, when the server names it:
    /// what [`Wire::fence`] ends.
    pub server_process: Option<i32>,
    /// What the connection prepared as it opened (told to the session:
    /// [`Wire::begin`]).
    pub prepared: P,
}

/// A connection opening on Tokio: the socket ready for the loop, or why not.
pub type Opening<P> = Pin<Box<dyn Future<Output = Result<Opened<P>, Failure>> + Send>>;

/// Why a connection could not be opened: a store error code and what
/// happened (each waiting request's error prefixes its own operation).
/// Not a [`BackendError`]: it belongs to no operation yet, so its text has no
/// `Store.operation:` prefix, and it is cloned into the error of every
/// request that waited for the connection ([`error`] makes each one).
#[derive(Debug, Clone)]
pub struct Failure {
    pub code: Code,
    pub text: String,
}

impl Failure {
    /// `code`, said as "`verb` `server`: `detail`" (the server as error
    /// messages name it).
    pub fn at(code: Code, verb: &str, server: &str, detail: &str) -> Failure {
        Failure {
            code,
            text: format!("{verb} {server}: {detail}"),
        }
    }

    /// The connection to `server` broke with `e`.
    pub fn lost(server: &str, e: &std::io::Error) -> Failure {
        Failure::at(
            Code::StoreConnection,
            "lost the connection to",
            server,
            &e.to_string(),
        )
    }
}

/// What a connection does with an answer, as its protocol sees it.
pub enum Verdict {
    /// The request's answer: hand it over.
    Deliver,
    /// The server wants the request again on this connection (a script it
    /// did not know): written again, answered later.
    SendAgain,
    /// The connection is going away under the request (the server is
    /// shutting down): sent again on a fresh one, like every request on it.
    Broken(String),
}

/// A server protocol, as the event-loop connection needs to know it.
pub trait Wire: Sized + 'static {
    /// Where to connect, and how; made once per store.
    type Target: Send + Sync + 'static;
    /// A request, kept as what it is so it can be sent again.
    type Request;
    /// One request's answer.
    type Answer;
    /// A connection's own state (a half-read answer, scripts it has loaded):
    /// fresh for every connection.
    type Session: Default;
    /// What a connection prepares as it opens, for its session to use
    /// ([`Wire::begin`]): statements under names or numbers, or nothing.
    type Prepared: Send + 'static;

    /// The store's class, which starts every error message.
    const STORE: &'static str;
    /// The async resource name its callbacks into JS run under.
    const RESOURCE: &'static CStr;
    /// How many times a request that found its connection dead is sent again.
    const RESENDS: u32;
    /// Whether the server runs a request it has read even when the client
    /// is gone before the answers ahead of it are written. A server that
    /// drops a connection whose answer it cannot write never runs what
    /// follows in its socket: there a request counts as sent
    /// ([`Local::sent`]) only once nothing ahead of it on its connection
    /// awaits an answer.
    const RUNS_WHAT_IT_READ: bool = true;

    fn connect_timeout_ms(target: &Self::Target) -> u64;
    /// The server as error messages name it (no password).
    fn display(target: &Self::Target) -> &str;
    /// The store operation a request serves, for error messages.
    fn name(request: &Self::Request) -> &'static str;
    /// A new connection's session starts; `prepared` as it opened ([`Opened`]).
    fn begin(_session: &mut Self::Session, _target: &Arc<Self::Target>, _prepared: Self::Prepared) {
    }
    /// Append the request's bytes to `out`; or, for a request the server
    /// would not take (larger than it reads: it would drop the connection,
    /// and everything in flight on it), append nothing and say why: that
    /// request fails alone, and the connection's other work goes on.
    fn encode(
        session: &mut Self::Session,
        request: &Self::Request,
        out: &mut Vec<u8>,
    ) -> Result<(), Failure>;
    /// The next whole answer in `inbound`, if it has arrived; `Err` when
    /// the bytes are not this protocol (what the server sent instead).
    fn decode(
        session: &mut Self::Session,
        inbound: &mut BytesMut,
    ) -> Result<Option<Self::Answer>, String>;
    /// What to do with `answer` to `request`.
    fn verdict(
        session: &mut Self::Session,
        request: &Self::Request,
        answer: &Self::Answer,
    ) -> Verdict;
    /// When a connection is given up while the server may still run what was
    /// sent on it (it went silent: the server may be stalled, not gone; or
    /// it broke with requests unanswered, perhaps reset on the way), a
    /// request to send first on the next connection that ends the old one's
    /// session on the server (`server_process`, which served `local_port`),
    /// waiting up to `wait_ms` for it to end, so nothing that waited there can
    /// run after what is sent next (a give-back overtaken by its acquire).
    /// Nobody waits for its answer; it only keeps its place. None: the
    /// protocol has no such thing.
    fn fence(
        _target: &Self::Target,
        _server_process: i32,
        _local_port: u16,
        _wait_ms: u64,
    ) -> Option<Self::Request> {
        None
    }
    /// Open and greet a connection (on Tokio), within the connect timeout.
    fn open(target: Arc<Self::Target>) -> Opening<Self::Prepared>;
}

/// The error `<Store>.<operation>` fails with.
pub fn error<W: Wire>(code: Code, name: &str, text: &str) -> StoreError {
    StoreError::Backend(BackendError {
        code,
        message: format!("{}.{name}: {text}", W::STORE),
    })
}

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
    engines: Vec<Rc<Engine<W>>>,
}

// SAFETY: `local` is only touched on `thread` (checked in `local`); off it,
// `Direct` is an inert value, and dropping it there leaks it instead of
// touching the Rcs (see `Drop`).
unsafe impl<W: Wire> Send for Direct<W> {}
// SAFETY: as for Send.
unsafe impl<W: Wire> Sync for Direct<W> {}

impl<W: Wire> Direct<W> {
    /// `connections` connections to `target`, each on the loop of a host
    /// `make_host` makes (each opened on first use); on the thread of that loop.
    pub fn new(
        make_host: MakeHost<'_>,
        target: W::Target,
        connections: usize,
        command_timeout_ms: u64,
    ) -> Result<Direct<W>, String> {
        let target = Arc::new(target);
        let engines = (0..connections.max(1))
            .map(|_| {
                callbacks::engine(
                    make_host(W::RESOURCE)?,
                    Arc::clone(&target),
                    command_timeout_ms,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Direct {
            thread: thread::current().id(),
            local: ManuallyDrop::new(Local(Rc::new(Connections { target, engines }))),
        })
    }

    /// The connections, if this is the thread they belong to.
    pub fn local(&self) -> Option<Local<W>> {
        (thread::current().id() == self.thread).then(|| Local(Rc::clone(&self.local.0)))
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
        W::display(&self.0.target)
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
