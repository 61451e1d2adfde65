//! Where a store's connections go, and how (made once per store), and the
//! failures opening one can end in, as both the connecting and the session
//! say them.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::ClientConfig;

use crate::store::event_loop::{Failure, Refusals};
use crate::store::mysql::options::Place;
use crate::store::mysql::sql::Sql;
use crate::store::Code;

/// Where and how to connect; made once per store.
pub struct Target {
    pub place: Place,
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    /// ssl-mode=PREFERRED: a server without TLS is spoken to in plain text.
    pub tls_optional: bool,
    pub user: String,
    pub password: Option<Vec<u8>>,
    pub database: String,
    pub connect_timeout: Duration,
    /// What a statement waits, at most, for a row another session holds
    /// (whole seconds, as the server counts them): the command timeout.
    pub lock_wait_s: u64,
    /// The server as error messages name it: `mysql://user@host:port/db`.
    pub display: String,
    pub sql: Arc<Sql>,
    /// Whether a connection found (or made) the store's objects.
    pub objects_ready: AtomicBool,
    /// The server's `max_allowed_packet`, as the last connection to log in
    /// read it (0 until one did): the longest command it reads.
    pub max_allowed_packet: AtomicUsize,
    /// The last refusal of our credentials, and what the server said.
    pub refused: Refusals,
}

/// How a MySQL or MariaDB server's first bytes sound: a packet (three bytes
/// of length, the sequence number 0), then the protocol version (10) of a
/// greeting or 0xFF for an error.
pub fn first_words(first: &[u8]) -> Option<&'static str> {
    let packet = first.len() >= 5 && first[3] == 0;
    match first.get(4) {
        Some(10) if packet => Some("it greets as a MySQL or MariaDB server does"),
        Some(0xFF) if packet => Some("it answers as a MySQL or MariaDB server does"),
        _ => None,
    }
}

pub fn failure(code: Code, verb: &str, target: &Target, detail: &str) -> Failure {
    Failure::at(code, verb, &target.display, detail)
}

pub fn lost(target: &Target, e: &std::io::Error) -> Failure {
    Failure::lost(&target.display, e)
}

#[cfg(test)]
mod tests {
    use crate::store::peer::what_answered;

    #[test]
    fn a_mysql_server_is_told_by_its_first_packet() {
        let mariadb = b"d\x00\x00\x00\x0a5.5.5-10.11.19-MariaDB\x00";
        assert!(what_answered(mariadb).contains("greets as a MySQL or MariaDB"));
        let too_many = b"\x17\x00\x00\x00\xffj\x04Host";
        assert!(what_answered(too_many).contains("answers as a MySQL or MariaDB"));
        assert_eq!(super::first_words(b"HTTP/1.1 400"), None);
        assert_eq!(super::first_words(b"d\x00\x00\x00"), None);
    }
}
