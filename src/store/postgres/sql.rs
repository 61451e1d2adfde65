//! The SQL, on one page. Every time is the database server's: `now` is
//! its clock in epoch milliseconds, read once per statement, and every
//! comparison and every new `expires_at` is made from it in SQL, so no
//! client's clock decides when a lock expires.
//!
//! The table is the docs' database store's (`key`, `owner`, `expires_at` in
//! epoch ms), so clients of either exclude each other. Beside it, one
//! sequence gives fencing tokens, and releases are announced with
//! `pg_notify` on a channel named after the table. Semaphores and
//! read-write locks keep their holds in `<table>_holds`, one row per hold,
//! and each of their operations is one call of the function `<table>_hold`
//! (its body: `holds_sql`); their releases are announced on `<table>_holds`.
//! A plain lock's waiters wait in `<table>_line` (`line_sql`).

use std::sync::atomic::{AtomicU8, Ordering};

use super::hashes::name_of;
use super::holds_sql::HOLD_FUNCTION;
use super::line_sql::{even, LineSql};
use crate::store::line::{CLAIM_MS, LEASE_MS};

/// Expired rows deleted per sweep statement.
pub(super) const SWEEP_BATCH: i64 = 500;
/// Sweep statements per sweep, each sent when the one before was full.
pub(super) const SWEEP_BATCHES: usize = 20;

/// The server's clock, epoch milliseconds, as a one-row `now(ms)`.
const NOW: &str = "now AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms)";

/// A `pg_notify` payload must stay under 8000 bytes: a longer key is not
/// announced (its waiters find the release at their next poll). A plain
/// lock's payload is its key.
const MAX_ANNOUNCED_KEY_BYTES: usize = 7_999;
/// A semaphore's or read-write key's payload is a letter saying which, then
/// the key: it would fit up to 7,998 bytes, but the hold function was first
/// made with this bound, and the function is named after its body, so
/// another number would make every database that has it need a new one
/// (which takes CREATE rights an application may not have).
const MAX_ANNOUNCED_HOLD_KEY_BYTES: usize = 7_990;
const _: () = assert!(MAX_ANNOUNCED_HOLD_KEY_BYTES < MAX_ANNOUNCED_KEY_BYTES);

/// Ends the server session of a connection given up as silent, waiting up to
/// `$3` ms for its process to end (PostgreSQL 14 and later; before, the call
/// fails and nothing is ended). Only that session: the process must serve our
/// old local port under our application name, so another client's session
/// (say, one a pooler handed the same process id) is never touched.
pub(super) const END_SESSION: &str =
    "SELECT pg_terminate_backend(pid, $3::bigint) FROM pg_stat_activity
   WHERE pid = $1::int AND client_port = $2::int AND application_name = 'keel-lock'";

/// The statements the store sends, each one round trip; the text is the
/// table's ([`Sql::statements`], in this order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Statement {
    Acquire,
    Release,
    Extend,
    IsLocked,
    RemainingTime,
    Holds,
    Sweep,
    Hold,
    /// The line's statements (`line_sql`), and the sweep with its places.
    LineAcquire,
    LineRelease,
    Claim,
    Leave,
    SweepWithLine,
    /// Ends a connection's server session after it went silent (the event
    /// loop's fence: [`END_SESSION`]).
    EndSession,
}

impl Statement {
    /// Every statement, in the order of [`Sql::statements`].
    pub const ALL: [Statement; 14] = [
        Statement::Acquire,
        Statement::Release,
        Statement::Extend,
        Statement::IsLocked,
        Statement::RemainingTime,
        Statement::Holds,
        Statement::Sweep,
        Statement::Hold,
        Statement::LineAcquire,
        Statement::LineRelease,
        Statement::Claim,
        Statement::Leave,
        Statement::SweepWithLine,
        Statement::EndSession,
    ];

    /// Its text for the store's table.
    pub fn text(self, sql: &Sql) -> &str {
        sql.statements()[self as usize]
    }

    /// The name it is prepared under on a connection straight to the server.
    pub fn name(self, sql: &Sql) -> &str {
        sql.statement_name(self as usize)
    }

