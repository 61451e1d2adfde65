//! How values cross between JS and Rust where napi-rs's own conversions
//! cost too much or do not fit: keys and owners as inline strings, the kind
//! of hold, an acquisition's grant, and a store operation's outcome as a
//! value or a promise.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::errors::{contain_panics, js_error};
use super::handle::StoreHandle;
use super::pump::{settle_deferred, Settle};
use crate::lock::Grant;
use crate::store::{HoldKind, Op};
use crate::text::{self, SmallStr};

// Keys and owners cross as `SmallStr`: one copy into a buffer on the stack
// (or the heap, past `INLINE` bytes) instead of napi's measure-then-allocate.
impl TypeName for SmallStr {
    fn type_name() -> &'static str {
        "string"
    }

    fn value_type() -> ValueType {
        ValueType::String
    }
}

impl ValidateNapiValue for SmallStr {}

impl FromNapiValue for SmallStr {
    unsafe fn from_napi_value(
        env: napi::sys::napi_env, value: napi::sys::napi_value,
    ) -> Result<Self> {
        let mut buf = [0u8; text::INLINE + 4];
        let mut len = 0;
        // SAFETY: `env` and `value` are this call's; napi writes at most
        // `buf.len()` bytes (NUL included) and the length it copied.
        check_status!(unsafe {
            napi::sys::napi_get_value_string_utf8(
                env,
                value,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut len,
            )
        })?;
        // napi stops short of a character that does not fit (at most 4 bytes),
        // so a copy this short is the whole string.
        if len + 4 < buf.len() {
            if let Some(small) = SmallStr::from_utf8(&buf[..len]) {
                return Ok(small);
            }
        }
        // SAFETY: the same live `env` and `value`.
        Ok(SmallStr::from(unsafe {
            String::from_napi_value(env, value)?
        }))
    }
}

impl ToNapiValue for SmallStr {
    unsafe fn to_napi_value(
        env: napi::sys::napi_env, value: Self,
    ) -> Result<napi::sys::napi_value> {
        let mut out = std::ptr::null_mut();
        let text = value.as_str();
        // Owner tokens are ASCII: Latin-1 is the cheaper way for V8 to take them.
        let create = if text.is_ascii() {
            napi::sys::napi_create_string_latin1
        } else {
            napi::sys::napi_create_string_utf8
        };
        // SAFETY: `text` is valid (ASCII, so Latin-1; or UTF-8) for its length,
        // and napi copies it before returning.
        check_status!(unsafe { create(env, text.as_ptr().cast(), text.len() as isize, &mut out) })?;
        Ok(out)
    }
}

/// The kind of hold ([`HoldKind`]) as JS names it. Every store operation
/// takes one, beside the key.
#[napi(js_name = "HoldKind")]
pub enum JsHoldKind {
    Lock,
    Permit,
    Read,
    Write,
}

/// The store's hold: `limit` (a positive safe integer, checked by the JS
/// layer) matters to a permit's acquire and would-wait only; the other
/// operations find a permit by its owner, and pass 0.
pub fn hold(HoldArg(kind): HoldArg, limit: f64) -> HoldKind {
    match kind {
        JsHoldKind::Lock => HoldKind::Lock,
        JsHoldKind::Permit => HoldKind::Permit {
            limit: limit as u64,
        },
        JsHoldKind::Read => HoldKind::Read,
        JsHoldKind::Write => HoldKind::Write,
    }
}

/// The kind of hold an operation names, as JS passes it (a `HoldKind`):
/// read with one napi call and a match, where napi-rs's enum conversion
/// takes two layers of checks. It crosses with every operation, a plain
/// lock's included, whose cycle is counted in nanoseconds.
pub struct HoldArg(pub JsHoldKind);

impl FromNapiValue for HoldArg {
    unsafe fn from_napi_value(
        env: napi::sys::napi_env, value: napi::sys::napi_value,
    ) -> Result<Self> {
        let mut number = -1;
        // SAFETY: `env` and `value` are this call's; napi writes one i32.
        check_status!(unsafe { napi::sys::napi_get_value_int32(env, value, &mut number) })?;
        let kind = match number {
            n if n == JsHoldKind::Lock as i32 => JsHoldKind::Lock,
            n if n == JsHoldKind::Permit as i32 => JsHoldKind::Permit,
            n if n == JsHoldKind::Read as i32 => JsHoldKind::Read,
            n if n == JsHoldKind::Write as i32 => JsHoldKind::Write,
            _ => return Err(Error::new(Status::InvalidArg, "expected a HoldKind")),
        };
        Ok(HoldArg(kind))
    }
}

