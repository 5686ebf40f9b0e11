//! The child table: one fixed-capacity entry per child process, kept in pid order.

use core::fmt;

/// A child's process id as the master sees it.
pub type Pid = u32;

/// What a child is doing, as far as the master knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ChildState {
    /// Forked, has not yet reported ready.
    Starting,
    /// Waiting for an accept order.
    Idle,
    /// Ordered to accept, or serving a connection.
    Busy,
    /// Told to finish what it has and exit; gets no more work.
    Retiring,
    /// Sent a kill; waiting to be reaped.
    Killed,
}

impl ChildState {
    /// One letter per state, as spamd logs them (`S I B R K`).
    pub fn letter(self) -> char {
        match self {
            ChildState::Starting => 'S',
            ChildState::Idle => 'I',
            ChildState::Busy => 'B',
            ChildState::Retiring => 'R',
            ChildState::Killed => 'K',
        }
    }
}

/// What the master knows of one child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Child {
    /// The child's pid.
    pub pid: Pid,
    /// Its state.
    pub state: ChildState,
    /// Connections it has taken, counted against `max_conn_per_child`.
    pub connections: u32,
    /// When it was given its current connection (ms), while it has one.
    pub busy_since_ms: Option<u64>,
    /// When it was forked (ms).
    pub spawned_ms: u64,
    /// When it entered its current state (ms).
    pub state_since_ms: u64,
    /// It was ordered to accept and has not yet confirmed taking the connection.
    pub awaiting_accept: bool,
    /// The last record sequence number it sent.
    pub last_seq: Option<u32>,
}

impl Child {
    /// A child just forked at `now_ms`.
    pub const fn starting(pid: Pid, now_ms: u64) -> Child {
        Child {
            pid,
            state: ChildState::Starting,
            connections: 0,
            busy_since_ms: None,
            spawned_ms: now_ms,
            state_since_ms: now_ms,
            awaiting_accept: false,
            last_seq: None,
        }
    }

    /// Moves to `state` at `now_ms`.
    pub fn set_state(&mut self, state: ChildState, now_ms: u64) {
        if self.state != state {
            self.state = state;
            self.state_since_ms = now_ms;
        }
    }

    /// Will take work now or soon (starting, idle or busy): not on its way out.
    pub fn is_live(&self) -> bool {
        matches!(self.state, ChildState::Starting | ChildState::Idle | ChildState::Busy)
    }
}

/// Number of children in each state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StateCounts {
    /// Forked, not yet ready.
    pub starting: usize,
    /// Waiting for work.
    pub idle: usize,
    /// Accepting or serving.
    pub busy: usize,
    /// Finishing before exit.
    pub retiring: usize,
    /// Killed, not yet reaped.
    pub killed: usize,
}

impl StateCounts {
    /// All children that exist as processes.
    pub fn total(&self) -> usize {
        self.starting + self.idle + self.busy + self.retiring + self.killed
    }

    /// Children that take or will take work.
    pub fn live(&self) -> usize {
        self.starting + self.idle + self.busy
    }
}

/// The table was full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TableFull;

impl fmt::Display for TableFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("child table is full")
    }
}

/// Up to `N` children, sorted by pid so the lowest and highest idle child are a scan away.
#[derive(Debug, Clone, Default)]
pub struct ChildTable<const N: usize> {
    children: heapless::Vec<Child, N>,
}

impl<const N: usize> ChildTable<N> {
    /// An empty table.
    pub const fn new() -> Self {
        ChildTable { children: heapless::Vec::new() }
    }

    /// How many children fit.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Children held.
    pub fn len(&self) -> usize {
        self.children.len()
    }

    /// No children.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// No room for another child.
    pub fn is_full(&self) -> bool {
        self.children.is_full()
    }

    /// Adds `child`, replacing an entry with the same pid (a pid reused before its
    /// exit was seen). Returns the replaced entry.
    pub fn insert(&mut self, child: Child) -> Result<Option<Child>, TableFull> {
        let at = self.children.partition_point(|c| c.pid < child.pid);
        if let Some(slot) = self.children.get_mut(at).filter(|c| c.pid == child.pid) {
            let old = *slot;
            *slot = child;
            return Ok(Some(old));
        }
        self.children.insert(at, child).map_err(|_| TableFull)?;
        Ok(None)
    }

    /// Removes and returns the child `pid`.
    pub fn remove(&mut self, pid: Pid) -> Option<Child> {
        let found = self.get(pid).copied();
        if found.is_some() {
            self.children.retain(|c| c.pid != pid);
        }
        found
    }

    /// The child `pid`.
    pub fn get(&self, pid: Pid) -> Option<&Child> {
        self.children.iter().find(|c| c.pid == pid)
    }

    /// The child `pid`, to update.
    pub fn get_mut(&mut self, pid: Pid) -> Option<&mut Child> {
        self.children.iter_mut().find(|c| c.pid == pid)
    }

