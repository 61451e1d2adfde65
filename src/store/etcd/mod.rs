//! `EtcdLockStore`: locks kept by an etcd cluster, through its v3 API over
//! gRPC (`grpc.rs`, HTTP/2 on Tokio, the messages declared by hand in
//! `messages.rs`). Every write is a transaction the cluster commits through
//! its consensus before it answers, so a lock granted survives the failure
//! of any minority of members, the leader included; every read is
//! linearizable. A hold is a key (`layout.rs`) on a lease the cluster
//! counts down (`leases.rs`): it lapses when the lease ends, whatever the
//! holder's process does. A plain lock is a line of such keys, the first
//! holding it (`line.rs`); its fencing token is the revision that made its
//! entry the holder, which grows across the whole cluster and survives
//! restarts. `members.rs` sends each call to a live member (`endpoint.rs`:
//! their URLs); `lapses.rs` lets each hold this store took go at its TTL;
//! `plain.rs` holds a plain lock's operations (on `entries.rs`, `line.rs`
//! and `look.rs`), `kinds.rs` semaphores' and read-write locks', `ops.rs`
//! what they share, all made of the pieces in `txn.rs`; `watch.rs` hears
//! releases.

pub mod endpoint;
mod entries;
mod following;
mod gone;
mod grpc;
mod heard;
mod kinds;
#[cfg(test)]
mod kinds_tests;
mod lapses;
mod layout;
mod leases;
mod line;
#[cfg(test)]
mod line_tests;
mod look;
mod members;
mod messages;
mod ops;
mod options;
mod plain;
#[cfg(test)]
mod test_cluster;
#[cfg(test)]
mod tests;
mod txn;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use self::look::{Lock, Tell};
use self::ops::Shared;
pub use self::options::EtcdOptions;
use super::follow::{Follower, OnReleased, Released};
use super::{
    Acquired, Asked, Capabilities, HoldKind, LockStore, Op, StoreError, StoreResult, Task, Wait,
};

