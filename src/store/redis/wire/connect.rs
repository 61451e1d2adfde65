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

use crate::store::event_loop::{connect_tcp, Failure, Opened, Prepared};
use crate::store::redis::errors::reply_meaning;
use crate::store::Code;

/// Where and how to connect; made once per store.
pub struct Target {
    pub host: String,
    pub port: u16,
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: i64,
    pub connect_timeout: Duration,
    /// The server as error messages name it (no password).
    pub display: String,
}

/// Open a connection to `target`, within its connect timeout.
pub async fn open(target: Arc<Target>) -> Result<Opened, Failure> {
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

async fn connect(target: &Target) -> Result<Opened, Failure> {
    let tcp = connect_tcp(&target.host, target.port, &target.display).await?;
    let Some((config, name)) = &target.tls else {
        let mut tcp = tcp;
        greet(&mut tcp, target, false).await?;
        let tcp = tcp.into_std().map_err(|e| lost(target, &e))?;
        return Ok(Opened {
            tcp,
            tls: None,
            server_process: None,
            prepared: Prepared::Nothing,
        });
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::clone(config));
    let mut tls = connector
        .connect(name.clone(), tcp)
        .await
        .map_err(|e| Failure {
            code: Code::StoreConnection,
            text: format!("could not set up TLS with {}: {e}", target.display),
        })?;
    greet(&mut tls, target, true).await?;
    let (tcp, session) = tls.into_inner();
    let tcp = tcp.into_std().map_err(|e| lost(target, &e))?;
    Ok(Opened {
        tcp,
        tls: Some(session),
        server_process: None,
        prepared: Prepared::Nothing,
    })
}

fn lost(target: &Target, e: &std::io::Error) -> Failure {
    Failure {
        code: Code::StoreConnection,
        text: format!("lost the connection to {}: {e}", target.display),
    }
}

/// Log in and choose the database, or, with neither to do, `PING`: each
/// answer also proves the other end speaks Redis.
async fn greet<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    target: &Target,
    tls: bool,
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
    let not_redis = || Failure {
        code: Code::StoreConnection,
        text: if tls {
            format!(
                "{} closed the TLS connection before answering (a server that wants a client certificate does this: options.tls.cert and options.tls.key)",
                target.display
            )
        } else {
            format!(
                "{} accepted the connection but did not answer as a Redis server (is this the right host and port?)",
                target.display
            )
        },
    };
    stream.write_all(&out).await.map_err(|_| not_redis())?;
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
            Ok(None) => match stream.read_buf(&mut buffer).await {
                Ok(0) | Err(_) => return Err(not_redis()),
                Ok(_) => {}
            },
            Err(_) => return Err(not_redis()),
        }
    }
    Ok(())
}
