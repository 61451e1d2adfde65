//! MySQL's framing and the pieces every message is made of: a packet is a
//! 3-byte little-endian length, a sequence number, then the payload (a
//! payload of 2^24 - 1 bytes or more continues in the next packet).
//! Integers and strings inside come fixed-size or length-encoded.

/// The largest payload one packet carries; a longer one is split.
pub const MAX_PAYLOAD: usize = 0xFF_FFFF;

/// Append `payload` as packets starting at sequence number `seq`; returns
/// the sequence number the next packet of the exchange takes.
pub fn put_packet(out: &mut Vec<u8>, mut seq: u8, payload: &[u8]) -> u8 {
    let mut rest = payload;
    loop {
        let take = rest.len().min(MAX_PAYLOAD);
        // `take` is at most 2^24 - 1: it fits three bytes.
        let len = u32::try_from(take).unwrap_or(0).to_le_bytes();
        out.extend_from_slice(&len[..3]);
        out.push(seq);
        out.extend_from_slice(&rest[..take]);
        seq = seq.wrapping_add(1);
        rest = &rest[take..];
        // A payload of exactly a multiple of the maximum ends with an empty packet.
        if take < MAX_PAYLOAD {
            return seq;
        }
    }
}

/// The next whole payload in `bytes` from `at`: the payload (joined, if it
/// took several packets) and where the next packet starts; None until all
/// of it has arrived.
pub fn next_payload(bytes: &[u8], mut at: usize) -> Option<(Vec<u8>, usize)> {
    let mut payload = Vec::new();
    loop {
        let header = bytes.get(at..at + 4)?;
        let len =
            usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
        let body = bytes.get(at + 4..at + 4 + len)?;
        payload.extend_from_slice(body);
        at += 4 + len;
        if len < MAX_PAYLOAD {
            return Some((payload, at));
        }
    }
}

/// A reader over a payload: every read fails (None) past its end.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let taken = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(taken)
    }

    pub fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A length-encoded integer; None also for the NULL marker (0xFB).
    pub fn lenenc(&mut self) -> Option<u64> {
        let first = self.u8()?;
        let width = match first {
            0..=0xFA => return Some(u64::from(first)),
            0xFC => 2,
            0xFD => 3,
            0xFE => 8,
            _ => return None,
        };
        let bytes = self.take(width)?;
        Some(
            bytes
                .iter()
                .rev()
                .fold(0u64, |n, &byte| (n << 8) | u64::from(byte)),
        )
    }

    /// A length-encoded string: Some(None) for SQL NULL.
    pub fn lenenc_bytes(&mut self) -> Option<Option<&'a [u8]>> {
        if self.bytes.get(self.at) == Some(&0xFB) {
            self.at += 1;
            return Some(None);
        }
        let len = usize::try_from(self.lenenc()?).ok()?;
        self.take(len).map(Some)
    }

    /// Bytes up to the next NUL (which is skipped).
    pub fn nul_terminated(&mut self) -> Option<&'a [u8]> {
        let rest = self.bytes.get(self.at..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        self.at += end + 1;
        Some(&rest[..end])
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        let rest = self.bytes.get(self.at..).unwrap_or(&[]);
        self.at = self.bytes.len();
        rest
    }
}

/// Append a length-encoded integer.
pub fn put_lenenc(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=0xFA => out.push(n as u8),
        0xFB..=0xFFFF => {
            out.push(0xFC);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            out.push(0xFD);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xFE);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// What ended a command: the server's OK (rows changed, the id
/// `LAST_INSERT_ID(expr)` last set, the status flags), or its error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ok {
    pub affected: u64,
    pub insert_id: u64,
    pub status: u16,
}

/// The server status flag: another result follows this one (a CALL's).
pub const MORE_RESULTS: u16 = 0x0008;

/// An error the server reported: its number, SQLSTATE and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    pub number: u16,
    pub state: String,
    pub message: String,
}

/// An OK payload (after its 0x00 or 0xFE header byte).
pub fn read_ok(payload: &[u8]) -> Option<Ok> {
    let mut r = Reader::new(payload.get(1..)?);
    let affected = r.lenenc()?;
    let insert_id = r.lenenc()?;
    let status = r.u16()?;
    Some(Ok {
        affected,
        insert_id,
        status,
    })
}

/// An ERR payload (0xFF, the number, `#` and the SQLSTATE, the message).
pub fn read_error(payload: &[u8]) -> ServerError {
    let mut r = Reader::new(payload.get(1..).unwrap_or(&[]));
    let number = r.u16().unwrap_or(0);
    let mut state = String::new();
    if r.bytes.get(r.at) == Some(&b'#') {
        r.at += 1;
        state = String::from_utf8_lossy(r.take(5).unwrap_or(&[])).into_owned();
    }
    ServerError {
        number,
        state,
        message: String::from_utf8_lossy(r.rest()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_round_trips_through_packets_split_at_the_maximum() {
        for len in [0, 1, 250, MAX_PAYLOAD - 1, MAX_PAYLOAD, MAX_PAYLOAD + 7] {
            let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut out = Vec::new();
            let next = put_packet(&mut out, 3, &payload);
            let packets = 1 + len / MAX_PAYLOAD;
            assert_eq!(next, 3 + packets as u8);
            assert_eq!(next_payload(&out[..out.len() - 1], 0), None);
            assert_eq!(next_payload(&out, 0), Some((payload, out.len())));
        }
    }

    #[test]
    fn length_encoded_integers_of_every_width() {
        for n in [
            0u64,
            250,
            251,
            0xFFFF,
            0x1_0000,
            0xFF_FFFF,
            0x100_0000,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_lenenc(&mut out, n);
            assert_eq!(Reader::new(&out).lenenc(), Some(n), "{n}");
        }
        assert_eq!(Reader::new(&[0xFB]).lenenc_bytes(), Some(None));
        assert_eq!(
            Reader::new(&[2, b'h', b'i']).lenenc_bytes(),
            Some(Some(&b"hi"[..]))
        );
        assert_eq!(Reader::new(&[3, b'h']).lenenc_bytes(), None);
    }

    #[test]
    fn ok_and_error_payloads() {
        let ok = [0x00, 0x02, 0xFC, 0x34, 0x12, 0x08, 0x00, 0x00, 0x00];
        assert_eq!(
            read_ok(&ok),
            Some(Ok {
                affected: 2,
                insert_id: 0x1234,
                status: MORE_RESULTS
            })
        );
        let mut err = vec![0xFF, 0x15, 0x04, b'#'];
        err.extend_from_slice(b"28000Access denied");
        assert_eq!(
            read_error(&err),
            ServerError {
                number: 1045,
                state: "28000".to_owned(),
                message: "Access denied".to_owned()
            }
        );
    }
}
