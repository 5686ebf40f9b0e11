//! The daemon as users run it: real siftd processes, the real `spamc` from apt.
//! Tests skip with a message when spamc is not installed. Faults under load are in
//! faults.rs, the sandbox and privileges in sandbox.rs.

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{check, children_of, free_port, raw_request, skip_without_spamc, wait_until, Daemon, Load, GTUBE, HAM};

/// GTUBE in an HTML-only message.
const HTML_GTUBE: &str = "Subject: Offer\nContent-Type: text/html\n\n<html><body><p>Cheap <b>pills</b> today</p>\n\
    <p>XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X</p></body></html>\n";

#[test]
fn spamc_commands_table() {
    if skip_without_spamc() {
        return;
    }
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
        // The report previews the text the body rules read, not the HTML.
        (&[], HTML_GTUBE, |o| o.contains("Content preview:  Cheap pills today XJS*C4JDBQADN1"), 0),
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
    if skip_without_spamc() {
        return;
    }
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
    if skip_without_spamc() {
        return;
    }
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
fn children_are_replaced_only_after_max_conn_per_child_when_given() {
    // spamd replaces a child after 200 connections; siftd's keep their warm caches unless
    // told. 250 sequential requests: (options, children that serve them).
    let cases: &[(&[&str], usize)] = &[(&[], 1), (&["--max-conn-per-child", "100"], 3)];
    for &(extra, serving) in cases {
        let d = Daemon::start(extra);
        for i in 0..250 {
            let spam = i % 2 == 0;
            assert_eq!(check(d.port, if spam { GTUBE } else { HAM }), Ok(spam), "{extra:?}: request {i}");
        }
        wait_until("a result line per request", Duration::from_secs(10), || d.serving_pids().len() >= 250);
        let pids: BTreeSet<u32> = d.serving_pids().into_iter().collect();
        assert_eq!(pids.len(), serving, "{extra:?}: 250 sequential requests went to {pids:?}");
    }
}

#[test]
fn max_busy_keeps_concurrent_clients_on_the_fewest_children() {
    // Four clients at once, four idle children. --max-busy 1: a scan takes far less
    // than the 100 ms grace, so the lowest-pid child serves (nearly) every request
    // while the others wait their turn. No cap: the clients spread over the children.
    let cases: &[(&str, bool)] = &[("1", true), ("0", false)];
    for &(max_busy, one_child) in cases {
        let d = Daemon::start(&["--min-children", "4", "--max-spare", "4", "--max-conn-per-child", "10000", "--max-busy", max_busy]);
        wait_until("four children", Duration::from_secs(10), || d.children().len() == 4);
        let load = Load::start(d.port, 4, Load::DEFAULT);
        wait_until("200 requests answered", Duration::from_secs(60), || load.answered() >= 200);
        let (answered, failed) = load.finish();
        assert!(failed.is_empty(), "--max-busy {max_busy}: {} of {} requests failed: {failed:?}", failed.len(), answered + failed.len());
        wait_until("a result line per request", Duration::from_secs(10), || d.serving_pids().len() >= answered);
        let served = d.serving_pids();
        let lowest = served.iter().min().copied().unwrap_or(0);
        let by_lowest = served.iter().filter(|&&p| p == lowest).count();
        let children: BTreeSet<u32> = served.iter().copied().collect();
        if one_child {
            assert!(by_lowest * 10 >= served.len() * 9, "--max-busy 1: child {lowest} served {by_lowest} of {}: {children:?}", served.len());
        } else {
            assert!(children.len() >= 2, "no cap: {} requests of four clients went to {children:?} only", served.len());
        }
    }
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

/// Private dirty KiB of a process's `[heap]` mapping (`/proc/PID/smaps`).
fn heap_private_kib(pid: u32) -> Option<u64> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let mut in_heap = false;
    for line in smaps.lines() {
        if line.split_whitespace().next().is_some_and(|first| first.contains('-') && !first.ends_with(':')) {
            in_heap = line.ends_with("[heap]");
        } else if in_heap && line.starts_with("Private_Dirty:") {
            return kib_field(line, "Private_Dirty:");
        }
    }
    Some(0)
}

/// The KiB of a `/proc/PID/smaps` or `smaps_rollup` line `Name: N kB` named `name`.
fn kib_field(line: &str, name: &str) -> Option<u64> {
    line.strip_prefix(name)?.trim().trim_end_matches(" kB").parse().ok()
}

#[test]
fn children_keep_sharing_the_heap_the_rules_were_compiled_into() {
    // Lesson 4: neither the master's event loop nor a child's setup or scans write
    // the heap pages that hold the rules; each such write copies a page into a child.
    let d = Daemon::start(&["--min-children", "3", "--max-children", "3", "--max-spare", "3"]);
    wait_until("three children", Duration::from_secs(10), || d.children().len() == 3);
    let large = format!("Subject: large\n\n{}\n", "a line of some words to render\n".repeat(12_000));
    // Before and after a reload, which compiles new rules for new children.
    for round in ["first rules", "reloaded rules"] {
        for i in 0..60 {
            let message = match i % 3 {
                0 => GTUBE,
                1 => HAM,
                _ => large.as_str(),
            };
            let spam = check(d.port, message).unwrap_or_else(|e| panic!("{round}, request {i}: {e}"));
            assert_eq!(spam, i % 3 == 0, "{round}, request {i}");
        }
        let mut pids = vec![d.pid()];
        pids.extend(d.children());
        for pid in pids {
            let kib = heap_private_kib(pid).expect("smaps");
            assert!(kib <= 64, "{round}: process {pid}: {kib} KiB of its heap no longer shared");
        }
        let before = d.children();
        d.signal("HUP");
        wait_until("the reload's new children", Duration::from_secs(20), || {
            d.log_text().contains("reloaded rules") && d.children().len() == 3 && d.children().is_disjoint(&before)
        });
    }
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
    // The daemon still serves after all that, and each refusal was logged with its reason.
    assert!(raw_request(d.port, b"PING SPAMC/1.5\r\n\r\n").starts_with("SPAMD/1.5 0 PONG"));
    wait_until("the refusals in the log", Duration::from_secs(5), || d.log_text().matches("bad request refused: ").count() >= 5);
}

#[test]
fn sighup_reopens_a_rotated_log_file() {
    let d = Daemon::start(&[]);
    assert_eq!(check(d.port, GTUBE), Ok(true));
    let rotated = d.log.with_extension("log.1");
    std::fs::rename(&d.log, &rotated).expect("rotate the log");
    d.signal("HUP");
    wait_until("a new log file after SIGHUP", Duration::from_secs(10), || d.log.exists());
    wait_until("a scan logged in the new file", Duration::from_secs(10), || {
        let _ = check(d.port, HAM);
        d.log_text().contains("]: result: ")
    });
    assert!(std::fs::read_to_string(&rotated).unwrap_or_default().contains("]: result: Y"));
}


/// (reused, built) of the latest compile-cache line in `log`.
fn cache_counts(log: &str) -> Option<(usize, usize)> {
    let line = log.lines().rev().find(|l| l.contains("]: compile cache ") && l.contains(" built"))?;
    let rest = line.split(": ").last()?;
    let mut words = rest.split_whitespace();
    let reused = words.next()?.parse().ok()?;
    let built = words.nth(2)?.parse().ok()?;
    Some((reused, built))
}

#[test]
fn compile_cache_is_written_reused_and_rebuilt_when_corrupt() {
    let cache = std::env::temp_dir().join(format!("sift-compile-cache-{}.dfa", std::process::id()));
    let _ = std::fs::remove_file(&cache);
    let arg = cache.to_string_lossy().into_owned();
    /// What the file holds before the start, whether the start reuses everything, a problem logged.
    type Case<'a> = (Option<&'a [u8]>, bool, Option<&'a str>);
    let cases: &[Case] = &[
        (None, false, None),
        (None, true, None),
        (Some(b"garbage, not a cache"), false, Some("not a sift DFA cache")),
        (None, true, None),
    ];
    for (i, (plant, all_reused, problem)) in cases.iter().enumerate() {
        if let Some(bytes) = plant {
            std::fs::write(&cache, bytes).expect("plant the cache file");
        }
        let d = Daemon::start(&["--compile-cache", &arg]);
        assert_eq!(check(d.port, GTUBE), Ok(true), "case {i}");
        let log = d.log_text();
        let (reused, built) = cache_counts(&log).unwrap_or_else(|| panic!("case {i}: no compile cache line: {log}"));
        if *all_reused {
            assert!(reused > 0 && built == 0, "case {i}: {reused} reused, {built} built");
        } else {
            assert!(built > 0, "case {i}: {reused} reused, {built} built");
        }
        match problem {
            Some(p) => assert!(log.lines().any(|l| l.contains("compile cache: ") && l.contains(p)), "case {i}: {log}"),
            None => assert!(!log.contains("compile cache: "), "case {i}: {log}"),
        }
        assert!(std::fs::read(&cache).is_ok_and(|b| b.starts_with(b"SIFTDFA")), "case {i}: the file is a cache again");
        if i == cases.len() - 1 {
            // A reload compiles through the cache too.
            d.signal("HUP");
            wait_until("the reload's compile cache line", Duration::from_secs(20), || {
                d.log_text().lines().filter(|l| l.contains("]: compile cache ")).count() >= 2
            });
            assert_eq!(cache_counts(&d.log_text()).map(|(_, built)| built), Some(0));
        }
    }
    let _ = std::fs::remove_file(&cache);
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
    if skip_without_spamc() {
        return;
    }
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
    if skip_without_spamc() {
        return;
    }
    let d = Daemon::start(&["--round-robin", "--min-children", "3", "--max-spare", "3"]);
    wait_until("three children", Duration::from_secs(10), || d.children().len() == 3);
    // Whichever child wakes first accepts. On a busy machine the child that just served
    // is often back first, so requests come in rounds, each after a pause in which it
    // sleeps again, until a second child has served (in 48 requests at most).
    let mut pids = BTreeSet::new();
    let mut sent = 0;
    while sent < 48 && pids.len() < 2 {
        for _ in 0..12 {
            assert_eq!(d.spamc(&["-c"], GTUBE).1, 1);
            sent += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        wait_until("a result line per request", Duration::from_secs(10), || d.serving_pids().len() >= sent);
        pids = d.serving_pids().into_iter().collect();
    }
    assert!(pids.len() > 1, "round-robin spreads work over children, got {pids:?} in {sent} requests");
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

/// Private KiB (dirty and clean) of a process (`/proc/PID/smaps_rollup`).
fn private_kib(pid: u32) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| rollup.lines().find(|l| l.starts_with(name)).and_then(|l| kib_field(l, name));
    Some(field("Private_Dirty:")? + field("Private_Clean:")?)
}

/// Base64 of `data`, in lines of 76.
fn base64_lines(data: &[u8]) -> String {
    const DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for line in data.chunks(57) {
        for group in line.chunks(3) {
            let byte = |i: usize| u32::from(group.get(i).copied().unwrap_or(0));
            let v = (byte(0) << 16) | (byte(1) << 8) | byte(2);
            for k in 0..4 {
                out.push(if k <= group.len() { char::from(DIGITS[(v >> (18 - 6 * k)) as usize & 63]) } else { '=' });
            }
        }
        out.push('\n');
    }
    out
}

/// Messages that grow many scan buffers at once, from 5 to 200 KB: long text, long
/// headers, twelve parts of about 9 KB (plain, HTML, quoted-printable, base64), and spam.
fn large_messages() -> Vec<String> {
    let line = "some words of a long newsletter line, with a link http://example.com/a?b=c\n";
    let mut out = Vec::new();
    for kb in [5usize, 9, 17, 33, 70, 140, 200] {
        let text = line.repeat(kb * 1024 / line.len());
        let html = format!("<html><body>{}</body></html>", "<p><a href=\"http://example.org/x\">offer</a> <b>now</b> &amp; more</p>\n".repeat(kb * 14));
        let qp = text.replace(' ', "=20").replace(',', "=2C");
        let b64 = base64_lines(text.as_bytes());
        let received = "Received: from relay.example.net (relay.example.net [192.0.2.7]) by mx.example.com; Mon, 7 Dec 2026 05:00:00 +0000\n".repeat(kb);
        let subject = "=?UTF-8?B?T2ZmZXIgZm9yIHlvdQ==?= ".repeat(kb);
        let parts: String = (0..12)
            .map(|k| {
                let upto = |body: &str, n: usize| body[..body.len().min(n)].to_string();
                match k % 4 {
                    0 => format!("--b\nContent-Type: text/plain\n\n{}\n", upto(&text, 9000 + k * 100)),
                    1 => format!("--b\nContent-Type: text/html\n\n{}\n", upto(&html, 9000 + k * 100)),
                    2 => format!("--b\nContent-Type: text/plain\nContent-Transfer-Encoding: quoted-printable\n\n{}\n", upto(&qp, 9000 + k * 100)),
                    // Whole lines of 77 bytes.
                    _ => format!("--b\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n{}", upto(&b64, (12000 + k * 100) / 77 * 77)),
                }
            })
            .collect();
        out.push(format!("{received}Subject: {subject}\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n\n{parts}--b--\n"));
        out.push(format!("Subject: text {kb}\n\n{text}"));
        // Spam: PROCESS wraps it with a report that previews its text.
        out.push(format!("{GTUBE}\n\n{text}"));
    }
    out
}

#[test]
fn a_child_gives_back_what_large_messages_grew() {
    // A child keeps what typical mail needs between messages, not what the largest
    // message it served grew: scan buffers past a few KiB are freed and their pages
    // go back to the kernel, and so do the request and response buffers' pages past
    // their first 8 KiB (PROCESS answers with the whole message).
    let d = Daemon::start(&["--min-children", "1", "--max-children", "1", "--max-spare", "1"]);
    wait_until("one child", Duration::from_secs(10), || d.children().len() == 1);
    let child = *d.children().iter().next().expect("a child");
    let typical = |rounds: usize| {
        for i in 0..rounds {
            let message = if i % 2 == 0 { HAM } else { GTUBE };
            assert_eq!(check(d.port, message), Ok(i % 2 == 1), "typical request {i}");
        }
    };
    typical(40);
    let before = private_kib(child).expect("smaps_rollup");
    for round in 0..3 {
        for (i, message) in large_messages().iter().enumerate() {
            check(d.port, message).unwrap_or_else(|e| panic!("round {round}, large message {i}: {e}"));
            let request = format!("PROCESS SPAMC/1.5\r\nContent-length: {}\r\n\r\n{message}", message.len());
            let answer = raw_request(d.port, request.as_bytes());
            assert!(answer.starts_with("SPAMD/1.1 0 EX_OK") && answer.len() > message.len(), "round {round}, PROCESS of large message {i}: {:.80}", answer);
        }
        typical(10);
    }
    assert_eq!(d.children(), BTreeSet::from([child]), "one child served all");
    let after = private_kib(child).expect("smaps_rollup");
    // Grown 104 KiB in a debug build (the request and response buffers' first pages,
    // buffers kept at 4 KiB, the header indexes the long headers touched): 668-732 KiB
    // while freed blocks kept their first page, buffers up to 8 KiB were kept, the
    // preview copied a spam's whole text and the response buffer kept what large
    // answers filled; 508 with only the preview's copy left.
    assert!(after <= before + 192, "private memory {before} -> {after} KiB after large messages");
}
