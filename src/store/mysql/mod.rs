//! A store on a MySQL or MariaDB server, spoken to natively: no JS client in
//! the loop, and no client's clock in the decision. Connections are driven
//! by the JS thread's own event loop (`wire`, on [`crate::store::event_loop`]);
//! each operation is one statement, one round trip, and every time in it is
//! the server's.
//!
//! Read in this order: this file (the store, and its one dispatch on the
//! kind of hold), `ops` (every operation once, as data: its statements, its
//! key, and the reader of its answer, from `answer`), `sql` (the statements and the
//! tables), `holds_sql` (the procedure of semaphores and read-write locks),
//! `line_sql` (the line plain locks' waiters wait in, and `ear`, how this
//! process hears of a lock handed to it),
//! `wire` (the protocol on the event loop, and `wire::connect`, how a
//! connection is opened and logged in), `errors` (what becomes which error
//! code; a statement that finds its connection dead is sent again, which
//! each allows), `options` (the URL).

mod answer;
mod ear;
mod errors;
mod hashes;
mod holds_sql;
mod line_sql;
mod ops;
pub mod options;
mod shared;
mod sql;
mod sweep;
mod transport;
mod wire;

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

use rustls::pki_types::ServerName;

use self::answer::{hold_token, Freed, Reader};
use self::ops::Request;
use self::options::{Place, TlsMode};
use self::shared::Shared;
use self::sql::Sql;
use self::transport::submit;
pub(super) use self::wire::target::first_words;
use self::wire::target::Target;
use self::wire::Direct;
use super::event_loop::host::MakeHost;
use super::event_loop::Endpoint;
use super::follow::{Follower, OnReleased};
use super::line::Release;
use super::sweeps::Sweeps;
use super::tls::client_config;
use super::{
    Acquired, Asked, Capabilities, HoldKind, HoldOp, LockStore, Op, StoreResult, TableOptions,
    Task, Wait,
};

/// The SQL that makes every object a store on `table` uses (what it runs
/// itself when they are missing and it may): for a database whose users
/// may not create objects, to run once as one who may.
pub fn schema(table: &str) -> String {
    Sql::new(table).script()
}

pub struct MySqlStore {
    shared: Arc<Shared>,
    direct: Direct,
}

impl MySqlStore {
    /// Read the URL and certificates now (a bad one is the caller's mistake,
    /// reported at once); connections open on the first operation, on the
    /// loop `make_host` gives (the JS thread making the store).
    pub fn new(
        options: TableOptions, on_released: Option<OnReleased>, make_host: MakeHost<'_>,
    ) -> Result<Self, String> {
        let address = options::address(&options)?;
        let tls = match (address.tls, &address.place) {
            (TlsMode::Off, _) | (_, Place::Socket(_)) => None,
            (_, Place::Tcp { host, .. }) => {
                let config = client_config(&options.tls.clone().unwrap_or_default())?;
                let name = ServerName::try_from(host.clone())
                    .map_err(|e| format!("url: {host:?} is not a host name TLS can check: {e}"))?;
                Some((config, name))
            }
        };
        let command_timeout =
            u64::try_from(options.command_timeout.as_millis()).unwrap_or(u64::MAX);
        let sql = Sql::new(&options.table);
        let target = Target {
            place: address.place,
            tls,
            tls_optional: address.tls == TlsMode::Preferred,
            user: address.user,
            password: address.password,
            database: address.database,
            connect_timeout: options.connect_timeout,
            lock_wait_s: command_timeout.div_ceil(1000),
            display: address.display,
            sql: Arc::new(sql),
            objects_ready: AtomicBool::new(false),
            max_allowed_packet: AtomicUsize::new(0),
            refused: Default::default(),
        };
        let endpoint = Endpoint::new(
            &target.display,
            options.connect_timeout,
            options.command_timeout,
        );
        let direct = Direct::new(make_host, target, endpoint, options.pool_size)?;
        Ok(MySqlStore {
            shared: Arc::new(Shared {
                sweeps: Sweeps::every(options.sweep_interval),
                follower: Follower::new(on_released),
                me: crate::owner::mint().as_str().to_owned(),
            }),
            direct,
        })
    }

    /// Send the operation `plan` makes of the store's statements, on its
    /// key's connection; its answer becomes the operation's on this thread.
    fn send<T: 'static>(&self, plan: impl FnOnce() -> (Request, Reader<T>)) -> Op<T> {
        let planned = plan();
        let shared = Arc::clone(&self.shared);
        let name = planned.0.name;
        self.direct.operation(name, move |local, done| {
            submit(&local, &shared, planned, done)
        })
    }

    /// A plain acquire; refused, the same attempt through the line. With
    /// more of this process waiting, straight through the line: taking the
    /// lock there keeps them a place at the back, which the plain insert
    /// would not.
    fn acquire_lock(&self, key: &str, owner: &str, ttl_ms: f64, wait: Wait) -> Op<Acquired> {
        if let Wait::InLineWithMore(_) = wait {
            let me = &self.shared.me;
            return self.send(|| ops::acquire_in_line(key, owner, ttl_ms, me, wait));
        }
        let first = ops::acquire_lock(key, owner, ttl_ms);
        let (shared, key, owner) = (Arc::clone(&self.shared), key.to_owned(), owner.to_owned());
        self.direct.operation(first.0.name, move |local, done| {
            let (again, then) = (local.clone(), Arc::clone(&shared));
            let refused = Box::new(move |outcome: StoreResult<Acquired>| match outcome {
                Ok(Acquired::Refused) => {
                    let plan = ops::acquire_in_line(&key, &owner, ttl_ms, &then.me, wait);
                    submit(&again, &then, plan, done)
                }
                outcome => done(outcome),
            });
            submit(&local, &shared, first, refused)
        })
    }

    /// A plain release; where someone waits, the lock goes on to the first
    /// in line (a hand-on that fails leaves it free, for the line to find).
    fn release_lock(&self, key: &str, owner: &str) -> Op<bool> {
        let first = ops::release_lock(key, owner);
        let (shared, key, owner) = (Arc::clone(&self.shared), key.to_owned(), owner.to_owned());
        self.direct.operation(first.0.name, move |local, done| {
            let (again, then) = (local.clone(), Arc::clone(&shared));
            let marked = Box::new(move |outcome: StoreResult<Freed>| match outcome {
                Ok(Freed::Marked) => {
                    let plan = ops::hand_on(&key, &owner, &then.me);
                    let told = Arc::clone(&then);
                    let handed = Box::new(move |outcome: StoreResult<Release>| {
                        if let Ok(release) = outcome {
                            release.tell(&key, &told.follower);
                        }
                        done(Ok(true))
                    });
                    submit(&again, &then, plan, handed)
                }
                outcome => done(outcome.map(|freed| freed == Freed::Released)),
            });
            submit(&local, &shared, first, marked)
        })
    }
}

