//! A plain lock's operations, on its line (`line.rs`): each one transaction
//! or one linearizable read, but for a lock handed over and then released
//! or extended through a store that did not take it (a read first), and an
//! attempt that gets in with more of its process waiting (a put after, for
//! their place). Each may be sent twice (again to the next member when a
//! connection broke with it unanswered), so each means the same the second
//! time: an attempt that finds its own entry holding answers taken.

use std::time::Duration;

use tokio::time::Instant;

use super::layout::taken_entry;
use super::line::{held_value, place_value, Entries, Handed};
use super::look::{holder, lapse_places, looked, started, Lock, Tell};
use super::members::{backend, OTHER};
use super::messages::paths::TXN;
use super::messages::{Compare, KeyValue, TxnRequest, TxnResponse};
use super::ops::{on_a_lease, on_leases, Shared};
use super::txn::{
    created_at, delete, empty, first_kv, held_by, kvs_at, nested, nested_at, none_created_before,
    put, range, range_under, revision, written, written_at,
};
use crate::owner;
use crate::store::line::{Asked, LEASE_MS};
use crate::store::{Acquired, StoreError, Wait};

/// Take the lock for `owner` for `ttl` from `sent`: at once if nobody holds
/// it or waits for it; else, for a waiter, take or keep this store's place
/// in line, or claim the lock its place was handed.
pub async fn acquire(
    shared: &Shared, lock: &Lock, owner: &str, ttl: Duration, sent: Instant, wait: Wait,
    tell: &Tell,
) -> Result<Acquired, StoreError> {
    match wait {
        Wait::Now => take_now(shared, lock, owner, ttl, sent).await,
        Wait::InLine(asked) => in_line(shared, lock, owner, ttl, sent, asked, false, tell).await,
        Wait::InLineWithMore(asked) => {
            in_line(shared, lock, owner, ttl, sent, asked, true, tell).await
        }
    }
}

async fn take_now(
    shared: &Shared, lock: &Lock, owner: &str, ttl: Duration, sent: Instant,
) -> Result<Acquired, StoreError> {
    let taken = taken_entry(&lock.line, owner);
    let value = held_value(owner);
    let answer = on_a_lease(shared, ttl, sent, |lease| TxnRequest {
        compare: vec![empty(&lock.line)],
        success: vec![put(&taken, &value, lease)],
        failure: vec![range(&taken)],
    })
    .await?;
    if answer.succeeded {
        shared.holds(&taken, &value, written(&answer), ttl, sent);
        return Ok(Acquired::Fenced(revision(&answer)));
    }
    Ok(match first_kv(&answer) {
        Some(kv) if kv.value == value => taken_before(shared, kv, ttl, sent),
        _ => Acquired::Refused,
    })
}

/// This store's own entry, found by an attempt sent again: it was taken
/// the first time.
fn taken_before(shared: &Shared, kv: &KeyValue, ttl: Duration, sent: Instant) -> Acquired {
    shared.holds(&kv.key, &kv.value, kv.mod_revision, ttl, sent);
    Acquired::Fenced(u64::try_from(kv.create_revision).unwrap_or(0))
}

