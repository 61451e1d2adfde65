//! The line a plain lock's waiters wait in on etcd: what a store knows of
//! its places (`line.rs`), then, against a cluster of the test's own, the
//! same hand-overs as every store that keeps a line (`store::line::contract`),
//! two stores standing for two processes on one prefix.

use std::time::Duration;

use super::heard::Heard;
use super::layout::place_entry;
use super::line::{held_value, place_value, Entries, Line};
use super::messages::KeyValue;
use super::test_cluster::Cluster;
use super::*;
use crate::store::event_loop::tests::Harness;
use crate::store::line::contract::{
    leaving_keeps_a_lock_handed_over, more_waiting_keep_their_place,
    the_line_hands_the_lock_over_in_order,
};
use crate::store::line::LEASE_MS;

/// A deletion of `key` at `revision`, as a watch tells it.
fn deleted(key: &str, revision: i64) -> KeyValue {
    KeyValue {
        mod_revision: revision,
        ..kv(key, 0)
    }
}

fn kv(key: &str, created: i64) -> KeyValue {
    KeyValue {
        key: key.as_bytes().to_vec(),
        create_revision: created,
        mod_revision: created,
        value: place_value(5, key),
        lease: 0,
    }
}

#[test]
fn only_the_entry_ahead_going_sends_a_place_to_look_and_a_hand_over_keeps_its_token() {
    let line = Line::new("me".to_owned());
    let l = b"l/".to_vec();
    assert!(
        matches!(line.heard(&l, &deleted("x", 1), 0), Heard::Wake),
        "no place: its waiters ask"
    );
    let place = line.place_key(&l);
    assert_eq!(place, b"l/pme.0".to_vec());
    assert!(
        matches!(line.heard(&l, &deleted("x", 2), 0), Heard::Look),
        "a place on its way"
    );
    let entries = Entries::of(vec![kv("a", 1), kv("b", 2), kv("l/pme.0", 3)], 3);
    line.placed(&l, &place, 3, Some(&entries));
    // (Heard only from after the read: it was not second then anyway.)
    assert!(matches!(
        line.heard(&l, &deleted("a", 4), 9),
        Heard::Nothing
    ));
    assert!(matches!(line.heard(&l, &deleted("b", 5), 9), Heard::Look));
    let now = Entries::of(vec![kv("l/pme.0", 3)], 8);
    let (handed, new) = line.look(&l, &now).expect("first");
    assert!(new);
    assert_eq!(
        (handed.token, handed.asked, handed.owner.as_str()),
        (8, 5, "l/pme.0")
    );
    let later = Entries::of(vec![kv("l/pme.0", 3)], 11);
    assert!(line.look(&l, &later).is_none(), "no place left to look for");
    let (again, new) = line.first(&l, &kv("l/pme.0", 3), 11).expect("known");
    assert!(!new);
    assert_eq!(again.token, 8);
    assert!(line.unclaimed(&l).is_some());
    assert!(
        matches!(line.heard(&l, &deleted("q", 12), 0), Heard::Nothing),
        "the lock is this store's"
    );
    line.gone(&l, "l/pme.0");
    assert!(line.handed(&l, "l/pme.0").is_none());
    // Claimed here, its record gone: a hold is never handed over again.
    let claimed = KeyValue {
        value: held_value("l/pme.0"),
        ..kv("l/pme.0", 3)
    };
    assert!(line.first(&l, &claimed, 12).is_none());
    assert!(line.look(&l, &Entries::of(vec![claimed], 12)).is_none());
}

/// A store whose place `l/pme.0`, made at revision 3, is in line as
/// `entries` show.
fn placed_as(entries: &Entries) -> Line {
    let line = Line::new("me".to_owned());
    let l = b"l/".to_vec();
    let place = line.place_key(&l);
    line.placed(&l, &place, 3, Some(entries));
    line
}

