//! The store against real etcd members the tests start (`test_cluster.rs`):
//! one member for the operations, three for a leader killed while a lock is
//! held and for a member left without a quorum. Then the options.

use std::time::{Duration, Instant};

use super::endpoint::{Credentials, Endpoint};
use super::test_cluster::{runtime, settle, Cluster};
use super::*;
use crate::store::{Code, StoreError, Wait};

fn token(acquired: Acquired) -> Option<u64> {
    match acquired {
        Acquired::Fenced(token) => Some(token),
        Acquired::Refused => None,
        other => panic!("an etcd acquire answers fenced or refused, not {other:?}"),
    }
}

const LOCK: HoldKind = HoldKind::Lock;

#[test]
fn every_operation_answers_as_the_cluster_decides() {
    let cluster = Cluster::start(1);
    let store = cluster.store();
    let rt = runtime();
    let key = "invoice:42 \u{1F512}\0tail";
    let first = token(settle(&rt, store.acquire(LOCK, key, "a", 5_000.0, Wait::Now)).unwrap())
        .expect("free: taken");
    assert_eq!(
        token(settle(&rt, store.acquire(LOCK, key, "b", 5_000.0, Wait::Now)).unwrap()),
        None
    );
    // The same owner asking again (an acquire sent twice) finds its own hold.
    assert_eq!(
        token(settle(&rt, store.acquire(LOCK, key, "a", 5_000.0, Wait::Now)).unwrap()),
        Some(first)
    );
    assert!(settle(&rt, store.holds(LOCK, key, "a")).unwrap());
    assert!(!settle(&rt, store.holds(LOCK, key, "b")).unwrap());
    assert!(settle(&rt, store.would_wait(LOCK, key)).unwrap());
    assert_eq!(settle(&rt, store.holders(LOCK, key)).unwrap(), 1.0);
    let left = settle(&rt, store.remaining(LOCK, key, None))
        .unwrap()
        .expect("held");
    assert!((3_000.0..=6_000.0).contains(&left), "{left}");
    assert!(!settle(&rt, store.extend(LOCK, key, "b", 20_000.0)).unwrap());
    assert!(settle(&rt, store.extend(LOCK, key, "a", 20_000.0)).unwrap());
    let left = settle(&rt, store.remaining(LOCK, key, None))
        .unwrap()
        .expect("held");
    assert!(left >= 19_000.0, "{left}");
    assert!(!settle(&rt, store.release(LOCK, key, "b")).unwrap());
    assert!(settle(&rt, store.release(LOCK, key, "a")).unwrap());
    assert!(!settle(&rt, store.release(LOCK, key, "a")).unwrap());
    assert!(!settle(&rt, store.would_wait(LOCK, key)).unwrap());
    assert_eq!(settle(&rt, store.remaining(LOCK, key, None)).unwrap(), None);
    let second = token(settle(&rt, store.acquire(LOCK, key, "b", 5_000.0, Wait::Now)).unwrap())
        .expect("free again");
    assert!(second > first, "fencing tokens grow: {first} then {second}");
    // A key longer than etcd reads whole is stored by its hash, exactly.
    let long = "k".repeat(1 << 20);
    assert!(
        token(settle(&rt, store.acquire(LOCK, &long, "a", 5_000.0, Wait::Now)).unwrap()).is_some()
    );
    assert!(token(
        settle(
            &rt,
            store.acquire(LOCK, &long[1..], "a", 5_000.0, Wait::Now)
        )
        .unwrap()
    )
    .is_some());
    assert!(settle(&rt, store.release(LOCK, &long, "a")).unwrap());
    settle(&rt, store.ping()).unwrap();
}

/// How long after `from` the lock `key` is found free, asked every 20 ms.
fn freed_after(
    rt: &tokio::runtime::Runtime, store: &EtcdStore, key: &str, from: Instant,
) -> Duration {
    while settle(rt, store.would_wait(LOCK, key)).unwrap() {
        std::thread::sleep(Duration::from_millis(20));
    }
    from.elapsed()
}

