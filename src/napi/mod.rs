//! The napi surface: every function JavaScript calls, and nothing else.
//!
//! The JS layer (`lib/`) validates arguments and keeps the per-lock state;
//! these functions take already-checked primitives plus a store handle, so a
//! call costs one crossing and no property lookups. A store operation that
//! settled at once comes back as a plain value; one that has to wait comes
//! back as a promise ([`convert::to_js`]). Beside this file: the functions
//! that make stores ([`create`]) and those of semaphores and read-write
//! holds ([`shared`]), the handle ([`handle`]), the conversions
//! ([`convert`]), errors and panics ([`errors`]) and the promise pump ([`pump`]). The TypeScript signatures
//! written here are what `lib/native.d.ts` is generated from, and the JS
//! layer is type-checked against it.

mod convert;
mod create;
mod errors;
mod handle;
mod pump;
mod shared;
#[cfg(feature = "test-hooks")]
mod test_hooks;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use self::convert::{to_js, Settled};
use self::handle::{Handle, Kind, StoreKind};
use crate::lock;
use crate::store::Mode;
use crate::text::SmallStr;

/// Follow (or stop following) releases of `key` announced by other clients;
/// a no-op for stores that cannot hear them.
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, on: boolean"
)]
pub fn watch_releases(handle: Handle, key: String, on: bool) {
    follow(&handle, None, &key, on);
}

/// Follow releases of `key` (a plain lock's, or in `mode` a semaphore's or
/// read-write key's): the listener task, when this starts one, runs on Tokio.
fn follow(handle: &Handle, mode: Option<Mode>, key: &str, on: bool) {
    match &handle.kind {
        Kind::Redis(redis) => {
            if let Some(subscriber) = redis.watch(mode, key, on) {
                napi::bindgen_prelude::spawn(subscriber);
            }
        }
        Kind::Postgres(postgres) => {
            if let Some(listener) = postgres.watch(mode, key, on) {
                napi::bindgen_prelude::spawn(listener);
            }
        }
        Kind::Memory(_) => {}
    }
}

/// Close a server store's connections; later operations fail as closed.
#[napi(catch_unwind, ts_args_type = "handle: object")]
pub fn close_store(handle: Handle) {
    match &handle.kind {
        Kind::Redis(redis) => redis.close(),
        Kind::Postgres(postgres) => postgres.close(),
        Kind::Memory(_) => {}
    }
}

/// What a handle's store is.
#[napi(catch_unwind, ts_args_type = "handle: object")]
pub fn store_kind(handle: Handle) -> StoreKind {
    handle.store_kind()
}

/// Entries a memory store keeps, counting expired ones not yet swept.
#[napi(catch_unwind, ts_args_type = "handle: object")]
pub fn memory_store_size(handle: Handle) -> u32 {
    let len = match &handle.kind {
        Kind::Memory(memory) => memory.len(),
        Kind::Redis(_) | Kind::Postgres(_) => 0,
    };
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// One attempt for a fresh owner: the owner token (or `[owner, fencing
/// token]`), or null if the lock is held.
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, ttlMs: number",
    ts_return_type = "string | [string, number] | null | Promise<string | [string, number] | null>"
)]
pub fn acquire<'env>(
    env: &'env Env,
    handle: Handle,
    key: SmallStr,
    ttl_ms: f64,
) -> Result<Settled<'env, Option<lock::Grant>>> {
    to_js(env, &handle, lock::acquire(&handle.store, &key, ttl_ms))
}

/// The store's own `acquire(key, owner, ttlMs)`, for a store used directly.
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, owner: string, ttlMs: number",
    ts_return_type = "boolean | Promise<boolean>"
)]
pub fn store_acquire<'env>(
    env: &'env Env,
    handle: Handle,
    key: String,
    owner: String,
    ttl_ms: f64,
) -> Result<Settled<'env, bool>> {
    to_js(env, &handle, handle.store.acquire(&key, &owner, ttl_ms))
}

#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, owner: string",
    ts_return_type = "boolean | Promise<boolean>"
)]
pub fn release<'env>(
    env: &'env Env,
    handle: Handle,
    key: SmallStr,
    owner: SmallStr,
) -> Result<Settled<'env, bool>> {
    to_js(env, &handle, handle.store.release(&key, &owner))
}

#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, owner: string, ttlMs: number",
    ts_return_type = "boolean | Promise<boolean>"
)]
pub fn extend<'env>(
    env: &'env Env,
    handle: Handle,
    key: String,
    owner: String,
    ttl_ms: f64,
) -> Result<Settled<'env, bool>> {
    to_js(env, &handle, handle.store.extend(&key, &owner, ttl_ms))
}

#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string",
    ts_return_type = "boolean | Promise<boolean>"
)]
pub fn is_locked<'env>(env: &'env Env, handle: Handle, key: String) -> Result<Settled<'env, bool>> {
    to_js(env, &handle, handle.store.is_locked(&key))
}

#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string",
    ts_return_type = "number | null | Promise<number | null>"
)]
pub fn remaining_time<'env>(
    env: &'env Env,
    handle: Handle,
    key: String,
) -> Result<Settled<'env, Option<f64>>> {
    to_js(env, &handle, handle.store.remaining_time(&key))
}

/// Whether `owner` holds `key`; null when the store can only say whether anyone does.
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, owner: string",
    ts_return_type = "boolean | Promise<boolean> | null"
)]
pub fn holds<'env>(
    env: &'env Env,
    handle: Handle,
    key: String,
    owner: String,
) -> Result<Option<Settled<'env, bool>>> {
    handle
        .store
        .holds(&key, &owner)
        .map(|op| to_js(env, &handle, op))
        .transpose()
}

/// The fencing token of `owner`'s acquisition of `key`, from what the store
/// keeps with the hold (MemoryLockStore), or null. (RedisLockStore hands its
/// tokens over with the acquire's reply instead.)
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, owner: string"
)]
pub fn fencing_token(handle: Handle, key: SmallStr, owner: SmallStr) -> Option<f64> {
    handle.store.fencing_token(&key, &owner)
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
}

#[napi(catch_unwind)]
pub fn limits() -> Limits {
    Limits {
        max_ms: lock::MAX_MS,
        default_ttl_ms: lock::DEFAULT_TTL_MS,
        default_retry_delay_ms: lock::DEFAULT_RETRY_DELAY_MS,
    }
}

/// One Tokio worker: a Redis command, the connection task that writes and
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