#[allow(clippy::too_many_arguments)]
async fn in_line(
    shared: &Shared, lock: &Lock, owner: &str, ttl: Duration, sent: Instant, asked: Asked,
    more: bool, tell: &Tell,
) -> Result<Acquired, StoreError> {
    let line = &shared.line;
    // A lock handed to this store's place, not yet claimed: this attempt claims it.
    if let Some(handed) = line.unclaimed(&lock.line) {
        if claim_handed(shared, lock, &handed, ttl, sent).await? {
            return Ok(got_handed(shared, lock, handed, asked, more, sent, tell).await);
        }
    }
    let taken = taken_entry(&lock.line, owner);
    let taken_value = held_value(owner);
    let place_value = place_value(asked.ms(), owner);
    let place = line.place(&lock.line);
    let stored = line.place_key(&lock.line);
    // Free: taken; else this place put (kept, with its turn, if it is
    // there). A place this store does not know to be there yet is only
    // made, never written over: an attempt sent before may have made it,
    // and it may be first by now.
    let take_or_wait = |lease: i64, place_lease: i64| TxnRequest {
        compare: vec![empty(&lock.line)],
        success: vec![put(&taken, &taken_value, lease)],
        failure: match place {
            Some(_) => vec![
                put(&stored, &place_value, place_lease),
                range_under(&lock.line),
            ],
            None => vec![nested(TxnRequest {
                compare: vec![created_at(&stored, 0)],
                success: vec![
                    put(&stored, &place_value, place_lease),
                    range_under(&lock.line),
                ],
                failure: vec![range_under(&lock.line)],
            })],
        },
    };
    let place_ttl = Duration::from_millis(LEASE_MS);
    let answer = on_leases(shared, [ttl, place_ttl], sent, |[lease, place_lease]| {
        match &place {
            // First in line: the lock is this place's (claimed below).
            Some(p) => TxnRequest {
                compare: vec![
                    created_at(&p.stored, p.created),
                    none_created_before(&lock.line, p.created),
                ],
                success: vec![range(&p.stored)],
                failure: vec![nested(take_or_wait(lease, place_lease))],
            },
            None => take_or_wait(lease, place_lease),
        }
    })
    .await?;
    // (A transaction within one answers without a revision of its own: the
    // whole one's is the revision of everything it wrote.)
    let at = written(&answer);
    let inner = match &place {
        Some(_) if answer.succeeded => {
            let kv = first_kv(&answer).ok_or_else(|| unread("its place"))?;
            // Told as any hand-over is (its waiters take it once); one a
            // waiter here claimed already is not this attempt's to claim.
            let Some((handed, new)) = line.first(&lock.line, kv, at) else {
                return Ok(Acquired::Refused);
            };
            if new {
                started(shared, lock, &handed, kv, tell);
            } else if handed.claimed {
                return Ok(Acquired::Refused);
            }
            if claim_handed(shared, lock, &handed, ttl, sent).await? {
                return Ok(got_handed(shared, lock, handed, asked, more, sent, tell).await);
            }
            return Ok(Acquired::Refused);
        }
        Some(_) => nested_at(&answer, 0).ok_or_else(|| unread("the inner transaction"))?,
        None => &answer,
    };
    if inner.succeeded {
        // A place known is not in line (it was empty); a key reserved may be
        // made yet by attempts sent beside this one: with more waiting, it
        // is the place kept for them (one place, not two), else it goes.
        match place {
            Some(_) => line.unplaced(&lock.line, &stored, at),
            None if more => {}
            None => line.unreserved(&lock.line, &stored),
        }
        shared.holds(&taken, &taken_value, at, ttl, sent);
        if more {
            keep_place(shared, lock, asked, sent, tell).await;
        }
        return Ok(Acquired::Fenced(revision(&answer)));
    }
    let (read, op) = match place {
        Some(_) => (inner, 1),
        None => {
            let made = nested_at(inner, 0).ok_or_else(|| unread("the inner transaction"))?;
            (made, usize::from(made.succeeded))
        }
    };
    let entries = Entries::of(kvs_at(read, op).to_vec(), at);
    // (Gone already, when not found: the next attempt makes it again.)
    if let Some(created) = find(&entries, &stored) {
        line.placed(&lock.line, &stored, created, Some(&entries));
    }
    if let Some(kv) = entries
        .iter()
        .find(|kv| kv.key == taken && kv.value == taken_value)
    {
        // Taken by this attempt sent before; the place stays (a hand-over
        // nobody here waits for is given back at once).
        return Ok(taken_before(shared, kv, ttl, sent));
    }
    looked(shared, lock, &entries, tell);
    lapse_places(shared, lock, &entries, tell).await;
    Ok(Acquired::Refused)
}

/// The create revision of `stored` among `entries`.
fn find(entries: &Entries, stored: &[u8]) -> Option<i64> {
    entries
        .iter()
        .find(|kv| kv.key == stored)
        .map(|kv| kv.create_revision)
}

