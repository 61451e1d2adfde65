//! `MySqlLockStore`'s handle, and its schema.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::{release_listener, table_options, tagged_caller, TableConfig};
use crate::napi::errors::new_error;
use crate::napi::handle::{NewHandle, StoreHandle};
use crate::napi::host::node_hosts;
use crate::napi::pump::Pump;
use crate::store::MySqlStore;

/// A handle over a MySQL or MariaDB server. The URL is read now;
/// connections open on the first operation. `on_released` as for Redis
/// (locks handed to this process from the line, heard by its ear).
#[napi(
    catch_unwind,
    ts_args_type = "config: TableConfig, onReleased: (tagged: string) => void",
    ts_return_type = "object"
)]
pub fn create_mysql_store(
    env: &Env, config: TableConfig, on_released: Function<'_, String, ()>,
) -> Result<NewHandle> {
    let on_released = release_listener(tagged_caller(on_released)?);
    let mysql = MySqlStore::new(table_options(config), Some(on_released), &node_hosts(env))
        .map_err(|reason| new_error(env, true, None, &format!("new MySqlLockStore: {reason}")))?;
    let pump = Pump::new(env)?;
    Ok(NewHandle(StoreHandle::new(Arc::new(mysql), Some(pump))))
}

/// The SQL that makes the objects of a MySQL store on `table` (checked by the JS layer).
#[napi(catch_unwind)]
pub fn mysql_schema(table: String) -> String {
    crate::store::mysql::schema(&table)
}
