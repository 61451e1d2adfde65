//! A store written in JavaScript, bridged into the Rust core.
//!
//! Each of the five methods is held as a threadsafe function (bound to the
//! store object by the JS layer, so methods see the store as `this`). A method
//! may be `async` or return a plain value; both are accepted. What it returns
//! is checked here, so a store that resolves `"OK"` where a boolean belongs
//! fails with a `TypeError` naming the method instead of being read as truthy.
//! A method that throws or rejects fails the lock operation with that same
//! error object.
//!
//! The functions are weak: an idle JS store never keeps the process alive.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::sys;
use napi::threadsafe_function::ThreadsafeFunction;

use super::{LockStore, Op, StoreError};

/// The arguments of one store call, in the `LockStore` order.
pub struct Call {
    key: String,
    owner: Option<String>,
    ttl_ms: Option<f64>,
}

impl JsValuesTupleIntoVec for Call {
    // napi hands a live env from the JS thread; the trait's signature is not ours to mark unsafe.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    fn into_vec(self, env: sys::napi_env) -> Result<Vec<sys::napi_value>> {
        let mut args = Vec::with_capacity(3);
        unsafe {
            args.push(String::to_napi_value(env, self.key)?);
            if let Some(owner) = self.owner {
                args.push(String::to_napi_value(env, owner)?);
            }
            if let Some(ttl_ms) = self.ttl_ms {
                args.push(f64::to_napi_value(env, ttl_ms)?);
            }
        }
        Ok(args)
    }
}

/// What a store method produced, before it is checked against what the method should return.
pub enum Reply {
    Bool(bool),
    Number(f64),
    Nullish,
    Other(&'static str),
}

impl TypeName for Reply {
    fn type_name() -> &'static str {
        "boolean | number | null"
    }

    fn value_type() -> ValueType {
        ValueType::Unknown
    }
}

impl ValidateNapiValue for Reply {
    /// Any value is a reply; whether it is the right one is decided per method.
    /// (A null return means "valid" to napi's `Either`.)
    unsafe fn validate(_env: sys::napi_env, _value: sys::napi_value) -> Result<sys::napi_value> {
        Ok(std::ptr::null_mut())
    }
}

impl FromNapiValue for Reply {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        let mut kind = 0;
        check_status!(unsafe { sys::napi_typeof(env, value, &mut kind) })?;
        Ok(match kind {
            sys::ValueType::napi_boolean => {
                Reply::Bool(unsafe { bool::from_napi_value(env, value)? })
            }
            sys::ValueType::napi_number => {
                Reply::Number(unsafe { f64::from_napi_value(env, value)? })
            }
            sys::ValueType::napi_null | sys::ValueType::napi_undefined => Reply::Nullish,
            sys::ValueType::napi_string => Reply::Other("a string"),
            sys::ValueType::napi_object => Reply::Other("an object"),
            sys::ValueType::napi_function => Reply::Other("a function"),
            sys::ValueType::napi_bigint => Reply::Other("a bigint"),
            sys::ValueType::napi_symbol => Reply::Other("a symbol"),
            _ => Reply::Other("an unknown value"),
        })
    }
}

impl Reply {
    fn shown(&self) -> String {
        match self {
            Reply::Bool(b) => format!("{b}"),
            Reply::Number(n) => format!("the number {n}"),
            Reply::Nullish => "null or undefined".to_owned(),
            Reply::Other(what) => (*what).to_owned(),
        }
    }
}

type Method = ThreadsafeFunction<Call, Either<Promise<Reply>, Reply>, Call, Status, false, true>;

pub struct JsStore {
    acquire: Arc<Method>,
    release: Arc<Method>,
    extend: Arc<Method>,
    is_locked: Arc<Method>,
    remaining_time: Arc<Method>,
}

/// A store method, as a function already bound to the store object.
pub type JsMethod<'a> = Function<'a, Call, Either<Promise<Reply>, Reply>>;

impl JsStore {
    pub fn new(methods: [JsMethod<'_>; 5]) -> Result<Self> {
        let [acquire, release, extend, is_locked, remaining_time] = methods.map(|f| {
            f.build_threadsafe_function::<Call>()
                .callee_handled::<false>()
                .weak::<true>()
                .build()
                .map(Arc::new)
        });
        Ok(Self {
            acquire: acquire?,
            release: release?,
            extend: extend?,
            is_locked: is_locked?,
            remaining_time: remaining_time?,
        })
    }
}

/// Call `method` and check its reply with `read`, which names what was expected.
fn call<T: Send + 'static>(
    method: &Arc<Method>,
    name: &'static str,
    args: Call,
    read: fn(Reply) -> std::result::Result<T, Reply>,
    expected: &'static str,
) -> Op<T> {
    let method = Arc::clone(method);
    Op::Pending(Box::pin(async move {
        let reply = match method.call_async_catch(args).await {
            Ok(Either::A(promise)) => promise.await,
            Ok(Either::B(value)) => Ok(value),
            Err(e) => Err(e),
        }
        .map_err(StoreError::Js)?;
        read(reply).map_err(|got| {
            StoreError::Type(format!(
                "LockStore.{name}() must return {expected} (or a promise of one), but it gave {}",
                got.shown()
            ))
        })
    }))
}

fn boolean(reply: Reply) -> std::result::Result<bool, Reply> {
    match reply {
        Reply::Bool(b) => Ok(b),
        other => Err(other),
    }
}

fn milliseconds(reply: Reply) -> std::result::Result<Option<f64>, Reply> {
    match reply {
        Reply::Nullish => Ok(None),
        Reply::Number(ms) if ms.is_finite() => Ok(Some(ms)),
        other => Err(other),
    }
}

fn args(key: &str, owner: Option<&str>, ttl_ms: Option<f64>) -> Call {
    Call {
        key: key.to_owned(),
        owner: owner.map(str::to_owned),
        ttl_ms,
    }
}

impl LockStore for JsStore {
    fn acquire(&self, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        let a = args(key, Some(owner), Some(ttl_ms));
        call(&self.acquire, "acquire", a, boolean, "a boolean")
    }

    fn release(&self, key: &str, owner: &str) -> Op<bool> {
        let a = args(key, Some(owner), None);
        call(&self.release, "release", a, boolean, "a boolean")
    }

    fn extend(&self, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        let a = args(key, Some(owner), Some(ttl_ms));
        call(&self.extend, "extend", a, boolean, "a boolean")
    }

    fn is_locked(&self, key: &str) -> Op<bool> {
        call(
            &self.is_locked,
            "isLocked",
            args(key, None, None),
            boolean,
            "a boolean",
        )
    }

    fn remaining_time(&self, key: &str) -> Op<Option<f64>> {
        let a = args(key, None, None);
        call(
            &self.remaining_time,
            "remainingTime",
            a,
            milliseconds,
            "a number or null",
        )
    }
}