/// One dispatch on the kind of hold: a plain lock is a row of the table and
/// one statement per operation (and a step of the line after an acquire
/// refused, or a release that freed a lock someone waits for); the other
/// kinds are one CALL each of the hold procedure (all in `ops`).
impl LockStore for MySqlStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            tells_when_sent: true,
            // A key's commands all go on its connection, which the server
            // answers in order: a waiter's attempt can follow a release.
            answers_in_order: true,
            // Locks handed to this process are heard (a watch of a plain
            // lock starts the ear); the other kinds are polled.
            announces_releases: true,
            waits_in_line: true,
            ..Capabilities::default()
        }
    }

    fn acquire(
        &self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64, wait: Wait,
    ) -> Op<Acquired> {
        match hold {
            HoldKind::Lock => self.acquire_lock(key, owner, ttl_ms, wait),
            _ => self.send(|| ops::hold(HoldOp::Acquire, hold, key, owner, ttl_ms, hold_token)),
        }
    }

    fn release(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        match hold {
            HoldKind::Lock => self.release_lock(key, owner),
            _ => self.send(|| ops::hold(HoldOp::Release, hold, key, owner, 1.0, answer::hold_done)),
        }
    }

    fn extend(&self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        self.send(|| match hold {
            HoldKind::Lock => ops::extend_lock(key, owner, ttl_ms),
            _ => ops::hold(HoldOp::Extend, hold, key, owner, ttl_ms, answer::hold_done),
        })
    }

    fn holds(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        match hold {
            HoldKind::Lock => self.send(|| ops::lock_held_by(key, owner)),
            _ => self
                .send(|| ops::hold(HoldOp::Left, hold, key, owner, 1.0, answer::hold_left))
                .map(|left| left.is_some()),
        }
    }

    fn remaining(&self, hold: HoldKind, key: &str, owner: Option<&str>) -> Op<Option<f64>> {
        match (hold, owner) {
            (HoldKind::Lock, _) => self.send(|| ops::lock_remaining(key)),
            (_, Some(owner)) => {
                self.send(|| ops::hold(HoldOp::Left, hold, key, owner, 1.0, answer::hold_left))
            }
            (_, None) => Op::Ready(Ok(None)),
        }
    }

    fn would_wait(&self, hold: HoldKind, key: &str) -> Op<bool> {
        self.send(|| match hold {
            HoldKind::Lock => ops::is_locked(key),
            _ => ops::hold(HoldOp::Waits, hold, key, "", 1.0, answer::hold_done),
        })
    }

    fn holders(&self, hold: HoldKind, key: &str) -> Op<f64> {
        match hold {
            HoldKind::Lock => self
                .send(|| ops::is_locked(key))
                .map(|locked| f64::from(u8::from(locked))),
            _ => self.send(|| ops::hold(HoldOp::Count, hold, key, "", 1.0, answer::hold_count)),
        }
    }

    fn withdraw(&self, hold: HoldKind, key: &str) -> Op<()> {
        match hold {
            HoldKind::Write => {
                self.send(|| ops::hold(HoldOp::Withdraw, hold, key, "", 1.0, answer::hold_nothing))
            }
            _ => Op::Ready(Ok(())),
        }
    }

    fn sent(&self, key: &str) -> Op<()> {
        self.direct.sent(key)
    }

    fn watch(&self, hold: HoldKind, key: &str, on: bool) -> Option<Task> {
        if hold != HoldKind::Lock {
            return None;
        }
        let target = self.direct.local()?.shared_target();
        let me = self.shared.me.clone();
        self.shared
            .follower
            .follow((key.to_owned(), on), |inbox, on_released| -> Task {
                Box::pin(ear::ear(target, me, inbox, on_released))
            })
    }

    fn claim(&self, key: &str, owner: &str, ttl_ms: f64, more: Option<Asked>) -> Op<bool> {
        self.send(|| ops::claim_lock(key, owner, ttl_ms, &self.shared.me, more))
    }

    fn leave_line(&self, key: &str) -> Op<()> {
        self.send(|| ops::leave_line(key, &self.shared.me))
    }

    fn ping(&self) -> Op<()> {
        self.send(ops::ping)
    }

    fn close(&self) {
        self.shared.follower.close();
        self.direct.close();
    }
}

#[cfg(all(test, unix))]
mod tests;
