//! The load: persistent worker threads, each sending one request per connection,
//! back to back, over the corpus in order.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::corpus::Corpus;
use crate::protocol::{self, Command, Reply, ReplyError};
use crate::stats::{ErrorCount, Latency, Summary};
use crate::target::Target;

/// Largest response read; anything longer is a daemon fault, not a benchmark figure.
const MAX_RESPONSE: u64 = 256 * 1024 * 1024;
/// Pause after a failed connect, so a dead daemon does not spin the client.
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);

/// When the load ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this long (requests in flight then still complete and count).
    After(Duration),
    /// After this many measured requests.
    Count(u64),
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The daemon.
    pub target: Target,
    /// What to ask.
    pub command: Command,
    /// Worker threads, each with one request in flight.
    pub concurrency: usize,
    /// When to end.
    pub stop: Stop,
    /// Unmeasured load first, so the daemon can spawn its children and warm caches.
    pub warmup: Duration,
    /// Limit on connect, each read and each write.
    pub timeout: Duration,
}

/// One request ready to send.
#[derive(Debug)]
pub struct Request {
    /// Head and message.
    pub bytes: Vec<u8>,
    /// Length of the message part, for MB/s.
    pub message_len: usize,
}

/// Builds the request for every message once, before the load.
pub fn prepare(corpus: &Corpus, command: Command, user: Option<&str>) -> Vec<Request> {
    corpus
        .messages
        .iter()
        .map(|m| Request {
            bytes: protocol::build_request(command, user, &m.bytes),
            message_len: if command.sends_message() { m.bytes.len() } else { 0 },
        })
        .collect()
}

/// Why one exchange failed.
#[derive(Debug)]
pub enum ExchangeError {
    /// The connection could not be opened.
    Connect(io::Error),
    /// The request could not be sent.
    Write(io::Error),
    /// The response could not be read.
    Read(io::Error),
    /// The response is not a good answer.
    Reply(ReplyError),
}

impl ExchangeError {
    /// A short stable name, for counting errors by kind.
    pub fn kind(&self) -> &'static str {
        let timed_out = |e: &io::Error| matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut);
        match self {
            ExchangeError::Connect(e) if timed_out(e) => "connect-timeout",
            ExchangeError::Connect(_) => "connect",
            ExchangeError::Write(e) if timed_out(e) => "write-timeout",
            ExchangeError::Write(_) => "write",
            ExchangeError::Read(e) if timed_out(e) => "read-timeout",
            ExchangeError::Read(_) => "read",
            ExchangeError::Reply(e) => e.kind(),
        }
    }
}

impl fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExchangeError::Connect(e) => write!(f, "connect: {e}"),
            ExchangeError::Write(e) => write!(f, "send: {e}"),
            ExchangeError::Read(e) => write!(f, "receive: {e}"),
            ExchangeError::Reply(e) => write!(f, "{e}"),
        }
    }
}

/// One request on its own connection, as spamc does it: send, half-close, read to EOF, verify.
pub fn exchange(target: &Target, command: Command, request: &[u8], response: &mut Vec<u8>, timeout: Duration) -> Result<Reply, ExchangeError> {
    let mut conn = target.connect(timeout).map_err(ExchangeError::Connect)?;
    conn.write_all(request).map_err(ExchangeError::Write)?;
    // The daemon may already have closed after an early error answer; its answer still tells.
    let _ = conn.shutdown_write();
    response.clear();
    (&mut conn).take(MAX_RESPONSE).read_to_end(response).map_err(ExchangeError::Read)?;
    protocol::verify(command, response).map_err(ExchangeError::Reply)
}

/// What one worker thread measured.
#[derive(Default)]
struct WorkerFigures {
    latencies_us: Vec<u64>,
    messages: u64,
    bytes: u64,
    spam: u64,
    errors: BTreeMap<String, ErrorCount>,
    last_end: Option<Instant>,
}

impl WorkerFigures {
    fn error(&mut self, e: &ExchangeError) {
        self.errors.entry(e.kind().to_string()).or_insert_with(|| ErrorCount { count: 0, example: e.to_string() }).count += 1;
    }

    fn merge(&mut self, other: WorkerFigures) {
        self.latencies_us.extend(other.latencies_us);
        self.messages += other.messages;
        self.bytes += other.bytes;
        self.spam += other.spam;
        for (kind, e) in other.errors {
            self.errors.entry(kind).and_modify(|mine| mine.count += e.count).or_insert(e);
        }
        self.last_end = self.last_end.max(other.last_end);
    }
}

/// Shared by the workers: where in the corpus the next request comes from, how many were measured.
struct Cursor {
    next: AtomicUsize,
    claimed: AtomicU64,
}

