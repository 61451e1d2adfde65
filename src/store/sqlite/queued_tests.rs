//! run()'s releases, queued (`queued`): written with the next acquire, in
//! its transaction where nobody waits, the full way where someone does;
//! before any other operation; at close; failures told at the flush.

use std::time::Duration;

use super::tests::{failed, now, store, take, Folder, LOCK};
use super::{SqliteOptions, SqliteStore};
use crate::store::{Acquired, Asked, Code, LockStore, Wait};

#[test]
fn queued_releases_are_written_with_the_next_acquire_and_one_with_a_waiter_is_handed_on() {
    let folder = Folder::new("queued");
    let path = folder.file("locks.db");
    let holder = store(&path);
    let waiter = SqliteStore::new(
        SqliteOptions::at(&path),
        Some(std::sync::Arc::new(|_, _| {})),
    )
    .expect("opens");
    take(&holder, LOCK, "alone", "a", 60_000.0);
    take(&holder, LOCK, "waited", "b", 60_000.0);
    let in_line = Wait::InLine(Asked::at(1.0));
    let refused = now(waiter.acquire(LOCK, "waited", "w1", 60_000.0, in_line));
    assert!(matches!(refused, Acquired::Refused), "{refused:?}");
    assert!(holder.queue_release("alone", "a"));
    assert!(holder.queue_release("waited", "b"));
    assert!(now(waiter.would_wait(LOCK, "alone")), "queued, not written");
    // Written with the next acquire: the one nobody waits for in its
    // transaction, the one with a waiter in line the full way, handed on.
    take(&holder, LOCK, "next", "n", 60_000.0);
    assert!(!now(waiter.would_wait(LOCK, "alone")), "written with it");
    let in_line = Wait::InLine(Asked::at(2.0));
    let handed = now(waiter.acquire(LOCK, "waited", "w2", 60_000.0, in_line));
    assert!(
        matches!(&handed, Acquired::Handed { owner, .. } if owner.as_str() == "w1"),
        "{handed:?}"
    );
    assert!(holder.flush_releases().is_empty(), "none failed");
    // Queued behind another operation (a release, here): written before it.
    assert!(holder.queue_release("next", "n"));
    assert!(!now(holder.release(LOCK, "next", "n")), "released already");
    assert!(!now(waiter.would_wait(LOCK, "next")));
    // Queued when the store closes: written first; after, each fails as closed.
    take(&holder, LOCK, "last", "l", 60_000.0);
    assert!(holder.queue_release("last", "l"));
    holder.close();
    assert!(!now(waiter.would_wait(LOCK, "last")), "written at close");
    assert!(holder.queue_release("after", "x"));
    let failed = holder.flush_releases();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].0, "after");
}

#[test]
fn releases_queued_before_an_acquire_the_file_refuses_fail_with_it_and_are_told_at_the_flush() {
    let folder = Folder::new("queued-busy");
    let path = folder.file("locks.db");
    let mut options = SqliteOptions::at(&path);
    options.command_timeout = Duration::from_millis(100);
    let s = SqliteStore::new(options, None).expect("opens");
    take(&s, LOCK, "a", "o", 60_000.0);
    take(&s, LOCK, "b", "o", 60_000.0);
    assert!(s.queue_release("a", "o") && s.queue_release("b", "o"));
    let other = rusqlite::Connection::open(&path).expect("open");
    other
        .execute_batch("BEGIN IMMEDIATE")
        .expect("the file's write lock");
    let (code, _) = failed(s.acquire(LOCK, "c", "o", 1_000.0, Wait::Now));
    assert_eq!(code, Code::StoreTimeout);
    other.execute_batch("COMMIT").expect("let go");
    let failed_releases = s.flush_releases();
    let keys: Vec<&str> = failed_releases
        .iter()
        .map(|(key, _)| key.as_str())
        .collect();
    assert_eq!(keys, ["a", "b"]);
    assert!(
        now(s.would_wait(LOCK, "a")),
        "still held, to lapse at its TTL"
    );
    assert!(s.flush_releases().is_empty(), "told once");
}

#[test]
fn a_cycle_commits_once_with_its_release_queued_and_twice_on_one_key_where_nobody_waits_in_line() {
    let folder = Folder::new("queued-commits");
    let path = folder.file("locks.db");
    // Each commit here writes one page, one frame of the log: the log's
    // length counts the commits.
    let log = path.with_extension("db-wal");
    let frames = || std::fs::metadata(&log).map_or(0, |m| m.len()) / (24 + 1024);
    let cycles = |s: &SqliteStore, key: &str| {
        take(s, LOCK, key, "o0", 60_000.0);
        let before = frames();
        for i in 1..=100 {
            assert!(s.queue_release(key, &format!("o{}", i - 1)));
            take(s, LOCK, key, &format!("o{i}"), 60_000.0);
        }
        frames() - before
    };
    let told = std::sync::Arc::new(|_, _| {});
    let with_ears = SqliteStore::new(SqliteOptions::at(&path), Some(told)).expect("opens");
    let merged = cycles(&with_ears, "k");
    assert!(
        (100..=110).contains(&merged),
        "{merged} commits for 100 cycles"
    );
    // With no ears (as on Windows) nobody waits in line: a key released here
    // is left free by a commit of its own before it is taken again.
    let without = store(&path);
    let apart = cycles(&without, "j");
    assert!(
        (200..=210).contains(&apart),
        "{apart} commits for 100 cycles"
    );
}
