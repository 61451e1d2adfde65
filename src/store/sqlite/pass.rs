//! The sweep of lapsed rows, one batch per acquire: a pass starts at most
//! once per sweep interval and goes through both tables a batch of keys at
//! a time, so no acquire pauses long, however large the tables.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::open::Db;
use super::ops::{self, Swept};
use crate::store::sweeps::Sweeps;

pub(super) struct SweepPass {
    /// When a pass may start.
    sweeps: Sweeps,
    under_way: Mutex<Option<Pass>>,
}

/// A pass under way: the key each table goes on from, `None` once the
/// table is done.
struct Pass {
    locks: Option<String>,
    holds: Option<String>,
}

impl SweepPass {
    pub fn every(interval: Duration) -> SweepPass {
        SweepPass {
            sweeps: Sweeps::every(interval),
            under_way: Mutex::new(None),
        }
    }

    /// Sweep the next batch, if a pass is under way or due. A batch that
    /// failed is tried again at the next acquire.
    pub fn step(&self, db: &mut Db) {
        if let Some((table, from)) = self.next_batch() {
            if let Ok(next) = ops::sweep(db, table, &from) {
                self.swept(table, next);
            }
        }
    }

    /// The batch to sweep: its table and the key it starts from.
    fn next_batch(&self) -> Option<(Swept, String)> {
        let mut pass = self
            .under_way
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if pass.is_none() && self.sweeps.due() {
            *pass = Some(Pass {
                locks: Some(String::new()),
                holds: Some(String::new()),
            });
        }
        let under_way = pass.as_ref()?;
        let batch = match (&under_way.locks, &under_way.holds) {
            (Some(from), _) => (Swept::Locks, from.clone()),
            (None, Some(from)) => (Swept::Holds, from.clone()),
            (None, None) => {
                *pass = None;
                return None;
            }
        };
        Some(batch)
    }

    /// A batch of `table` was swept: the pass goes on from `next`.
    fn swept(&self, table: Swept, next: Option<String>) {
        let mut pass = self
            .under_way
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(under_way) = pass.as_mut() {
            match table {
                Swept::Locks => under_way.locks = next,
                Swept::Holds => under_way.holds = next,
            }
        }
    }
}
