//! The napi surface: every function JavaScript calls, and nothing else.
//!
//! The JS layer (`index.js`) validates arguments and keeps the per-lock state;
//! these functions take already-checked primitives plus a store handle, so a
//! call costs one crossing and no property lookups. A store operation that
//! settled at once comes back as a plain value; one that has to wait comes
//! back as a promise driven by Tokio.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::lock;
use crate::pump::{Pump, Settle};
use crate::store::js::{self, Checked, JsMethod, JsSettle, JsStore};
use crate::store::redis::OnReleased;
use crate::store::{
    LockStore, MemoryStore, Op, RedisOptions, RedisStore, Reply, StoreError, StoreFuture,
    TlsOptions,
};
use crate::text::{self, SmallStr};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;

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
        env: napi::sys::napi_env,
        value: napi::sys::napi_value,
    ) -> Result<Self> {
        let mut buf = [0u8; text::INLINE + 4];
        let mut len = 0;
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
        Ok(SmallStr::from(unsafe {
            String::from_napi_value(env, value)?
        }))
    }
}

impl ToNapiValue for SmallStr {
    unsafe fn to_napi_value(
        env: napi::sys::napi_env,
        value: Self,
    ) -> Result<napi::sys::napi_value> {
        let mut out = std::ptr::null_mut();
        let text = value.as_str();
        // Owner tokens are ASCII: Latin-1 is the cheaper way for V8 to take them.
        let create = if text.is_ascii() {
            napi::sys::napi_create_string_latin1
        } else {
            napi::sys::napi_create_string_utf8
        };
        check_status!(unsafe { create(env, text.as_ptr().cast(), text.len() as isize, &mut out) })?;
        Ok(out)
    }
}

/// An acquisition as JS receives it: the owner token alone (a string is the
/// cheapest value to hand over), or `[owner, token]` when the store gave a
/// fencing token with its reply.
impl ToNapiValue for lock::Grant {
    unsafe fn to_napi_value(
        env: napi::sys::napi_env,
        value: Self,
    ) -> Result<napi::sys::napi_value> {
        let owner = unsafe { SmallStr::to_napi_value(env, value.owner)? };
        let Some(token) = value.token else {
            return Ok(owner);
        };
        let mut pair = std::ptr::null_mut();
        check_status!(unsafe { napi::sys::napi_create_array_with_length(env, 2, &mut pair) })?;
        // Tokens count acquisitions: far below 2^53, exact as a JS number.
        let token = unsafe { f64::to_napi_value(env, token as f64)? };
        check_status!(unsafe { napi::sys::napi_set_element(env, pair, 0, owner) })?;
        check_status!(unsafe { napi::sys::napi_set_element(env, pair, 1, token) })?;
        Ok(pair)
    }
}

/// A store as JS holds it: an opaque handle inside the store object.
#[repr(C)]
pub struct StoreHandle {
    /// Always [`HANDLE_TAG`]; first, so a foreign external can be told apart.
    tag: u64,
    store: Arc<dyn LockStore>,
    kind: Kind,
    /// Settles the promises of this store's Tokio-driven operations (Redis).
    pump: Option<Pump>,
}

/// What a handle's store is, for the calls only one kind answers.
enum Kind {
    Memory(Arc<MemoryStore>),
    Redis(Arc<RedisStore>),
    Js(Arc<JsStore>),
}

/// A handle made here, on its way to JS: a napi external that owns it.
pub struct NewHandle(StoreHandle);

/// A handle JS passed in, borrowed for the call. napi-rs's `External`
/// argument tracks each borrow, which was about a sixth of an in-memory lock
/// cycle; a plain external read with a tag check is all a handle needs (JS
/// keeps the external alive while it is an argument).
pub struct Handle(*const StoreHandle);

/// Marks externals made by this addon, so a foreign one is refused.
const HANDLE_TAG: u64 = 0x6b65_656c_6c6f_636b;

impl std::ops::Deref for Handle {
    type Target = StoreHandle;
    fn deref(&self) -> &StoreHandle {
        // SAFETY: made from a live external holding a `StoreHandle` (checked
        // in `from_napi_value`), which its JS object keeps alive during the call.
        unsafe { &*self.0 }
    }
}

