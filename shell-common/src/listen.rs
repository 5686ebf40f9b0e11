//! Listening sockets: spamd's `--listen`/`--socketpath` values, binding, ownership and mode,
//! or the sockets a service manager passed (systemd's socket activation).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
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
    /// A TCP socket (else a UNIX one).
    pub tcp: bool,
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
    /// The socket-activation variables or fds are unusable.
    Activation(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::BadListen(s) => write!(f, "bad --listen value {s:?}"),
            StartError::Bind(s, e) => write!(f, "cannot listen on {s}: {e}"),
            StartError::Setup(s) => f.write_str(s),
            StartError::Activation(s) => write!(f, "socket activation: {s}"),
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

/// The listeners: those a service manager passed (see [`inherited`]), else every
/// listener the options ask for (localhost on the spamd port by default). All non-blocking.
pub fn bind_all(o: &DaemonOptions, log: &Log) -> Result<Vec<Listener>, StartError> {
    let out = match inherited()? {
        Some(passed) => {
            if !o.listen.is_empty() || o.socket_path.is_some() {
                log.info("socket activation: using the passed sockets, not --listen/--socketpath");
            }
            passed
        }
        None => bind(o, log)?,
    };
    for l in &out {
        sys::set_nonblocking(l.fd.as_raw_fd(), true).map_err(|e| StartError::Setup(format!("listener {}: {e}", l.name)))?;
    }
    Ok(out)
}

fn bind(o: &DaemonOptions, log: &Log) -> Result<Vec<Listener>, StartError> {
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
                Ok(l) => out.push(Listener { fd: OwnedFd::from(l), unix_path: None, name: addr.to_string(), tcp: true }),
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
                out.push(Listener { fd: OwnedFd::from(l), unix_path: Some(path.clone()), name: path.display().to_string(), tcp: false });
            }
        }
    }
    Ok(out)
}

/// The first fd systemd passes (`SD_LISTEN_FDS_START`).
const FIRST_PASSED_FD: RawFd = 3;

/// More passed fds than this is a broken environment, not a configuration.
const MAX_PASSED_FDS: usize = 256;

/// One fd a service manager passed, with its `LISTEN_FDNAMES` entry.
#[derive(Debug, PartialEq, Eq)]
struct PassedFd {
    fd: RawFd,
    name: Option<String>,
}