/// An acquisition as JS receives it: the owner token alone (a string is the
/// cheapest value to hand over), `[owner, token]` when the store gave a
/// fencing token with its reply, or `[owner, token, true]` for a lock handed
/// over from the store's line.
impl ToNapiValue for Grant {
    unsafe fn to_napi_value(
        env: napi::sys::napi_env, value: Self,
    ) -> Result<napi::sys::napi_value> {
        // SAFETY (each call below): `env` is the live env of the call this
        // value is returned from, and every value passed was made with it.
        let owner = unsafe { SmallStr::to_napi_value(env, value.owner)? };
        let Some(token) = value.token else {
            return Ok(owner);
        };
        let mut pair = std::ptr::null_mut();
        let length = if value.handed { 3 } else { 2 };
        check_status!(unsafe { napi::sys::napi_create_array_with_length(env, length, &mut pair) })?;
        // Tokens count acquisitions: far below 2^53, exact as a JS number.
        let token = unsafe { f64::to_napi_value(env, token as f64)? };
        check_status!(unsafe { napi::sys::napi_set_element(env, pair, 0, owner) })?;
        check_status!(unsafe { napi::sys::napi_set_element(env, pair, 1, token) })?;
        if value.handed {
            let handed = unsafe { bool::to_napi_value(env, true)? };
            check_status!(unsafe { napi::sys::napi_set_element(env, pair, 2, handed) })?;
        }
        Ok(pair)
    }
}

/// A value now, or a promise of it.
pub type Settled<'env, T> = Either<T, PromiseRaw<'env, T>>;

/// A store operation's outcome for JS: a plain value when it settled at once,
/// else a promise (settled on the JS thread's loop for a local operation, or
/// through the store's pump for one Tokio drives).
pub fn to_js<'env, T>(env: &'env Env, handle: &StoreHandle, op: Op<T>) -> Result<Settled<'env, T>>
where
    T: ToNapiValue + Send + 'static,
{
    match op {
        Op::Ready(result) => result.map(Either::A).map_err(|e| js_error(env, e)),
        // The future yields the store's own result, so the error is turned into
        // a JS value back on the JS thread, where a store's original error
        // object can be handed back as the same object.
        Op::Pending(future) => match &handle.pump {
            Some(pump) => {
                let promise = pump.promise(env, async move {
                    let result = contain_panics(future).await;
                    Box::new(move |env: &Env| match result {
                        // SAFETY: settles run on the JS thread, with its env.
                        Ok(value) => unsafe { T::to_napi_value(env.raw(), value) },
                        Err(e) => Err(js_error(env, e)),
                    }) as Settle
                })?;
                Ok(Either::B(PromiseRaw::new(env.raw(), promise)))
            }
            None => env
                .spawn_future_with_callback(
                    async move { Ok(contain_panics(future).await) },
                    |env, result| result.map_err(|e| js_error(env, e)),
                )
                .map(Either::B),
        },
        Op::Local(op) => {
            let (mut deferred, mut promise) = (std::ptr::null_mut(), std::ptr::null_mut());
            // SAFETY: on the JS thread, with its live env.
            check_status!(unsafe {
                napi::sys::napi_create_promise(env.raw(), &mut deferred, &mut promise)
            })?;
            let raw = env.raw();
            op.start(Box::new(move |result| {
                let env = Env::from_raw(raw);
                // SAFETY: a local operation completes on the JS thread of this
                // env, inside the handle scope its caller opened, once.
                let value = result
                    .map_err(|e| js_error(&env, e))
                    .and_then(|value| unsafe { T::to_napi_value(raw, value) });
                // SAFETY: as above; the deferred is settled here only.
                unsafe { settle_deferred(raw, deferred, value) };
            }));
            Ok(Either::B(PromiseRaw::new(env.raw(), promise)))
        }
    }
}
