//! Listening sockets: spamd's `--listen`/`--socketpath` values, binding, ownership and mode.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;

use crate::cli::DaemonOptions;
use crate::log::Log;
use crate::sys;

/// One listening socket.
pub struct Listener {
    /// The bound, non-blocking socket.
    pub fd: OwnedFd,
    /// The socket file to remove at exit, for UNIX listeners.
    pub unix_path: Option<PathBuf>,
    /// What the log calls it.
    pub name: String,
}

/// Why the daemon could not start.
#[derive(Debug)]
pub enum StartError {
    /// A `--listen` value is not understood.
    BadListen(String),
    /// Binding failed.
    Bind(String, io::Error),
    /// Other setup failed.
    Setup(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::BadListen(s) => write!(f, "bad --listen value {s:?}"),
            StartError::Bind(s, e) => write!(f, "cannot listen on {s}: {e}"),
            StartError::Setup(s) => f.write_str(s),
        }
    }
}

/// Where to listen: TCP addresses or UNIX socket paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenSpec {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A UNIX socket path.
    Unix(PathBuf),
}

/// Parses one spamd `--listen` value.
pub fn parse_listen(spec: &str, port: u16, ipv4_only: bool, ipv6_only: bool) -> Result<Vec<ListenSpec>, StartError> {
    let bad = || StartError::BadListen(spec.to_string());
    if spec.starts_with('/') {
        return Ok(vec![ListenSpec::Unix(PathBuf::from(spec))]);
    }
    if spec.starts_with("ssl:") {
        return Err(StartError::BadListen(format!("{spec} (SSL is not supported)")));
    }
    let (host, port) = if let Some(rest) = spec.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or_else(bad)?;
        let p = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad())?,
            None if after.is_empty() => port,
            None => return Err(bad()),
        };
        (h.to_string(), p)
    } else if spec.matches(':').count() == 1 {
        let (h, p) = spec.split_once(':').ok_or_else(bad)?;
        (h.to_string(), if p.is_empty() { port } else { p.parse().map_err(|_| bad())? })
    } else {
        (spec.to_string(), port)
    };
    let mut addrs: Vec<IpAddr> = match host.as_str() {
        "" | "*" => vec![IpAddr::V4(Ipv4Addr::UNSPECIFIED), IpAddr::V6(Ipv6Addr::UNSPECIFIED)],
        "localhost" => vec![IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST)],
        h => vec![h.parse().map_err(|_| bad())?],
    };
    addrs.retain(|a| !(ipv4_only && a.is_ipv6() || ipv6_only && a.is_ipv4()));
    Ok(addrs.into_iter().map(|a| ListenSpec::Tcp(SocketAddr::new(a, port))).collect())
}

/// Binds every listener the options ask for (localhost on the spamd port by default).
pub fn bind_all(o: &DaemonOptions, log: &Log) -> Result<Vec<Listener>, StartError> {
    let mut specs = Vec::new();
    let defaults = o.listen.is_empty() && o.socket_path.is_none();
    for l in &o.listen {
        specs.extend(parse_listen(l, o.port, o.ipv4_only, o.ipv6_only)?);
    }
    if let Some(p) = &o.socket_path {
        specs.push(ListenSpec::Unix(p.clone()));
    }
    if defaults {
        specs.extend(parse_listen("localhost", o.port, o.ipv4_only, o.ipv6_only)?);
    }
    let owner = o.socket_owner.as_deref().map(sys::lookup_user).transpose().map_err(|e| StartError::Setup(format!("--socketowner: {e}")))?;
    let group = o.socket_group.as_deref().map(sys::lookup_group).transpose().map_err(|e| StartError::Setup(format!("--socketgroup: {e}")))?;
    let mode = o
        .socket_mode
        .as_deref()
        .map(|m| u32::from_str_radix(m, 8))
        .transpose()
        .map_err(|_| StartError::Setup("--socketmode wants an octal mode such as 0660".into()))?;
    let mut out = Vec::new();
    for spec in specs {
        match spec {
            ListenSpec::Tcp(addr) => match TcpListener::bind(addr) {
                Ok(l) => out.push(Listener { fd: OwnedFd::from(l), unix_path: None, name: addr.to_string() }),
                // The default ::1 may be missing where IPv6 is off; 127.0.0.1 suffices then.
                Err(e) if defaults && addr.is_ipv6() => log.info(&format!("not listening on {addr}: {e}")),
                Err(e) => return Err(StartError::Bind(addr.to_string(), e)),
            },
            ListenSpec::Unix(path) => {
                if std::fs::symlink_metadata(&path).is_ok_and(|m| {
                    use std::os::unix::fs::FileTypeExt;
                    m.file_type().is_socket()
                }) {
                    let _ = std::fs::remove_file(&path);
                }
                let l = UnixListener::bind(&path).map_err(|e| StartError::Bind(path.display().to_string(), e))?;
                sys::chown_chmod(&path, owner.as_ref().map(|a| a.uid), group, mode).map_err(|e| StartError::Bind(path.display().to_string(), e))?;
                out.push(Listener { fd: OwnedFd::from(l), unix_path: Some(path.clone()), name: path.display().to_string() });
            }
        }
    }
    for l in &out {
        sys::set_nonblocking(l.fd.as_raw_fd(), true).map_err(|e| StartError::Setup(format!("listener: {e}")))?;
    }
    Ok(out)
}
