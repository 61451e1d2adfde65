//! A connection's state, on the JS thread: the requests waiting for an
//! answer (in the order they were sent: both servers answer in order), the
//! bytes not yet written, and what happens when the socket opens, answers,
//! breaks or is too slow. Nothing here calls into JS: what is due to JS (an
//! answer, an error) is handed back ([`super::due`]), for the event-loop
//! callbacks to deliver once the state is no longer borrowed.

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;

use bytes::BytesMut;

use super::due::{refusal, Due, Next, Reply};
use super::socket::{Arrived, Socket};
use super::wire::{error, Endpoint, Failure, Named, Verdict, Wire};
use crate::store::Code;

pub struct Waiting<W: Wire> {
    pub request: W::Request,
    /// None once it timed out: its answer, when it comes, is read and dropped,
    /// so the answers after it still meet their own requests.
    pub reply: Option<Reply<W>>,
    /// When it times out, in loop milliseconds, and how long it was given.
    pub deadline: u64,
    pub allowed: u64,
    /// How many times it was sent again after a connection broke under it.
    pub resent: u32,
    /// [`Conn::heard`] when it was submitted: if it is the same when the
    /// request times out, nothing came back from the server meanwhile.
    pub heard: u64,
    /// Its place in the order requests were submitted ([`Conn::submitted`]).
    pub seq: u64,
}

pub enum State {
    /// No connection; one is opened when a command comes.
    Idle,
    /// Opening on Tokio; commands wait, unsent.
    Connecting,
    Open(Box<Socket>),
    Closed,
}

pub struct Conn<W: Wire> {
    pub target: Arc<W::Target>,
    /// The server, as error messages name it, and its time bounds.
    pub endpoint: Rc<Endpoint>,
    pub state: State,
    pub waiting: VecDeque<Waiting<W>>,
    /// How many of them still wait for their reply (not timed out).
    pub live: usize,
    /// Bytes for the open socket, not yet written.
    pub out: Vec<u8>,
    inbound: BytesMut,
    session: W::Session,
    /// How many times bytes arrived from the server: what tells a slow server
    /// (something comes back, just late) from a silent connection.
    heard: u64,
    /// The open connection's server process and local port, if the server named it.
    server_session: Option<(i32, u16)>,
    /// How many requests were submitted (the next one's `seq`).
    pub submitted: u64,
    /// What to send first on the next connection ([`Wire::fence`]).
    fence: Option<W::Request>,
}

impl<W: Wire> Conn<W> {
    pub fn new(target: Arc<W::Target>, endpoint: Rc<Endpoint>) -> Conn<W> {
        Conn {
            target,
            endpoint,
            state: State::Idle,
            waiting: VecDeque::new(),
            live: 0,
            out: Vec::new(),
            inbound: BytesMut::with_capacity(16 * 1024),
            session: W::Session::default(),
            heard: 0,
            server_session: None,
            fence: None,
            submitted: 0,
        }
    }

    /// A new request at `now`: written to `out` if the socket is open, else
    /// sent once it is (and a connection is opened if none is on its way).
    pub fn submit(&mut self, request: W::Request, reply: Reply<W>, now: u64) -> Next<W> {
        let mut next = Next::default();
        let mut timeout = self.endpoint.command_timeout_ms;
        match self.state {
            State::Closed => {
                let closed = error::<W>(Code::StoreClosed, request.name(), "the store is closed");
                next.due.push((reply, Err(closed)));
                return next;
            }
            State::Open(_) => {
                if let Err(refused) = W::encode(&mut self.session, &request, &mut self.out) {
                    next.due
                        .push((reply, Err(refusal::<W>(&request, &refused))));
                    return next;
                }
            }
            State::Connecting => timeout += self.endpoint.connect_timeout_ms,
            State::Idle => {
                timeout += self.endpoint.connect_timeout_ms;
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
            heard: self.heard,
            seq: self.submitted,
        });
        self.submitted += 1;
        next
    }