unsafe extern "C" fn drop_handle(
    _env: napi::sys::napi_env,
    data: *mut std::ffi::c_void,
    _hint: *mut std::ffi::c_void,
) {
    // SAFETY: `data` is the box `NewHandle::to_napi_value` leaked, finalized once.
    drop(unsafe { Box::from_raw(data.cast::<StoreHandle>()) });
}

impl ToNapiValue for NewHandle {
    unsafe fn to_napi_value(
        env: napi::sys::napi_env,
        value: Self,
    ) -> Result<napi::sys::napi_value> {
        let data = Box::into_raw(Box::new(value.0));
        let mut out = std::ptr::null_mut();
        let status = unsafe {
            napi::sys::napi_create_external(
                env,
                data.cast(),
                Some(drop_handle),
                std::ptr::null_mut(),
                &mut out,
            )
        };
        if status != napi::sys::Status::napi_ok {
            drop(unsafe { Box::from_raw(data) });
        }
        check_status!(status, "could not create a store handle")?;
        Ok(out)
    }
}

impl TypeName for Handle {
    fn type_name() -> &'static str {
        "StoreHandle"
    }

    fn value_type() -> ValueType {
        ValueType::External
    }
}

impl ValidateNapiValue for Handle {}

impl FromNapiValue for Handle {
    unsafe fn from_napi_value(
        env: napi::sys::napi_env,
        value: napi::sys::napi_value,
    ) -> Result<Self> {
        let mut data = std::ptr::null_mut();
        check_status!(
            unsafe { napi::sys::napi_get_value_external(env, value, &mut data) },
            "expected a store handle"
        )?;
        let handle = data.cast::<StoreHandle>().cast_const();
        // SAFETY: every external reaching here came from JS; only ours carry the tag
        // in their first field, and a foreign one is refused before any other use.
        if handle.is_null() || unsafe { std::ptr::read(handle.cast::<u64>()) } != HANDLE_TAG {
            return Err(Error::new(Status::InvalidArg, "expected a store handle"));
        }
        Ok(Handle(handle))
    }
}

/// A value now, or a promise of it.
type Settled<'env, T> = Either<T, PromiseRaw<'env, T>>;

fn to_js<'env, T>(env: &'env Env, handle: &StoreHandle, op: Op<T>) -> Result<Settled<'env, T>>
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
        Op::Js(pending) => match &handle.kind {
            Kind::Js(js) => Ok(Either::B(PromiseRaw::new(
                env.raw(),
                js.settle(env, pending)?,
            ))),
            Kind::Memory(_) | Kind::Redis(_) => Err(Error::new(
                Status::GenericFailure,
                "a native store returned a JS promise",
            )),
        },
    }
}

/// A panic while a store operation runs on Tokio becomes an error for the
/// caller, not a promise left pending forever. (Panics in the functions JS
/// calls are caught by `#[napi(catch_unwind)]` and thrown as JS errors.)
async fn contain_panics<T>(future: StoreFuture<T>) -> std::result::Result<T, StoreError> {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(future).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => Err(StoreError::Backend(crate::store::BackendError {
            code: "ERR_LOCK_INTERNAL",
            message: format!(
                "internal error in a lock store operation: {}",
                panic_text(&panic)
            ),
        })),
    }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned())
}

/// Internal, for the tests that prove a panic becomes a JS error: `inFuture`
/// panics inside a Tokio-driven operation, otherwise in the call itself.
#[napi(catch_unwind)]
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

/// A store failure as the JS error the caller sees.
fn js_error(env: &Env, e: StoreError) -> Error {
    match e {
        StoreError::Js(original) => original,
        StoreError::Type(message) => new_error(env, true, None, &message),
        StoreError::Backend(e) => new_error(env, false, Some(e.code), &e.message),
    }
}

