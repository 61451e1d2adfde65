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
//!
//! A hand-over is told by message, which may arrive late: after the waiter
//! it was for gave up, its process left the line and another of its
//! waiters queued. So a place keeps when its process asked for it
//! ([`Asked`]) and a hand-over tells that back: the lock went to the place
//! no earlier, and, as nobody but that process can take back a lock handed
//! to it (leaving the line does not), it is that process's until at least
//! [`CLAIM_MS`] after that moment, however late the message comes.

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

/// When a process asked for its place in line: the moment the request that
/// took (or renewed) the place was sent, on the clock of the JS thread that
/// sent it (`performance.now()`, in whole ms rounded down, so never later
/// than the moment). The server keeps it with the place and tells it back
/// with a hand-over to the place, which it made no earlier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Asked(u64);

impl Asked {
    /// `ms`, as `performance.now()` read it (anything but a finite
    /// non-negative number is 0, the thread's start: never later than the
    /// moment).
    pub fn at(ms: f64) -> Self {
        if ms.is_finite() && ms > 0.0 {
            // Below 2^53 a float holds every whole number: the cast is exact.
            Asked(ms.min(9_007_199_254_740_991.0).floor() as u64)
        } else {
            Asked(0)
        }
    }

    pub fn ms(self) -> u64 {
        self.0
    }
}

/// A lock handed over from the line to a process's place.
#[derive(Debug, PartialEq, Eq)]
pub struct Handed {
    /// The fencing token it was handed with.
    pub token: u64,
    /// When the place it went to was asked for.
    pub asked: u64,
    /// The owner token the place left, which the lock now has.
    pub owner: SmallStr,
}

impl Handed {
    /// As the process it went to is told: the fencing token, when its place
    /// was asked for, the owner token and the key (as the lock names it).
    pub fn told(&self, key: &str) -> String {
        told(self.token, self.asked, &self.owner, key)
    }
}

/// A hand-over's text (see [`Handed::told`]), from its parts.
pub fn told(token: u64, asked: u64, owner: &str, key: &str) -> String {
    format!("{token} {asked} {owner} {key}")
}

/// The parts of a hand-over's text written by [`told`] (after the store's
/// own framing), if it is one: the token, when the place was asked for,
/// the owner and the key.
pub fn parse(text: &str) -> Option<(u64, u64, &str, &str)> {
    let (token, rest) = text.split_once(' ')?;
    let (asked, rest) = rest.split_once(' ')?;
    let (owner, key) = rest.split_once(' ')?;
    Some((token.parse().ok()?, asked.parse().ok()?, owner, key))
}

/// `<number> <owner>`, as a line's answers write a lock handed to this
/// process: its fencing token (or, in a release's answer, when its place
/// was asked for) and the owner it now has.
pub fn read_handed(text: &str) -> Result<(u64, SmallStr), &'static str> {
    let (number, owner) = text
        .split_once(' ')
        .ok_or("a hand-over without its owner")?;
    let number = number
        .parse()
        .map_err(|_| "a hand-over without its number")?;
    Ok((number, SmallStr::from(owner)))
}

/// A line's answer to a release, as text: `1` or `0` (whether it held the
/// lock), then ` <token> <asked> <owner>` when the lock went on to this
/// process.
pub fn read_release(text: &str) -> Result<Release, &'static str> {
    let (held, handed) = match text.split_once(' ') {
        Some((held, handed)) => (held, Some(handed)),
        None => (text, None),
    };
    let held = match held {
        "1" => true,
        "0" => false,
        _ => return Err("something other than a release's answer"),
    };
    Ok(match handed {
        Some(handed) => {
            let (token, asked_and_owner) = handed
                .split_once(' ')
                .ok_or("a hand-over without its owner")?;
            let token = token.parse().map_err(|_| "a hand-over without its token")?;
            let (asked, owner) = read_handed(asked_and_owner)?;
            Release::HandedHere(
                held,
                Handed {
                    token,
                    asked,
                    owner,
                },
            )
        }
        None if held => Release::Released,
        None => Release::NotHeld,
    })
}

/// What a plain lock's release did, where its waiters wait in line.
#[derive(Debug, PartialEq, Eq)]
pub enum Release {
    /// The owner did not hold it.
    NotHeld,
    Released,
    /// Released (`true`: while it was still held), and handed to this
    /// process's place.
    HandedHere(bool, Handed),
}

impl Release {
    /// Whether the owner held it; a lock handed to this process in the
    /// answer goes to its waiters (through `follower`) as one told by
    /// message would.
    pub fn tell<W: Send + 'static>(self, key: &str, follower: &Follower<W>) -> bool {
        match self {
            Release::NotHeld => false,
            Release::Released => true,
            Release::HandedHere(held, handed) => {
                follower.report(Released::Handed, handed.told(key));
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
        let text = told(7, 1234, "a-b", "in voice 42");
        assert_eq!(parse(&text), Some((7, 1234, "a-b", "in voice 42")));
        assert_eq!(parse("x 1 a k"), None);
        assert_eq!(parse("7 x a k"), None);
        assert_eq!(parse("7 1 a"), None);
    }

    #[test]
    fn a_line_answers_a_release_as_text() {
        assert_eq!(read_release("1"), Ok(Release::Released));
        assert_eq!(read_release("0"), Ok(Release::NotHeld));
        let handed = Handed {
            token: 9,
            asked: 1234,
            owner: SmallStr::from("o"),
        };
        let here = read_release("0 9 1234 o");
        assert_eq!(here, Ok(Release::HandedHere(false, handed)));
        assert!(read_release("0 9 o").is_err());
        assert!(read_release("yes").is_err());
    }

    #[test]
    fn asked_is_never_later_than_the_moment() {
        assert_eq!(Asked::at(1234.999).ms(), 1234);
        assert_eq!(Asked::at(0.5).ms(), 0);
        assert_eq!(Asked::at(-3.0).ms(), 0);
        assert_eq!(Asked::at(f64::NAN).ms(), 0);
        assert_eq!(Asked::at(f64::INFINITY).ms(), 0);
        assert_eq!(Asked::at(1e300).ms(), 9_007_199_254_740_991);
    }
}
