//! `SqliteLockStore`: the processes of one machine coordinated through one
//! SQLite file, with no server. Read in this order: `options`, `clock` (the
//! machine's monotonic clock, and which boot the holds belong to), `sql`,
//! `place` (where the file may be), `busy` (waiting for another process's write), `checkpoint` (the log
//! copied into the file on a thread of its own), `errors`, `open` (the
//! file, checked, its tables, an earlier boot's holds let go), `ops`, `ear`
//! (hearing releases from the other processes on the file), `line` (the
//! line a plain lock's waiters wait in), `queued` (run()'s releases,
//! written with the next operation).
//!
//! Each store keeps one connection and answers every operation at once, on
//! the calling thread ([`Op::Ready`]): a lock's statements take
//! microseconds, and SQLite lets one connection of any process write at a
//! time, so a write waits only for another's to end (`busy`).

mod busy;
mod checkpoint;
mod clock;
mod ear;
mod errors;
mod line;
mod open;
mod ops;
mod options;
mod place;
mod queued;
mod sql;

use std::sync::{Mutex, PoisonError};

use self::ear::Ears;
use self::errors::{closed, failure};
use self::line::{HandOver, Place};
use self::open::{open, Db};
use self::ops::Swept;
pub use self::options::SqliteOptions;
use self::queued::{QueuedReleases, Release};
use crate::store::follow::{OnReleased, Released};
use crate::store::sweeps::Sweeps;
use crate::store::{
    Acquired, Asked, Capabilities, HoldKind, LockStore, Op, StoreError, Task, Wait,
};

pub struct SqliteStore {
    options: SqliteOptions,
    /// `None` once closed.
    db: Mutex<Option<Db>>,
    /// When a sweep pass may start, and where the one under way stands.
    sweeps: Sweeps,
    pass: Mutex<Option<Pass>>,
    ears: Ears,
    queued: QueuedReleases,
}

/// A sweep pass under way: the key each table goes on from, `None` once
/// the table is done. Each acquire sweeps one batch, so no acquire pauses
/// long, however large the tables.
struct Pass {
    locks: Option<String>,
    holds: Option<String>,
}

impl SqliteStore {
    /// Opens the file now: a bad path fails here, naming it. Releases in
    /// other processes of keys this one waits for go to `on_released`.
    pub fn new(
        options: SqliteOptions, on_released: Option<OnReleased>,
    ) -> Result<SqliteStore, StoreError> {
        let db = open(&options)?;
        Ok(SqliteStore {
            sweeps: Sweeps::every(options.sweep_interval),
            pass: Mutex::new(None),
            ears: Ears::new(on_released),
            db: Mutex::new(Some(db)),
            queued: QueuedReleases::new(options.path.clone(), options.command_timeout),
            options,
        })
    }

