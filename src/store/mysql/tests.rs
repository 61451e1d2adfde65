//! The store against a real MariaDB: a server of the test's own
//! (`mariadb-install-db` and `mariadbd` in a temporary folder, on a free
//! loopback port, as the `mysql` user when run as root; never a server
//! already running), the store on a libuv loop of the test's own, every
//! operation through the same steps as the other server stores' tests, and
//! the line the store keeps. MariaDB must be installed
//! (`apt-get install mariadb-server`).

use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::MySqlStore;
use crate::store::event_loop::host::MakeHost;
use crate::store::event_loop::tests::Harness;
use crate::store::follow::OnReleased;
use crate::store::line::contract::{
    leaving_keeps_a_lock_handed_over, more_waiting_keep_their_place,
    the_line_hands_the_lock_over_in_order,
};
use crate::store::TableOptions;
use crate::store::{Acquired, HoldKind, LockStore, Wait};

/// A throwaway server, killed and its folder removed when dropped.
struct Server {
    dir: PathBuf,
    port: u16,
    child: Child,
}

/// Where a program is, from the places Debian puts MariaDB's.
fn program(name: &str) -> PathBuf {
    ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|path| path.exists())
        .unwrap_or_else(|| panic!("no {name}: install it with `apt-get install mariadb-server`"))
}

/// The number `id` prints with `args`.
fn id_of(args: &[&str]) -> u32 {
    let out = Command::new("id").args(args).output().expect("id runs");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a numeric id")
}

