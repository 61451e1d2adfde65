//! The store against a real `redis-server` the test starts on a free port:
//! the operations through the event loop's connection (a libuv loop of the
//! test's own, [`crate::store::event_loop::tests::Harness`]) and through
//! Tokio's, with the same answers; scripts the server forgot, and a
//! connection the server killed. Then the options checked up front.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;
use crate::store::event_loop::tests::Harness;
use crate::store::StoreError;

/// A `redis-server` of the test's own, stopped when dropped.
pub(super) struct Server {
    child: Child,
    port: u16,
}

impl Server {
    pub(super) fn start() -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir", "/tmp"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server to start: install it with `apt-get install redis-server`");
        let server = Server { child, port };
        let limit = Instant::now() + Duration::from_secs(10);
        while server.command(&["PING"]).as_deref() != Some("+PONG\r\n") {
            assert!(
                Instant::now() < limit,
                "redis-server did not answer on port {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// Send one command on a connection of its own; its reply's first bytes.
    fn command(&self, words: &[&str]) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        let mut request = format!("*{}\r\n", words.len());
        for word in words {
            request.push_str(&format!("${}\r\n{word}\r\n", word.len()));
        }
        stream.write_all(request.as_bytes()).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut reply = [0u8; 256];
        let read = stream.read(&mut reply).ok()?;
        Some(String::from_utf8_lossy(&reply[..read]).into_owned())
    }

    pub(super) fn options(&self) -> RedisOptions {
        RedisOptions {
            url: format!("redis://127.0.0.1:{}", self.port),
            prefix: "test:".into(),
            connect_timeout: Duration::from_secs(2),
            command_timeout: Duration::from_secs(2),
            tls: None,
            cluster: Vec::new(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A store on `harness`'s event loop.
fn on_loop(harness: &Harness, options: RedisOptions) -> RedisStore {
    RedisStore::new(options, None, Some(&harness.make_host())).expect("a store")
}

/// Every operation of every kind of hold, with the answers a store owes.
fn every_operation_answers(harness: &Harness, store: &RedisStore) {
    let (lock, permit, read, write) = (
        HoldKind::Lock,
        HoldKind::Permit { limit: 2 },
        HoldKind::Read,
        HoldKind::Write,
    );
    let Ok(Acquired::Fenced(first)) =
        harness.settle(store.acquire(lock, "k", "a", 10_000.0, Wait::Now))
    else {
        panic!("the first acquire takes the lock with a token");
    };
    assert!(matches!(
        harness.settle(store.acquire(lock, "k", "b", 10_000.0, Wait::Now)),
        Ok(Acquired::Refused)
    ));
    assert!(
        matches!(harness.settle(store.acquire(lock, "k", "a", 10_000.0, Wait::Now)), Ok(Acquired::Fenced(t)) if t > first),
        "an acquire sent again finds its own lock"
    );
    assert_eq!(harness.settle(store.holds(lock, "k", "a")).ok(), Some(true));
    assert_eq!(
        harness.settle(store.holds(lock, "k", "b")).ok(),
        Some(false)
    );
    let left = harness
        .settle(store.remaining(lock, "k", None))
        .expect("remaining");
    assert!(
        matches!(left, Some(ms) if ms > 9_000.0 && ms <= 10_000.0),
        "{left:?}"
    );
    assert_eq!(
        harness.settle(store.extend(lock, "k", "b", 20_000.0)).ok(),
        Some(false)
    );
    assert_eq!(
        harness.settle(store.extend(lock, "k", "a", 20_000.0)).ok(),
        Some(true)
    );
    assert_eq!(harness.settle(store.would_wait(lock, "k")).ok(), Some(true));
    assert_eq!(harness.settle(store.holders(lock, "k")).ok(), Some(1.0));
    assert_eq!(
        harness.settle(store.release(lock, "k", "b")).ok(),
        Some(false)
    );
    assert_eq!(
        harness.settle(store.release(lock, "k", "a")).ok(),
        Some(true)
    );
    assert_eq!(
        harness.settle(store.would_wait(lock, "k")).ok(),
        Some(false)
    );
    assert_eq!(
        harness.settle(store.remaining(lock, "k", None)).ok(),
        Some(None)
    );

    for owner in ["a", "b"] {
        assert!(matches!(
            harness.settle(store.acquire(permit, "s", owner, 10_000.0, Wait::Now)),
            Ok(Acquired::Fenced(_))
        ));
    }
    assert!(matches!(
        harness.settle(store.acquire(permit, "s", "c", 10_000.0, Wait::Now)),
        Ok(Acquired::Refused)
    ));
    assert_eq!(harness.settle(store.holders(permit, "s")).ok(), Some(2.0));
    assert_eq!(
        harness.settle(store.holds(permit, "s", "a")).ok(),
        Some(true)
    );
    let left = harness
        .settle(store.remaining(permit, "s", Some("a")))
        .expect("remaining");
    assert!(matches!(left, Some(ms) if ms > 9_000.0), "{left:?}");
    assert_eq!(
        harness.settle(store.release(permit, "s", "a")).ok(),
        Some(true)
    );
    assert_eq!(harness.settle(store.holders(permit, "s")).ok(), Some(1.0));

    assert!(matches!(
        harness.settle(store.acquire(read, "rw", "r1", 10_000.0, Wait::Now)),
        Ok(Acquired::Fenced(_))
    ));
    assert!(matches!(
        harness.settle(store.acquire(write, "rw", "w", 10_000.0, Wait::Now)),
        Ok(Acquired::Refused)
    ));
    assert_eq!(
        harness.settle(store.would_wait(write, "rw")).ok(),
        Some(true)
    );
    assert_eq!(harness.settle(store.withdraw(write, "rw")).ok(), Some(()));
    assert_eq!(
        harness.settle(store.release(read, "rw", "r1")).ok(),
        Some(true)
    );
    assert!(matches!(
        harness.settle(store.acquire(write, "rw", "w", 10_000.0, Wait::Now)),
        Ok(Acquired::Fenced(_))
    ));
    assert_eq!(
        harness.settle(store.would_wait(read, "rw")).ok(),
        Some(true)
    );
}

#[test]
fn on_the_event_loop_every_operation_answers_as_the_server_decides() {
    let (server, harness) = (Server::start(), Harness::new());
    let store = on_loop(&harness, server.options());
    assert!(matches!(store.transport, Transport::EventLoop(_)));
    every_operation_answers(&harness, &store);
}

#[test]
fn on_tokio_every_operation_answers_the_same() {
    let server = Server::start();
    let harness = Harness::new();
    let store = RedisStore::new(server.options(), None, None).expect("a store");
    assert!(matches!(store.transport, Transport::Tokio));
    every_operation_answers(&harness, &store);
}

#[test]
fn on_the_event_loop_scripts_the_server_forgot_are_loaded_again() {
    let (server, harness) = (Server::start(), Harness::new());
    let store = on_loop(&harness, server.options());
    let acquired = harness.settle(store.acquire(HoldKind::Lock, "k", "a", 10_000.0, Wait::Now));
    assert!(matches!(acquired, Ok(Acquired::Fenced(_))));
    assert_eq!(
        server.command(&["SCRIPT", "FLUSH"]).as_deref(),
        Some("+OK\r\n")
    );
    assert_eq!(
        harness.settle(store.release(HoldKind::Lock, "k", "a")).ok(),
        Some(true),
        "the release is sent again as EVAL"
    );
}

#[test]
fn on_the_event_loop_a_connection_the_server_killed_is_made_again() {
    let (server, harness) = (Server::start(), Harness::new());
    let store = on_loop(&harness, server.options());
    assert_eq!(
        harness.settle(store.would_wait(HoldKind::Lock, "k")).ok(),
        Some(false)
    );
    let killed = server.command(&["CLIENT", "KILL", "TYPE", "normal"]);
    assert!(
        matches!(killed.as_deref(), Some(n) if n.starts_with(':')),
        "{killed:?}"
    );
    let acquired = harness.settle(store.acquire(HoldKind::Lock, "k", "a", 10_000.0, Wait::Now));
    assert!(matches!(acquired, Ok(Acquired::Fenced(_))), "{acquired:?}");
}

#[test]
fn on_the_event_loop_a_stopped_server_is_a_connection_error_not_a_hang() {
    let server = Server::start();
    let options = server.options();
    drop(server);
    let harness = Harness::new();
    let store = on_loop(&harness, options);
    let Err(StoreError::Backend(e)) = harness.settle(store.would_wait(HoldKind::Lock, "k")) else {
        panic!("an error");
    };
    assert_eq!(
        e.code.as_str(),
        "ERR_LOCK_STORE_CONNECTION",
        "{}",
        e.message
    );
}

#[test]
fn a_bad_url_is_refused_up_front() {
    let options = RedisOptions {
        url: "http://example".into(),
        prefix: String::new(),
        connect_timeout: Duration::from_secs(1),
        command_timeout: Duration::from_secs(1),
        tls: None,
        cluster: Vec::new(),
    };
    let err = RedisStore::new(options, None, None).err().expect("refused");
    assert!(err.contains("not a Redis URL"), "{err}");
}

#[test]
fn tls_options_are_checked_up_front() {
    let with = |url: &str, tls: TlsOptions| {
        RedisStore::new(
            RedisOptions {
                url: url.into(),
                prefix: String::new(),
                connect_timeout: Duration::from_secs(1),
                command_timeout: Duration::from_secs(1),
                tls: Some(tls),
                cluster: Vec::new(),
            },
            None,
            None,
        )
        .err()
    };
    let plain = with("redis://localhost", TlsOptions::default()).expect("refused");
    assert!(plain.contains("rediss://"), "{plain}");
    let half = TlsOptions {
        cert: Some(b"x".to_vec()),
        ..TlsOptions::default()
    };
    let half = with("rediss://localhost", half).expect("refused");
    assert!(half.contains("go together"), "{half}");
    let garbage = TlsOptions {
        ca: Some(b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".to_vec()),
        ..TlsOptions::default()
    };
    let garbage = with("rediss://localhost", garbage).expect("refused");
    assert!(garbage.contains("options.tls"), "{garbage}");
    assert!(with("rediss://localhost", TlsOptions::default()).is_none());
}

#[tokio::test]
async fn a_closed_store_refuses_operations() {
    let store = RedisStore::new(
        RedisOptions {
            url: "redis://127.0.0.1:1".into(),
            prefix: String::new(),
            connect_timeout: Duration::from_millis(200),
            command_timeout: Duration::from_millis(200),
            tls: None,
            cluster: Vec::new(),
        },
        None,
        None,
    )
    .expect("valid url");
    store.close();
    let err = store
        .would_wait(HoldKind::Lock, "k")
        .settle()
        .await
        .expect_err("closed");
    assert!(err.to_string().contains("closed"), "{err}");
}
