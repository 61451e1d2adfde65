//! Every operation, written once and as data: which statement (`sql`), its
//! parameters, the key whose connection it goes on, and one reader of the
//! answer. The transports (`transport`) send a [`Request`] and hand the
//! reader an [`Answer`], the same shape whichever carried it, so no
//! operation knows how it travels.
//!
//! A plain lock is a row of the table (key, owner, expiry on the server's
//! clock), one statement per operation. Semaphores and read-write locks are
//! rows of `<table>_holds`: kind `s` (a permit), `r` (a reader), `w` (the
//! writer) or `m` (a waiting writer's mark), key, owner and `expires_at`;
//! each of their operations is one call of the `<table>_hold` function,
//! which takes a transaction advisory lock on the key first, so one key's
//! operations run one at a time and each sees what the last committed.

use super::answer::{line_done, line_left, line_release, line_token};
use super::answer::{one_changed, released, remaining, token, yes_or_no, Reader};
use super::sql::{Statement, SWEEP_BATCH};
use crate::owner;
use crate::store::line::{Asked, Release};
use crate::store::options::whole_ms;
use crate::store::{Acquired, HoldKind, HoldOp, StoreError, StoreResult, Wait};

/// A statement to send: what the transports carry.
pub(super) struct Request {
    /// The store operation it serves (`PostgresLockStore.<name>` in errors).
    pub name: &'static str,
    pub statement: Statement,
    pub params: Vec<Param>,
    /// The key whose connection it goes on, so one key's operations reach
    /// the server in the order they were made; None: any connection.
    pub route: Option<String>,
    /// Whether a good answer starts a sweep of expired rows, if one is due
    /// (acquires do, so rows of keys nobody takes again do not pile up).
    pub starts_sweep: bool,
}

/// A statement parameter: `text`, or `bigint`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    Text(String),
    Int(i64),
}

/// An operation: a statement to send and its reader, or a result known
/// without a round trip.
pub(super) enum Plan<T> {
    Send(Request, Reader<T>),
    Known(StoreResult<T>),
}

fn keyed(name: &'static str, statement: Statement, key: &str, params: Vec<Param>) -> Request {
    Request {
        name,
        statement,
        params,
        route: Some(key.to_owned()),
        starts_sweep: false,
    }
}

fn text(value: &str) -> Param {
    Param::Text(value.to_owned())
}

fn ttl_param(ttl_ms: f64) -> Param {
    // `whole_ms` is at most 2^53 - 1, which fits.
    Param::Int(i64::try_from(whole_ms(ttl_ms)).unwrap_or(i64::MAX))
}

/// PostgreSQL `text` holds no NUL character: such a key or owner is refused
/// before it is sent, with a reason, instead of as an encoding error.
fn unstorable(name: &str, key: &str, owner: &str) -> Option<StoreError> {
    (!storable(&[key, owner])).then(|| {
        StoreError::Type(format!(
            "PostgresLockStore.{name}: PostgreSQL text cannot hold a NUL character (\\u0000), and this key or owner has one"
        ))
    })
}

/// Whether PostgreSQL text can hold all of `texts`. A key it cannot hold
/// is in no row: reads answer "free", release and extend `false`.
fn storable(texts: &[&str]) -> bool {
    texts.iter().all(|t| !t.contains('\0'))
}

// A plain lock's operations.

/// Take `key` for `owner` (or find it already theirs: an acquire sent again
/// after its reply was lost); fenced when taken. Where the database has the
/// line (`line`: this process's id), it respects the line, and waits in it
/// as `wait` says (`line_sql`).
pub(super) fn acquire_lock(
    key: &str, owner: &str, ttl_ms: f64, line: Option<&str>, wait: Wait,
) -> Plan<Acquired> {
    if let Some(refused) = unstorable("acquire", key, owner) {
        return Plan::Known(Err(refused));
    }
    let (statement, params, read): (Statement, Vec<Param>, Reader<Acquired>) = match line {
        Some(me) => {
            // An attempt that does not wait asks as nobody in line: it takes
            // the lock only if it is free and nobody's turn.
            let (me, code, asked) = match wait {
                Wait::Now => ("", 0, None),
                Wait::InLine(asked) => (me, 1, Some(asked)),
                Wait::InLineWithMore(asked) => (me, 2, Some(asked)),
            };
            let params = line_params(key, owner, ttl_param(ttl_ms), me, code, asked);
            (Statement::LineAcquire, params, line_token)
        }
        None => {
            let params = vec![text(key), text(owner), ttl_param(ttl_ms)];
            (Statement::Acquire, params, token)
        }
    };
    let mut request = keyed("acquire", statement, key, params);
    request.starts_sweep = true;
    Plan::Send(request, read)
}

