//! The in-memory store: the plain lock's half, its one dispatch over every
//! kind of hold, and the semaphores' and read-write keys' groups.

use super::*;
use std::thread::sleep;

#[test]
fn fencing_tokens_grow_per_key_across_expiry_and_keys() {
    let store = MemoryStore::new();
    // Long enough that a busy machine cannot let it lapse before the next line.
    assert!(store.try_acquire("k", "a", 200.0));
    let first = store.token_of("k", "a").expect("held");
    assert_eq!(store.token_of("k", "b"), None, "only the holder's token");
    assert!(store.try_acquire("other", "x", 10_000.0));
    sleep(Duration::from_millis(250));
    assert_eq!(store.token_of("k", "a"), None, "expired: no token");
    assert!(store.try_acquire("k", "b", 1000.0));
    let second = store.token_of("k", "b").expect("held");
    assert!(
        second > first + 1,
        "{second} after {first} and another key's"
    );
    assert!(store.try_release("k", "b"));
    assert!(store.try_acquire("k", "c", 1000.0));
    assert!(store.token_of("k", "c").expect("held") > second);
}

#[test]
fn acquire_is_set_if_absent() {
    let store = MemoryStore::new();
    assert!(store.try_acquire("k", "a", 10_000.0));
    assert!(!store.try_acquire("k", "b", 10_000.0));
    assert!(!store.try_acquire("k", "a", 10_000.0));
    assert!(store.try_acquire("other", "b", 10_000.0));
}

#[test]
fn release_and_extend_need_the_owner() {
    let store = MemoryStore::new();
    assert!(store.try_acquire("k", "a", 10_000.0));
    assert!(!store.try_release("k", "b"));
    assert!(!store.try_extend("k", "b", 10_000.0));
    assert!(store.held_by("k", "a"));
    assert!(store.try_extend("k", "a", 20_000.0));
    assert!(store.try_release("k", "a"));
    assert!(!store.try_release("k", "a"));
    assert!(!store.locked("k"));
}

#[test]
fn entries_expire() {
    let store = MemoryStore::new();
    assert!(store.try_acquire("k", "a", 150.0));
    assert!(store.locked("k"));
    let left = store.time_left("k").unwrap();
    assert!(left > 0.0 && left <= 150.0, "{left}");
    sleep(Duration::from_millis(200));
    assert!(!store.locked("k"));
    assert_eq!(store.time_left("k"), None);
    assert!(!store.try_extend("k", "a", 1000.0));
    assert!(!store.try_release("k", "a"));
    assert!(store.try_acquire("k", "b", 1000.0));
}

#[test]
fn late_release_does_not_free_the_next_holder() {
    let store = MemoryStore::new();
    assert!(store.try_acquire("k", "a", 20.0));
    sleep(Duration::from_millis(30));
    assert!(store.try_acquire("k", "b", 10_000.0));
    assert!(!store.try_release("k", "a"));
    assert!(store.held_by("k", "b"));
}

#[test]
fn a_tiny_ttl_still_holds_for_a_millisecond() {
    let store = MemoryStore::new();
    // A millisecond is short enough for a busy machine to pass between
    // two lines: some attempt out of twenty must see the lock held.
    let held = (0..20).any(|i| {
        let key = format!("k{i}");
        assert!(store.try_acquire(&key, "a", 1e-7));
        let refused = !store.try_acquire(&key, "b", 1e-7);
        let left = store.time_left(&key);
        refused && left.is_some_and(|ms| ms > 0.0 && ms <= 1.0)
    });
    assert!(
        held,
        "a 1e-7 ms TTL was never held for its rounded-up millisecond"
    );
}

#[test]
fn huge_ttls_do_not_overflow() {
    let store = MemoryStore::new();
    assert!(store.try_acquire("k", "a", 9_007_199_254_740_991.0));
    assert!(store.locked("k"));
    assert!(store.try_extend("k", "a", f64::MAX));
    assert!(store.time_left("k").unwrap() > 0.0);
}

#[test]
fn expired_entries_are_swept() {
    let store = MemoryStore::new();
    for i in 0..50_000 {
        assert!(store.try_acquire(&format!("k{i}"), "a", 20.0));
    }
    sleep(Duration::from_millis(30) + SWEEP_INTERVAL);
    assert!(store.try_acquire("fresh", "a", 10_000.0));
    assert_eq!(store.len(), 1);
}

