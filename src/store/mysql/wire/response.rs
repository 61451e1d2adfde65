//! Reading a command's answer: an OK, an error, or result sets (in text
//! form, or the binary form of a prepared statement's), perhaps several.

use super::packet::{self, next_payload, read_error, read_ok, Reader, ServerError, MORE_RESULTS};
use super::prepared::{binary_row, read_column};

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

/// One command's whole answer at the start of `bytes`, and how many bytes
/// it took; None until all of it has arrived. A CALL answers a result per
/// SELECT it ran, then an OK; a command of several statements, a result
/// each: what is kept is the first result's counts and the
/// rows of the first result that has any, or the first error, which ends
/// the answer (the server runs nothing after it).
/// `binary`: its rows are in the binary form a prepared statement's are.
pub fn response(bytes: &[u8], binary: bool) -> Result<Option<(ServerAnswer, usize)>, String> {
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
            Some(0xFF) => return Ok(Some((Err(read_error(&payload)), at))),
            Some(_) => {
                let rows = answer.rows.is_empty().then_some(&mut answer.rows);
                let Some((status, after)) = result_set(bytes, &payload, at, binary, rows)? else {
                    return Ok(None);
                };
                at = after;
                first_result = false;
                match status {
                    Ok(status) => status,
                    Err(error) => return Ok(Some((Err(error), at))),
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
    bytes: &[u8], head: &[u8], mut at: usize, binary: bool,
    mut rows: Option<&mut Vec<Vec<Option<Vec<u8>>>>>,
) -> Result<Option<(Result<u16, ServerError>, usize)>, String> {
    // No statement of this store answers more than a few columns: a huge
    // count is not MySQL speaking (and would wait forever for definitions).
    let columns = Reader::new(head)
        .lenenc()
        .filter(|&n| n <= 4_096)
        .ok_or_else(|| unreadable("a column count"))?;
    // The column definitions: what binary values are (text rows need none).
    let mut types = Vec::new();
    for _ in 0..columns {
        let Some((definition, next)) = next_payload(bytes, at) else {
            return Ok(None);
        };
        at = next;
        if binary && rows.is_some() {
            types.push(read_column(&definition).ok_or_else(|| unreadable("a column"))?);
        }
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
                let row = if binary {
                    binary_row(&payload, &types)
                } else {
                    let mut r = Reader::new(&payload);
                    (0..columns)
                        .map(|_| r.lenenc_bytes().map(|v| v.map(<[u8]>::to_vec)))
                        .collect::<Option<Vec<_>>>()
                };
                rows.push(row.ok_or_else(|| unreadable("a row"))?);
            }
        }
    }
}

pub(super) fn unreadable(what: &str) -> String {
    format!("it sent {what} that is not MySQL's")
}

#[cfg(test)]
mod tests {
    use super::super::packet::put_packet;
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
            response(&bytes, false),
            Ok(Some((
                Ok(Answer {
                    rows: vec![],
                    affected: 2,
                    insert_id: 10_000
                }),
                bytes.len()
            )))
        );
        assert_eq!(response(&bytes[..bytes.len() - 1], false), Ok(None));
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
        let (answer, used) = response(&bytes, false).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(
            answer.unwrap().rows,
            vec![vec![Some(b"42".to_vec())], vec![None]]
        );
        for cut in 1..bytes.len() {
            assert_eq!(response(&bytes[..cut], false), Ok(None), "{cut}");
        }
    }

    #[test]
    fn a_command_of_two_answers_the_first_counts_and_the_second_rows_or_an_error() {
        let mut err = vec![0xFF, 0xBD, 0x04, b'#'];
        err.extend_from_slice(b"HY000Lock wait timeout exceeded");
        // The first statement's OK, with more results to come.
        let first_ok: &[u8] = &[0x00, 1, 0xFC, 0x10, 0x27, 0x0A, 0x00, 0, 0];
        let rows: [&[u8]; 4] = [
            &[1],                            // one column
            b"\x03def\0\0\0\x01n\0",         // its definition
            &[1, b'1'],                      // a row: "1"
            &[0xFE, 0, 0, 0x02, 0x00, 0, 0], // the end of the rows
        ];
        let bytes = packets(&[&[first_ok][..], &rows[..]].concat());
        let (answer, used) = response(&bytes, false).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        let answer = answer.unwrap();
        assert_eq!((answer.affected, answer.insert_id), (1, 10_000));
        assert_eq!(answer.rows, vec![vec![Some(b"1".to_vec())]]);
        let bytes = packets(&[first_ok, &err]);
        let (answer, used) = response(&bytes, false).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(answer.unwrap_err().number, 1213);
    }

    #[test]
    fn an_error_ends_the_answer() {
        let mut err = vec![0xFF, 0xBD, 0x04, b'#'];
        err.extend_from_slice(b"HY000Lock wait timeout exceeded");
        let bytes = packets(&[&err, &[0x00, 0, 0, 2, 0, 0, 0]]);
        let (answer, used) = response(&bytes, false).unwrap().unwrap();
        assert_eq!(answer.unwrap_err().number, 1213);
        assert_eq!(used, err.len() + 4);
    }

    #[test]
    fn a_prepared_statement_answers_binary_rows() {
        let mut definition = b"\x03def\0\0\0\x01n\0\x0c\x3f\0\x14\0\0\0".to_vec();
        definition.extend_from_slice(&[0x08, 0, 0, 0, 0, 0]); // BIGINT, signed
        let mut row = vec![0x00, 0x00];
        row.extend_from_slice(&(-7i64).to_le_bytes());
        let bytes = packets(&[&[1], &definition, &row, &[0xFE, 0, 0, 0x02, 0x00, 0, 0]]);
        let (answer, used) = response(&bytes, true).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(answer.unwrap().rows, vec![vec![Some(b"-7".to_vec())]]);
    }
}
