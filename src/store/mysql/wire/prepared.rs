//! Prepared statements: the binary protocol. Every connection prepares the
//! store's statements once as it opens (`COM_STMT_PREPARE`, answered with a
//! number for each); an operation is then `COM_STMT_EXECUTE` of a number and
//! its parameters as typed values (bytes and integers: nothing for the
//! server to parse), answered with rows in binary form, which are read here
//! into the text form the operations' readers take.
//!
//! Where the server will not prepare them (`max_prepared_stmt_count`
//! reached), the connection sends each statement as text instead, its
//! parameters written in as literals ([`Execute::inline`]).

use std::fmt::Write;

use super::packet::{put_lenenc, Reader};

/// The command byte that prepares a statement.
pub const COM_STMT_PREPARE: u8 = 0x16;
/// The command byte that runs a prepared statement.
const COM_STMT_EXECUTE: u8 = 0x17;

// Parameter types of the binary protocol.
const TYPE_LONGLONG: u8 = 0x08;
/// A parameter of this type is bytes (the server's binary character set).
const TYPE_BLOB: u8 = 0xFC;
/// A parameter of this type is text in the connection's character set.
const TYPE_VAR_STRING: u8 = 0xFD;
/// A column definition's flag: the integer is unsigned.
const UNSIGNED: u16 = 0x20;

/// One parameter of a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    Int(i64),
    /// Exact bytes (a key, an owner, a hash).
    Bytes(Vec<u8>),
    /// ASCII text (the name of a step of the line or of a hold's operation).
    Text(String),
}

/// A prepared statement to run: its place in the order the connection
/// prepared them, and its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execute {
    pub statement: usize,
    pub params: Vec<Param>,
}

impl Execute {
    /// `COM_STMT_EXECUTE` of statement number `id` with these parameters,
    /// as one payload.
    pub fn payload(&self, id: u32) -> Vec<u8> {
        let params = &self.params;
        let values: usize = params
            .iter()
            .map(|p| match p {
                Param::Int(_) => 8,
                Param::Bytes(b) => b.len() + 9,
                Param::Text(t) => t.len() + 9,
            })
            .sum();
        let mut out = Vec::with_capacity(11 + params.len().div_ceil(8) + 2 * params.len() + values);
        out.push(COM_STMT_EXECUTE);
        out.extend_from_slice(&id.to_le_bytes());
        out.push(0); // no cursor
        out.extend_from_slice(&1u32.to_le_bytes()); // iterations: always 1
        if params.is_empty() {
            return out;
        }
        // No parameter is NULL.
        out.resize(out.len() + params.len().div_ceil(8), 0);
        out.push(1); // the types follow
        for param in params {
            let kind = match param {
                Param::Int(_) => TYPE_LONGLONG,
                Param::Bytes(_) => TYPE_BLOB,
                Param::Text(_) => TYPE_VAR_STRING,
            };
            out.extend_from_slice(&[kind, 0]);
        }
        for param in params {
            match param {
                Param::Int(n) => out.extend_from_slice(&n.to_le_bytes()),
                Param::Bytes(bytes) => put_bytes(&mut out, bytes),
                Param::Text(text) => put_bytes(&mut out, text.as_bytes()),
            }
        }
        out
    }