    /// Run the operation `name` on the connection, now, after the
    /// releases queued before it.
    fn with<T: Send + 'static>(
        &self, name: &str, op: impl FnOnce(&mut Db) -> rusqlite::Result<T>,
    ) -> Op<T> {
        self.on_file(name, false, |db| {
            self.write_queued(db);
            op(db)
        })
    }

    /// The same, for an operation that gives or keeps a hold: first, if the
    /// file at the path is no longer the one open (deleted or replaced),
    /// the path is opened again, so this process holds and waits in the
    /// same file as every process that opens the path now.
    fn granting<T: Send + 'static>(
        &self, name: &str, op: impl FnOnce(&mut Db) -> rusqlite::Result<T>,
    ) -> Op<T> {
        self.on_file(name, true, |db| {
            self.write_queued(db);
            op(db)
        })
    }

    fn on_file<T: Send + 'static>(
        &self, name: &str, follow_the_path: bool, op: impl FnOnce(&mut Db) -> rusqlite::Result<T>,
    ) -> Op<T> {
        let mut db = self.db.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(open_db) = db.as_mut() else {
            return Op::Ready(Err(closed(name)));
        };
        if follow_the_path && open_db.moved() {
            // Queued releases are of locks in the file open until now.
            self.write_queued(open_db);
            match open(&self.options) {
                Ok(reopened) => *open_db = reopened,
                Err(e) => return Op::Ready(Err(e)),
            }
        }
        busy::start(self.options.command_timeout);
        Op::Ready(op(open_db).map_err(|e| failure(name, &self.options.path, &e)))
    }

    /// Write the releases queued so far (`queued`).
    fn write_queued(&self, db: &mut Db) {
        let releases = self.queued.take();
        if !releases.is_empty() {
            let release: Release<'_> = &|db, key, owner| self.release_lock(db, key, owner);
            self.queued.write(db, &releases, release);
        }
    }

    /// A plain lock's release, told to whoever it concerns.
    fn release_lock(&self, db: &mut Db, key: &str, owner: &str) -> rusqlite::Result<bool> {
        let (held, released) = line::release(db, key, owner, self.ears.address())?;
        // Handed on, the lock's waiters elsewhere wait for their turn;
        // with nobody in line, those that watch are told it is free.
        match released {
            line::Released::HandedOn(hand_over) => self.tell_hand_over(Some(hand_over)),
            line::Released::Ears(ears) => self.tell_ears(db, ears, HoldKind::Lock, key),
            line::Released::Nobody | line::Released::Alone => {}
        }
        Ok(held)
    }

    /// The batch this acquire sweeps, if a pass is under way or due.
    fn sweep_batch(&self) -> Option<(Swept, String)> {
        let mut pass = self.pass.lock().unwrap_or_else(PoisonError::into_inner);
        if pass.is_none() && self.sweeps.due() {
            *pass = Some(Pass {
                locks: Some(String::new()),
                holds: Some(String::new()),
            });
        }
        let under_way = pass.as_ref()?;
        let batch = match (&under_way.locks, &under_way.holds) {
            (Some(from), _) => (Swept::Locks, from.clone()),
            (None, Some(from)) => (Swept::Holds, from.clone()),
            (None, None) => {
                *pass = None;
                return None;
            }
        };
        Some(batch)
    }

    /// A batch of `table` was swept: the pass goes on from `next`.
    fn swept(&self, table: Swept, next: Option<String>) {
        let mut pass = self.pass.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(under_way) = pass.as_mut() {
            match table {
                Swept::Locks => under_way.locks = next,
                Swept::Holds => under_way.holds = next,
            }
        }
    }

    /// This process's place for a waiter's attempt (none for one that does
    /// not wait, or without an ear to be told at).
    fn place(&self, wait: Wait) -> Option<Place<'_>> {
        let me = self.ears.address()?;
        let (asked, more) = match wait {
            Wait::Now => return None,
            Wait::InLine(asked) => (asked, None),
            Wait::InLineWithMore(asked) => (asked, Some(crate::owner::mint())),
        };
        Some(Place {
            me,
            asked: asked.ms(),
            more,
        })
    }

    /// Tell the process a lock was handed to: this one by report, another
    /// by its ear (one that is gone lets its claim window end).
    fn tell_hand_over(&self, hand_over: Option<HandOver>) {
        let Some(HandOver { to, told }) = hand_over else {
            return;
        };
        if self.ears.address() == Some(to.as_str()) {
            self.ears.report(Released::Handed, told);
        } else {
            self.ears.hand_over(&to, &told);
        }
    }

    /// Tell the ears that wait for `key` that it was released. Nothing
    /// fails for it: an ear not told leaves its waiters to their poll.
    fn announce(&self, db: &mut Db, hold: HoldKind, key: &str) {
        let Ok(ears) = ops::ears_of(&db.connection, &db.sql, hold, key) else {
            return;
        };
        self.tell_ears(db, ears, hold, key);
    }

    /// Tell `ears` that `key` was released; forget those gone.
    fn tell_ears(&self, db: &mut Db, ears: Vec<String>, hold: HoldKind, key: &str) {
        if ears.is_empty() {
            return;
        }
        for gone in self.ears.tell(ears, ops::letter(hold), key) {
            let _ = ops::forget_ear(db, &gone);
        }
    }
}

impl LockStore for SqliteStore {
    fn capabilities(&self) -> Capabilities {
        let ear = self.ears.address().is_some();
        Capabilities {
            announces_releases: ear,
            queues_releases: true,
            // The line tells a process of a lock handed to it at its ear.
            waits_in_line: ear,
            ..Capabilities::default()
        }
    }

