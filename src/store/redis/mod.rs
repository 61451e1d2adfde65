//! A store on a Redis server, spoken to natively: no JS client in the loop.
//!
//! The data layout is the one the docs' ioredis store uses, so processes
//! using either (or the TypeScript Keel lock) exclude each other: the key is
//! `prefix + key`, its value is the owner token, and its Redis TTL is the
//! lock's TTL. Redis owns the clock that decides expiry.
//!
//! - acquire: `SET key owner PX ttl NX`, atomic set-if-absent on the server,
//!   and in the same script `INCR` of a fencing counter, whose new value is
//!   the acquisition's fencing token, handed back with the reply. One counter
//!   serves every key (`keel:fencing-counter`; on a Cluster one per hash slot
//!   in use, each in its slot), so what stays in Redis is bounded however
//!   many keys were ever locked, and a key's tokens still only grow. It has
//!   no expiry: tokens keep growing after a lock lapses and, with persistence
//!   on, after the server restarts. The script also answers "taken" when the
//!   key already holds this very owner, so an acquire sent again after its
//!   reply was lost finds its own lock instead of a stranger's.
//! - release / extend: a Lua script that compares the stored owner before it
//!   deletes or re-expires, so the check and the act cannot be split by
//!   another client. Scripts go as EVALSHA and are reloaded on NOSCRIPT.
//!
//! One multiplexed connection carries every command (concurrent commands are
//! pipelined on it); it is opened on first use and re-opened on its own after
//! the server comes back. A command that finds the connection dead (the
//! server closed an idle client, was restarted, or the client was killed) is
//! sent again on a fresh one, which every operation here allows: acquire and
//! extend repeat safely, as said above; a release sent twice deletes nothing
//! that is not ours (if the first went through, the second answers "not
//! held"), and reads are reads.
//!
//! A release announces itself: the release script publishes the key on
//! `keel:released:<key>`. While this process has waiters for a key, a second
//! connection subscribes to that channel and wakes them, so a waiter in one
//! process takes the lock a moment after a holder in another lets go instead
//! of at its next poll. The poll stays as the fallback: a lost announcement
//! (or a release by a client that does not announce, like the docs' ioredis
//! store) costs latency, never correctness. Every operation is bounded by the command timeout
//! (plus the connect timeout when it has to connect first), so a dead or
//! frozen server fails operations instead of hanging them.
//!
//! A Redis Cluster is given as its node URLs (any of them: the rest are found
//! from the cluster). Commands go to the master of their key's slot (the
//! client follows MOVED/ASK and re-reads the slot map after a failover); the
//! fencing counter shares its key's slot, so the acquire script runs on one
//! node. Announcements use classic pub/sub, which a cluster broadcasts to every
//! node: the subscriber listens on one node, and moves to the next if it goes.
//!
//! `rediss://` speaks TLS (rustls). The server is checked against the
//! system's trusted roots, or only against `tls.ca` when one is given (a
//! private CA); `tls.cert` + `tls.key` are a client certificate for servers
//! that ask for one. Certificates are parsed when the store is made, so a
//! bad PEM is the caller's error at once, not a failure on first use.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{
    Client, ClientTlsConfig, Cmd, ConnectionAddr, ErrorKind, Pipeline, RedisError, RedisFuture,
    Script, TlsCertificates, Value,
};
use tokio::sync::mpsc;

use super::{BackendError, LockStore, Op, StoreError, StoreResult};

pub mod fencing;

/// Compare-and-delete: only the holder's own token deletes the key; the
/// release is announced on the channel in ARGV[2].
const RELEASE: &str = r#"
if redis.call("get", KEYS[1]) == ARGV[1] then
  redis.call("del", KEYS[1])
  redis.call("publish", ARGV[2], KEYS[1])
  return 1
end
return 0
"#;

/// Where releases of `key` (prefix included) are announced.
fn channel(full_key: &str) -> String {
    format!("keel:released:{full_key}")
}

/// Called with a key (without the prefix) whose release another client announced.
pub type OnReleased = Arc<dyn Fn(String) + Send + Sync>;

/// A request to the subscriber task: follow (or stop following) a channel.
type Watch = (String, bool);

