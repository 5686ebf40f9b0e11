//! The prefork policy: how many children run and which one takes the next connection.
//!
//! Pure logic, no OS: the daemon shell turns what it polls (listener readable,
//! back-channel bytes, reaped children, signals, the clock) into [`Event`]s, calls
//! [`Policy::on`], and carries out the [`Action`]s it gets back. Tests drive the
//! same policy with a fake clock and fake processes.
//!
//! # Semantics (spamd's options, Apache's scaling)
//! - Accept is serialised through the master: the **lowest-pid idle child** gets the
//!   next connection, so under light sequential load one hot child serves everything
//!   and the others stay idle (and may stay swapped out). Round-robin prefork, where
//!   every child accepts in turn, touches every child's memory; it is kept as a
//!   comparison mode ([`Config::round_robin`]) in which the policy only scales.
//! - No idle child: the connection waits in the backlog and goes to the first child
//!   that reports idle. Nothing is dropped.
//! - At most [`Config::max_busy`] children serve at once (each counted for the first
//!   [`Config::busy_grace_ms`] of its connection); a further connection waits the
//!   same way. Scans are CPU work: past the CPUs, more at once only take turns.
//! - Too few idle children: spawn 1, 2, 4, … per tick up to 32 while the shortage
//!   lasts, never above `max_children`. Too many: retire the highest-pid idle child,
//!   one per tick.
//! - A child over `timeout_child` is killed; one that crashes, is killed or reaches
//!   `max_conn_per_child` is replaced. Reload retires every child gracefully and
//!   spawns fresh ones.
//!
//! # Shell contract
//! - Send `Tick` with the current time at start-up and whenever the master wakes
//!   (at least every [`Config::tick_ms`], and by [`Policy::wake_by_ms`] when it says
//!   so): busy times are measured from it.
//! - Poll the listeners only while [`Policy::wants_listener`]; report a readable one
//!   as `ConnectionPending`. At most one accept order is outstanding, so a
//!   level-triggered repeat never hands one connection to two children.
//! - Two ways to carry out `AcceptOrder { pid }`, to be measured against each other:
//!   - child-accept: write an order on the child's channel; the child accepts and
//!     sends a `Busy` record (two back-channel writes per message). Its accept must
//!     not block: if the connection is gone it sends `NoVerdict`;
//!   - fd-passing: accept in the master *before* reporting `ConnectionPending`, hold
//!     the descriptor, send it to `pid` with `SCM_RIGHTS`, then report `Accepted`
//!     (one back-channel write per message).
//! - A child writes its `Served` record *before* it closes the client's connection,
//!   and the master reads back-channels before listeners: then a client's next
//!   connection finds the hot child already idle, and one child serves a sequential
//!   load (the simulation shows a second child creeping in otherwise).
//! - Read each child's back-channel through its own [`RecordReader`]; report every
//!   record as `Record`, a decode error as `BadRecord`. Drain a child's channel
//!   before reporting it `Exited`.
//! - Report forks as `Spawned`/`SpawnFailed`, reaped children as `Exited`.
//! - After `Shutdown` stop polling and close the listeners; exit on `Action::Exit`.
//!
//! # Example
//! ```
//! use sift_core::prefork::{Action, Actions, Config, Event, Policy, Record, RecordKind, ACTIONS_SLACK};
//!
//! const MAX: usize = 8;
//! let mut policy = Policy::<MAX>::new(Config::default()).map_err(|e| e.to_string())?;
//! let mut actions = Actions::<{ MAX + ACTIONS_SLACK }>::new();
//! policy.on(Event::Tick { now_ms: 0 }, &mut actions);
//! assert_eq!(actions.as_slice(), [Action::Spawn]);
//! policy.on(Event::Spawned { pid: 4242, now_ms: 0 }, &mut actions);
//! let ready = Record::new(RecordKind::Ready, 4242, 0);
//! policy.on(Event::Record { pid: 4242, record: ready }, &mut actions);
//! policy.on(Event::ConnectionPending, &mut actions);
//! assert_eq!(actions.as_slice(), [Action::AcceptOrder { pid: 4242 }]);
//! # Ok::<(), String>(())
//! ```

pub mod config;
pub mod policy;
pub mod record;
pub mod stats;
pub mod table;

#[cfg(test)]
mod sim;

pub use config::{Config, ConfigError, SPAWN_RATE_MAX};
pub use policy::{Action, Actions, Event, Policy, ACTIONS_SLACK};
pub use record::{decode, encode, Record, RecordError, RecordKind, RecordReader};
pub use stats::{write_prometheus, Stats};
pub use table::{Child, ChildState, ChildTable, Pid, StateCounts};