/// The lock handed to this store's place, claimed by an attempt: with more
/// of its process waiting, it keeps them a place.
async fn got_handed(
    shared: &Shared, lock: &Lock, handed: Handed, asked: Asked, more: bool, sent: Instant,
    tell: &Tell,
) -> Acquired {
    if more {
        keep_place(shared, lock, asked, sent, tell).await;
    }
    Acquired::Handed {
        owner: handed.owner.as_str().into(),
        token: handed.token,
    }
}

/// A place at the back of the line for this process's waiters behind the
/// one that got in, for an owner of its own (a hand-over tells it), unless
/// it has one. Without it they still get in, later: it is not waited for
/// to fail.
async fn keep_place(shared: &Shared, lock: &Lock, asked: Asked, sent: Instant, tell: &Tell) {
    if shared.line.place(&lock.line).is_some() {
        return;
    }
    let stored = shared.line.place_key(&lock.line);
    let value = place_value(asked.ms(), owner::mint().as_str());
    let place_ttl = Duration::from_millis(LEASE_MS);
    let put = on_a_lease(shared, place_ttl, sent, |lease| TxnRequest {
        compare: vec![created_at(&stored, 0)],
        success: vec![put(&stored, &value, lease), range_under(&lock.line)],
        failure: vec![],
    })
    .await;
    // (Not made: made by an attempt, whose answer places it.)
    if let Some(answer) = put.ok().filter(|answer| answer.succeeded) {
        let entries = Entries::of(kvs_at(&answer, 1).to_vec(), written(&answer));
        shared
            .line
            .placed(&lock.line, &stored, written(&answer), Some(&entries));
        // The lock released before the place was made: nobody tells it but this.
        looked(shared, lock, &entries, tell);
    }
}

/// The lock handed to this store's place claimed (or extended) for `ttl`
/// from `sent`, if the place still holds it: written as a hold.
async fn claim_handed(
    shared: &Shared, lock: &Lock, handed: &Handed, ttl: Duration, sent: Instant,
) -> Result<bool, StoreError> {
    // The entry is this store's: while it is the one that was handed over
    // (its create revision), it is this hold, whatever else wrote it since
    // (a claim and a release sent together land in either order).
    let held = held_value(&handed.owner);
    // Claimed (for an attempt, which claims only an unclaimed one) and kept
    // until its TTL from the moment it is sent: its answer may come late.
    // Never for less than a claim sent before asked (they may land in
    // either order, and the last one's lease is the entry's).
    let until = shared.line.claimed(&lock.line, &handed.owner, sent + ttl);
    let ttl = until.saturating_duration_since(sent);
    let answer = on_a_lease(shared, ttl, sent, |lease| TxnRequest {
        compare: vec![created_at(&handed.stored, handed.created)],
        success: vec![put(&handed.stored, &held, lease)],
        failure: vec![],
    })
    .await?;
    if answer.succeeded {
        shared.holds(&handed.stored, &held, written(&answer), ttl, sent);
    } else {
        shared.line.gone(&lock.line, &handed.owner);
    }
    Ok(answer.succeeded)
}

/// Give the lock back if `owner` holds it; the next in line holds it then
/// (this store, if its place is next: told now).
pub async fn release(
    shared: &Shared, lock: &Lock, owner: &str, tell: &Tell,
) -> Result<bool, StoreError> {
    let (stored, is) = hold_of(shared, lock, owner);
    // The line as the release left it: a place of this store's may be
    // first now (one made by a request still on its way too).
    let request = TxnRequest {
        compare: vec![is],
        success: vec![delete(&stored), range_under(&lock.line)],
        failure: vec![],
    };
    let answer = shared.members.call::<_, TxnResponse>(TXN, &request).await?;
    shared.lapses.released(&stored, &held_value(owner));
    shared.line.gone(&lock.line, owner);
    if answer.succeeded {
        shared.line.unplaced(&lock.line, &stored, written(&answer));
        let entries = Entries::of(kvs_at(&answer, 1).to_vec(), written(&answer));
        looked(shared, lock, &entries, tell);
        return Ok(true);
    }
    // Handed over to a place of another store's (restored from its token).
    let Some(kv) = holder(shared, lock, owner).await? else {
        return Ok(false);
    };
    let request = TxnRequest {
        compare: vec![
            written_at(&kv.key, kv.mod_revision),
            held_by(&kv.key, &kv.value),
        ],
        success: vec![delete(&kv.key)],
        failure: vec![],
    };
    let answer = shared.members.call::<_, TxnResponse>(TXN, &request).await?;
    Ok(answer.succeeded)
}

