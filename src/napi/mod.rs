//! The napi surface: every function JavaScript calls, and nothing else.
//!
//! The JS layer (`lib/`) validates arguments and keeps the per-lock state;
//! these functions take already-checked primitives plus a store handle, so a
//! call costs one crossing and no property lookups. A store operation that
//! settled at once comes back as a plain value; one that has to wait comes
//! back as a promise ([`convert::to_js`]). Each store operation is one
//! function for every kind of hold (a plain lock, a semaphore permit, a
//! reader, a writer): it names the hold ([`convert::JsHoldKind`]) beside the key, and
//! the store's one method for it answers. Beside this file: the functions
//! that make stores, one file each ([`stores`]), the handle ([`handle`]), the conversions
//! ([`convert`]), errors and panics ([`errors`]), the promise pump ([`pump`]) and
//! `acquire` and `release` registered again without napi-rs's per-call
//! bookkeeping ([`direct`]). The TypeScript signatures
//! written here are what `lib/native.d.ts` is generated from, and the JS
//! layer is type-checked against it.

mod convert;
mod direct;
mod errors;
mod handle;
mod host;
mod pump;
mod stores;
#[cfg(feature = "test-hooks")]
mod test_hooks;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use self::convert::{hold, to_js, HoldArg, Settled};
use self::errors::js_error;
use self::handle::Handle;
use crate::lock;
use crate::store::{Acquired, Asked, Capabilities, Code, StoreError, Wait};
use crate::text::SmallStr;

/// One attempt for a fresh owner: the owner token (or `[owner, fencing
/// token]`), or null if the hold admits nobody more now. `wait`, on a store
/// that keeps a line for a plain lock's waiters: 0, an attempt that does not
/// wait; 1, a waiter's (refused, it keeps this process's place in line); 2,
/// a waiter's with more of this process behind it. `asked`: when a waiter's
/// attempt was sent (`performance.now()` just before this call), which a
/// hand-over to the place it takes tells back.
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, hold: HoldKind, limit: number, ttlMs: number, wait: number, asked: number",
    ts_return_type = "string | [string, number] | [string, number, true] | null | Promise<string | [string, number] | [string, number, true] | null>"
)]
// Primitives, not an options object: a lock cycle's hottest call reads no
// JS properties.
#[allow(clippy::too_many_arguments)]
pub fn acquire<'env>(
    env: &'env Env, handle: Handle, key: SmallStr, kind: HoldArg, limit: f64, ttl_ms: f64,
    wait: u32, asked: f64,
) -> Result<Settled<'env, Option<lock::Grant>>> {
    let op = lock::acquire(
        &handle.store,
        hold(kind, limit),
        &key,
        ttl_ms,
        wait_of(wait, asked),
    );
    to_js(env, &handle, op)
}

/// How a refused attempt waits in its store's line, as JS numbers it.
fn wait_of(wait: u32, asked: f64) -> Wait {
    match wait {
        0 => Wait::Now,
        1 => Wait::InLine(Asked::at(asked)),
        _ => Wait::InLineWithMore(Asked::at(asked)),
    }
}

/// Attempts for fresh owners of the plain locks `keys` (each with its TTL,
/// its `wait` and when it was `asked`, as `acquire` takes them), asked in
/// the same turn of the loop, on a store that acquires together: written
/// together and answered at once, each in order as its own `acquire` would
/// settle: its grant, null, or the error it fails with.
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, keys: string[], ttlMs: number[], waits: number[], asked: number[]",
    ts_return_type = "(string | [string, number] | [string, number, true] | null | Error)[]"
)]
pub fn acquire_together(
    env: &Env, handle: Handle, keys: Vec<SmallStr>, ttl_ms: Vec<f64>, waits: Vec<u32>,
    asked: Vec<f64>,
) -> Result<Vec<Either<Option<lock::Grant>, Error>>> {
    if [ttl_ms.len(), waits.len(), asked.len()] != [keys.len(); 3] {
        let message = "acquireTogether: keys, ttlMs, waits and asked must be as long as each other";
        return Err(Error::new(Status::InvalidArg, message));
    }
    let wants = keys
        .into_iter()
        .zip(ttl_ms)
        .zip(waits.into_iter().zip(asked));
    let wants = wants.map(|((key, ttl_ms), (wait, asked))| (key, ttl_ms, wait_of(wait, asked)));
    let Some(answers) = lock::acquire_together(&handle.store, wants) else {
        let message = "acquireTogether: this store does not acquire together";
        return Err(Error::new(Status::InvalidArg, message));
    };
    let answers = answers.into_iter().map(|answer| match answer {
        Ok(grant) => Either::A(grant),
        Err(e) => Either::B(js_error(env, e)),
    });
    Ok(answers.collect())
}

