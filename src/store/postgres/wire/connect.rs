//! Opening a connection, on Tokio: TCP, TLS when asked for (the server is
//! asked first, as the protocol wants; with `sslmode=prefer`, plain text if
//! it has none), then the session ([`super::session`]). Then the socket
//! moves to the JS thread's event loop.
//!
//! After the server refuses our credentials, no new connection is tried for
//! a second: operations meanwhile fail with the same error at once, so a
//! wrong password is reported, not hammered at the server.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;
use postgres_protocol::message::frontend;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::session::start;
use super::target::{failure, lost, not_postgres, Target, POSTGRES_HINT};
use crate::store::event_loop::{connect_tcp, start_tls, Failure, Opened};
use crate::store::postgres::options::refuses_options;
use crate::store::{peer, Code};

/// Whether a connection prepared the store's statements by name as it
/// opened (a server in front that cannot keep them says no).
pub struct ByName(pub bool);

/// Open a connection to `target`, within its connect timeout.
pub async fn open(target: Arc<Target>) -> Result<Opened<ByName>, Failure> {
    target
        .refused
        .open(&target.display, target.connect_timeout, connect(&target))
        .await
}

async fn connect(target: &Target) -> Result<Opened<ByName>, Failure> {
    let plain = target.refuses_options.load(Ordering::Relaxed);
    match connect_once(target).await {
        Err(failure) if !plain && refuses_options(&failure.text) => {
            target.refuses_options.store(true, Ordering::Relaxed);
            connect_once(target).await
        }
        outcome => outcome,
    }
}

/// The session in plain text; `heard`: the server already answered as
/// PostgreSQL does (N to the request for TLS).
async fn in_plain_text(
    mut tcp: tokio::net::TcpStream, target: &Target, heard: bool,
) -> Result<Opened<ByName>, Failure> {
    let (server_process, prepared) = start(&mut tcp, target, heard).await?;
    let tcp = tcp.into_std().map_err(|e| lost(target, &e))?;
    Ok(Opened {
        stream: tcp.into(),
        tls: None,
        server_process,
        prepared: ByName(prepared),
    })
}

async fn connect_once(target: &Target) -> Result<Opened<ByName>, Failure> {
    let mut tcp = connect_tcp(&target.host, target.port, &target.display).await?;
    let Some((config, name)) = &target.tls else {
        return in_plain_text(tcp, target, false).await;
    };
    let mut ask = BytesMut::new();
    frontend::ssl_request(&mut ask);
    let ended = |e: std::io::Error| {
        if peer::ended(&e) {
            not_postgres(target, &[])
        } else {
            lost(target, &e)
        }
    };
    tcp.write_all(&ask).await.map_err(ended)?;
    peer::awaiting("PostgreSQL", POSTGRES_HINT);
    let mut answer = [0u8; 1];
    match tcp.read(&mut answer).await {
        Ok(0) => return Err(not_postgres(target, &[])),
        Ok(_) => {}
        Err(e) => return Err(ended(e)),
    }
    // A PostgreSQL server answers the request for TLS with one byte: S
    // (yes) or N (no); E only a server too old to know of TLS. Anything
    // else is another kind of server (a MySQL server's greeting, an HTTP
    // server's answer), whose first bytes say which.
    if !matches!(answer[0], b'S' | b'N' | b'E') {
        let mut first = answer.to_vec();
        let mut more = [0u8; 15];
        if let Ok(n) = tcp.try_read(&mut more) {
            first.extend_from_slice(&more[..n]);
        }
        return Err(not_postgres(target, &first));
    }
    peer::heard();
    if answer[0] == b'N' && target.tls_optional {
        // sslmode=prefer, and the server has no TLS: plain text, as libpq does.
        return in_plain_text(tcp, target, true).await;
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
    let (server_process, prepared) = start(&mut tls, target, true).await?;
    let (tcp, session) = tls.into_inner();
    let tcp = tcp.into_std().map_err(|e| lost(target, &e))?;
    Ok(Opened {
        stream: tcp.into(),
        tls: Some(session),
        server_process,
        prepared: ByName(prepared),
    })
}
