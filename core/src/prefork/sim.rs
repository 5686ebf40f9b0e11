//! Deterministic simulation of a master, its children and clients around the policy:
//! fake clock, fake increasing pids, a kernel backlog, back-channels carried as bytes
//! through the record codec in random chunks. Invariants are checked at every step.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::vec::Vec;

use super::config::Config;
use super::policy::{Action, Actions, Event, Policy, ACTIONS_SLACK};
use super::record::{encode, Record, RecordKind, RecordReader};
use super::table::Pid;
use crate::score::Score;

const CAP: usize = 64;

/// Small deterministic PRNG.
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// True with probability `percent`/100.
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// How the master hands a connection to a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handoff {
    /// The child accepts on order and reports `Busy`.
    ChildAccept,
    /// The master accepts, passes the descriptor, reports `Accepted`.
    FdPassing,
}

/// A client: `requests` requests one after another, each taking `service_ms` in a
/// child, `think_ms` between a response and the next request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Client {
    pub start_ms: u64,
    pub requests: u32,
    pub service_ms: u64,
    pub think_ms: u64,
}

/// Random disturbances, in percent per opportunity.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A client's request takes longer than timeout_child.
    pub hang: u64,
    /// A live child dies unbidden (per step, per 100 000).
    pub crash_per_100k: u64,
    /// A fork fails.
    pub spawn_fail: u64,
    /// A reload (per step, per 100 000).
    pub reload_per_100k: u64,
    /// The listener reports readable when the policy did not ask.
    pub spurious_readiness: u64,
    /// The master wakes without reading the clock (no opening tick this step).
    pub stale_clock: u64,
    /// The master skips reading back-channels this step (records batch up).
    pub skip_read: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Starting { ready_at: u64 },
    Idle,
    Ordered { accept_at: u64 },
    Serving { conn: usize, done_at: u64 },
    Gone,
}

struct SimChild {
    phase: Phase,
    retiring: bool,
    killed: bool,
    exit_at: Option<u64>,
    idle_since: u64,
    seq: u32,
    outbox: VecDeque<u8>,
    reader: RecordReader,
    served: Vec<usize>,
}

struct Conn {
    client: usize,
    service_ms: u64,
    child: Option<Pid>,
    done: bool,
    lost: bool,
}

/// Everything the simulation observed, for tests to check.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub connections: usize,
    pub completed: usize,
    pub lost: usize,
    pub max_processes: usize,
    /// Pids that served at least one connection, with how many.
    pub served_by: BTreeMap<Pid, usize>,
    /// (time, spawns) per event that spawned.
    pub spawn_batches: Vec<(u64, usize)>,
    /// (time, pid) per retire order not caused by reload, max connections or shutdown.
    pub retires: Vec<(u64, Pid)>,
    pub kills: Vec<(u64, Pid)>,
    pub orders: usize,
    pub exited_cleanly: bool,
    /// Idle children after the load stopped (before shutdown).
    pub idle_at_rest: usize,
    pub processes_at_rest: usize,
}

pub(crate) struct Sim {
    pub policy: Policy<CAP>,
    actions: Actions<{ CAP + ACTIONS_SLACK }>,
    handoff: Handoff,
    faults: Faults,
    startup_ms: u64,
    accept_latency_ms: u64,
    now: u64,
    next_pid: Pid,
    rng: XorShift,
    children: BTreeMap<Pid, SimChild>,
    /// Children whose idleness the master has read, as the sim sees it.
    reported_idle: BTreeSet<Pid>,
    clients: Vec<Client>,
    client_next: Vec<Option<u64>>,
    client_left: Vec<u32>,
    conns: Vec<Conn>,
    backlog: VecDeque<usize>,
    held: Option<usize>,
    events: VecDeque<Event>,
    next_tick: u64,
    pub report: Report,
    shutdown_sent: bool,
}

