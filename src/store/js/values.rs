//! The values that cross between the Rust core and a store written in JS:
//! a method's arguments, what it returned (a promise or a plain value), and
//! the arguments of the JS layer's `settle` function.

use napi::bindgen_prelude::*;
use napi::sys;

use crate::store::{JsValueRef, Reply, StoreMethod};

/// The arguments of one store call, in the `LockStore` order.
pub struct Call {
    pub key: String,
    pub owner: Option<String>,
    pub ttl_ms: Option<f64>,
}

impl JsValuesTupleIntoVec for Call {
    // napi hands a live env from the JS thread; the trait's signature is not ours to mark unsafe.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    fn into_vec(self, env: sys::napi_env) -> Result<Vec<sys::napi_value>> {
        let mut args = Vec::with_capacity(3);
        // SAFETY: `env` is the live env of the JS thread making the call.
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
        // SAFETY (each call here): `env` and `value` are the live ones napi
        // handed this conversion, and each read matches the type just asked.
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

/// What a method called directly returned: a promise, left as a JS value to
/// be settled on the JS thread, or a plain value.
pub enum Direct {
    Promise(JsValueRef),
    Value(Reply),
}

impl TypeName for Direct {
    fn type_name() -> &'static str {
        "Promise | boolean | number | null"
    }

    fn value_type() -> ValueType {
        ValueType::Unknown
    }
}

impl ValidateNapiValue for Direct {}

impl FromNapiValue for Direct {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        let mut is_promise = false;
        // SAFETY: the live `env` and `value` of this conversion.
        check_status!(unsafe { sys::napi_is_promise(env, value, &mut is_promise) })?;
        Ok(if is_promise {
            Direct::Promise(JsValueRef(value.cast()))
        } else {
            // SAFETY: the same live `env` and `value`.
            Direct::Value(unsafe { Reply::from_napi_value(env, value)? })
        })
    }
}

/// A JS value as it is, in or out of a call.
pub struct Raw(pub sys::napi_value);

impl FromNapiValue for Raw {
    unsafe fn from_napi_value(_: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        Ok(Raw(value))
    }
}

impl ToNapiValue for Raw {
    unsafe fn to_napi_value(_: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        Ok(value.0)
    }
}

/// The arguments of the JS layer's `settle(promise, method, key, owner)`.
pub struct SettleArgs {
    pub promise: sys::napi_value,
    pub method: StoreMethod,
    pub taken: Option<(String, String)>,
}

impl JsValuesTupleIntoVec for SettleArgs {
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    fn into_vec(self, env: sys::napi_env) -> Result<Vec<sys::napi_value>> {
        // SAFETY: `env` is the live env of the JS thread making the call, and
        // `promise` a value of the call in progress on it.
        let mut args = vec![self.promise, unsafe {
            u32::to_napi_value(env, self.method as u32)?
        }];
        if let Some((key, owner)) = self.taken {
            // SAFETY: the same live env.
            unsafe {
                args.push(String::to_napi_value(env, key)?);
                args.push(String::to_napi_value(env, owner)?);
            }
        }
        Ok(args)
    }
}
