//! A store on a PostgreSQL server, spoken to natively: no JS client in the
//! loop, and no client's clock in the decision. A server reached over TCP
//! is driven by the JS thread's own event loop (`via_loop`, `wire`); one
//! behind a unix socket, or a URL naming several hosts, by tokio-postgres on
//! Tokio (`via_tokio`, `pool`). Which one is chosen once, as the store is
//! made (`transport`).
//!
//! The table is the docs' database store's, so processes using either
//! exclude each other; what this store adds lives beside it (a sequence for
//! fencing tokens, notification channels, the line a plain lock's waiters
//! wait in). Each operation is one prepared statement, one round trip, and
//! every time in it is the server's.
//!
//! Read in this order: this file (the store, and its one dispatch on the
//! kind of hold), `ops` (every operation once, as data: its statement, its
//! parameters, its key, and the reader of its answer), `answer` (what
//! either transport reads of an answer, and the readers), `sql` (the
//! statements), `holds_sql` and `line_sql` (the functions of semaphores and
//! read-write locks, and of the line), `transport` (how statements reach the server, chosen once
//! as the store is made) with `via_loop` and `wire` (the event loop's
//! connections, and PostgreSQL's protocol for them) or `via_tokio` and
//! `pool` (tokio-postgres connections on Tokio), `listen` (releases
//! announced and heard), `errors` (what becomes which error code; a
//! statement that finds its connection dead is sent again, which each
//! allows: an acquire sent again finds its own row, an extend repeats, a
//! release deletes only its own owner's row, reads are reads), `options`
//! (the URL); `tests` runs both transports against a cluster of its own.

mod answer;
mod errors;
mod hashes;
mod holds_sql;
mod line_sql;
#[cfg(test)]
mod line_tests;
mod listen;
mod ops;
mod options;
mod pool;
mod shared;
mod sql;
#[cfg(test)]
mod tests;
mod transport;
mod via_loop;
mod via_tokio;
mod wire;

use std::sync::Arc;

use self::ops::Plan;
pub(super) use self::wire::target::first_words;

/// The SQL that makes every object a store on `table` uses (what it runs
/// itself when they are missing and it may): for a database whose users
/// may not create objects, to run once as one who may.
pub fn schema(table: &str) -> String {
    Sql::new(table).create
}
use self::answer::hold_token;
use self::line_sql::WAKE_CHANNEL;
use self::pool::Opener;
use self::shared::Shared;
use self::sql::Sql;
use self::transport::Transport;
use super::event_loop::host::MakeHost;
use super::follow::{Follower, OnReleased, OnWarning, Released};
use super::sweeps::Sweeps;
use super::tls::client_config;
use super::{
    Acquired, Asked, Capabilities, HoldKind, HoldOp, LockStore, Op, TableOptions, Task, Wait,
};
use crate::owner;

pub struct PostgresStore {
    shared: Arc<Shared>,
    transport: Transport,
}

impl PostgresStore {
    /// Read the URL and certificates now (a bad one is the caller's mistake,
    /// reported at once); connections open on the first operation.
    pub fn new(
        options: TableOptions, listen_url: Option<&str>, on_released: Option<OnReleased>,
        on_warning: Option<OnWarning>, make_host: Option<MakeHost<'_>>,
    ) -> Result<Self, String> {
        let target = options::target(&options)?;
        let listen_target = options::listen_target(&options, listen_url)?;
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
        let shared = Arc::new(Shared {
            sweeps: Sweeps::every(options.sweep_interval),
            options,
            opener,
            listen_opener,
            on_warning,
            follower: Follower::new(on_released),
            me: owner::mint().as_str().to_owned(),
        });
        let transport = Transport::chosen(&shared, make_host)?;
        Ok(PostgresStore { shared, transport })
    }

    /// Run `plan` on the store's transport (or answer it at once, when it
    /// needs no round trip).
    fn send<T: Send + 'static>(&self, plan: Plan<T>) -> Op<T> {
        match plan {
            Plan::Send(request, read) => self.transport.send(&self.shared, request, read),
            Plan::Known(result) => Op::Ready(result),
        }
    }
}

/// One dispatch on the kind of hold: a plain lock is a row of the table and
/// one statement per operation; the other kinds are one call each of the
/// hold function (both in `ops`).
impl LockStore for PostgresStore {
    fn acquire(
        &self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64, wait: Wait,
    ) -> Op<Acquired> {
        self.send(match hold {
            HoldKind::Lock => ops::acquire_lock(key, owner, ttl_ms, self.shared.line(), wait),
            _ => ops::hold(HoldOp::Acquire, hold, key, owner, ttl_ms, hold_token),
        })
    }

