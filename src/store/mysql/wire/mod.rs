//! MySQL's protocol on the JS thread's event loop ([`crate::store::event_loop`]):
//! each operation is one `COM_QUERY`, a statement whose keys and owners
//! travel as hex literals (exact bytes, nothing to escape), written at once
//! behind whatever else is in flight on the connection: the server reads
//! the next command when it has answered the last, so many are on their
//! way at once and the answers come back in order. Results travel as text.
//! How a connection is opened and logged in: [`connect`].

mod auth;
pub mod connect;
pub mod packet;
mod session;

pub(super) use self::session::query;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Buf, BytesMut};

use self::connect::Target;
use self::packet::{
    next_payload, put_packet, read_error, read_ok, Reader, ServerError, MORE_RESULTS,
};
use super::errors::{ends_session, RESENDS};
use crate::store::event_loop::{self, Failure, Opened, Verdict, Wire};

/// The command byte of a text statement.
const COM_QUERY: u8 = 0x03;

/// One statement on the wire.
pub struct Request {
    /// The store operation it serves, for error messages.
    pub name: &'static str,
    /// The whole statement.
    pub sql: String,
}

/// What a statement was answered with: the rows of its first result (each
/// column as text, None for NULL) and the OK that ended it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    pub rows: Vec<Vec<Option<Vec<u8>>>>,
    /// Rows changed (or matched: connections ask for found rows).
    pub affected: u64,
    /// What `LAST_INSERT_ID(expr)` last set in the statement.
    pub insert_id: u64,
}

/// What the server answered a statement with, or the error it reported.
pub type ServerAnswer = Result<Answer, ServerError>;

pub struct MySql;

impl Wire for MySql {
    type Target = Target;
    type Request = Request;
    type Answer = ServerAnswer;
    type Session = ();

    const STORE: &'static str = "MySqlLockStore";
    const RESOURCE: &'static std::ffi::CStr = c"keel-lock:mysql";
    const RESENDS: u32 = RESENDS;
    const RUNS_WHAT_IT_READ: bool = false;

    fn connect_timeout_ms(target: &Target) -> u64 {
        u64::try_from(target.connect_timeout.as_millis()).unwrap_or(u64::MAX)
    }

    fn display(target: &Target) -> &str {
        &target.display
    }

    fn name(request: &Request) -> &'static str {
        request.name
    }

    fn encode(_: &mut (), request: &Request, out: &mut Vec<u8>) {
        let mut payload = Vec::with_capacity(1 + request.sql.len());
        payload.push(COM_QUERY);
        payload.extend_from_slice(request.sql.as_bytes());
        // Every command starts its own exchange at sequence number 0.
        put_packet(out, 0, &payload);
    }

    fn decode(_: &mut (), inbound: &mut BytesMut) -> Result<Option<ServerAnswer>, String> {
        let Some((answer, used)) = response(inbound)? else {
            return Ok(None);
        };
        inbound.advance(used);
        Ok(Some(answer))
    }

    fn verdict(_: &mut (), _: &Request, answer: &ServerAnswer) -> Verdict {
        match answer {
            Err(error) if ends_session(error) => {
                Verdict::Broken(format!("{} ({})", error.message, error.number))
            }
            _ => Verdict::Deliver,
        }
    }

    /// `KILL` the old connection's session, found by its id, its client
    /// port and its user (so nobody else's session, after a server restart
    /// that reused the id, is touched). A statement still waiting there for
    /// a row is ended with it; one that got the row holds it until it has
    /// committed, and whatever is sent next waits for that row.
    fn fence(_: &Target, server_process: i32, local_port: u16, _wait_ms: u64) -> Option<Request> {
        Some(Request {
            name: "endSession",
            sql: format!(
                "SET @keel_fence = (SELECT CONCAT('KILL CONNECTION ', ID) FROM information_schema.PROCESSLIST
                   WHERE ID = {server_process} AND HOST LIKE '%:{local_port}'
                     AND USER = SUBSTRING_INDEX(USER(), '@', 1));
                 SET @keel_fence = COALESCE(@keel_fence, 'DO 0');
                 PREPARE keel_fence FROM @keel_fence;
                 EXECUTE keel_fence;
                 DEALLOCATE PREPARE keel_fence"
            ),
        })
    }

    fn open(target: Arc<Target>) -> Pin<Box<dyn Future<Output = Result<Opened, Failure>> + Send>> {
        Box::pin(connect::open(target))
    }
}

pub type Direct = event_loop::Direct<MySql>;
pub type Local = event_loop::Local<MySql>;

/// One command's whole answer at the start of `bytes`, and how many bytes
/// it took; None until all of it has arrived. A CALL answers a result per
/// SELECT it ran, then an OK; a command of several statements, a result
/// each: what is kept is the first result's (its rows, or its counts), or
/// its error. An error after the first result ends the answer without
/// changing it: what follows an operation's statement in its command (its
/// doorbell) never undoes what the statement did, so it must not make it
/// look failed (a server without `GET_LOCK` still takes locks).
pub fn response(bytes: &[u8]) -> Result<Option<(ServerAnswer, usize)>, String> {
    let mut answer = Answer::default();
    let mut first_result = true;
    let mut at = 0;
    loop {
        let Some((payload, next)) = next_payload(bytes, at) else {
            return Ok(None);
        };
        at = next;
        let status = match payload.first() {
            Some(0x00) => {
                let ok = read_ok(&payload).ok_or_else(|| unreadable("an OK"))?;
                if first_result {
                    answer.affected = ok.affected;
                    answer.insert_id = ok.insert_id;
                    first_result = false;
                }
                ok.status
            }
            Some(0xFF) if first_result => return Ok(Some((Err(read_error(&payload)), at))),
            Some(0xFF) => return Ok(Some((Ok(answer), at))),
            Some(_) => {
                let was_first = first_result;
                let Some((status, after)) = result_set(
                    bytes,
                    &payload,
                    at,
                    first_result.then_some(&mut answer.rows),
                )?
                else {
                    return Ok(None);
                };
                at = after;
                first_result = false;
                match status {
                    Ok(status) => status,
                    Err(error) if was_first => return Ok(Some((Err(error), at))),
                    Err(_) => return Ok(Some((Ok(answer), at))),
                }
            }
            None => return Err(unreadable("an empty packet")),
        };
        if status & MORE_RESULTS == 0 {
            return Ok(Some((Ok(answer), at)));
        }
    }
}

