//! The daemon: listeners, the master's event loop and the workers. What differs per
//! OS (parent-death signal, sandbox) comes in through [`Platform`].
//!
//! The master accepts each connection itself and passes it with `SCM_RIGHTS` to the
//! child the prefork policy picks (the lowest-pid idle one). A child serves one
//! request per connection and answers with one fixed-size back-channel record.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::Instant;

use sift_core::prefork::{self, Action, Actions, Event, Policy, Record, RecordKind, RecordReader, ACTIONS_SLACK};
use sift_core::proto::{self, Environment, Inflater, ReadError, RequestLimits, RewriteScratch, RewriteSettings};
use sift_core::rules::RuleSet;
use sift_core::scan::{Scratch, Verdict};

use crate::access::AccessList;
use crate::cli::DaemonOptions;
use crate::exit;
use crate::load::{load_rules, RuleSources};
use crate::listen::{bind_all, Listener};
use crate::log::Log;
use crate::sys;

/// Most children the table holds.
const TABLE: usize = 256;
/// Largest request head.
const MAX_HEAD: usize = 8 * 1024;

/// What a shell supplies for its OS.
pub trait Platform {
    /// Runs in each forked child of `master` before it serves: parent-death signal, sandbox.
    fn child_setup(&self, master: libc::pid_t) -> io::Result<()>;

    /// Runs in each child after its setup and before the first request: confines the
    /// child to what serving needs (seccomp, Capsicum, pledge). Default: no sandbox.
    fn sandbox_child(&self) -> io::Result<()> {
        Ok(())
    }
}

/// One child as the master sees it.
struct ChildSlot {
    pid: libc::pid_t,
    channel: Option<OwnedFd>,
    reader: RecordReader,
}

/// What the master shares with the children it forks.
struct Shared<'a> {
    rules: &'a RuleSet,
    settings: RewriteSettings,
    hostname: String,
    limits: RequestLimits,
    round_robin: bool,
}

impl<'a> Shared<'a> {
    /// What children of this rule set need: built at start and again on every reload.
    fn new(rules: &'a RuleSet, o: &DaemonOptions, hostname: &str) -> Self {
        Shared {
            rules,
            settings: RewriteSettings::from_config(rules.settings()),
            hostname: hostname.to_string(),
            limits: RequestLimits { max_head: MAX_HEAD, max_body: o.max_size },
            round_robin: o.round_robin,
        }
    }
}

/// Runs the daemon until SIGTERM/SIGINT; returns the exit status.
pub fn run(options: &crate::cli::Options, platform: &dyn Platform) -> i32 {
    let o = &options.daemon;
    let log = match Log::open(&o.syslog) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("siftd: {e}");
            return exit::USAGE;
        }
    };
    match start(options, platform, &log) {
        Ok(code) => code,
        Err((code, why)) => {
            log.error(&why);
            if !matches!(o.syslog.as_str(), "stderr") {
                eprintln!("siftd: {why}");
            }
            code
        }
    }
}

fn now_ms(start: Instant) -> u64 {
    start.elapsed().as_millis() as u64
}