/// A `TypeError` or an `Error`, with `code` set when given.
fn new_error(env: &Env, type_error: bool, code: Option<&str>, message: &str) -> Error {
    let made = (|| {
        let msg = env.create_string(message)?;
        let code = code.map(|c| env.create_string(c)).transpose()?;
        let code = code.map_or(std::ptr::null_mut(), |c| c.raw());
        let mut error = std::ptr::null_mut();
        let create = if type_error {
            napi::sys::napi_create_type_error
        } else {
            napi::sys::napi_create_error
        };
        check_status!(unsafe { create(env.raw(), code, msg.raw(), &mut error) })?;
        Ok::<_, Error>(Error::from(unsafe {
            Unknown::from_raw_unchecked(env.raw(), error)
        }))
    })();
    made.unwrap_or_else(|_| Error::new(Status::GenericFailure, message))
}

#[napi(catch_unwind)]
pub fn create_memory_store() -> NewHandle {
    let memory = Arc::new(MemoryStore::new());
    NewHandle(StoreHandle {
        tag: HANDLE_TAG,
        store: memory.clone(),
        kind: Kind::Memory(memory),
        pump: None,
    })
}

/// PEM bytes for `rediss://`, already checked and converted by the JS layer.
#[napi(object)]
pub struct RedisTls {
    pub ca: Option<Buffer>,
    pub cert: Option<Buffer>,
    pub key: Option<Buffer>,
}

/// RedisLockStore's options, already checked by the JS layer (timeouts in ms).
#[napi(object)]
pub struct RedisConfig {
    pub url: String,
    pub cluster: Vec<String>,
    pub prefix: String,
    pub connect_timeout: f64,
    pub command_timeout: f64,
    pub tls: Option<RedisTls>,
}

/// A handle over a Redis server or cluster. URLs are parsed now; the
/// connection opens on the first operation. `on_released` is called (on the
/// JS thread) with each key whose announced release this store follows.
#[napi(catch_unwind)]
pub fn create_redis_store(
    env: &Env,
    config: RedisConfig,
    on_released: Function<'_, String, ()>,
) -> Result<NewHandle> {
    // Weak: following releases never keeps the process alive by itself.
    let notify = on_released
        .build_threadsafe_function::<String>()
        .callee_handled::<false>()
        .weak::<true>()
        .build()?;
    let on_released: OnReleased = Arc::new(move |key| {
        let _ = notify.call(key, ThreadsafeFunctionCallMode::NonBlocking);
    });
    let ms = |v: f64| {
        std::time::Duration::try_from_secs_f64(v / 1000.0).unwrap_or(std::time::Duration::MAX)
    };
    let RedisConfig {
        url,
        cluster,
        prefix,
        connect_timeout,
        command_timeout,
        tls,
    } = config;
    let options = RedisOptions {
        url,
        cluster,
        prefix,
        connect_timeout: ms(connect_timeout),
        command_timeout: ms(command_timeout),
        tls: tls.map(|tls| TlsOptions {
            ca: tls.ca.map(|b| b.to_vec()),
            cert: tls.cert.map(|b| b.to_vec()),
            key: tls.key.map(|b| b.to_vec()),
        }),
    };
    let redis = RedisStore::new(options, Some(on_released))
        .map_err(|reason| new_error(env, true, None, &format!("new RedisLockStore: {reason}")))?;
    let redis = Arc::new(redis);
    Ok(NewHandle(StoreHandle {
        tag: HANDLE_TAG,
        store: redis.clone(),
        kind: Kind::Redis(redis),
        pump: Some(Pump::new(env)?),
    }))
}

/// Follow (or stop following) releases of `key` announced by other clients;
/// a no-op for stores that cannot hear them.
#[napi(catch_unwind)]
pub fn watch_releases(handle: Handle, key: String, on: bool) {
    if let Kind::Redis(redis) = &handle.kind {
        if let Some(subscriber) = redis.watch(&key, on) {
            napi::bindgen_prelude::spawn(subscriber);
        }
    }
}

/// Close a Redis store's connection; later operations fail as closed.
#[napi(catch_unwind)]
pub fn close_redis_store(handle: Handle) {
    if let Kind::Redis(redis) = &handle.kind {
        redis.close();
    }
}

