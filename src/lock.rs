//! The lock's algorithm, independent of JavaScript: one acquisition attempt
//! for a fresh owner, and the serialized form.
//!
//! A lock handle itself is only `key`, `ttlMs`, the store it was made with and
//! the owner token while it is held; the JS side keeps that (a JS object costs
//! nanoseconds to create, a wrapped native one about two microseconds, and
//! `lock(key)` runs once per critical section). Waiting for a held lock lives
//! beside it in JS too (`index.js`): waiters queue per key in arrival order and
//! are woken by a release, which needs the JS thread's timers and promises, and
//! a store operation that can settle on the JS thread must not hop threads.
//! Everything that decides whether the lock is ours happens here and in the
//! store.

use std::sync::Arc;

use serde_json::Value;

use crate::owner;
use crate::store::{Acquired, HoldKind, LockStore, Op, StoreResult, Wait, Want};
use crate::text::SmallStr;

/// The default TTL of `lock(key)`: 30 s.
pub const DEFAULT_TTL_MS: f64 = 30_000.0;
/// The default `retryDelay`: 50 ms.
pub const DEFAULT_RETRY_DELAY_MS: f64 = 50.0;
/// Largest TTL, timeout or retry delay accepted: the largest integer a JS
/// number holds exactly, so every store sees the same value the caller gave.
pub const MAX_MS: f64 = 9_007_199_254_740_991.0;

/// What one acquisition took: the owner token, and the fencing token when
/// the store handed one back with its reply.
#[derive(Debug)]
pub struct Grant {
    pub owner: SmallStr,
    pub token: Option<u64>,
    /// A lock handed to this process from the store's line (for the owner
    /// its place left), not taken fresh: the same hand-over may reach the
    /// process by message too, and is taken once. A fresh grant's owner was
    /// minted for this attempt, so no hand-over can name it.
    pub handed: bool,
}

/// Try once to take `key` in `hold` for a fresh owner (waiting in the
/// store's line if refused, as `wait` says, on a store that keeps one).
/// Resolves to the grant when acquired (a lock handed over to this process
/// is granted for the owner it was handed to), `None` when the hold admits
/// nobody more now.
pub fn acquire(
    store: &Arc<dyn LockStore>, hold: HoldKind, key: &str, ttl_ms: f64, wait: Wait,
) -> Op<Option<Grant>> {
    let owner = owner::mint();
    let attempt = store.acquire(hold, key, &owner, ttl_ms, wait);
    match attempt {
        Op::Ready(Ok(answer)) => Op::Ready(Ok(grant(owner, answer))),
        Op::Local(attempt) => {
            let (store, key) = (Arc::clone(store), key.to_owned());
            Op::Local(attempt.map(move |outcome| match outcome {
                Ok(answer) => Ok(grant(owner, answer)),
                Err(e) => {
                    if let Op::Local(release) = store.release(hold, &key, &owner) {
                        release.start(Box::new(drop));
                    }
                    Err(e)
                }
            }))
        }
        // Given back from Tokio, which is where the caller settles it.
        Op::Ready(Err(e)) => {
            let (store, key) = (Arc::clone(store), key.to_owned());
            Op::Pending(Box::pin(async move {
                give_back_in_background(store, hold, key, owner);
                Err(e)
            }))
        }
        Op::Pending(attempt) => {
            let (store, key) = (Arc::clone(store), key.to_owned());
            Op::Pending(Box::pin(async move {
                match attempt.await {
                    Ok(answer) => Ok(grant(owner, answer)),
                    Err(e) => {
                        give_back_in_background(store, hold, key, owner);
                        Err(e)
                    }
                }
            }))
        }
    }
}

/// Try once to take each plain lock `(key, ttl_ms, wait)` for a fresh
/// owner, together, on a store that acquires together: each answered as
/// [`acquire`] resolves, now and in order. `None` where the store does not.
pub fn acquire_together(
    store: &Arc<dyn LockStore>, asked: impl Iterator<Item = (SmallStr, f64, Wait)>,
) -> Option<Vec<StoreResult<Option<Grant>>>> {
    let asked: Vec<(SmallStr, SmallStr, f64, Wait)> = asked
        .map(|(key, ttl_ms, wait)| (key, owner::mint(), ttl_ms, wait))
        .collect();
    let wants: Vec<Want<'_>> = asked
        .iter()
        .map(|(key, owner, ttl_ms, wait)| Want {
            key,
            owner,
            ttl_ms: *ttl_ms,
            wait: *wait,
        })
        .collect();
    let answers = store.acquire_together(&wants)?;
    let owners = asked.into_iter().map(|(_, owner, _, _)| owner);
    // (A store that acquires together writes nothing of a failed one:
    // there is nothing to give back.)
    Some(
        owners
            .zip(answers)
            .map(|(owner, answer)| answer.map(|a| grant(owner, a)))
            .collect(),
    )
}

