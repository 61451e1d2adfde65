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

pub fn failure(code: Code, verb: &str, target: &Target, detail: &str) -> Failure {
    Failure::at(code, verb, &target.display, detail)
}

pub fn lost(target: &Target, e: &std::io::Error) -> Failure {
    Failure::lost(&target.display, e)
}
