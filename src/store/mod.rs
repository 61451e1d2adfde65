//! The store seam: the operations every lock backend provides, each for
//! any kind of hold.
//!
//! A store is where the two safety properties are actually enforced, so the
//! contract is strict: `acquire` is an atomic set-if-absent, `release` and
//! `extend` act only when the stored owner token matches, and every entry
//! carries an expiry the store itself enforces.
//!
//! An operation either finishes at once ([`Op::Ready`], a store in memory,
//! which runs on the JS thread and never waits), later on the JS thread's own
//! event loop ([`Op::Local`], a server connection that loop drives), or later
//! on Tokio ([`Op::Pending`], a connection a thread waits on). Keeping them
//! apart in the type is what lets each answer without a thread hop it does
//! not need. (A store written in JS never reaches Rust:
//! `lib/bridge/js-store.js` calls it.)
//!
//! This file is also the one list of the stores (their modules below).

pub mod etcd;
pub mod event_loop;
pub mod follow;
pub mod hold;
pub mod line;
pub mod memory;
pub mod mysql;
pub mod options;
pub mod peer;
pub mod postgres;
pub mod redis;
pub mod sqlite;
pub mod sweeps;
pub mod tls;

use std::future::Future;
use std::pin::Pin;

pub use crate::error::{BackendError, Code, StoreError};
pub use etcd::{EtcdOptions, EtcdStore};
pub use hold::{Acquired, HoldKind, HoldOp, Wait};
pub use line::Asked;
pub use memory::MemoryStore;
pub use mysql::MySqlStore;
pub use options::{TableOptions, TlsOptions};
pub use postgres::PostgresStore;
pub use redis::{RedisOptions, RedisStore};
pub use sqlite::{SqliteOptions, SqliteStore};

/// How each server's first bytes sound to the store that speaks its
/// protocol: the end of a sentence ("it greets as ... does"), or `None` when
/// they are not that protocol's. A connection that reached some other
/// service says which it seems to be ([`peer::what_answered`]).
pub(crate) type FirstWords = fn(&[u8]) -> Option<&'static str>;

/// Every server store's [`FirstWords`].
pub(crate) const FIRST_WORDS: &[FirstWords] = &[
    mysql::first_words,
    postgres::first_words,
    redis::first_words,
];

/// A store that settles every operation at once, in this process: what the
/// algorithm's own tests run on.
#[cfg(test)]
pub fn settling_at_once() -> std::sync::Arc<dyn LockStore> {
    std::sync::Arc::new(memory::MemoryStore::new())
}

pub type StoreResult<T> = Result<T, StoreError>;
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = StoreResult<T>> + Send + 'static>>;

/// The outcome of a store operation: settled now, settling later on Tokio,
/// or settling later on the JS thread.
pub enum Op<T> {
    Ready(StoreResult<T>),
    Pending(StoreFuture<T>),
    /// An operation that completes on the JS thread's own event loop (a
    /// command on a connection that loop drives): no thread hop, no Tokio.
    Local(LocalOp<T>),
}

/// What an [`Op::Local`] is started with: called once, on the JS thread,
/// with the outcome.
pub type Done<T> = Box<dyn FnOnce(StoreResult<T>)>;

/// An operation that completes on the JS thread: started with the function
/// to call with its outcome, there, later (or at once).
pub struct LocalOp<T>(Box<dyn FnOnce(Done<T>)>);

impl<T: 'static> LocalOp<T> {
    pub fn new(start: impl FnOnce(Done<T>) + 'static) -> Self {
        LocalOp(Box::new(start))
    }

    pub fn start(self, done: Done<T>) {
        (self.0)(done)
    }

    /// The same operation, its outcome passed through `f`.
    pub fn map<U: 'static>(
        self, f: impl FnOnce(StoreResult<T>) -> StoreResult<U> + 'static,
    ) -> LocalOp<U> {
        LocalOp::new(move |done: Done<U>| self.start(Box::new(move |result| done(f(result)))))
    }
}

