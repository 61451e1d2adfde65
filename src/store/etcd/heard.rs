//! What a deletion heard in a plain lock's line (`watch.rs`) means for
//! this store's place in it (`line.rs`): nothing, a look (a read), a wake
//! of its waiters, or, when every entry ahead of the place as last read is
//! heard gone, the lock itself, without a read.

use super::line::{first_in, Handed, Line};
use super::messages::KeyValue;

/// What a deletion in a line this store follows calls for.
#[derive(Debug)]
pub enum Heard {
    /// The last entry ahead of this store's place went: the place is first
    /// as of that deletion (the hand-over it makes, to be told, and the
    /// place's entry).
    First(Handed, KeyValue),
    /// The entry ahead of this store's place went: look whether it is first.
    Look,
    /// This store has no place known (an attempt may be on its way, or the
    /// place itself lapsed): its waiters try now.
    Wake,
    Nothing,
}

impl Line {
    /// The entry `deleted` of `line` went (at its `mod_revision`, as a
    /// watch tells a deletion): what that calls for. `heard_from`: the
    /// revision since which every deletion in the line is heard here, in
    /// order. A place read since then is first once every entry ahead of
    /// it in that read is heard gone, without a read: no entry comes ahead
    /// of a place, and its own going would have been heard first. Else,
    /// the place whose entry just ahead went looks (a read).
    pub fn heard(&self, line: &[u8], deleted: &KeyValue, heard_from: i64) -> Heard {
        let (gone, at) = (deleted.key.as_slice(), deleted.mod_revision);
        self.with(line, |state| {
            state.gone.went_by(gone, at);
            // (A key can be made again: a deletion is of the entry made
            // before it, not of one made since.)
            state.handed.retain(|h| h.stored != gone || at < h.created);
            let Some(place) = state.place.as_mut() else {
                return match state.reserved {
                    // A place on its way: a read finds it.
                    Some(_) => Heard::Look,
                    // No place (its waiters, if any, ask), unless the lock is this store's.
                    None if state.handed.is_empty() => Heard::Wake,
                    None => Heard::Nothing,
                };
            };
            if place.stored == gone {
                if at < place.created {
                    return Heard::Nothing;
                }
                state.place = None;
                return Heard::Wake;
            }
            let Some(read) = place.read.as_mut() else {
                return Heard::Look;
            };
            // (Gone before the read: the read showed what came since.)
            if at <= read.at {
                return Heard::Nothing;
            }
            let Some(at) = read.ahead.iter().position(|key| key == gone) else {
                return Heard::Nothing;
            };
            let just_ahead = at + 1 == read.ahead.len();
            read.ahead.remove(at);
            read.gone_by = read.gone_by.max(deleted.mod_revision);
            if !read.ahead.is_empty() {
                // (The rest may have gone before the read was answered,
                // heard then and not crossed off: a read tells.)
                return if just_ahead {
                    Heard::Look
                } else {
                    Heard::Nothing
                };
            }
            if read.at < heard_from {
                return Heard::Look;
            }
            let (own, token) = (read.own.clone(), read.gone_by);
            match first_in(state, &own, token) {
                Some((handed, true)) => Heard::First(handed, own),
                Some((_, false)) => Heard::Nothing,
                None => Heard::Look,
            }
        })
        .unwrap_or(Heard::Wake)
    }
}
