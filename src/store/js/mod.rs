//! A store written in JavaScript, bridged into the Rust core.
//!
//! Each of the five methods (bound to the store object by the JS layer, so
//! methods see the store as `this`) is held twice: as a reference, called
//! directly when the operation starts on the JS thread (every lock operation
//! does), and as a threadsafe function for the one call that can start on a
//! Tokio thread (giving back the token of an acquire that failed with a
//! reply of the wrong type). A direct call to a method that returns a plain
//! value settles without a thread hop or a promise; a promise it returns is
//! handed to the JS layer's `settle` function and checked there, on the JS
//! thread. What a method returns is checked ([`reply`]), so a store that
//! resolves `"OK"` where a boolean belongs fails with a `TypeError` naming
//! the method instead of being read as truthy. A method that throws or
//! rejects fails the lock operation with that same value (the JS layer
//! turns a throw into a rejection).
//!
//! The threadsafe functions are weak: an idle JS store never keeps the
//! process alive.

pub mod reply;
pub mod values;

use std::sync::Arc;
use std::thread::{self, ThreadId};

use napi::bindgen_prelude::*;
use napi::sys;
use napi::threadsafe_function::ThreadsafeFunction;

use self::reply::{boolean, milliseconds, wrong};
use self::values::{Call, Direct, Raw, SettleArgs};
use super::{JsPending, LockStore, Op, Reply, StoreError, StoreMethod};

type Returned = Either<Promise<Reply>, Reply>;
type Threadsafe = ThreadsafeFunction<Call, Returned, Call, Status, false, true>;

/// One store method, callable from any thread.
struct Method {
    direct: FunctionRef<Call, Direct>,
    threadsafe: Arc<Threadsafe>,
    which: StoreMethod,
}

/// The JS layer's function that checks a store's promise when it settles.
pub type JsSettle<'a> = Function<'a, SettleArgs, Raw>;

/// A store method, as a function already bound to the store object.
pub type JsMethod<'a> = Function<'a, Call, Direct>;

/// The environment the store's functions live in, and the thread that runs it.
struct Home {
    env: sys::napi_env,
    thread: ThreadId,
}

// SAFETY: the env pointer is only dereferenced on `thread`, the one thread
// where it is valid (checked before every use); elsewhere it is an inert number.
unsafe impl Send for Home {}
// SAFETY: as for Send: shared references never use the pointer off `thread`.
unsafe impl Sync for Home {}

pub struct JsStore {
    home: Home,
    settle: FunctionRef<SettleArgs, Raw>,
    /// In `StoreMethod` order.
    methods: [Method; 5],
}

impl JsStore {
    /// `methods` in `StoreMethod` order.
    pub fn new(env: &Env, methods: [JsMethod<'_>; 5], settle: JsSettle<'_>) -> Result<Self> {
        let mut built = Vec::with_capacity(5);
        for (f, which) in methods.into_iter().zip(StoreMethod::ALL) {
            // Off the JS thread, a reply can only come back awaited, as Rust values.
            // SAFETY: `f` is a live function value of this call's env.
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
                which,
            });
        }
        let methods: [Method; 5] = built
            .try_into()
            .map_err(|_| Error::new(Status::GenericFailure, "a store method is missing"))?;
        Ok(Self {
            home: Home {
                env: env.raw(),
                thread: thread::current().id(),
            },
            settle: settle.create_ref()?,
            methods,
        })
    }

    /// Call `which` and check its reply with `read`, which names what was expected.
    fn call<T: Send + 'static>(
        &self,
        which: StoreMethod,
        args: Call,
        read: fn(Reply) -> std::result::Result<T, Reply>,
        expected: &'static str,
    ) -> Op<T> {
        let method = &self.methods[which as usize];
        let check = move |reply: Reply| {
            read(reply).map_err(|got| StoreError::Type(wrong(which, expected, got)))
        };
        if thread::current().id() == self.home.thread {
            let env = Env::from_raw(self.home.env);
            let returned = method.direct.borrow_back(&env).and_then(|f| f.call(args));
            return match returned {
                Ok(Direct::Value(value)) => Op::Ready(check(value)),
                Ok(Direct::Promise(promise)) => Op::Js(JsPending::new(promise, method.which)),
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

    /// Hand a store's promise to the JS layer's settle function, which checks
    /// its value with [`reply::check_reply`] when it resolves; returns the
    /// promise of the checked value. Only on the JS thread, within the call
    /// that made it.
    pub fn settle<T>(&self, env: &Env, pending: JsPending<T>) -> Result<sys::napi_value> {
        let args = SettleArgs {
            promise: pending.promise.0.cast(),
            method: pending.method,
            taken: pending.taken,
        };
        Ok(self.settle.borrow_back(env)?.call(args)?.0)
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
        self.call(StoreMethod::Acquire, a, boolean, "a boolean")
    }

    fn release(&self, key: &str, owner: &str) -> Op<bool> {
        let a = args(key, Some(owner), None);
        self.call(StoreMethod::Release, a, boolean, "a boolean")
    }

    fn extend(&self, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        let a = args(key, Some(owner), Some(whole_ms(ttl_ms)));
        self.call(StoreMethod::Extend, a, boolean, "a boolean")
    }

    fn is_locked(&self, key: &str) -> Op<bool> {
        let a = args(key, None, None);
        self.call(StoreMethod::IsLocked, a, boolean, "a boolean")
    }

    fn remaining_time(&self, key: &str) -> Op<Option<f64>> {
        let a = args(key, None, None);
        self.call(
            StoreMethod::RemainingTime,
            a,
            milliseconds,
            "a number or null",
        )
    }
}
