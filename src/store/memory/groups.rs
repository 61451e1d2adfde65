//! Semaphores and read-write locks in memory: per key, a group of holds.
//!
//! Semaphore groups and read-write groups sit in maps of their own, apart
//! from plain locks, so `lock(k)`, `semaphore(k, n)` and `readLock(k)` never
//! see each other's data. Expired holds are dropped whenever their group is
//! looked at, and empty groups when the store sweeps.

use std::collections::HashMap;
use std::time::Instant;

use crate::store::HoldKind;
use crate::text::SmallStr;

/// One hold in a group: whose, until when, and its fencing token.
pub(super) struct Held {
    pub owner: SmallStr,
    pub expires_at: Instant,
    pub token: u64,
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

    fn would_wait(&self, hold: HoldKind) -> bool {
        match hold {
            HoldKind::Permit { limit } => self.many.len() as u64 >= limit,
            HoldKind::Read => self.writer.is_some() || self.writer_waiting_until.is_some(),
            HoldKind::Write | HoldKind::Lock => self.writer.is_some() || !self.many.is_empty(),
        }
    }

    fn hold_of(&mut self, hold: HoldKind, owner: &str) -> Option<&mut Held> {
        match hold {
            // (A plain lock never reaches a group: the store keeps those in its own map.)
            HoldKind::Write | HoldKind::Lock => self.writer.as_mut().filter(|w| &*w.owner == owner),
            HoldKind::Permit { .. } | HoldKind::Read => {
                self.many.iter_mut().find(|h| &*h.owner == owner)
            }
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
    fn of(&mut self, hold: HoldKind) -> &mut HashMap<SmallStr, Group> {
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

    /// `key`'s live group in `hold`'s map, if it has one.
    fn live(&mut self, hold: HoldKind, key: &str, now: Instant) -> Option<&mut Group> {
        let group = self.of(hold).get_mut(key)?;
        group.prune(now);
        Some(group)
    }

    /// Admit `held` to `key`'s group, if `hold` need not wait there. A
    /// writer refused holds new readers back until it gets in or lapses.
    pub(super) fn admit(&mut self, hold: HoldKind, key: &str, held: Held, now: Instant) -> bool {
        let group = self.of(hold).entry(key.into()).or_default();
        group.prune(now);
        if group.would_wait(hold) {
            if hold == HoldKind::Write {
                let until = Some(held.expires_at);
                group.writer_waiting_until = group.writer_waiting_until.max(until);
            }
            return false;
        }
        if hold == HoldKind::Write {
            group.writer = Some(held);
            group.writer_waiting_until = None;
        } else {
            group.many.push(held);
        }
        true
    }

    pub(super) fn release(&mut self, hold: HoldKind, key: &str, owner: &str, now: Instant) -> bool {
        let Some(group) = self.live(hold, key, now) else {
            return false;
        };
        let released = match hold {
            HoldKind::Write | HoldKind::Lock if group.hold_of(hold, owner).is_some() => {
                group.writer.take().is_some()
            }
            HoldKind::Write | HoldKind::Lock => false,
            HoldKind::Permit { .. } | HoldKind::Read => {
                let before = group.many.len();
                group.many.retain(|h| &*h.owner != owner);
                group.many.len() < before
            }
        };
        if group.is_empty() {
            self.of(hold).remove(key);
        }
        released
    }

    /// `owner`'s live hold of `key`, to read or to extend.
    pub(super) fn held(
        &mut self, hold: HoldKind, key: &str, owner: &str, now: Instant,
    ) -> Option<&mut Held> {
        self.live(hold, key, now)?.hold_of(hold, owner)
    }

    pub(super) fn would_wait(&mut self, hold: HoldKind, key: &str, now: Instant) -> bool {
        self.live(hold, key, now)
            .is_some_and(|g| g.would_wait(hold))
    }

    pub(super) fn count(&mut self, hold: HoldKind, key: &str, now: Instant) -> usize {
        let group = self.live(hold, key, now);
        group.map_or(0, |g| g.many.len() + usize::from(g.writer.is_some()))
    }

    /// A waiting writer gave up: new readers need not wait for it.
    pub(super) fn stop_holding_back(&mut self, hold: HoldKind, key: &str, now: Instant) {
        if let Some(group) = self.live(hold, key, now) {
            group.writer_waiting_until = None;
        }
    }
}