/// Set-if-absent (or find the key already ours: this acquire, sent before,
/// whose reply was lost), and then the next fencing token from the counter
/// in KEYS[2].
const ACQUIRE: &str = r#"
if redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[2], "NX") or redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("incr", KEYS[2])
end
return false
"#;

/// Compare-and-extend, same idea.
const EXTEND: &str = r#"
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("pexpire", KEYS[1], ARGV[2])
end
return 0
"#;

/// How a store connects; every field already checked by the JS layer.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    pub url: String,
    /// A Redis Cluster's node URLs; empty for a single server (`url`).
    pub cluster: Vec<String>,
    pub prefix: String,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    pub tls: Option<TlsOptions>,
}

/// PEM bytes for a TLS connection; each part optional, `cert` and `key` together.
#[derive(Clone, Default)]
pub struct TlsOptions {
    pub ca: Option<Vec<u8>>,
    pub cert: Option<Vec<u8>>,
    pub key: Option<Vec<u8>>,
}

impl std::fmt::Debug for TlsOptions {
    // A private key never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsOptions")
            .field("ca", &self.ca.as_ref().map(|_| "<pem>"))
            .field("cert", &self.cert.as_ref().map(|_| "<pem>"))
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

enum Connection {
    /// Not connected yet: the connection is made on first use, inside Tokio.
    Idle,
    Open(Conn),
    Closed,
}

/// One server's reconnecting multiplexed connection, or a cluster's.
#[derive(Clone)]
pub enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

struct Shared {
    options: RedisOptions,
    /// The server as error messages name it (no password).
    display: String,
    /// The server, or for a cluster one client per node URL given (for pub/sub).
    clients: Vec<Client>,
    cluster: Option<ClusterClient>,
    /// Held while a cluster connection is being made, so only one is.
    connecting: tokio::sync::Mutex<()>,
    connection: Mutex<Connection>,
    acquire: Script,
    release: Script,
    extend: Script,
    /// Taken by `close()`: it holds the JS callback, which holds the store.
    on_released: Mutex<Option<OnReleased>>,
    /// The subscriber task's inbox, once it runs; dropping it ends the task.
    watcher: Mutex<Option<mpsc::UnboundedSender<Watch>>>,
}

pub struct RedisStore {
    shared: Arc<Shared>,
}

impl RedisStore {
    /// Parse the URL now (a bad one is the caller's mistake, reported at once);
    /// the connection itself opens on the first operation.
    pub fn new(options: RedisOptions, on_released: Option<OnReleased>) -> Result<Self, String> {
        let certificates = match &options.tls {
            None => None,
            Some(tls) => {
                let client_tls = match (&tls.cert, &tls.key) {
                    (Some(cert), Some(key)) => Some(ClientTlsConfig {
                        client_cert: cert.clone(),
                        client_key: key.clone(),
                    }),
                    (None, None) => None,
                    _ => return Err("options.tls.cert and options.tls.key go together".into()),
                };
                Some(TlsCertificates {
                    client_tls,
                    root_cert: tls.ca.clone(),
                })
            }
        };
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
        Ok(Self {
            shared: Arc::new(Shared {
                options,
                display,
                clients,
                cluster,
                connecting: tokio::sync::Mutex::new(()),
                connection: Mutex::new(Connection::Idle),
                acquire: Script::new(ACQUIRE),
                release: Script::new(RELEASE),
                extend: Script::new(EXTEND),
                on_released: Mutex::new(on_released),
                watcher: Mutex::new(None),
            }),
        })
    }

    /// Drop the connection. Operations after this fail with a "closed" error;
    /// ones already sent finish on the connection they hold. The release
    /// callback goes too: it refers to the JS store, which can then be
    /// collected with everything it holds.
    pub fn close(&self) {
        if let Ok(mut connection) = self.shared.connection.lock() {
            *connection = Connection::Closed;
        }
        if let Ok(mut watcher) = self.shared.watcher.lock() {
            *watcher = None;
        }
        if let Ok(mut on_released) = self.shared.on_released.lock() {
            *on_released = None;
        }
    }

