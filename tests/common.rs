//! Helpers shared by the integration tests: run the real siftd binary, as a command or as a daemon.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The siftd binary cargo built for this test run.
pub fn siftd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_siftd"))
}

/// The shared corpus folder, if present.
pub fn corpus(sub: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus").join(sub);
    p.is_dir().then_some(p)
}

/// Runs `cmd` with a virtual-memory cap (KiB) and a deadline; kills it past the deadline.
pub fn run_bounded(cmd: &mut Command, memory_kib: u64, deadline: Duration) -> Output {
    let program = cmd.get_program().to_owned();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!("ulimit -v {memory_kib} && exec \"$0\" \"$@\""))
        .arg(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = sh.spawn().expect("spawn siftd");
    let started = Instant::now();
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let out_thread = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err_thread = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let stdout = out_thread.join().unwrap_or_default().into_bytes();
            let stderr = err_thread.join().unwrap_or_default().into_bytes();
            return Output { status, stdout, stderr };
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            panic!("siftd did not finish within {deadline:?}: hang");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub const GTUBE: &str = include_str!("data/gtube.eml");

pub const HAM: &str = include_str!("data/ham.eml");

// The daemon as tests run it: helpers shared by tests/daemon.rs, faults.rs and sandbox.rs.

/// Whether the real `spamc` is installed.
pub fn have_spamc() -> bool {
    Command::new("spamc").arg("-V").output().is_ok()
}

/// True (after printing SKIP) when spamc is missing: `if skip_without_spamc() { return; }`.
pub fn skip_without_spamc() -> bool {
    let missing = !have_spamc();
    if missing {
        eprintln!("SKIP: spamc not installed (apt-get install spamc)");
    }
    missing
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// A siftd daemon for one test on 127.0.0.1, logging to a file; killed when dropped.
pub struct Daemon {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
    pub dir: PathBuf,
}

impl Daemon {
    /// Starts siftd with `extra` options and waits until it answers PING.
    pub fn start(extra: &[&str]) -> Daemon {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("sift-daemon-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let log = dir.join("siftd.log");
        let child = siftd()
            .args(["-s"])
            .arg(&log)
            .args(["-i", &format!("127.0.0.1:{port}")])
            .args(extra)
            .stdin(Stdio::null())
            .spawn()
            .expect("start siftd");
        let d = Daemon { child, port, log, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if try_request(port, b"PING SPAMC/1.5\r\n\r\n").is_ok_and(|a| a.contains("PONG")) {
                return d;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("siftd did not answer PING: {}", d.log_text());
    }

    /// The master's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Runs spamc against this daemon: (stdout, exit status).
    pub fn spamc(&self, args: &[&str], input: &str) -> (String, i32) {
        spamc_port(self.port, args, input)
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Pids of this daemon's children, from /proc.
    pub fn children(&self) -> BTreeSet<u32> {
        children_of(self.pid())
    }

    /// Sends the master a signal by name (`HUP`, `TERM`, ...).
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args(["-s", sig, &self.pid().to_string()]).status().expect("kill").success();
        assert!(ok, "kill -s {sig}");
    }

    /// Pids that logged a scan result, one entry per result line.
    pub fn serving_pids(&self) -> Vec<u32> {
        self.log_text()
            .lines()
            .filter(|l| l.contains("]: result: "))
            .filter_map(|l| l.split_once("siftd[")?.1.split(']').next()?.parse().ok())
            .collect()
    }

    /// Panics if a child died of SIGSYS: a system call missing from the sandbox's list.
    pub fn assert_no_sandbox_kill(&self) {
        let text = self.log_text();
        let killed: Vec<&str> = text.lines().filter(|l| l.contains(&format!("died on signal {}", libc::SIGSYS))).collect();
        assert!(killed.is_empty(), "children killed by the seccomp filter: {killed:?}");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs spamc against 127.0.0.1:`port`: (stdout, exit status).
pub fn spamc_port(port: u16, args: &[&str], input: &str) -> (String, i32) {
    let mut cmd = Command::new("spamc");
    cmd.args(["-d", "127.0.0.1", "-p", &port.to_string()]);
    run_spamc(cmd, args, input)
}

/// Runs `cmd` (spamc with its endpoint options) with `args`, `input` on stdin: (stdout, exit status).
pub fn run_spamc(mut cmd: Command, args: &[&str], input: &str) -> (String, i32) {
    let mut child = cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn spamc");
    let mut stdin = child.stdin.take().expect("stdin");
    let text = input.to_string();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(text.as_bytes());
    });
    let out = child.wait_with_output().expect("spamc output");
    let _ = writer.join();
    (String::from_utf8_lossy(&out.stdout).into_owned(), out.status.code().unwrap_or(-1))
}

/// Live (not zombie) children of `parent`, from /proc.
pub fn children_of(parent: u32) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // Fields after the command name: state, ppid, ...
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(parent) && fields.first() != Some(&"Z") {
            out.insert(pid);
        }
    }
    out
}

/// Whether `pid` is gone or a zombie.
pub fn is_gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
}

/// Polls `cond` every 20 ms until it holds; panics after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out waiting for {what}");
}

/// Sends `request`, half-closes, reads the whole answer (10 s read timeout).
pub fn try_request(port: u16, request: &[u8]) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(request)?;
    s.shutdown(std::net::Shutdown::Write)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// [`try_request`], with what was read before an error (often nothing).
pub fn raw_request(port: u16, request: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s.write_all(request).expect("write");
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A CHECK request for `message`, as spamc sends it.
pub fn check_request(message: &str) -> Vec<u8> {
    let mut r = format!("CHECK SPAMC/1.5\r\nContent-length: {}\r\n\r\n", message.len()).into_bytes();
    r.extend_from_slice(message.as_bytes());
    r
}

/// One CHECK over a raw connection: Ok(is spam) from the `Spam:` line, Err(what came back).
pub fn check(port: u16, message: &str) -> Result<bool, String> {
    let answer = try_request(port, &check_request(message)).map_err(|e| e.to_string())?;
    if !answer.starts_with("SPAMD/1.1 0 EX_OK") {
        return Err(answer);
    }
    match answer.lines().find_map(|l| l.strip_prefix("Spam: ")) {
        Some(v) if v.starts_with("True") => Ok(true),
        Some(v) if v.starts_with("False") => Ok(false),
        _ => Err(answer),
    }
}

/// A field of /proc/`pid`/status (`Uid`, `NoNewPrivs`, ...): its first word.
pub fn status_field(pid: u32, name: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let value = status.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?;
    value.split_whitespace().next().map(str::to_string)
}

/// The real uid of `pid`.
pub fn uid_of(pid: u32) -> Option<u32> {
    status_field(pid, "Uid")?.parse().ok()
}

/// A TCP connection to 127.0.0.1:`port` whose source address is `from` (any 127/8
/// address works on Linux loopback).
pub fn connect_from(from: IpAddr, port: u16) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(from, 0).into())?;
    socket.connect(&SocketAddr::from(([127, 0, 0, 1], port)).into())?;
    Ok(socket.into())
}

