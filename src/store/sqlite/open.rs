//! Opening the file: the checks that make a bad path fail at once, naming
//! it (and never change a file that is not the store's), the settings every
//! connection needs, the store's tables, and the holds of an earlier boot
//! let go.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::busy;
use super::checkpoint::Checkpoints;
use super::clock::{boot_id, now_ms};
use super::errors::failure;
use super::options::SqliteOptions;
use super::place::unfit;
use super::sql::Sql;
use crate::store::{BackendError, Code, StoreError};

/// How far the fencing counter jumps when the holds of an earlier boot are
/// let go. The file is written without waiting for the disk (WAL with
/// `synchronous=NORMAL`), so a power cut may take back the last tokens
/// given; they were fewer than this (a checkpoint syncs every thousand
/// pages or so), so no token is ever given twice.
const TOKENS_A_POWER_CUT_MAY_TAKE_BACK: i64 = 1 << 32;

/// Statements each connection keeps prepared (every one the store uses).
const PREPARED: usize = 48;

/// One connection to the file, with the store's statements.
pub(super) struct Db {
    pub connection: Connection,
    pub sql: Sql,
    /// When this connection last noted the clock as `seen` (at most once a
    /// second: see `ops::noted`).
    pub noted_at: i64,
}

impl Db {
    /// Whether the file this connection has open is no longer the one at
    /// its path (deleted, or replaced by a rename): the processes that open
    /// the path now share another file.
    pub fn moved(&self) -> bool {
        let mut moved: std::ffi::c_int = 0;
        // SAFETY: the handle is this connection's and open for the call;
        // the database name is NUL-terminated; HAS_MOVED writes one int,
        // to `moved`, which lives through the call.
        let status = unsafe {
            rusqlite::ffi::sqlite3_file_control(
                self.connection.handle(),
                c"main".as_ptr(),
                rusqlite::ffi::SQLITE_FCNTL_HAS_MOVED,
                (&mut moved as *mut std::ffi::c_int).cast(),
            )
        };
        status == rusqlite::ffi::SQLITE_OK && moved != 0
    }
}

/// The page size of a file the store makes, in bytes. Every commit writes
/// its changed pages to the log, checksummed, so smaller pages make a lock's
/// take and release cheaper (a cycle measured 1.3x faster than at SQLite's
/// 4096, `bench/RUNS.md`); at 1024 a row with a key of up to about 170
/// bytes still fits on its page (a longer key spills into overflow pages:
/// correct, slower).
const PAGE_SIZE: u32 = 1024;

/// Open `options.path` as a store's file: made if missing, refused with
/// the path named if its folder is missing, it is not a SQLite database,
/// or it cannot be written.
pub(super) fn open(options: &SqliteOptions) -> Result<Db, StoreError> {
    let path = options.path.as_path();
    if let Some(why) = unfit(path) {
        return Err(refused(path, &why));
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let fail = |e: rusqlite::Error| failure("open", path, &e);
    let mut connection = Connection::open_with_flags(path, flags).map_err(fail)?;
    if connection.is_readonly(rusqlite::MAIN_DB).map_err(fail)? {
        return Err(refused(path, "the file is read-only here"));
    }
    connection
        .busy_handler(Some(busy::try_again))
        .map_err(fail)?;
    busy::start(options.command_timeout);
    // A new file's pages (an existing one keeps its own; nothing is read or
    // written here).
    connection
        .execute_batch(&format!("PRAGMA page_size = {PAGE_SIZE}"))
        .map_err(fail)?;
    // Read before anything is written: a file that is not a database fails
    // here, untouched.
    let mode: String =
        busy::retried(|| connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)))
            .map_err(fail)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(refused(
            path,
            &format!("SQLite kept the journal mode {mode:?} instead of WAL"),
        ));
    }
    // The first commit waits for the disk: the fencing counter's jump
    // after a reboot must outlive a power cut, or a token could be given
    // twice. Every later one does not (WAL's NORMAL: a power cut may take
    // back the last commits, never corrupt the file).
    connection
        .execute_batch("PRAGMA synchronous = FULL")
        .map_err(fail)?;
    connection.set_prepared_statement_cache_capacity(PREPARED);
    let checkpoints = Checkpoints::start(path.to_path_buf())
        .map_err(|e| refused(path, &format!("no thread to checkpoint it: {e}")))?;
    connection
        .wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages| {
            if checkpoints.after_commit(pages) {
                // The commit is done whatever this answers: an error here
                // would fail the operation that committed (another
                // connection checkpointing at once answers "busy"). A
                // checkpoint not made is made by a later commit.
                let _ = wal.checkpoint_v2(rusqlite::wal::CheckpointMode::PASSIVE);
            }
            Ok(())
        }))
        .map_err(fail)?;
    let mut db = Db {
        connection,
        sql: Sql::new(&options.table),
        noted_at: i64::MIN,
    };
    settle_the_boot(&mut db).map_err(fail)?;
    db.connection
        .execute_batch("PRAGMA synchronous = NORMAL")
        .map_err(fail)?;
    Ok(db)
}

fn refused(path: &Path, what: &str) -> StoreError {
    StoreError::Backend(BackendError {
        code: Code::StoreSqlite,
        message: format!("new SqliteLockStore: {}: {what}", path.display()),
    })
}

/// Make the tables if missing and, if the holds were taken in another boot
/// of the machine (its clock has started again since), let them all go and
/// move every fencing token (the keys' own, the floor and the counter) past
/// any a power cut took back.
fn settle_the_boot(db: &mut Db) -> rusqlite::Result<()> {
    let Db {
        connection, sql, ..
    } = db;
    let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(&sql.create)?;
    let now = now_ms();
    let boot = boot_id().unwrap_or_default();
    let stored_boot: String = tx.query_row(&sql.state_read, ["boot"], |row| row.get(0))?;
    let seen: i64 = tx.query_row(&sql.state_read, ["seen"], |row| row.get(0))?;
    let another_boot = (!stored_boot.is_empty() && stored_boot != boot) || now < seen;
    if another_boot {
        tx.execute(&sql.clear_locks, [TOKENS_A_POWER_CUT_MAY_TAKE_BACK])?;
        tx.execute(&sql.clear_holds, [])?;
        tx.execute(&sql.clear_ears, [])?;
        tx.execute(&sql.clear_line, [])?;
        for counter in ["fencing", "floor"] {
            let token: i64 = tx.query_row(&sql.state_read, [counter], |row| row.get(0))?;
            let jumped = token.saturating_add(TOKENS_A_POWER_CUT_MAY_TAKE_BACK);
            tx.execute(&sql.state_write, rusqlite::params![counter, jumped])?;
        }
        tx.execute(&sql.state_write, rusqlite::params!["seen", now])?;
    }
    if stored_boot != boot {
        tx.execute(&sql.state_write, rusqlite::params!["boot", boot])?;
    }
    tx.commit()
}