impl Sim {
    pub(crate) fn new(config: Config, handoff: Handoff, clients: &[Client], seed: u64) -> Sim {
        let policy = Policy::new(config).unwrap_or_else(|e| panic!("{e}"));
        Sim {
            policy,
            actions: Actions::new(),
            handoff,
            faults: Faults::default(),
            startup_ms: 30,
            accept_latency_ms: 1,
            now: 0,
            next_pid: 1000,
            rng: XorShift::new(seed),
            children: BTreeMap::new(),
            reported_idle: BTreeSet::new(),
            clients: clients.to_vec(),
            client_next: clients.iter().map(|c| (c.requests > 0).then_some(c.start_ms)).collect(),
            client_left: clients.iter().map(|c| c.requests).collect(),
            conns: Vec::new(),
            backlog: VecDeque::new(),
            held: None,
            events: VecDeque::new(),
            next_tick: 0,
            report: Report::default(),
            shutdown_sent: false,
        }
    }

    pub(crate) fn with_faults(mut self, faults: Faults) -> Sim {
        self.faults = faults;
        self
    }

    pub(crate) fn with_startup_ms(mut self, ms: u64) -> Sim {
        self.startup_ms = ms;
        self
    }

    fn config(&self) -> Config {
        *self.policy.config()
    }

    fn alive(&self) -> usize {
        self.children.values().filter(|c| c.phase != Phase::Gone).count()
    }

    fn load_done(&self) -> bool {
        self.client_next.iter().all(Option::is_none) && self.conns.iter().all(|c| c.done || c.lost)
    }

    /// Runs until the load is served and the pool has settled for `settle_ms`, then
    /// shuts down; panics on any broken invariant.
    pub(crate) fn run(&mut self, limit_ms: u64, settle_ms: u64) -> &Report {
        let mut rest_since: Option<u64> = None;
        while self.now <= limit_ms {
            self.step();
            if self.load_done() && !self.shutdown_sent {
                let since = *rest_since.get_or_insert(self.now);
                if self.now >= since + settle_ms {
                    let n = self.policy.table().counts();
                    self.report.idle_at_rest = n.idle;
                    self.report.processes_at_rest = self.policy.processes();
                    self.shutdown_sent = true;
                    self.deliver(Event::Shutdown);
                }
            }
            if self.report.exited_cleanly {
                break;
            }
            self.now = self.next_time();
        }
        assert!(self.report.exited_cleanly, "did not finish by {limit_ms} ms: {}", self.debug());
        self.final_checks();
        &self.report
    }

    fn debug(&self) -> std::string::String {
        std::format!(
            "now {} table {} backlog {} held {:?} waiting {} outstanding {} conns left {}",
            self.now,
            self.policy.table().states(),
            self.backlog.len(),
            self.held,
            self.policy.waiting(),
            self.policy.orders_outstanding(),
            self.conns.iter().filter(|c| !c.done && !c.lost).count()
        )
    }

    fn next_time(&self) -> u64 {
        let mut t = self.next_tick;
        let mut consider = |x: u64| t = t.min(x.max(self.now + 1));
        for c in self.client_next.iter().flatten() {
            consider(*c);
        }
        for c in self.children.values() {
            match c.phase {
                Phase::Starting { ready_at } => consider(ready_at),
                Phase::Ordered { accept_at } => consider(accept_at),
                Phase::Serving { done_at, .. } => consider(done_at),
                Phase::Idle | Phase::Gone => {}
            }
            if let Some(at) = c.exit_at {
                consider(at);
            }
            if !c.outbox.is_empty() {
                consider(self.now + 1);
            }
        }
        if !self.backlog.is_empty() || self.held.is_some() || self.faults.crash_per_100k > 0 {
            consider(self.now + 1);
        }
        t.max(self.now + 1)
    }

