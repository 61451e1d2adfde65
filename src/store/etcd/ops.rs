//! What the operations share, and the operations of a hold kept in one key
//! (a semaphore's permit, a reader, a writer), each one request to etcd: a
//! transaction that compares and acts in one commit, or a linearizable
//! read. Each may be sent twice (again to the next member when a connection
//! broke with it unanswered), so each is written to mean the same the
//! second time. (A plain lock's are in `plain.rs`.)

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::lapses::Lapses;
use super::leases::Leases;
use super::line::Line;
use super::members::Members;
use super::messages::paths::{RANGE, TIME_TO_LIVE, TXN};
use super::messages::{
    KeyValue, LeaseTimeToLiveRequest, LeaseTimeToLiveResponse, RangeRequest, RangeResponse,
    TxnRequest, TxnResponse,
};
use super::txn::{delete, held_by, put, written};
use crate::store::StoreError;

/// What the operations share.
pub struct Shared {
    pub members: Arc<Members>,
    pub leases: Arc<Leases>,
    pub lapses: Arc<Lapses>,
    pub line: Line,
    pub prefix: Vec<u8>,
}

impl Shared {
    /// `stored` holds `value` by the write at `revision`, for `ttl` from
    /// `sent`: let go then by this store (`lapses.rs`).
    pub fn holds(&self, stored: &[u8], value: &[u8], revision: i64, ttl: Duration, sent: Instant) {
        self.lapses
            .hold(&self.members, stored.to_vec(), value, revision, sent + ttl);
    }
}

/// Delete `stored` if it still holds `value`.
pub async fn release(shared: &Shared, stored: &[u8], value: &[u8]) -> Result<bool, StoreError> {
    let request = TxnRequest {
        compare: vec![held_by(stored, value)],
        success: vec![delete(stored)],
        failure: vec![],
    };
    let answer = shared.members.call::<_, TxnResponse>(TXN, &request).await?;
    shared.lapses.released(stored, value);
    Ok(answer.succeeded)
}

/// Move `stored` onto a lease lasting `ttl` from `sent`, if it still holds `value`.
pub async fn extend(
    shared: &Shared, stored: &[u8], value: &[u8], ttl: Duration, sent: Instant,
) -> Result<bool, StoreError> {
    let answer = on_a_lease(shared, ttl, sent, |lease| TxnRequest {
        compare: vec![held_by(stored, value)],
        success: vec![put(stored, value, lease)],
        failure: vec![],
    })
    .await?;
    if answer.succeeded {
        shared.holds(stored, value, written(&answer), ttl, sent);
    }
    Ok(answer.succeeded)
}

/// The transaction `txn` makes for a lease lasting `ttl` from `sent`; made
/// again on a fresh lease if etcd no longer has the first (it ended, or the
/// cluster was restored from a backup).
pub(super) async fn on_a_lease(
    shared: &Shared, ttl: Duration, sent: Instant, txn: impl Fn(i64) -> TxnRequest,
) -> Result<TxnResponse, StoreError> {
    on_leases(shared, [ttl], sent, |[lease]| txn(lease)).await
}

/// [`on_a_lease`] with a lease for each of `ttls`.
pub(super) async fn on_leases<const N: usize>(
    shared: &Shared, ttls: [Duration; N], sent: Instant, txn: impl Fn([i64; N]) -> TxnRequest,
) -> Result<TxnResponse, StoreError> {
    let mut leases = [0; N];
    for (lease, ttl) in leases.iter_mut().zip(ttls) {
        *lease = shared.leases.for_ttl(&shared.members, ttl, sent).await?;
    }
    match shared
        .members
        .call::<_, TxnResponse>(TXN, &txn(leases))
        .await
    {
        Err(e) if lease_gone(&e) => {
            for (lease, ttl) in leases.iter_mut().zip(ttls) {
                shared.leases.forget(*lease);
                *lease = shared
                    .leases
                    .for_ttl(&shared.members, ttl, Instant::now())
                    .await?;
            }
            shared
                .members
                .call::<_, TxnResponse>(TXN, &txn(leases))
                .await
        }
        answer => answer,
    }
}

/// `stored` as it is now (a linearizable read), if it is there.
pub async fn read(shared: &Shared, stored: Vec<u8>) -> Result<Option<KeyValue>, StoreError> {
    let request = RangeRequest {
        key: stored,
        ..Default::default()
    };
    let answer = shared
        .members
        .call::<_, RangeResponse>(RANGE, &request)
        .await?;
    Ok(answer.kvs.into_iter().next())
}

/// Milliseconds the hold `stored` has left, if it holds `owner`'s token.
pub async fn remaining(
    shared: &Shared, stored: Vec<u8>, owner: &str,
) -> Result<Option<f64>, StoreError> {
    match read(shared, stored).await? {
        Some(kv) if kv.value == owner.as_bytes() => left(shared, &kv).await,
        _ => Ok(None),
    }
}

/// Milliseconds the hold `kv` has left: to its TTL (or claim window) for
/// one this store took; else its lease's, whole seconds as etcd counts them
/// (it ends in under that plus a second).
pub async fn left(shared: &Shared, kv: &KeyValue) -> Result<Option<f64>, StoreError> {
    if let Some(left) = shared.lapses.left(&kv.key, kv.mod_revision) {
        return Ok(Some(left.as_millis() as f64));
    }
    let request = LeaseTimeToLiveRequest { id: kv.lease };
    let answer = shared
        .members
        .call::<_, LeaseTimeToLiveResponse>(TIME_TO_LIVE, &request)
        .await?;
    Ok((answer.ttl >= 0).then_some(answer.ttl as f64 * 1000.0))
}

/// etcd's answer to a put on a lease it no longer has.
fn lease_gone(e: &StoreError) -> bool {
    matches!(e, StoreError::Backend(b) if b.message.contains("requested lease not found"))
}
