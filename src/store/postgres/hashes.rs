//! Names made from hashes: a prepared statement's, and the suffix of a
//! function's name that changes with its body (so a store of another
//! version on the same database keeps functions of its own).

/// `keel_` and the 64-bit FNV-1a hash of `text`, in hex.
pub fn name_of(text: &str) -> String {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("keel_{hash:016x}")
}
