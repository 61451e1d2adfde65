//! Semaphores and read-write locks on Redis: where their data lives, and
//! their operations, each one call of the `HOLDS` script (`scripts.rs`).
//!
//! A semaphore `key` is a sorted set `keel:semaphore:{k:<key>}` (after the
//! store's prefix) of owner -> expiry; a read-write key is the sorted set of
//! its readers `keel:rw:{k:<key>}`, its writer `keel:rw:{k:<key>}:writer`
//! (the owner, with the hold's TTL) and a waiting writer's mark
//! `keel:rw:{k:<key>}:waiting`. The hash tag keeps all of one key's data,
//! and on a Cluster its fencing counter, in one slot; keys of these forms
//! are reserved, as the counter's name is. Expiry is the server's clock
//! (`TIME` in the script), and every key carries a Redis TTL no longer than
//! its longest hold, so nothing is left behind.

use redis::Value;

use super::scripts::channel;
use super::{fencing, RedisStore};
use crate::store::follow::Released;
use crate::store::options::whole_ms;
use crate::store::{Acquired, Hold, HoldOp, Op, StoreError};

const SEMAPHORE: &str = "keel:semaphore:{k:";
const READ_WRITE: &str = "keel:rw:{k:";

/// Which lock an announced release (its key after the store's prefix) was
/// of, and its key as the caller named it.
pub fn heard(full_key: &str) -> (Released, &str) {
    for (form, released) in [
        (SEMAPHORE, Released::Semaphore),
        (READ_WRITE, Released::ReadWrite),
    ] {
        if let Some(key) = full_key
            .strip_prefix(form)
            .and_then(|k| k.strip_suffix('}'))
        {
            return (released, key);
        }
    }
    (Released::Lock, full_key)
}

/// What the script is called with.
pub struct HoldsCall {
    pub op: HoldOp,
    pub keys: Vec<String>,
    pub args: Vec<Vec<u8>>,
}

impl RedisStore {
    /// The sorted set of `key`'s holds in `mode` (prefix included).
    pub(super) fn holds_key(&self, hold: Hold, key: &str) -> String {
        let form = if hold.is_permit() {
            SEMAPHORE
        } else {
            READ_WRITE
        };
        self.key(&format!("{form}{key}}}"))
    }

    /// The script's keys and arguments for `op` on `key` in `hold`.
    fn holds_call(&self, op: HoldOp, hold: Hold, key: &str, owner: &str, ttl_ms: f64) -> HoldsCall {
        let holds = self.holds_key(hold, key);
        let counter = if self.shared.cluster.is_some() {
            fencing::cluster_counter(&self.shared.options.prefix, &holds)
        } else {
            self.key(fencing::COUNTER)
        };
        let (mode_name, limit) = hold.name_and_limit();
        let args = [
            op.name().to_owned(),
            mode_name.to_owned(),
            owner.to_owned(),
            whole_ms(ttl_ms).to_string(),
            limit.to_string(),
            channel(&holds),
        ];
        let keys = vec![
            format!("{holds}:writer"),
            format!("{holds}:waiting"),
            counter,
        ];
        HoldsCall {
            op,
            keys: std::iter::once(holds).chain(keys).collect(),
            args: args.into_iter().map(String::into_bytes).collect(),
        }
    }

    /// Run `op` on `key`'s holds in `hold` and read its reply with `read`.
    pub(super) fn holds_op<T: Send + 'static>(
        &self,
        op: HoldOp,
        hold: Hold,
        key: &str,
        owner: &str,
        ttl_ms: f64,
        read: fn(Value) -> Result<T, &'static str>,
    ) -> Op<T> {
        let call = self.holds_call(op, hold, key, owner, ttl_ms);
        // A prefix whose first hash tag is empty (`{}`) makes a Cluster hash
        // each whole key, which would part a key's data across slots.
        if self.shared.cluster.is_some()
            && fencing::slot(call.keys[0].as_bytes()) != fencing::slot(call.keys[1].as_bytes())
        {
            return Op::Ready(Err(StoreError::Type(format!(
                "RedisLockStore.{}: on a Redis Cluster, the prefix {:?} (its first hash tag is empty) would put a semaphore's or read-write key's data in different slots; use a prefix without \"{{}}\"",
                call.op.method(),
                self.shared.options.prefix
            ))));
        }
        if let Some(direct) = &self.direct {
            return super::via_loop::shared_holds(direct, call, read);
        }
        self.shared_via_tokio(call, read)
    }
}

fn int(value: Value) -> Result<i64, &'static str> {
    match value {
        Value::Int(n) => Ok(n),
        _ => Err("something other than a count"),
    }
}

/// The replies, by operation.
pub fn token(value: Value) -> Result<Acquired, &'static str> {
    match value {
        Value::Nil => Ok(Acquired::Refused),
        Value::Int(token) => Ok(Acquired::Fenced(u64::try_from(token).unwrap_or(0))),
        _ => Err("something other than a fencing token or nil"),
    }
}

pub fn done(value: Value) -> Result<bool, &'static str> {
    Ok(int(value)? == 1)
}

pub fn left(value: Value) -> Result<Option<f64>, &'static str> {
    let ms = int(value)?;
    Ok((ms > 0).then_some(ms as f64))
}

pub fn live(value: Value) -> Result<bool, &'static str> {
    Ok(int(value)? > 0)
}

pub fn count(value: Value) -> Result<f64, &'static str> {
    Ok(int(value)?.max(0) as f64)
}

pub fn nothing(value: Value) -> Result<(), &'static str> {
    int(value).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announced_keys_map_back_to_their_lock() {
        assert!(matches!(
            heard("keel:semaphore:{k:a}b}"),
            (Released::Semaphore, "a}b")
        ));
        assert!(matches!(heard("keel:rw:{k:}"), (Released::ReadWrite, "")));
        assert!(matches!(
            heard("invoice:42"),
            (Released::Lock, "invoice:42")
        ));
    }
}
