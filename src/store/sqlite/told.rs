//! What the other processes on the file are told, after the commit that
//! decided it: a lock handed to a process's place, by datagram to its ear
//! (or, handed to this very process, reported here), and a release, to the
//! ears that wait for the key. Nothing fails for it: a process not told
//! finds out at its next poll, or lets its claim window end.

use super::ear::Ears;
use super::line::HandOver;
use super::open::Db;
use super::ops;
use crate::store::follow::Released;
use crate::store::HoldKind;

/// Tell the process a lock was handed to: this one by report, another by
/// its ear (one that is gone lets its claim window end).
pub(super) fn hand_over(ears: &Ears, hand_over: Option<HandOver>) {
    let Some(HandOver { to, told }) = hand_over else {
        return;
    };
    if ears.address() == Some(to.as_str()) {
        ears.report(Released::Handed, told);
    } else {
        ears.hand_over(&to, &told);
    }
}

/// Tell the ears that wait for `key` that it was released.
pub(super) fn announce(ears: &Ears, db: &mut Db, hold: HoldKind, key: &str) {
    let Ok(waiting) = ops::ears_of(&db.connection, &db.sql, hold, key) else {
        return;
    };
    released(ears, db, waiting, hold, key);
}

/// Tell `waiting` (ears' addresses) that `key` was released; forget those gone.
pub(super) fn released(ears: &Ears, db: &mut Db, waiting: Vec<String>, hold: HoldKind, key: &str) {
    if waiting.is_empty() {
        return;
    }
    for gone in ears.tell(waiting, ops::letter(hold), key) {
        let _ = ops::forget_ear(db, &gone);
    }
}
