//! Owner tokens.
//!
//! Every acquisition mints a fresh token, and the store only lets the holder of
//! that token release or extend the lock. The token is what makes a late
//! `release()` from a holder whose TTL ran out harmless, so it must be
//! unguessable: 122 random bits from `rand`'s thread-local generator, a ChaCha
//! CSPRNG seeded from the operating system, laid out as a UUID v4 string (the
//! same shape `crypto.randomUUID()` gives the TypeScript Keel lock, so tokens
//! from both look alike in a store).

use rand::Rng;

use crate::text::SmallStr;

/// Length of a minted token: `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`.
pub const OWNER_LEN: usize = 36;

const HEX: &[u8; 16] = b"0123456789abcdef";

thread_local! {
    // `rand::rng()`'s generator, held once per thread: fetching it for each
    // token cost a reference-count round trip per lock cycle.
    static RNG: std::cell::RefCell<rand::rngs::ThreadRng> = std::cell::RefCell::new(rand::rng());
}

/// A fresh random owner token.
pub fn mint() -> SmallStr {
    let mut bytes: [u8; 16] = RNG.with(|rng| rng.borrow_mut().random());
    // RFC 9562 version 4 (random) and variant 10xx: 6 fixed bits, 122 random.
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;

    let mut out = [0u8; OWNER_LEN];
    let mut at = 0;
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out[at] = b'-';
            at += 1;
        }
        out[at] = HEX[usize::from(byte >> 4)];
        out[at + 1] = HEX[usize::from(byte & 0x0f)];
        at += 2;
    }
    // Every byte written above is ASCII, so this is valid UTF-8.
    SmallStr::from_utf8(&out).unwrap_or_else(|| SmallStr::from(""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn tokens_are_uuid_v4_shaped() {
        let token = mint();
        assert_eq!(token.len(), OWNER_LEN);
        let parts: Vec<&str> = token.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
        assert!(token
            .bytes()
            .all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    }

    #[test]
    fn tokens_do_not_repeat() {
        let seen: HashSet<String> = (0..100_000).map(|_| mint().to_string()).collect();
        assert_eq!(seen.len(), 100_000);
    }

    #[test]
    fn every_random_bit_varies() {
        // OR and AND over many tokens: each of the 122 random bits must be seen
        // both set and clear, or the generator is not filling them.
        let mut ones = [0u8; 16];
        let mut zeros = [0xffu8; 16];
        for _ in 0..2_000 {
            let hex: String = mint().chars().filter(|c| *c != '-').collect();
            for i in 0..16 {
                let byte = u8::from_str_radix(&hex[i * 2..i * 2 + 2], 16).unwrap();
                ones[i] |= byte;
                zeros[i] &= byte;
            }
        }
        let varying: u32 = (0..16).map(|i| (ones[i] & !zeros[i]).count_ones()).sum();
        assert_eq!(varying, 122);
    }
}
