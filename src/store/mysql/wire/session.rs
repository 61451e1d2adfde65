//! Logging in on a greeted connection (the answer to the server's
//! challenge, a switch to another authentication plugin, caching_sha2's
//! fast and full paths), then the session's settings and, once per store,
//! finding or making the store's tables and procedure. On Tokio, before the
//! connection moves to the event loop.

use std::sync::atomic::Ordering;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::auth;
use super::packet::{put_lenenc, put_packet, read_error, Reader, ServerError};
use super::prepared::{read_prepare_ok, COM_STMT_PREPARE};
use super::response::{response, Answer, ServerAnswer};
use super::target::{failure, lost, Target};
use crate::store::event_loop::Failure;
use crate::store::mysql::errors::{code_of, ends_session};
use crate::store::mysql::options::Place;
use crate::store::mysql::sql::Sql;
use crate::store::Code;

// Capability flags (the client's side of the greeting).
pub const LONG_PASSWORD: u32 = 0x1;
/// UPDATE answers the rows it matched, not only those it changed: an
/// extension to the same expiry within a millisecond still says "held".
pub const FOUND_ROWS: u32 = 0x2;
pub const LONG_FLAG: u32 = 0x4;
pub const CONNECT_WITH_DB: u32 = 0x8;
pub const PROTOCOL_41: u32 = 0x200;
pub const SSL: u32 = 0x800;
pub const TRANSACTIONS: u32 = 0x2000;
pub const SECURE_CONNECTION: u32 = 0x8000;
/// A text command may hold several statements (the fence does).
pub const MULTI_STATEMENTS: u32 = 0x1_0000;
pub const MULTI_RESULTS: u32 = 0x2_0000;
/// A prepared CALL may answer several results.
pub const PS_MULTI_RESULTS: u32 = 0x4_0000;
pub const PLUGIN_AUTH: u32 = 0x8_0000;
pub const PLUGIN_AUTH_LENENC_DATA: u32 = 0x20_0000;
/// Result sets end with an OK, not the older EOF packet.
pub const DEPRECATE_EOF: u32 = 0x100_0000;
/// utf8mb4_general_ci: what error messages come back in (keys travel as bytes).
pub const UTF8MB4: u8 = 45;
/// What this store asks of every server (the login over TLS adds [`SSL`]).
pub const CAPABILITIES: u32 = LONG_PASSWORD
    | FOUND_ROWS
    | LONG_FLAG
    | CONNECT_WITH_DB
    | PROTOCOL_41
    | TRANSACTIONS
    | SECURE_CONNECTION
    | MULTI_STATEMENTS
    | MULTI_RESULTS
    | PS_MULTI_RESULTS
    | PLUGIN_AUTH
    | PLUGIN_AUTH_LENENC_DATA
    | DEPRECATE_EOF;
pub const MAX_PACKET: u32 = 0x100_0000;

/// The server's greeting, as far as the login needs it.
pub struct Greeting {
    pub connection_id: u32,
    pub capabilities: u32,
    pub nonce: Vec<u8>,
    pub plugin: String,
}

/// The fixed start of the login (also all of the request to switch to TLS).
pub(super) fn handshake_head(capabilities: u32) -> Vec<u8> {
    let mut head = Vec::with_capacity(32);
    head.extend_from_slice(&capabilities.to_le_bytes());
    head.extend_from_slice(&MAX_PACKET.to_le_bytes());
    head.push(UTF8MB4);
    head.extend_from_slice(&[0; 23]);
    head
}

/// The plugin's answer to `nonce`, for `password`.
fn scramble(plugin: &str, password: &[u8], nonce: &[u8]) -> Option<Vec<u8>> {
    match plugin {
        "mysql_native_password" => Some(auth::native_password(password, nonce)),
        "caching_sha2_password" => Some(auth::caching_sha2(password, nonce)),
        _ => None,
    }
}

