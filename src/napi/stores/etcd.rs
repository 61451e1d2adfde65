//! `EtcdLockStore`'s handle.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::{ms, release_listener, tagged_caller, tls_options, TlsPem};
use crate::napi::errors::new_error;
use crate::napi::handle::{NewHandle, StoreHandle};
use crate::napi::pump::Pump;
use crate::store::etcd::endpoint::{Credentials, Endpoint};
use crate::store::{EtcdOptions, EtcdStore};

/// EtcdLockStore's options, already checked by the JS layer (timeouts in
/// ms); the endpoints' URLs are read here.
#[napi(object)]
pub struct EtcdConfig {
    pub endpoints: Vec<String>,
    pub prefix: String,
    pub username: Option<String>,
    pub password: Option<String>,
    pub connect_timeout: f64,
    pub command_timeout: f64,
    pub tls: Option<TlsPem>,
}

/// A handle over an etcd cluster. The endpoints are read now; a connection
/// opens on the first operation. `on_released` as for Redis (releases heard
/// by the store's watch).
#[napi(
    catch_unwind,
    ts_args_type = "config: EtcdConfig, onReleased: (tagged: string) => void",
    ts_return_type = "object"
)]
pub fn create_etcd_store(
    env: &Env, config: EtcdConfig, on_released: Function<'_, String, ()>,
) -> Result<NewHandle> {
    let refused =
        |reason: String| new_error(env, true, None, &format!("new EtcdLockStore: {reason}"));
    let endpoints = config
        .endpoints
        .iter()
        .map(|url| Endpoint::parse(url).map_err(|e| format!("options.endpoints: {e}")))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(refused)?;
    let credentials = config.username.map(|username| Credentials {
        username,
        password: config.password.unwrap_or_default(),
    });
    let options = EtcdOptions {
        endpoints,
        prefix: config.prefix.into_bytes(),
        credentials,
        tls: config.tls.map(tls_options),
        connect_timeout: ms(config.connect_timeout),
        command_timeout: ms(config.command_timeout),
    };
    let on_released = release_listener(tagged_caller(on_released)?);
    let etcd = EtcdStore::new(options, Some(on_released)).map_err(refused)?;
    let pump = Pump::new(env)?;
    Ok(NewHandle(StoreHandle::new(Arc::new(etcd), Some(pump))))
}
