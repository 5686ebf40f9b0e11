//! Faults under load: killed and stalled children, more clients than children, reloads
//! during traffic, broken rules, scans over --timeout-child. Loopback only, raw spamd
//! protocol (no spamc needed), every wait bounded.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::{check, check_request, is_gone, raw_request, wait_until, Daemon, Load, GTUBE, HAM};

/// What a stalling client sends: half a request, then nothing.
const HALF_REQUEST: &[u8] = b"CHECK SPAMC/1.5\r\nContent-length: 1000\r\n\r\nhalf";

/// A client that sends half a request and then nothing: keeps one child busy reading.
fn stall(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.write_all(HALF_REQUEST).expect("write");
    s.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    s
}

/// Reads until the server closes; what came back.
fn read_rest(mut s: impl Read) -> Vec<u8> {
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    rest
}

/// A fresh rules directory for one test.
fn rules_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sift-faults-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("rules dir");
    dir
}

#[test]
fn killed_busy_child_fails_only_its_connection() {
    let d = Daemon::start(&["--timeout-tcp", "30"]);
    // With every child idle, the lowest pid takes the next connection.
    let busy = *d.children().iter().next().expect("a child");
    let stalled = stall(d.port);
    std::thread::sleep(Duration::from_millis(200));
    let load = Load::start(d.port, 3, Load::DEFAULT);
    wait_until("load to be served", Duration::from_secs(10), || load.answered() >= 10);
    assert!(!is_gone(busy), "the busy child is still there before the kill");
    let killed_at = Instant::now();
    Command::new("kill").args(["-9", &busy.to_string()]).status().expect("kill");
    assert!(read_rest(stalled).is_empty(), "the killed child's client gets no answer");
    // Recovered: the master reaped the child and a new connection is answered.
    wait_until("the killed child to be reaped", Duration::from_secs(1), || !Path::new(&format!("/proc/{busy}")).exists());
    assert_eq!(check(d.port, GTUBE), Ok(true));
    let recovery = killed_at.elapsed();
    eprintln!("killed child {busy}: reaped and serving again after {recovery:?}");
    assert!(recovery < Duration::from_secs(1), "pool recovered in {recovery:?}");
    let after = load.answered();
    wait_until("load to go on after the kill", Duration::from_secs(10), || load.answered() >= after + 10);
    let (answered, failed) = load.finish();
    assert!(failed.is_empty(), "{} of {} load requests failed: {failed:?}", failed.len(), answered + failed.len());
    assert!(d.log_text().contains(&format!("child {busy} died on signal 9")), "{}", d.log_text());
    d.assert_no_sandbox_kill();
}

