//! How the master waits: a listener has a connection, a back-channel has a record (or
//! closed), a signal arrived, a child exited, or the tick ran out. [`PollLoop`] is the
//! portable backend (poll(2) and a self-pipe for signals); a shell may bring its own
//! (kqueue on the BSDs) through `Platform::event_loop`.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::sys;

/// A set of signal numbers (1 to 63).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SignalSet(u64);

impl SignalSet {
    /// Adds `signal`; numbers outside 1..64 are ignored.
    pub fn insert(&mut self, signal: libc::c_int) {
        if let Some(bit) = Self::bit(signal) {
            self.0 |= bit;
        }
    }

    /// Whether `signal` is in the set.
    pub fn contains(&self, signal: libc::c_int) -> bool {
        Self::bit(signal).is_some_and(|bit| self.0 & bit != 0)
    }

    /// Whether no signal is in the set.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    fn bit(signal: libc::c_int) -> Option<u64> {
        u32::try_from(signal).ok().filter(|s| (1..64).contains(s)).map(|s| 1u64 << s)
    }
}

/// What one wait found. All empty when the timeout ran out.
#[derive(Debug, Default)]
pub struct Ready {
    /// Listeners with a connection pending, by the index given to `add_listener`.
    pub listeners: Vec<usize>,
    /// Children whose back-channel has data or was closed.
    pub channels: Vec<libc::pid_t>,
    /// Signals that arrived (child exits are reported in `child_exited` instead).
    pub signals: SignalSet,
    /// Some child exited: reap with waitpid.
    pub child_exited: bool,
}

impl Ready {
    /// Empties every field, keeping the allocations.
    pub fn clear(&mut self) {
        self.listeners.clear();
        self.channels.clear();
        self.signals = SignalSet::default();
        self.child_exited = false;
    }

    /// Whether nothing happened (the wait timed out).
    pub fn is_empty(&self) -> bool {
        self.listeners.is_empty() && self.channels.is_empty() && self.signals.is_empty() && !self.child_exited
    }
}

/// The master's wait. The master owns every fd it registers and calls
/// [`EventLoop::remove_channel`] before it closes a back-channel.
pub trait EventLoop {
    /// Watches a listening socket; `index` names it in [`Ready::listeners`].
    fn add_listener(&mut self, index: usize, fd: RawFd) -> io::Result<()>;

    /// Turns the listeners on or off: off while a connection waits for an idle child.
    fn watch_listeners(&mut self, on: bool) -> io::Result<()>;

    /// Watches a new child: its back-channel for records and the process for its exit.
    fn add_child(&mut self, pid: libc::pid_t, channel: RawFd) -> io::Result<()>;

    /// Stops watching a child's back-channel (the master is about to close it).
    fn remove_channel(&mut self, pid: libc::pid_t) -> io::Result<()>;

    /// Waits up to `timeout_ms` and fills `ready` (which the caller has cleared).
    fn wait(&mut self, timeout_ms: i32, ready: &mut Ready) -> io::Result<()>;

    /// In a freshly forked child: releases what the master's loop holds, without
    /// touching the master's registrations.
    fn forget_in_child(&mut self);
}

/// The portable backend: poll(2) over the registered fds and a self-pipe that the
/// signal handlers write to. SIGCHLD is always caught and reported as a child exit.
pub struct PollLoop {
    signals: OwnedFd,
    listeners: Vec<(usize, RawFd)>,
    listening: bool,
    channels: Vec<(libc::pid_t, RawFd)>,
    fds: Vec<libc::pollfd>,
}

impl PollLoop {
    /// Catches `signals` (plus SIGCHLD) through the self-pipe.
    pub fn new(signals: &[libc::c_int]) -> io::Result<PollLoop> {
        let mut caught = signals.to_vec();
        if !caught.contains(&libc::SIGCHLD) {
            caught.push(libc::SIGCHLD);
        }
        Ok(PollLoop { signals: sys::signal_pipe(&caught)?, listeners: Vec::new(), listening: true, channels: Vec::new(), fds: Vec::new() })
    }

    fn drain_signals(&self, ready: &mut Ready) {
        let mut buf = [0u8; 64];
        while let Ok(n) = sys::read(self.signals.as_raw_fd(), &mut buf) {
            if n == 0 {
                break;
            }
            for &s in buf.get(..n).unwrap_or(&[]) {
                let s = libc::c_int::from(s);
                if s == libc::SIGCHLD {
                    ready.child_exited = true;
                } else {
                    ready.signals.insert(s);
                }
            }
        }
    }
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd { fd, events: libc::POLLIN, revents: 0 }
}

impl EventLoop for PollLoop {
    fn add_listener(&mut self, index: usize, fd: RawFd) -> io::Result<()> {
        self.listeners.push((index, fd));
        Ok(())
    }

    fn watch_listeners(&mut self, on: bool) -> io::Result<()> {
        self.listening = on;
        Ok(())
    }

    fn add_child(&mut self, pid: libc::pid_t, channel: RawFd) -> io::Result<()> {
        self.channels.push((pid, channel));
        Ok(())
    }

    fn remove_channel(&mut self, pid: libc::pid_t) -> io::Result<()> {
        self.channels.retain(|&(p, _)| p != pid);
        Ok(())
    }

