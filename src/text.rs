//! Short strings without a heap allocation.
//!
//! Every lock cycle moves a key and an owner token across the napi boundary
//! and into a store. Both are short (an owner token is 36 bytes, keys are
//! usually a few dozen), and on a path that stays in memory the allocations
//! for them were a measurable share of a cycle. `SmallStr` keeps up to
//! [`INLINE`] bytes in place and falls back to the heap beyond that.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// Bytes held without allocating.
pub const INLINE: usize = 54;

#[derive(Clone)]
pub enum SmallStr {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<str>),
}

impl SmallStr {
    pub fn as_str(&self) -> &str {
        match self {
            SmallStr::Inline { len, bytes } => {
                // SAFETY: the inline bytes are only ever copied whole from a
                // `&str` (see `From<&str>`), so they are valid UTF-8; checking
                // again on every read was a measurable part of a lock cycle.
                unsafe { std::str::from_utf8_unchecked(&bytes[..usize::from(*len)]) }
            }
            SmallStr::Heap(s) => s,
        }
    }

    /// From UTF-8 bytes already known to be valid, as napi writes them.
    pub fn from_utf8(bytes: &[u8]) -> Option<Self> {
        std::str::from_utf8(bytes).ok().map(SmallStr::from)
    }
}

impl From<&str> for SmallStr {
    fn from(s: &str) -> Self {
        match u8::try_from(s.len()) {
            Ok(len) if s.len() <= INLINE => {
                let mut bytes = [0u8; INLINE];
                bytes[..s.len()].copy_from_slice(s.as_bytes());
                SmallStr::Inline { len, bytes }
            }
            _ => SmallStr::Heap(s.into()),
        }
    }
}

impl From<String> for SmallStr {
    fn from(s: String) -> Self {
        if s.len() <= INLINE {
            SmallStr::from(s.as_str())
        } else {
            SmallStr::Heap(s.into_boxed_str())
        }
    }
}

impl Deref for SmallStr {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for SmallStr {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

// Hash and equality are those of the text, so a map keyed by `SmallStr` can be
// looked up with a `&str`.
impl Hash for SmallStr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialEq for SmallStr {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SmallStr {}

impl PartialEq<str> for SmallStr {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl fmt::Debug for SmallStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for SmallStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn short_text_stays_inline_and_long_text_goes_to_the_heap() {
        let short = SmallStr::from("invoice:42");
        assert!(matches!(short, SmallStr::Inline { .. }));
        assert_eq!(&*short, "invoice:42");
        let long = "é".repeat(40);
        let heap = SmallStr::from(long.as_str());
        assert!(matches!(heap, SmallStr::Heap(_)));
        assert_eq!(&*heap, long);
        let edge = "x".repeat(INLINE);
        assert!(matches!(
            SmallStr::from(edge.as_str()),
            SmallStr::Inline { .. }
        ));
    }

    #[test]
    fn looks_up_like_a_str() {
        let mut map = HashMap::new();
        map.insert(SmallStr::from("k🔒"), 1);
        map.insert(SmallStr::from("y".repeat(100)), 2);
        assert_eq!(map.get("k🔒"), Some(&1));
        assert_eq!(map.get("y".repeat(100).as_str()), Some(&2));
        assert_eq!(map.get("k"), None);
    }
}
