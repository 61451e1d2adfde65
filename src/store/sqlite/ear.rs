//! Hearing releases from the other processes on the file. SQLite tells
//! nobody of a commit, so a process that has waiters binds a datagram
//! socket of its own (its ear: a name in Linux's abstract namespace, else a
//! path in the temporary folder), notes its address beside each key it
//! waits for (`<table>_ears`), and a release that freed the key sends a
//! datagram there: the kind of hold's letter, then the key. Nothing is
//! polled; a datagram lost (a full queue, an ear just gone) only leaves the
//! waiters to their next poll.

#[cfg(unix)]
use std::sync::{Mutex, PoisonError};

use crate::store::follow::{Follower, OnReleased, Released};
use crate::store::Task;

/// The longest key announced: a datagram carries the key whole, and a
/// longer one is left to the waiters' polls.
const MAX_ANNOUNCED_KEY_BYTES: usize = 60_000;

/// A store's side of hearing and telling: its ear (bound as the store is
/// made, its address this process's name in the file: in `<table>_ears`
/// and in the line) and the socket it tells other ears from. Where there
/// are no unix sockets (Windows), or no callback to report to, there is no
/// ear: nothing is heard, and waiters poll.
pub(super) struct Ears {
    follower: Follower<()>,
    /// The ear's address as noted in the file.
    address: Option<String>,
    /// The ear's socket, until its listener takes it.
    #[cfg(unix)]
    socket: Mutex<Option<std::os::unix::net::UnixDatagram>>,
    #[cfg(unix)]
    sender: std::sync::OnceLock<Option<std::os::unix::net::UnixDatagram>>,
}

impl Ears {
    #[cfg(unix)]
    pub fn new(on_released: Option<OnReleased>) -> Ears {
        let bound = on_released.as_ref().and_then(|_| unix::bind().ok());
        let (socket, address) = bound.map_or((None, None), |(s, a)| (Some(s), Some(a)));
        Ears {
            follower: Follower::new(on_released),
            address,
            socket: Mutex::new(socket),
            sender: std::sync::OnceLock::new(),
        }
    }

    #[cfg(not(unix))]
    pub fn new(on_released: Option<OnReleased>) -> Ears {
        Ears {
            follower: Follower::new(on_released),
            address: None,
        }
    }

    /// This store's ear's address (this process's name in the file), if
    /// it has one.
    pub fn address(&self) -> Option<&str> {
        self.address.as_deref()
    }

    /// The task that listens at the ear, the first time (for the caller to
    /// run on Tokio); `None` after, or when there is no ear or it closed.
    pub fn listener(&self) -> Option<Task> {
        #[cfg(unix)]
        {
            let socket = self
                .socket
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()?;
            self.follower.follow((), |inbox, on_released| {
                unix::listen(socket, MAX_ANNOUNCED_KEY_BYTES + 1, inbox, on_released)
            })
        }
        #[cfg(not(unix))]
        None
    }

    /// Report what this store learned itself (a lock its own release
    /// handed to this process), as if heard.
    pub fn report(&self, released: Released, text: String) {
        self.follower.report(released, text);
    }

    /// Tell each of `ears` that `key` was released (`letter`: its kind of
    /// hold); the ears nobody listens at any more are returned.
    pub fn tell(&self, ears: Vec<String>, letter: u8, key: &str) -> Vec<String> {
        if key.len() > MAX_ANNOUNCED_KEY_BYTES {
            return Vec::new();
        }
        self.send(ears, &framed(letter, key))
    }

    /// Tell the ear `to` of a lock handed to its process (`told`: the
    /// hand-over's text); false when nobody listens there any more.
    pub fn hand_over(&self, to: &str, told: &str) -> bool {
        told.len() > MAX_ANNOUNCED_KEY_BYTES
            || self
                .send(vec![to.to_owned()], &framed(b'h', told))
                .is_empty()
    }

    #[cfg(unix)]
    fn send(&self, ears: Vec<String>, message: &[u8]) -> Vec<String> {
        let sender = self.sender.get_or_init(|| {
            let socket = std::os::unix::net::UnixDatagram::unbound().ok()?;
            socket.set_nonblocking(true).ok()?;
            Some(socket)
        });
        let Some(sender) = sender else {
            return Vec::new();
        };
        ears.into_iter()
            .filter(|ear| !unix::tell(sender, ear, message))
            .collect()
    }