    /// The connection opened (served by the server's `session`, if it named
    /// it; with what it `prepared`): everything waiting is written to it,
    /// after the fence if the last one went silent (a request it would not
    /// take fails now).
    pub fn opened(
        &mut self, socket: Socket, session: Option<(i32, u16)>, prepared: W::Prepared,
    ) -> Next<W> {
        self.out.clear();
        self.inbound.clear();
        self.session = W::Session::default();
        W::begin(&mut self.session, &self.target, prepared);
        self.server_session = session;
        self.waiting.retain(|w| w.reply.is_some());
        if let Some(fence) = self.fence.take() {
            // No reply: its answer is read and dropped, and it is not sent again.
            self.waiting.push_front(Waiting {
                request: fence,
                reply: None,
                deadline: u64::MAX,
                allowed: 0,
                resent: 0,
                heard: self.heard,
                seq: 0,
            });
        }
        let mut next = Next::default();
        for w in std::mem::take(&mut self.waiting) {
            match W::encode(&mut self.session, &w.request, &mut self.out) {
                Ok(()) => self.waiting.push_back(w),
                Err(refused) => self.fail(w, &refused, &mut next),
            }
        }
        self.state = State::Open(Box::new(socket));
        next
    }

    /// `waiting` is not sent after all: it fails with why.
    fn fail(&mut self, waiting: Waiting<W>, why: &Failure, next: &mut Next<W>) {
        if let Some(reply) = waiting.reply {
            self.live -= 1;
            next.due
                .push((reply, Err(refusal::<W>(&waiting.request, why))));
        }
    }

    /// Opening failed: every request waiting fails with why.
    pub fn not_opened(&mut self, failure: &Failure) -> Next<W> {
        self.state = State::Idle;
        self.live = 0;
        let mut next = Next::default();
        for w in self.waiting.drain(..) {
            if let Some(reply) = w.reply {
                next.due.push((
                    reply,
                    Err(error::<W>(failure.code, w.request.name(), &failure.text)),
                ));
            }
        }
        next
    }

    /// Read what arrived and match the answers with their requests. A
    /// connection that closed or failed is given up ([`Conn::broke`]).
    pub fn read(&mut self) -> Next<W> {
        let State::Open(socket) = &mut self.state else {
            return Next::default();
        };
        let before = self.inbound.len();
        let arrived = socket.read(&mut self.inbound);
        if self.inbound.len() > before {
            self.heard += 1;
        }
        let mut next = Next::default();
        loop {
            match W::decode(&mut self.session, &mut self.inbound) {
                Ok(Some(answer)) => {
                    let Some(waiting) = self.waiting.pop_front() else {
                        next.absorb(self.broke("it answered a request that was never sent"));
                        return next;
                    };
                    if let Err(why) = self.answered(waiting, answer, &mut next) {
                        next.absorb(self.broke(&why));
                        return next;
                    }
                }
                Ok(None) => break,
                Err(what) => {
                    next.absorb(self.broke(&what));
                    return next;
                }
            }
        }
        let why = match arrived {
            Ok(Arrived::More) => return next,
            Ok(Arrived::Closed) => "the server closed it".to_owned(),
            Err(e) => e.to_string(),
        };
        next.absorb(self.broke(&why));
        next
    }

    /// An answer to `waiting`; `Err(why)` when it says the connection is
    /// going away (the request is then first in line to be sent again).
    fn answered(
        &mut self, waiting: Waiting<W>, answer: W::Answer, next: &mut Next<W>,
    ) -> Result<(), String> {
        if waiting.reply.is_some() {
            match W::verdict(&mut self.session, &waiting.request, &answer) {
                Verdict::Deliver => {}
                Verdict::SendAgain => {
                    if let State::Open(_) = self.state {
                        if let Err(refused) =
                            W::encode(&mut self.session, &waiting.request, &mut self.out)
                        {
                            self.fail(waiting, &refused, next);
                            return Ok(());
                        }
                    }
                    self.waiting.push_back(waiting);
                    return Ok(());
                }
                Verdict::Broken(why) => {
                    self.waiting.push_front(waiting);
                    return Err(why);
                }
            }
        }
        if let Some(reply) = waiting.reply {
            self.live -= 1;
            next.due.push((reply, Ok(answer)));
        }
        Ok(())
    }

