//! Opening a connection, on Tokio: TCP, the server's greeting, TLS when
//! asked for (MySQL switches to it mid-greeting), the login, then the
//! session's settings and, once per store, the tables and procedure the
//! store needs. Then the socket moves to the JS thread's event loop.
//!
//! After the server refuses our credentials, no new connection is tried for
//! a second: operations meanwhile fail with the same error at once, so a
//! wrong password is reported, not hammered at the server.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::auth;
use super::packet::{put_packet, read_error, Reader};
use super::session::{handshake_head, login, prepare, refusal, Greeting};
use super::session::{
    CAPABILITIES, DEPRECATE_EOF, PLUGIN_AUTH, PROTOCOL_41, SECURE_CONNECTION, SSL,
};
use super::target::{failure, lost, Target};
use super::StatementIds;
use crate::store::event_loop::{connect_tcp, start_tls, Failure, Opened};
use crate::store::mysql::options::Place;
#[cfg(not(unix))]
use crate::store::options::unix_socket_refused;
use crate::store::{peer, Code};

/// Open a connection to `target` for the event loop, and prepare the
/// store's statements on it, within its connect timeout.
pub async fn open(target: Arc<Target>) -> Result<Opened<StatementIds>, Failure> {
    let ready = async {
        let (mut connected, connection_id) = connect(&target).await?;
        let ids = match &mut connected {
            Connected::Tcp(tcp) => prepare(tcp, &target).await?,
            Connected::Tls(tls) => prepare(tls, &target).await?,
            #[cfg(unix)]
            Connected::Unix(unix) => prepare(unix, &target).await?,
        };
        Ok((connected, connection_id, ids))
    };
    let (connected, connection_id, ids) = target
        .refused
        .open(&target.display, target.connect_timeout, ready)
        .await?;
    let server_process = i32::try_from(connection_id).ok();
    let (stream, tls) = match connected {
        Connected::Tcp(tcp) => (tcp.into_std().map_err(|e| lost(&target, &e))?.into(), None),
        Connected::Tls(tls) => {
            let (tcp, session) = (*tls).into_inner();
            let tcp = tcp.into_std().map_err(|e| lost(&target, &e))?;
            (tcp.into(), Some(session))
        }
        // (A unix socket has no local port, so a silent connection is given
        // up without the fence.)
        #[cfg(unix)]
        Connected::Unix(unix) => (
            crate::store::event_loop::Stream::Unix(unix.into_std().map_err(|e| lost(&target, &e))?),
            None,
        ),
    };
    Ok(Opened {
        stream,
        tls,
        server_process,
        prepared: ids,
    })
}

