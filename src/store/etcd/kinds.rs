//! Semaphores and read-write locks, with the keys `layout.rs` gives them.
//! A permit, a reader and a writer are each a key of their own on a lease,
//! released, extended and read as a plain lock is (`ops.rs`). Admission
//! counts: a permit is admitted while fewer than the caller's limit are
//! held, a writer while nobody reads or writes. etcd compares single keys,
//! not counts, so such an acquire reads the count and the revision it was
//! read at, then writes only if no key of the range was created since
//! (a comparison over the whole range); when one was, it reads again. A
//! refused writer leaves a mark, on its own TTL, that holds new readers
//! back until it gets in, gives up (`withdraw`) or lapses.

use std::time::Duration;

use tokio::time::Instant;

use super::messages::paths::TXN;
use super::messages::{KeyValue, TxnRequest, TxnResponse};
use super::ops::{on_a_lease, Shared};
use super::txn::{
    absent, count_under, delete, first_kv, kv_at, none_created_since, put, range, revision, written,
};
use crate::store::{Acquired, StoreError};

/// How many times an admission that lost a race reads again before it is
/// refused (its waiter tries again later).
const TRIES: usize = 8;

/// What a range holds at one revision: how many keys, and the one asked about.
struct Seen {
    count: i64,
    revision: i64,
    mine: Option<KeyValue>,
}

/// Count the keys under `under` and read `mine`, at one revision.
async fn look(shared: &Shared, under: &[u8], mine: &[u8]) -> Result<Seen, StoreError> {
    let request = TxnRequest {
        compare: vec![],
        success: vec![count_under(under), range(mine)],
        failure: vec![],
    };
    let answer = shared.members.call::<_, TxnResponse>(TXN, &request).await?;
    Ok(Seen {
        count: super::txn::count(&answer, 0)?,
        revision: written(&answer),
        mine: kv_at(&answer, 1).cloned(),
    })
}

fn token(kv: &KeyValue) -> Acquired {
    Acquired::Fenced(u64::try_from(kv.create_revision).unwrap_or(0))
}

/// A semaphore's permit for `owner` under `permits`, while fewer than `limit` are held.
pub async fn acquire_permit(
    shared: &Shared, permits: Vec<u8>, owner: String, limit: u64, ttl: Duration, sent: Instant,
) -> Result<Acquired, StoreError> {
    let mine = [&permits[..], owner.as_bytes()].concat();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    for _ in 0..TRIES {
        let seen = look(shared, &permits, &mine).await?;
        if let Some(kv) = &seen.mine {
            // An acquire sent twice: the first was applied.
            shared.holds(&mine, owner.as_bytes(), kv.mod_revision, ttl, sent);
            return Ok(token(kv));
        }
        if seen.count >= limit {
            break;
        }
        let answer = on_a_lease(shared, ttl, sent, |lease| TxnRequest {
            compare: vec![none_created_since(&permits, seen.revision)],
            success: vec![put(&mine, owner.as_bytes(), lease)],
            failure: vec![],
        })
        .await?;
        if answer.succeeded {
            shared.holds(&mine, owner.as_bytes(), written(&answer), ttl, sent);
            return Ok(Acquired::Fenced(revision(&answer)));
        }
    }
    Ok(Acquired::Refused)
}

/// The keys of a read-write key whose holds live under `base`.
pub struct ReadWrite {
    pub readers: Vec<u8>,
    pub writer: Vec<u8>,
    pub mark: Vec<u8>,
}

impl ReadWrite {
    pub fn under(base: &[u8]) -> ReadWrite {
        ReadWrite {
            readers: [base, b"r/"].concat(),
            writer: [base, b"w"].concat(),
            mark: [base, b"m"].concat(),
        }
    }

    pub fn reader(&self, owner: &str) -> Vec<u8> {
        [&self.readers[..], owner.as_bytes()].concat()
    }
}

