//! The line a plain lock's waiters wait in (`store::line`), on the file:
//! one place per process (named by its ear), each step one transaction.
//! SQLite lets one connection of any process write at a time, so a step
//! reads and writes the lock's row and the line's places as one: no marks,
//! no second lock, nothing a release and a waiter taking its place can miss
//! of each other. A lock handed over is told to its process after the
//! commit ([`HandOver`]), by datagram to its ear, or, handed to this very
//! process, reported here.

use rusqlite::{params, OptionalExtension};

use super::clock::{now_ms, now_us};
use super::open::Db;
use super::ops::{ears_of, expiry, immediate, lock_row, noted, take_lock, written_row, Write};
use crate::store::line::{told, CLAIM_MS, LEASE_MS};
use crate::store::{Acquired, HoldKind};
use crate::text::SmallStr;

type Result<T> = rusqlite::Result<T>;

/// This process in the line: its name (its ear's address), when it asked
/// (`store::line::Asked`, in ms), and, with more of its waiters behind the
/// one asking, the owner token of the place it keeps at the back for them.
pub(super) struct Place<'a> {
    pub me: &'a str,
    pub asked: u64,
    pub more: Option<SmallStr>,
}

/// A lock handed to a process's place, to tell it once committed.
#[derive(Debug)]
pub(super) struct HandOver {
    /// The process (its ear's address).
    pub to: String,
    /// What it is told (`store::line::told`).
    pub told: String,
}

const CLAIM: i64 = CLAIM_MS as i64;
const LEASE: i64 = LEASE_MS as i64;

/// A plain lock's acquire: taken if it is free and nobody else's turn (or
/// claimed, if it was handed to this process), else, for a waiter
/// (`place`), its process's place taken or kept. A lock free with someone
/// else first in line goes to them.
pub(super) fn acquire(
    db: &mut Db, key: &str, who: &str, ttl_ms: f64, place: Option<Place<'_>>,
) -> Result<(Acquired, Option<HandOver>)> {
    // Free, nobody in line, and no more of this process waiting: one
    // statement. (Anything else, or a lock handed to this process's place,
    // is the transaction below.)
    if place.as_ref().is_none_or(|p| p.more.is_none()) {
        let now = now_ms();
        let params = params![key, who, expiry(now, ttl_ms), now];
        let taken: Option<i64> =
            written_row(db, &db.sql.lock_take_alone, params, |row| row.get(0))?;
        if let Some(token) = taken {
            // Taken, and committed: what follows is upkeep, whose failure
            // must not make a lock held an error (nobody would hold it
            // then, nor give it back). A place this process kept (handed a
            // lock that lapsed since) goes; left, a lock handed to it is
            // given back by this process. A note not written is written
            // with the next write.
            if let Some(place) = &place {
                let _ = out_of_line(db, key, place.me);
            }
            let _ = noted(db, now);
            return Ok((Acquired::Fenced(u64::try_from(token).unwrap_or(0)), None));
        }
    }
    let mut write = immediate(db)?;
    let now = now_ms();
    if let Some(place) = &place {
        if let Some((owner, token)) = handed_here(&write, key, place.me)? {
            if extend(&write, key, &owner, expiry(now, ttl_ms), now)? {
                keep_more(&write, key, place, now)?;
                write.commit()?;
                let token = u64::try_from(token).unwrap_or(0);
                return Ok((
                    Acquired::Handed {
                        owner: SmallStr::from(owner.as_str()),
                        token,
                    },
                    None,
                ));
            }
        }
    }
    let me = place.as_ref().map(|p| p.me);
    let first = first_in_line(&write, key, now)?;
    let my_turn = first
        .as_ref()
        .is_none_or(|(process, ..)| Some(process.as_str()) == me);
    let mut hand_over = None;
    if my_turn {
        if let Some(token) = take_lock(&mut write, key, who, expiry(now, ttl_ms), now)? {
            if let (Some(place), Some(_)) = (&place, &first) {
                out(&write, key, place.me)?;
            }
            if let Some(place) = &place {
                keep_more(&write, key, place, now)?;
            }
            write.commit()?;
            return Ok((Acquired::Fenced(u64::try_from(token).unwrap_or(0)), None));
        }
    } else {
        hand_over = hand_on(&mut write, key, now)?;
    }
    let Some(place) = place else {
        write.commit()?;
        return Ok((Acquired::Refused, hand_over));
    };
    lapse(&write, key, now)?;
    join(&write, key, place.me, who, place.asked, now)?;
    write.commit()?;
    Ok((Acquired::Refused, hand_over))
}

