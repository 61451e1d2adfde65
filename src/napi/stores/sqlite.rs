//! `SqliteLockStore`'s handle.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::{ms, release_listener, tagged_caller};
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
/// `on_released` as for Redis (releases by other processes, heard by the
/// store's ear).
#[napi(
    catch_unwind,
    ts_args_type = "config: SqliteConfig, onReleased: (tagged: string) => void",
    ts_return_type = "object"
)]
pub fn create_sqlite_store(
    env: &Env, config: SqliteConfig, on_released: Function<'_, String, ()>,
) -> Result<NewHandle> {
    let on_released = release_listener(tagged_caller(on_released)?);
    let options = SqliteOptions {
        path: config.path.into(),
        table: config.table,
        command_timeout: ms(config.command_timeout),
        sweep_interval: ms(config.sweep_interval),
    };
    let sqlite = SqliteStore::new(options, Some(on_released)).map_err(|e| js_error(env, e))?;
    Ok(NewHandle(StoreHandle::new(Arc::new(sqlite), None)))
}