impl<T: Send + 'static> Op<T> {
    /// The operation with its answer passed through `f`.
    pub fn map<U: Send + 'static>(self, f: impl FnOnce(T) -> U + Send + 'static) -> Op<U> {
        match self {
            Op::Ready(result) => Op::Ready(result.map(f)),
            Op::Pending(future) => Op::Pending(Box::pin(async move { future.await.map(f) })),
            Op::Local(op) => Op::Local(op.map(move |result| result.map(f))),
        }
    }

    /// The outcome of a `Ready` or `Pending` operation, as a future any
    /// thread may await (the others settle only on the JS thread).
    pub fn settle(self) -> StoreFuture<T> {
        match self {
            Op::Ready(result) => Box::pin(std::future::ready(result)),
            Op::Pending(future) => future,
            Op::Local(_) => Box::pin(std::future::ready(Err(StoreError::Type(
                "an operation of the JS thread can only be settled there".to_owned(),
            )))),
        }
    }
}

/// A plain lock's acquire among several asked together
/// ([`LockStore::acquire_together`]).
#[derive(Clone, Copy, Debug)]
pub struct Want<'a> {
    pub key: &'a str,
    pub owner: &'a str,
    pub ttl_ms: f64,
    pub wait: Wait,
}

/// A task a store hands back to run on Tokio (a listener for announced releases).
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What a store can do beyond its operations, as the JS algorithm needs to
/// know it (read once per store): each store says so itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// It answers at once, in this thread, how long a hold has left (and so
    /// expires exactly): a hold asks it instead of counting from when its
    /// acquire was sent, and a waiter looks again as the lock lapses.
    pub says_when_lapsed: bool,
    /// Releases by other processes are announced and heard ([`LockStore::watch`]).
    pub announces_releases: bool,
    /// A connection answers its commands in the order they were sent: the
    /// next waiter's attempt can go right behind a release.
    pub answers_in_order: bool,
    /// It says when what it was asked is written to its connection
    /// ([`LockStore::sent`]), and a key's later operations reach the server
    /// behind it: a run() can end once its release is on its way, without
    /// waiting a round trip for the answer.
    pub tells_when_sent: bool,
    /// A plain lock's release that nobody waits for (run()'s) can be queued
    /// ([`LockStore::queue_release`]): written with the store's next
    /// operation, or when the JS layer flushes at the end of the loop's turn
    /// or as the process exits ([`LockStore::flush_releases`]).
    pub queues_releases: bool,
    /// Plain locks' acquires asked in the same turn of the loop can be
    /// written together ([`LockStore::acquire_together`]): a store whose
    /// every operation is a write of its own (a file) commits them once.
    pub acquires_together: bool,
    /// A plain lock's waiters wait in a line on the server, one place per
    /// process ([`Wait`]): a release hands the lock to the first in line and
    /// tells only its process, which then claims it ([`LockStore::extend`])
    /// and leaves the line when its waiters give up ([`LockStore::leave_line`]).
    pub waits_in_line: bool,
    /// The rest are a store written in JS's, which the JS layer reaches
    /// without this crate ([`Capabilities::WRITTEN_IN_JS`]); no native
    /// store has them. Semaphores over its permit slots, read-write locks
    /// through its own methods.
    pub written_in_js: bool,
    /// Its errors reach the caller as it threw them.
    pub throws_own_errors: bool,
    /// A call may never settle (no command timeout bounds it).
    pub may_never_answer: bool,
    /// A plain lock's fencing token is asked of it after the acquire.
    pub fences_after_acquire: bool,
}

impl Capabilities {
    /// What every store written in JS can do: one record, for JS to use as is.
    pub const WRITTEN_IN_JS: Capabilities = Capabilities {
        says_when_lapsed: false,
        announces_releases: false,
        answers_in_order: false,
        tells_when_sent: false,
        queues_releases: false,
        acquires_together: false,
        waits_in_line: false,
        written_in_js: true,
        throws_own_errors: true,
        may_never_answer: true,
        fences_after_acquire: true,
    };

