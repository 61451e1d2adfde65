//! The kinds of hold on keys that more than one may hold at once.
//!
//! A semaphore admits up to `limit` permits, each with its own owner and
//! expiry. A read-write key admits any number of readers while no writer
//! holds it, or one writer alone; a writer that has to wait marks the key
//! so that new readers wait too (the mark lapses at the writer's TTL, so a
//! writer that dies while waiting holds nobody back for longer).

use super::StoreError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A semaphore permit; the caller's own limit decides whether it is admitted.
    Permit {
        limit: u64,
    },
    Read,
    Write,
}

impl Mode {
    /// Semaphores and read-write locks live apart: which of the two.
    pub fn is_semaphore(self) -> bool {
        matches!(self, Mode::Permit { .. })
    }

    pub fn unsupported(self) -> StoreError {
        let what = if self.is_semaphore() {
            "semaphores"
        } else {
            "read-write locks"
        };
        StoreError::Type(format!("this store does not support {what}"))
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
