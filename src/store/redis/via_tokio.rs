//! The operations on a connection Tokio drives (a Redis Cluster, and a
//! server reached over a unix socket): each bounded by the store's timeouts,
//! and sent again when it finds the connection dead.

use std::sync::Arc;

use super::connection::Conn;
use super::errors::{found_dead, RESENDS};
use super::scripts::channel;
use super::shared::HoldsCall;
use super::{RedisStore, Shared};
use crate::store::{Acquired, BackendError, Code, Op, StoreError};

impl RedisStore {
    /// Run one operation against the connection, within the store's time
    /// bounds. A command that finds the connection dead is sent again on a
    /// fresh one (see the module doc for why each operation here may be).
    fn op<T, F, Fut>(&self, name: &'static str, run: F) -> Op<T>
    where
        T: Send + 'static,
        F: Fn(Conn, Arc<Shared>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = redis::RedisResult<T>> + Send,
    {
        let shared = Arc::clone(&self.shared);
        Op::Pending(Box::pin(async move {
            let options = &shared.options;
            let bound = options.command_timeout + options.connect_timeout;
            let attempt = async {
                let mut resent = 0;
                loop {
                    let conn = shared.connection(name).await?;
                    match run(conn, Arc::clone(&shared)).await {
                        Ok(value) => return Ok(value),
                        Err(e) if resent < RESENDS && found_dead(&e) => resent += 1,
                        Err(e) => return Err(shared.diagnose(name, &e).await),
                    }
                }
            };
            match tokio::time::timeout(bound, attempt).await {
                Ok(outcome) => outcome,
                Err(_) => Err(StoreError::Backend(BackendError {
                    code: Code::StoreTimeout,
                    message: format!(
                        "RedisLockStore.{name}: no answer from {} within {} ms",
                        shared.display,
                        bound.as_millis()
                    ),
                })),
            }
        }))
    }

    pub(super) fn acquire_via_tokio(
        &self,
        full_key: String,
        counter: String,
        owner: String,
        ttl: u64,
    ) -> Op<Acquired> {
        self.op("acquire", move |mut conn, shared| {
            let (full_key, counter, owner) = (full_key.clone(), counter.clone(), owner.clone());
            async move {
                let token: Option<u64> = shared
                    .acquire
                    .key(&full_key)
                    .key(&counter)
                    .arg(&owner)
                    .arg(ttl)
                    .invoke_async(&mut conn)
                    .await?;
                Ok(Acquired::from_token(token))
            }
        })
    }

    pub(super) fn release_via_tokio(&self, key: String, owner: String) -> Op<bool> {
        self.op("release", move |mut conn, shared| {
            let (key, owner) = (key.clone(), owner.clone());
            async move {
                let deleted: i64 = shared
                    .release
                    .key(&key)
                    .arg(&owner)
                    .arg(channel(&key))
                    .invoke_async(&mut conn)
                    .await?;
                Ok(deleted == 1)
            }
        })
    }

    pub(super) fn extend_via_tokio(&self, key: String, owner: String, ttl: u64) -> Op<bool> {
        self.op("extend", move |mut conn, shared| {
            let (key, owner) = (key.clone(), owner.clone());
            async move {
                let extended: i64 = shared
                    .extend
                    .key(&key)
                    .arg(&owner)
                    .arg(ttl)
                    .invoke_async(&mut conn)
                    .await?;
                Ok(extended == 1)
            }
        })
    }

    pub(super) fn shared_via_tokio<T: Send + 'static>(
        &self,
        call: HoldsCall,
        read: fn(redis::Value) -> Result<T, &'static str>,
    ) -> Op<T> {
        let HoldsCall { op, keys, args } = call;
        self.op(op.method(), move |mut conn, shared| {
            let (keys, args) = (keys.clone(), args.clone());
            async move {
                let mut invocation = shared.holds.prepare_invoke();
                for key in &keys {
                    invocation.key(key);
                }
                for arg in &args {
                    invocation.arg(arg.as_slice());
                }
                let value: redis::Value = invocation.invoke_async(&mut conn).await?;
                read(value).map_err(|what| {
                    redis::RedisError::from((
                        redis::ErrorKind::UnexpectedReturnType,
                        "unexpected reply",
                        what.to_owned(),
                    ))
                })
            }
        })
    }

    pub(super) fn is_locked_via_tokio(&self, exists: redis::Cmd) -> Op<bool> {
        self.op("isLocked", move |mut conn, _| {
            let exists = exists.clone();
            async move { Ok(exists.query_async::<i64>(&mut conn).await? == 1) }
        })
    }

    pub(super) fn remaining_time_via_tokio(&self, pttl: redis::Cmd) -> Op<Option<f64>> {
        self.op("remainingTime", move |mut conn, _| {
            let pttl = pttl.clone();
            async move {
                // -2: no such key; -1: a key without expiry, which no lock writes.
                let ms: i64 = pttl.query_async(&mut conn).await?;
                Ok((ms >= 0).then_some(ms as f64))
            }
        })
    }

    pub(super) fn holds_via_tokio(&self, get: redis::Cmd, owner: String) -> Op<bool> {
        self.op("isExpired", move |mut conn, _| {
            let (get, owner) = (get.clone(), owner.clone());
            async move {
                let value: Option<String> = get.query_async(&mut conn).await?;
                Ok(value.as_deref() == Some(owner.as_str()))
            }
        })
    }
}