/// Log in on a greeted connection (after TLS, if any: then `seq` is 2),
/// then set the session up.
pub(super) async fn login<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S, target: &Target, greeting: &Greeting, seq: u8, secure: bool,
) -> Result<(), Failure> {
    let mut capabilities = if seq == 2 {
        CAPABILITIES | SSL
    } else {
        CAPABILITIES
    };
    if target.database.is_empty() {
        // No database to start in: the table names its own (`db.table`).
        capabilities &= !CONNECT_WITH_DB;
    }
    let password = target.password.as_deref().unwrap_or(&[]);
    let mut plugin = greeting.plugin.clone();
    // A plugin we do not know: answer as mysql_native_password, which the
    // server then asks to switch from if the account uses another.
    let answer = scramble(&plugin, password, &greeting.nonce).unwrap_or_else(|| {
        plugin = "mysql_native_password".to_owned();
        auth::native_password(password, &greeting.nonce)
    });
    let mut response = handshake_head(capabilities);
    response.extend_from_slice(target.user.as_bytes());
    response.push(0);
    put_lenenc(&mut response, answer.len() as u64);
    response.extend_from_slice(&answer);
    if !target.database.is_empty() {
        response.extend_from_slice(target.database.as_bytes());
        response.push(0);
    }
    response.extend_from_slice(plugin.as_bytes());
    response.push(0);
    send(stream, target, seq, &response).await?;
    loop {
        // An answer to the server's packet takes the number after it.
        let (payload, seq) = read_payload(stream, target).await?;
        match payload.first() {
            Some(0x00) => break,
            Some(0xFF) => {
                let error = read_error(&payload);
                let mut refused = refusal(target, &error);
                if error.number == ACCESS_DENIED
                    && target.tls.is_none()
                    && matches!(target.place, Place::Tcp { .. })
                {
                    // MariaDB answers a plain login to a server that takes
                    // TLS only (require_secure_transport) so, too.
                    refused.text.push_str(
                        "; this store spoke plain text, as it does unless the URL's ssl-mode or options.tls asks for TLS, \
                         and a server that takes TLS connections only refuses a plain login so: if it does, add \
                         ?ssl-mode=VERIFY_IDENTITY to the URL (and options.tls.ca for a private CA)",
                    );
                }
                return Err(refused);
            }
            // The account uses another plugin: its name and a new nonce.
            Some(0xFE) => {
                let mut r = Reader::new(&payload[1..]);
                plugin = String::from_utf8_lossy(r.nul_terminated().unwrap_or(&[])).into_owned();
                let nonce = auth::nonce(r.rest());
                let Some(answer) = scramble(&plugin, password, nonce) else {
                    return Err(failure(
                        Code::StoreAuth,
                        "cannot log in to",
                        target,
                        &format!("the account uses the {plugin} plugin; this store speaks mysql_native_password and caching_sha2_password"),
                    ));
                };
                send(stream, target, seq, &answer).await?;
            }
            // caching_sha2_password: 3, the server had the password cached
            // and an OK follows; 4, it wants the password itself.
            Some(0x01) if payload.get(1) == Some(&3) => {}
            Some(0x01) if payload.get(1) == Some(&4) => {
                if !secure {
                    return Err(failure(
                        Code::StoreAuth,
                        "cannot log in to",
                        target,
                        "the account uses caching_sha2_password and the server has not cached its password: connect once over TLS (ssl-mode=REQUIRED or tls), or log in once with another client, so the server caches it",
                    ));
                }
                let mut clear = password.to_vec();
                clear.push(0);
                send(stream, target, seq, &clear).await?;
            }
            _ => {
                return Err(failure(
                    Code::StoreConnection,
                    "could not log in to",
                    target,
                    "it answered the login with something this store does not know",
                ))
            }
        }
    }
    for statement in target.sql.session_settings(target.lock_wait_s) {
        query(stream, target, &statement).await?;
    }
    // The longest command the server reads: a longer one ends the session,
    // and everything in flight on it (`MySql::encode` refuses it instead).
    let most = query(stream, target, "SELECT @@max_allowed_packet").await?;
    target
        .max_allowed_packet
        .store(first_number(&most), Ordering::Relaxed);
    if !target.objects_ready.load(Ordering::Acquire) {
        make_objects(stream, target).await?;
        target.objects_ready.store(true, Ordering::Release);
    }
    Ok(())
}

/// The number in an answer's first column of its first row (0 if none).
fn first_number(answer: &Answer) -> usize {
    answer
        .rows
        .first()
        .and_then(|row| row.first().cloned().flatten())
        .and_then(|n| String::from_utf8_lossy(&n).parse().ok())
        .unwrap_or(0)
}

/// Find the store's objects, and make those missing (a user without the
/// rights to gets an error saying what to run instead).
async fn make_objects<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S, target: &Target,
) -> Result<(), Failure> {
    let found = query(stream, target, &target.sql.exists).await?;
    if first_number(&found) == Sql::OBJECTS {
        return Ok(());
    }
    for statement in target.sql.creates() {
        let made = match exchange(stream, target, statement).await? {
            // Made meanwhile by another process (the procedure has no IF NOT
            // EXISTS before MySQL 8.0.29, so it is not asked for).
            Err(error) if error.number == PROCEDURE_EXISTS => Ok(()),
            answer => answered(target, answer).map(drop),
        };
        if let Err(mut failure) = made {
            if matches!(failure.code, Code::StoreAuth | Code::StoreMysql) {
                // Not the login refused: the objects are missing, which
                // the database's owner fixes once.
                failure.code = Code::StoreMysql;
                let table = &target.sql.table;
                let [line, ear] = &target.sql.line.names;
                let procedure = &target.sql.procedure;
                failure.text = format!(
                    "{}; the tables {table}, {table}_holds, {table}_keys and {table}_line or the procedures \
                     {procedure}, {line} and {ear} are missing and this user could not make them: make them \
                     once as a user who may, with the SQL MySqlLockStore.schema({table:?}) returns",
                    failure.text
                );
            }
            return Err(failure);
        }
    }
    Ok(())
}

