//! What a failed statement or connection becomes: whether to send it again,
//! and the error (with its `code`) the caller sees. A password is never in
//! one: the server is named as `postgres://user@host:port/db`.

use std::time::Duration;

use tokio_postgres::error::SqlState;

use crate::store::{BackendError, StoreError};

/// Why an operation failed, before it is put in words.
#[derive(Debug)]
pub(super) enum Failure {
    Postgres(tokio_postgres::Error),
    /// The objects of plain locks are missing, and making them failed with
    /// this error (see [`missing_objects`]); the table is named.
    Missing(tokio_postgres::Error, String),
    /// No answer within this bound.
    Timeout(Duration),
    /// The server refused our credentials a moment ago; not tried again yet.
    Refused(String),
    /// `close()` was called.
    Closed,
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Failure::Postgres(e)
    }
}

/// How many times a statement that found its connection dead is sent again
/// (every operation here may be: see the module doc of `sql`).
pub(super) const RESENDS: u32 = 2;

impl Failure {
    /// Whether the connection died under the statement (not that the server
    /// refused a new one): then it is sent again on a fresh connection.
    pub fn found_dead(&self) -> bool {
        match self {
            Failure::Postgres(e) => {
                e.is_closed()
                    || matches!(
                        e.code(),
                        Some(c) if *c == SqlState::ADMIN_SHUTDOWN || *c == SqlState::CRASH_SHUTDOWN
                    )
            }
            _ => false,
        }
    }

    /// Whether the server said no to who we are (the auth back-off keys off this).
    pub fn is_auth(&self) -> bool {
        matches!(self, Failure::Refused(_)) || self.code_and_verb().0 == "ERR_LOCK_STORE_AUTH"
    }

    fn code_and_verb(&self) -> (&'static str, &'static str) {
        let e = match self {
            Failure::Postgres(e) | Failure::Missing(e, _) => e,
            Failure::Timeout(_) => return ("ERR_LOCK_STORE_TIMEOUT", "had no answer from"),
            Failure::Refused(_) => return ("ERR_LOCK_STORE_AUTH", "was refused by"),
            Failure::Closed => return ("ERR_LOCK_STORE_CLOSED", "is closed:"),
        };
        if let Some(code) = e.code() {
            return code_and_verb(code.code());
        }
        let text = e.to_string();
        if text.contains("password missing") {
            return ("ERR_LOCK_STORE_AUTH", "was refused by");
        }
        if e.is_closed() {
            return ("ERR_LOCK_STORE_CONNECTION", "lost the connection to");
        }
        match io_kind(e) {
            Some(std::io::ErrorKind::ConnectionRefused) => {
                ("ERR_LOCK_STORE_CONNECTION", "could not connect to")
            }
            Some(std::io::ErrorKind::TimedOut) => {
                ("ERR_LOCK_STORE_TIMEOUT", "timed out connecting to")
            }
            Some(_) => ("ERR_LOCK_STORE_CONNECTION", "could not reach"),
            None if text.contains("timeout") => {
                ("ERR_LOCK_STORE_TIMEOUT", "timed out connecting to")
            }
            None => ("ERR_LOCK_STORE_CONNECTION", "could not talk to"),
        }
    }

    /// The error `PostgresLockStore.<name>` rejects with.
    pub fn into_store_error(self, name: &str, server: &str) -> StoreError {
        let (code, verb) = self.code_and_verb();
        let detail = match &self {
            Failure::Postgres(e) => detail(e),
            Failure::Missing(e, table) => format!("{}; {}", detail(e), missing_objects(table)),
            Failure::Timeout(bound) => format!("within {} ms", bound.as_millis()),
            Failure::Refused(detail) => format!("{detail} (not tried again for a moment)"),
            Failure::Closed => "close() was called".to_owned(),
        };
        let message = match self {
            Failure::Closed => format!("PostgresLockStore.{name}: the store is closed"),
            _ => format!("PostgresLockStore.{name}: {verb} {server}: {detail}"),
        };
        StoreError::Backend(BackendError { code, message })
    }
}

/// What an error says when the table of plain locks (or its sequence) is
/// missing and this user may not make them.
pub(super) fn missing_objects(table: &str) -> String {
    format!(
        "the table {table} or its sequence {table}_fencing is missing, and this user may not create them: \
         create them once as a user who may, with the SQL PostgresLockStore.schema({table:?}) returns"
    )
}

/// The error code a SQLSTATE the server reported becomes, and how the
/// message puts it.
pub(super) fn code_and_verb(sqlstate: &str) -> (&'static str, &'static str) {
    if sqlstate == SqlState::INVALID_PASSWORD.code()
        || sqlstate == SqlState::INVALID_AUTHORIZATION_SPECIFICATION.code()
        || sqlstate == SqlState::INVALID_CATALOG_NAME.code()
    {
        ("ERR_LOCK_STORE_AUTH", "was refused by")
    } else if sqlstate == SqlState::QUERY_CANCELED.code() {
        ("ERR_LOCK_STORE_TIMEOUT", "timed out talking to")
    } else if sqlstate == SqlState::TOO_MANY_CONNECTIONS.code()
        || sqlstate == SqlState::CANNOT_CONNECT_NOW.code()
    {
        // Out of connection slots (53300, the reserved ones included), or
        // starting up / in recovery (57P03): nothing was run, and a waiter
        // with time left tries again.
        ("ERR_LOCK_STORE_UNAVAILABLE", "was not ready at")
    } else if sqlstate == SqlState::READ_ONLY_SQL_TRANSACTION.code() {
        (
            "ERR_LOCK_STORE_POSTGRES",
            "cannot write: the database is read-only (a standby, or default_transaction_read_only) at",
        )
    } else if sqlstate.starts_with("57P") || sqlstate.starts_with("08") {
        ("ERR_LOCK_STORE_CONNECTION", "lost the connection to")
    } else {
        ("ERR_LOCK_STORE_POSTGRES", "got an error from")
    }
}

/// What the server said, or the error with its causes (a TLS failure says
/// why only in its source: `invalid peer certificate: UnknownIssuer`).
pub(super) fn detail(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        let said = inner.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = inner.source();
    }
    text
}

fn io_kind(e: &tokio_postgres::Error) -> Option<std::io::ErrorKind> {
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        source = inner.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::code_and_verb;

    #[test]
    fn a_server_not_ready_yet_is_told_from_one_that_refuses() {
        // Too many connections (the reserved slots too), and starting up or in recovery.
        for sqlstate in ["53300", "57P03"] {
            assert_eq!(
                code_and_verb(sqlstate).0,
                "ERR_LOCK_STORE_UNAVAILABLE",
                "{sqlstate}"
            );
        }
        assert_eq!(code_and_verb("57P01").0, "ERR_LOCK_STORE_CONNECTION");
        assert_eq!(code_and_verb("28P01").0, "ERR_LOCK_STORE_AUTH");
        let (code, verb) = code_and_verb("25006");
        assert_eq!(code, "ERR_LOCK_STORE_POSTGRES");
        assert!(verb.contains("read-only"), "{verb}");
    }
}
