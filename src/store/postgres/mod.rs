//! A store on a PostgreSQL server, spoken to natively: no JS client in the
//! loop, and no client's clock in the decision. A server reached over TCP
//! is driven by the JS thread's own event loop (`via_loop`, `wire`); one
//! behind a unix socket, or a URL naming several hosts, by tokio-postgres on
//! Tokio (`pool`).
//!
//! The table is the docs' database store's, so processes using either
//! exclude each other; what this store adds lives beside it (a sequence for
//! fencing tokens, a notification channel). Each operation is one prepared
//! statement, one round trip, and every time in it is the server's.
//!
//! Read in this order: this file (the store, its one dispatch on the kind
//! of hold, and how each operation is bounded by the connect and command
//! timeouts), `lock` (a plain lock's operations, one statement each) and
//! `holds` (the other kinds'), `sql` (the statements),
//! `via_loop` and `wire` (the operations on the event loop's connections,
//! and PostgreSQL's protocol for them), `pool` (the connections on Tokio),
//! `listen` (releases announced and heard),
//! `errors` (what becomes which error code; a statement that finds its
//! connection dead is sent again, which each allows: an acquire sent again
//! finds its own row, an extend repeats, a release deletes only its own
//! owner's row, reads are reads), `options` (the URL).

mod errors;
mod holds;
mod listen;
mod lock;
mod options;
mod pool;
mod sql;
mod sweep;
mod via_loop;
mod wire;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::mpsc;
use tokio_postgres::types::Type;

use self::errors::{Failure, RESENDS};
use self::listen::Watch;
pub use self::options::PostgresOptions;

/// The SQL that makes every object a store on `table` uses (what it runs
/// itself when they are missing and it may): for a database whose users
/// may not create objects, to run once as one who may.
pub fn schema(table: &str) -> String {
    Sql::new(table).create
}
use self::pool::{Conn, Opener, Pool};
use self::sql::Sql;
use super::event_loop::host::MakeHost;
use super::follow::{OnReleased, OnWarning};
use super::options::whole_ms;
use super::tls::client_config;
use super::{Acquired, Capabilities, Hold, HoldOp, LockStore, Op, StoreError, Task};

/// The parameters' types, given with each statement (nothing is prepared
/// to ask the server for them).
const TEXT: Type = Type::TEXT;
const INT8: Type = Type::INT8;

/// Expired rows deleted per statement when sweeping, and statements per sweep.
const SWEEP_BATCH: i64 = 500;
const SWEEP_BATCHES: usize = 20;

struct Shared {
    options: PostgresOptions,
    opener: Arc<Opener>,
    /// Where the LISTEN connection goes: `listenUrl`'s server, else `opener`.
    listen_opener: Arc<Opener>,
    /// Where a warning goes (a listener that hears nothing).
    on_warning: Option<OnWarning>,
    pool: Pool,
    /// When expired rows were last swept (None: not yet).
    swept: Mutex<Option<Instant>>,
    /// Taken by `close()`: it holds the JS callback, which holds the store.
    on_released: Mutex<Option<OnReleased>>,
    /// The listener task's inbox, once it runs; dropping it ends the task.
    watcher: Mutex<Option<mpsc::UnboundedSender<Watch>>>,
}

pub struct PostgresStore {
    shared: Arc<Shared>,
    /// The connections, driven by the JS thread's own event loop (one
    /// server over TCP); otherwise they live on Tokio (`pool`).
    direct: Option<wire::Direct>,
}

impl PostgresStore {
    /// Read the URL and certificates now (a bad one is the caller's mistake,
    /// reported at once); connections open on the first operation.
    pub fn new(
        options: PostgresOptions,
        on_released: Option<OnReleased>,
        on_warning: Option<OnWarning>,
        make_host: Option<MakeHost<'_>>,
    ) -> Result<Self, String> {
        let target = options::target(&options)?;
        let listen_target = options::listen_target(&options)?;
        let mut tls = None;
        let mut tls_for = |wanted: bool| -> Result<_, String> {
            if !wanted {
                return Ok(None);
            }
            if tls.is_none() {
                tls = Some(client_config(&options.tls.clone().unwrap_or_default())?);
            }
            Ok(tls.clone())
        };
        let sql = Arc::new(Sql::new(&options.table));
        let opener = Arc::new(Opener {
            tls: tls_for(target.tls)?,
            target,
            sql: Arc::clone(&sql),
        });
        let listen_opener = match listen_target {
            Some(target) => Arc::new(Opener {
                tls: tls_for(target.tls)?,
                target,
                sql,
            }),
            None => Arc::clone(&opener),
        };
        let store = PostgresStore {
            shared: Arc::new(Shared {
                pool: Pool::new(options.pool_size),
                options,
                opener,
                listen_opener,
                on_warning,
                swept: Mutex::new(None),
                on_released: Mutex::new(on_released),
                watcher: Mutex::new(None),
            }),
            direct: None,
        };
        match make_host {
            Some(make_host) => store.on_event_loop(make_host),
            None => Ok(store),
        }
    }

    /// Drop the connections. Operations after this fail with a "closed"
    /// error; ones already sent finish on the connection they hold.
    fn shut(&self) {
        self.shared.pool.close();
        if let Some(direct) = &self.direct {
            direct.close();
        }
        if let Ok(mut watcher) = self.shared.watcher.lock() {
            *watcher = None;
        }
        if let Ok(mut on_released) = self.shared.on_released.lock() {
            *on_released = None;
        }
    }

