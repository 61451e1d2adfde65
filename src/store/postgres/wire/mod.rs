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
mod reply;
mod session;
pub mod target;

use std::sync::Arc;

use bytes::BytesMut;
use postgres_protocol::message::backend::Message;

use self::connect::ByName;
use self::reply::row_values;
pub use self::reply::{DbError, ServerAnswer};
use self::target::Target;
use super::answer::Answer;
use super::errors::RESENDS;
use super::ops::Param;
use super::sql::{Sql, Statement};
use crate::store::event_loop::{self, Failure, Named, Opening, Verdict, Wire};
use crate::store::Code;

/// The longest message the server reads (`PQ_LARGE_MESSAGE_LIMIT`, a
/// gigabyte less two bytes): it ends a connection that sends a longer one.
const LONGEST_MESSAGE: usize = 0x3fff_fffe;

/// One statement on the wire: an operation's ([`crate::store::postgres::ops`]),
/// or the fence after a connection went silent ([`Wire::fence`]).
pub struct Request {
    /// The store operation it serves, for error messages.
    pub name: &'static str,
    pub statement: Statement,
    /// The statements' text for the store's table.
    pub sql: Arc<Sql>,
    pub params: Vec<Param>,
}

impl Named for Request {
    fn name(&self) -> &'static str {
        self.name
    }
}

/// A connection's state: whether it prepared the statements by name, and
/// what has come so far for the statement at the head.
#[derive(Default)]
pub struct Session {
    prepared: bool,
    partial: Partial,
}

/// A half-read answer.
#[derive(Default)]
struct Partial {
    answer: Answer,
    error: Option<DbError>,
}

pub struct Postgres;

impl Wire for Postgres {
    type Target = Target;
    type Request = Request;
    type Answer = ServerAnswer;
    type Session = Session;
    type Prepared = ByName;

    const STORE: &'static str = "PostgresLockStore";
    const CODE: Code = Code::StorePostgres;
    const RESOURCE: &'static std::ffi::CStr = c"keel-lock:postgres";
    const RESENDS: u32 = RESENDS;

    fn begin(session: &mut Session, _: &Arc<Target>, prepared: ByName) {
        session.prepared = prepared.0;
    }

    fn encode(session: &mut Session, request: &Request, out: &mut Vec<u8>) -> Result<(), Failure> {
        let start = out.len();
        let (statement, taken) = request.statement.as_sent(&request.sql);
        let params = &request.params[..taken.min(request.params.len())];
        let name = if session.prepared {
            // Straight to the server: the statement it prepared when it opened.
            statement.name(&request.sql)
        } else {
            // Through a pooler: the unnamed statement, parsed again each time.
            // It lives until the next Parse on the same server connection, and
            // everything from here to Sync is one transaction, which a pooler
            // keeps on one server connection. The parameters' types are the
            // server's to infer, as the text says.
            put_message(out, b'P', |body| {
                body.push(0);
                body.extend_from_slice(statement.text(&request.sql).as_bytes());
                body.push(0);
                body.extend_from_slice(&0i16.to_be_bytes());
            });
            ""
        };
        let bound = out.len();
        bind(out, name, params);
        let len = out.len() - bound - 5; // (not its type byte and length word)
        if len > LONGEST_MESSAGE {
            out.truncate(start);
            return Err(Failure {
                code: Code::StorePostgres,
                text: format!(
                    "this command's parameters are {len} bytes, and PostgreSQL reads no message longer \
                     than {LONGEST_MESSAGE} bytes (it would end the connection, and every command on it), \
                     nor stores a text value that long: a key or owner this long cannot be stored"
                ),
            });
        }
        // Execute the unnamed portal, all rows; then Sync ends the transaction.
        put_message(out, b'E', |body| {
            body.push(0);
            body.extend_from_slice(&0i32.to_be_bytes());
        });
        put_message(out, b'S', |_| {});
        Ok(())
    }

