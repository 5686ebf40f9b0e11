//! Where the daemon listens, and one connection to it.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// A daemon's address: TCP `host:port` or a UNIX socket path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A resolved TCP address.
    Tcp(SocketAddr),
    /// A UNIX stream socket.
    Unix(PathBuf),
}

/// Why a target string is not usable.
#[derive(Debug)]
pub enum TargetError {
    /// `host:port` did not resolve.
    Resolve(String, io::Error),
    /// It resolved to nothing.
    NoAddress(String),
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetError::Resolve(s, e) => write!(f, "cannot resolve {s:?} (want HOST:PORT or a socket path): {e}"),
            TargetError::NoAddress(s) => write!(f, "{s:?} resolves to no address"),
        }
    }
}

impl Target {
    /// A path (anything with a `/`) is a UNIX socket, anything else `host:port`.
    pub fn parse(spec: &str) -> Result<Target, TargetError> {
        if spec.contains('/') {
            return Ok(Target::Unix(PathBuf::from(spec)));
        }
        let mut addrs = spec.to_socket_addrs().map_err(|e| TargetError::Resolve(spec.to_string(), e))?;
        addrs.next().map(Target::Tcp).ok_or_else(|| TargetError::NoAddress(spec.to_string()))
    }

    /// Opens one connection, with `timeout` on every read and write.
    pub fn connect(&self, timeout: Duration) -> io::Result<Conn> {
        let conn = match self {
            Target::Tcp(addr) => Conn::Tcp(TcpStream::connect_timeout(addr, timeout)?),
            Target::Unix(path) => Conn::Unix(UnixStream::connect(path)?),
        };
        conn.set_timeouts(timeout)?;
        Ok(conn)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tcp(addr) => write!(f, "{addr}"),
            Target::Unix(path) => write!(f, "{}", path.display()),
        }
    }
}

/// One open connection to the daemon.
pub enum Conn {
    /// Over TCP.
    Tcp(TcpStream),
    /// Over a UNIX socket.
    Unix(UnixStream),
}

impl Conn {
    fn set_timeouts(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => {
                s.set_read_timeout(Some(timeout))?;
                s.set_write_timeout(Some(timeout))
            }
            Conn::Unix(s) => {
                s.set_read_timeout(Some(timeout))?;
                s.set_write_timeout(Some(timeout))
            }
        }
    }

    /// Tells the daemon the request is complete, as spamc does after sending it.
    pub fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.shutdown(Shutdown::Write),
            Conn::Unix(s) => s.shutdown(Shutdown::Write),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_and_unix() {
        let cases: &[(&str, Option<Target>)] = &[
            ("127.0.0.1:783", Some(Target::Tcp("127.0.0.1:783".parse().expect("addr")))),
            ("[::1]:7830", Some(Target::Tcp("[::1]:7830".parse().expect("addr")))),
            ("/run/spamd.sock", Some(Target::Unix(PathBuf::from("/run/spamd.sock")))),
            ("./spamd.sock", Some(Target::Unix(PathBuf::from("./spamd.sock")))),
            ("127.0.0.1", None),
            ("127.0.0.1:notaport", None),
        ];
        for (spec, want) in cases {
            assert_eq!(Target::parse(spec).ok(), *want, "{spec}");
        }
    }
}
