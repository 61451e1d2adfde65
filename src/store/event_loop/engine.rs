//! The connection's event-loop side: its libuv handles, connecting on Tokio
//! and installing the socket, writing at the end of a loop turn, the
//! command timer, and delivering outcomes into JS inside a callback scope.
//! The callbacks that drive it (`callbacks`) are given to its handles when
//! they are made; nothing here names them.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use super::conn::{Conn, State};
use super::due::{deliver, Next, Reply};
use super::host::Host;
use super::socket::Socket;
use super::uv;
use super::wire::{Endpoint, Failure, Opened, Outcome, Wire};
use crate::store::Code;

/// How many writes one call of [`Engine::write_now`] makes at most.
const WRITE_ROUNDS: usize = 4;

pub(super) struct Engine<W: Wire> {
    pub(super) host: Box<dyn Host>,
    pub(super) loop_: *mut uv::Loop,
    pub(super) conn: RefCell<Conn<W>>,
    /// None until made, and again once closed.
    pub(super) handles: RefCell<Option<Handles>>,
    /// What the socket's watcher, made when a connection opens, calls.
    pub(super) on_socket: uv::PollCb,
    /// Where a connection opened on Tokio is left for the loop to pick up.
    pub(super) opened: Arc<Mutex<Option<Outcome<W::Prepared>>>>,
    /// When the timer is set to fire (loop ms), if it is.
    pub(super) timer_at: Cell<Option<u64>>,
    /// A write is due at the end of this loop iteration.
    pub(super) flush_armed: Cell<bool>,
    /// Inside the socket's own callback, which writes at its end.
    pub(super) in_poll: Cell<bool>,
    /// The store was collected: the check callback closes the connection.
    pub(super) collected: Cell<bool>,
    /// Held while closing, so the engine outlives its handles' callbacks.
    pub(super) keep: RefCell<Option<Rc<Engine<W>>>>,
    /// Told once everything submitted before they asked is written to the
    /// socket, or never will be ([`Engine::when_sent`]).
    pub(super) on_sent: RefCell<Vec<WhenSent>>,
}

/// Someone told when what they submitted is as good as sent: the mark it
/// was submitted at ([`Conn::last_submitted`]), and what to call.
pub(super) type WhenSent = (u64, Box<dyn FnOnce()>);

pub(super) struct Handles {
    pub(super) timer: uv::Timer,
    pub(super) check: uv::Check,
    pub(super) idle: uv::Idle,
    pub(super) wake: uv::Async,
    /// How Tokio wakes the loop once a connection opened.
    pub(super) wake_slot: uv::AsyncSlot,
}

impl<W: Wire> Engine<W> {
    /// A connection to `target` on `host`'s loop (opened on first use), its
    /// handles not made yet ([`Engine::set_handles`]).
    pub(super) fn new(
        host: Box<dyn Host>, target: Arc<W::Target>, endpoint: Rc<Endpoint>, on_socket: uv::PollCb,
    ) -> Rc<Engine<W>> {
        let loop_ = host.event_loop();
        Rc::new(Engine {
            host,
            loop_,
            conn: RefCell::new(Conn::new(target, endpoint)),
            handles: RefCell::new(None),
            on_socket,
            opened: Arc::new(Mutex::new(None)),
            timer_at: Cell::new(None),
            flush_armed: Cell::new(false),
            in_poll: Cell::new(false),
            collected: Cell::new(false),
            keep: RefCell::new(None),
            on_sent: RefCell::new(Vec::new()),
        })
    }

    /// What the handles' callbacks find the engine by.
    pub(super) fn data(self: &Rc<Self>) -> *mut c_void {
        Rc::as_ptr(self) as *mut c_void
    }

    /// Its handles are made: it is live, and closes if the environment goes.
    pub(super) fn set_handles(self: &Rc<Self>, handles: Handles) {
        *self.handles.borrow_mut() = Some(handles);
        let engine = Rc::downgrade(self);
        self.host.on_exit(Box::new(move || {
            if let Some(engine) = engine.upgrade() {
                // Waiting commands are dropped with the environment.
                drop(engine.conn.borrow_mut().close());
                engine.shut();
            }
        }));
    }

    pub(super) fn now(&self) -> u64 {
        // SAFETY: the host's loop is live, and this is its thread.
        unsafe { uv::now(self.loop_) }
    }

    pub(super) fn submit(self: &Rc<Self>, request: W::Request, reply: Reply<W>) {
        let next = self.conn.borrow_mut().submit(request, reply, self.now());
        self.follow(next, false);
        self.schedule_write();
    }

