//! The daemon as users run it: real siftd processes, the real `spamc` from apt.
//! Tests skip with a message when spamc is not installed.

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{GTUBE, HAM};

fn have_spamc() -> bool {
    Command::new("spamc").arg("-V").output().is_ok()
}

macro_rules! require_spamc {
    () => {
        if !have_spamc() {
            eprintln!("SKIP: spamc not installed (apt-get install spamc)");
            return;
        }
    };
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// A siftd daemon for one test, killed when dropped.
struct Daemon {
    child: Child,
    port: u16,
    log: PathBuf,
    dir: PathBuf,
}

impl Daemon {
    fn start(extra: &[&str]) -> Daemon {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("sift-daemon-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let log = dir.join("siftd.log");
        let child = Command::new(env!("CARGO_BIN_EXE_siftd"))
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
            if d.spamc(&["-K"], "").1 == 0 {
                return d;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("siftd did not answer PING: {}", d.log_text());
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn spamc(&self, args: &[&str], input: &str) -> (String, i32) {
        spamc_port(self.port, args, input)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Pids of this daemon's children, from /proc.
    fn children(&self) -> BTreeSet<u32> {
        children_of(self.pid())
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args(["-s", sig, &self.pid().to_string()]).status().expect("kill").success();
        assert!(ok, "kill -s {sig}");
    }

    /// Pids that logged a scan result.
    fn serving_pids(&self) -> Vec<u32> {
        self.log_text()
            .lines()
            .filter(|l| l.contains("]: result: "))
            .filter_map(|l| l.split_once("siftd[")?.1.split(']').next()?.parse().ok())
            .collect()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn spamc_port(port: u16, args: &[&str], input: &str) -> (String, i32) {
    let mut child = Command::new("spamc")
        .args(["-d", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn spamc");
    let mut stdin = child.stdin.take().expect("stdin");
    let text = input.to_string();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(text.as_bytes());
    });
    let out = child.wait_with_output().expect("spamc output");
    let _ = writer.join();
    (String::from_utf8_lossy(&out.stdout).into_owned(), out.status.code().unwrap_or(-1))
}

fn children_of(parent: u32) -> BTreeSet<u32> {
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

fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn spamc_commands_table() {
    require_spamc!();
    let d = Daemon::start(&[]);
    // (spamc args, message, check on stdout, exit status as spamc 4.0.1 gives it against spamd)
    type Check = fn(&str) -> bool;
    let cases: &[(&[&str], &str, Check, i32)] = &[
        (&["-c"], GTUBE, |o| o.starts_with("100") && o.trim_end().ends_with("/5.0"), 1),
        (&["-c"], HAM, |o| o.trim_end().ends_with("/5.0") && !o.starts_with("100"), 0),
        (&["-R"], GTUBE, |o| o.contains("Content analysis details:") && o.contains("GTUBE"), 0),
        (&["-R"], HAM, |o| o.contains("Content analysis details:"), 0),
        (&["-y"], GTUBE, |o| o.split(',').any(|r| r.trim() == "GTUBE"), 0),
        (&[], GTUBE, |o| o.contains("X-Spam-Flag: YES") && o.contains("Content-Type: message/rfc822"), 0),
        (&[], HAM, |o| o.contains("X-Spam-Status: No,") && o.contains("lunch on Thursday"), 0),
        (&["-E"], GTUBE, |o| o.contains("X-Spam-Flag: YES"), 1),
        (&["-E"], HAM, |o| o.contains("X-Spam-Status: No,"), 0),
        (&["-x", "-c"], GTUBE, |o| o.starts_with("100"), 1),
        (&["-K"], "", |o| o.contains("PONG") || o.contains("SPAMD/1.5 0"), 0),
    ];
    for (args, message, check, status) in cases {
        let (out, code) = d.spamc(args, message);
        assert_eq!(code, *status, "spamc {args:?}: status, output {out:?}");
        assert!(check(&out), "spamc {args:?}: output {out:?}");
    }
}

#[test]
fn unix_socket_with_spamc_u() {
    require_spamc!();
    let sock = std::env::temp_dir().join(format!("sift-{}.sock", std::process::id()));
    let sock_s = sock.to_string_lossy().into_owned();
    let d = Daemon::start(&["--socketpath", &sock_s, "--socketmode", "0600"]);
    let mode = std::fs::metadata(&sock).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777).expect("socket exists");
    assert_eq!(mode, 0o600);
    let out = Command::new("spamc").args(["-U", &sock_s, "-c"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().and_then(|mut c| {
        c.stdin.take().expect("stdin").write_all(GTUBE.as_bytes())?;
        c.wait_with_output()
    });
    let out = out.expect("spamc -U");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("100"));
    drop(d);
}

#[test]
fn sequential_requests_are_served_by_one_child() {
    require_spamc!();
    let d = Daemon::start(&[]);
    for i in 0..50 {
        let (out, code) = d.spamc(&["-c"], if i % 2 == 0 { GTUBE } else { HAM });
        assert!(code == 0 || code == 1, "request {i}: {out}");
    }
    wait_until("50 result lines", Duration::from_secs(10), || d.serving_pids().len() >= 50);
    let pids: BTreeSet<u32> = d.serving_pids().into_iter().collect();
    assert_eq!(pids.len(), 1, "50 sequential requests went to children {pids:?}");
}

#[test]
fn pool_grows_under_concurrency_and_shrinks_when_idle() {
    let d = Daemon::start(&["--timeout-tcp", "30"]);
    // 8 clients that each hold a connection open mid-request keep children busy.
    let clients: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
            s.write_all(b"CHECK SPAMC/1.5\r\nContent-length: 100000\r\n\r\nstart").expect("write");
            s
        })
        .collect();
    wait_until("the pool to reach --max-children 5", Duration::from_secs(10), || d.children().len() == 5);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(d.children().len(), 5, "never above --max-children");
    // The clients go away; every one of them was served or refused, none hangs.
    drop(clients);
    wait_until("the pool to shrink back to --max-spare 2", Duration::from_secs(20), || d.children().len() == 2);
    assert!(raw_request(d.port, b"PING SPAMC/1.5\r\n\r\n").starts_with("SPAMD/1.5 0 PONG"));
}

#[test]
fn killed_busy_child_fails_only_its_connection() {
    require_spamc!();
    let d = Daemon::start(&["--timeout-tcp", "20"]);
    // A client that sends half a request keeps one child busy.
    let mut stalled = TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
    stalled.write_all(b"CHECK SPAMC/1.5\r\nContent-length: 1000\r\n\r\nhalf").expect("write");
    std::thread::sleep(Duration::from_millis(300));
    let before = d.children();
    // The busy child is the one that has not answered: the lowest pid got the connection.
    let busy = *before.iter().next().expect("a child");
    Command::new("kill").args(["-9", &busy.to_string()]).status().expect("kill");
    let mut rest = Vec::new();
    let _ = stalled.read_to_end(&mut rest);
    assert!(rest.is_empty(), "the killed child's client gets no answer");
    wait_until("a replacement child", Duration::from_secs(5), || {
        let now = d.children();
        !now.contains(&busy) && !now.is_empty()
    });
    let (out, code) = d.spamc(&["-c"], GTUBE);
    assert_eq!(code, 1, "{out}");
}

#[test]
fn sighup_under_load_fails_no_request() {
    require_spamc!();
    let d = Daemon::start(&[]);
    let port = d.port;
    let failures = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Instant::now() + Duration::from_secs(5);
    let clients: Vec<_> = (0..3)
        .map(|_| {
            let (failures, done) = (failures.clone(), done.clone());
            std::thread::spawn(move || {
                while Instant::now() < stop {
                    let (_, code) = spamc_port(port, &["-c"], GTUBE);
                    if code != 1 {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(1200));
        d.signal("HUP");
    }
    for c in clients {
        let _ = c.join();
    }
    assert!(d.log_text().contains("reloaded rules"), "{}", d.log_text());
    assert!(done.load(Ordering::Relaxed) > 10);
    assert_eq!(failures.load(Ordering::Relaxed), 0, "requests failed during reloads");
}

#[test]
fn broken_rules_on_sighup_keep_the_old_set() {
    require_spamc!();
    let rules = std::env::temp_dir().join(format!("sift-hup-rules-{}", std::process::id()));
    std::fs::create_dir_all(&rules).expect("rules dir");
    std::fs::write(rules.join("10_a.cf"), "body LUNCH /lunch/\nscore LUNCH 6\n").expect("rules");
    let d = Daemon::start(&["-C", &rules.to_string_lossy()]);
    assert_eq!(d.spamc(&["-c"], HAM).1, 1);
    std::fs::remove_dir_all(&rules).expect("remove rules");
    d.signal("HUP");
    wait_until("the reload failure to be logged", Duration::from_secs(5), || d.log_text().contains("reload failed"));
    assert_eq!(d.spamc(&["-c"], HAM).1, 1, "old rules still serve");
}

fn raw_request(port: u16, request: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s.write_all(request).expect("write");
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn malformed_requests_get_spamd_codes() {
    let d = Daemon::start(&[]);
    let cases: &[(&[u8], &str)] = &[
        (b"FOO SPAMC/1.5\r\n\r\n", "SPAMD/1.0 76 "),
        (b"CHECK\r\n\r\n", "SPAMD/1.0 76 "),
        (b"CHECK SPAMC/1.5\r\nContent-length: abc\r\n\r\n", "SPAMD/1.0 76 "),
        (b"CHECK SPAMC/1.5\r\nnocolon\r\n\r\n", "SPAMD/1.0 76 "),
        (b"CHECK SPAMC/1.5\r\nContent-length: 999999999\r\n\r\n", "SPAMD/1.0 65 "),
        (b"PING SPAMC/1.5\r\n\r\n", "SPAMD/1.5 0 PONG"),
    ];
    for (request, want) in cases {
        let answer = raw_request(d.port, request);
        assert!(answer.starts_with(want), "{:?}: {answer:?}", String::from_utf8_lossy(request));
    }
    // The daemon still serves after all that.
    assert!(raw_request(d.port, b"PING SPAMC/1.5\r\n\r\n").starts_with("SPAMD/1.5 0 PONG"));
}


#[test]
fn compressed_requests_are_inflated() {
    // The apt spamc is built without zlib (its -z exits 64), so send what `spamc -z` sends.
    let d = Daemon::start(&[]);
    let body = miniz_oxide::deflate::compress_to_vec_zlib(GTUBE.as_bytes(), 6);
    let mut request = format!("CHECK SPAMC/1.5\r\nCompress: zlib\r\nContent-length: {}\r\n\r\n", body.len()).into_bytes();
    request.extend_from_slice(&body);
    let answer = raw_request(d.port, &request);
    assert!(answer.starts_with("SPAMD/1.1 0 EX_OK"), "{answer:?}");
    assert!(answer.contains("Spam: True ; 100"), "{answer:?}");
}

fn uid_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().next()?.parse().ok()
}

#[test]
fn username_drops_privileges_of_master_and_children() {
    if uid_of(std::process::id()) != Some(0) {
        eprintln!("SKIP: not root, cannot test -u");
        return;
    }
    let d = Daemon::start(&["-u", "nobody"]);
    let nobody = uid_of(d.pid()).expect("master uid");
    assert_ne!(nobody, 0, "master still root");
    let children = d.children();
    assert!(!children.is_empty());
    for c in children {
        assert_eq!(uid_of(c), Some(nobody), "child {c} runs as the dropped user");
    }
}

#[test]
fn stats_file_and_sigusr1_summary() {
    let stats = std::env::temp_dir().join(format!("sift-stats-{}.prom", std::process::id()));
    let d = Daemon::start(&["--stats-file", &stats.to_string_lossy()]);
    for _ in 0..3 {
        assert!(raw_request(d.port, b"PING SPAMC/1.5\r\n\r\n").contains("PONG"));
    }
    let mut request = format!("CHECK SPAMC/1.5\r\nContent-length: {}\r\n\r\n", GTUBE.len()).into_bytes();
    request.extend_from_slice(GTUBE.as_bytes());
    assert!(raw_request(d.port, &request).contains("Spam: True"));
    wait_until("the stats file to count the message", Duration::from_secs(12), || {
        std::fs::read_to_string(&stats).is_ok_and(|t| t.lines().any(|l| l.starts_with("sift_messages_total") && l.contains("spam") && !l.ends_with(" 0")))
    });
    // Per-process memory: the master and each child, non-zero resident size.
    let text = std::fs::read_to_string(&stats).expect("stats file");
    let resident = |role: &str, pid: u32| {
        let prefix = format!("sift_process_resident_bytes{{role=\"{role}\",pid=\"{pid}\"}} ");
        text.lines().find_map(|l| l.strip_prefix(prefix.as_str())?.parse::<u64>().ok())
    };
    assert!(resident("master", d.pid()).is_some_and(|b| b > 0), "{text}");
    let children = d.children();
    assert!(children.iter().any(|&c| resident("child", c).is_some_and(|b| b > 0)), "children {children:?}: {text}");
    d.signal("USR1");
    wait_until("a statistics line in the log", Duration::from_secs(5), || d.log_text().lines().count() >= 3 && d.log_text().contains("messages"));
    let _ = std::fs::remove_file(&stats);
}

#[test]
fn allowed_ips_refuses_other_clients() {
    // Only 127.0.0.2 may connect; this test connects from 127.0.0.1.
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("sift-acl-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let log = dir.join("log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_siftd"))
        .arg("-s")
        .arg(&log)
        .args(["-i", &format!("127.0.0.1:{port}"), "-A", "127.0.0.2"])
        .spawn()
        .expect("start siftd");
    wait_until("the server to start", Duration::from_secs(30), || std::fs::read_to_string(&log).is_ok_and(|t| t.contains("server started")));
    let answer = raw_request(port, b"PING SPAMC/1.5\r\n\r\n");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    assert!(answer.is_empty(), "a refused client gets no answer: {answer:?}");
    assert!(text.contains("refused: not in --allowed-ips"), "{text}");
}

#[test]
fn daemonize_writes_pidfile_and_children_die_with_the_master() {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("sift-daemonize-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let pidfile = dir.join("siftd.pid");
    let status = Command::new(env!("CARGO_BIN_EXE_siftd"))
        .args(["-d", "-s"])
        .arg(dir.join("log"))
        .args(["-i", &format!("127.0.0.1:{port}"), "-r"])
        .arg(&pidfile)
        .status()
        .expect("run siftd -d");
    assert!(status.success(), "the launching process exits 0");
    wait_until("the pidfile", Duration::from_secs(30), || std::fs::read_to_string(&pidfile).is_ok());
    let master: u32 = std::fs::read_to_string(&pidfile).expect("pidfile").trim().parse().expect("pid");
    wait_until("PONG", Duration::from_secs(30), || raw_request(port, b"PING SPAMC/1.5\r\n\r\n").contains("PONG"));
    let children = children_of(master);
    assert!(!children.is_empty());
    Command::new("kill").args(["-9", &master.to_string()]).status().expect("kill master");
    wait_until("children to exit with the master", Duration::from_secs(5), || {
        children.iter().all(|c| !std::path::Path::new(&format!("/proc/{c}")).exists() || std::fs::read_to_string(format!("/proc/{c}/stat")).is_ok_and(|s| s.contains(") Z ")))
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rule_file_settings_shape_the_rewritten_message() {
    require_spamc!();
    let rules = std::env::temp_dir().join(format!("sift-rs0-rules-{}", std::process::id()));
    std::fs::create_dir_all(&rules).expect("rules dir");
    std::fs::write(
        rules.join("10_settings.cf"),
        "report_safe 0\nrewrite_header Subject *****SPAM*****\nbody GTUBE /XJS\\*C4JDBQADN1/\nscore GTUBE 1000\n",
    )
    .expect("rules");
    let d = Daemon::start(&["-C", &rules.to_string_lossy()]);
    let (out, code) = d.spamc(&[], GTUBE);
    assert_eq!(code, 0);
    assert!(out.contains("Subject: *****SPAM***** Test spam mail (GTUBE)"), "{out}");
    assert!(!out.contains("message/rfc822"), "report_safe 0 does not wrap: {out}");
    // Without SpamAssassin's 10_default_prefs.cf only Checker-Version is added, plus the report.
    assert!(out.contains("X-Spam-Report:") && out.contains("X-Spam-Prev-Subject: Test spam mail (GTUBE)"), "{out}");
    let _ = std::fs::remove_dir_all(&rules);
}

#[test]
fn round_robin_children_accept_on_their_own() {
    require_spamc!();
    let d = Daemon::start(&["--round-robin", "--min-children", "3", "--max-spare", "3"]);
    wait_until("three children", Duration::from_secs(10), || d.children().len() == 3);
    for _ in 0..12 {
        assert_eq!(d.spamc(&["-c"], GTUBE).1, 1);
    }
    wait_until("12 result lines", Duration::from_secs(10), || d.serving_pids().len() >= 12);
    let pids: BTreeSet<u32> = d.serving_pids().into_iter().collect();
    assert!(pids.len() > 1, "round-robin spreads work over children, got {pids:?}");
}

#[test]
fn child_over_timeout_child_is_killed_and_replaced() {
    let d = Daemon::start(&["--timeout-child", "2", "--timeout-tcp", "30"]);
    let mut stalled = TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
    stalled.write_all(b"CHECK SPAMC/1.5\r\nContent-length: 1000\r\n\r\nhalf").expect("write");
    wait_until("the stalled child to be killed", Duration::from_secs(10), || d.log_text().contains("over --timeout-child"));
    let mut rest = Vec::new();
    let _ = stalled.read_to_end(&mut rest);
    assert!(raw_request(d.port, b"PING SPAMC/1.5\r\n\r\n").contains("PONG"), "the master stays up and serves");
}

#[test]
fn sigterm_stops_master_and_children() {
    let mut d = Daemon::start(&[]);
    let children = d.children();
    assert!(!children.is_empty());
    d.signal("TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = d.child.try_wait().expect("wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "master did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "master exits 0: {status:?}");
    assert!(d.log_text().contains("server stopped"));
    for c in children {
        let gone = !std::path::Path::new(&format!("/proc/{c}")).exists()
            || std::fs::read_to_string(format!("/proc/{c}/stat")).is_ok_and(|s| s.contains(") Z "));
        assert!(gone, "child {c} still running");
    }
}

#[test]
#[cfg(not(target_os = "freebsd"))]
fn accept_filter_is_logged_and_ignored_off_freebsd() {
    let d = Daemon::start(&["--accept-filter", "dataready"]);
    assert!(raw_request(d.port, b"PING SPAMC/1.5\r\n\r\n").starts_with("SPAMD/1.5 0 PONG"));
    assert!(d.log_text().contains("--accept-filter dataready: this system has no accept filters, ignored"), "{}", d.log_text());
    let refused = common::siftd().args(["--accept-filter", "httpready", "-s", "stderr"]).output().expect("run siftd");
    assert_eq!(refused.status.code(), Some(2), "clap refuses other filter names");
}
