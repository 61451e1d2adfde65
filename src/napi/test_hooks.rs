//! Exports only the test build has (`--features test-hooks`); the shipped
//! binary has none of them.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::convert::Settled;
use super::errors::{contain_panics, js_error};
use crate::store::StoreFuture;

/// For the tests that prove a panic becomes a JS error: `inFuture` panics
/// inside a Tokio-driven operation, otherwise in the call itself.
#[napi(catch_unwind, ts_return_type = "boolean | Promise<boolean>")]
pub fn panic_for_test<'env>(env: &'env Env, in_future: bool) -> Result<Settled<'env, bool>> {
    if !in_future {
        panic!("a deliberate panic in a napi call");
    }
    let future: StoreFuture<bool> = Box::pin(async { panic!("a deliberate panic on Tokio") });
    env.spawn_future_with_callback(
        async move { Ok(contain_panics(future).await) },
        |env, result| result.map_err(|e| js_error(env, e)),
    )
    .map(Either::B)
}

/// How many calls JS made through the directly registered `acquire` and
/// `release` (`direct.rs`) so far.
#[napi(catch_unwind)]
pub fn direct_calls() -> f64 {
    super::direct::DIRECT_CALLS.load(std::sync::atomic::Ordering::Relaxed) as f64
}
