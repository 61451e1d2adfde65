//! `SqliteLockStore`: the processes of one machine coordinated through one
//! SQLite file, with no server. Read in this order: `options`, `clock` (the
//! machine's monotonic clock, and which boot the holds belong to), `sql`,
//! `place` (where the file may be), `busy` (waiting for another process's write), `checkpoint` (the log
//! copied into the file on a thread of its own), `errors`, `open` (the
//! file, checked, its tables, an earlier boot's holds let go), `ops`, `ear`
//! (hearing releases from the other processes on the file), `line` (the
//! line a plain lock's waiters wait in), `pass` (lapsed rows swept a batch
//! per acquire), `queued` (run()'s releases, written with the next
//! operation, and acquires written together).
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
mod pass;
mod place;
mod queued;
mod sql;
mod told;

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use self::ear::Ears;
use self::errors::{closed, failure};
use self::line::{Place, Take};
use self::open::{open, Db};
pub use self::options::SqliteOptions;
use self::pass::SweepPass;
use self::queued::{QueuedReleases, Release};
use crate::store::follow::OnReleased;
use crate::store::{
    Acquired, Asked, BackendError, Capabilities, Code, HoldKind, LockStore, Op, StoreError,
    StoreResult, Task, Wait, Want,
};

pub struct SqliteStore {
    options: SqliteOptions,
    /// `None` once closed.
    db: Mutex<Option<Db>>,
    sweeping: SweepPass,
    ears: Ears,
    queued: QueuedReleases,
}

