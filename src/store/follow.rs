//! What the release listeners of the server stores share: the callback a
//! heard release is reported to, a store's side of its listener (started on
//! first use, let go when the store closes), and a pause before connecting
//! again that still takes in what waiters ask for meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::HoldKind;

/// What a heard release was of: a plain lock, a semaphore permit, a
/// read-write hold (their waiters wait apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Released {
    Lock,
    Semaphore,
    ReadWrite,
    /// A plain lock handed over to this process from the store's line: the
    /// text is [`crate::store::line::told`]'s.
    Handed,
}

impl Released {
    /// Whose release a waiter in `hold` waits to hear of (a plain lock's
    /// hand-over is told apart by the store that makes it).
    pub fn of(hold: HoldKind) -> Self {
        match hold {
            HoldKind::Lock => Released::Lock,
            HoldKind::Permit { .. } => Released::Semaphore,
            HoldKind::Read | HoldKind::Write => Released::ReadWrite,
        }
    }
}

/// Called with a key (as the lock names it) whose release another client
/// announced; it wakes that key's waiters on the JS thread.
pub type OnReleased = Arc<dyn Fn(Released, String) + Send + Sync>;

/// Called with a warning's text, for the JS layer to emit as a process
/// warning (a listener that hears nothing, say).
pub type OnWarning = Arc<dyn Fn(String) + Send + Sync>;

/// A store's side of its release listener: the callback heard releases go
/// to, and the listener task's inbox once it runs. After `close()` nothing
/// starts: the inbox is dropped (the task ends) and the callback let go (it
/// refers to the JS store, which can then be collected).
pub struct Follower<W> {
    state: Mutex<Following<W>>,
}

struct Following<W> {
    on_released: Option<OnReleased>,
    inbox: Option<mpsc::UnboundedSender<W>>,
}

impl<W: Send + 'static> Follower<W> {
    /// Without a callback there is nothing to report to: nothing starts.
    pub fn new(on_released: Option<OnReleased>) -> Self {
        Follower {
            state: Mutex::new(Following {
                on_released,
                inbox: None,
            }),
        }
    }

    /// Hand `request` to the listener, made by `start` first if none runs
    /// yet: the task `start` makes is returned, for the caller to run on
    /// Tokio. None once closed.
    pub fn follow<T>(
        &self, request: W, start: impl FnOnce(mpsc::UnboundedReceiver<W>, OnReleased) -> T,
    ) -> Option<T> {
        let mut state = self.state.lock().ok()?;
        let on_released = state.on_released.clone()?;
        let mut task = None;
        let inbox = state.inbox.get_or_insert_with(|| {
            let (sender, inbox) = mpsc::unbounded_channel();
            task = Some(start(inbox, on_released));
            sender
        });
        let _ = inbox.send(request);
        task
    }

    /// Report `text` as heard (a hand-over the store learned of itself, in
    /// a reply): nothing once closed.
    pub fn report(&self, released: Released, text: String) {
        let on_released = self
            .state
            .lock()
            .ok()
            .and_then(|state| state.on_released.clone());
        if let Some(on_released) = on_released {
            on_released(released, text);
        }
    }

    pub fn close(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.inbox = None;
            state.on_released = None;
        }
    }
}

/// Whether a store's own connection, the one its operations ride, has
/// opened yet. Its listener connects only after that: where the server has
/// one connection slot free (`maxclients`, `max_connections`), the
/// operations must get it, as waiting without the listener costs latency
/// (the poll stands in for it) and without the operations every wait fails.
#[derive(Clone)]
pub struct FirstOpened(Arc<(AtomicBool, watch::Sender<bool>)>);

impl Default for FirstOpened {
    fn default() -> Self {
        FirstOpened(Arc::new((
            AtomicBool::new(false),
            watch::Sender::new(false),
        )))
    }
}

impl FirstOpened {
    /// The store's connection opened (after the first time, one atomic read).
    pub fn now(&self) {
        let (opened, tell) = &*self.0;
        if !opened.load(Ordering::Relaxed) && !opened.swap(true, Ordering::Relaxed) {
            tell.send_replace(true);
        }
    }

    /// Once the store's connection has opened, handing every request that
    /// arrives meanwhile to `take`. `false` when the inbox closed (the store
    /// is gone: stop).
    pub async fn wait_taking<W>(
        &self, inbox: &mut mpsc::UnboundedReceiver<W>, mut take: impl FnMut(W),
    ) -> bool {
        let mut opened = self.0 .1.subscribe();
        loop {
            tokio::select! {
                _ = opened.wait_for(|opened| *opened) => return true,
                request = inbox.recv() => match request {
                    Some(request) => take(request),
                    None => return false,
                },
            }
        }
    }
}

/// How long a listener waits before trying an unreachable server again.
pub const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Wait [`RETRY_PAUSE`], handing every request that arrives meanwhile to
/// `take`. `false` when the inbox closed (the store is gone: stop).
pub async fn pause_taking<W>(
    inbox: &mut mpsc::UnboundedReceiver<W>, mut take: impl FnMut(W),
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
