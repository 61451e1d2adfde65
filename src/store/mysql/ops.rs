//! Every operation, written once and as data: its statement (`sql`), the
//! key whose connection it goes on, and one reader of the answer.
//!
//! A plain lock is a row of the table (key hash, key, owner, expiry on the
//! server's clock, last token), one statement per operation where nobody
//! waits; an acquire refused goes on to the line's procedure (`line_sql`),
//! as does a release that finds someone waiting, and claiming a lock handed
//! over or leaving the line is one CALL of it. Semaphores and read-write locks are
//! rows of `<table>_holds`, each operation one CALL of the hold procedure
//! (`holds_sql`).

use super::answer::{
    freed, hold_nothing, is_yes, left_ms, line_done, line_release, line_token, one_matched, token,
    Freed, Reader,
};
use super::hashes::hash;
use super::sql::Statement;
use super::wire::prepared::{Execute, Param};
use crate::owner;
use crate::store::line::{Asked, Release};
use crate::store::options::whole_ms;
use crate::store::{Acquired, HoldKind, HoldOp, Wait};

/// Prepared statements to run.
pub(super) struct Request {
    /// The store operation it serves (`MySqlLockStore.<name>` in errors).
    pub name: &'static str,
    /// The operation's statement, then the line's step that finishes it.
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

/// A step of the line (`op`) for `key`. `me`: this process's id ("" for an
/// attempt that does not wait); `code`: how it waits (`Wait` as 0, 1, 2),
/// with a spare owner token for 2; `asked`: when a request that may take a
/// place asked.
struct Step<'a> {
    op: &'static str,
    key: &'a str,
    owner: &'a str,
    ttl_ms: f64,
    me: &'a str,
    code: i64,
    asked: Option<Asked>,
}

impl Step<'_> {
    fn run(self) -> Execute {
        let spare = if self.code == 2 {
            owner::mint()
        } else {
            "".into()
        };
        // `Asked` is at most 2^53 - 1, which fits.
        let asked = self
            .asked
            .map_or(0, |asked| i64::try_from(asked.ms()).unwrap_or(i64::MAX));
        run(
            Statement::Line,
            vec![
                Param::Text(self.op.to_owned()),
                id(self.key),
                bytes(self.key),
                bytes(self.owner),
                ttl(self.ttl_ms),
                bytes(self.me),
                Param::Int(self.code),
                bytes(spare.as_str()),
                Param::Int(asked),
            ],
        )
    }
}

/// Take `key` for `owner` (or find it already theirs) if nobody waits for
/// it; fenced when taken. Refused, an attempt goes on to the line
/// ([`acquire_in_line`]).
pub(super) fn acquire_lock(key: &str, owner: &str, ttl_ms: f64) -> (Request, Reader<Acquired>) {
    let take = run(
        Statement::Acquire,
        vec![id(key), bytes(key), bytes(owner), ttl(ttl_ms)],
    );
    let mut request = keyed("acquire", key, vec![take]);
    request.starts_sweep = true;
    (request, token)
}

/// An acquire the plain one refused, through the line's procedure: it takes
/// the lock if it is free and nobody else's turn (or claims one handed to
/// this process, `me`), and waits in line as `wait` says.
pub(super) fn acquire_in_line(
    key: &str, owner: &str, ttl_ms: f64, me: &str, wait: Wait,
) -> (Request, Reader<Acquired>) {
    // An attempt that does not wait asks as nobody in line: it takes the
    // lock only if it is free and nobody's turn.
    let (me, code, asked) = match wait {
        Wait::Now => ("", 0, None),
        Wait::InLine(asked) => (me, 1, Some(asked)),
        Wait::InLineWithMore(asked) => (me, 2, Some(asked)),
    };
    let step = Step {
        op: "acquire",
        key,
        owner,
        ttl_ms,
        me,
        code,
        asked,
    };
    (keyed("acquire", key, vec![step.run()]), line_token)
}

/// Give back `owner`'s lock: freed, and whether someone waits for it (then
/// [`hand_on`]).
pub(super) fn release_lock(key: &str, owner: &str) -> (Request, Reader<Freed>) {
    let give_back = run(Statement::Release, vec![id(key), bytes(owner)]);
    (keyed("release", key, vec![give_back]), freed)
}

/// `owner`'s lock, freed while someone waits, goes on to the first in line.
pub(super) fn hand_on(key: &str, owner: &str, me: &str) -> (Request, Reader<Release>) {
    let step = Step {
        op: "release",
        key,
        owner,
        ttl_ms: 1.0,
        me,
        code: 0,
        asked: None,
    };
    (keyed("release", key, vec![step.run()]), line_release)
}

pub(super) fn extend_lock(key: &str, owner: &str, ttl_ms: f64) -> (Request, Reader<bool>) {
    let extend = run(Statement::Extend, vec![ttl(ttl_ms), id(key), bytes(owner)]);
    (keyed("extend", key, vec![extend]), one_matched)
}

/// Claim the lock handed to this process (`me`) for `owner`, for its TTL;
/// with `more` of it waiting (asked for then), keep a place at the back.
pub(super) fn claim_lock(
    key: &str, owner: &str, ttl_ms: f64, me: &str, more: Option<Asked>,
) -> (Request, Reader<bool>) {
    let code = if more.is_some() { 2 } else { 1 };
    let step = Step {
        op: "claim",
        key,
        owner,
        ttl_ms,
        me,
        code,
        asked: more,
    };
    (keyed("extend", key, vec![step.run()]), line_done)
}

/// This process (`me`) leaves `key`'s line.
pub(super) fn leave_line(key: &str, me: &str) -> (Request, Reader<()>) {
    let step = Step {
        op: "leave",
        key,
        owner: "",
        ttl_ms: 1.0,
        me,
        code: 0,
        asked: None,
    };
    (keyed("leaveLine", key, vec![step.run()]), hold_nothing)
}

pub(super) fn lock_held_by(key: &str, owner: &str) -> (Request, Reader<bool>) {
    let runs = vec![run(Statement::HeldBy, vec![id(key), bytes(owner)])];
    (keyed("isExpired", key, runs), is_yes)
}

pub(super) fn lock_remaining(key: &str) -> (Request, Reader<Option<f64>>) {
    let runs = vec![run(Statement::Remaining, vec![id(key)])];
    (keyed("getRemainingTime", key, runs), left_ms)
}

/// A round trip: the cheapest prepared statement (is the empty key
/// locked?), whose answer is not read.
pub(super) fn ping() -> (Request, Reader<()>) {
    let runs = vec![run(Statement::IsLocked, vec![id("")])];
    (keyed("ping", "", runs), hold_nothing)
}

pub(super) fn is_locked(key: &str) -> (Request, Reader<bool>) {
    let runs = vec![run(Statement::IsLocked, vec![id(key)])];
    (keyed("isLocked", key, runs), is_yes)
}

/// One operation on a semaphore or read-write key: a CALL of the hold
/// procedure, read by `read`.
pub(super) fn hold<T>(
    op: HoldOp, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64, read: Reader<T>,
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