    /// Whether something submitted still waits to be written to the socket:
    /// bytes not yet written, or requests waiting for a connection to open.
    /// Where the server drops what follows an answer it cannot write
    /// ([`Wire::RUNS_WHAT_IT_READ`] false), a request is not yet as good as
    /// sent while a request submitted before it (`seq` below `ahead_of`)
    /// awaits its answer. (One that timed out no longer counts: the wait is
    /// bounded by the command timeout, and the process kept alive by its
    /// timer meanwhile.)
    pub fn unsent(&self, ahead_of: u64) -> bool {
        let written = match &self.state {
            State::Open(socket) => self.out.is_empty() && !socket.wants_write(),
            State::Connecting => self.live == 0,
            State::Idle | State::Closed => return false,
        };
        !written
            || (!W::RUNS_WHAT_IT_READ
                && self
                    .waiting
                    .iter()
                    .take_while(|w| w.seq < ahead_of)
                    .any(|w| w.reply.is_some()))
    }

    /// The mark [`Conn::unsent`] is asked with for the request submitted
    /// last: the requests before it.
    pub fn last_submitted(&self) -> u64 {
        self.submitted.saturating_sub(1)
    }

    /// Write what is waiting to be written. Returns whether the socket must
    /// be watched for room to write the rest.
    pub fn write(&mut self) -> Result<bool, Next<W>> {
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

    /// The connection broke (`why`). Requests sent on it are sent again on a
    /// fresh one (every operation of these stores may be), up to
    /// [`Wire::RESENDS`] times each; past that they fail.
    pub fn broke(&mut self, why: &str) -> Next<W> {
        self.state = State::Idle;
        self.out.clear();
        // Its session may live on (silent, or reset on the way) and run what
        // was sent on it later: ended first thing on the next connection.
        if self.fence.is_none() && !self.waiting.is_empty() {
            self.fence = self.server_session.take().and_then(|(process, port)| {
                W::fence(
                    &self.target,
                    process,
                    port,
                    self.endpoint.command_timeout_ms / 2,
                )
            });
        }
        let mut next = Next::default();
        let display = self.endpoint.display.clone();
        let mut kept = VecDeque::new();
        for mut w in self.waiting.drain(..) {
            let Some(reply) = w.reply.take() else {
                continue;
            };
            if w.resent < W::RESENDS {
                w.resent += 1;
                w.reply = Some(reply);
                kept.push_back(w);
            } else {
                let text = format!("lost the connection to {display}: {why}");
                next.due.push((
                    reply,
                    Err(error::<W>(Code::StoreConnection, w.request.name(), &text)),
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

    /// Requests past their deadline at `now` fail; they keep their place.
    /// If nothing at all came back from the server since one of them was
    /// sent, the connection has gone silent (a host gone, a flow dropped by
    /// a NAT or load balancer: the socket stays open and nothing arrives),
    /// and it is given up: the requests still waiting go to a fresh one.
    pub fn expire(&mut self, now: u64) -> Next<W> {
        let mut next = Next::default();
        let display = &self.endpoint.display;
        let mut silent = false;
        for w in self.waiting.iter_mut().filter(|w| w.deadline <= now) {
            if let Some(reply) = w.reply.take() {
                self.live -= 1;
                silent |= w.heard == self.heard;
                let text = format!("no answer from {display} within {} ms", w.allowed);
                next.due.push((
                    reply,
                    Err(error::<W>(Code::StoreTimeout, w.request.name(), &text)),
                ));
            }
        }
        if !matches!(self.state, State::Open(_)) {
            // Before the socket opened, nothing was sent: a timed-out request leaves no reply behind.
            self.waiting.retain(|w| w.reply.is_some());
        } else if silent {
            // The server may be stalled rather than gone: `broke` fences it.
            next.absorb(self.broke("the server sent nothing for a whole command timeout"));
        }
        next
    }

    /// The earliest deadline of a request still waiting for its reply.
    pub fn next_deadline(&self) -> Option<u64> {
        self.waiting
            .iter()
            .filter(|w| w.reply.is_some())
            .map(|w| w.deadline)
            .min()
    }

    /// Closed for good: every waiting request fails.
    pub fn close(&mut self) -> Due<W> {
        self.state = State::Closed;
        self.live = 0;
        self.out.clear();
        self.waiting
            .drain(..)
            .filter_map(|w| {
                let closed = error::<W>(Code::StoreClosed, w.request.name(), "the store is closed");
                w.reply.map(|reply| (reply, Err(closed)))
            })
            .collect()
    }
}