/// Load from client threads, each sending CHECKs of its messages in turn until stopped;
/// counts answers and failures (no answer, or not the expected verdict).
pub struct Load {
    pub answered: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    pub failed: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    /// GTUBE (spam) and ham (not spam) under the default rules.
    pub const DEFAULT: &'static [(&'static str, bool)] = &[(GTUBE, true), (HAM, false)];

    /// Starts `clients` threads sending `messages` (message, expected `Spam:` verdict).
    pub fn start(port: u16, clients: usize, messages: &'static [(&'static str, bool)]) -> Load {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::{Arc, Mutex};
        let answered = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..clients)
            .map(|c| {
                let (answered, failed, stop) = (answered.clone(), failed.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut i = c;
                    while !stop.load(Ordering::Relaxed) {
                        let Some(&(message, spam)) = messages.get(i % messages.len().max(1)) else { break };
                        match check(port, message) {
                            Ok(v) if v == spam => {
                                answered.fetch_add(1, Ordering::Relaxed);
                            }
                            other => failed.lock().expect("lock").push(format!("client {c} request {i}: {other:?}")),
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        Load { answered, failed, stop, threads }
    }

    /// Requests answered so far.
    pub fn answered(&self) -> usize {
        self.answered.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops the clients; returns (answered, failures).
    pub fn finish(self) -> (usize, Vec<String>) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        let answered = self.answered.load(std::sync::atomic::Ordering::Relaxed);
        let failed = self.failed.lock().map(|f| f.clone()).unwrap_or_default();
        (answered, failed)
    }
}