/// A release queued (run() ended on it, nobody waits for its answer).
pub(super) struct Queued {
    pub key: String,
    pub owner: String,
}

/// A plain lock's acquire that may take its one-statement path: `me` is
/// this process's name in the line where it waits.
pub(super) struct Take<'a> {
    pub key: &'a str,
    pub who: &'a str,
    pub ttl_ms: f64,
    pub me: Option<&'a str>,
}

/// `queued` releases and plain locks' acquires (`takes`) written in one
/// transaction (a loop that gives a lock back and takes one again, or the
/// loops of one turn, commit once), each as its one-statement path: a
/// release only where nobody waits in line or listens, an acquire only of a
/// lock free with nobody in line. Answers the releases left for the full
/// path (after this commit: nothing of theirs was written) and each take's
/// token, if it took the lock; one refused goes the usual way.
pub(super) fn released_then_taken<'q>(
    db: &mut Db, queued: &'q [Queued], takes: &[Take<'_>],
) -> Result<(Vec<&'q Queued>, Vec<Option<u64>>)> {
    let mut write = immediate(db)?;
    let now = now_ms();
    let mut left = Vec::new();
    for release in queued {
        let alone: Option<i64> = write
            .tx
            .prepare_cached(&write.sql.lock_release_alone)?
            .query_row(params![release.key, release.owner, now], |row| row.get(0))
            .optional()?;
        if alone.is_none() {
            left.push(release);
        }
    }
    let mut tokens = Vec::with_capacity(takes.len());
    for take in takes {
        let taken: Option<i64> = write
            .tx
            .prepare_cached(&write.sql.lock_take_alone)?
            .query_row(
                params![take.key, take.who, expiry(now, take.ttl_ms), now],
                |row| row.get(0),
            )
            .optional()?;
        if let (Some(_), Some(me)) = (taken, take.me) {
            // A place this process kept (handed a lock that lapsed since) goes.
            out(&write, take.key, me)?;
        }
        tokens.push(taken.map(|token| u64::try_from(token).unwrap_or(0)));
    }
    if tokens.iter().any(Option::is_some) {
        write.noted(now)?;
    }
    write.commit()?;
    Ok((left, tokens))
}

/// A plain lock given back by `who` (`me`: this process, if it has a name
/// in the line): whether it was still held, and the hand-over to the first
/// in line, or, with nobody in line, the ears that wait for its release.
pub(super) fn release(
    db: &mut Db, key: &str, who: &str, me: Option<&str>,
) -> Result<(bool, Released)> {
    // Nobody in line or listening: one statement. A waiter that takes its
    // place after it finds the lock free.
    let params = params![key, who, now_ms()];
    let alone: Option<i64> = written_row(db, &db.sql.lock_release_alone, params, |row| row.get(0))?;
    if let Some(freed) = alone {
        return Ok((freed == -1, Released::Alone));
    }
    let mut write = immediate(db)?;
    let now = now_ms();
    let freed: Option<i64> = write
        .tx
        .prepare_cached(&write.sql.lock_release)?
        .query_row(params![key, who, now], |row| row.get(0))
        .optional()?;
    let Some(freed) = freed else {
        return Ok((false, Released::Nobody));
    };
    if let Some(me) = me {
        // A lock handed to this process, given back unclaimed: its place goes.
        write
            .tx
            .prepare_cached(&write.sql.line_give_back)?
            .execute(params![key, me, who])?;
    }
    let released = match hand_on(&mut write, key, now)? {
        Some(hand_over) => Released::HandedOn(hand_over),
        None => Released::Ears(ears_of(&write.tx, write.sql, HoldKind::Lock, key)?),
    };
    write.commit()?;
    Ok((freed == -1, released))
}

/// Whom a release is told to.
pub(super) enum Released {
    /// Nobody (it released nothing).
    Nobody,
    /// Nobody: nobody waited in line or listened.
    Alone,
    /// The process the lock was handed to.
    HandedOn(HandOver),
    /// The ears waiting for the key (nobody in line).
    Ears(Vec<String>),
}

/// A lock handed to this process's place (`me`), claimed by `who` for
/// `ttl_ms`; with `more` (this process's place for the waiters behind), it
/// keeps a place at the back.
pub(super) fn claim(
    db: &mut Db, key: &str, who: &str, ttl_ms: f64, me: Option<&str>, more: Option<Place<'_>>,
) -> Result<bool> {
    let write = immediate(db)?;
    let now = now_ms();
    if let Some(me) = me {
        write
            .tx
            .prepare_cached(&write.sql.line_give_back)?
            .execute(params![key, me, who])?;
    }
    if !extend(&write, key, who, expiry(now, ttl_ms), now)? {
        write.commit()?;
        return Ok(false);
    }
    if let Some(place) = &more {
        keep_more(&write, key, place, now)?;
    }
    write.commit()?;
    Ok(true)
}