/// Runs the plan over `requests` (at least one) and returns the figures of the measured part.
pub fn run(plan: &Plan, requests: &[Request]) -> Summary {
    let cursor = Cursor { next: AtomicUsize::new(0), claimed: AtomicU64::new(0) };
    let begin = Instant::now();
    let measure_from = begin + plan.warmup;
    let stop_at = match plan.stop {
        Stop::After(d) => Some(measure_from + d),
        Stop::Count(_) => None,
    };
    let mut total = WorkerFigures::default();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..plan.concurrency.max(1)).map(|_| scope.spawn(|| worker(plan, requests, &cursor, measure_from, stop_at))).collect();
        for handle in handles {
            match handle.join() {
                Ok(figures) => total.merge(figures),
                Err(_) => total.error(&ExchangeError::Read(io::Error::other("worker thread panicked"))),
            }
        }
    });
    total.latencies_us.sort_unstable();
    let seconds = total.last_end.map_or(0.0, |end| end.saturating_duration_since(measure_from).as_secs_f64());
    Summary {
        command: plan.command.name().to_string(),
        target: plan.target.to_string(),
        concurrency: plan.concurrency.max(1),
        messages: total.messages,
        bytes: total.bytes,
        seconds,
        spam: total.spam,
        latency: Latency::of_sorted(&total.latencies_us),
        errors: total.errors,
    }
}

fn worker(plan: &Plan, requests: &[Request], cursor: &Cursor, measure_from: Instant, stop_at: Option<Instant>) -> WorkerFigures {
    let mut figures = WorkerFigures::default();
    let mut response = Vec::new();
    if requests.is_empty() {
        return figures;
    }
    loop {
        let start = Instant::now();
        if stop_at.is_some_and(|stop| start >= stop) {
            break;
        }
        let measured = start >= measure_from;
        if measured {
            if let Stop::Count(count) = plan.stop {
                if cursor.claimed.fetch_add(1, Ordering::Relaxed) >= count {
                    break;
                }
            }
        }
        let index = cursor.next.fetch_add(1, Ordering::Relaxed) % requests.len();
        let Some(request) = requests.get(index) else { break };
        let outcome = exchange(&plan.target, plan.command, &request.bytes, &mut response, plan.timeout);
        let end = Instant::now();
        if let Err(ExchangeError::Connect(_)) = outcome {
            std::thread::sleep(CONNECT_BACKOFF);
        }
        if !measured {
            continue;
        }
        figures.last_end = Some(end);
        match outcome {
            Ok(reply) => {
                figures.messages += 1;
                figures.bytes += request.message_len as u64;
                figures.spam += u64::from(reply.spam == Some(true));
                figures.latencies_us.push(u64::try_from(end.duration_since(start).as_micros()).unwrap_or(u64::MAX));
            }
            Err(e) => figures.error(&e),
        }
    }
    figures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kinds() {
        let cases: Vec<(ExchangeError, &str)> = vec![
            (ExchangeError::Connect(io::Error::from(io::ErrorKind::ConnectionRefused)), "connect"),
            (ExchangeError::Connect(io::Error::from(io::ErrorKind::TimedOut)), "connect-timeout"),
            (ExchangeError::Write(io::Error::from(io::ErrorKind::BrokenPipe)), "write"),
            (ExchangeError::Write(io::Error::from(io::ErrorKind::WouldBlock)), "write-timeout"),
            (ExchangeError::Read(io::Error::from(io::ErrorKind::ConnectionReset)), "read"),
            (ExchangeError::Read(io::Error::from(io::ErrorKind::WouldBlock)), "read-timeout"),
            (ExchangeError::Reply(ReplyError::NoSpamHeader), "no-spam-header"),
        ];
        for (e, want) in cases {
            assert_eq!(e.kind(), want, "{e}");
        }
    }

    #[test]
    fn merging_adds_counts_and_keeps_the_first_example() {
        let mut a = WorkerFigures { latencies_us: vec![1, 2], messages: 2, bytes: 10, spam: 1, ..WorkerFigures::default() };
        a.error(&ExchangeError::Reply(ReplyError::NoSpamHeader));
        let mut b = WorkerFigures { latencies_us: vec![3], messages: 1, bytes: 5, spam: 0, ..WorkerFigures::default() };
        b.error(&ExchangeError::Reply(ReplyError::NoSpamHeader));
        b.error(&ExchangeError::Connect(io::Error::from(io::ErrorKind::ConnectionRefused)));
        a.merge(b);
        assert_eq!((a.latencies_us.len(), a.messages, a.bytes, a.spam), (3, 3, 15, 1));
        let counts: Vec<(&str, u64)> = a.errors.iter().map(|(k, e)| (k.as_str(), e.count)).collect();
        assert_eq!(counts, vec![("connect", 1), ("no-spam-header", 2)]);
    }

    #[test]
    fn prepares_one_request_per_message() {
        let corpus = Corpus {
            messages: vec![
                crate::corpus::Message { path: "a".into(), bytes: b"abc".to_vec() },
                crate::corpus::Message { path: "b".into(), bytes: b"de".to_vec() },
            ],
        };
        let check = prepare(&corpus, Command::Check, None);
        assert_eq!(check.iter().map(|r| r.message_len).collect::<Vec<_>>(), vec![3, 2]);
        assert!(check.first().is_some_and(|r| r.bytes.ends_with(b"\r\n\r\nabc")));
        let ping = prepare(&corpus, Command::Ping, None);
        assert_eq!(ping.iter().map(|r| r.message_len).collect::<Vec<_>>(), vec![0, 0]);
    }
}
