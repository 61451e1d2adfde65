//! Opening a connection, what every store on the event loop shares: TCP
//! (no Nagle delay, keepalive), TLS checked against the server's name, and
//! a refusal of our credentials remembered a moment. All on Tokio, before
//! the socket moves to the loop.

use std::future::Future;
use std::sync::Arc;

use super::wire::Failure;
use crate::store::{peer, Code};

/// A TCP connection to `host:port` for the event loop (replies are small and
/// requests go out as soon as they are written: no Nagle delay), or why not,
/// with `server` named as error messages name it.
pub async fn connect_tcp(
    host: &str, port: u16, server: &str,
) -> Result<tokio::net::TcpStream, Failure> {
    let tcp = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| {
            let what = if e.kind() == std::io::ErrorKind::ConnectionRefused {
                "could not connect to"
            } else {
                "could not reach"
            };
            Failure {
                code: Code::StoreConnection,
                text: format!("{what} {server}: {e}"),
            }
        })?;
    let _ = tcp.set_nodelay(true);
    // An idle connection to a host that is gone (or behind a flow a NAT or
    // load balancer dropped) is found out by the kernel within about 30 s,
    // instead of at the next command. Best effort: a platform without it
    // still has the command timeout.
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(std::time::Duration::from_secs(15))
        .with_interval(std::time::Duration::from_secs(5))
        .with_retries(3);
    let _ = socket2::SockRef::from(&tcp).set_tcp_keepalive(&keepalive);
    Ok(tcp)
}

/// TLS on `tcp`, checking the server's certificate for `name`, or why not
/// (with the cause rustls gives only in the error's source:
/// `invalid peer certificate: UnknownIssuer`), `server` named as error
/// messages name it.
pub async fn start_tls(
    config: &Arc<rustls::ClientConfig>, name: &rustls::pki_types::ServerName<'static>,
    tcp: tokio::net::TcpStream, server: &str,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, Failure> {
    let connector = tokio_rustls::TlsConnector::from(Arc::clone(config));
    connector.connect(name.clone(), tcp).await.map_err(|e| {
        let mut why = e.to_string();
        if let Some(inner) = std::error::Error::source(&e) {
            why = format!("{why}: {inner}");
        }
        Failure {
            code: Code::StoreConnection,
            text: format!("could not set up TLS with {server}: {why}"),
        }
    })
}

/// A server's last refusal of our credentials, remembered a moment: no new
/// connection is tried meanwhile, and operations fail with the same error at
/// once, so a wrong password is reported, not hammered at the server.
#[derive(Default)]
pub struct Refusals(std::sync::Mutex<Option<(std::time::Instant, String)>>);

impl Refusals {
    /// How long a refusal is remembered.
    const PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

    /// Open a connection to `server` with `connect`, within `within`;
    /// refused at once while a refusal is remembered, and a refusal
    /// remembered from now.
    pub async fn open<T>(
        &self, server: &str, within: std::time::Duration,
        connect: impl Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        if let Ok(refused) = self.0.lock() {
            if let Some((at, detail)) = refused.as_ref() {
                if at.elapsed() < Self::PAUSE {
                    return Err(Failure {
                        code: Code::StoreAuth,
                        text: format!(
                            "was refused by {server}: {detail} (not tried again for a moment)"
                        ),
                    });
                }
            }
        }
        // A server that accepted the connection and then said nothing is
        // told apart from one that could not be reached: it may be another
        // kind of server, one that waits in silence for its own protocol.
        let outcome = match peer::within(within, connect).await {
            Ok(outcome) => outcome,
            Err(silence) => Err(Failure {
                code: Code::StoreTimeout,
                text: match silence {
                    Some(silence) => format!(
                        "timed out connecting to {server}: within {} ms; {silence}",
                        within.as_millis()
                    ),
                    None => format!(
                        "timed out connecting to {server}: within {} ms",
                        within.as_millis()
                    ),
                },
            }),
        };
        if let Err(failure) = &outcome {
            if failure.code == Code::StoreAuth {
                if let Ok(mut refused) = self.0.lock() {
                    let detail = failure.text.split_once(": ").map_or("", |(_, d)| d);
                    *refused = Some((std::time::Instant::now(), detail.to_owned()));
                }
            }
        }
        outcome
    }
}
