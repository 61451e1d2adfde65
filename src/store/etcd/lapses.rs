//! The holds this store took, each let go by the store itself the moment
//! its TTL passes, unless it was extended or released first. etcd counts a
//! lease in whole seconds, so a lock's lease ends up to two seconds (a
//! thirtieth of a long TTL) after its TTL (`leases.rs`): that is the
//! backstop for a holder whose process died. While the process lives, one task on Tokio (which a blocked JS
//! thread does not hold up) deletes each key at its TTL, only if it is still
//! that very write (its revision), so a later extension or another owner's
//! hold is never touched. A hold released or extended leaves the task's
//! list at once, so what it keeps is the holds live now.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::members::Members;
use super::messages::paths::TXN;
use super::messages::{TxnRequest, TxnResponse};
use super::txn::{delete, held_by, written_at};

#[derive(Default)]
pub struct Lapses {
    state: Mutex<State>,
    /// Wakes the task: a hold due sooner than it sleeps for, or the store closed.
    wake: Notify,
}

#[derive(Default)]
struct State {
    held: HashMap<Vec<u8>, Held>,
    /// The holds by when they are due.
    due: BTreeSet<(Instant, Vec<u8>)>,
    running: bool,
}

struct Held {
    /// What it holds (an owner token, or a line's entry).
    value: Vec<u8>,
    /// The revision of the write that holds it now.
    revision: i64,
    deadline: Instant,
}

impl Lapses {
    /// `stored` holds `value` by the write at `revision` until `deadline`:
    /// the key goes then, unless a later write (an extension) replaced it.
    pub fn hold(
        self: &Arc<Self>, members: &Arc<Members>, stored: Vec<u8>, value: &[u8], revision: i64,
        deadline: Instant,
    ) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if state.held.get(&stored).is_some_and(|h| {
            h.revision > revision || (h.revision == revision && h.deadline >= deadline)
        }) {
            // A later write's answer came first (an extension answered late),
            // or this write is held longer already.
            return;
        }
        let sooner = state.due.first().is_none_or(|(first, _)| deadline < *first);
        let held = Held {
            value: value.to_vec(),
            revision,
            deadline,
        };
        if let Some(before) = state.held.insert(stored.clone(), held) {
            state.due.remove(&(before.deadline, stored.clone()));
        }
        state.due.insert((deadline, stored));
        if !state.running {
            state.running = true;
            tokio::spawn(Arc::clone(self).run(Arc::clone(members)));
        } else if sooner {
            self.wake.notify_one();
        }
    }

    /// The hold of `stored` holding `value` was released: nothing to let go.
    pub fn released(&self, stored: &[u8], value: &[u8]) {
        if let Ok(mut state) = self.state.lock() {
            if state.held.get(stored).is_some_and(|h| h.value == value) {
                if let Some(held) = state.held.remove(stored) {
                    state.due.remove(&(held.deadline, stored.to_vec()));
                }
            }
        }
    }

    /// How long the hold of `stored` by its write at `revision` has left,
    /// if this store made that write.
    pub fn left(&self, stored: &[u8], revision: i64) -> Option<Duration> {
        let state = self.state.lock().ok()?;
        let hold = state.held.get(stored)?;
        if hold.revision != revision {
            return None;
        }
        Some(hold.deadline.saturating_duration_since(Instant::now()))
    }

    /// Holds waiting to fall due (as many in its list by time).
    #[cfg(test)]
    pub fn waiting(&self) -> (usize, usize) {
        self.state
            .lock()
            .map_or((0, 0), |s| (s.held.len(), s.due.len()))
    }

    /// The store closed: the task ends (the leases end what it held).
    pub fn close(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.held.clear();
            state.due.clear();
        }
        self.wake.notify_one();
    }

    /// Delete each hold as it falls due; ends once the store is closed.
    async fn run(self: Arc<Self>, members: Arc<Members>) {
        loop {
            let next = self
                .state
                .lock()
                .ok()
                .and_then(|s| s.due.first().map(|(at, _)| *at));
            match next {
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {}
                        () = self.wake.notified() => {}
                    }
                }
                None => self.wake.notified().await,
            }
            if members.is_closed() {
                return;
            }
            for (stored, held) in self.take_due() {
                let members = Arc::clone(&members);
                tokio::spawn(async move {
                    // Not reached (the cluster away): its lease ends it soon after.
                    let request = deleted_if_still(stored, held);
                    let _ = members.call::<_, TxnResponse>(TXN, &request).await;
                });
            }
        }
    }

    /// The holds due now.
    fn take_due(&self) -> Vec<(Vec<u8>, Held)> {
        let Ok(mut state) = self.state.lock() else {
            return Vec::new();
        };
        let now = Instant::now();
        let mut due = Vec::new();
        while state.due.first().is_some_and(|(at, _)| *at <= now) {
            let Some((_, stored)) = state.due.pop_first() else {
                break;
            };
            if let Some(held) = state.held.remove(&stored) {
                due.push((stored, held));
            }
        }
        due
    }
}

/// Delete `stored` if its last write is still `held`'s (its revision, and
/// its value: revisions start over in a cluster restored from a backup).
fn deleted_if_still(stored: Vec<u8>, held: Held) -> TxnRequest {
    TxnRequest {
        compare: vec![
            written_at(&stored, held.revision),
            held_by(&stored, &held.value),
        ],
        success: vec![delete(&stored)],
        failure: vec![],
    }
}