pub struct EtcdStore {
    shared: Arc<Shared>,
    follower: Arc<Follower<watch::Watch>>,
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
                line: line::Line::new(crate::owner::mint().as_str().to_owned()),
                prefix: options.prefix,
            }),
            follower: Arc::new(Follower::new(on_released)),
        })
    }

    /// The plain lock `key`.
    fn lock(&self, key: &str) -> Lock {
        Lock {
            key: key.to_owned(),
            line: layout::lock_line(&self.shared.prefix, key),
        }
    }

    /// Where this store tells of a lock handed to its place: its waiters.
    fn tell(&self) -> Tell {
        let follower = Arc::clone(&self.follower);
        Arc::new(move |text| follower.report(Released::Handed, text))
    }

    /// Run a plain lock's `op` on Tokio with the shared parts.
    fn on_lock<T, F>(&self, key: &str, op: impl FnOnce(Arc<Shared>, Lock, Tell) -> F) -> Op<T>
    where
        T: Send + 'static,
        F: std::future::Future<Output = StoreResult<T>> + Send + 'static,
    {
        Op::Pending(Box::pin(op(
            Arc::clone(&self.shared),
            self.lock(key),
            self.tell(),
        )))
    }

    /// Run `op` on Tokio with the shared parts.
    fn run<T, F>(&self, op: impl FnOnce(Arc<Shared>) -> F) -> Op<T>
    where
        T: Send + 'static,
        F: std::future::Future<Output = StoreResult<T>> + Send + 'static,
    {
        Op::Pending(Box::pin(op(Arc::clone(&self.shared))))
    }

    /// The etcd key of `owner`'s hold of `key`, for all but a plain lock
    /// (whose holder is its line's first entry).
    fn hold_key(&self, hold: HoldKind, key: &str, owner: &str) -> Vec<u8> {
        let prefix = &self.shared.prefix;
        match hold {
            HoldKind::Lock => layout::lock_line(prefix, key),
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
            waits_in_line: true,
            ..Capabilities::default()
        }
    }

    fn acquire(
        &self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64, wait: Wait,
    ) -> Op<Acquired> {
        let owner = owner.to_owned();
        let (ttl, sent) = match ttl_of(ttl_ms) {
            Ok(ttl) => (ttl, Instant::now()),
            Err(e) => return Op::Ready(Err(e)),
        };
        match hold {
            HoldKind::Lock => self.on_lock(key, move |shared, lock, tell| async move {
                plain::acquire(&shared, &lock, &owner, ttl, sent, wait, &tell).await
            }),
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
        let owner = owner.to_owned();
        if hold == HoldKind::Lock {
            return self.on_lock(key, move |shared, lock, tell| async move {
                plain::release(&shared, &lock, &owner, &tell).await
            });
        }
        let stored = self.hold_key(hold, key, &owner);
        self.run(
            move |shared| async move { ops::release(&shared, &stored, owner.as_bytes()).await },
        )
    }

    fn extend(&self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        let owner = owner.to_owned();
        let (ttl, sent) = match ttl_of(ttl_ms) {
            Ok(ttl) => (ttl, Instant::now()),
            Err(e) => return Op::Ready(Err(e)),
        };
        if hold == HoldKind::Lock {
            return self.on_lock(key, move |shared, lock, _| async move {
                plain::extend(&shared, &lock, &owner, ttl, sent).await
            });
        }
        let stored = self.hold_key(hold, key, &owner);
        self.run(move |shared| async move {
            ops::extend(&shared, &stored, owner.as_bytes(), ttl, sent).await
        })
    }

    fn holds(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        let owner = owner.to_owned();
        if hold == HoldKind::Lock {
            return self.on_lock(key, move |shared, lock, tell| async move {
                look::holds(&shared, &lock, &owner, &tell).await
            });
        }
        let stored = self.hold_key(hold, key, &owner);
        self.run(move |shared| async move {
            Ok(ops::read(&shared, stored)
                .await?
                .is_some_and(|kv| kv.value == owner.as_bytes()))
        })
    }

    fn remaining(&self, hold: HoldKind, key: &str, owner: Option<&str>) -> Op<Option<f64>> {
        let (stored, owner) = match (hold, owner) {
            (HoldKind::Lock, _) => {
                return self.on_lock(key, move |shared, lock, tell| async move {
                    look::remaining(&shared, &lock, &tell).await
                })
            }
            (_, Some(owner)) => (self.hold_key(hold, key, owner), owner.to_owned()),
            (_, None) => return Op::Ready(Ok(None)),
        };
        self.run(move |shared| async move { ops::remaining(&shared, stored, &owner).await })
    }

    fn would_wait(&self, hold: HoldKind, key: &str) -> Op<bool> {
        match hold {
            HoldKind::Lock => {
                let line = layout::lock_line(&self.shared.prefix, key);
                self.run(move |shared| async move { Ok(kinds::count(&shared, &line).await? > 0) })
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
                let line = layout::lock_line(&self.shared.prefix, key);
                self.run(move |shared| async move {
                    Ok(kinds::count(&shared, &line).await?.min(1) as f64)
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
        let task = self
            .follower
            .follow(((released, key.to_owned()), on), |inbox, on_released| {
                watch::watcher(Arc::clone(shared), inbox, on_released)
            })?;
        Some(Box::pin(task))
    }

    fn claim(&self, key: &str, owner: &str, ttl_ms: f64, more: Option<Asked>) -> Op<bool> {
        let owner = owner.to_owned();
        let (ttl, sent) = match ttl_of(ttl_ms) {
            Ok(ttl) => (ttl, Instant::now()),
            Err(e) => return Op::Ready(Err(e)),
        };
        self.on_lock(key, move |shared, lock, tell| async move {
            plain::claim(&shared, &lock, &owner, ttl, sent, more, &tell).await
        })
    }

    fn leave_line(&self, key: &str) -> Op<()> {
        self.on_lock(key, move |shared, lock, tell| async move {
            plain::leave(&shared, &lock, &tell).await
        })
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
