//! `SqliteLockStore`: the processes of one machine coordinated through one
//! SQLite file, with no server. Read in this order: `options`, `clock` (the
//! machine's monotonic clock, and which boot the holds belong to), `sql`,
//! `busy` (waiting for another process's write), `errors`, `open` (the
//! file, checked, its tables, an earlier boot's holds let go), `ops`.
//!
//! Each store keeps one connection and answers every operation at once, on
//! the calling thread ([`Op::Ready`]): a lock's statements take
//! microseconds, and SQLite lets one connection of any process write at a
//! time, so a write waits only for another's to end (`busy`).

mod busy;
mod clock;
mod errors;
mod open;
mod ops;
mod options;
mod sql;

use std::sync::{Mutex, PoisonError};

use self::errors::{closed, failure};
use self::open::{open, Db};
pub use self::options::SqliteOptions;
use crate::store::sweeps::Sweeps;
use crate::store::{Acquired, Capabilities, HoldKind, LockStore, Op, StoreError, Wait};

pub struct SqliteStore {
    options: SqliteOptions,
    /// `None` once closed.
    db: Mutex<Option<Db>>,
    sweeps: Sweeps,
}

impl SqliteStore {
    /// Opens the file now: a bad path fails here, naming it.
    pub fn new(options: SqliteOptions) -> Result<SqliteStore, StoreError> {
        let db = open(&options)?;
        Ok(SqliteStore {
            sweeps: Sweeps::every(options.sweep_interval),
            db: Mutex::new(Some(db)),
            options,
        })
    }

    /// Run the operation `name` on the connection, now.
    fn with<T: Send + 'static>(
        &self, name: &str, op: impl FnOnce(&mut Db) -> rusqlite::Result<T>,
    ) -> Op<T> {
        let mut db = self.db.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(db) = db.as_mut() else {
            return Op::Ready(Err(closed(name)));
        };
        busy::start(self.options.command_timeout);
        Op::Ready(op(db).map_err(|e| failure(name, &self.options.path, &e)))
    }
}

impl LockStore for SqliteStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    fn acquire(
        &self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64, _wait: Wait,
    ) -> Op<Acquired> {
        let sweep = self.sweeps.due();
        self.with("acquire", |db| {
            if sweep {
                ops::sweep(db)?;
            }
            ops::acquire(db, hold, key, owner, ttl_ms)
        })
    }

    fn release(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        self.with("release", |db| ops::release(db, hold, key, owner))
    }

    fn extend(&self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        self.with("extend", |db| ops::extend(db, hold, key, owner, ttl_ms))
    }

    fn holds(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        self.with("holds", |db| ops::holds(db, hold, key, owner))
    }

    fn remaining(&self, hold: HoldKind, key: &str, owner: Option<&str>) -> Op<Option<f64>> {
        self.with("remainingTime", |db| ops::remaining(db, hold, key, owner))
    }

    fn would_wait(&self, hold: HoldKind, key: &str) -> Op<bool> {
        self.with("isLocked", |db| ops::would_wait(db, hold, key))
    }

    fn holders(&self, hold: HoldKind, key: &str) -> Op<f64> {
        self.with("holders", |db| ops::holders(db, hold, key))
    }

    fn withdraw(&self, _hold: HoldKind, key: &str) -> Op<()> {
        self.with("withdraw", |db| ops::withdraw(db, key))
    }

    fn ping(&self) -> Op<()> {
        self.with("ping", |db| ops::ping(db))
    }

    /// Close the connection; operations after this fail as closed.
    fn close(&self) {
        let mut db = self.db.lock().unwrap_or_else(PoisonError::into_inner);
        db.take();
    }
}

#[cfg(test)]
mod tests;
