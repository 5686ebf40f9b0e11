//! BSD-only system calls: the kqueue event loop, procctl, Capsicum, pledge/unveil,
//! SO_NOSIGPIPE, accept filters, kinfo_proc. On a system without one of them the
//! function does what the portable code does (often nothing), so the shell builds
//! and runs on Linux too.

#![allow(unsafe_code)]
// syscall! is mio's pattern: call sites live in sys modules and carry their own SAFETY notes.
#![allow(clippy::macro_metavars_in_unsafe)]

use std::io;
use std::os::fd::RawFd;

use siftd_common::daemon::MasterFiles;
#[cfg(any(target_os = "freebsd", target_os = "netbsd", target_os = "openbsd"))]
use siftd_common::daemon::ProcessMemory;
#[cfg(any(target_os = "freebsd", target_os = "netbsd", target_os = "openbsd"))]
use siftd_common::syscall;

#[cfg(all(any(target_os = "freebsd", target_os = "netbsd", target_os = "openbsd"), not(siftd_force_poll)))]
pub use kqueue::Kqueue;

/// Makes the child learn of the master's death, then checks the master is still its parent.
/// FreeBSD sends it SIGTERM (procctl PROC_PDEATHSIG_CTL); elsewhere the back-channel
/// closes when the master dies, the worker's next read returns end of file and it exits.
pub fn die_with_parent(master: libc::pid_t) -> io::Result<()> {
    #[cfg(target_os = "freebsd")]
    {
        let mut signal: libc::c_int = libc::SIGTERM;
        // SAFETY: PROC_PDEATHSIG_CTL reads one c_int through the pointer, which lives for the call;
        // id 0 with P_PID names the calling process.
        syscall!(procctl(libc::P_PID, 0, libc::PROC_PDEATHSIG_CTL, (&mut signal as *mut libc::c_int).cast()))?;
    }
    if siftd_common::sys::getppid() != master {
        return Err(io::Error::other("master exited before the child started"));
    }
    Ok(())
}

/// Stops a write to a connection whose client left from raising SIGPIPE (SO_NOSIGPIPE).
#[cfg(any(target_os = "freebsd", target_os = "netbsd"))]
pub fn no_sigpipe(conn: RawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: the option value is one c_int that lives for the call; its size is passed.
    syscall!(setsockopt(
        conn,
        libc::SOL_SOCKET,
        libc::SO_NOSIGPIPE,
        (&on as *const libc::c_int).cast(),
        std::mem::size_of::<libc::c_int>() as libc::socklen_t
    ))
    .map(drop)
}

/// OpenBSD and Linux have no SO_NOSIGPIPE: the daemon's SIG_IGN for SIGPIPE covers them.
#[cfg(not(any(target_os = "freebsd", target_os = "netbsd")))]
pub fn no_sigpipe(_conn: RawFd) -> io::Result<()> {
    Ok(())
}

/// Installs accept_filter(9) `name` on a listening socket.
#[cfg(target_os = "freebsd")]
pub fn accept_filter(listener: RawFd, name: &str) -> io::Result<bool> {
    // SAFETY: an all-zero accept_filter_arg is valid: empty name and argument.
    let mut arg: libc::accept_filter_arg = unsafe { std::mem::zeroed() };
    // Keep one NUL at the end of the name.
    if name.len() >= arg.af_name.len() || name.contains('\0') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "accept filter name too long"));
    }
    for (slot, &b) in arg.af_name.iter_mut().zip(name.as_bytes()) {
        *slot = b as libc::c_char;
    }
    // SAFETY: `arg` lives for the call and its size is passed.
    let set = syscall!(setsockopt(
        listener,
        libc::SOL_SOCKET,
        libc::SO_ACCEPTFILTER,
        (&arg as *const libc::accept_filter_arg).cast(),
        std::mem::size_of::<libc::accept_filter_arg>() as libc::socklen_t
    ));
    match set {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            Err(io::Error::new(io::ErrorKind::NotFound, format!("the kernel has no accept filter {name:?} (kldload accf_data)")))
        }
        Err(e) => Err(e),
    }
}

/// Accept filters are FreeBSD's; elsewhere the caller logs that the option is ignored.
#[cfg(not(target_os = "freebsd"))]
pub fn accept_filter(_listener: RawFd, _name: &str) -> io::Result<bool> {
    Ok(false)
}

