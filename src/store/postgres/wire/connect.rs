//! Opening a connection, on Tokio: TCP, TLS when asked for (the server is
//! asked first, as the protocol wants; with `sslmode=prefer`, plain text if
//! it has none), then the session ([`super::session`]). Then the socket
//! moves to the JS thread's event loop.
//!
//! After the server refuses our credentials, no new connection is tried for
//! a second: operations meanwhile fail with the same error at once, so a
//! wrong password is reported, not hammered at the server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use postgres_protocol::message::frontend;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::session::start;
use crate::store::event_loop::{connect_tcp, start_tls, Failure, Opened, Prepared, Refusals};
use crate::store::postgres::options::refuses_options;
use crate::store::postgres::sql::Sql;
use crate::store::Code;

/// Where and how to connect; made once per store.
pub struct Target {
    pub host: String,
    pub port: u16,
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    /// sslmode=prefer: a server that does not accept TLS is spoken to in plain text.
    pub tls_optional: bool,
    pub user: String,
    pub password: Option<Vec<u8>>,
    pub database: String,
    /// The startup parameters beyond user and database (options, application_name).
    pub parameters: Vec<(String, String)>,
    /// `options` without the store's settings, for a server that refuses
    /// them (see `options::refuses_options`), and whether it did.
    pub plain_options: Option<String>,
    pub refuses_options: AtomicBool,
    pub connect_timeout: Duration,
    /// The server as error messages name it: `postgres://user@host:port/db`.
    pub display: String,
    pub sql: Arc<Sql>,
    /// The last refusal of our credentials, and what the server said.
    pub refused: Refusals,
}

/// Open a connection to `target`, within its connect timeout.
pub async fn open(target: Arc<Target>) -> Result<Opened, Failure> {
    target
        .refused
        .open(&target.display, target.connect_timeout, connect(&target))
        .await
}

async fn connect(target: &Target) -> Result<Opened, Failure> {
    let plain = target.refuses_options.load(Ordering::Relaxed);
    match connect_once(target).await {
        Err(failure) if !plain && refuses_options(&failure.text) => {
            target.refuses_options.store(true, Ordering::Relaxed);
            connect_once(target).await
        }
        outcome => outcome,
    }
}

async fn in_plain_text(mut tcp: tokio::net::TcpStream, target: &Target) -> Result<Opened, Failure> {
    let (server_process, prepared) = start(&mut tcp, target).await?;
    let tcp = tcp.into_std().map_err(|e| lost(target, &e))?;
    Ok(Opened {
        tcp,
        tls: None,
        server_process,
        prepared: if prepared {
            Prepared::ByName
        } else {
            Prepared::Nothing
        },
    })
}

async fn connect_once(target: &Target) -> Result<Opened, Failure> {
    let mut tcp = connect_tcp(&target.host, target.port, &target.display).await?;
    let Some((config, name)) = &target.tls else {
        return in_plain_text(tcp, target).await;
    };
    let mut ask = BytesMut::new();
    frontend::ssl_request(&mut ask);
    tcp.write_all(&ask).await.map_err(|e| lost(target, &e))?;
    let mut answer = [0u8; 1];
    tcp.read_exact(&mut answer)
        .await
        .map_err(|e| lost(target, &e))?;
    if answer[0] == b'N' && target.tls_optional {
        // sslmode=prefer, and the server has no TLS: plain text, as libpq does.
        return in_plain_text(tcp, target).await;
    }
    if answer[0] != b'S' {
        return Err(failure(
            Code::StoreConnection,
            "could not set up TLS with",
            target,
            "the server does not accept TLS connections",
        ));
    }
    let mut tls = start_tls(config, name, tcp, &target.display).await?;
    let (server_process, prepared) = start(&mut tls, target).await?;
    let (tcp, session) = tls.into_inner();
    let tcp = tcp.into_std().map_err(|e| lost(target, &e))?;
    Ok(Opened {
        tcp,
        tls: Some(session),
        server_process,
        prepared: if prepared {
            Prepared::ByName
        } else {
            Prepared::Nothing
        },
    })
}

pub(super) fn failure(code: Code, verb: &str, target: &Target, detail: &str) -> Failure {
    Failure {
        code,
        text: format!("{verb} {}: {detail}", target.display),
    }
}

pub(super) fn lost(target: &Target, e: &std::io::Error) -> Failure {
    failure(
        Code::StoreConnection,
        "lost the connection to",
        target,
        &e.to_string(),
    )
}
