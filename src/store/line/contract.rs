//! What every store that keeps a line ([`crate::store::Capabilities::waits_in_line`])
//! does with it, as one test each store's tests run against a real server:
//! two stores stand for two processes (each has an id of its own).

use std::sync::{Arc, Mutex};

use crate::store::event_loop::tests::Harness;
use crate::store::follow::{OnReleased, Released};
use crate::store::{line, Acquired, Asked, HoldKind, LockStore, Op, Wait};

/// What the stores were told, in order (the stores stand for processes;
/// they share it).
#[derive(Clone, Default)]
struct Told(Arc<Mutex<Vec<(Released, String)>>>);

impl Told {
    fn tell(&self) -> OnReleased {
        let told = Arc::clone(&self.0);
        Arc::new(move |released, text| told.lock().expect("told").push((released, text)))
    }

    /// The text of the last thing told, which must be a hand-over.
    fn last_hand_over(&self) -> String {
        let here = self.0.lock().expect("told").clone();
        match here.last() {
            Some((Released::Handed, text)) => text.clone(),
            _ => panic!("told of a hand-over: {here:?}"),
        }
    }
}

/// A waiter's attempt, asked at `ms`.
fn in_line(ms: u64) -> Wait {
    Wait::InLine(Asked::at(ms as f64))
}

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
    harness: &Harness, make: &dyn Fn(OnReleased) -> S,
) {
    let told = Told::default();
    let (a, b) = (make(told.tell()), make(told.tell()));
    let lock = HoldKind::Lock;
    assert!(matches!(
        ok(harness, a.acquire(lock, "k", "a1", 10_000.0, Wait::Now)),
        Acquired::Fenced(_)
    ));
    assert_eq!(
        ok(harness, b.acquire(lock, "k", "b1", 10_000.0, Wait::Now)),
        Acquired::Refused
    );
    assert_eq!(
        ok(harness, b.acquire(lock, "k", "b1", 10_000.0, in_line(101))),
        Acquired::Refused
    );
    assert_eq!(
        ok(harness, a.acquire(lock, "k", "a2", 10_000.0, in_line(102))),
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
    assert!(ok(harness, b.claim("k", "b1", 10_000.0, None)));
    assert!(
        ok(harness, b.remaining(lock, "k", None)).unwrap_or(0.0) > 5_000.0,
        "claimed for its TTL"
    );
    // Handed on to a; its next attempt (its message still on the way) claims it.
    assert!(ok(harness, b.release(lock, "k", "b1")));
    let Acquired::Handed { owner, token } =
        ok(harness, a.acquire(lock, "k", "a3", 10_000.0, in_line(103)))
    else {
        panic!("the lock handed over");
    };
    assert_eq!(owner.as_str(), "a2");
    assert!(token > 0);
    assert!(ok(harness, a.remaining(lock, "k", None)).unwrap_or(0.0) > 5_000.0);
    // a first in line when it releases: handed to itself, in the reply.
    assert_eq!(
        ok(harness, a.acquire(lock, "k", "a4", 10_000.0, in_line(104))),
        Acquired::Refused
    );
    assert!(ok(harness, a.release(lock, "k", "a2")));
    let text = told.last_hand_over();
    assert!(
        matches!(line::parse(&text), Some((_, 104, "a4", "k"))),
        "{text}"
    );
    assert!(ok(harness, a.claim("k", "a4", 10_000.0, None)));
    assert!(ok(harness, a.release(lock, "k", "a4")));
    // Nobody in line: a release frees it.
    assert!(!ok(harness, a.would_wait(lock, "k")));
}

/// An attempt that gets in with more of its process waiting behind it
/// ([`Wait::InLineWithMore`]) keeps that process a place at the back
/// whichever way it got in, so their turn comes by hand-over, not by their
/// next poll: the lock free with nobody in line (the one-command path), or
/// its process first in line for a lock that lapsed unreleased (taken for
/// the owner asked with, or, by a store whose line tells a lapse as a
/// hand-over, for the owner its place left: both are this process's).
pub fn more_waiting_keep_their_place<S: LockStore>(
    harness: &Harness, make: &dyn Fn(OnReleased) -> S,
) {
    let told = Told::default();
    let (a, b) = (make(told.tell()), make(told.tell()));
    let lock = HoldKind::Lock;
    let refused = |store: &S, owner: &str| {
        ok(
            harness,
            store.acquire(lock, "m", owner, 10_000.0, in_line(1)),
        ) == Acquired::Refused
    };
    // a gets in with more waiting, b asks after it: a's release hands the
    // lock back to a (claimed here), not to b. The owner it went to.
    let a_keeps_its_place = |owner: &str, behind: &str| -> String {
        let holder = match ok(
            harness,
            a.acquire(
                lock,
                "m",
                owner,
                10_000.0,
                Wait::InLineWithMore(Asked::at(77.0)),
            ),
        ) {
            Acquired::Fenced(_) => owner.to_owned(),
            Acquired::Handed { owner, .. } => owner.as_str().to_owned(),
            refused => panic!("a got in: {refused:?}"),
        };
        assert!(refused(&b, behind));
        assert!(ok(harness, a.release(lock, "m", &holder)));
        assert!(
            !ok(harness, b.holds(lock, "m", behind)),
            "handed to b, past a's place"
        );
        let text = told.last_hand_over();
        let Some((_, 77, spare, "m")) = line::parse(&text) else {
            panic!("handed to a, for the place its acquire asked for: {text}");
        };
        assert!(ok(harness, a.claim("m", spare, 10_000.0, None)));
        spare.to_owned()
    };
    // Free, nobody in line.
    let spare = a_keeps_its_place("a1", "b1");
    // b's turn; a waits behind it, b's lock lapses unreleased (a short
    // TTL): a, first in line, gets in.
    assert!(ok(harness, a.release(lock, "m", &spare)));
    assert!(ok(harness, b.holds(lock, "m", "b1")));
    assert!(ok(harness, b.claim("m", "b1", 50.0, None)));
    assert!(refused(&a, "a2"));
    std::thread::sleep(std::time::Duration::from_millis(120));
    let spare = a_keeps_its_place("a3", "b2");
    assert!(ok(harness, a.release(lock, "m", &spare)));
    assert!(ok(harness, b.claim("m", "b2", 10_000.0, None)));
    assert!(ok(harness, b.release(lock, "m", "b2")));
    assert!(!ok(harness, a.would_wait(lock, "m")));
}

/// A process whose waiters all gave up leaves the line, but a lock handed
/// to its place before that stays its own (the message telling it may yet
/// reach a waiter of it that came since): nobody else gets it until the
/// process claims it, gives it back or its claim window ends.
pub fn leaving_keeps_a_lock_handed_over<S: LockStore>(
    harness: &Harness, make: &dyn Fn(OnReleased) -> S,
) {
    let told = Told::default();
    let (a, b) = (make(told.tell()), make(told.tell()));
    let lock = HoldKind::Lock;
    let handed_to_b = |owner: &str, asked: u64| {
        assert!(matches!(
            ok(harness, a.acquire(lock, "h", "a", 10_000.0, Wait::Now)),
            Acquired::Fenced(_)
        ));
        assert_eq!(
            ok(
                harness,
                b.acquire(lock, "h", owner, 10_000.0, in_line(asked))
            ),
            Acquired::Refused
        );
        assert!(ok(harness, a.release(lock, "h", "a")));
        ok(harness, b.leave_line("h"));
        assert!(
            ok(harness, b.holds(lock, "h", owner)),
            "still b's after it left"
        );
        assert_eq!(
            ok(harness, a.acquire(lock, "h", "a", 10_000.0, Wait::Now)),
            Acquired::Refused
        );
    };
    // Claimed (the message came to a waiter of b's that queued since), it is b's for its TTL.
    handed_to_b("b1", 5);
    assert!(ok(harness, b.claim("h", "b1", 10_000.0, None)));
    assert!(ok(harness, b.remaining(lock, "h", None)).unwrap_or(0.0) > 5_000.0);
    assert!(ok(harness, b.release(lock, "h", "b1")));
    // Given back, it is free.
    handed_to_b("b3", 7);
    assert!(ok(harness, b.release(lock, "h", "b3")));
    assert!(!ok(harness, a.would_wait(lock, "h")));
    // Never claimed, it is free once its claim window ends.
    handed_to_b("b4", 8);
    std::thread::sleep(std::time::Duration::from_millis(line::CLAIM_MS + 50));
    assert!(matches!(
        ok(harness, a.acquire(lock, "h", "a", 10_000.0, Wait::Now)),
        Acquired::Fenced(_)
    ));
    assert!(ok(harness, a.release(lock, "h", "a")));
}