    fn decode(
        session: &mut Session, inbound: &mut BytesMut,
    ) -> Result<Option<ServerAnswer>, String> {
        loop {
            let message = Message::parse(inbound)
                .map_err(|e| format!("it sent something that is not a PostgreSQL message: {e}"))?;
            let Some(message) = message else {
                return Ok(None);
            };
            match message {
                Message::DataRow(row) => {
                    // An operation reads the first row's first column alone (each
                    // statement answers one row at most).
                    if session.partial.answer.first.is_none() {
                        session.partial.answer.first =
                            Some(row_values(&row).into_iter().next().flatten());
                    }
                }
                Message::CommandComplete(done) => {
                    // "INSERT 0 1", "UPDATE 1", "DELETE 3", "SELECT 1": the count is last.
                    let tag = done.tag().unwrap_or("");
                    session.partial.answer.changed = tag
                        .rsplit(' ')
                        .next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                }
                Message::ErrorResponse(body) => {
                    let error = DbError::read(body.fields());
                    if matches!(error.severity.as_str(), "FATAL" | "PANIC") {
                        // No ReadyForQuery follows: the server closes the session.
                        session.partial = Partial::default();
                        return Ok(Some(Err(error)));
                    }
                    session.partial.error = Some(error);
                }
                Message::ReadyForQuery(_) => {
                    let done = std::mem::take(&mut session.partial);
                    return Ok(Some(match done.error {
                        Some(error) => Err(error),
                        None => Ok(done.answer),
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

    fn verdict(_: &mut Session, _: &Request, answer: &ServerAnswer) -> Verdict {
        match answer {
            Err(error) if error.ends_session() => {
                Verdict::Broken(format!("{}: {}", error.severity, error.message))
            }
            _ => Verdict::Deliver,
        }
    }

    fn fence(
        target: &Target, server_process: i32, local_port: u16, wait_ms: u64,
    ) -> Option<Request> {
        Some(Request {
            name: "endSession",
            statement: Statement::EndSession,
            sql: Arc::clone(&target.sql),
            params: vec![
                Param::Int(i64::from(server_process)),
                Param::Int(i64::from(local_port)),
                Param::Int(i64::try_from(wait_ms.max(1)).unwrap_or(i64::MAX)),
            ],
        })
    }

    fn open(target: Arc<Target>) -> Opening<ByName> {
        Box::pin(connect::open(target))
    }
}

pub type Direct = event_loop::Direct<Postgres>;
pub type Local = event_loop::Local<Postgres>;

/// A Bind of `statement` (named, or "" the unnamed one) with `params` as text, results as text.
fn bind(out: &mut Vec<u8>, statement: &str, params: &[Param]) {
    put_message(out, b'B', |body| {
        body.push(0); // the unnamed portal
        body.extend_from_slice(statement.as_bytes());
        body.push(0);
        body.extend_from_slice(&0i16.to_be_bytes()); // every parameter as text
        body.extend_from_slice(&(params.len() as i16).to_be_bytes());
        for param in params {
            let number;
            let text = match param {
                Param::Text(text) => text.as_bytes(),
                Param::Int(n) => {
                    number = n.to_string();
                    number.as_bytes()
                }
            };
            body.extend_from_slice(&(text.len() as i32).to_be_bytes());
            body.extend_from_slice(text);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The server's messages for one statement: `rows` (one text column,
    /// None: NULL), then `tag`, then ReadyForQuery.
    fn server_says(rows: &[Option<&str>], tag: &str) -> BytesMut {
        let mut out = Vec::new();
        put_message(&mut out, b'1', |_| {}); // ParseComplete
        put_message(&mut out, b'2', |_| {}); // BindComplete
        for value in rows {
            put_message(&mut out, b'D', |body| {
                body.extend_from_slice(&1i16.to_be_bytes());
                match value {
                    None => body.extend_from_slice(&(-1i32).to_be_bytes()),
                    Some(text) => {
                        body.extend_from_slice(&(text.len() as i32).to_be_bytes());
                        body.extend_from_slice(text.as_bytes());
                    }
                }
            });
        }
        put_message(&mut out, b'C', |body| {
            body.extend_from_slice(tag.as_bytes());
            body.push(0);
        });
        put_message(&mut out, b'Z', |body| body.push(b'I'));
        BytesMut::from(&out[..])
    }

    fn decoded(mut inbound: BytesMut) -> Answer {
        let mut session = Session::default();
        match Postgres::decode(&mut session, &mut inbound) {
            Ok(Some(Ok(answer))) => answer,
            other => panic!("not an answer: {:?}", other.map(|o| o.map(|_| ()))),
        }
    }

    #[test]
    fn an_answer_is_the_first_column_of_the_first_row_and_the_count() {
        assert_eq!(
            decoded(server_says(&[Some("42")], "SELECT 1")),
            Answer {
                first: Some(Some("42".to_owned())),
                changed: 1
            }
        );
        assert_eq!(
            decoded(server_says(&[None], "SELECT 1")),
            Answer {
                first: Some(None),
                changed: 1
            }
        );
        assert_eq!(
            decoded(server_says(&[], "UPDATE 0")),
            Answer {
                first: None,
                changed: 0
            }
        );
        assert_eq!(
            decoded(server_says(&[Some("t"), Some("f")], "SELECT 2")),
            Answer {
                first: Some(Some("t".to_owned())),
                changed: 2
            }
        );
    }

    #[test]
    fn a_command_longer_than_the_server_reads_is_not_written() {
        let request = |key: String| Request {
            name: "acquire",
            statement: Statement::Acquire,
            sql: Arc::new(Sql::new("t")),
            params: vec![Param::Text(key), Param::Text("o".into()), Param::Int(1)],
        };
        let mut session = Session::default();
        let mut out = b"ahead".to_vec();
        let refused = Postgres::encode(
            &mut session,
            &request("k".repeat(LONGEST_MESSAGE)),
            &mut out,
        );
        assert!(matches!(
            refused,
            Err(Failure {
                code: Code::StorePostgres,
                ..
            })
        ));
        assert_eq!(out, b"ahead", "nothing written");
        assert!(Postgres::encode(&mut session, &request("k".into()), &mut out).is_ok());
        assert!(out.len() > 5);
    }

    #[test]
    fn parameters_go_as_text() {
        let mut out = Vec::new();
        bind(
            &mut out,
            "",
            &[Param::Text("k".to_owned()), Param::Int(-1500)],
        );
        let wanted: &[u8] = b"\0\0\0\0\0\x02\0\0\0\x01k\0\0\0\x05-1500\0\0";
        assert_eq!(out[0], b'B');
        assert_eq!(&out[5..], wanted);
    }
}