/// Push the lock out to `ttl` from `sent` if `owner` holds it (a lock
/// handed over: claimed).
pub async fn extend(
    shared: &Shared, lock: &Lock, owner: &str, ttl: Duration, sent: Instant,
) -> Result<bool, StoreError> {
    if let Some(handed) = shared.line.handed(&lock.line, owner) {
        return claim_handed(shared, lock, &handed, ttl, sent).await;
    }
    let (taken, held) = (taken_entry(&lock.line, owner), held_value(owner));
    if super::ops::extend(shared, &taken, &held, ttl, sent).await? {
        return Ok(true);
    }
    let Some(kv) = holder(shared, lock, owner).await? else {
        return Ok(false);
    };
    let answer = on_a_lease(shared, ttl, sent, |lease| TxnRequest {
        compare: vec![
            written_at(&kv.key, kv.mod_revision),
            held_by(&kv.key, &kv.value),
        ],
        success: vec![put(&kv.key, &held, lease)],
        failure: vec![],
    })
    .await?;
    if answer.succeeded {
        shared.holds(&kv.key, &held, written(&answer), ttl, sent);
    }
    Ok(answer.succeeded)
}

/// Claim the lock handed over for `owner`; with `more` waiting here, keep
/// them a place.
pub async fn claim(
    shared: &Shared, lock: &Lock, owner: &str, ttl: Duration, sent: Instant, more: Option<Asked>,
    tell: &Tell,
) -> Result<bool, StoreError> {
    let claimed = extend(shared, lock, owner, ttl, sent).await?;
    if let (true, Some(asked)) = (claimed, more) {
        keep_place(shared, lock, asked, sent, tell).await;
    }
    Ok(claimed)
}

/// Every waiter here gave up: this store's place goes, unless the lock
/// came to it (then it stays this process's, until claimed, given back or
/// its claim window ends).
pub async fn leave(shared: &Shared, lock: &Lock, tell: &Tell) -> Result<(), StoreError> {
    let Some(place) = shared.line.place(&lock.line) else {
        return Ok(());
    };
    let request = TxnRequest {
        compare: vec![
            created_at(&place.stored, place.created),
            none_created_before(&lock.line, place.created),
        ],
        success: vec![range(&place.stored)],
        // (Only that entry: sent again after a lost reply, this may come
        // after the key was made again, a new place.)
        failure: vec![nested(TxnRequest {
            compare: vec![created_at(&place.stored, place.created)],
            success: vec![delete(&place.stored)],
            failure: vec![],
        })],
    };
    let answer = shared.members.call::<_, TxnResponse>(TXN, &request).await?;
    match first_kv(&answer) {
        Some(kv) if answer.succeeded => {
            if let Some((handed, true)) = shared.line.first(&lock.line, kv, written(&answer)) {
                started(shared, lock, &handed, kv, tell);
            }
        }
        _ => (shared.line).unplaced(&lock.line, &place.stored, written(&answer)),
    }
    Ok(())
}

/// The entry `owner`'s hold would be, as this store knows it, and what
/// holds while it is: a place of its handed the lock (still that entry),
/// else the entry of a lock taken at once (holding the owner).
fn hold_of(shared: &Shared, lock: &Lock, owner: &str) -> (Vec<u8>, Compare) {
    match shared.line.handed(&lock.line, owner) {
        Some(handed) => {
            let is = created_at(&handed.stored, handed.created);
            (handed.stored, is)
        }
        None => {
            let taken = taken_entry(&lock.line, owner);
            let is = held_by(&taken, &held_value(owner));
            (taken, is)
        }
    }
}

fn unread(what: &str) -> StoreError {
    backend(OTHER, format!("etcd answered without {what}"))
}
