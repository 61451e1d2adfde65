//! PostgreSQL on the JS thread's event loop ([`crate::store::event_loop`]):
//! each operation is the extended protocol's Parse, Bind, Execute and Sync
//! of the unnamed statement, written at once (one round trip), so it is its
//! own transaction, an error in it touches nothing sent after it, and many
//! are in flight on one connection at once. Nothing is prepared by name: a
//! pooler in transaction mode (PgBouncer) hands each transaction whichever
//! server connection is free, and a statement prepared on one would be
//! missing on the next, or be another store's of the same name. Parameters
//! and results travel as text. How a connection is opened and logged in:
//! [`connect`].

pub mod connect;
mod session;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::BytesMut;
use postgres_protocol::message::backend::{DataRowBody, ErrorFields, Message};

use self::connect::Target;
use super::errors::RESENDS;
use super::sql::Sql;
use crate::store::event_loop::{self, Failure, Opened, Verdict, Wire};

/// The statements of the store's operations (the text is the table's: [`Sql`]).
#[derive(Clone, Copy, Debug)]
pub enum Statement {
    Acquire,
    Release,
    Extend,
    IsLocked,
    RemainingTime,
    Holds,
    Sweep,
    Hold,
    /// The fence after a connection went silent ([`Wire::fence`]).
    EndSession,
}

impl Statement {
    fn text(self, sql: &Sql) -> &str {
        sql.statements()[self as usize]
    }
}

pub struct Request {
    /// The store operation it serves, for error messages.
    pub name: &'static str,
    pub statement: Statement,
    /// The statements' text for the store's table.
    pub sql: Arc<Sql>,
    pub params: Vec<String>,
}

/// What the server answered a statement with.
pub type Answer = Result<Rows, DbError>;

/// The rows a statement returned (text columns; None is NULL), and how many
/// rows it changed.
#[derive(Default, Debug)]
pub struct Rows {
    pub rows: Vec<Vec<Option<String>>>,
    pub changed: u64,
}

impl Rows {
    /// The first column of the first row, if any row came back.
    pub fn first(&self) -> Option<Option<&str>> {
        self.rows
            .first()
            .map(|row| row.first().and_then(|v| v.as_deref()))
    }
}

/// An error the server reported: its severity, SQLSTATE and message.
#[derive(Debug, Clone)]
pub struct DbError {
    pub severity: String,
    pub code: String,
    pub message: String,
}

impl DbError {
    fn read(mut fields: ErrorFields<'_>) -> DbError {
        use fallible_iterator::FallibleIterator;
        let mut error = DbError {
            severity: "ERROR".to_owned(),
            code: String::new(),
            message: String::new(),
        };
        while let Ok(Some(field)) = fields.next() {
            let value = String::from_utf8_lossy(field.value_bytes()).into_owned();
            match field.type_() {
                b'V' => error.severity = value,
                b'C' => error.code = value,
                b'M' => error.message = value,
                _ => {}
            }
        }
        error
    }

    /// The session is ending (the server is shutting down, or killed it).
    pub fn ends_session(&self) -> bool {
        matches!(self.severity.as_str(), "FATAL" | "PANIC") || self.code.starts_with("57P")
    }
}

/// A connection's state: whether it prepared the statements by name, and
/// what has come so far for the statement at the head.
#[derive(Default)]
pub struct Session {
    prepared: bool,
    answer: Partial,
}

/// A half-read answer.
#[derive(Default)]
struct Partial {
    rows: Rows,
    error: Option<DbError>,
}

pub struct Postgres;

impl Wire for Postgres {
    type Target = Target;
    type Request = Request;
    type Answer = Answer;
    type Session = Session;

    const STORE: &'static str = "PostgresLockStore";
    const RESOURCE: &'static std::ffi::CStr = c"keel-lock:postgres";
    const RESENDS: u32 = RESENDS;

    fn connect_timeout_ms(target: &Target) -> u64 {
        u64::try_from(target.connect_timeout.as_millis()).unwrap_or(u64::MAX)
    }

    fn display(target: &Target) -> &str {
        &target.display
    }

