//! The prefork policy: events in, actions out, no I/O.

use super::config::{Config, ConfigError};
use super::record::{Record, RecordKind};
use super::stats::Stats;
use super::table::{Child, ChildState, ChildTable, Pid, StateCounts};

/// Something the master saw, turned into the policy's terms by the shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Event {
    /// Time passes (ms, monotonic). Send one at start-up and then every `tick_ms`
    /// or more often: maintenance runs at most once per `tick_ms`.
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
///   time; with no idle child it waits (in the backlog) for the first child to
///   report idle. Nothing is dropped.
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
        actions.push(Action::Spawn);
        true
    }

    fn spawn_owed<const M: usize>(&mut self, actions: &mut Actions<M>) {
        let mut n = 0;
        while self.owed_spawns > 0 && n < self.config.spawn_rate_max && self.spawn(actions) {
            self.owed_spawns -= 1;
            n += 1;
        }
    }

    fn owe_spawn(&mut self) {
        if !self.shutting_down {
            self.owed_spawns = (self.owed_spawns + 1).min(self.config.max_children);
        }
    }

    fn retire<const M: usize>(&mut self, pid: Pid, replace: bool, actions: &mut Actions<M>) {
        let now = self.now_ms;
        if let Some(c) = self.table.get_mut(pid) {
            if matches!(c.state, ChildState::Retiring | ChildState::Killed) {
                return;
            }
            c.set_state(ChildState::Retiring, now);
            c.replace_on_exit = replace;
            actions.push(Action::Retire { pid });
            self.stats.retired = self.stats.retired.saturating_add(1);
        }
    }

    fn kill<const M: usize>(&mut self, pid: Pid, actions: &mut Actions<M>) {
        let now = self.now_ms;
        if let Some(c) = self.table.get_mut(pid) {
            if c.state == ChildState::Killed {
                return;
            }
            c.set_state(ChildState::Killed, now);
            // If it had not yet taken its connection, the listener is polled again.
            c.awaiting_accept = false;
            actions.push(Action::Kill { pid });
            self.stats.killed = self.stats.killed.saturating_add(1);
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
        self.adjust_spares(actions);
        // Keep min_children taking work.
        while self.counts().live() + self.spawns_in_flight < self.config.min_children && self.spawn(actions) {}
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
            self.spawn_rate = if spawned == 0 {
                1
            } else {
                self.spawn_rate.saturating_mul(2).min(self.config.spawn_rate_max)
            };
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
        }
        if child.replace_on_exit {
            self.owe_spawn();
        }
        // An orderly exit frees a slot for a replacement now; crashes wait for the
        // tick, so a child that dies at start-up cannot make the master fork in a loop.
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
        match self.table.lowest_idle() {
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
        if let Some(pid) = self.table.lowest_idle() {
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
            c.replace_on_exit = false;
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
                c.replace_on_exit = false;
                actions.push(Action::Retire { pid: c.pid });
                retired += 1;
            }
        }
        self.stats.retired = self.stats.retired.saturating_add(retired as u64);
        self.owed_spawns = (self.owed_spawns + retired).min(self.config.max_children);
        self.spawn_rate = 1;
        self.spawn_owed(actions);
    }
}