#[test]
fn a_place_is_first_without_a_read_once_every_entry_ahead_of_it_is_heard_gone() {
    let l = b"l/".to_vec();
    let entries = Entries::of(vec![kv("a", 1), kv("b", 2), kv("l/pme.0", 3)], 6);
    let heard =
        |line: &Line, key: &str, at: i64, from: i64| line.heard(&l, &deleted(key, at), from);
    let line = placed_as(&entries);
    // The holder going first: still behind the one just ahead.
    assert!(matches!(heard(&line, "a", 7, 6), Heard::Nothing));
    let Heard::First(handed, own) = heard(&line, "b", 9, 6) else {
        panic!("first once every entry ahead went");
    };
    assert_eq!(own.key, b"l/pme.0".to_vec());
    assert_eq!(
        (handed.token, handed.created),
        (9, 3),
        "fenced with the deletion"
    );
    assert!(line.place(&l).is_none(), "its place is the lock now");
    assert!(line.unclaimed(&l).is_some());
    // The one just ahead leaving with more ahead: a read tells (some of
    // them may have been heard gone before the read was answered).
    assert!(matches!(
        heard(&placed_as(&entries), "b", 7, 6),
        Heard::Look
    ));
    // Deletions heard only from after the read: one may have gone unheard
    // (its own among them), so it looks.
    let unsure = placed_as(&entries);
    assert!(matches!(heard(&unsure, "b", 7, 7), Heard::Look));
    assert!(matches!(heard(&unsure, "a", 9, 7), Heard::Look));
    // A deletion from before the read is of an entry the read did not
    // show: a key made again, and shown, is not crossed off by it.
    let again = placed_as(&entries);
    assert!(matches!(heard(&again, "a", 7, 6), Heard::Nothing));
    assert!(matches!(heard(&again, "b", 5, 6), Heard::Nothing));
    assert!(again.place(&l).is_some(), "still behind b as read");
    // A read answered after a deletion was heard: what went is crossed
    // off it as it is placed (else the place would wait behind it).
    let late = Line::new("me".to_owned());
    let place = late.place_key(&l);
    assert!(
        matches!(heard(&late, "a", 7, 0), Heard::Look),
        "a place on its way"
    );
    late.placed(&l, &place, 3, Some(&entries));
    let Heard::First(handed, _) = heard(&late, "b", 8, 6) else {
        panic!("a went before the read was answered");
    };
    assert_eq!(handed.token, 8);
    // Two claims of one hand-over: the later-sent shorter one does not
    // shorten it.
    let now = tokio::time::Instant::now();
    let long = now + Duration::from_secs(10);
    assert_eq!(late.claimed(&l, &handed.owner, long), long);
    assert_eq!(late.claimed(&l, &handed.owner, now), long);
    // Its own going heard first: it has no place to be first with.
    let gone = placed_as(&entries);
    assert!(matches!(heard(&gone, "l/pme.0", 8, 6), Heard::Wake));
    assert!(matches!(heard(&gone, "a", 9, 6), Heard::Wake));
}

#[test]
fn a_place_not_asked_for_since_the_lease_lapses_and_a_stray_of_this_store_goes() {
    let line = Line::new("me".to_owned());
    let l = b"l/".to_vec();
    let place = line.place_key(&l);
    let stray = place_entry(&l, "me", 99);
    let read = |other_write: i64| {
        let mut other = kv("other", 2);
        other.mod_revision = other_write;
        let held = KeyValue {
            value: held_value("h"),
            ..kv("held", 1)
        };
        Entries::of(vec![held, other, kv("l/pme.99", 3), kv("l/pme.0", 4)], 9)
    };
    line.placed(&l, &place, 4, Some(&read(2)));
    assert_eq!(
        line.lapsed(&l, &read(2)).len(),
        1,
        "only the stray at first"
    );
    std::thread::sleep(Duration::from_millis(LEASE_MS / 2));
    assert_eq!(
        line.lapsed(&l, &read(5)).len(),
        1,
        "asked for again: seen anew"
    );
    std::thread::sleep(Duration::from_millis(LEASE_MS / 2 + 50));
    assert_eq!(line.lapsed(&l, &read(5)).len(), 1, "not yet");
    std::thread::sleep(Duration::from_millis(LEASE_MS / 2));
    let lapsed: Vec<Vec<u8>> = line
        .lapsed(&l, &read(5))
        .into_iter()
        .map(|kv| kv.key)
        .collect();
    assert_eq!(lapsed, vec![stray, b"other".to_vec()]);
}

/// Stores on `cluster`, one prefix for all (processes sharing the locks).
fn stores(cluster: &Cluster) -> impl Fn(OnReleased) -> EtcdStore {
    let options = cluster.options();
    move |told| EtcdStore::new(options.clone(), Some(told)).expect("a store")
}

#[test]
fn the_line_hands_the_lock_over_in_order_across_a_cluster() {
    let cluster = Cluster::start(3);
    the_line_hands_the_lock_over_in_order(&Harness::new(), &stores(&cluster));
}

#[test]
fn an_attempt_with_more_waiting_keeps_their_place_however_it_gets_in() {
    let cluster = Cluster::start(1);
    more_waiting_keep_their_place(&Harness::new(), &stores(&cluster));
}

#[test]
fn a_lock_handed_to_a_place_left_stays_its_process_s() {
    let cluster = Cluster::start(1);
    leaving_keeps_a_lock_handed_over(&Harness::new(), &stores(&cluster));
}

#[test]
fn a_waiter_asking_again_from_its_place_is_refused_while_the_lock_is_held() {
    let cluster = Cluster::start(1);
    let harness = Harness::new();
    let make = stores(&cluster);
    let (a, b) = (make(Arc::new(|_, _| {})), make(Arc::new(|_, _| {})));
    let lock = HoldKind::Lock;
    let in_line = |ms: f64| Wait::InLine(crate::store::Asked::at(ms));
    let first = harness
        .settle(a.acquire(lock, "k", "a", 10_000.0, Wait::Now))
        .expect("an answer");
    assert!(matches!(first, Acquired::Fenced(_)), "{first:?}");
    for asked in [1.0, 2.0, 3.0] {
        let again = harness
            .settle(b.acquire(lock, "k", "b", 10_000.0, in_line(asked)))
            .expect("an answer");
        assert_eq!(again, Acquired::Refused, "asked at {asked}");
    }
}
