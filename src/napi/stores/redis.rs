//! `RedisLockStore`'s handle.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::{ms, release_listener, tagged_caller, tls_options, TlsPem};
use crate::napi::errors::new_error;
use crate::napi::handle::{NewHandle, StoreHandle};
use crate::napi::host::node_hosts;
use crate::napi::pump::Pump;
use crate::store::{RedisOptions, RedisStore};

/// RedisLockStore's options, already checked by the JS layer (timeouts in ms).
#[napi(object)]
pub struct RedisConfig {
    pub url: String,
    pub cluster: Vec<String>,
    pub prefix: String,
    pub connect_timeout: f64,
    pub command_timeout: f64,
    pub tls: Option<TlsPem>,
}

/// A handle over a Redis server or cluster. URLs are parsed now; the
/// connection opens on the first operation. `on_released` is called (on the
/// JS thread) with each key whose announced release this store follows.
#[napi(
    catch_unwind,
    ts_args_type = "config: RedisConfig, onReleased: (tagged: string) => void",
    ts_return_type = "object"
)]
pub fn create_redis_store(
    env: &Env, config: RedisConfig, on_released: Function<'_, String, ()>,
) -> Result<NewHandle> {
    let on_released = release_listener(tagged_caller(on_released)?);
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
        tls: tls.map(tls_options),
    };
    let redis = RedisStore::new(options, Some(on_released), Some(&node_hosts(env)))
        .map_err(|reason| new_error(env, true, None, &format!("new RedisLockStore: {reason}")))?;
    let pump = Pump::new(env)?;
    Ok(NewHandle(StoreHandle::new(Arc::new(redis), Some(pump))))
}
