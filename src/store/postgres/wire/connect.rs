//! Opening a connection, on Tokio: TCP, TLS when asked for (the server is
//! asked first, as the protocol wants), the startup message, logging in
//! (SCRAM-SHA-256, MD5 or a clear-text password, whichever the server
//! asks), and the table made if it is missing (nothing is prepared: each
//! operation parses its own statement, see the parent module). Then the
//! socket moves to the JS thread's event loop.
//!
//! After the server refuses our credentials, no new connection is tried for
//! a second: operations meanwhile fail with the same error at once, so a
//! wrong password is reported, not hammered at the server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{self, ChannelBinding, ScramSha256};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{row_values, DbError};
use crate::store::direct::{connect_tcp, Failure, Opened};
use crate::store::postgres::errors::code_and_verb;
use crate::store::postgres::options::refuses_options;
use crate::store::postgres::sql::Sql;

/// How long a refusal of our credentials is remembered.
const REFUSAL_PAUSE: Duration = Duration::from_secs(1);

/// Where and how to connect; made once per store.
pub struct Target {
    pub host: String,
    pub port: u16,
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
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
    pub refused: Mutex<Option<(Instant, String)>>,
}

/// Open a connection to `target`, within its connect timeout.
pub async fn open(target: Arc<Target>) -> Result<Opened, Failure> {
    if let Ok(refused) = target.refused.lock() {
        if let Some((at, detail)) = refused.as_ref() {
            if at.elapsed() < REFUSAL_PAUSE {
                return Err(Failure {
                    code: "ERR_LOCK_STORE_AUTH",
                    text: format!(
                        "was refused by {}: {detail} (not tried again for a moment)",
                        target.display
                    ),
                });
            }
        }
    }
    let within = target.connect_timeout;
    let outcome = match tokio::time::timeout(within, connect(&target)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Failure {
            code: "ERR_LOCK_STORE_TIMEOUT",
            text: format!(
                "timed out connecting to {}: within {} ms",
                target.display,
                within.as_millis()
            ),
        }),
    };
    if let Err(failure) = &outcome {
        if failure.code == "ERR_LOCK_STORE_AUTH" {
            if let Ok(mut refused) = target.refused.lock() {
                let detail = failure.text.split_once(": ").map_or("", |(_, d)| d);
                *refused = Some((Instant::now(), detail.to_owned()));
            }
        }
    }
    outcome
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

async fn connect_once(target: &Target) -> Result<Opened, Failure> {
    let mut tcp = connect_tcp(&target.host, target.port, &target.display).await?;
    let Some((config, name)) = &target.tls else {
        let (server_process, prepared) = start(&mut tcp, target).await?;
        let tcp = tcp.into_std().map_err(|e| lost(target, &e))?;
        return Ok(Opened {
            tcp,
            tls: None,
            server_process,
            prepared,
        });
    };
    let mut ask = BytesMut::new();
    frontend::ssl_request(&mut ask);
    tcp.write_all(&ask).await.map_err(|e| lost(target, &e))?;
    let mut answer = [0u8; 1];
    tcp.read_exact(&mut answer)
        .await
        .map_err(|e| lost(target, &e))?;
    if answer[0] != b'S' {
        return Err(failure(
            "ERR_LOCK_STORE_CONNECTION",
            "could not set up TLS with",
            target,
            "the server does not accept TLS connections",
        ));
    }
    let connector = tokio_rustls::TlsConnector::from(Arc::clone(config));
    let mut tls = connector.connect(name.clone(), tcp).await.map_err(|e| {
        let mut why = e.to_string();
        if let Some(inner) = std::error::Error::source(&e) {
            why = format!("{why}: {inner}");
        }
        failure(
            "ERR_LOCK_STORE_CONNECTION",
            "could not set up TLS with",
            target,
            &why,
        )
    })?;
    let (server_process, prepared) = start(&mut tls, target).await?;
    let (tcp, session) = tls.into_inner();
    let tcp = tcp.into_std().map_err(|e| lost(target, &e))?;
    Ok(Opened {
        tcp,
        tls: Some(session),
        server_process,
        prepared,
    })
}

fn failure(code: &'static str, verb: &str, target: &Target, detail: &str) -> Failure {
    Failure {
        code,
        text: format!("{verb} {}: {detail}", target.display),
    }
}