/// A handle over a store written in JS: its five methods, bound to it.
#[napi(catch_unwind)]
pub fn create_js_store(
    env: &Env,
    acquire: JsMethod<'_>,
    release: JsMethod<'_>,
    extend: JsMethod<'_>,
    is_locked: JsMethod<'_>,
    remaining_time: JsMethod<'_>,
    settle: JsSettle<'_>,
) -> Result<NewHandle> {
    let methods = [acquire, release, extend, is_locked, remaining_time];
    let js = Arc::new(JsStore::new(env, methods, settle)?);
    Ok(NewHandle(StoreHandle {
        tag: HANDLE_TAG,
        store: js.clone(),
        kind: Kind::Js(js),
        pump: None,
    }))
}

/// The check of a JS store's resolved value, for the JS layer's settle
/// function: the value as the lock sees it, or a `TypeError` naming the method.
#[napi(catch_unwind)]
pub fn check_reply(
    env: &Env,
    method: u32,
    reply: Reply,
    owner: Option<String>,
) -> Result<Either3<bool, Option<String>, Option<f64>>> {
    match js::check_reply(method, reply, owner) {
        Ok(Checked::Bool(b)) => Ok(Either3::A(b)),
        Ok(Checked::Owner(owner)) => Ok(Either3::B(owner)),
        Ok(Checked::Ms(ms)) => Ok(Either3::C(ms)),
        Err(message) => Err(new_error(env, true, None, &message)),
    }
}

/// Entries a memory store keeps, counting expired ones not yet swept.
#[napi(catch_unwind)]
pub fn memory_store_size(handle: Handle) -> u32 {
    let len = match &handle.kind {
        Kind::Memory(memory) => memory.len(),
        Kind::Redis(_) | Kind::Js(_) => 0,
    };
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// One attempt for a fresh owner: the owner token (or `[owner, fencing
/// token]`), or null if the lock is held.
#[napi(catch_unwind)]
pub fn acquire<'env>(
    env: &'env Env,
    handle: Handle,
    key: SmallStr,
    ttl_ms: f64,
) -> Result<Settled<'env, Option<lock::Grant>>> {
    to_js(env, &handle, lock::acquire(&handle.store, &key, ttl_ms))
}

/// The store's own `acquire(key, owner, ttlMs)`, for a store used directly.
#[napi(catch_unwind)]
pub fn store_acquire<'env>(
    env: &'env Env,
    handle: Handle,
    key: String,
    owner: String,
    ttl_ms: f64,
) -> Result<Settled<'env, bool>> {
    to_js(env, &handle, handle.store.acquire(&key, &owner, ttl_ms))
}

#[napi(catch_unwind)]
pub fn release<'env>(
    env: &'env Env,
    handle: Handle,
    key: SmallStr,
    owner: SmallStr,
) -> Result<Settled<'env, bool>> {
    to_js(env, &handle, handle.store.release(&key, &owner))
}

#[napi(catch_unwind)]
pub fn extend<'env>(
    env: &'env Env,
    handle: Handle,
    key: String,
    owner: String,
    ttl_ms: f64,
) -> Result<Settled<'env, bool>> {
    to_js(env, &handle, handle.store.extend(&key, &owner, ttl_ms))
}

#[napi(catch_unwind)]
pub fn is_locked<'env>(env: &'env Env, handle: Handle, key: String) -> Result<Settled<'env, bool>> {
    to_js(env, &handle, handle.store.is_locked(&key))
}

#[napi(catch_unwind)]
pub fn remaining_time<'env>(
    env: &'env Env,
    handle: Handle,
    key: String,
) -> Result<Settled<'env, Option<f64>>> {
    to_js(env, &handle, handle.store.remaining_time(&key))
}

/// Whether `owner` holds `key`; null when the store can only say whether anyone does.
#[napi(catch_unwind)]
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
#[napi(catch_unwind)]
pub fn fencing_token(handle: Handle, key: SmallStr, owner: SmallStr) -> Option<f64> {
    handle.store.fencing_token(&key, &owner)
}

#[napi(object)]
pub struct Restored {
    pub key: String,
    pub ttl_ms: f64,
    pub owner: Option<String>,
}

/// The fields of a serialized lock, or the reason it is malformed.
#[napi(catch_unwind)]
pub fn parse_serialized(text: String) -> Either<Restored, String> {
    match lock::parse_serialized(&text) {
        Ok(s) => Either::A(Restored {
            key: s.key,
            ttl_ms: s.ttl_ms,
            owner: s.owner,
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
