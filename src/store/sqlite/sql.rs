//! The SQL, on one page. Every time is the file's clock (`clock`): whole
//! milliseconds on the machine's monotonic clock, passed in as `?now`, so a
//! wall-clock step decides nothing.
//!
//! A plain lock is a row of `<table>` (`key`, `owner`, `expires_at`, and
//! the fencing `token` it was given), kept when it is released (owner `''`,
//! `expires_at` 0) so the key's next token is one more than its last: taking
//! and giving back a lock each write one page. A sweep deletes lapsed rows,
//! raising `floor` (in `<table>_state`) to their tokens, and a key without
//! a row counts on from the floor. Semaphores and read-write locks keep
//! their holds in `<table>_holds`, one row per hold: kind `s` a permit, `r` a
//! reader, `w` the writer, `m` a waiting writer's mark; their tokens come
//! from `fencing` in `<table>_state`, which also keeps the boot the holds
//! belong to (`boot`) and a recent clock reading a hold was written at (`seen`).
//! `<table>_ears` notes which processes wait for which key, and where
//! their ears are (`ear`). `<table>_line` is the line a plain lock's
//! waiters wait in (`store::line`), one place per process (named by its
//! ear): when it arrived (µs), when it lapses, the owner token a hand-over
//! makes the lock, when the process asked, and once the lock went to it the
//! token it was handed with.

/// The statements for one table, made once per store.
pub(super) struct Sql {
    pub create: String,
    pub lock_owner: String,
    pub lock_take: String,
    pub lock_take_alone: String,
    pub lock_release: String,
    pub lock_release_alone: String,
    pub lock_extend: String,
    pub lock_holds: String,
    pub lock_left: String,
    pub hold_others: String,
    pub hold_mine: String,
    pub hold_count: String,
    pub hold_put: String,
    pub hold_mark: String,
    pub hold_unmark: String,
    pub hold_release: String,
    pub hold_extend: String,
    pub hold_left: String,
    pub state_read: String,
    pub state_write: String,
    pub next_token: String,
    pub seen: String,
    pub floor_raise: String,
    pub sweep_locks: Sweep,
    pub sweep_holds: Sweep,
    pub ear_on: String,
    pub ear_off: String,
    pub ears_of: String,
    pub ear_gone: String,
    pub clear_ears: String,
    pub line_lapse: String,
    pub line_mine_handed: String,
    pub line_first: String,
    pub line_join: String,
    pub line_handed_to: String,
    pub line_give_back: String,
    pub line_leave: String,
    pub line_out: String,
    pub clear_line: String,
    pub clear_locks: String,
    pub clear_holds: String,
}

/// A sweep's two statements on one table: where the next batch of keys
/// after `?1` ends (at most `?2` keys on), and the deletion of its lapsed
/// rows up to that end (`?2`) as of `?3`.
pub(super) struct Sweep {
    pub end: String,
    pub delete: String,
}

impl Sweep {
    fn of(table: &str, returning: &str) -> Sweep {
        Sweep {
            end: format!(
                "SELECT max(key) FROM (SELECT key FROM {table} WHERE key > ?1 ORDER BY key LIMIT ?2)"
            ),
            delete: format!(
                "DELETE FROM {table} WHERE key > ?1 AND key <= ?2 AND expires_at <= ?3{returning}"
            ),
        }
    }
}

/// Rows a sweep looks at per acquire: its pause stays short whatever the
/// table's size.
pub(super) const SWEEP_BATCH: i64 = 256;

