//! The leases a store's locks are attached to. etcd counts a lease's time
//! itself, in whole seconds, and deletes its keys when it ends: that is how
//! a lock lapses when its holder dies or stalls. A lease per lock would cost
//! a commit per acquire (and one more to revoke it), so the store's locks
//! share leases granted ahead: a lock taken for `ttl` goes on a lease that
//! ends no sooner than `ttl` after its acquire was sent, and at most a
//! lease's spare seconds later. Nothing keeps a lease alive: a lease simply
//! ends, and an extension moves the lock onto a later one. While a store
//! takes locks, a new lease is granted in the background before the newest
//! one gets too short to use, so an acquire rarely waits for a grant.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::members::{backend, Members, OTHER};
use super::messages::paths::LEASE_GRANT;
use super::messages::{LeaseGrantRequest, LeaseGrantResponse};
use crate::store::StoreError;

/// A lease the store was granted: its id, the earliest it can end (counted
/// from before the grant was sent, with the time the server chose), and
/// the TTL it was granted for, in whole seconds.
#[derive(Clone, Copy, Debug)]
struct Lease {
    id: i64,
    ends_after: Instant,
    secs: u64,
}

/// Seconds a lease outlives the TTL it was granted for: the time it can
/// serve acquires in. One second, or a thirtieth of a long TTL, so a store
/// taking hour-long locks all day keeps a few dozen leases, not thousands.
fn spare(secs: u64) -> u64 {
    secs.div_ceil(30).max(1)
}
/// A new lease is granted once the newest usable one has less than this
/// left to serve acquires in.
const REFILL_BEFORE: Duration = Duration::from_millis(500);

#[derive(Default)]
pub struct Leases {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    granted: Vec<Lease>,
    /// The most seconds the server added to a lease asked of it.
    added: u64,
    /// Grants in flight, by whole seconds asked.
    granting: Vec<u64>,
}

impl Leases {
    /// A lease for a lock taken now for `ttl`: one that ends no sooner than
    /// `ttl` from `sent` (when the acquire or extension is sent), granted
    /// now if none is at hand.
    pub async fn for_ttl(
        self: &Arc<Self>, members: &Arc<Members>, ttl: Duration, sent: Instant,
    ) -> Result<i64, StoreError> {
        let until = sent.checked_add(ttl).ok_or_else(|| {
            StoreError::Type(format!("a TTL of {} ms is too long", ttl.as_millis()))
        })?;
        let secs = whole_seconds(ttl);
        let secs = secs + spare(secs);
        let picked = self.pick(until, secs);
        if let Some((id, left)) = picked {
            if left < REFILL_BEFORE && self.start_granting(secs) {
                let leases = Arc::clone(self);
                let members = Arc::clone(members);
                tokio::spawn(async move {
                    let _ = leases.grant(&members, secs).await;
                });
            }
            return Ok(id);
        }
        self.start_granting(secs);
        let lease = self.grant(&members.clone(), secs).await?;
        if lease.ends_after < until {
            // The server granted less than asked (it never does below its
            // own minimum), or the grant took longer than the spare time.
            return Err(backend(
                OTHER,
                format!(
                    "etcd granted a lease too short for a {} ms TTL",
                    ttl.as_millis()
                ),
            ));
        }
        Ok(lease.id)
    }

    /// How many leases the store has now, not yet ended.
    #[cfg(test)]
    pub fn granted(&self) -> usize {
        self.state.lock().map_or(0, |state| state.granted.len())
    }

    /// A lease `id` the server no longer has (it ended, or the cluster was
    /// restored from a backup): never picked again.
    pub fn forget(&self, id: i64) {
        if let Ok(mut state) = self.state.lock() {
            state.granted.retain(|lease| lease.id != id);
        }
    }

    /// The lease ending soonest at or after `until`, and no later than a
    /// lease granted now for `secs` would (plus what the server added to
    /// the leases it granted, its minimum), with how long the newest such
    /// lease can still serve acquires like this one. A lease that can no
    /// longer serve acquires of the TTL it was granted for is dropped.
    fn pick(&self, until: Instant, secs: u64) -> Option<(i64, Duration)> {
        let mut state = self.state.lock().ok()?;
        let now = Instant::now();
        state.granted.retain(|lease| {
            let serves = Duration::from_secs(lease.secs - spare(lease.secs).min(lease.secs));
            now.checked_add(serves)
                .is_some_and(|soonest| lease.ends_after >= soonest)
        });
        let latest = now.checked_add(Duration::from_secs(secs + state.added))?;
        let usable = || {
            state
                .granted
                .iter()
                .filter(|lease| lease.ends_after >= until && lease.ends_after <= latest)
        };
        let soonest = usable().min_by_key(|lease| lease.ends_after)?;
        let newest = usable().max_by_key(|lease| lease.ends_after)?;
        Some((soonest.id, newest.ends_after - until))
    }

    /// Whether a grant of `secs` should start (none in flight).
    fn start_granting(&self, secs: u64) -> bool {
        match self.state.lock() {
            Ok(mut state) if !state.granting.contains(&secs) => {
                state.granting.push(secs);
                true
            }
            _ => false,
        }
    }

    async fn grant(&self, members: &Members, secs: u64) -> Result<Lease, StoreError> {
        let sent = Instant::now();
        let request = LeaseGrantRequest {
            ttl: i64::try_from(secs).unwrap_or(i64::MAX),
        };
        let answer = members
            .call::<_, LeaseGrantResponse>(LEASE_GRANT, &request)
            .await;
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        state.granting.retain(|s| *s != secs);
        let answer = answer?;
        if !answer.error.is_empty() {
            return Err(backend(
                OTHER,
                format!("etcd refused a lease: {}", answer.error),
            ));
        }
        let granted = u64::try_from(answer.ttl).unwrap_or(0);
        let ends_after = sent
            .checked_add(Duration::from_secs(granted))
            .ok_or_else(|| backend(OTHER, format!("etcd granted a lease of {granted} s")))?;
        // etcd raises a lease to its minimum (1.5 election timeouts).
        state.added = state.added.max(granted.saturating_sub(secs));
        let lease = Lease {
            id: answer.id,
            ends_after,
            secs,
        };
        state.granted.push(lease);
        Ok(lease)
    }
}

/// `ttl` in whole seconds, rounded up (etcd's leases count seconds).
pub fn whole_seconds(ttl: Duration) -> u64 {
    let secs = ttl.as_secs();
    if ttl.subsec_nanos() > 0 {
        secs + 1
    } else {
        secs
    }
    .max(1)
}

fn poisoned() -> StoreError {
    StoreError::Type("the store's lease table was poisoned by a panic".to_owned())
}