impl Server {
    fn start() -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = std::env::temp_dir().join(format!("keel-my-rs-{}-{port}", std::process::id()));
        let (data, temp) = (dir.join("data"), dir.join("tmp"));
        std::fs::create_dir_all(&temp).expect("a temporary folder");
        // mariadbd refuses to run as root: then the folder is `mysql`'s, and
        // the programs run as `mysql`. Temporary files in the folder's own
        // tmp: a mariadbd starting elsewhere clears its tmpdir's `#sql*`.
        let as_mysql = id_of(&["-u"]) == 0;
        let owner = as_mysql.then(|| (id_of(&["-u", "mysql"]), id_of(&["-g", "mysql"])));
        if as_mysql {
            let status = Command::new("chown")
                .args(["-R", "mysql:mysql"])
                .arg(&dir)
                .status()
                .expect("chown runs");
            assert!(status.success(), "chown of {}", dir.display());
        }
        let run_as = |command: &mut Command| {
            if let Some((uid, gid)) = owner {
                command.uid(uid).gid(gid);
            }
        };
        let datadir = format!("--datadir={}", data.display());
        let tmpdir = format!("--tmpdir={}", temp.display());
        let mut install = Command::new(program("mariadb-install-db"));
        install
            .args(["--no-defaults", &datadir, &tmpdir])
            .args([
                "--auth-root-authentication-method=normal",
                "--innodb-log-file-size=8M",
            ])
            .current_dir(&dir);
        run_as(&mut install);
        let installed = install.output().expect("mariadb-install-db runs");
        assert!(
            installed.status.success(),
            "mariadb-install-db failed: {}{}",
            String::from_utf8_lossy(&installed.stdout),
            String::from_utf8_lossy(&installed.stderr)
        );
        let mut server = Command::new(program("mariadbd"));
        server
            .args([
                "--no-defaults",
                &datadir,
                &tmpdir,
                "--bind-address=127.0.0.1",
            ])
            .arg(format!("--port={port}"))
            .arg(format!("--socket={}", dir.join("sock").display()))
            .arg(format!("--pid-file={}", dir.join("pid").display()))
            .arg(format!("--log-error={}", dir.join("log.err").display()))
            .args(["--skip-log-bin", "--innodb-log-file-size=8M"])
            .args(["--innodb-flush-log-at-trx-commit=2"])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        run_as(&mut server);
        let child = server.spawn().expect("mariadbd starts");
        let server = Server { dir, port, child };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "mariadbd did not listen within 30 s: {}",
                std::fs::read_to_string(server.dir.join("log.err")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/test", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A server, a loop and Tokio.
struct World {
    // Dropped first: the store's connections are gone by then.
    harness: Harness,
    server: Server,
}

impl World {
    fn new() -> World {
        let world = World {
            server: Server::start(),
            harness: Harness::new(),
        };
        // Once the server takes logins (its `test` database made by the install).
        let store = world.store(None);
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Err(e) = world.harness.settle(store.ping()) {
            assert!(Instant::now() < deadline, "no login within 30 s: {e:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
        store.close();
        world
    }

    fn store(&self, told: Option<OnReleased>) -> MySqlStore {
        let make_host = self.harness.make_host();
        let options = TableOptions::testing(&self.server.url(), "keel_rust_test");
        MySqlStore::new(options, told, &make_host as MakeHost<'_>).expect("a store")
    }
}

fn fenced(acquired: Acquired) -> bool {
    matches!(acquired, Acquired::Fenced(token) if token > 0)
}

#[test]
fn every_operation_answers_as_the_readers_expect() {
    let world = World::new();
    let store = world.store(None);
    let h = &world.harness;
    let take = |hold, key, owner| h.ok(store.acquire(hold, key, owner, 5_000.0, Wait::Now));
    let lock = HoldKind::Lock;
    assert!(fenced(take(lock, "k", "a")));
    let other = take(lock, "k", "b");
    assert_eq!(other, Acquired::Refused);
    assert!(h.ok(store.would_wait(lock, "k")));
    assert!(h.ok(store.holds(lock, "k", "a")));
    assert!(!h.ok(store.holds(lock, "k", "b")));
    let left = h.ok(store.remaining(lock, "k", None));
    assert!(left.is_some_and(|ms| ms > 0.0 && ms <= 5_000.0), "{left:?}");
    assert!(h.ok(store.extend(lock, "k", "a", 9_000.0)));
    assert!(!h.ok(store.extend(lock, "k", "b", 9_000.0)));
    assert!(!h.ok(store.release(lock, "k", "b")));
    assert!(h.ok(store.release(lock, "k", "a")));
    assert!(!h.ok(store.would_wait(lock, "k")));
    assert_eq!(h.ok(store.remaining(lock, "k", None)), None);
    // Tokens grow across acquisitions of a key.
    let Acquired::Fenced(first) = take(lock, "t", "a") else {
        panic!("fenced");
    };
    assert!(h.ok(store.release(lock, "t", "a")));
    let Acquired::Fenced(second) = take(lock, "t", "b") else {
        panic!("fenced");
    };
    assert!(second > first, "{first} then {second}");

    let permit = HoldKind::Permit { limit: 1 };
    assert!(fenced(take(permit, "s", "a")));
    let other = take(permit, "s", "b");
    assert_eq!(other, Acquired::Refused);
    assert_eq!(h.ok(store.holders(permit, "s")), 1.0);
    assert!(h.ok(store.holds(permit, "s", "a")));
    assert!(h.ok(store.extend(permit, "s", "a", 9_000.0)));
    assert!(h.ok(store.release(permit, "s", "a")));
    assert!(!h.ok(store.release(permit, "s", "a")));
    assert_eq!(h.ok(store.holders(permit, "s")), 0.0);

    assert!(fenced(h.ok(store.acquire(
        HoldKind::Read,
        "rw",
        "r",
        5_000.0,
        Wait::Now
    ))));
    assert!(h.ok(store.would_wait(HoldKind::Write, "rw")));
    h.ok(store.withdraw(HoldKind::Write, "rw"));
    assert!(h.ok(store.release(HoldKind::Read, "rw", "r")));
    store.close();
    world.harness.lp.run_for(40);
}

#[test]
fn the_line_hands_the_lock_over_in_order_and_tells_its_process() {
    let world = World::new();
    let make = |told: OnReleased| world.store(Some(told));
    the_line_hands_the_lock_over_in_order(&world.harness, &make);
}

#[test]
fn an_attempt_with_more_waiting_keeps_their_place_however_it_gets_in() {
    let world = World::new();
    let make = |told: OnReleased| world.store(Some(told));
    more_waiting_keep_their_place(&world.harness, &make);
}

#[test]
fn a_lock_handed_to_a_place_left_stays_its_process_s() {
    let world = World::new();
    let make = |told: OnReleased| world.store(Some(told));
    leaving_keeps_a_lock_handed_over(&world.harness, &make);
}