    #[cfg(not(unix))]
    fn send(&self, _ears: Vec<String>, _message: &[u8]) -> Vec<String> {
        Vec::new()
    }

    /// Stop hearing: the listener ends, and the ear's address is returned
    /// for its notes in the file to go.
    pub fn close(&self) -> Option<String> {
        self.follower.close();
        #[cfg(unix)]
        {
            self.socket
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(address) = &self.address {
                unix::unbind(address);
            }
        }
        self.address.clone()
    }
}

/// A message: its letter, then the text.
fn framed(letter: u8, text: &str) -> Vec<u8> {
    let mut message = Vec::with_capacity(text.len() + 1);
    message.push(letter);
    message.extend_from_slice(text.as_bytes());
    message
}

#[cfg(unix)]
mod unix {
    use std::io;
    use std::os::unix::net::{SocketAddr, UnixDatagram};

    use tokio::sync::mpsc;

    use crate::store::follow::{OnReleased, Released};
    use crate::store::Task;

    /// A socket bound to a fresh address, and the address as the file notes it.
    pub fn bind() -> io::Result<(UnixDatagram, String)> {
        let name = format!("keel-sqlite-{:016x}", rand::random::<u64>());
        let (socket, address) = bind_named(&name)?;
        socket.set_nonblocking(true)?;
        Ok((socket, address))
    }

    #[cfg(target_os = "linux")]
    fn bind_named(name: &str) -> io::Result<(UnixDatagram, String)> {
        use std::os::linux::net::SocketAddrExt;
        let address = SocketAddr::from_abstract_name(name.as_bytes())?;
        Ok((UnixDatagram::bind_addr(&address)?, format!("@{name}")))
    }

    #[cfg(not(target_os = "linux"))]
    fn bind_named(name: &str) -> io::Result<(UnixDatagram, String)> {
        let path = std::env::temp_dir().join(name);
        let address = path.to_string_lossy().into_owned();
        Ok((UnixDatagram::bind(&path)?, address))
    }

    fn address_of(noted: &str) -> io::Result<SocketAddr> {
        #[cfg(target_os = "linux")]
        if let Some(name) = noted.strip_prefix('@') {
            use std::os::linux::net::SocketAddrExt;
            return SocketAddr::from_abstract_name(name.as_bytes());
        }
        SocketAddr::from_pathname(noted)
    }

    /// Send `message` to the ear noted as `noted`: false when nobody
    /// listens there any more (its notes can go). A full queue counts as
    /// sent: the waiters there poll.
    pub fn tell(from: &UnixDatagram, noted: &str, message: &[u8]) -> bool {
        let Ok(address) = address_of(noted) else {
            return false;
        };
        match from.send_to_addr(message, &address) {
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound
            ),
            Ok(_) => true,
        }
    }

    /// An ear bound to a path leaves no file behind.
    pub fn unbind(noted: &str) {
        if !noted.starts_with('@') {
            let _ = std::fs::remove_file(noted);
        }
    }

    /// The task that reports what the ear hears (messages up to `longest`
    /// bytes) until the store lets go of it (its inbox closes).
    pub fn listen(
        socket: UnixDatagram, longest: usize, mut inbox: mpsc::UnboundedReceiver<()>,
        on_released: OnReleased,
    ) -> Task {
        Box::pin(async move {
            let Ok(socket) = tokio::net::UnixDatagram::from_std(socket) else {
                return;
            };
            let mut buffer = vec![0u8; longest];
            loop {
                tokio::select! {
                    request = inbox.recv() => if request.is_none() { return },
                    heard = socket.recv(&mut buffer) => {
                        let Ok(n) = heard else { continue };
                        if let Some((released, key)) = read(&buffer[..n]) {
                            on_released(released, key);
                        }
                    }
                }
            }
        })
    }

    fn read(message: &[u8]) -> Option<(Released, String)> {
        let (&letter, key) = message.split_first()?;
        let released = match letter {
            b'l' => Released::Lock,
            b's' => Released::Semaphore,
            b'r' => Released::ReadWrite,
            b'h' => Released::Handed,
            _ => return None,
        };
        Some((released, String::from_utf8(key.to_vec()).ok()?))
    }
}