#[test]
fn four_times_more_clients_than_children_are_all_answered() {
    const CHILDREN: usize = 2;
    const CLIENTS: usize = 4 * CHILDREN;
    const ROUNDS: usize = 5;
    // Slow rules and a long ham make each of its scans hold a child for a while (the
    // connections wait in the listen backlog, so a client cannot slow a child down).
    let rules = rules_dir("clients");
    slow_rules(&rules, 300);
    std::fs::write(rules.join("20_gtube.cf"), "body GTUBE /XJS\\*C4JDBQADN1/\nscore GTUBE 1000\n").expect("rules");
    let d = Daemon::start(&["--max-children", "2", "-C", &rules.to_string_lossy()]);
    let port = d.port;
    let spam_request = Arc::new(check_request(GTUBE));
    let ham_request = Arc::new(check_request(&filler(HAM, 300_000)));
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (barrier, spam_request, ham_request) = (barrier.clone(), spam_request.clone(), ham_request.clone());
            std::thread::spawn(move || {
                let mut verdicts = Vec::new();
                for round in 0..ROUNDS {
                    let spam = (c + round) % 2 == 0;
                    // All clients connect, then all send at once: most wait for a child.
                    let conn = TcpStream::connect(("127.0.0.1", port));
                    barrier.wait();
                    let answer = conn.and_then(|mut s| {
                        s.set_read_timeout(Some(Duration::from_secs(30)))?;
                        s.write_all(if spam { &spam_request } else { &ham_request })?;
                        s.shutdown(std::net::Shutdown::Write)?;
                        Ok(String::from_utf8_lossy(&read_rest(s)).into_owned())
                    });
                    let answer = answer.unwrap_or_else(|e| format!("client {c}: {e}"));
                    let got = answer.lines().find_map(|l| l.strip_prefix("Spam: ")).map(|v| v.starts_with("True"));
                    verdicts.push((got == Some(spam), answer));
                }
                verdicts
            })
        })
        .collect();
    let mut most = 0;
    let mut results = Vec::new();
    for c in clients {
        while !c.is_finished() {
            most = most.max(d.children().len());
            std::thread::sleep(Duration::from_millis(20));
        }
        results.extend(c.join().expect("client thread"));
    }
    let wrong: Vec<&String> = results.iter().filter(|(ok, _)| !ok).map(|(_, a)| a).collect();
    assert_eq!(results.len(), CLIENTS * ROUNDS);
    assert!(wrong.is_empty(), "{} of {} requests not answered right: {wrong:?}", wrong.len(), results.len());
    eprintln!("{} requests from {CLIENTS} clients answered by at most {most} children", results.len());
    assert_eq!(most, CHILDREN, "the pool grows to --max-children and never above");
    wait_until("a result line per request", Duration::from_secs(5), || d.serving_pids().len() == CLIENTS * ROUNDS);
    // The statistics line counts connections that waited (no idle child, or the cap).
    d.signal("USR1");
    wait_until("the statistics line", Duration::from_secs(5), || d.log_text().contains(" waits "));
    let text = d.log_text();
    let waits: u64 = text.split(" waits ").nth(1).and_then(|r| r.split(';').next()).and_then(|n| n.trim().parse().ok()).unwrap_or(0);
    assert!(waits > 0, "no connection ever waited for a child: {text}");
    d.assert_no_sandbox_kill();
    let _ = std::fs::remove_dir_all(&rules);
}

#[test]
fn stalled_client_is_freed_after_timeout_tcp_and_others_are_served_meanwhile() {
    let d = Daemon::start(&["--timeout-tcp", "2", "--max-children", "2"]);
    let stalled_child = *d.children().iter().next().expect("a child");
    let stalled = stall(d.port);
    let stalled_at = Instant::now();
    let freed = std::thread::spawn(move || {
        let rest = read_rest(stalled);
        (stalled_at.elapsed(), rest)
    });
    // Meanwhile the other child answers.
    for i in 0..4 {
        let spam = i % 2 == 0;
        assert_eq!(check(d.port, if spam { GTUBE } else { HAM }), Ok(spam), "request {i} during the stall");
    }
    let served_meanwhile = stalled_at.elapsed();
    let (after, rest) = freed.join().expect("stalled client");
    assert!(served_meanwhile < after, "the requests were answered during the stall ({served_meanwhile:?} vs {after:?})");
    assert!(rest.is_empty(), "a timed-out request gets no answer: {:?}", String::from_utf8_lossy(&rest));
    eprintln!("stalled client freed after {after:?}; 4 requests answered within {served_meanwhile:?}");
    assert!(after >= Duration::from_millis(1500) && after < Duration::from_secs(15), "freed after {after:?}, --timeout-tcp 2");
    // The freed child is idle again and, lowest pid first, takes the next requests.
    assert!(!is_gone(stalled_child), "the child survived the timeout");
    wait_until("the freed child to serve again", Duration::from_secs(10), || {
        check(d.port, GTUBE) == Ok(true) && d.serving_pids().contains(&stalled_child)
    });
    d.assert_no_sandbox_kill();
}

