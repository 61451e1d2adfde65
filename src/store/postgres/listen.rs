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
//!
//! A LISTEN can be accepted and yet hear nothing: through a pooler in
//! transaction mode (PgBouncer), the session that ran it goes back to the
//! pool, and its notifications to whichever client holds it next. So once
//! listening, the store notifies itself through its own URL; if that does
//! not arrive soon, it warns once (`listenUrl` names a server to listen on
//! directly) and its waiters go on polling.
//!
//! The same connection listens on this store's own channel of the line
//! (`line_sql`), where a lock handed to this process is announced to it alone.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc;

use super::pool::{connect, Opener};
use crate::store::follow::{pause_taking, OnReleased, OnWarning, Released};
use crate::store::line;

/// How long the store's own notification may take to reach its listener
/// before it warns that notifications do not arrive.
const PROBE_WAIT: Duration = Duration::from_millis(1_500);

/// What is followed: a plain lock's key, or a semaphore's or read-write key's.
type Followed = (Released, String);

/// A request to the listener task: follow (or stop following) a key.
pub type Watch = (Followed, bool);

/// Listens (on `opener`'s server) once any key is followed, and reports
/// each announced release of one. Connects again (and listens again) after
/// the connection drops; ends when the store is closed or dropped. Checks
/// once that a notification sent through `store` (the store's own URL)
/// arrives, and warns through `on_warning` if not.
pub(super) async fn listener(
    wake: String, opener: Arc<Opener>, store: Arc<Opener>, connect_timeout: Duration,
    mut inbox: mpsc::UnboundedReceiver<Watch>, on_released: OnReleased,
    on_warning: Option<OnWarning>,
) {
    let mut keys = Following::new(on_released.clone());
    // Whether the check is done (heard, or warned about): once per store.
    let mut checked = on_warning.is_none();
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
            client.batch_execute(&format!("LISTEN \"{wake}\"")).await?;
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
        // The check's notification, and when it is overdue. Not sent (the
        // server unreachable through the store's URL): no verdict, tried
        // again with the next listening connection.
        let mut probe = None;
        if !checked {
            let payload = probe_payload();
            if send_probe(&store, &opener.sql.holds_channel, &payload, connect_timeout).await {
                probe = Some((payload, tokio::time::Instant::now() + PROBE_WAIT));
            }
        }
        // `_client` keeps the session (and so the LISTEN) open until the
        // connection drops or the store goes: waiters come and go in bursts,
        // and one idle session is cheaper than a connection per burst.
        loop {
            let overdue = probe.as_ref().map(|(_, at)| *at);
            tokio::select! {
                watch = inbox.recv() => match watch {
                    Some(watch) => keys.apply(watch),
                    None => return,
                },
                notice = notices.recv() => match notice {
                    Some((channel, payload)) => {
                        if probe.as_ref().is_some_and(|(sent, _)| *sent == payload)
                            && channel == opener.sql.holds_channel
                        {
                            probe = None;
                            checked = true;
                        } else if channel == wake {
                            if line::parse(&payload).is_some() {
                                on_released(Released::Handed, payload);
                            }
                        } else if let Some(heard) = heard(&opener.sql.holds_channel, channel, payload) {
                            keys.announced(heard);
                        }
                    }
                    None => break,
                },
                () = sleep_until(overdue), if overdue.is_some() => {
                    probe = None;
                    checked = true;
                    if let Some(warn) = &on_warning {
                        warn(format!(
                            "PostgresLockStore: a notification sent through {} did not reach the LISTEN \
                             connection to {} within {} ms, so releases by other clients are found by \
                             polling (every retryDelay), not at once. Behind a transaction-pooling \
                             bouncer (PgBouncer pool_mode = transaction)? Set listenUrl to a direct \
                             PostgreSQL URL.",
                            store.target.display,
                            opener.target.display,
                            PROBE_WAIT.as_millis()
                        ));
                    }
                }
            }
        }
    }
}

/// A payload no other notification has: on the holds channel, whose
/// announcements start with `s` or `r`, so other listeners ignore it.
fn probe_payload() -> String {
    static SENT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "p{}:{nanos}:{}",
        std::process::id(),
        SENT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Notify `channel` with `payload` through a connection of its own to the
/// store's server (as its operations reach it); whether that was done.
async fn send_probe(store: &Opener, channel: &str, payload: &str, within: Duration) -> bool {
    // Both are ours and plain (a table name, digits): safe as literals.
    let statement = format!("SELECT pg_notify('{channel}', '{payload}')");
    let sent = tokio::time::timeout(within, async {
        let client = connect(store, None).await?;
        client.simple_query(&statement).await
    })
    .await;
    matches!(sent, Ok(Ok(_)))
}

/// Resolves at `at` (never, when there is none).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
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
