//! siftd for Linux: everything shared lives in siftd-common; this shell adds the
//! Linux-only pieces (parent-death signal, seccomp sandbox of the children).
#![deny(unsafe_code)]

mod sys;

use std::process::ExitCode;

use siftd_common::daemon::Platform;

/// Linux's per-child setup and sandbox.
struct Linux;

impl Platform for Linux {
    fn child_setup(&self, master: libc::pid_t) -> std::io::Result<()> {
        sys::die_with_parent(master)
    }

    fn sandbox_child(&self) -> std::io::Result<()> {
        sys::confine_child()
    }

    /// Linux copies a TCP listener's socket options, timeouts included, into each
    /// connection it accepts (not a UNIX listener's).
    fn tcp_connections_inherit_timeouts(&self) -> bool {
        true
    }
}

/// The system allocator in the master; pages of its own in each child (see `ForkAllocator`).
#[global_allocator]
static ALLOCATOR: siftd_common::sys::ForkAllocator = siftd_common::sys::ForkAllocator;

fn main() -> ExitCode {
    siftd_common::entry::main(&Linux)
}
