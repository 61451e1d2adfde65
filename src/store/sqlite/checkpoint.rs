//! Checkpoints away from the caller's thread. A WAL checkpoint copies the
//! log's pages into the database and waits for the disk (twice), which
//! SQLite would do inside whichever commit took the log past its limit: on
//! the JS thread, a pause of milliseconds every few hundred locks. Instead
//! the store's connection tells a thread of its own, which checkpoints on a
//! connection of its own (`PASSIVE`: it never makes a writer wait). Past
//! sixteen times the limit, a commit checkpoints the last pages itself, so
//! that the log starts over even while commits never stop.

use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::time::Duration;

use rusqlite::wal::CheckpointMode;
use rusqlite::{Connection, OpenFlags};

/// Log pages past which a checkpoint is asked for (SQLite's own default).
const PAGES: i32 = 1_000;
/// Log pages past which the commit checkpoints itself, as SQLite would. The
/// log starts over only once every page in it was copied, and under a
/// steady stream of commits the thread never catches up (each commit adds
/// a page while it copies): the log grew by two pages a lock cycle, about
/// 40 MB a second in a tight loop. The commit's own checkpoint finds the
/// thread's work done but for the last pages, and the log then starts over.
/// Its waits for the disk on the JS thread slowed a tight loop of lock cycles
/// measurably at 4,000 pages and not at 16,000, side by side (where the
/// log stays under 16 MB with 1024-byte pages).
pub(super) const OWN_PAGES: i32 = 16 * PAGES;
/// A checkpoint that could not empty the log (a reader holds it) is tried
/// again no sooner than this.
const AGAIN_AFTER: Duration = Duration::from_millis(20);

/// The store's side: asks for a checkpoint; the thread ends when it drops.
pub(super) struct Checkpoints(SyncSender<()>);

impl Checkpoints {
    /// The thread, checkpointing the file at `path`.
    pub fn start(path: PathBuf) -> std::io::Result<Checkpoints> {
        let (ask, asked) = sync_channel(1);
        std::thread::Builder::new()
            .name("keel-sqlite-checkpoint".to_owned())
            .spawn(move || checkpoint_when_asked(&path, &asked))?;
        Ok(Checkpoints(ask))
    }

    /// What the connection's WAL hook does after each commit, with the
    /// log's size in pages: past the limit, one request (more wait behind
    /// the one pending). True when the commit checkpoints itself: the log
    /// is past [`OWN_PAGES`], or the thread is gone (it could not open the
    /// file).
    pub fn after_commit(&self, pages: i32) -> bool {
        pages >= OWN_PAGES
            || (pages >= PAGES
                && matches!(self.0.try_send(()), Err(TrySendError::Disconnected(()))))
    }
}

fn checkpoint_when_asked(path: &PathBuf, asked: &Receiver<()>) {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let Ok(connection) = Connection::open_with_flags(path, flags) else {
        return;
    };
    // This connection never writes, so never checkpoints by itself either.
    while asked.recv().is_ok() {
        let _ = connection.wal_checkpoint_v2(Some(rusqlite::MAIN_DB), CheckpointMode::PASSIVE);
        std::thread::sleep(AGAIN_AFTER);
    }
}
