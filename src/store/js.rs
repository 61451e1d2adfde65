//! A store written in JavaScript, bridged into the Rust core.
//!
//! Each of the five methods (bound to the store object by the JS layer, so
//! methods see the store as `this`) is held twice: as a reference, called
//! directly when the operation starts on the JS thread (the common case: the
//! first attempt of every operation), and as a threadsafe function for calls
//! that start on a Tokio thread (the retries of a waiting `acquire`). A direct
//! call to a method that returns a plain value settles without a thread hop or
//! a promise. A method may be `async` or return a plain value; both are
//! accepted. What it returns
//! is checked here, so a store that resolves `"OK"` where a boolean belongs
//! fails with a `TypeError` naming the method instead of being read as truthy.
//! A method that throws or rejects fails the lock operation with that same
//! error object.
//!
//! The threadsafe functions are weak: an idle JS store never keeps the
//! process alive.

use std::sync::Arc;
use std::thread::{self, ThreadId};

use napi::bindgen_prelude::*;
use napi::sys;
use napi::threadsafe_function::ThreadsafeFunction;

use super::{JsPending, JsValueRef, LockStore, Op, Reply, StoreError};

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

fn shown(reply: Reply) -> String {
    match reply {
        Reply::Bool(b) => format!("{b}"),
        Reply::Number(n) => format!("the number {n}"),
        Reply::Nullish => "null or undefined".to_owned(),
        Reply::Other(what) => what.to_owned(),
    }
}

type Returned = Either<Promise<Reply>, Reply>;
type Threadsafe = ThreadsafeFunction<Call, Returned, Call, Status, false, true>;

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
        check_status!(unsafe { sys::napi_is_promise(env, value, &mut is_promise) })?;
        Ok(if is_promise {
            Direct::Promise(JsValueRef(value.cast()))
        } else {
            Direct::Value(unsafe { Reply::from_napi_value(env, value)? })
        })
    }
}

/// One store method, callable from any thread.
struct Method {
    direct: FunctionRef<Call, Direct>,
    threadsafe: Arc<Threadsafe>,
    name: &'static str,
    index: u32,
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
    promise: sys::napi_value,
    method: u32,
    taken: Option<(String, String)>,
}

impl JsValuesTupleIntoVec for SettleArgs {
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    fn into_vec(self, env: sys::napi_env) -> Result<Vec<sys::napi_value>> {
        let mut args = vec![self.promise, unsafe {
            u32::to_napi_value(env, self.method)?
        }];
        if let Some((key, owner)) = self.taken {
            unsafe {
                args.push(String::to_napi_value(env, key)?);
                args.push(String::to_napi_value(env, owner)?);
            }
        }
        Ok(args)
    }
}

/// The JS layer's function that checks a store's promise when it settles.
pub type JsSettle<'a> = Function<'a, SettleArgs, Raw>;

/// The environment the store's functions live in, and the thread that runs it.
struct Home {
    env: sys::napi_env,
    thread: ThreadId,
}

// The env pointer is only dereferenced on `thread`, the one thread where it is
// valid (checked before every use); elsewhere it is an inert number.
unsafe impl Send for Home {}
unsafe impl Sync for Home {}

pub struct JsStore {
    home: Home,
    settle: FunctionRef<SettleArgs, Raw>,
    acquire: Method,
    release: Method,
    extend: Method,
    is_locked: Method,
    remaining_time: Method,
}

/// A store method, as a function already bound to the store object.
pub type JsMethod<'a> = Function<'a, Call, Direct>;

const NAMES: [&str; 5] = ["acquire", "release", "extend", "isLocked", "remainingTime"];

