//! A store on a Redis server, spoken to natively: no JS client in the loop.
//!
//! The data layout is the one the docs' ioredis store uses, so processes
//! using either (or the TypeScript Keel lock) exclude each other: the key is
//! `prefix + key`, its value is the owner token, and its Redis TTL is the
//! lock's TTL. Redis owns the clock that decides expiry.
//!
//! Read in this order: this file (the store and its one dispatch on the
//! kind of hold), `ops` (every operation once: its request and the reader of
//! its reply), `layout` (where each key lives, and the release channel),
//! `scripts` (the Lua that compares before it acts, and answers "taken"
//! when an acquire sent again finds its own owner), `request` (a command as
//! kept, to send again), `transport` (chosen when the store is made: the
//! event loop's connection, `wire`, or Tokio's, `connection`; each
//! operation bounded by the command timeout, plus the connect timeout when
//! it has to connect first, so a dead or frozen server fails operations
//! instead of hanging them), [`fencing`] (the counter an acquire's token
//! comes from: one per server, one per Cluster hash slot), `errors` (a
//! command that finds the connection dead is sent again, which every
//! operation here allows: acquire and extend repeat safely, a release sent
//! twice deletes nothing that is not ours, and reads are reads; what else
//! becomes which error code), `pubsub` (releases announced and heard),
//! `options` (URLs, TLS).
//!
//! A Redis Cluster is given as its node URLs (any of them: the rest are found
//! from the cluster). Commands go to the master of their key's slot (the
//! client follows MOVED/ASK and re-reads the slot map after a failover).
//! `rediss://` speaks TLS (rustls), checked against the system's roots or
//! only `tls.ca`; certificates are parsed when the store is made, so a bad
//! PEM is the caller's error at once, not a failure on first use.

mod answer;
mod connection;
mod errors;
pub mod fencing;
mod layout;
mod limits;
mod ops;
mod options;
mod pubsub;
mod request;
mod scripts;
mod shared;
mod transport;
mod wire;

use std::sync::{Arc, Mutex};

use redis::cluster::ClusterClient;

use self::answer::Misread;
use self::connection::Connection;
use self::layout::{channel, Layout, WAKE};
pub use self::options::RedisOptions;
use self::options::{checked_url, open_client};
use self::request::Request;
use self::shared::Shared;
use self::transport::Transport;
pub(super) use self::wire::target::first_words;
use super::event_loop::host::MakeHost;
use super::follow::{FirstOpened, Follower, OnReleased};
use super::options::{redacted, TlsOptions};
use super::{Acquired, Asked, Capabilities, HoldKind, HoldOp, LockStore, Op, Task, Wait};
use crate::owner;

pub struct RedisStore {
    shared: Arc<Shared>,
    transport: Transport,
}

