//! The operations, each on the store's connection with the file's clock
//! read once the file is ours. A write that decides anything runs in one
//! `BEGIN IMMEDIATE` transaction: SQLite lets one connection write at a
//! time, across every process, so what it read is still so when it writes.
//! Reads run alone (WAL: a reader never waits for a writer, and sees the
//! last commit).

use rusqlite::{params, OptionalExtension, Transaction, TransactionBehavior};

use super::clock::now_ms;
use super::open::Db;
use super::sql::Sql;
use crate::store::{Acquired, HoldKind};

type Result<T> = rusqlite::Result<T>;

/// When a hold taken or extended now for `ttl_ms` lapses: TTLs count in
/// whole milliseconds, a fraction rounding up (the largest the API accepts,
/// 2^53 - 1, fits beside any clock reading).
fn expiry(now: i64, ttl_ms: f64) -> i64 {
    // A cast from f64 saturates; the API keeps TTLs positive and finite.
    now.saturating_add(ttl_ms.ceil() as i64)
}

/// A hold's row kind in `<table>_holds`, and the kinds that count as its
/// key's holders (a semaphore's permits, or a read-write key's readers and
/// writer). A plain lock has no rows there: its own table.
fn kinds(hold: HoldKind) -> (&'static str, [&'static str; 2]) {
    match hold {
        HoldKind::Permit { .. } => ("s", ["s", "s"]),
        HoldKind::Read => ("r", ["r", "w"]),
        HoldKind::Lock | HoldKind::Write => ("w", ["r", "w"]),
    }
}

fn immediate(db: &mut Db) -> Result<(Transaction<'_>, &Sql)> {
    let Db { connection, sql } = db;
    let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    Ok((tx, sql))
}

/// The next fencing token (the file's counter only grows), and the clock
/// reading noted as the latest a hold was written at.
fn next_token(tx: &Transaction<'_>, sql: &Sql, now: i64) -> Result<i64> {
    let token = tx
        .prepare_cached(&sql.next_token)?
        .query_row([], |row| row.get(0))?;
    noted(tx, sql, now)?;
    Ok(token)
}

/// Holds written now must be let go if the machine reboots, which the clock
/// running behind this reading tells where the system names no boot.
fn noted(tx: &Transaction<'_>, sql: &Sql, now: i64) -> Result<()> {
    tx.prepare_cached(&sql.seen)?.execute([now])?;
    Ok(())
}

fn count(db: &Db, text: &str, params: impl rusqlite::Params) -> Result<i64> {
    db.connection
        .prepare_cached(text)?
        .query_row(params, |row| row.get(0))
}

pub(super) fn acquire(
    db: &mut Db, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64,
) -> Result<Acquired> {
    let (tx, sql) = immediate(db)?;
    let now = now_ms();
    let token = match hold {
        HoldKind::Lock => take_lock(&tx, sql, key, owner, expiry(now, ttl_ms), now)?,
        _ => take_hold(&tx, sql, hold, key, owner, expiry(now, ttl_ms), now)?,
    };
    let Some(token) = token else {
        // A waiting writer's mark stays: it holds new readers back.
        tx.commit()?;
        return Ok(Acquired::Refused);
    };
    tx.commit()?;
    // The counter starts at 0 and only grows.
    Ok(Acquired::Fenced(u64::try_from(token).unwrap_or(0)))
}

fn take_lock(
    tx: &Transaction<'_>, sql: &Sql, key: &str, owner: &str, expires_at: i64, now: i64,
) -> Result<Option<i64>> {
    let held: Option<i64> = tx
        .prepare_cached(&sql.lock_owner)?
        .query_row([key], |row| row.get(1))
        .optional()?;
    if held.is_some_and(|expires| expires > now) {
        return Ok(None);
    }
    let token = next_token(tx, sql, now)?;
    tx.prepare_cached(&sql.lock_take)?
        .execute(params![key, owner, expires_at, token])?;
    Ok(Some(token))
}

/// A permit, a reader or a writer: admitted by the live holds of its group.
/// A writer refused marks the key so that new readers wait behind it.
fn take_hold(
    tx: &Transaction<'_>, sql: &Sql, hold: HoldKind, key: &str, owner: &str, expires_at: i64,
    now: i64,
) -> Result<Option<i64>> {
    let (mine, _) = kinds(hold);
    let live = |first: &str, second: &str| -> Result<i64> {
        tx.prepare_cached(&sql.hold_count)?
            .query_row(params![key, first, second, now], |row| row.get(0))
    };
    let renewed = || -> Result<bool> {
        let n: i64 = tx
            .prepare_cached(&sql.hold_mine)?
            .query_row(params![key, mine, owner, now], |row| row.get(0))?;
        Ok(n > 0)
    };
    let admitted = match hold {
        HoldKind::Write => {
            let others: i64 = tx
                .prepare_cached(&sql.hold_others)?
                .query_row(params![key, owner, now], |row| row.get(0))?;
            if others > 0 {
                tx.prepare_cached(&sql.hold_mark)?
                    .execute(params![key, expires_at])?;
            } else {
                tx.prepare_cached(&sql.hold_unmark)?.execute([key])?;
            }
            others == 0
        }
        _ if renewed()? => true,
        HoldKind::Permit { limit } => u64::try_from(live("s", "s")?).unwrap_or(0) < limit,
        HoldKind::Read => live("w", "m")? == 0,
        HoldKind::Lock => true,
    };
    if !admitted {
        return Ok(None);
    }
    tx.prepare_cached(&sql.hold_put)?
        .execute(params![key, mine, owner, expires_at])?;
    next_token(tx, sql, now).map(Some)
}

