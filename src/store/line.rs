//! The line a plain lock's waiters wait in on a server, one place per
//! process, as the stores that keep one share it: how long a place lasts,
//! how long a lock handed over waits to be claimed, and what a hand-over
//! tells the process it went to.
//!
//! A waiter refused by the server takes its process's place at the back of
//! the key's line (or keeps it), leaving there the owner token a hand-over
//! will make the lock. A release hands the lock straight to the first
//! process in line whose place has not lapsed and tells that process alone,
//! so nobody else wakes and nobody races; within the process the first of
//! its waiters takes it. A place lapses [`LEASE_MS`] after its process last
//! asked, so a process that died while waiting holds nobody up for longer;
//! a lock handed over is held [`CLAIM_MS`] until its new holder claims it
//! for its TTL, so one handed to a process that died meanwhile is free again
//! that soon, not a whole TTL later.

#[cfg(test)]
pub mod contract;

use super::follow::{Follower, Released};
use crate::text::SmallStr;

/// How long a place in line lasts after its process last asked.
pub const LEASE_MS: u64 = 600;

/// How often a waiting process asks again, at the longest, so its place
/// does not lapse while it lives.
pub const RENEW_MS: u64 = 200;

/// How long a lock handed over is held before its new holder claims it.
pub const CLAIM_MS: u64 = 500;

// A place outlives a renewal that comes late; a process that died delays
// the others by less than a second, whether it was in line or handed the lock.
const _: () = assert!(RENEW_MS * 2 < LEASE_MS);
const _: () = assert!(LEASE_MS < 1_000 && CLAIM_MS < 1_000);

/// A hand-over as the process it went to is told: the fencing token, the
/// owner token the lock now has, and the key (as the lock names it).
pub fn told(token: u64, owner: &str, key: &str) -> String {
    format!("{token} {owner} {key}")
}

/// The parts of a hand-over's text written by [`told`] (after the store's
/// own framing), if it is one.
pub fn parse(text: &str) -> Option<(u64, &str, &str)> {
    let (token, rest) = text.split_once(' ')?;
    let (owner, key) = rest.split_once(' ')?;
    Some((token.parse().ok()?, owner, key))
}

/// What a plain lock's release did, where its waiters wait in line.
#[derive(Debug, PartialEq, Eq)]
pub enum Release {
    /// The owner did not hold it.
    NotHeld,
    Released,
    /// Released (`true`: while it was still held), and handed to this
    /// process's first in line: for this owner, with this token.
    HandedHere(bool, SmallStr, u64),
}

impl Release {
    /// Whether the owner held it; a lock handed to this process in the
    /// answer goes to its waiters (through `follower`) as one told by
    /// message would.
    pub fn tell<W: Send + 'static>(self, key: &str, follower: &Follower<W>) -> bool {
        match self {
            Release::NotHeld => false,
            Release::Released => true,
            Release::HandedHere(held, owner, token) => {
                follower.report(Released::Handed, told(token, &owner, key));
                held
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hand_over_reads_back_with_any_key() {
        let text = told(7, "a-b", "in voice 42");
        assert_eq!(parse(&text), Some((7, "a-b", "in voice 42")));
        assert_eq!(parse("x a k"), None);
        assert_eq!(parse("7 a"), None);
    }
}