    fn step(&mut self) {
        let now = self.now;
        // The master reads the clock whenever it wakes; maintenance runs once per tick_ms.
        let periodic = now >= self.next_tick;
        if periodic {
            self.next_tick = now + self.config().tick_ms;
        }
        if periodic || !(self.faults.stale_clock > 0 && self.rng.chance(self.faults.stale_clock)) {
            self.deliver(Event::Tick { now_ms: now });
        }
        // Clients connect.
        for i in 0..self.clients.len() {
            if self.client_next[i].is_some_and(|t| t <= now) {
                self.client_next[i] = None;
                self.client_left[i] -= 1;
                let mut service = self.clients[i].service_ms;
                if self.faults.hang > 0 && self.rng.chance(self.faults.hang) {
                    service = u64::from(self.config().timeout_child_secs) * 1000 + 5_000;
                }
                self.conns.push(Conn { client: i, service_ms: service, child: None, done: false, lost: false });
                self.backlog.push_back(self.conns.len() - 1);
            }
        }
        self.children_progress();
        self.round_robin_accepts();
        self.inject_faults();
        // The master reads back-channels.
        if !(self.faults.skip_read > 0 && self.rng.chance(self.faults.skip_read)) {
            self.read_back_channels(false);
        }
        // Reaped children: drain what they wrote first, as a shell would.
        let exits: Vec<Pid> =
            self.children.iter().filter(|(_, c)| c.exit_at.is_some_and(|t| t <= now)).map(|(p, _)| *p).collect();
        for pid in exits {
            self.drain(pid);
            let serving = self.children.get(&pid).and_then(|c| match c.phase {
                Phase::Serving { conn, .. } => Some(conn),
                _ => None,
            });
            if let Some(conn) = serving {
                self.conns[conn].lost = true;
                self.client_continues(conn);
            }
            if let Some(c) = self.children.get_mut(&pid) {
                c.phase = Phase::Gone;
                c.exit_at = None;
            }
            self.reported_idle.remove(&pid);
            self.deliver(Event::Exited { pid });
        }
        // The listener.
        if !self.config().round_robin && !self.shutdown_sent {
            match self.handoff {
                Handoff::ChildAccept => {
                    let spurious =
                        self.faults.spurious_readiness > 0 && self.rng.chance(self.faults.spurious_readiness);
                    if !self.backlog.is_empty() && (self.policy.wants_listener() || spurious) {
                        self.deliver(Event::ConnectionPending);
                    }
                }
                Handoff::FdPassing => {
                    if self.policy.wants_listener() && self.held.is_none() {
                        if let Some(conn) = self.backlog.pop_front() {
                            self.held = Some(conn);
                            self.deliver(Event::ConnectionPending);
                        }
                    }
                }
            }
        }
    }

    fn write_record(&mut self, pid: Pid, kind: RecordKind, conn: Option<usize>) {
        let Some(c) = self.children.get_mut(&pid) else { return };
        let record = match (kind, conn) {
            (RecordKind::Served, Some(conn)) => {
                let service = self.conns[conn].service_ms;
                Record::served(
                    pid,
                    c.seq,
                    1000 + conn as u32,
                    (service * 1000) as u32,
                    Score(conn as i32),
                    conn % 3 == 0,
                )
            }
            _ => Record::new(kind, pid, c.seq),
        };
        c.seq += 1;
        c.outbox.extend(encode(&record));
    }

    fn children_progress(&mut self) {
        let now = self.now;
        let pids: Vec<Pid> = self.children.keys().copied().collect();
        for pid in pids {
            let Some(c) = self.children.get(&pid) else { continue };
            if c.killed || c.exit_at.is_some() {
                continue;
            }
            match c.phase {
                Phase::Starting { ready_at } if ready_at <= now => {
                    self.write_record(pid, RecordKind::Ready, None);
                    self.become_idle(pid);
                }
                Phase::Ordered { accept_at } if accept_at <= now => match self.backlog.pop_front() {
                    Some(conn) => {
                        self.take(pid, conn);
                        self.write_record(pid, RecordKind::Busy, None);
                    }
                    None => panic!("child {pid} ordered to accept with an empty backlog at {now}: {}", self.debug()),
                },
                Phase::Serving { conn, done_at } if done_at <= now => {
                    self.conns[conn].done = true;
                    if let Some(c) = self.children.get_mut(&pid) {
                        c.served.push(conn);
                    }
                    *self.report.served_by.entry(pid).or_default() += 1;
                    self.write_record(pid, RecordKind::Served, Some(conn));
                    self.client_continues(conn);
                    self.become_idle(pid);
                }
                _ => {}
            }
        }
    }

    /// The client of `conn` got its answer (or lost the connection): next request.
    fn client_continues(&mut self, conn: usize) {
        let client = self.conns[conn].client;
        if self.client_left[client] > 0 {
            self.client_next[client] = Some(self.now + self.clients[client].think_ms);
        }
    }

