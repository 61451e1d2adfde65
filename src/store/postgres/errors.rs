//! What a failed statement or connection becomes: whether to send it again,
//! and the error (with its `code`) the caller sees. A password is never in
//! one: the server is named as `postgres://user@host:port/db`.

use std::time::Duration;

use tokio_postgres::error::SqlState;

use crate::store::{BackendError, Code, StoreError};

/// Why an operation failed, before it is put in words. Not yet a
/// [`BackendError`]: it keeps the cause, so the pool can still ask whether
/// the connection died under the statement ([`Failure::found_dead`]: send it
/// again) or the server refused who we are ([`Failure::is_auth`]: back off),
/// and it gets its [`Code`] and its message, which names the operation, only
/// when it reaches the caller ([`Failure::into_store_error`]).
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
        matches!(self, Failure::Refused(_)) || self.code_and_verb().0 == Code::StoreAuth
    }

    fn code_and_verb(&self) -> (Code, &'static str) {
        let e = match self {
            Failure::Postgres(e) | Failure::Missing(e, _) => e,
            Failure::Timeout(_) => return (Code::StoreTimeout, "had no answer from"),
            Failure::Refused(_) => return (Code::StoreAuth, "was refused by"),
            Failure::Closed => return (Code::StoreClosed, "is closed:"),
        };
        if let Some(code) = e.code() {
            return code_and_verb(code.code());
        }
        let text = e.to_string();
        if text.contains("password missing") {
            return (Code::StoreAuth, "was refused by");
        }
        if e.is_closed() {
            return (Code::StoreConnection, "lost the connection to");
        }
        match io_kind(e) {
            Some(std::io::ErrorKind::ConnectionRefused) => {
                (Code::StoreConnection, "could not connect to")
            }
            Some(std::io::ErrorKind::TimedOut) => (Code::StoreTimeout, "timed out connecting to"),
            Some(_) => (Code::StoreConnection, "could not reach"),
            None if text.contains("timeout") => (Code::StoreTimeout, "timed out connecting to"),
            None => (Code::StoreConnection, "could not talk to"),
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

/// The error an operation fails with when the server answered something
/// its reader cannot take (`what`, as the reader puts it).
pub(super) fn unreadable(name: &str, server: &str, what: &str) -> StoreError {
    StoreError::Backend(BackendError {
        code: Code::StorePostgres,
        message: format!("PostgresLockStore.{name}: {server} answered {what}"),
    })
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
pub(super) fn code_and_verb(sqlstate: &str) -> (Code, &'static str) {
    if sqlstate == SqlState::INVALID_PASSWORD.code()
        || sqlstate == SqlState::INVALID_AUTHORIZATION_SPECIFICATION.code()
        || sqlstate == SqlState::INVALID_CATALOG_NAME.code()
    {
        (Code::StoreAuth, "was refused by")
    } else if sqlstate == SqlState::QUERY_CANCELED.code() {
        (Code::StoreTimeout, "timed out talking to")
    } else if sqlstate == SqlState::TOO_MANY_CONNECTIONS.code()
        || sqlstate == SqlState::CANNOT_CONNECT_NOW.code()
    {
        // Out of connection slots (53300, the reserved ones included), or
        // starting up / in recovery (57P03): nothing was run, and a waiter
        // with time left tries again.
        (Code::StoreUnavailable, "was not ready at")
    } else if sqlstate == SqlState::READ_ONLY_SQL_TRANSACTION.code() {
        (
            Code::StorePostgres,
            "cannot write: the database is read-only (a standby, or default_transaction_read_only) at",
        )
    } else if sqlstate.starts_with("57P") || sqlstate.starts_with("08") {
        (Code::StoreConnection, "lost the connection to")
    } else {
        (Code::StorePostgres, "got an error from")
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
    use crate::store::Code;

    #[test]
    fn a_server_not_ready_yet_is_told_from_one_that_refuses() {
        // Too many connections (the reserved slots too), and starting up or in recovery.
        for sqlstate in ["53300", "57P03"] {
            assert_eq!(
                code_and_verb(sqlstate).0,
                Code::StoreUnavailable,
                "{sqlstate}"
            );
        }
        assert_eq!(code_and_verb("57P01").0, Code::StoreConnection);
        assert_eq!(code_and_verb("28P01").0, Code::StoreAuth);
        let (code, verb) = code_and_verb("25006");
        assert_eq!(code, Code::StorePostgres);
        assert!(verb.contains("read-only"), "{verb}");
    }
}
