//! run()'s releases, queued: nobody waits for their answer, so each is
//! written with the store's next operation (an acquire of a plain lock
//! writes them in its own transaction: a loop that gives a lock back and
//! takes one again commits once a cycle, not twice; the acquires of one
//! turn asked together commit once with them), or when the JS layer
//! flushes (the end of the loop's turn, the process exiting), at close, or
//! as the store is dropped with its thread. A failure waits for the flush.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::busy;
use super::errors::{closed, failure};
use super::line::{self, Queued, Take};
use super::open::Db;
use crate::store::StoreError;

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

    /// Keep a failure of `queued`, to be told at the flush.
    fn failed(&self, queued: &Queued, e: &rusqlite::Error) {
        let failed = failure("release", &self.path, e);
        self.kept().failed.push((queued.key.clone(), failed));
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
                self.failed(queued, &e);
            }
        }
    }

    /// `releases` written with plain locks' acquires (`takes`) in one
    /// transaction where each takes its one-statement path (the releases
    /// that cannot, each its own way after it): each take's token, if it
    /// took the lock. Nothing is written for one take alone (its usual way
    /// is that one statement). If the file fails the transaction, the
    /// releases fail with it (each tried again would wait out the timeout
    /// once more), and so do the takes: the error is the acquire's, even
    /// where the releases were what the file refused.
    pub fn taken_after(
        &self, db: &mut Db, releases: &[Queued], takes: &[Take<'_>], release: Release<'_>,
    ) -> rusqlite::Result<Vec<Option<u64>>> {
        if releases.is_empty() && takes.len() < 2 {
            return Ok(vec![None; takes.len()]);
        }
        match line::released_then_taken(db, releases, takes) {
            Ok((left, tokens)) => {
                self.write(db, left, release);
                Ok(tokens)
            }
            Err(e) => {
                for queued in releases {
                    self.failed(queued, &e);
                }
                Err(e)
            }
        }
    }
}
