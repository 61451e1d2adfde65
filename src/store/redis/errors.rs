//! What a failed command becomes: whether to send it again, and the error
//! (with its `code`) the caller sees.

use std::time::Duration;

use redis::{ConnectionAddr, ErrorKind, RedisError};

use super::Shared;
use crate::store::{BackendError, StoreError};

/// Whether `e` says the connection died under the command (not that the
/// server refused a new one): then it is sent again on a fresh connection.
pub(super) fn found_dead(e: &RedisError) -> bool {
    (e.is_connection_dropped() && !e.is_connection_refusal())
        || e.kind() == ErrorKind::ClusterConnectionNotFound
}

/// How many times a command that found the connection dead is sent again.
/// The first resend covers a connection the server closed while idle; a
/// second, a server that was restarting.
pub(super) const RESENDS: u32 = 2;

impl Shared {
    /// The error a failed command becomes. A server that accepts connections
    /// and then drops them is looked at closer: if it does not answer a
    /// `PING` as Redis would, the error says so, instead of blaming the network.
    pub(super) async fn diagnose(&self, name: &'static str, e: &RedisError) -> StoreError {
        let not_redis = if e.kind() == ErrorKind::Parse {
            true
        } else if e.is_connection_dropped() && !e.is_connection_refusal() {
            match self.clients[0].get_connection_info().addr() {
                ConnectionAddr::Tcp(host, port) if self.cluster.is_none() => {
                    let within = self.options.connect_timeout.min(Duration::from_secs(1));
                    speaks_redis(host, *port, within).await == Some(false)
                }
                _ => false,
            }
        } else {
            false
        };
        if !not_redis {
            return self.failure(name, e);
        }
        StoreError::Backend(BackendError {
            code: "ERR_LOCK_STORE_CONNECTION",
            message: format!(
                "RedisLockStore.{name}: {} accepted the connection but did not answer as a Redis server (is this the right host and port?)",
                self.display
            ),
        })
    }

    pub(super) fn failure(&self, name: &'static str, e: &RedisError) -> StoreError {
        let url = &self.display;
        let (code, what) = if e.kind() == ErrorKind::AuthenticationFailed
            || auth_refused(e.code().unwrap_or(""), &e.to_string())
        {
            ("ERR_LOCK_STORE_AUTH", "was refused by")
        } else if e.is_timeout() {
            ("ERR_LOCK_STORE_TIMEOUT", "timed out talking to")
        } else if e.is_connection_refusal() {
            ("ERR_LOCK_STORE_CONNECTION", "could not connect to")
        } else if found_dead(e) {
            ("ERR_LOCK_STORE_CONNECTION", "lost the connection to")
        } else if e.is_io_error() {
            ("ERR_LOCK_STORE_CONNECTION", "could not reach")
        } else {
            ("ERR_LOCK_STORE_REDIS", "got an error from")
        };
        StoreError::Backend(BackendError {
            code,
            message: format!("RedisLockStore.{name}: {what} {url}: {e}"),
        })
    }
}

/// Whether a server error reply means our credentials or rights were refused.
pub(super) fn auth_refused(code: &str, text: &str) -> bool {
    matches!(code, "WRONGPASS" | "NOAUTH" | "NOPERM")
        || text.contains("invalid password")
        || text.contains("invalid username-password")
}

/// A command's error reply as the error its caller sees.
#[cfg_attr(test, allow(dead_code))]
pub(super) fn server_error(name: &str, display: &str, e: &redis::ServerError) -> StoreError {
    let (code, what) = if auth_refused(e.code(), &e.to_string()) {
        ("ERR_LOCK_STORE_AUTH", "was refused by")
    } else {
        ("ERR_LOCK_STORE_REDIS", "got an error from")
    };
    StoreError::Backend(BackendError {
        code,
        message: format!("RedisLockStore.{name}: {what} {display}: {e}"),
    })
}

/// Whether the server at `host:port` answers `PING` the way Redis does (a
/// simple string or an error reply, such as `-NOAUTH`); `None` when it cannot
/// be reached at all, so nothing can be said.
async fn speaks_redis(host: &str, port: u16, within: Duration) -> Option<bool> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::time::timeout(within, tokio::net::TcpStream::connect((host, port)))
        .await
        .ok()?
        .ok()?;
    let answer = async {
        stream.write_all(b"PING\r\n").await?;
        let mut first = [0u8; 1];
        let read = stream.read(&mut first).await?;
        Ok::<_, std::io::Error>(read == 1 && (first[0] == b'+' || first[0] == b'-'))
    };
    // Connected, but closed, silent or speaking something else: not Redis.
    Some(matches!(
        tokio::time::timeout(within, answer).await,
        Ok(Ok(true))
    ))
}