fn start(options: &crate::cli::Options, platform: &dyn Platform, log: &Log) -> Result<i32, (i32, String)> {
    let o = &options.daemon;
    let sources: RuleSources = options.rule_sources();
    let started = Instant::now();
    let mut rules = load_rules(&sources).map_err(|e| (exit::CONFIG, e.to_string()))?;
    let access = AccessList::parse(o.allowed_ips.iter().map(String::as_str)).map_err(|e| (exit::USAGE, e.to_string()))?;
    let config = prefork::Config {
        max_children: o.max_children,
        min_children: o.min_children,
        min_spare: o.min_spare,
        max_spare: o.max_spare,
        max_conn_per_child: o.max_conn_per_child,
        timeout_child_secs: o.timeout_child,
        round_robin: o.round_robin,
        ..prefork::Config::default()
    }
    .spamd_adjusted();
    let mut policy = Policy::<TABLE>::new(config).map_err(|e| (exit::USAGE, e.to_string()))?;
    let listeners = bind_all(o, log).map_err(|e| (exit::CONFIG, e.to_string()))?;
    if let Some(user) = &o.username {
        let account = sys::lookup_user(user).map_err(|e| (exit::CONFIG, format!("--username {user}: {e}")))?;
        sys::drop_privileges(&account).map_err(|e| (exit::CONFIG, format!("dropping privileges to {user}: {e}")))?;
    }
    if o.daemonize {
        match sys::fork().map_err(|e| (exit::SOFTWARE, format!("daemonize: {e}")))? {
            sys::Fork::Parent(_) => sys::exit_now(0),
            sys::Fork::Child => {
                let _ = sys::setsid();
                let _ = sys::stdio_to_devnull();
            }
        }
    }
    if let Some(p) = &o.pidfile {
        std::fs::write(p, format!("{}\n", sys::getpid())).map_err(|e| (exit::CANTCREAT, format!("pidfile {}: {e}", p.display())))?;
    }
    sys::ignore_sigpipe().map_err(|e| (exit::SOFTWARE, e.to_string()))?;
    let signals = sys::signal_pipe(&[libc::SIGHUP, libc::SIGTERM, libc::SIGINT, libc::SIGCHLD, libc::SIGUSR1])
        .map_err(|e| (exit::SOFTWARE, format!("signals: {e}")))?;
    let names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
    log.info(&format!(
        "server started on {} (rules: {} defined, ready in {} ms), pid {}",
        names.join(", "),
        rules.rule_count(),
        started.elapsed().as_millis(),
        sys::getpid()
    ));

    let hostname = hostname();
    let mut master = Master {
        log,
        platform,
        listeners,
        signals,
        children: Vec::new(),
        pending: None,
        access,
        clock: Instant::now(),
        timeout_tcp: o.timeout_tcp,
        stats_file: o.stats_file.clone(),
        last_stats: 0,
    };
    let mut shared = Shared::new(&rules, o, &hostname);
    let code = loop {
        match master.turn(&mut policy, &shared) {
            Turn::Continue => {}
            Turn::Exit => break 0,
            Turn::Reload => {
                // Compile before retiring anything: a broken rule file keeps the old set serving.
                match load_rules(&sources) {
                    Ok(new) => {
                        drop(shared);
                        rules = new;
                        shared = Shared::new(&rules, o, &hostname);
                        log.info(&format!("reloaded rules: {} defined", rules.rule_count()));
                        master.act(&mut policy, &shared, Event::Reload);
                    }
                    Err(e) => log.error(&format!("reload failed, keeping the old rules: {e}")),
                }
            }
        }
    };
    for l in &master.listeners {
        if let Some(p) = &l.unix_path {
            let _ = std::fs::remove_file(p);
        }
    }
    if let Some(p) = &o.pidfile {
        let _ = std::fs::remove_file(p);
    }
    log.info("server stopped");
    Ok(code)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

enum Turn {
    Continue,
    Reload,
    Exit,
}

struct Master<'l> {
    log: &'l Log,
    platform: &'l dyn Platform,
    listeners: Vec<Listener>,
    signals: OwnedFd,
    children: Vec<ChildSlot>,
    pending: Option<OwnedFd>,
    access: AccessList,
    clock: Instant,
    timeout_tcp: u32,
    stats_file: Option<PathBuf>,
    last_stats: u64,
}

