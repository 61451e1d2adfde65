//! Where a store's data lives on the server, and what each name means.
//!
//! A plain lock is a string at `prefix + key` holding the owner token, with
//! the lock's TTL as its Redis TTL (the docs' ioredis store's layout). A
//! semaphore `key` is a sorted set `keel:semaphore:{k:<key>}` (after the
//! prefix) of owner -> expiry; a read-write key is the sorted set of its
//! readers `keel:rw:{k:<key>}`, its writer `keel:rw:{k:<key>}:writer` (the
//! owner, with the hold's TTL) and a waiting writer's mark
//! `keel:rw:{k:<key>}:waiting`. The hash tag keeps all of one key's data,
//! and on a Cluster its fencing counter, in one slot; keys of these forms
//! are reserved, as the counter's name is. A release is announced on
//! `keel:released:<the key's full name>`. On a single server a plain lock's
//! waiters wait in line (`store::line`): the processes in line are the
//! sorted set `keel:waiting:{k:<key>}`, their places the hash
//! `keel:waiting:{k:<key>}:places`, and the process whose id is `<id>` is
//! told of a lock handed to it on `keel:wake:<id>`. (Named apart from the
//! line's first form, `keel:line:{k:<key>}`, whose places did not keep when
//! they were asked for: a store of that version on the same server waits in
//! a line of its own, and neither misreads the other's places.)

use super::fencing;
use crate::store::follow::Released;
use crate::store::HoldKind;

const SEMAPHORE: &str = "keel:semaphore:{k:";
const READ_WRITE: &str = "keel:rw:{k:";
const LINE: &str = "keel:waiting:{k:";
/// Where a process is told of a lock handed to it: this, then its id.
pub const WAKE: &str = "keel:wake:";

/// A store's names: its prefix, whether it is on a Cluster (where each
/// hash slot has its own fencing counter), and, where a plain lock's
/// waiters wait in line (one server), this store's id in the lines.
pub struct Layout {
    pub prefix: String,
    pub cluster: bool,
    pub line: Option<String>,
}

impl Layout {
    /// The key of a plain lock.
    pub fn lock(&self, key: &str) -> String {
        let mut full = String::with_capacity(self.prefix.len() + key.len());
        full.push_str(&self.prefix);
        full.push_str(key);
        full
    }

    /// The sorted set of `key`'s holds of a semaphore or read-write kind.
    pub fn holds(&self, hold: HoldKind, key: &str) -> String {
        let form = if hold.is_permit() {
            SEMAPHORE
        } else {
            READ_WRITE
        };
        self.lock(&format!("{form}{key}}}"))
    }

    /// The key of any kind of hold: what its release announces.
    pub fn of(&self, hold: HoldKind, key: &str) -> String {
        match hold {
            HoldKind::Lock => self.lock(key),
            _ => self.holds(hold, key),
        }
    }

    /// The keys of a plain lock's scripts where its waiters wait in line:
    /// the lock, its fencing counter, the line and its entries.
    pub fn line_keys(&self, key: &str) -> Vec<String> {
        let full_key = self.lock(key);
        let counter = self.counter(&full_key);
        let line = self.lock(&format!("{LINE}{key}}}"));
        let places = format!("{line}:places");
        vec![full_key, counter, line, places]
    }

    /// The fencing counter the tokens of `full_key` come from.
    pub fn counter(&self, full_key: &str) -> String {
        if self.cluster {
            fencing::cluster_counter(&self.prefix, full_key)
        } else {
            self.lock(fencing::COUNTER)
        }
    }
}

/// Where releases of `full_key` (prefix included) are announced.
pub fn channel(full_key: &str) -> String {
    format!("keel:released:{full_key}")
}

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

    #[test]
    fn names_carry_the_prefix_and_one_hash_tag_per_key() {
        let layout = Layout {
            prefix: "app:".into(),
            cluster: false,
            line: Some("me".into()),
        };
        assert_eq!(layout.lock("k"), "app:k");
        assert_eq!(layout.holds(HoldKind::Read, "k"), "app:keel:rw:{k:k}");
        assert_eq!(
            layout.holds(HoldKind::Permit { limit: 3 }, "k"),
            "app:keel:semaphore:{k:k}"
        );
        assert_eq!(layout.counter("app:k"), "app:keel:fencing-counter");
        assert_eq!(channel("app:k"), "keel:released:app:k");
        assert_eq!(
            layout.line_keys("k"),
            [
                "app:k",
                "app:keel:fencing-counter",
                "app:keel:waiting:{k:k}",
                "app:keel:waiting:{k:k}:places"
            ]
        );
    }
}
