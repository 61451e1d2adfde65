//! `PostgresLockStore`'s handle, and its schema.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::{release_listener, table_options, tagged_caller, TableConfig};
use crate::napi::errors::new_error;
use crate::napi::handle::{NewHandle, StoreHandle};
use crate::napi::host::node_hosts;
use crate::napi::pump::Pump;
use crate::store::follow::OnWarning;
use crate::store::PostgresStore;

/// A handle over a PostgreSQL server. The URL is read now; connections open
/// on the first operation. `listen_url`: a direct server URL for the LISTEN
/// connection only (behind a transaction-pooling bouncer, which cannot carry
/// LISTEN). `on_released` as for Redis; it is also called
/// with `w` and a warning's text, for the JS layer to emit.
#[napi(
    catch_unwind,
    ts_args_type = "config: TableConfig, listenUrl: string | undefined, onReleased: (tagged: string) => void",
    ts_return_type = "object"
)]
pub fn create_postgres_store(
    env: &Env, config: TableConfig, listen_url: Option<String>,
    on_released: Function<'_, String, ()>,
) -> Result<NewHandle> {
    let call = tagged_caller(on_released)?;
    let on_released = release_listener(Arc::clone(&call));
    let on_warning: OnWarning = Arc::new(move |text: String| call('w', &text));
    let postgres = PostgresStore::new(
        table_options(config),
        listen_url.as_deref(),
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