    /// Every capability by the name JS reads it under, so JS takes the
    /// record as it is. (A field added above does not compile until it is
    /// named here.)
    pub fn named(&self) -> [(&'static str, bool); 11] {
        let Capabilities {
            says_when_lapsed,
            announces_releases,
            answers_in_order,
            tells_when_sent,
            queues_releases,
            acquires_together,
            waits_in_line,
            written_in_js,
            throws_own_errors,
            may_never_answer,
            fences_after_acquire,
        } = *self;
        [
            ("saysWhenLapsed", says_when_lapsed),
            ("announcesReleases", announces_releases),
            ("answersInOrder", answers_in_order),
            ("tellsWhenSent", tells_when_sent),
            ("queuesReleases", queues_releases),
            ("acquiresTogether", acquires_together),
            ("waitsInLine", waits_in_line),
            ("writtenInJs", written_in_js),
            ("throwsOwnErrors", throws_own_errors),
            ("mayNeverAnswer", may_never_answer),
            ("fencesAfterAcquire", fences_after_acquire),
        ]
    }
}

/// A lock backend. Times are milliseconds; `ttl_ms` is always a positive,
/// finite number (the API layer rejects anything else before a store sees it).
///
/// Every operation names the kind of hold it is about ([`HoldKind`]): the plain
/// lock, a semaphore permit, a reader or a writer. One method per operation,
/// whatever the hold, so a caller (the napi functions, the acquire
/// algorithm) dispatches once; each store decides per hold where its data
/// lives. Kinds of hold never see each other's data.
pub trait LockStore: Send + Sync + 'static {
    /// What it can do beyond the operations.
    fn capabilities(&self) -> Capabilities;
    /// Take `key` in `hold` for `owner` if the hold admits it now. Atomic: a
    /// plain lock is a set-if-absent. `wait` matters to a store that keeps a
    /// line ([`Capabilities::waits_in_line`]); the others take it as [`Wait::Now`].
    fn acquire(
        &self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64, wait: Wait,
    ) -> Op<Acquired>;
    /// Give back `owner`'s hold, only if it is still live (a plain lock:
    /// delete `key` only if `owner` still holds it).
    fn release(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool>;
    /// Push `owner`'s hold out to `ttl_ms` from now, only if it is still live.
    fn extend(&self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64) -> Op<bool>;
    /// Whether `owner` holds `key` in `hold` now.
    fn holds(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool>;
    /// Milliseconds until a hold expires, `None` if there is none: a plain
    /// lock's, whoever holds it (`owner` is not asked); in the other kinds
    /// `owner`'s, and `None` without an owner.
    fn remaining(&self, hold: HoldKind, key: &str, owner: Option<&str>) -> Op<Option<f64>>;
    /// Whether an acquire in `hold` would be refused now: for a plain lock,
    /// whether anyone holds it.
    fn would_wait(&self, hold: HoldKind, key: &str) -> Op<bool>;
    /// How many hold `key` now: 1 or 0 for a plain lock, permits for a
    /// semaphore, readers (or 1 for a writer) for a read-write key.
    fn holders(&self, hold: HoldKind, key: &str) -> Op<f64>;
    /// The fencing token `owner`'s hold of `key` was given: a number that
    /// only grows, per key, across every client of the store. Answered at
    /// once, from what the store keeps with the hold, by stores whose acquire
    /// answers [`Acquired::Taken`]; `None` when the store has none for it (not
    /// held, or it handed its tokens over with the acquire instead).
    fn fencing_token(&self, _hold: HoldKind, _key: &str, _owner: &str) -> Option<f64> {
        None
    }
    /// A writer waiting in `hold` gave up: stop holding back new readers for it.
    fn withdraw(&self, _hold: HoldKind, _key: &str) -> Op<()> {
        Op::Ready(Ok(()))
    }
    /// Follow (or stop following) releases of `key`'s holds that other
    /// clients announce. The first call may return the listener task for the
    /// caller to run on Tokio. Stores that cannot hear releases do nothing.
    fn watch(&self, _hold: HoldKind, _key: &str, _on: bool) -> Option<Task> {
        None
    }
    /// Settles once everything asked about `key` so far is written to the
    /// connection that carries it (in the kernel's send buffer), or never
    /// will be (the operations' own answers then say why). Only stores that
    /// tell when what they send is written ([`Capabilities::tells_when_sent`])
    /// wait; the others settle at once.
    fn sent(&self, _key: &str) -> Op<()> {
        Op::Ready(Ok(()))
    }
    /// Queue the release of `owner`'s plain lock `key`, which nobody waits
    /// for (run() ended on it): written with the store's next operation or
    /// at [`LockStore::flush_releases`], where a failure is told. False
    /// where releases are not queued (it is then released as usual).
    fn queue_release(&self, _key: &str, _owner: &str) -> bool {
        false
    }
    /// Write the queued releases now; answers those that failed since the
    /// last flush (here, or written with another operation), by key.
    fn flush_releases(&self) -> Vec<(String, StoreError)> {
        Vec::new()
    }
    /// Acquire the plain locks `wants`, each as [`LockStore::acquire`]
    /// would, written together where the store can (one that
    /// [`Capabilities::acquires_together`]); answered now, each in order (a
    /// failed one took nothing). `None` where the store does not.
    fn acquire_together(&self, _wants: &[Want<'_>]) -> Option<Vec<StoreResult<Acquired>>> {
        None
    }
    /// Claim the plain lock `key`, handed to this process from the store's
    /// line for `owner`, for `ttl_ms` (an extension); with `more` of this
    /// process waiting (asked for when the claim was sent), it keeps a
    /// place at the back of the line.
    fn claim(&self, key: &str, owner: &str, ttl_ms: f64, _more: Option<Asked>) -> Op<bool> {
        self.extend(HoldKind::Lock, key, owner, ttl_ms)
    }
    /// Every waiter of this process for the plain lock `key` gave up: its
    /// place in the store's line goes. A lock handed to the place meanwhile
    /// stays this process's until it gives it back or its claim window ends
    /// (the hand-over's message may yet reach a waiter of it). Nothing to do
    /// where there is no line.
    fn leave_line(&self, _key: &str) -> Op<()> {
        Op::Ready(Ok(()))
    }
    /// One round trip to the store's server, opening a connection first if
    /// none is open: settles once the server answered, or fails as an
    /// operation would (within the connect timeout when it cannot be
    /// reached). A store with no server has nothing to reach.
    fn ping(&self) -> Op<()> {
        Op::Ready(Ok(()))
    }
    /// Close the store's connections; later operations fail as closed.
    fn close(&self) {}
    /// Entries the store keeps in this process, counting expired ones not
    /// yet swept (a store in memory's; a server store keeps none here).
    fn entries_in_process(&self) -> usize {
        0
    }
}

/// Which of `connections` carries `key`'s requests: the same one for the
/// same key for as long as the process runs.
pub fn route(key: &str, connections: usize) -> usize {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    // The remainder is below `connections`, which is a usize.
    usize::try_from(hasher.finish() % connections.max(1) as u64).unwrap_or(0)
}

#[cfg(test)]
mod route_tests {
    use super::route;

    #[test]
    fn a_key_keeps_its_connection_and_keys_spread() {
        assert_eq!(route("invoice:42", 4), route("invoice:42", 4));
        assert_eq!(route("anything", 1), 0);
        let used: std::collections::HashSet<usize> =
            (0..64).map(|i| route(&format!("k{i}"), 4)).collect();
        assert_eq!(used.len(), 4);
    }
}