    fn become_idle(&mut self, pid: Pid) {
        let now = self.now;
        if let Some(c) = self.children.get_mut(&pid) {
            c.phase = Phase::Idle;
            c.idle_since = now;
            if c.retiring {
                c.exit_at = Some(now + 1);
            }
        }
    }

    fn take(&mut self, pid: Pid, conn: usize) {
        let service = self.conns[conn].service_ms;
        assert_eq!(self.conns[conn].child, None, "connection {conn} assigned twice");
        self.conns[conn].child = Some(pid);
        if let Some(c) = self.children.get_mut(&pid) {
            c.phase = Phase::Serving { conn, done_at: self.now + service };
        }
    }

    /// Round-robin: idle children accept on their own, the longest idle first.
    fn round_robin_accepts(&mut self) {
        if !self.config().round_robin {
            return;
        }
        while !self.backlog.is_empty() {
            let next = self
                .children
                .iter()
                .filter(|(_, c)| c.phase == Phase::Idle && !c.retiring && !c.killed && c.exit_at.is_none())
                .min_by_key(|(p, c)| (c.idle_since, **p))
                .map(|(p, _)| *p);
            let Some(pid) = next else { break };
            let Some(conn) = self.backlog.pop_front() else { break };
            self.take(pid, conn);
            self.write_record(pid, RecordKind::Busy, None);
        }
    }

    fn inject_faults(&mut self) {
        let now = self.now;
        if self.faults.crash_per_100k > 0 && self.rng.next() % 100_000 < self.faults.crash_per_100k {
            let live: Vec<Pid> = self
                .children
                .iter()
                .filter(|(_, c)| c.phase != Phase::Gone && c.exit_at.is_none())
                .map(|(p, _)| *p)
                .collect();
            if !live.is_empty() {
                let pid = live[(self.rng.next() % live.len() as u64) as usize];
                if let Some(c) = self.children.get_mut(&pid) {
                    c.exit_at = Some(now);
                }
            }
        }
        if self.faults.reload_per_100k > 0
            && !self.shutdown_sent
            && self.rng.next() % 100_000 < self.faults.reload_per_100k
        {
            self.deliver(Event::Reload);
        }
    }

    /// Reads every back-channel dry, in random chunk sizes (records split across
    /// reads, several in one read), before the listener is looked at, as a shell does.
    fn read_back_channels(&mut self, whole: bool) {
        while self.children.values().any(|c| !c.outbox.is_empty()) {
            self.read_back_channels_once(whole);
        }
    }

    fn read_back_channels_once(&mut self, whole: bool) {
        let pids: Vec<Pid> = self.children.keys().copied().collect();
        for pid in pids {
            let chunk: Vec<u8> = {
                let Some(c) = self.children.get_mut(&pid) else { continue };
                if c.outbox.is_empty() {
                    continue;
                }
                let n = if whole { c.outbox.len() } else { self.rng.range(1, c.outbox.len() as u64) as usize };
                c.outbox.drain(..n).collect()
            };
            let mut got = Vec::new();
            if let Some(c) = self.children.get_mut(&pid) {
                c.reader.feed(&chunk, |r| got.push(r));
            }
            for r in got {
                let record = r.unwrap_or_else(|e| panic!("child {pid}: {e}"));
                let killed_or_retiring = self.children.get(&pid).is_some_and(|c| c.killed || c.retiring);
                if matches!(record.kind, RecordKind::Ready | RecordKind::Served | RecordKind::NoVerdict)
                    && !killed_or_retiring
                {
                    self.reported_idle.insert(pid);
                }
                if record.kind == RecordKind::Busy {
                    self.reported_idle.remove(&pid);
                }
                self.deliver(Event::Record { pid, record });
            }
        }
    }

    fn drain(&mut self, pid: Pid) {
        while self.children.get(&pid).is_some_and(|c| !c.outbox.is_empty()) {
            self.read_back_channels_once(true);
        }
    }

    /// Feeds `event` and everything it causes to the policy, checking invariants.
    fn deliver(&mut self, event: Event) {
        self.events.push_back(event);
        while let Some(event) = self.events.pop_front() {
            self.policy.on(event, &mut self.actions);
            let actions: Vec<Action> = self.actions.as_slice().to_vec();
            let spawns = actions.iter().filter(|a| **a == Action::Spawn).count();
            if spawns > 0 {
                self.report.spawn_batches.push((self.now, spawns));
            }
            // Retires on a tick are the over-spare ones; others come from reload,
            // shutdown or max_conn_per_child.
            let maintenance = matches!(event, Event::Tick { .. });
            for action in actions {
                self.apply(action, !maintenance);
            }
            self.check_invariants();
        }
    }