impl JsStore {
    pub fn new(env: &Env, methods: [JsMethod<'_>; 5], settle: JsSettle<'_>) -> Result<Self> {
        let mut built = Vec::with_capacity(5);
        for (index, (f, name)) in (0..).zip(methods.into_iter().zip(NAMES)) {
            // Off the JS thread, a reply can only come back awaited, as Rust values.
            let awaited: Function<'_, Call, Returned> =
                unsafe { Function::from_napi_value(env.raw(), f.raw())? };
            let threadsafe = awaited
                .build_threadsafe_function::<Call>()
                .callee_handled::<false>()
                .weak::<true>()
                .build()?;
            built.push(Method {
                direct: f.create_ref()?,
                threadsafe: Arc::new(threadsafe),
                name,
                index,
            });
        }
        let mut built = built.into_iter();
        let mut next = || {
            built
                .next()
                .ok_or_else(|| Error::new(Status::GenericFailure, "a store method is missing"))
        };
        Ok(Self {
            home: Home {
                env: env.raw(),
                thread: thread::current().id(),
            },
            settle: settle.create_ref()?,
            acquire: next()?,
            release: next()?,
            extend: next()?,
            is_locked: next()?,
            remaining_time: next()?,
        })
    }

    /// Call `method` and check its reply with `read`, which names what was expected.
    fn call<T: Send + 'static>(
        &self,
        method: &Method,
        args: Call,
        read: fn(Reply) -> std::result::Result<T, Reply>,
        expected: &'static str,
    ) -> Op<T> {
        let name = method.name;
        let check = move |reply: Reply| {
            read(reply).map_err(|got| {
                StoreError::Type(format!(
                    "LockStore.{name}() must return {expected} (or a promise of one), but it gave {}",
                    shown(got)
                ))
            })
        };
        if thread::current().id() == self.home.thread {
            let env = Env::from_raw(self.home.env);
            let returned = method.direct.borrow_back(&env).and_then(|f| f.call(args));
            return match returned {
                Ok(Direct::Value(value)) => Op::Ready(check(value)),
                Ok(Direct::Promise(promise)) => Op::Js(JsPending::new(promise, method.index)),
                Err(e) => Op::Ready(Err(StoreError::Js(e))),
            };
        }
        let threadsafe = Arc::clone(&method.threadsafe);
        Op::Pending(Box::pin(async move {
            let reply = match threadsafe.call_async_catch(args).await {
                Ok(Either::A(promise)) => promise.await,
                Ok(Either::B(value)) => Ok(value),
                Err(e) => Err(e),
            }
            .map_err(StoreError::Js)?;
            check(reply)
        }))
    }
}

impl JsStore {
    /// Hand a store's promise to the JS layer's settle function, which checks
    /// its value with [`check_reply`] when it resolves; returns the promise of
    /// the checked value. Only on the JS thread, within the call that made it.
    pub fn settle<T>(&self, env: &Env, pending: JsPending<T>) -> Result<sys::napi_value> {
        let args = SettleArgs {
            promise: pending.promise.0.cast(),
            method: pending.method,
            taken: pending.taken,
        };
        Ok(self.settle.borrow_back(env)?.call(args)?.0)
    }
}

/// What a store method's resolved value means, or the `TypeError` message
/// naming the method. For an `acquire` made for `owner`, the owner or null.
pub enum Checked {
    Bool(bool),
    Owner(Option<String>),
    Ms(Option<f64>),
}

pub fn check_reply(
    method: u32,
    reply: Reply,
    owner: Option<String>,
) -> std::result::Result<Checked, String> {
    let name = NAMES.get(method as usize).copied().unwrap_or("method");
    let wrong = |expected: &str, got: Reply| {
        format!(
            "LockStore.{name}() must return {expected} (or a promise of one), but it gave {}",
            shown(got)
        )
    };
    if method == 4 {
        return milliseconds(reply)
            .map(Checked::Ms)
            .map_err(|got| wrong("a number or null", got));
    }
    let taken = boolean(reply).map_err(|got| wrong("a boolean", got))?;
    Ok(match owner {
        Some(owner) if method == 0 => Checked::Owner(taken.then_some(owner)),
        _ => Checked::Bool(taken),
    })
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

/// A store gets whole milliseconds, rounded up, as the native stores count
/// them: `SET ... PX 1.5` is an error in Redis, and a SQL column of integers
/// may refuse (or truncate) a fraction.
fn whole_ms(ttl_ms: f64) -> f64 {
    ttl_ms.ceil()
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
        let a = args(key, Some(owner), Some(whole_ms(ttl_ms)));
        self.call(&self.acquire, a, boolean, "a boolean")
    }

    fn release(&self, key: &str, owner: &str) -> Op<bool> {
        let a = args(key, Some(owner), None);
        self.call(&self.release, a, boolean, "a boolean")
    }

    fn extend(&self, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        let a = args(key, Some(owner), Some(whole_ms(ttl_ms)));
        self.call(&self.extend, a, boolean, "a boolean")
    }

    fn is_locked(&self, key: &str) -> Op<bool> {
        let a = args(key, None, None);
        self.call(&self.is_locked, a, boolean, "a boolean")
    }

    fn remaining_time(&self, key: &str) -> Op<Option<f64>> {
        let a = args(key, None, None);
        self.call(&self.remaining_time, a, milliseconds, "a number or null")
    }
}