/// What an acquire's answer gives the fresh `owner`.
fn grant(owner: SmallStr, answer: Acquired) -> Option<Grant> {
    match answer {
        Acquired::Refused => None,
        Acquired::Taken => Some(Grant {
            owner,
            token: None,
            handed: false,
        }),
        Acquired::Fenced(token) => Some(Grant {
            owner,
            token: Some(token),
            handed: false,
        }),
        Acquired::Handed { owner, token } => Some(Grant {
            owner,
            token: Some(token),
            handed: true,
        }),
    }
}

/// After a failed acquire we cannot know whether the store took our token
/// (a timeout after the write landed, a reply of the wrong type). Releasing it
/// is always safe, since release only deletes our own token, and it keeps a
/// lock nobody will ever use from blocking others until its TTL. The caller
/// gets the error at once; the release finishes on its own. (This runs on
/// Tokio; a JS store's promise that fails on the JS thread is given back there,
/// by the JS layer's settle function.)
fn give_back_in_background(
    store: Arc<dyn LockStore>, hold: HoldKind, key: String, owner: SmallStr,
) {
    let released = store.release(hold, &key, &owner).settle();
    tokio::spawn(async move {
        let _ = released.await;
    });
}

/// What `serialize()` writes and `restoreLock()` reads: the format of the
/// TypeScript Keel lock, `{"key":…,"ttlMs":…,"owner":…}` with `owner` absent
/// when the lock is not held. A semaphore permit adds `"kind":"semaphore"`
/// and its `"limit"`; a read-write hold `"kind":"read"` or `"write"`.
#[derive(Debug, Clone, PartialEq)]
pub struct Serialized {
    pub key: String,
    pub ttl_ms: f64,
    pub owner: Option<String>,
    pub kind: Option<String>,
    pub limit: Option<f64>,
}

/// Why a serialized lock was refused, worded for the `TypeError` it becomes.
pub fn parse_serialized(text: &str) -> Result<Serialized, String> {
    const WHAT: &str = "restoreLock(serialized)";
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("{WHAT}: serialized is not valid JSON ({e})"))?;
    let Value::Object(fields) = value else {
        return Err(format!(
            "{WHAT}: serialized must be a JSON object with key, ttlMs and owner"
        ));
    };
    let key = match fields.get("key") {
        Some(Value::String(key)) => key.clone(),
        Some(_) => return Err(format!("{WHAT}: \"key\" must be a string")),
        None => return Err(format!("{WHAT}: \"key\" is missing")),
    };
    let ttl_ms = match fields.get("ttlMs") {
        Some(Value::Number(n)) => n.as_f64().filter(|ms| valid_ttl(*ms)).ok_or_else(|| {
            format!("{WHAT}: \"ttlMs\" must be a positive number of milliseconds, at most {MAX_MS}")
        })?,
        Some(_) => return Err(format!("{WHAT}: \"ttlMs\" must be a number")),
        None => return Err(format!("{WHAT}: \"ttlMs\" is missing")),
    };
    let owner = match fields.get("owner") {
        None | Some(Value::Null) => None,
        Some(Value::String(owner)) if !owner.is_empty() => Some(owner.clone()),
        Some(_) => {
            return Err(format!(
                "{WHAT}: \"owner\" must be a non-empty string when present"
            ))
        }
    };
    let kind = match fields.get("kind") {
        None | Some(Value::Null) => None,
        Some(Value::String(kind)) if ["semaphore", "read", "write"].contains(&kind.as_str()) => {
            Some(kind.clone())
        }
        Some(_) => {
            return Err(format!(
                "{WHAT}: \"kind\" must be \"semaphore\", \"read\" or \"write\" when present"
            ))
        }
    };
    let limit = match (kind.as_deref(), fields.get("limit")) {
        (Some("semaphore"), Some(Value::Number(n))) => {
            let limit = n
                .as_f64()
                .filter(|l| *l >= 1.0 && *l <= MAX_MS && l.fract() == 0.0);
            Some(limit.ok_or_else(|| {
                format!("{WHAT}: \"limit\" must be a positive integer, at most {MAX_MS}")
            })?)
        }
        (Some("semaphore"), _) => {
            return Err(format!(
                "{WHAT}: a semaphore's \"limit\" is missing or not a number"
            ))
        }
        (_, None | Some(Value::Null)) => None,
        (_, Some(_)) => return Err(format!("{WHAT}: only a semaphore has a \"limit\"")),
    };
    Ok(Serialized {
        key,
        ttl_ms,
        owner,
        kind,
        limit,
    })
}

