//! Fuzz entry points for sift-core, one per target, shared by the cargo-fuzz targets
//! and the regression replay test (core/tests/fuzz_regressions.rs includes this file).
//! Each takes arbitrary bytes; a panic (or a failed invariant assertion) is a finding.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::OnceLock;

use sift_core::msg::{addresses, first_address, first_display_name, first_display_name_decoded, Limits, Message, MessageBuffers};
use sift_core::prefork::{self, Action, Actions, Event, Policy, Record, RecordKind, RecordReader, ACTIONS_SLACK};
use sift_core::proto::{parse_request_head, read_request, HeadParser, Inflater, RequestLimits};
use sift_core::rules::{cf, RuleSet, DEFAULT_RULES};
use sift_core::scan::Scratch;

/// The targets, by name (the directory names under fuzz/corpus, seeds and regressions).
pub const TARGETS: [&str; 8] = ["request_head", "request", "message", "mime_decode", "rules", "scan", "records", "prefork"];

/// Runs the entry point of `target` on `data`; false if there is no such target.
pub fn run(target: &str, data: &[u8]) -> bool {
    match target {
        "request_head" => request_head(data),
        "request" => request(data),
        "message" => message(data),
        "mime_decode" => mime_decode(data),
        "rules" => rules(data),
        "scan" => scan(data),
        "records" => records(data),
        "prefork" => prefork(data),
        _ => return false,
    }
    true
}

/// Rule text longer than this is cut: DFA building must stay fast per input.
pub const RULES_INPUT_MAX: usize = 4 * 1024;

/// A request head: the one-shot parser, and the incremental one fed in two pieces
/// must agree on whether the head is accepted.
pub fn request_head(data: &[u8]) {
    let whole = parse_request_head(data);
    if let Ok(head) = &whole {
        let _ = head.body_framing();
        let _ = head.check_limits(&RequestLimits::default());
    }
    if let Err(e) = &whole {
        let mut out = Vec::new();
        let _ = e.write_response(&mut sift_core::proto::VecWriter(&mut out));
        let _ = e.code();
    }
    // Incremental: grow the buffer a byte at a time up to a split point, then all.
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let mut parser = HeadParser::new(data.len().saturating_add(1));
    for end in 0..=split {
        if parser.parse(data.get(..end).unwrap_or_default(), false).is_err() {
            return;
        }
    }
    let _ = parser.parse(data, true);
}

/// An in-memory reader handing out chunks whose sizes cycle through `sizes`.
struct ChunkedReader<'d> {
    data: &'d [u8],
    sizes: &'d [u8],
    turn: usize,
}

impl embedded_io::ErrorType for ChunkedReader<'_> {
    type Error = Infallible;
}

impl embedded_io::Read for ChunkedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Infallible> {
        let size = if self.sizes.is_empty() {
            usize::MAX
        } else {
            let s = self.sizes.get(self.turn % self.sizes.len()).copied().unwrap_or(1);
            self.turn = self.turn.wrapping_add(1);
            usize::from(s).max(1)
        };
        let n = size.min(buf.len()).min(self.data.len());
        let (now, rest) = self.data.split_at(n);
        if let Some(dst) = buf.get_mut(..n) {
            dst.copy_from_slice(now);
        }
        self.data = rest;
        Ok(n)
    }
}

