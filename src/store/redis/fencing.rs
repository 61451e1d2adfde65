//! Where fencing tokens come from: one counter, not one per key.
//!
//! A token only has to grow per key, so a counter shared by every key does:
//! each acquisition of a key takes a later value of the same counter. That
//! keeps what a store leaves in Redis bounded (a counter per key would leave
//! one behind for every key ever locked). On one server there is one counter.
//! On a Redis Cluster a script may only touch keys of one hash slot, so each
//! slot in use gets its own counter, named with a hash tag that lands in that
//! slot: at most 16,384, however many keys are locked.

use std::sync::OnceLock;

/// The counter's name on a single server (after the store's prefix). Lock
/// keys of this name are reserved.
pub const COUNTER: &str = "keel:fencing-counter";

/// Redis Cluster's slot count.
const SLOTS: u16 = 16_384;

/// The hash slot Redis Cluster puts `key` in: CRC16 (XMODEM) of the key, or
/// of its hash tag (the text inside its first `{...}`, if not empty).
pub fn slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let len = rest.iter().position(|&b| b == b'}')?;
        (len > 0).then(|| &rest[..len])
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(key)) % SLOTS
}

/// For each slot, the smallest number whose decimal text hashes to it: the
/// hash tag of that slot's counter. Found once, on first use (about 10^5
/// CRCs, a few milliseconds).
fn tags() -> &'static [u32] {
    static TAGS: OnceLock<Vec<u32>> = OnceLock::new();
    TAGS.get_or_init(|| {
        let mut tags = vec![u32::MAX; usize::from(SLOTS)];
        let mut missing = usize::from(SLOTS);
        let mut n: u32 = 0;
        while missing > 0 {
            let at = usize::from(slot(n.to_string().as_bytes()));
            if tags[at] == u32::MAX {
                tags[at] = n;
                missing -= 1;
            }
            n += 1;
        }
        tags
    })
}

/// The counter for `full_key` (`prefix` + key) on a Redis Cluster: in the
/// same slot, so the acquire script touches one slot. It keeps the store's
/// prefix where that leaves it in the slot (a prefix with a hash tag of its
/// own decides both slots); one that would not (an unclosed `{` in it) is
/// dropped.
pub fn cluster_counter(prefix: &str, full_key: &str) -> String {
    let at = slot(full_key.as_bytes());
    let tag = tags()[usize::from(at)];
    let counter = format!("{prefix}{COUNTER}:{{{tag}}}");
    if slot(counter.as_bytes()) == at {
        counter
    } else {
        format!("{COUNTER}:{{{tag}}}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis_cluster() {
        // CLUSTER KEYSLOT on a Redis 7 server.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        // And the routing the redis crate's cluster client does.
        for key in ["foo{}{bar}", "{}x", "a{b}c{d}", "{{x}}", "invoice:42", "}{"] {
            let theirs = format!("{:?}", redis::cluster_routing::Slot::for_key(key));
            assert_eq!(theirs, format!("Slot({})", slot(key.as_bytes())), "{key}");
        }
    }

    #[test]
    fn every_slot_has_a_counter_in_that_slot() {
        let tags = tags();
        assert!(tags.iter().all(|&t| t != u32::MAX));
        for prefix in ["", "locks:", "{app}:", "a{", "}{"] {
            for key in [
                "invoice:42",
                "{tenant}:invoice",
                "x{y}z",
                "a}b",
                "",
                "{}",
                "émoji 🔒",
            ] {
                let full = format!("{prefix}{key}");
                let counter = cluster_counter(prefix, &full);
                assert_eq!(
                    slot(counter.as_bytes()),
                    slot(full.as_bytes()),
                    "{full} -> {counter}"
                );
            }
        }
        let tag = tags[usize::from(slot(b"locks:k"))];
        assert_eq!(
            cluster_counter("locks:", "locks:k"),
            format!("locks:{COUNTER}:{{{tag}}}")
        );
    }
}
