//! Linux-only system calls.

#![allow(unsafe_code)]

use std::io;

/// Asks the kernel to send SIGTERM to this process when its parent (the master) dies,
/// then checks the parent did not die before the request took effect.
pub fn die_with_parent(master: libc::pid_t) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number; the remaining arguments are unused.
    let rc = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if siftd_common::sys::getppid() != master {
        return Err(io::Error::other("master exited before the child started"));
    }
    Ok(())
}
