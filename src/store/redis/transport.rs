//! How a request reaches the server and its reply comes back, chosen once,
//! when the store is made: one server over TCP or TLS rides the JS thread's
//! event loop (`wire`, [`crate::store::event_loop`]); a Cluster, a server
//! behind a unix socket, or a store made without a loop rides the redis
//! crate's connections on Tokio (`connection`). Either one sends an
//! operation's [`Request`] and hands the reply to the operation's reader
//! (`ops`); neither knows which operation it carries.

use std::sync::Arc;

use redis::{RedisResult, Value};
use rustls::pki_types::ServerName;

use super::answer::Misread;
use super::connection::OpenConnection;
use super::errors::{found_dead, server_error, RESENDS};
use super::request::{Body, Request};
use super::shared::Shared;
use super::wire::target::Target;
use super::wire::{Direct, Local};
use crate::store::event_loop::host::MakeHost;
use crate::store::event_loop::Endpoint;
use crate::store::tls::client_config;
use crate::store::{BackendError, Code, Op, StoreError};

pub enum Transport {
    /// One server's connection, driven by the JS thread's own event loop.
    EventLoop(Direct),
    /// The redis crate's connection on Tokio, made on first use (`Shared`).
    Tokio,
}

impl Transport {
    /// The event loop when there is one to drive a single server over TCP
    /// or TLS on; Tokio otherwise.
    pub fn choose(shared: &Shared, make_host: Option<MakeHost<'_>>) -> Result<Transport, String> {
        let Some(make_host) = make_host else {
            return Ok(Transport::Tokio);
        };
        if shared.cluster.is_some() {
            return Ok(Transport::Tokio);
        }
        let info = shared.clients[0].get_connection_info();
        let (host, port, tls) = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port, None),
            redis::ConnectionAddr::TcpTls { host, port, .. } => {
                let config = client_config(&shared.options.tls.clone().unwrap_or_default())?;
                let name = ServerName::try_from(host.clone())
                    .map_err(|e| format!("url: {host:?} is not a host name TLS can check: {e}"))?;
                (host.clone(), *port, Some((config, name)))
            }
            _ => return Ok(Transport::Tokio),
        };
        let redis = info.redis_settings();
        let target = Target {
            host,
            port,
            tls,
            username: redis.username().map(str::to_owned),
            password: redis.password().map(str::to_owned),
            db: redis.db(),
            connect_timeout: shared.options.connect_timeout,
            display: shared.display.clone(),
            limits: Arc::clone(&shared.limits),
            first_opened: shared.first_opened.clone(),
        };
        let options = &shared.options;
        let endpoint = Endpoint::new(
            &shared.display,
            options.connect_timeout,
            options.command_timeout,
        );
        let direct = Direct::new(make_host, target, endpoint, 1)?;
        Ok(Transport::EventLoop(direct))
    }

    /// Send `request`; its reply becomes the operation's answer through `read`.
    pub fn send<T, R>(&self, shared: &Arc<Shared>, request: Request, read: R) -> Op<T>
    where
        T: Send + 'static,
        R: FnOnce(Value) -> Result<T, Misread> + Send + 'static,
    {
        match self {
            Transport::EventLoop(direct) => on_event_loop(direct, request, read),
            Transport::Tokio => on_tokio(Arc::clone(shared), request, read),
        }
    }

    /// Whether it says when a request is written ([`Transport::sent`]).
    pub fn tells_when_sent(&self) -> bool {
        matches!(self, Transport::EventLoop(_))
    }

    /// Settles once what was sent about `key` is written to the socket (the
    /// event loop's; Tokio's writes are not seen, and settle at once).
    pub fn sent(&self, key: &str) -> Op<()> {
        match self {
            Transport::EventLoop(direct) => direct.sent(key),
            Transport::Tokio => Op::Ready(Ok(())),
        }
    }

    /// Close the event loop's connection (Tokio's goes with `Shared`).
    pub fn close(&self) {
        if let Transport::EventLoop(direct) = self {
            direct.close();
        }
    }
}

/// The error for a reply that is not the operation's answer.
fn misread(name: &str, display: &str, what: Misread) -> StoreError {
    StoreError::Backend(BackendError {
        code: Code::StoreRedis,
        message: format!("RedisLockStore.{name}: {display} answered {what}"),
    })
}

fn on_event_loop<T, R>(direct: &Direct, request: Request, read: R) -> Op<T>
where
    T: 'static,
    R: FnOnce(Value) -> Result<T, Misread> + 'static,
{
    let name = request.name;
    direct.operation(name, move |local, done| {
        let answer = move |connections: &Local, value| match value {
            Value::ServerError(e) => Err(server_error(name, connections.display(), &e)),
            value => read(value).map_err(|what| misread(name, connections.display(), what)),
        };
        local.request(None, request, answer, done)
    })
}

/// On Tokio, within the store's time bounds: a command that finds the
/// connection dead is sent again on a fresh one (see `errors` for why each
/// operation may be).
fn on_tokio<T, R>(shared: Arc<Shared>, request: Request, read: R) -> Op<T>
where
    T: Send + 'static,
    R: FnOnce(Value) -> Result<T, Misread> + Send + 'static,
{
    Op::Pending(Box::pin(async move {
        let name = request.name;
        let options = &shared.options;
        let bound = options.command_timeout + options.connect_timeout;
        let attempt = async {
            let mut resent = 0;
            loop {
                let mut conn = shared.connection(name).await?;
                match send(&mut conn, &request).await {
                    Ok(value) => {
                        shared.first_opened.now();
                        return Ok(value);
                    }
                    Err(e) if resent < RESENDS && found_dead(&e) => resent += 1,
                    Err(e) => return Err(shared.diagnose(name, &e).await),
                }
            }
        };
        let value = match tokio::time::timeout(bound, attempt).await {
            Ok(outcome) => outcome?,
            Err(_) => {
                return Err(StoreError::Backend(BackendError {
                    code: Code::StoreTimeout,
                    message: format!(
                        "RedisLockStore.{name}: no answer from {} within {} ms",
                        shared.display,
                        bound.as_millis()
                    ),
                }))
            }
        };
        read(value).map_err(|what| misread(name, &shared.display, what))
    }))
}

/// One request on a Tokio connection; a script the server does not know is
/// loaded and run again (the redis crate's `Script` does it).
async fn send(conn: &mut OpenConnection, request: &Request) -> RedisResult<Value> {
    let value: Value = match &request.body {
        Body::Plain(cmd) => cmd.query_async(conn).await?,
        Body::Script { lua, keys, args } => {
            let mut invocation = lua.script.prepare_invoke();
            for key in keys {
                invocation.key(key);
            }
            for arg in args {
                invocation.arg(arg.as_slice());
            }
            invocation.invoke_async(conn).await?
        }
    };
    value.extract_error()
}