/// A result set whose first payload (its column count) is `head`, the rest
/// from `at`: its rows go to `rows` if given; then the status of the OK that
/// ends it (or the error that cut it short) and where it ended.
#[allow(clippy::type_complexity)]
fn result_set(
    bytes: &[u8],
    head: &[u8],
    mut at: usize,
    mut rows: Option<&mut Vec<Vec<Option<Vec<u8>>>>>,
) -> Result<Option<(Result<u16, ServerError>, usize)>, String> {
    // No statement of this store answers more than a few columns: a huge
    // count is not MySQL speaking (and would wait forever for definitions).
    let columns = Reader::new(head)
        .lenenc()
        .filter(|&n| n <= 4_096)
        .ok_or_else(|| unreadable("a column count"))?;
    // The column definitions: nothing an operation reads.
    for _ in 0..columns {
        let Some((_, next)) = next_payload(bytes, at) else {
            return Ok(None);
        };
        at = next;
    }
    loop {
        let Some((payload, next)) = next_payload(bytes, at) else {
            return Ok(None);
        };
        at = next;
        match payload.first() {
            // The OK that ends the rows (sent as 0xFE: a row never starts so
            // unless its first value is 16 MB or more).
            Some(0xFE) if payload.len() < packet::MAX_PAYLOAD => {
                let ok = read_ok(&payload).ok_or_else(|| unreadable("the end of the rows"))?;
                return Ok(Some((Ok(ok.status), at)));
            }
            Some(0xFF) => return Ok(Some((Err(read_error(&payload)), at))),
            _ => {
                let Some(rows) = rows.as_deref_mut() else {
                    continue;
                };
                let mut r = Reader::new(&payload);
                let row = (0..columns)
                    .map(|_| r.lenenc_bytes().map(|v| v.map(<[u8]>::to_vec)))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| unreadable("a row"))?;
                rows.push(row);
            }
        }
    }
}

fn unreadable(what: &str) -> String {
    format!("it sent {what} that is not MySQL's")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packets(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for (seq, payload) in payloads.iter().enumerate() {
            put_packet(&mut out, seq as u8, payload);
        }
        out
    }

    #[test]
    fn an_ok_answers_with_its_counts() {
        let bytes = packets(&[&[0x00, 2, 0xFC, 0x10, 0x27, 0x02, 0x00, 0x00, 0x00]]);
        assert_eq!(
            response(&bytes),
            Ok(Some((
                Ok(Answer {
                    rows: vec![],
                    affected: 2,
                    insert_id: 10_000
                }),
                bytes.len()
            )))
        );
        assert_eq!(response(&bytes[..bytes.len() - 1]), Ok(None));
    }

    #[test]
    fn a_call_answers_its_first_rows_and_its_last_ok() {
        let end_rows_more: &[u8] = &[0xFE, 0, 0, 0x0A, 0x00, 0, 0];
        let bytes = packets(&[
            &[1],                    // one column
            b"\x03def\0\0\0\x01n\0", // its definition (not read)
            &[2, b'4', b'2'],        // a row: "42"
            &[0xFB],                 // a row: NULL
            end_rows_more,           // more results follow
            &[0x00, 0, 0, 0x02, 0x00, 0, 0],
        ]);
        let (answer, used) = response(&bytes).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(
            answer.unwrap().rows,
            vec![vec![Some(b"42".to_vec())], vec![None]]
        );
        for cut in 1..bytes.len() {
            assert_eq!(response(&bytes[..cut]), Ok(None), "{cut}");
        }
    }

    #[test]
    fn the_first_statement_answers_a_command_of_two() {
        let mut err = vec![0xFF, 0x6A, 0x04, b'#'];
        err.extend_from_slice(b"42000GET_LOCK is not supported");
        let first_ok: &[u8] = &[0x00, 1, 0xFC, 0x10, 0x27, 0x0A, 0x00, 0, 0];
        for second in [&[0x00, 0, 0, 0x02, 0x00, 0, 0][..], &err[..]] {
            let bytes = packets(&[first_ok, second]);
            let (answer, used) = response(&bytes).unwrap().unwrap();
            assert_eq!(used, bytes.len());
            let answer = answer.unwrap();
            assert_eq!((answer.affected, answer.insert_id), (1, 10_000));
        }
    }

    #[test]
    fn an_error_ends_the_answer() {
        let mut err = vec![0xFF, 0xBD, 0x04, b'#'];
        err.extend_from_slice(b"HY000Lock wait timeout exceeded");
        let bytes = packets(&[&err, &[0x00, 0, 0, 2, 0, 0, 0]]);
        let (answer, used) = response(&bytes).unwrap().unwrap();
        assert_eq!(answer.unwrap_err().number, 1213);
        assert_eq!(used, err.len() + 4);
    }
}
