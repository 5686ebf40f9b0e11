//! siftd for FreeBSD, NetBSD and OpenBSD: everything shared lives in siftd-common; this
//! shell adds each system's own mechanisms (kqueue, procctl, Capsicum, pledge/unveil,
//! SO_NOSIGPIPE, accept filters, kinfo_proc). On other hosts, or built with
//! `--cfg siftd_force_poll`, the master waits with poll(2) instead of kqueue, so the
//! shell's portable parts run, and are tested, on Linux.
#![deny(unsafe_code)]

mod sys;

use std::io;
use std::os::fd::RawFd;
use std::process::ExitCode;

use siftd_common::daemon::{MasterFiles, Platform};

/// The BSDs' per-process setup and sandboxes.
struct Bsd;

impl Platform for Bsd {
    fn child_setup(&self, master: libc::pid_t) -> io::Result<()> {
        sys::die_with_parent(master)
    }

    fn sandbox_child(&self) -> io::Result<()> {
        sys::sandbox_child(false)
    }

    fn sandbox_accepting_child(&self) -> io::Result<()> {
        sys::sandbox_child(true)
    }

    #[cfg(all(any(target_os = "freebsd", target_os = "netbsd", target_os = "openbsd"), not(siftd_force_poll)))]
    fn event_loop(&self, signals: &[libc::c_int]) -> io::Result<Box<dyn siftd_common::events::EventLoop>> {
        Ok(Box::new(sys::Kqueue::new(signals)?))
    }

    fn prepare_connection(&self, conn: RawFd) -> io::Result<()> {
        sys::no_sigpipe(conn)
    }

    fn set_accept_filter(&self, listener: RawFd, name: &str) -> io::Result<bool> {
        sys::accept_filter(listener, name)
    }

    fn sandbox_master(&self, files: &MasterFiles) -> io::Result<()> {
        sys::sandbox_master(files)
    }

    #[cfg(any(target_os = "freebsd", target_os = "netbsd", target_os = "openbsd"))]
    fn process_memory(&self, pid: libc::pid_t) -> io::Result<siftd_common::daemon::ProcessMemory> {
        sys::process_memory(pid)
    }
}

/// The system allocator in the master; pages of its own in each child (see `ForkAllocator`).
#[global_allocator]
static ALLOCATOR: siftd_common::sys::ForkAllocator = siftd_common::sys::ForkAllocator;

fn main() -> ExitCode {
    siftd_common::entry::main(&Bsd)
}