    /// Follow (or stop following) announced releases of `key`. The first call
    /// returns the subscriber task for the caller to spawn on Tokio.
    pub fn watch(&self, key: &str, on: bool) -> Option<impl Future<Output = ()> + Send + 'static> {
        let on_released = self.shared.on_released.lock().ok()?.clone()?;
        let Ok(mut watcher) = self.shared.watcher.lock() else {
            return None;
        };
        let closed = matches!(
            self.shared.connection.lock().as_deref(),
            Ok(Connection::Closed) | Err(_)
        );
        if closed {
            return None;
        }
        let mut task = None;
        let sender = watcher.get_or_insert_with(|| {
            let (sender, inbox) = mpsc::unbounded_channel();
            let options = &self.shared.options;
            task = Some(subscriber(
                self.shared.clients.clone(),
                options.prefix.clone(),
                options.connect_timeout,
                inbox,
                on_released,
            ));
            sender
        });
        let _ = sender.send((channel(&self.key(key)), on));
        task
    }

    fn key(&self, key: &str) -> String {
        let prefix = &self.shared.options.prefix;
        let mut full = String::with_capacity(prefix.len() + key.len());
        full.push_str(prefix);
        full.push_str(key);
        full
    }

    /// Run one operation against the connection, within the store's time
    /// bounds. A command that finds the connection dead is sent again on a
    /// fresh one (see the module doc for why each operation here may be).
    fn op<T, F, Fut>(&self, name: &'static str, run: F) -> Op<T>
    where
        T: Send + 'static,
        F: Fn(Conn, Arc<Shared>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = redis::RedisResult<T>> + Send,
    {
        let shared = Arc::clone(&self.shared);
        Op::Pending(Box::pin(async move {
            let options = &shared.options;
            let bound = options.command_timeout + options.connect_timeout;
            let attempt = async {
                let mut resent = 0;
                loop {
                    let conn = shared.connection(name).await?;
                    match run(conn, Arc::clone(&shared)).await {
                        Ok(value) => return Ok(value),
                        Err(e) if resent < RESENDS && found_dead(&e) => resent += 1,
                        Err(e) => return Err(shared.diagnose(name, &e).await),
                    }
                }
            };
            match tokio::time::timeout(bound, attempt).await {
                Ok(outcome) => outcome,
                Err(_) => Err(StoreError::Backend(BackendError {
                    code: "ERR_LOCK_STORE_TIMEOUT",
                    message: format!(
                        "RedisLockStore.{name}: no answer from {} within {} ms",
                        shared.display,
                        bound.as_millis()
                    ),
                })),
            }
        }))
    }

    /// The acquire script for `full_key`: set-if-absent and the fencing token.
    fn acquire_script(&self, key: &str, owner: &str, ttl_ms: f64) -> Op<Option<u64>> {
        let full_key = self.key(key);
        let counter = if self.shared.cluster.is_some() {
            fencing::cluster_counter(&self.shared.options.prefix, &full_key)
        } else {
            self.key(fencing::COUNTER)
        };
        let (owner, ttl) = (owner.to_owned(), whole_ms(ttl_ms));
        self.op("acquire", move |mut conn, shared| {
            let (full_key, counter, owner) = (full_key.clone(), counter.clone(), owner.clone());
            async move {
                shared
                    .acquire
                    .key(&full_key)
                    .key(&counter)
                    .arg(&owner)
                    .arg(ttl)
                    .invoke_async(&mut conn)
                    .await
            }
        })
    }
}

/// Whether `e` says the connection died under the command (not that the
/// server refused a new one): then it is sent again on a fresh connection.
fn found_dead(e: &RedisError) -> bool {
    (e.is_connection_dropped() && !e.is_connection_refusal())
        || e.kind() == ErrorKind::ClusterConnectionNotFound
}

/// How many times a command that found the connection dead is sent again.
/// The first resend covers a connection the server closed while idle; a
/// second, a server that was restarting.
const RESENDS: u32 = 2;

/// Follows the channels it is told to and reports each announced release.
/// Re-connects (and re-subscribes) after the connection drops; ends when the
/// store is closed or dropped.
async fn subscriber(
    clients: Vec<Client>,
    prefix: String,
    connect_timeout: Duration,
    mut inbox: mpsc::UnboundedReceiver<Watch>,
    on_released: OnReleased,
) {
    let mut channels: HashSet<String> = HashSet::new();
    let apply = |channels: &mut HashSet<String>, (name, on): Watch| {
        if on {
            channels.insert(name);
        } else {
            channels.remove(&name);
        }
    };
    // A cluster broadcasts PUBLISH to every node: any one will do, the next
    // one if it goes away.
    let mut next = 0;
    loop {
        let client = &clients[next % clients.len()];
        next += 1;
        let connected = tokio::time::timeout(connect_timeout, client.get_async_pubsub()).await;
        let Ok(Ok(pubsub)) = connected else {
            // Not reachable now: keep track of what is wanted, and try again soon.
            let pause = tokio::time::sleep(Duration::from_millis(250));
            tokio::pin!(pause);
            loop {
                tokio::select! {
                    _ = &mut pause => break,
                    watch = inbox.recv() => match watch {
                        Some(watch) => apply(&mut channels, watch),
                        None => return,
                    },
                }
            }
            continue;
        };
        let (mut sink, mut stream) = pubsub.split();
        let mut healthy = true;
        for name in &channels {
            healthy &= sink.subscribe(name).await.is_ok();
        }
        while healthy {
            tokio::select! {
                watch = inbox.recv() => {
                    let Some((name, on)) = watch else { return };
                    let sent = if on { sink.subscribe(&name).await } else { sink.unsubscribe(&name).await };
                    healthy = sent.is_ok();
                    apply(&mut channels, (name, on));
                }
                message = stream.next() => match message {
                    Some(message) => {
                        if let Ok(full_key) = message.get_payload::<String>() {
                            if let Some(key) = full_key.strip_prefix(prefix.as_str()) {
                                on_released(key.to_owned());
                            }
                        }
                    }
                    None => healthy = false,
                },
            }
        }
    }
}

impl Shared {
    fn closed(name: &'static str) -> StoreError {
        StoreError::Backend(BackendError {
            code: "ERR_LOCK_STORE_CLOSED",
            message: format!("RedisLockStore.{name}: the store is closed"),
        })
    }

    /// The open connection, made on first use. A single server's opens lazily
    /// and reconnects by itself; a cluster's is made here (the slot map read)
    /// and, should that fail, tried again by the next operation.
    async fn connection(&self, name: &'static str) -> StoreResult<Conn> {
        if let Some(open) = self.open_or_single(name)? {
            return Ok(open);
        }
        let Some(cluster) = &self.cluster else {
            return Err(Self::closed(name));
        };
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(open) = self.open_or_single(name)? {
            return Ok(open);
        }
        let conn = cluster
            .get_async_connection()
            .await
            .map_err(|e| self.failure(name, &e))?;
        let mut connection = self.connection.lock().map_err(|_| Self::closed(name))?;
        match &*connection {
            Connection::Closed => Err(Self::closed(name)),
            _ => {
                *connection = Connection::Open(Conn::Cluster(conn.clone()));
                Ok(Conn::Cluster(conn))
            }
        }
    }

    /// The connection if open; a single server's made now (lazily). None: a
    /// cluster's still to be made.
    fn open_or_single(&self, name: &'static str) -> StoreResult<Option<Conn>> {
        let mut connection = self.connection.lock().map_err(|_| Self::closed(name))?;
        match &*connection {
            Connection::Open(conn) => Ok(Some(conn.clone())),
            Connection::Closed => Err(Self::closed(name)),
            Connection::Idle if self.cluster.is_some() => Ok(None),
            Connection::Idle => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.options.connect_timeout))
                    .set_response_timeout(Some(self.options.command_timeout))
                    // Reconnects are retried a few times, quickly; an operation
                    // waiting on one is still bounded by its own timeout.
                    .set_number_of_retries(2)
                    .set_min_delay(Duration::from_millis(20))
                    .set_max_delay(Duration::from_millis(500));
                let manager =
                    ConnectionManager::new_lazy_with_config(self.clients[0].clone(), config)
                        .map_err(|e| self.failure(name, &e))?;
                let conn = Conn::Single(manager);
                *connection = Connection::Open(conn.clone());
                Ok(Some(conn))
            }
        }
    }

    /// The error a failed command becomes. A server that accepts connections
    /// and then drops them is looked at closer: if it does not answer a
    /// `PING` as Redis would, the error says so, instead of blaming the network.
    async fn diagnose(&self, name: &'static str, e: &RedisError) -> StoreError {
        let not_redis = if e.kind() == ErrorKind::Parse {
            true
        } else if e.is_connection_dropped() && !e.is_connection_refusal() {
            match self.clients[0].get_connection_info().addr() {
                ConnectionAddr::Tcp(host, port) if self.cluster.is_none() => {
                    let within = self.options.connect_timeout.min(Duration::from_secs(1));
                    speaks_redis(host, *port, within).await == Some(false)
                }
                _ => false,
            }
        } else {
            false
        };
        if !not_redis {
            return self.failure(name, e);
        }
        StoreError::Backend(BackendError {
            code: "ERR_LOCK_STORE_CONNECTION",
            message: format!(
                "RedisLockStore.{name}: {} accepted the connection but did not answer as a Redis server (is this the right host and port?)",
                self.display
            ),
        })
    }

    fn failure(&self, name: &'static str, e: &RedisError) -> StoreError {
        let url = &self.display;
        let (code, what) = if e.kind() == ErrorKind::AuthenticationFailed
            || e.code()
                .is_some_and(|c| c == "WRONGPASS" || c == "NOAUTH" || c == "NOPERM")
        {
            ("ERR_LOCK_STORE_AUTH", "was refused by")
        } else if e.is_timeout() {
            ("ERR_LOCK_STORE_TIMEOUT", "timed out talking to")
        } else if e.is_connection_refusal() {
            ("ERR_LOCK_STORE_CONNECTION", "could not connect to")
        } else if found_dead(e) {
            ("ERR_LOCK_STORE_CONNECTION", "lost the connection to")
        } else if e.is_io_error() {
            ("ERR_LOCK_STORE_CONNECTION", "could not reach")
        } else {
            ("ERR_LOCK_STORE_REDIS", "got an error from")
        };
        StoreError::Backend(BackendError {
            code,
            message: format!("RedisLockStore.{name}: {what} {url}: {e}"),
        })
    }
}

