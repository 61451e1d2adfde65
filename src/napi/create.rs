//! Making the stores: the functions JS calls to create a memory, Redis or
//! PostgreSQL store handle, with their options already checked by the JS
//! layer, and the callback their announced releases are reported to.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi_derive::napi;

use super::errors::new_error;
use super::handle::{NewHandle, StoreHandle};
use super::pump::Pump;
use crate::store::event_loop::node_hosts;
use crate::store::follow::{OnReleased, OnWarning, Released};
use crate::store::{
    MemoryStore, MySqlOptions, MySqlStore, PostgresOptions, PostgresStore, RedisOptions,
    RedisStore, TlsOptions,
};

#[napi(catch_unwind, ts_return_type = "object")]
pub fn create_memory_store() -> NewHandle {
    let memory = Arc::new(MemoryStore::new());
    NewHandle(StoreHandle::new(memory, None))
}

/// PEM bytes for `rediss://`, already checked and converted by the JS layer.
#[napi(object)]
pub struct TlsPem {
    pub ca: Option<Buffer>,
    pub cert: Option<Buffer>,
    pub key: Option<Buffer>,
}

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
    env: &Env,
    config: RedisConfig,
    on_released: Function<'_, String, ()>,
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

/// The JS callback for announced releases, callable from Tokio. Weak:
/// following releases never keeps the process alive by itself. It gets the
/// key after a letter saying what it was of: `l` a plain lock, `s` a
/// semaphore, `r` a read-write key (one string is the cheapest to pass);
/// or `w` and a warning to emit.
fn tagged_caller(on_released: Function<'_, String, ()>) -> Result<Tagged> {
    let notify = on_released
        .build_threadsafe_function::<String>()
        .callee_handled::<false>()
        .weak::<true>()
        .build()?;
    Ok(Arc::new(move |tag, text| {
        let mut tagged = String::with_capacity(text.len() + 1);
        tagged.push(tag);
        tagged.push_str(text);
        let _ = notify.call(tagged, ThreadsafeFunctionCallMode::NonBlocking);
    }))
}

/// The JS callback, callable from Tokio with a tag and a text.
type Tagged = Arc<dyn Fn(char, &str) + Send + Sync>;

fn release_listener(call: Tagged) -> OnReleased {
    Arc::new(move |released, key| {
        let tag = match released {
            Released::Lock => 'l',
            Released::Semaphore => 's',
            Released::ReadWrite => 'r',
            Released::Handed => 'h',
        };
        call(tag, &key);
    })
}

fn ms(v: f64) -> std::time::Duration {
    std::time::Duration::try_from_secs_f64(v / 1000.0).unwrap_or(std::time::Duration::MAX)
}

fn tls_options(tls: TlsPem) -> TlsOptions {
    TlsOptions {
        ca: tls.ca.map(|b| b.to_vec()),
        cert: tls.cert.map(|b| b.to_vec()),
        key: tls.key.map(|b| b.to_vec()),
    }
}

/// The SQL that makes the objects of a PostgreSQL store on `table` (checked by the JS layer).
#[napi(catch_unwind)]
pub fn postgres_schema(table: String) -> String {
    crate::store::postgres::schema(&table)
}

/// The SQL that makes the objects of a MySQL store on `table` (checked by the JS layer).
#[napi(catch_unwind)]
pub fn mysql_schema(table: String) -> String {
    crate::store::mysql::schema(&table)
}
