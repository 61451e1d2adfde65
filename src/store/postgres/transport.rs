//! How statements reach the server, chosen once, as the store is made: on
//! connections the JS thread's event loop drives (`via_loop`: one server
//! over TCP), or on tokio-postgres's, on Tokio (`via_tokio`: a unix socket,
//! or a URL naming several hosts). Either sends an operation's [`Request`]
//! on its key's connection, bounded by the connect and command timeouts,
//! sends it again on a fresh connection when it found its own dead
//! (`errors::RESENDS`), and hands the operation's reader the same
//! [`Answer`] shape; an acquire's good answer then starts a sweep of
//! expired rows when one is due, on the same transport.

use std::sync::Arc;

use super::answer::Reader;
use super::ops::Request;
use super::pool::Pool;
use super::shared::Shared;
use super::via_loop;
use super::via_tokio;
use super::wire::Direct;
use crate::store::event_loop::host::MakeHost;
use crate::store::Op;

pub(super) enum Transport {
    /// Connections the JS thread's event loop drives.
    EventLoop(Direct),
    /// tokio-postgres connections, on Tokio.
    Tokio(Arc<Pool>),
}

impl Transport {
    /// The transport of the store `shared` describes: the event loop's
    /// connections when a loop is given (`make_host`) and the URL names
    /// what they can reach, else Tokio's.
    pub fn chosen(shared: &Shared, make_host: Option<MakeHost<'_>>) -> Result<Transport, String> {
        if let Some(make_host) = make_host {
            if let Some(direct) = via_loop::connections(shared, make_host)? {
                return Ok(Transport::EventLoop(direct));
            }
        }
        Ok(Transport::Tokio(Arc::new(Pool::new(
            shared.options.pool_size,
        ))))
    }

    /// Send `request`; its answer becomes the operation's through `read`.
    pub fn send<T: Send + 'static>(
        &self, shared: &Arc<Shared>, request: Request, read: Reader<T>,
    ) -> Op<T> {
        match self {
            Transport::EventLoop(direct) => via_loop::send(direct, shared, request, read),
            Transport::Tokio(pool) => via_tokio::send(pool, shared, request, read),
        }
    }

    /// Whether it says when a statement is written ([`Transport::sent`]).
    pub fn tells_when_sent(&self) -> bool {
        matches!(self, Transport::EventLoop(_))
    }

    /// Settles once what was sent about `key` is written to its connection's
    /// socket (the event loop's; tokio-postgres's writes are not seen, and
    /// settle at once).
    pub fn sent(&self, key: &str) -> Op<()> {
        match self {
            Transport::EventLoop(direct) => direct.sent(key),
            Transport::Tokio(_) => Op::Ready(Ok(())),
        }
    }

    /// Drop the connections. Operations after this fail with a "closed"
    /// error; ones already sent finish on the connection they hold.
    pub fn close(&self) {
        match self {
            Transport::EventLoop(direct) => direct.close(),
            Transport::Tokio(pool) => pool.close(),
        }
    }
}