/// A TTL is a positive, finite number of milliseconds no larger than [`MAX_MS`].
pub fn valid_ttl(ms: f64) -> bool {
    ms > 0.0 && ms <= MAX_MS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::settling_at_once as store_here;

    fn ready<T>(op: Op<T>) -> T {
        match op {
            Op::Ready(result) => result.expect("store error"),
            Op::Pending(_) | Op::Local(_) => {
                panic!("expected the store in this process to settle at once")
            }
        }
    }

    #[test]
    fn each_acquisition_mints_a_new_owner() {
        let store = store_here();
        let a = ready(acquire(&store, HoldKind::Lock, "k", 1000.0, Wait::Now)).unwrap();
        assert!(ready(store.release(HoldKind::Lock, "k", &a.owner)));
        let b = ready(acquire(&store, HoldKind::Lock, "k", 1000.0, Wait::Now)).unwrap();
        assert_ne!(a.owner, b.owner);
    }

    #[test]
    fn a_held_lock_is_refused_at_once() {
        let store = store_here();
        assert!(ready(acquire(&store, HoldKind::Lock, "k", 1000.0, Wait::Now)).is_some());
        assert!(ready(acquire(&store, HoldKind::Lock, "k", 1000.0, Wait::Now)).is_none());
    }

    /// A store that takes the lock and then fails to say so.
    struct TakesThenFails(Arc<dyn LockStore>);

    impl LockStore for TakesThenFails {
        fn capabilities(&self) -> crate::store::Capabilities {
            self.0.capabilities()
        }
        fn acquire(
            &self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64, wait: Wait,
        ) -> Op<Acquired> {
            let _ = self.0.acquire(hold, key, owner, ttl_ms, wait);
            Op::Ready(Err(crate::store::StoreError::Type("garbled reply".into())))
        }
        fn release(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
            self.0.release(hold, key, owner)
        }
        fn extend(&self, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
            self.0.extend(hold, key, owner, ttl_ms)
        }
        fn holds(&self, hold: HoldKind, key: &str, owner: &str) -> Op<bool> {
            self.0.holds(hold, key, owner)
        }
        fn remaining(&self, hold: HoldKind, key: &str, owner: Option<&str>) -> Op<Option<f64>> {
            self.0.remaining(hold, key, owner)
        }
        fn would_wait(&self, hold: HoldKind, key: &str) -> Op<bool> {
            self.0.would_wait(hold, key)
        }
        fn holders(&self, hold: HoldKind, key: &str) -> Op<f64> {
            self.0.holders(hold, key)
        }
    }

    #[tokio::test]
    async fn a_failed_acquire_gives_back_whatever_it_may_have_taken() {
        let store: Arc<dyn LockStore> = Arc::new(TakesThenFails(store_here()));
        let err = acquire(&store, HoldKind::Lock, "k", 60_000.0, Wait::Now)
            .settle()
            .await
            .expect_err("the store failed");
        assert_eq!(err.to_string(), "garbled reply");
        for _ in 0..100 {
            if !ready(store.would_wait(HoldKind::Lock, "k")) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("the token the failed acquire left behind was never released");
    }

    #[test]
    fn parses_the_typescript_format() {
        let s = parse_serialized(r#"{"key":"import:99","ttlMs":60000,"owner":"abc"}"#).unwrap();
        assert_eq!(
            s,
            Serialized {
                key: "import:99".into(),
                ttl_ms: 60_000.0,
                owner: Some("abc".into()),
                kind: None,
                limit: None,
            }
        );
        let unheld = parse_serialized(r#"{"key":"k","ttlMs":5}"#).unwrap();
        assert_eq!(unheld.owner, None);
        let permit =
            parse_serialized(r#"{"key":"k","ttlMs":5,"kind":"semaphore","limit":3}"#).unwrap();
        assert_eq!(
            (permit.kind.as_deref(), permit.limit),
            (Some("semaphore"), Some(3.0))
        );
        let read = parse_serialized(r#"{"key":"k","ttlMs":5,"kind":"read"}"#).unwrap();
        assert_eq!((read.kind.as_deref(), read.limit), (Some("read"), None));
    }

    #[test]
    fn rejects_malformed_input_with_a_reason() {
        for bad in [
            "",
            "{",
            "null",
            "[]",
            "42",
            r#"{"ttlMs":1,"owner":"a"}"#,
            r#"{"key":1,"ttlMs":1}"#,
            r#"{"key":"k"}"#,
            r#"{"key":"k","ttlMs":"1"}"#,
            r#"{"key":"k","ttlMs":0}"#,
            r#"{"key":"k","ttlMs":-5}"#,
            r#"{"key":"k","ttlMs":1e400}"#,
            r#"{"key":"k","ttlMs":1e300}"#,
            r#"{"key":"k","ttlMs":1,"owner":7}"#,
            r#"{"key":"k","ttlMs":1,"owner":""}"#,
            r#"{"key":"\ud800","ttlMs":1}"#,
            r#"{"key":"k","ttlMs":1,"kind":"mutex"}"#,
            r#"{"key":"k","ttlMs":1,"kind":"semaphore"}"#,
            r#"{"key":"k","ttlMs":1,"kind":"semaphore","limit":0}"#,
            r#"{"key":"k","ttlMs":1,"kind":"semaphore","limit":2.5}"#,
            r#"{"key":"k","ttlMs":1,"kind":"read","limit":2}"#,
            r#"{"key":"k","ttlMs":1,"limit":2}"#,
        ] {
            let err = parse_serialized(bad).expect_err(bad);
            assert!(err.starts_with("restoreLock(serialized)"), "{err}");
        }
    }
}
