//! The SQL, on one page. Every time is the server's: `NOW_MS` is its clock
//! in epoch milliseconds (read once per statement; sessions run in UTC, so
//! no daylight-saving hour is read twice), and every comparison and every
//! new `expires_at` is made from it in SQL, so no client's clock decides
//! when a lock expires.
//!
//! Keys are exact. A row is found by `id`, the SHA-256 of the key's UTF-8
//! bytes (a key of any length fits an index, and no collation folds case,
//! accents or trailing spaces together); the key itself is kept beside it
//! as bytes. Owners are compared as bytes too.
//!
//! Fencing tokens are the server's clock in microseconds, or one more than
//! the key's last token if that is larger, kept in the key's row: they grow
//! per key across processes and server restarts. A released or lapsed row
//! stays an hour (`TOKEN_MEMORY_MS`) before the sweep deletes it, so only a
//! server clock stepped back by more than that, over a key unused that long,
//! could hand out a smaller token.
//!
//! Semaphores and read-write locks keep their holds in `<table>_holds` (kind
//! `s` a permit, `r` a reader, `w` the writer, `m` a waiting writer's mark)
//! and their tokens in `<table>_keys`, whose row for the key every operation
//! locks first, so one key's operations run one at a time; each operation
//! is one CALL of the procedure `<table>_hold_<hash>` (`holds_sql`).
//!
//! A plain lock's waiters wait in `<table>_line` (`line_sql`): a held row's
//! expiry is kept even, and made odd while anyone waits.

use super::hashes::hash_hex;
use super::holds_sql::HOLD_PROCEDURE;
use super::line_sql::{even, LineSql};
use super::sweep::Sweep;

/// The server's clock, epoch milliseconds, when the statement started.
pub(super) const NOW_MS: &str = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";
/// The same, in microseconds: a fresh key's first token.
pub(super) const NOW_US: &str = "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)";
/// How long a row outlives its hold, so its key's next token still grows
/// from it (see the module doc).
pub(super) const TOKEN_MEMORY_MS: i64 = 3_600_000;

/// The statements for one table, made once per store.
pub struct Sql {
    /// The lock table, as the store was given it.
    pub table: String,
    /// The three tables the store uses, one statement each.
    pub create_tables: [String; 3],
    /// The procedure it uses ([`Sql::procedure`]).
    pub create_procedure: String,
    /// The line's table and procedures.
    pub line: LineSql,
    /// Counts the store's objects in the database.
    pub exists: String,
    /// The procedure's name (`<table>_hold_<hash of its body>`).
    pub procedure: String,
    /// The text of each [`Statement`], in its order.
    pub prepared: Vec<String>,
    pub holds: String,
    pub keys: String,
}

