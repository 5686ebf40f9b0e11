//! The daemon: the master and the workers. What differs per OS (the event loop,
//! parent-death signal, sandboxes, socket options, memory accounting) comes in through
//! [`Platform`]; the master's logic exists once, here.
//!
//! The master accepts each connection itself and passes it with `SCM_RIGHTS` to the
//! child the prefork policy picks (the lowest-pid idle one). A child serves one
//! request per connection and answers with one fixed-size back-channel record.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

use sift_core::prefork::{self, Action, Actions, Event, Policy, Record, RecordKind, RecordReader, ACTIONS_SLACK};
use sift_core::proto::{self, Environment, Inflater, ReadError, RequestLimits, RewriteScratch, RewriteSettings};
use sift_core::rules::RuleSet;
use sift_core::scan::{Scratch, Verdict};

use crate::access::AccessList;
use crate::cli::DaemonOptions;
use crate::events::{EventLoop, PollLoop, Ready};
use crate::exit;
use crate::load::{load_rules_with, LoadError, RuleSources};
use crate::listen::{bind_all, Listener};
use crate::log::Log;
use crate::sys;

/// Most children the table holds.
const TABLE: usize = 256;
/// Largest request head.
const MAX_HEAD: usize = 8 * 1024;
/// Signals the master acts on: reload, stop, stop, log the statistics.
const MASTER_SIGNALS: [libc::c_int; 4] = [libc::SIGHUP, libc::SIGTERM, libc::SIGINT, libc::SIGUSR1];
/// Signals a child must not inherit the master's handling of.
const CHILD_DEFAULT_SIGNALS: [libc::c_int; 5] = [libc::SIGHUP, libc::SIGTERM, libc::SIGINT, libc::SIGCHLD, libc::SIGUSR1];

/// What a shell supplies for its OS. Every method but `child_setup` has a portable default.
pub trait Platform {
    /// Runs in each forked child of `master` before it serves: parent-death signal, sandbox.
    fn child_setup(&self, master: libc::pid_t) -> io::Result<()>;

    /// Runs in each child after its setup and before the first request: confines the
    /// child to what serving needs (seccomp, Capsicum, pledge). Default: no sandbox.
    fn sandbox_child(&self) -> io::Result<()> {
        Ok(())
    }

    /// Like [`Platform::sandbox_child`], for a `--round-robin` child, which also accepts
    /// connections on the listeners itself.
    fn sandbox_accepting_child(&self) -> io::Result<()> {
        self.sandbox_child()
    }

    /// The master's event loop, catching `signals`. Default: poll(2) and a self-pipe.
    fn event_loop(&self, signals: &[libc::c_int]) -> io::Result<Box<dyn EventLoop>> {
        Ok(Box::new(PollLoop::new(signals)?))
    }

    /// Runs on each accepted connection before it is served (e.g. SO_NOSIGPIPE).
    fn prepare_connection(&self, _conn: RawFd) -> io::Result<()> {
        Ok(())
    }

    /// Whether a connection accepted on a TCP listener starts with the listener's
    /// receive and send timeouts: then `--timeout-tcp` is set once on the listener,
    /// not with two syscalls on every connection. Default: no (set per connection).
    fn tcp_connections_inherit_timeouts(&self) -> bool {
        false
    }

    /// Installs the kernel accept filter `name` on a TCP listener; `Ok(false)` where
    /// the OS has none. Default: none.
    fn set_accept_filter(&self, _listener: RawFd, _name: &str) -> io::Result<bool> {
        Ok(false)
    }

    /// Runs in the master once setup is done: confines it to `files` and what serving
    /// needs (unveil). Default: no sandbox.
    fn sandbox_master(&self, _files: &MasterFiles) -> io::Result<()> {
        Ok(())
    }

    /// Memory of process `pid`, for the stats file. Default: Linux's /proc/PID/statm.
    fn process_memory(&self, pid: libc::pid_t) -> io::Result<ProcessMemory> {
        proc_statm(pid)
    }
}

