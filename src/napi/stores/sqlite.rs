//! `SqliteLockStore`'s handle.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::ms;
use crate::napi::errors::js_error;
use crate::napi::handle::{NewHandle, StoreHandle};
use crate::store::{SqliteOptions, SqliteStore};

/// The options of a store on a SQLite file, already checked by the JS
/// layer (times in ms).
#[napi(object)]
pub struct SqliteConfig {
    pub path: String,
    pub table: String,
    pub command_timeout: f64,
    pub sweep_interval: f64,
}

/// A handle over a SQLite file, opened now: a path that cannot be the
/// store's file fails here, naming it. Every operation answers at once.
#[napi(
    catch_unwind,
    ts_args_type = "config: SqliteConfig",
    ts_return_type = "object"
)]
pub fn create_sqlite_store(env: &Env, config: SqliteConfig) -> Result<NewHandle> {
    let options = SqliteOptions {
        path: config.path.into(),
        table: config.table,
        command_timeout: ms(config.command_timeout),
        sweep_interval: ms(config.sweep_interval),
    };
    let sqlite = SqliteStore::new(options).map_err(|e| js_error(env, e))?;
    Ok(NewHandle(StoreHandle::new(Arc::new(sqlite), None)))
}
