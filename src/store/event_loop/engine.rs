//! The connection's event-loop side: the libuv handles, connecting on
//! Tokio and installing the socket, writing at the end of a loop turn, the
//! command timer, and delivering outcomes into JS inside a callback scope.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::os::fd::AsRawFd;
use std::ptr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use napi::sys;

use super::callbacks::{on_check, on_env_exit, on_idle, on_poll, on_timer, on_wake};
use super::conn::{Conn, Next, Outcomes, Reply, State};
use super::socket::Socket;
use super::uv;
use super::{Failure, Opened, Wire};

pub(super) struct Engine<W: Wire> {
    pub(super) env: sys::napi_env,
    pub(super) loop_: *mut uv::Loop,
    pub(super) conn: RefCell<Conn<W>>,
    /// None once closed.
    pub(super) handles: RefCell<Option<Handles>>,
    /// Where a connection opened on Tokio is left for the loop to pick up.
    pub(super) opened: Arc<Mutex<Option<Result<Opened, Failure>>>>,
    pub(super) wake: uv::AsyncSlot,
    pub(super) async_context: sys::napi_async_context,
    /// The environment's cleanup hook, removed once every handle is closed.
    pub(super) cleanup: Cell<sys::napi_async_cleanup_hook_handle>,
    /// When the timer is set to fire (loop ms), if it is.
    pub(super) timer_at: Cell<Option<u64>>,
    /// A write is due at the end of this loop iteration.
    pub(super) flush_armed: Cell<bool>,
    /// Inside the socket's own callback, which writes at its end.
    pub(super) in_poll: Cell<bool>,
    /// Held while closing, so the engine outlives its handles' callbacks.
    pub(super) keep: RefCell<Option<Rc<Engine<W>>>>,
}

pub(super) struct Handles {
    pub(super) timer: uv::Handle,
    pub(super) check: uv::Handle,
    pub(super) idle: uv::Handle,
    pub(super) wake: uv::Handle,
}

impl<W: Wire> Engine<W> {
    /// A connection to `target` on `env`'s loop (opened on first use).
    pub(super) fn new(
        env: sys::napi_env,
        target: Arc<W::Target>,
        command_timeout_ms: u64,
    ) -> Result<Rc<Engine<W>>, String> {
        let mut loop_ = ptr::null_mut();
        // SAFETY: called from a napi function on the JS thread of `env`.
        let status = unsafe { sys::napi_get_uv_event_loop(env, &mut loop_) };
        if status != sys::Status::napi_ok || loop_.is_null() {
            return Err("no event loop to drive the connection on".to_owned());
        }
        let mut async_context = ptr::null_mut();
        let mut name = ptr::null_mut();
        // SAFETY: as above; the name is a valid UTF-8 literal.
        unsafe {
            sys::napi_create_string_utf8(env, W::RESOURCE.as_ptr(), -1, &mut name);
            sys::napi_async_init(env, ptr::null_mut(), name, &mut async_context);
        }
        // SAFETY (the handle constructors): `loop_` is this thread's live loop.
        let made = unsafe {
            (|| {
                let (slot, wake) = uv::AsyncSlot::new(loop_, on_wake::<W>)?;
                Some((
                    slot,
                    Handles {
                        timer: uv::timer(loop_)?,
                        check: uv::check(loop_)?,
                        idle: uv::idle(loop_)?,
                        wake,
                    },
                ))
            })()
        };
        let Some((slot, handles)) = made else {
            return Err("could not make the event-loop handles of the connection".to_owned());
        };
        let engine = Rc::new(Engine {
            env,
            loop_,
            conn: RefCell::new(Conn::new(target, command_timeout_ms)),
            handles: RefCell::new(None),
            opened: Arc::new(Mutex::new(None)),
            wake: slot,
            async_context,
            cleanup: Cell::new(ptr::null_mut()),
            timer_at: Cell::new(None),
            flush_armed: Cell::new(false),
            in_poll: Cell::new(false),
            keep: RefCell::new(None),
        });
        let data = Rc::as_ptr(&engine) as *mut c_void;
        for handle in [&handles.timer, &handles.check, &handles.idle, &handles.wake] {
            handle.set_data(data);
            // Nothing here keeps the process alive but a command waiting (the timer, then).
            handle.set_ref(false);
        }
        *engine.handles.borrow_mut() = Some(handles);
        let mut cleanup = ptr::null_mut();
        // SAFETY: on the JS thread of `env`; `data` stays valid until the hook
        // is removed, which happens before the engine can be dropped (`shut`).
        unsafe {
            sys::napi_add_async_cleanup_hook(env, Some(on_env_exit::<W>), data, &mut cleanup)
        };
        engine.cleanup.set(cleanup);
        Ok(engine)
    }

    pub(super) fn now(&self) -> u64 {
        // SAFETY: on the loop's own thread.
        unsafe { uv::now(self.loop_) }
    }

    pub(super) fn submit(self: &Rc<Self>, request: W::Request, reply: Reply<W>) {
        let next = self.conn.borrow_mut().submit(request, reply, self.now());
        self.follow(next, false);
        self.schedule_write();
    }

    /// Act on a change of state: open a connection, deliver what is due
    /// (`scoped`: inside a callback scope of our own, from a loop callback).
    pub(super) fn follow(self: &Rc<Self>, next: Next<W>, scoped: bool) {
        if next.connect {
            self.connect();
        }
        if !next.due.is_empty() {
            if scoped {
                self.in_callback_scope(|| deliver(next.due));
            } else {
                deliver(next.due);
            }
        }
        self.rearm_timer();
    }

