//! The operations, each on the store's connection with the file's clock
//! read once the file is ours. A write that decides anything runs in one
//! `BEGIN IMMEDIATE` transaction: SQLite lets one connection write at a
//! time, across every process, so what it read is still so when it writes.
//! Reads run alone (WAL: a reader never waits for a writer, and sees the
//! last commit).

use rusqlite::{params, OptionalExtension, Transaction, TransactionBehavior};

use super::clock::now_ms;
use super::open::Db;
use super::sql::{Sql, SWEEP_BATCH};
use crate::store::{Acquired, HoldKind};

type Result<T> = rusqlite::Result<T>;

/// When a hold taken or extended now for `ttl_ms` lapses: TTLs count in
/// whole milliseconds, a fraction rounding up (the largest the API accepts,
/// 2^53 - 1, fits beside any clock reading).
pub(super) fn expiry(now: i64, ttl_ms: f64) -> i64 {
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

/// A write transaction, with the statements and when the clock was last noted.
pub(super) struct Write<'a> {
    pub tx: Transaction<'a>,
    pub sql: &'a Sql,
    noted_at: &'a mut i64,
}

pub(super) fn immediate(db: &mut Db) -> Result<Write<'_>> {
    let Db {
        connection,
        sql,
        noted_at,
    } = db;
    let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    Ok(Write { tx, sql, noted_at })
}

/// How often a connection notes the clock as `seen`: a hold of an earlier
/// boot then outlasts a reboot (where the system names no boot) by at most
/// its TTL and this.
const NOTE_EVERY_MS: i64 = 1_000;

/// The clock noted as `seen` by a write outside a transaction (see
/// [`Write::noted`]), when due.
pub(super) fn noted(db: &mut Db, now: i64) -> Result<()> {
    if now.saturating_sub(db.noted_at) < NOTE_EVERY_MS {
        return Ok(());
    }
    db.connection.prepare_cached(&db.sql.seen)?.execute([now])?;
    db.noted_at = now;
    Ok(())
}

impl Write<'_> {
    /// The next token of the file's counter (semaphores and read-write locks).
    fn next_token(&mut self, now: i64) -> Result<i64> {
        let token = self
            .tx
            .prepare_cached(&self.sql.next_token)?
            .query_row([], |row| row.get(0))?;
        self.noted(now)?;
        Ok(token)
    }

    /// A hold written now must be let go if the machine reboots, which the
    /// clock running behind a reading noted here tells where the system names
    /// no boot: noted at most once a second, as each note is a write.
    pub fn noted(&mut self, now: i64) -> Result<()> {
        if now.saturating_sub(*self.noted_at) < NOTE_EVERY_MS {
            return Ok(());
        }
        self.tx.prepare_cached(&self.sql.seen)?.execute([now])?;
        *self.noted_at = now;
        Ok(())
    }

    pub fn commit(self) -> Result<()> {
        self.tx.commit()
    }
}