#[test]
fn stalled_client_does_not_hold_the_max_busy_cap() {
    // --max-busy 1 and a client that never finishes its request: after the 100 ms grace
    // its child stops counting, so the others are served long before --timeout-tcp, and
    // the master wakes when the grace ends, not at its next 1 s tick (here: about 50 ms
    // in all; without that wake about 1 s, without the grace 10 s).
    let d = Daemon::start(&["--max-busy", "1", "--min-children", "2", "--timeout-tcp", "10"]);
    wait_until("two children", Duration::from_secs(10), || d.children().len() == 2);
    let stalled = stall(d.port);
    std::thread::sleep(Duration::from_millis(50));
    let started = Instant::now();
    for i in 0..4 {
        let spam = i % 2 == 0;
        assert_eq!(check(d.port, if spam { GTUBE } else { HAM }), Ok(spam), "request {i} during the stall");
    }
    let took = started.elapsed();
    eprintln!("4 requests beside a stalled client under --max-busy 1: {took:?}");
    assert!(took < Duration::from_millis(600), "4 requests took {took:?} beside a stalled client, --timeout-tcp 10");
    drop(stalled);
    d.assert_no_sandbox_kill();
}

#[test]
fn stalled_client_is_freed_after_timeout_tcp_on_every_kind_of_listener() {
    // TCP connections may take --timeout-tcp from their listener (Linux), UNIX ones get it
    // set one by one; --round-robin children accept by themselves.
    let sock = std::env::temp_dir().join(format!("sift-faults-stall-{}.sock", std::process::id()));
    let sock_s = sock.to_string_lossy().into_owned();
    let cases: &[(&str, &[&str], bool)] = &[
        ("UNIX socket", &["--socketpath", &sock_s], true),
        ("TCP, --round-robin", &["--round-robin"], false),
        ("UNIX socket, --round-robin", &["--socketpath", &sock_s, "--round-robin"], true),
    ];
    for &(name, extra, unix) in cases {
        let d = Daemon::start(&[&["--timeout-tcp", "2", "--max-children", "2"], extra].concat());
        let stalled_at = Instant::now();
        let rest = if unix {
            let mut s = std::os::unix::net::UnixStream::connect(&sock).expect("connect");
            s.write_all(HALF_REQUEST).expect("write");
            s.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
            read_rest(s)
        } else {
            read_rest(stall(d.port))
        };
        let after = stalled_at.elapsed();
        assert!(rest.is_empty(), "{name}: a timed-out request gets no answer: {:?}", String::from_utf8_lossy(&rest));
        assert!(after >= Duration::from_millis(1500) && after < Duration::from_secs(15), "{name}: freed after {after:?}, --timeout-tcp 2");
        assert_eq!(check(d.port, GTUBE), Ok(true), "{name}: served after the stall");
        d.assert_no_sandbox_kill();
    }
    let _ = std::fs::remove_file(&sock);
}

#[test]
fn sighup_during_load_ten_times_fails_no_request() {
    let d = Daemon::start(&[]);
    let load = Load::start(d.port, 3, Load::DEFAULT);
    for i in 1..=10 {
        std::thread::sleep(Duration::from_millis(200));
        d.signal("HUP");
        wait_until("the reload to finish", Duration::from_secs(20), || d.log_text().matches("reloaded rules").count() >= i);
    }
    std::thread::sleep(Duration::from_millis(200));
    let (answered, failed) = load.finish();
    assert!(failed.is_empty(), "{} of {} requests failed during reloads: {failed:?}", failed.len(), answered + failed.len());
    eprintln!("{answered} requests answered during 10 reloads");
    assert!(answered >= 20, "only {answered} requests in 10 reloads");
    d.assert_no_sandbox_kill();
}

