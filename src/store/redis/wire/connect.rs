//! Opening a connection, on Tokio: the name looked up, TCP connected, TLS
//! set up, and the server greeted (`AUTH`, `SELECT`, or a `PING` to hear that
//! it is Redis at all). Connecting happens once per connection and may wait
//! on DNS and handshakes, so it runs where waiting is cheap; the connected
//! socket then moves to the JS thread's event loop, which does all the rest.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use redis::{Value, ValueCodec};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::codec::Decoder;

use super::target::{lost, Target};
use crate::store::event_loop::{connect_tcp, Failure, Opened};
use crate::store::redis::errors::reply_meaning;
use crate::store::redis::limits::setting;
use crate::store::{peer, Code};

/// Open a connection to `target`, within its connect timeout.
pub async fn open(target: Arc<Target>) -> Result<Opened<()>, Failure> {
    let within = target.connect_timeout;
    match tokio::time::timeout(within, connect(&target)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Failure {
            code: Code::StoreTimeout,
            text: format!(
                "no answer from {} within {} ms (connecting)",
                target.display,
                within.as_millis()
            ),
        }),
    }
}

async fn connect(target: &Target) -> Result<Opened<()>, Failure> {
    let tcp = connect_tcp(&target.host, target.port, &target.display).await?;
    let Some((config, name)) = &target.tls else {
        let mut tcp = tcp;
        greet(&mut tcp, target, false).await?;
        learn_limits(&mut tcp, target).await?;
        let tcp = tcp.into_std().map_err(|e| lost(target, &e))?;
        return Ok(Opened {
            stream: tcp.into(),
            tls: None,
            server_process: None,
            prepared: (),
        });
    };
    let mut tls = handshake(config, name, tcp, target).await?;
    greet(&mut tls, target, true).await?;
    learn_limits(&mut tls, target).await?;
    let (tcp, session) = tls.into_inner();
    let tcp = tcp.into_std().map_err(|e| lost(target, &e))?;
    Ok(Opened {
        stream: tcp.into(),
        tls: Some(session),
        server_process: None,
        prepared: (),
    })
}

/// Log in and choose the database, or, with neither to do, `PING`: each
/// answer also proves the other end speaks Redis.
async fn greet<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S, target: &Target, tls: bool,
) -> Result<(), Failure> {
    let mut out = Vec::new();
    let mut expected = 0;
    if let Some(password) = &target.password {
        let mut auth = redis::cmd("AUTH");
        if let Some(user) = &target.username {
            auth.arg(user);
        }
        auth.arg(password).write_packed_command(&mut out);
        expected += 1;
    }
    if target.db != 0 {
        redis::cmd("SELECT")
            .arg(target.db)
            .write_packed_command(&mut out);
        expected += 1;
    }
    if expected == 0 {
        redis::cmd("PING").write_packed_command(&mut out);
        expected = 1;
    }
    // What the server sent first, to tell what it is if not Redis.
    let mut first = Vec::new();
    let not_redis = |first: &[u8]| Failure {
        code: Code::StoreConnection,
        text: if tls {
            format!(
                "{} closed the TLS connection before answering (a server that wants a client certificate does this: options.tls.cert and options.tls.key)",
                target.display
            )
        } else {
            format!(
                "{} accepted the connection but did not answer as a Redis server ({}): is this the right host and port?",
                target.display,
                peer::what_answered(first)
            )
        },
    };
    stream
        .write_all(&out)
        .await
        .map_err(|_| not_redis(&first))?;
    let mut codec = ValueCodec::default();
    let mut buffer = BytesMut::with_capacity(256);
    let mut answered = 0;
    while answered < expected {
        match codec.decode(&mut buffer) {
            Ok(Some(Value::ServerError(e))) => {
                let (code, what) = reply_meaning(e.code(), &e.to_string());
                return Err(Failure {
                    code,
                    text: format!("{what} {}: {e}", target.display),
                });
            }
            Ok(Some(_)) => answered += 1,
            Ok(None) => {
                let before = buffer.len();
                match stream.read_buf(&mut buffer).await {
                    Ok(0) | Err(_) => return Err(not_redis(&first)),
                    Ok(_) => {}
                }
                if first.len() < 16 {
                    let new = buffer.get(before..).unwrap_or_default();
                    first.extend_from_slice(&new[..new.len().min(16 - first.len())]);
                }
            }
            Err(_) => return Err(not_redis(&first)),
        }
    }
    Ok(())
}