/// Give back `owner`'s lock; where the database has the line, it goes on
/// to the first in line.
pub(super) fn release_lock(key: &str, owner: &str, line: Option<&str>) -> Plan<Release> {
    if !storable(&[key, owner]) {
        return Plan::Known(Ok(Release::NotHeld));
    }
    match line {
        Some(me) => {
            let params = line_params(key, owner, Param::Int(0), me, 0, None);
            Plan::Send(
                keyed("release", Statement::LineRelease, key, params),
                line_release,
            )
        }
        None => {
            let params = vec![text(key), text(owner)];
            Plan::Send(keyed("release", Statement::Release, key, params), released)
        }
    }
}

/// Claim the lock handed to this process (`me`) for `owner`, for its TTL;
/// with `more` of it waiting (asked for then), keep a place at the back.
pub(super) fn claim_lock(
    key: &str, owner: &str, ttl_ms: f64, me: &str, more: Option<Asked>,
) -> Plan<bool> {
    if !storable(&[key, owner]) {
        return Plan::Known(Ok(false));
    }
    let code = if more.is_some() { 2 } else { 1 };
    let params = line_params(key, owner, ttl_param(ttl_ms), me, code, more);
    Plan::Send(keyed("extend", Statement::Claim, key, params), line_done)
}

/// This process (`me`) leaves `key`'s line.
pub(super) fn leave_line(key: &str, me: &str) -> Plan<()> {
    if !storable(&[key]) {
        return Plan::Known(Ok(()));
    }
    let params = line_params(key, "", Param::Int(0), me, 0, None);
    Plan::Send(keyed("leaveLine", Statement::Leave, key, params), line_left)
}

/// The seven parameters of every statement of the line (`line_sql`); a
/// spare owner token with `code` 2; when a request that may take a place
/// asked for it (0 for the others).
fn line_params(
    key: &str, owner: &str, ttl: Param, me: &str, code: i64, asked: Option<Asked>,
) -> Vec<Param> {
    let spare = if code == 2 { owner::mint() } else { "".into() };
    // `Asked` is at most 2^53 - 1, which fits.
    let asked = asked.map_or(0, |asked| i64::try_from(asked.ms()).unwrap_or(i64::MAX));
    vec![
        text(key),
        text(owner),
        ttl,
        text(me),
        Param::Int(code),
        text(spare.as_str()),
        Param::Int(asked),
    ]
}

pub(super) fn extend_lock(key: &str, owner: &str, ttl_ms: f64) -> Plan<bool> {
    if !storable(&[key, owner]) {
        return Plan::Known(Ok(false));
    }
    let params = vec![text(key), text(owner), ttl_param(ttl_ms)];
    Plan::Send(keyed("extend", Statement::Extend, key, params), one_changed)
}

/// Whether `owner` holds the lock `key`.
pub(super) fn lock_held_by(key: &str, owner: &str) -> Plan<bool> {
    if !storable(&[key, owner]) {
        return Plan::Known(Ok(false));
    }
    let params = vec![text(key), text(owner)];
    Plan::Send(keyed("isExpired", Statement::Holds, key, params), yes_or_no)
}

/// Milliseconds until the lock `key` expires, whoever holds it.
pub(super) fn lock_remaining(key: &str) -> Plan<Option<f64>> {
    if !storable(&[key]) {
        return Plan::Known(Ok(None));
    }
    let params = vec![text(key)];
    Plan::Send(
        keyed("remainingTime", Statement::RemainingTime, key, params),
        remaining,
    )
}

/// A round trip on any connection: the cheapest prepared statement (is
/// the empty key locked?), whose answer is not read.
pub(super) fn ping() -> Plan<()> {
    let request = Request {
        name: "ping",
        statement: Statement::IsLocked,
        params: vec![text("")],
        route: None,
        starts_sweep: false,
    };
    Plan::Send(request, line_left)
}

/// Whether anyone holds the lock `key`.
pub(super) fn is_locked(key: &str) -> Plan<bool> {
    if !storable(&[key]) {
        return Plan::Known(Ok(false));
    }
    let params = vec![text(key)];
    Plan::Send(
        keyed("isLocked", Statement::IsLocked, key, params),
        yes_or_no,
    )
}