impl Sql {
    /// `table` is `name` or `db.name`, lower case (checked by the JS layer),
    /// so it is safe unquoted.
    pub fn new(table: &str) -> Sql {
        let holds = format!("{table}_holds");
        let keys = format!("{table}_keys");
        let (schema, name) = match table.split_once('.') {
            Some((schema, name)) => (format!("'{schema}'"), name),
            None => ("DATABASE()".to_owned(), table),
        };
        // The body names its tables without their database: a routine's
        // statements run in the database it belongs to, which is the
        // tables'. So the body, and the name, are the same whether or not
        // the table was given with its database.
        let body = HOLD_PROCEDURE
            .replace("{holds}", &format!("{name}_holds"))
            .replace("{keys}", &format!("{name}_keys"));
        // Named after its body: a later version of the store makes a
        // procedure of its own beside the old one instead of replacing a live
        // object (which needs rights an application may not have).
        let procedure_name = format!(
            "{name}_hold_{}",
            hash_hex(body.as_bytes())[..8].to_ascii_lowercase()
        );
        let procedure = match table.split_once('.') {
            Some((database, _)) => format!("{database}.{procedure_name}"),
            None => procedure_name.clone(),
        };
        let create_tables = [
            format!(
                "CREATE TABLE IF NOT EXISTS {table} (
                   id BINARY(32) NOT NULL PRIMARY KEY,
                   k MEDIUMBLOB NOT NULL,
                   owner BLOB NOT NULL,
                   expires_at BIGINT NOT NULL,
                   token BIGINT NOT NULL
                 ) ENGINE=InnoDB"
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {holds} (
                   id BINARY(32) NOT NULL,
                   kind BINARY(1) NOT NULL,
                   oid BINARY(32) NOT NULL,
                   owner BLOB NOT NULL,
                   expires_at BIGINT NOT NULL,
                   PRIMARY KEY (id, kind, oid)
                 ) ENGINE=InnoDB"
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {keys} (
                   id BINARY(32) NOT NULL,
                   family BINARY(1) NOT NULL,
                   k MEDIUMBLOB NOT NULL,
                   token BIGINT NOT NULL,
                   PRIMARY KEY (id, family)
                 ) ENGINE=InnoDB"
            ),
        ];
        // IF NOT EXISTS where the server has it, in comments only that
        // server runs: MySQL 8.0.29 and later (`/*!80029`, which MariaDB
        // skips, as it does all MySQL versions from 5.7 on), MariaDB 10.1.3
        // and later (`/*M!`, a plain comment to MySQL). Elsewhere a second
        // run finds it made: error 1304.
        let create_procedure = format!(
            "CREATE PROCEDURE /*!80029 IF NOT EXISTS */ /*M!100103 IF NOT EXISTS */ {procedure}(
               op VARCHAR(8), mode VARCHAR(8), h BINARY(32), key_bytes MEDIUMBLOB,
               o BINARY(32), who BLOB, ttl BIGINT, lim BIGINT
             ) MODIFIES SQL DATA SQL SECURITY INVOKER{body}"
        );
        let line = LineSql::new(table, name);
        let routine_names = [procedure.as_str(), &line.names[0], &line.names[1]]
            .map(|named| format!("'{}'", named.rsplit('.').next().unwrap_or(named)))
            .join(", ");
        let exists = format!(
            "SELECT (SELECT COUNT(*) FROM information_schema.tables
                     WHERE table_schema = {schema}
                       AND table_name IN ('{name}', '{name}_holds', '{name}_keys', '{name}_line'))
                  + (SELECT COUNT(*) FROM information_schema.routines
                     WHERE routine_schema = {schema} AND routine_name IN ({routine_names})
                       AND routine_type = 'PROCEDURE')"
        );
        let mut sql = Sql {
            table: table.to_owned(),
            create_tables,
            create_procedure,
            line,
            exists,
            procedure,
            prepared: Vec::new(),
            holds,
            keys,
        };
        sql.prepared = Statement::ALL.map(|s| sql.prepared_text(s)).to_vec();
        sql
    }

    /// How many objects [`Sql::exists`] counts when all are there.
    pub const OBJECTS: usize = 7;

    /// Every object's statement, the procedures last.
    pub fn creates(&self) -> impl Iterator<Item = &str> {
        self.create_tables
            .iter()
            .chain([&self.line.create_table])
            .map(String::as_str)
            .chain(self.procedures())
    }

    fn procedures(&self) -> impl Iterator<Item = &str> {
        [&self.create_procedure]
            .into_iter()
            .chain(&self.line.create_procedures)
            .map(String::as_str)
    }

    /// What `schema()` prints: every object's statement, for the `mysql` or
    /// `mariadb` client (or any tool that reads its `DELIMITER` lines: the
    /// procedure's body holds `;`), safe to run again.
    pub fn script(&self) -> String {
        let mut script = String::new();
        for table in self.create_tables.iter().chain([&self.line.create_table]) {
            script.push_str(table);
            script.push_str(";\n\n");
        }
        script.push_str("DELIMITER //\n");
        for procedure in self.procedures() {
            script.push_str(procedure);
            script.push_str(" //\n");
        }
        script.push_str("DELIMITER ;\n");
        script
    }

    /// What each new connection sets first: UTC (see the module doc), the
    /// SQL mode the statements are written for whatever the server's
    /// default (strict: nothing is cut short to fit), each statement its
    /// own transaction (a server that opens sessions with autocommit off
    /// would leave a lock uncommitted, and lose it with the connection),
    /// READ COMMITTED (a
    /// statement waiting for a row reads it as committed, and a sweep skips
    /// the rows it does not delete), and how long a statement waits for a
    /// row another session holds.
    pub fn session_settings(&self, lock_wait_s: u64) -> Vec<String> {
        vec![
            format!(
                "SET time_zone = '+00:00', sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', \
                 autocommit = 1, completion_type = 0, innodb_lock_wait_timeout = {}",
                lock_wait_s.max(1)
            ),
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED".to_owned(),
        ]
    }

    /// The text of `statement`, as each connection prepares it: keys,
    /// owners and TTLs are its parameters (`?`), bytes and numbers.
    fn prepared_text(&self, statement: Statement) -> String {
        let (table, procedure) = (&self.table, &self.procedure);
        let even_ttl = even(&format!("{NOW_MS} + ?"));
        match statement {
            // Take a plain lock nobody waits for (its row's expiry even):
            // insert its row, or take over a row that lapsed (or that already
            // names this owner: an acquire sent again after its answer was
            // lost). Where anyone waits, the line's procedure decides. Every
            // branch sets `LAST_INSERT_ID`: the new token when the lock was
            // taken, 0 when it was not, which the OK tells (assignments run
            // left to right, so `owner` and `expires_at` follow the token's).
            Statement::Acquire => format!(
                "INSERT INTO {table} (id, k, owner, expires_at, token)
                 VALUES (?, ?, ?, {even_ttl}, LAST_INSERT_ID({NOW_US}))
                 ON DUPLICATE KEY UPDATE
                   token = IF(expires_at & 1 = 0 AND (expires_at <= {NOW_MS} OR owner = VALUES(owner)),
                              LAST_INSERT_ID(GREATEST(token + 1, {NOW_US})),
                              token + LAST_INSERT_ID(0)),
                   owner = IF(LAST_INSERT_ID() > 0, VALUES(owner), owner),
                   expires_at = IF(LAST_INSERT_ID() > 0, VALUES(expires_at), expires_at)"
            ),
            // Give back a live lock: its row stays, free (its expiry in the
            // past, even or odd as it was), keeping its token and its mark,
            // which the OK tells (`LAST_INSERT_ID`, 1 when marked: the line's
            // procedure then hands the lock on).
            Statement::Release => format!(
                "UPDATE {table} SET owner = '',
                   expires_at = {NOW_MS} - ({NOW_MS} & 1) - 2 + LAST_INSERT_ID(expires_at & 1)
                 WHERE id = ? AND owner = ? AND expires_at > {NOW_MS}"
            ),
            // (Its mark kept.)
            Statement::Extend => format!(
                "UPDATE {table} SET expires_at = {even_ttl} + (expires_at & 1)
                 WHERE id = ? AND owner = ? AND expires_at > {NOW_MS}"
            ),
            Statement::HeldBy => format!(
                "SELECT EXISTS (SELECT 1 FROM {table} WHERE id = ? AND owner = ? AND expires_at > {NOW_MS})"
            ),
            // Milliseconds left, without the waiter's mark and told 1 ms
            // short (never less than 1): an expiry rounded up to the even
            // millisecond then marked lies up to 2 ms past its window, and a
            // remaining time never tells more than the window given.
            Statement::Remaining => format!(
                "SELECT GREATEST(expires_at DIV 2 * 2 - 1 - {NOW_MS}, 1) FROM {table} WHERE id = ? AND expires_at > {NOW_MS}"
            ),
            Statement::IsLocked => format!(
                "SELECT EXISTS (SELECT 1 FROM {table} WHERE id = ? AND expires_at > {NOW_MS})"
            ),
            // One operation on a semaphore or read-write key.
            Statement::Hold => format!("CALL {procedure}(?, ?, ?, ?, ?, ?, ?, ?)"),
            // A step of the line (`line_sql`).
            Statement::Line => self.line.call.clone(),
        }
    }

    /// The sweep, one part per table: a batch of plain rows an hour past
    /// their expiry, of lapsed places in line, of lapsed holds, and of key
    /// rows no hold uses whose last token is an hour old.
    pub fn sweep(&self) -> [Sweep; 4] {
        let (table, holds, keys) = (&self.table, &self.holds, &self.keys);
        [
            Sweep::new(
                &format!("{table}_line"),
                &["id", "process"],
                format!("lapses_at <= {NOW_MS}"),
            ),
            Sweep::new(
                table,
                &["id"],
                format!("expires_at <= {NOW_MS} - {TOKEN_MEMORY_MS}"),
            ),
            Sweep::new(
                holds,
                &["id", "kind", "oid"],
                format!("expires_at <= {NOW_MS}"),
            ),
            Sweep::new(
                keys,
                &["id", "family"],
                format!(
                    "token < {NOW_US} - {TOKEN_MEMORY_MS} * 1000
                     AND NOT EXISTS (SELECT 1 FROM {holds} WHERE {holds}.id = {keys}.id)"
                ),
            ),
        ]
    }
}

