//! Waiting for another connection's write to the file to end. SQLite's own
//! busy timeout sleeps a millisecond and more between tries; a lock's
//! writes hold the file for microseconds, so this handler tries again after
//! a yield, then after short sleeps, until the operation's deadline.

use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    /// When the operation running on this thread stops waiting for the file.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The operation this thread starts now waits for the file at most `timeout`.
pub(super) fn start(timeout: Duration) {
    DEADLINE.with(|deadline| deadline.set(Instant::now().checked_add(timeout)));
}

/// SQLite's busy handler: whether to try again (`tries` so far).
pub(super) fn try_again(tries: i32) -> bool {
    if DEADLINE
        .with(Cell::get)
        .is_some_and(|at| Instant::now() >= at)
    {
        return false;
    }
    match tries {
        0..=3 => std::thread::yield_now(),
        4..=200 => std::thread::sleep(Duration::from_micros(50)),
        _ => std::thread::sleep(Duration::from_millis(1)),
    }
    true
}

/// `step`, tried again while it answers "busy" without SQLite having asked
/// the busy handler (a change of journal mode while another connection
/// makes the same file's: each needs the file to itself for a moment), as
/// that handler would, until the operation's deadline.
pub(super) fn retried<T>(mut step: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let mut tries = 0;
    loop {
        match step() {
            Err(e) if is_busy(&e) && try_again(tries) => tries = tries.saturating_add(1),
            outcome => return outcome,
        }
    }
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}
