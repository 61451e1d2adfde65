//! Hearing releases announced by other clients, and locks handed to this
//! process from a line.
//!
//! The release script publishes the key on `keel:released:<key>`. While this
//! process has waiters for a key, a second connection subscribes to that
//! channel and wakes them, so a waiter in one process takes the lock a moment
//! after a holder in another lets go instead of at its next poll. The poll
//! stays as the fallback: a lost announcement (or a release by a client that
//! does not announce, like the docs' ioredis store) costs latency, never
//! correctness. A cluster broadcasts PUBLISH to every node, so the subscriber
//! listens on any one node, and moves to the next if it goes away. Where a
//! plain lock's waiters wait in line (one server: `store::line`), nothing is
//! announced for them: the subscriber follows this store's own channel,
//! `keel:wake:<id>`, from its first waiter on, and hears there each lock
//! handed to it.

use std::collections::HashSet;
use std::time::Duration;

use futures_util::StreamExt;
use redis::Client;
use tokio::sync::mpsc;

use super::layout::heard;
use crate::store::follow::{pause_taking, FirstOpened, OnReleased, Released};
use crate::store::line;

/// A request to the subscriber task: follow (or stop following) a channel.
pub type Watch = (String, bool);

/// Follows the channels it is told to and reports each announced release,
/// once a connection for the operations has opened (`FirstOpened`).
/// Re-connects (and re-subscribes) after the connection drops; ends when the
/// store is closed or dropped.
pub(super) async fn subscriber(
    clients: Vec<Client>, prefix: String, wake: Option<String>, connect_timeout: Duration,
    first_opened: FirstOpened, mut inbox: mpsc::UnboundedReceiver<Watch>, on_released: OnReleased,
) {
    let mut channels: HashSet<String> = HashSet::new();
    let apply = |channels: &mut HashSet<String>, (name, on): Watch| {
        if on {
            channels.insert(name);
        } else {
            channels.remove(&name);
        }
    };
    if !first_opened
        .wait_taking(&mut inbox, |watch| apply(&mut channels, watch))
        .await
    {
        return;
    }
    // A cluster broadcasts PUBLISH to every node: any one will do, the next
    // one if it goes away.
    let mut next = 0;
    loop {
        let client = &clients[next % clients.len()];
        next += 1;
        let connected = tokio::time::timeout(connect_timeout, client.get_async_pubsub()).await;
        let Ok(Ok(pubsub)) = connected else {
            // Not reachable now: keep track of what is wanted, and try again soon.
            if !pause_taking(&mut inbox, |watch| apply(&mut channels, watch)).await {
                return;
            }
            continue;
        };
        let (mut sink, mut stream) = pubsub.split();
        let mut healthy = true;
        for name in &channels {
            healthy &= sink.subscribe(name).await.is_ok();
        }
        while healthy {
            tokio::select! {
                watch = inbox.recv() => {
                    let Some((name, on)) = watch else { return };
                    let sent = if on { sink.subscribe(&name).await } else { sink.unsubscribe(&name).await };
                    healthy = sent.is_ok();
                    apply(&mut channels, (name, on));
                }
                message = stream.next() => match message {
                    Some(message) => {
                        let Ok(text) = message.get_payload::<String>() else { continue };
                        if wake.as_deref() == Some(message.get_channel_name()) {
                            if let Some((token, asked, owner, full_key)) = line::parse(&text) {
                                if let Some(key) = full_key.strip_prefix(prefix.as_str()) {
                                    on_released(Released::Handed, line::told(token, asked, owner, key));
                                }
                            }
                        } else if let Some(key) = text.strip_prefix(prefix.as_str()) {
                            let (released, key) = heard(key);
                            on_released(released, key.to_owned());
                        }
                    }
                    None => healthy = false,
                },
            }
        }
    }
}
