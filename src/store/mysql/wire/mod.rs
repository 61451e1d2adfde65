//! MySQL's protocol on the JS thread's event loop ([`crate::store::event_loop`]):
//! each operation is one command (or, where someone waits for its key, a
//! second: the line's procedure), written at once behind whatever else is in
//! flight on the connection: the server reads the next command when it has
//! answered the last, so many are on their way at once and the answers
//! come back in order. The statements are prepared when the connection
//! opens, so an operation sends only their numbers and its values
//! ([`prepared`]); the sweep and the fence go as text. How a connection is
//! opened and logged in: [`connect`].

mod auth;
pub mod connect;
pub mod packet;
pub mod prepared;
mod response;
mod session;
pub mod target;

pub(super) use self::session::exchange;

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, BytesMut};

use self::packet::put_packet;
use self::prepared::Execute;
use self::response::response;
pub use self::response::{Answer, ServerAnswer};
use self::target::Target;
use super::errors::{ends_session, RESENDS};
use super::sql::Sql;
use crate::store::event_loop::{self, Failure, Named, Opening, Verdict, Wire};
use crate::store::Code;

/// The command byte of a text statement.
const COM_QUERY: u8 = 0x03;

/// One request on the wire: what it sends, and for which operation.
pub struct Request {
    /// The store operation it serves, for error messages.
    pub name: &'static str,
    pub command: Command,
}

impl Named for Request {
    fn name(&self) -> &'static str {
        self.name
    }
}

pub enum Command {
    /// Text, parsed by the server each time: one statement, or several
    /// (`;`-separated) answered together.
    Text(String),
    /// Prepared statements, run one after the other, answered as one
    /// ([`MySql::decode`]).
    Prepared(Vec<Execute>),
}

/// The numbers the server gave the store's statements as a connection
/// opened (in [`Sql::prepared`]'s order); None for one it would not prepare.
pub type StatementIds = Vec<Option<u32>>;

/// A connection's state.
#[derive(Default)]
pub struct Session {
    /// The numbers the server gave the store's statements (in
    /// [`Sql::prepared`]'s order); None for one it would not prepare, which
    /// is sent as text, its values written in.
    ids: StatementIds,
    sql: Option<Arc<Sql>>,
    /// For each request written and not yet answered, in order: how many
    /// answers it takes, and whether they are in binary form.
    expected: VecDeque<(usize, bool)>,
    /// The longest command the server reads (0: not known).
    most: usize,
}

pub struct MySql;

impl Wire for MySql {
    type Target = Target;
    type Request = Request;
    type Answer = ServerAnswer;
    type Session = Session;
    type Prepared = StatementIds;

    const STORE: &'static str = "MySqlLockStore";
    const CODE: Code = Code::StoreMysql;
    const RESOURCE: &'static std::ffi::CStr = c"keel-lock:mysql";
    const RESENDS: u32 = RESENDS;
    const RUNS_WHAT_IT_READ: bool = false;

    fn begin(session: &mut Session, target: &Arc<Target>, ids: StatementIds) {
        session.ids = ids;
        session.sql = Some(Arc::clone(&target.sql));
        session.most = target.max_allowed_packet.load(Ordering::Relaxed);
    }

    fn encode(session: &mut Session, request: &Request, out: &mut Vec<u8>) -> Result<(), Failure> {
        match &request.command {
            Command::Text(sql) => put_query(out, sql, session.most)?,
            Command::Prepared(runs) if runs.is_empty() => put_query(out, "DO 0", session.most)?,
            Command::Prepared(runs) => {
                let ids: Option<Vec<u32>> = runs
                    .iter()
                    .map(|run| session.ids.get(run.statement).copied().flatten())
                    .collect();
                if let Some(ids) = ids {
                    let payloads: Vec<Vec<u8>> = runs
                        .iter()
                        .zip(ids)
                        .map(|(run, id)| run.payload(id))
                        .collect();
                    for payload in &payloads {
                        fits(payload.len(), session.most)?;
                    }
                    // Every command starts its own exchange at sequence number 0.
                    for payload in &payloads {
                        put_packet(out, 0, payload);
                    }
                    session.expected.push_back((runs.len(), true));
                    return Ok(());
                }
                // Not prepared here: the texts, as one command.
                let texts = session
                    .sql
                    .as_deref()
                    .map_or(&[][..], |sql| &sql.prepared[..]);
                let inlined: Vec<String> = runs
                    .iter()
                    .map(|run| run.inline(texts.get(run.statement).map_or("DO 0", String::as_str)))
                    .collect();
                put_query(out, &inlined.join(";\n"), session.most)?;
            }
        }
        session.expected.push_back((1, false));
        Ok(())
    }