// A semaphore's or read-write key's operations.

/// `op` on `key` for `owner`: one call of the hold function, whose answer
/// (a bigint or NULL) `read` takes (one of the `hold_*` readers).
pub(super) fn hold<T>(
    op: HoldOp, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64, read: Reader<T>,
) -> Plan<T> {
    if let Some(refused) = unstorable(op.method(), key, owner) {
        return Plan::Known(Err(refused));
    }
    let (mode_name, limit) = hold.name_and_limit();
    let params = vec![
        text(op.name()),
        text(mode_name),
        text(key),
        text(owner),
        ttl_param(ttl_ms),
        Param::Int(i64::try_from(limit).unwrap_or(i64::MAX)),
    ];
    Plan::Send(keyed(op.method(), Statement::Hold, key, params), read)
}

// Sweeping expired rows.

/// One batch of a sweep: on no key's connection in particular (with the
/// line's lapsed places, where the database has the line).
pub(super) fn sweep(line: bool) -> Request {
    Request {
        name: "sweep",
        statement: if line {
            Statement::SweepWithLine
        } else {
            Statement::Sweep
        },
        params: vec![Param::Int(SWEEP_BATCH)],
        route: None,
        starts_sweep: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::postgres::answer::{hold_count, hold_done, hold_token};

    #[test]
    fn a_sweep_deletes_one_batch_on_any_connection() {
        assert_eq!(sweep(true).statement, Statement::SweepWithLine);
        let request = sweep(false);
        assert_eq!(request.statement, Statement::Sweep);
        assert_eq!(request.params, vec![Param::Int(SWEEP_BATCH)]);
        assert_eq!(request.route, None);
    }

    fn sent<T>(plan: Plan<T>) -> Request {
        match plan {
            Plan::Send(request, _) => request,
            Plan::Known(_) => panic!("answered without a round trip"),
        }
    }

    fn known<T>(plan: Plan<T>) -> StoreResult<T> {
        match plan {
            Plan::Known(result) => result,
            Plan::Send(request, _) => panic!("sent {:?}", request.statement),
        }
    }

    #[test]
    fn each_operation_goes_on_its_keys_connection() {
        // A TTL is whole milliseconds, rounded up.
        let acquire = sent(acquire_lock("k", "me", 1_000.4, None, Wait::Now));
        assert_eq!(acquire.statement, Statement::Acquire);
        assert_eq!(
            acquire.params,
            vec![
                Param::Text("k".into()),
                Param::Text("me".into()),
                Param::Int(1_001)
            ]
        );
        assert_eq!(acquire.route.as_deref(), Some("k"));
        assert!(acquire.starts_sweep);
        for request in [
            sent(release_lock("k", "me", None)),
            sent(extend_lock("k", "me", 5.0)),
            sent(lock_held_by("k", "me")),
            sent(lock_remaining("k")),
            sent(is_locked("k")),
            sent(hold(
                HoldOp::Count,
                HoldKind::Read,
                "k",
                "",
                1.0,
                hold_count,
            )),
        ] {
            assert_eq!(request.route.as_deref(), Some("k"), "{}", request.name);
            assert!(!request.starts_sweep, "{}", request.name);
        }
        let permit = sent(hold(
            HoldOp::Acquire,
            HoldKind::Permit { limit: 3 },
            "k",
            "me",
            10.0,
            hold_token,
        ));
        assert_eq!(permit.statement, Statement::Hold);
        assert_eq!(permit.params.len(), 6);
        assert_eq!(permit.params[5], Param::Int(3));
    }

    #[test]
    fn a_nul_character_is_refused_where_it_would_be_stored_and_free_elsewhere() {
        let nul = "a\0b";
        assert!(matches!(
            known(acquire_lock(nul, "me", 1.0, None, Wait::Now)),
            Err(StoreError::Type(_))
        ));
        assert!(matches!(
            known(hold(
                HoldOp::Release,
                HoldKind::Read,
                "k",
                nul,
                1.0,
                hold_done
            )),
            Err(StoreError::Type(_))
        ));
        assert!(matches!(
            known(release_lock(nul, "me", Some("p"))),
            Ok(Release::NotHeld)
        ));
        assert!(matches!(known(extend_lock("k", nul, 1.0)), Ok(false)));
        assert!(matches!(known(lock_held_by(nul, "me")), Ok(false)));
        assert!(matches!(known(lock_remaining(nul)), Ok(None)));
        assert!(matches!(known(is_locked(nul)), Ok(false)));
    }
}
