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

use super::sql::Statement;
use crate::store::options::whole_ms;
use crate::store::{Acquired, Hold, HoldOp, StoreError, StoreResult};

/// Expired rows deleted per sweep statement.
pub(super) const SWEEP_BATCH: i64 = 500;
/// Sweep statements per sweep, each sent when the one before was full.
pub(super) const SWEEP_BATCHES: usize = 20;

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

/// What an operation reads of the server's answer, from either transport:
/// the first column of the first row in PostgreSQL's text form (`None`: no
/// row; `Some(None)`: NULL), and how many rows the statement changed (or,
/// for a SELECT, returned).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    pub first: Option<Option<String>>,
    pub changed: u64,
}

/// Turns an answer into the operation's result, or says what it was instead
/// (`<server> answered <that>`).
pub(super) type Reader<T> = fn(Answer) -> Result<T, &'static str>;

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
/// after its reply was lost); fenced when taken.
pub(super) fn acquire_lock(key: &str, owner: &str, ttl_ms: f64) -> Plan<Acquired> {
    if let Some(refused) = unstorable("acquire", key, owner) {
        return Plan::Known(Err(refused));
    }
    let params = vec![text(key), text(owner), ttl_param(ttl_ms)];
    let mut request = keyed("acquire", Statement::Acquire, key, params);
    request.starts_sweep = true;
    Plan::Send(request, token)
}

pub(super) fn release_lock(key: &str, owner: &str) -> Plan<bool> {
    if !storable(&[key, owner]) {
        return Plan::Known(Ok(false));
    }
    let params = vec![text(key), text(owner)];
    Plan::Send(keyed("release", Statement::Release, key, params), released)
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
    op: HoldOp,
    hold: Hold,
    key: &str,
    owner: &str,
    ttl_ms: f64,
    read: Reader<T>,
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

/// One batch of a sweep: on no key's connection in particular.
pub(super) fn sweep() -> Request {
    Request {
        name: "sweep",
        statement: Statement::Sweep,
        params: vec![Param::Int(SWEEP_BATCH)],
        route: None,
        starts_sweep: false,
    }
}

/// Whether a sweep batch deleted a full batch (so another is worth sending).
pub(super) fn batch_full(answer: Answer) -> Result<bool, &'static str> {
    Ok(answer.changed == SWEEP_BATCH as u64)
}

// The readers.

/// The first column of the first row as a number, if a row came back.
fn first_number(answer: &Answer) -> Result<Option<i64>, &'static str> {
    match &answer.first {
        None => Ok(None),
        Some(Some(text)) => text
            .parse()
            .map(Some)
            .map_err(|_| "something other than a number"),
        Some(None) => Err("NULL where a number belongs"),
    }
}

/// The first column of the first row as a boolean (`None`: no row).
fn first_bool(answer: &Answer) -> Result<Option<bool>, &'static str> {
    match answer.first.as_ref().map(Option::as_deref) {
        None => Ok(None),
        Some(Some("t")) => Ok(Some(true)),
        Some(Some("f")) => Ok(Some(false)),
        Some(_) => Err("something other than true or false"),
    }
}

/// An acquire's fencing token (no row: the key is someone else's).
fn token(answer: Answer) -> Result<Acquired, &'static str> {
    let token = first_number(&answer)?;
    Ok(Acquired::from_token(
        token.map(|t| u64::try_from(t).unwrap_or(0)),
    ))
}

/// A release: true when it deleted the owner's live row.
fn released(answer: Answer) -> Result<bool, &'static str> {
    Ok(first_bool(&answer)? == Some(true))
}

/// An extend: true when it moved the owner's live row's expiry.
fn one_changed(answer: Answer) -> Result<bool, &'static str> {
    Ok(answer.changed == 1)
}

/// A yes-or-no question, which always answers one row.
fn yes_or_no(answer: Answer) -> Result<bool, &'static str> {
    first_bool(&answer)?.ok_or("no row")
}

/// Milliseconds left (no row: nobody holds the key).
fn remaining(answer: Answer) -> Result<Option<f64>, &'static str> {
    Ok(first_number(&answer)?.map(|ms| ms as f64))
}

/// The hold function's answer: always one row, a number or NULL.
fn hold_answer(answer: Answer) -> Result<Option<i64>, &'static str> {
    match answer.first {
        None => Err("no row"),
        Some(None) => Ok(None),
        Some(Some(text)) => text
            .parse()
            .map(Some)
            .map_err(|_| "something other than a number"),
    }
}

/// An acquire's fencing token (NULL: not taken).
pub(super) fn hold_token(answer: Answer) -> Result<Acquired, &'static str> {
    let token = hold_answer(answer)?;
    Ok(Acquired::from_token(
        token.map(|t| u64::try_from(t).unwrap_or(0)),
    ))
}

/// Whether it was done (a positive number).
pub(super) fn hold_done(answer: Answer) -> Result<bool, &'static str> {
    Ok(hold_answer(answer)?.unwrap_or(0) > 0)
}

/// Milliseconds left on the owner's hold (none: not held).
pub(super) fn hold_left(answer: Answer) -> Result<Option<f64>, &'static str> {
    Ok(hold_answer(answer)?
        .filter(|ms| *ms > 0)
        .map(|ms| ms as f64))
}