#[test]
fn broken_rules_on_sighup_keep_the_old_set_and_log_why() {
    type Break = fn(&Path);
    let cases: &[(&str, Break, &str)] = &[
        ("include", |dir| std::fs::write(dir.join("20_broken.cf"), "include missing.cf\n").expect("write"), "missing.cf"),
        ("gone", |dir| std::fs::remove_dir_all(dir).expect("remove"), "rules directory"),
    ];
    for &(name, break_rules, reason) in cases {
        let rules = rules_dir(name);
        std::fs::write(rules.join("10_a.cf"), "body LUNCH /lunch/\nscore LUNCH 6\n").expect("rules");
        let d = Daemon::start(&["-C", &rules.to_string_lossy()]);
        assert_eq!(check(d.port, HAM), Ok(true), "{name}: the rule set makes the ham spam");
        let load = Load::start(d.port, 2, &[(HAM, true)]);
        break_rules(&rules);
        d.signal("HUP");
        wait_until("the reload failure to be logged", Duration::from_secs(10), || d.log_text().contains("reload failed"));
        let line = d.log_text().lines().find(|l| l.contains("reload failed")).map(str::to_string).unwrap_or_default();
        assert!(line.contains(reason), "{name}: the log says why: {line}");
        assert_eq!(check(d.port, HAM), Ok(true), "{name}: the old rules still serve");
        let (answered, failed) = load.finish();
        assert!(failed.is_empty() && answered > 0, "{name}: {answered} answered, failed during the failed reload: {failed:?}");
        d.assert_no_sandbox_kill();
        let _ = std::fs::remove_dir_all(&rules);
    }
}

/// `count` rules that see the whole message and have no literal to skip it by: each
/// runs its automaton over every byte (the [`filler`] holds the byte above 0x7f each
/// needs), so with 300 a scan of a few MB takes seconds.
fn slow_rules(dir: &Path, count: usize) {
    let mut text = String::new();
    for i in 0..count {
        text.push_str(&format!(
            "full SLOW_{i} /\\w{{{}}}\\s\\d{{{}}}\\w{{2,{}}}\\s\\w+[^\\x00-\\x7f]/i\nscore SLOW_{i} 0.01\n",
            i % 9 + 3,
            i % 4 + 2,
            i % 13 + 20
        ));
    }
    std::fs::write(dir.join("10_slow.cf"), text).expect("slow rules");
}

/// `message` followed by lines of words until it is `size` bytes long, one of them not ASCII.
fn filler(message: &str, size: usize) -> String {
    let words = ["alpha", "beta", "gamma", "d3lta", "eps1", "zeta", "\u{e9}ta", "theta", "9iota"];
    let mut text = String::from(message);
    let mut i = 0usize;
    while text.len() < size {
        text.push_str(words.get(i * 7 % words.len()).unwrap_or(&"x"));
        text.push(if i % 12 == 11 { '\n' } else { ' ' });
        i += 1;
    }
    text
}

#[test]
fn child_over_timeout_child_is_killed_and_replaced() {
    // (case, what keeps the child busy): a scan slower than the limit, and a client that stalls.
    let rules = rules_dir("slow");
    slow_rules(&rules, 300);
    let slow_request = Arc::new(check_request(&filler("From: a@example.com\nSubject: slow\n\n", 8_000_000)));
    for case in ["slow scan", "stalled client"] {
        let d = Daemon::start(&["-C", &rules.to_string_lossy(), "--timeout-child", "1", "--timeout-tcp", "60"]);
        let busy = *d.children().iter().next().expect("a child");
        let master = d.pid();
        let client = match case {
            "slow scan" => {
                let (port, request) = (d.port, slow_request.clone());
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
                    s.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
                    let _ = s.write_all(&request);
                    read_rest(s)
                })
            }
            _ => {
                let s = stall(d.port);
                std::thread::spawn(move || read_rest(s))
            }
        };
        wait_until("the busy child to be killed", Duration::from_secs(30), || d.log_text().contains(&format!("child {busy} over --timeout-child")));
        let answer = client.join().expect("client");
        assert!(answer.is_empty(), "{case}: no answer from a killed child: {:?}", String::from_utf8_lossy(&answer));
        wait_until("the child to be replaced", Duration::from_secs(10), || is_gone(busy) && !d.children().is_empty());
        assert!(!is_gone(master), "{case}: the master stays up");
        assert!(raw_request(d.port, b"PING SPAMC/1.5\r\n\r\n").contains("PONG"), "{case}: and serves");
        assert_eq!(check(d.port, HAM), Ok(false), "{case}: a small message is scanned in time");
        d.assert_no_sandbox_kill();
    }
    let _ = std::fs::remove_dir_all(&rules);
}