    /// Run one statement on `key`'s pooled connection, within the store's
    /// time bounds; sent again on a fresh connection if it found its own dead.
    fn op<T, F, Fut>(&self, name: &'static str, key: Option<&str>, run: F) -> Op<T>
    where
        T: Send + 'static,
        F: Fn(Arc<Conn>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<T, tokio_postgres::Error>> + Send,
    {
        let shared = Arc::clone(&self.shared);
        let key = key.map(str::to_owned);
        Op::Pending(Box::pin(async move {
            let options = &shared.options;
            let mut resent = 0;
            let failure = loop {
                let taken = match tokio::time::timeout(
                    options.connect_timeout,
                    shared.pool.take(&shared.opener, key.as_deref()),
                )
                .await
                {
                    Ok(Ok(taken)) => taken,
                    Ok(Err(failure)) => break failure,
                    Err(_) => break Failure::Timeout(options.connect_timeout),
                };
                match tokio::time::timeout(options.command_timeout, run(Arc::clone(&taken.conn)))
                    .await
                {
                    Ok(Ok(value)) => return Ok(value),
                    Ok(Err(e)) => {
                        let failure = Failure::from(e);
                        if !failure.found_dead() {
                            break failure;
                        }
                        shared.pool.discard(&taken).await;
                        if resent == RESENDS {
                            break failure;
                        }
                        resent += 1;
                    }
                    Err(_) => {
                        // The connection stays, with the statement on it: a
                        // give-back the caller sends next goes to this same
                        // connection, so it runs after the statement, even
                        // one held up in a stalled server process. (On a
                        // fresh connection it could run first, and the late
                        // acquire would take the key for nobody.)
                        break Failure::Timeout(options.command_timeout);
                    }
                }
            };
            Err(failure.into_store_error(name, &shared.opener.target.display))
        }))
    }
}

/// PostgreSQL `text` holds no NUL character: such a key or owner is refused
/// before it is sent, with a reason, instead of as an encoding error.
fn unstorable(name: &str, key: &str, owner: &str) -> Option<StoreError> {
    (!storable(&[key, owner])).then(|| {
        StoreError::Type(format!(
            "PostgresLockStore.{name}: PostgreSQL text cannot hold a NUL character (\\u0000), and this key or owner has one"
        ))
    })
}

/// Whether PostgreSQL text can hold all of `texts`. A key it cannot hold
/// is in no row: reads answer "free", release and extend `false`.
fn storable(texts: &[&str]) -> bool {
    texts.iter().all(|t| !t.contains('\0'))
}

fn ttl_of(ttl_ms: f64) -> i64 {
    // `whole_ms` is at most 2^53 - 1, which fits.
    i64::try_from(whole_ms(ttl_ms)).unwrap_or(i64::MAX)
}

/// One dispatch on the kind of hold: a plain lock is a row of the table and
/// one statement per operation (`lock`); the other kinds are one call each
/// of the hold function (`holds`).
impl LockStore for PostgresStore {
    fn acquire(&self, hold: Hold, key: &str, owner: &str, ttl_ms: f64) -> Op<Acquired> {
        match hold {
            Hold::Lock => self.acquire_lock(key, owner, ttl_ms),
            _ => self.hold_op(HoldOp::Acquire, hold, key, owner, ttl_ms, holds::token),
        }
    }

    fn release(&self, hold: Hold, key: &str, owner: &str) -> Op<bool> {
        match hold {
            Hold::Lock => self.release_lock(key, owner),
            _ => self.hold_op(HoldOp::Release, hold, key, owner, 1.0, holds::done),
        }
    }

    fn extend(&self, hold: Hold, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        match hold {
            Hold::Lock => self.extend_lock(key, owner, ttl_ms),
            _ => self.hold_op(HoldOp::Extend, hold, key, owner, ttl_ms, holds::done),
        }
    }

    fn holds(&self, hold: Hold, key: &str, owner: &str) -> Op<bool> {
        match hold {
            Hold::Lock => self.lock_held_by(key, owner),
            _ => self.hold_op(HoldOp::Left, hold, key, owner, 1.0, holds::done),
        }
    }

    fn remaining(&self, hold: Hold, key: &str, owner: Option<&str>) -> Op<Option<f64>> {
        match (hold, owner) {
            (Hold::Lock, _) => self.lock_remaining(key),
            (_, Some(owner)) => self.hold_op(HoldOp::Left, hold, key, owner, 1.0, holds::left),
            (_, None) => Op::Ready(Ok(None)),
        }
    }

    fn would_wait(&self, hold: Hold, key: &str) -> Op<bool> {
        match hold {
            Hold::Lock => self.is_locked(key),
            _ => self.hold_op(HoldOp::Waits, hold, key, "", 1.0, holds::done),
        }
    }

    fn holders(&self, hold: Hold, key: &str) -> Op<f64> {
        match hold {
            Hold::Lock => self
                .is_locked(key)
                .map(|locked| f64::from(u8::from(locked))),
            _ => self.hold_op(HoldOp::Count, hold, key, "", 1.0, holds::count),
        }
    }

    fn withdraw(&self, hold: Hold, key: &str) -> Op<()> {
        match hold {
            Hold::Write => self.hold_op(HoldOp::Withdraw, hold, key, "", 1.0, holds::nothing),
            _ => Op::Ready(Ok(())),
        }
    }

    fn watch(&self, hold: Hold, key: &str, on: bool) -> Option<Task> {
        self.follow(hold, key, on)
            .map(|listener| -> Task { Box::pin(listener) })
    }

    fn close(&self) {
        self.shut();
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            announces_releases: true,
            ..Capabilities::default()
        }
    }
}