fn lost(target: &Target, e: &std::io::Error) -> Failure {
    failure(
        "ERR_LOCK_STORE_CONNECTION",
        "lost the connection to",
        target,
        &e.to_string(),
    )
}

const UNSPOKEN: &str = "the server asks for a login method this store does not speak";

fn refused_by(target: &Target, why: &str) -> Failure {
    failure("ERR_LOCK_STORE_AUTH", "was refused by", target, why)
}

fn refused(target: &Target, e: &DbError) -> Failure {
    let (code, verb) = code_and_verb(&e.code);
    failure(
        code,
        verb,
        target,
        &format!("{}: {}", e.severity, e.message),
    )
}

/// A connection being set up: messages out, messages in.
struct Talk<'a, S> {
    stream: &'a mut S,
    target: &'a Target,
    inbound: BytesMut,
    /// The server process serving the session, as the server named it.
    server_process: Option<i32>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Talk<'_, S> {
    async fn send(&mut self, out: &BytesMut) -> Result<(), Failure> {
        self.stream
            .write_all(out)
            .await
            .map_err(|e| lost(self.target, &e))
    }

    async fn next(&mut self) -> Result<Message, Failure> {
        loop {
            match Message::parse(&mut self.inbound) {
                Ok(Some(message)) => return Ok(message),
                Ok(None) => {}
                Err(_) => return Err(self.not_postgres()),
            }
            match self.stream.read_buf(&mut self.inbound).await {
                Ok(0) => return Err(self.not_postgres()),
                Ok(_) => {}
                Err(e) => return Err(lost(self.target, &e)),
            }
        }
    }

    fn not_postgres(&self) -> Failure {
        failure(
            "ERR_LOCK_STORE_CONNECTION",
            "could not talk to",
            self.target,
            "it closed the connection or did not answer as a PostgreSQL server",
        )
    }

    /// Read up to ReadyForQuery; the first error the server reported fails it.
    async fn until_ready(&mut self) -> Result<Vec<Vec<Option<String>>>, Failure> {
        let mut rows = Vec::new();
        let mut error = None;
        loop {
            match self.next().await? {
                Message::ReadyForQuery(_) => break,
                Message::ErrorResponse(body) => {
                    let e = DbError::read(body.fields());
                    if matches!(e.severity.as_str(), "FATAL" | "PANIC") {
                        return Err(refused(self.target, &e));
                    }
                    error.get_or_insert(e);
                }
                Message::DataRow(row) => rows.push(row_values(&row)),
                Message::BackendKeyData(key) => self.server_process = Some(key.process_id()),
                _ => {}
            }
        }
        match error {
            Some(e) => Err(refused(self.target, &e)),
            None => Ok(rows),
        }
    }

    async fn query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, Failure> {
        let mut out = BytesMut::new();
        frontend::query(sql, &mut out).map_err(|e| lost(self.target, &e))?;
        self.send(&out).await?;
        self.until_ready().await
    }
}

