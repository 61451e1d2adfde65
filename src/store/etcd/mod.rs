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
//! `lapses.rs` lets each hold this store took go at its TTL;
//! `ops.rs` holds a plain lock's operations (and what every kind of hold
//! shares), `kinds.rs` semaphores' and read-write locks', both made of the
//! pieces in `txn.rs`; `watch.rs` hears releases.

pub mod endpoint;
mod grpc;
mod kinds;
#[cfg(test)]
mod kinds_tests;
mod lapses;
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
mod txn;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use self::ops::Shared;
pub use self::options::EtcdOptions;
use super::follow::{Follower, OnReleased, Released};
use super::{Acquired, Capabilities, HoldKind, LockStore, Op, StoreError, StoreResult, Task, Wait};

pub struct EtcdStore {
    shared: Arc<Shared>,
    follower: Follower<watch::Watch>,
}

impl EtcdStore {
    /// A store over the cluster `options` names; nothing connects until
    /// the first operation. Fails only on a TLS configuration that cannot be made.
    pub fn new(options: EtcdOptions, on_released: Option<OnReleased>) -> Result<Self, String> {
        // An https endpoint without `tls` is checked against the system's roots.
        let https = options.endpoints.iter().any(|e| e.tls_name.is_some());
        let tls = match (&options.tls, https) {
            (Some(tls), _) => Some(super::tls::client_config(tls)?),
            (None, true) => Some(super::tls::client_config(&super::TlsOptions::default())?),
            (None, false) => None,
        };
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
                lapses: Arc::default(),
                prefix: options.prefix,
            }),
            follower: Follower::new(on_released),
        })
    }

    /// Run `op` on Tokio with the shared parts.
    fn run<T, F>(&self, op: impl FnOnce(Arc<Shared>) -> F) -> Op<T>
    where
        T: Send + 'static,
        F: std::future::Future<Output = StoreResult<T>> + Send + 'static,
    {
        Op::Pending(Box::pin(op(Arc::clone(&self.shared))))
    }

    /// The etcd key of `owner`'s hold of `key` (a plain lock's whoever holds it).
    fn hold_key(&self, hold: HoldKind, key: &str, owner: &str) -> Vec<u8> {
        let prefix = &self.shared.prefix;
        match hold {
            HoldKind::Lock => layout::lock_key(prefix, key),
            HoldKind::Permit { .. } => {
                [layout::permits(prefix, key), owner.as_bytes().to_vec()].concat()
            }
            HoldKind::Read => self.read_write(key).reader(owner),
            HoldKind::Write => self.read_write(key).writer,
        }
    }

    fn read_write(&self, key: &str) -> kinds::ReadWrite {
        kinds::ReadWrite::under(&layout::read_write(&self.shared.prefix, key))
    }
}