/// Each store operation below is the same napi function: the handle, the
/// operation's arguments, one call into the store, its answer settled for JS
/// ([`to_js`]). Written once here, each reads as its signature (with the
/// TypeScript types `lib/native.d.ts` is generated from) and its call. Their
/// docs are `#[doc]` strings: a `///` line passed through a macro arrives as
/// a raw string, which napi-rs would copy into the types with its `r"`.
macro_rules! store_operations {
    ($(
        $(#[doc = $doc:tt])*
        fn $name:ident($($arg:ident: $ty:ty),*) -> $out:ty,
            ts($ts_args:tt, $ts_return:tt),
            |$store:ident| $call:expr;
    )*) => {$(
        $(#[doc = $doc])*
        #[napi(catch_unwind, ts_args_type = $ts_args, ts_return_type = $ts_return)]
        pub fn $name<'env>(
            env: &'env Env, handle: Handle, $($arg: $ty),*
        ) -> Result<Settled<'env, $out>> {
            let $store = &handle.store;
            to_js(env, &handle, $call)
        }
    )*};
}

store_operations! {
    #[doc = " The store's own `acquire(key, owner, ttlMs)`, for a store used directly."]
    fn store_acquire(key: SmallStr, kind: HoldArg, limit: f64, owner: SmallStr, ttl_ms: f64) -> bool,
        ts("handle: object, key: string, hold: HoldKind, limit: number, owner: string, ttlMs: number", "boolean | Promise<boolean>"),
        |store| store.acquire(hold(kind, limit), &key, &owner, ttl_ms, Wait::Now).map(Acquired::is_taken);

    fn release(key: SmallStr, kind: HoldArg, owner: SmallStr) -> bool,
        ts("handle: object, key: string, hold: HoldKind, owner: string", "boolean | Promise<boolean>"),
        |store| store.release(hold(kind, 0.0), &key, &owner);

    fn extend(key: SmallStr, kind: HoldArg, owner: SmallStr, ttl_ms: f64) -> bool,
        ts("handle: object, key: string, hold: HoldKind, owner: string, ttlMs: number", "boolean | Promise<boolean>"),
        |store| store.extend(hold(kind, 0.0), &key, &owner, ttl_ms);

    #[doc = " Whether an acquire in this hold (with this limit) would be refused now:"]
    #[doc = " for a plain lock, whether anyone holds it."]
    fn would_wait(key: SmallStr, kind: HoldArg, limit: f64) -> bool,
        ts("handle: object, key: string, hold: HoldKind, limit: number", "boolean | Promise<boolean>"),
        |store| store.would_wait(hold(kind, limit), &key);

    #[doc = " Milliseconds left: a plain lock's (whoever holds it), else `owner`'s"]
    #[doc = " hold (null without an owner); null when there is no such hold."]
    fn remaining_time(key: SmallStr, kind: HoldArg, owner: Option<SmallStr>) -> Option<f64>,
        ts("handle: object, key: string, hold: HoldKind, owner?: string | null", "number | null | Promise<number | null>"),
        |store| store.remaining(hold(kind, 0.0), &key, owner.as_deref());

    #[doc = " Whether `owner` holds `key` in this hold now."]
    fn holds(key: SmallStr, kind: HoldArg, owner: SmallStr) -> bool,
        ts("handle: object, key: string, hold: HoldKind, owner: string", "boolean | Promise<boolean>"),
        |store| store.holds(hold(kind, 0.0), &key, &owner);

    #[doc = " How many hold `key` now (1 or 0 for a plain lock; permits; readers, or 1"]
    #[doc = " for a writer)."]
    fn holders(key: SmallStr, kind: HoldArg) -> f64,
        ts("handle: object, key: string, hold: HoldKind", "number | Promise<number>"),
        |store| store.holders(hold(kind, 0.0), &key);

    #[doc = " A waiting writer gave up: new readers need not wait for it any more."]
    fn withdraw(key: SmallStr, kind: HoldArg) -> (),
        ts("handle: object, key: string, hold: HoldKind", "void | Promise<void>"),
        |store| store.withdraw(hold(kind, 0.0), &key);

    #[doc = " Settles once everything asked about `key` so far is written to the"]
    #[doc = " store's connection (undefined when it already is): run() ends on this"]
    #[doc = " instead of its release's answer, for stores that tell when they wrote."]
    fn sent(key: SmallStr) -> (),
        ts("handle: object, key: string", "void | Promise<void>"),
        |store| store.sent(&key);

    #[doc = " Claim a plain lock handed to this process from its store's line, for"]
    #[doc = " its TTL; with `more` of this process waiting, it keeps a place in line,"]
    #[doc = " asked for at `asked` (`performance.now()` as the claim was sent)."]
    fn claim(key: SmallStr, owner: SmallStr, ttl_ms: f64, more: bool, asked: f64) -> bool,
        ts("handle: object, key: string, owner: string, ttlMs: number, more: boolean, asked: number", "boolean | Promise<boolean>"),
        |store| store.claim(&key, &owner, ttl_ms, more.then(|| Asked::at(asked)));

    #[doc = " Every waiter of this process for the plain lock `key` gave up: its place"]
    #[doc = " in the store's line goes (a no-op for stores without one)."]
    fn leave_line(key: SmallStr) -> (),
        ts("handle: object, key: string", "void | Promise<void>"),
        |store| store.leave_line(&key);

    #[doc = " One round trip to a server store's server, connecting if need be."]
    fn ping() -> (),
        ts("handle: object", "void | Promise<void>"),
        |store| store.ping();
}

