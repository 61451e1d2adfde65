//! What every store that keeps a line ([`crate::store::Capabilities::waits_in_line`])
//! does with it, as one test each store's tests run against a real server:
//! two stores stand for two processes (each has an id of its own).

use std::sync::{Arc, Mutex};

use crate::store::event_loop::tests::Harness;
use crate::store::follow::{OnReleased, Released};
use crate::store::{line, Acquired, Hold, LockStore, Op, Wait};

/// `op`'s answer.
fn ok<T: 'static>(harness: &Harness, op: Op<T>) -> T {
    harness.settle(op).expect("an answer")
}

/// Two stores (two processes, as the line sees them) waiting in line for
/// one key: a release hands the lock to the first in line, for the owner
/// it left there, held for the claim window until claimed; an attempt made
/// after the hand-over claims it; a release that hands it to its own store
/// says so in the reply; an attempt that does not wait never gets in line.
pub fn the_line_hands_the_lock_over_in_order<S: LockStore>(
    harness: &Harness,
    make: &dyn Fn(OnReleased) -> S,
) {
    let told = Arc::new(Mutex::new(Vec::new()));
    let tell = |told: &Arc<Mutex<Vec<(Released, String)>>>| -> OnReleased {
        let told = Arc::clone(told);
        Arc::new(move |released, text| told.lock().expect("told").push((released, text)))
    };
    let (a, b) = (make(tell(&told)), make(tell(&told)));
    let lock = Hold::Lock;
    assert!(matches!(
        ok(harness, a.acquire(lock, "k", "a1", 10_000.0, Wait::Not)),
        Acquired::Fenced(_)
    ));
    assert_eq!(
        ok(harness, b.acquire(lock, "k", "b1", 10_000.0, Wait::Now)),
        Acquired::Refused
    );
    assert_eq!(
        ok(harness, b.acquire(lock, "k", "b1", 10_000.0, Wait::InLine)),
        Acquired::Refused
    );
    assert_eq!(
        ok(harness, a.acquire(lock, "k", "a2", 10_000.0, Wait::InLine)),
        Acquired::Refused
    );
    // Handed to b, the first in line, for the owner it left there.
    assert!(ok(harness, a.release(lock, "k", "a1")));
    assert!(ok(harness, b.holds(lock, "k", "b1")));
    let left = ok(harness, b.remaining(lock, "k", None)).unwrap_or(0.0);
    assert!(
        left > 0.0 && left <= line::CLAIM_MS as f64,
        "held {left} ms until claimed"
    );
    assert!(ok(harness, b.claim("k", "b1", 10_000.0, false)));
    assert!(
        ok(harness, b.remaining(lock, "k", None)).unwrap_or(0.0) > 5_000.0,
        "claimed for its TTL"
    );
    // Handed on to a; its next attempt (its message still on the way) claims it.
    assert!(ok(harness, b.release(lock, "k", "b1")));
    let Acquired::Handed { owner, token } =
        ok(harness, a.acquire(lock, "k", "a3", 10_000.0, Wait::InLine))
    else {
        panic!("the lock handed over");
    };
    assert_eq!(owner.as_str(), "a2");
    assert!(token > 0);
    assert!(ok(harness, a.remaining(lock, "k", None)).unwrap_or(0.0) > 5_000.0);
    // a first in line when it releases: handed to itself, in the reply.
    assert_eq!(
        ok(harness, a.acquire(lock, "k", "a4", 10_000.0, Wait::InLine)),
        Acquired::Refused
    );
    assert!(ok(harness, a.release(lock, "k", "a2")));
    let here = told.lock().expect("told").clone();
    let Some((Released::Handed, text)) = here.last() else {
        panic!("told of the hand-over: {here:?}");
    };
    assert!(matches!(line::parse(text), Some((_, "a4", "k"))), "{text}");
    assert!(ok(harness, a.claim("k", "a4", 10_000.0, false)));
    assert!(ok(harness, a.release(lock, "k", "a4")));
    // Nobody in line: a release frees it.
    assert!(!ok(harness, a.would_wait(lock, "k")));
}
