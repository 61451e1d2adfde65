//! Semaphores and read-write locks against an etcd member the test starts:
//! admission by count, a writer's mark, releases heard, and many callers
//! racing for a few permits never admitted past the limit.

use std::sync::Arc;
use std::time::Duration;

use super::test_cluster::{runtime, settle, Cluster};
use super::*;
use crate::store::Wait;

fn admitted(acquired: StoreResult<Acquired>) -> Option<u64> {
    match acquired.expect("the cluster answers") {
        Acquired::Fenced(token) => Some(token),
        Acquired::Refused => None,
        other => panic!("an etcd acquire answers fenced or refused, not {other:?}"),
    }
}

#[test]
fn a_semaphore_admits_up_to_each_callers_limit() {
    let cluster = Cluster::start(1);
    let store = cluster.store();
    let rt = runtime();
    let permit = |limit| HoldKind::Permit { limit };
    let key = "mailer/smtp";
    let a = admitted(settle(
        &rt,
        store.acquire(permit(2), key, "a", 5_000.0, Wait::Now),
    ))
    .expect("1 of 2");
    let b = admitted(settle(
        &rt,
        store.acquire(permit(2), key, "b", 5_000.0, Wait::Now),
    ))
    .expect("2 of 2");
    assert!(b > a);
    assert_eq!(
        admitted(settle(
            &rt,
            store.acquire(permit(2), key, "c", 5_000.0, Wait::Now)
        )),
        None
    );
    assert!(settle(&rt, store.would_wait(permit(2), key)).unwrap());
    // A caller with a higher limit of its own gets in; the same owner
    // asking again (an acquire sent twice) finds its permit.
    assert!(admitted(settle(
        &rt,
        store.acquire(permit(3), key, "c", 5_000.0, Wait::Now)
    ))
    .is_some());
    assert_eq!(
        admitted(settle(
            &rt,
            store.acquire(permit(2), key, "a", 5_000.0, Wait::Now)
        )),
        Some(a)
    );
    assert_eq!(settle(&rt, store.holders(permit(2), key)).unwrap(), 3.0);
    // Another key's permits, even one whose name starts with this one's, are apart.
    assert_eq!(
        settle(&rt, store.holders(permit(2), "mailer/smtp/eu")).unwrap(),
        0.0
    );
    assert!(settle(&rt, store.holds(permit(2), key, "b")).unwrap());
    assert!(settle(&rt, store.extend(permit(2), key, "b", 20_000.0)).unwrap());
    let left = settle(&rt, store.remaining(permit(2), key, Some("b")))
        .unwrap()
        .expect("held");
    assert!(left >= 19_000.0, "{left}");
    assert_eq!(
        settle(&rt, store.remaining(permit(2), key, None)).unwrap(),
        None
    );
    assert!(settle(&rt, store.release(permit(2), key, "a")).unwrap());
    assert!(!settle(&rt, store.release(permit(2), key, "a")).unwrap());
    assert!(!settle(&rt, store.extend(permit(2), key, "a", 1_000.0)).unwrap());
    assert_eq!(settle(&rt, store.holders(permit(2), key)).unwrap(), 2.0);
    // Kinds never see each other's data.
    assert!(!settle(&rt, store.would_wait(HoldKind::Lock, key)).unwrap());
}

#[test]
fn many_callers_racing_for_a_few_permits_are_never_admitted_past_the_limit() {
    let cluster = Cluster::start(1);
    let stores: Vec<Arc<EtcdStore>> = (0..2)
        .map(|_| {
            let mut options = cluster.options();
            options.prefix = b"race:".to_vec();
            Arc::new(EtcdStore::new(options, None).unwrap())
        })
        .collect();
    let rt = runtime();
    let permit = HoldKind::Permit { limit: 3 };
    for round in 0..5 {
        let tries = (0..16).map(|i| {
            let store = Arc::clone(&stores[i % 2]);
            let owner = format!("o{round}-{i}");
            async move {
                let op = store.acquire(permit, "few", &owner, 10_000.0, Wait::Now);
                (owner, op.settle().await)
            }
        });
        let answers = rt.block_on(futures_util::future::join_all(tries));
        let winners: Vec<String> = answers
            .into_iter()
            .filter_map(|(owner, answer)| admitted(answer).map(|_| owner))
            .collect();
        assert!(
            !winners.is_empty() && winners.len() <= 3,
            "round {round}: {winners:?}"
        );
        assert_eq!(
            rt.block_on(stores[0].holders(permit, "few").settle())
                .unwrap(),
            winners.len() as f64
        );
        for owner in winners {
            assert!(rt
                .block_on(stores[1].release(permit, "few", &owner).settle())
                .unwrap());
        }
    }
}

