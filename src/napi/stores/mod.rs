//! Making the stores: one file per store with the function JS calls to
//! create its handle (its options already checked by the JS layer), and
//! what they share here: TLS material, the callback a store's announced
//! releases and warnings are reported to, milliseconds as durations.

mod etcd;
mod memory;
mod mysql;
mod postgres;
mod redis;
mod sqlite;

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi_derive::napi;

use crate::store::follow::{OnReleased, Released};
use crate::store::{TableOptions, TlsOptions};

/// PEM bytes for a TLS connection, already checked and converted by the JS layer.
#[napi(object)]
pub struct TlsPem {
    pub ca: Option<Buffer>,
    pub cert: Option<Buffer>,
    pub key: Option<Buffer>,
}

/// The options of a store on a database table, already checked by the JS
/// layer (times in ms).
#[napi(object)]
pub struct TableConfig {
    pub url: String,
    pub table: String,
    pub pool_size: u32,
    pub connect_timeout: f64,
    pub command_timeout: f64,
    pub sweep_interval: f64,
    pub tls: Option<TlsPem>,
}

pub(super) fn table_options(config: TableConfig) -> TableOptions {
    TableOptions {
        url: config.url,
        table: config.table,
        pool_size: usize::try_from(config.pool_size).unwrap_or(1),
        connect_timeout: ms(config.connect_timeout),
        command_timeout: ms(config.command_timeout),
        sweep_interval: ms(config.sweep_interval),
        tls: config.tls.map(tls_options),
    }
}

/// The JS callback for announced releases, callable from Tokio. Weak:
/// following releases never keeps the process alive by itself. It gets the
/// key after a letter saying what it was of: `l` a plain lock, `s` a
/// semaphore, `r` a read-write key (one string is the cheapest to pass);
/// or `w` and a warning to emit.
pub(super) fn tagged_caller(on_released: Function<'_, String, ()>) -> Result<Tagged> {
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
pub(super) type Tagged = Arc<dyn Fn(char, &str) + Send + Sync>;

pub(super) fn release_listener(call: Tagged) -> OnReleased {
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

pub(super) fn ms(v: f64) -> std::time::Duration {
    std::time::Duration::try_from_secs_f64(v / 1000.0).unwrap_or(std::time::Duration::MAX)
}

pub(super) fn tls_options(tls: TlsPem) -> TlsOptions {
    TlsOptions {
        ca: tls.ca.map(|b| b.to_vec()),
        cert: tls.cert.map(|b| b.to_vec()),
        key: tls.key.map(|b| b.to_vec()),
    }
}
