//! Every operation, written once: the request it sends ([`Request`]),
//! whichever transport carries it (`transport`); its reply's reader is in
//! `answer`.
//!
//! A plain lock's operations are the scripts that compare before they act
//! (acquire, release, extend: `scripts.rs`) and plain reads (`GET`, `PTTL`,
//! `EXISTS`); every operation on a semaphore or a read-write key is one call
//! of that operation's script. Where each key lives: `layout`.

use super::fencing;
use super::layout::{channel, Layout, WAKE};
use super::request::{scripts, Body, Lua, Request};
use crate::owner;
use crate::store::line::{Asked, CLAIM_MS, LEASE_MS};
use crate::store::options::whole_ms;
use crate::store::{HoldKind, HoldOp, StoreError, Wait};
use crate::text::SmallStr;

/// Set-if-absent on `key`, and the next fencing token; where waiters wait
/// in line, as `wait` says (`scripts::LINE_ACQUIRE`).
pub fn acquire_lock(layout: &Layout, key: &str, owner: &str, ttl_ms: f64, wait: Wait) -> Request {
    let ttl = whole_ms(ttl_ms).to_string();
    if let Some(me) = &layout.line {
        // An attempt that does not wait asks as nobody in line: it takes the
        // lock only if it is free and nobody's turn, and never one handed
        // to this process (that is its waiters', told by message).
        let (me, code, spare, asked) = match wait {
            Wait::Now => ("", "0", SmallStr::from(""), 0),
            Wait::InLine(asked) => (me.as_str(), "1", SmallStr::from(""), asked.ms()),
            Wait::InLineWithMore(asked) => (me.as_str(), "2", owner::mint(), asked.ms()),
        };
        let args = line_args(owner, &ttl, me, &[code, &spare, &asked.to_string()]);
        return in_line("acquire", &scripts().line_acquire, layout, key, args);
    }
    let full_key = layout.lock(key);
    let counter = layout.counter(&full_key);
    Request::script(
        "acquire",
        &scripts().acquire,
        vec![full_key, counter],
        vec![owner.into(), ttl.into_bytes()],
    )
}

/// Delete `key` if `owner` holds it, announcing the release; where waiters
/// wait in line, handing it to the first (`scripts::LINE_RELEASE`).
pub fn release_lock(layout: &Layout, key: &str, owner: &str) -> Request {
    if let Some(me) = &layout.line {
        let args = line_args(owner, "0", me, &[]);
        return in_line("release", &scripts().line_release, layout, key, args);
    }
    let full_key = layout.lock(key);
    let announce = channel(&full_key).into_bytes();
    Request::script(
        "release",
        &scripts().release,
        vec![full_key],
        vec![owner.into(), announce],
    )
}

/// Set `key`'s TTL if `owner` holds it; where waiters wait in line, this
/// claims a lock handed over, and with `more` of this process waiting
/// (asked for then) keeps its place at the back.
pub fn extend_lock(
    layout: &Layout, key: &str, owner: &str, ttl_ms: f64, more: Option<Asked>,
) -> Request {
    let ttl = whole_ms(ttl_ms).to_string();
    if let Some(me) = &layout.line {
        let (code, spare, asked) = match more {
            Some(asked) => ("2", owner::mint(), asked.ms()),
            None => ("0", SmallStr::from(""), 0),
        };
        let args = line_args(owner, &ttl, me, &[code, &spare, &asked.to_string()]);
        return in_line("extend", &scripts().line_extend, layout, key, args);
    }
    Request::script(
        "extend",
        &scripts().extend,
        vec![layout.lock(key)],
        vec![owner.into(), ttl.into_bytes()],
    )
}

/// This store's place in `key`'s line goes (`scripts::LINE_LEAVE`); None
/// where there is no line.
pub fn leave_line(layout: &Layout, key: &str) -> Option<Request> {
    let me = layout.line.as_ref()?;
    let args = line_args("", "0", me, &[]);
    Some(in_line(
        "leaveLine",
        &scripts().line_leave,
        layout,
        key,
        args,
    ))
}

/// The arguments every line script takes (see `scripts::line_prelude`),
/// then `more` (an acquire's or a claim's: how it waits, a spare owner,
/// when it asked).
fn line_args(owner: &str, ttl: &str, me: &str, more: &[&str]) -> Vec<Vec<u8>> {
    let (lease, claim) = (LEASE_MS.to_string(), CLAIM_MS.to_string());
    [owner, ttl, me, &lease, &claim, WAKE]
        .iter()
        .chain(more)
        .map(|arg| arg.as_bytes().to_vec())
        .collect()
}