#[test]
fn readers_share_a_writer_is_alone_and_a_waiting_writer_holds_readers_back() {
    let cluster = Cluster::start(1);
    let store = cluster.store();
    let rt = runtime();
    let (read, write) = (HoldKind::Read, HoldKind::Write);
    let key = "report";
    assert!(admitted(settle(
        &rt,
        store.acquire(read, key, "r1", 5_000.0, Wait::Now)
    ))
    .is_some());
    assert!(admitted(settle(
        &rt,
        store.acquire(read, key, "r2", 5_000.0, Wait::Now)
    ))
    .is_some());
    assert_eq!(settle(&rt, store.holders(read, key)).unwrap(), 2.0);
    assert!(settle(&rt, store.would_wait(write, key)).unwrap());
    assert!(!settle(&rt, store.would_wait(read, key)).unwrap());
    // The writer is refused while they read, and holds new readers back.
    assert_eq!(
        admitted(settle(
            &rt,
            store.acquire(write, key, "w", 5_000.0, Wait::Now)
        )),
        None
    );
    assert!(settle(&rt, store.would_wait(read, key)).unwrap());
    assert_eq!(
        admitted(settle(
            &rt,
            store.acquire(read, key, "r3", 5_000.0, Wait::Now)
        )),
        None
    );
    // Until it gives up.
    settle(&rt, store.withdraw(write, key)).unwrap();
    assert!(admitted(settle(
        &rt,
        store.acquire(read, key, "r3", 5_000.0, Wait::Now)
    ))
    .is_some());
    for reader in ["r1", "r2", "r3"] {
        assert!(settle(&rt, store.release(read, key, reader)).unwrap());
    }
    let first = admitted(settle(
        &rt,
        store.acquire(write, key, "w", 5_000.0, Wait::Now),
    ))
    .expect("nobody reads");
    assert_eq!(
        admitted(settle(
            &rt,
            store.acquire(write, key, "w", 5_000.0, Wait::Now)
        )),
        Some(first)
    );
    assert_eq!(
        admitted(settle(
            &rt,
            store.acquire(read, key, "r4", 5_000.0, Wait::Now)
        )),
        None
    );
    assert_eq!(
        admitted(settle(
            &rt,
            store.acquire(write, key, "w2", 5_000.0, Wait::Now)
        )),
        None
    );
    assert_eq!(settle(&rt, store.holders(write, key)).unwrap(), 1.0);
    assert!(settle(&rt, store.holds(write, key, "w")).unwrap());
    assert!(!settle(&rt, store.release(write, key, "w2")).unwrap());
    assert!(settle(&rt, store.extend(write, key, "w", 10_000.0)).unwrap());
    assert!(settle(&rt, store.release(write, key, "w")).unwrap());
    // The refused second writer's mark lapses or is withdrawn; then it gets in, with a later token.
    settle(&rt, store.withdraw(write, key)).unwrap();
    let second = admitted(settle(
        &rt,
        store.acquire(write, key, "w2", 5_000.0, Wait::Now),
    ))
    .expect("free");
    assert!(second > first);
    assert!(settle(&rt, store.release(write, key, "w2")).unwrap());
    assert_eq!(settle(&rt, store.holders(read, key)).unwrap(), 0.0);
}

#[test]
fn a_permit_released_and_a_writer_leaving_are_heard() {
    let cluster = Cluster::start(1);
    let rt = runtime();
    let (heard_tx, heard_rx) = std::sync::mpsc::channel::<(Released, String)>();
    let heard_tx = std::sync::Mutex::new(heard_tx);
    let on_released: OnReleased = Arc::new(move |released, key| {
        let _ = heard_tx.lock().map(|tx| tx.send((released, key)));
    });
    let mut options = cluster.options();
    options.prefix = b"heard:".to_vec();
    let waiting = EtcdStore::new(options.clone(), Some(on_released)).unwrap();
    let holding = EtcdStore::new(options, None).unwrap();
    let permit = HoldKind::Permit { limit: 1 };
    assert!(admitted(settle(
        &rt,
        holding.acquire(permit, "sem", "a", 10_000.0, Wait::Now)
    ))
    .is_some());
    assert!(admitted(settle(
        &rt,
        holding.acquire(HoldKind::Write, "rw", "a", 10_000.0, Wait::Now)
    ))
    .is_some());
    rt.spawn(
        waiting
            .watch(permit, "sem", true)
            .expect("the watcher starts"),
    );
    // A new stream wakes what it follows once: a release may have come before.
    assert_eq!(
        heard_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        (Released::Semaphore, "sem".to_owned())
    );
    assert!(
        waiting.watch(HoldKind::Read, "rw", true).is_none(),
        "one watcher for the store"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        heard_rx.try_recv().is_err(),
        "nothing else heard while held"
    );
    assert!(settle(&rt, holding.release(permit, "sem", "a")).unwrap());
    assert_eq!(
        heard_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        (Released::Semaphore, "sem".to_owned())
    );
    assert!(settle(&rt, holding.release(HoldKind::Write, "rw", "a")).unwrap());
    assert_eq!(
        heard_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        (Released::ReadWrite, "rw".to_owned())
    );
    waiting.close();
}