    fn release(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        match hold {
            HoldKind::Lock => {
                let (shared, key) = (Arc::clone(&self.shared), key.to_owned());
                self.send(ops::release_lock(&key, owner, shared.line()))
                    .map(move |release| release.tell(&key, &shared.follower))
            }
            _ => self.send(ops::hold(
                HoldOp::Release,
                hold,
                key,
                owner,
                1.0,
                answer::hold_done,
            )),
        }
    }

    fn extend(&self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        self.send(match hold {
            HoldKind::Lock => ops::extend_lock(key, owner, ttl_ms),
            _ => ops::hold(HoldOp::Extend, hold, key, owner, ttl_ms, answer::hold_done),
        })
    }

    fn holds(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        self.send(match hold {
            HoldKind::Lock => ops::lock_held_by(key, owner),
            _ => ops::hold(HoldOp::Left, hold, key, owner, 1.0, answer::hold_done),
        })
    }

    fn remaining(&self, hold: HoldKind, key: &str, owner: Option<&str>) -> Op<Option<f64>> {
        self.send(match (hold, owner) {
            (HoldKind::Lock, _) => ops::lock_remaining(key),
            (_, Some(owner)) => ops::hold(HoldOp::Left, hold, key, owner, 1.0, answer::hold_left),
            (_, None) => Plan::Known(Ok(None)),
        })
    }

    fn would_wait(&self, hold: HoldKind, key: &str) -> Op<bool> {
        self.send(match hold {
            HoldKind::Lock => ops::is_locked(key),
            _ => ops::hold(HoldOp::Waits, hold, key, "", 1.0, answer::hold_done),
        })
    }

    fn holders(&self, hold: HoldKind, key: &str) -> Op<f64> {
        match hold {
            HoldKind::Lock => self
                .send(ops::is_locked(key))
                .map(|locked| f64::from(u8::from(locked))),
            _ => self.send(ops::hold(
                HoldOp::Count,
                hold,
                key,
                "",
                1.0,
                answer::hold_count,
            )),
        }
    }

    fn withdraw(&self, hold: HoldKind, key: &str) -> Op<()> {
        match hold {
            HoldKind::Write => self.send(ops::hold(
                HoldOp::Withdraw,
                hold,
                key,
                "",
                1.0,
                answer::hold_nothing,
            )),
            _ => Op::Ready(Ok(())),
        }
    }

    /// Follow (or stop following) announced releases of `key`'s holds in
    /// `hold`: the first call returns the listener task (`listen`).
    fn watch(&self, hold: HoldKind, key: &str, on: bool) -> Option<Task> {
        let released = Released::of(hold);
        let shared = &self.shared;
        let watch = ((released, key.to_owned()), on);
        let listener = shared.follower.follow(watch, |inbox, on_released| {
            listen::listener(
                format!("{WAKE_CHANNEL}{}", shared.me),
                Arc::clone(&shared.listen_opener),
                Arc::clone(&shared.opener),
                shared.options.connect_timeout,
                inbox,
                on_released,
                shared.on_warning.clone(),
            )
        })?;
        Some(Box::pin(listener))
    }

    fn claim(&self, key: &str, owner: &str, ttl_ms: f64, more: Option<Asked>) -> Op<bool> {
        match self.shared.line() {
            Some(me) => self.send(ops::claim_lock(key, owner, ttl_ms, me, more)),
            None => self.extend(HoldKind::Lock, key, owner, ttl_ms),
        }
    }

    fn leave_line(&self, key: &str) -> Op<()> {
        match self.shared.line() {
            Some(me) => self.send(ops::leave_line(key, me)),
            None => Op::Ready(Ok(())),
        }
    }

    fn ping(&self) -> Op<()> {
        self.send(ops::ping())
    }

    /// Drop the connections. Operations after this fail with a "closed"
    /// error; ones already sent finish on the connection they hold.
    fn close(&self) {
        self.transport.close();
        self.shared.follower.close();
    }

    fn sent(&self, key: &str) -> Op<()> {
        self.transport.sent(key)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            announces_releases: true,
            tells_when_sent: self.transport.tells_when_sent(),
            // Where the database lacks the line's objects (and they cannot be
            // made), nobody is handed a lock and waiters poll and listen as
            // without a line.
            waits_in_line: true,
            ..Capabilities::default()
        }
    }
}