impl Master<'_> {
    /// Feeds one event to the policy and carries out every action that follows.
    fn act(&mut self, policy: &mut Policy<TABLE>, shared: &Shared<'_>, event: Event) -> bool {
        let mut queue = vec![event];
        let mut exit = false;
        while let Some(ev) = queue.pop() {
            let mut actions = Actions::<{ TABLE + ACTIONS_SLACK }>::new();
            policy.on(ev, &mut actions);
            for action in actions.iter().copied() {
                match action {
                    Action::Spawn => match self.spawn(shared) {
                        Ok(pid) => queue.push(Event::Spawned { pid: pid as u32, now_ms: now_ms(self.clock) }),
                        Err(e) => {
                            self.log.error(&format!("cannot fork a child: {e}"));
                            queue.push(Event::SpawnFailed);
                        }
                    },
                    Action::AcceptOrder { pid } => {
                        let Some(conn) = self.pending.take() else { continue };
                        let sent = self
                            .children
                            .iter()
                            .find(|c| c.pid as u32 == pid)
                            .and_then(|c| c.channel.as_ref())
                            .map(|ch| sys::send_fd(ch.as_raw_fd(), conn.as_raw_fd(), 0));
                        match sent {
                            Some(Ok(())) => queue.push(Event::Accepted { pid }),
                            other => {
                                self.log.error(&format!("cannot hand a connection to child {pid}: {other:?}"));
                                let _ = sys::kill(pid as libc::pid_t, libc::SIGKILL);
                            }
                        }
                    }
                    Action::Retire { pid } => {
                        if let Some(ch) = self.children.iter().find(|c| c.pid as u32 == pid).and_then(|c| c.channel.as_ref()) {
                            let _ = sys::shutdown_write(ch.as_raw_fd());
                        }
                    }
                    Action::Kill { pid } => {
                        self.log.error(&format!("child {pid} over --timeout-child or unusable: killed"));
                        let _ = sys::kill(pid as libc::pid_t, libc::SIGKILL);
                    }
                    Action::Exit => exit = true,
                }
            }
        }
        exit
    }

    fn spawn(&mut self, shared: &Shared<'_>) -> io::Result<libc::pid_t> {
        let (master_end, child_end) = sys::socketpair()?;
        let master = sys::getpid();
        match sys::fork()? {
            sys::Fork::Parent(pid) => {
                drop(child_end);
                self.children.push(ChildSlot { pid, channel: Some(master_end), reader: RecordReader::new() });
                Ok(pid)
            }
            sys::Fork::Child => {
                // Close what belongs to the master; exit without running its destructors.
                drop(master_end);
                let keep: Vec<RawFd> = if shared.round_robin { self.listeners.iter().map(|l| l.fd.as_raw_fd()).collect() } else { Vec::new() };
                for l in &self.listeners {
                    if !keep.contains(&l.fd.as_raw_fd()) {
                        let _ = sys::close(l.fd.as_raw_fd());
                    }
                }
                for c in &self.children {
                    if let Some(ch) = &c.channel {
                        let _ = sys::close(ch.as_raw_fd());
                    }
                }
                if let Some(p) = &self.pending {
                    let _ = sys::close(p.as_raw_fd());
                }
                let _ = sys::close(self.signals.as_raw_fd());
                sys::forget_signal_pipe();
                let code = worker(child_end, master, shared, self.platform, &keep, self.log);
                sys::exit_now(code)
            }
        }
    }

    /// One wake of the master: poll, then turn what happened into policy events.
    fn turn(&mut self, policy: &mut Policy<TABLE>, shared: &Shared<'_>) -> Turn {
        let tick = policy.config().tick_ms.max(1) as i32;
        if self.act(policy, shared, Event::Tick { now_ms: now_ms(self.clock) }) {
            return Turn::Exit;
        }
        let listen = policy.wants_listener() && self.pending.is_none();
        let mut fds = Vec::with_capacity(1 + self.children.len() + self.listeners.len());
        fds.push(libc::pollfd { fd: self.signals.as_raw_fd(), events: libc::POLLIN, revents: 0 });
        for c in &self.children {
            fds.push(libc::pollfd { fd: c.channel.as_ref().map_or(-1, |f| f.as_raw_fd()), events: libc::POLLIN, revents: 0 });
        }
        if listen {
            for l in &self.listeners {
                fds.push(libc::pollfd { fd: l.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
            }
        }
        if let Err(e) = sys::poll(&mut fds, tick) {
            self.log.error(&format!("poll: {e}"));
            return Turn::Continue;
        }
        let mut turn = Turn::Continue;
        // Signals first.
        if fds[0].revents != 0 {
            let mut buf = [0u8; 64];
            let mut seen = [false; 64];
            while let Ok(n) = sys::read(self.signals.as_raw_fd(), &mut buf) {
                if n == 0 {
                    break;
                }
                for &s in &buf[..n] {
                    if let Some(f) = seen.get_mut(usize::from(s)) {
                        *f = true;
                    }
                }
            }
            if seen[libc::SIGTERM as usize] || seen[libc::SIGINT as usize] {
                self.log.info("shutting down: finishing requests in progress");
                if self.act(policy, shared, Event::Shutdown) {
                    return Turn::Exit;
                }
                self.pending = None;
            }
            if seen[libc::SIGHUP as usize] && !policy.is_shutting_down() {
                turn = Turn::Reload;
            }
            if seen[libc::SIGUSR1 as usize] {
                self.log.info(&format!("{}", policy.stats()));
            }
        }
        // Back-channels before listeners: a child that just served is idle again.
        for i in 0..self.children.len() {
            let ready = fds.get(1 + i).is_some_and(|p| p.revents != 0);
            if ready {
                self.drain_channel(i, policy, shared);
            }
        }
        if seen_child_exit(self, policy, shared) {
            return Turn::Exit;
        }
        if listen {
            let base = 1 + self.children.len();
            for (j, l) in self.listeners.iter().enumerate() {
                if self.pending.is_some() {
                    break;
                }
                if fds.get(base + j).is_some_and(|p| p.revents != 0) {
                    match sys::accept(l.fd.as_raw_fd(), false) {
                        Ok(Some((conn, peer))) => {
                            if let Some(ip) = peer {
                                if !self.access.allows(ip) {
                                    self.log.error(&format!("connection from {ip} refused: not in --allowed-ips"));
                                    continue;
                                }
                            }
                            let _ = sys::set_socket_timeouts(conn.as_raw_fd(), self.timeout_tcp);
                            self.pending = Some(conn);
                        }
                        Ok(None) => {}
                        Err(e) => self.log.error(&format!("accept on {}: {e}", l.name)),
                    }
                }
            }
            if self.pending.is_some() && self.act(policy, shared, Event::ConnectionPending) {
                return Turn::Exit;
            }
        }
        self.write_stats(policy);
        turn
    }

    fn drain_channel(&mut self, i: usize, policy: &mut Policy<TABLE>, shared: &Shared<'_>) {
        let Some(slot) = self.children.get_mut(i) else { return };
        let pid = slot.pid as u32;
        let Some(fd) = slot.channel.as_ref().map(|f| f.as_raw_fd()) else { return };
        let n = sys::read(fd, slot.reader.spare_mut());
        let mut events = Vec::new();
        match n {
            Ok(0) | Err(_) => slot.channel = None,
            Ok(n) => {
                slot.reader.commit(n);
                while let Some(r) = slot.reader.next_record() {
                    events.push(match r {
                        Ok(record) => Event::Record { pid, record },
                        Err(_) => Event::BadRecord { pid },
                    });
                }
            }
        }
        for ev in events {
            self.act(policy, shared, ev);
        }
    }

    fn write_stats(&mut self, policy: &Policy<TABLE>) {
        let Some(path) = &self.stats_file else { return };
        let now = now_ms(self.clock);
        if now.saturating_sub(self.last_stats) < 5000 && self.last_stats != 0 {
            return;
        }
        self.last_stats = now.max(1);
        let mut text = String::new();
        if prefork::write_prometheus(policy.stats(), &mut text).is_err() {
            return;
        }
        let tmp = path.with_extension("tmp");
        if let Err(e) = std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, path)) {
            self.log.error(&format!("stats file {}: {e}", path.display()));
        }
    }
}

