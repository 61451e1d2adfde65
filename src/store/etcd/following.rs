//! What the watch stream follows (`watch.rs`): each waited-for semaphore's
//! or read-write key's range on a watch of its own, and every plain lock's
//! line on one watch, with the revision since which each line's deletions
//! are heard; and the requests that tell the stream so.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::messages::{WatchAsk, WatchCancelRequest, WatchCreateRequest, WatchRequest, NO_PUT};
use crate::store::follow::Released;

/// What is followed: a plain lock's key, or a semaphore's or read-write key's.
pub type Followed = (Released, String);

/// A request to the watching task: follow (or stop following) a key.
pub type Watch = (Followed, bool);

/// The keys followed: a semaphore's or read-write key's by the id of the
/// watch that follows each; plain locks' by their line, all on one watch.
pub struct Following {
    pub ids: HashMap<Followed, i64>,
    pub keys: HashMap<i64, Followed>,
    next_id: i64,
    /// The watch on every line, once made (kept [`LINGER`] past the last wait).
    pub lines: Option<i64>,
    /// The revision the watch on every line was made at on this stream
    /// (`i64::MAX` until it is): every deletion since is heard.
    pub lines_from: i64,
    /// The latest revision any answer on the stream was at.
    pub seen: i64,
    /// The latest deletion heard on the watch on every line, whatever stream.
    pub handled: i64,
    /// Each plain lock waited for, by its line, with the revision since
    /// which its line's deletions are heard (dropped before it was waited for).
    pub lock_lines: HashMap<Vec<u8>, (String, i64)>,
    /// Since when no plain lock has been waited for.
    idle_since: Instant,
}

/// How long the watch on every line is kept after the last wait for a
/// plain lock ends: a process that waits again soon finds it made.
const LINGER: Duration = Duration::from_secs(10);

/// Where a followed key's holds live: a key, or a range (its start and end).
pub type Where = (Vec<u8>, Vec<u8>);

/// What following a key calls for on the stream.
pub enum Change {
    /// Nothing (it was followed, or is heard on a watch there is).
    None,
    /// This request to the stream.
    Send(WatchRequest),
    /// A plain lock's line heard on the line watch made already, whose
    /// deletions were dropped until now: its place (if any) looks.
    Look(String, Vec<u8>),
}

impl Following {
    pub fn new() -> Self {
        Following {
            ids: HashMap::new(),
            keys: HashMap::new(),
            next_id: 0,
            lines: None,
            lines_from: i64::MAX,
            seen: 0,
            handled: 0,
            lock_lines: HashMap::new(),
            idle_since: Instant::now(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty() && self.lock_lines.is_empty()
    }

    /// Follow or stop following a key: what that calls for.
    pub fn apply(&mut self, (key, on): Watch, stored: &impl Fn(&Followed) -> Where) -> Change {
        if key.0 == Released::Lock || key.0 == Released::Handed {
            let line = stored(&key).0;
            return self.apply_line(key.1, line, on, stored);
        }
        if on {
            if self.ids.contains_key(&key) {
                return Change::None;
            }
            let id = self.new_id();
            let request = create(stored(&key), id);
            self.ids.insert(key.clone(), id);
            self.keys.insert(id, key);
            Change::Send(request)
        } else {
            let Some(id) = self.ids.remove(&key) else {
                return Change::None;
            };
            self.keys.remove(&id);
            Change::Send(cancel(id))
        }
    }

    fn apply_line(
        &mut self, key: String, line: Vec<u8>, on: bool, stored: &impl Fn(&Followed) -> Where,
    ) -> Change {
        if !on {
            self.lock_lines.remove(&line);
            if self.lock_lines.is_empty() {
                self.idle_since = Instant::now();
            }
            return Change::None;
        }
        if self.lock_lines.contains_key(&line) {
            return Change::None;
        }
        self.lock_lines
            .insert(line.clone(), (key.clone(), self.seen));
        if self.lines.is_some() {
            return Change::Look(key, line);
        }
        Change::Send(self.new_lines_watch(stored))
    }

    /// The watch on every line, made (again): heard from once it says so.
    pub fn new_lines_watch(&mut self, stored: &impl Fn(&Followed) -> Where) -> WatchRequest {
        let id = self.new_id();
        self.lines = Some(id);
        self.lines_from = i64::MAX;
        create(stored(&(Released::Lock, String::new())), id)
    }

    pub fn new_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    /// The watch on every line, if no line has been waited in for [`LINGER`]:
    /// let go (the request that tells the stream).
    pub fn linger_over(&mut self) -> Option<WatchRequest> {
        if !self.lock_lines.is_empty() || self.idle_since.elapsed() < LINGER {
            return None;
        }
        self.lines_from = i64::MAX;
        self.lines.take().map(cancel)
    }
}

pub fn cancel(id: i64) -> WatchRequest {
    WatchRequest {
        ask: Some(WatchAsk::Cancel(WatchCancelRequest { watch_id: id })),
    }
}

pub fn create((key, range_end): Where, id: i64) -> WatchRequest {
    WatchRequest {
        ask: Some(WatchAsk::Create(WatchCreateRequest {
            key,
            range_end,
            start_revision: 0,
            filters: vec![NO_PUT],
            watch_id: id,
        })),
    }
}
