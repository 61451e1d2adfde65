//! The in-memory store: the default, per isolate.
//!
//! Expiry runs on the monotonic clock, so a wall-clock jump can neither free a
//! held lock early nor keep an expired one. Expired entries are dropped when
//! they are next looked at, and swept in bulk as the store is used (see
//! [`Sweep`]) so keys that are taken once and never touched again do not pile
//! up.

mod clock;
mod groups;

use std::collections::HashMap;

use crate::text::SmallStr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use self::clock::{expiry, ms_until};
use self::groups::{Groups, Held};
use super::{Acquired, Capabilities, HoldKind, LockStore, Op, Wait};

/// A sweep runs when something may have expired and the last sweep is at
/// least this old, or when the map has doubled since the last sweep.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);
const SWEEP_MIN_LEN: usize = 1024;

struct Entry {
    owner: SmallStr,
    expires_at: Instant,
    /// This acquisition's fencing token.
    token: u64,
}

impl Entry {
    fn is_live(&self, now: Instant) -> bool {
        self.expires_at > now
    }
}

/// When to scan the whole map for expired entries. Each sweep is O(n), and
/// the triggers keep that amortised: at most once per `SWEEP_INTERVAL` once
/// the earliest known expiry has passed, or when the map has doubled.
struct Sweep {
    /// No entry expires before this (a lower bound; extends may push entries later).
    earliest_expiry: Option<Instant>,
    last_run: Instant,
    grow_limit: usize,
}

struct Entries {
    map: HashMap<SmallStr, Entry>,
    sweep: Sweep,
    /// The last fencing token given. One counter for the whole store: it only
    /// grows, so tokens grow per key too, expired keys included, with no state
    /// kept for keys nobody holds.
    last_token: u64,
    /// Semaphores' and read-write keys' holds.
    groups: Groups,
}

impl Entries {
    fn live(&mut self, key: &str, now: Instant) -> Option<&mut Entry> {
        if self.map.get(key).is_some_and(|e| !e.is_live(now)) {
            self.map.remove(key);
        }
        self.map.get_mut(key)
    }

    fn note_expiry(&mut self, at: Instant) {
        let earliest = &mut self.sweep.earliest_expiry;
        if earliest.is_none_or(|e| at < e) {
            *earliest = Some(at);
        }
    }

    fn maybe_sweep(&mut self, now: Instant) {
        let due = self.sweep.earliest_expiry.is_some_and(|e| e <= now)
            && now.duration_since(self.sweep.last_run) >= SWEEP_INTERVAL;
        if due || self.map.len() + self.groups.len() >= self.sweep.grow_limit {
            self.sweep_now(now);
        }
    }

    fn sweep_now(&mut self, now: Instant) {
        self.map.retain(|_, e| e.is_live(now));
        if self.map.capacity() > 4 * self.map.len().max(SWEEP_MIN_LEN) {
            self.map.shrink_to_fit();
            return_freed_memory();
        }
        let locks = self.map.values().map(|e| e.expires_at).min();
        self.sweep.earliest_expiry = locks.into_iter().chain(self.groups.sweep(now)).min();
        self.sweep.last_run = now;
        self.sweep.grow_limit = (2 * (self.map.len() + self.groups.len())).max(SWEEP_MIN_LEN);
    }
}

