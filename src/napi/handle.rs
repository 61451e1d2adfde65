//! A store as JS holds it: a tagged napi external, read back without
//! napi-rs's borrow tracking.
//!
//! napi-rs's `External` argument tracks each borrow, which was about a sixth
//! of a lock cycle in memory; a plain external read with a tag check is all
//! a handle needs (JS keeps the external alive while it is an argument).

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::sys;

use super::pump::Pump;
use crate::store::LockStore;

/// A store as JS holds it: an opaque handle inside the store object.
#[repr(C)]
pub struct StoreHandle {
    /// Always [`HANDLE_TAG`]; first, so a foreign external can be told apart.
    tag: u64,
    pub store: Arc<dyn LockStore>,
    /// Settles the promises of this store's operations that run on Tokio.
    pub pump: Option<Pump>,
}

impl StoreHandle {
    pub fn new(store: Arc<dyn LockStore>, pump: Option<Pump>) -> Self {
        StoreHandle {
            tag: HANDLE_TAG,
            store,
            pump,
        }
    }
}

/// A handle made here, on its way to JS: a napi external that owns it.
pub struct NewHandle(pub StoreHandle);

/// A handle JS passed in, borrowed for the call.
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
    _env: sys::napi_env, data: *mut std::ffi::c_void, _hint: *mut std::ffi::c_void,
) {
    // SAFETY: `data` is the box `NewHandle::to_napi_value` leaked, and Node
    // finalizes an external once.
    drop(unsafe { Box::from_raw(data.cast::<StoreHandle>()) });
}

impl ToNapiValue for NewHandle {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        let data = Box::into_raw(Box::new(value.0));
        let mut out = std::ptr::null_mut();
        // SAFETY: `env` is the live env of this call; the external takes
        // ownership of `data` and frees it in `drop_handle`.
        let status = unsafe {
            sys::napi_create_external(
                env,
                data.cast(),
                Some(drop_handle),
                std::ptr::null_mut(),
                &mut out,
            )
        };
        if status != sys::Status::napi_ok {
            // SAFETY: no external was made, so the box is still ours alone.
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
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        let mut data = std::ptr::null_mut();
        // SAFETY: `env` and `value` are this call's; napi checks that `value`
        // is an external before it writes its pointer.
        check_status!(
            unsafe { sys::napi_get_value_external(env, value, &mut data) },
            "expected a store handle"
        )?;
        let handle = data.cast::<StoreHandle>().cast_const();
        // SAFETY: these functions are the package's internals, called only by
        // its JS layer, which passes only handles made by `NewHandle` (a
        // `repr(C)` struct whose first field is the tag). The tag check is a
        // guard against a mistake in that layer, refusing anything else before
        // its data is used as a `StoreHandle`.
        if handle.is_null() || unsafe { std::ptr::read(handle.cast::<u64>()) } != HANDLE_TAG {
            return Err(Error::new(Status::InvalidArg, "expected a store handle"));
        }
        Ok(Handle(handle))
    }
}
