//! The store seam: the five operations every lock backend provides.
//!
//! A store is where the two safety properties are actually enforced, so the
//! contract is strict: `acquire` is an atomic set-if-absent, `release` and
//! `extend` act only when the stored owner token matches, and every entry
//! carries an expiry the store itself enforces.
//!
//! An operation either finishes at once ([`Op::Ready`], the in-memory store,
//! which runs on the JS thread and never waits), later on the JS thread's own
//! event loop ([`Op::Local`], a Redis server's connection), or later on Tokio
//! ([`Op::Pending`], a Redis Cluster). Keeping them apart in the type is what
//! lets each answer without a thread hop it does not need. (A store written
//! in JS never reaches Rust: `lib/js-store.js` calls it.)

pub mod event_loop;
pub mod follow;
pub mod memory;
pub mod mode;
pub mod options;
pub mod postgres;
pub mod redis;
pub mod tls;

use std::future::Future;
use std::pin::Pin;

pub use crate::error::{BackendError, Code, StoreError};
pub use memory::MemoryStore;
pub use mode::{HoldOp, Mode};
pub use options::TlsOptions;
pub use postgres::{PostgresOptions, PostgresStore};
pub use redis::{RedisOptions, RedisStore};

pub type StoreResult<T> = Result<T, StoreError>;
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = StoreResult<T>> + Send + 'static>>;

/// The outcome of a store operation: settled now, settling later on Tokio,
/// or settling later on the JS thread.
pub enum Op<T> {
    Ready(StoreResult<T>),
    Pending(StoreFuture<T>),
    /// An operation that completes on the JS thread's own event loop (a
    /// Redis command on a connection that loop drives): no thread hop, no Tokio.
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
        self,
        f: impl FnOnce(StoreResult<T>) -> StoreResult<U> + 'static,
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

/// A lock backend. Times are milliseconds; `ttl_ms` is always a positive,
/// finite number (the API layer rejects anything else before a store sees it).
pub trait LockStore: Send + Sync + 'static {
    /// Set `key` to `owner` for `ttl_ms` if nobody holds it. Atomic.
    fn acquire(&self, key: &str, owner: &str, ttl_ms: f64) -> Op<bool>;
    /// Delete `key` only if `owner` still holds it.
    fn release(&self, key: &str, owner: &str) -> Op<bool>;
    /// Push the expiry of `key` out to `ttl_ms` from now, only if `owner` still holds it.
    fn extend(&self, key: &str, owner: &str, ttl_ms: f64) -> Op<bool>;
    /// Whether anyone holds `key`.
    fn is_locked(&self, key: &str) -> Op<bool>;
    /// Milliseconds until `key` expires, or `None` if nobody holds it.
    fn remaining_time(&self, key: &str) -> Op<Option<f64>>;
    /// Whether `owner` in particular holds `key`. Stores that can only answer
    /// `is_locked` return `None`, and callers fall back to that.
    fn holds(&self, _key: &str, _owner: &str) -> Option<Op<bool>> {
        None
    }
    /// `acquire`, answered with the fencing token the acquisition was given
    /// (`Some(token)` when taken, `None` when held): for stores that make
    /// tokens in the acquire itself and hand them back with its reply. Others
    /// return `None` here and answer [`LockStore::fencing_token`] instead.
    fn acquire_fenced(&self, _key: &str, _owner: &str, _ttl_ms: f64) -> Option<Op<Option<u64>>> {
        None
    }
    /// The fencing token `owner`'s acquisition of `key` was given: a number that
    /// only grows, per key, across every client of the store. `None` when the
    /// store has none for it (not held, or a store without fencing). Answered
    /// at once, from what the store keeps with the hold.
    fn fencing_token(&self, _key: &str, _owner: &str) -> Option<f64> {
        None
    }

    // Keys many may hold at once (semaphores, read-write locks): each
    // operation names the kind of hold, [`Mode`]. Their data never meets a
    // plain lock's, nor each other's. A store without them answers every one
    // with a `TypeError` saying so.

    /// Take a hold of `key` in `mode` for `owner` if the mode admits one now.
    /// Atomic. `Some(fencing token)` when taken, `None` when not.
    fn acquire_in(&self, mode: Mode, _key: &str, _owner: &str, _ttl_ms: f64) -> Op<Option<u64>> {
        Op::Ready(Err(mode.unsupported()))
    }
    /// Give back `owner`'s hold, only if it is still live.
    fn release_in(&self, mode: Mode, _key: &str, _owner: &str) -> Op<bool> {
        Op::Ready(Err(mode.unsupported()))
    }
    /// Push `owner`'s hold out to `ttl_ms` from now, only if it is still live.
    fn extend_in(&self, mode: Mode, _key: &str, _owner: &str, _ttl_ms: f64) -> Op<bool> {
        Op::Ready(Err(mode.unsupported()))
    }
    /// Whether `owner` holds `key` in `mode` now.
    fn holds_in(&self, mode: Mode, _key: &str, _owner: &str) -> Op<bool> {
        Op::Ready(Err(mode.unsupported()))
    }
    /// Milliseconds until `owner`'s hold expires, `None` if it holds none.
    fn remaining_in(&self, mode: Mode, _key: &str, _owner: &str) -> Op<Option<f64>> {
        Op::Ready(Err(mode.unsupported()))
    }
    /// Whether an acquire in `mode` would be refused now.
    fn would_wait(&self, mode: Mode, _key: &str) -> Op<bool> {
        Op::Ready(Err(mode.unsupported()))
    }
    /// How many hold `key` now: permits for a semaphore; readers, or 1 for a
    /// writer, for a read-write key.
    fn holders(&self, mode: Mode, _key: &str) -> Op<f64> {
        Op::Ready(Err(mode.unsupported()))
    }
    /// The fencing token of `owner`'s live hold of `key` in `mode`, when the
    /// store keeps it with the hold (as [`LockStore::fencing_token`]).
    fn fencing_token_in(&self, _mode: Mode, _key: &str, _owner: &str) -> Option<f64> {
        None
    }
    /// A writer waiting in `mode` gave up: stop holding back new readers for it.
    fn withdraw(&self, _mode: Mode, _key: &str) -> Op<()> {
        Op::Ready(Ok(()))
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
