//! `PostgresLockStore`'s handle, and its schema.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::{ms, release_listener, tagged_caller, tls_options, TlsPem};
use crate::napi::errors::new_error;
use crate::napi::handle::{NewHandle, StoreHandle};
use crate::napi::host::node_hosts;
use crate::napi::pump::Pump;
use crate::store::follow::OnWarning;
use crate::store::{PostgresOptions, PostgresStore};

/// PostgresLockStore's options, already checked by the JS layer (times in ms).
#[napi(object)]
pub struct PostgresConfig {
    pub url: String,
    pub table: String,
    pub pool_size: u32,
    pub connect_timeout: f64,
    pub command_timeout: f64,
    pub sweep_interval: f64,
    /// A direct server URL for the LISTEN connection only (behind a
    /// transaction-pooling bouncer, which cannot carry LISTEN).
    pub listen_url: Option<String>,
    pub tls: Option<TlsPem>,
}

/// A handle over a PostgreSQL server. The URL is read now; connections open
/// on the first operation. `on_released` as for Redis; it is also called
/// with `w` and a warning's text, for the JS layer to emit.
#[napi(
    catch_unwind,
    ts_args_type = "config: PostgresConfig, onReleased: (tagged: string) => void",
    ts_return_type = "object"
)]
pub fn create_postgres_store(
    env: &Env,
    config: PostgresConfig,
    on_released: Function<'_, String, ()>,
) -> Result<NewHandle> {
    let call = tagged_caller(on_released)?;
    let on_released = release_listener(Arc::clone(&call));
    let on_warning: OnWarning = Arc::new(move |text: String| call('w', &text));
    let options = PostgresOptions {
        url: config.url,
        table: config.table,
        pool_size: usize::try_from(config.pool_size).unwrap_or(1),
        connect_timeout: ms(config.connect_timeout),
        command_timeout: ms(config.command_timeout),
        sweep_interval: ms(config.sweep_interval),
        listen_url: config.listen_url,
        tls: config.tls.map(tls_options),
    };
    let postgres = PostgresStore::new(
        options,
        Some(on_released),
        Some(on_warning),
        Some(&node_hosts(env)),
    )
    .map_err(|reason| new_error(env, true, None, &format!("new PostgresLockStore: {reason}")))?;
    let pump = Pump::new(env)?;
    Ok(NewHandle(StoreHandle::new(Arc::new(postgres), Some(pump))))
}

/// The SQL that makes the objects of a PostgreSQL store on `table` (checked by the JS layer).
#[napi(catch_unwind)]
pub fn postgres_schema(table: String) -> String {
    crate::store::postgres::schema(&table)
}
