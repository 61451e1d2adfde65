//! The event-loop connection, run without Node: a libuv loop of the test's
//! own (the system's libuv, linked in test builds), a [`Host`] that stands
//! in for napi, and a protocol of lines ([`Lines`]) spoken to a
//! `std::net::TcpListener` in the test that plays the server, with replies
//! split, delayed, cut off or never sent as each test needs.

mod connection;

use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void, CStr};
use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::host::{Host, Task};
use super::{connect_tcp, uv, Direct, Failure, Opened, Verdict, Wire};
use crate::store::{Op, StoreError, StoreResult};

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

/// A protocol of lines: a request is a line, its answer the next line back.
/// A line starting with `!` is not this protocol (the connection is given
/// up); the answer `again` asks for the request again on the same connection.
pub struct Lines;

pub struct Target {
    port: u16,
    display: String,
}

impl Wire for Lines {
    type Target = Target;
    type Request = String;
    type Answer = String;
    type Session = ();

    const STORE: &'static str = "TestStore";
    const RESOURCE: &'static CStr = c"TestStore";
    const RESENDS: u32 = 1;

    fn connect_timeout_ms(_target: &Target) -> u64 {
        1_000
    }

    fn display(target: &Target) -> &str {
        &target.display
    }

    fn name(_request: &String) -> &'static str {
        "op"
    }

    fn encode(_session: &mut (), request: &String, out: &mut Vec<u8>) {
        out.extend_from_slice(request.as_bytes());
        out.push(b'\n');
    }

    fn decode(_session: &mut (), inbound: &mut BytesMut) -> Result<Option<String>, String> {
        let Some(end) = inbound.iter().position(|&b| b == b'\n') else {
            return Ok(None);
        };
        let line = inbound.split_to(end + 1);
        let line = String::from_utf8_lossy(&line[..end]).into_owned();
        match line.strip_prefix('!') {
            Some(what) => Err(format!("it sent {what:?}")),
            None => Ok(Some(line)),
        }
    }

    fn verdict(_session: &mut (), _request: &String, answer: &String) -> Verdict {
        if answer == "again" {
            Verdict::SendAgain
        } else {
            Verdict::Deliver
        }
    }

    fn open(target: Arc<Target>) -> Pin<Box<dyn Future<Output = Result<Opened, Failure>> + Send>> {
        Box::pin(async move {
            let tcp = connect_tcp("127.0.0.1", target.port, &target.display).await?;
            let tcp = tcp.into_std().map_err(|e| Failure {
                code: crate::store::Code::StoreConnection,
                text: e.to_string(),
            })?;
            Ok(Opened {
                tcp,
                tls: None,
                server_process: None,
                prepared: false,
            })
        })
    }
}

/// The error code and message of an outcome, or its answer.
pub fn outcome(result: &Result<String, StoreError>) -> Result<String, (String, String)> {
    match result {
        Ok(answer) => Ok(answer.clone()),
        Err(StoreError::Backend(e)) => Err((e.code.as_str().to_owned(), e.message.clone())),
        Err(StoreError::Type(text)) => Err(("TypeError".to_owned(), text.clone())),
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

/// A test's world: a loop, Tokio, a server on a free port, and the store's
/// side of one connection to it.
pub struct World {
    pub direct: Option<Direct<Lines>>,
    pub answers: Rc<RefCell<Vec<Result<String, StoreError>>>>,
    pub harness: Harness,
}

impl World {
    /// Connections to `port` with commands timing out after `timeout_ms`.
    pub fn new(port: u16, timeout_ms: u64) -> World {
        let harness = Harness::new();
        let direct = Direct::<Lines>::new(
            &harness.make_host(),
            Target {
                port,
                display: format!("the test server on port {port}"),
            },
            1,
            timeout_ms,
        )
        .expect("the connection's handles");
        World {
            direct: Some(direct),
            answers: Rc::default(),
            harness,
        }
    }

    pub fn direct(&self) -> &Direct<Lines> {
        self.direct.as_ref().expect("the store's side, not dropped")
    }

    /// Send `request`; its outcome lands in `answers`.
    pub fn submit(&self, request: &str) {
        let answers = Rc::clone(&self.answers);
        let local = self.direct().local().expect("the loop's own thread");
        local.submit(
            request.to_owned(),
            Box::new(move |outcome| answers.borrow_mut().push(outcome)),
        );
    }

    /// Run the loop until `count` outcomes are in; they are returned.
    pub fn outcomes(&self, count: usize) -> Vec<Result<String, (String, String)>> {
        self.harness.lp.run_until(&format!("{count} outcomes"), || {
            self.answers.borrow().len() >= count
        });
        self.answers.borrow().iter().map(outcome).collect()
    }
}

/// A server on a free port of 127.0.0.1 whose connections are each served
/// by `serve` (given its number, in the order they came, the connection, and
/// a reader of it) on a thread of their own. Returns the port and how many
/// connections came.
pub fn server(
    serve: impl Fn(usize, TcpStream, &mut BufReader<TcpStream>) + Send + Sync + 'static,
) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    let serve = Arc::new(serve);
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("its address").port();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { return };
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let serve = Arc::clone(&serve);
            thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("a second handle"));
                serve(n, stream, &mut reader);
            });
        }
    });
    (port, accepted)
}

/// The next request line a server connection got (without its newline).
pub fn read_line(reader: &mut BufReader<TcpStream>) -> Option<String> {
    let mut line = String::new();
    match reader.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches('\n').to_owned()),
    }
}

/// Write `bytes` and send them now.
pub fn send(stream: &mut TcpStream, bytes: &[u8]) {
    // The client may have given the connection up already: not the server's concern.
    let _ = stream.write_all(bytes);
    let _ = stream.flush();
}
