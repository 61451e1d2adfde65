//! Hearing that a lock was handed to this process. MySQL has no
//! LISTEN/NOTIFY; a process with waiters in line keeps two connections of
//! its own (outside the event loop's: they block): one holds a user lock
//! (the process's bed), and the other calls the line's ear procedure
//! (`line_sql`), which holds the process's user lock and waits for the bed
//! until a hand-over to the process ends the wait (`KILL QUERY` of that
//! session), then answers what was handed. Each is reported as a hand-over
//! told.
//!
//! An attempt in line finds a lock handed to its process too, so a hand-over
//! the ear misses (its connection lost as it answered, a server that will not
//! let the hand-over end its sleep) costs time, never the lock. The ear
//! listens while any key has waiters here, and its connection closes once
//! none has (within one sleep).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::hashes::{hash_hex, hex};
use super::wire::connect::{logged_in, Connected};
use super::wire::target::Target;
use super::wire::{exchange, ServerAnswer};
use crate::store::event_loop::Failure;
use crate::store::follow::{pause_taking, OnReleased, Released};
use crate::store::line::told;

/// A request to the ear: follow (or stop following) a plain lock's key.
pub(super) type Watch = (String, bool);

/// The longest sleep of one call, after which the ear looks whether anyone
/// still waits here (and calls again).
const MOST_SLEEP_S: u32 = 2;
/// The pause after the server refused a call (say, the procedure is
/// missing), growing to this.
const MOST_PAUSE: Duration = Duration::from_secs(5);

/// Listens for hand-overs to the process `me` while any key is followed;
/// ends when the store is closed or dropped.
pub(super) async fn ear(
    target: Arc<Target>, me: String, mut inbox: mpsc::UnboundedReceiver<Watch>,
    on_released: OnReleased,
) {
    // The process's id is random: its hash names its bed apart from every other's.
    let bed = format!("keel:bed:{}", &hash_hex(me.as_bytes())[..40]);
    let take_bed = format!("SELECT GET_LOCK('{bed}', {MOST_SLEEP_S})");
    let statement = format!(
        "CALL {}(X'{}', '{bed}', {MOST_SLEEP_S})",
        target.sql.line.names[1],
        hex(me.as_bytes())
    );
    let mut followed = HashSet::new();
    let take = |followed: &mut HashSet<String>, (key, on): Watch| {
        if on {
            followed.insert(key);
        } else {
            followed.remove(&key);
        }
    };
    loop {
        while followed.is_empty() {
            match inbox.recv().await {
                Some(watch) => take(&mut followed, watch),
                None => return,
            }
        }
        let Some((mut connected, bed)) = connect(&target, &take_bed).await else {
            if !pause_taking(&mut inbox, |watch| take(&mut followed, watch)).await {
                return;
            }
            continue;
        };
        let mut refused = 0u32;
        loop {
            loop {
                match inbox.try_recv() {
                    Ok(watch) => take(&mut followed, watch),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => return,
                }
            }
            if followed.is_empty() {
                break;
            }
            match listen(&mut connected, &target, &statement).await {
                Heard::Lost => break,
                Heard::Refused => {
                    // Ended by a hand-over mid-statement (the next call
                    // answers it), or refused outright: again, later and later.
                    refused = refused.saturating_add(1);
                    if refused > 1 {
                        let pause = Duration::from_millis(10u64 << refused.min(10));
                        tokio::time::sleep(pause.min(MOST_PAUSE)).await;
                    }
                }
                Heard::Handed(handed) => {
                    refused = 0;
                    for text in handed {
                        on_released(Released::Handed, text);
                    }
                }
            }
        }
        // Dropped: the server lets the process's user locks go with the sessions.
        drop((connected, bed));
    }
}

/// What one call of the ear answered.
enum Heard {
    /// The connection failed.
    Lost,
    /// The server answered with an error.
    Refused,
    /// Hand-overs to this process, each as it is told (none: the sleep ran out).
    Handed(Vec<String>),
}

/// The ear's connection, and the bed's, which holds the bed (None: either
/// could not be opened, or the bed is held elsewhere).
async fn connect(target: &Target, take_bed: &str) -> Option<(Connected, Connected)> {
    let (mut bed, _) = logged_in(target).await.ok()?;
    let taken = ask(&mut bed, target, take_bed).await.ok()?.ok()?;
    let first = taken.rows.first()?.first()?.as_deref();
    if first != Some(b"1") {
        return None;
    }
    let (ear, _) = logged_in(target).await.ok()?;
    Some((ear, bed))
}

/// Run `sql` on `connected`.
async fn ask(
    connected: &mut Connected, target: &Target, sql: &str,
) -> Result<ServerAnswer, Failure> {
    match connected {
        Connected::Tcp(tcp) => exchange(tcp, target, sql).await,
        Connected::Tls(tls) => exchange(&mut **tls, target, sql).await,
        #[cfg(unix)]
        Connected::Unix(unix) => exchange(unix, target, sql).await,
    }
}

async fn listen(connected: &mut Connected, target: &Target, statement: &str) -> Heard {
    let answer = match ask(connected, target, statement).await {
        Err(_) => return Heard::Lost,
        Ok(Err(_)) => return Heard::Refused,
        Ok(Ok(answer)) => answer,
    };
    let mut handed = Vec::new();
    for row in &answer.rows {
        let column = |n: usize| row.get(n).and_then(|value| value.as_deref());
        let number = |n: usize| {
            column(n)
                .and_then(|text| std::str::from_utf8(text).ok())
                .and_then(|text| text.parse::<u64>().ok())
        };
        let (Some(token), Some(asked), Some(owner), Some(key)) =
            (number(0), number(1), column(2), column(3))
        else {
            // Another connection holds the process's user lock (an ear
            // whose connection died, until the server notices), or the bed
            // is nobody's: both connections again.
            return Heard::Lost;
        };
        let owner = String::from_utf8_lossy(owner);
        handed.push(told(token, asked, &owner, &String::from_utf8_lossy(key)));
    }
    Heard::Handed(handed)
}