/// How many hold the key.
pub(super) fn hold_count(answer: Answer) -> Result<f64, &'static str> {
    Ok(hold_answer(answer)?.unwrap_or(0).max(0) as f64)
}

/// Only that it answered.
pub(super) fn hold_nothing(answer: Answer) -> Result<(), &'static str> {
    hold_answer(answer).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(text: &str) -> Answer {
        Answer {
            first: Some(Some(text.to_owned())),
            changed: 1,
        }
    }

    fn null() -> Answer {
        Answer {
            first: Some(None),
            changed: 1,
        }
    }

    fn no_row() -> Answer {
        Answer::default()
    }

    fn changed(n: u64) -> Answer {
        Answer {
            first: None,
            changed: n,
        }
    }

    #[test]
    fn an_acquire_reads_its_token_or_no_row() {
        assert_eq!(token(row("42")), Ok(Acquired::Fenced(42)));
        assert_eq!(token(no_row()), Ok(Acquired::Refused));
        assert_eq!(token(null()), Err("NULL where a number belongs"));
        assert_eq!(
            token(row("forty-two")),
            Err("something other than a number")
        );
    }

    #[test]
    fn a_release_is_true_only_for_a_true_row() {
        assert_eq!(released(row("t")), Ok(true));
        assert_eq!(released(row("f")), Ok(false));
        assert_eq!(released(no_row()), Ok(false));
        assert_eq!(released(null()), Err("something other than true or false"));
        assert_eq!(
            released(row("yes")),
            Err("something other than true or false")
        );
    }

    #[test]
    fn an_extend_is_true_when_it_changed_one_row() {
        assert_eq!(one_changed(changed(1)), Ok(true));
        assert_eq!(one_changed(changed(0)), Ok(false));
    }

    #[test]
    fn a_question_needs_its_row() {
        assert_eq!(yes_or_no(row("t")), Ok(true));
        assert_eq!(yes_or_no(row("f")), Ok(false));
        assert_eq!(yes_or_no(no_row()), Err("no row"));
        assert_eq!(yes_or_no(null()), Err("something other than true or false"));
        assert_eq!(
            yes_or_no(row("1")),
            Err("something other than true or false")
        );
    }

    #[test]
    fn remaining_time_is_none_without_a_row() {
        assert_eq!(remaining(row("1500")), Ok(Some(1500.0)));
        assert_eq!(remaining(no_row()), Ok(None));
        assert_eq!(remaining(null()), Err("NULL where a number belongs"));
        assert_eq!(remaining(row("1.5")), Err("something other than a number"));
    }

    #[test]
    fn the_hold_function_answers_a_number_or_null_in_one_row() {
        assert_eq!(hold_token(row("7")), Ok(Acquired::Fenced(7)));
        assert_eq!(hold_token(null()), Ok(Acquired::Refused));
        assert_eq!(hold_done(row("1")), Ok(true));
        assert_eq!(hold_done(row("0")), Ok(false));
        assert_eq!(hold_done(null()), Ok(false));
        assert_eq!(hold_left(row("250")), Ok(Some(250.0)));
        assert_eq!(hold_left(row("0")), Ok(None));
        assert_eq!(hold_left(null()), Ok(None));
        assert_eq!(hold_count(row("3")), Ok(3.0));
        assert_eq!(hold_count(row("-1")), Ok(0.0));
        assert_eq!(hold_count(null()), Ok(0.0));
        assert_eq!(hold_nothing(null()), Ok(()));
        for read in [hold_done, |a| hold_left(a).map(|_| true)] {
            assert_eq!(read(no_row()), Err("no row"));
            assert_eq!(read(row("x")), Err("something other than a number"));
        }
        assert_eq!(hold_nothing(no_row()), Err("no row"));
    }

    #[test]
    fn a_sweep_goes_on_after_a_full_batch() {
        assert_eq!(batch_full(changed(SWEEP_BATCH as u64)), Ok(true));
        assert_eq!(batch_full(changed(3)), Ok(false));
        let request = sweep();
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
        let acquire = sent(acquire_lock("k", "me", 1_000.4));
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
            sent(release_lock("k", "me")),
            sent(extend_lock("k", "me", 5.0)),
            sent(lock_held_by("k", "me")),
            sent(lock_remaining("k")),
            sent(is_locked("k")),
            sent(hold(HoldOp::Count, Hold::Read, "k", "", 1.0, hold_count)),
        ] {
            assert_eq!(request.route.as_deref(), Some("k"), "{}", request.name);
            assert!(!request.starts_sweep, "{}", request.name);
        }
        let permit = sent(hold(
            HoldOp::Acquire,
            Hold::Permit { limit: 3 },
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
            known(acquire_lock(nul, "me", 1.0)),
            Err(StoreError::Type(_))
        ));
        assert!(matches!(
            known(hold(HoldOp::Release, Hold::Read, "k", nul, 1.0, hold_done)),
            Err(StoreError::Type(_))
        ));
        assert!(matches!(known(release_lock(nul, "me")), Ok(false)));
        assert!(matches!(known(extend_lock("k", nul, 1.0)), Ok(false)));
        assert!(matches!(known(lock_held_by(nul, "me")), Ok(false)));
        assert!(matches!(known(lock_remaining(nul)), Ok(None)));
        assert!(matches!(known(is_locked(nul)), Ok(false)));
    }
}