/// Confines a child to the descriptors it holds: Capsicum capability mode.
#[cfg(target_os = "freebsd")]
pub fn sandbox_child(_accepts: bool) -> io::Result<()> {
    // Capability mode keeps read/write/recvmsg/accept on held descriptors and forbids
    // every global namespace (paths, new sockets, other processes).
    syscall!(cap_enter()).map(drop)
}

/// Confines a child to stdio and receiving connections (pledge); a child that accepts
/// on its own also needs the socket promises.
#[cfg(target_os = "openbsd")]
pub fn sandbox_child(accepts: bool) -> io::Result<()> {
    pledge(if accepts { c"stdio inet unix" } else { c"stdio recvfd" })
}

/// No sandbox on this system (NetBSD, Linux).
#[cfg(not(any(target_os = "freebsd", target_os = "openbsd")))]
pub fn sandbox_child(_accepts: bool) -> io::Result<()> {
    Ok(())
}

#[cfg(target_os = "openbsd")]
fn pledge(promises: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: a valid C string; a null execpromises leaves them unchanged.
    syscall!(pledge(promises.as_ptr(), std::ptr::null())).map(drop)
}

/// Limits what the master sees of the file system to `files` (unveil), then locks it.
#[cfg(target_os = "openbsd")]
pub fn sandbox_master(files: &MasterFiles) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let lists = [(&files.read, c"r"), (&files.write, c"rwc"), (&files.remove, c"c")];
    if lists.iter().all(|(paths, _)| paths.is_empty()) {
        // Nothing to read or write later: hide the whole tree.
        // SAFETY: two valid C strings.
        syscall!(unveil(c"/".as_ptr(), c"".as_ptr()))?;
    }
    for (paths, permissions) in lists {
        for path in paths {
            let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path with NUL"))?;
            // SAFETY: two valid C strings that live for the call.
            syscall!(unveil(c.as_ptr(), permissions.as_ptr())).map_err(|e| io::Error::new(e.kind(), format!("unveil {}: {e}", path.display())))?;
        }
    }
    // SAFETY: two null pointers lock the list against further unveil calls.
    syscall!(unveil(std::ptr::null(), std::ptr::null())).map(drop)
}

/// No master sandbox on this system.
#[cfg(not(target_os = "openbsd"))]
pub fn sandbox_master(_files: &MasterFiles) -> io::Result<()> {
    Ok(())
}

#[cfg(any(target_os = "freebsd", target_os = "netbsd", target_os = "openbsd"))]
fn pages(n: i64, page_size: u64) -> u64 {
    u64::try_from(n).unwrap_or(0).saturating_mul(page_size)
}

/// A process's memory from the kernel's process table (sysctl kern.proc.pid).
#[cfg(target_os = "freebsd")]
pub fn process_memory(pid: libc::pid_t) -> io::Result<ProcessMemory> {
    // The kernel's struct is 1088 bytes on every 64-bit FreeBSD (KINFO_PROC_SIZE).
    #[cfg(target_pointer_width = "64")]
    const _: () = assert!(std::mem::size_of::<libc::kinfo_proc>() == 1088);
    let mib = [libc::CTL_KERN, libc::KERN_PROC, libc::KERN_PROC_PID, pid];
    let info: libc::kinfo_proc = read_sysctl(&mib)?;
    Ok(ProcessMemory {
        resident_bytes: pages(info.ki_rssize as i64, siftd_common::sys::page_size()),
        virtual_bytes: info.ki_size as u64,
    })
}

/// A process's memory from the kernel's process table (sysctl kern.proc2).
#[cfg(target_os = "netbsd")]
pub fn process_memory(pid: libc::pid_t) -> io::Result<ProcessMemory> {
    let size = std::mem::size_of::<libc::kinfo_proc2>() as libc::c_int;
    let mib = [libc::CTL_KERN, libc::KERN_PROC2, libc::KERN_PROC_PID, pid, size, 1];
    let info: libc::kinfo_proc2 = read_sysctl(&mib)?;
    let page = siftd_common::sys::page_size();
    Ok(ProcessMemory { resident_bytes: pages(i64::from(info.p_vm_rssize), page), virtual_bytes: pages(info.p_vm_vsize, page) })
}

