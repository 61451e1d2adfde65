//! Every operation, written once and as data: its statement (`sql`), the
//! key whose connection it goes on, and one reader of the answer.
//!
//! A plain lock is a row of the table (key hash, key, owner, expiry on the
//! server's clock, last token), one statement per operation. Semaphores and
//! read-write locks are rows of `<table>_holds`, each operation one CALL of
//! the hold procedure (`holds_sql`).

use super::sql::{hash, Sql, Statement};
use super::wire::prepared::{Execute, Param};
use super::wire::Answer;
use crate::store::options::whole_ms;
use crate::store::{Acquired, Hold, HoldOp};

/// What an operation reads of its answer, or what it found unreadable.
pub(super) type Reader<T> = fn(Answer) -> Result<T, &'static str>;

/// Prepared statements to run.
pub(super) struct Request {
    /// The store operation it serves (`MySqlLockStore.<name>` in errors).
    pub name: &'static str,
    /// The operation's statement, then what it does with the doorbell.
    pub runs: Vec<Execute>,
    /// The key whose connection it goes on, so one key's operations reach
    /// the server in the order they were made.
    pub route: String,
    /// Whether a good answer starts a sweep of old rows, if one is due
    /// (acquires do, so rows of keys nobody takes again do not pile up).
    pub starts_sweep: bool,
}

fn keyed(name: &'static str, key: &str, runs: Vec<Execute>) -> Request {
    Request {
        name,
        runs,
        route: key.to_owned(),
        starts_sweep: false,
    }
}

fn run(statement: Statement, params: Vec<Param>) -> Execute {
    Execute {
        statement: statement as usize,
        params,
    }
}

/// A key's row id.
fn id(key: &str) -> Param {
    Param::Bytes(hash(key.as_bytes()))
}

fn bytes(text: &str) -> Param {
    Param::Bytes(text.as_bytes().to_vec())
}

fn ttl(ttl_ms: f64) -> Param {
    // `whole_ms` is at most 2^53 - 1, which fits.
    Param::Int(i64::try_from(whole_ms(ttl_ms)).unwrap_or(i64::MAX))
}

/// Take `key`'s doorbell after `statement`, if it took or kept the lock.
fn ring(sql: &Sql, statement: Statement, key: &str) -> Execute {
    let bell = sql.doorbell(key);
    run(
        statement,
        vec![Param::Text(bell.clone()), Param::Text(bell)],
    )
}

/// Take `key` for `owner` (or find it already theirs); fenced when taken.
pub(super) fn acquire_lock(
    sql: &Sql,
    key: &str,
    owner: &str,
    ttl_ms: f64,
) -> (Request, Reader<Acquired>) {
    let take = run(
        Statement::Acquire,
        vec![id(key), bytes(key), bytes(owner), ttl(ttl_ms)],
    );
    let mut request = keyed(
        "acquire",
        key,
        vec![take, ring(sql, Statement::RingTaken, key)],
    );
    request.starts_sweep = true;
    (request, token)
}

pub(super) fn release_lock(sql: &Sql, key: &str, owner: &str) -> (Request, Reader<bool>) {
    let give_back = run(Statement::Release, vec![id(key), bytes(owner)]);
    let let_go = run(Statement::LetGo, vec![Param::Text(sql.doorbell(key))]);
    (keyed("release", key, vec![give_back, let_go]), one_matched)
}

pub(super) fn extend_lock(
    sql: &Sql,
    key: &str,
    owner: &str,
    ttl_ms: f64,
) -> (Request, Reader<bool>) {
    let extend = run(Statement::Extend, vec![ttl(ttl_ms), id(key), bytes(owner)]);
    let runs = vec![extend, ring(sql, Statement::RingKept, key)];
    (keyed("extend", key, runs), one_matched)
}

pub(super) fn lock_held_by(key: &str, owner: &str) -> (Request, Reader<bool>) {
    let runs = vec![run(Statement::HeldBy, vec![id(key), bytes(owner)])];
    (keyed("isExpired", key, runs), yes_or_no)
}

pub(super) fn lock_remaining(key: &str) -> (Request, Reader<Option<f64>>) {
    let runs = vec![run(Statement::Remaining, vec![id(key)])];
    (keyed("getRemainingTime", key, runs), remaining)
}

pub(super) fn is_locked(key: &str) -> (Request, Reader<bool>) {
    let runs = vec![run(Statement::IsLocked, vec![id(key)])];
    (keyed("isLocked", key, runs), yes_or_no)
}

/// One operation on a semaphore or read-write key: a CALL of the hold
/// procedure, read by `read`.
pub(super) fn hold<T>(
    op: HoldOp,
    hold: Hold,
    key: &str,
    owner: &str,
    ttl_ms: f64,
    read: Reader<T>,
) -> (Request, Reader<T>) {
    let (mode, limit) = hold.name_and_limit();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let params = vec![
        Param::Text(op.name().to_owned()),
        Param::Text(mode.to_owned()),
        id(key),
        bytes(key),
        id(owner),
        bytes(owner),
        ttl(ttl_ms),
        Param::Int(limit),
    ];
    let mut request = keyed(op.method(), key, vec![run(Statement::Hold, params)]);
    // A store used only for semaphores or read-write locks sweeps too.
    request.starts_sweep = matches!(op, HoldOp::Acquire);
    (request, read)
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