    fn wait(&mut self, timeout_ms: i32, ready: &mut Ready) -> io::Result<()> {
        self.fds.clear();
        self.fds.push(pollfd(self.signals.as_raw_fd()));
        self.fds.extend(self.channels.iter().map(|&(_, fd)| pollfd(fd)));
        if self.listening {
            self.fds.extend(self.listeners.iter().map(|&(_, fd)| pollfd(fd)));
        }
        sys::poll(&mut self.fds, timeout_ms)?;
        let (signal, rest) = self.fds.split_first().map_or((false, &[][..]), |(s, rest)| (s.revents != 0, rest));
        let (channels, listeners) = rest.split_at(self.channels.len().min(rest.len()));
        for (p, &(pid, _)) in channels.iter().zip(&self.channels) {
            if p.revents != 0 {
                ready.channels.push(pid);
            }
        }
        for (p, &(index, _)) in listeners.iter().zip(&self.listeners) {
            if p.revents != 0 {
                ready.listeners.push(index);
            }
        }
        if signal {
            self.drain_signals(ready);
        }
        Ok(())
    }

    fn forget_in_child(&mut self) {
        let _ = sys::close(self.signals.as_raw_fd());
        sys::forget_signal_pipe();
    }
}

/// Drives `events` through every kind of event and says what it failed to report.
/// Each backend's tests call it; `events` must watch SIGUSR1, and no other child of
/// this process may exit meanwhile (it reaps with waitpid(-1)).
pub fn conformance(events: &mut dyn EventLoop) -> Result<(), String> {
    use std::io::Write;
    let mut ready = Ready::default();
    let mut wait_for = |events: &mut dyn EventLoop, what: &str, done: &dyn Fn(&Ready) -> bool| -> Result<(), String> {
        for _ in 0..50 {
            ready.clear();
            events.wait(100, &mut ready).map_err(|e| format!("wait for {what}: {e}"))?;
            if done(&ready) {
                return Ok(());
            }
        }
        Err(format!("{what}: not reported within 5 s"))
    };

    // A child that writes one byte on its back-channel, then exits when the channel closes.
    let (master_end, child_end) = sys::socketpair().map_err(|e| e.to_string())?;
    let pid = match sys::fork().map_err(|e| e.to_string())? {
        sys::Fork::Child => {
            let _ = sys::close(master_end.as_raw_fd());
            let mut byte = [0u8; 1];
            let _ = sys::write_all(child_end.as_raw_fd(), b"r");
            while sys::read(child_end.as_raw_fd(), &mut byte).is_ok_and(|n| n > 0) {}
            sys::exit_now(0)
        }
        sys::Fork::Parent(pid) => pid,
    };
    drop(child_end);
    events.add_child(pid, master_end.as_raw_fd()).map_err(|e| format!("add_child: {e}"))?;
    wait_for(events, "a readable back-channel", &|r| r.channels.contains(&pid))?;
    let mut byte = [0u8; 1];
    sys::read(master_end.as_raw_fd(), &mut byte).map_err(|e| e.to_string())?;

    // Nothing pending: a short wait times out empty.
    let mut quiet = Ready::default();
    events.wait(50, &mut quiet).map_err(|e| format!("quiet wait: {e}"))?;
    if !quiet.is_empty() {
        return Err(format!("nothing pending, yet the wait reported {quiet:?}"));
    }

    // A listener with a pending connection, switched off and on again.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    events.add_listener(7, listener.as_raw_fd()).map_err(|e| format!("add_listener: {e}"))?;
    let mut client = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    let _ = client.write_all(b"x");
    wait_for(events, "a pending connection", &|r| r.listeners == [7])?;
    events.watch_listeners(false).map_err(|e| e.to_string())?;
    let mut off = Ready::default();
    events.wait(50, &mut off).map_err(|e| e.to_string())?;
    if !off.listeners.is_empty() {
        return Err("a listener switched off was still reported".into());
    }
    events.watch_listeners(true).map_err(|e| e.to_string())?;
    wait_for(events, "the listener switched on again", &|r| r.listeners == [7])?;
    drop(listener.accept());

    // A signal.
    sys::kill(sys::getpid(), libc::SIGUSR1).map_err(|e| e.to_string())?;
    wait_for(events, "SIGUSR1", &|r| r.signals.contains(libc::SIGUSR1))?;

    // The child exits once its channel closes.
    events.remove_channel(pid).map_err(|e| format!("remove_channel: {e}"))?;
    drop(master_end);
    wait_for(events, "the child's exit", &|r| r.child_exited)?;
    loop {
        match sys::reap_child() {
            Ok(Some((p, _))) if p == pid => return Ok(()),
            Ok(Some(_)) => {}
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(10)),
            Err(e) => return Err(format!("waitpid: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_set_table() {
        let cases: &[(&[libc::c_int], libc::c_int, bool)] = &[
            (&[], libc::SIGHUP, false),
            (&[libc::SIGHUP], libc::SIGHUP, true),
            (&[libc::SIGHUP], libc::SIGTERM, false),
            (&[libc::SIGTERM, libc::SIGUSR1], libc::SIGUSR1, true),
            (&[0, -1, 64, 200], 0, false),
            (&[63], 63, true),
        ];
        for &(inserted, probe, want) in cases {
            let mut set = SignalSet::default();
            for &s in inserted {
                set.insert(s);
            }
            assert_eq!(set.contains(probe), want, "{inserted:?} contains {probe}");
        }
        let mut set = SignalSet::default();
        set.insert(64);
        assert!(set.is_empty(), "out-of-range numbers are not stored");
    }

    #[test]
    fn poll_loop_reports_every_kind_of_event() {
        let mut events = PollLoop::new(&[libc::SIGUSR1]).expect("poll loop");
        if let Err(e) = conformance(&mut events) {
            panic!("{e}");
        }
    }
}
