//! The napi functions for keys many may hold at once: semaphore permits and
//! read-write holds. Each names the kind of hold (`HoldMode`, plus the
//! caller's limit for a permit) beside the key; otherwise they mirror the
//! plain lock's functions in [`super`].

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::convert::{to_js, Settled};
use super::handle::Handle;
use crate::lock;
use crate::store::Mode;
use crate::text::SmallStr;

/// Which kind of hold, as JS names it.
#[napi]
pub enum HoldMode {
    Permit,
    Read,
    Write,
}

/// The store's mode: `limit` (a positive safe integer, checked by the JS
/// layer) matters to a permit only.
fn mode(mode: HoldMode, limit: f64) -> Mode {
    match mode {
        HoldMode::Permit => Mode::Permit {
            limit: limit as u64,
        },
        HoldMode::Read => Mode::Read,
        HoldMode::Write => Mode::Write,
    }
}

/// One attempt for a fresh owner: `[owner, fencing token]`, or null if the
/// mode admits nobody more now.
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, mode: HoldMode, limit: number, ttlMs: number",
    ts_return_type = "string | [string, number] | null | Promise<string | [string, number] | null>"
)]
pub fn acquire_in<'env>(
    env: &'env Env,
    handle: Handle,
    key: SmallStr,
    hold: HoldMode,
    limit: f64,
    ttl_ms: f64,
) -> Result<Settled<'env, Option<lock::Grant>>> {
    let op = lock::acquire_in(&handle.store, mode(hold, limit), &key, ttl_ms);
    to_js(env, &handle, op)
}

#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, mode: HoldMode, owner: string",
    ts_return_type = "boolean | Promise<boolean>"
)]
pub fn release_in<'env>(
    env: &'env Env,
    handle: Handle,
    key: SmallStr,
    hold: HoldMode,
    owner: SmallStr,
) -> Result<Settled<'env, bool>> {
    to_js(
        env,
        &handle,
        handle.store.release_in(mode(hold, 0.0), &key, &owner),
    )
}

#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, mode: HoldMode, owner: string, ttlMs: number",
    ts_return_type = "boolean | Promise<boolean>"
)]
pub fn extend_in<'env>(
    env: &'env Env,
    handle: Handle,
    key: SmallStr,
    hold: HoldMode,
    owner: SmallStr,
    ttl_ms: f64,
) -> Result<Settled<'env, bool>> {
    let op = handle
        .store
        .extend_in(mode(hold, 0.0), &key, &owner, ttl_ms);
    to_js(env, &handle, op)
}

#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, mode: HoldMode, owner: string",
    ts_return_type = "boolean | Promise<boolean>"
)]
pub fn holds_in<'env>(
    env: &'env Env,
    handle: Handle,
    key: SmallStr,
    hold: HoldMode,
    owner: SmallStr,
) -> Result<Settled<'env, bool>> {
    to_js(
        env,
        &handle,
        handle.store.holds_in(mode(hold, 0.0), &key, &owner),
    )
}

#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, mode: HoldMode, owner: string",
    ts_return_type = "number | null | Promise<number | null>"
)]
pub fn remaining_in<'env>(
    env: &'env Env,
    handle: Handle,
    key: SmallStr,
    hold: HoldMode,
    owner: SmallStr,
) -> Result<Settled<'env, Option<f64>>> {
    let op = handle.store.remaining_in(mode(hold, 0.0), &key, &owner);
    to_js(env, &handle, op)
}

/// Whether an acquire in this mode (with this limit) would be refused now.
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, mode: HoldMode, limit: number",
    ts_return_type = "boolean | Promise<boolean>"
)]
pub fn would_wait<'env>(
    env: &'env Env,
    handle: Handle,
    key: SmallStr,
    hold: HoldMode,
    limit: f64,
) -> Result<Settled<'env, bool>> {
    to_js(
        env,
        &handle,
        handle.store.would_wait(mode(hold, limit), &key),
    )
}

/// How many hold `key` now (permits; readers, or 1 for a writer).
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, mode: HoldMode",
    ts_return_type = "number | Promise<number>"
)]
pub fn holders_in<'env>(
    env: &'env Env,
    handle: Handle,
    key: SmallStr,
    hold: HoldMode,
) -> Result<Settled<'env, f64>> {
    to_js(env, &handle, handle.store.holders(mode(hold, 0.0), &key))
}

#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, mode: HoldMode, owner: string"
)]
pub fn fencing_token_in(
    handle: Handle,
    key: SmallStr,
    hold: HoldMode,
    owner: SmallStr,
) -> Option<f64> {
    handle.store.fencing_token_in(mode(hold, 0.0), &key, &owner)
}

/// Follow (or stop following) releases of `key`'s holds in this mode that
/// other clients announce (RedisLockStore, PostgresLockStore); a no-op elsewhere.
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, mode: HoldMode, on: boolean"
)]
pub fn watch_releases_in(handle: Handle, key: String, hold: HoldMode, on: bool) {
    super::follow(&handle, Some(mode(hold, 0.0)), &key, on);
}

/// A waiting writer gave up: new readers need not wait for it any more.
#[napi(
    catch_unwind,
    ts_args_type = "handle: object, key: string, mode: HoldMode",
    ts_return_type = "void | Promise<void>"
)]
pub fn withdraw_in<'env>(
    env: &'env Env,
    handle: Handle,
    key: SmallStr,
    hold: HoldMode,
) -> Result<Settled<'env, ()>> {
    to_js(env, &handle, handle.store.withdraw(mode(hold, 0.0), &key))
}
