//! The prefork policy: events in, actions out, no I/O.

use super::config::{Config, ConfigError};
use super::record::{Record, RecordKind};
use super::stats::Stats;
use super::table::{Child, ChildState, ChildTable, Pid, StateCounts};

/// Something the master saw, turned into the policy's terms by the shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Event {
    /// The clock (ms, monotonic). Send one at start-up and whenever the master wakes,
    /// at least every `tick_ms`: timeouts are checked on each, maintenance (spawn,
    /// retire) runs at most once per `tick_ms`.
    Tick {
        /// Monotonic clock, ms.
        now_ms: u64,
    },
    /// A `Spawn` was carried out: the new child's pid.
    Spawned {
        /// The child's pid.
        pid: Pid,
        /// Monotonic clock, ms.
        now_ms: u64,
    },
    /// A `Spawn` could not be carried out (fork failed); the next tick tries again.
    SpawnFailed,
    /// The child was reaped.
    Exited {
        /// The child's pid.
        pid: Pid,
    },
    /// A record arrived on the child's back-channel.
    Record {
        /// The pid whose channel it came on.
        pid: Pid,
        /// The decoded record.
        record: Record,
    },
    /// Bytes on the child's back-channel did not decode: its framing, and the child,
    /// are no longer trusted.
    BadRecord {
        /// The pid whose channel it came on.
        pid: Pid,
    },
    /// The connection ordered to `pid` has left the listener's backlog: sent by the
    /// shell after it accepted and passed the descriptor itself (fd-passing mode).
    /// In child-accept mode the child's `Busy` record says the same.
    Accepted {
        /// The child given the connection.
        pid: Pid,
    },
    /// A listener is readable. Level-triggered repeats are harmless: no second
    /// order is given while one is outstanding.
    ConnectionPending,
    /// Stop: retire every child, spawn no more, emit `Exit` once all are reaped.
    Shutdown,
    /// New rules are loaded: retire every current child gracefully (requests in
    /// flight finish) and spawn fresh ones.
    Reload,
}

/// What the policy wants the shell to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Action {
    /// Fork a child; report `Spawned` or `SpawnFailed`.
    Spawn,
    /// Hand the next pending connection to `pid`: tell it to accept one connection,
    /// or accept it here and pass the descriptor.
    AcceptOrder {
        /// The child to give it to.
        pid: Pid,
    },
    /// Tell `pid` to finish any connection or order it has, then exit.
    Retire {
        /// The child to retire.
        pid: Pid,
    },
    /// Kill `pid` now (SIGKILL): it overran `timeout_child` or broke its back-channel.
    Kill {
        /// The child to kill.
        pid: Pid,
    },
    /// After `Shutdown`, every child has been reaped: the master may exit.
    Exit,
}

/// Headroom an [`Actions`] buffer needs beyond the table capacity `N`.
pub const ACTIONS_SLACK: usize = 4;

/// A caller-owned, fixed-capacity list of actions; `M` must be at least
/// `N + ACTIONS_SLACK` for a `Policy<N>` (checked at compile time), which covers
/// the most one event can produce (a reload retires and respawns the whole table).
///
/// ```compile_fail
/// use sift_core::prefork::{Actions, Config, Event, Policy};
/// let mut policy = Policy::<8>::new(Config::default()).map_err(|_| ()).ok();
/// let mut small = Actions::<4>::new();
/// if let Some(p) = policy.as_mut() {
///     p.on(Event::Shutdown, &mut small); // too small for 8 children
/// }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Actions<const M: usize> {
    list: heapless::Vec<Action, M>,
}

impl<const M: usize> Actions<M> {
    /// An empty list.
    pub const fn new() -> Self {
        Actions { list: heapless::Vec::new() }
    }

    /// The actions of the last event, in the order to carry them out.
    pub fn as_slice(&self) -> &[Action] {
        &self.list
    }

    /// Iterates over [`as_slice`](Self::as_slice).
    pub fn iter(&self) -> core::slice::Iter<'_, Action> {
        self.list.iter()
    }

    /// Number of actions.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// No actions.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    fn clear(&mut self) {
        self.list.clear();
    }

    fn push(&mut self, action: Action) {
        let pushed = self.list.push(action).is_ok();
        debug_assert!(pushed, "Actions capacity below the proven bound");
    }
}

impl<'a, const M: usize> IntoIterator for &'a Actions<M> {
    type Item = &'a Action;
    type IntoIter = core::slice::Iter<'a, Action>;
    fn into_iter(self) -> Self::IntoIter {
        self.list.iter()
    }
}

/// The prefork policy for up to `N` children: spamd's and Apache's scaling, with
/// accept serialised through the master.
///
/// - A pending connection goes to the lowest-pid idle child, one accept order at a
///   time; with no idle child, or `max_busy` children serving within their grace, it
///   waits (in the backlog) for the first child to report idle or to pass its grace.
///   Nothing is dropped.
/// - Each tick: too few idle children (starting ones count as idle, as in Apache)
///   → spawn 1, 2, 4, … up to `spawn_rate_max` per tick while the shortage lasts;
///   too many → retire the highest-pid idle child, one per tick.
/// - Children over `timeout_child` are killed; children that exit unbidden, are
///   killed, or reach `max_conn_per_child` are replaced.
///
/// Allocation-free: the table and the action buffer have fixed capacities.
#[derive(Debug, Clone)]
pub struct Policy<const N: usize> {
    config: Config,
    table: ChildTable<N>,
    stats: Stats,
    now_ms: u64,
    last_maintenance_ms: Option<u64>,
    spawn_rate: usize,
    spawns_in_flight: usize,
    owed_spawns: usize,
    waiting: bool,
    shutting_down: bool,
    exit_sent: bool,
}