/// A process's memory from the kernel's process table (sysctl kern.proc).
#[cfg(target_os = "openbsd")]
pub fn process_memory(pid: libc::pid_t) -> io::Result<ProcessMemory> {
    let size = std::mem::size_of::<libc::kinfo_proc>() as libc::c_int;
    let mib = [libc::CTL_KERN, libc::KERN_PROC, libc::KERN_PROC_PID, pid, size, 1];
    let info: libc::kinfo_proc = read_sysctl(&mib)?;
    Ok(ProcessMemory {
        resident_bytes: pages(i64::from(info.p_vm_rssize), siftd_common::sys::page_size()),
        virtual_bytes: info.p_vm_map_size,
    })
}

/// Reads one fixed-size record `T` (a kinfo_proc) through sysctl(3).
#[cfg(any(target_os = "freebsd", target_os = "netbsd", target_os = "openbsd"))]
fn read_sysctl<T: Copy>(mib: &[libc::c_int]) -> io::Result<T> {
    let mut value = std::mem::MaybeUninit::<T>::zeroed();
    let mut len = std::mem::size_of::<T>();
    // SAFETY: `value` has room for `len` bytes; the mib is valid for its length; no new value is set.
    syscall!(sysctl(mib.as_ptr(), mib.len() as libc::c_uint, value.as_mut_ptr().cast(), &mut len, std::ptr::null_mut(), 0))?;
    if len == 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    if len != std::mem::size_of::<T>() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("kinfo_proc of {len} bytes, expected {}", std::mem::size_of::<T>())));
    }
    // SAFETY: the kernel filled all of it (len checked) with a kinfo_proc, a plain C struct;
    // the zeroed start already made every byte initialised.
    Ok(unsafe { value.assume_init() })
}

#[cfg(all(any(target_os = "freebsd", target_os = "netbsd", target_os = "openbsd"), not(siftd_force_poll)))]
mod kqueue {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

    use siftd_common::events::{EventLoop, Ready};
    use siftd_common::syscall;

    // The kevent field types differ: NetBSD widens filter and flags to u32.
    #[cfg(target_os = "netbsd")]
    type Filter = u32;
    #[cfg(not(target_os = "netbsd"))]
    type Filter = i16;
    #[cfg(target_os = "netbsd")]
    type Flags = u32;
    #[cfg(not(target_os = "netbsd"))]
    type Flags = u16;

    /// Events fetched per wait; more stay pending (level-triggered) for the next.
    const BATCH: usize = 64;

    /// The master's event loop on kqueue: EVFILT_READ for listeners and back-channels,
    /// EVFILT_SIGNAL for signals, EVFILT_PROC NOTE_EXIT for children.
    pub struct Kqueue {
        kq: OwnedFd,
        listeners: Vec<(usize, RawFd)>,
        listening: bool,
        channels: Vec<(libc::pid_t, RawFd)>,
        events: Vec<libc::kevent>,
        /// A child exited before its EVFILT_PROC was registered.
        exit_missed: bool,
    }

    fn kevent(ident: usize, filter: Filter, flags: Flags, fflags: u32) -> libc::kevent {
        // SAFETY: an all-zero kevent is valid (null udata); the fields that matter are set below.
        let mut ev: libc::kevent = unsafe { std::mem::zeroed() };
        ev.ident = ident as libc::uintptr_t;
        ev.filter = filter;
        ev.flags = flags;
        ev.fflags = fflags;
        ev
    }

    impl Kqueue {
        /// Watches `signals` with EVFILT_SIGNAL; they are set to SIG_IGN so that only
        /// kqueue sees them (a forked child restores the defaults).
        pub fn new(signals: &[libc::c_int]) -> io::Result<Kqueue> {
            let fd = syscall!(kqueue())?;
            // SAFETY: kqueue returned a fresh fd that nobody else owns.
            let kq = unsafe { OwnedFd::from_raw_fd(fd) };
            syscall!(fcntl(kq.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC))?;
            // SAFETY: an all-zero kevent is a valid value to overwrite.
            let events = vec![unsafe { std::mem::zeroed::<libc::kevent>() }; BATCH];
            let kq = Kqueue { kq, listeners: Vec::new(), listening: true, channels: Vec::new(), events, exit_missed: false };
            // SIGCHLD is left alone: ignoring it would reap children behind the master's back.
            let watched: Vec<libc::c_int> = signals.iter().copied().filter(|&s| s != libc::SIGCHLD).collect();
            siftd_common::sys::ignore_signals(&watched)?;
            for &s in &watched {
                kq.change(kevent(s as usize, libc::EVFILT_SIGNAL, libc::EV_ADD, 0))?;
            }
            Ok(kq)
        }

