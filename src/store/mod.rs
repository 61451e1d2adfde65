//! The store seam: the five operations every lock backend provides.
//!
//! A store is where the two safety properties are actually enforced, so the
//! contract is strict: `acquire` is an atomic set-if-absent, `release` and
//! `extend` act only when the stored owner token matches, and every entry
//! carries an expiry the store itself enforces.
//!
//! An operation either finishes at once ([`Op::Ready`], the in-memory store,
//! which runs on the JS thread and never waits) or later ([`Op::Pending`], a
//! store that talks to a server). Keeping the two apart in the type is what
//! lets the in-memory path answer without a thread hop or a promise while a
//! network store is driven by Tokio.

#[cfg(not(test))]
pub mod js;
pub mod memory;
pub mod redis;

use std::fmt;
use std::future::Future;
use std::pin::Pin;

pub use memory::MemoryStore;
pub use redis::{RedisOptions, RedisStore, TlsOptions};

/// Why a store operation failed (the store's fault, not the caller's).
#[derive(Debug)]
pub enum StoreError {
    /// A JS store method threw or rejected: this is its own error, passed on as is.
    /// (Absent from `cargo test` builds, which run without Node and so cannot
    /// link the napi functions an error reference needs.)
    #[cfg(not(test))]
    Js(napi::Error),
    /// A store answered with the wrong type; becomes a `TypeError`.
    Type(String),
    /// A native store could not do its job (server unreachable, timed out,
    /// refused our credentials, closed); becomes an `Error` with `code`.
    Backend(BackendError),
}

/// A native store's failure, as JS will see it: a stable `code` to branch on
/// and a message that says what happened and where.
#[derive(Debug)]
pub struct BackendError {
    pub code: &'static str,
    pub message: String,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(not(test))]
            StoreError::Js(e) => write!(f, "{e}"),
            StoreError::Type(message) => f.write_str(message),
            StoreError::Backend(e) => f.write_str(&e.message),
        }
    }
}

impl std::error::Error for StoreError {}

pub type StoreResult<T> = Result<T, StoreError>;
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = StoreResult<T>> + Send + 'static>>;

/// The outcome of a store operation: settled now, settling later on Tokio,
/// or settling later on the JS thread.
pub enum Op<T> {
    Ready(StoreResult<T>),
    Pending(StoreFuture<T>),
    /// A promise a JS store method returned to a call made on the JS thread.
    /// It is checked there, in a `then` callback: no thread hop, no Tokio.
    Js(JsPending<T>),
}

impl<T: Send + 'static> Op<T> {
    /// Wait for the outcome of a `Ready` or `Pending` operation.
    pub async fn settle(self) -> StoreResult<T> {
        match self {
            Op::Ready(result) => result,
            Op::Pending(future) => future.await,
            // Only made on the JS thread and handed straight back to JS there.
            Op::Js(_) => Err(StoreError::Type(
                "a JS store's promise can only be settled on the JS thread".to_owned(),
            )),
        }
    }
}

/// What a JS store method produced, before it is checked against what the
/// method should return.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reply {
    Bool(bool),
    Number(f64),
    Nullish,
    Other(&'static str),
}

/// The five `LockStore` methods, in the interface's order. JS knows the same
/// numbering as the exported `StoreMethod` (a JS store's reply is checked
/// against the method that gave it).
#[cfg_attr(not(test), napi_derive::napi)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMethod {
    Acquire,
    Release,
    Extend,
    IsLocked,
    RemainingTime,
}

impl StoreMethod {
    pub const ALL: [StoreMethod; 5] = [
        StoreMethod::Acquire,
        StoreMethod::Release,
        StoreMethod::Extend,
        StoreMethod::IsLocked,
        StoreMethod::RemainingTime,
    ];

    /// The method's name in the `LockStore` interface.
    pub fn name(self) -> &'static str {
        match self {
            StoreMethod::Acquire => "acquire",
            StoreMethod::Release => "release",
            StoreMethod::Extend => "extend",
            StoreMethod::IsLocked => "isLocked",
            StoreMethod::RemainingTime => "remainingTime",
        }
    }
}

/// A JS value, valid only during the napi call on the JS thread that made it.
pub struct JsValueRef(pub *mut std::ffi::c_void);

// SAFETY: never dereferenced off the JS thread: an `Op::Js` is returned to JS
// within the same call that produced it.
unsafe impl Send for JsValueRef {}

/// A JS store's promise, to be checked on the JS thread when it settles. For
/// an `acquire`, `taken` is the key and owner tried: the promise then yields the
/// owner (or null), and a failure gives the token back.
pub struct JsPending<T> {
    pub promise: JsValueRef,
    /// Which `LockStore` method returned it.
    pub method: StoreMethod,
    pub taken: Option<(String, String)>,
    _yields: std::marker::PhantomData<fn() -> T>,
}

impl<T> JsPending<T> {
    pub fn new(promise: JsValueRef, method: StoreMethod) -> Self {
        JsPending {
            promise,
            method,
            taken: None,
            _yields: std::marker::PhantomData,
        }
    }

    /// The same promise, as an acquisition of `key` for `owner`.
    pub fn taking<U>(self, key: String, owner: String) -> JsPending<U> {
        JsPending {
            promise: self.promise,
            method: self.method,
            taken: Some((key, owner)),
            _yields: std::marker::PhantomData,
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
}