impl RedisStore {
    /// Parse the URL now (a bad one is the caller's mistake, reported at once);
    /// the connection itself opens on the first operation.
    pub fn new(
        options: RedisOptions, on_released: Option<OnReleased>, make_host: Option<MakeHost<'_>>,
    ) -> Result<Self, String> {
        let certificates = options
            .tls
            .as_ref()
            .map(TlsOptions::certificates)
            .transpose()?;
        let given = if options.cluster.is_empty() {
            std::slice::from_ref(&options.url)
        } else {
            options.cluster.as_slice()
        };
        let urls = given
            .iter()
            .map(|url| checked_url(url))
            .collect::<Result<Vec<_>, _>>()?;
        let mut clients = Vec::with_capacity(urls.len());
        for url in &urls {
            clients.push(open_client(url, certificates.as_ref())?);
        }
        let cluster = if options.cluster.is_empty() {
            None
        } else {
            let mut builder = ClusterClient::builder(urls.iter().map(String::as_str))
                .connection_timeout(options.connect_timeout)
                .response_timeout(options.command_timeout)
                .retries(3)
                .min_retry_wait(20)
                .max_retry_wait(500);
            if let Some(certificates) = certificates {
                builder = builder.certs(certificates);
            }
            Some(
                builder
                    .build()
                    .map_err(|e| format!("options.cluster: {e}"))?,
            )
        };
        let display = if options.cluster.is_empty() {
            redacted(&options.url)
        } else {
            let nodes: Vec<String> = options.cluster.iter().map(|u| redacted(u)).collect();
            format!("the Redis Cluster at {}", nodes.join(", "))
        };
        // On one server a plain lock's waiters wait in line, where this
        // store (each process's, each worker thread's) has an id of its own.
        let layout = Layout {
            prefix: options.prefix.clone(),
            cluster: cluster.is_some(),
            line: cluster.is_none().then(|| owner::mint().as_str().to_owned()),
        };
        let shared = Shared {
            options,
            display,
            clients,
            cluster,
            connecting: tokio::sync::Mutex::new(()),
            connection: Mutex::new(Connection::Idle),
            layout,
            follower: Follower::new(on_released),
            limits: Arc::default(),
            first_opened: FirstOpened::default(),
        };
        Ok(Self {
            transport: Transport::choose(&shared, make_host)?,
            shared: Arc::new(shared),
        })
    }

    /// Send `request`, its reply read by `read`.
    fn send<T, R>(&self, request: Request, read: R) -> Op<T>
    where
        T: Send + 'static,
        R: FnOnce(redis::Value) -> Result<T, Misread> + Send + 'static,
    {
        if let Some(refused) = self.shared.limits.refusal(&request, "RedisLockStore") {
            return Op::Ready(Err(refused));
        }
        self.transport.send(&self.shared, request, read)
    }

    /// `op` on a semaphore's or read-write key's holds.
    fn holds_op<T: Send + 'static>(
        &self, op: HoldOp, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64,
        read: fn(redis::Value) -> Result<T, Misread>,
    ) -> Op<T> {
        match ops::holds(&self.shared.layout, op, hold, key, owner, ttl_ms) {
            Ok(request) => self.send(request, read),
            Err(refused) => Op::Ready(Err(refused)),
        }
    }
}

/// One dispatch on the kind of hold: a plain lock is a Redis string and its
/// own scripts and commands; the other kinds are one call each of the
/// operation's script (`ops`, `scripts`).
impl LockStore for RedisStore {
    fn acquire(
        &self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64, wait: Wait,
    ) -> Op<Acquired> {
        let layout = &self.shared.layout;
        match hold {
            HoldKind::Lock => self.send(
                ops::acquire_lock(layout, key, owner, ttl_ms, wait),
                answer::token,
            ),
            _ => self.holds_op(HoldOp::Acquire, hold, key, owner, ttl_ms, answer::token),
        }
    }

    fn release(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        match hold {
            HoldKind::Lock => {
                // A lock handed to this process in the reply goes to its
                // waiters as one told by message would.
                let (shared, key) = (Arc::clone(&self.shared), key.to_owned());
                let request = ops::release_lock(&self.shared.layout, key.as_str(), owner);
                self.send(request, answer::release)
                    .map(move |release| release.tell(&key, &shared.follower))
            }
            _ => self.holds_op(HoldOp::Release, hold, key, owner, 0.0, answer::one),
        }
    }

    fn extend(&self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        let layout = &self.shared.layout;
        match hold {
            HoldKind::Lock => self.send(
                ops::extend_lock(layout, key, owner, ttl_ms, None),
                answer::one,
            ),
            _ => self.holds_op(HoldOp::Extend, hold, key, owner, ttl_ms, answer::one),
        }
    }

    fn holds(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        match hold {
            HoldKind::Lock => self.send(
                ops::lock_owner(&self.shared.layout, key),
                answer::owned_by(owner),
            ),
            _ => self.holds_op(HoldOp::Left, hold, key, owner, 0.0, answer::live),
        }
    }

