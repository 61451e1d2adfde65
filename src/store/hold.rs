//! The kinds of hold a store keeps, and what an acquire answers.
//!
//! A plain lock has one owner at a time. A semaphore admits up to `limit`
//! permits, each with its own owner and expiry. A read-write key admits any
//! number of readers while no writer holds it, or one writer alone; a writer
//! that has to wait marks the key so that new readers wait too (the mark
//! lapses at the writer's TTL, so a writer that dies while waiting holds
//! nobody back for longer). Each kind's data lives apart: a plain lock, a
//! semaphore and a read-write key of the same name never see each other.

use super::line::{read_handed, Asked};
use crate::text::SmallStr;

/// Which kind of hold an operation is about. Every store operation names one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldKind {
    /// A plain lock: one owner.
    Lock,
    /// A semaphore permit; the caller's own limit decides whether it is admitted.
    Permit {
        limit: u64,
    },
    Read,
    Write,
}

impl HoldKind {
    /// Semaphores and read-write keys keep their data apart: whether this
    /// is a semaphore's.
    pub fn is_permit(self) -> bool {
        matches!(self, HoldKind::Permit { .. })
    }

    /// Its name in the server stores' scripts and functions, and its limit
    /// (0 for all but a permit).
    pub fn name_and_limit(self) -> (&'static str, u64) {
        match self {
            HoldKind::Lock => ("lock", 0),
            HoldKind::Permit { limit } => ("permit", limit),
            HoldKind::Read => ("read", 0),
            HoldKind::Write => ("write", 0),
        }
    }
}

/// Whether a plain lock's acquire that is refused waits in the store's
/// line, on a store that keeps one ([`super::Capabilities::waits_in_line`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// An attempt that does not wait (`acquireImmediately`, or the store's
    /// own `acquire(key, owner, ttl)`): it takes the lock only if it is free
    /// and nobody's turn, never waits in line, and is never handed a lock
    /// meant for this process's waiters.
    Now,
    /// A waiter's attempt, sent when it says: refused, it takes (or keeps)
    /// this process's place.
    InLine(Asked),
    /// The same, with more of this process waiting behind it: once it has
    /// the lock, this process keeps a place at the back for them.
    InLineWithMore(Asked),
}

/// What an acquire answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// The hold does not admit this owner now.
    Refused,
    /// Taken. A fencing token, if the store makes them, stays with the hold:
    /// [`super::LockStore::fencing_token`] answers it (a store in this
    /// thread, which so hands JS a bare owner token, the cheaper value).
    Taken,
    /// Taken, with the fencing token the store gave it in the same step.
    Fenced(u64),
    /// Handed to this process by a release (for the owner token it left in
    /// line, not the one asked with), and claimed by this acquire.
    Handed { owner: SmallStr, token: u64 },
}

impl Acquired {
    /// A server's reply to a fenced acquire: the token when taken.
    pub fn from_token(token: Option<u64>) -> Self {
        token.map_or(Acquired::Refused, Acquired::Fenced)
    }

    /// A store's line answering an acquire, as text: a fencing token, or
    /// `h <token> <owner>` (a lock handed to this process, claimed).
    pub fn from_line(text: &str) -> Result<Self, &'static str> {
        match text.strip_prefix("h ") {
            Some(handed) => {
                let (token, owner) = read_handed(handed)?;
                Ok(Acquired::Handed { owner, token })
            }
            None => text
                .parse()
                .map(Acquired::Fenced)
                .map_err(|_| "something other than a fencing token"),
        }
    }

    /// Taken by the owner the acquire was asked for (a lock handed over
    /// is another owner's).
    pub fn is_taken(self) -> bool {
        matches!(self, Acquired::Taken | Acquired::Fenced(_))
    }
}

/// An operation on a semaphore's or read-write key's holds, as the server
/// stores name it in their script or function.
#[derive(Clone, Copy, Debug)]
pub enum HoldOp {
    Acquire,
    Release,
    Extend,
    /// Milliseconds left on one owner's hold.
    Left,
    /// Whether an acquire in a mode would be refused now.
    Waits,
    /// How many hold the key.
    Count,
    /// A waiting writer gave up.
    Withdraw,
}

impl HoldOp {
    /// Its name in the server's script or function.
    pub fn name(self) -> &'static str {
        match self {
            HoldOp::Acquire => "acquire",
            HoldOp::Release => "release",
            HoldOp::Extend => "extend",
            HoldOp::Left => "left",
            HoldOp::Waits => "waits",
            HoldOp::Count => "count",
            HoldOp::Withdraw => "withdraw",
        }
    }

    /// The JS method it serves, for error messages.
    pub fn method(self) -> &'static str {
        match self {
            HoldOp::Acquire | HoldOp::Withdraw => "acquire",
            HoldOp::Release => "release",
            HoldOp::Extend => "extend",
            HoldOp::Left => "getRemainingTime",
            HoldOp::Waits => "isLocked",
            HoldOp::Count => "holders",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_answers_an_acquire_as_text() {
        assert_eq!(Acquired::from_line("42"), Ok(Acquired::Fenced(42)));
        assert_eq!(
            Acquired::from_line("h 7 a-b"),
            Ok(Acquired::Handed {
                owner: SmallStr::from("a-b"),
                token: 7
            })
        );
        assert!(Acquired::from_line("h 7").is_err());
        assert!(Acquired::from_line("yes").is_err());
    }
}