    /// A request of several statements is answered with the first's counts
    /// and the rows of the first that has any, or with the first error
    /// among them.
    fn decode(
        session: &mut Session, inbound: &mut BytesMut,
    ) -> Result<Option<ServerAnswer>, String> {
        // Something nobody asked for (an error before the server drops the
        // connection) reads as one text answer.
        let (count, binary) = session.expected.front().copied().unwrap_or((1, false));
        let mut whole: Option<ServerAnswer> = None;
        let mut at = 0;
        for _ in 0..count {
            let Some((answer, used)) = response(&inbound[at..], binary)? else {
                return Ok(None);
            };
            at += used;
            whole = Some(match (whole, answer) {
                (None, answer) | (Some(Ok(_)), answer @ Err(_)) => answer,
                (Some(Ok(mut so_far)), Ok(next)) => {
                    if so_far.rows.is_empty() {
                        so_far.rows = next.rows;
                    }
                    Ok(so_far)
                }
                (Some(error @ Err(_)), _) => error,
            });
        }
        session.expected.pop_front();
        inbound.advance(at);
        Ok(whole)
    }

    fn verdict(_: &mut Session, _: &Request, answer: &ServerAnswer) -> Verdict {
        match answer {
            Err(error) if ends_session(error) => {
                Verdict::Broken(format!("{} ({})", error.message, error.number))
            }
            _ => Verdict::Deliver,
        }
    }