/// Reaps exited children; reports each after draining its channel. Returns whether to exit.
fn seen_child_exit(master: &mut Master<'_>, policy: &mut Policy<TABLE>, shared: &Shared<'_>) -> bool {
    let mut exit = false;
    while let Ok(Some((pid, status))) = sys::reap_child() {
        if let Some(i) = master.children.iter().position(|c| c.pid == pid) {
            while master.children.get(i).is_some_and(|c| c.channel.is_some()) {
                master.drain_channel(i, policy, shared);
            }
            master.children.remove(i);
            if let sys::ExitStatus::Signal(sig) = status {
                master.log.error(&format!("child {pid} died on signal {sig}"));
            }
            exit |= master.act(policy, shared, Event::Exited { pid: pid as u32 });
        }
    }
    exit
}

/// An `embedded-io` stream over a socket fd.
struct FdStream(RawFd);

impl embedded_io::ErrorType for FdStream {
    type Error = io::Error;
}

impl embedded_io::Read for FdStream {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, io::Error> {
        sys::read(self.0, buf)
    }
}

impl embedded_io::Write for FdStream {
    fn write(&mut self, buf: &[u8]) -> Result<usize, io::Error> {
        sys::write(self.0, buf)
    }

    fn flush(&mut self) -> Result<(), io::Error> {
        Ok(())
    }
}

