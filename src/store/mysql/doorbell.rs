//! Hearing releases in other processes. MySQL has no LISTEN/NOTIFY; what it
//! has is `GET_LOCK`, a named lock a session waits for. So each plain lock
//! has a doorbell (`Sql::doorbell`): the connection that takes the lock
//! takes the doorbell in the statement sent right behind the acquire's,
//! and lets it go in the one behind the release's. While this process has waiters for a key, a connection
//! of its own (outside the event loop's: it blocks) waits for that key's
//! doorbell, lets it go the moment it gets it, and wakes the key's waiters,
//! which try again at once instead of at their next poll.
//!
//! The poll stays as the fallback, and is what semaphores and read-write
//! keys use (a doorbell is one holder's). A doorbell nobody holds while the
//! lock is held (its holder's connection was opened again, or the lock was
//! restored in a process that has not extended it yet) rings at once: a
//! ringer that keeps ringing at once backs off, up to a second between
//! rings, so such a key is polled, not spun on. Each followed key takes a
//! connection, up to [`MAX_BELLS`]; keys beyond are polled.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::sql::Sql;
use super::wire::connect::{logged_in, Connected, Target};
use super::wire::query;
use crate::store::follow::{OnReleased, Released, RETRY_PAUSE};

/// A request to the doorbells: follow (or stop following) a plain lock's key.
pub(super) type Watch = (String, bool);

/// Keys followed at once, each on a connection of its own.
const MAX_BELLS: usize = 8;
/// How long one wait for a doorbell lasts before it is asked again.
const WAIT_S: u64 = 10;
/// The longest pause between rings of a doorbell nobody holds.
const MOST_PAUSE: Duration = Duration::from_secs(1);
/// The longest pause before connecting again after failures.
const MOST_RETRY_PAUSE: Duration = Duration::from_secs(30);

/// Follows the keys asked for, a ringer each; ends (with its ringers) when
/// the store is closed or dropped.
pub(super) async fn doorbells(
    target: Arc<Target>,
    mut inbox: mpsc::UnboundedReceiver<Watch>,
    on_released: OnReleased,
) {
    let mut ringers: HashMap<String, JoinHandle<()>> = HashMap::new();
    while let Some((key, on)) = inbox.recv().await {
        if !on {
            if let Some(ringer) = ringers.remove(&key) {
                ringer.abort();
            }
            continue;
        }
        ringers.retain(|_, ringer| !ringer.is_finished());
        if ringers.contains_key(&key) || ringers.len() >= MAX_BELLS {
            continue;
        }
        let ringer = ringer(Arc::clone(&target), key.clone(), on_released.clone());
        ringers.insert(key, tokio::spawn(ringer));
    }
    for ringer in ringers.values() {
        ringer.abort();
    }
}

/// Waits for `key`'s doorbell, over and over, reporting each ring.
async fn ringer(target: Arc<Target>, key: String, on_released: OnReleased) {
    let statement = Sql::wait_for_bell(&target.sql.doorbell(&key), WAIT_S);
    let mut unheld = 0u32;
    let mut failed = 0u32;
    loop {
        if failed > 0 {
            // Unreachable, or refusing the wait (a server without GET_LOCK):
            // less and less often, up to half a minute apart.
            let pause = RETRY_PAUSE.saturating_mul(1 << failed.min(7));
            tokio::time::sleep(pause.min(MOST_RETRY_PAUSE)).await;
        }
        let Ok((mut connected, _)) = logged_in(&target).await else {
            failed = failed.saturating_add(1);
            continue;
        };
        // A release may have come while the connection was opening.
        on_released(Released::Lock, key.clone());
        loop {
            let rang = match &mut connected {
                Connected::Tcp(tcp) => rang(tcp, &target, &statement).await,
                Connected::Tls(tls) => rang(&mut **tls, &target, &statement).await,
                Connected::Unix(unix) => rang(unix, &target, &statement).await,
            };
            match rang {
                None => break,
                Some(Rang::Quiet) => unheld = 0,
                Some(Rang::Released) => {
                    failed = 0;
                    unheld = 0;
                    on_released(Released::Lock, key.clone());
                }
                Some(Rang::Unheld) => {
                    failed = 0;
                    on_released(Released::Lock, key.clone());
                    unheld = unheld.saturating_add(1);
                    let pause = Duration::from_millis(5u64 << unheld.min(8));
                    tokio::time::sleep(pause.min(MOST_PAUSE)).await;
                }
            }
        }
        failed = failed.saturating_add(1);
    }
}

/// What one wait for a doorbell found.
enum Rang {
    /// Its holder let it go (or its holder's connection ended).
    Released,
    /// Nobody held it: the lock is free, or held where its doorbell is not.
    Unheld,
    /// The wait ran out.
    Quiet,
}

/// One wait (None: the connection failed, or the server refused the wait).
async fn rang<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    target: &Target,
    statement: &str,
) -> Option<Rang> {
    let answer = query(stream, target, statement).await.ok()?;
    let row = answer.rows.first()?;
    let column = |n: usize| row.get(n).and_then(|value| value.as_deref());
    Some(match (column(0), column(1)) {
        (_, Some(b"1")) if column(0) == Some(b"1") => Rang::Unheld,
        (_, Some(b"1")) => Rang::Released,
        (_, Some(_)) => Rang::Quiet,
        (_, None) => return None,
    })
}
