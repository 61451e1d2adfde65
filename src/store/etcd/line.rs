//! The line a plain lock's waiters wait in on etcd (`store::line`), and
//! what this store knows of its own places in it.
//!
//! A lock's line is a range of keys (`layout.rs`). Its entries queue in the
//! order etcd created them: the one with the lowest create revision holds
//! the lock, and each one behind it becomes the holder as the entries ahead
//! go (released, or lapsed with their lease or their TTL). Nobody rewrites
//! anybody else's entry, and a new entry always goes to the back, so a
//! place found first by a linearizable read stays first until it goes: a
//! release is one delete, and the next in line is the holder at once.
//!
//! A process waiting keeps one place per lock: an entry on a short lease,
//! renewed by each attempt of its waiters (a put keeps the create revision,
//! so the place keeps its turn), whose value is the owner token its latest
//! attempt asked for and when it asked ([`place_value`]). It learns that its
//! place came first from the watch on the line (the last entry ahead of it
//! heard gone, or the one just ahead sending it to look: `heard.rs`), from
//! an attempt, or from its own release: then it holds the lock for that owner, told to its
//! waiters as a hand-over, for [`CLAIM_MS`] until claimed (this store lets
//! an unclaimed place go then, as it lets a TTL end). A claim writes the
//! entry as a hold ([`held_value`]), as a lock taken at once is written.
//!
//! etcd counts leases in whole seconds (two at the least), too coarse for
//! a place, which lapses [`LEASE_MS`] after its process last asked. So the
//! waiters behind it see to that: a place a waiter has seen unchanged (the
//! same write) for `LEASE_MS` on its own clock was not asked for since,
//! and it deletes it, only if it is still that write. Its process asked
//! before that write; if the lock came to the place meanwhile, that
//! process holds it until [`CLAIM_MS`] after it asked at most, unless it
//! claimed it (a write): before the waiter behind acts.
//!
//! A lock handed over is fenced with the revision at which its process saw
//! its place first: the entry ahead was gone by then (so that revision is
//! past any token given before), and the place itself is still there (so
//! any token given after is past it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

pub use super::entries::{held_value, place_value, read_entry, Entries, Read};
use super::gone::Gone;
use super::layout::place_entry;
use super::messages::KeyValue;
use crate::store::line::{told, CLAIM_MS, LEASE_MS};

/// This store's place in a line, while its waiters wait.
#[derive(Clone, Debug)]
pub struct Place {
    pub stored: Vec<u8>,
    /// Its create revision: its turn.
    pub created: i64,
    /// What the latest read showed of it (`None`: not known).
    pub(super) read: Option<Read>,
}

/// A place of this store's the lock went to.
#[derive(Clone, Debug)]
pub struct Handed {
    pub stored: Vec<u8>,
    /// Its create revision: it is this hold while it is that entry.
    pub created: i64,
    pub owner: String,
    pub asked: u64,
    pub token: u64,
    pub claimed: bool,
    /// Past this it may be gone (its claim window, or its TTL once claimed).
    until: Instant,
}

impl Handed {
    /// The hand-over as its process is told it.
    pub fn told(&self, key: &str) -> String {
        told(self.token, self.asked, &self.owner, key)
    }
}

#[derive(Default)]
pub(super) struct KeyLine {
    pub(super) place: Option<Place>,
    /// The key this store's next place goes to, until an answer says it
    /// is there: attempts sent meanwhile all put that one.
    pub(super) reserved: Option<Vec<u8>>,
    pub(super) handed: Vec<Handed>,
    /// Other processes' places as this store last read them: the write
    /// each was at, and since when (on this clock) it has been seen so.
    pub(super) seen: HashMap<Vec<u8>, (i64, Instant)>,
    /// Entries of the line lately known gone (`gone.rs`).
    pub(super) gone: Gone,
}

/// What this store knows of its places, by line.
pub struct Line {
    /// This store's id in its places' names.
    me: String,
    next: AtomicU64,
    lines: Mutex<HashMap<Vec<u8>, KeyLine>>,
}

impl Line {
    pub fn new(me: String) -> Self {
        Line {
            me,
            next: AtomicU64::new(0),
            lines: Mutex::default(),
        }
    }

    /// The key of this store's place in `line`: the one it has, or the one
    /// it will have.
    pub fn place_key(&self, line: &[u8]) -> Vec<u8> {
        let new = || place_entry(line, &self.me, self.next.fetch_add(1, Ordering::Relaxed));
        self.with(line, |state| match (&state.place, &state.reserved) {
            (Some(place), _) => place.stored.clone(),
            (None, Some(reserved)) => reserved.clone(),
            (None, None) => state.reserved.insert(new()).clone(),
        })
        .unwrap_or_else(new)
    }

    /// How the keys of this store's places in `line` start.
    fn mine(&self, line: &[u8]) -> Vec<u8> {
        [line, b"p", self.me.as_bytes(), b"."].concat()
    }