/// A whole request through `read_request`: byte 0 = how many chunk-size bytes follow
/// (0..=7), then those sizes, then the request (zlib bodies included). Small limits
/// and buffer so the size checks are reached.
pub fn request(data: &[u8]) {
    let (&count, rest) = match data.split_first() {
        Some(x) => x,
        None => return,
    };
    let count = usize::from(count % 8).min(rest.len());
    let (sizes, wire) = rest.split_at(count);
    let limits = RequestLimits { max_head: 1024, max_body: 64 * 1024 };
    let mut buf = vec![0u8; 48 * 1024];
    let mut inflater = Inflater::new();
    let mut reader = ChunkedReader { data: wire, sizes, turn: 0 };
    match read_request(&mut reader, &mut buf, &limits, &mut inflater) {
        Ok(req) => {
            assert!(req.body.len() <= limits.max_body, "body {} over limit", req.body.len());
            let _ = req.head.body_framing();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    // The inflater alone on the same bytes, output small enough to overflow.
    let mut out = [0u8; 4096];
    let _ = inflater.inflate(wire, &mut out);
}

fn render_all(msg: &Message<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    for h in msg.headers() {
        out.extend_from_slice(h.name);
        out.extend_from_slice(h.raw);
        out.extend_from_slice(h.decoded);
    }
    let _ = msg.header(b"subject");
    out.extend_from_slice(msg.header_block());
    out.extend_from_slice(msg.body());
    out.extend_from_slice(msg.rawbody());
    out.extend_from_slice(msg.uris());
    let _ = msg.uri_count();
    let _ = msg.overflow();
    for p in msg.parts() {
        let _ = (p.depth(), p.is_text(), p.is_leaf(), p.is_html());
        out.extend_from_slice(p.content_type());
        out.extend_from_slice(p.charset());
        for h in p.headers() {
            out.extend_from_slice(h.decoded);
        }
    }
    out
}

/// Parse and render everything a message exposes; buffers reused for another
/// message must give the same result again (no state leaks between messages).
pub fn message(data: &[u8]) {
    let mut bufs = MessageBuffers::new(Limits::default());
    let first = render_all(&Message::parse(data, &mut bufs));
    let half = data.get(..data.len() / 2).unwrap_or_default();
    let _ = render_all(&Message::parse(half, &mut bufs));
    let again = render_all(&Message::parse(data, &mut bufs));
    assert!(first == again, "reused buffers changed the result");
}

const MIME_ENCODINGS: [&str; 5] = ["base64", "quoted-printable", "7bit", "8bit", "x-uuencode"];
const MIME_TYPES: [&str; 4] = ["text/plain", "text/html", "message/rfc822", "application/octet-stream"];
const CHARSETS: [&str; 6] = ["utf-8", "iso-8859-1", "windows-1252", "koi8-r", "utf-16le", "bogus"];

/// The decoders through a MIME wrapper (msg exposes none on their own): byte 0 picks
/// the part's transfer encoding, type and charset, the rest is the part body; it is
/// also tried as a header value (RFC 2047 words) and through the address parsers.
pub fn mime_decode(data: &[u8]) {
    let (&sel, body) = match data.split_first() {
        Some(x) => x,
        None => return,
    };
    let enc = MIME_ENCODINGS.get(usize::from(sel) % MIME_ENCODINGS.len()).copied().unwrap_or("base64");
    let ty = MIME_TYPES.get(usize::from(sel >> 3) % MIME_TYPES.len()).copied().unwrap_or("text/plain");
    let cs = CHARSETS.get(usize::from(sel >> 5) % CHARSETS.len()).copied().unwrap_or("utf-8");
    let mut raw = Vec::with_capacity(body.len().saturating_mul(2).saturating_add(512));
    raw.extend_from_slice(b"From: ");
    raw.extend_from_slice(body.get(..body.len().min(200)).unwrap_or_default());
    raw.extend_from_slice(b"\nSubject: ");
    raw.extend(body.iter().take(300).map(|b| if *b == b'\n' { b' ' } else { *b }));
    raw.extend_from_slice(b"\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"=_b\"\n\n--=_b\n");
    raw.extend_from_slice(format!("Content-Type: {ty}; charset={cs}\nContent-Transfer-Encoding: {enc}\n\n").as_bytes());
    raw.extend_from_slice(body);
    raw.extend_from_slice(b"\n--=_b--\n");
    let mut bufs = MessageBuffers::new(Limits::default());
    let _ = render_all(&Message::parse(&raw, &mut bufs));

    for a in addresses(body).take(1000) {
        let _ = format!("{a:?}");
    }
    let _ = first_address(body);
    let _ = first_display_name(body);
    let mut out = Vec::new();
    let mut scratch: [Vec<u8>; 4] = Default::default();
    let _ = first_display_name_decoded(body, &mut out, &mut scratch);
}

/// Arbitrary rule text (cut to [`RULES_INPUT_MAX`]): parse, compile, and scan a
/// small message with what compiled.
pub fn rules(data: &[u8]) {
    let data = data.get(..data.len().min(RULES_INPUT_MAX)).unwrap_or_default();
    let text = String::from_utf8_lossy(data);
    let Ok(config) = cf::parse_str("fuzz.cf", &text) else { return };
    let Ok(set) = RuleSet::compile(&config) else { return };
    let _ = set.summary();
    let _ = set.disabled();
    let mut scratch = Scratch::new(&set);
    let msg = b"From: a@example.com\nTo: b@example.org\nSubject: Hello there\n\nBuy now http://example.com/x\n";
    let verdict = set.scan(msg, &mut scratch);
    let _ = verdict.is_spam();
    for h in verdict.hits() {
        let _ = format!("{h:?}");
    }
    for id in 0..set.rule_count() {
        let name = set.rule_name(u32::try_from(id).unwrap_or(u32::MAX));
        let _ = set.rule_id(name);
    }
}

fn default_rules() -> &'static RuleSet {
    static RULES: OnceLock<RuleSet> = OnceLock::new();
    RULES.get_or_init(|| {
        let config = match cf::parse_str("default.cf", DEFAULT_RULES) {
            Ok(c) => c,
            Err(e) => panic!("embedded rules do not parse: {e}"),
        };
        match RuleSet::compile(&config) {
            Ok(r) => r,
            Err(e) => panic!("embedded rules do not compile: {e}"),
        }
    })
}

/// Any bytes as a message, scanned with the embedded rules. One scratch serves every
/// run, as in a worker: what a scan leaves in it (warm DFA caches, buffers) is fuzzed
/// too, and runs are ~50x faster than with a fresh scratch each.
pub fn scan(data: &[u8]) {
    thread_local! {
        static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
    }
    let rules = default_rules();
    SCRATCH.with(|cell| {
        let mut slot = cell.borrow_mut();
        let scratch = slot.get_or_insert_with(|| Scratch::new(rules));
        let verdict = rules.scan(data, scratch);
        let _ = verdict.is_spam();
        let _ = verdict.hits().count();
        let _ = verdict.all_hits().count();
    });
}

/// Back-channel bytes: `decode` on every 32-byte frame, and a `RecordReader` fed the
/// same bytes in chunks sized by byte 0 must yield the same records in order.
pub fn records(data: &[u8]) {
    let (&step, wire) = match data.split_first() {
        Some(x) => x,
        None => return,
    };
    let direct: Vec<_> = wire
        .chunks_exact(prefork::record::SIZE)
        .filter_map(|c| <&[u8; prefork::record::SIZE]>::try_from(c).ok())
        .map(prefork::decode)
        .collect();
    for r in direct.iter().flatten() {
        assert_eq!(prefork::decode(&prefork::encode(r)).as_ref(), Ok(r), "encode/decode round trip");
    }
    let step = usize::from(step).max(1);
    // feed
    let mut reader = RecordReader::new();
    let mut fed = Vec::new();
    for chunk in wire.chunks(step) {
        reader.feed(chunk, |r| fed.push(r));
    }
    assert_eq!(fed, direct, "feed in chunks of {step}");
    assert!(reader.buffered() < prefork::record::SIZE);
    // push/next_record, draining after each chunk (push may take less than offered)
    let mut reader = RecordReader::new();
    let mut pushed = Vec::new();
    for mut chunk in wire.chunks(step) {
        while !chunk.is_empty() {
            let n = reader.push(chunk);
            chunk = chunk.get(n..).unwrap_or_default();
            while let Some(r) = reader.next_record() {
                pushed.push(r);
            }
        }
    }
    assert_eq!(pushed, direct, "push in chunks of {step}");
    // spare_mut/commit
    let mut reader = RecordReader::new();
    let mut read = Vec::new();
    let mut rest = wire;
    while !rest.is_empty() {
        let spare = reader.spare_mut();
        let n = spare.len().min(rest.len()).min(step);
        let (now, later) = rest.split_at(n);
        if let Some(dst) = spare.get_mut(..n) {
            dst.copy_from_slice(now);
        }
        reader.commit(n);
        rest = later;
        while let Some(r) = reader.next_record() {
            read.push(r);
        }
    }
    assert_eq!(read, direct, "spare_mut in chunks of {step}");
}

/// Table capacity for the prefork target.
const PREFORK_N: usize = 8;

/// What the fake shell knows about one child.
#[derive(Default)]
struct ShellChild {
    seq: u32,
    /// Ordered to accept, has not yet taken the connection.
    ordered: bool,
    /// Connections it took and has not finished.
    holding: u32,
    told_to_go: bool,
    /// Sent SIGKILL: whatever it still writes races the kill.
    killed: bool,
    /// Has sent its first record.
    ready: bool,
    /// Ordered when no connection was waiting: it will find nothing and say `NoVerdict`.
    spurious: bool,
}

/// A fake shell that keeps the contract, driven by fuzz bytes, with children that
/// follow the protocol or, when the bytes say so, are hostile (any record at any
/// time, bad records, unknown pids). Asserts: never more processes than
/// `max_children`, at most one order outstanding, accept orders only to children
/// the policy had idle and not retired, every connection taken by one child only,
/// and, while all children are honest, never an order without a pending connection
/// of its own.
pub fn prefork(data: &[u8]) {
    let mut bytes = data.iter().copied();
    let mut next = move || bytes.next();
    let (Some(a), Some(b), Some(c)) = (next(), next(), next()) else { return };
    let max_children = usize::from(a % PREFORK_N as u8) + 1;
    let config = prefork::Config {
        max_children,
        min_children: usize::from(a >> 4) % max_children + 1,
        min_spare: usize::from(b % 4),
        max_spare: usize::from(b % 4) + usize::from((b >> 2) % 4),
        max_conn_per_child: u32::from(c % 4) + 1,
        timeout_child_secs: u32::from((c >> 2) % 3),
        spawn_rate_max: usize::from((c >> 4) % 4) + 1,
        tick_ms: 100,
        round_robin: b & 0x80 != 0,
        max_busy: usize::from(c >> 6),
        busy_grace_ms: 150,
    };
    let fd_passing = b & 0x40 != 0;
    let Ok(mut policy) = Policy::<PREFORK_N>::new(config) else { return };
    let mut actions = Actions::<{ PREFORK_N + ACTIONS_SLACK }>::new();
    let mut now: u64 = 0;
    let mut next_pid: u32 = 100;
    let mut spawns_owed: usize = 0;
    let mut children: BTreeMap<u32, ShellChild> = BTreeMap::new();
    // Connections in the listener's backlog (ordered-but-not-accepted ones included).
    let mut backlog: usize = 0;
    let mut assigned: BTreeSet<u64> = BTreeSet::new();
    let mut next_conn: u64 = 0;
    let mut exited = false;
    // No hostile input so far: every record followed the child protocol.
    let mut honest = true;
    let mut events: Vec<Event> = vec![Event::Tick { now_ms: 0 }];
    let trace = std::env::var_os("SIFT_FUZZ_TRACE").is_some();
    if trace {
        eprintln!("{config:?} fd_passing={fd_passing}");
    }

    let pick = |children: &BTreeMap<u32, ShellChild>, sel: u8| -> Option<u32> {
        if children.is_empty() {
            return None;
        }
        children.keys().nth(usize::from(sel) % children.len()).copied()
    };

    for _round in 0..4096 {
        while let Some(event) = events.pop() {
            let idle_before: BTreeSet<u32> = policy
                .table()
                .iter()
                .filter(|c| c.state == prefork::table::ChildState::Idle)
                .map(|c| c.pid)
                .collect();
            let outstanding_before = policy.orders_outstanding();
            policy.on(event, &mut actions);
            if trace {
                eprintln!("{event:?} -> {:?} (backlog {backlog})", actions.as_slice());
            }
            let list: Vec<Action> = actions.as_slice().to_vec();
            for action in list {
                match action {
                    Action::Spawn => spawns_owed += 1,
                    Action::AcceptOrder { pid } => {
                        let made_idle = matches!(event, Event::Record { pid: p, record } if p == pid
                            && matches!(record.kind, RecordKind::Ready | RecordKind::Served | RecordKind::NoVerdict));
                        assert!(idle_before.contains(&pid) || made_idle, "order to {pid} which was not idle");
                        assert!(!config.round_robin, "order in round-robin mode");
                        assert_eq!(outstanding_before, 0, "second order while one is outstanding");
                        // A killed child never takes the connection it was ordered to take.
                        let ordered = children.values().filter(|c| c.ordered && !c.killed).count();
                        // With honest children every order has a connection of its own; after
                        // hostile records the policy may order in vain (the child finds nothing).
                        let real = backlog > ordered;
                        assert!(real || !honest, "order without a connection (backlog {backlog}, ordered {ordered})");
                        let child = children.get_mut(&pid);
                        assert!(child.is_some(), "order to unknown pid {pid}");
                        if let Some(child) = child {
                            assert!(!child.told_to_go, "order to {pid} after retire/kill");
                            if !real {
                                child.spurious = true;
                            } else if fd_passing {
                                backlog -= 1;
                                assert!(assigned.insert(next_conn), "connection assigned twice");
                                next_conn += 1;
                                child.holding += 1;
                                events.push(Event::Accepted { pid });
                            } else {
                                child.ordered = true;
                            }
                        }
                    }
                    Action::Retire { pid } => {
                        if let Some(child) = children.get_mut(&pid) {
                            child.told_to_go = true;
                        }
                    }
                    Action::Kill { pid } => {
                        if let Some(child) = children.get_mut(&pid) {
                            child.told_to_go = true;
                            child.killed = true;
                        }
                    }
                    Action::Exit => {
                        assert!(children.is_empty(), "exit with children alive: {:?}", children.keys().collect::<Vec<_>>());
                        exited = true;
                    }
                }
            }
            assert!(policy.processes() <= config.max_children, "{} processes > max {}", policy.processes(), config.max_children);
            assert!(policy.table().len() <= config.max_children);
            assert!(policy.orders_outstanding() <= 1);
        }
        if exited {
            return;
        }
        let (Some(op), Some(arg)) = (next(), next()) else { return };
        match op % 12 {
            0 => {
                now = now.saturating_add(u64::from(arg) * 10);
                events.push(Event::Tick { now_ms: now });
            }
            1 if spawns_owed > 0 => {
                spawns_owed -= 1;
                if arg & 1 == 0 && children.len() < PREFORK_N {
                    let pid = next_pid;
                    next_pid += 1;
                    children.insert(pid, ShellChild::default());
                    events.push(Event::Spawned { pid, now_ms: now });
                } else {
                    events.push(Event::SpawnFailed);
                }
            }
            2..=4 => {
                // A child writes a record: mostly the honest next one, sometimes anything.
                let Some(pid) = pick(&children, arg) else { continue };
                let Some(child) = children.get_mut(&pid) else { continue };
                let honest_kind = if !child.ready {
                    Some(RecordKind::Ready)
                } else if child.spurious {
                    Some(RecordKind::NoVerdict)
                } else if child.ordered && !fd_passing {
                    Some(RecordKind::Busy)
                } else if child.holding > 0 {
                    Some(RecordKind::Served)
                } else {
                    None
                };
                let kind = match honest_kind {
                    Some(k) if arg & 0x80 == 0 && !child.killed => k,
                    _ => {
                        honest = false;
                        match (op / 12) % 4 {
                            0 => RecordKind::Ready,
                            1 => RecordKind::Busy,
                            2 => RecordKind::Served,
                            _ => RecordKind::NoVerdict,
                        }
                    }
                };
                child.ready = true;
                if kind == RecordKind::Busy && child.ordered {
                    child.ordered = false;
                    child.holding += 1;
                    backlog = backlog.saturating_sub(1);
                    assert!(assigned.insert(next_conn), "connection assigned twice");
                    next_conn += 1;
                }
                if matches!(kind, RecordKind::Served | RecordKind::NoVerdict) {
                    if child.spurious {
                        child.spurious = false;
                    } else {
                        child.holding = child.holding.saturating_sub(1);
                    }
                }
                if arg & 0x20 != 0 {
                    honest = false;
                    child.seq = u32::from(arg);
                } else {
                    child.seq = child.seq.wrapping_add(1);
                }
                let record = Record::new(kind, pid, child.seq);
                events.push(Event::Record { pid, record });
            }
            5 => {
                // A child exits: one told to go, or a crash.
                let Some(pid) = pick(&children, arg) else { continue };
                // An ordered child that never took its connection leaves it in the backlog.
                children.remove(&pid);
                events.push(Event::Exited { pid });
            }
            6 | 7 => {
                if op % 12 == 6 {
                    backlog += 1;
                }
                if backlog > 0 && policy.wants_listener() {
                    events.push(Event::ConnectionPending);
                }
            }
            8 => {
                let Some(pid) = pick(&children, arg) else { continue };
                honest = false;
                events.push(Event::BadRecord { pid });
            }
            9 => events.push(Event::Shutdown),
            10 => events.push(Event::Reload),
            _ => {
                // Events about pids the policy never saw must be harmless.
                honest = false;
                let pid = 1 + u32::from(arg);
                if children.contains_key(&pid) {
                    continue;
                }
                let record = Record::new(RecordKind::Ready, pid, 1);
                events.push(if arg & 1 == 0 { Event::Exited { pid } } else { Event::Record { pid, record } });
            }
        }
    }
}