#[test]
fn a_lock_lapses_at_its_ttl_and_with_its_lease_once_its_store_is_gone() {
    let cluster = Cluster::start(1);
    let store = cluster.store();
    let rt = runtime();
    // Its store lets it go at its TTL, to the millisecond as the store counts.
    let started = Instant::now();
    assert!(
        token(settle(&rt, store.acquire(LOCK, "lapse", "a", 700.0, Wait::Now)).unwrap()).is_some()
    );
    let lapsed = freed_after(&rt, &store, "lapse", started);
    assert!(
        lapsed >= Duration::from_millis(700),
        "lapsed after {lapsed:?}"
    );
    assert!(
        lapsed < Duration::from_millis(1_000),
        "lapsed only after {lapsed:?}"
    );
    assert!(!settle(&rt, store.release(LOCK, "lapse", "a")).unwrap());
    assert!(!settle(&rt, store.extend(LOCK, "lapse", "a", 1_000.0)).unwrap());
    // Extended, at its new deadline; and not by the timer of its first write
    // when another store extended it.
    let started = Instant::now();
    assert!(
        token(settle(&rt, store.acquire(LOCK, "moved", "a", 400.0, Wait::Now)).unwrap()).is_some()
    );
    let elsewhere = EtcdStore::new(store_options_like(&cluster, &store), None).unwrap();
    assert!(settle(&rt, elsewhere.extend(LOCK, "moved", "a", 1_000.0)).unwrap());
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        settle(&rt, store.holds(LOCK, "moved", "a")).unwrap(),
        "the first write's timer left it"
    );
    let lapsed = freed_after(&rt, &store, "moved", started);
    assert!(
        lapsed >= Duration::from_millis(1_000),
        "lapsed after {lapsed:?}"
    );
    assert!(
        lapsed < Duration::from_millis(1_400),
        "lapsed only after {lapsed:?}"
    );
    // A store gone (a process that died), its lock ends with its lease: not
    // before the TTL, and within the lease's whole seconds after it.
    let gone = EtcdStore::new(store_options_like(&cluster, &store), None).unwrap();
    let started = Instant::now();
    assert!(
        token(settle(&rt, gone.acquire(LOCK, "orphan", "a", 1_200.0, Wait::Now)).unwrap())
            .is_some()
    );
    gone.close();
    let lapsed = freed_after(&rt, &store, "orphan", started);
    assert!(
        lapsed >= Duration::from_millis(1_200),
        "lapsed after {lapsed:?}"
    );
    assert!(
        lapsed < Duration::from_millis(4_500),
        "lapsed only after {lapsed:?}"
    );
    // Many locks share a few leases: a burst of acquires grants about one.
    for i in 0..50 {
        let key = format!("shared:{i}");
        assert!(
            token(settle(&rt, store.acquire(LOCK, &key, "a", 3_000.0, Wait::Now)).unwrap())
                .is_some()
        );
    }
    assert_eq!(
        store.shared.lapses.waiting(),
        (50, 50),
        "each hold due at its TTL"
    );
    for i in 0..50 {
        assert!(settle(&rt, store.release(LOCK, &format!("shared:{i}"), "a")).unwrap());
    }
    assert_eq!(
        store.shared.lapses.waiting(),
        (0, 0),
        "released holds leave the list"
    );
    let leases = store.shared.leases.granted();
    assert!(leases <= 3, "{leases} leases for 50 locks");
}

#[test]
fn a_release_is_heard_by_the_watcher() {
    let cluster = Cluster::start(1);
    let rt = runtime();
    let (heard_tx, heard_rx) = std::sync::mpsc::channel::<String>();
    let heard_tx = std::sync::Mutex::new(heard_tx);
    let on_released: OnReleased = Arc::new(move |_, key| {
        let _ = heard_tx.lock().map(|tx| tx.send(key));
    });
    let waiting = EtcdStore::new(cluster.options(), Some(on_released)).unwrap();
    let mut options = cluster.options();
    options.prefix = waiting.shared.prefix.clone();
    let holding = EtcdStore::new(options, None).unwrap();
    assert!(token(
        settle(
            &rt,
            holding.acquire(LOCK, "watched", "a", 10_000.0, Wait::Now)
        )
        .unwrap()
    )
    .is_some());
    let task = waiting
        .watch(LOCK, "watched", true)
        .expect("the watcher starts");
    rt.spawn(task);
    // The first wake is the one every new stream gives.
    assert_eq!(
        heard_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        "watched"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        heard_rx.try_recv().is_err(),
        "nothing else heard while held"
    );
    assert!(settle(&rt, holding.release(LOCK, "watched", "a")).unwrap());
    assert_eq!(
        heard_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        "watched"
    );
    waiting.close();
}

