//! The line a plain lock's waiters wait in on etcd: what a store knows of
//! its places (`line.rs`), then, against a cluster of the test's own, the
//! same hand-overs as every store that keeps a line (`store::line::contract`),
//! two stores standing for two processes on one prefix.

use std::time::Duration;

use super::layout::place_entry;
use super::line::{held_value, place_value, Entries, Heard, Line};
use super::messages::KeyValue;
use super::test_cluster::Cluster;
use super::*;
use crate::store::event_loop::tests::Harness;
use crate::store::line::contract::{
    leaving_keeps_a_lock_handed_over, more_waiting_keep_their_place,
    the_line_hands_the_lock_over_in_order,
};
use crate::store::line::LEASE_MS;

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
    assert_eq!(
        line.heard(&l, b"x"),
        Heard::Wake,
        "no place: its waiters ask"
    );
    let place = line.place_key(&l);
    assert_eq!(place, b"l/pme.0".to_vec());
    assert_eq!(line.heard(&l, b"x"), Heard::Look, "a place on its way");
    let entries = Entries::of(vec![kv("a", 1), kv("b", 2), kv("l/pme.0", 3)], 3);
    line.placed(&l, &place, 3, Some(&entries));
    assert_eq!(line.heard(&l, b"a"), Heard::Nothing);
    assert_eq!(line.heard(&l, b"b"), Heard::Look);
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
    assert_eq!(
        line.heard(&l, b"q"),
        Heard::Nothing,
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