/// Prepare the store's statements ([`Sql::prepared`], all sent at once):
/// their numbers, in order; None for one the server would not prepare
/// (`max_prepared_stmt_count` reached, a statement it cannot prepare, a
/// proxy that cannot), which the connection then sends as text.
pub(super) async fn prepare<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S, target: &Target,
) -> Result<Vec<Option<u32>>, Failure> {
    let mut out = Vec::new();
    for text in &target.sql.prepared {
        let mut payload = Vec::with_capacity(1 + text.len());
        payload.push(COM_STMT_PREPARE);
        payload.extend_from_slice(text.as_bytes());
        put_packet(&mut out, 0, &payload);
    }
    stream.write_all(&out).await.map_err(|e| lost(target, &e))?;
    let mut ids = Vec::with_capacity(target.sql.prepared.len());
    for _ in &target.sql.prepared {
        let (payload, _) = read_payload(stream, target).await?;
        if payload.first() == Some(&0xFF) {
            let error = read_error(&payload);
            if ends_session(&error) {
                return Err(refusal(target, &error));
            }
            ids.push(None);
            continue;
        }
        let (id, columns, params) = read_prepare_ok(&payload).ok_or_else(|| {
            failure(
                Code::StoreConnection,
                "could not talk to",
                target,
                "it answered a statement's preparation with something that is not MySQL's",
            )
        })?;
        // Their definitions: nothing the store needs now.
        for _ in 0..u32::from(columns) + u32::from(params) {
            read_payload(stream, target).await?;
        }
        ids.push(Some(id));
    }
    Ok(ids)
}

/// ER_SP_ALREADY_EXISTS.
const PROCEDURE_EXISTS: u16 = 1304;
/// ER_ACCESS_DENIED_ERROR.
const ACCESS_DENIED: u16 = 1045;

/// Run `sql` and wait for its answer (the connection is not shared yet).
pub(in crate::store::mysql) async fn query<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S, target: &Target, sql: &str,
) -> Result<Answer, Failure> {
    let answer = exchange(stream, target, sql).await?;
    answered(target, answer)
}

/// An error the server answered with, as a [`Failure`].
fn answered(target: &Target, answer: ServerAnswer) -> Result<Answer, Failure> {
    answer.map_err(|e| {
        let (code, verb) = code_of(&e);
        failure(code, verb, target, &format!("{} ({})", e.message, e.number))
    })
}

/// Run `sql`: the server's answer, or what kept it from answering.
pub(in crate::store::mysql) async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S, target: &Target, sql: &str,
) -> Result<ServerAnswer, Failure> {
    let mut payload = Vec::with_capacity(sql.len() + 1);
    payload.push(0x03);
    payload.extend_from_slice(sql.as_bytes());
    let mut out = Vec::new();
    put_packet(&mut out, 0, &payload);
    stream.write_all(&out).await.map_err(|e| lost(target, &e))?;
    let mut inbound = Vec::new();
    loop {
        if let Some((answer, _)) = response(&inbound, false)
            .map_err(|why| failure(Code::StoreConnection, "could not talk to", target, &why))?
        {
            return Ok(answer);
        }
        let mut chunk = [0u8; 8192];
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| lost(target, &e))?;
        if n == 0 {
            return Err(lost(target, &std::io::ErrorKind::UnexpectedEof.into()));
        }
        inbound.extend_from_slice(&chunk[..n]);
    }
}

async fn send<S: AsyncWrite + Unpin>(
    stream: &mut S, target: &Target, seq: u8, payload: &[u8],
) -> Result<(), Failure> {
    let mut out = Vec::new();
    put_packet(&mut out, seq, payload);
    stream.write_all(&out).await.map_err(|e| lost(target, &e))
}

/// One whole payload, and the sequence number the answer to it takes.
pub(super) async fn read_payload<S: AsyncRead + Unpin>(
    stream: &mut S, target: &Target,
) -> Result<(Vec<u8>, u8), Failure> {
    let mut payload = Vec::new();
    loop {
        let mut header = [0u8; 4];
        stream
            .read_exact(&mut header)
            .await
            .map_err(|e| lost(target, &e))?;
        let len =
            usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
        let start = payload.len();
        payload.resize(start + len, 0);
        stream
            .read_exact(&mut payload[start..])
            .await
            .map_err(|e| lost(target, &e))?;
        if len < super::packet::MAX_PAYLOAD {
            return Ok((payload, header[3].wrapping_add(1)));
        }
    }
}

/// The server said no at the greeting or the login.
pub(super) fn refusal(target: &Target, error: &ServerError) -> Failure {
    let (code, verb) = code_of(error);
    failure(
        code,
        verb,
        target,
        &format!("{} ({})", error.message, error.number),
    )
}