    /// What is sent for it, and how many of its parameters (the first
    /// ones): on a database without the line's objects, a statement of the
    /// line is sent as the plain statement that takes a prefix of its
    /// parameters, whose answer its reader also reads (`answer`). Decided
    /// as it is written, once its connection knows.
    pub fn as_sent(self, sql: &Sql) -> (Statement, usize) {
        if !self.of_the_line() || sql.line_ready() {
            return (self, usize::MAX);
        }
        match self {
            Statement::LineAcquire => (Statement::Acquire, 3),
            Statement::LineRelease => (Statement::Release, 2),
            Statement::Claim => (Statement::Extend, 3),
            Statement::Leave => (Statement::IsLocked, 1),
            _ => (Statement::Sweep, 1),
        }
    }

    /// Whether it needs the line's objects (`line_sql`).
    pub fn of_the_line(self) -> bool {
        matches!(
            self,
            Statement::LineAcquire
                | Statement::LineRelease
                | Statement::Claim
                | Statement::Leave
                | Statement::SweepWithLine
        )
    }
}

/// Whether the database has the line's objects, as the connections found
/// them: not known until one opened; missing (they could not be made: the
/// user may not create objects, and a schema made ahead of time lacks
/// them) once any found them so, and then for good: plain locks work as
/// before, their waiters each on their own.
const LINE_UNKNOWN: u8 = 0;
const LINE_READY: u8 = 1;
const LINE_MISSING: u8 = 2;

/// The statements for one table, made once per store.
pub(super) struct Sql {
    /// The lock table, as the store was given it.
    pub table: String,
    /// Every object the store uses, made if missing (what `schema()` prints).
    pub create: String,
    /// The objects of semaphores and read-write locks alone, for a database
    /// that has those of plain locks.
    pub create_holds: String,
    /// The line's objects alone, likewise.
    pub create_line: String,
    pub acquire: String,
    pub release: String,
    pub extend: String,
    pub is_locked: String,
    pub remaining_time: String,
    pub holds: String,
    pub sweep: String,
    pub listen: String,
    /// Whether the objects of plain locks are there (the table and its
    /// sequence), whether those of semaphores and read-write locks are, and
    /// whether the line's are.
    pub exists: String,
    /// A semaphore's or read-write key's operation.
    pub hold: String,
    /// Where those releases are announced.
    pub holds_channel: String,
    pub line: LineSql,
    sweep_with_line: String,
    /// `LINE_UNKNOWN`, `LINE_READY` or `LINE_MISSING`.
    line_state: AtomicU8,
    /// The name each of [`Sql::statements`] is prepared under: its text's
    /// hash, so stores of two tables (or two versions) never share a name.
    names: Vec<String>,
}

