//! What is at the other end of a new connection, when it is not the server
//! a store expects: told by the first bytes it sent, or by its silence.
//!
//! A URL with another service's port is a common slip, and each protocol
//! fails on it in its own misleading way (one server's greeting read as
//! another's login request, an HTTP answer as a packet of megabytes, a
//! server that waits to be spoken to timing out). The stores say instead
//! that the server did not speak their protocol, and what it seems to speak.

use std::cell::Cell;

/// What a server's first bytes show it to be, as the end of a sentence
/// ("the server did not speak {protocol}'s protocol: {this}"): a server a
/// store of this package speaks to (each brings how its protocol's first
/// words sound: [`super::FIRST_WORDS`]), or a service often found on such a
/// port.
pub fn what_answered(first: &[u8]) -> &'static str {
    if let Some(server) = super::FIRST_WORDS.iter().find_map(|sounds| sounds(first)) {
        return server;
    }
    // A TLS record: handshake (22) or alert (21), then version 3.x.
    if first.len() >= 2 && matches!(first[0], 21 | 22) && first[1] == 3 {
        return "it answers in TLS";
    }
    match first {
        [] => "it closed the connection without a word",
        [b'H', b'T', b'T', b'P', b'/', ..] => "it answers as an HTTP server does",
        [b'S', b'S', b'H', b'-', ..] => "it greets as an SSH server does",
        _ => "it answers in some other protocol",
    }
}

/// Whether `e` is the server ending the connection (closed, or reset: a
/// server that closes with our bytes unread resets it), which before it
/// said anything means it would not speak with us.
pub fn ended(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    matches!(
        e.kind(),
        BrokenPipe | ConnectionAborted | ConnectionReset | UnexpectedEof
    )
}

/// Where an opening stands, as far as the server's silence goes.
#[derive(Clone, Copy)]
enum Silence {
    /// Not connected yet, or not waiting on the server.
    NotYet,
    /// Connected, and waiting for the server's first word in `protocol`;
    /// `hint` says what a server of that kind does, and which others stay silent.
    Awaiting {
        protocol: &'static str,
        hint: &'static str,
    },
    /// The server answered in its protocol: a timeout from here on is a
    /// slow server, not a wrong one.
    Heard,
}

tokio::task_local! {
    /// The opening running on this task ([`within`]): where it stands.
    static SILENCE: Cell<Silence>;
}

/// Connected, and now waiting for the server's first word in `protocol`
/// (unless it already spoke). Outside [`within`], nothing.
pub fn awaiting(protocol: &'static str, hint: &'static str) {
    let _ = SILENCE.try_with(|silence| {
        if !matches!(silence.get(), Silence::Heard) {
            silence.set(Silence::Awaiting { protocol, hint });
        }
    });
}

/// The server answered in the protocol expected of it.
pub fn heard() {
    let _ = SILENCE.try_with(|silence| silence.set(Silence::Heard));
}

/// Run `opening` (a connection being opened) for at most `bound`: its
/// outcome, or, if time ran out, what the message should add when the
/// server accepted the connection and then said nothing in its protocol
/// (`None` when it never connected, or the server had spoken).
pub async fn within<T>(
    bound: std::time::Duration, opening: impl std::future::Future<Output = T>,
) -> Result<T, Option<String>> {
    SILENCE
        .scope(Cell::new(Silence::NotYet), async {
            match tokio::time::timeout(bound, opening).await {
                Ok(outcome) => Ok(outcome),
                Err(_) => Err(match SILENCE.try_with(Cell::get).unwrap_or(Silence::NotYet) {
                    Silence::Awaiting { protocol, hint } => Some(format!(
                        "connected, but the server did not speak {protocol}'s protocol in that time ({hint}): is this {protocol}'s port?"
                    )),
                    Silence::NotYet | Silence::Heard => None,
                }),
            }
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bytes_tell_the_usual_other_services_apart() {
        assert!(what_answered(b"HTTP/1.1 400 Bad Request\r\n").contains("HTTP"));
        assert!(what_answered(b"SSH-2.0-OpenSSH_9.2\r\n").contains("SSH"));
        assert!(what_answered(b"\x15\x03\x01\x00\x02\x02\x46").contains("TLS"));
        assert!(what_answered(b"").contains("closed"));
        assert!(what_answered(b"\x00\x01").contains("other"));
    }

    #[tokio::test]
    async fn a_timeout_says_whether_the_server_stayed_silent_after_connecting() {
        let bound = std::time::Duration::from_millis(10);
        let silent = within(bound, async {
            awaiting("Example", "a hint");
            std::future::pending::<()>().await
        })
        .await;
        let said = silent.err().flatten().unwrap_or_default();
        assert!(
            said.contains("did not speak Example's protocol") && said.contains("a hint"),
            "{said}"
        );
        let spoke = within(bound, async {
            awaiting("Example", "a hint");
            heard();
            awaiting("Example", "a hint");
            std::future::pending::<()>().await
        })
        .await;
        assert_eq!(spoke.err(), Some(None));
        let unconnected = within(bound, std::future::pending::<()>()).await;
        assert_eq!(unconnected.err(), Some(None));
        assert_eq!(within(bound, async { 7 }).await, Ok(7));
        // Outside an opening, nothing to record and nothing breaks.
        awaiting("Example", "a hint");
        heard();
    }
}
