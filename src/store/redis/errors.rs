//! What a failed command becomes: whether to send it again, and the error
//! (with its `code`) the caller sees.

use std::time::Duration;

use redis::{ErrorKind, RedisError};

use crate::store::{BackendError, Code, StoreError};

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

/// The error a failed command on the server `display` names becomes. A
/// server that accepts connections and then drops them is looked at closer
/// (`single`: where a single server listens, and how long to wait for it):
/// if it does not answer a `PING` as Redis would, the error says so, instead
/// of blaming the network.
pub(super) async fn diagnosed(
    name: &'static str, e: &RedisError, display: &str, single: Option<(&str, u16, Duration)>,
) -> StoreError {
    let not_redis = if e.kind() == ErrorKind::Parse {
        true
    } else if e.is_connection_dropped() && !e.is_connection_refusal() {
        match single {
            Some((host, port, within)) => speaks_redis(host, port, within).await == Some(false),
            None => false,
        }
    } else {
        false
    };
    if !not_redis {
        return failure(display, name, e);
    }
    StoreError::Backend(BackendError {
        code: Code::StoreConnection,
        message: format!(
            "RedisLockStore.{name}: {display} accepted the connection but did not answer as a Redis server (is this the right host and port?)"
        ),
    })
}

/// The error `e` becomes, on the server `display` names.
pub(super) fn failure(display: &str, name: &'static str, e: &RedisError) -> StoreError {
    let url = display;
    // A server's error reply in its own words, as `server_error` gives it.
    let text = match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => e.to_string(),
    };
    let (code, what) = if e.kind() == ErrorKind::AuthenticationFailed
        || auth_refused(e.code().unwrap_or(""), &text)
    {
        (Code::StoreAuth, "was refused by")
    } else if not_ready(e.code().unwrap_or(""), &text) {
        NOT_READY
    } else if e.is_timeout() {
        (Code::StoreTimeout, "timed out talking to")
    } else if e.is_connection_refusal() {
        (Code::StoreConnection, "could not connect to")
    } else if found_dead(e) {
        (Code::StoreConnection, "lost the connection to")
    } else if e.is_io_error() {
        (Code::StoreConnection, "could not reach")
    } else {
        (Code::StoreRedis, "got an error from")
    };
    StoreError::Backend(BackendError {
        code,
        message: format!("RedisLockStore.{name}: {what} {url}: {text}"),
    })
}

/// The error of an operation on a closed store.
pub(super) fn closed(name: &'static str) -> StoreError {
    StoreError::Backend(BackendError {
        code: Code::StoreClosed,
        message: format!("RedisLockStore.{name}: the store is closed"),
    })
}

/// Whether a server error reply means our credentials or rights were refused.
pub(super) fn auth_refused(code: &str, text: &str) -> bool {
    matches!(code, "WRONGPASS" | "NOAUTH" | "NOPERM")
        || text.contains("invalid password")
        || text.contains("invalid username-password")
}

/// Whether a server error reply says "not now" rather than "no": the server
/// is loading its data (`LOADING`), running another client's script too long
/// (`BUSY`), has no room for another client, or is a cluster re-forming
/// (`TRYAGAIN`: a slot moving; `CLUSTERDOWN`: slots without a master;
/// `MASTERDOWN`: a replica cut off from its master). The command was not run,
/// so trying it again later is safe, and a waiter with time left does.
/// (`READONLY`, a write sent to a replica, is not among them: it stays so
/// until the client is pointed elsewhere.)
pub(super) fn not_ready(code: &str, text: &str) -> bool {
    matches!(
        code,
        "LOADING" | "BUSY" | "TRYAGAIN" | "CLUSTERDOWN" | "MASTERDOWN"
    ) || text.contains("max number of clients reached")
}

/// The code and wording of a server that is not ready ([`not_ready`]).
const NOT_READY: (Code, &str) = (Code::StoreUnavailable, "was not ready at");

/// What a server error reply is to its caller: its code, and the words
/// before the server's name in the message.
pub(super) fn reply_meaning(code: &str, text: &str) -> (Code, &'static str) {
    if auth_refused(code, text) {
        (Code::StoreAuth, "was refused by")
    } else if not_ready(code, text) {
        NOT_READY
    } else {
        (Code::StoreRedis, "got an error from")
    }
}

/// A command's error reply as the error its caller sees.
#[cfg_attr(test, allow(dead_code))]
pub(super) fn server_error(name: &str, display: &str, e: &redis::ServerError) -> StoreError {
    // The server's own words ("LOADING Redis is loading the dataset in
    // memory"), not the client library's names for them.
    let words = match e.details() {
        Some(details) => format!("{} {details}", e.code()),
        None => e.code().to_owned(),
    };
    let (code, what) = reply_meaning(e.code(), &words);
    StoreError::Backend(BackendError {
        code,
        message: format!("RedisLockStore.{name}: {what} {display}: {words}"),
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

#[cfg(test)]
mod tests {
    use super::reply_meaning;
    use crate::store::Code;

    #[test]
    fn a_server_not_ready_yet_is_told_from_one_that_refuses() {
        for (code, text) in [
            ("LOADING", "LOADING Redis is loading the dataset in memory"),
            ("BUSY", "BUSY Redis is busy running a script."),
            (
                "TRYAGAIN",
                "TRYAGAIN Multiple keys request during rehashing of slot",
            ),
            ("CLUSTERDOWN", "CLUSTERDOWN The cluster is down"),
            ("MASTERDOWN", "MASTERDOWN Link with MASTER is down"),
            ("ERR", "ERR max number of clients reached"),
        ] {
            assert_eq!(
                reply_meaning(code, text).0,
                Code::StoreUnavailable,
                "{text}"
            );
        }
        assert_eq!(
            reply_meaning(
                "READONLY",
                "READONLY You can't write against a read only replica."
            )
            .0,
            Code::StoreRedis
        );
        assert_eq!(
            reply_meaning("NOAUTH", "NOAUTH Authentication required.").0,
            Code::StoreAuth
        );
        assert_eq!(
            reply_meaning("ERR", "ERR unknown command").0,
            Code::StoreRedis
        );
    }
}