/// A connection that is logged in and set up, on Tokio, in whichever form
/// it took; and its id on the server.
pub enum Connected {
    Tcp(tokio::net::TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>),
    /// A server on this machine, through its unix socket (where MySQL
    /// speaks no TLS, and counts the connection as secure). None on
    /// Windows, where the URL that asks for one is refused when the store
    /// is made.
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

/// Connect and log in, within the connect timeout; a refusal of our
/// credentials is remembered a moment (see the module doc).
pub async fn logged_in(target: &Target) -> Result<(Connected, u32), Failure> {
    target
        .refused
        .open(&target.display, target.connect_timeout, connect(target))
        .await
}

async fn connect(target: &Target) -> Result<(Connected, u32), Failure> {
    let (host, port) = match &target.place {
        Place::Tcp { host, port } => (host, *port),
        #[cfg(unix)]
        Place::Socket(path) => {
            let mut unix = tokio::net::UnixStream::connect(path)
                .await
                .map_err(|e| Failure {
                    code: Code::StoreConnection,
                    text: format!("could not connect to {}: {e}", target.display),
                })?;
            let greeting = greeting(&mut unix, target).await?;
            login(&mut unix, target, &greeting, 1, true).await?;
            return Ok((Connected::Unix(unix), greeting.connection_id));
        }
        // Refused when the store was made (`options::address`); said again
        // here rather than assumed.
        #[cfg(not(unix))]
        Place::Socket(path) => {
            let why = unix_socket_refused(&format!("socket={path}")).unwrap_or_default();
            return Err(failure(
                Code::StoreConnection,
                "cannot connect to",
                target,
                &why,
            ));
        }
    };
    let mut tcp = connect_tcp(host, port, &target.display).await?;
    let greeting = greeting(&mut tcp, target).await?;
    let id = greeting.connection_id;
    let Some((config, name)) = &target.tls else {
        login(&mut tcp, target, &greeting, 1, false).await?;
        return Ok((Connected::Tcp(tcp), id));
    };
    if greeting.capabilities & SSL == 0 {
        if target.tls_optional {
            login(&mut tcp, target, &greeting, 1, false).await?;
            return Ok((Connected::Tcp(tcp), id));
        }
        return Err(failure(
            Code::StoreConnection,
            "could not set up TLS with",
            target,
            "the server does not accept TLS connections",
        ));
    }
    let mut ask = Vec::new();
    put_packet(&mut ask, 1, &handshake_head(CAPABILITIES | SSL));
    tcp.write_all(&ask).await.map_err(|e| lost(target, &e))?;
    let mut tls = start_tls(config, name, tcp, &target.display).await?;
    login(&mut tls, target, &greeting, 2, true).await?;
    Ok((Connected::Tls(Box::new(tls)), id))
}

/// What a MySQL server does that others on its port do not, for the
/// message when the server there says nothing.
const MYSQL_HINT: &str = "a MySQL server that is up greets at once; a Redis or PostgreSQL server, or an HTTP server, says nothing to a MySQL client";

/// The longest greeting read: a server's is about a hundred bytes (its
/// version, a nonce, a plugin's name). Longer is another kind of server,
/// whose first bytes read as a length of megabytes (`HTTP` is 5 MB).
const LONGEST_GREETING: usize = 4096;

/// The server's first packet: its greeting, or an error (too many
/// connections, a host not allowed), or the finding that it is not MySQL.
async fn greeting_payload<S: AsyncRead + Unpin>(
    stream: &mut S, target: &Target,
) -> Result<Vec<u8>, Failure> {
    peer::awaiting("MySQL", MYSQL_HINT);
    let mut first = Vec::with_capacity(16);
    let mut header = [0u8; 4];
    while first.len() < header.len() {
        let mut chunk = [0u8; 4];
        let want = header.len() - first.len();
        match stream.read(&mut chunk[..want]).await {
            Ok(0) => return Err(not_mysql(target, &first)),
            Ok(n) => first.extend_from_slice(&chunk[..n]),
            Err(e) if peer::ended(&e) => return Err(not_mysql(target, &first)),
            Err(e) => return Err(lost(target, &e)),
        }
    }
    header.copy_from_slice(&first);
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    // A greeting is the first packet (sequence 0) and short.
    if header[3] != 0 || len == 0 || len > LONGEST_GREETING {
        // A moment for the rest of what it sent, to tell what it is by.
        let mut more = [0u8; 12];
        let wait = std::time::Duration::from_millis(50);
        if let Ok(Ok(n)) = tokio::time::timeout(wait, stream.read(&mut more)).await {
            first.extend_from_slice(&more[..n]);
        }
        return Err(not_mysql(target, &first));
    }
    let mut payload = vec![0u8; len];
    stream
        .read_exact(&mut payload)
        .await
        .map_err(|_| not_mysql(target, &first))?;
    first.extend_from_slice(&payload[..len.min(12)]);
    if !matches!(payload[0], 10 | 0xFF) {
        return Err(not_mysql(target, &first));
    }
    peer::heard();
    Ok(payload)
}

/// The server on the port is not MySQL, as its first bytes (`first`) show.
fn not_mysql(target: &Target, first: &[u8]) -> Failure {
    failure(
        Code::StoreConnection,
        "could not talk to",
        target,
        &format!(
            "the server did not speak MySQL's protocol ({}): is this MySQL's port?",
            peer::what_answered(first)
        ),
    )
}

async fn greeting<S: AsyncRead + Unpin>(
    stream: &mut S, target: &Target,
) -> Result<Greeting, Failure> {
    let payload = greeting_payload(stream, target).await?;
    if payload.first() == Some(&0xFF) {
        return Err(refusal(target, &read_error(&payload)));
    }
    let bad = || {
        failure(
            Code::StoreConnection,
            "could not talk to",
            target,
            "the server did not speak MySQL's protocol (its greeting is cut short)",
        )
    };
    let mut r = Reader::new(&payload);
    if r.u8() != Some(10) {
        return Err(bad());
    }
    r.nul_terminated().ok_or_else(bad)?; // server version
    let connection_id = r.u32().ok_or_else(bad)?;
    let mut nonce = r.take(8).ok_or_else(bad)?.to_vec();
    r.u8().ok_or_else(bad)?;
    let low = u32::from(r.u16().ok_or_else(bad)?);
    r.u8().ok_or_else(bad)?; // character set
    r.u16().ok_or_else(bad)?; // status
    let high = u32::from(r.u16().ok_or_else(bad)?);
    let capabilities = low | high << 16;
    let data_len = usize::from(r.u8().ok_or_else(bad)?);
    r.take(10).ok_or_else(bad)?;
    if capabilities & SECURE_CONNECTION != 0 {
        let more = data_len.saturating_sub(8).max(13);
        nonce.extend_from_slice(auth::nonce(r.take(more).ok_or_else(bad)?));
    }
    let missing = (PROTOCOL_41 | DEPRECATE_EOF | PLUGIN_AUTH | SECURE_CONNECTION) & !capabilities;
    if missing != 0 {
        return Err(failure(
            Code::StoreConnection,
            "cannot use",
            target,
            "the server is older than MySQL 5.7 and MariaDB 10.2 (it lacks protocol features this store needs)",
        ));
    }
    let plugin = if capabilities & PLUGIN_AUTH != 0 {
        let name = r.nul_terminated().unwrap_or_else(|| r.rest());
        String::from_utf8_lossy(name).into_owned()
    } else {
        "mysql_native_password".to_owned()
    };
    Ok(Greeting {
        connection_id,
        capabilities,
        nonce,
        plugin,
    })
}
