//! run()'s releases, queued (`queued`): written with the next acquire, in
//! its transaction where nobody waits, the full way where someone does;
//! before any other operation; at close; failures told at the flush.

use std::time::Duration;

use super::tests::{failed, now, store, take, Folder, LOCK};
use super::{SqliteOptions, SqliteStore};
use crate::store::{Acquired, Asked, Code, LockStore, StoreError, Wait, Want};

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

/// `wants` on `key`s, each for a fresh owner `o<n>`, as run() asks them.
fn wants<'a>(keys: &[&'a str], owners: &'a [String], wait: Wait) -> Vec<Want<'a>> {
    keys.iter()
        .zip(owners)
        .map(|(key, owner)| Want {
            key,
            owner,
            ttl_ms: 60_000.0,
            wait,
        })
        .collect()
}

#[test]
fn acquires_asked_together_are_answered_in_order_as_each_alone_would_be() {
    let folder = Folder::new("together-answers");
    let path = folder.file("locks.db");
    let told = std::sync::Arc::new(|_, _| {});
    let s = SqliteStore::new(SqliteOptions::at(&path), Some(told)).expect("opens");
    let other = store(&path);
    take(&other, LOCK, "held", "x", 60_000.0);
    let before = take(&s, LOCK, "free", "o", 60_000.0);
    assert!(s.queue_release("free", "o"));
    let owners: Vec<String> = (0..5).map(|i| format!("o{i}")).collect();
    let in_line = Wait::InLine(Asked::at(1.0));
    let keys = ["free", "held", "new", "new", "free"];
    let answers = s
        .acquire_together(&wants(&keys, &owners, in_line))
        .expect("it acquires together");
    let answers: Vec<Acquired> = answers.into_iter().map(|a| a.expect("answered")).collect();
    // Released before them in the same transaction, "free" is taken again,
    // its token grown; the second of two on one key is refused, as are
    // those on a key another process holds (each taking this process's place).
    assert!(
        matches!(answers[0], Acquired::Fenced(t) if t > before),
        "{answers:?}"
    );
    assert!(matches!(answers[1], Acquired::Refused), "{answers:?}");
    assert!(matches!(answers[2], Acquired::Fenced(_)), "{answers:?}");
    assert!(matches!(answers[3], Acquired::Refused), "{answers:?}");
    assert!(matches!(answers[4], Acquired::Refused), "{answers:?}");
    assert!(now(s.holds(LOCK, "free", "o0")) && now(s.holds(LOCK, "new", "o2")));
    assert!(now(other.holds(LOCK, "held", "x")));
    // "held" released by its holder: handed to this process's place.
    assert!(now(other.release(LOCK, "held", "x")));
    let handed = now(s.acquire(LOCK, "held", "o5", 60_000.0, Wait::InLine(Asked::at(2.0))));
    assert!(matches!(handed, Acquired::Handed { .. }), "{handed:?}");
    assert!(s.flush_releases().is_empty());
}

#[test]
fn acquires_asked_together_commit_once_with_the_releases_queued_before_them() {
    let folder = Folder::new("together-commits");
    let path = folder.file("locks.db");
    let log = path.with_extension("db-wal");
    let frames = || std::fs::metadata(&log).map_or(0, |m| m.len()) / (24 + 1024);
    let told = std::sync::Arc::new(|_, _| {});
    let s = SqliteStore::new(SqliteOptions::at(&path), Some(told)).expect("opens");
    let keys = ["a", "b", "c", "d"];
    let owners =
        |round: usize| -> Vec<String> { keys.iter().map(|k| format!("{k}{round}")).collect() };
    let round_of = |round: usize, together: bool| {
        let owners = owners(round);
        let asked = wants(&keys, &owners, Wait::Now);
        if together {
            let answers = s.acquire_together(&asked).expect("it acquires together");
            assert!(answers.iter().all(|a| matches!(a, Ok(Acquired::Fenced(_)))));
        } else {
            for want in &asked {
                take(&s, LOCK, want.key, want.owner, want.ttl_ms);
            }
        }
        for (key, owner) in keys.iter().zip(&owners) {
            assert!(s.queue_release(key, owner));
        }
    };
    let count = |together: bool, first: usize| {
        let before = frames();
        for round in first..first + 50 {
            round_of(round, together);
        }
        frames() - before
    };
    let apart = count(false, 0);
    let together = count(true, 50);
    // One at a time, each acquire commits (the first with the releases
    // queued before it); together, a round commits once.
    assert!(
        apart >= 4 * 50,
        "{apart} frames for 50 rounds one at a time"
    );
    assert!(
        together * 3 <= apart,
        "{together} frames together, {apart} apart"
    );
    assert!(s.flush_releases().is_empty());
}

#[test]
fn acquires_asked_together_on_a_file_that_stays_busy_all_fail_and_take_nothing() {
    let folder = Folder::new("together-busy");
    let path = folder.file("locks.db");
    let mut options = SqliteOptions::at(&path);
    options.command_timeout = Duration::from_millis(100);
    let s = SqliteStore::new(options, None).expect("opens");
    take(&s, LOCK, "a", "o", 60_000.0);
    assert!(s.queue_release("a", "o"));
    let other = rusqlite::Connection::open(&path).expect("open");
    other
        .execute_batch("BEGIN IMMEDIATE")
        .expect("the file's write lock");
    let owners: Vec<String> = (0..3).map(|i| format!("n{i}")).collect();
    let answers = s
        .acquire_together(&wants(&["b", "c", "d"], &owners, Wait::Now))
        .expect("it acquires together");
    other.execute_batch("COMMIT").expect("let go");
    for answer in &answers {
        assert!(
            matches!(answer, Err(StoreError::Backend(e)) if e.code == Code::StoreTimeout),
            "{answer:?}"
        );
    }
    for key in ["b", "c", "d"] {
        assert!(!now(s.would_wait(LOCK, key)), "{key} not taken");
    }
    assert_eq!(
        s.flush_releases().len(),
        1,
        "the release queued failed with them"
    );
}

#[test]
fn with_no_ears_a_key_released_by_a_queued_release_is_taken_together_after_a_commit_of_its_own() {
    let folder = Folder::new("together-no-ears");
    let path = folder.file("locks.db");
    let s = store(&path);
    let log = path.with_extension("db-wal");
    let frames = || std::fs::metadata(&log).map_or(0, |m| m.len()) / (24 + 1024);
    take(&s, LOCK, "k", "o", 60_000.0);
    assert!(s.queue_release("k", "o"));
    let owners = vec!["n0".to_owned(), "n1".to_owned(), "n2".to_owned()];
    let before = frames();
    let answers = s
        .acquire_together(&wants(&["k", "j", "k"], &owners, Wait::Now))
        .expect("it acquires together");
    let answers: Vec<Acquired> = answers.into_iter().map(|a| a.expect("answered")).collect();
    assert!(matches!(answers[0], Acquired::Fenced(_)), "{answers:?}");
    assert!(matches!(answers[1], Acquired::Fenced(_)), "{answers:?}");
    assert!(matches!(answers[2], Acquired::Refused), "{answers:?}");
    assert!(now(s.holds(LOCK, "k", "n0")) && now(s.holds(LOCK, "j", "n1")));
    assert!(
        frames() - before >= 2,
        "the release and its key's take commit apart"
    );
}