    /// `KILL` the old connection's session, found by its id, its client
    /// address (this connection's, with the old one's port) and its user, and
    /// never this session (so nobody else's session, after a server restart
    /// that reused the id, is touched; behind a proxy the address is the
    /// proxy's, nothing matches, and nothing is killed). A statement still
    /// waiting there for a row is ended with it; one that got the row holds
    /// it until it has committed, and whatever is sent next waits for that
    /// row. `KILL` returns at once: there is nothing to wait for. (No
    /// PREPARE: a server out of prepared statements still runs it; with
    /// nothing found it kills id 0, which is nobody's, and nobody reads the
    /// error.)
    fn fence(_: &Target, server_process: i32, local_port: u16, _wait_ms: u64) -> Option<Request> {
        Some(Request {
            name: "endSession",
            command: Command::Text(format!(
                "SET @keel_me = (SELECT HOST FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID());
                 SET @keel_fence = (SELECT ID FROM information_schema.PROCESSLIST
                   WHERE ID = {server_process} AND ID <> CONNECTION_ID()
                     AND HOST = CONCAT(LEFT(@keel_me, CHAR_LENGTH(@keel_me) - CHAR_LENGTH(SUBSTRING_INDEX(@keel_me, ':', -1))), '{local_port}')
                     AND USER = SUBSTRING_INDEX(USER(), '@', 1));
                 KILL CONNECTION COALESCE(@keel_fence, 0)"            )),
        })
    }

    fn open(target: Arc<Target>) -> Opening<StatementIds> {
        Box::pin(connect::open(target))
    }
}

/// A text command, if the server reads one that long (`most`, 0: not known).
fn put_query(out: &mut Vec<u8>, sql: &str, most: usize) -> Result<(), Failure> {
    fits(1 + sql.len(), most)?;
    let mut payload = Vec::with_capacity(1 + sql.len());
    payload.push(COM_QUERY);
    payload.extend_from_slice(sql.as_bytes());
    put_packet(out, 0, &payload);
    Ok(())
}

/// Whether the server reads a command of `len` bytes (`most`: its
/// `max_allowed_packet`, 0 when not known); if not, why. (MariaDB ends the
/// connection at a command of exactly `most` bytes too: measured.)
fn fits(len: usize, most: usize) -> Result<(), Failure> {
    if most == 0 || len < most {
        return Ok(());
    }
    Err(Failure {
        code: Code::StoreMysql,
        text: format!(
            "this command is {len} bytes, and the server reads none as long as its max_allowed_packet, \
             {most} bytes (it would end the connection, and every command on it): a key or owner this long \
             cannot be stored unless the server's max_allowed_packet is raised"
        ),
    })
}

pub type Direct = event_loop::Direct<MySql>;
pub type Local = event_loop::Local<MySql>;

#[cfg(test)]
mod tests {
    use super::prepared::Param;
    use super::*;

    fn request(session: &mut Session) -> Vec<u8> {
        let runs = vec![
            Execute {
                statement: 0,
                params: vec![Param::Int(1)],
            },
            Execute {
                statement: 1,
                params: vec![Param::Text("bell".into())],
            },
        ];
        let mut out = Vec::new();
        let request = Request {
            name: "acquire",
            command: Command::Prepared(runs),
        };
        assert!(MySql::encode(session, &request, &mut out).is_ok());
        out
    }

    #[test]
    fn a_command_as_long_as_the_server_reads_is_not_written() {
        let mut session = Session {
            most: 18,
            ..Session::default()
        };
        let text = |sql: &str| Request {
            name: "acquire",
            command: Command::Text(sql.to_owned()),
        };
        let mut out = Vec::new();
        let refused = MySql::encode(&mut session, &text("SELECT 1234567890"), &mut out);
        assert!(matches!(
            refused,
            Err(Failure {
                code: Code::StoreMysql,
                ..
            })
        ));
        assert!(
            out.is_empty() && session.expected.is_empty(),
            "nothing written, no answer awaited"
        );
        assert!(MySql::encode(&mut session, &text("SELECT 123456789"), &mut out).is_ok());
        assert_eq!(session.expected.len(), 1);
    }

    #[test]
    fn a_prepared_pair_is_two_commands_and_one_answer() {
        let mut session = Session {
            ids: vec![Some(7), Some(8)],
            ..Session::default()
        };
        let out = request(&mut session);
        // Two packets, each starting an exchange: COM_STMT_EXECUTE of 7, then of 8.
        assert_eq!((out[3], out[4], out[5]), (0, 0x17, 7));
        let second = 4 + usize::from(out[0]);
        assert_eq!(
            (out[second + 3], out[second + 4], out[second + 5]),
            (0, 0x17, 8)
        );
        let mut answers = Vec::new();
        put_packet(
            &mut answers,
            1,
            &[0x00, 1, 0xFC, 0x10, 0x27, 0x02, 0x00, 0, 0],
        );
        let mut inbound = BytesMut::from(&answers[..]);
        assert_eq!(
            MySql::decode(&mut session, &mut inbound),
            Ok(None),
            "half an answer"
        );
        put_packet(&mut answers, 1, &[0x00, 0, 0, 0x02, 0x00, 0, 0]);
        let mut inbound = BytesMut::from(&answers[..]);
        let answer = MySql::decode(&mut session, &mut inbound);
        let expected = Answer {
            rows: vec![],
            affected: 1,
            insert_id: 10_000,
        };
        assert_eq!(answer, Ok(Some(Ok(expected))));
        assert!(inbound.is_empty() && session.expected.is_empty());
    }

    #[test]
    fn without_numbers_the_statements_go_as_one_text_command() {
        let mut sql = Sql::new("t");
        sql.prepared = vec!["SELECT ?".into(), "DO GET_LOCK(?, 0)".into()];
        let mut session = Session {
            sql: Some(Arc::new(sql)),
            ..Session::default()
        };
        let out = request(&mut session);
        assert_eq!(&out[4..], b"\x03SELECT 1;\nDO GET_LOCK('bell', 0)");
        assert_eq!(session.expected, VecDeque::from([(1, false)]));
    }
}