impl SqliteStore {
    /// Opens the file now: a bad path fails here, naming it. Releases in
    /// other processes of keys this one waits for go to `on_released`.
    pub fn new(
        options: SqliteOptions, on_released: Option<OnReleased>,
    ) -> Result<SqliteStore, StoreError> {
        let db = open(&options)?;
        Ok(SqliteStore {
            sweeping: SweepPass::every(options.sweep_interval),
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
        Op::Ready(self.on_file(name, false, |db| {
            self.write_queued(db);
            op(db)
        }))
    }

    /// The same, for an operation that gives or keeps a hold: first, if the
    /// file at the path is no longer the one open (deleted or replaced),
    /// the path is opened again, so this process holds and waits in the
    /// same file as every process that opens the path now.
    fn granting<T: Send + 'static>(
        &self, name: &str, op: impl FnOnce(&mut Db) -> rusqlite::Result<T>,
    ) -> Op<T> {
        Op::Ready(self.on_file(name, true, |db| {
            self.write_queued(db);
            op(db)
        }))
    }

    fn on_file<T>(
        &self, name: &str, follow_the_path: bool, op: impl FnOnce(&mut Db) -> rusqlite::Result<T>,
    ) -> StoreResult<T> {
        let mut db = self.db.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(open_db) = db.as_mut() else {
            return Err(closed(name));
        };
        if follow_the_path && open_db.moved() {
            // Queued releases are of locks in the file open until now.
            self.write_queued(open_db);
            *open_db = open(&self.options)?;
        }
        busy::start(self.options.command_timeout);
        op(open_db).map_err(|e| failure(name, &self.options.path, &e))
    }

    /// Plain locks' acquires, written with the releases queued before them:
    /// in one transaction where each can take its one-statement path, the
    /// others each the usual way after it, in the order asked. Once one on a
    /// key is refused and takes its process's place in line, a later one on
    /// that key is refused without asking: it waits behind it, as it would
    /// had it been asked after. Once one fails, the rest fail with it, not
    /// each after the file's timeout again.
    fn acquire_locks(&self, wants: &[Want<'_>]) -> StoreResult<Vec<StoreResult<Acquired>>> {
        self.on_file("acquire", true, |db| {
            self.sweeping.step(db);
            let queued = self.queued.take();
            let places: Vec<Option<Place<'_>>> = wants.iter().map(|w| self.place(w.wait)).collect();
            let in_line = self.ears.address().is_some();
            // Apart: one with more of this process behind it (it keeps a
            // place at the back), and any after it on its key; and, where
            // processes do not wait in line (no ears), a key released here:
            // the commit between leaves it free for the waiters of other
            // processes to find, or a loop here would never let go of it.
            let mut apart: HashSet<&str> = HashSet::new();
            let mut together = Vec::with_capacity(wants.len());
            for (i, want) in wants.iter().enumerate() {
                let keeps_more = places[i].as_ref().is_some_and(|p| p.more.is_some());
                let retaken = !in_line && queued.iter().any(|r| r.key == want.key);
                if keeps_more || retaken || apart.contains(want.key) {
                    apart.insert(want.key);
                } else {
                    together.push(i);
                }
            }
            let takes: Vec<Take<'_>> = together
                .iter()
                .map(|&i| Take {
                    key: wants[i].key,
                    who: wants[i].owner,
                    ttl_ms: wants[i].ttl_ms,
                    me: places[i].as_ref().map(|p| p.me),
                })
                .collect();
            let release: Release<'_> = &|db, key, owner| self.release_lock(db, key, owner);
            let mut taken = vec![None; wants.len()];
            let tokens = self.queued.taken_after(db, &queued, &takes, release)?;
            for (&i, token) in together.iter().zip(tokens) {
                taken[i] = token;
            }
            let mut answers = Vec::with_capacity(wants.len());
            let mut waiting: HashSet<&str> = HashSet::new();
            let mut failed: Option<rusqlite::Error> = None;
            for ((want, place), token) in wants.iter().zip(places).zip(taken) {
                if let Some(token) = token {
                    answers.push(Ok(Acquired::Fenced(token)));
                    continue;
                }
                if let Some(e) = &failed {
                    answers.push(Err(failure("acquire", &self.options.path, e)));
                    continue;
                }
                if waiting.contains(want.key) {
                    answers.push(Ok(Acquired::Refused));
                    continue;
                }
                busy::start(self.options.command_timeout);
                let takes_a_place = place.is_some();
                match line::acquire(db, want.key, want.owner, want.ttl_ms, place) {
                    Ok((acquired, hand_over)) => {
                        told::hand_over(&self.ears, hand_over);
                        if matches!(acquired, Acquired::Refused) && takes_a_place {
                            waiting.insert(want.key);
                        }
                        answers.push(Ok(acquired));
                    }
                    // (Nothing of a failed acquire was written: its
                    // transaction, or its one statement, failed whole.)
                    Err(e) => {
                        answers.push(Err(failure("acquire", &self.options.path, &e)));
                        failed = Some(e);
                    }
                }
            }
            Ok(answers)
        })
    }

    /// Write the releases queued so far (`queued`); what follows has the
    /// file's whole timeout again.
    fn write_queued(&self, db: &mut Db) {
        let releases = self.queued.take();
        if !releases.is_empty() {
            let release: Release<'_> = &|db, key, owner| self.release_lock(db, key, owner);
            self.queued.write(db, &releases, release);
            busy::start(self.options.command_timeout);
        }
    }

    /// A plain lock's release, told to whoever it concerns.
    fn release_lock(&self, db: &mut Db, key: &str, owner: &str) -> rusqlite::Result<bool> {
        let (held, released) = line::release(db, key, owner, self.ears.address())?;
        // Handed on, the lock's waiters elsewhere wait for their turn;
        // with nobody in line, those that watch are told it is free.
        match released {
            line::Released::HandedOn(hand_over) => told::hand_over(&self.ears, Some(hand_over)),
            line::Released::Ears(ears) => told::released(&self.ears, db, ears, HoldKind::Lock, key),
            line::Released::Nobody | line::Released::Alone => {}
        }
        Ok(held)
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
}

impl LockStore for SqliteStore {
    fn capabilities(&self) -> Capabilities {
        let ear = self.ears.address().is_some();
        Capabilities {
            announces_releases: ear,
            queues_releases: true,
            acquires_together: true,
            // The line tells a process of a lock handed to it at its ear.
            waits_in_line: ear,
            ..Capabilities::default()
        }
    }

    fn acquire(
        &self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64, wait: Wait,
    ) -> Op<Acquired> {
        if hold == HoldKind::Lock {
            let want = Want {
                key,
                owner,
                ttl_ms,
                wait,
            };
            let answer = self.acquire_locks(&[want]).and_then(|mut answers| {
                answers.pop().unwrap_or_else(|| {
                    Err(StoreError::Backend(BackendError {
                        code: Code::Internal,
                        message: "a SqliteLockStore acquire went unanswered".to_owned(),
                    }))
                })
            });
            return Op::Ready(answer);
        }
        // Not `granting`: the sweep comes first.
        Op::Ready(self.on_file("acquire", true, |db| {
            self.sweeping.step(db);
            self.write_queued(db);
            ops::acquire(db, hold, key, owner, ttl_ms)
        }))
    }

    fn acquire_together(&self, wants: &[Want<'_>]) -> Option<Vec<StoreResult<Acquired>>> {
        Some(match self.acquire_locks(wants) {
            Ok(answers) => answers,
            Err(failed) => wants.iter().map(|_| Err(failed.clone())).collect(),
        })
    }

    fn release(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        self.with("release", |db| {
            if hold != HoldKind::Lock {
                let released = ops::release(db, hold, key, owner)?;
                if released {
                    told::announce(&self.ears, db, hold, key);
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
            told::hand_over(&self.ears, hand_over);
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