#[test]
fn sweeping_keeps_live_entries() {
    let store = MemoryStore::new();
    for i in 0..5_000 {
        assert!(store.try_acquire(&format!("k{i}"), "a", 60_000.0));
    }
    assert_eq!(store.len(), 5_000);
    for i in 0..5_000 {
        assert!(store.held_by(&format!("k{i}"), "a"));
    }
}

/// The store's one dispatch: what each operation answers, per kind of hold.
#[test]
fn every_operation_names_its_hold() {
    fn now<T>(op: Op<T>) -> T {
        match op {
            Op::Ready(result) => result.expect("no store error"),
            Op::Pending(_) | Op::Local(_) => panic!("the memory store settles at once"),
        }
    }
    let store = MemoryStore::new();
    let permit = HoldKind::Permit { limit: 1 };
    // A plain lock keeps its token with the hold; the other kinds hand it over.
    assert_eq!(
        now(store.acquire(HoldKind::Lock, "k", "a", 10_000.0, Wait::Now)),
        Acquired::Taken
    );
    assert!(store.fencing_token(HoldKind::Lock, "k", "a").is_some());
    let Acquired::Fenced(token) = now(store.acquire(permit, "k", "p", 10_000.0, Wait::Now)) else {
        panic!("a permit is handed over with its token");
    };
    assert_eq!(store.fencing_token(permit, "k", "p"), Some(token as f64));
    assert_eq!(
        now(store.acquire(permit, "k", "q", 10_000.0, Wait::Now)),
        Acquired::Refused
    );
    assert!(now(store.would_wait(HoldKind::Lock, "k")));
    assert!(now(store.would_wait(permit, "k")));
    assert!(!now(store.would_wait(HoldKind::Read, "k")));
    assert_eq!(now(store.holders(HoldKind::Lock, "k")), 1.0);
    assert_eq!(now(store.holders(permit, "k")), 1.0);
    assert_eq!(now(store.holders(HoldKind::Write, "k")), 0.0);
    // A plain lock's time left is the key's, whoever asks; a permit's is its owner's.
    assert!(now(store.remaining(HoldKind::Lock, "k", None)).is_some());
    assert!(now(store.remaining(permit, "k", Some("p"))).is_some());
    assert_eq!(now(store.remaining(permit, "k", None)), None);
    assert!(now(store.holds(HoldKind::Lock, "k", "a")));
    assert!(!now(store.holds(permit, "k", "a")));
    assert!(
        !now(store.release(permit, "k", "a")),
        "a plain lock's owner"
    );
    assert!(now(store.extend(permit, "k", "p", 20_000.0)));
    assert!(now(store.release(HoldKind::Lock, "k", "a")));
    assert!(now(store.release(permit, "k", "p")));
    assert_eq!(store.entries_in_process(), 0);
}

const PERMIT3: HoldKind = HoldKind::Permit { limit: 3 };

#[test]
fn a_semaphore_admits_up_to_its_limit() {
    let store = MemoryStore::new();
    for owner in ["a", "b", "c"] {
        assert!(store
            .try_acquire_in(PERMIT3, "s", owner, 10_000.0)
            .is_some());
    }
    assert!(store.try_acquire_in(PERMIT3, "s", "d", 10_000.0).is_none());
    assert!(store.waits(PERMIT3, "s"));
    assert_eq!(store.count(PERMIT3, "s"), 3);
    // A caller with a higher limit is admitted while fewer than its own are held.
    assert!(store
        .try_acquire_in(HoldKind::Permit { limit: 4 }, "s", "e", 10_000.0)
        .is_some());
    assert!(store.try_release_in(PERMIT3, "s", "a"));
    assert!(!store.try_release_in(PERMIT3, "s", "a"), "only once");
    assert!(
        store.try_acquire_in(PERMIT3, "s", "d", 10_000.0).is_none(),
        "4 held, limit 3"
    );
    assert!(store.try_release_in(PERMIT3, "s", "b"));
    assert!(store.try_acquire_in(PERMIT3, "s", "d", 10_000.0).is_some());
}

