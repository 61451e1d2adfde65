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
