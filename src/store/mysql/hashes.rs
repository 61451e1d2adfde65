//! Hashes and hex: a key's row id and an owner's in the holds (SHA-256),
//! the names of the store's procedures and user locks, and bytes written
//! into SQL as hex literals.

/// SHA-256 of `bytes`: a key's row id, an owner's in the holds.
pub fn hash(bytes: &[u8]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).to_vec()
}

/// SHA-256 of `bytes`, in hex.
pub fn hash_hex(bytes: &[u8]) -> String {
    hex(&hash(bytes))
}

/// Bytes as a hex literal's digits.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_owners_travel_as_hex_of_their_bytes() {
        assert_eq!(hex("é'\\".as_bytes()), "C3A9275C");
        assert_eq!(hash_hex(b"").len(), 64);
        assert_eq!(hash(b"").len(), 32);
    }
}
