//! A new session on an open connection, on Tokio: the startup message,
//! logging in (SCRAM-SHA-256, MD5 or a clear-text password, whichever the
//! server asks), the table made if it is missing, and the statements
//! prepared by name if the server itself serves the session (not a pooler:
//! see the parent module).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{self, ChannelBinding, ScramSha256};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::reply::{row_values, DbError};
use super::target::{failure, lost, not_postgres, Target, POSTGRES_HINT};
use crate::store::event_loop::Failure;
use crate::store::postgres::errors::{code_and_verb, missing_objects};
use crate::store::postgres::sql::Statement;
use crate::store::{peer, Code};

const UNSPOKEN: &str = "the server asks for a login method this store does not speak";

/// How many of the server's first bytes are kept to tell what it is.
const FIRST_BYTES: usize = 16;

fn refused_by(target: &Target, why: &str) -> Failure {
    failure(Code::StoreAuth, "was refused by", target, why)
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
    /// The first bytes the server sent, to tell what it is if it turns out
    /// not to be PostgreSQL.
    first: Vec<u8>,
    /// Whether it answered as PostgreSQL does (a login request or an
    /// error): a failure after that is a PostgreSQL server's, not a
    /// wrong server's.
    heard: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Talk<'_, S> {
    async fn send(&mut self, out: &BytesMut) -> Result<(), Failure> {
        match self.stream.write_all(out).await {
            Ok(()) => Ok(()),
            Err(e) if !self.heard && peer::ended(&e) => Err(self.not_postgres()),
            Err(e) => Err(lost(self.target, &e)),
        }
    }

    async fn next(&mut self) -> Result<Message, Failure> {
        loop {
            match Message::parse(&mut self.inbound) {
                Ok(Some(message)) => return Ok(message),
                Ok(None) => {}
                Err(_) => return Err(self.not_postgres()),
            }
            let before = self.inbound.len();
            match self.stream.read_buf(&mut self.inbound).await {
                Ok(0) => return Err(self.not_postgres()),
                Ok(_) => {}
                Err(e) if !self.heard && peer::ended(&e) => return Err(self.not_postgres()),
                Err(e) => return Err(lost(self.target, &e)),
            }
            if self.first.len() < FIRST_BYTES {
                let new = &self.inbound[before..];
                let room = FIRST_BYTES - self.first.len();
                self.first.extend_from_slice(&new[..new.len().min(room)]);
            }
        }
    }

    /// It answered as PostgreSQL does.
    fn heard(&mut self) {
        self.heard = true;
        peer::heard();
    }

    fn not_postgres(&self) -> Failure {
        if self.heard {
            return failure(
                Code::StoreConnection,
                "lost the connection to",
                self.target,
                "it closed the connection, or answered out of turn, while the session was set up",
            );
        }
        not_postgres(self.target, &self.first)
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
/// were prepared. `heard`: the server already answered as PostgreSQL does
/// (to the request for TLS), so a failure is never put down to its being
/// another kind of server.
pub(super) async fn start<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S, target: &Target, heard: bool,
) -> Result<(Option<i32>, bool), Failure> {
    let mut talk = Talk {
        stream,
        target,
        inbound: BytesMut::with_capacity(4096),
        server_process: None,
        first: Vec::new(),
        heard,
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
    peer::awaiting("PostgreSQL", POSTGRES_HINT);
    log_in(&mut talk).await?;
    talk.until_ready().await?;
    let sql = &target.sql;
    let answer = talk.query(&sql.exists).await?;
    let ready = |column: usize| {
        answer
            .first()
            .and_then(|row| row.get(column))
            .and_then(|v| v.as_deref())
            == Some("t")
    };
    if !ready(0) {
        talk.query(&sql.create).await.map_err(|failure| {
            if failure.code != Code::StorePostgres {
                return failure;
            }
            Failure {
                code: failure.code,
                text: format!("{}; {}", failure.text, missing_objects(&sql.table)),
            }
        })?;
    } else if !ready(1) {
        // Plain locks need no more: a user who may not make these goes on
        // without semaphores and read-write locks, whose operations then fail
        // naming the function they lack.
        let _ = talk.query(&sql.create_holds).await;
    }
    // Nor the line: without it, each waiter waits on its own.
    let line = !ready(0) || ready(2) || talk.query(&sql.create_line).await.is_ok();
    sql.found_line(line);
    let prepared = match talk.server_process {
        Some(process) => {
            serves_us_alone(&mut talk, process).await? && prepare(&mut talk, line).await
        }
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
    talk: &mut Talk<'_, S>, process: i32,
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
async fn prepare<S: AsyncRead + AsyncWrite + Unpin>(talk: &mut Talk<'_, S>, line: bool) -> bool {
    let sql = Arc::clone(&talk.target.sql);
    let mut out = BytesMut::new();
    for (index, text) in sql.statements().iter().enumerate() {
        if !line && Statement::ALL[index].of_the_line() {
            continue;
        }
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
        let message = talk.next().await?;
        // Only these come first from a PostgreSQL server (or a pooler
        // speaking for one); anything else, such as the greeting of a MySQL
        // server on the port, read as a message of its own kind, is not
        // PostgreSQL's answer.
        let expected = matches!(
            message,
            Message::AuthenticationOk
                | Message::AuthenticationCleartextPassword
                | Message::AuthenticationMd5Password(_)
                | Message::AuthenticationSasl(_)
                | Message::AuthenticationSaslContinue(_)
                | Message::AuthenticationSaslFinal(_)
                | Message::AuthenticationKerberosV5
                | Message::AuthenticationScmCredential
                | Message::AuthenticationGss
                | Message::AuthenticationGssContinue(_)
                | Message::AuthenticationSspi
                | Message::ErrorResponse(_)
                | Message::NoticeResponse(_)
                | Message::ParameterStatus(_)
        );
        if !expected {
            return Err(talk.not_postgres());
        }
        talk.heard();
        match message {
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
