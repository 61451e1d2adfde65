//! A connected stream as the loop reads and writes it: TCP, or (on unix) a
//! unix-domain socket. Either is a descriptor libuv watches the same way.

use std::io::{self, Read, Write};
use std::net::TcpStream;
#[cfg(unix)]
use std::os::unix::net::UnixStream;

use super::uv::OsSock;

pub enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
}

impl Stream {
    /// The port this end of a TCP connection has (what a server's list of
    /// its sessions shows it by); a unix socket has none.
    pub fn local_port(&self) -> Option<u16> {
        match self {
            Stream::Tcp(tcp) => tcp.local_addr().ok().map(|address| address.port()),
            #[cfg(unix)]
            Stream::Unix(_) => None,
        }
    }

    /// What libuv takes for the stream: its descriptor.
    #[cfg(unix)]
    pub fn os_sock(&self) -> OsSock {
        use std::os::fd::AsRawFd;
        match self {
            Stream::Tcp(tcp) => tcp.as_raw_fd(),
            Stream::Unix(unix) => unix.as_raw_fd(),
        }
    }

    /// What libuv takes for the stream: its `SOCKET`. Rust keeps one in a
    /// `u64` whatever the pointer width; Windows gives out only values a
    /// `SOCKET` holds, so the conversion keeps it whole.
    #[cfg(windows)]
    pub fn os_sock(&self) -> OsSock {
        use std::os::windows::io::AsRawSocket;
        let Stream::Tcp(tcp) = self;
        tcp.as_raw_socket() as OsSock
    }
}

impl From<TcpStream> for Stream {
    fn from(tcp: TcpStream) -> Stream {
        Stream::Tcp(tcp)
    }
}

impl Read for Stream {
    fn read(&mut self, into: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(tcp) => tcp.read(into),
            #[cfg(unix)]
            Stream::Unix(unix) => unix.read(into),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(tcp) => tcp.write(bytes),
            #[cfg(unix)]
            Stream::Unix(unix) => unix.write(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(tcp) => tcp.flush(),
            #[cfg(unix)]
            Stream::Unix(unix) => unix.flush(),
        }
    }
}