    /// The statement `text` with this request's parameters written in as
    /// literals (bytes in hex: nothing to escape), for a
    /// connection that could not prepare it. The store's statements hold no
    /// `?` but their parameters'.
    pub fn inline(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 128);
        let mut params = self.params.iter();
        let mut pieces = text.split('?');
        out.push_str(pieces.next().unwrap_or_default());
        for piece in pieces {
            match params.next() {
                Some(Param::Int(n)) => {
                    let _ = write!(out, "{n}");
                }
                Some(Param::Bytes(bytes)) => put_hex(&mut out, bytes),
                // Text of ours (names): quoted as it is when nothing in it
                // needs escaping.
                Some(Param::Text(text))
                    if text
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_:.".contains(&b)) =>
                {
                    let _ = write!(out, "'{text}'");
                }
                Some(Param::Text(text)) => put_hex(&mut out, text.as_bytes()),
                None => out.push_str("NULL"),
            }
            out.push_str(piece);
        }
        out
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_lenenc(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// `bytes` as a hex literal, `X'...'`.
fn put_hex(out: &mut String, bytes: &[u8]) {
    out.push_str("X'");
    for b in bytes {
        let _ = write!(out, "{b:02X}");
    }
    out.push('\'');
}

/// What a `COM_STMT_PREPARE` answered: the statement's number, and how many
/// column and parameter definitions follow it.
pub fn read_prepare_ok(payload: &[u8]) -> Option<(u32, u16, u16)> {
    let mut r = Reader::new(payload);
    (r.u8()? == 0x00).then_some(())?;
    let id = r.u32()?;
    let columns = r.u16()?;
    let params = r.u16()?;
    Some((id, columns, params))
}

/// A result column, as far as reading its binary values needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    encoding: Encoding,
    unsigned: bool,
}

/// How a binary row writes a value of a column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    /// A little-endian integer of this many bytes.
    Integer(usize),
    Float,
    Double,
    /// A length byte, then that many bytes (dates and times, which no
    /// statement of this store answers).
    Counted,
    /// Length-encoded bytes (decimals, strings, blobs).
    LengthEncoded,
}

impl Encoding {
    /// The encoding of the protocol's column type `kind`.
    fn of(kind: u8) -> Encoding {
        match kind {
            0x01 => Encoding::Integer(1),                   // TINY
            0x02 | 0x0D => Encoding::Integer(2),            // SHORT, YEAR
            0x03 | 0x09 => Encoding::Integer(4),            // LONG, INT24
            TYPE_LONGLONG => Encoding::Integer(8),          // LONGLONG
            0x04 => Encoding::Float,                        // FLOAT
            0x05 => Encoding::Double,                       // DOUBLE
            0x07 | 0x0A | 0x0B | 0x0C => Encoding::Counted, // TIMESTAMP, DATE, TIME, DATETIME
            _ => Encoding::LengthEncoded,
        }
    }
}

/// A column definition's type and flags.
pub fn read_column(payload: &[u8]) -> Option<Column> {
    let mut r = Reader::new(payload);
    for _ in 0..6 {
        // catalog, schema, table, original table, name, original name
        r.lenenc_bytes()?;
    }
    r.lenenc()?; // the length of the fixed fields
    r.u16()?; // character set
    r.u32()?; // display length
    let kind = r.u8()?;
    let flags = r.u16()?;
    Some(Column {
        encoding: Encoding::of(kind),
        unsigned: flags & UNSIGNED != 0,
    })
}

/// A binary row (after its 0x00 header: a bitmap of NULLs offset by two,
/// then each value that is not NULL), in text form: integers and floats
/// as decimal digits, everything else as its bytes.
pub fn binary_row(payload: &[u8], columns: &[Column]) -> Option<Vec<Option<Vec<u8>>>> {
    let mut r = Reader::new(payload);
    (r.u8()? == 0x00).then_some(())?;
    let nulls = r.take((columns.len() + 9) / 8)?;
    columns
        .iter()
        .enumerate()
        .map(|(i, column)| {
            let bit = i + 2;
            if nulls.get(bit / 8)? & (1 << (bit % 8)) != 0 {
                return Some(None);
            }
            value(&mut r, *column).map(Some)
        })
        .collect()
}

