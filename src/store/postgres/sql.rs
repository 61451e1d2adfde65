//! The SQL, on one page. Every time is the database server's: `now` is
//! its clock in epoch milliseconds, read once per statement, and every
//! comparison and every new `expires_at` is made from it in SQL, so no
//! client's clock decides when a lock expires.
//!
//! The table is the docs' database store's (`key`, `owner`, `expires_at` in
//! epoch ms), so clients of either exclude each other. Beside it, one
//! sequence gives fencing tokens, and releases are announced with
//! `pg_notify` on a channel named after the table.

/// The server's clock, epoch milliseconds, as a one-row `now(ms)`.
const NOW: &str = "now AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms)";

/// A `pg_notify` payload must stay under 8000 bytes: a longer key is not
/// announced (its waiters find the release at their next poll).
const MAX_ANNOUNCED_KEY_BYTES: usize = 7_999;

/// The statements for one table, made once per store.
pub(super) struct Sql {
    pub table: String,
    pub sequence: String,
    pub create: String,
    pub acquire: String,
    pub release: String,
    pub extend: String,
    pub is_locked: String,
    pub remaining_time: String,
    pub holds: String,
    pub sweep: String,
    pub listen: String,
}

impl Sql {
    /// `table` is `name` or `schema.name` in lower case (checked by the JS
    /// layer), so it is safe unquoted and means what it means to the docs' store.
    pub fn new(table: &str) -> Sql {
        let sequence = format!("{table}_fencing");
        let channel = table;
        Sql {
            table: table.to_owned(),
            sequence: sequence.clone(),
            // Several processes may start at once: the advisory lock makes
            // one create while the others wait, then find it made.
            create: format!(
                "BEGIN;
                 SELECT pg_advisory_xact_lock(hashtext('keel-lock:{table}'));
                 CREATE TABLE IF NOT EXISTS {table} (
                   key TEXT PRIMARY KEY,
                   owner TEXT NOT NULL,
                   expires_at BIGINT NOT NULL
                 );
                 CREATE SEQUENCE IF NOT EXISTS {sequence};
                 COMMIT"
            ),
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
            extend: format!(
                "WITH {NOW}
                 UPDATE {table} SET expires_at = now.ms + $3 FROM now
                 WHERE key = $1 AND owner = $2 AND expires_at > now.ms"
            ),
            is_locked: format!(
                "WITH {NOW}
                 SELECT EXISTS (SELECT 1 FROM {table}, now WHERE key = $1 AND expires_at > now.ms)"
            ),
            remaining_time: format!(
                "WITH {NOW}
                 SELECT expires_at - now.ms FROM {table}, now WHERE key = $1 AND expires_at > now.ms"
            ),
            holds: format!(
                "WITH {NOW}
                 SELECT EXISTS (
                   SELECT 1 FROM {table}, now WHERE key = $1 AND owner = $2 AND expires_at > now.ms
                 )"
            ),
            // A bounded batch of expired rows; rows another session is taking
            // over right now are skipped, and the expiry is checked again on
            // the row as it is deleted.
            sweep: format!(
                "WITH {NOW}, doomed AS (
                   SELECT key FROM {table}, now WHERE expires_at <= now.ms
                   LIMIT $1 FOR UPDATE OF {table_last} SKIP LOCKED
                 )
                 DELETE FROM {table} USING doomed, now
                 WHERE {table}.key = doomed.key AND {table}.expires_at <= now.ms",
                table_last = table.rsplit('.').next().unwrap_or(table)
            ),
            listen: format!("LISTEN \"{channel}\""),
        }
    }
}