    /// Call `sent` once everything submitted so far is written to the
    /// socket (in the kernel's send buffer, so it reaches the server even if
    /// the process exits next; where the server drops what follows an
    /// answer it cannot write, also once no request before the last one
    /// awaits its answer: [`Conn::unsent`]), or never will be (the
    /// connection failed: the requests' own replies say so). Called from JS,
    /// while something is unsent.
    pub(super) fn when_sent(&self, sent: Box<dyn FnOnce()>) {
        let mark = self.conn.borrow().last_submitted();
        self.on_sent.borrow_mut().push((mark, sent));
    }

    /// Tell those waiting that what they submitted went out, if it all has
    /// (`scoped` as in [`Engine::follow`]). Returns whether anyone was told.
    fn tell_sent(&self, scoped: bool) -> bool {
        let told: Vec<Box<dyn FnOnce()>> = {
            let conn = self.conn.borrow();
            let mut waiting = self.on_sent.borrow_mut();
            if waiting.is_empty() {
                return false;
            }
            let all = std::mem::take(&mut *waiting);
            // Usually all went out together: then nothing is sorted.
            let (sent, still) = match all.iter().all(|(mark, _)| !conn.unsent(*mark)) {
                true => (all, Vec::new()),
                false => all.into_iter().partition(|(mark, _)| !conn.unsent(*mark)),
            };
            *waiting = still;
            sent.into_iter().map(|(_, sent)| sent).collect()
        };
        if told.is_empty() {
            return false;
        }
        let mut told = Some(told);
        let mut tell = || {
            for sent in told.take().into_iter().flatten() {
                sent();
            }
        };
        if scoped {
            self.host.in_callback_scope(&mut tell);
        } else {
            tell();
        }
        true
    }

    /// Act on a change of state: open a connection, deliver what is due
    /// (`scoped`: inside a callback scope of our own, from a loop callback).
    pub(super) fn follow(self: &Rc<Self>, next: Next<W>, scoped: bool) {
        if next.connect {
            self.connect();
        }
        if !next.due.is_empty() {
            if scoped {
                let mut due = Some(next.due);
                self.host.in_callback_scope(&mut || {
                    if let Some(due) = due.take() {
                        deliver(due);
                    }
                });
            } else {
                deliver(next.due);
            }
        }
        self.rearm_timer();
        self.tell_sent(scoped);
    }

    /// Write at the end of this loop iteration (the check handle), without
    /// the loop blocking for I/O first (the idle handle).
    pub(super) fn schedule_write(self: &Rc<Self>) {
        if self.in_poll.get() || self.flush_armed.get() || self.conn.borrow().out.is_empty() {
            return;
        }
        let armed = match self.handles.borrow().as_ref() {
            Some(handles) => handles.check.start().and_then(|()| handles.idle.start()),
            None => return,
        };
        match armed {
            Ok(()) => self.flush_armed.set(true),
            // Not at the end of the turn, then: now.
            Err(_) => {
                self.stop_flush();
                self.write_now(false);
            }
        }
    }

    /// The end-of-turn write is done (or was not armed).
    pub(super) fn stop_flush(&self) {
        if let Some(handles) = self.handles.borrow().as_ref() {
            handles.check.stop();
            handles.idle.stop();
        }
        self.flush_armed.set(false);
    }

    /// Write what waits (`scoped` as in [`Engine::follow`]). Those told it
    /// went out may submit more at once (a run()'s release written, the
    /// next acquire made): that is written here too, a few rounds at most,
    /// then at the end of the turn.
    pub(super) fn write_now(self: &Rc<Self>, scoped: bool) {
        for _ in 0..WRITE_ROUNDS {
            let written = self.conn.borrow_mut().write();
            match written {
                Ok(more) => self.watch(more),
                Err(broken) => return self.follow(broken, scoped),
            }
            // Submitted while telling: written by the next round, not armed
            // for the end of the turn.
            let was = self.in_poll.replace(true);
            let told = self.tell_sent(scoped);
            self.in_poll.set(was);
            if !told || self.conn.borrow().out.is_empty() {
                return;
            }
        }
        self.schedule_write();
    }

    /// Watch the socket for replies, and for room to write while `more` is
    /// left. A socket that cannot be watched is given up.
    fn watch(self: &Rc<Self>, more: bool) {
        let started = {
            let mut conn = self.conn.borrow_mut();
            let State::Open(socket) = &mut conn.state else {
                return;
            };
            let want = uv::READABLE | if more { uv::WRITABLE } else { 0 };
            if socket.watching == want {
                return;
            }
            let started = socket.poll.start(want);
            if started.is_ok() {
                socket.watching = want;
            }
            started
        };
        if let Err(e) = started {
            let broken = self
                .conn
                .borrow_mut()
                .broke(&format!("could not watch the socket: {e}"));
            self.follow(broken, true);
        }
    }