#[test]
fn kinds_of_hold_never_see_each_other() {
    let store = MemoryStore::new();
    assert!(store.try_acquire("k", "plain", 10_000.0));
    assert!(store
        .try_acquire_in(HoldKind::Permit { limit: 1 }, "k", "p", 10_000.0)
        .is_some());
    assert!(store
        .try_acquire_in(HoldKind::Write, "k", "w", 10_000.0)
        .is_some());
    assert!(!store.try_release_in(HoldKind::Write, "k", "p"));
    assert!(!store.try_release_in(PERMIT3, "k", "w"));
    assert!(!store.try_release("k", "w"));
}

#[test]
fn permits_expire_one_by_one() {
    let store = MemoryStore::new();
    assert!(store.try_acquire_in(PERMIT3, "s", "short", 100.0).is_some());
    assert!(store
        .try_acquire_in(PERMIT3, "s", "long", 10_000.0)
        .is_some());
    sleep(Duration::from_millis(150));
    assert_eq!(store.count(PERMIT3, "s"), 1);
    assert!(!store.try_extend_in(PERMIT3, "s", "short", 1000.0));
    assert!(store.try_extend_in(PERMIT3, "s", "long", 20_000.0));
    assert!(store
        .remaining_in_ms(PERMIT3, "s", "long")
        .is_some_and(|ms| ms > 10_000.0));
}

#[test]
fn readers_share_and_a_writer_excludes() {
    let store = MemoryStore::new();
    assert!(store
        .try_acquire_in(HoldKind::Read, "rw", "r1", 10_000.0)
        .is_some());
    assert!(store
        .try_acquire_in(HoldKind::Read, "rw", "r2", 10_000.0)
        .is_some());
    assert_eq!(store.count(HoldKind::Read, "rw"), 2);
    assert!(store
        .try_acquire_in(HoldKind::Write, "rw", "w", 10_000.0)
        .is_none());
    // The refused writer holds back new readers...
    assert!(store
        .try_acquire_in(HoldKind::Read, "rw", "r3", 10_000.0)
        .is_none());
    assert!(store.waits(HoldKind::Read, "rw"));
    assert!(store.try_release_in(HoldKind::Read, "rw", "r1"));
    assert!(store.try_release_in(HoldKind::Read, "rw", "r2"));
    // ...and gets in once they are gone; then nobody else does.
    let token = store
        .try_acquire_in(HoldKind::Write, "rw", "w", 10_000.0)
        .expect("writer admitted");
    assert_eq!(store.token_in(HoldKind::Write, "rw", "w"), Some(token));
    assert!(store
        .try_acquire_in(HoldKind::Read, "rw", "r3", 10_000.0)
        .is_none());
    assert!(store
        .try_acquire_in(HoldKind::Write, "rw", "w2", 10_000.0)
        .is_none());
    assert!(store.try_release_in(HoldKind::Write, "rw", "w"));
    // w2's refusal held readers back; its withdrawal lets them in.
    store.stop_holding_back(HoldKind::Write, "rw");
    assert!(store
        .try_acquire_in(HoldKind::Read, "rw", "r3", 10_000.0)
        .is_some());
}

#[test]
fn a_waiting_writer_holds_readers_back_only_for_its_ttl() {
    let store = MemoryStore::new();
    assert!(store
        .try_acquire_in(HoldKind::Read, "rw", "r1", 10_000.0)
        .is_some());
    assert!(store
        .try_acquire_in(HoldKind::Write, "rw", "w", 100.0)
        .is_none());
    assert!(store
        .try_acquire_in(HoldKind::Read, "rw", "r2", 10_000.0)
        .is_none());
    sleep(Duration::from_millis(150));
    assert!(store
        .try_acquire_in(HoldKind::Read, "rw", "r2", 10_000.0)
        .is_some());
}

#[test]
fn empty_groups_are_swept() {
    let store = MemoryStore::new();
    for i in 0..100 {
        assert!(store
            .try_acquire_in(PERMIT3, &format!("s{i}"), "a", 20.0)
            .is_some());
    }
    sleep(Duration::from_millis(30) + SWEEP_INTERVAL);
    assert!(store.try_acquire("fresh", "a", 10_000.0));
    assert_eq!(store.len(), 1);
}