fn value(r: &mut Reader, column: Column) -> Option<Vec<u8>> {
    let fixed = |r: &mut Reader, n: usize| -> Option<[u8; 8]> {
        let mut bytes = [0u8; 8];
        bytes[..n].copy_from_slice(r.take(n)?);
        Some(bytes)
    };
    let integer = |bytes: [u8; 8], width: u32| -> String {
        let n = u64::from_le_bytes(bytes);
        if column.unsigned {
            n.to_string()
        } else {
            // Sign-extend from `width` bits.
            let shift = 64 - width;
            (((n << shift) as i64) >> shift).to_string()
        }
    };
    let text = match column.encoding {
        Encoding::Integer(width) => integer(fixed(r, width)?, 8 * width as u32),
        Encoding::Float => {
            let bytes = fixed(r, 4)?;
            f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]).to_string()
        }
        Encoding::Double => f64::from_le_bytes(fixed(r, 8)?).to_string(),
        Encoding::Counted => {
            let n = usize::from(r.u8()?);
            return Some(r.take(n)?.to_vec());
        }
        Encoding::LengthEncoded => return r.lenenc_bytes()?.map(<[u8]>::to_vec),
    };
    Some(text.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_execute_carries_its_parameters_typed() {
        let execute = Execute {
            statement: 0,
            params: vec![
                Param::Int(-2),
                Param::Bytes(vec![0xAB]),
                Param::Text("ab".into()),
            ],
        };
        let payload = execute.payload(7);
        let mut expected = vec![0x17, 7, 0, 0, 0, 0, 1, 0, 0, 0];
        expected.extend_from_slice(&[0, 1, 0x08, 0, 0xFC, 0, 0xFD, 0]);
        expected.extend_from_slice(&(-2i64).to_le_bytes());
        expected.extend_from_slice(&[1, 0xAB, 2, b'a', b'b']);
        assert_eq!(payload, expected);
        let none = Execute {
            statement: 1,
            params: vec![],
        };
        assert_eq!(none.payload(1), vec![0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0]);
    }

    #[test]
    fn inlined_parameters_are_literals() {
        let execute = Execute {
            statement: 0,
            params: vec![
                Param::Bytes(b"a'?".to_vec()),
                Param::Int(5),
                Param::Bytes(vec![]),
                Param::Text("k".into()),
            ],
        };
        assert_eq!(
            execute.inline("SELECT ? , ? + 1, ?, GET_LOCK(?, 0)"),
            "SELECT X'61273F' , 5 + 1, X'', GET_LOCK('k', 0)"
        );
    }

    #[test]
    fn column_types_read_as_their_encodings() {
        let widths: Vec<_> = [0x01, 0x02, 0x0D, 0x03, 0x09, 0x08]
            .map(Encoding::of)
            .into_iter()
            .collect();
        assert_eq!(widths, [1, 2, 2, 4, 4, 8].map(Encoding::Integer).to_vec());
        assert_eq!(Encoding::of(0x0C), Encoding::Counted);
        assert_eq!(Encoding::of(0xFC), Encoding::LengthEncoded);
    }

    #[test]
    fn binary_rows_read_as_text() {
        let columns = [
            Column {
                encoding: Encoding::Integer(8),
                unsigned: false,
            },
            Column {
                encoding: Encoding::Integer(4),
                unsigned: false,
            },
            Column {
                encoding: Encoding::Integer(1),
                unsigned: true,
            },
            Column {
                encoding: Encoding::LengthEncoded,
                unsigned: false,
            },
            Column {
                encoding: Encoding::Integer(8),
                unsigned: false,
            },
        ];
        // The fifth column is NULL: bit 4 + 2 = 6 of the bitmap.
        let mut payload = vec![0x00, 0b0100_0000];
        payload.extend_from_slice(&(-5i64).to_le_bytes());
        payload.extend_from_slice(&(-1i32).to_le_bytes());
        payload.push(200);
        payload.extend_from_slice(&[2, b'4', b'2']);
        let row = binary_row(&payload, &columns).unwrap_or_default();
        let text: Vec<Option<&[u8]>> = row.iter().map(Option::as_deref).collect();
        assert_eq!(
            text,
            vec![
                Some(&b"-5"[..]),
                Some(&b"-1"[..]),
                Some(&b"200"[..]),
                Some(&b"42"[..]),
                None
            ]
        );
        assert_eq!(binary_row(&payload[..payload.len() - 1], &columns), None);
    }
}
