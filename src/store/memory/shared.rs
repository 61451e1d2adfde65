//! Semaphores and read-write locks in memory: per key, a group of holds.
//!
//! Semaphore groups and read-write groups sit in maps of their own, apart
//! from plain locks, so `lock(k)`, `semaphore(k, n)` and `readLock(k)` never
//! see each other's data. Expired holds are dropped whenever their group is
//! looked at, and empty groups when the store sweeps.

use std::collections::HashMap;
use std::time::Instant;

use super::{expiry, ms_until, Entries, MemoryStore};
use crate::store::Hold;
use crate::text::SmallStr;

struct Held {
    owner: SmallStr,
    expires_at: Instant,
    token: u64,
}

/// The holds on one key: a semaphore's permits, or a read-write key's
/// readers and writer.
#[derive(Default)]
struct Group {
    /// Permits, or readers.
    many: Vec<Held>,
    writer: Option<Held>,
    /// A writer is waiting: new readers stay out until then.
    writer_waiting_until: Option<Instant>,
}

impl Group {
    fn prune(&mut self, now: Instant) {
        self.many.retain(|h| h.expires_at > now);
        if self.writer.as_ref().is_some_and(|w| w.expires_at <= now) {
            self.writer = None;
        }
        if self.writer_waiting_until.is_some_and(|at| at <= now) {
            self.writer_waiting_until = None;
        }
    }

    fn is_empty(&self) -> bool {
        self.many.is_empty() && self.writer.is_none() && self.writer_waiting_until.is_none()
    }

    fn earliest_expiry(&self) -> Option<Instant> {
        let holds = self.many.iter().chain(self.writer.as_ref());
        holds
            .map(|h| h.expires_at)
            .chain(self.writer_waiting_until)
            .min()
    }

    fn would_wait(&self, hold: Hold) -> bool {
        match hold {
            Hold::Permit { limit } => self.many.len() as u64 >= limit,
            Hold::Read => self.writer.is_some() || self.writer_waiting_until.is_some(),
            Hold::Write | Hold::Lock => self.writer.is_some() || !self.many.is_empty(),
        }
    }

    fn hold_of(&mut self, hold: Hold, owner: &str) -> Option<&mut Held> {
        match hold {
            // (A plain lock never reaches a group: the store keeps those in its own map.)
            Hold::Write | Hold::Lock => self.writer.as_mut().filter(|w| &*w.owner == owner),
            Hold::Permit { .. } | Hold::Read => self.many.iter_mut().find(|h| &*h.owner == owner),
        }
    }
}

/// Every semaphore's and read-write key's group.
#[derive(Default)]
pub(super) struct Groups {
    semaphores: HashMap<SmallStr, Group>,
    read_write: HashMap<SmallStr, Group>,
}

impl Groups {
    fn of(&mut self, hold: Hold) -> &mut HashMap<SmallStr, Group> {
        if hold.is_permit() {
            &mut self.semaphores
        } else {
            &mut self.read_write
        }
    }

    /// Drop expired holds and empty groups; the earliest expiry left.
    pub(super) fn sweep(&mut self, now: Instant) -> Option<Instant> {
        let mut earliest = None;
        for map in [&mut self.semaphores, &mut self.read_write] {
            map.retain(|_, group| {
                group.prune(now);
                earliest = earliest.into_iter().chain(group.earliest_expiry()).min();
                !group.is_empty()
            });
        }
        earliest
    }

    pub(super) fn len(&self) -> usize {
        self.semaphores.len() + self.read_write.len()
    }
}

impl Entries {
    /// `key`'s live group in `hold`'s map, if it has one.
    fn group(&mut self, hold: Hold, key: &str, now: Instant) -> Option<&mut Group> {
        let group = self.shared.of(hold).get_mut(key)?;
        group.prune(now);
        Some(group)
    }
}

impl MemoryStore {
    pub fn try_acquire_in(&self, hold: Hold, key: &str, owner: &str, ttl_ms: f64) -> Option<u64> {
        let now = Instant::now();
        let mut entries = self.entries();
        entries.maybe_sweep(now);
        let expires_at = expiry(now, ttl_ms);
        let token = entries.last_token + 1;
        let group = entries.shared.of(hold).entry(key.into()).or_default();
        group.prune(now);
        if group.would_wait(hold) {
            if hold == Hold::Write {
                // New readers wait behind this writer until it gets in or lapses.
                group.writer_waiting_until = group.writer_waiting_until.max(Some(expires_at));
            }
            return None;
        }
        let held = Held {
            owner: owner.into(),
            expires_at,
            token,
        };
        if hold == Hold::Write {
            group.writer = Some(held);
            group.writer_waiting_until = None;
        } else {
            group.many.push(held);
        }
        entries.last_token = token;
        entries.note_expiry(expires_at);
        Some(token)
    }