/// Files the master still touches once it serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MasterFiles {
    /// Rule directories and files, read again on SIGHUP.
    pub read: Vec<PathBuf>,
    /// Files created and replaced (the stats file and its temporary).
    pub write: Vec<PathBuf>,
    /// Files removed at exit (pidfile, UNIX sockets).
    pub remove: Vec<PathBuf>,
}

/// Memory of one process as the OS accounts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessMemory {
    /// Resident set size.
    pub resident_bytes: u64,
    /// Virtual size.
    pub virtual_bytes: u64,
}

/// Reads a process's memory from /proc/PID/statm.
pub fn proc_statm(pid: libc::pid_t) -> io::Result<ProcessMemory> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/statm"))?;
    parse_statm(&text, sys::page_size()).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unexpected /proc statm format"))
}

/// statm's first two fields: total and resident size, in pages.
fn parse_statm(text: &str, page_size: u64) -> Option<ProcessMemory> {
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let size = fields.next()??;
    let resident = fields.next()??;
    Some(ProcessMemory { resident_bytes: resident.checked_mul(page_size)?, virtual_bytes: size.checked_mul(page_size)? })
}

/// Writes one gauge per process and figure, labelled by role and pid, in Prometheus text.
fn write_memory_metrics(out: &mut impl fmt::Write, processes: &[(&str, libc::pid_t, ProcessMemory)]) -> fmt::Result {
    type Figure = fn(&ProcessMemory) -> u64;
    let figures: [(&str, &str, Figure); 2] = [
        ("sift_process_resident_bytes", "Resident memory of each siftd process.", |m| m.resident_bytes),
        ("sift_process_virtual_bytes", "Virtual memory of each siftd process.", |m| m.virtual_bytes),
    ];
    for (name, help, figure) in figures {
        writeln!(out, "# HELP {name} {help}")?;
        writeln!(out, "# TYPE {name} gauge")?;
        for (role, pid, memory) in processes {
            writeln!(out, "{name}{{role=\"{role}\",pid=\"{pid}\"}} {}", figure(memory))?;
        }
    }
    Ok(())
}