    /// Write at the end of this loop iteration (the check handle), without
    /// the loop blocking for I/O first (the idle handle).
    pub(super) fn schedule_write(&self) {
        if self.in_poll.get() || self.flush_armed.get() || self.conn.borrow().out.is_empty() {
            return;
        }
        if let Some(handles) = self.handles.borrow().as_ref() {
            handles.check.check_start(on_check::<W>);
            handles.idle.idle_start(on_idle);
            self.flush_armed.set(true);
        }
    }

    pub(super) fn write_now(self: &Rc<Self>) {
        let written = self.conn.borrow_mut().write();
        match written {
            Ok(more) => self.watch(more),
            Err(broken) => self.follow(broken, true),
        }
    }

    /// Watch the socket for replies, and for room to write while `more` is left.
    pub(super) fn watch(&self, more: bool) {
        let mut conn = self.conn.borrow_mut();
        if let State::Open(socket) = &mut conn.state {
            let want = uv::READABLE | if more { uv::WRITABLE } else { 0 };
            if socket.watching != want {
                socket.poll.poll_start(want, on_poll::<W>);
                socket.watching = want;
            }
        }
    }

    /// Keep the timer set for the earliest deadline while commands wait
    /// (and keep the process alive meanwhile), and stopped when none does.
    /// Once set it is left alone: when it fires, the commands past their
    /// deadline fail and it is set again, so a command costs no search.
    pub(super) fn rearm_timer(&self) {
        let handles = self.handles.borrow();
        let Some(handles) = handles.as_ref() else {
            return;
        };
        let conn = self.conn.borrow();
        if conn.live == 0 {
            if self.timer_at.take().is_some() {
                handles.timer.timer_stop();
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
        if let Some(at) = conn.next_deadline() {
            handles
                .timer
                .timer_start(on_timer::<W>, at.saturating_sub(self.now()));
            handles.timer.set_ref(true);
            self.timer_at.set(Some(at));
        }
    }

    /// Open a connection on Tokio; `on_wake` installs it.
    pub(super) fn connect(&self) {
        let target = Arc::clone(&self.conn.borrow().target);
        let (slot, wake) = (Arc::clone(&self.opened), self.wake.clone());
        napi::bindgen_prelude::spawn(async move {
            let opened = W::open(target).await;
            if let Ok(mut slot) = slot.lock() {
                *slot = Some(opened);
            }
            wake.send();
        });
    }

    pub(super) fn install(self: &Rc<Self>, opened: Result<Opened, Failure>) {
        let next = match opened {
            Ok(Opened {
                tcp,
                tls,
                server_process,
                prepared,
            }) => {
                // SAFETY: on the loop's thread; the descriptor is open, and is
                // closed only after the poll handle (field order in `Socket`).
                match unsafe { uv::poll(self.loop_, tcp.as_raw_fd()) } {
                    Some(poll) => {
                        poll.set_data(Rc::as_ptr(self) as *mut c_void);
                        poll.set_ref(false);
                        let session =
                            server_process.zip(tcp.local_addr().ok().map(|address| address.port()));
                        self.conn.borrow_mut().opened(
                            Socket::new(poll, tcp, tls),
                            session,
                            prepared,
                        );
                        Next::default()
                    }
                    None => self.conn.borrow_mut().not_opened(&Failure {
                        code: "ERR_LOCK_STORE_CONNECTION",
                        text: "could not watch the connection's socket".to_owned(),
                    }),
                }
            }
            Err(failure) => self.conn.borrow_mut().not_opened(&failure),
        };
        self.follow(next, true);
        self.write_now();
    }

    /// Close every handle; the cleanup hook goes once the last is closed.
    pub(super) fn shut(self: &Rc<Self>) {
        let Some(handles) = self.handles.borrow_mut().take() else {
            return;
        };
        *self.keep.borrow_mut() = Some(Rc::clone(self));
        self.wake.disarm();
        let engine = Rc::clone(self);
        let group = uv::CloseGroup::new(move || {
            let cleanup = engine.cleanup.replace(ptr::null_mut());
            if !cleanup.is_null() {
                // SAFETY: the hook this engine added, removed once.
                unsafe { sys::napi_remove_async_cleanup_hook(cleanup) };
            }
            // SAFETY: on the JS thread of the env the context was made in.
            unsafe { sys::napi_async_destroy(engine.env, engine.async_context) };
            engine.keep.borrow_mut().take();
        });
        let Handles {
            timer,
            check,
            idle,
            wake,
        } = handles;
        for handle in [timer, check, idle, wake] {
            handle.close_in(&group);
        }
        group.done_adding();
    }

    /// Run `deliver` as a callback from the loop into JS: in a handle scope
    /// and a callback scope, whose closing runs the promise continuations.
    pub(super) fn in_callback_scope(&self, deliver: impl FnOnce()) {
        let env = self.env;
        let (mut handles, mut resource, mut scope) =
            (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        // SAFETY: called from this env's loop callbacks, on its thread,
        // outside any other scope of ours; each scope opened is closed below.
        unsafe {
            sys::napi_open_handle_scope(env, &mut handles);
            sys::napi_create_object(env, &mut resource);
            sys::napi_open_callback_scope(env, resource, self.async_context, &mut scope);
        }
        deliver();
        // SAFETY: as above.
        unsafe {
            sys::napi_close_callback_scope(env, scope);
            sys::napi_close_handle_scope(env, handles);
        }
    }
}

/// Hand each outcome to its request's reply (which settles its promise).
pub(super) fn deliver<A>(due: Outcomes<A>) {
    for (reply, outcome) in due {
        reply(outcome);
    }
}