        fn change(&self, ev: libc::kevent) -> io::Result<()> {
            // SAFETY: one change read from a live kevent; no event list; a null timeout.
            syscall!(kevent(self.kq.as_raw_fd(), &ev, 1, std::ptr::null_mut(), 0, std::ptr::null())).map(drop)
        }
    }

    impl EventLoop for Kqueue {
        fn add_listener(&mut self, index: usize, fd: RawFd) -> io::Result<()> {
            let flags = libc::EV_ADD | if self.listening { libc::EV_ENABLE } else { libc::EV_DISABLE };
            self.change(kevent(fd as usize, libc::EVFILT_READ, flags, 0))?;
            self.listeners.push((index, fd));
            Ok(())
        }

        fn watch_listeners(&mut self, on: bool) -> io::Result<()> {
            if on == self.listening {
                return Ok(());
            }
            let flags = if on { libc::EV_ENABLE } else { libc::EV_DISABLE };
            for &(_, fd) in &self.listeners {
                self.change(kevent(fd as usize, libc::EVFILT_READ, flags, 0))?;
            }
            self.listening = on;
            Ok(())
        }

        fn add_child(&mut self, pid: libc::pid_t, channel: RawFd) -> io::Result<()> {
            self.change(kevent(channel as usize, libc::EVFILT_READ, libc::EV_ADD, 0))?;
            self.channels.push((pid, channel));
            match self.change(kevent(pid as usize, libc::EVFILT_PROC, libc::EV_ADD, libc::NOTE_EXIT)) {
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => self.exit_missed = true,
                other => other?,
            }
            Ok(())
        }

        fn remove_channel(&mut self, pid: libc::pid_t) -> io::Result<()> {
            let Some(i) = self.channels.iter().position(|&(p, _)| p == pid) else { return Ok(()) };
            let (_, fd) = self.channels.swap_remove(i);
            match self.change(kevent(fd as usize, libc::EVFILT_READ, libc::EV_DELETE, 0)) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::EBADF)) => Ok(()),
                other => other,
            }
        }

        fn wait(&mut self, timeout_ms: i32, ready: &mut Ready) -> io::Result<()> {
            let mut timeout_ms = timeout_ms.max(0);
            if std::mem::take(&mut self.exit_missed) {
                ready.child_exited = true;
                timeout_ms = 0;
            }
            let ts = libc::timespec { tv_sec: (timeout_ms / 1000) as libc::time_t, tv_nsec: ((timeout_ms % 1000) * 1_000_000) as _ };
            // SAFETY: the event list has `events.len()` writable slots; `ts` lives for the call.
            let n = unsafe { libc::kevent(self.kq.as_raw_fd(), std::ptr::null(), 0, self.events.as_mut_ptr(), self.events.len() as _, &ts) };
            if n < 0 {
                let e = io::Error::last_os_error();
                return if e.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
            }
            for ev in self.events.iter().take(n as usize) {
                match ev.filter {
                    libc::EVFILT_READ => {
                        let fd = ev.ident as RawFd;
                        if let Some(&(index, _)) = self.listeners.iter().find(|&&(_, l)| l == fd) {
                            ready.listeners.push(index);
                        } else if let Some(&(pid, _)) = self.channels.iter().find(|&&(_, c)| c == fd) {
                            ready.channels.push(pid);
                        }
                    }
                    libc::EVFILT_SIGNAL => ready.signals.insert(ev.ident as libc::c_int),
                    libc::EVFILT_PROC if ev.fflags & libc::NOTE_EXIT != 0 => ready.child_exited = true,
                    _ => {}
                }
            }
            Ok(())
        }

        fn forget_in_child(&mut self) {
            // A kqueue is not inherited by fork(2): the child holds nothing of it.
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn kqueue_reports_every_kind_of_event() {
            let mut events = super::Kqueue::new(&[libc::SIGUSR1]).expect("kqueue");
            if let Err(e) = siftd_common::events::conformance(&mut events) {
                panic!("{e}");
            }
        }
    }
}