/// Whether the server at `host:port` answers `PING` the way Redis does (a
/// simple string or an error reply, such as `-NOAUTH`); `None` when it cannot
/// be reached at all, so nothing can be said.
async fn speaks_redis(host: &str, port: u16, within: Duration) -> Option<bool> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::time::timeout(within, tokio::net::TcpStream::connect((host, port)))
        .await
        .ok()?
        .ok()?;
    let answer = async {
        stream.write_all(b"PING\r\n").await?;
        let mut first = [0u8; 1];
        let read = stream.read(&mut first).await?;
        Ok::<_, std::io::Error>(read == 1 && (first[0] == b'+' || first[0] == b'-'))
    };
    // Connected, but closed, silent or speaking something else: not Redis.
    Some(matches!(
        tokio::time::timeout(within, answer).await,
        Ok(Ok(true))
    ))
}

/// `url` as the redis crate should read it. That crate ignores URL parts it
/// does not know, which would put a lock somewhere else than its user meant
/// (`?db=4` on a TCP URL: database 0), and it reads `#insecure` as "skip the
/// certificate check". Here `?db=N` is honoured (moved into the path, where
/// the crate reads it), and anything else unknown is refused.
fn checked_url(raw: &str) -> Result<String, String> {
    // Not parsable, or a unix socket (whose `?db=` the crate reads itself):
    // left to the redis crate.
    let Ok(mut url) = url::Url::parse(raw) else {
        return Ok(raw.to_owned());
    };
    if !matches!(url.scheme(), "redis" | "rediss" | "valkey" | "valkeys") {
        return Ok(raw.to_owned());
    }
    let shown = redacted(raw);
    if url.fragment().is_some() {
        return Err(format!(
            "url {shown:?} has a #fragment; none is allowed (a server's certificate is always checked)"
        ));
    }
    let mut db = None;
    for (name, value) in url.query_pairs() {
        if name != "db" {
            return Err(format!(
                "url {shown:?} has the parameter {name:?}, which this store does not know (the only one is ?db=N)"
            ));
        }
        db = Some(value.into_owned());
    }
    let Some(db) = db else {
        return Ok(raw.to_owned());
    };
    if db.parse::<u16>().is_err() {
        return Err(format!(
            "url {shown:?}: ?db= must be a database number, got {db:?}"
        ));
    }
    let path = url.path().trim_matches('/').to_owned();
    if !path.is_empty() && path != db {
        return Err(format!(
            "url {shown:?} names two databases, /{path} and ?db={db}: give one"
        ));
    }
    url.set_path(&db);
    url.set_query(None);
    Ok(url.to_string())
}