/// Where the stats file is written before it is renamed into place.
fn stats_tmp(path: &Path) -> PathBuf {
    path.with_extension("tmp")
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
    timeout_tcp: u32,
    lazy_cache_bytes: usize,
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
            timeout_tcp: o.timeout_tcp,
            lazy_cache_bytes: o.lazy_cache_mib.saturating_mul(1024 * 1024),
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
    let mut rules = compile_rules(&sources, o.compile_cache.as_deref(), log).map_err(|e| (exit::CONFIG, e.to_string()))?;
    let access = AccessList::parse(o.allowed_ips.iter().map(String::as_str)).map_err(|e| (exit::USAGE, e.to_string()))?;
    let config = prefork::Config {
        max_children: o.max_children,
        min_children: o.min_children,
        min_spare: o.min_spare,
        max_spare: o.max_spare,
        max_conn_per_child: o.max_conn_per_child.unwrap_or(u32::MAX),
        timeout_child_secs: o.timeout_child,
        round_robin: o.round_robin,
        max_busy: o.max_busy.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        ..prefork::Config::default()
    }
    .spamd_adjusted();
    let mut policy = Policy::<TABLE>::new(config).map_err(|e| (exit::USAGE, e.to_string()))?;
    let listeners = bind_all(o, log).map_err(|e| (exit::CONFIG, e.to_string()))?;
    for l in listeners.iter().filter(|l| timeouts_inherited(l, platform)) {
        sys::set_socket_timeouts(l.fd.as_raw_fd(), o.timeout_tcp).map_err(|e| (exit::SOFTWARE, format!("--timeout-tcp on {}: {e}", l.name)))?;
    }
    if let Some(name) = &o.accept_filter {
        set_accept_filters(&listeners, name, platform, log)?;
    }
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
    let mut events = platform.event_loop(&MASTER_SIGNALS).map_err(|e| (exit::SOFTWARE, format!("event loop: {e}")))?;
    for (i, l) in listeners.iter().enumerate() {
        events.add_listener(i, l.fd.as_raw_fd()).map_err(|e| (exit::SOFTWARE, format!("event loop: {}: {e}", l.name)))?;
    }
    let sockets: Vec<PathBuf> = listeners.iter().filter_map(|l| l.unix_path.clone()).collect();
    platform.sandbox_master(&master_files(options, &sockets)).map_err(|e| (exit::SOFTWARE, format!("master sandbox: {e}")))?;
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
        events,
        ready: Ready::default(),
        children: Vec::new(),
        pending: None,
        access,
        clock: Instant::now(),
        timeout_tcp: o.timeout_tcp,
        stats_file: o.stats_file.clone(),
        last_stats: 0,
        memory_error_logged: false,
    };
    let mut shared = Shared::new(&rules, o, &hostname);
    // From here the master's own allocations stay off the pages the children share.
    sys::load_timezone();
    sys::release_free_memory();
    sys::set_allocations(sys::Allocations::MasterArena);
    let code = loop {
        match master.turn(&mut policy, &shared) {
            Turn::Continue => {}
            Turn::Exit => break 0,
            Turn::Reload => {
                // SIGHUP also reopens a log file, for rotation, as spamd does.
                if let Err(e) = log.reopen() {
                    log.error(&format!("reopening the log file: {e}"));
                }
                // Compile before retiring anything: a broken rule file keeps the old set
                // serving. The new rules go where the next children will share them.
                sys::set_allocations(sys::Allocations::System);
                let failed = match compile_rules(&sources, o.compile_cache.as_deref(), log) {
                    Ok(new) => {
                        drop(shared);
                        rules = new;
                        shared = Shared::new(&rules, o, &hostname);
                        sys::release_free_memory();
                        None
                    }
                    Err(e) => Some(e),
                };
                sys::set_allocations(sys::Allocations::MasterArena);
                match failed {
                    None => {
                        log.info(&format!("reloaded rules: {} defined", rules.rule_count()));
                        master.act(&mut policy, &shared, Event::Reload);
                    }
                    Some(e) => log.error(&format!("reload failed, keeping the old rules: {e}")),
                }
            }
        }
    };
    for l in &master.listeners {
        if let Some(p) = &l.unix_path {
            let _ = std::fs::remove_file(p);
        }
    }
    // Logged before the pidfile goes: whoever waits for the pidfile then finds the line.
    log.info("server stopped");
    if let Some(p) = &o.pidfile {
        let _ = std::fs::remove_file(p);
    }
    Ok(code)
}

fn hostname() -> String {
    sys::hostname().ok().map(|h| h.trim().to_string()).filter(|h| !h.is_empty()).unwrap_or_else(|| "localhost".to_string())
}

/// Installs `--accept-filter` on the TCP listeners; a system without accept filters logs it and goes on.
fn set_accept_filters(listeners: &[Listener], name: &str, platform: &dyn Platform, log: &Log) -> Result<(), (i32, String)> {
    for l in listeners.iter().filter(|l| l.tcp) {
        match platform.set_accept_filter(l.fd.as_raw_fd(), name) {
            Ok(true) => {}
            Ok(false) => {
                log.info(&format!("--accept-filter {name}: this system has no accept filters, ignored"));
                return Ok(());
            }
            Err(e) => return Err((exit::CONFIG, format!("--accept-filter {name} on {}: {e}", l.name))),
        }
    }
    Ok(())
}

/// Loads and compiles the rules, through the DFA cache file when there is one.
fn compile_rules(sources: &RuleSources, cache: Option<&Path>, log: &Log) -> Result<RuleSet, LoadError> {
    let (rules, report) = load_rules_with(sources, cache)?;
    if let (Some(path), Some(report)) = (cache, report) {
        if let Some(problem) = &report.problem {
            log.error(&format!("compile cache: {problem}"));
        }
        log.info(&format!("compile cache {}: {} DFAs reused, {} built", path.display(), report.reused, report.built));
    }
    Ok(rules)
}

