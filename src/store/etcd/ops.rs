//! A plain lock's operations, each one request to etcd: a transaction that
//! compares and acts in one commit, or a linearizable read. Each may be sent
//! twice (again to the next member when a connection broke with it
//! unanswered), so each is written to mean the same the second time: an
//! acquire that finds the key already holding its own owner token was
//! applied the first time, and answers taken.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::lapses::Lapses;
use super::leases::Leases;
use super::members::Members;
use super::messages::paths::{RANGE, TIME_TO_LIVE, TXN};
use super::messages::{
    KeyValue, LeaseTimeToLiveRequest, LeaseTimeToLiveResponse, RangeRequest, RangeResponse,
    TxnRequest, TxnResponse,
};
use super::txn::{absent, delete, first_kv, held_by, put, range, revision, written};
use crate::store::{Acquired, StoreError};

/// What the operations share.
pub struct Shared {
    pub members: Arc<Members>,
    pub leases: Arc<Leases>,
    pub lapses: Arc<Lapses>,
    pub prefix: Vec<u8>,
}

impl Shared {
    /// `owner` holds `stored` by the write at `revision`, for `ttl` from
    /// `sent`: let go then by this store (`lapses.rs`).
    pub fn holds(&self, stored: &[u8], owner: &str, revision: i64, ttl: Duration, sent: Instant) {
        self.lapses
            .hold(&self.members, stored.to_vec(), owner, revision, sent + ttl);
    }
}

/// Take the lock stored at `stored` for `owner` if nobody holds it: its
/// fencing token is the revision that created it.
pub async fn acquire(
    shared: &Shared, stored: Vec<u8>, owner: String, ttl: Duration, sent: Instant,
) -> Result<Acquired, StoreError> {
    let answer = on_a_lease(shared, ttl, sent, |lease| TxnRequest {
        compare: vec![absent(&stored)],
        success: vec![put(&stored, owner.as_bytes(), lease)],
        failure: vec![range(&stored)],
    })
    .await?;
    if answer.succeeded {
        shared.holds(&stored, &owner, written(&answer), ttl, sent);
        return Ok(Acquired::Fenced(revision(&answer)));
    }
    Ok(match first_kv(&answer) {
        Some(kv) if kv.value == owner.as_bytes() => {
            shared.holds(&stored, &owner, kv.mod_revision, ttl, sent);
            Acquired::Fenced(u64::try_from(kv.create_revision).unwrap_or(0))
        }
        _ => Acquired::Refused,
    })
}

/// Delete the lock if `owner` still holds it.
pub async fn release(shared: &Shared, stored: Vec<u8>, owner: String) -> Result<bool, StoreError> {
    let request = TxnRequest {
        compare: vec![held_by(&stored, &owner)],
        success: vec![delete(&stored)],
        failure: vec![],
    };
    let answer = shared.members.call::<_, TxnResponse>(TXN, &request).await?;
    shared.lapses.released(&stored, &owner);
    Ok(answer.succeeded)
}

/// Move the lock onto a lease lasting `ttl` from `sent`, if `owner` still holds it.
pub async fn extend(
    shared: &Shared, stored: Vec<u8>, owner: String, ttl: Duration, sent: Instant,
) -> Result<bool, StoreError> {
    let answer = on_a_lease(shared, ttl, sent, |lease| TxnRequest {
        compare: vec![held_by(&stored, &owner)],
        success: vec![put(&stored, owner.as_bytes(), lease)],
        failure: vec![],
    })
    .await?;
    if answer.succeeded {
        shared.holds(&stored, &owner, written(&answer), ttl, sent);
    }
    Ok(answer.succeeded)
}

/// The transaction `txn` makes for a lease lasting `ttl` from `sent`; made
/// again on a fresh lease if etcd no longer has the first (it ended, or the
/// cluster was restored from a backup).
pub(super) async fn on_a_lease(
    shared: &Shared, ttl: Duration, sent: Instant, txn: impl Fn(i64) -> TxnRequest,
) -> Result<TxnResponse, StoreError> {
    let lease = shared.leases.for_ttl(&shared.members, ttl, sent).await?;
    match shared
        .members
        .call::<_, TxnResponse>(TXN, &txn(lease))
        .await
    {
        Err(e) if lease_gone(&e) => {
            shared.leases.forget(lease);
            let fresh = shared
                .leases
                .for_ttl(&shared.members, ttl, Instant::now())
                .await?;
            shared
                .members
                .call::<_, TxnResponse>(TXN, &txn(fresh))
                .await
        }
        answer => answer,
    }
}

/// The lock as stored now (a linearizable read), if anyone holds it.
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

/// Milliseconds a hold has left (`owner`'s, or with none whoever's): to its
/// TTL for one this store took; else its lease's, whole seconds as etcd
/// counts them (it ends in under that plus a second).
pub async fn remaining(
    shared: &Shared, stored: Vec<u8>, owner: Option<&str>,
) -> Result<Option<f64>, StoreError> {
    let Some(kv) = read(shared, stored.clone()).await? else {
        return Ok(None);
    };
    if owner.is_some_and(|owner| kv.value != owner.as_bytes()) {
        return Ok(None);
    }
    if let Some(left) = shared.lapses.left(&stored, kv.mod_revision) {
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