    /// All children, lowest pid first.
    pub fn iter(&self) -> core::slice::Iter<'_, Child> {
        self.children.iter()
    }

    /// All children, lowest pid first, to update.
    pub fn iter_mut(&mut self) -> core::slice::IterMut<'_, Child> {
        self.children.iter_mut()
    }

    /// The idle child with the lowest pid: the one to give the next connection, so
    /// that under light load one hot child serves everything.
    pub fn lowest_idle(&self) -> Option<Pid> {
        self.children.iter().find(|c| c.state == ChildState::Idle).map(|c| c.pid)
    }

    /// The idle child with the highest pid: the one to retire first.
    pub fn highest_idle(&self) -> Option<Pid> {
        self.children.iter().rev().find(|c| c.state == ChildState::Idle).map(|c| c.pid)
    }

    /// Children with an accept order not yet confirmed.
    pub fn orders_outstanding(&self) -> usize {
        self.children.iter().filter(|c| c.awaiting_accept).count()
    }

    /// Children not killed that took their connection less than `grace_ms` before
    /// `now_ms`: those `Config::max_busy` counts.
    pub fn busy_within(&self, now_ms: u64, grace_ms: u64) -> usize {
        self.children
            .iter()
            .filter(|c| c.state != ChildState::Killed && c.busy_since_ms.is_some_and(|t| now_ms.saturating_sub(t) < grace_ms))
            .count()
    }

    /// Children per state.
    pub fn counts(&self) -> StateCounts {
        let mut n = StateCounts::default();
        for c in &self.children {
            match c.state {
                ChildState::Starting => n.starting += 1,
                ChildState::Idle => n.idle += 1,
                ChildState::Busy => n.busy += 1,
                ChildState::Retiring => n.retiring += 1,
                ChildState::Killed => n.killed += 1,
            }
        }
        n
    }

    /// The states as a row of letters in pid order, e.g. `IBBS` (spamd's
    /// "child states" log line).
    pub fn states(&self) -> StateLetters<'_> {
        StateLetters(&self.children)
    }
}

/// Formats children's states as letters; see [`ChildTable::states`].
#[derive(Debug, Clone, Copy)]
pub struct StateLetters<'a>(&'a [Child]);

impl fmt::Display for StateLetters<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write;
        for c in self.0 {
            f.write_char(c.state.letter())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn table(entries: &[(Pid, ChildState)]) -> ChildTable<8> {
        let mut t = ChildTable::new();
        for &(pid, state) in entries {
            let mut c = Child::starting(pid, 0);
            c.state = state;
            assert_eq!(t.insert(c), Ok(None));
        }
        t
    }

    type Entries = &'static [(Pid, ChildState)];

    #[test]
    fn lowest_and_highest_idle_table() {
        use ChildState::*;
        let cases: &[(Entries, Option<Pid>, Option<Pid>)] = &[
            (&[], None, None),
            (&[(5, Busy), (3, Starting)], None, None),
            (&[(9, Idle)], Some(9), Some(9)),
            (&[(30, Idle), (10, Idle), (20, Busy)], Some(10), Some(30)),
            (&[(7, Retiring), (8, Idle), (2, Killed), (40, Idle), (11, Busy)], Some(8), Some(40)),
        ];
        for (entries, low, high) in cases {
            let t = table(entries);
            assert_eq!(t.lowest_idle(), *low, "{entries:?}");
            assert_eq!(t.highest_idle(), *high, "{entries:?}");
        }
    }

    #[test]
    fn busy_within_table() {
        use ChildState::*;
        // (state, busy since ms) per child; at 1,000 ms with a 100 ms grace.
        type Busy = &'static [(ChildState, Option<u64>)];
        let cases: &[(Busy, usize)] = &[
            (&[], 0),
            (&[(Idle, None), (Starting, None)], 0),
            (&[(Busy, Some(950)), (Busy, Some(901)), (Busy, Some(900)), (Busy, Some(10))], 2),
            (&[(Retiring, Some(990)), (Killed, Some(990)), (Busy, Some(1_000))], 2),
        ];
        for (children, want) in cases {
            let mut t: ChildTable<8> = ChildTable::new();
            for (i, &(state, since)) in children.iter().enumerate() {
                let mut c = Child::starting(i as Pid + 1, 0);
                (c.state, c.busy_since_ms) = (state, since);
                assert_eq!(t.insert(c), Ok(None));
            }
            assert_eq!(t.busy_within(1_000, 100), *want, "{children:?}");
        }
    }

    #[test]
    fn kept_in_pid_order_with_letters_and_counts() {
        use ChildState::*;
        let t = table(&[(50, Busy), (10, Idle), (30, Starting), (20, Retiring), (40, Killed)]);
        assert_eq!(t.iter().map(|c| c.pid).collect::<std::vec::Vec<_>>(), [10, 20, 30, 40, 50]);
        assert_eq!(t.states().to_string(), "IRSKB");
        let n = t.counts();
        assert_eq!((n.starting, n.idle, n.busy, n.retiring, n.killed), (1, 1, 1, 1, 1));
        assert_eq!((n.total(), n.live()), (5, 3));
    }

    #[test]
    fn insert_full_replace_and_remove() {
        let mut t: ChildTable<2> = ChildTable::new();
        assert_eq!(t.insert(Child::starting(1, 0)), Ok(None));
        assert_eq!(t.insert(Child::starting(2, 0)), Ok(None));
        assert_eq!(t.insert(Child::starting(3, 0)), Err(TableFull));
        let old = t.insert(Child::starting(2, 99)).ok().flatten();
        assert_eq!(old.map(|c| c.spawned_ms), Some(0));
        assert_eq!(t.get(2).map(|c| c.spawned_ms), Some(99));
        assert_eq!(t.remove(1).map(|c| c.pid), Some(1));
        assert_eq!(t.remove(1), None);
        assert_eq!(t.len(), 1);
    }
}