/// A client for one URL, with the TLS certificates if given (a URL that is
/// not `rediss://` then is a mistake).
fn open_client(url: &str, certificates: Option<&TlsCertificates>) -> Result<Client, String> {
    match certificates {
        None => Client::open(url).map_err(|e| {
            format!(
                "url {:?} is not a Redis URL this store can use: {e}",
                redacted(url)
            )
        }),
        Some(certificates) => {
            if !url.starts_with("rediss://") {
                return Err(format!(
                    "options.tls needs a rediss:// url, got {:?}",
                    redacted(url)
                ));
            }
            Client::build_with_tls(url, certificates.clone())
                .map_err(|e| format!("options.tls: {e}"))
        }
    }
}

/// A URL as it may appear in an error message: without its password.
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    }
}

/// Redis expiries are whole milliseconds; a fractional TTL rounds up, as in memory.
fn whole_ms(ttl_ms: f64) -> u64 {
    // `ttl_ms` is positive and at most 2^53 - 1, so the cast is exact.
    ttl_ms.ceil() as u64
}

impl LockStore for RedisStore {
    fn acquire(&self, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        let taken = self.acquire_script(key, owner, ttl_ms);
        Op::Pending(Box::pin(async move { Ok(taken.settle().await?.is_some()) }))
    }

