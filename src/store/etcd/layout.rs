//! Where each lock lives in etcd's key space: under the store's prefix, a
//! plain lock at `<prefix>l/<key>` (a key longer than [`LONGEST_AS_IS`]
//! bytes at `<prefix>h/<its SHA-256 in hex>`, as a request carries its key
//! two or three times and etcd reads requests of 1.5 MiB at most), its value
//! the holder's owner token.

use sha2::{Digest, Sha256};

/// Keys up to this many bytes are stored as they are.
pub const LONGEST_AS_IS: usize = 512;

/// The etcd key of the plain lock `key`.
pub fn lock_key(prefix: &[u8], key: &str) -> Vec<u8> {
    let mut stored = Vec::with_capacity(prefix.len() + 2 + key.len().min(LONGEST_AS_IS + 64));
    stored.extend_from_slice(prefix);
    if key.len() <= LONGEST_AS_IS {
        stored.extend_from_slice(b"l/");
        stored.extend_from_slice(key.as_bytes());
    } else {
        stored.extend_from_slice(b"h/");
        for byte in Sha256::digest(key.as_bytes()) {
            stored.extend_from_slice(format!("{byte:02x}").as_bytes());
        }
    }
    stored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_keys_are_kept_as_they_are_and_long_ones_hashed() {
        assert_eq!(lock_key(b"p:", "a\0b"), b"p:l/a\0b".to_vec());
        let long = "x".repeat(LONGEST_AS_IS + 1);
        let stored = lock_key(b"p:", &long);
        assert!(stored.starts_with(b"p:h/"));
        assert_eq!(stored.len(), 4 + 64);
        assert_ne!(stored, lock_key(b"p:", &"x".repeat(LONGEST_AS_IS + 2)));
    }
}