/// A reader, while no writer holds or waits.
pub async fn acquire_read(
    shared: &Shared, keys: ReadWrite, owner: String, ttl: Duration, sent: Instant,
) -> Result<Acquired, StoreError> {
    let mine = keys.reader(&owner);
    let answer = on_a_lease(shared, ttl, sent, |lease| TxnRequest {
        compare: vec![absent(&keys.writer), absent(&keys.mark)],
        success: vec![put(&mine, owner.as_bytes(), lease)],
        failure: vec![range(&mine)],
    })
    .await?;
    if answer.succeeded {
        shared.holds(&mine, owner.as_bytes(), written(&answer), ttl, sent);
        return Ok(Acquired::Fenced(revision(&answer)));
    }
    Ok(match first_kv(&answer) {
        Some(kv) => {
            shared.holds(&mine, owner.as_bytes(), kv.mod_revision, ttl, sent);
            token(kv)
        }
        None => Acquired::Refused,
    })
}

/// The writer, while nobody reads or writes; refused, it leaves its mark.
pub async fn acquire_write(
    shared: &Shared, keys: ReadWrite, owner: String, ttl: Duration, sent: Instant,
) -> Result<Acquired, StoreError> {
    for _ in 0..TRIES {
        let seen = look(shared, &keys.readers, &keys.writer).await?;
        match &seen.mine {
            Some(writer) if writer.value == owner.as_bytes() => {
                shared.holds(
                    &keys.writer,
                    owner.as_bytes(),
                    writer.mod_revision,
                    ttl,
                    sent,
                );
                return Ok(token(writer));
            }
            Some(_) => break,
            None if seen.count > 0 => break,
            None => {}
        }
        let answer = on_a_lease(shared, ttl, sent, |lease| TxnRequest {
            compare: vec![
                absent(&keys.writer),
                none_created_since(&keys.readers, seen.revision),
            ],
            success: vec![
                put(&keys.writer, owner.as_bytes(), lease),
                delete(&keys.mark),
            ],
            failure: vec![],
        })
        .await?;
        if answer.succeeded {
            shared.holds(&keys.writer, owner.as_bytes(), written(&answer), ttl, sent);
            return Ok(Acquired::Fenced(revision(&answer)));
        }
    }
    // Held back: new readers wait for this writer until it gets in, gives
    // up or lapses.
    on_a_lease(shared, ttl, sent, |lease| TxnRequest {
        compare: vec![],
        success: vec![put(&keys.mark, owner.as_bytes(), lease)],
        failure: vec![],
    })
    .await?;
    Ok(Acquired::Refused)
}

/// Remove the waiting writer's mark.
pub async fn withdraw(shared: &Shared, keys: ReadWrite) -> Result<(), StoreError> {
    let request = TxnRequest {
        compare: vec![],
        success: vec![delete(&keys.mark)],
        failure: vec![],
    };
    shared
        .members
        .call::<_, TxnResponse>(TXN, &request)
        .await
        .map(|_| ())
}

/// How many keys are under `under` now.
pub async fn count(shared: &Shared, under: &[u8]) -> Result<i64, StoreError> {
    Ok(look(shared, under, under).await?.count)
}

/// A read-write key's holders: its readers, or 1 for its writer.
pub async fn holders(shared: &Shared, keys: &ReadWrite) -> Result<i64, StoreError> {
    let seen = look(shared, &keys.readers, &keys.writer).await?;
    Ok(seen.count + i64::from(seen.mine.is_some()))
}

/// Whether a reader (`writing` false) or a writer would wait now.
pub async fn would_wait(
    shared: &Shared, keys: &ReadWrite, writing: bool,
) -> Result<bool, StoreError> {
    if writing {
        let seen = look(shared, &keys.readers, &keys.writer).await?;
        return Ok(seen.count > 0 || seen.mine.is_some());
    }
    let seen = look(shared, &keys.writer, &keys.mark).await?;
    // (`look` counts the range after the writer's own key, `.../w` to
    // `.../x`, which holds only the writer.)
    Ok(seen.count > 0 || seen.mine.is_some())
}
