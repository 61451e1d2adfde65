//! The store on real files, in a folder of each test's own.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{SqliteOptions, SqliteStore};
use crate::store::{Acquired, Code, HoldKind, LockStore, Op, StoreError, Wait};

/// A folder removed when the test ends.
pub(super) struct Folder(pub PathBuf);

impl Folder {
    pub fn new(name: &str) -> Folder {
        let path = std::env::temp_dir().join(format!(
            "keel-sqlite-{name}-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&path).expect("a temporary folder");
        Folder(path)
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(super) fn store(path: &Path) -> SqliteStore {
    SqliteStore::new(SqliteOptions::at(path), None).expect("the store opens")
}

pub(super) fn now<T>(op: Op<T>) -> T {
    match op {
        Op::Ready(Ok(value)) => value,
        Op::Ready(Err(e)) => panic!("failed: {e}"),
        _ => panic!("not answered at once"),
    }
}

pub(super) fn failed<T: std::fmt::Debug>(op: Op<T>) -> (Code, String) {
    match op {
        Op::Ready(Err(StoreError::Backend(e))) => (e.code, e.message),
        Op::Ready(other) => panic!("expected a store error, got {other:?}"),
        _ => panic!("not answered at once"),
    }
}

/// `owner` takes `key` (for `ttl_ms`, not waiting): its fencing token.
pub(super) fn take(s: &SqliteStore, kind: HoldKind, key: &str, owner: &str, ttl_ms: f64) -> u64 {
    token(try_take(s, kind, key, owner, ttl_ms))
}

/// `owner` tries `key` (for `ttl_ms`, not waiting): the answer.
pub(super) fn try_take(
    s: &SqliteStore, kind: HoldKind, key: &str, owner: &str, ttl_ms: f64,
) -> Acquired {
    now(s.acquire(kind, key, owner, ttl_ms, Wait::Now))
}

pub(super) fn token(acquired: Acquired) -> u64 {
    match acquired {
        Acquired::Fenced(token) => token,
        other => panic!("expected a fencing token, got {other:?}"),
    }
}

pub(super) const LOCK: HoldKind = HoldKind::Lock;

#[test]
fn a_plain_lock_is_one_owners_across_connections_with_growing_tokens() {
    let folder = Folder::new("lock");
    let (a, b) = (
        store(&folder.file("locks.db")),
        store(&folder.file("locks.db")),
    );
    let first = take(&a, LOCK, "k", "o1", 10_000.0);
    assert_eq!(try_take(&b, LOCK, "k", "o2", 10_000.0), Acquired::Refused);
    assert!(now(b.holds(LOCK, "k", "o1")) && !now(b.holds(LOCK, "k", "o2")));
    assert!(now(b.would_wait(LOCK, "k")));
    assert_eq!(now(b.holders(LOCK, "k")), 1.0);
    let left = now(b.remaining(LOCK, "k", None)).expect("held");
    assert!(left > 9_000.0 && left <= 10_000.0, "{left}");
    assert!(!now(b.release(LOCK, "k", "o2")), "not its lock");
    assert!(!now(b.extend(LOCK, "k", "o2", 1.0)), "not its lock");
    assert!(now(a.extend(LOCK, "k", "o1", 60_000.0)));
    assert!(now(a.release(LOCK, "k", "o1")));
    assert!(!now(a.release(LOCK, "k", "o1")), "released once");
    assert!(!now(b.would_wait(LOCK, "k")));
    assert_eq!(now(b.remaining(LOCK, "k", None)), None);
    let second = take(&b, LOCK, "k", "o2", 10_000.0);
    assert!(second > first, "{first} then {second}");
    // Another file is another store.
    let other = store(&folder.file("other.db"));
    take(&other, LOCK, "k", "o3", 10_000.0);
}

#[test]
fn a_hold_lapses_at_its_ttl_and_keys_may_hold_anything() {
    let folder = Folder::new("lapse");
    let s = store(&folder.file("locks.db"));
    let key = format!("a\0b{}", "x".repeat(100_000));
    take(&s, LOCK, &key, "o1", 30.0);
    assert_eq!(try_take(&s, LOCK, &key, "o2", 30.0), Acquired::Refused);
    assert!(!now(s.would_wait(LOCK, "a")), "another key");
    std::thread::sleep(Duration::from_millis(40));
    assert!(!now(s.holds(LOCK, &key, "o1")));
    assert!(!now(s.extend(LOCK, &key, "o1", 1_000.0)), "lapsed");
    take(&s, LOCK, &key, "o2", 1_000.0);
}

#[test]
fn a_new_file_has_small_pages_and_one_made_elsewhere_keeps_its_own() {
    let folder = Folder::new("pages");
    let page_size = |path: &Path| -> i64 {
        let db = rusqlite::Connection::open(path).expect("open");
        db.query_row("PRAGMA page_size", [], |row| row.get(0))
            .expect("read")
    };
    let new = folder.file("new.db");
    take(&store(&new), LOCK, "k", "o", 10_000.0);
    assert_eq!(page_size(&new), 1024);
    let made = folder.file("made.db");
    rusqlite::Connection::open(&made)
        .and_then(|db| db.execute_batch("PRAGMA page_size = 4096; CREATE TABLE mine (a)"))
        .expect("a file of another program's");
    let s = store(&made);
    take(&s, LOCK, "k", "o", 10_000.0);
    assert!(now(s.release(LOCK, "k", "o")));
    assert_eq!(page_size(&made), 4096);
}

#[test]
fn the_log_starts_over_while_commits_never_stop() {
    let folder = Folder::new("log");
    let path = folder.file("locks.db");
    let s = store(&path);
    let log = path.with_file_name("locks.db-wal");
    let mut largest = 0;
    // Two commits a cycle, back to back: twice the pages past which a
    // commit checkpoints itself.
    for cycle in 0..super::checkpoint::OWN_PAGES {
        take(&s, LOCK, "k", "o", 10_000.0);
        assert!(now(s.release(LOCK, "k", "o")));
        if cycle % 256 == 0 {
            largest = largest.max(std::fs::metadata(&log).map_or(0, |m| m.len()));
        }
    }
    // Each commit adds a 1024-byte page and its 24-byte header to the log.
    let most = u64::try_from(super::checkpoint::OWN_PAGES + 512).unwrap_or(u64::MAX) * 1048;
    assert!(largest <= most, "the log reached {largest} bytes");
}

#[test]
fn commits_from_two_stores_that_checkpoint_at_once_all_succeed() {
    let folder = Folder::new("log-two");
    let path = folder.file("locks.db");
    std::thread::scope(|threads| {
        for name in ["a", "b"] {
            let path = &path;
            threads.spawn(move || {
                let s = store(path);
                for _ in 0..super::checkpoint::OWN_PAGES / 2 {
                    take(&s, LOCK, name, "o", 10_000.0);
                    assert!(now(s.release(LOCK, name, "o")));
                }
            });
        }
    });
}

#[test]
fn stores_opened_at_once_on_a_new_file_all_open() {
    // As the workers of a cluster starting together: the first to switch
    // the file to WAL needs it to itself for a moment, and SQLite answers the
    // others "busy" at once, without its busy handler.
    for _ in 0..20 {
        let folder = Folder::new("together");
        let path = folder.file("locks.db");
        std::thread::scope(|threads| {
            for key in ["a", "b", "c", "d"] {
                let path = &path;
                threads.spawn(move || take(&store(path), LOCK, key, "o", 10_000.0));
            }
        });
    }
}

#[test]
fn semaphores_admit_their_limit_and_a_waiting_writer_holds_readers_back() {
    let folder = Folder::new("holds");
    let s = store(&folder.file("locks.db"));
    let permit = HoldKind::Permit { limit: 2 };
    let t1 = take(&s, permit, "k", "p1", 10_000.0);
    let t2 = take(&s, permit, "k", "p2", 10_000.0);
    assert!(t2 > t1);
    assert_eq!(try_take(&s, permit, "k", "p3", 10_000.0), Acquired::Refused);
    assert!(now(s.would_wait(permit, "k")));
    assert_eq!(now(s.holders(permit, "k")), 2.0);
    assert!(now(s.remaining(permit, "k", Some("p1"))).is_some());
    assert_eq!(now(s.remaining(permit, "k", None)), None);
    // A plain lock and a read-write key of the same name are apart.
    take(&s, LOCK, "k", "l", 10_000.0);
    take(&s, HoldKind::Read, "k", "r1", 10_000.0);
    assert!(now(s.release(permit, "k", "p1")));
    take(&s, permit, "k", "p3", 10_000.0);

    take(&s, HoldKind::Read, "k", "r2", 10_000.0);
    assert_eq!(now(s.holders(HoldKind::Read, "k")), 2.0);
    let write = HoldKind::Write;
    assert_eq!(try_take(&s, write, "k", "w", 10_000.0), Acquired::Refused);
    assert!(now(s.would_wait(HoldKind::Read, "k")), "the writer's mark");
    assert_eq!(
        try_take(&s, HoldKind::Read, "k", "r3", 10_000.0),
        Acquired::Refused
    );
    now(s.withdraw(write, "k"));
    take(&s, HoldKind::Read, "k", "r3", 10_000.0);
    for reader in ["r1", "r2", "r3"] {
        assert!(now(s.release(HoldKind::Read, "k", reader)));
    }
    take(&s, write, "k", "w", 10_000.0);
    assert!(now(s.would_wait(write, "k")) && now(s.would_wait(HoldKind::Read, "k")));
    assert!(now(s.extend(write, "k", "w", 20_000.0)));
    assert!(now(s.holds(write, "k", "w")));
}

/// Writes the file's state as an earlier boot would have left it.
fn set_state(path: &Path, name: &str, value: rusqlite::types::Value) {
    let db = rusqlite::Connection::open(path).expect("open");
    db.execute(
        "UPDATE keel_locks_state SET value = ?2 WHERE name = ?1",
        rusqlite::params![name, value],
    )
    .expect("state written");
}

#[test]
fn holds_of_another_boot_are_let_go_and_tokens_jump_past_them() {
    let folder = Folder::new("boot");
    let path = folder.file("locks.db");
    let before = {
        let s = store(&path);
        take(&s, LOCK, "k", "o1", 3_600_000.0);
        take(&s, HoldKind::Read, "k", "r", 3_600_000.0)
    };
    // The same boot: the holds stay.
    assert!(now(store(&path).would_wait(LOCK, "k")));
    // Another boot's name: everything goes, and tokens jump.
    set_state(&path, "boot", "another boot".to_owned().into());
    let s = store(&path);
    assert!(!now(s.would_wait(LOCK, "k")) && !now(s.would_wait(HoldKind::Write, "k")));
    let after = take(&s, LOCK, "k", "o2", 3_600_000.0);
    assert!(after > before + (1 << 32), "{before} then {after}");
    drop(s);
    // A clock that runs behind the latest write is a new boot too (where
    // the system names none).
    set_state(&path, "seen", i64::MAX.into());
    let s = store(&path);
    assert!(!now(s.would_wait(LOCK, "k")));
    let again = take(&s, LOCK, "k", "o3", 1_000.0);
    assert!(again > after + (1 << 32));
}

#[test]
fn a_bad_path_fails_naming_it_and_a_foreign_file_is_left_as_it_was() {
    let folder = Folder::new("paths");
    let message = |path: &Path| match SqliteStore::new(SqliteOptions::at(path), None) {
        Err(StoreError::Backend(e)) => {
            assert_eq!(e.code, Code::StoreSqlite);
            e.message
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("{} opened", path.display()),
    };
    let missing = folder.file("nowhere").join("locks.db");
    let said = message(&missing);
    assert!(
        said.contains(&missing.display().to_string()) && said.contains("does not exist"),
        "{said}"
    );
    assert!(message(&folder.0).contains("a folder"));
    let foreign = folder.file("notes.txt");
    let text = "these are notes, not a database ".repeat(200);
    std::fs::write(&foreign, &text).expect("written");
    let said = message(&foreign);
    assert!(
        said.contains("not a SQLite database") && said.contains("notes.txt"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&foreign).expect("read"), text);
    let names: Vec<_> = std::fs::read_dir(&folder.0)
        .expect("listed")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["notes.txt"], "nothing made beside it");
}

#[test]
fn a_write_held_elsewhere_past_the_command_timeout_fails_as_too_slow_and_close_ends_it() {
    let folder = Folder::new("busy");
    let path = folder.file("locks.db");
    let mut options = SqliteOptions::at(&path);
    options.command_timeout = Duration::from_millis(100);
    let s = SqliteStore::new(options, None).expect("opens");
    let other = rusqlite::Connection::open(&path).expect("open");
    other
        .execute_batch("BEGIN IMMEDIATE")
        .expect("the file's write lock");
    let started = Instant::now();
    let (code, message) = failed(s.acquire(LOCK, "k", "o", 1_000.0, Wait::Now));
    let waited = started.elapsed();
    assert_eq!(code, Code::StoreTimeout, "{message}");
    assert!(
        waited >= Duration::from_millis(100) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    // Reads go on meanwhile.
    assert!(!now(s.would_wait(LOCK, "k")));
    other.execute_batch("COMMIT").expect("let go");
    take(&s, LOCK, "k", "o", 1_000.0);
    s.close();
    assert_eq!(failed(s.holds(LOCK, "k", "o")).0, Code::StoreClosed);
    assert_eq!(failed(s.ping()).0, Code::StoreClosed);
}

#[test]
fn sweeps_delete_lapsed_rows_a_batch_per_acquire_and_a_swept_keys_tokens_still_grow() {
    let folder = Folder::new("sweep");
    let path = folder.file("locks.db");
    let s = store(&path);
    let before: Vec<u64> = (0..600)
        .map(|i| take(&s, LOCK, &format!("k{i:03}"), "o", 1.0))
        .collect();
    for i in 0..50 {
        take(&s, HoldKind::Read, &format!("r{i}"), "o", 1.0);
    }
    std::thread::sleep(Duration::from_millis(5));
    let rows = |table: &str| -> i64 {
        let db = rusqlite::Connection::open(&path).expect("open");
        db.query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
            row.get(0)
        })
        .expect("counted")
    };
    assert_eq!((rows("keel_locks"), rows("keel_locks_holds")), (600, 50));
    let mut options = SqliteOptions::at(&path);
    options.sweep_interval = Duration::ZERO;
    let sweeper = SqliteStore::new(options, None).expect("opens");
    for _ in 0..8 {
        take(&sweeper, LOCK, "live", "o", 60_000.0);
        assert!(now(sweeper.release(LOCK, "live", "o")));
    }
    assert_eq!(rows("keel_locks_holds"), 0, "swept in batches");
    assert!(rows("keel_locks") <= 1, "{}", rows("keel_locks"));
    for (i, old) in before.iter().enumerate().step_by(97) {
        let again = take(&s, LOCK, &format!("k{i:03}"), "o", 1_000.0);
        assert!(again > *old, "k{i:03}: {old} then {again}");
    }
}

#[test]
fn a_file_deleted_or_replaced_underneath_is_followed_to_the_path_before_a_grant() {
    let folder = Folder::new("moved");
    let path = folder.file("locks.db");
    let old = store(&path);
    take(&old, LOCK, "mine", "o", 60_000.0);
    for replace in [false, true] {
        // Another process's view: the path now names another file.
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        if replace {
            let elsewhere = folder.file("elsewhere.db");
            drop(store(&elsewhere));
            std::fs::rename(&elsewhere, &path).expect("renamed over the path");
        }
        let new = store(&path);
        take(&new, LOCK, "k", "new", 60_000.0);
        assert_eq!(
            try_take(&old, LOCK, "k", "old", 60_000.0),
            Acquired::Refused,
            "the old store follows the path (replaced: {replace})"
        );
        assert!(
            !now(old.extend(LOCK, "mine", "o", 1_000.0)),
            "its hold went with the old file"
        );
        assert!(now(new.release(LOCK, "k", "new")));
    }
}