/// Which fds a service manager passed: from `LISTEN_PID`, `LISTEN_FDS` and
/// `LISTEN_FDNAMES` as systemd sets them (`sd_listen_fds(3)`). `None` when the
/// variables are absent or meant for another process.
fn passed_fds(pid: Option<&str>, count: Option<&str>, names: Option<&str>, our_pid: u32) -> Result<Option<Vec<PassedFd>>, StartError> {
    let Some(pid) = pid else { return Ok(None) };
    let pid: u32 = pid.trim().parse().map_err(|_| StartError::Activation(format!("LISTEN_PID={pid:?} is not a pid")))?;
    if pid != our_pid {
        return Ok(None);
    }
    let Some(count) = count else { return Ok(None) };
    let n: usize = count.trim().parse().map_err(|_| StartError::Activation(format!("LISTEN_FDS={count:?} is not a count")))?;
    if n == 0 {
        return Ok(None);
    }
    if n > MAX_PASSED_FDS {
        return Err(StartError::Activation(format!("LISTEN_FDS={n} is more than {MAX_PASSED_FDS}")));
    }
    let mut names = names.unwrap_or("").split(':');
    let fds = (0..n)
        .map(|i| {
            let fd = RawFd::try_from(i).ok().and_then(|i| FIRST_PASSED_FD.checked_add(i));
            let name = names.next().filter(|s| !s.is_empty()).map(str::to_string);
            fd.map(|fd| PassedFd { fd, name }).ok_or_else(|| StartError::Activation(format!("LISTEN_FDS={n} overflows")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(fds))
}

/// Takes one passed fd as a listener, TCP or UNIX as `getsockname` says. A UNIX socket
/// file belongs to the service manager: it is not removed at exit.
fn adopt(fd: RawFd, fd_name: Option<&str>) -> Result<Listener, StartError> {
    let owned = sys::adopt_listener(fd).map_err(|e| StartError::Activation(format!("fd {fd}: {e}")))?;
    let tcp = TcpListener::from(owned);
    let address = match tcp.local_addr() {
        Ok(a) => a.to_string(),
        Err(_) => {
            let unix = UnixListener::from(OwnedFd::from(tcp));
            let a = unix.local_addr().map_err(|e| StartError::Activation(format!("fd {fd} is neither a TCP nor a UNIX socket: {e}")))?;
            let shown = a.as_pathname().map_or_else(|| "(unnamed UNIX socket)".to_string(), |p| p.display().to_string());
            let fd = OwnedFd::from(unix);
            return Ok(Listener { fd, unix_path: None, name: passed_name(&shown, fd_name), tcp: false });
        }
    };
    Ok(Listener { fd: OwnedFd::from(tcp), unix_path: None, name: passed_name(&address, fd_name), tcp: true })
}

fn passed_name(address: &str, fd_name: Option<&str>) -> String {
    match fd_name {
        Some(n) => format!("{address} (passed as {n})"),
        None => format!("{address} (passed)"),
    }
}

/// The listening sockets a service manager passed, when `LISTEN_PID` is this process:
/// fds 3 to 3+`LISTEN_FDS`-1. The variables are removed either way, so children and
/// programs they run do not take them for their own.
pub fn inherited() -> Result<Option<Vec<Listener>>, StartError> {
    const VARS: [&str; 3] = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"];
    let [pid, count, names] = VARS.map(|v| std::env::var(v).ok());
    // Called at start-up, before any thread exists, so changing the environment is safe.
    for v in VARS {
        std::env::remove_var(v);
    }
    let Some(fds) = passed_fds(pid.as_deref(), count.as_deref(), names.as_deref(), std::process::id())? else {
        return Ok(None);
    };
    fds.into_iter().map(|p| adopt(p.fd, p.name.as_deref())).collect::<Result<Vec<_>, _>>().map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::IntoRawFd;

    #[test]
    fn listen_values() {
        let v4 = |s: &str| ListenSpec::Tcp(s.parse().unwrap());
        let cases: &[(&str, Option<Vec<ListenSpec>>)] = &[
            ("127.0.0.1", Some(vec![v4("127.0.0.1:783")])),
            ("127.0.0.1:7830", Some(vec![v4("127.0.0.1:7830")])),
            ("[::1]:7830", Some(vec![v4("[::1]:7830")])),
            ("::1", Some(vec![v4("[::1]:783")])),
            ("localhost", Some(vec![v4("127.0.0.1:783"), v4("[::1]:783")])),
            ("*:25", Some(vec![v4("0.0.0.0:25"), v4("[::]:25")])),
            ("/run/siftd.sock", Some(vec![ListenSpec::Unix("/run/siftd.sock".into())])),
            ("ssl:127.0.0.1", None),
            ("127.0.0.1:port", None),
            ("[::1", None),
            ("example.org", None),
        ];
        for (spec, want) in cases {
            assert_eq!(parse_listen(spec, 783, false, false).ok().as_ref(), want.as_ref(), "{spec}");
        }
        let only4 = parse_listen("localhost", 783, true, false).unwrap();
        assert_eq!(only4, vec![v4("127.0.0.1:783")]);
    }

    #[test]
    fn activation_variables() {
        type Want = Result<Option<Vec<(RawFd, Option<&'static str>)>>, ()>;
        type Vars = (Option<&'static str>, Option<&'static str>, Option<&'static str>);
        let cases: &[(Vars, Want)] = &[
            ((None, None, None), Ok(None)),
            ((None, Some("2"), None), Ok(None)),
            ((Some("41"), Some("2"), None), Ok(None)), // meant for another process
            ((Some("42"), None, None), Ok(None)),
            ((Some("42"), Some("0"), None), Ok(None)),
            ((Some("42"), Some("1"), None), Ok(Some(vec![(3, None)]))),
            ((Some("42"), Some("2"), Some("tcp:unix")), Ok(Some(vec![(3, Some("tcp")), (4, Some("unix"))]))),
            ((Some("42"), Some("3"), Some("a::c")), Ok(Some(vec![(3, Some("a")), (4, None), (5, Some("c"))]))),
            ((Some("42"), Some("2"), Some("only-one")), Ok(Some(vec![(3, Some("only-one")), (4, None)]))),
            ((Some("x"), Some("1"), None), Err(())),
            ((Some("42"), Some("-1"), None), Err(())),
            ((Some("42"), Some("many"), None), Err(())),
            ((Some("42"), Some("100000"), None), Err(())),
        ];
        for ((pid, count, names), want) in cases {
            let got = passed_fds(*pid, *count, *names, 42).map_err(drop);
            let want = want.clone().map(|o| o.map(|v| v.into_iter().map(|(fd, n)| PassedFd { fd, name: n.map(str::to_string) }).collect::<Vec<_>>()));
            assert_eq!(got, want, "LISTEN_PID={pid:?} LISTEN_FDS={count:?} LISTEN_FDNAMES={names:?}");
        }
    }

    #[test]
    fn adopts_passed_tcp_and_unix_listeners_and_refuses_others() {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = tcp.local_addr().unwrap();
        let l = adopt(tcp.into_raw_fd(), Some("siftd.socket")).unwrap();
        assert_eq!(l.name, format!("{addr} (passed as siftd.socket)"));
        assert!(l.unix_path.is_none() && l.tcp);

        let dir = std::env::temp_dir().join(format!("sift-listen-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let unix = UnixListener::bind(&path).unwrap();
        let l = adopt(unix.into_raw_fd(), None).unwrap();
        assert_eq!(l.name, format!("{} (passed)", path.display()));
        assert!(l.unix_path.is_none(), "the service manager owns the socket file");
        assert!(!l.tcp);
        drop(l);
        assert!(path.exists());

        // A file, a datagram socket and a stream socket that is not listening are refused.
        let file = std::fs::File::create(dir.join("plain")).unwrap();
        assert!(matches!(adopt(file.into_raw_fd(), None), Err(StartError::Activation(_))));
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(matches!(adopt(udp.into_raw_fd(), None), Err(StartError::Activation(_))));
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(matches!(adopt(a.into_raw_fd(), None), Err(StartError::Activation(_))));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
