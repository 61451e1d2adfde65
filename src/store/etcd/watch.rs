//! Hearing releases: while this process has waiters, one watch stream (a
//! connection of its own) watches each waited-for semaphore's permits or
//! read-write key's holds (a range) for a deletion, a release or the end of
//! a holder's lease alike, and wakes their waiters on any. Plain locks'
//! lines are heard through one watch on all of them, made once and kept
//! ([`LINGER`]) while this process waits in any: etcd lets a watch made
//! while its member applies writes catch up only every 100 ms, which a
//! watch made per wait would pay on a busy line at each hand-over. A line
//! wakes nobody but the store whose place was right behind the entry that
//! went, which looks whether its place is first now (`line.rs`); deletions
//! in lines nobody here waits in are dropped as they come.
//! Connects again after the stream breaks, and then wakes every waiter
//! once, as a release may have come meanwhile; the waiters' poll stays as
//! the fallback.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

pub use super::following::Watch;
use super::following::{create, Change, Followed, Following, Where};
use super::grpc::{frame, Answers};
use super::heard::Heard;
use super::layout::{every_line, line_of, lock_line, permits, range_end, read_write};
use super::look::{self, Lock, Tell};
use super::messages::paths::WATCH;
use super::messages::KeyValue;
use super::messages::{WatchAsk, WatchProgressRequest, WatchRequest, WatchResponse, DELETE};
use super::ops::Shared;
use crate::store::follow::{pause_taking, OnReleased, Released};

