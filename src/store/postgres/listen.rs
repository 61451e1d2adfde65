//! Hearing releases announced by other clients.
//!
//! The release statement notifies the table's channel with the key. While
//! this process has waiters, one connection of its own (outside the pool:
//! `LISTEN` belongs to a session) listens there and wakes the waiters of the
//! keys it is told about, so a waiter in one process takes the lock a moment
//! after a holder in another lets go instead of at its next poll. The poll
//! stays as the fallback: a lost notification (the listening connection
//! dropped, a key too long to announce, a release by the docs' store) costs
//! latency, never correctness.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::pool::{connect, Opener};
use super::PostgresStore;
use crate::store::follow::{pause_taking, OnReleased, Released};
use crate::store::Mode;

/// What is followed: a plain lock's key, or a semaphore's or read-write key's.
type Followed = (Released, String);

/// A request to the listener task: follow (or stop following) a key.
pub type Watch = (Followed, bool);

impl PostgresStore {
    /// Follow (or stop following) announced releases of `key` (a plain lock's,
    /// or in `mode` a semaphore's or read-write key's). The first call
    /// returns the listener task for the caller to spawn on Tokio.
    pub fn watch(
        &self,
        mode: Option<Mode>,
        key: &str,
        on: bool,
    ) -> Option<impl Future<Output = ()> + Send + 'static> {
        if self.shared.pool.is_closed() {
            return None;
        }
        let on_released = self.shared.on_released.lock().ok()?.clone()?;
        let mut watcher = self.shared.watcher.lock().ok()?;
        let mut task = None;
        let sender = watcher.get_or_insert_with(|| {
            let (sender, inbox) = mpsc::unbounded_channel();
            task = Some(listener(
                Arc::clone(&self.shared.opener),
                self.shared.options.connect_timeout,
                inbox,
                on_released,
            ));
            sender
        });
        let released = match mode {
            None => Released::Lock,
            Some(mode) if mode.is_semaphore() => Released::Semaphore,
            Some(_) => Released::ReadWrite,
        };
        let _ = sender.send(((released, key.to_owned()), on));
        task
    }
}

/// Listens once any key is followed, and reports each announced release of
/// one. Connects again (and listens again) after the connection drops; ends
/// when the store is closed or dropped.
async fn listener(
    opener: Arc<Opener>,
    connect_timeout: Duration,
    mut inbox: mpsc::UnboundedReceiver<Watch>,
    on_released: OnReleased,
) {
    let mut keys = Following::new(on_released.clone());
    loop {
        while keys.keys.is_empty() {
            match inbox.recv().await {
                Some(watch) => keys.apply(watch),
                None => return,
            }
        }
        let (sender, mut notices) = mpsc::unbounded_channel();
        let listening = tokio::time::timeout(connect_timeout, async {
            let client = connect(&opener, Some(sender)).await?;
            client.batch_execute(&opener.sql.listen).await?;
            Ok::<_, tokio_postgres::Error>(client)
        })
        .await;
        let Ok(Ok(_client)) = listening else {
            // Not reachable now: keep track of what is wanted, and try again soon.
            if !pause_taking(&mut inbox, |watch| keys.apply(watch)).await {
                return;
            }
            continue;
        };
        // A release may have come while the connection was opening, before
        // anyone listened: every waiter tries once now instead of at its poll.
        for (released, key) in &keys.keys {
            on_released(*released, key.clone());
        }
        // `_client` keeps the session (and so the LISTEN) open until the
        // connection drops or the store goes: waiters come and go in bursts,
        // and one idle session is cheaper than a connection per burst.
        loop {
            tokio::select! {
                watch = inbox.recv() => match watch {
                    Some(watch) => keys.apply(watch),
                    None => return,
                },
                notice = notices.recv() => match notice {
                    Some((channel, payload)) => {
                        if let Some(heard) = heard(&opener.sql.holds_channel, channel, payload) {
                            keys.announced(heard);
                        }
                    }
                    None => break,
                },
            }
        }
    }
}

/// How long an announcement nobody here followed is remembered: a waiter
/// that starts following its key a moment after the release (its failed
/// attempt and the announcement crossed) still hears of it.
const RECENT: Duration = Duration::from_millis(250);

/// What a notification announces: on the table's channel a plain lock's
/// key; on the holds channel a semaphore's (`s` + key) or a read-write
/// key's (`r` + key).
fn heard(holds_channel: &str, channel: String, mut payload: String) -> Option<Followed> {
    if channel != holds_channel {
        return Some((Released::Lock, payload));
    }
    let released = match payload.chars().next()? {
        's' => Released::Semaphore,
        'r' => Released::ReadWrite,
        _ => return None,
    };
    payload.remove(0);
    Some((released, payload))
}

/// The keys followed, and the recent announcements of keys that were not.
struct Following {
    keys: HashSet<Followed>,
    recent: HashMap<Followed, Instant>,
    on_released: OnReleased,
}

impl Following {
    fn new(on_released: OnReleased) -> Self {
        Following {
            keys: HashSet::new(),
            recent: HashMap::new(),
            on_released,
        }
    }

    fn apply(&mut self, (key, on): Watch) {
        if !on {
            self.keys.remove(&key);
            return;
        }
        if self
            .recent
            .remove(&key)
            .is_some_and(|at| at.elapsed() < RECENT)
        {
            (self.on_released)(key.0, key.1.clone());
        }
        self.keys.insert(key);
    }

    fn announced(&mut self, key: Followed) {
        if self.keys.contains(&key) {
            (self.on_released)(key.0, key.1);
            return;
        }
        if self.recent.len() >= 1_024 {
            self.recent.retain(|_, at| at.elapsed() < RECENT);
        }
        if self.recent.len() < 4_096 {
            self.recent.insert(key, Instant::now());
        }
    }
}