/// Startup, log in, make the table if missing, and prepare the statements
/// if the server itself is on the other end. Returns the server process
/// serving the session, as the server named it, and whether the statements
/// were prepared.
async fn start<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    target: &Target,
) -> Result<(Option<i32>, bool), Failure> {
    let mut talk = Talk {
        stream,
        target,
        inbound: BytesMut::with_capacity(4096),
        server_process: None,
    };
    let mut out = BytesMut::new();
    let mut parameters = vec![
        ("user", target.user.as_str()),
        ("database", target.database.as_str()),
    ];
    let plain = target.refuses_options.load(Ordering::Relaxed);
    parameters.extend(
        target
            .parameters
            .iter()
            .filter(|(k, _)| !plain || k != "options")
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    if let (true, Some(options)) = (plain, &target.plain_options) {
        parameters.push(("options", options));
    }
    frontend::startup_message(parameters, &mut out).map_err(|e| lost(target, &e))?;
    talk.send(&out).await?;
    log_in(&mut talk).await?;
    talk.until_ready().await?;
    let sql = &target.sql;
    let exists = talk.query(&sql.exists).await?;
    if exists
        .first()
        .and_then(|row| row.first())
        .and_then(|v| v.as_deref())
        != Some("t")
    {
        talk.query(&sql.create).await?;
    }
    let prepared = match talk.server_process {
        Some(process) => serves_us_alone(&mut talk, process).await? && prepare(&mut talk).await,
        None => false,
    };
    Ok((talk.server_process, prepared))
}

/// Whether the session is the server's own, not a pooler's: PostgreSQL names
/// the process serving it in its BackendKeyData, and a pooler (PgBouncer and
/// its kin) sends a key of its own instead, as it hands each client's
/// statements to whichever server connection is free. Only in the server's
/// own session does a statement prepared by name stay where it was prepared.
async fn serves_us_alone<S: AsyncRead + AsyncWrite + Unpin>(
    talk: &mut Talk<'_, S>,
    process: i32,
) -> Result<bool, Failure> {
    let rows = talk.query("SELECT pg_backend_pid()").await?;
    let serving = rows
        .first()
        .and_then(|row| row.first())
        .and_then(|v| v.as_deref());
    Ok(serving == Some(process.to_string().as_str()))
}

/// Prepare every statement under its name ([`Sql::statement_name`]); false
/// if the server refused any (then each operation parses its own).
async fn prepare<S: AsyncRead + AsyncWrite + Unpin>(talk: &mut Talk<'_, S>) -> bool {
    let sql = Arc::clone(&talk.target.sql);
    let mut out = BytesMut::new();
    for (index, text) in sql.statements().iter().enumerate() {
        if frontend::parse(
            sql.statement_name(index),
            text,
            std::iter::empty(),
            &mut out,
        )
        .is_err()
        {
            return false;
        }
    }
    frontend::sync(&mut out);
    talk.send(&out).await.is_ok() && talk.until_ready().await.is_ok()
}

async fn log_in<S: AsyncRead + AsyncWrite + Unpin>(talk: &mut Talk<'_, S>) -> Result<(), Failure> {
    let target = talk.target;
    let password = || {
        target.password.as_deref().ok_or_else(|| {
            refused_by(
                target,
                "the server asks for a password and the URL has none",
            )
        })
    };
    let mut scram: Option<ScramSha256> = None;
    loop {
        let mut out = BytesMut::new();
        match talk.next().await? {
            Message::AuthenticationOk => return Ok(()),
            Message::AuthenticationCleartextPassword => {
                frontend::password_message(password()?, &mut out).map_err(|e| lost(target, &e))?;
            }
            Message::AuthenticationMd5Password(body) => {
                let hash = md5_hash(target.user.as_bytes(), password()?, body.salt());
                frontend::password_message(hash.as_bytes(), &mut out)
                    .map_err(|e| lost(target, &e))?;
            }
            Message::AuthenticationSasl(body) => {
                use fallible_iterator::FallibleIterator;
                let mut offered = false;
                let mut mechanisms = body.mechanisms();
                while let Ok(Some(mechanism)) = mechanisms.next() {
                    offered |= mechanism == sasl::SCRAM_SHA_256;
                }
                if !offered {
                    return Err(refused_by(target, UNSPOKEN));
                }
                let exchange = ScramSha256::new(password()?, ChannelBinding::unsupported());
                frontend::sasl_initial_response(sasl::SCRAM_SHA_256, exchange.message(), &mut out)
                    .map_err(|e| lost(target, &e))?;
                scram = Some(exchange);
            }
            Message::AuthenticationSaslContinue(body) => {
                let exchange = scram.as_mut().ok_or_else(|| talk.not_postgres())?;
                exchange
                    .update(body.data())
                    .map_err(|e| refused_by(target, &e.to_string()))?;
                frontend::sasl_response(exchange.message(), &mut out)
                    .map_err(|e| lost(target, &e))?;
            }
            Message::AuthenticationSaslFinal(body) => {
                let exchange = scram.as_mut().ok_or_else(|| talk.not_postgres())?;
                exchange
                    .finish(body.data())
                    .map_err(|e| refused_by(target, &e.to_string()))?;
                continue;
            }
            Message::ErrorResponse(body) => {
                return Err(refused(target, &DbError::read(body.fields())))
            }
            Message::NoticeResponse(_) | Message::ParameterStatus(_) => continue,
            _ => return Err(refused_by(target, UNSPOKEN)),
        }
        talk.send(&out).await?;
    }
}
