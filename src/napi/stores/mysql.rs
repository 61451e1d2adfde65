//! `MySqlLockStore`'s handle, and its schema.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::{ms, release_listener, tagged_caller, tls_options, TlsPem};
use crate::napi::errors::new_error;
use crate::napi::handle::{NewHandle, StoreHandle};
use crate::napi::host::node_hosts;
use crate::napi::pump::Pump;
use crate::store::{MySqlOptions, MySqlStore};

/// MySqlLockStore's options, already checked by the JS layer (times in ms).
#[napi(object)]
pub struct MysqlConfig {
    pub url: String,
    pub table: String,
    pub pool_size: u32,
    pub connect_timeout: f64,
    pub command_timeout: f64,
    pub sweep_interval: f64,
    pub tls: Option<TlsPem>,
}

/// A handle over a MySQL or MariaDB server. The URL is read now;
/// connections open on the first operation. `on_released` as for Redis
/// (locks handed to this process from the line, heard by its ear).
#[napi(
    catch_unwind,
    ts_args_type = "config: MysqlConfig, onReleased: (tagged: string) => void",
    ts_return_type = "object"
)]
pub fn create_mysql_store(
    env: &Env,
    config: MysqlConfig,
    on_released: Function<'_, String, ()>,
) -> Result<NewHandle> {
    let on_released = release_listener(tagged_caller(on_released)?);
    let options = MySqlOptions {
        url: config.url,
        table: config.table,
        pool_size: usize::try_from(config.pool_size).unwrap_or(1),
        connect_timeout: ms(config.connect_timeout),
        command_timeout: ms(config.command_timeout),
        sweep_interval: ms(config.sweep_interval),
        tls: config.tls.map(tls_options),
    };
    let mysql = MySqlStore::new(options, Some(on_released), &node_hosts(env))
        .map_err(|reason| new_error(env, true, None, &format!("new MySqlLockStore: {reason}")))?;
    let pump = Pump::new(env)?;
    Ok(NewHandle(StoreHandle::new(Arc::new(mysql), Some(pump))))
}

/// The SQL that makes the objects of a MySQL store on `table` (checked by the JS layer).
#[napi(catch_unwind)]
pub fn mysql_schema(table: String) -> String {
    crate::store::mysql::schema(&table)
}