    fn remaining(&self, hold: HoldKind, key: &str, owner: Option<&str>) -> Op<Option<f64>> {
        match (hold, owner) {
            (HoldKind::Lock, _) => {
                self.send(ops::lock_remaining(&self.shared.layout, key), answer::pttl)
            }
            (_, Some(owner)) => self.holds_op(HoldOp::Left, hold, key, owner, 0.0, answer::left),
            (_, None) => Op::Ready(Ok(None)),
        }
    }

    fn would_wait(&self, hold: HoldKind, key: &str) -> Op<bool> {
        match hold {
            HoldKind::Lock => self.send(ops::is_locked(&self.shared.layout, key), answer::one),
            _ => self.holds_op(HoldOp::Waits, hold, key, "", 0.0, answer::one),
        }
    }

    fn holders(&self, hold: HoldKind, key: &str) -> Op<f64> {
        match hold {
            HoldKind::Lock => self
                .would_wait(hold, key)
                .map(|locked| f64::from(u8::from(locked))),
            _ => self.holds_op(HoldOp::Count, hold, key, "", 0.0, answer::count),
        }
    }

    fn withdraw(&self, hold: HoldKind, key: &str) -> Op<()> {
        match hold {
            HoldKind::Write => self.holds_op(HoldOp::Withdraw, hold, key, "", 0.0, answer::nothing),
            _ => Op::Ready(Ok(())),
        }
    }

    /// Follow (or stop following) announced releases of `key`'s holds in
    /// `hold`: the first call returns the subscriber task (`pubsub`).
    fn watch(&self, hold: HoldKind, key: &str, on: bool) -> Option<Task> {
        let shared = &self.shared;
        let layout = &shared.layout;
        let wake = layout.line.as_ref().map(|me| format!("{WAKE}{me}"));
        let watch = match (hold, &wake) {
            // Its own channel serves every key: followed once, kept.
            (HoldKind::Lock, Some(_)) if !on => return None,
            (HoldKind::Lock, Some(wake)) => (wake.clone(), true),
            _ => (channel(&layout.of(hold, key)), on),
        };
        let subscriber = shared.follower.follow(watch, |inbox, on_released| {
            pubsub::subscriber(
                shared.clients.clone(),
                shared.options.prefix.clone(),
                wake,
                shared.options.connect_timeout,
                shared.first_opened.clone(),
                inbox,
                on_released,
            )
        })?;
        Some(Box::pin(subscriber))
    }

    fn claim(&self, key: &str, owner: &str, ttl_ms: f64, more: Option<Asked>) -> Op<bool> {
        let request = ops::extend_lock(&self.shared.layout, key, owner, ttl_ms, more);
        self.send(request, answer::one)
    }

    fn leave_line(&self, key: &str) -> Op<()> {
        match ops::leave_line(&self.shared.layout, key) {
            Some(request) => self.send(request, answer::nothing),
            None => Op::Ready(Ok(())),
        }
    }

    fn ping(&self) -> Op<()> {
        self.send(ops::ping(), answer::answered)
    }

    /// Drop the connection. Operations after this fail with a "closed" error;
    /// ones already sent finish on the connection they hold. The release
    /// callback goes too: it refers to the JS store, which can then be
    /// collected with everything it holds.
    fn close(&self) {
        self.transport.close();
        if let Ok(mut connection) = self.shared.connection.lock() {
            *connection = Connection::Closed;
        }
        self.shared.follower.close();
    }

    fn sent(&self, key: &str) -> Op<()> {
        self.transport.sent(key)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            announces_releases: true,
            // One connection per server (or per Cluster node), answering in order.
            answers_in_order: true,
            tells_when_sent: self.transport.tells_when_sent(),
            waits_in_line: self.shared.layout.line.is_some(),
            ..Capabilities::default()
        }
    }
}

#[cfg(test)]
mod line_tests;
#[cfg(test)]
mod tests;
