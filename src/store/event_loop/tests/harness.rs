//! A libuv loop of the test's own (the system's libuv, linked in test
//! builds), a [`Host`] that stands in for napi, and Tokio beside them: what
//! a store's event-loop connections need to run under `cargo test`, without
//! Node (the line protocol's tests here, and the server stores' own).

use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void, CStr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::store::event_loop::host::{Host, Task};
use crate::store::event_loop::uv;
use crate::store::{Op, StoreResult};

/// The parts of libuv only a loop's owner uses: Node owns the addon's.
mod ffi {
    use super::*;

    pub const UV_RUN_ONCE: c_int = 1;
    pub const UV_RUN_NOWAIT: c_int = 2;

    extern "C" {
        pub fn uv_loop_size() -> usize;
        pub fn uv_loop_init(loop_: *mut uv::Loop) -> c_int;
        pub fn uv_run(loop_: *mut uv::Loop, mode: c_int) -> c_int;
        pub fn uv_loop_close(loop_: *mut uv::Loop) -> c_int;
    }
}

/// A libuv loop owned by the test, closed (every handle's close callback
/// run) when dropped. A loop with nothing that keeps it alive runs nothing
/// at all, where Node's always has something; so while the test runs it,
/// a timer of its own keeps it alive and bounds each wait to 20 ms.
pub struct TestLoop {
    raw: *mut uv::Loop,
    layout: std::alloc::Layout,
    alive: Option<uv::Timer>,
}

unsafe extern "C" fn keeps_alive(_handle: *mut c_void) {}

impl TestLoop {
    pub fn new() -> TestLoop {
        // SAFETY: a pure size lookup.
        let size = unsafe { ffi::uv_loop_size() };
        let layout = std::alloc::Layout::from_size_align(size, 16).expect("a loop's layout");
        // SAFETY: a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<uv::Loop>();
        assert!(!raw.is_null());
        // SAFETY: zeroed memory of the size libuv asked for, initialised once.
        assert_eq!(unsafe { ffi::uv_loop_init(raw) }, 0);
        // SAFETY: the loop just made, on this thread; the callback reads no data.
        let alive =
            unsafe { uv::Timer::new(raw, std::ptr::null_mut(), keeps_alive) }.expect("a timer");
        alive.set_ref(true);
        TestLoop {
            raw,
            layout,
            alive: Some(alive),
        }
    }

    /// One turn of the loop, waiting at most 20 ms for something to happen.
    fn turn(&self) {
        if let Some(alive) = &self.alive {
            alive.start(20).expect("the keep-alive timer");
        }
        // SAFETY: our live loop, on its own thread.
        unsafe { ffi::uv_run(self.raw, ffi::UV_RUN_ONCE) };
    }

    /// Run the loop until `done`, or panic after 10 s.
    pub fn run_until(&self, what: &str, done: impl Fn() -> bool) {
        let limit = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < limit, "timed out waiting for {what}");
            self.turn();
        }
    }

    /// Run the loop for `ms` milliseconds.
    pub fn run_for(&self, ms: u64) {
        let until = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < until {
            self.turn();
        }
    }
}

impl Default for TestLoop {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestLoop {
    fn drop(&mut self) {
        // What the test left to do at the end of a turn (a store dropped
        // closes its connection there), then only closing handles.
        for _ in 0..5 {
            self.turn();
        }
        drop(self.alive.take());
        let limit = Instant::now() + Duration::from_secs(5);
        // SAFETY: our live loop, on its thread; closed once every handle is.
        while unsafe { ffi::uv_loop_close(self.raw) } != 0 {
            if Instant::now() > limit {
                // A handle left open: leaked rather than freed under libuv.
                eprintln!("a test left a libuv handle open");
                return;
            }
            // SAFETY: as above.
            unsafe { ffi::uv_run(self.raw, ffi::UV_RUN_NOWAIT) };
        }
        // SAFETY: the allocation `new` made, which libuv no longer uses.
        unsafe { std::alloc::dealloc(self.raw.cast(), self.layout) };
    }
}

/// What the test host saw.
#[derive(Default)]
pub struct Seen {
    /// Callback scopes entered (deliveries from the loop's own callbacks).
    pub scopes: Cell<usize>,
    /// Connections whose handles were all closed.
    pub released: Cell<usize>,
}

/// The [`Host`] of a test: its loop, Tokio for opening connections, and
/// deliveries made straight to the replies (there is no JS).
pub struct TestHost {
    loop_: *mut uv::Loop,
    tokio: tokio::runtime::Handle,
    seen: Rc<Seen>,
}

impl Host for TestHost {
    fn event_loop(&self) -> *mut uv::Loop {
        self.loop_
    }

    fn in_callback_scope(&self, deliver: &mut dyn FnMut()) {
        self.seen.scopes.set(self.seen.scopes.get() + 1);
        deliver();
    }

    fn spawn(&self, task: Task) {
        drop(self.tokio.spawn(task));
    }

    fn on_exit(&self, _on_exit: Box<dyn FnOnce()>) {}

    fn release(&self) {
        self.seen.released.set(self.seen.released.get() + 1);
    }
}

/// A loop of the test's own and Tokio beside it: what a store's event-loop
/// connections need, without Node. Stores made with its hosts are dropped
/// before it (declared after it), so their handles close on its loop.
pub struct Harness {
    pub seen: Rc<Seen>,
    tokio: tokio::runtime::Runtime,
    pub lp: TestLoop,
}

impl Harness {
    pub fn new() -> Harness {
        Harness {
            seen: Rc::new(Seen::default()),
            tokio: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a Tokio runtime"),
            lp: TestLoop::new(),
        }
    }

    /// The hosts of connections on this loop ([`super::host::MakeHost`]).
    pub fn make_host(&self) -> impl Fn(&'static CStr) -> Result<Box<dyn Host>, String> {
        let (loop_, handle, seen) = (
            self.lp.raw,
            self.tokio.handle().clone(),
            Rc::clone(&self.seen),
        );
        move |_resource| {
            Ok(Box::new(TestHost {
                loop_,
                tokio: handle.clone(),
                seen: Rc::clone(&seen),
            }) as Box<dyn Host>)
        }
    }

    /// The Tokio beside the loop (where connections open).
    pub fn tokio(&self) -> &tokio::runtime::Runtime {
        &self.tokio
    }

    /// The answer of `op`, which must not fail.
    pub fn ok<T: 'static>(&self, op: Op<T>) -> T {
        match self.settle(op) {
            Ok(value) => value,
            Err(e) => panic!("{e:?}"),
        }
    }

    /// Run `op` to its outcome: on this loop, or on Tokio.
    pub fn settle<T: 'static>(&self, op: Op<T>) -> StoreResult<T> {
        match op {
            Op::Ready(outcome) => outcome,
            Op::Pending(future) => self.tokio.block_on(future),
            Op::Local(op) => {
                let outcome = Rc::new(RefCell::new(None));
                let into = Rc::clone(&outcome);
                op.start(Box::new(move |result| *into.borrow_mut() = Some(result)));
                self.lp
                    .run_until("an operation's outcome", || outcome.borrow().is_some());
                let result = outcome.borrow_mut().take();
                result.expect("an outcome")
            }
        }
    }
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}