/// The row (if any) a writing statement outside a transaction answers, the
/// statement stepped to its end: such a statement commits in the step that
/// ends it, so an error there (the disk full) fails the operation instead of
/// going unseen when the statement is reset after its first row.
pub(super) fn written_row<T>(
    db: &Db, text: &str, params: impl rusqlite::Params,
    read: impl FnOnce(&rusqlite::Row<'_>) -> Result<T>,
) -> Result<Option<T>> {
    let mut statement = db.connection.prepare_cached(text)?;
    let mut rows = statement.query(params)?;
    let first = match rows.next()? {
        Some(row) => Some(read(row)?),
        None => None,
    };
    while rows.next()?.is_some() {}
    Ok(first)
}

fn count(db: &Db, text: &str, params: impl rusqlite::Params) -> Result<i64> {
    db.connection
        .prepare_cached(text)?
        .query_row(params, |row| row.get(0))
}

/// A semaphore permit, a reader or a writer (a plain lock's acquire is the
/// line's: `line::acquire`).
pub(super) fn acquire(
    db: &mut Db, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64,
) -> Result<Acquired> {
    let mut write = immediate(db)?;
    let now = now_ms();
    let token = take_hold(&mut write, hold, key, owner, expiry(now, ttl_ms), now)?;
    // Refused, a waiting writer's mark stays: it holds new readers back.
    write.commit()?;
    let Some(token) = token else {
        return Ok(Acquired::Refused);
    };
    // The counter starts at 0 and only grows.
    Ok(Acquired::Fenced(u64::try_from(token).unwrap_or(0)))
}

/// A plain lock's row: when it lapses, its last token and its owner.
pub(super) fn lock_row(write: &Write<'_>, key: &str) -> Result<Option<(i64, i64, String)>> {
    write
        .tx
        .prepare_cached(&write.sql.lock_owner)?
        .query_row([key], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .optional()
}

/// A free row (or none) is taken, its token one more than the key's last
/// (or than the floor, for a key without a row).
pub(super) fn take_lock(
    write: &mut Write<'_>, key: &str, owner: &str, expires_at: i64, now: i64,
) -> Result<Option<i64>> {
    let row = lock_row(write, key)?;
    let Write { tx, sql, .. } = write;
    let last = match row {
        Some((expires, _, _)) if expires > now => return Ok(None),
        Some((_, token, _)) => token,
        None => tx
            .prepare_cached(&sql.state_read)?
            .query_row(["floor"], |row| row.get(0))?,
    };
    let token = last.saturating_add(1);
    tx.prepare_cached(&sql.lock_take)?
        .execute(params![key, owner, expires_at, token])?;
    write.noted(now)?;
    Ok(Some(token))
}

/// A permit, a reader or a writer: admitted by the live holds of its group.
/// A writer refused marks the key so that new readers wait behind it.
fn take_hold(
    write: &mut Write<'_>, hold: HoldKind, key: &str, owner: &str, expires_at: i64, now: i64,
) -> Result<Option<i64>> {
    let (mine, _) = kinds(hold);
    let Write { tx, sql, .. } = write;
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
    write.next_token(now).map(Some)
}

/// A semaphore permit, a reader or a writer given back (a plain lock's
/// release is the line's: `line::release`).
pub(super) fn release(db: &mut Db, hold: HoldKind, key: &str, owner: &str) -> Result<bool> {
    let now = now_ms();
    let changed = db
        .connection
        .prepare_cached(&db.sql.hold_release)?
        .execute(params![key, kinds(hold).0, owner, now])?;
    Ok(changed > 0)
}

pub(super) fn extend(
    db: &mut Db, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64,
) -> Result<bool> {
    let mut write = immediate(db)?;
    let now = now_ms();
    let expires_at = expiry(now, ttl_ms);
    let (tx, sql) = (&write.tx, write.sql);
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
        write.noted(now)?;
    }
    write.commit()?;
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

/// Which table a sweep is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Swept {
    Locks,
    Holds,
}

/// Delete the lapsed rows among the next [`SWEEP_BATCH`] keys of a table
/// after `from` (they decide nothing; this keeps the file small), raising
/// the floor to the plain locks' tokens deleted. The key to go on from, or
/// `None` at the table's end.
pub(super) fn sweep(db: &mut Db, table: Swept, from: &str) -> Result<Option<String>> {
    let write = immediate(db)?;
    let now = now_ms();
    let (tx, sql) = (&write.tx, write.sql);
    let statements = match table {
        Swept::Locks => &sql.sweep_locks,
        Swept::Holds => &sql.sweep_holds,
    };
    let last: Option<String> = tx
        .prepare_cached(&statements.end)?
        .query_row(params![from, SWEEP_BATCH], |row| row.get(0))?;
    let Some(last) = last else {
        return Ok(None);
    };
    let mut statement = tx.prepare_cached(&statements.delete)?;
    if table == Swept::Locks {
        let tokens = statement.query_map(params![from, last, now], |row| row.get::<_, i64>(0))?;
        let mut highest = None;
        for token in tokens {
            highest = highest.max(Some(token?));
        }
        if let Some(highest) = highest {
            tx.prepare_cached(&sql.floor_raise)?.execute([highest])?;
        }
    } else {
        statement.execute(params![from, last, now])?;
    }
    drop(statement);
    write.commit()?;
    Ok(Some(last))
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

/// The ears that wait for `key`'s releases (read on `connection`, or in a
/// transaction on it).
pub(super) fn ears_of(
    connection: &rusqlite::Connection, sql: &Sql, hold: HoldKind, key: &str,
) -> Result<Vec<String>> {
    let mut statement = connection.prepare_cached(&sql.ears_of)?;
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
