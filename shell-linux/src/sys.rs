//! Linux-only system calls: parent-death signal and the children's seccomp sandbox.

#![allow(unsafe_code)]
// Architectures without a syscall list get no filter (see confine_child).
#![cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(dead_code))]

use std::io;
use std::mem;

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

// AUDIT_ARCH_* from linux/audit.h (the libc crate lacks them): ELF machine | 64-bit | little-endian.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// The system calls a child makes once set up, as `strace -f` shows them under spamc load
/// (all commands, compressed and oversized requests, stalled clients, round-robin, every
/// log sink, reload), plus the ones a code path it can take may make.
#[cfg(target_arch = "x86_64")]
pub const CHILD_SYSCALLS: &[libc::c_long] = &[
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_recvmsg, // connections from the master
    libc::SYS_sendto,  // syslog over the /dev/log socket opened before fork
    libc::SYS_close,
    libc::SYS_fcntl, // std's debug check that an fd is open before it closes it
    libc::SYS_getpid, // log lines carry the pid
    libc::SYS_poll,   // --round-robin
    libc::SYS_accept4, // --round-robin
    libc::SYS_setsockopt, // --round-robin: --timeout-tcp on what it accepts
    libc::SYS_brk,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mremap,  // the allocator's realloc of large blocks
    libc::SYS_madvise, // the allocator returning pages (musl)
    libc::SYS_clock_gettime, // vDSO calls that fall back to the kernel on some clock sources
    libc::SYS_time,
    libc::SYS_getrandom, // std seeds a thread's HashMap keys once (the lazy DFAs' state maps)
    libc::SYS_restart_syscall, // the kernel restarting a call after SIGSTOP/SIGCONT
    libc::SYS_exit_group,
];

/// The system calls a child makes once set up (see the x86_64 list; aarch64 has no
/// `poll` and `time`: libc uses `ppoll` and `clock_gettime`).
#[cfg(target_arch = "aarch64")]
pub const CHILD_SYSCALLS: &[libc::c_long] = &[
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_recvmsg,
    libc::SYS_sendto,
    libc::SYS_close,
    libc::SYS_fcntl,
    libc::SYS_getpid,
    libc::SYS_ppoll,
    libc::SYS_accept4,
    libc::SYS_setsockopt,
    libc::SYS_brk,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_clock_gettime,
    libc::SYS_getrandom,
    libc::SYS_restart_syscall,
    libc::SYS_exit_group,
];

/// Calls that fail with EPERM instead of killing the child: libc's syslog opens and
/// connects a new /dev/log socket when syslogd restarted, and a lost log line is better
/// than a dead child. Without `socket` the child can reach no new peer.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub const CHILD_SOFT_DENIED: &[libc::c_long] = &[libc::SYS_socket, libc::SYS_connect];

/// What the filter does with one system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterAction {
    /// The call runs.
    Allow,
    /// The call fails with this errno.
    Errno(u16),
    /// The whole process dies of SIGSYS.
    KillProcess,
}

impl FilterAction {
    /// The seccomp return value that asks for this action.
    pub fn ret(self) -> u32 {
        match self {
            FilterAction::Allow => libc::SECCOMP_RET_ALLOW,
            FilterAction::Errno(e) => libc::SECCOMP_RET_ERRNO | (u32::from(e) & libc::SECCOMP_RET_DATA),
            FilterAction::KillProcess => libc::SECCOMP_RET_KILL_PROCESS,
        }
    }
}

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter { code: code as u16, jt: 0, jf: 0, k }
}

fn skip_unless_equal(k: u32) -> libc::sock_filter {
    libc::sock_filter { code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16, jt: 0, jf: 1, k }
}

/// A seccomp-bpf program: kill on any audit architecture but `arch`, run the `allow`
/// calls, fail the `soft_denied` ones with EPERM, kill on everything else.
///
/// Unlisted calls kill rather than fail: the master logs the death and forks a fresh
/// child, so a call missing from the list shows at once instead of as a subtly wrong
/// answer, and code injected into a child learns nothing by probing. On x86_64 the x32
/// calls (number | 0x40000000) carry the same audit architecture; no listed number has
/// that bit, so they die too.
pub fn filter_program(arch: u32, allow: &[libc::c_long], soft_denied: &[libc::c_long]) -> Vec<libc::sock_filter> {
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    let mut p = vec![
        stmt(load, mem::offset_of!(libc::seccomp_data, arch) as u32),
        libc::sock_filter { code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16, jt: 1, jf: 0, k: arch },
        stmt(ret, FilterAction::KillProcess.ret()),
        stmt(load, mem::offset_of!(libc::seccomp_data, nr) as u32),
    ];
    let groups = [(allow, FilterAction::Allow), (soft_denied, FilterAction::Errno(libc::EPERM as u16))];
    for (calls, action) in groups {
        for &nr in calls {
            p.push(skip_unless_equal(nr as u32));
            p.push(stmt(ret, action.ret()));
        }
    }
    p.push(stmt(ret, FilterAction::KillProcess.ret()));
    p
}

/// Confines the calling process to what a child needs to serve: no new privileges (no
/// set-uid exec) and the seccomp filter of [`CHILD_SYSCALLS`]; on architectures without
/// a list, only no-new-privileges.
pub fn confine_child() -> io::Result<()> {
    // The master loaded the time zone before forking; this is in case it did not.
    siftd_common::sys::load_timezone();
    // SAFETY: PR_SET_NO_NEW_PRIVS takes the value 1; the remaining arguments must be 0.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    install_filter(&filter_program(AUDIT_ARCH, CHILD_SYSCALLS, CHILD_SOFT_DENIED))?;
    Ok(())
}