    pub fn try_release_in(&self, hold: Hold, key: &str, owner: &str) -> bool {
        let now = Instant::now();
        let mut entries = self.entries();
        let Some(group) = entries.group(hold, key, now) else {
            return false;
        };
        let released = match hold {
            Hold::Write | Hold::Lock if group.hold_of(hold, owner).is_some() => {
                group.writer.take().is_some()
            }
            Hold::Write | Hold::Lock => false,
            Hold::Permit { .. } | Hold::Read => {
                let before = group.many.len();
                group.many.retain(|h| &*h.owner != owner);
                group.many.len() < before
            }
        };
        if group.is_empty() {
            entries.shared.of(hold).remove(key);
        }
        released
    }

    pub fn try_extend_in(&self, hold: Hold, key: &str, owner: &str, ttl_ms: f64) -> bool {
        let now = Instant::now();
        let mut entries = self.entries();
        let expires_at = expiry(now, ttl_ms);
        let extended = entries
            .group(hold, key, now)
            .and_then(|group| group.hold_of(hold, owner))
            .map(|held| held.expires_at = expires_at)
            .is_some();
        if extended {
            entries.note_expiry(expires_at);
        }
        extended
    }

    pub fn held_in(&self, hold: Hold, key: &str, owner: &str) -> bool {
        let now = Instant::now();
        let mut entries = self.entries();
        let held = entries
            .group(hold, key, now)
            .and_then(|g| g.hold_of(hold, owner));
        held.is_some()
    }

    pub fn remaining_in_ms(&self, hold: Hold, key: &str, owner: &str) -> Option<f64> {
        let now = Instant::now();
        let mut entries = self.entries();
        let held = entries
            .group(hold, key, now)
            .and_then(|g| g.hold_of(hold, owner));
        held.map(|h| ms_until(h.expires_at, now))
    }

    pub fn waits(&self, hold: Hold, key: &str) -> bool {
        let mut entries = self.entries();
        let group = entries.group(hold, key, Instant::now());
        group.is_some_and(|g| g.would_wait(hold))
    }

    pub fn count(&self, hold: Hold, key: &str) -> usize {
        let mut entries = self.entries();
        let group = entries.group(hold, key, Instant::now());
        group.map_or(0, |g| g.many.len() + usize::from(g.writer.is_some()))
    }

    pub fn stop_holding_back(&self, hold: Hold, key: &str) {
        let mut entries = self.entries();
        if let Some(group) = entries.group(hold, key, Instant::now()) {
            group.writer_waiting_until = None;
        }
    }

