//! A plain lock on Redis: a string at `prefix + key` holding the owner
//! token, with the lock's TTL as its Redis TTL; compared before acted on by
//! the scripts (`scripts.rs`), read with plain commands. Each operation runs
//! on the event loop's connection (`via_loop`) or on Tokio's (`via_tokio`).

use super::via_loop;
use super::{fencing, RedisStore};
use crate::store::options::whole_ms;
use crate::store::{Acquired, Op};

impl RedisStore {
    /// The acquire script for `key`: set-if-absent and the fencing token.
    pub(super) fn acquire_lock(&self, key: &str, owner: &str, ttl_ms: f64) -> Op<Acquired> {
        let full_key = self.key(key);
        let counter = if self.shared.cluster.is_some() {
            fencing::cluster_counter(&self.shared.options.prefix, &full_key)
        } else {
            self.key(fencing::COUNTER)
        };
        let ttl = whole_ms(ttl_ms);
        if let Some(direct) = &self.direct {
            return via_loop::acquire(direct, full_key, counter, owner, ttl);
        }
        self.acquire_via_tokio(full_key, counter, owner.to_owned(), ttl)
    }

    pub(super) fn release_lock(&self, key: &str, owner: &str) -> Op<bool> {
        let key = self.key(key);
        if let Some(direct) = &self.direct {
            return via_loop::release(direct, key, owner);
        }
        self.release_via_tokio(key, owner.to_owned())
    }

    pub(super) fn extend_lock(&self, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        let (key, ttl) = (self.key(key), whole_ms(ttl_ms));
        if let Some(direct) = &self.direct {
            return via_loop::extend(direct, key, owner, ttl);
        }
        self.extend_via_tokio(key, owner.to_owned(), ttl)
    }

    /// Whether `owner` holds the lock `key`.
    pub(super) fn lock_held_by(&self, key: &str, owner: &str) -> Op<bool> {
        let mut get = redis::cmd("GET");
        get.arg(self.key(key));
        if let Some(direct) = &self.direct {
            return via_loop::holds(direct, &get, owner.to_owned());
        }
        self.holds_via_tokio(get, owner.to_owned())
    }

    /// Milliseconds until the lock `key` expires, whoever holds it.
    pub(super) fn lock_remaining(&self, key: &str) -> Op<Option<f64>> {
        let mut pttl = redis::cmd("PTTL");
        pttl.arg(self.key(key));
        if let Some(direct) = &self.direct {
            return via_loop::remaining_time(direct, &pttl);
        }
        self.remaining_time_via_tokio(pttl)
    }

    /// Whether anyone holds the lock `key`.
    pub(super) fn is_locked(&self, key: &str) -> Op<bool> {
        let mut exists = redis::cmd("EXISTS");
        exists.arg(self.key(key));
        if let Some(direct) = &self.direct {
            return via_loop::is_locked(direct, &exists);
        }
        self.is_locked_via_tokio(exists)
    }
}