    /// Keep the timer set for the earliest deadline while commands wait
    /// (and keep the process alive meanwhile), and stopped when none does.
    /// Once set it is left alone: when it fires, the commands past their
    /// deadline fail and it is set again, so a command costs no search.
    pub(super) fn rearm_timer(self: &Rc<Self>) {
        let started = {
            let handles = self.handles.borrow();
            let Some(handles) = handles.as_ref() else {
                return;
            };
            let conn = self.conn.borrow();
            if conn.live == 0 {
                if self.timer_at.take().is_some() {
                    handles.timer.stop();
                    handles.timer.set_ref(false);
                }
                return;
            }
            if let Some(set) = self.timer_at.get() {
                // Left alone, unless the newest request is due first (one sent
                // once the connection opened, behind one that waited for it).
                match conn.waiting.back() {
                    Some(newest) if newest.reply.is_some() && newest.deadline < set => {}
                    _ => return,
                }
            }
            let Some(at) = conn.next_deadline() else {
                return;
            };
            let started = handles.timer.start(at.saturating_sub(self.now()));
            if started.is_ok() {
                handles.timer.set_ref(true);
                self.timer_at.set(Some(at));
            }
            started
        };
        if let Err(e) = started {
            // Nothing would bound the wait: the requests go to a fresh
            // connection, up to their resends, then fail.
            let broken = self
                .conn
                .borrow_mut()
                .broke(&format!("could not set the command timer: {e}"));
            self.follow(broken, true);
        }
    }

    /// Open a connection on Tokio; the wake callback installs it.
    pub(super) fn connect(&self) {
        let Some(wake) = self.handles.borrow().as_ref().map(|h| h.wake_slot.clone()) else {
            return;
        };
        let target = Arc::clone(&self.conn.borrow().target);
        let slot = Arc::clone(&self.opened);
        self.host.spawn(Box::pin(async move {
            let opened = W::open(target).await;
            if let Ok(mut slot) = slot.lock() {
                *slot = Some(opened);
            }
            wake.send();
        }));
    }

    /// A connection opened on Tokio (or failed to): watch its socket and
    /// write what waits.
    pub(super) fn install(self: &Rc<Self>, opened: Outcome<W::Prepared>) {
        let next = match opened {
            Ok(Opened {
                stream,
                tls,
                server_process,
                prepared,
            }) => {
                // SAFETY: on the loop's thread; the socket is open, and is
                // closed only after the poll handle (field order in `Socket`);
                // the engine outlives its handles (`keep`).
                match unsafe {
                    uv::Poll::new(self.loop_, stream.os_sock(), self.data(), self.on_socket)
                } {
                    Ok(poll) => {
                        let session = server_process.zip(stream.local_port());
                        self.conn.borrow_mut().opened(
                            Socket::new(poll, stream, tls),
                            session,
                            prepared,
                        )
                    }
                    Err(e) => self.conn.borrow_mut().not_opened(&Failure {
                        code: Code::StoreConnection,
                        text: format!("could not watch the connection's socket: {e}"),
                    }),
                }
            }
            Err(failure) => self.conn.borrow_mut().not_opened(&failure),
        };
        self.follow(next, true);
        self.write_now(true);
    }

    /// The store was collected: close at the end of this loop iteration, in
    /// a callback where waiting requests can be failed into JS.
    pub(super) fn close_when_collected(self: &Rc<Self>) {
        let armed = match self.handles.borrow().as_ref() {
            Some(handles) => handles.check.start().and_then(|()| handles.idle.start()),
            None => return,
        };
        self.collected.set(true);
        *self.keep.borrow_mut() = Some(Rc::clone(self));
        if armed.is_err() {
            // Not from a callback of ours: closed now, the requests waiting
            // failed without a callback scope.
            self.stop_flush();
            self.close(false);
        }
    }

    /// Close for good, failing what waits (`scoped` as in [`Engine::follow`]).
    pub(super) fn close(self: &Rc<Self>, scoped: bool) {
        let due = self.conn.borrow_mut().close();
        self.follow(
            Next {
                connect: false,
                due,
            },
            scoped,
        );
        self.shut();
    }

    /// Close every handle; the host is released once the last is closed.
    pub(super) fn shut(self: &Rc<Self>) {
        let Some(handles) = self.handles.borrow_mut().take() else {
            return;
        };
        *self.keep.borrow_mut() = Some(Rc::clone(self));
        handles.wake_slot.disarm();
        let engine = Rc::clone(self);
        let group = uv::CloseGroup::new(move || {
            engine.host.release();
            engine.keep.borrow_mut().take();
        });
        let Handles {
            timer,
            check,
            idle,
            wake,
            wake_slot: _,
        } = handles;
        timer.close_in(&group);
        check.close_in(&group);
        idle.close_in(&group);
        wake.close_in(&group);
        group.done_adding();
    }
}