    fn apply(&mut self, action: Action, special_retire: bool) {
        let now = self.now;
        match action {
            Action::Spawn => {
                if self.faults.spawn_fail > 0 && self.rng.chance(self.faults.spawn_fail) {
                    self.events.push_back(Event::SpawnFailed);
                    return;
                }
                let pid = self.next_pid;
                self.next_pid += 1;
                self.children.insert(
                    pid,
                    SimChild {
                        phase: Phase::Starting { ready_at: now + self.startup_ms },
                        retiring: false,
                        killed: false,
                        exit_at: None,
                        idle_since: now,
                        seq: 0,
                        outbox: VecDeque::new(),
                        reader: RecordReader::new(),
                        served: Vec::new(),
                    },
                );
                self.events.push_back(Event::Spawned { pid, now_ms: now });
            }
            Action::AcceptOrder { pid } => {
                self.report.orders += 1;
                assert_eq!(
                    self.reported_idle.first().copied(),
                    Some(pid),
                    "order must go to the lowest-pid idle child at {now}: {}",
                    self.debug()
                );
                self.reported_idle.remove(&pid);
                let c = self.children.get(&pid).unwrap_or_else(|| panic!("order to unknown {pid}"));
                assert_eq!(c.phase, Phase::Idle, "order to {pid} not idle");
                assert!(!c.retiring && !c.killed && c.exit_at.is_none(), "order to {pid} on its way out");
                match self.handoff {
                    Handoff::ChildAccept => {
                        let outstanding = self
                            .children
                            .values()
                            .filter(|c| matches!(c.phase, Phase::Ordered { .. }) && !c.killed && c.exit_at.is_none())
                            .count();
                        assert!(
                            self.backlog.len() > outstanding,
                            "order without a connection of its own (backlog {}, outstanding {outstanding})",
                            self.backlog.len()
                        );
                        if let Some(c) = self.children.get_mut(&pid) {
                            c.phase = Phase::Ordered { accept_at: now + self.accept_latency_ms };
                        }
                    }
                    Handoff::FdPassing => {
                        let conn = self.held.take().unwrap_or_else(|| panic!("order with no held connection"));
                        self.take(pid, conn);
                        self.events.push_back(Event::Accepted { pid });
                    }
                }
            }
            Action::Retire { pid } => {
                if !special_retire {
                    self.report.retires.push((now, pid));
                    assert_eq!(self.reported_idle.last().copied(), Some(pid), "retire the highest-pid idle child");
                }
                self.reported_idle.remove(&pid);
                let c = self.children.get_mut(&pid).unwrap_or_else(|| panic!("retire unknown {pid}"));
                c.retiring = true;
                if matches!(c.phase, Phase::Idle | Phase::Starting { .. }) && c.exit_at.is_none() {
                    c.exit_at = Some(now + 1);
                }
            }
            Action::Kill { pid } => {
                self.report.kills.push((now, pid));
                self.reported_idle.remove(&pid);
                let c = self.children.get_mut(&pid).unwrap_or_else(|| panic!("kill unknown {pid}"));
                c.killed = true;
                if c.phase != Phase::Gone && c.exit_at.is_none() {
                    c.exit_at = Some(now + 1);
                }
            }
            Action::Exit => {
                assert_eq!(self.alive(), 0, "exit with children alive");
                self.report.exited_cleanly = true;
            }
        }
    }

