//! Store failures and panics as the JS errors a caller sees.

use napi::bindgen_prelude::*;

use crate::store::{BackendError, Code, StoreError, StoreFuture};

/// A panic while a store operation runs on Tokio becomes an error for the
/// caller, not a promise left pending forever. (Panics in the functions JS
/// calls are caught by `#[napi(catch_unwind)]` and thrown as JS errors.)
pub async fn contain_panics<T>(future: StoreFuture<T>) -> std::result::Result<T, StoreError> {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(future).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => Err(StoreError::Backend(BackendError {
            code: Code::Internal,
            message: format!(
                "internal error in a lock store operation: {}",
                panic_text(&panic)
            ),
        })),
    }
}

pub fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned())
}

/// A store failure as the JS error the caller sees.
pub fn js_error(env: &Env, e: StoreError) -> Error {
    match e {
        StoreError::Type(message) => new_error(env, true, None, &message),
        StoreError::Backend(e) => new_error(env, false, Some(e.code), &e.message),
    }
}

/// A `TypeError` or an `Error`, with `code` set when given.
pub fn new_error(env: &Env, type_error: bool, code: Option<Code>, message: &str) -> Error {
    let made = (|| {
        let msg = env.create_string(message)?;
        let code = code.map(|c| env.create_string(c.as_str())).transpose()?;
        let code = code.map_or(std::ptr::null_mut(), |c| c.raw());
        let mut error = std::ptr::null_mut();
        let create = if type_error {
            napi::sys::napi_create_type_error
        } else {
            napi::sys::napi_create_error
        };
        // SAFETY: `env` is the live env of this call on the JS thread; `code`
        // is null or a string and `msg` a string, both made with it.
        check_status!(unsafe { create(env.raw(), code, msg.raw(), &mut error) })?;
        // SAFETY: `error` was just made by napi with this env.
        Ok::<_, Error>(Error::from(unsafe {
            Unknown::from_raw_unchecked(env.raw(), error)
        }))
    })();
    made.unwrap_or_else(|_| Error::new(Status::GenericFailure, message))
}
