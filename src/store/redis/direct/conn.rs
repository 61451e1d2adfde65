//! The connection's state, on the JS thread: the commands waiting for a
//! reply (in the order they were sent: Redis answers in order), the bytes
//! not yet written, and what happens when the socket opens, answers, breaks
//! or is too slow. Nothing here calls into JS: what is due to JS (a reply,
//! an error) is handed back as [`Due`], for the event-loop callbacks to
//! deliver once the state is no longer borrowed.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::BytesMut;
use redis::{Value, ValueCodec};
use tokio_util::codec::Decoder;

use super::connect::{Failure, Target};
use super::request::{Request, SCRIPTS};
use super::socket::{Arrived, Socket};
use crate::store::redis::errors::RESENDS;
use crate::store::{BackendError, StoreError};

/// What a waiting command does with its reply (or its failure).
pub type Reply = Box<dyn FnOnce(Result<Value, StoreError>)>;

/// Replies and failures to deliver to JS, in order.
pub type Due = Vec<(Reply, Result<Value, StoreError>)>;

pub struct Waiting {
    pub request: Request,
    /// None once it timed out: its reply, when it comes, is read and dropped,
    /// so the replies after it still meet their own commands.
    pub reply: Option<Reply>,
    /// When it times out, in loop milliseconds, and how long it was given.
    pub deadline: u64,
    pub allowed: u64,
    /// How many times it was sent again after a connection broke under it.
    pub resent: u32,
}

pub enum State {
    /// No connection; one is opened when a command comes.
    Idle,
    /// Opening on Tokio; commands wait, unsent.
    Connecting,
    Open(Box<Socket>),
    Closed,
}

pub struct Conn {
    pub target: Arc<Target>,
    pub command_timeout: u64,
    pub state: State,
    pub waiting: VecDeque<Waiting>,
    /// How many of them still wait for their reply (not timed out).
    pub live: usize,
    /// Bytes for the open socket, not yet written.
    pub out: Vec<u8>,
    inbound: BytesMut,
    codec: ValueCodec,
    /// The scripts this connection has (an `EVAL` loads one).
    loaded: [bool; SCRIPTS],
}

/// What the event-loop side must do after a change of state.
#[derive(Default)]
pub struct Next {
    /// Open a connection (on Tokio).
    pub connect: bool,
    pub due: Due,
}

fn error(code: &'static str, name: &str, text: &str) -> StoreError {
    StoreError::Backend(BackendError {
        code,
        message: format!("RedisLockStore.{name}: {text}"),
    })
}

impl Conn {
    pub fn new(target: Arc<Target>, command_timeout: u64) -> Conn {
        Conn {
            target,
            command_timeout,
            state: State::Idle,
            waiting: VecDeque::new(),
            live: 0,
            out: Vec::new(),
            inbound: BytesMut::with_capacity(16 * 1024),
            codec: ValueCodec::default(),
            loaded: [false; SCRIPTS],
        }
    }

    /// A new command at `now`: written to `out` if the socket is open, else
    /// sent once it is (and a connection is opened if none is on its way).
    pub fn submit(&mut self, request: Request, reply: Reply, now: u64) -> Next {
        let mut next = Next::default();
        let mut timeout = self.command_timeout;
        match self.state {
            State::Closed => {
                let closed = error("ERR_LOCK_STORE_CLOSED", request.name, "the store is closed");
                next.due.push((reply, Err(closed)));
                return next;
            }
            State::Open(_) => request.encode(&mut self.out, &mut self.loaded),
            State::Connecting => timeout += self.target.connect_timeout.as_millis() as u64,
            State::Idle => {
                timeout += self.target.connect_timeout.as_millis() as u64;
                self.state = State::Connecting;
                next.connect = true;
            }
        }
        self.live += 1;
        self.waiting.push_back(Waiting {
            request,
            reply: Some(reply),
            deadline: now.saturating_add(timeout),
            allowed: timeout,
            resent: 0,
        });
        next
    }

    /// The connection opened: everything waiting is written to it.
    pub fn opened(&mut self, socket: Socket) {
        self.out.clear();
        self.inbound.clear();
        self.codec = ValueCodec::default();
        self.loaded = [false; SCRIPTS];
        self.waiting.retain(|w| w.reply.is_some());
        for w in &self.waiting {
            w.request.encode(&mut self.out, &mut self.loaded);
        }
        self.state = State::Open(Box::new(socket));
    }

    /// Opening failed: every command waiting fails with why.
    pub fn not_opened(&mut self, failure: &Failure) -> Next {
        self.state = State::Idle;
        self.live = 0;
        let mut next = Next::default();
        for w in self.waiting.drain(..) {
            if let Some(reply) = w.reply {
                next.due.push((
                    reply,
                    Err(error(failure.code, w.request.name, &failure.text)),
                ));
            }
        }
        next
    }

