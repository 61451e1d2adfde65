//! What a failure on the file becomes: a [`StoreError`] that names the
//! operation and the file, with the code an application branches on.

use std::path::Path;

use rusqlite::ErrorCode;

use crate::store::{BackendError, Code, StoreError};

/// `error`, met by the operation `name` on the file at `path`.
pub(super) fn failure(name: &str, path: &Path, error: &rusqlite::Error) -> StoreError {
    let code = match error.sqlite_error_code() {
        // The busy handler gave up: another connection kept the file's
        // write lock past the command timeout.
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Code::StoreTimeout,
        _ => Code::StoreSqlite,
    };
    let what = match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            "another connection kept the file busy past commandTimeout".to_owned()
        }
        Some(ErrorCode::NotADatabase) => "the file is not a SQLite database".to_owned(),
        Some(ErrorCode::ReadOnly) => format!("the file is read-only here ({error})"),
        _ => error.to_string(),
    };
    StoreError::Backend(BackendError {
        code,
        message: format!("SqliteLockStore.{name}: {}: {what}", path.display()),
    })
}

/// The error of an operation after `close()`.
pub(super) fn closed(name: &str) -> StoreError {
    StoreError::Backend(BackendError {
        code: Code::StoreClosed,
        message: format!("SqliteLockStore.{name}: the store was closed"),
    })
}