/// How long a TLS hello may go unanswered before the server is asked, on a
/// connection of its own, whether it speaks plain text: a TLS server
/// answers within a round trip.
const TLS_SILENCE: Duration = Duration::from_millis(250);

/// TLS on `tcp`, or why not. A Redis server without TLS says nothing to a
/// TLS hello (it waits for the end of a line that a hello rarely holds),
/// so `rediss://` for such a server would fail only at the connect timeout,
/// as a timeout. So when the hello goes unanswered for a moment, the
/// server is sent `PING` in plain text on a second connection: a Redis
/// server that answers it there speaks plain text, and that is said at
/// once. (A TLS server that is only slow takes the `PING` as a bad hello
/// and closes that connection; the handshake goes on.)
async fn handshake(
    config: &Arc<ClientConfig>, name: &ServerName<'static>, tcp: tokio::net::TcpStream,
    target: &Target,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, Failure> {
    let no_tls = |what: &str| {
        Failure {
        code: Code::StoreConnection,
        text: format!(
            "could not set up TLS with {}: the server did not answer the TLS handshake ({what}); if it is a Redis server without TLS, use a redis:// URL",
            target.display
        ),
    }
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::clone(config));
    let handshake = connector.connect(name.clone(), tcp);
    let asked = async {
        tokio::time::sleep(TLS_SILENCE.min(target.connect_timeout / 4)).await;
        speaks_plain_redis(&target.host, target.port).await
    };
    let outcome = tokio::select! {
        outcome = handshake => outcome,
        true = asked => {
            return Err(no_tls(
                "it speaks plain text: it answered PING on a plain connection, as a Redis server without TLS does",
            ))
        }
    };
    outcome.map_err(|e| {
        let rustls = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        if let Some(rustls::Error::InvalidMessage(_)) = rustls {
            // Its first bytes were not a TLS record.
            return no_tls("it answered in something other than TLS");
        }
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            return no_tls("it closed the connection");
        }
        Failure {
            code: Code::StoreConnection,
            text: format!("could not set up TLS with {}: {e}", target.display),
        }
    })
}

/// Whether the server at `host:port` answers `PING` in plain text, as
/// Redis does (`+PONG`, or an error such as `-NOAUTH`).
async fn speaks_plain_redis(host: &str, port: u16) -> bool {
    let Ok(mut tcp) = tokio::net::TcpStream::connect((host, port)).await else {
        return false;
    };
    if tcp.write_all(b"PING\r\n").await.is_err() {
        return false;
    }
    let mut first = [0u8; 1];
    matches!(tcp.read(&mut first).await, Ok(1)) && matches!(first[0], b'+' | b'-')
}

/// Ask the server how long a command it reads (`limits`): a user that may
/// not run CONFIG, or a server that renamed it, leaves Redis's defaults.
async fn learn_limits<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S, target: &Target,
) -> Result<(), Failure> {
    let mut out = Vec::new();
    for name in ["proto-max-bulk-len", "client-query-buffer-limit"] {
        redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .write_packed_command(&mut out);
    }
    stream.write_all(&out).await.map_err(|e| lost(target, &e))?;
    let mut codec = ValueCodec::default();
    let mut buffer = BytesMut::with_capacity(256);
    let mut answers = Vec::with_capacity(2);
    while answers.len() < 2 {
        match codec.decode(&mut buffer) {
            Ok(Some(answer)) => answers.push(setting(&answer)),
            Ok(None) => match stream.read_buf(&mut buffer).await {
                Ok(0) => {
                    return Err(lost(
                        target,
                        &std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                    ))
                }
                Ok(_) => {}
                Err(e) => return Err(lost(target, &e)),
            },
            Err(e) => return Err(lost(target, &std::io::Error::other(e.to_string()))),
        }
    }
    target.limits.learned(answers[0], answers[1]);
    Ok(())
}