fn in_line(
    name: &'static str, lua: &'static Lua, layout: &Layout, key: &str, args: Vec<Vec<u8>>,
) -> Request {
    Request::script(name, lua, layout.line_keys(key), args)
}

/// Who holds `key` (read by [`owned_by`]).
pub fn lock_owner(layout: &Layout, key: &str) -> Request {
    Request::plain("isExpired", "GET", layout.lock(key))
}

/// Milliseconds until `key` expires, whoever holds it (read by [`pttl`]).
pub fn lock_remaining(layout: &Layout, key: &str) -> Request {
    Request::plain("remainingTime", "PTTL", layout.lock(key))
}

/// `PING`, on the connection any request without a key goes on (read by
/// [`answered`]).
pub fn ping() -> Request {
    Request {
        name: "ping",
        body: Body::Plain(redis::cmd("PING")),
    }
}

/// Whether anyone holds `key` (read by `answer::one`).
pub fn is_locked(layout: &Layout, key: &str) -> Request {
    Request::plain("isLocked", "EXISTS", layout.lock(key))
}

/// `op` on the holds of `key` in `hold` (a semaphore's permits, or a
/// read-write key's readers and writer): one call of its script.
pub fn holds(
    layout: &Layout, op: HoldOp, hold: HoldKind, key: &str, owner: &str, ttl_ms: f64,
) -> Result<Request, StoreError> {
    let holds = layout.holds(hold, key);
    let writer = format!("{holds}:writer");
    // A prefix whose first hash tag is empty (`{}`) makes a Cluster hash
    // each whole key, which would part a key's data across slots.
    if layout.cluster && fencing::slot(holds.as_bytes()) != fencing::slot(writer.as_bytes()) {
        return Err(StoreError::Type(format!(
            "RedisLockStore.{}: on a Redis Cluster, the prefix {:?} (its first hash tag is empty) would put a semaphore's or read-write key's data in different slots; use a prefix without \"{{}}\"",
            op.method(),
            layout.prefix
        )));
    }
    let (mode_name, limit) = hold.name_and_limit();
    let args = [
        mode_name.to_owned(),
        owner.to_owned(),
        whole_ms(ttl_ms).to_string(),
        limit.to_string(),
        channel(&holds),
    ];
    // The script's KEYS: the holds, the writer, a waiting writer's mark, the counter.
    let waiting = format!("{holds}:waiting");
    let counter = layout.counter(&holds);
    let keys = vec![holds, writer, waiting, counter];
    Ok(Request::script(
        op.method(),
        scripts().holds(op),
        keys,
        args.into_iter().map(String::into_bytes).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::redis::request::Body;

    fn layout(cluster: bool) -> Layout {
        Layout {
            prefix: "p:".into(),
            cluster,
            line: None,
        }
    }

    #[test]
    fn the_holds_script_gets_its_four_keys_in_order_and_its_arguments() {
        let request = holds(
            &layout(false),
            HoldOp::Acquire,
            HoldKind::Permit { limit: 3 },
            "k",
            "me",
            1500.2,
        )
        .expect("a request");
        let Body::Script { keys, args, .. } = &request.body else {
            panic!("a script");
        };
        let set = "p:keel:semaphore:{k:k}";
        assert_eq!(
            keys,
            &[
                set.to_owned(),
                format!("{set}:writer"),
                format!("{set}:waiting"),
                "p:keel:fencing-counter".to_owned()
            ]
        );
        let args: Vec<String> = args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        assert_eq!(
            args,
            ["permit", "me", "1501", "3", &format!("keel:released:{set}")]
        );
    }

    #[test]
    fn on_a_cluster_a_prefix_with_an_empty_hash_tag_is_refused() {
        let bad = Layout {
            prefix: "{}".into(),
            cluster: true,
            line: None,
        };
        let refused = holds(&bad, HoldOp::Acquire, HoldKind::Read, "k", "me", 10.0);
        assert!(matches!(refused, Err(StoreError::Type(m)) if m.contains("prefix")));
        assert!(holds(
            &layout(true),
            HoldOp::Acquire,
            HoldKind::Read,
            "k",
            "me",
            10.0
        )
        .is_ok());
    }
}