impl<const N: usize> Policy<N> {
    /// A policy with no children yet; the first `Tick` spawns them.
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        config.validate(N)?;
        Ok(Policy {
            config,
            table: ChildTable::new(),
            stats: Stats::default(),
            now_ms: 0,
            last_maintenance_ms: None,
            spawn_rate: 1,
            spawns_in_flight: 0,
            owed_spawns: 0,
            waiting: false,
            shutting_down: false,
            exit_sent: false,
        })
    }

    /// Handles one event; `actions` is cleared and then holds what to do, in order.
    pub fn on<const M: usize>(&mut self, event: Event, actions: &mut Actions<M>) {
        const { assert!(M >= N + ACTIONS_SLACK, "Actions<M> needs M >= N + ACTIONS_SLACK") };
        actions.clear();
        match event {
            Event::Tick { now_ms } => self.tick(now_ms, actions),
            Event::Spawned { pid, now_ms } => self.spawned(pid, now_ms, actions),
            Event::SpawnFailed => {
                self.spawns_in_flight = self.spawns_in_flight.saturating_sub(1);
                self.stats.spawn_failures = self.stats.spawn_failures.saturating_add(1);
            }
            Event::Exited { pid } => self.exited(pid, actions),
            Event::Record { pid, record } => self.record(pid, record, actions),
            Event::BadRecord { pid } => self.bad_record(pid, actions),
            Event::Accepted { pid } => self.accepted(pid),
            Event::ConnectionPending => self.connection_pending(actions),
            Event::Shutdown => self.shutdown(actions),
            Event::Reload => self.reload(actions),
        }
        self.dispatch(actions);
        if self.shutting_down && !self.exit_sent && self.table.is_empty() && self.spawns_in_flight == 0 {
            self.exit_sent = true;
            actions.push(Action::Exit);
        }
        self.stats.children = self.table.counts();
    }

    /// Whether the shell should poll the listeners now. False while an accept order
    /// is outstanding (the readiness may be that very connection), while a
    /// connection is already known to wait, in round-robin mode and after shutdown.
    pub fn wants_listener(&self) -> bool {
        !self.config.round_robin && !self.shutting_down && !self.waiting && self.table.orders_outstanding() == 0
    }

    /// The settings in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The child table.
    pub fn table(&self) -> &ChildTable<N> {
        &self.table
    }

    /// Statistics so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The latest time seen, ms.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// A connection waits for a child to become idle.
    pub fn waiting(&self) -> bool {
        self.waiting
    }

    /// Accept orders given and not yet confirmed.
    pub fn orders_outstanding(&self) -> usize {
        self.table.orders_outstanding()
    }

    /// When the shell must send a `Tick` even if nothing else happens: a connection
    /// waits on `max_busy` and a child's `busy_grace_ms` runs out then, freeing a place.
    pub fn wake_by_ms(&self) -> Option<u64> {
        // Only the cap can hold a connection while a child is idle.
        if !self.waiting || self.config.max_busy == 0 || self.table.lowest_idle().is_none() {
            return None;
        }
        let grace = self.config.busy_grace_ms;
        self.table.iter().filter(|c| c.state != ChildState::Killed).filter_map(|c| c.busy_since_ms).map(|t| t.saturating_add(grace)).filter(|&t| t > self.now_ms).min()
    }

    /// Whether `max_busy` children are serving within their grace: no order now.
    fn at_busy_cap(&self) -> bool {
        let cap = self.config.max_busy;
        cap > 0 && self.table.busy_within(self.now_ms, self.config.busy_grace_ms) >= cap
    }

    /// The child to give the next connection: the lowest-pid idle one, unless `max_busy`
    /// children are serving already.
    fn next_taker(&self) -> Option<Pid> {
        if self.at_busy_cap() {
            return None;
        }
        self.table.lowest_idle()
    }

    /// Spawns asked for and not yet reported.
    pub fn spawns_in_flight(&self) -> usize {
        self.spawns_in_flight
    }

    /// Children the next shortage tick would spawn.
    pub fn spawn_rate(&self) -> usize {
        self.spawn_rate
    }

    /// Replacements still to spawn (after reload, crashes, kills, max connections).
    pub fn owed_spawns(&self) -> usize {
        self.owed_spawns
    }

    /// `Shutdown` has been received.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// Child processes that exist or are being forked: the figure held to `max_children`.
    pub fn processes(&self) -> usize {
        self.table.len() + self.spawns_in_flight
    }

    fn counts(&self) -> StateCounts {
        self.table.counts()
    }

    fn can_spawn(&self) -> bool {
        !self.shutting_down && self.processes() < self.config.max_children
    }

    fn spawn<const M: usize>(&mut self, actions: &mut Actions<M>) -> bool {
        if !self.can_spawn() {
            return false;
        }
        self.spawns_in_flight += 1;
        // Whatever rule asked for it, a new child pays off one owed replacement.
        self.owed_spawns = self.owed_spawns.saturating_sub(1);
        actions.push(Action::Spawn);
        true
    }

    fn spawn_owed<const M: usize>(&mut self, actions: &mut Actions<M>) {
        let mut n = 0;
        while self.owed_spawns > 0 && n < self.config.spawn_rate_max && self.spawn(actions) {
            n += 1;
        }
    }

    fn owe_spawns(&mut self, n: usize) {
        if !self.shutting_down {
            self.owed_spawns = self.owed_spawns.saturating_add(n).min(self.config.max_children);
        }
    }

    fn retire<const M: usize>(&mut self, pid: Pid, replace: bool, actions: &mut Actions<M>) {
        let now = self.now_ms;
        if let Some(c) = self.table.get_mut(pid) {
            if matches!(c.state, ChildState::Retiring | ChildState::Killed) {
                return;
            }
            c.set_state(ChildState::Retiring, now);
            actions.push(Action::Retire { pid });
            self.stats.retired = self.stats.retired.saturating_add(1);
            if replace {
                self.owe_spawns(1);
                self.spawn_owed(actions);
            }
        }
    }

    fn kill<const M: usize>(&mut self, pid: Pid, actions: &mut Actions<M>) {
        let now = self.now_ms;
        if let Some(c) = self.table.get_mut(pid) {
            if c.state == ChildState::Killed {
                return;
            }
            let was_live = c.is_live();
            c.set_state(ChildState::Killed, now);
            // If it had not yet taken its connection, the listener is polled again.
            c.awaiting_accept = false;
            actions.push(Action::Kill { pid });
            self.stats.killed = self.stats.killed.saturating_add(1);
            // Replaced at the next maintenance (not at its exit: no fork loop).
            if was_live {
                self.owe_spawns(1);
            }
        }
    }

    fn order<const M: usize>(&mut self, pid: Pid, actions: &mut Actions<M>) {
        let now = self.now_ms;
        if let Some(c) = self.table.get_mut(pid) {
            c.set_state(ChildState::Busy, now);
            c.busy_since_ms = Some(now);
            c.awaiting_accept = true;
            actions.push(Action::AcceptOrder { pid });
            self.stats.accept_orders = self.stats.accept_orders.saturating_add(1);
        }
    }

    fn tick<const M: usize>(&mut self, now_ms: u64, actions: &mut Actions<M>) {
        self.now_ms = self.now_ms.max(now_ms);
        self.kill_overdue(actions);
        if self.shutting_down {
            return;
        }
        let due = self.last_maintenance_ms.is_none_or(|t| self.now_ms.saturating_sub(t) >= self.config.tick_ms);
        if !due {
            return;
        }
        self.last_maintenance_ms = Some(self.now_ms);
        self.spawn_owed(actions);
        // Keep min_children taking work (this is also the start-up), then balance spares.
        while self.counts().live() + self.spawns_in_flight < self.config.min_children && self.spawn(actions) {}
        self.adjust_spares(actions);
    }

    fn kill_overdue<const M: usize>(&mut self, actions: &mut Actions<M>) {
        let Some(limit) = self.config.timeout_child_ms() else { return };
        let now = self.now_ms;
        let mut overdue: heapless::Vec<Pid, N> = heapless::Vec::new();
        for c in self.table.iter() {
            let since = match c.state {
                ChildState::Starting => Some(c.spawned_ms),
                ChildState::Busy => c.busy_since_ms,
                ChildState::Retiring => Some(c.busy_since_ms.unwrap_or(c.state_since_ms)),
                ChildState::Idle | ChildState::Killed => None,
            };
            if since.is_some_and(|t| now.saturating_sub(t) > limit) {
                // The table holds at most N, so this cannot fail.
                let _ = overdue.push(c.pid);
            }
        }
        for pid in overdue {
            self.kill(pid, actions);
        }
    }

    /// Apache's idle-server maintenance, one step.
    fn adjust_spares<const M: usize>(&mut self, actions: &mut Actions<M>) {
        let n = self.counts();
        let idle_like = n.idle + n.starting + self.spawns_in_flight;
        let live = n.live() + self.spawns_in_flight;
        if idle_like < self.config.min_spare {
            let mut spawned = 0;
            while spawned < self.spawn_rate && self.spawn(actions) {
                spawned += 1;
            }
            self.spawn_rate =
                if spawned == 0 { 1 } else { self.spawn_rate.saturating_mul(2).min(self.config.spawn_rate_max) };
        } else {
            self.spawn_rate = 1;
            if idle_like > self.config.max_spare && live > self.config.min_children {
                if let Some(pid) = self.table.highest_idle() {
                    self.retire(pid, false, actions);
                }
            }
        }
    }

    fn spawned<const M: usize>(&mut self, pid: Pid, now_ms: u64, actions: &mut Actions<M>) {
        self.now_ms = self.now_ms.max(now_ms);
        self.spawns_in_flight = self.spawns_in_flight.saturating_sub(1);
        self.stats.spawned = self.stats.spawned.saturating_add(1);
        let untracked = self.table.get(pid).is_none() && self.table.len() >= self.config.max_children;
        if untracked {
            // Not asked for: over the limit, so it goes at once.
            self.stats.protocol_errors = self.stats.protocol_errors.saturating_add(1);
            self.stats.killed = self.stats.killed.saturating_add(1);
            actions.push(Action::Kill { pid });
            return;
        }
        match self.table.insert(Child::starting(pid, self.now_ms)) {
            Ok(None) => {}
            Ok(Some(_stale)) => self.stats.protocol_errors = self.stats.protocol_errors.saturating_add(1),
            Err(_) => {
                self.stats.killed = self.stats.killed.saturating_add(1);
                actions.push(Action::Kill { pid });
                return;
            }
        }
        if self.shutting_down {
            self.retire(pid, false, actions);
        }
    }

    fn exited<const M: usize>(&mut self, pid: Pid, actions: &mut Actions<M>) {
        let Some(child) = self.table.remove(pid) else { return };
        self.stats.exited = self.stats.exited.saturating_add(1);
        if child.is_live() {
            self.stats.crashed = self.stats.crashed.saturating_add(1);
            self.owe_spawns(1);
        }
        // A graceful exit frees a slot for an owed replacement now; crashes and kills
        // wait for the tick, so a child that dies at start-up cannot make a fork loop.
        if child.state == ChildState::Retiring {
            self.spawn_owed(actions);
        }
    }

    fn record<const M: usize>(&mut self, pid: Pid, record: Record, actions: &mut Actions<M>) {
        if record.pid != pid {
            self.bad_record(pid, actions);
            return;
        }
        let Some(c) = self.table.get_mut(pid) else {
            self.stats.protocol_errors = self.stats.protocol_errors.saturating_add(1);
            return;
        };
        if c.state == ChildState::Killed {
            return;
        }
        let gap = c.last_seq.is_some_and(|last| record.seq != last.wrapping_add(1));
        c.last_seq = Some(record.seq);
        let mut out_of_place = false;
        if record.kind == RecordKind::Ready {
            match c.state {
                ChildState::Starting => c.set_state(ChildState::Idle, self.now_ms),
                ChildState::Retiring => {}
                _ => out_of_place = true,
            }
        }
        if gap {
            self.stats.seq_gaps = self.stats.seq_gaps.saturating_add(1);
        }
        if out_of_place {
            self.stats.protocol_errors = self.stats.protocol_errors.saturating_add(1);
        }
        match record.kind {
            RecordKind::Ready => {}
            RecordKind::Busy => self.accepted(pid),
            RecordKind::Served | RecordKind::NoVerdict => {
                self.stats.count_record(&record);
                self.finished(pid, actions);
            }
        }
    }

    fn bad_record<const M: usize>(&mut self, pid: Pid, actions: &mut Actions<M>) {
        self.stats.bad_records = self.stats.bad_records.saturating_add(1);
        self.kill(pid, actions);
    }

    /// The child has taken a connection.
    fn accepted(&mut self, pid: Pid) {
        let (now, round_robin) = (self.now_ms, self.config.round_robin);
        let Some(c) = self.table.get_mut(pid) else {
            self.stats.protocol_errors = self.stats.protocol_errors.saturating_add(1);
            return;
        };
        if c.state == ChildState::Killed {
            return;
        }
        if c.awaiting_accept {
            c.awaiting_accept = false;
            c.connections = c.connections.saturating_add(1);
            return;
        }
        let unbusy = c.busy_since_ms.is_none() && matches!(c.state, ChildState::Idle | ChildState::Retiring);
        if unbusy {
            // Took one on its own: round-robin mode, or a retire crossing an accept.
            c.busy_since_ms = Some(now);
            c.connections = c.connections.saturating_add(1);
            if c.state == ChildState::Idle {
                c.set_state(ChildState::Busy, now);
            }
        }
        if !unbusy || !round_robin {
            self.stats.protocol_errors = self.stats.protocol_errors.saturating_add(1);
        }
    }

    /// The child is done with its connection (or found none) and is idle again.
    fn finished<const M: usize>(&mut self, pid: Pid, actions: &mut Actions<M>) {
        let (now, max_conn) = (self.now_ms, self.config.max_conn_per_child);
        let Some(c) = self.table.get_mut(pid) else { return };
        if c.busy_since_ms.is_none() && !c.awaiting_accept {
            self.stats.protocol_errors = self.stats.protocol_errors.saturating_add(1);
        }
        c.busy_since_ms = None;
        c.awaiting_accept = false;
        if !c.is_live() {
            return;
        }
        if c.connections >= max_conn {
            self.retire(pid, true, actions);
        } else {
            c.set_state(ChildState::Idle, now);
        }
    }

    fn connection_pending<const M: usize>(&mut self, actions: &mut Actions<M>) {
        if !self.wants_listener() {
            return;
        }
        match self.next_taker() {
            Some(pid) => self.order(pid, actions),
            None => {
                self.waiting = true;
                self.stats.waits = self.stats.waits.saturating_add(1);
            }
        }
    }

    /// A waiting connection goes to the first child that is idle.
    fn dispatch<const M: usize>(&mut self, actions: &mut Actions<M>) {
        if !self.waiting || self.config.round_robin || self.shutting_down || self.table.orders_outstanding() > 0 {
            return;
        }
        if let Some(pid) = self.next_taker() {
            self.waiting = false;
            self.order(pid, actions);
        }
    }

    fn shutdown<const M: usize>(&mut self, actions: &mut Actions<M>) {
        if self.shutting_down {
            return;
        }
        self.shutting_down = true;
        self.waiting = false;
        self.owed_spawns = 0;
        let now = self.now_ms;
        for c in self.table.iter_mut() {
            if c.is_live() {
                c.set_state(ChildState::Retiring, now);
                actions.push(Action::Retire { pid: c.pid });
                self.stats.retired = self.stats.retired.saturating_add(1);
            }
        }
    }

    fn reload<const M: usize>(&mut self, actions: &mut Actions<M>) {
        if self.shutting_down {
            return;
        }
        self.stats.reloads = self.stats.reloads.saturating_add(1);
        let now = self.now_ms;
        let mut retired = 0;
        for c in self.table.iter_mut() {
            if c.is_live() {
                c.set_state(ChildState::Retiring, now);
                actions.push(Action::Retire { pid: c.pid });
                retired += 1;
            }
        }
        self.stats.retired = self.stats.retired.saturating_add(retired as u64);
        self.owe_spawns(retired);
        self.spawn_rate = 1;
        self.spawn_owed(actions);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prefork::config::BUSY_GRACE_MS;
    use crate::score::Score;
    use std::vec::Vec;

    const CAP: usize = 16;

    /// A policy with a fake clock and increasing fake pids; events return their actions.
    struct Harness {
        policy: Policy<CAP>,
        actions: Actions<{ CAP + ACTIONS_SLACK }>,
        now: u64,
        next_pid: Pid,
        seq: [u32; 256],
    }

    impl Harness {
        fn new(config: Config) -> Harness {
            let policy = Policy::new(config).unwrap_or_else(|e| panic!("{e}"));
            Harness { policy, actions: Actions::new(), now: 0, next_pid: 100, seq: [0; 256] }
        }

        fn on(&mut self, event: Event) -> Vec<Action> {
            self.policy.on(event, &mut self.actions);
            self.actions.as_slice().to_vec()
        }

        /// Carries out every `Spawn` in `actions` as a fork that succeeds; returns the new pids.
        fn fork_all(&mut self, actions: &[Action]) -> Vec<Pid> {
            let mut pids = Vec::new();
            for a in actions {
                if *a == Action::Spawn {
                    let pid = self.next_pid;
                    self.next_pid += 1;
                    let more = self.on(Event::Spawned { pid, now_ms: self.now });
                    assert!(more.is_empty() || self.policy.is_shutting_down(), "{more:?}");
                    pids.push(pid);
                }
            }
            pids
        }

        fn tick(&mut self, ms: u64) -> Vec<Action> {
            self.now += ms;
            self.on(Event::Tick { now_ms: self.now })
        }

        fn send(&mut self, pid: Pid, kind: RecordKind) -> Vec<Action> {
            let slot = (pid % 256) as usize;
            let seq = self.seq[slot];
            self.seq[slot] += 1;
            let record = match kind {
                RecordKind::Served => Record::served(pid, seq, 1000, 2000, Score(1500), false),
                _ => Record::new(kind, pid, seq),
            };
            self.on(Event::Record { pid, record })
        }

        /// Start-up: first tick, forks, every child ready.
        fn start(&mut self) -> Vec<Pid> {
            let first = self.on(Event::Tick { now_ms: self.now });
            let pids = self.fork_all(&first);
            for &pid in &pids {
                assert_eq!(self.send(pid, RecordKind::Ready), []);
            }
            pids
        }
    }

    fn spawns(actions: &[Action]) -> usize {
        actions.iter().filter(|a| **a == Action::Spawn).count()
    }

    #[test]
    fn start_up_spawns_min_children_and_they_go_idle() {
        let cases: &[(Config, usize)] = &[
            (Config::default(), 1),
            (Config { min_children: 3, ..Config::default() }, 3),
            (Config { min_spare: 2, max_spare: 3, ..Config::default() }, 2),
            (Config { min_spare: 0, max_spare: 0, ..Config::default() }, 1),
        ];
        for (config, want) in cases {
            let mut h = Harness::new(*config);
            let pids = h.start();
            assert_eq!(pids.len(), *want, "{config:?}");
            assert_eq!(h.policy.table().counts().idle, *want);
            assert_eq!(h.policy.stats().spawned, *want as u64);
        }
    }

    #[test]
    fn accept_goes_to_lowest_idle_one_order_at_a_time() {
        let mut h = Harness::new(Config { min_children: 3, ..Config::default() });
        let pids = h.start();
        assert_eq!(pids, [100, 101, 102]);
        assert!(h.policy.wants_listener());
        assert_eq!(h.on(Event::ConnectionPending), [Action::AcceptOrder { pid: 100 }]);
        // Level-triggered repeats of the same readiness give nothing.
        assert!(!h.policy.wants_listener());
        assert_eq!(h.on(Event::ConnectionPending), []);
        assert_eq!(h.on(Event::ConnectionPending), []);
        assert_eq!(h.policy.orders_outstanding(), 1);
        assert_eq!(h.send(100, RecordKind::Busy), []);
        assert!(h.policy.wants_listener());
        assert_eq!(h.on(Event::ConnectionPending), [Action::AcceptOrder { pid: 101 }]);
        assert_eq!(h.on(Event::Accepted { pid: 101 }), []);
        assert_eq!(h.send(100, RecordKind::Served), []);
        assert_eq!(h.on(Event::ConnectionPending), [Action::AcceptOrder { pid: 100 }]);
        assert_eq!(h.policy.stats().protocol_errors, 0);
        assert_eq!(h.policy.stats().accept_orders, 3);
    }

    #[test]
    fn max_busy_holds_connections_until_a_child_finishes_or_passes_its_grace() {
        // (max_busy, how the third connection gets its child, the child, ms waited)
        enum Freed {
            Served,
            Grace,
        }
        let cases: &[(usize, Option<Freed>, Pid, u64)] = &[
            // No cap: the third idle child takes it at once.
            (0, None, 102, 0),
            (3, None, 102, 0),
            // Cap 2: it waits; the first child to finish gets it, being the lowest idle.
            (2, Some(Freed::Served), 100, 30),
            // Cap 2 and nobody finishes: once the first child has served longer than
            // the grace it no longer counts, and the lowest idle child takes it.
            (2, Some(Freed::Grace), 102, BUSY_GRACE_MS),
        ];
        for (max_busy, freed, taker, waited) in cases {
            let mut h = Harness::new(Config { min_children: 4, max_busy: *max_busy, ..Config::default() });
            assert_eq!(h.start(), [100, 101, 102, 103]);
            let start = h.now;
            assert_eq!(h.on(Event::ConnectionPending), [Action::AcceptOrder { pid: 100 }]);
            assert_eq!(h.on(Event::Accepted { pid: 100 }), []);
            h.now += 10;
            assert_eq!(h.on(Event::ConnectionPending), [Action::AcceptOrder { pid: 101 }]);
            assert_eq!(h.on(Event::Accepted { pid: 101 }), []);
            let third = h.on(Event::ConnectionPending);
            match freed {
                None => {
                    assert_eq!(third, [Action::AcceptOrder { pid: *taker }], "max_busy {max_busy}");
                    assert_eq!(h.policy.wake_by_ms(), None);
                    continue;
                }
                Some(_) => {
                    assert_eq!(third, [], "max_busy {max_busy}: the third waits");
                    assert!(h.policy.waiting() && !h.policy.wants_listener());
                    assert_eq!(h.policy.wake_by_ms(), Some(start + BUSY_GRACE_MS), "the first child's grace ends first");
                }
            }
            let got = match freed {
                Some(Freed::Served) => {
                    h.now = start + waited;
                    assert_eq!(h.on(Event::Tick { now_ms: h.now }), [], "a tick within the grace frees nothing");
                    h.send(100, RecordKind::Served)
                }
                _ => {
                    h.now = start + waited - 1;
                    assert_eq!(h.on(Event::Tick { now_ms: h.now }), [], "one ms before the grace ends");
                    h.tick(1)
                }
            };
            assert_eq!(got, [Action::AcceptOrder { pid: *taker }], "max_busy {max_busy}");
            assert!(!h.policy.waiting());
            assert_eq!(h.policy.wake_by_ms(), None);
            assert_eq!(h.policy.stats().protocol_errors, 0);
        }
    }

    #[test]
    fn waiting_connection_goes_to_first_child_reporting_idle() {
        let mut h = Harness::new(Config { max_busy: 1, ..Config::default() });
        let [a] = h.start()[..] else { panic!("one child") };
        assert_eq!(h.on(Event::ConnectionPending), [Action::AcceptOrder { pid: a }]);
        h.send(a, RecordKind::Busy);
        assert_eq!(h.on(Event::ConnectionPending), []);
        assert!(h.policy.waiting());
        assert_eq!(h.policy.wake_by_ms(), None, "no idle child: the end of a grace frees nothing");
        assert!(!h.policy.wants_listener());
        assert_eq!(h.policy.stats().waits, 1);
        assert_eq!(h.on(Event::ConnectionPending), []);
        assert_eq!(h.policy.stats().waits, 1);
        // The tick spawns (too few idle); the new child is not ready yet.
        let t = h.tick(1000);
        assert_eq!(spawns(&t), 1);
        let [b] = h.fork_all(&t)[..] else { panic!("one spawn") };
        // Whichever reports idle first gets the waiting connection.
        assert_eq!(h.send(b, RecordKind::Ready), [Action::AcceptOrder { pid: b }]);
        assert!(!h.policy.waiting());
        assert_eq!(h.send(a, RecordKind::Served), []);
    }

    #[test]
    fn spawn_rate_doubles_per_tick_and_resets() {
        let config = Config { max_children: 16, min_spare: 16, max_spare: 16, ..Config::default() };
        let mut h = Harness::new(config);
        // Forks stay unreported: in-flight spawns count as idle, like Apache's starting ones.
        let mut got = Vec::new();
        let first = h.on(Event::Tick { now_ms: 0 });
        got.push(spawns(&first));
        h.fork_all(&first);
        for _ in 0..5 {
            let t = h.tick(1000);
            got.push(spawns(&t));
            h.fork_all(&t);
        }
        // One for min_children, then the spare shortage: 1, 2, 4, 8 until the limit.
        assert_eq!(got, [2, 2, 4, 8, 0, 0]);
        assert_eq!(h.policy.processes(), 16);
        // At the limit the rate falls back to 1.
        assert_eq!(h.policy.spawn_rate(), 1);
    }

    #[test]
    fn spawn_rate_capped_by_spawn_rate_max() {
        let config = Config { max_children: 16, min_spare: 16, max_spare: 16, spawn_rate_max: 2, ..Config::default() };
        let mut h = Harness::new(config);
        let mut got = Vec::new();
        for i in 0..5 {
            let t = if i == 0 { h.on(Event::Tick { now_ms: 0 }) } else { h.tick(1000) };
            got.push(spawns(&t));
            h.fork_all(&t);
        }
        assert_eq!(got, [2, 2, 2, 2, 2]);
    }

    #[test]
    fn maintenance_runs_once_per_tick_period() {
        let config = Config { max_children: 16, min_spare: 16, max_spare: 16, ..Config::default() };
        let mut h = Harness::new(config);
        let first = h.on(Event::Tick { now_ms: 0 });
        h.fork_all(&first);
        // Ticks 10 ms apart: nothing until a full period has passed.
        for _ in 0..99 {
            assert_eq!(h.tick(10), []);
        }
        assert_eq!(spawns(&h.tick(10)), 2);
    }

    #[test]
    fn too_many_idle_retires_highest_pid_one_per_tick() {
        let mut h = Harness::new(Config { min_children: 5, ..Config::default() });
        let pids = h.start();
        assert_eq!(pids.len(), 5);
        // min_children 5 holds the pool: nothing retires.
        assert_eq!(h.tick(1000), []);
        let mut h = Harness::new(Config::default());
        h.start();
        // Grow to five children by hand (a burst), then let them all go idle.
        for _ in 0..4 {
            let t = h.tick(1000);
            let busy = h.policy.table().lowest_idle();
            if let Some(pid) = busy {
                h.on(Event::ConnectionPending);
                h.send(pid, RecordKind::Busy);
            }
            for pid in h.fork_all(&t) {
                h.send(pid, RecordKind::Ready);
            }
        }
        let busy: Vec<Pid> = h.policy.table().iter().filter(|c| c.state == ChildState::Busy).map(|c| c.pid).collect();
        for pid in busy {
            h.send(pid, RecordKind::Served);
        }
        let idle = h.policy.table().counts().idle;
        assert!(idle > 2, "{idle}");
        let mut retired = Vec::new();
        for _ in 0..10 {
            let highest = h.policy.table().iter().filter(|c| c.state == ChildState::Idle).map(|c| c.pid).max();
            let t = h.tick(1000);
            assert!(t.len() <= 1, "{t:?}");
            for a in t {
                let Action::Retire { pid } = a else { panic!("{a:?}") };
                assert_eq!(Some(pid), highest);
                retired.push(pid);
                h.on(Event::Exited { pid });
            }
        }
        assert_eq!(retired.len(), idle - 2);
        assert!(retired.windows(2).all(|w| w[0] > w[1]), "highest first: {retired:?}");
        assert_eq!(h.policy.table().counts().idle, 2);
        assert_eq!(h.policy.stats().crashed, 0);
    }

    #[test]
    fn max_conn_per_child_retires_and_replaces() {
        let mut h = Harness::new(Config { max_conn_per_child: 3, min_spare: 0, max_spare: 1, ..Config::default() });
        let [a] = h.start()[..] else { panic!("one child") };
        for i in 0..3 {
            assert_eq!(h.on(Event::ConnectionPending), [Action::AcceptOrder { pid: a }]);
            h.send(a, RecordKind::Busy);
            let done = h.send(a, RecordKind::Served);
            if i < 2 {
                assert_eq!(done, []);
            } else {
                // Retired and replaced at once, as there is room.
                assert_eq!(done, [Action::Retire { pid: a }, Action::Spawn]);
            }
        }
        assert_eq!(h.policy.table().get(a).map(|c| c.state), Some(ChildState::Retiring));
        let [b] = h.fork_all(&[Action::Spawn])[..] else { panic!("one spawn") };
        assert_eq!(h.on(Event::Exited { pid: a }), []);
        h.send(b, RecordKind::Ready);
        assert_eq!(h.on(Event::ConnectionPending), [Action::AcceptOrder { pid: b }]);
        assert_eq!(h.policy.stats().crashed, 0);
    }

    #[test]
    fn timeouts_kill_then_replace() {
        let config = Config { timeout_child_secs: 10, min_spare: 0, max_spare: 1, ..Config::default() };
        let mut h = Harness::new(config);
        let [a] = h.start()[..] else { panic!("one child") };
        h.on(Event::ConnectionPending);
        h.send(a, RecordKind::Busy);
        for _ in 0..10 {
            assert_eq!(h.tick(1000), []);
        }
        // Killed and replaced in the same maintenance, as there is room.
        assert_eq!(h.tick(1000), [Action::Kill { pid: a }, Action::Spawn]);
        assert_eq!(h.policy.owed_spawns(), 0);
        h.fork_all(&[Action::Spawn]);
        assert_eq!(h.on(Event::Exited { pid: a }), []);
        assert_eq!(h.tick(1000), []);
        assert_eq!(h.policy.table().len(), 1);
        assert_eq!(h.policy.stats().killed, 1);
        assert_eq!(h.policy.stats().crashed, 0);
    }

    #[test]
    fn starting_child_that_never_reports_is_killed() {
        let mut h = Harness::new(Config { timeout_child_secs: 5, ..Config::default() });
        let first = h.on(Event::Tick { now_ms: 0 });
        let [a] = h.fork_all(&first)[..] else { panic!("one spawn") };
        let mut killed = false;
        for _ in 0..7 {
            let t = h.tick(1000);
            killed |= t.contains(&Action::Kill { pid: a });
        }
        assert!(killed);
    }

    #[test]
    fn timeout_zero_disables_kills() {
        let mut h = Harness::new(Config { timeout_child_secs: 0, ..Config::default() });
        let [a] = h.start()[..] else { panic!("one child") };
        h.on(Event::ConnectionPending);
        h.send(a, RecordKind::Busy);
        for _ in 0..1000 {
            let t = h.tick(1000);
            assert!(!t.iter().any(|x| matches!(x, Action::Kill { .. })));
            h.fork_all(&t);
        }
    }

    #[test]
    fn crash_while_busy_is_replaced_and_order_released() {
        let mut h = Harness::new(Config::default());
        let [a] = h.start()[..] else { panic!("one child") };
        assert_eq!(h.on(Event::ConnectionPending), [Action::AcceptOrder { pid: a }]);
        assert!(!h.policy.wants_listener());
        assert_eq!(h.on(Event::Exited { pid: a }), []);
        // The order died with the child: the listener is polled again.
        assert!(h.policy.wants_listener());
        assert_eq!(h.policy.stats().crashed, 1);
        assert_eq!(h.on(Event::ConnectionPending), []);
        assert!(h.policy.waiting());
        let t = h.tick(1000);
        assert_eq!(spawns(&t), 1);
        let [b] = h.fork_all(&t)[..] else { panic!("one spawn") };
        assert_eq!(h.send(b, RecordKind::Ready), [Action::AcceptOrder { pid: b }]);
    }

    #[test]
    fn bad_back_channel_kills() {
        let cases: &[Event] = &[
            Event::BadRecord { pid: 100 },
            Event::Record { pid: 100, record: Record::new(RecordKind::Ready, 999, 0) },
        ];
        for event in cases {
            let mut h = Harness::new(Config::default());
            h.start();
            assert_eq!(h.on(*event), [Action::Kill { pid: 100 }], "{event:?}");
            assert_eq!(h.policy.stats().bad_records, 1);
            // Records after the kill are ignored.
            assert_eq!(h.send(100, RecordKind::Served), []);
            assert_eq!(h.policy.stats().messages(), 0);
        }
    }

    #[test]
    fn out_of_place_records_are_counted_not_trusted() {
        let mut h = Harness::new(Config::default());
        let [a] = h.start()[..] else { panic!("one child") };
        // Busy without an order in ordered mode; Ready twice; a record from a stranger.
        h.send(a, RecordKind::Busy);
        h.send(a, RecordKind::Ready);
        h.send(777, RecordKind::Served);
        assert_eq!(h.policy.stats().protocol_errors, 3);
        // A skipped sequence number.
        h.seq[(a % 256) as usize] += 5;
        h.send(a, RecordKind::Served);
        assert_eq!(h.policy.stats().seq_gaps, 1);
        assert_eq!(h.policy.table().get(a).map(|c| c.state), Some(ChildState::Idle));
    }

    #[test]
    fn reload_retires_all_and_spawns_fresh() {
        let mut h = Harness::new(Config { min_children: 3, max_children: 5, ..Config::default() });
        let old = h.start();
        assert_eq!(h.on(Event::ConnectionPending), [Action::AcceptOrder { pid: old[0] }]);
        h.send(old[0], RecordKind::Busy);
        let r = h.on(Event::Reload);
        let retired: Vec<Pid> =
            r.iter().filter_map(|a| if let Action::Retire { pid } = a { Some(*pid) } else { None }).collect();
        assert_eq!(retired, old);
        // Two free slots now; the third replacement waits for an old child to exit.
        assert_eq!(spawns(&r), 2);
        assert_eq!(h.policy.owed_spawns(), 1);
        let fresh = h.fork_all(&r);
        // An idle old child exits at once and frees its slot.
        let e = h.on(Event::Exited { pid: old[1] });
        assert_eq!(e, [Action::Spawn]);
        let more = h.fork_all(&e);
        // The busy one finishes its request before it exits; no new work goes to old children.
        assert_eq!(h.send(old[0], RecordKind::Served), []);
        assert_eq!(h.on(Event::ConnectionPending), []);
        assert!(h.policy.waiting());
        assert_eq!(h.send(fresh[1], RecordKind::Ready), [Action::AcceptOrder { pid: fresh[1] }]);
        assert_eq!(h.on(Event::Exited { pid: old[0] }), []);
        assert_eq!(h.on(Event::Exited { pid: old[2] }), []);
        assert_eq!(h.policy.table().len(), 3);
        assert!(h.policy.table().iter().all(|c| fresh.contains(&c.pid) || more.contains(&c.pid)));
        assert_eq!(h.policy.stats().crashed, 0);
    }

    #[test]
    fn shutdown_retires_all_and_exits_when_reaped() {
        let mut h = Harness::new(Config { min_children: 2, ..Config::default() });
        let pids = h.start();
        let t = h.tick(1000);
        let late = h.fork_all(&t);
        let s = h.on(Event::Shutdown);
        assert_eq!(s.len(), pids.len() + late.len());
        assert!(s.iter().all(|a| matches!(a, Action::Retire { .. })));
        assert!(!h.policy.wants_listener());
        assert_eq!(h.on(Event::Reload), []);
        assert_eq!(h.tick(1000), []);
        // A fork reported after shutdown is retired at once.
        assert_eq!(h.on(Event::Spawned { pid: 900, now_ms: h.now }), [Action::Retire { pid: 900 }]);
        let mut all: Vec<Pid> = pids.iter().chain(&late).copied().collect();
        all.push(900);
        let last = all.pop().unwrap_or(0);
        for pid in all {
            assert_eq!(h.on(Event::Exited { pid }), []);
        }
        assert_eq!(h.on(Event::Exited { pid: last }), [Action::Exit]);
        assert_eq!(h.tick(1000), []);
    }

    #[test]
    fn shutdown_with_no_children_exits_at_once() {
        let mut h = Harness::new(Config::default());
        assert_eq!(h.on(Event::Shutdown), [Action::Exit]);
    }

    #[test]
    fn unrequested_fork_over_the_limit_is_killed() {
        let mut h = Harness::new(Config { max_children: 1, min_spare: 0, max_spare: 0, ..Config::default() });
        h.start();
        assert_eq!(h.on(Event::Spawned { pid: 5000, now_ms: 0 }), [Action::Kill { pid: 5000 }]);
        assert_eq!(h.policy.table().len(), 1);
        assert_eq!(h.on(Event::Exited { pid: 5000 }), []);
    }

    #[test]
    fn spawn_failure_is_retried_next_tick() {
        let mut h = Harness::new(Config::default());
        let first = h.on(Event::Tick { now_ms: 0 });
        assert_eq!(first, [Action::Spawn]);
        assert_eq!(h.on(Event::SpawnFailed), []);
        assert_eq!(h.policy.spawns_in_flight(), 0);
        assert_eq!(h.tick(1000), [Action::Spawn]);
        assert_eq!(h.policy.stats().spawn_failures, 1);
    }

    #[test]
    fn round_robin_only_scales() {
        let mut h = Harness::new(Config { round_robin: true, ..Config::default() });
        let [a] = h.start()[..] else { panic!("one child") };
        assert!(!h.policy.wants_listener());
        assert_eq!(h.on(Event::ConnectionPending), []);
        assert_eq!(h.send(a, RecordKind::Busy), []);
        assert_eq!(h.policy.table().get(a).map(|c| c.state), Some(ChildState::Busy));
        assert_eq!(spawns(&h.tick(1000)), 1);
        assert_eq!(h.send(a, RecordKind::Served), []);
        assert_eq!(h.policy.table().get(a).map(|c| (c.state, c.connections)), Some((ChildState::Idle, 1)));
        assert_eq!(h.policy.stats().protocol_errors, 0);
        assert_eq!(h.policy.stats().accept_orders, 0);
    }

    #[test]
    fn stats_follow_records_and_table() {
        let mut h = Harness::new(Config { min_children: 2, ..Config::default() });
        let [a, _b] = h.start()[..] else { panic!("two children") };
        h.on(Event::ConnectionPending);
        h.send(a, RecordKind::Busy);
        assert_eq!(h.policy.stats().children.busy, 1);
        assert_eq!(h.policy.stats().children.idle, 1);
        h.on(Event::Record { pid: a, record: Record::served(a, 2, 4096, 12_000, Score(9_000), true) });
        let s = h.policy.stats();
        assert_eq!((s.spam, s.ham, s.bytes, s.children.idle), (1, 0, 4096, 2));
    }

    #[test]
    fn invalid_config_is_refused() {
        assert_eq!(
            Policy::<2>::new(Config::default()).err(),
            Some(ConfigError::MaxChildrenOverCapacity { max_children: 5, capacity: 2 })
        );
    }
}