/// Watches on `members` once any key is followed, and reports each deletion
/// of one; ends when the store is closed or dropped.
pub async fn watcher(
    shared: Arc<Shared>, mut inbox: mpsc::UnboundedReceiver<Watch>, on_released: OnReleased,
) {
    let members = Arc::clone(&shared.members);
    let prefix = shared.prefix.clone();
    let mut followed = Following::new();
    let every_key_under = |under: Vec<u8>| {
        let end = range_end(&under);
        (under, end)
    };
    let stored = |(released, key): &Followed| match released {
        Released::Semaphore => every_key_under(permits(&prefix, key)),
        Released::ReadWrite => every_key_under(read_write(&prefix, key)),
        // (The empty key: every line.)
        Released::Lock | Released::Handed if key.is_empty() => every_key_under(every_line(&prefix)),
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
        // (A line watch kept past its last wait is not made again.)
        if followed.lock_lines.is_empty() {
            followed.lines = None;
        }
        followed.lines_from = i64::MAX;
        while followed.is_empty() {
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
                let lines = followed
                    .lines
                    .map(|id| ((Released::Lock, String::new()), id));
                for (key, id) in followed
                    .ids
                    .iter()
                    .chain(lines.as_ref().map(|(k, id)| (k, id)))
                {
                    send.send_data(frame(&create(stored(key), *id)), false)
                        .ok()?;
                }
                let answers = answering.answers::<WatchResponse>().await.ok()?;
                Some((send, answers))
            });
            if let Ok(Some((mut send, mut answers))) = started.await {
                // A release may have come before the watches were made (a
                // place in a lock's line looks as its watch is made).
                for (released, key) in followed.ids.keys() {
                    on_released(*released, key.clone());
                }
                for (line, (key, _)) in &followed.lock_lines {
                    if heard.shared.line.place(line).is_none() {
                        on_released(Released::Lock, key.clone());
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
                Some(watch) => match followed.apply(watch, stored) {
                    Change::None => {}
                    Change::Send(request) => {
                        if send.send_data(frame(&request), false).is_err() {
                            return;
                        }
                    }
                    Change::Look(key, line) => heard.look(key, line),
                },
                None => {
                    send.send_reset(h2::Reason::CANCEL);
                    return;
                }
            },
            answer = answers.recv() => match answer {
                Ok(Some(answer)) => {
                    unanswered = false;
                    let at = answer.header.as_ref().map_or(0, |h| h.revision);
                    followed.seen = followed.seen.max(at);
                    if Some(answer.watch_id) == followed.lines {
                        if answer.created {
                            followed.lines_from = at;
                        }
                        if !heard.lines(followed, &answer) {
                            // Ended by the server: made again (its waiters look).
                            let request = followed.new_lines_watch(stored);
                            if send.send_data(frame(&request), false).is_err() {
                                return;
                            }
                        }
                        continue;
                    }
                    let Some(key) = followed.keys.get(&answer.watch_id) else { continue };
                    if answer.canceled {
                        // Ended by the server: its waiters look now, and a
                        // later watch of the key makes a new one.
                        let (released, key) = key.clone();
                        followed.keys.remove(&answer.watch_id);
                        followed.ids.remove(&(released, key.clone()));
                        on_released(released, key);
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
                if let Some(request) = followed.linger_over() {
                    if send.send_data(frame(&request), false).is_err() {
                        return;
                    }
                }
                // (etcd 3.5 answers nothing on a stream that watches nothing.)
                if followed.ids.is_empty() && followed.lines.is_none() {
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

/// Who hears what a stream tells.
struct Hearing {
    shared: Arc<Shared>,
    on_released: OnReleased,
    tell: Tell,
}

impl Hearing {
    /// What the watch on every line told: made (a place in a line waited
    /// in may have come first before it was), or entries gone, each heard
    /// in its line if a wait here is in it. False if the server ended it:
    /// every line's waiters ask.
    fn lines(&self, followed: &mut Following, answer: &WatchResponse) -> bool {
        if answer.canceled {
            for (key, _) in followed.lock_lines.values() {
                (self.on_released)(Released::Lock, key.clone());
            }
            return false;
        }
        if answer.created {
            for (line, (key, _)) in &followed.lock_lines {
                if self.shared.line.place(line).is_some() {
                    self.look(key.clone(), line.clone());
                }
            }
        }
        // (A watch made again after its stream broke, on a member behind the
        // last, tells again what was heard: once is all a deletion means.)
        let handled = followed.handled;
        let mut by_line: Vec<(&[u8], Vec<&KeyValue>)> = Vec::new();
        for kv in answer
            .events
            .iter()
            .filter(|e| e.kind == DELETE)
            .filter_map(|e| e.kv.as_ref())
            .filter(|kv| kv.mod_revision > handled)
        {
            followed.handled = followed.handled.max(kv.mod_revision);
            let line = line_of(&kv.key);
            match by_line.iter_mut().find(|(l, _)| *l == line) {
                Some((_, gone)) => gone.push(kv),
                None => by_line.push((line, vec![kv])),
            }
        }
        for (line, gone) in by_line {
            if let Some((key, since)) = followed.lock_lines.get(line) {
                self.in_line(key, line, &gone, followed.lines_from.max(*since));
            }
        }
        true
    }

    /// The entries `gone` of the plain lock `key`'s line `line` went
    /// (every deletion in it heard since `heard_from`).
    fn in_line(&self, key: &str, line: &[u8], gone: &[&KeyValue], heard_from: i64) {
        let mut look = false;
        let mut wake = false;
        for kv in gone {
            match self.shared.line.heard(line, kv, heard_from) {
                Heard::First(handed, own) => {
                    let lock = Lock {
                        key: key.to_owned(),
                        line: line.to_vec(),
                    };
                    look::started(&self.shared, &lock, &handed, &own, &self.tell);
                }
                Heard::Look => look = true,
                Heard::Wake => wake = true,
                Heard::Nothing => {}
            }
        }
        if wake {
            (self.on_released)(Released::Lock, key.to_owned());
        }
        if look {
            self.look(key.to_owned(), line.to_vec());
        }
    }

    /// This store's place in `line` looks whether it is first.
    fn look(&self, key: String, line: Vec<u8>) {
        let lock = Lock { key, line };
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
