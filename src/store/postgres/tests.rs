//! Both transports against a real PostgreSQL: a cluster of the test's own
//! (initdb and pg_ctl in a temporary folder, on a free loopback port, as
//! the `postgres` user when run as root; never a server already running),
//! one store on a libuv loop of the test's own and one on Tokio, each
//! taking every operation through the same steps, so both give the answers
//! the readers expect. Skipped, saying so, where PostgreSQL is not installed.

use std::cell::RefCell;
use std::ffi::{c_int, CStr};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::{PostgresOptions, PostgresStore};
use crate::store::event_loop::host::{Host, MakeHost, Task};
use crate::store::event_loop::uv;
use crate::store::{Acquired, Hold, LockStore, Op, StoreError, StoreResult};

const BIN: &str = "/usr/lib/postgresql/15/bin";

/// A throwaway cluster, stopped and removed when dropped.
struct Cluster {
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl Cluster {
    /// None where PostgreSQL is not installed.
    fn start() -> Option<Cluster> {
        if !Path::new(BIN).join("initdb").exists() {
            eprintln!("skipped: no PostgreSQL in {BIN} (install postgresql-15)");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = std::env::temp_dir().join(format!("keel-pg-rs-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        // PostgreSQL refuses to run as root: then the cluster is `postgres`'s.
        let as_postgres = output("id", &["-u"]).trim() == "0";
        let cluster = Cluster {
            dir,
            port,
            as_postgres,
        };
        if as_postgres {
            let dir = cluster.dir.to_string_lossy().into_owned();
            output("chown", &["postgres:", &dir]);
        }
        let data = cluster.dir.join("data");
        let data = data.to_string_lossy();
        cluster.run(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", "postgres", "-E", "UTF8"],
            &["--no-sync", "--no-instructions"],
        );
        let settings = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off",
            cluster.dir.display()
        );
        let log = cluster.dir.join("log");
        cluster.run(
            "pg_ctl",
            &["-D", &data, "-l", &log.to_string_lossy(), "-w", "-t", "30"],
            &["-o", &settings, "start"],
        );
        Some(cluster)
    }

    fn run(&self, command: &str, args: &[&str], more: &[&str]) {
        let program = Path::new(BIN).join(command);
        let program = program.to_string_lossy();
        let mut argv: Vec<&str> = Vec::new();
        if self.as_postgres {
            argv.extend(["-u", "postgres", "--"]);
        }
        argv.push(&program);
        argv.extend(args);
        argv.extend(more);
        let (file, argv) = if self.as_postgres {
            ("runuser", &argv[..])
        } else {
            (&*program, &argv[1..])
        };
        let done = Command::new(file)
            .args(argv)
            .current_dir(&self.dir)
            .output()
            .expect("PostgreSQL's tools run");
        assert!(
            done.status.success(),
            "{command} failed: {}{}",
            String::from_utf8_lossy(&done.stdout),
            String::from_utf8_lossy(&done.stderr)
        );
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let data = data.to_string_lossy().into_owned();
        let program = Path::new(BIN).join("pg_ctl");
        let program = program.to_string_lossy().into_owned();
        let stop = ["-D", &data, "-m", "immediate", "-w", "stop"];
        let _ = if self.as_postgres {
            Command::new("runuser")
                .args(["-u", "postgres", "--", &program])
                .args(stop)
                .output()
        } else {
            Command::new(&program).args(stop).output()
        };
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

// The parts of libuv only a loop's owner uses (Node owns the addon's).
extern "C" {
    fn uv_loop_size() -> usize;
    fn uv_loop_init(loop_: *mut uv::Loop) -> c_int;
    fn uv_run(loop_: *mut uv::Loop, mode: c_int) -> c_int;
    fn uv_loop_close(loop_: *mut uv::Loop) -> c_int;
}

const UV_RUN_NOWAIT: c_int = 2;

/// A libuv loop of the test's own, turned without waiting (nothing need
/// keep it alive), closed when dropped.
struct UvLoop {
    raw: *mut uv::Loop,
    layout: std::alloc::Layout,
}

impl UvLoop {
    fn new() -> UvLoop {
        // SAFETY: a pure size lookup.
        let size = unsafe { uv_loop_size() };
        let layout = std::alloc::Layout::from_size_align(size, 16).expect("a loop's layout");
        // SAFETY: a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<uv::Loop>();
        assert!(!raw.is_null());
        // SAFETY: zeroed memory of the size libuv asked for, initialised once.
        assert_eq!(unsafe { uv_loop_init(raw) }, 0);
        UvLoop { raw, layout }
    }

    fn turn(&self) {
        // SAFETY: our live loop, on its own thread.
        unsafe { uv_run(self.raw, UV_RUN_NOWAIT) };
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl Drop for UvLoop {
    fn drop(&mut self) {
        let limit = Instant::now() + Duration::from_secs(5);
        // SAFETY: our live loop, on its thread; closed once every handle is.
        while unsafe { uv_loop_close(self.raw) } != 0 {
            if Instant::now() > limit {
                // A handle left open: leaked rather than freed under libuv.
                eprintln!("a test left a libuv handle open");
                return;
            }
            self.turn();
        }
        // SAFETY: the allocation `new` made, which libuv no longer uses.
        unsafe { std::alloc::dealloc(self.raw.cast(), self.layout) };
    }
}

/// Napi's part, played by the test: its loop, and Tokio to open connections.
struct TestHost {
    loop_: *mut uv::Loop,
    tokio: tokio::runtime::Handle,
}

impl Host for TestHost {
    fn event_loop(&self) -> *mut uv::Loop {
        self.loop_
    }

    fn in_callback_scope(&self, deliver: &mut dyn FnMut()) {
        deliver();
    }

    fn spawn(&self, task: Task) {
        drop(self.tokio.spawn(task));
    }

    fn on_exit(&self, _on_exit: Box<dyn FnOnce()>) {}

    fn release(&self) {}
}

/// A cluster, a loop and Tokio: makes stores and runs operations to their
/// end, on whichever side they run.
struct World {
    // Dropped first: the store's connections are gone by then.
    tokio: tokio::runtime::Runtime,
    lp: UvLoop,
    cluster: Cluster,
}

impl World {
    /// None where PostgreSQL is not installed.
    fn new() -> Option<World> {
        Some(World {
            cluster: Cluster::start()?,
            tokio: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a Tokio runtime"),
            lp: UvLoop::new(),
        })
    }

    /// A store on the test's loop, or on Tokio.
    fn store(&self, on_loop: bool) -> PostgresStore {
        let (loop_, handle) = (self.lp.raw, self.tokio.handle().clone());
        let make_host = move |_resource: &'static CStr| -> Result<Box<dyn Host>, String> {
            Ok(Box::new(TestHost {
                loop_,
                tokio: handle.clone(),
            }))
        };
        let store = PostgresStore::new(
            options(self.cluster.url()),
            None,
            None,
            on_loop.then_some(&make_host as MakeHost<'_>),
        )
        .expect("a store");
        let on_the_loop = matches!(store.transport, super::Transport::EventLoop(_));
        assert_eq!(on_the_loop, on_loop);
        store
    }

    /// Rows of the lock table whose key starts with `prefix`, expired or not.
    fn rows(&self, prefix: &str) -> i64 {
        let count = "SELECT count(*) FROM keel_rust_test WHERE starts_with(key, $1)";
        self.sql(|client| async move {
            let row = client.query_one(count, &[&prefix]).await?;
            row.try_get(0)
        })
    }

    /// Run `talk` on a connection of the test's own.
    fn sql<T, F>(&self, talk: impl FnOnce(tokio_postgres::Client) -> F) -> T
    where
        F: std::future::Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let url = self.cluster.url();
        self.tokio.block_on(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("a connection of the test's own");
            tokio::spawn(connection);
            talk(client).await.expect("the test's SQL")
        })
    }

    /// Turn the loop (and let Tokio work) until `done`, or panic after 10 s.
    fn until(&self, what: &str, done: impl Fn() -> bool) {
        let limit = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < limit, "timed out waiting for {what}");
            self.lp.turn();
        }
    }

    /// The answer of `op`, which must not fail.
    fn ok<T: 'static>(&self, op: Op<T>) -> T {
        match self.settle(op) {
            Ok(value) => value,
            Err(e) => panic!("{e:?}"),
        }
    }

    fn settle<T: 'static>(&self, op: Op<T>) -> StoreResult<T> {
        match op {
            Op::Ready(result) => result,
            Op::Pending(future) => self.tokio.block_on(future),
            Op::Local(op) => {
                let outcome = Rc::new(RefCell::new(None));
                let put = Rc::clone(&outcome);
                op.start(Box::new(move |result| *put.borrow_mut() = Some(result)));
                let limit = Instant::now() + Duration::from_secs(10);
                loop {
                    if let Some(result) = outcome.borrow_mut().take() {
                        return result;
                    }
                    assert!(Instant::now() < limit, "no answer within 10 s");
                    self.lp.turn();
                }
            }
        }
    }
}

fn options(url: String) -> PostgresOptions {
    PostgresOptions {
        url,
        table: "keel_rust_test".to_owned(),
        pool_size: 2,
        connect_timeout: Duration::from_secs(5),
        command_timeout: Duration::from_secs(5),
        sweep_interval: Duration::from_secs(60),
        listen_url: None,
        tls: None,
    }
}

fn fenced(acquired: Acquired) -> bool {
    matches!(acquired, Acquired::Fenced(token) if token > 0)
}

/// Every operation once, on a store whose keys start with `prefix`.
fn every_operation(world: &World, store: &PostgresStore, prefix: &str) {
    let key = format!("{prefix}:lock");
    assert!(fenced(world.ok(store.acquire(
        Hold::Lock,
        &key,
        "a",
        5_000.0
    ))));
    let other = world.ok(store.acquire(Hold::Lock, &key, "b", 5_000.0));
    assert_eq!(other, Acquired::Refused);
    assert!(world.ok(store.would_wait(Hold::Lock, &key)));
    assert_eq!(world.ok(store.holders(Hold::Lock, &key)), 1.0);
    assert!(world.ok(store.holds(Hold::Lock, &key, "a")));
    assert!(!world.ok(store.holds(Hold::Lock, &key, "b")));
    let left = world.ok(store.remaining(Hold::Lock, &key, None));
    assert!(left.is_some_and(|ms| ms > 0.0 && ms <= 5_000.0), "{left:?}");
    assert!(world.ok(store.extend(Hold::Lock, &key, "a", 9_000.0)));
    assert!(!world.ok(store.extend(Hold::Lock, &key, "b", 9_000.0)));
    assert!(!world.ok(store.release(Hold::Lock, &key, "b")));
    assert!(world.ok(store.release(Hold::Lock, &key, "a")));
    assert!(!world.ok(store.would_wait(Hold::Lock, &key)));
    assert_eq!(world.ok(store.remaining(Hold::Lock, &key, None)), None);

    // No round trip for a key PostgreSQL text cannot hold.
    let nul = "a\0b";
    assert!(matches!(
        world.settle(store.acquire(Hold::Lock, nul, "a", 5_000.0)),
        Err(StoreError::Type(_))
    ));
    assert!(!world.ok(store.release(Hold::Lock, nul, "a")));
    assert!(!world.ok(store.would_wait(Hold::Lock, nul)));

    let key = format!("{prefix}:semaphore");
    let permit = Hold::Permit { limit: 1 };
    assert!(fenced(world.ok(store.acquire(permit, &key, "a", 5_000.0))));
    let other = world.ok(store.acquire(permit, &key, "b", 5_000.0));
    assert_eq!(other, Acquired::Refused);
    assert_eq!(world.ok(store.holders(permit, &key)), 1.0);
    assert!(world.ok(store.holds(permit, &key, "a")));
    let left = world.ok(store.remaining(permit, &key, Some("a")));
    assert!(left.is_some_and(|ms| ms > 0.0 && ms <= 5_000.0), "{left:?}");
    assert!(world.ok(store.extend(permit, &key, "a", 9_000.0)));
    assert!(world.ok(store.release(permit, &key, "a")));
    assert!(!world.ok(store.release(permit, &key, "a")));
    assert_eq!(world.ok(store.holders(permit, &key)), 0.0);
    assert!(matches!(
        world.settle(store.release(permit, nul, "a")),
        Err(StoreError::Type(_))
    ));

    let key = format!("{prefix}:read-write");
    assert!(fenced(world.ok(store.acquire(
        Hold::Read,
        &key,
        "r",
        5_000.0
    ))));
    assert!(world.ok(store.would_wait(Hold::Write, &key)));
    world.ok(store.withdraw(Hold::Write, &key));
    assert!(world.ok(store.release(Hold::Read, &key, "r")));
    store.close();
}

#[test]
fn both_transports_answer_every_operation_alike() {
    let Some(world) = World::new() else {
        return;
    };
    for (on_loop, prefix) in [(true, "loop"), (false, "tokio")] {
        let store = world.store(on_loop);
        every_operation(&world, &store, prefix);
        drop(store);
    }
    // The event loop's connections close their handles on the loop.
    for _ in 0..20 {
        world.lp.turn();
    }
}

#[test]
fn an_acquire_sweeps_expired_rows_on_either_transport() {
    let Some(world) = World::new() else {
        return;
    };
    for (on_loop, prefix) in [(true, "loop"), (false, "tokio")] {
        let old = format!("{prefix}:old:");
        let expired = format!(
            "{}; INSERT INTO keel_rust_test (key, owner, expires_at)
               SELECT '{old}' || n, 'a', 0 FROM generate_series(1, 3) AS n",
            super::schema("keel_rust_test")
        );
        world.sql(|client| async move { client.batch_execute(&expired).await });
        assert_eq!(world.rows(&old), 3);
        // A new store has not swept yet: its first acquire does.
        let store = world.store(on_loop);
        let key = format!("{prefix}:new");
        assert!(fenced(world.ok(store.acquire(
            Hold::Lock,
            &key,
            "b",
            5_000.0
        ))));
        world.until("the sweep", || world.rows(&old) == 0);
        assert_eq!(world.rows(&key), 1, "a live row stays");
        store.close();
    }
    for _ in 0..20 {
        world.lp.turn();
    }
}