/// Give the pages a shrunk map freed back to the system. glibc raises its
/// mmap threshold after large frees, so a big table that grew and shrank
/// lives in the heap, where freed pages stay resident until trimmed; a
/// million keys left to expire would otherwise keep their memory after the
/// sweep. Only after a shrink, which is rare.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn return_freed_memory() {
    extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: malloc_trim only releases free memory; it takes no pointers.
    unsafe {
        malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn return_freed_memory() {}

pub struct MemoryStore {
    entries: Mutex<Entries>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    pub fn new() -> Self {
        Self {
            entries: Mutex::new(Entries {
                map: HashMap::new(),
                sweep: Sweep {
                    earliest_expiry: None,
                    last_run: Instant::now(),
                    grow_limit: SWEEP_MIN_LEN,
                },
                last_token: 0,
                groups: Groups::default(),
            }),
        }
    }

    fn entries(&self) -> MutexGuard<'_, Entries> {
        // No code panics while holding this lock, so a poisoned mutex still
        // guards consistent data.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keys kept in memory (locks, semaphores, read-write keys), counting
    /// expired ones not yet swept.
    pub fn len(&self) -> usize {
        let entries = self.entries();
        entries.map.len() + entries.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn try_acquire(&self, key: &str, owner: &str, ttl_ms: f64) -> bool {
        let now = Instant::now();
        let mut entries = self.entries();
        entries.maybe_sweep(now);
        if entries.live(key, now).is_some() {
            return false;
        }
        let expires_at = expiry(now, ttl_ms);
        entries.last_token += 1;
        let token = entries.last_token;
        entries.map.insert(
            key.into(),
            Entry {
                owner: owner.into(),
                expires_at,
                token,
            },
        );
        entries.note_expiry(expires_at);
        true
    }

    pub fn try_release(&self, key: &str, owner: &str) -> bool {
        let now = Instant::now();
        let mut entries = self.entries();
        match entries.live(key, now) {
            Some(entry) if &*entry.owner == owner => {
                entries.map.remove(key);
                true
            }
            _ => false,
        }
    }

    pub fn try_extend(&self, key: &str, owner: &str, ttl_ms: f64) -> bool {
        let now = Instant::now();
        let mut entries = self.entries();
        match entries.live(key, now) {
            Some(entry) if &*entry.owner == owner => {
                entry.expires_at = expiry(now, ttl_ms);
                true
            }
            _ => false,
        }
    }

    pub fn locked(&self, key: &str) -> bool {
        self.entries().live(key, Instant::now()).is_some()
    }

    pub fn held_by(&self, key: &str, owner: &str) -> bool {
        self.entries()
            .live(key, Instant::now())
            .is_some_and(|e| &*e.owner == owner)
    }

    /// The fencing token of `owner`'s live hold on `key`.
    pub fn token_of(&self, key: &str, owner: &str) -> Option<u64> {
        self.entries()
            .live(key, Instant::now())
            .filter(|e| &*e.owner == owner)
            .map(|e| e.token)
    }

    pub fn time_left(&self, key: &str) -> Option<f64> {
        let now = Instant::now();
        self.entries()
            .live(key, now)
            .map(|e| ms_until(e.expires_at, now))
    }

    pub fn try_acquire_in(
        &self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64,
    ) -> Option<u64> {
        let now = Instant::now();
        let mut entries = self.entries();
        entries.maybe_sweep(now);
        let expires_at = expiry(now, ttl_ms);
        let token = entries.last_token + 1;
        let held = Held {
            owner: owner.into(),
            expires_at,
            token,
        };
        if !entries.groups.admit(hold, key, held, now) {
            return None;
        }
        entries.last_token = token;
        entries.note_expiry(expires_at);
        Some(token)
    }

    pub fn try_release_in(&self, hold: HoldKind, key: &str, owner: &str) -> bool {
        let now = Instant::now();
        self.entries().groups.release(hold, key, owner, now)
    }

    pub fn try_extend_in(&self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64) -> bool {
        let now = Instant::now();
        let mut entries = self.entries();
        let expires_at = expiry(now, ttl_ms);
        let Some(held) = entries.groups.held(hold, key, owner, now) else {
            return false;
        };
        held.expires_at = expires_at;
        entries.note_expiry(expires_at);
        true
    }

    pub fn held_in(&self, hold: HoldKind, key: &str, owner: &str) -> bool {
        let now = Instant::now();
        self.entries().groups.held(hold, key, owner, now).is_some()
    }

    pub fn remaining_in_ms(&self, hold: HoldKind, key: &str, owner: &str) -> Option<f64> {
        let now = Instant::now();
        let mut entries = self.entries();
        let held = entries.groups.held(hold, key, owner, now)?;
        Some(ms_until(held.expires_at, now))
    }

    pub fn waits(&self, hold: HoldKind, key: &str) -> bool {
        self.entries().groups.would_wait(hold, key, Instant::now())
    }

    pub fn count(&self, hold: HoldKind, key: &str) -> usize {
        self.entries().groups.count(hold, key, Instant::now())
    }

    pub fn stop_holding_back(&self, hold: HoldKind, key: &str) {
        let now = Instant::now();
        self.entries().groups.stop_holding_back(hold, key, now);
    }

    /// The fencing token of `owner`'s live hold on `key` in `hold`.
    pub fn token_in(&self, hold: HoldKind, key: &str, owner: &str) -> Option<u64> {
        let now = Instant::now();
        let mut entries = self.entries();
        entries.groups.held(hold, key, owner, now).map(|h| h.token)
    }
}

/// One dispatch on the kind of hold: plain locks live in the store's own
/// map (the fast path: no group, no vector), the other kinds in their
/// groups (`groups`).
impl LockStore for MemoryStore {
    fn acquire(
        &self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64, _: Wait,
    ) -> Op<Acquired> {
        Op::Ready(Ok(match hold {
            HoldKind::Lock if self.try_acquire(key, owner, ttl_ms) => Acquired::Taken,
            HoldKind::Lock => Acquired::Refused,
            _ => Acquired::from_token(self.try_acquire_in(hold, key, owner, ttl_ms)),
        }))
    }

    fn release(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        Op::Ready(Ok(match hold {
            HoldKind::Lock => self.try_release(key, owner),
            _ => self.try_release_in(hold, key, owner),
        }))
    }

    fn extend(&self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        Op::Ready(Ok(match hold {
            HoldKind::Lock => self.try_extend(key, owner, ttl_ms),
            _ => self.try_extend_in(hold, key, owner, ttl_ms),
        }))
    }

    fn holds(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
        Op::Ready(Ok(match hold {
            HoldKind::Lock => self.held_by(key, owner),
            _ => self.held_in(hold, key, owner),
        }))
    }

    fn remaining(&self, hold: HoldKind, key: &str, owner: Option<&str>) -> Op<Option<f64>> {
        Op::Ready(Ok(match (hold, owner) {
            (HoldKind::Lock, _) => self.time_left(key),
            (_, Some(owner)) => self.remaining_in_ms(hold, key, owner),
            (_, None) => None,
        }))
    }

    fn would_wait(&self, hold: HoldKind, key: &str) -> Op<bool> {
        Op::Ready(Ok(match hold {
            HoldKind::Lock => self.locked(key),
            _ => self.waits(hold, key),
        }))
    }

    fn holders(&self, hold: HoldKind, key: &str) -> Op<f64> {
        let count = match hold {
            HoldKind::Lock => usize::from(self.locked(key)),
            _ => self.count(hold, key),
        };
        Op::Ready(Ok(count as f64))
    }

    fn fencing_token(&self, hold: HoldKind, key: &str, owner: &str) -> Option<f64> {
        let token = match hold {
            HoldKind::Lock => self.token_of(key, owner),
            _ => self.token_in(hold, key, owner),
        };
        token.map(|t| t as f64)
    }

    fn withdraw(&self, hold: HoldKind, key: &str) -> Op<()> {
        if hold == HoldKind::Write {
            self.stop_holding_back(hold, key);
        }
        Op::Ready(Ok(()))
    }

    fn entries_in_process(&self) -> usize {
        self.len()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            says_when_lapsed: true,
            ..Capabilities::default()
        }
    }
}

#[cfg(test)]
mod tests;