/// The fencing token of `owner`'s hold of `key`, from what the store keeps
/// with the hold, or null. (A store on a server hands its tokens over with
/// the acquire's reply.)
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, hold: HoldKind, owner: string"
)]
pub fn fencing_token(handle: Handle, key: SmallStr, kind: HoldArg, owner: SmallStr) -> Option<f64> {
    handle.store.fencing_token(hold(kind, 0.0), &key, &owner)
}

/// Follow (or stop following) releases of `key`'s holds that other clients
/// announce; a no-op for stores that cannot hear them. The listener task,
/// when this starts one, runs on Tokio.
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, hold: HoldKind, on: boolean"
)]
pub fn watch_releases(handle: Handle, key: String, kind: HoldArg, on: bool) {
    if let Some(task) = handle.store.watch(hold(kind, 0.0), &key, on) {
        napi::bindgen_prelude::spawn(task);
    }
}

/// Queue run()'s release of the plain lock `key`, to be written with the
/// store's next operation or at `flushReleases` (a store that
/// `queuesReleases`); false where it is not queued (then release it as usual).
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, owner: string"
)]
pub fn queue_release(handle: Handle, key: SmallStr, owner: SmallStr) -> bool {
    handle.store.queue_release(&key, &owner)
}

/// A queued release that failed: its key, and the error's code and message.
#[napi(object)]
pub struct FailedRelease {
    pub key: String,
    pub code: String,
    pub message: String,
}

/// Write the store's queued releases now; answers those that failed since
/// the last flush.
#[napi(catch_unwind, ts_args_type = "handle: object")]
pub fn flush_releases(handle: Handle) -> Vec<FailedRelease> {
    let failed = handle.store.flush_releases().into_iter();
    failed
        .map(|(key, error)| {
            let (code, message) = match error {
                StoreError::Type(message) => (Code::Internal, message),
                StoreError::Backend(e) => (e.code, e.message),
            };
            FailedRelease {
                key,
                code: code.as_str().to_owned(),
                message,
            }
        })
        .collect()
}

/// Close a server store's connections; later operations fail as closed.
#[napi(catch_unwind, ts_args_type = "handle: object")]
pub fn close_store(handle: Handle) {
    handle.store.close();
}

/// What a handle's store can do beyond its operations (read once per
/// store), or, without a handle, what every store written in JS can do: the
/// store's record as it is, each capability under its JS name.
#[napi(
    catch_unwind,
    ts_args_type = "handle?: object",
    ts_return_type = "Record<string, boolean>"
)]
pub fn store_capabilities(env: &Env, handle: Option<Handle>) -> Result<Object<'_>> {
    let record = match handle {
        Some(handle) => handle.store.capabilities(),
        None => Capabilities::WRITTEN_IN_JS,
    };
    let mut object = Object::new(env)?;
    for (name, can) in record.named() {
        object.set_named_property(name, can)?;
    }
    Ok(object)
}

#[napi(object)]
pub struct Restored {
    pub key: String,
    pub ttl_ms: f64,
    pub owner: Option<String>,
    /// "semaphore", "read" or "write"; absent for a plain lock.
    pub kind: Option<String>,
    pub limit: Option<f64>,
}

/// The fields of a serialized lock, or the reason it is malformed.
#[napi(catch_unwind)]
pub fn parse_serialized(text: String) -> Either<Restored, String> {
    match lock::parse_serialized(&text) {
        Ok(s) => Either::A(Restored {
            key: s.key,
            ttl_ms: s.ttl_ms,
            owner: s.owner,
            kind: s.kind,
            limit: s.limit,
        }),
        Err(reason) => Either::B(reason),
    }
}

/// Limits and defaults, so the JS layer checks against the same numbers.
#[napi(object)]
pub struct Limits {
    pub max_ms: f64,
    pub default_ttl_ms: f64,
    pub default_retry_delay_ms: f64,
    /// How long a lock handed over from a store's line is held before its
    /// new holder claims it.
    pub line_claim_ms: f64,
    /// How often a waiter in a store's line renews its place, at least.
    pub line_renew_ms: f64,
}

#[napi(catch_unwind)]
pub fn limits() -> Limits {
    Limits {
        max_ms: lock::MAX_MS,
        default_ttl_ms: lock::DEFAULT_TTL_MS,
        default_retry_delay_ms: lock::DEFAULT_RETRY_DELAY_MS,
        line_claim_ms: crate::store::line::CLAIM_MS as f64,
        line_renew_ms: crate::store::line::RENEW_MS as f64,
    }
}

/// One Tokio worker: a server command, the connection task that writes and
/// reads it, and the callback back to JS then hand over within one thread
/// instead of waking each other across threads.
/// (Module init runs once per environment, each worker thread included; the
/// runtime is made once per process.)
#[napi_derive::module_init]
fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
        {
            napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
        }
    });
}