    fn acquire(
        &self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64, wait: Wait,
    ) -> Op<Acquired> {
        let batch = self.sweep_batch();
        // Not `granting`: the releases queued before it are written here.
        self.on_file("acquire", true, |db| {
            if let Some((table, from)) = batch {
                // A sweep that failed is tried again at the next acquire.
                if let Ok(next) = ops::sweep(db, table, &from) {
                    self.swept(table, next);
                }
            }
            let queued = self.queued.take();
            let release: Release<'_> = &|db, key, owner| self.release_lock(db, key, owner);
            if hold != HoldKind::Lock {
                self.queued.write(db, &queued, release);
                return ops::acquire(db, hold, key, owner, ttl_ms);
            }
            let place = self.place(wait);
            let in_line = self.ears.address().is_some();
            if let Some(taken) = self.queued.acquire_after(
                db,
                &queued,
                key,
                owner,
                ttl_ms,
                place.as_ref(),
                in_line,
                release,
            ) {
                return Ok(taken);
            }
            let (acquired, hand_over) = line::acquire(db, key, owner, ttl_ms, place)?;
            self.tell_hand_over(hand_over);
            Ok(acquired)
        })
    }

    fn release(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        self.with("release", |db| {
            if hold != HoldKind::Lock {
                let released = ops::release(db, hold, key, owner)?;
                if released {
                    self.announce(db, hold, key);
                }
                return Ok(released);
            }
            self.release_lock(db, key, owner)
        })
    }

    fn queue_release(&self, key: &str, owner: &str) -> bool {
        self.queued.push(key, owner);
        true
    }

    fn flush_releases(&self) -> Vec<(String, StoreError)> {
        let mut db = self.db.lock().unwrap_or_else(PoisonError::into_inner);
        match db.as_mut() {
            Some(open_db) => self.write_queued(open_db),
            None => self.queued.closed(self.queued.take()),
        }
        self.queued.take_failed()
    }

    fn extend(&self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        self.granting("extend", |db| ops::extend(db, hold, key, owner, ttl_ms))
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

    fn claim(&self, key: &str, owner: &str, ttl_ms: f64, more: Option<Asked>) -> Op<bool> {
        let place = more.and_then(|asked| self.place(Wait::InLineWithMore(asked)));
        let me = self.ears.address();
        self.granting("claim", |db| line::claim(db, key, owner, ttl_ms, me, place))
    }

    fn leave_line(&self, key: &str) -> Op<()> {
        let Some(me) = self.ears.address() else {
            return Op::Ready(Ok(()));
        };
        self.with("leave_line", |db| {
            let hand_over = line::leave(db, key, me)?;
            self.tell_hand_over(hand_over);
            Ok(())
        })
    }

    fn withdraw(&self, _hold: HoldKind, key: &str) -> Op<()> {
        self.with("withdraw", |db| ops::withdraw(db, key))
    }

    /// Note (or forget) this store's ear beside `key`; the first time, its
    /// listener is the task returned.
    fn watch(&self, hold: HoldKind, key: &str, on: bool) -> Option<Task> {
        let address = self.ears.address()?;
        let noted = self.with("watch", |db| ops::note_ear(db, hold, key, address, on));
        drop(noted);
        self.ears.listener()
    }

    fn ping(&self) -> Op<()> {
        self.with("ping", |db| ops::ping(db))
    }

    /// Close the connection, and the ear with its notes; operations after
    /// this fail as closed.
    fn close(&self) {
        let mut db = self.db.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(open_db) = db.as_mut() {
            self.write_queued(open_db);
        }
        if let (Some(address), Some(db)) = (self.ears.close(), db.as_mut()) {
            let _ = ops::forget_ear(db, &address);
        }
        db.take();
    }
}

/// A store dropped with releases queued (its thread ended without the JS
/// layer's flush: a worker terminated) writes them first; one that fails
/// is written to stderr, as nobody is left to warn.
impl Drop for SqliteStore {
    fn drop(&mut self) {
        let mut db = self.db.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(db) = db.as_mut() {
            self.write_queued(db);
        }
        for (key, error) in self.queued.take_failed() {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "LockReleaseWarning: Lock {key:?}: release after run() failed as its thread ended \
                 ({error}); the lock stays held until its TTL passes."
            );
        }
    }
}

#[cfg(test)]
mod line_tests;
#[cfg(test)]
mod queued_tests;
#[cfg(test)]
mod tests;
