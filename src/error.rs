//! What a store operation fails with: [`StoreError`], and for a store's own
//! failures the [`Code`] JS branches on.
//!
//! [`Code`] is the one list of the codes. JS reads it from the addon (the
//! `ErrorCode` enum of `lib/native.d.ts`, made from it when the addon is
//! built): `lib/core/errors.js` takes its values from there, and the tests check
//! `index.d.ts`'s `LockStoreErrorCode` and `docs/errors.md` against it.

use std::fmt;

use napi_derive::napi;

/// Defines [`Code`] and [`Code::as_str`] from one list, so each code's text
/// is written once and JS sees exactly the strings Rust puts in its errors.
/// Each code's doc is a `#[doc = "..."]` attribute, not a `///` comment: a
/// `///` comment would reach napi's type generator as a raw string token
/// (`r" ..."`), which it would copy, quotes and all, into `lib/native.d.ts`.
macro_rules! codes {
    ($($(#[doc = $doc:tt])* $variant:ident => $text:tt,)+) => {
        /// Which failure a store error is: a stable `code` on the JS error,
        /// one of `index.d.ts`'s `LockStoreErrorCode`. Exported to JS as the
        /// string enum `ErrorCode`, whose values are these codes.
        #[napi(string_enum, js_name = "ErrorCode")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code {
            $($(#[doc = $doc])* #[napi(value = $text)] $variant,)+
        }

        impl Code {
            /// Every code, in the order `index.d.ts` and `docs/errors.md` list them.
            pub const ALL: &'static [Code] = &[$(Code::$variant),+];

            /// The code as JS sees it: `error.code`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $text,)+
                }
            }
        }
    };
}

codes! {
    #[doc = "The server could not be reached, dropped the connection, did not"]
    #[doc = "answer as the server it should be, or its TLS certificate was refused."]
    #[doc = "A waiter with time left tries again."]
    StoreConnection => "ERR_LOCK_STORE_CONNECTION",
    #[doc = "No answer within the command timeout (plus the connect timeout when it"]
    #[doc = "had to connect); the outcome is unknown. A waiter with time left tries"]
    #[doc = "again."]
    StoreTimeout => "ERR_LOCK_STORE_TIMEOUT",
    #[doc = "The server answered \"not now\" (loading, busy, out of connection slots,"]
    #[doc = "a cluster re-forming, starting up): nothing ran. A waiter with time"]
    #[doc = "left tries again."]
    StoreUnavailable => "ERR_LOCK_STORE_UNAVAILABLE",
    #[doc = "The server refused the credentials or the rights (a wrong password,"]
    #[doc = "`NOAUTH`, an unknown PostgreSQL user or database)."]
    StoreAuth => "ERR_LOCK_STORE_AUTH",
    #[doc = "Redis answered with another error (`WRONGTYPE`, `READONLY`, ...)."]
    StoreRedis => "ERR_LOCK_STORE_REDIS",
    #[doc = "PostgreSQL answered with another error (the lock table missing and not"]
    #[doc = "creatable, a read-only database, ...)."]
    StorePostgres => "ERR_LOCK_STORE_POSTGRES",
    #[doc = "MySQL or MariaDB answered with another error (the store's tables missing"]
    #[doc = "and not creatable, a read-only server, ...)."]
    StoreMysql => "ERR_LOCK_STORE_MYSQL",
    #[doc = "SQLite failed on the store's file (not a database, read-only, its disk"]
    #[doc = "full or failing, ...)."]
    StoreSqlite => "ERR_LOCK_STORE_SQLITE",
    #[doc = "etcd answered with another error (a request larger than it reads, a"]
    #[doc = "lease it would not grant, ...)."]
    StoreEtcd => "ERR_LOCK_STORE_ETCD",
    #[doc = "`close()` was called: operations after it, and acquires waiting on the"]
    #[doc = "store, fail at once."]
    StoreClosed => "ERR_LOCK_STORE_CLOSED",
    #[doc = "A bug: a panic while an operation ran, or an operation abandoned"]
    #[doc = "before it settled (also `LockStoreError`'s default code in `lib/`)."]
    Internal => "ERR_LOCK_INTERNAL",
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a store operation failed (the store's fault, not the caller's).
#[derive(Clone, Debug)]
pub enum StoreError {
    /// An operation used where it cannot be settled; becomes a `TypeError`.
    Type(String),
    /// A native store could not do its job (server unreachable, timed out,
    /// refused our credentials, closed); becomes an `Error` with `code`.
    Backend(BackendError),
}

/// A native store's failure, as JS will see it: a stable `code` to branch on
/// and a message that says what happened and where.
#[derive(Clone, Debug)]
pub struct BackendError {
    pub code: Code,
    pub message: String,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Type(message) => f.write_str(message),
            StoreError::Backend(e) => f.write_str(&e.message),
        }
    }
}

impl std::error::Error for StoreError {}

#[cfg(test)]
mod tests {
    use super::Code;
    use std::collections::HashSet;

    #[test]
    fn every_code_is_an_err_lock_code_and_none_is_given_twice() {
        let mut seen = HashSet::new();
        for code in Code::ALL {
            let text = code.as_str();
            assert!(text.starts_with("ERR_LOCK_"), "{code:?}: {text}");
            assert!(
                text.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'),
                "{code:?}: {text}"
            );
            assert!(seen.insert(text), "{text} is given twice");
        }
    }
}