#[test]
fn a_lock_held_while_the_leader_is_killed_stays_held_and_goes_on() {
    let mut cluster = Cluster::start(3);
    let store = cluster.store();
    let rt = runtime();
    let first = token(
        settle(
            &rt,
            store.acquire(LOCK, "failover", "a", 30_000.0, Wait::Now),
        )
        .unwrap(),
    )
    .expect("taken");
    let leader = cluster.leader();
    cluster.kill(leader);
    // Held through the election: nobody else gets it, its owner still has it.
    assert_eq!(
        token(
            settle(
                &rt,
                store.acquire(LOCK, "failover", "b", 5_000.0, Wait::Now)
            )
            .unwrap()
        ),
        None
    );
    assert!(settle(&rt, store.holds(LOCK, "failover", "a")).unwrap());
    assert!(settle(&rt, store.extend(LOCK, "failover", "a", 30_000.0)).unwrap());
    assert!(settle(&rt, store.release(LOCK, "failover", "a")).unwrap());
    let next = token(
        settle(
            &rt,
            store.acquire(LOCK, "failover", "b", 5_000.0, Wait::Now),
        )
        .unwrap(),
    )
    .expect("free after the release");
    assert!(next > first);
    cluster.restart(leader);
    assert!(settle(&rt, store.release(LOCK, "failover", "b")).unwrap());
}

#[test]
fn with_a_minority_left_the_store_is_unavailable_never_granting() {
    let mut cluster = Cluster::start(3);
    let rt = runtime();
    let store = cluster.store();
    assert!(
        token(settle(&rt, store.acquire(LOCK, "quorum", "a", 30_000.0, Wait::Now)).unwrap())
            .is_some()
    );
    let survivor = cluster.leader();
    for i in 0..3 {
        if i != survivor {
            cluster.kill(i);
        }
    }
    let mut options = cluster.options();
    options.prefix = store.shared.prefix.clone();
    options.command_timeout = Duration::from_millis(1_500);
    let cut_off = EtcdStore::new(options, None).unwrap();
    let answer = settle(
        &rt,
        cut_off.acquire(LOCK, "quorum", "b", 5_000.0, Wait::Now),
    );
    match answer {
        Err(StoreError::Backend(e)) => assert_eq!(e.code, Code::StoreUnavailable, "{e:?}"),
        other => panic!("a member without a quorum answered {other:?}"),
    }
    let read = settle(&rt, cut_off.holds(LOCK, "quorum", "a"));
    assert!(
        read.is_err(),
        "a linearizable read needs a quorum: {read:?}"
    );
}

#[test]
fn endpoints_are_read_as_written_and_a_password_never_shows() {
    let plain = Endpoint::parse("http://127.0.0.1").unwrap();
    assert_eq!(
        (plain.host.as_str(), plain.port, plain.tls_name.is_some()),
        ("127.0.0.1", 2379, false)
    );
    let tls = Endpoint::parse("https://etcd.internal:2380").unwrap();
    assert_eq!((tls.port, tls.tls_name.is_some()), (2380, true));
    assert_eq!(
        Endpoint::parse("http://[::1]:2379").unwrap().name(),
        "etcd at http://[::1]:2379"
    );
    for bad in [
        "etcd:2379",
        "redis://127.0.0.1",
        "http://u:p@h:1",
        "http://h:1/v3",
        "http://h:1?x=1",
        "nonsense",
    ] {
        assert!(Endpoint::parse(bad).is_err(), "{bad} was taken");
    }
    // A URL with a user and password in it is refused without showing them.
    for bad in [
        "http://app:s3cret@h:2379",
        "http://app:s3cret@h:99999",
        "ftp://app:s3cret@h",
    ] {
        let refused = Endpoint::parse(bad).expect_err(bad);
        assert!(
            !refused.contains("s3cret") && refused.contains("***@"),
            "{refused}"
        );
    }
    let credentials = Credentials {
        username: "locks".to_owned(),
        password: "s3cret".to_owned(),
    };
    assert!(!format!("{credentials:?}").contains("s3cret"));
    let mut options = EtcdOptions::for_urls(&["http://127.0.0.1:2379"]).unwrap();
    options.credentials = Some(credentials);
    assert!(!format!("{options:?}").contains("s3cret"));
    assert!(EtcdOptions::for_urls(&[]).is_err());
}

/// Options for another store on `store`'s keys (another process, as the cluster sees it).
fn store_options_like(cluster: &Cluster, store: &EtcdStore) -> EtcdOptions {
    let mut options = cluster.options();
    options.prefix = store.shared.prefix.clone();
    options
}

#[test]
fn a_ttl_longer_than_etcds_longest_lease_is_refused_not_cut_short() {
    let store = EtcdStore::new(
        EtcdOptions::for_urls(&["http://127.0.0.1:1"]).unwrap(),
        None,
    )
    .unwrap();
    for op in [
        store.acquire(LOCK, "k", "a", 9.5e12, Wait::Now).map(|_| ()),
        store.extend(LOCK, "k", "a", 9.5e12).map(|_| ()),
    ] {
        match op {
            Op::Ready(Err(StoreError::Type(message))) => {
                assert!(message.contains("longest lease"), "{message}")
            }
            _ => panic!("a TTL past etcd's longest lease must be refused at once"),
        }
    }
}
