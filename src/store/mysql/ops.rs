//! Every operation, written once and as data: its statement (`sql`), the
//! key whose connection it goes on, and one reader of the answer.
//!
//! A plain lock is a row of the table (key hash, key, owner, expiry on the
//! server's clock, last token), one statement per operation. Semaphores and
//! read-write locks are rows of `<table>_holds`, each operation one CALL of
//! the hold procedure (`holds_sql`).

use super::sql::{hash_hex, hex, Sql};
use super::wire::Answer;
use crate::store::options::whole_ms;
use crate::store::{Acquired, Hold, HoldOp};

/// What an operation reads of its answer, or what it found unreadable.
pub(super) type Reader<T> = fn(Answer) -> Result<T, &'static str>;

/// A statement to send.
pub(super) struct Request {
    /// The store operation it serves (`MySqlLockStore.<name>` in errors).
    pub name: &'static str,
    pub sql: String,
    /// The key whose connection it goes on, so one key's operations reach
    /// the server in the order they were made.
    pub route: String,
    /// Whether a good answer starts a sweep of old rows, if one is due
    /// (acquires do, so rows of keys nobody takes again do not pile up).
    pub starts_sweep: bool,
}

fn keyed(name: &'static str, key: &str, sql: String) -> Request {
    Request {
        name,
        sql,
        route: key.to_owned(),
        starts_sweep: false,
    }
}

fn ttl(ttl_ms: f64) -> i64 {
    // `whole_ms` is at most 2^53 - 1, which fits.
    i64::try_from(whole_ms(ttl_ms)).unwrap_or(i64::MAX)
}

/// Take `key` for `owner` (or find it already theirs); fenced when taken.
pub(super) fn acquire_lock(
    sql: &Sql,
    key: &str,
    owner: &str,
    ttl_ms: f64,
) -> (Request, Reader<Acquired>) {
    let statement = sql.acquire(
        &hash_hex(key.as_bytes()),
        &hex(key.as_bytes()),
        &hex(owner.as_bytes()),
        ttl(ttl_ms),
        &sql.doorbell(key),
    );
    let mut request = keyed("acquire", key, statement);
    request.starts_sweep = true;
    (request, token)
}

pub(super) fn release_lock(sql: &Sql, key: &str, owner: &str) -> (Request, Reader<bool>) {
    let statement = sql.release(
        &hash_hex(key.as_bytes()),
        &hex(owner.as_bytes()),
        &sql.doorbell(key),
    );
    (keyed("release", key, statement), one_matched)
}

pub(super) fn extend_lock(
    sql: &Sql,
    key: &str,
    owner: &str,
    ttl_ms: f64,
) -> (Request, Reader<bool>) {
    let statement = sql.extend(
        &hash_hex(key.as_bytes()),
        &hex(owner.as_bytes()),
        ttl(ttl_ms),
        &sql.doorbell(key),
    );
    (keyed("extend", key, statement), one_matched)
}

pub(super) fn lock_held_by(sql: &Sql, key: &str, owner: &str) -> (Request, Reader<bool>) {
    let statement = sql.held_by(&hash_hex(key.as_bytes()), &hex(owner.as_bytes()));
    (keyed("isExpired", key, statement), yes_or_no)
}

pub(super) fn lock_remaining(sql: &Sql, key: &str) -> (Request, Reader<Option<f64>>) {
    let statement = sql.remaining(&hash_hex(key.as_bytes()));
    (keyed("getRemainingTime", key, statement), remaining)
}

pub(super) fn is_locked(sql: &Sql, key: &str) -> (Request, Reader<bool>) {
    let statement = sql.is_locked(&hash_hex(key.as_bytes()));
    (keyed("isLocked", key, statement), yes_or_no)
}

/// One operation on a semaphore or read-write key: a CALL of the hold
/// procedure, read by `read`.
pub(super) fn hold<T>(
    sql: &Sql,
    op: HoldOp,
    hold: Hold,
    key: &str,
    owner: &str,
    ttl_ms: f64,
    read: Reader<T>,
) -> (Request, Reader<T>) {
    let (mode, limit) = hold.name_and_limit();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let statement = sql.hold(
        op.name(),
        mode,
        &hash_hex(key.as_bytes()),
        &hex(key.as_bytes()),
        &hash_hex(owner.as_bytes()),
        &hex(owner.as_bytes()),
        ttl(ttl_ms),
        limit,
    );
    (keyed(op.method(), key, statement), read)
}

// Readers.

/// The first column of the first row, as text (None: no row, or NULL).
fn first(answer: &Answer) -> Option<&[u8]> {
    answer.rows.first()?.first()?.as_deref()
}

fn number(answer: &Answer) -> Result<Option<i64>, &'static str> {
    match first(answer) {
        None => Ok(None),
        Some(text) => std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse().ok())
            .map(Some)
            .ok_or("a value that is not a number"),
    }
}

/// An acquire: the token its statement set, or 0 when it was refused.
fn token(answer: Answer) -> Result<Acquired, &'static str> {
    Ok(match answer.insert_id {
        0 => Acquired::Refused,
        token => Acquired::Fenced(token),
    })
}

fn one_matched(answer: Answer) -> Result<bool, &'static str> {
    Ok(answer.affected > 0)
}

fn yes_or_no(answer: Answer) -> Result<bool, &'static str> {
    Ok(number(&answer)?.is_some_and(|n| n != 0))
}

fn remaining(answer: Answer) -> Result<Option<f64>, &'static str> {
    Ok(number(&answer)?.map(|ms| ms as f64))
}

/// The hold procedure's answer to an acquire: a token, or NULL (refused).
pub(super) fn hold_token(answer: Answer) -> Result<Acquired, &'static str> {
    Ok(match number(&answer)? {
        Some(token) => Acquired::Fenced(u64::try_from(token).map_err(|_| "a negative token")?),
        None => Acquired::Refused,
    })
}

/// 1 or 0.
pub(super) fn hold_done(answer: Answer) -> Result<bool, &'static str> {
    Ok(number(&answer)?.ok_or("no answer")? > 0)
}

/// Milliseconds left, or -1 (none).
pub(super) fn hold_left(answer: Answer) -> Result<Option<f64>, &'static str> {
    let left = number(&answer)?.ok_or("no answer")?;
    Ok((left > 0).then_some(left as f64))
}

pub(super) fn hold_count(answer: Answer) -> Result<f64, &'static str> {
    Ok(number(&answer)?.ok_or("no answer")?.max(0) as f64)
}

pub(super) fn hold_nothing(_: Answer) -> Result<(), &'static str> {
    Ok(())
}