    /// Read what arrived and match the replies with their commands. A
    /// connection that closed or failed is given up ([`Conn::broke`]).
    pub fn read(&mut self) -> Next {
        let State::Open(socket) = &mut self.state else {
            return Next::default();
        };
        let arrived = socket.read(&mut self.inbound);
        let mut next = Next::default();
        loop {
            match self.codec.decode(&mut self.inbound) {
                Ok(Some(value)) => {
                    let Some(waiting) = self.waiting.pop_front() else {
                        return self.broke("it answered a command that was never sent");
                    };
                    self.answered(waiting, value, &mut next);
                }
                Ok(None) => break,
                Err(_) => {
                    let mut broken = self.broke("it sent something that is not a Redis reply");
                    next.due.append(&mut broken.due);
                    next.connect |= broken.connect;
                    return next;
                }
            }
        }
        let why = match arrived {
            Ok(Arrived::More) => return next,
            Ok(Arrived::Closed) => "the server closed it".to_owned(),
            Err(e) => e.to_string(),
        };
        let mut broken = self.broke(&why);
        next.due.append(&mut broken.due);
        next.connect |= broken.connect;
        next
    }

    fn answered(&mut self, waiting: Waiting, value: Value, next: &mut Next) {
        // A script the server does not know (flushed, or a restart it
        // survived): sent again as EVAL, which loads it.
        if let (Value::ServerError(e), Some(lua)) = (&value, waiting.request.lua()) {
            if e.code() == "NOSCRIPT" && waiting.reply.is_some() {
                self.loaded[lua.index] = false;
                if let State::Open(_) = self.state {
                    waiting.request.encode(&mut self.out, &mut self.loaded);
                }
                self.waiting.push_back(waiting);
                return;
            }
        }
        if let Some(reply) = waiting.reply {
            self.live -= 1;
            next.due.push((reply, Ok(value)));
        }
    }

    /// Write what is waiting to be written. Returns whether the socket must
    /// be watched for room to write the rest.
    pub fn write(&mut self) -> Result<bool, Next> {
        let State::Open(socket) = &mut self.state else {
            return Ok(false);
        };
        if self.out.is_empty() && !socket.wants_write() {
            return Ok(false);
        }
        match socket.write(&mut self.out) {
            Ok(all) => Ok(!all),
            Err(e) => Err(self.broke(&e.to_string())),
        }
    }

    /// The connection broke (`why`). Commands sent on it are sent again on a
    /// fresh one (every operation of this store may be: see `errors.rs`), up
    /// to [`RESENDS`] times each; past that they fail.
    pub fn broke(&mut self, why: &str) -> Next {
        self.state = State::Idle;
        self.out.clear();
        let mut next = Next::default();
        let display = self.target.display.clone();
        let mut kept = VecDeque::new();
        for mut w in self.waiting.drain(..) {
            let Some(reply) = w.reply.take() else {
                continue;
            };
            if w.resent < RESENDS {
                w.resent += 1;
                w.reply = Some(reply);
                kept.push_back(w);
            } else {
                let text = format!("lost the connection to {display}: {why}");
                next.due.push((
                    reply,
                    Err(error("ERR_LOCK_STORE_CONNECTION", w.request.name, &text)),
                ));
            }
        }
        self.waiting = kept;
        self.live = self.waiting.len();
        if !self.waiting.is_empty() {
            self.state = State::Connecting;
            next.connect = true;
        }
        next
    }

    /// Commands past their deadline at `now` fail; they keep their place.
    pub fn expire(&mut self, now: u64) -> Due {
        let mut due = Due::new();
        let display = &self.target.display;
        for w in self.waiting.iter_mut().filter(|w| w.deadline <= now) {
            if let Some(reply) = w.reply.take() {
                self.live -= 1;
                let text = format!("no answer from {display} within {} ms", w.allowed);
                due.push((
                    reply,
                    Err(error("ERR_LOCK_STORE_TIMEOUT", w.request.name, &text)),
                ));
            }
        }
        // Before the socket opened, nothing was sent: a timed-out command leaves no reply behind.
        if !matches!(self.state, State::Open(_)) {
            self.waiting.retain(|w| w.reply.is_some());
        }
        due
    }

    /// The earliest deadline of a command still waiting for its reply.
    pub fn next_deadline(&self) -> Option<u64> {
        self.waiting
            .iter()
            .filter(|w| w.reply.is_some())
            .map(|w| w.deadline)
            .min()
    }

    /// Closed for good: every waiting command fails.
    pub fn close(&mut self) -> Due {
        self.state = State::Closed;
        self.live = 0;
        self.out.clear();
        self.waiting
            .drain(..)
            .filter_map(|w| {
                let closed = error(
                    "ERR_LOCK_STORE_CLOSED",
                    w.request.name,
                    "the store is closed",
                );
                w.reply.map(|reply| (reply, Err(closed)))
            })
            .collect()
    }
}
