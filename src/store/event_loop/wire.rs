//! The protocol seam: what a store that rides the event loop says of its
//! server's protocol ([`Wire`]: how a request is written and an answer read,
//! how a connection opens), and what an opening hands over ([`Opened`]) or
//! fails with ([`Failure`]).

use std::ffi::CStr;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;

use super::stream::Stream;
use crate::store::{BackendError, Code, StoreError};

/// A connected, greeted socket, in non-blocking mode, ready for the event
/// loop, with what its protocol made of it as it opened (`P`, its
/// [`Wire::Prepared`]).
pub struct Opened<P> {
    pub stream: Stream,
    pub tls: Option<rustls::ClientConnection>,
    /// The server process serving the connection, when the server names it:
    /// what [`Wire::fence`] ends.
    pub server_process: Option<i32>,
    /// What the connection prepared as it opened (told to the session:
    /// [`Wire::begin`]).
    pub prepared: P,
}

/// What opening a connection came to: the socket ready for the loop, or why not.
pub type Outcome<P> = Result<Opened<P>, Failure>;

/// The server a store's connections go to, as the event loop needs to know
/// it beyond its protocol: its name in error messages (no password), and how
/// long opening a connection and a command may take.
pub struct Endpoint {
    pub display: String,
    pub connect_timeout_ms: u64,
    pub command_timeout_ms: u64,
}

impl Endpoint {
    pub fn new(display: &str, connect_timeout: Duration, command_timeout: Duration) -> Endpoint {
        let ms = |bound: Duration| u64::try_from(bound.as_millis()).unwrap_or(u64::MAX);
        Endpoint {
            display: display.to_owned(),
            connect_timeout_ms: ms(connect_timeout),
            command_timeout_ms: ms(command_timeout),
        }
    }
}

/// A connection opening on Tokio.
pub type Opening<P> = Pin<Box<dyn Future<Output = Outcome<P>> + Send>>;

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

/// A request that says which store operation it serves (for error messages).
pub trait Named {
    fn name(&self) -> &'static str;
}

/// A server protocol, as the event-loop connection needs to know it.
pub trait Wire: Sized + 'static {
    /// Where to connect, and how; made once per store.
    type Target: Send + Sync + 'static;
    /// A request, kept as what it is so it can be sent again.
    type Request: Named;
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
    /// The code of this server's own errors (`ERR_LOCK_STORE_<NAME>`), also
    /// that of a store used from a thread other than its own.
    const CODE: Code;
    /// The async resource name its callbacks into JS run under.
    const RESOURCE: &'static CStr;
    /// How many times a request that found its connection dead is sent again.
    const RESENDS: u32;
    /// Whether the server runs a request it has read even when the client
    /// is gone before the answers ahead of it are written. A server that
    /// drops a connection whose answer it cannot write never runs what
    /// follows in its socket: there a request counts as sent
    /// ([`Local::sent`](super::Local::sent)) only once nothing ahead of it on its connection
    /// awaits an answer.
    const RUNS_WHAT_IT_READ: bool = true;

    /// A new connection's session starts; `prepared` as it opened ([`Opened`]).
    fn begin(_session: &mut Self::Session, _target: &Arc<Self::Target>, _prepared: Self::Prepared) {
    }
    /// Append the request's bytes to `out`; or, for a request the server
    /// would not take (larger than it reads: it would drop the connection,
    /// and everything in flight on it), append nothing and say why: that
    /// request fails alone, and the connection's other work goes on.
    fn encode(
        session: &mut Self::Session, request: &Self::Request, out: &mut Vec<u8>,
    ) -> Result<(), Failure>;
    /// The next whole answer in `inbound`, if it has arrived; `Err` when
    /// the bytes are not this protocol (what the server sent instead).
    fn decode(
        session: &mut Self::Session, inbound: &mut BytesMut,
    ) -> Result<Option<Self::Answer>, String>;
    /// What to do with `answer` to `request`.
    fn verdict(
        session: &mut Self::Session, request: &Self::Request, answer: &Self::Answer,
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
        _target: &Self::Target, _server_process: i32, _local_port: u16, _wait_ms: u64,
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