/// What the master reads, writes and removes after setup; `sockets` are the UNIX socket files.
fn master_files(options: &crate::cli::Options, sockets: &[PathBuf]) -> MasterFiles {
    let o = &options.daemon;
    let mut read = options.config_paths.clone();
    read.extend(options.site_path.clone());
    let write = o.stats_file.iter().chain(&o.compile_cache).flat_map(|p| [p.clone(), p.with_extension("tmp")]).collect();
    let mut remove: Vec<PathBuf> = o.pidfile.iter().cloned().collect();
    remove.extend(sockets.iter().cloned());
    MasterFiles { read, write, remove }
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
    events: Box<dyn EventLoop>,
    ready: Ready,
    children: Vec<ChildSlot>,
    pending: Option<OwnedFd>,
    access: AccessList,
    clock: Instant,
    timeout_tcp: u32,
    stats_file: Option<PathBuf>,
    last_stats: u64,
    memory_error_logged: bool,
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
                let channel = match self.events.add_child(pid, master_end.as_raw_fd()) {
                    Ok(()) => Some(master_end),
                    Err(e) => {
                        // Unwatched, the child could never be told anything: stop it, reap it later.
                        self.log.error(&format!("cannot watch child {pid}: {e}"));
                        let _ = sys::kill(pid, libc::SIGKILL);
                        None
                    }
                };
                self.children.push(ChildSlot { pid, channel, reader: RecordReader::new() });
                Ok(pid)
            }
            sys::Fork::Child => {
                sys::set_allocations(sys::Allocations::ChildArena);
                // Close what belongs to the master; exit without running its destructors.
                drop(master_end);
                // A round-robin child accepts on every listener; others need none.
                let keep: &[Listener] = if shared.round_robin { &self.listeners } else { &[] };
                if keep.is_empty() {
                    for l in &self.listeners {
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
                self.events.forget_in_child();
                let code = worker(child_end, master, shared, self.platform, keep, &self.access, self.log);
                sys::exit_now(code)
            }
        }
    }

    /// One wake of the master: wait, then turn what happened into policy events.
    fn turn(&mut self, policy: &mut Policy<TABLE>, shared: &Shared<'_>) -> Turn {
        if self.act(policy, shared, Event::Tick { now_ms: now_ms(self.clock) }) {
            return Turn::Exit;
        }
        // Until the next tick, or sooner when a waiting connection's place frees then.
        let tick = policy.config().tick_ms.max(1);
        let wake = policy.wake_by_ms().map_or(tick, |t| t.saturating_sub(policy.now_ms()).clamp(1, tick));
        let timeout = i32::try_from(wake).unwrap_or(i32::MAX);
        let listen = policy.wants_listener() && self.pending.is_none();
        if let Err(e) = self.events.watch_listeners(listen) {
            self.log.error(&format!("event loop: {e}"));
        }
        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        let turn = match self.events.wait(timeout, &mut ready) {
            Ok(()) => self.handle(&ready, listen, policy, shared),
            Err(e) => {
                self.log.error(&format!("event loop: {e}"));
                Turn::Continue
            }
        };
        self.ready = ready;
        turn
    }

    fn handle(&mut self, ready: &Ready, listen: bool, policy: &mut Policy<TABLE>, shared: &Shared<'_>) -> Turn {
        let mut turn = Turn::Continue;
        // Signals first.
        let signals = ready.signals;
        if signals.contains(libc::SIGTERM) || signals.contains(libc::SIGINT) {
            self.log.info("shutting down: finishing requests in progress");
            if self.act(policy, shared, Event::Shutdown) {
                return Turn::Exit;
            }
            self.pending = None;
        }
        if signals.contains(libc::SIGHUP) && !policy.is_shutting_down() {
            turn = Turn::Reload;
        }
        if signals.contains(libc::SIGUSR1) {
            self.log.info(&format!("{}", policy.stats()));
        }
        // Back-channels before listeners: a child that just served is idle again.
        for &pid in &ready.channels {
            if let Some(i) = self.children.iter().position(|c| c.pid == pid) {
                self.drain_channel(i, policy, shared);
            }
        }
        // A timeout reaps too, in case an exit notification was lost.
        if (ready.child_exited || ready.is_empty()) && seen_child_exit(self, policy, shared) {
            return Turn::Exit;
        }
        if listen {
            for &j in &ready.listeners {
                if self.pending.is_some() {
                    break;
                }
                self.accept(j);
            }
            if self.pending.is_some() && self.act(policy, shared, Event::ConnectionPending) {
                return Turn::Exit;
            }
        }
        self.write_stats(policy);
        turn
    }

    /// Accepts one connection on listener `j` into `pending`, if the client is allowed.
    fn accept(&mut self, j: usize) {
        let Some(l) = self.listeners.get(j) else { return };
        match sys::accept(l.fd.as_raw_fd(), false) {
            Ok(Some((conn, peer))) => {
                if let Some(ip) = peer {
                    if !self.access.allows(ip) {
                        self.log.error(&format!("connection from {ip} refused: not in --allowed-ips"));
                        return;
                    }
                }
                if let Err(e) = prepare_connection(conn.as_raw_fd(), l, self.timeout_tcp, self.platform) {
                    self.log.error(&format!("connection on {}: {e}", l.name));
                }
                self.pending = Some(conn);
            }
            Ok(None) => {}
            Err(e) => self.log.error(&format!("accept on {}: {e}", l.name)),
        }
    }

    fn drain_channel(&mut self, i: usize, policy: &mut Policy<TABLE>, shared: &Shared<'_>) {
        let Some(slot) = self.children.get_mut(i) else { return };
        let pid = slot.pid as u32;
        let Some(fd) = slot.channel.as_ref().map(|f| f.as_raw_fd()) else { return };
        let n = sys::read(fd, slot.reader.spare_mut());
        let mut events = Vec::new();
        match n {
            Ok(0) | Err(_) => {
                let _ = self.events.remove_channel(slot.pid);
                slot.channel = None;
            }
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
        let master = sys::getpid();
        let mut processes = Vec::with_capacity(1 + self.children.len());
        match self.platform.process_memory(master) {
            Ok(m) => processes.push(("master", master, m)),
            Err(e) if !self.memory_error_logged => {
                self.memory_error_logged = true;
                self.log.error(&format!("stats file: no memory figures: {e}"));
            }
            Err(_) => {}
        }
        // A child may exit between the table and the query: it is left out.
        processes.extend(self.children.iter().filter_map(|c| Some(("child", c.pid, self.platform.process_memory(c.pid).ok()?))));
        if write_memory_metrics(&mut text, &processes).is_err() {
            return;
        }
        let tmp = stats_tmp(path);
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

/// An `embedded-io` stream over a socket fd. Writes gather in `out` and leave in one
/// `write` at [`flush`](embedded_io::Write::flush) (or when `out` is full), so an answer
/// costs one syscall, not one per header line.
struct FdStream<'b> {
    fd: RawFd,
    out: &'b mut Vec<u8>,
    /// Bytes read from the connection.
    received: usize,
    /// Bytes written to the connection.
    sent: usize,
}

/// Most bytes gathered before a write.
const OUT_BUFFER: usize = 64 * 1024;

impl FdStream<'_> {
    fn send_gathered(&mut self) -> Result<(), io::Error> {
        let result = sys::write_all(self.fd, self.out);
        self.out.clear();
        result
    }
}