/// Every waiter of this process (`me`) gave up: its place goes, unless a
/// lock was handed to it and is still its own (the message telling it may
/// yet reach a waiter of it that came since). A lock free goes on.
pub(super) fn leave(db: &mut Db, key: &str, me: &str) -> Result<Option<HandOver>> {
    let mut write = immediate(db)?;
    let now = now_ms();
    write
        .tx
        .prepare_cached(&write.sql.line_leave)?
        .execute(params![key, me, now])?;
    lapse(&write, key, now)?;
    let hand_over = if held(&write, key, now)? {
        None
    } else {
        hand_on(&mut write, key, now)?
    };
    write.commit()?;
    Ok(hand_over)
}

/// Places that lapsed go.
fn lapse(write: &Write<'_>, key: &str, now: i64) -> Result<()> {
    write
        .tx
        .prepare_cached(&write.sql.line_lapse)?
        .execute(params![key, now])?;
    Ok(())
}

/// A lock handed to this process's place: the owner it was handed for and
/// its token. The place goes (a claim takes the lock; a place kept for
/// more waiters is a new one).
fn handed_here(write: &Write<'_>, key: &str, me: &str) -> Result<Option<(String, i64)>> {
    write
        .tx
        .prepare_cached(&write.sql.line_mine_handed)?
        .query_row(params![key, me], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()
}

/// The first place nobody was handed the lock for: its process, the owner
/// it left and when it asked.
fn first_in_line(write: &Write<'_>, key: &str, now: i64) -> Result<Option<(String, String, i64)>> {
    write
        .tx
        .prepare_cached(&write.sql.line_first)?
        .query_row(params![key, now], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()
}

fn held(write: &Write<'_>, key: &str, now: i64) -> Result<bool> {
    Ok(lock_row(write, key)?.is_some_and(|(expires, ..)| expires > now))
}

/// `who`'s live lock pushed out to `expires_at`.
fn extend(write: &Write<'_>, key: &str, who: &str, expires_at: i64, now: i64) -> Result<bool> {
    let changed = write
        .tx
        .prepare_cached(&write.sql.lock_extend)?
        .execute(params![key, who, now, expires_at])?;
    Ok(changed > 0)
}

/// Take (or keep) `me`'s place at the back of the line, for `owner`.
fn join(write: &Write<'_>, key: &str, me: &str, owner: &str, asked: u64, now: i64) -> Result<()> {
    write
        .tx
        .prepare_cached(&write.sql.line_join)?
        .execute(params![
            key,
            me,
            now_us(),
            now.saturating_add(LEASE),
            owner,
            i64::try_from(asked).unwrap_or(i64::MAX)
        ])?;
    Ok(())
}

/// With more of this process waiting, it keeps a place at the back for them.
fn keep_more(write: &Write<'_>, key: &str, place: &Place<'_>, now: i64) -> Result<()> {
    match &place.more {
        Some(spare) => join(write, key, place.me, spare, place.asked, now),
        None => Ok(()),
    }
}

/// `me`'s place goes, outside a transaction.
fn out_of_line(db: &Db, key: &str, me: &str) -> Result<()> {
    db.connection
        .prepare_cached(&db.sql.line_out)?
        .execute(params![key, me])?;
    Ok(())
}

fn out(write: &Write<'_>, key: &str, me: &str) -> Result<()> {
    write
        .tx
        .prepare_cached(&write.sql.line_out)?
        .execute(params![key, me])?;
    Ok(())
}

/// The lock, free, goes to the first in line, held for it [`CLAIM_MS`]
/// until claimed, with a fencing token.
fn hand_on(write: &mut Write<'_>, key: &str, now: i64) -> Result<Option<HandOver>> {
    let Some((process, owner, asked)) = first_in_line(write, key, now)? else {
        return Ok(None);
    };
    let claim_by = now.saturating_add(CLAIM);
    let Some(token) = take_lock(write, key, &owner, claim_by, now)? else {
        return Ok(None);
    };
    write
        .tx
        .prepare_cached(&write.sql.line_handed_to)?
        .execute(params![key, process, token, claim_by])?;
    let token = u64::try_from(token).unwrap_or(0);
    let asked = u64::try_from(asked).unwrap_or(0);
    Ok(Some(HandOver {
        to: process,
        told: told(token, asked, &owner, key),
    }))
}
