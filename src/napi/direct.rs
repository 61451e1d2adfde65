//! The two calls of every lock cycle, `acquire` and `release`, registered
//! with napi directly.
//!
//! A `#[napi]` function pays for napi-rs's per-call bookkeeping (a borrow
//! scope opened, deferred and closed around every call, whatever its
//! arguments): about 100 ns a call here, measured against the same call
//! registered directly (44 ns), where a lock cycle in memory is under 2 µs
//! and makes two such calls. So these two are registered again, under their
//! own names, by the module's exports hook, which runs after the `#[napi]`
//! registrations and so replaces them: same Rust functions (`super::acquire`,
//! `super::release`), same argument conversions, same answers, errors thrown
//! the same way; their `#[napi]` declarations stay what `lib/native.d.ts`
//! types them from. A panic is caught here and thrown as an internal error.

use std::panic::{catch_unwind, AssertUnwindSafe};

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use super::convert::HoldArg;
use super::errors::{new_error, panic_text};
use super::handle::Handle;
use crate::store::Code;
use crate::text::SmallStr;

/// Calls made through here, for the test that proves these are the ones JS
/// calls (`directCalls()` of the test build).
#[cfg(feature = "test-hooks")]
pub static DIRECT_CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

type Callback = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

/// Register `acquire` and `release` directly, over their `#[napi]` selves.
#[napi(module_exports)]
pub fn register_direct_calls(mut exports: Object, env: Env) -> Result<()> {
    let calls: [(&std::ffi::CStr, Callback); 2] = [(c"acquire", acquire), (c"release", release)];
    for (name, callback) in calls {
        let mut function = std::ptr::null_mut();
        // SAFETY: `env` is the live env of module registration; `name` is a
        // NUL-terminated string of `count_bytes()` bytes; napi writes one value.
        check_status!(unsafe {
            sys::napi_create_function(
                env.raw(),
                name.as_ptr(),
                name.count_bytes() as isize,
                Some(callback),
                std::ptr::null_mut(),
                &mut function,
            )
        })?;
        let key = name
            .to_str()
            .map_err(|e| Error::from_reason(e.to_string()))?;
        // SAFETY: `function` was just made by napi with this env.
        exports.set_named_property(key, unsafe {
            Unknown::from_raw_unchecked(env.raw(), function)
        })?;
    }
    Ok(())
}

/// One call from JS with `N` arguments (missing ones are `undefined`): what
/// `body` returns goes back, its error is thrown, a panic is thrown as an
/// internal error. Returns null when something was thrown.
///
/// # Safety
/// `env` and `info` are those of a callback napi is running now.
unsafe fn call<const N: usize>(
    env: sys::napi_env, info: sys::napi_callback_info, name: &str,
    body: impl FnOnce(&Env, [sys::napi_value; N]) -> Result<sys::napi_value>,
) -> sys::napi_value {
    let mut argc = N;
    let mut argv = [std::ptr::null_mut(); N];
    let (this, data) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: as the caller promises; napi writes at most `argc` values (and
    // neither `this` nor the data pointer, which are not asked for).
    let status =
        unsafe { sys::napi_get_cb_info(env, info, &mut argc, argv.as_mut_ptr(), this, data) };
    #[cfg(feature = "test-hooks")]
    DIRECT_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let env = Env::from_raw(env);
    let outcome = match status {
        sys::Status::napi_ok => {
            catch_unwind(AssertUnwindSafe(|| body(&env, argv))).unwrap_or_else(|panic| {
                let message = format!("internal error in {name}: {}", panic_text(&panic));
                Err(new_error(&env, false, Some(Code::Internal), &message))
            })
        }
        _ => Err(Error::new(
            Status::from(status),
            "could not read the arguments",
        )),
    };
    outcome.unwrap_or_else(|mut error| {
        // A conversion napi refused says only its status.
        if error.reason.is_empty() {
            error.reason = format!(
                "{name}: an argument is not what it should be ({})",
                error.status
            );
        }
        // SAFETY: the live env of this callback, on its thread.
        unsafe { JsError::from(error).throw_into(env.raw()) };
        std::ptr::null_mut()
    })
}

unsafe extern "C" fn acquire(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: napi calls this as a callback, with its env and info; every
    // value converted below is one of this call's arguments.
    unsafe {
        call(
            env,
            info,
            "acquire",
            |env, [handle, key, hold, limit, ttl_ms, wait, asked]| {
                let raw = env.raw();
                let settled = super::acquire(
                    env,
                    Handle::from_napi_value(raw, handle)?,
                    SmallStr::from_napi_value(raw, key)?,
                    HoldArg::from_napi_value(raw, hold)?,
                    f64::from_napi_value(raw, limit)?,
                    f64::from_napi_value(raw, ttl_ms)?,
                    u32::from_napi_value(raw, wait)?,
                    f64::from_napi_value(raw, asked)?,
                )?;
                ToNapiValue::to_napi_value(raw, settled)
            },
        )
    }
}

unsafe extern "C" fn release(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: as for `acquire`.
    unsafe {
        call(env, info, "release", |env, [handle, key, hold, owner]| {
            let raw = env.raw();
            let settled = super::release(
                env,
                Handle::from_napi_value(raw, handle)?,
                SmallStr::from_napi_value(raw, key)?,
                HoldArg::from_napi_value(raw, hold)?,
                SmallStr::from_napi_value(raw, owner)?,
            )?;
            ToNapiValue::to_napi_value(raw, settled)
        })
    }
}
