//! run()'s releases, queued: nobody waits for their answer, so each is
//! written with the store's next operation (an acquire of a plain lock
//! writes them in its own transaction: a loop that gives a lock back and
//! takes one again commits once a cycle, not twice), or when the JS layer
//! flushes (the end of the loop's turn, the process exiting), at close, or
//! as the store is dropped with its thread. A failure waits for the flush.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::busy;
use super::errors::{closed, failure};
use super::line::{self, Place, Queued};
use super::open::Db;
use crate::store::{Acquired, StoreError};

/// How a release is written: the store's own, told to whoever it concerns.
pub(super) type Release<'a> = &'a dyn Fn(&mut Db, &str, &str) -> rusqlite::Result<bool>;

/// The releases queued, and those that failed until the JS layer flushes.
pub(super) struct QueuedReleases {
    kept: Mutex<Kept>,
    /// The file, as a failure names it.
    path: PathBuf,
    /// How long each release waits for another process's write.
    timeout: Duration,
}

#[derive(Default)]
struct Kept {
    releases: Vec<Queued>,
    failed: Vec<(String, StoreError)>,
}

impl QueuedReleases {
    pub fn new(path: PathBuf, timeout: Duration) -> QueuedReleases {
        QueuedReleases {
            kept: Mutex::new(Kept::default()),
            path,
            timeout,
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn push(&self, key: &str, owner: &str) {
        self.kept().releases.push(Queued {
            key: key.to_owned(),
            owner: owner.to_owned(),
        });
    }

    /// The releases queued so far, taken to be written.
    pub fn take(&self) -> Vec<Queued> {
        let mut kept = self.kept();
        if kept.releases.is_empty() {
            return Vec::new();
        }
        std::mem::take(&mut kept.releases)
    }

    /// Those that failed since the last time this was asked.
    pub fn take_failed(&self) -> Vec<(String, StoreError)> {
        std::mem::take(&mut self.kept().failed)
    }

    /// `releases` cannot be written: the store is closed.
    pub fn closed(&self, releases: Vec<Queued>) {
        let each = releases.into_iter().map(|r| (r.key, closed("release")));
        self.kept().failed.extend(each);
    }

    /// Write `releases`, each its own way; a failure is kept.
    pub fn write<'q>(
        &self, db: &mut Db, releases: impl IntoIterator<Item = &'q Queued>, release: Release<'_>,
    ) {
        for queued in releases {
            busy::start(self.timeout);
            if let Err(e) = release(db, &queued.key, &queued.owner) {
                let failed = failure("release", &self.path, &e);
                self.kept().failed.push((queued.key.clone(), failed));
            }
        }
    }

    /// A plain lock's acquire with `releases` queued before it: in one
    /// transaction where each takes its one-statement path (the ones that
    /// cannot, each its own way after it); `None` when the acquire goes the
    /// usual way. Where processes do not wait in line (`in_line` false: no
    /// ears on this system), a key released here is not taken again in the
    /// same transaction: the commit between leaves it free for the waiters
    /// of other processes to find, or a loop here would never let go of it.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire_after(
        &self, db: &mut Db, releases: &[Queued], key: &str, owner: &str, ttl_ms: f64,
        place: Option<&Place<'_>>, in_line: bool, release: Release<'_>,
    ) -> Option<Acquired> {
        if releases.is_empty() {
            return None;
        }
        let retaken = !in_line && releases.iter().any(|r| r.key == key);
        if retaken || place.is_some_and(|p| p.more.is_some()) {
            self.write(db, releases, release);
            return None;
        }
        match line::released_then_taken(db, releases, key, owner, ttl_ms, place.map(|p| p.me)) {
            Ok((left, taken)) => {
                self.write(db, left, release);
                taken.map(Acquired::Fenced)
            }
            // Nothing of that transaction was written, and the file just
            // failed the lot: they fail with it (each tried again would wait
            // out the timeout once more before the acquire does).
            Err(e) => {
                let each = releases
                    .iter()
                    .map(|r| (r.key.clone(), failure("release", &self.path, &e)));
                self.kept().failed.extend(each);
                None
            }
        }
    }
}
