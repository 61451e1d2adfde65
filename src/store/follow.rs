//! What the release listeners of the server stores share: the callback a
//! heard release is reported to, and a pause before connecting again that
//! still takes in what waiters ask for meanwhile.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

/// What a heard release was of: a plain lock, a semaphore permit, a
/// read-write hold (their waiters wait apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Released {
    Lock,
    Semaphore,
    ReadWrite,
}

/// Called with a key (as the lock names it) whose release another client
/// announced; it wakes that key's waiters on the JS thread.
pub type OnReleased = Arc<dyn Fn(Released, String) + Send + Sync>;

/// Called with a warning's text, for the JS layer to emit as a process
/// warning (a listener that hears nothing, say).
pub type OnWarning = Arc<dyn Fn(String) + Send + Sync>;

/// How long a listener waits before trying an unreachable server again.
pub const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Wait [`RETRY_PAUSE`], handing every request that arrives meanwhile to
/// `take`. `false` when the inbox closed (the store is gone: stop).
pub async fn pause_taking<W>(
    inbox: &mut mpsc::UnboundedReceiver<W>,
    mut take: impl FnMut(W),
) -> bool {
    let pause = tokio::time::sleep(RETRY_PAUSE);
    tokio::pin!(pause);
    loop {
        tokio::select! {
            _ = &mut pause => return true,
            request = inbox.recv() => match request {
                Some(request) => take(request),
                None => return false,
            },
        }
    }
}