/// Installs a seccomp-bpf program on the calling thread (and what it forks or execs).
pub fn install_filter(program: &[libc::sock_filter]) -> io::Result<()> {
    let len = u16::try_from(program.len()).map_err(|_| io::Error::other("seccomp program too long"))?;
    let fprog = libc::sock_fprog { len, filter: program.as_ptr().cast_mut() };
    // SAFETY: fprog points at `len` valid instructions that outlive the call; the kernel copies them.
    let rc = unsafe {
        libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER as libc::c_ulong, &fprog as *const libc::sock_fprog as libc::c_ulong, 0, 0)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Raw system calls for the sandbox tests, which must reach the kernel with exactly
/// the call under test (std and libc add calls of their own around them).
#[cfg(test)]
#[allow(dead_code)]
pub mod probe {
    use std::ffi::CStr;
    use std::io;

    /// open(2) itself; on aarch64, which has no open, openat(2).
    pub fn open(path: &CStr) -> io::Result<()> {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a valid NUL-terminated path and flags; the fd is closed below.
        let fd = unsafe { libc::syscall(libc::SYS_open, path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: as above.
        let fd = unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        close_result(fd)
    }

    /// openat(2) itself.
    pub fn openat(path: &CStr) -> io::Result<()> {
        // SAFETY: a valid NUL-terminated path and flags; the fd is closed below.
        let fd = unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        close_result(fd)
    }

    /// socket(2) for TCP over IPv4.
    pub fn socket_inet() -> io::Result<()> {
        // SAFETY: plain integer arguments; the fd is closed below.
        let fd = unsafe { libc::syscall(libc::SYS_socket, libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        close_result(fd)
    }

    /// execve(2) of `path` with no arguments beyond its name and no environment;
    /// returns only on failure.
    pub fn execve(path: &CStr) -> io::Error {
        let argv = [path.as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null::<libc::c_char>()];
        // SAFETY: NUL-terminated path, NULL-terminated argv and envp that outlive the call.
        unsafe { libc::syscall(libc::SYS_execve, path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        io::Error::last_os_error()
    }

    fn close_result(fd: libc::c_long) -> io::Result<()> {
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by the kernel and is owned here.
        unsafe { libc::close(fd as libc::c_int) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a seccomp program the way the kernel does, for the instructions it uses.
    fn run(program: &[libc::sock_filter], arch: u32, nr: u32) -> u32 {
        let mut acc = 0u32;
        let mut pc = 0usize;
        while let Some(ins) = program.get(pc) {
            let code = u32::from(ins.code);
            if code == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS {
                acc = if ins.k == 0 { nr } else { arch };
                pc += 1;
            } else if code == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K {
                pc += 1 + usize::from(if acc == ins.k { ins.jt } else { ins.jf });
            } else if code == libc::BPF_RET | libc::BPF_K {
                return ins.k;
            } else {
                panic!("instruction {code:#x} not expected");
            }
        }
        panic!("program ran off its end");
    }

    #[test]
    fn filter_decides_by_arch_and_number() {
        let p = filter_program(0xC000_003E, &[0, 1, 60], &[41]);
        assert_eq!(mem::offset_of!(libc::seccomp_data, nr), 0);
        let cases: &[(u32, u32, FilterAction)] = &[
            (0xC000_003E, 0, FilterAction::Allow),
            (0xC000_003E, 60, FilterAction::Allow),
            (0xC000_003E, 41, FilterAction::Errno(libc::EPERM as u16)),
            (0xC000_003E, 59, FilterAction::KillProcess),
            (0xC000_003E, 0x4000_0000, FilterAction::KillProcess),
            (0x4000_0003, 0, FilterAction::KillProcess),
            (0xC000_00B7, 1, FilterAction::KillProcess),
        ];
        for &(arch, nr, want) in cases {
            assert_eq!(run(&p, arch, nr), want.ret(), "arch {arch:#x} nr {nr}");
        }
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn child_filter_allows_serving_and_kills_files_exec_and_processes() {
        let p = filter_program(AUDIT_ARCH, CHILD_SYSCALLS, CHILD_SOFT_DENIED);
        assert!(p.len() < 4096, "the kernel's limit");
        let cases: &[(libc::c_long, FilterAction)] = &[
            (libc::SYS_read, FilterAction::Allow),
            (libc::SYS_write, FilterAction::Allow),
            (libc::SYS_recvmsg, FilterAction::Allow),
            (libc::SYS_exit_group, FilterAction::Allow),
            (libc::SYS_socket, FilterAction::Errno(libc::EPERM as u16)),
            (libc::SYS_connect, FilterAction::Errno(libc::EPERM as u16)),
            (libc::SYS_openat, FilterAction::KillProcess),
            (libc::SYS_execve, FilterAction::KillProcess),
            (libc::SYS_execveat, FilterAction::KillProcess),
            (libc::SYS_clone, FilterAction::KillProcess),
            (libc::SYS_ptrace, FilterAction::KillProcess),
            (libc::SYS_kill, FilterAction::KillProcess),
            (libc::SYS_prctl, FilterAction::KillProcess),
            (libc::SYS_mprotect, FilterAction::KillProcess),
            (libc::SYS_sendmsg, FilterAction::KillProcess),
        ];
        for &(nr, want) in cases {
            assert_eq!(run(&p, AUDIT_ARCH, nr as u32), want.ret(), "syscall {nr}");
        }
        #[cfg(target_arch = "x86_64")]
        assert_eq!(run(&p, AUDIT_ARCH, libc::SYS_open as u32), FilterAction::KillProcess.ret());
    }
}