/// A child: waits for connections, serves one request on each, reports one record per request.
fn worker(channel: OwnedFd, master: libc::pid_t, shared: &Shared<'_>, platform: &dyn Platform, listeners: &[RawFd], log: &Log) -> i32 {
    let _ = sys::default_signals(&[libc::SIGHUP, libc::SIGTERM, libc::SIGINT, libc::SIGCHLD, libc::SIGUSR1]);
    if let Err(e) = platform.child_setup(master) {
        log.error(&format!("child setup: {e}"));
        return exit::SOFTWARE;
    }
    if let Err(e) = platform.sandbox_child() {
        log.error(&format!("child sandbox: {e}"));
        return exit::SOFTWARE;
    }
    let pid = sys::getpid() as u32;
    let ch = channel.as_raw_fd();
    let mut seq = 0u32;
    let send = |record: Record| {
        let bytes = prefork::encode(&record);
        sys::write_all(ch, &bytes).is_ok()
    };
    if !send(Record::new(RecordKind::Ready, pid, seq)) {
        return 0;
    }
    let mut scratch = Scratch::new(shared.rules);
    let mut rewrite = RewriteScratch::new();
    let mut inflater = Inflater::new();
    let mut buf = vec![0u8; shared.limits.max_head + shared.limits.max_body];
    loop {
        let conn = if shared.round_robin {
            match accept_round_robin(listeners, ch) {
                Some(c) => {
                    seq = seq.wrapping_add(1);
                    if !send(Record::new(RecordKind::Busy, pid, seq)) {
                        return 0;
                    }
                    c
                }
                None => return 0,
            }
        } else {
            match sys::recv_fd(ch) {
                Ok(Some((conn, _))) => conn,
                _ => return 0,
            }
        };
        let mut stream = FdStream(conn.as_raw_fd());
        let started = Instant::now();
        let mut record = Record::new(RecordKind::NoVerdict, pid, 0);
        match proto::read_request(&mut stream, &mut buf, &shared.limits, &mut inflater) {
            Ok(request) => {
                // Only rewritten messages show a date; other commands skip the clock.
                let date = if matches!(request.head.command, proto::Command::Process | proto::Command::Headers) {
                    sys::rfc2822_now()
                } else {
                    String::new()
                };
                let env = Environment::new(&shared.hostname, &date);
                if request.head.command.scans() {
                    let verdict = shared.rules.scan(request.body, &mut scratch);
                    let scan_us = started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                    record = Record::served(pid, 0, request.body.len() as u32, scan_us, verdict.score, verdict.is_spam());
                    let _ = proto::respond(&mut stream, &request.head, request.body, Some(&verdict), &shared.settings, &env, &mut rewrite);
                    // spamd's one line per message: result, score, rules, time, size, user.
                    let mut names = String::new();
                    let _ = sift_core::report::write_rule_names(&verdict, ",", &mut names);
                    log.info(&format!(
                        "result: {} {} - {} scantime={:.3},size={},user={}",
                        if verdict.is_spam() { 'Y' } else { '.' },
                        verdict.score.display(0),
                        if names.is_empty() { "none" } else { names.as_str() },
                        f64::from(scan_us) / 1e6,
                        request.body.len(),
                        request.head.user.as_deref().map_or(std::borrow::Cow::Borrowed("(unknown)"), String::from_utf8_lossy),
                    ));
                } else {
                    let _ = proto::respond::<Verdict<'_>, _>(&mut stream, &request.head, request.body, None, &shared.settings, &env, &mut rewrite);
                }
            }
            Err(ReadError::Request(e)) => {
                let _ = e.write_response(&mut stream);
            }
            Err(ReadError::Io(_)) => {}
        }
        seq = seq.wrapping_add(1);
        record.seq = seq;
        // The record goes before the close: the master then knows this child is idle
        // before the client can send its next request.
        if !send(record) {
            return 0;
        }
        drop(conn);
    }
}

/// Round-robin mode: wait on every listener and accept whatever comes first.
fn accept_round_robin(listeners: &[RawFd], channel: RawFd) -> Option<OwnedFd> {
    loop {
        let mut fds: Vec<libc::pollfd> = listeners.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
        fds.push(libc::pollfd { fd: channel, events: libc::POLLIN, revents: 0 });
        sys::poll(&mut fds, -1).ok()?;
        if fds.last().is_some_and(|p| p.revents != 0) {
            return None; // retired: the master closed our channel
        }
        for p in &fds[..listeners.len()] {
            if p.revents != 0 {
                if let Ok(Some((conn, _))) = sys::accept(p.fd, false) {
                    return Some(conn);
                }
            }
        }
    }
}
