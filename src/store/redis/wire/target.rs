//! Where a store's connections go, and how (made once per store), and what
//! the first bytes of a server that answered show it to be.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::ClientConfig;

use crate::store::event_loop::Failure;
use crate::store::follow::FirstOpened;
use crate::store::redis::limits::Limits;

/// Where and how to connect; made once per store.
pub struct Target {
    pub host: String,
    pub port: u16,
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: i64,
    pub connect_timeout: Duration,
    /// The server as error messages name it (no password).
    pub display: String,
    /// The longest command the server reads, told what it says.
    pub limits: Arc<Limits>,
    /// Told when a connection opens (`Wire::begin`): the subscriber waits for it.
    pub first_opened: FirstOpened,
}

/// How a Redis server's first bytes sound: RESP's simple string and error
/// replies (`+PONG`, `-ERR ...`).
pub fn first_words(first: &[u8]) -> Option<&'static str> {
    matches!(first, [b'+' | b'-', ..]).then_some("it answers as a Redis server does")
}

pub fn lost(target: &Target, e: &std::io::Error) -> Failure {
    Failure::lost(&target.display, e)
}

#[cfg(test)]
mod tests {
    use crate::store::peer::what_answered;

    #[test]
    fn a_redis_server_is_told_by_its_simple_replies() {
        assert!(what_answered(b"-ERR unknown command").contains("Redis"));
        assert!(what_answered(b"+PONG\r\n").contains("Redis"));
        assert_eq!(super::first_words(b"E\x00\x00\x00\x50SFATAL"), None);
        assert_eq!(super::first_words(b""), None);
    }
}
