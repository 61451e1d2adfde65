//! How each operation reads its answer (`ops` pairs them with the
//! statements): counts, a first value, or what a step of the line's
//! procedure answered.

use super::wire::Answer;
use crate::store::line::{read_release, Release};
use crate::store::Acquired;

/// What an operation reads of its answer, or what it found unreadable.
pub(super) type Reader<T> = fn(Answer) -> Result<T, &'static str>;

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

/// A plain acquire: the token its INSERT set, or 0 when it was refused.
pub(super) fn token(answer: Answer) -> Result<Acquired, &'static str> {
    Ok(match answer.insert_id {
        0 => Acquired::Refused,
        token => Acquired::Fenced(token),
    })
}

/// What a plain release did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Freed {
    /// The owner did not hold it.
    NotHeld,
    Released,
    /// Released, and someone waits for it: the line hands it on.
    Marked,
}

/// A plain release: the row it freed, and its mark (`LAST_INSERT_ID`).
pub(super) fn freed(answer: Answer) -> Result<Freed, &'static str> {
    Ok(match (answer.affected, answer.insert_id) {
        (0, _) => Freed::NotHeld,
        (_, 0) => Freed::Released,
        _ => Freed::Marked,
    })
}

/// An acquire through the line: NULL (refused), a token, or `h <token>
/// <owner>` (a lock handed to this process, claimed).
pub(super) fn line_token(answer: Answer) -> Result<Acquired, &'static str> {
    let Some(text) = first(&answer) else {
        return Ok(Acquired::Refused);
    };
    let text = std::str::from_utf8(text).map_err(|_| "an answer that is not text")?;
    Acquired::from_line(text)
}

/// A hand-on after a release: `1` (or `0`), then ` <token> <asked>
/// <owner>` when the lock went on to this process.
pub(super) fn line_release(answer: Answer) -> Result<Release, &'static str> {
    let text = first(&answer).ok_or("no answer")?;
    let text = std::str::from_utf8(text).map_err(|_| "an answer that is not text")?;
    read_release(text)
}

/// A claim: `1` done, `0` not.
pub(super) fn line_done(answer: Answer) -> Result<bool, &'static str> {
    match first(&answer) {
        Some(b"1") => Ok(true),
        Some(b"0") => Ok(false),
        _ => Err("something other than 1 or 0"),
    }
}

pub(super) fn one_matched(answer: Answer) -> Result<bool, &'static str> {
    Ok(answer.affected > 0)
}

pub(super) fn is_yes(answer: Answer) -> Result<bool, &'static str> {
    Ok(number(&answer)?.is_some_and(|n| n != 0))
}

pub(super) fn left_ms(answer: Answer) -> Result<Option<f64>, &'static str> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(text: &str) -> Answer {
        Answer {
            rows: vec![vec![Some(text.as_bytes().to_vec())]],
            ..Answer::default()
        }
    }

    #[test]
    fn an_acquire_reads_its_insert_or_the_line_s_answer() {
        let taken = Answer {
            insert_id: 42,
            ..Answer::default()
        };
        assert_eq!(token(taken), Ok(Acquired::Fenced(42)));
        assert_eq!(token(Answer::default()), Ok(Acquired::Refused));
        assert_eq!(line_token(Answer::default()), Ok(Acquired::Refused));
        assert_eq!(line_token(row("7")), Ok(Acquired::Fenced(7)));
        assert!(
            line_token(row("h 7")).is_err(),
            "the line's text, read by store::line"
        );
    }

    #[test]
    fn a_release_reads_its_update_or_the_line_s_answer() {
        let counts = |affected, insert_id| Answer {
            affected,
            insert_id,
            ..Answer::default()
        };
        assert_eq!(freed(counts(0, 0)), Ok(Freed::NotHeld));
        assert_eq!(freed(counts(1, 0)), Ok(Freed::Released));
        assert_eq!(freed(counts(1, 1)), Ok(Freed::Marked));
        assert_eq!(line_release(row("1")), Ok(Release::Released));
        assert!(
            line_release(row("0 9 o")).is_err(),
            "the line's text, read by store::line"
        );
        assert!(line_release(Answer::default()).is_err());
        assert_eq!(line_done(row("1")), Ok(true));
        assert_eq!(line_done(row("0")), Ok(false));
        assert!(line_done(Answer::default()).is_err());
    }
}
