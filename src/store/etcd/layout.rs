//! Where each hold lives in etcd's key space, under the store's prefix:
//! - a plain lock's line at `<prefix>l/<name>/`, one key per entry: the
//!   holder is the entry created first (lowest create revision), the rest
//!   wait behind it in the order they were created (`line.rs`). A lock taken
//!   at once is the entry `t<owner>`; a process's place in line is
//!   `p<store id>.<n>`. Each entry's value is `<asked> <owner>` (`line.rs`);
//! - a semaphore's permits at `<prefix>s/<name>/<owner>`, one key each;
//! - a read-write key's readers at `<prefix>rw/<name>/r/<owner>`, its writer
//!   at `<prefix>rw/<name>/w` (its value the owner token), and the mark of a
//!   writer waiting, which holds new readers back, at `<prefix>rw/<name>/m`.
//!
//! A name is the key's length, a colon and the key, so the range of one
//! key's entries never takes in another key's (`a/` and `a/b/` would). A key
//! longer than [`LONGEST_AS_IS`] bytes is named by its SHA-256 in hex
//! (`#...`), as a request carries its key two or three times and etcd reads
//! requests of 1.5 MiB at most.

use sha2::{Digest, Sha256};

/// Keys up to this many bytes are stored as they are.
pub const LONGEST_AS_IS: usize = 512;

/// Where a plain lock's line lives: the range of its entries' keys.
pub fn lock_line(prefix: &[u8], key: &str) -> Vec<u8> {
    joined(&[prefix, b"l/", &name(key), b"/"])
}

/// Where every plain lock's line lives: the range of all their entries.
pub fn every_line(prefix: &[u8]) -> Vec<u8> {
    joined(&[prefix, b"l/"])
}

/// The line an entry's key `entry` is in (an entry's own part holds no `/`).
pub fn line_of(entry: &[u8]) -> &[u8] {
    let end = entry
        .iter()
        .rposition(|byte| *byte == b'/')
        .map_or(0, |at| at + 1);
    &entry[..end]
}

/// The entry of a plain lock taken at once by `owner`, in its line `line`.
pub fn taken_entry(line: &[u8], owner: &str) -> Vec<u8> {
    joined(&[line, b"t", owner.as_bytes()])
}

/// The `n`-th place in line `line` of the store whose id is `me`.
pub fn place_entry(line: &[u8], me: &str, n: u64) -> Vec<u8> {
    joined(&[line, b"p", me.as_bytes(), b".", n.to_string().as_bytes()])
}

/// The part of a hold's keys that is the key it is of.
fn name(key: &str) -> Vec<u8> {
    if key.len() <= LONGEST_AS_IS {
        let mut name = format!("{}:", key.len()).into_bytes();
        name.extend_from_slice(key.as_bytes());
        name
    } else {
        let mut name = b"#".to_vec();
        name.extend(hex_sha256(key));
        name
    }
}

fn hex_sha256(key: &str) -> Vec<u8> {
    Sha256::digest(key.as_bytes())
        .iter()
        .flat_map(|byte| format!("{byte:02x}").into_bytes())
        .collect()
}

/// `parts` one after the other.
fn joined(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Where a semaphore's permits live: the range of its permits' keys.
pub fn permits(prefix: &[u8], key: &str) -> Vec<u8> {
    joined(&[prefix, b"s/", &name(key), b"/"])
}

/// Where a read-write key's holds live: readers, writer and mark.
pub fn read_write(prefix: &[u8], key: &str) -> Vec<u8> {
    joined(&[prefix, b"rw/", &name(key), b"/"])
}

/// The key just past every key that starts with `prefix` (which ends in `/`):
/// with it, a range or a watch takes in all of them.
pub fn range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_keys_are_kept_as_they_are_and_long_ones_hashed() {
        assert_eq!(lock_line(b"p:", "a\0b"), b"p:l/3:a\0b/".to_vec());
        let long = "x".repeat(LONGEST_AS_IS + 1);
        let line = lock_line(b"p:", &long);
        assert!(line.starts_with(b"p:l/#"));
        assert_eq!(line.len(), 5 + 64 + 1);
        assert_ne!(line, lock_line(b"p:", &"x".repeat(LONGEST_AS_IS + 2)));
        assert_eq!(taken_entry(&line, "o"), [&line[..], b"to"].concat());
        assert_eq!(place_entry(b"l/", "me", 7), b"l/pme.7".to_vec());
    }

    #[test]
    fn one_keys_range_never_takes_in_another_keys_holds() {
        let a = permits(b"p:", "a");
        let a_b = permits(b"p:", "a/");
        assert_eq!(a, b"p:s/1:a/".to_vec());
        assert!(!a_b.starts_with(&a), "{a_b:?} is in {a:?}'s range");
        assert_eq!(range_end(&a), b"p:s/1:a0".to_vec());
        assert!(read_write(b"p:", &"y".repeat(600)).starts_with(b"p:rw/#"));
    }
}