pub(super) fn release(db: &mut Db, hold: HoldKind, key: &str, owner: &str) -> Result<bool> {
    let now = now_ms();
    let changed = match hold {
        HoldKind::Lock => db
            .connection
            .prepare_cached(&db.sql.lock_release)?
            .execute(params![key, owner, now])?,
        _ => db
            .connection
            .prepare_cached(&db.sql.hold_release)?
            .execute(params![key, kinds(hold).0, owner, now])?,
    };
    Ok(changed > 0)
}

pub(super) fn extend(
    db: &mut Db, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64,
) -> Result<bool> {
    let (tx, sql) = immediate(db)?;
    let now = now_ms();
    let expires_at = expiry(now, ttl_ms);
    let changed = match hold {
        HoldKind::Lock => tx
            .prepare_cached(&sql.lock_extend)?
            .execute(params![key, owner, now, expires_at])?,
        _ => tx.prepare_cached(&sql.hold_extend)?.execute(params![
            key,
            kinds(hold).0,
            owner,
            now,
            expires_at
        ])?,
    };
    if changed > 0 {
        noted(&tx, sql, now)?;
    }
    tx.commit()?;
    Ok(changed > 0)
}

pub(super) fn holds(db: &Db, hold: HoldKind, key: &str, owner: &str) -> Result<bool> {
    let now = now_ms();
    let n = match hold {
        HoldKind::Lock => count(db, &db.sql.lock_holds, params![key, owner, now])?,
        _ => count(
            db,
            &db.sql.hold_mine,
            params![key, kinds(hold).0, owner, now],
        )?,
    };
    Ok(n > 0)
}

pub(super) fn remaining(
    db: &Db, hold: HoldKind, key: &str, owner: Option<&str>,
) -> Result<Option<f64>> {
    let now = now_ms();
    let left: Option<i64> = match (hold, owner) {
        (HoldKind::Lock, _) => db
            .connection
            .prepare_cached(&db.sql.lock_left)?
            .query_row(params![key, now], |row| row.get(0))
            .optional()?,
        (_, None) => None,
        (_, Some(owner)) => db
            .connection
            .prepare_cached(&db.sql.hold_left)?
            .query_row(params![key, kinds(hold).0, owner, now], |row| row.get(0))
            .optional()?,
    };
    Ok(left.map(|ms| ms as f64))
}

pub(super) fn would_wait(db: &Db, hold: HoldKind, key: &str) -> Result<bool> {
    let now = now_ms();
    let hold_count =
        |first: &str, second: &str| count(db, &db.sql.hold_count, params![key, first, second, now]);
    Ok(match hold {
        HoldKind::Lock => remaining(db, hold, key, None)?.is_some(),
        HoldKind::Permit { limit } => u64::try_from(hold_count("s", "s")?).unwrap_or(0) >= limit,
        HoldKind::Read => hold_count("w", "m")? > 0,
        HoldKind::Write => hold_count("r", "w")? > 0,
    })
}

pub(super) fn holders(db: &Db, hold: HoldKind, key: &str) -> Result<f64> {
    let now = now_ms();
    let (_, [first, second]) = kinds(hold);
    let n = match hold {
        HoldKind::Lock => i64::from(remaining(db, hold, key, None)?.is_some()),
        _ => count(db, &db.sql.hold_count, params![key, first, second, now])?,
    };
    Ok(n as f64)
}

/// A writer that was waiting gave up: its mark goes.
pub(super) fn withdraw(db: &mut Db, key: &str) -> Result<()> {
    db.connection
        .prepare_cached(&db.sql.hold_unmark)?
        .execute([key])?;
    Ok(())
}

/// Delete the rows that lapsed (they decide nothing; this keeps the file small).
pub(super) fn sweep(db: &mut Db) -> Result<()> {
    let (tx, sql) = immediate(db)?;
    let now = now_ms();
    tx.prepare_cached(&sql.sweep_locks)?.execute([now])?;
    tx.prepare_cached(&sql.sweep_holds)?.execute([now])?;
    tx.commit()
}

/// One read of the file.
pub(super) fn ping(db: &Db) -> Result<()> {
    db.connection
        .prepare_cached(&db.sql.lock_holds)?
        .query_row(params!["", "", 0], |_| Ok(()))
}

/// The letter a kind of hold's releases are announced under (its waiters
/// wait apart: a plain lock's, a semaphore's, a read-write key's).
pub(super) fn letter(hold: HoldKind) -> u8 {
    match hold {
        HoldKind::Lock => b'l',
        HoldKind::Permit { .. } => b's',
        HoldKind::Read | HoldKind::Write => b'r',
    }
}

fn letter_text(hold: HoldKind) -> &'static str {
    match letter(hold) {
        b'l' => "l",
        b's' => "s",
        _ => "r",
    }
}

/// Note (or forget) that the ear at `ear` waits for `key`'s releases.
pub(super) fn note_ear(db: &mut Db, hold: HoldKind, key: &str, ear: &str, on: bool) -> Result<()> {
    let text = if on { &db.sql.ear_on } else { &db.sql.ear_off };
    db.connection
        .prepare_cached(text)?
        .execute(params![key, letter_text(hold), ear])?;
    Ok(())
}

/// The ears that wait for `key`'s releases.
pub(super) fn ears_of(db: &Db, hold: HoldKind, key: &str) -> Result<Vec<String>> {
    let mut statement = db.connection.prepare_cached(&db.sql.ears_of)?;
    let ears = statement.query_map(params![key, letter_text(hold)], |row| row.get(0))?;
    ears.collect()
}

/// Nobody listens at `ear` any more: every note of it goes.
pub(super) fn forget_ear(db: &mut Db, ear: &str) -> Result<()> {
    db.connection
        .prepare_cached(&db.sql.ear_gone)?
        .execute([ear])?;
    Ok(())
}