    /// Whether `stored`, an entry of `line`, is a place of this store's.
    pub fn is_mine(&self, line: &[u8], stored: &[u8]) -> bool {
        stored.starts_with(&self.mine(line))
    }

    /// Whether `stored` is a place of this store's the store keeps no track
    /// of (a late attempt's, made again after it went).
    fn stray(&self, state: &KeyLine, line: &[u8], stored: &[u8]) -> bool {
        stored.starts_with(&self.mine(line))
            && state.place.as_ref().is_none_or(|p| p.stored != stored)
            && state.reserved.as_deref() != Some(stored)
            && !state.handed.iter().any(|h| h.stored == stored)
    }

    pub(super) fn with<T>(&self, line: &[u8], f: impl FnOnce(&mut KeyLine) -> T) -> Option<T> {
        let mut lines = self.lines.lock().ok()?;
        let now = Instant::now();
        let state = lines.entry(line.to_vec()).or_default();
        state.handed.retain(|h| h.until > now);
        state.gone.prune(now);
        let answer = f(state);
        if state.place.is_none()
            && state.reserved.is_none()
            && state.handed.is_empty()
            && state.gone.is_empty()
        {
            lines.remove(line);
        }
        Some(answer)
    }

    /// This store's place in `line`, if it has one.
    pub fn place(&self, line: &[u8]) -> Option<Place> {
        self.with(line, |state| state.place.clone()).flatten()
    }

    /// A place of this store's in `line` handed the lock for `owner`.
    pub fn handed(&self, line: &[u8], owner: &str) -> Option<Handed> {
        self.with(line, |state| {
            state.handed.iter().find(|h| h.owner == owner).cloned()
        })
        .flatten()
    }

    /// A place of this store's in `line` handed the lock and not yet claimed.
    pub fn unclaimed(&self, line: &[u8]) -> Option<Handed> {
        self.with(line, |state| {
            state.handed.iter().find(|h| !h.claimed).cloned()
        })
        .flatten()
    }

    /// The place `stored` (whose turn is `created`) is in line, behind what
    /// `entries` shows (if they show it).
    pub fn placed(&self, line: &[u8], stored: &[u8], created: i64, entries: Option<&Entries>) {
        let read = entries.and_then(|entries| Read::of(entries, stored));
        self.with(line, |state| {
            if state.reserved.as_deref() == Some(stored) {
                state.reserved = None;
            }
            if state.handed.iter().any(|h| h.stored == stored) || state.gone.went(stored, created) {
                // Come first already (told by a read that answered sooner),
                // or gone already (this answer is older).
                return;
            }
            if let Some(place) = state.place.as_mut().filter(|p| p.stored == stored) {
                // Known already: a later read's word on what is ahead stands
                // (and an older answer's, of the entry before it was made
                // again, none).
                if created < place.created
                    || (created == place.created && Read::at(&read) < Read::at(&place.read))
                {
                    return;
                }
            }
            let read = read.and_then(|read| state.gone.crossed(read));
            state.place = Some(Place {
                stored: stored.to_vec(),
                created,
                read,
            })
        });
    }

    /// The key `stored` reserved for a place is not needed (a place known
    /// there stays).
    pub fn unreserved(&self, line: &[u8], stored: &[u8]) {
        self.with(line, |state| {
            if state.reserved.as_deref() == Some(stored) {
                state.reserved = None;
            }
        });
    }

    /// This store's place `stored` is in line no more as of revision `at`
    /// (left, or taken as a lock).
    pub fn unplaced(&self, line: &[u8], stored: &[u8], at: i64) {
        self.with(line, |state| {
            state.gone.went_by(stored, at);
            if state.place.as_ref().is_some_and(|p| p.stored == stored) {
                state.place = None;
            }
            if state.reserved.as_deref() == Some(stored) {
                state.reserved = None;
            }
        });
    }

    /// What `entries` say of this store's place: first (the hand-over it
    /// makes, and whether this is the first time it is seen), or behind
    /// another (noted), or gone. A place of this store's it keeps no track
    /// of that came first is handed over as its place would be.
    pub fn look(&self, line: &[u8], entries: &Entries) -> Option<(Handed, bool)> {
        // A place made by a request whose answer is still on its way is
        // this store's place already.
        let reserved = self.with(line, |state| state.reserved.clone()).flatten();
        if let Some(kv) = reserved.and_then(|r| entries.iter().find(|kv| kv.key == r)) {
            self.placed(line, &kv.key, kv.create_revision, Some(entries));
        }
        let first = entries.first()?;
        let stray_first = self
            .with(line, |state| self.stray(state, line, &first.key))
            .unwrap_or(false);
        if stray_first {
            return self.first(line, first, entries.revision);
        }
        let place = self.place(line)?;
        match entries.ahead_of(&place.stored) {
            // (A read from before the place was made does not show it.)
            None if entries.revision < place.created => None,
            None => {
                self.unplaced(line, &place.stored, entries.revision);
                None
            }
            Some(Some(_)) => {
                let read = Read::of(entries, &place.stored);
                self.with(line, |state| {
                    let newer = Read::at(&read);
                    let read = read.and_then(|read| state.gone.crossed(read));
                    if let Some(p) = state
                        .place
                        .as_mut()
                        .filter(|p| p.stored == place.stored && newer >= Read::at(&p.read))
                    {
                        p.read = read;
                    }
                });
                None
            }
            Some(None) => {
                let kv = entries.first()?;
                self.first(line, kv, entries.revision)
            }
        }
    }

