//! How long an argument of a command the server reads: its
//! `proto-max-bulk-len`, and its `client-query-buffer-limit`, which the
//! buffer a long argument is read into counts against (measured: a 2 MB
//! argument ends the connection at a 1 MB limit, four of 600 KB in one
//! command do not). Past either, Redis ends the connection, and with it
//! every command in flight on it; so a command with a longer argument (a
//! key of hundreds of megabytes) is refused before it is sent, alone, with
//! an error that names the limit. Redis's defaults hold until a connection
//! reads the server's own (`CONFIG GET`, where the user may run it).

use std::sync::atomic::{AtomicUsize, Ordering};

use super::request::Request;
use crate::store::{BackendError, Code, StoreError};

/// Redis's default `proto-max-bulk-len`: 512 MB.
const ARGUMENT: usize = 512 * 1024 * 1024;
/// Redis's default `client-query-buffer-limit`: 1 GB.
const BUFFER: usize = 1024 * 1024 * 1024;

/// The server's limits, shared by the store and its connections.
pub struct Limits {
    argument: AtomicUsize,
    buffer: AtomicUsize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            argument: AtomicUsize::new(ARGUMENT),
            buffer: AtomicUsize::new(BUFFER),
        }
    }
}

impl Limits {
    /// What a connection read of the server's settings (each, if it could).
    pub fn learned(&self, argument: Option<usize>, buffer: Option<usize>) {
        if let Some(argument) = argument {
            self.argument.store(argument, Ordering::Relaxed);
        }
        if let Some(buffer) = buffer {
            self.buffer.store(buffer, Ordering::Relaxed);
        }
    }

    /// Why `request` cannot be sent, if the server would not read it.
    pub fn refusal(&self, request: &Request, store: &str) -> Option<StoreError> {
        let longest = request.longest_argument();
        let (argument, buffer) = (
            self.argument.load(Ordering::Relaxed),
            self.buffer.load(Ordering::Relaxed),
        );
        let why = if longest > argument {
            format!("one of its arguments is {longest} bytes, and the server reads none longer than its proto-max-bulk-len, {argument} bytes")
        } else if longest + 2 >= buffer {
            // (Read with its line end.)
            format!("one of its arguments is {longest} bytes, and the server reads none as long as its client-query-buffer-limit, {buffer} bytes")
        } else {
            return None;
        };
        Some(StoreError::Backend(BackendError {
            code: Code::StoreRedis,
            message: format!(
                "{store}.{}: this command cannot be sent: {why} (it would end the connection, and every command \
                 on it): a key or owner this long cannot be stored unless the server's limit is raised",
                request.name
            ),
        }))
    }
}

/// The server's setting `name` in the answer to `CONFIG GET <name>`, if the
/// answer has it.
pub fn setting(answer: &redis::Value) -> Option<usize> {
    let redis::Value::Array(pair) = answer else {
        return None;
    };
    match pair.get(1)? {
        redis::Value::BulkString(value) => std::str::from_utf8(value).ok()?.parse().ok(),
        _ => None,
    }
}
