//! The holds this store took, each let go by the store itself the moment
//! its TTL passes, unless it was extended or released first. etcd counts a
//! lease in whole seconds, so a lock's lease ends up to two seconds after
//! its TTL (`leases.rs`): that is the backstop for a holder whose process
//! died. While the process lives, a timer on Tokio (which a blocked JS
//! thread does not hold up) deletes the key at the TTL, only if it is still
//! this very write (its revision), so a later extension or another owner's
//! hold is never touched.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::members::Members;
use super::messages::paths::TXN;
use super::messages::{
    Against, Compare, DeleteRangeRequest, Request, RequestOp, TxnRequest, TxnResponse, EQUAL, MOD,
};

#[derive(Default)]
pub struct Lapses {
    held: Mutex<HashMap<Vec<u8>, Held>>,
}

struct Held {
    owner: String,
    /// The revision of the write that holds it now.
    revision: i64,
    deadline: Instant,
}

impl Lapses {
    /// `owner` holds `stored` by the write at `revision` until `deadline`:
    /// the key goes then, unless a later write (an extension) replaced it.
    pub fn hold(
        self: &Arc<Self>, members: &Arc<Members>, stored: Vec<u8>, owner: &str, revision: i64,
        deadline: Instant,
    ) {
        if let Ok(mut held) = self.held.lock() {
            let owner = owner.to_owned();
            held.insert(
                stored.clone(),
                Held {
                    owner,
                    revision,
                    deadline,
                },
            );
        }
        let (lapses, members) = (Arc::clone(self), Arc::clone(members));
        tokio::spawn(async move {
            tokio::time::sleep_until(deadline).await;
            if !lapses.take(&stored, revision) || members.is_closed() {
                return;
            }
            let request = TxnRequest {
                compare: vec![Compare {
                    result: EQUAL,
                    target: MOD,
                    key: stored.clone(),
                    against: Some(Against::ModRevision(revision)),
                    range_end: Vec::new(),
                }],
                success: vec![RequestOp {
                    request: Some(Request::DeleteRange(DeleteRangeRequest { key: stored })),
                }],
                failure: vec![],
            };
            // Not reached (the cluster away): its lease ends it soon after.
            let _ = members.call::<_, TxnResponse>(TXN, &request).await;
        });
    }

    /// Whether `stored` was still held by the write at `revision` (it is
    /// forgotten now).
    fn take(&self, stored: &[u8], revision: i64) -> bool {
        let Ok(mut held) = self.held.lock() else {
            return false;
        };
        if held.get(stored).is_some_and(|h| h.revision == revision) {
            held.remove(stored);
            return true;
        }
        false
    }

    /// `owner`'s hold of `stored` was released: nothing to let go.
    pub fn released(&self, stored: &[u8], owner: &str) {
        if let Ok(mut held) = self.held.lock() {
            if held.get(stored).is_some_and(|h| h.owner == owner) {
                held.remove(stored);
            }
        }
    }

    /// How long `owner`'s hold of `stored` (anyone's, without an owner) has
    /// left, if this store took it.
    pub fn left(&self, stored: &[u8], owner: Option<&str>) -> Option<Duration> {
        let held = self.held.lock().ok()?;
        let hold = held.get(stored)?;
        if owner.is_some_and(|owner| owner != hold.owner) {
            return None;
        }
        Some(hold.deadline.saturating_duration_since(Instant::now()))
    }
}
