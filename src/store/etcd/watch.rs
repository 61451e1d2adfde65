//! Hearing releases: while this process has waiters, one watch stream (a
//! connection of its own) watches each waited-for hold's keys (a plain
//! lock's line, a semaphore's permits or a read-write key's holds: a range)
//! for a deletion, a release or the end of a holder's lease alike. A
//! semaphore's or read-write key's waiters are woken by any; a plain lock's
//! line wakes nobody but the store whose place was right behind the entry
//! that went, which looks whether its place is first now (`line.rs`).
//! Connects again after the stream breaks, and then wakes every waiter
//! once, as a release may have come meanwhile; the waiters' poll stays as
//! the fallback.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::grpc::{frame, Answers};
use super::layout::{lock_line, permits, range_end, read_write};
use super::line::Heard;
use super::look::{self, Lock, Tell};
use super::messages::paths::WATCH;
use super::messages::Event;
use super::messages::{
    WatchAsk, WatchCancelRequest, WatchCreateRequest, WatchProgressRequest, WatchRequest,
    WatchResponse, DELETE, NO_PUT,
};
use super::ops::Shared;
use crate::store::follow::{pause_taking, OnReleased, Released};

/// What is followed: a plain lock's key, or a semaphore's or read-write key's.
type Followed = (Released, String);

/// A request to the watching task: follow (or stop following) a key.
pub type Watch = (Followed, bool);

/// The keys followed, by the id of the watch that follows each.
struct Following {
    ids: HashMap<Followed, i64>,
    keys: HashMap<i64, Followed>,
    next_id: i64,
}

/// Where a followed key's holds live: a key, or a range (its start and end).
type Where = (Vec<u8>, Vec<u8>);

impl Following {
    /// Follow or stop following a key: the request that tells the stream,
    /// if anything changed.
    fn apply(
        &mut self, (key, on): Watch, stored: &impl Fn(&Followed) -> Where,
    ) -> Option<WatchRequest> {
        if on {
            if self.ids.contains_key(&key) {
                return None;
            }
            self.next_id += 1;
            let id = self.next_id;
            let request = create(stored(&key), id);
            self.ids.insert(key.clone(), id);
            self.keys.insert(id, key);
            Some(request)
        } else {
            let id = self.ids.remove(&key)?;
            self.keys.remove(&id);
            Some(WatchRequest {
                ask: Some(WatchAsk::Cancel(WatchCancelRequest { watch_id: id })),
            })
        }
    }
}

/// Watches on `members` once any key is followed, and reports each deletion
/// of one; ends when the store is closed or dropped.
pub async fn watcher(
    shared: Arc<Shared>, mut inbox: mpsc::UnboundedReceiver<Watch>, on_released: OnReleased,
) {
    let members = Arc::clone(&shared.members);
    let prefix = shared.prefix.clone();
    let mut followed = Following {
        ids: HashMap::new(),
        keys: HashMap::new(),
        next_id: 0,
    };
    let every_key_under = |under: Vec<u8>| {
        let end = range_end(&under);
        (under, end)
    };
    let stored = |(released, key): &Followed| match released {
        Released::Semaphore => every_key_under(permits(&prefix, key)),
        Released::ReadWrite => every_key_under(read_write(&prefix, key)),
        Released::Lock | Released::Handed => every_key_under(lock_line(&prefix, key)),
    };
    let heard = Hearing {
        shared: Arc::clone(&shared),
        on_released: on_released.clone(),
        tell: {
            let on_released = on_released.clone();
            Arc::new(move |text| on_released(Released::Handed, text))
        },
    };
    // The member whose stream ended last: the next is opened past it (the
    // member calls go to may be the one that went silent).
    let mut past: Option<usize> = None;
    loop {
        while followed.ids.is_empty() {
            match inbox.recv().await {
                Some(watch) => {
                    followed.apply(watch, &stored);
                }
                None => return,
            }
        }
        // Opened and answering within the time a call may take, or tried
        // again after a pause (a member without a leader refuses at once).
        let within = members.connect_timeout + members.command_timeout;
        let from = past.map(|at| at + 1);
        if let Ok(Ok((channel, token, at))) =
            tokio::time::timeout(within, members.open_apart(from)).await
        {
            past = Some(at);
            let started = tokio::time::timeout(within, async {
                let (mut send, answering) =
                    channel.start(WATCH, token.as_deref(), None).await.ok()?;
                for (key, id) in &followed.ids {
                    send.send_data(frame(&create(stored(key), *id)), false)
                        .ok()?;
                }
                let answers = answering.answers::<WatchResponse>().await.ok()?;
                Some((send, answers))
            });
            if let Ok(Some((mut send, mut answers))) = started.await {
                // A release may have come before the watches were made (a
                // place in a lock's line looks as its watch is made).
                for followed in followed.ids.keys() {
                    let (released, key) = followed;
                    if *released != Released::Lock
                        || heard.shared.line.place(&stored(followed).0).is_none()
                    {
                        on_released(*released, key.clone());
                    }
                }
                follow(
                    &mut followed,
                    &mut inbox,
                    &mut send,
                    &mut answers,
                    &heard,
                    &stored,
                )
                .await;
            }
        }
        if inbox.is_closed()
            || !pause_taking(&mut inbox, |watch| {
                followed.apply(watch, &stored);
            })
            .await
        {
            return;
        }
    }
}

