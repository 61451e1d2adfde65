//! A plain lock's line as this store reads it (a linearizable read, or the
//! read a transaction makes), and what it does with what it shows: its own
//! place come first (held for the claim window, told to its waiters), the
//! places ahead that lapsed deleted, the entry holding the lock for an
//! owner found; and a plain lock's reads (whether an owner holds it, the
//! time it has left), which tell what they find of this store's place.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::entries::owner_of;
use super::layout::range_end;
use super::line::{Entries, Handed};
use super::messages::paths::{RANGE, TXN};
use super::messages::{KeyValue, RangeRequest, RangeResponse, TxnRequest, TxnResponse};
use super::ops::{left, Shared};
use super::txn::{created_at, delete, held_by, nested, written_at};
use crate::store::line::CLAIM_MS;
use crate::store::StoreError;

/// Where a hand-over this store learns of is told (its waiters hear it).
pub type Tell = Arc<dyn Fn(String) + Send + Sync>;

/// A plain lock: its key as the lock names it, and its line's range.
pub struct Lock {
    pub key: String,
    pub line: Vec<u8>,
}

/// Delete the places ahead of this store's that lapsed (`line.rs`), each
/// only if still at the write seen; then look whether this place is first.
pub async fn lapse_places(shared: &Shared, lock: &Lock, entries: &Entries, tell: &Tell) {
    let lapsed = shared.line.lapsed(&lock.line, entries);
    if lapsed.is_empty() {
        return;
    }
    // A stray of this store's goes only while it is not first: while the
    // entry first in this read is still there (a later read may have found
    // the stray first, and told it as a hand-over, meanwhile).
    let holder = entries.first();
    let request = TxnRequest {
        compare: vec![],
        success: lapsed
            .iter()
            .map(|kv| {
                let mut compare = vec![
                    written_at(&kv.key, kv.mod_revision),
                    held_by(&kv.key, &kv.value),
                ];
                if let Some(holder) = holder.filter(|_| shared.line.is_mine(&lock.line, &kv.key)) {
                    compare.push(created_at(&holder.key, holder.create_revision));
                }
                nested(TxnRequest {
                    compare,
                    success: vec![delete(&kv.key)],
                    failure: vec![],
                })
            })
            .collect(),
        failure: vec![],
    };
    if shared
        .members
        .call::<_, TxnResponse>(TXN, &request)
        .await
        .is_ok()
    {
        let _ = look_again(shared, lock, tell).await;
    }
}

/// Look whether this store's place came first (the entry ahead of it went).
pub async fn look_again(shared: &Shared, lock: &Lock, tell: &Tell) -> Result<(), StoreError> {
    let entries = read_line(shared, &lock.line).await?;
    looked(shared, lock, &entries, tell);
    Ok(())
}

/// What `entries` show of this store's place: if it came first, the lock
/// is its, told, held for the claim window.
pub fn looked(shared: &Shared, lock: &Lock, entries: &Entries, tell: &Tell) {
    if let Some((handed, true)) = shared.line.look(&lock.line, entries) {
        if let Some(kv) = entries.first() {
            started(shared, lock, &handed, kv, tell);
        }
    }
}

/// A lock handed to this store's place, newly seen: held for the claim
/// window (then let go unless claimed), and told.
pub fn started(shared: &Shared, lock: &Lock, handed: &Handed, kv: &KeyValue, tell: &Tell) {
    let window = Duration::from_millis(CLAIM_MS);
    shared.holds(&kv.key, &kv.value, kv.mod_revision, window, Instant::now());
    tell(handed.told(&lock.key));
}

/// The entry holding the lock, if it holds it for `owner`.
pub async fn holder(
    shared: &Shared, lock: &Lock, owner: &str,
) -> Result<Option<KeyValue>, StoreError> {
    let entries = read_line(shared, &lock.line).await?;
    Ok(entries
        .first()
        .filter(|kv| owner_of(kv) == Some(owner))
        .cloned())
}

/// Whether `owner` holds the lock now.
pub async fn holds(
    shared: &Shared, lock: &Lock, owner: &str, tell: &Tell,
) -> Result<bool, StoreError> {
    let entries = read_line(shared, &lock.line).await?;
    looked(shared, lock, &entries, tell);
    Ok(entries
        .first()
        .and_then(owner_of)
        .is_some_and(|holder| holder == owner))
}

/// Milliseconds the lock has left, whoever holds it.
pub async fn remaining(
    shared: &Shared, lock: &Lock, tell: &Tell,
) -> Result<Option<f64>, StoreError> {
    let entries = read_line(shared, &lock.line).await?;
    looked(shared, lock, &entries, tell);
    match entries.first() {
        Some(kv) => left(shared, kv).await,
        None => Ok(None),
    }
}

/// The line as it is now (a linearizable read).
pub async fn read_line(shared: &Shared, line: &[u8]) -> Result<Entries, StoreError> {
    let request = RangeRequest {
        key: line.to_vec(),
        range_end: range_end(line),
        ..Default::default()
    };
    let answer = shared
        .members
        .call::<_, RangeResponse>(RANGE, &request)
        .await?;
    let at = answer.header.as_ref().map_or(0, |h| h.revision);
    Ok(Entries::of(answer.kvs, at))
}