    /// The fencing token of `owner`'s live hold on `key` in `hold`.
    pub fn token_in(&self, hold: Hold, key: &str, owner: &str) -> Option<u64> {
        let now = Instant::now();
        let mut entries = self.entries();
        let held = entries
            .group(hold, key, now)
            .and_then(|g| g.hold_of(hold, owner));
        held.map(|h| h.token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread::sleep;
    use std::time::Duration;

    const PERMIT3: Hold = Hold::Permit { limit: 3 };

    #[test]
    fn a_semaphore_admits_up_to_its_limit() {
        let store = MemoryStore::new();
        for owner in ["a", "b", "c"] {
            assert!(store
                .try_acquire_in(PERMIT3, "s", owner, 10_000.0)
                .is_some());
        }
        assert!(store.try_acquire_in(PERMIT3, "s", "d", 10_000.0).is_none());
        assert!(store.waits(PERMIT3, "s"));
        assert_eq!(store.count(PERMIT3, "s"), 3);
        // A caller with a higher limit is admitted while fewer than its own are held.
        assert!(store
            .try_acquire_in(Hold::Permit { limit: 4 }, "s", "e", 10_000.0)
            .is_some());
        assert!(store.try_release_in(PERMIT3, "s", "a"));
        assert!(!store.try_release_in(PERMIT3, "s", "a"), "only once");
        assert!(
            store.try_acquire_in(PERMIT3, "s", "d", 10_000.0).is_none(),
            "4 held, limit 3"
        );
        assert!(store.try_release_in(PERMIT3, "s", "b"));
        assert!(store.try_acquire_in(PERMIT3, "s", "d", 10_000.0).is_some());
    }

    #[test]
    fn kinds_of_hold_never_see_each_other() {
        let store = MemoryStore::new();
        assert!(store.try_acquire("k", "plain", 10_000.0));
        assert!(store
            .try_acquire_in(Hold::Permit { limit: 1 }, "k", "p", 10_000.0)
            .is_some());
        assert!(store
            .try_acquire_in(Hold::Write, "k", "w", 10_000.0)
            .is_some());
        assert!(!store.try_release_in(Hold::Write, "k", "p"));
        assert!(!store.try_release_in(PERMIT3, "k", "w"));
        assert!(!store.try_release("k", "w"));
    }

    #[test]
    fn permits_expire_one_by_one() {
        let store = MemoryStore::new();
        assert!(store.try_acquire_in(PERMIT3, "s", "short", 100.0).is_some());
        assert!(store
            .try_acquire_in(PERMIT3, "s", "long", 10_000.0)
            .is_some());
        sleep(Duration::from_millis(150));
        assert_eq!(store.count(PERMIT3, "s"), 1);
        assert!(!store.try_extend_in(PERMIT3, "s", "short", 1000.0));
        assert!(store.try_extend_in(PERMIT3, "s", "long", 20_000.0));
        assert!(store
            .remaining_in_ms(PERMIT3, "s", "long")
            .is_some_and(|ms| ms > 10_000.0));
    }

    #[test]
    fn readers_share_and_a_writer_excludes() {
        let store = MemoryStore::new();
        assert!(store
            .try_acquire_in(Hold::Read, "rw", "r1", 10_000.0)
            .is_some());
        assert!(store
            .try_acquire_in(Hold::Read, "rw", "r2", 10_000.0)
            .is_some());
        assert_eq!(store.count(Hold::Read, "rw"), 2);
        assert!(store
            .try_acquire_in(Hold::Write, "rw", "w", 10_000.0)
            .is_none());
        // The refused writer holds back new readers...
        assert!(store
            .try_acquire_in(Hold::Read, "rw", "r3", 10_000.0)
            .is_none());
        assert!(store.waits(Hold::Read, "rw"));
        assert!(store.try_release_in(Hold::Read, "rw", "r1"));
        assert!(store.try_release_in(Hold::Read, "rw", "r2"));
        // ...and gets in once they are gone; then nobody else does.
        let token = store
            .try_acquire_in(Hold::Write, "rw", "w", 10_000.0)
            .expect("writer admitted");
        assert_eq!(store.token_in(Hold::Write, "rw", "w"), Some(token));
        assert!(store
            .try_acquire_in(Hold::Read, "rw", "r3", 10_000.0)
            .is_none());
        assert!(store
            .try_acquire_in(Hold::Write, "rw", "w2", 10_000.0)
            .is_none());
        assert!(store.try_release_in(Hold::Write, "rw", "w"));
        // w2's refusal held readers back; its withdrawal lets them in.
        store.stop_holding_back(Hold::Write, "rw");
        assert!(store
            .try_acquire_in(Hold::Read, "rw", "r3", 10_000.0)
            .is_some());
    }

    #[test]
    fn a_waiting_writer_holds_readers_back_only_for_its_ttl() {
        let store = MemoryStore::new();
        assert!(store
            .try_acquire_in(Hold::Read, "rw", "r1", 10_000.0)
            .is_some());
        assert!(store
            .try_acquire_in(Hold::Write, "rw", "w", 100.0)
            .is_none());
        assert!(store
            .try_acquire_in(Hold::Read, "rw", "r2", 10_000.0)
            .is_none());
        sleep(Duration::from_millis(150));
        assert!(store
            .try_acquire_in(Hold::Read, "rw", "r2", 10_000.0)
            .is_some());
    }

    #[test]
    fn empty_groups_are_swept() {
        let store = MemoryStore::new();
        for i in 0..100 {
            assert!(store
                .try_acquire_in(PERMIT3, &format!("s{i}"), "a", 20.0)
                .is_some());
        }
        sleep(Duration::from_millis(30) + super::super::SWEEP_INTERVAL);
        assert!(store.try_acquire("fresh", "a", 10_000.0));
        assert_eq!(store.len(), 1);
    }
}
