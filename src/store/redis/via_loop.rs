//! The operations on a connection the JS thread's event loop drives (one
//! server, `redis://` or `rediss://`): each a [`Request`] whose reply is read
//! into the operation's answer on the JS thread (see `wire/`).

use redis::{Cmd, Value};
use rustls::pki_types::ServerName;

use super::scripts::channel;
use super::shared::HoldsCall;
use super::wire::connect::Target;
use super::wire::{scripts, send, Direct, Request};
use super::RedisStore;
use crate::store::event_loop::host::MakeHost;
use crate::store::tls::client_config;
use crate::store::{Acquired, Op};

impl RedisStore {
    /// Drive a single server's connection on the loop of `env` (the JS thread
    /// making the store); a Cluster, or a server behind a unix socket, stays
    /// on Tokio.
    pub(super) fn on_event_loop(mut self, make_host: MakeHost<'_>) -> Result<Self, String> {
        let shared = &self.shared;
        if shared.cluster.is_some() {
            return Ok(self);
        }
        let info = shared.clients[0].get_connection_info();
        let (host, port, tls) = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port, None),
            redis::ConnectionAddr::TcpTls { host, port, .. } => {
                let config = client_config(&shared.options.tls.clone().unwrap_or_default())?;
                let name = ServerName::try_from(host.clone())
                    .map_err(|e| format!("url: {host:?} is not a host name TLS can check: {e}"))?;
                (host.clone(), *port, Some((config, name)))
            }
            _ => return Ok(self),
        };
        let redis = info.redis_settings();
        let target = Target {
            host,
            port,
            tls,
            username: redis.username().map(str::to_owned),
            password: redis.password().map(str::to_owned),
            db: redis.db(),
            connect_timeout: shared.options.connect_timeout,
            display: shared.display.clone(),
        };
        let command_timeout =
            u64::try_from(shared.options.command_timeout.as_millis()).unwrap_or(u64::MAX);
        self.direct = Some(Direct::new(make_host, target, 1, command_timeout)?);
        Ok(self)
    }
}

const NOT_A_COUNT: &str = "something other than a count";

fn count(value: Value) -> Result<i64, &'static str> {
    match value {
        Value::Int(n) => Ok(n),
        _ => Err(NOT_A_COUNT),
    }
}

pub fn acquire(
    direct: &Direct,
    full_key: String,
    counter: String,
    owner: &str,
    ttl: u64,
) -> Op<Acquired> {
    let lua = &scripts()[0];
    let request = Request::script(
        "acquire",
        lua,
        vec![full_key, counter],
        vec![owner.as_bytes().to_vec(), ttl.to_string().into_bytes()],
    );
    send(direct, request, super::shared::token)
}

pub fn release(direct: &Direct, key: String, owner: &str) -> Op<bool> {
    let lua = &scripts()[1];
    let announce = channel(&key).into_bytes();
    let request = Request::script(
        "release",
        lua,
        vec![key],
        vec![owner.as_bytes().to_vec(), announce],
    );
    send(direct, request, |value| Ok(count(value)? == 1))
}

pub fn extend(direct: &Direct, key: String, owner: &str, ttl: u64) -> Op<bool> {
    let lua = &scripts()[2];
    let request = Request::script(
        "extend",
        lua,
        vec![key],
        vec![owner.as_bytes().to_vec(), ttl.to_string().into_bytes()],
    );
    send(direct, request, |value| Ok(count(value)? == 1))
}

/// A semaphore's or read-write key's operation: one call of the `HOLDS` script.
pub fn shared_holds<T: 'static>(
    direct: &Direct,
    call: HoldsCall,
    read: fn(Value) -> Result<T, &'static str>,
) -> Op<T> {
    let lua = &scripts()[3];
    let request = Request::script(call.op.method(), lua, call.keys, call.args);
    send(direct, request, read)
}

pub fn is_locked(direct: &Direct, exists: &Cmd) -> Op<bool> {
    send(direct, Request::plain("isLocked", exists), |value| {
        Ok(count(value)? == 1)
    })
}

pub fn remaining_time(direct: &Direct, pttl: &Cmd) -> Op<Option<f64>> {
    // -2: no such key; -1: a key without expiry, which no lock writes.
    send(direct, Request::plain("remainingTime", pttl), |value| {
        let ms = count(value)?;
        Ok((ms >= 0).then_some(ms as f64))
    })
}

pub fn holds(direct: &Direct, get: &Cmd, owner: String) -> Op<bool> {
    send(
        direct,
        Request::plain("isExpired", get),
        move |value| match value {
            Value::Nil => Ok(false),
            Value::BulkString(bytes) => Ok(bytes == owner.as_bytes()),
            _ => Err("something other than a string or nil"),
        },
    )
}