    fn acquire_fenced(&self, key: &str, owner: &str, ttl_ms: f64) -> Option<Op<Option<u64>>> {
        Some(self.acquire_script(key, owner, ttl_ms))
    }

    fn release(&self, key: &str, owner: &str) -> Op<bool> {
        let (key, owner) = (self.key(key), owner.to_owned());
        self.op("release", move |mut conn, shared| {
            let (key, owner) = (key.clone(), owner.clone());
            async move {
                let deleted: i64 = shared
                    .release
                    .key(&key)
                    .arg(&owner)
                    .arg(channel(&key))
                    .invoke_async(&mut conn)
                    .await?;
                Ok(deleted == 1)
            }
        })
    }

    fn extend(&self, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        let (key, owner, ttl) = (self.key(key), owner.to_owned(), whole_ms(ttl_ms));
        self.op("extend", move |mut conn, shared| {
            let (key, owner) = (key.clone(), owner.clone());
            async move {
                let extended: i64 = shared
                    .extend
                    .key(&key)
                    .arg(&owner)
                    .arg(ttl)
                    .invoke_async(&mut conn)
                    .await?;
                Ok(extended == 1)
            }
        })
    }

    fn is_locked(&self, key: &str) -> Op<bool> {
        let mut exists = redis::cmd("EXISTS");
        exists.arg(self.key(key));
        self.op("isLocked", move |mut conn, _| {
            let exists = exists.clone();
            async move { Ok(exists.query_async::<i64>(&mut conn).await? == 1) }
        })
    }

    fn remaining_time(&self, key: &str) -> Op<Option<f64>> {
        let mut pttl = redis::cmd("PTTL");
        pttl.arg(self.key(key));
        self.op("remainingTime", move |mut conn, _| {
            let pttl = pttl.clone();
            async move {
                // -2: no such key; -1: a key without expiry, which no lock writes.
                let ms: i64 = pttl.query_async(&mut conn).await?;
                Ok((ms >= 0).then_some(ms as f64))
            }
        })
    }

