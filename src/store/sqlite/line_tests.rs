//! Across processes on one file, two stores standing for two processes:
//! releases heard at a waiting process's ear, and the line a plain lock's
//! waiters wait in (`store::line::contract`).

use std::path::Path;
use std::time::Duration;

use super::tests::{now, store, take, Folder, LOCK};
use super::{SqliteOptions, SqliteStore};
use crate::store::event_loop::tests::Harness;
use crate::store::follow::OnReleased;
use crate::store::line::contract::{
    leaving_keeps_a_lock_handed_over, more_waiting_keep_their_place,
    the_line_hands_the_lock_over_in_order,
};
use crate::store::{HoldKind, LockStore};

fn on_one_file(run: impl Fn(&Harness, &dyn Fn(OnReleased) -> SqliteStore)) {
    let folder = Folder::new("line");
    let path = folder.file("locks.db");
    let make =
        |told: OnReleased| SqliteStore::new(SqliteOptions::at(&path), Some(told)).expect("opens");
    run(&Harness::new(), &make);
}

#[test]
fn the_line_hands_the_lock_over_in_order_and_tells_its_process() {
    on_one_file(|harness, make| the_line_hands_the_lock_over_in_order(harness, make));
}

#[test]
fn an_attempt_with_more_waiting_keeps_their_place_however_it_gets_in() {
    on_one_file(|harness, make| more_waiting_keep_their_place(harness, make));
}

#[test]
fn leaving_the_line_keeps_a_lock_handed_over() {
    on_one_file(|harness, make| leaving_keeps_a_lock_handed_over(harness, make));
}

#[cfg(unix)]
#[test]
fn a_release_is_heard_by_the_ears_that_wait_for_its_key_and_a_gone_ear_is_forgotten() {
    use crate::store::follow::Released;
    use std::sync::mpsc;
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let folder = Folder::new("ears");
    let path = folder.file("locks.db");
    let (heard, hear) = mpsc::channel();
    let on_released: crate::store::follow::OnReleased =
        std::sync::Arc::new(move |released, key| {
            let _ = heard.send((released, key));
        });
    let waiter = SqliteStore::new(SqliteOptions::at(&path), Some(on_released)).expect("opens");
    assert!(waiter.capabilities().announces_releases);
    let listener = waiter.watch(LOCK, "k", true).expect("the ear's listener");
    runtime.spawn(listener);
    assert!(waiter.watch(HoldKind::Read, "k", true).is_none(), "one ear");
    let holder = store(&path);
    take(&holder, LOCK, "k", "o", 10_000.0);
    take(&holder, LOCK, "other", "o", 10_000.0);
    take(&holder, HoldKind::Write, "k", "o", 10_000.0);
    assert!(
        now(holder.release(LOCK, "other", "o")),
        "a key nobody waits for"
    );
    assert!(now(holder.release(LOCK, "k", "o")));
    assert!(now(holder.release(HoldKind::Write, "k", "o")));
    let within = Duration::from_secs(2);
    assert_eq!(
        hear.recv_timeout(within),
        Ok((Released::Lock, "k".to_owned()))
    );
    assert_eq!(
        hear.recv_timeout(within),
        Ok((Released::ReadWrite, "k".to_owned()))
    );
    // Waiting no more: not told.
    waiter.watch(LOCK, "k", false);
    take(&holder, LOCK, "k", "o", 10_000.0);
    assert!(now(holder.release(LOCK, "k", "o")));
    assert!(hear.recv_timeout(Duration::from_millis(200)).is_err());
    // An ear that is gone (its process killed, its notes left) is forgotten at the next release.
    waiter.watch(LOCK, "k", true);
    let noted = |path: &Path| -> i64 {
        let db = rusqlite::Connection::open(path).expect("open");
        db.query_row("SELECT count(*) FROM keel_locks_ears", [], |row| row.get(0))
            .expect("counted")
    };
    assert_eq!(noted(&path), 2, "the lock's and the read-write key's");
    let db = rusqlite::Connection::open(&path).expect("open");
    db.execute(
        "INSERT INTO keel_locks_ears VALUES ('k', 'l', '@keel-sqlite-gone')",
        [],
    )
    .expect("a dead ear noted");
    take(&holder, LOCK, "k", "o", 10_000.0);
    assert!(now(holder.release(LOCK, "k", "o")));
    assert_eq!(
        hear.recv_timeout(within),
        Ok((Released::Lock, "k".to_owned()))
    );
    assert_eq!(noted(&path), 2, "the dead one forgotten");
    waiter.close();
    assert_eq!(noted(&path), 0, "a closed store's notes go with it");
}
