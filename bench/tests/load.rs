//! The load generator against small in-process daemons that speak the spamd protocol.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sift_bench::corpus::{Corpus, Message};
use sift_bench::load::{self, Plan, Stop};
use sift_bench::protocol::Command;
use sift_bench::target::Target;

/// How a fake daemon answers.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Like spamd: spam when the message contains "SPAM".
    Good,
    /// EX_OK without the Spam: header.
    NoSpamHeader,
    /// Closes without a word.
    Silent,
}

/// What a fake daemon saw.
#[derive(Default)]
struct Seen {
    connections: AtomicU64,
    bad_requests: AtomicU64,
}

/// Reads one request to EOF (the client half-closes), checks its Content-length, answers.
fn serve(mut stream: impl Read + Write, behaviour: Behaviour, seen: &Seen) {
    seen.connections.fetch_add(1, Ordering::Relaxed);
    let mut request = Vec::new();
    if stream.read_to_end(&mut request).is_err() {
        seen.bad_requests.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let text = String::from_utf8_lossy(&request).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let declared = head.lines().find_map(|l| l.strip_prefix("Content-length: ")).and_then(|v| v.parse::<usize>().ok());
    if !head.starts_with("CHECK SPAMC/1.5\r\n") || declared != Some(body.len()) {
        seen.bad_requests.fetch_add(1, Ordering::Relaxed);
    }
    let answer = match behaviour {
        Behaviour::Good if body.contains("SPAM") => "SPAMD/1.1 0 EX_OK\r\nSpam: True ; 9.0 / 5.0\r\n\r\n",
        Behaviour::Good => "SPAMD/1.1 0 EX_OK\r\nSpam: False ; 0.5 / 5.0\r\n\r\n",
        Behaviour::NoSpamHeader => "SPAMD/1.1 0 EX_OK\r\n\r\n",
        Behaviour::Silent => "",
    };
    let _ = stream.write_all(answer.as_bytes());
}

fn tcp_daemon(behaviour: Behaviour) -> (Target, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(Seen::default());
    let seen_by_server = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            serve(stream, behaviour, &seen_by_server);
        }
    });
    (Target::Tcp(addr), seen)
}

fn corpus() -> Corpus {
    let bodies = ["Subject: hello\r\n\r\nham\r\n", "Subject: offer\r\n\r\nSPAM SPAM\r\n", "Subject: x\r\n\r\n", "Subject: y\r\n\r\nmore ham here\r\n"];
    Corpus { messages: bodies.iter().enumerate().map(|(i, b)| Message { path: format!("m{i}").into(), bytes: b.as_bytes().to_vec() }).collect() }
}

fn plan(target: Target, concurrency: usize, stop: Stop) -> Plan {
    Plan { target, command: Command::Check, concurrency, stop, warmup: Duration::ZERO, timeout: Duration::from_secs(10) }
}

#[test]
fn counted_run_sends_each_message_once_per_connection_and_counts_verdicts() {
    let (target, seen) = tcp_daemon(Behaviour::Good);
    let corpus = corpus();
    let requests = load::prepare(&corpus, Command::Check, None);
    let summary = load::run(&plan(target, 4, Stop::Count(40)), &requests);
    assert_eq!(summary.error_total(), 0, "{}", summary.human());
    assert_eq!(summary.messages, 40);
    // 40 requests walk the 4 messages 10 times in order: one in four is spam.
    assert_eq!(summary.spam, 10);
    assert_eq!(summary.bytes, 10 * corpus.bytes());
    assert_eq!(seen.connections.load(Ordering::Relaxed), 40);
    assert_eq!(seen.bad_requests.load(Ordering::Relaxed), 0);
    assert!(summary.seconds > 0.0 && summary.latency.max >= summary.latency.p50);
}

#[test]
fn timed_run_stops_near_its_duration() {
    let (target, _seen) = tcp_daemon(Behaviour::Good);
    let requests = load::prepare(&corpus(), Command::Check, None);
    let summary = load::run(&plan(target, 2, Stop::After(Duration::from_millis(300))), &requests);
    assert_eq!(summary.error_total(), 0, "{}", summary.human());
    assert!(summary.messages > 0);
    assert!(summary.seconds >= 0.3 && summary.seconds < 5.0, "{}", summary.seconds);
}

#[test]
fn bad_answers_are_counted_by_kind() {
    let requests = load::prepare(&corpus(), Command::Check, None);
    for (behaviour, kind) in [(Behaviour::NoSpamHeader, "no-spam-header"), (Behaviour::Silent, "empty-reply")] {
        let (target, _seen) = tcp_daemon(behaviour);
        let summary = load::run(&plan(target, 2, Stop::Count(10)), &requests);
        assert_eq!(summary.messages, 0, "{kind}");
        assert_eq!(summary.errors.get(kind).map(|e| e.count), Some(10), "{kind}: {}", summary.human());
        assert_eq!(summary.error_total(), 10, "{kind}");
    }
}

#[test]
fn connection_refused_is_a_connect_error() {
    let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    // The listener is dropped: nothing listens there now.
    let requests = load::prepare(&corpus(), Command::Check, None);
    let summary = load::run(&plan(Target::Tcp(port), 1, Stop::Count(3)), &requests);
    assert_eq!(summary.messages, 0);
    assert_eq!(summary.errors.get("connect").map(|e| e.count), Some(3), "{}", summary.human());
}

#[test]
fn unix_socket_target() {
    let path = std::env::temp_dir().join(format!("sift-bench-load-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).expect("bind");
    let seen = Arc::new(Seen::default());
    let seen_by_server = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            serve(stream, Behaviour::Good, &seen_by_server);
        }
    });
    let target = Target::parse(path.to_str().expect("utf-8 path")).expect("target");
    let requests = load::prepare(&corpus(), Command::Check, None);
    let summary = load::run(&plan(target, 3, Stop::Count(12)), &requests);
    let _ = std::fs::remove_file(&path);
    assert_eq!((summary.messages, summary.spam, summary.error_total()), (12, 3, 0), "{}", summary.human());
    assert_eq!(seen.connections.load(Ordering::Relaxed), 12);
}
