//! Entries of a plain lock's line lately known gone (`line.rs`), by the
//! revision each was gone by. Answers of several requests in flight come in
//! any order, and one read before an entry went still shows it: with this,
//! a place of this store's is never taken to be there again, or first, on
//! such a read, and a read answered after a deletion was heard has what
//! went crossed off it.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::entries::Read;

/// How long an entry known gone is remembered: past any answer still on its
/// way (a call that long has timed out).
const KEPT: Duration = Duration::from_secs(30);

/// Entries known gone: each key's latest going, and when it was learnt.
#[derive(Default)]
pub struct Gone {
    by_key: HashMap<Vec<u8>, (i64, Instant)>,
    pruned: Option<Instant>,
}

impl Gone {
    /// Whether the entry `key` made at `created` is known gone.
    pub fn went(&self, key: &[u8], created: i64) -> bool {
        self.by_key.get(key).is_some_and(|(at, _)| *at > created)
    }

    /// The entry `key` was gone by revision `at`.
    pub fn went_by(&mut self, key: &[u8], at: i64) {
        let now = Instant::now();
        let known = self.by_key.entry(key.to_vec()).or_insert((at, now));
        *known = (known.0.max(at), now);
    }

    /// `read` with the entries ahead it shows that are known gone since
    /// crossed off (heard gone before it was answered); `None` if that
    /// leaves none: it says no more then than whoever crossed the last off
    /// knew.
    pub fn crossed(&self, mut read: Read) -> Option<Read> {
        let shown = read.ahead.len();
        let since = read.at;
        let mut gone_by = read.gone_by;
        read.ahead.retain(|key| match self.by_key.get(key) {
            Some((at, _)) if *at > since => {
                gone_by = gone_by.max(*at);
                false
            }
            _ => true,
        });
        read.gone_by = gone_by;
        (read.ahead.len() == shown || !read.ahead.is_empty()).then_some(read)
    }

    /// What was learnt [`KEPT`] ago forgotten (looked for once a second).
    pub fn prune(&mut self, now: Instant) {
        if self
            .pruned
            .is_some_and(|at| now.duration_since(at) < Duration::from_secs(1))
        {
            return;
        }
        self.pruned = Some(now);
        self.by_key
            .retain(|_, (_, learnt)| now.duration_since(*learnt) < KEPT);
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}
