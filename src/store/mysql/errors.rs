//! What an error the server reported becomes: its [`Code`], how the message
//! puts it, and whether the session it came on is ending (then the engine
//! sends what was on it again, on a fresh connection). A password is never
//! in a message: the server is named as `mysql://user@host:port/db`.

use super::wire::packet::ServerError;
use crate::store::{BackendError, Code, StoreError};

/// How many times a statement that found its connection dead is sent again
/// (every operation may be: an acquire sent again finds its own row and takes
/// it again, an extension repeats, a release acts on its own owner's row
/// only, reads are reads).
pub(super) const RESENDS: u32 = 2;

/// The code an error number becomes, and the words before the server's name.
pub(super) fn code_of(error: &ServerError) -> (Code, &'static str) {
    match error.number {
        // Wrong password, no such user or database, no rights, host not allowed,
        // an authentication method the server will not use.
        1044 | 1045 | 1049 | 1130 | 1142 | 1143 | 1251 | 1370 | 1698 => {
            (Code::StoreAuth, "was refused by")
        }
        // Out of connections (for everyone, or for this user), a host blocked
        // after too many bad connects, a resource limit: nothing ran.
        1040 | 1129 | 1203 | 1226 => (Code::StoreUnavailable, "was not ready at"),
        // A statement that waited too long for a row another session holds,
        // or was chosen to break a deadlock: rolled back, nothing ran.
        1205 | 1213 => (Code::StoreUnavailable, "was busy at"),
        1290 | 1792 | 1836 => (
            Code::StoreMysql,
            "cannot write: the server is read-only (read_only, or a replica) at",
        ),
        _ if ends_session(error) => (Code::StoreConnection, "lost the connection to"),
        _ => (Code::StoreMysql, "got an error from"),
    }
}

/// The server is ending the session the error came on: it is shutting down,
/// or the connection was killed.
pub(super) fn ends_session(error: &ServerError) -> bool {
    matches!(error.number, 1053 | 1077 | 1927 | 3169 | 4031) || error.state.starts_with("08")
}

/// The error `MySqlLockStore.<name>` fails with for `error`, at `server`.
pub(super) fn server_error(name: &str, server: &str, error: &ServerError) -> StoreError {
    let (code, verb) = code_of(error);
    StoreError::Backend(BackendError {
        code,
        message: format!(
            "MySqlLockStore.{name}: {verb} {server}: {} ({})",
            error.message, error.number
        ),
    })
}

/// The error an operation fails with when the server answered something
/// its reader cannot take (`what`, as the reader puts it).
pub(super) fn unreadable(name: &str, server: &str, what: &str) -> StoreError {
    StoreError::Backend(BackendError {
        code: Code::StoreMysql,
        message: format!("MySqlLockStore.{name}: {server} answered {what}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(number: u16) -> ServerError {
        ServerError {
            number,
            state: "HY000".to_owned(),
            message: String::new(),
        }
    }

    #[test]
    fn errors_are_told_apart_by_number() {
        assert_eq!(code_of(&numbered(1045)).0, Code::StoreAuth);
        assert_eq!(code_of(&numbered(1040)).0, Code::StoreUnavailable);
        assert_eq!(code_of(&numbered(1205)).0, Code::StoreUnavailable);
        assert_eq!(code_of(&numbered(1927)).0, Code::StoreConnection);
        assert!(ends_session(&numbered(1053)));
        let (code, verb) = code_of(&numbered(1290));
        assert_eq!(code, Code::StoreMysql);
        assert!(verb.contains("read-only"));
        assert_eq!(code_of(&numbered(1064)).0, Code::StoreMysql);
    }
}
