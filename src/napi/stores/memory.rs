//! `MemoryLockStore`'s handle.

use std::sync::Arc;

use napi_derive::napi;

use crate::napi::handle::{Handle, NewHandle, StoreHandle};
use crate::store::MemoryStore;

#[napi(catch_unwind, ts_return_type = "object")]
pub fn create_memory_store() -> NewHandle {
    let memory = Arc::new(MemoryStore::new());
    NewHandle(StoreHandle::new(memory, None))
}

/// Entries a memory store keeps, counting expired ones not yet swept.
#[napi(catch_unwind, ts_args_type = "handle: object")]
pub fn memory_store_size(handle: Handle) -> u32 {
    u32::try_from(handle.store.entries_in_process()).unwrap_or(u32::MAX)
}