    fn holds(&self, key: &str, owner: &str) -> Option<Op<bool>> {
        let mut get = redis::cmd("GET");
        get.arg(self.key(key));
        let owner = owner.to_owned();
        Some(self.op("isExpired", move |mut conn, _| {
            let (get, owner) = (get.clone(), owner.clone());
            async move {
                let value: Option<String> = get.query_async(&mut conn).await?;
                Ok(value.as_deref() == Some(owner.as_str()))
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_error_messages() {
        assert_eq!(
            redacted("redis://app:s3cret@10.0.0.1:6379/2"),
            "redis://app:***@10.0.0.1:6379/2"
        );
        assert_eq!(redacted("redis://:s3cret@host"), "redis://:***@host");
        assert_eq!(redacted("redis://host:6379"), "redis://host:6379");
    }

    #[test]
    fn url_parameters_are_honoured_or_refused() {
        assert_eq!(checked_url("redis://h:1/?db=4").unwrap(), "redis://h:1/4");
        assert_eq!(checked_url("redis://h/4?db=4").unwrap(), "redis://h/4");
        assert_eq!(checked_url("redis://h/2").unwrap(), "redis://h/2");
        let twice = checked_url("redis://u:secret@h/0?db=4").unwrap_err();
        assert!(
            twice.contains("two databases") && !twice.contains("secret"),
            "{twice}"
        );
        assert!(checked_url("redis://h?db=x")
            .unwrap_err()
            .contains("database number"));
        assert!(checked_url("redis://h?protocol=resp3")
            .unwrap_err()
            .contains("\"protocol\""));
        assert!(checked_url("rediss://h#insecure")
            .unwrap_err()
            .contains("#fragment"));
        assert_eq!(
            checked_url("redis+unix:///tmp/r.sock?db=3").unwrap(),
            "redis+unix:///tmp/r.sock?db=3"
        );
    }

    #[test]
    fn a_bad_url_is_refused_up_front() {
        let options = RedisOptions {
            url: "http://example".into(),
            prefix: String::new(),
            connect_timeout: Duration::from_secs(1),
            command_timeout: Duration::from_secs(1),
            tls: None,
            cluster: Vec::new(),
        };
        let err = RedisStore::new(options, None).err().expect("refused");
        assert!(err.contains("not a Redis URL"), "{err}");
    }

    #[test]
    fn tls_options_are_checked_up_front() {
        let with = |url: &str, tls: TlsOptions| {
            RedisStore::new(
                RedisOptions {
                    url: url.into(),
                    prefix: String::new(),
                    connect_timeout: Duration::from_secs(1),
                    command_timeout: Duration::from_secs(1),
                    tls: Some(tls),
                    cluster: Vec::new(),
                },
                None,
            )
            .err()
        };
        let plain = with("redis://localhost", TlsOptions::default()).expect("refused");
        assert!(plain.contains("rediss://"), "{plain}");
        let half = TlsOptions {
            cert: Some(b"x".to_vec()),
            ..TlsOptions::default()
        };
        let half = with("rediss://localhost", half).expect("refused");
        assert!(half.contains("go together"), "{half}");
        let garbage = TlsOptions {
            ca: Some(
                b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".to_vec(),
            ),
            ..TlsOptions::default()
        };
        let garbage = with("rediss://localhost", garbage).expect("refused");
        assert!(garbage.contains("options.tls"), "{garbage}");
        assert!(with("rediss://localhost", TlsOptions::default()).is_none());
    }

    #[test]
    fn fractional_ttls_round_up() {
        assert_eq!(whole_ms(0.2), 1);
        assert_eq!(whole_ms(1500.0), 1500);
        assert_eq!(whole_ms(9_007_199_254_740_991.0), 9_007_199_254_740_991);
    }

    #[tokio::test]
    async fn a_closed_store_refuses_operations() {
        let store = RedisStore::new(
            RedisOptions {
                url: "redis://127.0.0.1:1".into(),
                prefix: String::new(),
                connect_timeout: Duration::from_millis(200),
                command_timeout: Duration::from_millis(200),
                tls: None,
                cluster: Vec::new(),
            },
            None,
        )
        .expect("valid url");
        store.close();
        let err = store.is_locked("k").settle().await.expect_err("closed");
        assert!(err.to_string().contains("closed"), "{err}");
    }
}