    fn check_invariants(&mut self) {
        let config = self.config();
        let processes = self.policy.processes();
        assert!(processes <= config.max_children, "{processes} processes > max {}", config.max_children);
        let alive = self.alive();
        assert!(alive <= config.max_children, "{alive} alive > max {}", config.max_children);
        self.report.max_processes = self.report.max_processes.max(alive);
        assert!(self.policy.orders_outstanding() <= 1);
        // Round-robin children take connections on their own: no cap there.
        if config.max_busy > 0 && !config.round_robin {
            let counted = self.policy.table().busy_within(self.policy.now_ms(), config.busy_grace_ms);
            assert!(counted <= config.max_busy, "{counted} children serving within their grace > max_busy {}", config.max_busy);
        }
        let s = self.policy.stats();
        assert_eq!(s.bad_records, 0);
        assert_eq!(s.seq_gaps, 0);
        assert_eq!(s.protocol_errors, 0, "{}", self.debug());
        // The table agrees with the processes that exist.
        for c in self.policy.table().iter() {
            assert!(self.children.get(&c.pid).is_some_and(|s| s.phase != Phase::Gone), "table has dead {}", c.pid);
        }
    }

    fn final_checks(&mut self) {
        self.report.connections = self.conns.len();
        self.report.completed = self.conns.iter().filter(|c| c.done).count();
        self.report.lost = self.conns.iter().filter(|c| c.lost).count();
        assert!(self.backlog.is_empty() && self.held.is_none(), "connections left waiting");
        for (i, c) in self.conns.iter().enumerate() {
            assert!(c.child.is_some(), "connection {i} never assigned");
            assert!(c.done != c.lost, "connection {i}: done {} lost {}", c.done, c.lost);
        }
        // Each served connection was served by exactly one child.
        let mut seen = BTreeSet::new();
        for c in self.children.values() {
            for conn in &c.served {
                assert!(seen.insert(*conn), "connection {conn} served twice");
            }
        }
        let s = self.policy.stats();
        assert_eq!(s.messages() as usize, self.report.completed);
        assert_eq!(self.policy.table().len(), 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequential(requests: u32) -> [Client; 1] {
        [Client { start_ms: 2_000, requests, service_ms: 40, think_ms: 0 }]
    }

    #[test]
    fn sequential_load_is_served_by_one_child() {
        for handoff in [Handoff::ChildAccept, Handoff::FdPassing] {
            let mut sim = Sim::new(Config::default(), handoff, &sequential(50), 1);
            let r = sim.run(120_000, 10_000);
            assert_eq!(r.completed, 50);
            assert_eq!(r.served_by.len(), 1, "{handoff:?}: {:?}", r.served_by);
            assert_eq!(r.served_by.values().sum::<usize>(), 50);
            assert_eq!(r.lost, 0);
        }
    }

    #[test]
    fn round_robin_spreads_sequential_load_over_every_child() {
        // spamd's own --round-robin keeps max_children running: min_children = max.
        let config = Config { round_robin: true, min_children: 5, max_spare: 5, ..Config::default() };
        let mut sim = Sim::new(config, Handoff::ChildAccept, &sequential(50), 1);
        let r = sim.run(120_000, 10_000);
        assert_eq!(r.completed, 50);
        assert_eq!(r.served_by.len(), 5, "{:?}", r.served_by);
        assert_eq!(r.orders, 0);
    }

    #[test]
    fn concurrent_load_grows_to_max_then_shrinks_one_per_tick() {
        let clients: Vec<Client> =
            (0..8).map(|i| Client { start_ms: 2_000 + i, requests: 40, service_ms: 500, think_ms: 0 }).collect();
        for handoff in [Handoff::ChildAccept, Handoff::FdPassing] {
            let mut sim = Sim::new(Config::default(), handoff, &clients, 7);
            let r = sim.run(600_000, 15_000);
            assert_eq!(r.completed, 8 * 40);
            assert_eq!(r.max_processes, 5);
            assert_eq!(r.served_by.len(), 5, "{:?}", r.served_by);
            assert_eq!((r.idle_at_rest, r.processes_at_rest), (2, 2));
            // Shrinking: three retirements (each of the highest-pid idle child, checked
            // as it happens), on three successive ticks.
            assert_eq!(r.retires.len(), 3, "{:?}", r.retires);
            let times: Vec<u64> = r.retires.iter().map(|(t, _)| *t).collect();
            assert!(times.windows(2).all(|w| w[1] - w[0] == 1000), "{times:?}");
            assert!(sim.policy.stats().waits > 0);
        }
    }

    #[test]
    fn max_busy_keeps_concurrent_load_on_that_many_children() {
        // Eight clients at once; scans of 40 ms (inside the grace) or 500 ms (past it).
        // (max_busy, service ms, children that serve)
        let cases: &[(usize, u64, usize)] = &[(2, 40, 2), (1, 40, 1), (0, 40, 5), (2, 500, 5)];
        for &(max_busy, service_ms, serving) in cases {
            let clients: Vec<Client> = (0..8).map(|i| Client { start_ms: 2_000 + i, requests: 40, service_ms, think_ms: 0 }).collect();
            for handoff in [Handoff::ChildAccept, Handoff::FdPassing] {
                let config = Config { max_busy, max_conn_per_child: 1_000, ..Config::default() };
                let mut sim = Sim::new(config, handoff, &clients, 11);
                let r = sim.run(900_000, 15_000);
                assert_eq!((r.completed, r.lost), (8 * 40, 0), "max_busy {max_busy}, {handoff:?}");
                assert_eq!(r.served_by.len(), serving, "max_busy {max_busy}, {service_ms} ms, {handoff:?}: {:?}", r.served_by);
            }
        }
    }

    #[test]
    fn spawns_double_per_tick() {
        // Slow-starting children and a large spare floor keep the shortage going.
        let config = Config { max_children: 64, min_spare: 60, max_spare: 64, ..Config::default() };
        let mut sim = Sim::new(config, Handoff::ChildAccept, &[], 3).with_startup_ms(100_000);
        sim.run(400_000, 10_000);
        let batches: Vec<usize> = sim.report.spawn_batches.iter().map(|(_, n)| *n).collect();
        // One for min_children and the first spare, then 2, 4, … capped by max_children.
        assert_eq!(batches[..6], [2, 2, 4, 8, 16, 32]);
        assert_eq!(sim.report.max_processes, 64);
        let times: Vec<u64> = sim.report.spawn_batches.iter().map(|(t, _)| *t).take(6).collect();
        assert_eq!(times, [0, 1000, 2000, 3000, 4000, 5000]);
    }

    #[test]
    fn crashed_busy_child_is_replaced() {
        let clients = [Client { start_ms: 2_000, requests: 30, service_ms: 300, think_ms: 10 }];
        let mut sim = Sim::new(Config::default(), Handoff::ChildAccept, &clients, 11);
        // Run until the hot child is serving, then crash it.
        while sim.now < 2_100 {
            sim.step();
            sim.now = sim.next_time();
        }
        let victim = sim
            .children
            .iter()
            .find(|(_, c)| matches!(c.phase, Phase::Serving { .. }))
            .map(|(p, _)| *p)
            .unwrap_or_else(|| panic!("someone serving: {}", sim.debug()));
        let before = sim.policy.stats().spawned;
        let now = sim.now;
        if let Some(c) = sim.children.get_mut(&victim) {
            c.exit_at = Some(now);
        }
        let r = sim.run(120_000, 5_000);
        assert_eq!(r.lost, 1);
        assert_eq!(r.completed, 29);
        assert_eq!(sim.policy.stats().crashed, 1);
        assert!(sim.policy.stats().spawned > before);
        assert!(!sim.report.served_by.contains_key(&victim) || sim.report.served_by.len() > 1);
    }

    #[test]
    fn child_over_timeout_is_killed_and_others_go_on() {
        let config = Config { timeout_child_secs: 5, ..Config::default() };
        let clients = [
            Client { start_ms: 2_000, requests: 1, service_ms: 60_000, think_ms: 0 },
            Client { start_ms: 2_100, requests: 20, service_ms: 50, think_ms: 100 },
        ];
        let mut sim = Sim::new(config, Handoff::ChildAccept, &clients, 5);
        let r = sim.run(200_000, 5_000);
        assert_eq!(r.kills.len(), 1, "{:?}", r.kills);
        let (t, _) = r.kills[0];
        assert!((7_000..=8_000).contains(&t), "killed at {t}");
        assert_eq!((r.lost, r.completed), (1, 20));
    }

    #[test]
    fn reload_replaces_every_child_and_loses_nothing() {
        let clients: Vec<Client> =
            (0..4).map(|i| Client { start_ms: 2_000 + i * 7, requests: 30, service_ms: 200, think_ms: 50 }).collect();
        for handoff in [Handoff::ChildAccept, Handoff::FdPassing] {
            let mut sim = Sim::new(Config::default(), handoff, &clients, 9);
            while sim.now < 6_000 {
                sim.step();
                sim.now = sim.next_time();
            }
            let old: BTreeSet<Pid> =
                sim.children.iter().filter(|(_, c)| c.phase != Phase::Gone).map(|(p, _)| *p).collect();
            assert!(old.len() >= 3, "{}", sim.debug());
            sim.deliver(Event::Reload);
            // Every old child is retiring; none gets new work.
            assert!(old.iter().all(|p| sim.children.get(p).is_some_and(|c| c.retiring)));
            let served_before: BTreeMap<Pid, usize> = sim.report.served_by.clone();
            let r = sim.run(300_000, 5_000);
            assert_eq!((r.completed, r.lost), (120, 0), "{handoff:?}");
            for pid in &old {
                let before = served_before.get(pid).copied().unwrap_or(0);
                let after = r.served_by.get(pid).copied().unwrap_or(0);
                // At most the request in flight at reload time.
                assert!(after <= before + 1, "{pid} served {before} then {after}");
            }
            assert_eq!(sim.policy.stats().crashed, 0);
        }
    }

    #[test]
    fn max_conn_per_child_recycles() {
        let config = Config { max_conn_per_child: 7, ..Config::default() };
        let mut sim = Sim::new(config, Handoff::FdPassing, &sequential(50), 2);
        let r = sim.run(200_000, 5_000);
        assert_eq!((r.completed, r.lost), (50, 0));
        assert!(r.served_by.values().all(|n| *n <= 7), "{:?}", r.served_by);
        assert!(r.served_by.len() >= 8);
    }

    /// Long pseudo-random runs with faults; the invariants are checked at every step.
    #[test]
    fn random_runs_keep_invariants() {
        for seed in 1..=24u64 {
            let mut rng = XorShift::new(seed * 7919);
            let max_children = rng.range(1, 12) as usize;
            let min_children = rng.range(1, max_children as u64) as usize;
            let min_spare = rng.range(0, max_children as u64) as usize;
            let max_spare = rng.range(min_spare as u64, min_spare as u64 + 4) as usize;
            let config = Config {
                max_children,
                min_children,
                min_spare,
                max_spare,
                max_conn_per_child: rng.range(1, 30) as u32,
                timeout_child_secs: rng.range(3, 20) as u32,
                round_robin: rng.chance(20),
                tick_ms: rng.range(200, 2000),
                max_busy: rng.range(0, 4) as usize,
                ..Config::default()
            };
            let clients: Vec<Client> = (0..rng.range(1, 12))
                .map(|_| Client {
                    start_ms: rng.range(0, 20_000),
                    requests: rng.range(1, 40) as u32,
                    service_ms: rng.range(1, 800),
                    think_ms: rng.range(0, 1500),
                })
                .collect();
            // Every fourth seed runs clean: then nothing at all may be lost.
            let faulty = seed % 4 != 0;
            let faults = if !faulty {
                Faults::default()
            } else {
                Faults {
                    hang: rng.range(0, 3),
                    crash_per_100k: rng.range(0, 20),
                    spawn_fail: rng.range(0, 20),
                    reload_per_100k: rng.range(0, 10),
                    spurious_readiness: rng.range(0, 50),
                    stale_clock: rng.range(0, 30),
                    skip_read: rng.range(0, 60),
                }
            };
            let handoff = if rng.chance(50) { Handoff::ChildAccept } else { Handoff::FdPassing };
            let mut sim =
                Sim::new(config, handoff, &clients, seed).with_faults(faults).with_startup_ms(rng.range(1, 3000));
            sim.accept_latency_ms = rng.range(0, 5);
            let total: u32 = clients.iter().map(|c| c.requests).sum();
            sim.run(3_000_000, 5_000);
            let r = &sim.report;
            assert_eq!(r.connections, total as usize, "seed {seed}");
            assert_eq!(r.completed + r.lost, total as usize, "seed {seed}");
            if faults.hang == 0 && faults.crash_per_100k == 0 {
                assert_eq!(r.lost, 0, "seed {seed}");
                assert!(r.kills.is_empty(), "seed {seed}");
            }
        }
    }
}