    fn name(request: &Request) -> &'static str {
        request.name
    }

    fn begin(session: &mut Session, prepared: bool) {
        session.prepared = prepared;
    }

    fn encode(session: &mut Session, request: &Request, out: &mut Vec<u8>) {
        let name = if session.prepared {
            // Straight to the server: the statement it prepared when it opened.
            request.sql.statement_name(request.statement as usize)
        } else {
            // Through a pooler: the unnamed statement, parsed again each time.
            // It lives until the next Parse on the same server connection, and
            // everything from here to Sync is one transaction, which a pooler
            // keeps on one server connection. The parameters' types are the
            // server's to infer, as the text says.
            put_message(out, b'P', |body| {
                body.push(0);
                body.extend_from_slice(request.statement.text(&request.sql).as_bytes());
                body.push(0);
                body.extend_from_slice(&0i16.to_be_bytes());
            });
            ""
        };
        bind(out, name, &request.params);
        // Execute the unnamed portal, all rows; then Sync ends the transaction.
        put_message(out, b'E', |body| {
            body.push(0);
            body.extend_from_slice(&0i32.to_be_bytes());
        });
        put_message(out, b'S', |_| {});
    }

    fn decode(session: &mut Session, inbound: &mut BytesMut) -> Result<Option<Answer>, String> {
        loop {
            let message = Message::parse(inbound)
                .map_err(|e| format!("it sent something that is not a PostgreSQL message: {e}"))?;
            let Some(message) = message else {
                return Ok(None);
            };
            match message {
                Message::DataRow(row) => session.answer.rows.rows.push(row_values(&row)),
                Message::CommandComplete(done) => {
                    // "INSERT 0 1", "UPDATE 1", "DELETE 3", "SELECT 1": the count is last.
                    let tag = done.tag().unwrap_or("");
                    session.answer.rows.changed = tag
                        .rsplit(' ')
                        .next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                }
                Message::ErrorResponse(body) => {
                    let error = DbError::read(body.fields());
                    if matches!(error.severity.as_str(), "FATAL" | "PANIC") {
                        // No ReadyForQuery follows: the server closes the session.
                        session.answer = Partial::default();
                        return Ok(Some(Err(error)));
                    }
                    session.answer.error = Some(error);
                }
                Message::ReadyForQuery(_) => {
                    let done = std::mem::take(&mut session.answer);
                    return Ok(Some(match done.error {
                        Some(error) => Err(error),
                        None => Ok(done.rows),
                    }));
                }
                Message::ParseComplete
                | Message::BindComplete
                | Message::NoData
                | Message::EmptyQueryResponse
                | Message::PortalSuspended
                | Message::NoticeResponse(_)
                | Message::ParameterStatus(_)
                | Message::NotificationResponse(_)
                | Message::RowDescription(_) => {}
                _ => return Err("it sent a message no statement asked for".to_owned()),
            }
        }
    }

    fn verdict(_: &mut Session, _: &Request, answer: &Answer) -> Verdict {
        match answer {
            Err(error) if error.ends_session() => {
                Verdict::Broken(format!("{}: {}", error.severity, error.message))
            }
            _ => Verdict::Deliver,
        }
    }

    fn fence(
        target: &Target,
        server_process: i32,
        local_port: u16,
        wait_ms: u64,
    ) -> Option<Request> {
        Some(Request {
            name: "endSession",
            statement: Statement::EndSession,
            sql: Arc::clone(&target.sql),
            params: vec![
                server_process.to_string(),
                local_port.to_string(),
                wait_ms.max(1).to_string(),
            ],
        })
    }

    fn open(target: Arc<Target>) -> Pin<Box<dyn Future<Output = Result<Opened, Failure>> + Send>> {
        Box::pin(connect::open(target))
    }
}

pub type Direct = event_loop::Direct<Postgres>;
pub type Local = event_loop::Local<Postgres>;

/// A row's columns as text (None: NULL).
pub(super) fn row_values(row: &DataRowBody) -> Vec<Option<String>> {
    use fallible_iterator::FallibleIterator;
    let buffer = row.buffer();
    let mut values = Vec::new();
    let mut ranges = row.ranges();
    while let Ok(Some(range)) = ranges.next() {
        values.push(range.map(|r| String::from_utf8_lossy(&buffer[r]).into_owned()));
    }
    values
}

/// A Bind of `statement` (named, or "" the unnamed one) with `params` as text, results as text.
fn bind(out: &mut Vec<u8>, statement: &str, params: &[String]) {
    put_message(out, b'B', |body| {
        body.push(0); // the unnamed portal
        body.extend_from_slice(statement.as_bytes());
        body.push(0);
        body.extend_from_slice(&0i16.to_be_bytes()); // every parameter as text
        body.extend_from_slice(&(params.len() as i16).to_be_bytes());
        for param in params {
            body.extend_from_slice(&(param.len() as i32).to_be_bytes());
            body.extend_from_slice(param.as_bytes());
        }
        body.extend_from_slice(&0i16.to_be_bytes()); // every result as text
    });
}

/// A message: its tag, its length (itself included), its body.
fn put_message(out: &mut Vec<u8>, tag: u8, body: impl FnOnce(&mut Vec<u8>)) {
    out.push(tag);
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    body(out);
    let len = (out.len() - at) as i32;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
}