impl Sql {
    /// `table` is a lower-case name of letters, digits and underscores
    /// (checked by the JS layer), so it is safe unquoted.
    pub fn new(table: &str) -> Sql {
        let holds = format!("{table}_holds");
        let state = format!("{table}_state");
        let ears = format!("{table}_ears");
        let line = format!("{table}_line");
        Sql {
            create: format!(
                "CREATE TABLE IF NOT EXISTS {table} (
                   key TEXT PRIMARY KEY, owner TEXT NOT NULL,
                   expires_at INTEGER NOT NULL, token INTEGER NOT NULL) WITHOUT ROWID;
                 CREATE TABLE IF NOT EXISTS {holds} (
                   key TEXT NOT NULL, kind TEXT NOT NULL, owner TEXT NOT NULL,
                   expires_at INTEGER NOT NULL, PRIMARY KEY (key, kind, owner)) WITHOUT ROWID;
                 CREATE TABLE IF NOT EXISTS {state} (
                   name TEXT PRIMARY KEY, value NOT NULL) WITHOUT ROWID;
                 CREATE TABLE IF NOT EXISTS {ears} (
                   key TEXT NOT NULL, kind TEXT NOT NULL, ear TEXT NOT NULL,
                   PRIMARY KEY (key, kind, ear)) WITHOUT ROWID;
                 CREATE TABLE IF NOT EXISTS {line} (
                   key TEXT NOT NULL, process TEXT NOT NULL, arrived INTEGER NOT NULL,
                   lapses_at INTEGER NOT NULL, next_owner TEXT NOT NULL, handed INTEGER,
                   asked INTEGER NOT NULL, PRIMARY KEY (key, process)) WITHOUT ROWID;
                 CREATE INDEX IF NOT EXISTS {line}_order ON {line} (key, arrived, process);
                 INSERT OR IGNORE INTO {state} VALUES ('fencing', 0), ('floor', 0), ('seen', 0), ('boot', '');"
            ),
            lock_owner: format!("SELECT expires_at, token, owner FROM {table} WHERE key = ?1"),
            lock_take: format!(
                "INSERT INTO {table} VALUES (?1, ?2, ?3, ?4) ON CONFLICT (key) DO UPDATE
                   SET owner = excluded.owner, expires_at = excluded.expires_at, token = excluded.token"
            ),
            // Freed, a row lapses at -1 if it was still held, else 0 (both
            // long past), which tells the release whether it was.
            // A plain lock taken in one statement of its own, only while it is
            // free and nobody waits in line (the common case): its token one
            // more than the key's last, or than the floor for a new key.
            lock_take_alone: format!(
                "INSERT INTO {table} SELECT ?1, ?2, ?3, (SELECT value FROM {state} WHERE name = 'floor') + 1
                   WHERE NOT EXISTS (SELECT 1 FROM {line} WHERE key = ?1 AND handed IS NULL AND lapses_at > ?4)
                   ON CONFLICT (key) DO UPDATE
                     SET owner = excluded.owner, expires_at = excluded.expires_at, token = {table}.token + 1
                     WHERE {table}.expires_at <= ?4
                   RETURNING token"
            ),
            lock_release: format!(
                "UPDATE {table} SET owner = '', expires_at = CASE WHEN expires_at > ?3 THEN -1 ELSE 0 END
                   WHERE key = ?1 AND owner = ?2 AND owner <> '' RETURNING expires_at"
            ),
            // The same, in one statement of its own, only while nobody waits
            // in line or listens for the key (the common case: no
            // transaction, nobody to hand on to or tell), and the lock is
            // not one handed to a place given back unclaimed (whose place
            // goes with it).
            lock_release_alone: format!(
                "UPDATE {table} SET owner = '', expires_at = CASE WHEN expires_at > ?3 THEN -1 ELSE 0 END
                   WHERE key = ?1 AND owner = ?2 AND owner <> ''
                     AND NOT EXISTS (SELECT 1 FROM {line} WHERE key = ?1
                       AND ((handed IS NULL AND lapses_at > ?3) OR next_owner = ?2))
                     AND NOT EXISTS (SELECT 1 FROM {ears} WHERE key = ?1 AND kind = 'l')
                   RETURNING expires_at"
            ),
            lock_extend: format!(
                "UPDATE {table} SET expires_at = ?4 WHERE key = ?1 AND owner = ?2 AND expires_at > ?3"
            ),
            lock_holds: format!(
                "SELECT count(*) FROM {table} WHERE key = ?1 AND owner = ?2 AND expires_at > ?3"
            ),
            lock_left: format!(
                "SELECT expires_at - ?2 FROM {table} WHERE key = ?1 AND expires_at > ?2"
            ),
            hold_others: format!(
                "SELECT count(*) FROM {holds} WHERE key = ?1 AND expires_at > ?3
                   AND (kind = 'r' OR (kind = 'w' AND owner <> ?2))"
            ),
            hold_mine: format!(
                "SELECT count(*) FROM {holds} WHERE key = ?1 AND kind = ?2 AND owner = ?3 AND expires_at > ?4"
            ),
            hold_count: format!(
                "SELECT count(*) FROM {holds} WHERE key = ?1 AND kind IN (?2, ?3) AND expires_at > ?4"
            ),
            hold_put: format!(
                "INSERT INTO {holds} VALUES (?1, ?2, ?3, ?4)
                   ON CONFLICT (key, kind, owner) DO UPDATE SET expires_at = excluded.expires_at"
            ),
            hold_mark: format!(
                "INSERT INTO {holds} VALUES (?1, 'm', '', ?2) ON CONFLICT (key, kind, owner)
                   DO UPDATE SET expires_at = max(expires_at, excluded.expires_at)"
            ),
            hold_unmark: format!("DELETE FROM {holds} WHERE key = ?1 AND kind = 'm'"),
            hold_release: format!(
                "DELETE FROM {holds} WHERE key = ?1 AND kind = ?2 AND owner = ?3 AND expires_at > ?4"
            ),
            hold_extend: format!(
                "UPDATE {holds} SET expires_at = ?5
                   WHERE key = ?1 AND kind = ?2 AND owner = ?3 AND expires_at > ?4"
            ),
            hold_left: format!(
                "SELECT expires_at - ?4 FROM {holds}
                   WHERE key = ?1 AND kind = ?2 AND owner = ?3 AND expires_at > ?4"
            ),
            state_read: format!("SELECT value FROM {state} WHERE name = ?1"),
            state_write: format!("UPDATE {state} SET value = ?2 WHERE name = ?1"),
            next_token: format!(
                "UPDATE {state} SET value = value + 1 WHERE name = 'fencing' RETURNING value"
            ),
            seen: format!(
                "UPDATE {state} SET value = ?1 WHERE name = 'seen' AND value < ?1"
            ),
            ear_on: format!("INSERT OR IGNORE INTO {ears} VALUES (?1, ?2, ?3)"),
            ear_off: format!("DELETE FROM {ears} WHERE key = ?1 AND kind = ?2 AND ear = ?3"),
            ears_of: format!("SELECT ear FROM {ears} WHERE key = ?1 AND kind = ?2"),
            ear_gone: format!("DELETE FROM {ears} WHERE ear = ?1"),
            clear_ears: format!("DELETE FROM {ears}"),
            floor_raise: format!(
                "UPDATE {state} SET value = max(value, ?1) WHERE name = 'floor'"
            ),
            // A plain lock's token raises the floor as its row goes.
            sweep_locks: Sweep::of(table, " RETURNING token"),
            sweep_holds: Sweep::of(&holds, ""),
            line_lapse: format!("DELETE FROM {line} WHERE key = ?1 AND lapses_at <= ?2"),
            line_mine_handed: format!(
                "DELETE FROM {line} WHERE key = ?1 AND process = ?2 AND handed IS NOT NULL
                   RETURNING next_owner, handed"
            ),
            line_first: format!(
                "SELECT process, next_owner, asked FROM {line}
                   WHERE key = ?1 AND handed IS NULL AND lapses_at > ?2
                   ORDER BY arrived, process LIMIT 1"
            ),
            line_join: format!(
                "INSERT INTO {line} VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6)
                   ON CONFLICT (key, process) DO UPDATE SET
                     arrived = CASE WHEN {line}.handed IS NULL THEN {line}.arrived ELSE excluded.arrived END,
                     lapses_at = excluded.lapses_at, next_owner = excluded.next_owner, handed = NULL,
                     asked = excluded.asked"
            ),
            line_handed_to: format!(
                "UPDATE {line} SET handed = ?3, lapses_at = ?4 WHERE key = ?1 AND process = ?2"
            ),
            line_give_back: format!(
                "DELETE FROM {line} WHERE key = ?1 AND process = ?2 AND handed IS NOT NULL AND next_owner = ?3"
            ),
            line_leave: format!(
                "DELETE FROM {line} WHERE key = ?1 AND process = ?2 AND (handed IS NULL OR NOT EXISTS (
                   SELECT 1 FROM {table} WHERE key = ?1 AND owner = {line}.next_owner AND expires_at > ?3))"
            ),
            line_out: format!("DELETE FROM {line} WHERE key = ?1 AND process = ?2"),
            clear_line: format!("DELETE FROM {line}"),
            clear_locks: format!(
                "UPDATE {table} SET owner = '', expires_at = 0, token = token + ?1"
            ),
            clear_holds: format!("DELETE FROM {holds}"),
        }
    }
}
