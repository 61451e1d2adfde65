//! The open socket: bytes in and out, plain or through rustls, never
//! blocking. `write` sends what it can and keeps the rest; `read` takes
//! what has arrived.

use std::io::{self, Read, Write};

use bytes::BytesMut;
use rustls::ClientConnection;

use super::stream::Stream;
use super::uv;

pub struct Socket {
    // Declared first, so it is closed (and stops watching the descriptor)
    // before `stream` closes it.
    pub poll: uv::Poll,
    /// The events `poll` watches now.
    pub watching: i32,
    stream: Stream,
    tls: Option<ClientConnection>,
}

/// What reading found.
pub enum Arrived {
    /// Some bytes (maybe none yet); the socket is still open.
    More,
    /// The other end closed it.
    Closed,
}

impl Socket {
    pub fn new(poll: uv::Poll, stream: Stream, tls: Option<ClientConnection>) -> Socket {
        Socket {
            poll,
            watching: 0,
            stream,
            tls,
        }
    }

    /// Send `out` (draining what was sent). Returns whether everything went:
    /// if not, the caller watches for the socket to become writable.
    pub fn write(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        match &mut self.tls {
            None => {
                let mut sent = 0;
                while sent < out.len() {
                    match self.stream.write(&out[sent..]) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => sent += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                out.drain(..sent);
                Ok(out.is_empty())
            }
            Some(tls) => {
                // rustls takes plaintext only while its own buffer of records
                // to send has room (64 KiB by default): hand it what it takes,
                // send those records, and go on until everything went or the
                // socket is full (then the rest waits in `out` for room).
                let mut taken = 0;
                let all = loop {
                    if taken < out.len() {
                        match tls.writer().write(&out[taken..]) {
                            Ok(n) => taken += n,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(e),
                        }
                    }
                    if !tls.wants_write() {
                        if taken == out.len() {
                            break true;
                        }
                        return Err(io::Error::other("TLS took no more bytes to send"));
                    }
                    match tls.write_tls(&mut self.stream) {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break false,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                };
                out.drain(..taken);
                Ok(all)
            }
        }
    }

    /// Append what has arrived to `into`.
    pub fn read(&mut self, into: &mut BytesMut) -> io::Result<Arrived> {
        match &mut self.tls {
            None => {
                let mut chunk = [0u8; 16 * 1024];
                loop {
                    match self.stream.read(&mut chunk) {
                        Ok(0) => return Ok(Arrived::Closed),
                        Ok(n) => {
                            into.extend_from_slice(&chunk[..n]);
                            // Short: nothing more yet (the loop says when there is).
                            if n < chunk.len() {
                                return Ok(Arrived::More);
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            return Ok(Arrived::More)
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            Some(tls) => {
                // rustls keeps at most 16 KiB of decrypted bytes unread and
                // refuses to read more past that: take what it decrypted
                // after every read from the socket, until the socket is empty.
                loop {
                    if take_plaintext(tls, into)? {
                        return Ok(Arrived::Closed);
                    }
                    match tls.read_tls(&mut self.stream) {
                        Ok(0) => break,
                        Ok(_) => {
                            tls.process_new_packets().map_err(io::Error::other)?;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            return Ok(Arrived::More)
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                // The other end closed the socket: what it sent before is still read.
                tls.process_new_packets().map_err(io::Error::other)?;
                take_plaintext(tls, into)?;
                Ok(Arrived::Closed)
            }
        }
    }

    /// Whether rustls still holds bytes to send (a TLS socket only).
    pub fn wants_write(&self) -> bool {
        self.tls.as_ref().is_some_and(|tls| tls.wants_write())
    }
}

/// Move the bytes rustls has decrypted into `into`. Returns whether the
/// server ended the TLS session (its close_notify, or the stream's end).
fn take_plaintext(tls: &mut ClientConnection, into: &mut BytesMut) -> io::Result<bool> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match tls.reader().read(&mut chunk) {
            Ok(0) => return Ok(true),
            Ok(n) => into.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(true),
            Err(e) => return Err(e),
        }
    }
}
