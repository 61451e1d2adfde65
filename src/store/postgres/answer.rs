//! What an operation reads of the server's answer, the same from either
//! transport, and one reader per kind of answer: each says what it got
//! instead when the answer is not one it takes.

use super::sql::SWEEP_BATCH;
use crate::store::line::{read_release, Release};
use crate::store::Acquired;

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

/// Whether a sweep batch deleted a full batch (so another is worth sending).
pub(super) fn batch_full(answer: Answer) -> Result<bool, &'static str> {
    Ok(answer.changed == SWEEP_BATCH as u64)
}

// The readers.

/// The first column of the first row as a number, if a row came back.
pub(super) fn first_number(answer: &Answer) -> Result<Option<i64>, &'static str> {
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
pub(super) fn first_bool(answer: &Answer) -> Result<Option<bool>, &'static str> {
    match answer.first.as_ref().map(Option::as_deref) {
        None => Ok(None),
        Some(Some("t")) => Ok(Some(true)),
        Some(Some("f")) => Ok(Some(false)),
        Some(_) => Err("something other than true or false"),
    }
}

/// An acquire's fencing token (no row: the key is someone else's).
pub(super) fn token(answer: Answer) -> Result<Acquired, &'static str> {
    let token = first_number(&answer)?;
    Ok(Acquired::from_token(
        token.map(|t| u64::try_from(t).unwrap_or(0)),
    ))
}

/// The line's acquire: no row or NULL (refused), a fencing token, or
/// `h <token> <owner>`: a lock handed to this process, claimed.
pub(super) fn line_token(answer: Answer) -> Result<Acquired, &'static str> {
    match answer.first {
        None | Some(None) => Ok(Acquired::Refused),
        Some(Some(text)) => Acquired::from_line(&text),
    }
}

/// The line's release: `1` or `0` (whether it held the lock), then
/// ` <token> <asked> <owner>` when the lock went on to this process.
/// (Sent as the plain release, `answer::released`'s answer.)
pub(super) fn line_release(answer: Answer) -> Result<Release, &'static str> {
    let text = match answer.first {
        Some(Some(text)) if text != "t" && text != "f" => text,
        _ => return released(answer),
    };
    read_release(&text)
}

/// The line's claim: `1` done, `0` not. (Sent as the plain extend: the
/// one row it changed.)
pub(super) fn line_done(answer: Answer) -> Result<bool, &'static str> {
    match answer.first {
        None => Ok(answer.changed == 1),
        Some(Some(text)) if text == "1" => Ok(true),
        Some(Some(text)) if text == "0" => Ok(false),
        _ => Err("something other than 1 or 0"),
    }
}

/// The line's leave: only that it answered (sent as a plain read, whatever that says).
pub(super) fn line_left(_answer: Answer) -> Result<(), &'static str> {
    Ok(())
}

/// A release: true when it deleted the owner's live row.
pub(super) fn released(answer: Answer) -> Result<Release, &'static str> {
    Ok(match first_bool(&answer)? {
        Some(true) => Release::Released,
        _ => Release::NotHeld,
    })
}

/// An extend: true when it moved the owner's live row's expiry.
pub(super) fn one_changed(answer: Answer) -> Result<bool, &'static str> {
    Ok(answer.changed == 1)
}

/// A yes-or-no question, which always answers one row.
pub(super) fn yes_or_no(answer: Answer) -> Result<bool, &'static str> {
    first_bool(&answer)?.ok_or("no row")
}

/// Milliseconds left (no row: nobody holds the key).
pub(super) fn remaining(answer: Answer) -> Result<Option<f64>, &'static str> {
    Ok(first_number(&answer)?.map(|ms| ms as f64))
}

/// The hold function's answer: always one row, a number or NULL.
pub(super) fn hold_answer(answer: Answer) -> Result<Option<i64>, &'static str> {
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
        assert_eq!(released(row("t")), Ok(Release::Released));
        assert_eq!(released(row("f")), Ok(Release::NotHeld));
        assert_eq!(released(no_row()), Ok(Release::NotHeld));
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
    fn the_line_answers_tokens_hand_overs_and_releases() {
        assert_eq!(line_token(row("42")), Ok(Acquired::Fenced(42)));
        assert_eq!(line_token(null()), Ok(Acquired::Refused));
        assert_eq!(line_token(no_row()), Ok(Acquired::Refused));
        assert!(
            line_token(row("h 7")).is_err(),
            "the line's text, read by store::line"
        );
        assert_eq!(line_release(row("1")), Ok(Release::Released));
        assert!(
            line_release(row("0 9 o")).is_err(),
            "the line's text, read by store::line"
        );
        assert_eq!(line_done(row("1")), Ok(true));
        assert_eq!(line_done(row("0")), Ok(false));
        assert!(line_done(null()).is_err());
        // Sent as the plain statements, on a database without the line.
        assert_eq!(line_release(row("t")), Ok(Release::Released));
        assert_eq!(line_release(no_row()), Ok(Release::NotHeld));
        assert_eq!(line_done(changed(1)), Ok(true));
        assert_eq!(line_done(changed(0)), Ok(false));
    }

    #[test]
    fn a_sweep_goes_on_after_a_full_batch() {
        assert_eq!(batch_full(changed(SWEEP_BATCH as u64)), Ok(true));
        assert_eq!(batch_full(changed(3)), Ok(false));
    }
}