impl Sql {
    /// `table` is `name` or `schema.name` in lower case (checked by the JS
    /// layer), so it is safe unquoted and means what it means to the docs' store.
    pub fn new(table: &str) -> Sql {
        let sequence = format!("{table}_fencing");
        let channel = table;
        let holds = format!("{table}_holds");
        let base_function = format!("{table}_hold");
        // A channel name is at most 63 bytes (a table name may be 63 with
        // its schema): longer, pg_notify refuses it and LISTEN cuts it short.
        let holds_channel: String = holds.chars().take(63).collect();
        let body = HOLD_FUNCTION
            .replace("{function}", &base_function)
            .replace("{holds}", &holds)
            .replace("{sequence}", &sequence)
            .replace("{channel}", &holds_channel)
            .replace(
                "{max_announced_key}",
                &MAX_ANNOUNCED_HOLD_KEY_BYTES.to_string(),
            );
        // Named after its body: a later version of the store makes a function
        // of its own beside the old one instead of replacing a live object
        // (which needs its owner's rights), and finds it by name alone.
        let function = format!("{base_function}_{}", &name_of(&body)[5..13]);
        let signature =
            format!("{function}(op text, mode text, k text, who text, ttl bigint, lim bigint)");
        // Several processes may start at once: the advisory lock makes one
        // create while the others wait, then find it made. (Each is one
        // simple query: one transaction, rolled back whole if any part fails.)
        let lock_for_create =
            format!("SELECT pg_advisory_xact_lock(hashtext('keel-lock:{table}'));");
        let holds_objects = format!(
            "CREATE TABLE IF NOT EXISTS {holds} (
               kind \"char\" NOT NULL,
               key TEXT NOT NULL,
               owner TEXT NOT NULL,
               expires_at BIGINT NOT NULL,
               PRIMARY KEY (key, kind, owner)
             );
             CREATE OR REPLACE FUNCTION {signature} RETURNS bigint LANGUAGE plpgsql
               AS $fn${body}$fn$;"
        );
        // A bounded batch of expired rows; rows another session is taking
        // over right now are skipped, and the expiry is checked again on
        // the row as it is deleted.
        // (A batch of expired holds of semaphores and read-write keys goes
        // with each batch of expired locks.)
        let sweep = format!(
            "WITH {NOW}, doomed AS (
               SELECT key FROM {table}, now WHERE expires_at <= now.ms
               LIMIT $1 FOR UPDATE OF {table_last} SKIP LOCKED
             ), lapsed AS (
               SELECT key, kind, owner FROM {holds}, now WHERE expires_at <= now.ms
               LIMIT $1 FOR UPDATE OF {holds_last} SKIP LOCKED
             ), lapsed_gone AS (
               DELETE FROM {holds} USING lapsed, now
               WHERE ({holds}.key, {holds}.kind, {holds}.owner) = (lapsed.key, lapsed.kind, lapsed.owner)
                 AND {holds}.expires_at <= now.ms
             )
             DELETE FROM {table} USING doomed, now
             WHERE {table}.key = doomed.key AND {table}.expires_at <= now.ms",
            table_last = table.rsplit('.').next().unwrap_or(table),
            holds_last = holds.rsplit('.').next().unwrap_or(&holds),
        );
        let line = LineSql::new(table, &sequence, NOW, LEASE_MS, CLAIM_MS);
        let line_objects = line.create.clone();
        let mut sql = Sql {
            table: table.to_owned(),
            // Several processes may start at once: the advisory lock makes
            // one create while the others wait, then find it made.
            create: format!(
                "{lock_for_create}
                 CREATE TABLE IF NOT EXISTS {table} (
                   key TEXT PRIMARY KEY,
                   owner TEXT NOT NULL,
                   expires_at BIGINT NOT NULL
                 );
                 CREATE SEQUENCE IF NOT EXISTS {sequence};
                 {holds_objects}
                 {line_objects}"
            ),
            create_holds: format!("{lock_for_create}\n{holds_objects}"),
            create_line: format!("{lock_for_create}\n{line_objects}"),
            exists: format!(
                "SELECT to_regclass('{table}') IS NOT NULL AND to_regclass('{sequence}') IS NOT NULL,
                        to_regclass('{holds}') IS NOT NULL
                    AND to_regprocedure('{function}(text,text,text,text,bigint,bigint)') IS NOT NULL,
                        {}",
                line.exists
            ),
            hold: format!("SELECT {function}($1, $2, $3, $4, $5::bigint, $6::bigint)"),
            holds_channel: holds_channel.clone(),
            // One statement: insert, or take over a row that has expired (or
            // that already holds this owner: an acquire sent again after its
            // reply was lost). The token is drawn after the row is ours and
            // while its row lock is held, so a later holder of the key, who
            // must wait for that lock, always draws a larger one.
            acquire: format!(
                "WITH {NOW}, taken AS (
                   INSERT INTO {table} AS held (key, owner, expires_at)
                   SELECT $1::text, $2::text, now.ms + $3::bigint FROM now
                   ON CONFLICT (key) DO UPDATE
                     SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
                     WHERE held.expires_at <= EXCLUDED.expires_at - $3::bigint
                        OR held.owner = EXCLUDED.owner
                   RETURNING 1
                 )
                 SELECT nextval('{sequence}') FROM taken"
            ),
            // The owner's row goes whether or not it expired (nothing is left
            // behind); the answer is whether it was still held.
            release: format!(
                "WITH {NOW}, gone AS (
                   DELETE FROM {table} WHERE key = $1 AND owner = $2 RETURNING expires_at
                 )
                 SELECT gone.expires_at > now.ms AS held,
                        CASE WHEN gone.expires_at > now.ms AND octet_length($1::text) <= {MAX_ANNOUNCED_KEY_BYTES}
                             THEN pg_notify('{channel}', $1) END
                 FROM gone, now"
            ),
            // (Keeping the line's mark: someone may wait.)
            extend: format!(
                "WITH {NOW}
                 UPDATE {table} SET expires_at = {} | (expires_at & 1) FROM now
                 WHERE key = $1 AND owner = $2 AND expires_at > now.ms",
                even("now.ms + $3::bigint")
            ),
            is_locked: format!(
                "WITH {NOW}
                 SELECT EXISTS (SELECT 1 FROM {table}, now WHERE key = $1 AND expires_at > now.ms)"
            ),
            // Told 1 ms short, the line's rounding to the even ms undone.
            remaining_time: format!(
                "WITH {NOW}
                 SELECT greatest((expires_at & ~1) - 1 - now.ms, 1)
                 FROM {table}, now WHERE key = $1 AND expires_at > now.ms"
            ),
            holds: format!(
                "WITH {NOW}
                 SELECT EXISTS (
                   SELECT 1 FROM {table}, now WHERE key = $1 AND owner = $2 AND expires_at > now.ms
                 )"
            ),
            // Where the line's objects are there, a batch of lapsed places
            // goes with each batch too.
            sweep_with_line: sweep.replacen(
                "WITH ",
                &format!("WITH places_gone AS ({}), ", line.sweep),
                1,
            ),
            sweep,
            line,
            line_state: AtomicU8::new(LINE_UNKNOWN),
            listen: format!("LISTEN \"{channel}\"; LISTEN \"{holds_channel}\""),
            names: Vec::new(),
        };
        sql.names = sql.statements().iter().map(|text| name_of(text)).collect();
        sql
    }

    /// The statements an operation sends, in the order of [`Statement`].
    pub fn statements(&self) -> [&str; 14] {
        [
            &self.acquire,
            &self.release,
            &self.extend,
            &self.is_locked,
            &self.remaining_time,
            &self.holds,
            &self.sweep,
            &self.hold,
            &self.line.acquire,
            &self.line.release,
            &self.line.claim,
            &self.line.leave,
            &self.sweep_with_line,
            END_SESSION,
        ]
    }

    /// Whether plain locks use the line: the database has its objects.
    pub fn line_ready(&self) -> bool {
        self.line_state.load(Ordering::Acquire) == LINE_READY
    }

    /// Whether the database was found without the line's objects (then
    /// for good: the line's statements are no longer even planned).
    pub fn line_missing(&self) -> bool {
        self.line_state.load(Ordering::Acquire) == LINE_MISSING
    }

    /// What a connection found as it opened: whether the line's objects
    /// are there (made, if they were missing and it could). Missing once
    /// is missing for good (`LINE_MISSING`).
    pub fn found_line(&self, there: bool) {
        if !there {
            self.line_state.store(LINE_MISSING, Ordering::Release);
            return;
        }
        let _ = self.line_state.compare_exchange(
            LINE_UNKNOWN,
            LINE_READY,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// The name statement `index` of [`Sql::statements`] is prepared under.
    pub fn statement_name(&self, index: usize) -> &str {
        self.names.get(index).map_or("", String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::Sql;

    /// The hold function is named after its body: a store whose body
    /// differs makes a new function, which a database whose objects were
    /// made ahead of time (`schema()`, run by someone with CREATE rights)
    /// lacks. Change this name only on purpose, saying so in the docs.
    #[test]
    fn the_hold_function_keeps_its_name_across_versions() {
        let sql = Sql::new("t");
        assert!(
            sql.hold.starts_with("SELECT t_hold_ec20a0a8("),
            "{}",
            sql.hold
        );
        assert!(sql.create.contains("t_hold_ec20a0a8(op text"));
    }
}
