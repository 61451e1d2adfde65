//! A plain lock's line as one read of it found it (`line.rs`): its entries
//! in line order, and what each entry's value says (a hold's owner, or a
//! place's owner and when its process asked for it).

use super::messages::KeyValue;

/// A place's value: when its process asked for it, and the owner token the
/// lock is handed over for.
pub fn place_value(asked: u64, owner: &str) -> Vec<u8> {
    format!("{asked} {owner}").into_bytes()
}

/// A hold's value: the owner token holding the lock.
pub fn held_value(owner: &str) -> Vec<u8> {
    format!("h {owner}").into_bytes()
}

/// What [`place_value`] or [`held_value`] wrote: when a place was asked
/// for (`None` for a hold), and the owner.
pub fn read_entry(value: &[u8]) -> Option<(Option<u64>, &str)> {
    let text = std::str::from_utf8(value).ok()?;
    let (asked, owner) = text.split_once(' ')?;
    match asked {
        "h" => Some((None, owner)),
        asked => Some((Some(asked.parse().ok()?), owner)),
    }
}

/// The owner token `kv` holds the lock (or its place) for.
pub fn owner_of(kv: &KeyValue) -> Option<&str> {
    read_entry(&kv.value).map(|(_, owner)| owner)
}

/// A line's entries as one read found them, in line order.
pub struct Entries {
    kvs: Vec<KeyValue>,
    /// The revision the read was answered at.
    pub revision: i64,
}

impl Entries {
    pub fn of(mut kvs: Vec<KeyValue>, revision: i64) -> Self {
        // Entries made in one transaction share a revision: the key orders them.
        kvs.sort_by(|a, b| (a.create_revision, &a.key).cmp(&(b.create_revision, &b.key)));
        Entries { kvs, revision }
    }

    /// The holder's entry.
    pub fn first(&self) -> Option<&KeyValue> {
        self.kvs.first()
    }

    /// Where `stored` is in line: `None` when it is not there, else the
    /// entry just ahead of it (`None` within: it is first).
    pub fn ahead_of(&self, stored: &[u8]) -> Option<Option<&KeyValue>> {
        let at = self.kvs.iter().position(|kv| kv.key == stored)?;
        Some(at.checked_sub(1).and_then(|before| self.kvs.get(before)))
    }

    pub fn iter(&self) -> impl Iterator<Item = &KeyValue> {
        self.kvs.iter()
    }
}

/// A place as a read showed it: the entries ahead of it (crossed off as
/// their deletions are heard) and its own entry, at the read's revision
/// (answers of several requests in flight come in any order, and an older
/// one says less).
#[derive(Clone, Debug)]
pub struct Read {
    pub ahead: Vec<Vec<u8>>,
    pub own: KeyValue,
    pub at: i64,
    /// The latest revision an entry ahead was crossed off at: a hand-over
    /// made when the last goes is fenced with no less.
    pub gone_by: i64,
}

impl Read {
    pub fn of(entries: &Entries, stored: &[u8]) -> Option<Read> {
        let own = entries.iter().find(|kv| kv.key == stored)?.clone();
        let ahead = entries
            .iter()
            .take_while(|kv| kv.key != stored)
            .map(|kv| kv.key.clone())
            .collect();
        Some(Read {
            ahead,
            own,
            at: entries.revision,
            gone_by: entries.revision,
        })
    }

    pub fn at(read: &Option<Read>) -> i64 {
        read.as_ref().map_or(0, |read| read.at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, created: i64) -> KeyValue {
        KeyValue {
            key: key.as_bytes().to_vec(),
            create_revision: created,
            mod_revision: created,
            value: place_value(5, key),
            lease: 0,
        }
    }

    #[test]
    fn a_line_is_in_the_order_its_entries_were_made() {
        let entries = Entries::of(vec![kv("b", 9), kv("z", 3), kv("a", 9)], 12);
        assert_eq!(
            entries.first().map(|kv| kv.key.clone()),
            Some(b"z".to_vec())
        );
        assert!(entries.ahead_of(b"z") == Some(None));
        assert_eq!(
            entries.ahead_of(b"b").flatten().map(|kv| kv.key.clone()),
            Some(b"a".to_vec())
        );
        assert!(entries.ahead_of(b"q").is_none());
        assert_eq!(read_entry(b"77 o-1"), Some((Some(77), "o-1")));
        assert_eq!(read_entry(&held_value("o 1")), Some((None, "o 1")));
        assert_eq!(read_entry(b"x o"), None);
    }
}
