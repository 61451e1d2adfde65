//! Where a store's connections go, and how (made once per store), and the
//! failures opening one can end in, as both the connecting and the session
//! say them.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::ClientConfig;

use crate::store::event_loop::{Failure, Refusals};
use crate::store::postgres::sql::Sql;
use crate::store::{peer, Code};

/// What a PostgreSQL server does that others on its port do not, for the
/// message when the server there says nothing.
pub const POSTGRES_HINT: &str =
    "a PostgreSQL server that is up answers at once; a Redis server says nothing to a PostgreSQL client";

/// Where and how to connect; made once per store.
pub struct Target {
    pub host: String,
    pub port: u16,
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    /// sslmode=prefer: a server that does not accept TLS is spoken to in plain text.
    pub tls_optional: bool,
    pub user: String,
    pub password: Option<Vec<u8>>,
    pub database: String,
    /// The startup parameters beyond user and database (options, application_name).
    pub parameters: Vec<(String, String)>,
    /// `options` without the store's settings, for a server that refuses
    /// them (see `options::refuses_options`), and whether it did.
    pub plain_options: Option<String>,
    pub refuses_options: AtomicBool,
    pub connect_timeout: Duration,
    /// The server as error messages name it: `postgres://user@host:port/db`.
    pub display: String,
    pub sql: Arc<Sql>,
    /// The last refusal of our credentials, and what the server said.
    pub refused: Refusals,
}

/// How a PostgreSQL server's first bytes sound: an ErrorResponse ('E', four
/// bytes of length, then its fields, the first being the severity 'S').
pub fn first_words(first: &[u8]) -> Option<&'static str> {
    let error_response = first.len() >= 6 && first[0] == b'E' && first[5] == b'S';
    error_response.then_some("it answers as a PostgreSQL server does")
}

pub fn failure(code: Code, verb: &str, target: &Target, detail: &str) -> Failure {
    Failure::at(code, verb, &target.display, detail)
}

/// The server on the port is not PostgreSQL, as its first bytes (`first`)
/// show: an error of the connection, not a refused login.
pub fn not_postgres(target: &Target, first: &[u8]) -> Failure {
    failure(
        Code::StoreConnection,
        "could not talk to",
        target,
        &format!(
            "the server did not speak PostgreSQL's protocol ({}): is this PostgreSQL's port?",
            peer::what_answered(first)
        ),
    )
}

pub fn lost(target: &Target, e: &std::io::Error) -> Failure {
    Failure::lost(&target.display, e)
}

#[cfg(test)]
mod tests {
    use crate::store::peer::what_answered;

    #[test]
    fn a_postgres_server_is_told_by_its_error_response() {
        let refusal = b"E\x00\x00\x00\x50SFATAL\x00VFATAL\x00C0A000\x00";
        assert!(what_answered(refusal).contains("PostgreSQL"));
        assert_eq!(super::first_words(b"E\x00\x00"), None);
        assert_eq!(super::first_words(b"-ERR unknown command"), None);
    }
}
