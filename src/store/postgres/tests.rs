//! Both transports against a real PostgreSQL: a cluster of the test's own
//! (initdb and pg_ctl in a temporary folder, on a free loopback port, as
//! the `postgres` user when run as root; never a server already running),
//! one store on a libuv loop of the test's own and one on Tokio, each
//! taking every operation through the same steps, so both give the answers
//! the readers expect. PostgreSQL must be installed (`apt-get install postgresql`).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::PostgresStore;
use crate::store::event_loop::host::MakeHost;
use crate::store::event_loop::tests::Harness;
use crate::store::TableOptions;
use crate::store::{Acquired, HoldKind, LockStore, StoreError, Wait};

const BIN: &str = "/usr/lib/postgresql/15/bin";

/// A throwaway cluster, stopped and removed when dropped.
pub(super) struct Cluster {
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl Cluster {
    fn start() -> Cluster {
        assert!(
            Path::new(BIN).join("initdb").exists(),
            "no PostgreSQL in {BIN}: install it with `apt-get install postgresql`"
        );
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
        cluster
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

    pub fn url(&self) -> String {
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

/// A cluster, a loop and Tokio: makes stores and runs operations to their
/// end, on whichever side they run.
pub(super) struct World {
    // Dropped first: the store's connections are gone by then.
    pub harness: Harness,
    pub cluster: Cluster,
}

impl World {
    pub fn new() -> World {
        World {
            cluster: Cluster::start(),
            harness: Harness::new(),
        }
    }

    /// A store on the test's loop, or on Tokio.
    fn store(&self, on_loop: bool) -> PostgresStore {
        let make_host = self.harness.make_host();
        let store = PostgresStore::new(
            options(self.cluster.url()),
            None,
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
    pub fn sql<T, F>(&self, talk: impl FnOnce(tokio_postgres::Client) -> F) -> T
    where
        F: std::future::Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let url = self.cluster.url();
        self.harness.tokio().block_on(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("a connection of the test's own");
            tokio::spawn(connection);
            talk(client).await.expect("the test's SQL")
        })
    }

    /// Turn the loop (and let Tokio work) until `done`, or panic after 10 s.
    fn until(&self, what: &str, done: impl Fn() -> bool) {
        self.harness.lp.run_until(what, done);
    }
}

pub(super) fn options(url: String) -> TableOptions {
    TableOptions::testing(&url, "keel_rust_test")
}

fn fenced(acquired: Acquired) -> bool {
    matches!(acquired, Acquired::Fenced(token) if token > 0)
}

/// Every operation once, on a store whose keys start with `prefix`.
fn every_operation(world: &World, store: &PostgresStore, prefix: &str) {
    let h = &world.harness;
    let take = |hold, key: &str, owner| h.ok(store.acquire(hold, key, owner, 5_000.0, Wait::Now));
    let key = format!("{prefix}:lock");
    assert!(fenced(take(HoldKind::Lock, &key, "a")));
    let other = take(HoldKind::Lock, &key, "b");
    assert_eq!(other, Acquired::Refused);
    assert!(h.ok(store.would_wait(HoldKind::Lock, &key)));
    assert_eq!(h.ok(store.holders(HoldKind::Lock, &key)), 1.0);
    assert!(h.ok(store.holds(HoldKind::Lock, &key, "a")));
    assert!(!h.ok(store.holds(HoldKind::Lock, &key, "b")));
    let left = h.ok(store.remaining(HoldKind::Lock, &key, None));
    assert!(left.is_some_and(|ms| ms > 0.0 && ms <= 5_000.0), "{left:?}");
    assert!(h.ok(store.extend(HoldKind::Lock, &key, "a", 9_000.0)));
    assert!(!h.ok(store.extend(HoldKind::Lock, &key, "b", 9_000.0)));
    assert!(!h.ok(store.release(HoldKind::Lock, &key, "b")));
    assert!(h.ok(store.release(HoldKind::Lock, &key, "a")));
    assert!(!h.ok(store.would_wait(HoldKind::Lock, &key)));
    assert_eq!(h.ok(store.remaining(HoldKind::Lock, &key, None)), None);

    // No round trip for a key PostgreSQL text cannot hold.
    let nul = "a\0b";
    assert!(matches!(
        h.settle(store.acquire(HoldKind::Lock, nul, "a", 5_000.0, Wait::Now)),
        Err(StoreError::Type(_))
    ));
    assert!(!h.ok(store.release(HoldKind::Lock, nul, "a")));
    assert!(!h.ok(store.would_wait(HoldKind::Lock, nul)));

    let key = format!("{prefix}:semaphore");
    let permit = HoldKind::Permit { limit: 1 };
    assert!(fenced(take(permit, &key, "a")));
    let other = take(permit, &key, "b");
    assert_eq!(other, Acquired::Refused);
    assert_eq!(h.ok(store.holders(permit, &key)), 1.0);
    assert!(h.ok(store.holds(permit, &key, "a")));
    let left = h.ok(store.remaining(permit, &key, Some("a")));
    assert!(left.is_some_and(|ms| ms > 0.0 && ms <= 5_000.0), "{left:?}");
    assert!(h.ok(store.extend(permit, &key, "a", 9_000.0)));
    assert!(h.ok(store.release(permit, &key, "a")));
    assert!(!h.ok(store.release(permit, &key, "a")));
    assert_eq!(h.ok(store.holders(permit, &key)), 0.0);
    assert!(matches!(
        h.settle(store.release(permit, nul, "a")),
        Err(StoreError::Type(_))
    ));

    let key = format!("{prefix}:read-write");
    assert!(fenced(take(HoldKind::Read, &key, "r")));
    assert!(h.ok(store.would_wait(HoldKind::Write, &key)));
    h.ok(store.withdraw(HoldKind::Write, &key));
    assert!(h.ok(store.release(HoldKind::Read, &key, "r")));
    store.close();
}

#[test]
fn both_transports_answer_every_operation_alike() {
    let world = World::new();
    for (on_loop, prefix) in [(true, "loop"), (false, "tokio")] {
        let store = world.store(on_loop);
        every_operation(&world, &store, prefix);
        drop(store);
    }
    // The event loop's connections close their handles on the loop.
    world.harness.lp.run_for(40);
}

#[test]
fn an_acquire_sweeps_expired_rows_on_either_transport() {
    let world = World::new();
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
        assert!(fenced(world.harness.ok(store.acquire(
            HoldKind::Lock,
            &key,
            "b",
            5_000.0,
            Wait::Now
        ))));
        world.until("the sweep", || world.rows(&old) == 0);
        assert_eq!(world.rows(&key), 1, "a live row stays");
        store.close();
    }
    world.harness.lp.run_for(40);
}
