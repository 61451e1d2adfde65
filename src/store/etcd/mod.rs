//! `EtcdLockStore`: locks kept by an etcd cluster, through its v3 API over
//! gRPC (`grpc.rs`, HTTP/2 on Tokio, the messages declared by hand in
//! `messages.rs`). Every write is a transaction the cluster commits through
//! its consensus before it answers, so a lock granted survives the failure
//! of any minority of members, the leader included; every read is
//! linearizable. A lock is a key (`layout.rs`) whose value is its owner
//! token, on a lease the cluster counts down (`leases.rs`): it lapses when
//! the lease ends, whatever the holder's process does. Its fencing token is
//! the revision that created the key, which grows across the whole cluster
//! and survives restarts. `members.rs` sends each call to a live member (`endpoint.rs`: their URLs);
//! `ops.rs` holds the operations; `watch.rs` hears releases.

mod endpoint;
mod grpc;
mod layout;
mod leases;
mod members;
mod messages;
mod ops;
mod options;
#[cfg(test)]
mod test_cluster;
#[cfg(test)]
mod tests;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

pub use self::endpoint::{Credentials, Endpoint};
use self::ops::Shared;
pub use self::options::EtcdOptions;
use super::follow::{Follower, OnReleased};
use super::{Acquired, Capabilities, HoldKind, LockStore, Op, StoreError, StoreResult, Task, Wait};

pub struct EtcdStore {
    shared: Arc<Shared>,
    follower: Follower<watch::Watch>,
}

impl EtcdStore {
    /// A store over the cluster `options` names; nothing connects until
    /// the first operation. Fails only on a TLS configuration that cannot be made.
    pub fn new(options: EtcdOptions, on_released: Option<OnReleased>) -> Result<Self, String> {
        let tls = options
            .tls
            .as_ref()
            .map(super::tls::client_config)
            .transpose()?;
        let members = members::Members::new(
            options.endpoints,
            tls,
            options.credentials,
            options.connect_timeout,
            options.command_timeout,
        );
        Ok(EtcdStore {
            shared: Arc::new(Shared {
                members: Arc::new(members),
                leases: Arc::default(),
                prefix: options.prefix,
            }),
            follower: Follower::new(on_released),
        })
    }

    /// Run `op` with the shared parts and the key's etcd key, on Tokio.
    fn plain<T, F>(
        &self, hold: HoldKind, key: &str, op: impl FnOnce(Arc<Shared>, Vec<u8>) -> F,
    ) -> Op<T>
    where
        T: Send + 'static,
        F: std::future::Future<Output = StoreResult<T>> + Send + 'static,
    {
        if hold != HoldKind::Lock {
            return Op::Ready(Err(StoreError::Type(
                "EtcdLockStore keeps plain locks; semaphores and read-write locks are not built on it yet"
                    .to_owned(),
            )));
        }
        let stored = layout::lock_key(&self.shared.prefix, key);
        Op::Pending(Box::pin(op(Arc::clone(&self.shared), stored)))
    }
}

/// Milliseconds as a duration: whole milliseconds, rounded up.
fn ttl_of(ttl_ms: f64) -> Duration {
    Duration::from_millis(ttl_ms.ceil().clamp(1.0, 1e15) as u64)
}

impl LockStore for EtcdStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            announces_releases: true,
            ..Capabilities::default()
        }
    }

    fn acquire(
        &self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64, _wait: Wait,
    ) -> Op<Acquired> {
        let owner = owner.to_owned();
        let sent = Instant::now();
        self.plain(hold, key, move |shared, stored| async move {
            ops::acquire(&shared, stored, owner, ttl_of(ttl_ms), sent).await
        })
    }

    fn release(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        let owner = owner.to_owned();
        self.plain(hold, key, move |shared, stored| async move {
            ops::release(&shared, stored, owner).await
        })
    }

    fn extend(&self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        let owner = owner.to_owned();
        let sent = Instant::now();
        self.plain(hold, key, move |shared, stored| async move {
            ops::extend(&shared, stored, owner, ttl_of(ttl_ms), sent).await
        })
    }

    fn holds(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        let owner = owner.to_owned();
        self.plain(hold, key, move |shared, stored| async move {
            Ok(ops::read(&shared, stored)
                .await?
                .is_some_and(|kv| kv.value == owner.as_bytes()))
        })
    }

    fn remaining(&self, hold: HoldKind, key: &str, _owner: Option<&str>) -> Op<Option<f64>> {
        self.plain(hold, key, move |shared, stored| async move {
            ops::remaining(&shared, stored).await
        })
    }

    fn would_wait(&self, hold: HoldKind, key: &str) -> Op<bool> {
        self.plain(hold, key, move |shared, stored| async move {
            Ok(ops::read(&shared, stored).await?.is_some())
        })
    }

    fn holders(&self, hold: HoldKind, key: &str) -> Op<f64> {
        self.plain(hold, key, move |shared, stored| async move {
            Ok(if ops::read(&shared, stored).await?.is_some() {
                1.0
            } else {
                0.0
            })
        })
    }

    fn watch(&self, hold: HoldKind, key: &str, on: bool) -> Option<Task> {
        if hold != HoldKind::Lock {
            return None;
        }
        let shared = &self.shared;
        let task = self
            .follower
            .follow((key.to_owned(), on), |inbox, on_released| {
                watch::watcher(
                    Arc::clone(&shared.members),
                    shared.prefix.clone(),
                    inbox,
                    on_released,
                )
            })?;
        Some(Box::pin(task))
    }

    fn ping(&self) -> Op<()> {
        let shared = Arc::clone(&self.shared);
        Op::Pending(Box::pin(async move {
            // A linearizable read: answered only by a member with a quorum behind it.
            ops::read(&shared, shared.prefix.clone()).await.map(|_| ())
        }))
    }

    fn close(&self) {
        self.follower.close();
        let members = Arc::clone(&self.shared.members);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { members.close().await });
        }
    }
}