/// The statements every connection prepares, in this order (a request
/// names one by its place: `Statement::Hold as usize`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Statement {
    Acquire,
    Release,
    Extend,
    HeldBy,
    Remaining,
    IsLocked,
    Hold,
    /// A step of the line.
    Line,
}

impl Statement {
    pub const ALL: [Statement; 8] = [
        Statement::Acquire,
        Statement::Release,
        Statement::Extend,
        Statement::HeldBy,
        Statement::Remaining,
        Statement::IsLocked,
        Statement::Hold,
        Statement::Line,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_name_the_table_and_its_procedures() {
        let sql = Sql::new("app.keel_locks");
        assert!(sql.prepared[Statement::Acquire as usize]
            .starts_with("INSERT INTO app.keel_locks (id, k, owner, expires_at, token)"));
        assert!(sql.prepared[Statement::Line as usize].starts_with("CALL app.keel_locks_line_"));
        assert!(sql.prepared[Statement::Hold as usize].starts_with("CALL app.keel_locks_hold_"));
        assert!(sql.exists.contains("table_schema = 'app'"));
        assert!(sql.exists.contains("'keel_locks_holds'"));
        assert!(sql.procedure.starts_with("app.keel_locks_hold_"));
    }

    #[test]
    fn a_sweep_reads_then_deletes_by_key() {
        let sql = Sql::new("app.keel_locks");
        let [_, _, holds, _] = sql.sweep();
        assert!(holds
            .select
            .starts_with("SELECT id, kind, oid FROM app.keel_locks_holds WHERE"));
        let found = vec![vec![Some(vec![1]), Some(b"s".to_vec()), Some(vec![0xAB])]];
        let delete = holds.delete(&found).unwrap_or_default();
        assert!(delete.starts_with(
            "DELETE FROM app.keel_locks_holds WHERE (id, kind, oid) IN ((X'01', X'73', X'AB')) AND expires_at <="
        ));
        assert_eq!(holds.delete(&[]), None);
    }

    /// The procedure is named after its body: a store whose body differs
    /// makes a new one, which a database whose objects were made ahead of
    /// time (`schema()`, run by someone with CREATE rights) lacks. Change
    /// this name only on purpose, saying so in the docs.
    #[test]
    fn the_hold_procedure_keeps_its_name_across_versions() {
        let sql = Sql::new("t");
        assert_eq!(sql.procedure, "t_hold_df36c411");
        // Its database named or not, the same procedure.
        assert_eq!(Sql::new("app.t").procedure, "app.t_hold_df36c411");
    }
}