impl embedded_io::ErrorType for FdStream<'_> {
    type Error = io::Error;
}

impl embedded_io::Read for FdStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, io::Error> {
        let n = sys::read(self.fd, buf)?;
        self.received += n;
        Ok(n)
    }
}

impl embedded_io::Write for FdStream<'_> {
    fn write(&mut self, buf: &[u8]) -> Result<usize, io::Error> {
        self.sent = self.sent.saturating_add(buf.len());
        if self.out.len() + buf.len() > OUT_BUFFER && !self.out.is_empty() {
            self.send_gathered()?;
        }
        if buf.len() >= OUT_BUFFER {
            return sys::write(self.fd, buf);
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> Result<(), io::Error> {
        if self.out.is_empty() {
            return Ok(());
        }
        self.send_gathered()
    }
}

/// A child: waits for connections, serves one request on each, reports one record per request.
fn worker(
    channel: OwnedFd,
    master: libc::pid_t,
    shared: &Shared<'_>,
    platform: &dyn Platform,
    listeners: &[Listener],
    access: &AccessList,
    log: &Log,
) -> i32 {
    let _ = sys::default_signals(&CHILD_DEFAULT_SIGNALS);
    if let Err(e) = platform.child_setup(master) {
        log.error(&format!("child setup: {e}"));
        return exit::SOFTWARE;
    }
    let sandboxed = if shared.round_robin { platform.sandbox_accepting_child() } else { platform.sandbox_child() };
    if let Err(e) = sandboxed {
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
    scratch.set_lazy_cache_budget(shared.lazy_cache_bytes);
    let mut rewrite = RewriteScratch::new();
    let mut inflater = Inflater::new();
    let mut buf = vec![0u8; shared.limits.max_head + shared.limits.max_body];
    let mut out = Vec::with_capacity(OUT_BUFFER);
    crate::log::set_pid(pid);
    loop {
        let conn = if shared.round_robin {
            match accept_round_robin(listeners, ch, shared, platform, access, log) {
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
        out.clear();
        let mut stream = FdStream { fd: conn.as_raw_fd(), out: &mut out, received: 0, sent: 0 };
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
                    let _ = embedded_io::Write::flush(&mut stream);
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
                    let _ = embedded_io::Write::flush(&mut stream);
                }
            }
            Err(ReadError::Request(e)) => {
                let _ = e.write_response(&mut stream);
                let _ = embedded_io::Write::flush(&mut stream);
                log.error(&format!("bad request refused: {e}"));
            }
            Err(ReadError::Io(e)) => log.error(&format!("reading a request: {e}")),
        }
        let (received, sent) = (stream.received, stream.sent);
        seq = seq.wrapping_add(1);
        record.seq = seq;
        // The record goes before the close: the master then knows this child is idle
        // before the client can send its next request.
        if !send(record) {
            return 0;
        }
        drop(conn);
        release_after_large((received, sent), &mut buf, &mut out, &mut scratch);
    }
}

/// What a child keeps between messages of each scan buffer a message grows. Past it a
/// buffer is freed, and freed blocks of two pages or more give their pages back
/// ([`sys::give_back_freed`]): at 8 KiB, with blocks of four pages and more giving back
/// all but their first, a working child of the embedded rules held about 650 KiB.
const REST_BUFFER: usize = 4 * 1024;
/// What a child keeps resident of the request and response buffers: 11% of the public
/// corpus's messages are larger, so the pages past it go back after them (one syscall
/// each; a rewritten message's response is as large).
const REST_IO_BUFFER: usize = 8 * 1024;

/// Gives back what a large message grew: every scan buffer past [`REST_BUFFER`], the
/// pages of freed blocks and, after a request (or response) of more than
/// [`REST_IO_BUFFER`] bytes, the request (response) buffer's pages past it (a compressed
/// body also touched the request buffer's end). Typical mail makes no syscall here.
fn release_after_large((received, sent): (usize, usize), buf: &mut [u8], out: &mut Vec<u8>, scratch: &mut Scratch) {
    scratch.release_buffers_above(REST_BUFFER);
    sys::give_back_freed();
    if received > REST_IO_BUFFER {
        if let Some(tail) = buf.get_mut(REST_IO_BUFFER..) {
            let _ = sys::release_pages(tail);
        }
    }
    if sent > REST_IO_BUFFER {
        let _ = sys::release_spare_pages(out, REST_IO_BUFFER);
    }
}

/// Whether connections accepted on `l` carry `--timeout-tcp` from it (set on it at
/// start-up; see [`Platform::tcp_connections_inherit_timeouts`]).
fn timeouts_inherited(l: &Listener, platform: &dyn Platform) -> bool {
    l.tcp && platform.tcp_connections_inherit_timeouts()
}

/// Makes a connection accepted on `l` ready to serve: `--timeout-tcp` unless the
/// listener passed it on, then what the platform adds.
fn prepare_connection(conn: RawFd, l: &Listener, timeout_tcp: u32, platform: &dyn Platform) -> io::Result<()> {
    if !timeouts_inherited(l, platform) {
        sys::set_socket_timeouts(conn, timeout_tcp)?;
    }
    platform.prepare_connection(conn)
}

/// Round-robin mode: wait on every listener and accept whatever allowed client comes first.
fn accept_round_robin(listeners: &[Listener], channel: RawFd, shared: &Shared<'_>, platform: &dyn Platform, access: &AccessList, log: &Log) -> Option<OwnedFd> {
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(listeners.len() + 1);
    loop {
        fds.clear();
        fds.extend(listeners.iter().map(|l| libc::pollfd { fd: l.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 }));
        fds.push(libc::pollfd { fd: channel, events: libc::POLLIN, revents: 0 });
        sys::poll(&mut fds, -1).ok()?;
        if fds.last().is_some_and(|p| p.revents != 0) {
            return None; // retired, or the master is gone: the channel closed
        }
        for (p, l) in fds.iter().zip(listeners).filter(|(p, _)| p.revents != 0) {
            let Ok(Some((conn, peer))) = sys::accept(p.fd, false) else { continue };
            if let Some(ip) = peer.filter(|ip| !access.allows(*ip)) {
                log.error(&format!("connection from {ip} refused: not in --allowed-ips"));
                continue;
            }
            if let Err(e) = prepare_connection(conn.as_raw_fd(), l, shared.timeout_tcp, platform) {
                log.error(&format!("connection: {e}"));
            }
            return Some(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statm_table() {
        // (statm text, page size, (resident, virtual) bytes)
        type Case = (&'static str, u64, Option<(u64, u64)>);
        let cases: &[Case] = &[
            ("2600 820 600 200 0 500 0\n", 4096, Some((820 * 4096, 2600 * 4096))),
            ("10 3", 16384, Some((3 * 16384, 10 * 16384))),
            ("10", 4096, None),
            ("", 4096, None),
            ("x 3 1", 4096, None),
            ("10 -3 1", 4096, None),
            ("18446744073709551615 1", 4096, None),
        ];
        for &(text, page, want) in cases {
            let got = parse_statm(text, page).map(|m| (m.resident_bytes, m.virtual_bytes));
            assert_eq!(got, want, "{text:?} with pages of {page}");
        }
    }

    #[test]
    fn this_process_has_memory_figures_on_linux() {
        if !Path::new("/proc/self/statm").exists() {
            return;
        }
        let m = proc_statm(sys::getpid()).expect("statm");
        assert!(m.resident_bytes > 0 && m.virtual_bytes >= m.resident_bytes, "{m:?}");
    }

    #[test]
    fn memory_metrics_one_line_per_process_and_figure() {
        let processes = [
            ("master", 10, ProcessMemory { resident_bytes: 4096, virtual_bytes: 8192 }),
            ("child", 11, ProcessMemory { resident_bytes: 1, virtual_bytes: 2 }),
        ];
        let mut text = String::new();
        write_memory_metrics(&mut text, &processes).expect("write");
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            samples,
            [
                "sift_process_resident_bytes{role=\"master\",pid=\"10\"} 4096",
                "sift_process_resident_bytes{role=\"child\",pid=\"11\"} 1",
                "sift_process_virtual_bytes{role=\"master\",pid=\"10\"} 8192",
                "sift_process_virtual_bytes{role=\"child\",pid=\"11\"} 2",
            ]
        );
        assert_eq!(text.lines().filter(|l| l.starts_with("# TYPE") && l.ends_with(" gauge")).count(), 2);
    }

    #[test]
    fn master_files_cover_rules_stats_pidfile_and_sockets() {
        use clap::Parser;
        let options = crate::cli::Options::parse_from([
            "siftd",
            "-C",
            "/etc/sift/rules",
            "--siteconfigpath",
            "/etc/sift/site",
            "--stats-file",
            "/var/db/sift/stats.prom",
            "-r",
            "/var/run/siftd.pid",
        ]);
        let files = master_files(&options, &[PathBuf::from("/var/run/siftd.sock")]);
        let paths = |v: &[PathBuf]| v.iter().map(|p| p.display().to_string()).collect::<Vec<_>>();
        assert_eq!(paths(&files.read), ["/etc/sift/rules", "/etc/sift/site"]);
        assert_eq!(paths(&files.write), ["/var/db/sift/stats.prom", "/var/db/sift/stats.tmp"]);
        assert_eq!(paths(&files.remove), ["/var/run/siftd.pid", "/var/run/siftd.sock"]);
    }
}