    /// The entry `kv`, a place of this store's, is first in line as of
    /// `revision`: the hand-over, and whether it is new (then its claim
    /// window starts now). Once known, a hand-over keeps its token. An
    /// entry written as a hold is none: claimed here, its record gone (its
    /// answer came after the record's time), it is never handed over again.
    pub fn first(&self, line: &[u8], kv: &KeyValue, revision: i64) -> Option<(Handed, bool)> {
        self.with(line, |state| first_in(state, kv, revision))
            .flatten()
    }

    /// The lock handed for `owner` in `line` was claimed (or extended)
    /// until `until`, or later if a claim of it sent before asked for
    /// later (two waiters of this process may claim one hand-over: neither
    /// shortens it). Answers how long it is held now.
    pub fn claimed(&self, line: &[u8], owner: &str, until: Instant) -> Instant {
        self.with(line, |state| {
            let mut held = until;
            for handed in state.handed.iter_mut().filter(|h| h.owner == owner) {
                if handed.claimed {
                    held = held.max(handed.until);
                }
                handed.claimed = true;
                handed.until = held;
            }
            held
        })
        .unwrap_or(until)
    }

    /// Other processes' places ahead of this store's in `entries` that were
    /// not asked for in [`LEASE_MS`] (see the top): lapsed, to be deleted
    /// (each only if still at the write seen); and this store's own places
    /// behind the first that it keeps no track of.
    pub fn lapsed(&self, line: &[u8], entries: &Entries) -> Vec<KeyValue> {
        let now = Instant::now();
        let lease = Duration::from_millis(LEASE_MS);
        let mine = self.mine(line);
        self.with(line, |state| {
            let mut lapsed: Vec<KeyValue> = entries
                .iter()
                .skip(1)
                .filter(|kv| self.stray(state, line, &kv.key))
                .cloned()
                .collect();
            let Some(place) = &state.place else {
                state.seen.clear();
                return lapsed;
            };
            let ahead: Vec<&KeyValue> = entries
                .iter()
                .take_while(|kv| kv.key != place.stored)
                .filter(|kv| !kv.key.starts_with(&mine))
                .filter(|kv| matches!(read_entry(&kv.value), Some((Some(_), _))))
                .collect();
            let mut seen = HashMap::with_capacity(ahead.len());
            for kv in ahead {
                let since = match state.seen.get(&kv.key) {
                    Some((write, since)) if *write == kv.mod_revision => *since,
                    _ => now,
                };
                if now.duration_since(since) >= lease {
                    lapsed.push(kv.clone());
                }
                seen.insert(kv.key.clone(), (kv.mod_revision, since));
            }
            state.seen = seen;
            lapsed
        })
        .unwrap_or_default()
    }

    /// The lock handed for `owner` in `line` is this store's no more.
    pub fn gone(&self, line: &[u8], owner: &str) {
        self.with(line, |state| state.handed.retain(|h| h.owner != owner));
    }
}

/// The entry `kv`, a place of this store's, is first in line as of
/// `revision` ([`Line::first`]).
pub(super) fn first_in(
    state: &mut KeyLine, kv: &KeyValue, revision: i64,
) -> Option<(Handed, bool)> {
    if let Some(known) = state.handed.iter().find(|h| h.stored == kv.key) {
        return Some((known.clone(), false));
    }
    if state.gone.went(&kv.key, kv.create_revision) {
        return None;
    }
    let (asked, owner) = read_entry(&kv.value)?;
    let asked = asked?;
    if state.place.as_ref().is_some_and(|p| p.stored == kv.key) {
        state.place = None;
    }
    // Never a place again, whatever answer comes later, nor handed over
    // again once its record goes (it is a hold now, or given back).
    state.gone.went_by(&kv.key, kv.create_revision + 1);
    let fresh = Handed {
        stored: kv.key.clone(),
        created: kv.create_revision,
        owner: owner.to_owned(),
        asked,
        token: u64::try_from(revision).unwrap_or(0),
        claimed: false,
        until: Instant::now() + Duration::from_millis(CLAIM_MS),
    };
    state.handed.push(fresh.clone());
    Some((fresh, true))
}