/// Milliseconds as a duration: whole milliseconds, rounded up.
fn ttl_of(ttl_ms: f64) -> Result<Duration, StoreError> {
    // A lease of etcd's lasts 9,000,000,000 s at most; a longer TTL would
    // end on the server before its holder thinks it does.
    const LONGEST_MS: f64 = 9e12;
    if ttl_ms > LONGEST_MS {
        return Err(StoreError::Type(format!(
            "EtcdLockStore: a TTL of at most {LONGEST_MS} ms (etcd's longest lease), got {ttl_ms}"
        )));
    }
    Ok(Duration::from_millis(ttl_ms.ceil().max(1.0) as u64))
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
        let (ttl, sent) = match ttl_of(ttl_ms) {
            Ok(ttl) => (ttl, Instant::now()),
            Err(e) => return Op::Ready(Err(e)),
        };
        match hold {
            HoldKind::Lock => {
                let stored = layout::lock_key(&self.shared.prefix, key);
                self.run(move |shared| async move {
                    ops::acquire(&shared, stored, owner, ttl, sent).await
                })
            }
            HoldKind::Permit { limit } => {
                let permits = layout::permits(&self.shared.prefix, key);
                self.run(move |shared| async move {
                    kinds::acquire_permit(&shared, permits, owner, limit, ttl, sent).await
                })
            }
            HoldKind::Read => {
                let keys = self.read_write(key);
                self.run(move |shared| async move {
                    kinds::acquire_read(&shared, keys, owner, ttl, sent).await
                })
            }
            HoldKind::Write => {
                let keys = self.read_write(key);
                self.run(move |shared| async move {
                    kinds::acquire_write(&shared, keys, owner, ttl, sent).await
                })
            }
        }
    }

    fn release(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        let stored = self.hold_key(hold, key, owner);
        let owner = owner.to_owned();
        self.run(move |shared| async move { ops::release(&shared, stored, owner).await })
    }

    fn extend(&self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        let stored = self.hold_key(hold, key, owner);
        let owner = owner.to_owned();
        let (ttl, sent) = match ttl_of(ttl_ms) {
            Ok(ttl) => (ttl, Instant::now()),
            Err(e) => return Op::Ready(Err(e)),
        };
        self.run(move |shared| async move { ops::extend(&shared, stored, owner, ttl, sent).await })
    }

    fn holds(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        let stored = self.hold_key(hold, key, owner);
        let owner = owner.to_owned();
        self.run(move |shared| async move {
            Ok(ops::read(&shared, stored)
                .await?
                .is_some_and(|kv| kv.value == owner.as_bytes()))
        })
    }

    fn remaining(&self, hold: HoldKind, key: &str, owner: Option<&str>) -> Op<Option<f64>> {
        let (stored, owner) = match (hold, owner) {
            (HoldKind::Lock, _) => (self.hold_key(hold, key, ""), None),
            (_, Some(owner)) => (self.hold_key(hold, key, owner), Some(owner.to_owned())),
            (_, None) => return Op::Ready(Ok(None)),
        };
        self.run(
            move |shared| async move { ops::remaining(&shared, stored, owner.as_deref()).await },
        )
    }

    fn would_wait(&self, hold: HoldKind, key: &str) -> Op<bool> {
        match hold {
            HoldKind::Lock => {
                let stored = layout::lock_key(&self.shared.prefix, key);
                self.run(
                    move |shared| async move { Ok(ops::read(&shared, stored).await?.is_some()) },
                )
            }
            HoldKind::Permit { limit } => {
                let permits = layout::permits(&self.shared.prefix, key);
                let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                self.run(move |shared| async move {
                    Ok(kinds::count(&shared, &permits).await? >= limit)
                })
            }
            HoldKind::Read | HoldKind::Write => {
                let keys = self.read_write(key);
                let writing = hold == HoldKind::Write;
                self.run(
                    move |shared| async move { kinds::would_wait(&shared, &keys, writing).await },
                )
            }
        }
    }

    fn holders(&self, hold: HoldKind, key: &str) -> Op<f64> {
        match hold {
            HoldKind::Lock => {
                let stored = layout::lock_key(&self.shared.prefix, key);
                self.run(move |shared| async move {
                    Ok(if ops::read(&shared, stored).await?.is_some() {
                        1.0
                    } else {
                        0.0
                    })
                })
            }
            HoldKind::Permit { .. } => {
                let permits = layout::permits(&self.shared.prefix, key);
                self.run(
                    move |shared| async move { Ok(kinds::count(&shared, &permits).await? as f64) },
                )
            }
            HoldKind::Read | HoldKind::Write => {
                let keys = self.read_write(key);
                self.run(
                    move |shared| async move { Ok(kinds::holders(&shared, &keys).await? as f64) },
                )
            }
        }
    }

    fn withdraw(&self, hold: HoldKind, key: &str) -> Op<()> {
        if hold != HoldKind::Write {
            return Op::Ready(Ok(()));
        }
        let keys = self.read_write(key);
        self.run(move |shared| async move { kinds::withdraw(&shared, keys).await })
    }

    fn watch(&self, hold: HoldKind, key: &str, on: bool) -> Option<Task> {
        let released = Released::of(hold);
        let shared = &self.shared;
        let task =
            self.follower
                .follow(((released, key.to_owned()), on), |inbox, on_released| {
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
        self.shared.members.close();
        self.shared.lapses.close();
    }
}