/// How often a stream is asked to answer while it says nothing. A member
/// cut off without closing its connections (a partition, a machine that
/// stopped) leaves a stream that hears nothing and says nothing; after a
/// question it leaves unanswered until the next, the stream is given up
/// and the next member watched instead (its reconnection wakes every
/// waiter). The question is etcd's progress request, which etcd 3.4 and
/// later answer; gRPC pings would not do, as etcd answers pings more often
/// than every 5 s by closing the connection.
const HEARTBEAT: Duration = Duration::from_millis(1_000);

/// Follow on one stream until it breaks, goes silent (see [`HEARTBEAT`])
/// or the store goes.
async fn follow(
    followed: &mut Following, inbox: &mut mpsc::UnboundedReceiver<Watch>,
    send: &mut h2::SendStream<Bytes>, answers: &mut Answers<WatchResponse>, heard: &Hearing,
    stored: &impl Fn(&Followed) -> Where,
) {
    let on_released = &heard.on_released;
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    heartbeat.tick().await;
    let mut unanswered = false;
    loop {
        tokio::select! {
            // In this order: a tick that comes with an answer waiting (the
            // task held up) is not taken for silence.
            biased;
            watch = inbox.recv() => match watch {
                Some(watch) => {
                    let Some(request) = followed.apply(watch, stored) else { continue };
                    if send.send_data(frame(&request), false).is_err() {
                        return;
                    }
                }
                None => {
                    send.send_reset(h2::Reason::CANCEL);
                    return;
                }
            },
            answer = answers.recv() => match answer {
                Ok(Some(answer)) => {
                    unanswered = false;
                    let Some(key) = followed.keys.get(&answer.watch_id) else { continue };
                    if answer.canceled {
                        // Ended by the server: its waiters look now, and a
                        // later watch of the key makes a new one.
                        let (released, key) = key.clone();
                        followed.keys.remove(&answer.watch_id);
                        followed.ids.remove(&(released, key.clone()));
                        on_released(released, key);
                    } else if key.0 == Released::Lock {
                        heard.in_line(&key.1, &stored(key).0, answer.created, &answer.events);
                    } else if answer.events.iter().any(|event| event.kind == DELETE) {
                        on_released(key.0, key.1.clone());
                    }
                }
                Ok(None) | Err(_) => return,
            },
            _ = heartbeat.tick() => {
                if unanswered {
                    send.send_reset(h2::Reason::CANCEL);
                    return;
                }
                // (etcd 3.5 answers nothing on a stream that watches nothing.)
                if followed.ids.is_empty() {
                    continue;
                }
                let progress = WatchRequest { ask: Some(WatchAsk::Progress(WatchProgressRequest {})) };
                if send.send_data(frame(&progress), false).is_err() {
                    return;
                }
                unanswered = true;
            }
        }
    }
}

fn create((key, range_end): Where, id: i64) -> WatchRequest {
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

/// Who hears what a stream tells.
struct Hearing {
    shared: Arc<Shared>,
    on_released: OnReleased,
    tell: Tell,
}

impl Hearing {
    /// What a plain lock's line `line` told: its watch made (this store's
    /// place may have come first before it was), or entries gone.
    fn in_line(&self, key: &str, line: &[u8], created: bool, events: &[Event]) {
        let mut look = created && self.shared.line.place(line).is_some();
        let mut wake = false;
        for event in events.iter().filter(|event| event.kind == DELETE) {
            let Some(kv) = &event.kv else { continue };
            match self.shared.line.heard(line, &kv.key) {
                Heard::Look => look = true,
                Heard::Wake => wake = true,
                Heard::Nothing => {}
            }
        }
        if wake {
            (self.on_released)(Released::Lock, key.to_owned());
        }
        if look {
            let lock = Lock {
                key: key.to_owned(),
                line: line.to_vec(),
            };
            let (shared, tell) = (Arc::clone(&self.shared), Arc::clone(&self.tell));
            let on_released = self.on_released.clone();
            tokio::spawn(async move {
                if look::look_again(&shared, &lock, &tell).await.is_err() {
                    // Its waiters ask themselves.
                    on_released(Released::Lock, lock.key);
                }
            });
        }
    }
}
