//! POSIX system calls the same on Linux and the BSDs: the only `unsafe` of the
//! shared shell code. Each wrapper turns `-1` into `io::Error` and owns its fds.

#![allow(unsafe_code)]
// syscall! is mio's pattern: call sites live in sys modules and carry their own SAFETY notes.
#![allow(clippy::macro_metavars_in_unsafe)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Calls a libc function and turns a `-1` result into the last OS error.
/// Only `sys` modules use it; each call site states why its arguments are valid.
#[macro_export]
macro_rules! syscall {
    ($fn:ident ( $($arg:expr),* $(,)? )) => {{
        // SAFETY: the caller passes valid arguments for this libc call; see each use.
        let res = unsafe { libc::$fn($($arg),*) };
        if res == -1 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(res)
        }
    }};
}

/// What `fork` returned.
pub enum Fork {
    /// In the parent: the child's pid.
    Parent(libc::pid_t),
    /// In the child.
    Child,
}

/// Forks the process. The caller must be single-threaded.
pub fn fork() -> io::Result<Fork> {
    // SAFETY: fork has no pointer arguments; the daemon forks only while single-threaded.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Fork::Child),
        pid => Ok(Fork::Parent(pid)),
    }
}

/// How a reaped child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// `exit(code)`.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

/// Reaps one exited child without blocking.
pub fn reap_child() -> io::Result<Option<(libc::pid_t, ExitStatus)>> {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a valid out-pointer for the duration of the call.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    match pid {
        -1 => {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ECHILD) {
                Ok(None)
            } else {
                Err(e)
            }
        }
        0 => Ok(None),
        pid => {
            let how = if libc::WIFSIGNALED(status) {
                ExitStatus::Signal(libc::WTERMSIG(status))
            } else {
                ExitStatus::Code(libc::WEXITSTATUS(status))
            };
            Ok(Some((pid, how)))
        }
    }
}

/// Sends `signal` to process `pid`.
pub fn kill(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    syscall!(kill(pid, signal)).map(drop)
}

/// This process's pid.
pub fn getpid() -> libc::pid_t {
    // SAFETY: getpid has no arguments and cannot fail.
    unsafe { libc::getpid() }
}

/// A connected pair of UNIX stream sockets, close-on-exec.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    syscall!(socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()))?;
    // SAFETY: socketpair succeeded, so both fds are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Reads into `buf`; `Ok(0)` is end of file. Retries on EINTR.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Writes from `buf`, without SIGPIPE on a closed socket where the OS allows. Retries on EINTR.
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Writes all of `buf`.
pub fn write_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        let n = write(fd, buf)?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        buf = buf.get(n..).unwrap_or(&[]);
    }
    Ok(())
}

/// Hands the whole pages inside `buf` back to the kernel (`MADV_DONTNEED`): a buffer
/// sized for the largest request keeps only what typical requests touch. Their
/// contents afterwards are unspecified bytes (zero on Linux); the buffer stays usable.
pub fn release_pages(buf: &mut [u8]) -> io::Result<()> {
    let start = buf.as_mut_ptr() as usize;
    // SAFETY: the range is `buf`, which we hold mutably; afterwards its pages read as
    // some bytes (zero or unchanged), every one a valid u8.
    unsafe { release_range(start, start + buf.len()) }
}

/// Empties `v` and hands back the whole pages of its allocation past its first `keep`
/// bytes: a buffer one large response filled keeps only what typical ones touch.
pub fn release_spare_pages(v: &mut Vec<u8>, keep: usize) -> io::Result<()> {
    v.clear();
    let start = v.as_mut_ptr() as usize;
    // SAFETY: the range lies in `v`'s allocation, which we hold mutably and which holds
    // no element now: its bytes are read only after being written again.
    unsafe { release_range(start + keep.min(v.capacity()), start + v.capacity()) }
}

/// `MADV_DONTNEED` on the whole pages inside `start..end`.
///
/// # Safety
/// The range must be memory the caller owns and holds no reference into, whose bytes
/// may change to any value (zero on Linux).
unsafe fn release_range(start: usize, end: usize) -> io::Result<()> {
    let first = start.div_ceil(PAGE);
    let last = end / PAGE;
    if last <= first {
        return Ok(());
    }
    // SAFETY: whole pages inside the caller's range, which the caller vouches for.
    let r = unsafe { libc::madvise((first * PAGE) as *mut libc::c_void, (last - first) * PAGE, libc::MADV_DONTNEED) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Accepts one connection, close-on-exec and non-blocking as asked; `Ok(None)` when none is pending.
pub fn accept(listener: RawFd, nonblocking: bool) -> io::Result<Option<(OwnedFd, Option<std::net::IpAddr>)>> {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut addr: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let flags = libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    loop {
        // SAFETY: `addr` and `len` are valid out-pointers sized for any address family.
        let fd = unsafe { libc::accept4(listener, (&mut addr as *mut libc::sockaddr_storage).cast(), &mut len, flags) };
        if fd >= 0 {
            // SAFETY: accept4 returned a fresh fd that nobody else owns.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            return Ok(Some((owned, peer_ip(&addr))));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::ECONNABORTED) => return Ok(None),
            _ => return Err(e),
        }
    }
}

fn peer_ip(addr: &libc::sockaddr_storage) -> Option<std::net::IpAddr> {
    match libc::c_int::from(addr.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in, which fits in it.
            let sin: &libc::sockaddr_in = unsafe { &*(addr as *const libc::sockaddr_storage).cast() };
            Some(std::net::IpAddr::V4(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6, which fits in it.
            let sin6: &libc::sockaddr_in6 = unsafe { &*(addr as *const libc::sockaddr_storage).cast() };
            Some(std::net::IpAddr::V6(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
        }
        _ => None,
    }
}

/// Sends `fd` over the UNIX socket `sock` with one byte of payload `tag`.
pub fn send_fd(sock: RawFd, fd: RawFd, tag: u8) -> io::Result<()> {
    let mut payload = [tag];
    let mut iov = libc::iovec { iov_base: payload.as_mut_ptr().cast(), iov_len: 1 };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(mem::size_of::<RawFd>() as u32) } as usize;
    let mut control = [0u8; 64];
    if space > control.len() {
        return Err(io::Error::other("control buffer too small"));
    }
    // SAFETY: an all-zero msghdr is valid; every pointer is set below.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points at `space` writable bytes, enough for one cmsghdr with one fd.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(io::Error::other("no room for control message"));
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
    }
    loop {
        // SAFETY: msg and everything it points to live until the call returns.
        let n = unsafe { libc::sendmsg(sock, &msg, send_flags()) };
        if n >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receives one fd sent by [`send_fd`]; `Ok(None)` at end of file.
pub fn recv_fd(sock: RawFd) -> io::Result<Option<(OwnedFd, u8)>> {
    let mut payload = [0u8; 1];
    let mut iov = libc::iovec { iov_base: payload.as_mut_ptr().cast(), iov_len: 1 };
    let mut control = [0u8; 64];
    // SAFETY: an all-zero msghdr is valid; every pointer is set below.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len() as _;
    let n = loop {
        // SAFETY: msg points at live buffers of the stated sizes.
        let n = unsafe { libc::recvmsg(sock, &mut msg, recv_flags()) };
        if n >= 0 {
            break n;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    if n == 0 {
        return Ok(None);
    }
    // SAFETY: recvmsg filled msg_control with msg_controllen bytes of cmsgs; the CMSG macros walk them.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
                return Ok(Some((OwnedFd::from_raw_fd(fd), payload[0])));
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Err(io::Error::new(io::ErrorKind::InvalidData, "message without a file descriptor"))
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn recv_flags() -> libc::c_int {
    libc::MSG_CMSG_CLOEXEC
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn recv_flags() -> libc::c_int {
    0
}

#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd", target_os = "netbsd", target_os = "openbsd"))]
fn send_flags() -> libc::c_int {
    libc::MSG_NOSIGNAL
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd", target_os = "netbsd", target_os = "openbsd")))]
fn send_flags() -> libc::c_int {
    0
}

/// Sets or clears O_NONBLOCK.
pub fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    let flags = syscall!(fcntl(fd, libc::F_GETFL))?;
    let flags = if on { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
    syscall!(fcntl(fd, libc::F_SETFL, flags)).map(drop)
}

/// Sets a socket's receive and send timeouts (0 = none).
pub fn set_socket_timeouts(fd: RawFd, seconds: u32) -> io::Result<()> {
    let tv = libc::timeval { tv_sec: seconds as _, tv_usec: 0 };
    for opt in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        syscall!(setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&tv as *const libc::timeval).cast(),
            mem::size_of::<libc::timeval>() as libc::socklen_t
        ))?;
    }
    Ok(())
}

/// Ignores SIGPIPE: a client that goes away must not kill a worker.
pub fn ignore_sigpipe() -> io::Result<()> {
    ignore_signals(&[libc::SIGPIPE])
}

/// Sets `signals` to SIG_IGN (kqueue's EVFILT_SIGNAL still sees them).
pub fn ignore_signals(signals: &[libc::c_int]) -> io::Result<()> {
    for &s in signals {
        // SAFETY: SIG_IGN is a valid disposition for any catchable signal.
        if unsafe { libc::signal(s, libc::SIG_IGN) } == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Blocks (or unblocks) `signals` for this thread, returning the old mask.
pub fn block_signals(signals: &[libc::c_int], block: bool) -> io::Result<()> {
    // SAFETY: an all-zero sigset_t is initialised by sigemptyset before use.
    let mut set: libc::sigset_t = unsafe { mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t.
    unsafe { libc::sigemptyset(&mut set) };
    for &s in signals {
        // SAFETY: `set` is a valid sigset_t and `s` a signal number.
        unsafe { libc::sigaddset(&mut set, s) };
    }
    let how = if block { libc::SIG_BLOCK } else { libc::SIG_UNBLOCK };
    // SAFETY: `set` is valid; a null old-set pointer is allowed.
    let rc = unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Restores default dispositions for `signals` (a forked child must not inherit the master's).
pub fn default_signals(signals: &[libc::c_int]) -> io::Result<()> {
    for &s in signals {
        // SAFETY: SIG_DFL is a valid disposition for any catchable signal.
        if unsafe { libc::signal(s, libc::SIG_DFL) } == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// User and group ids and supplementary groups of a user name.
pub struct Account {
    /// uid
    pub uid: libc::uid_t,
    /// primary gid
    pub gid: libc::gid_t,
    /// name, for initgroups
    pub name: CString,
}

/// Looks up `name` in the password database.
pub fn lookup_user(name: &str) -> io::Result<Account> {
    let cname = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "user name with NUL"))?;
    // SAFETY: an all-zero passwd is a valid out-value; getpwnam_r fills it.
    let mut pwd: libc::passwd = unsafe { mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the stated sizes for the duration of the call.
    let rc = unsafe { libc::getpwnam_r(cname.as_ptr(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    if result.is_null() {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("no user named {name}")));
    }
    Ok(Account { uid: pwd.pw_uid, gid: pwd.pw_gid, name: cname })
}

/// Looks up a group name.
pub fn lookup_group(name: &str) -> io::Result<libc::gid_t> {
    let cname = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "group name with NUL"))?;
    // SAFETY: an all-zero group is a valid out-value; getgrnam_r fills it.
    let mut grp: libc::group = unsafe { mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::group = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the stated sizes for the duration of the call.
    let rc = unsafe { libc::getgrnam_r(cname.as_ptr(), &mut grp, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    if result.is_null() {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("no group named {name}")));
    }
    Ok(grp.gr_gid)
}

/// Drops root for good: supplementary groups, then gid, then uid.
pub fn drop_privileges(account: &Account) -> io::Result<()> {
    // SAFETY: name is a valid C string; initgroups reads it only.
    if unsafe { libc::initgroups(account.name.as_ptr(), account.gid as _) } != 0 {
        return Err(io::Error::last_os_error());
    }
    set_ids(account.uid, account.gid)?;
    // Verify that root cannot be regained.
    // SAFETY: setuid(0) only attempts a change; failure is what we want.
    if account.uid != 0 && unsafe { libc::setuid(0) } == 0 {
        return Err(io::Error::other("privileges could be regained after dropping them"));
    }
    Ok(())
}

#[cfg(not(target_os = "netbsd"))]
fn set_ids(uid: libc::uid_t, gid: libc::gid_t) -> io::Result<()> {
    syscall!(setresgid(gid, gid, gid))?;
    syscall!(setresuid(uid, uid, uid))?;
    Ok(())
}

#[cfg(target_os = "netbsd")]
fn set_ids(uid: libc::uid_t, gid: libc::gid_t) -> io::Result<()> {
    // NetBSD has no setres*id; as root, setgid/setuid set real, effective and saved ids.
    syscall!(setgid(gid))?;
    syscall!(setuid(uid))?;
    Ok(())
}

/// Changes owner and mode of a path (a UNIX socket).
pub fn chown_chmod(path: &std::path::Path, uid: Option<libc::uid_t>, gid: Option<libc::gid_t>, mode: Option<u32>) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path with NUL"))?;
    if uid.is_some() || gid.is_some() {
        let u = uid.unwrap_or(libc::uid_t::MAX);
        let g = gid.unwrap_or(libc::gid_t::MAX);
        syscall!(chown(c.as_ptr(), u, g))?;
    }
    if let Some(m) = mode {
        syscall!(chmod(c.as_ptr(), m as libc::mode_t))?;
    }
    Ok(())
}

/// Waits for readiness of `fds` (fd, events) with poll(2); returns revents per fd.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    loop {
        // SAFETY: `fds` is a valid array of pollfd of the given length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The raw fd of anything that has one.
pub fn raw<F: AsRawFd>(f: &F) -> RawFd {
    f.as_raw_fd()
}

/// Shuts down the writing side of a socket: the peer reads end of file.
pub fn shutdown_write(fd: RawFd) -> io::Result<()> {
    syscall!(shutdown(fd, libc::SHUT_WR)).map(drop)
}

static SIGNAL_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn on_signal(signal: libc::c_int) {
    let fd = SIGNAL_PIPE.load(std::sync::atomic::Ordering::Relaxed);
    if fd >= 0 {
        let byte = signal as u8;
        // SAFETY: write(2) is async-signal-safe; `byte` lives for the call. A full pipe drops the byte, which is fine:
        // the master drains the pipe and handles each signal kind once per wake.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// Delivers `signals` as bytes on a non-blocking pipe (the self-pipe trick); returns its read end.
pub fn signal_pipe(signals: &[libc::c_int]) -> io::Result<OwnedFd> {
    let mut fds = [0 as libc::c_int; 2];
    syscall!(pipe(fds.as_mut_ptr()))?;
    // SAFETY: pipe succeeded, so both fds are open and owned by nobody else.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    for fd in [read_end.as_raw_fd(), write_end.as_raw_fd()] {
        set_nonblocking(fd, true)?;
        syscall!(fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC))?;
    }
    SIGNAL_PIPE.store(std::os::fd::IntoRawFd::into_raw_fd(write_end), std::sync::atomic::Ordering::Relaxed);
    for &s in signals {
        // SAFETY: an all-zero sigaction is valid; the handler only calls write(2).
        let mut action: libc::sigaction = unsafe { mem::zeroed() };
        action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: `action` is initialised; a null old-action pointer is allowed.
        if unsafe { libc::sigaction(s, &action, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(read_end)
}

/// Closes the write end of the signal pipe in a forked child, so it holds no master state.
pub fn forget_signal_pipe() {
    let fd = SIGNAL_PIPE.swap(-1, std::sync::atomic::Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: the fd was owned by the static; nobody else closes it.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
    }
}

/// Starts a new session, detached from the terminal.
pub fn setsid() -> io::Result<()> {
    syscall!(setsid()).map(drop)
}

/// Points standard input, output and error at /dev/null.
pub fn stdio_to_devnull() -> io::Result<()> {
    let null = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null")?;
    for target in 0..=2 {
        syscall!(dup2(null.as_raw_fd(), target))?;
    }
    Ok(())
}

/// This host's name, from gethostname(2).
pub fn hostname() -> io::Result<String> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length; one byte is kept back for the NUL.
    syscall!(gethostname(buf.as_mut_ptr().cast(), buf.len() - 1))?;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(buf.get(..end).unwrap_or(&[])).into_owned())
}

/// The size of a memory page in bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no pointer arguments.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// A file mapped read-only and private: its bytes stay in the page cache, shared and
/// clean, instead of being copied into this process's heap. The file must not be
/// truncated while mapped (writers replace it by rename, which leaves the mapping intact).
pub struct MappedFile {
    addr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value; nothing writes through it.
unsafe impl Send for MappedFile {}
// SAFETY: as above: shared reads of immutable bytes.
unsafe impl Sync for MappedFile {}

/// Maps a file's pages in one call instead of a fault per page (Linux; elsewhere the
/// pages fault in as read): the compile cache is read whole, first thing at a start.
#[cfg(any(target_os = "linux", target_os = "android"))]
const PREFAULT: libc::c_int = libc::MAP_POPULATE;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const PREFAULT: libc::c_int = 0;

/// Maps all of `file`; an empty file maps to no bytes.
pub fn map_file(file: &std::fs::File) -> io::Result<MappedFile> {
    let len = usize::try_from(file.metadata()?.len()).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "file too large to map"))?;
    if len == 0 {
        return Ok(MappedFile { addr: std::ptr::NonNull::<u32>::dangling().cast(), len: 0 });
    }
    // SAFETY: a new read-only private mapping of an open file; it touches no existing memory.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE | PREFAULT, file.as_raw_fd(), 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let addr = std::ptr::NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
    Ok(MappedFile { addr, len })
}

impl AsRef<[u8]> for MappedFile {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `len` readable bytes start at `addr` while the mapping lives (or none).
        unsafe { std::slice::from_raw_parts(self.addr.as_ptr(), self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmaps exactly the mapping this value owns; no slice of it outlives `self`.
            unsafe {
                libc::munmap(self.addr.as_ptr().cast(), self.len);
            }
        }
    }
}

extern "C" {
    fn tzset();
}

/// Loads the time zone (libc reads /etc/localtime on the first gmtime_r/localtime_r:
/// dates, syslog). Run in the master before forking: a child then neither opens the
/// file under its sandbox nor allocates from the heap it shares to hold it.
pub fn load_timezone() {
    // SAFETY: tzset takes no arguments; the caller is single-threaded at this point.
    unsafe { tzset() };
}

/// Gives the heap's free pages back to the OS and leaves its free lists settled
/// (glibc; elsewhere nothing). Run last before forking: trimming leaves every free
/// chunk in glibc's unsorted list, and the first malloc after it relinks them all,
/// which in a child (a libc call that allocates) copied 2.1 MB of the heap it shares.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; the block is
    // freed at once and never used.
    unsafe {
        libc::malloc_trim(0);
        // Below the mmap threshold and above the small bins: sorts the unsorted list.
        libc::free(libc::malloc(96 * 1024));
    }
}

/// Where new allocations of a process using [`ForkAllocator`] come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocations {
    /// The system allocator: startup and rule compiles, whose blocks the children share.
    System = 0,
    /// The master's own arena, once the rules are compiled: its event loop then writes
    /// none of the heap pages the rules live in. glibc relinking the free chunks a
    /// compile leaves, for the master's small allocations after a fork, copied 2.4 MB of
    /// a child's heap (lesson 4).
    MasterArena = 1,
    /// A forked child's arena, first thing after the fork: its DFA caches and message
    /// buffers grow and shrink as mail arrives, on pages mapped by that child alone.
    ChildArena = 2,
}

/// Sets where this process's new allocations come from. Blocks are always freed to
/// whoever gave them, except that a child never frees a block it did not allocate:
/// that would write into pages it shares with the master and the other children.
/// Does nothing unless the binary's global allocator is [`ForkAllocator`].
pub fn set_allocations(to: Allocations) {
    ALLOCATIONS.store(to as u8, Ordering::Release);
}

fn allocations() -> Allocations {
    match ALLOCATIONS.load(Ordering::Acquire) {
        1 => Allocations::MasterArena,
        2 => Allocations::ChildArena,
        _ => Allocations::System,
    }
}

/// Gives back the pages of the blocks of two pages or more a child freed since it last
/// did (the buffers a large message grew), and, once a class of smaller blocks holds
/// many freed, the pages all of whose blocks are free (the states a message's lazy DFAs
/// built): one syscall a run of adjacent pages, between messages, rather than one a
/// block while a message grows buffers that reuse them. Returns the runs; none outside a
/// child's arena.
pub fn give_back_freed() -> usize {
    if allocations() == Allocations::ChildArena {
        CHILD_ARENA.with(Arena::give_back_freed)
    } else {
        0
    }
}

/// siftd's global allocator: the system's while rules compile; size classes and large
/// blocks on pages of their own for the master's event loop and for each child
/// (see [`Allocations`]).
pub struct ForkAllocator;

static ALLOCATIONS: AtomicU8 = AtomicU8::new(Allocations::System as u8);
static MASTER_ARENA: LockedArena = LockedArena::new(usize::MAX);
static CHILD_ARENA: LockedArena = LockedArena::new(GIVE_BACK_BLOCK);

/// Size classes 16 B to 32 KiB, powers of two; larger blocks get their own mapping, so
/// that freeing one gives its pages back.
const CLASSES: usize = 12;
const SMALLEST_CLASS: usize = 16;
/// A slab of one size class.
const SLAB_BYTES: usize = 1 << 20;
/// Mappings one arena may hold (slabs and large blocks).
const MAX_REGIONS: usize = 8192;
const PAGE: usize = 4096;
/// A child's freed class blocks of this size or more give their pages back between
/// messages ([`give_back_freed`]): the buffers one large message grew do not stay
/// resident in every child. Smaller (one page) blocks are freed and grown again by most
/// messages.
const GIVE_BACK_BLOCK: usize = 2 * PAGE;
/// The first size class whose blocks are whole pages.
const FIRST_PAGED_CLASS: usize = (PAGE.trailing_zeros() - SMALLEST_CLASS.trailing_zeros()) as usize;
const PAGED_CLASSES: usize = CLASSES - FIRST_PAGED_CLASS;
/// Blocks given back a paged class keeps track of; past them freed blocks stay resident
/// on the free list.
const GIVEN_BACK_SLOTS: usize = 64;
/// The classes of a page or less, whose blocks share pages.
const SMALL_CLASSES: usize = FIRST_PAGED_CLASS + 1;
/// Freed bytes a small class holds before its wholly free pages go back: the states a
/// message's lazy DFAs built, freed with their caches (`--lazy-cache-mib 0`), left about
/// 500 KiB of small blocks resident in every child.
const SMALL_GIVE_BACK: usize = 8 * PAGE;
/// Wholly free pages given back a small class keeps track of; past them they stay
/// resident on the free list.
const EMPTY_PAGE_SLOTS: usize = 64;

struct Arena {
    free: [*mut u8; CLASSES],
    next: [usize; CLASSES],
    end: [usize; CLASSES],
    regions: [(usize, usize); MAX_REGIONS],
    count: usize,
    /// Freed class blocks this large or more give their pages back.
    give_back: usize,
    /// By paged class, freed blocks whose pages went back (none of their bytes holds
    /// a link, so no page of theirs stays resident), and how many.
    given_back: [[usize; GIVEN_BACK_SLOTS]; PAGED_CLASSES],
    given_back_count: [usize; PAGED_CLASSES],
    /// By class, the blocks on its free list, and those freed since its wholly free
    /// pages last went back (a list of pages all partly in use is not sorted again until
    /// as much more is freed).
    free_count: [usize; CLASSES],
    freed_since: [usize; CLASSES],
    /// By small class, pages whose blocks were all free and went back (off the free
    /// list, no link in them), and how many.
    empty_pages: [[usize; EMPTY_PAGE_SLOTS]; SMALL_CLASSES],
    empty_count: [usize; SMALL_CLASSES],
}

/// An arena behind a spin lock (the master is one thread once it uses its arena).
struct LockedArena {
    lock: AtomicBool,
    arena: UnsafeCell<Arena>,
}

// SAFETY: every access to the arena holds `lock`.
unsafe impl Sync for LockedArena {}

impl LockedArena {
    const fn new(give_back: usize) -> LockedArena {
        LockedArena { lock: AtomicBool::new(false), arena: UnsafeCell::new(Arena { give_back, ..Arena::EMPTY }) }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Arena) -> T) -> T {
        while self.lock.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            std::hint::spin_loop();
        }
        // SAFETY: `lock` is held, so this is the only reference to the arena.
        let out = f(unsafe { &mut *self.arena.get() });
        self.lock.store(false, Ordering::Release);
        out
    }
}

impl Arena {
    const EMPTY: Arena = Arena {
        free: [std::ptr::null_mut(); CLASSES],
        next: [0; CLASSES],
        end: [0; CLASSES],
        regions: [(0, 0); MAX_REGIONS],
        count: 0,
        give_back: usize::MAX,
        given_back: [[0; GIVEN_BACK_SLOTS]; PAGED_CLASSES],
        given_back_count: [0; PAGED_CLASSES],
        free_count: [0; CLASSES],
        freed_since: [0; CLASSES],
        empty_pages: [[0; EMPTY_PAGE_SLOTS]; SMALL_CLASSES],
        empty_count: [0; SMALL_CLASSES],
    };

    fn class_of(layout: Layout) -> Option<usize> {
        let size = layout.size().max(layout.align()).max(SMALLEST_CLASS).checked_next_power_of_two()?;
        let class = (size.trailing_zeros() - SMALLEST_CLASS.trailing_zeros()) as usize;
        (class < CLASSES).then_some(class)
    }

    fn map(&mut self, len: usize) -> *mut u8 {
        if self.count >= MAX_REGIONS {
            return std::ptr::null_mut();
        }
        // SAFETY: an anonymous private mapping touches no existing memory.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANON, -1, 0)
        };
        if p == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        self.regions[self.count] = (p as usize, len);
        self.count += 1;
        p.cast()
    }

    fn alloc(&mut self, layout: Layout) -> *mut u8 {
        self.alloc_fresh(layout).0
    }

    /// A block, and whether it was never used (fresh pages read as zero).
    fn alloc_fresh(&mut self, layout: Layout) -> (*mut u8, bool) {
        match Arena::class_of(layout) {
            Some(c) => {
                let head = self.free[c];
                if !head.is_null() {
                    // SAFETY: a freed block of this class holds the next free block's address.
                    self.free[c] = unsafe { head.cast::<*mut u8>().read() };
                    self.free_count[c] = self.free_count[c].saturating_sub(1);
                    return (head, false);
                }
                if let Some(block) = self.take_given_back(c) {
                    return (block as *mut u8, false);
                }
                if let Some(block) = self.take_empty_page(c) {
                    return (block as *mut u8, false);
                }
                let size = SMALLEST_CLASS << c;
                if self.next[c] + size > self.end[c] {
                    let slab = self.map(SLAB_BYTES);
                    if slab.is_null() {
                        return (slab, false);
                    }
                    self.next[c] = slab as usize;
                    self.end[c] = slab as usize + SLAB_BYTES;
                }
                let block = self.next[c];
                self.next[c] += size;
                (block as *mut u8, true)
            }
            None if layout.align() <= PAGE => match layout.size().checked_next_multiple_of(PAGE) {
                Some(len) => (self.map(len), true),
                None => (std::ptr::null_mut(), false),
            },
            None => (std::ptr::null_mut(), false),
        }
    }

    /// Gives back the pages of the freed blocks of [`Arena::give_back`] bytes or more,
    /// moving them off the free lists, and those of smaller classes' wholly free pages
    /// once [`SMALL_GIVE_BACK`] bytes were freed; one syscall for each run of adjacent
    /// pages. Returns the runs.
    fn give_back_freed(&mut self) -> usize {
        let mut runs = 0;
        for (p, (slots, count)) in self.given_back.iter_mut().zip(self.given_back_count.iter_mut()).enumerate() {
            let c = FIRST_PAGED_CLASS + p;
            let size = SMALLEST_CLASS << c;
            if size < self.give_back {
                continue;
            }
            let start = *count;
            while let (false, Some(slot)) = (self.free[c].is_null(), slots.get_mut(*count)) {
                let head = self.free[c];
                // SAFETY: a freed block of this class holds the next free block's address.
                self.free[c] = unsafe { head.cast::<*mut u8>().read() };
                self.free_count[c] = self.free_count[c].saturating_sub(1);
                *slot = head as usize;
                *count += 1;
            }
            let Some(moved) = slots.get_mut(start..*count) else { continue };
            moved.sort_unstable();
            let mut i = 0;
            while let Some(&first) = moved.get(i) {
                let mut end = first + size;
                i += 1;
                while moved.get(i) == Some(&end) {
                    end += size;
                    i += 1;
                }
                // The blocks first..end are page-aligned (a block is aligned to its size
                // within a page-aligned slab), adjacent and no longer in use.
                runs += give_back_run(first, end);
            }
        }
        for c in 0..SMALL_CLASSES {
            let size = SMALLEST_CLASS << c;
            if size < self.give_back && self.freed_since[c] * size >= SMALL_GIVE_BACK && self.free_count[c] * size >= SMALL_GIVE_BACK {
                self.freed_since[c] = 0;
                runs += self.give_back_empty_pages(c);
            }
        }
        runs
    }

    /// Gives back the pages of small class `c` whose blocks are all on its free list,
    /// taking those blocks off it; one syscall for each run of adjacent pages. Returns
    /// the runs.
    fn give_back_empty_pages(&mut self, c: usize) -> usize {
        let (Some(pages), Some(count)) = (self.empty_pages.get_mut(c), self.empty_count.get_mut(c)) else { return 0 };
        let size = SMALLEST_CLASS << c;
        let per_page = PAGE / size;
        let page_of = |block: *mut u8| block as usize & !(PAGE - 1);
        // SAFETY: the list is this class's free list, each block linking the next.
        let mut block = unsafe { sort_free_list(self.free[c]) };
        let (mut kept, mut kept_tail) = (std::ptr::null_mut::<u8>(), std::ptr::null_mut::<u8>());
        let (mut run_start, mut run_end, mut runs) = (0usize, 0usize, 0usize);
        while !block.is_null() {
            // The page's blocks are together at the front of the sorted list.
            let page = page_of(block);
            let (mut after, mut n) = (block, 0usize);
            while !after.is_null() && page_of(after) == page {
                n += 1;
                // SAFETY: a block of the free list links the next.
                after = unsafe { after.cast::<*mut u8>().read() };
            }
            match pages.get_mut(*count) {
                Some(slot) if n == per_page => {
                    *slot = page;
                    *count += 1;
                    self.free_count[c] = self.free_count[c].saturating_sub(per_page);
                    if page != run_end {
                        runs += give_back_run(run_start, run_end);
                        run_start = page;
                    }
                    run_end = page + PAGE;
                }
                _ => {
                    // Kept on the free list, in order.
                    let mut b = block;
                    while b != after {
                        // SAFETY: as above; the block stays free, relinked after the kept ones.
                        let next = unsafe { b.cast::<*mut u8>().read() };
                        if kept_tail.is_null() {
                            kept = b;
                        } else {
                            // SAFETY: the kept list's tail is a free block of this class.
                            unsafe { kept_tail.cast::<*mut u8>().write(b) };
                        }
                        kept_tail = b;
                        b = next;
                    }
                }
            }
            block = after;
        }
        runs += give_back_run(run_start, run_end);
        if !kept_tail.is_null() {
            // SAFETY: as above.
            unsafe { kept_tail.cast::<*mut u8>().write(std::ptr::null_mut()) };
        }
        self.free[c] = kept;
        runs
    }

    /// A block of small class `c` from a page given back, if one is left: its other
    /// blocks go on the free list.
    fn take_empty_page(&mut self, c: usize) -> Option<usize> {
        let (pages, n) = (self.empty_pages.get(c)?, self.empty_count.get_mut(c)?);
        let page = pages.get(n.checked_sub(1)?).copied()?;
        *n -= 1;
        let size = SMALLEST_CLASS << c;
        for block in (page + size..page + PAGE).step_by(size).rev() {
            // SAFETY: the page is this class's, in one of its slabs, and none of its blocks
            // is in use or on the free list.
            unsafe { (block as *mut u8).cast::<*mut u8>().write(self.free[c]) };
            self.free[c] = block as *mut u8;
            self.free_count[c] += 1;
        }
        Some(page)
    }

    /// A block of class `c` given back when freed, if one is left.
    fn take_given_back(&mut self, c: usize) -> Option<usize> {
        let p = c.checked_sub(FIRST_PAGED_CLASS)?;
        let (slots, n) = (self.given_back.get(p)?, self.given_back_count.get_mut(p)?);
        let block = slots.get(n.checked_sub(1)?).copied()?;
        *n -= 1;
        Some(block)
    }

    /// The index of the region holding `ptr`; `None` for the master's blocks.
    fn region_of(&self, ptr: *mut u8) -> Option<usize> {
        let addr = ptr as usize;
        self.regions[..self.count].iter().position(|&(start, len)| addr >= start && addr < start + len)
    }

    fn owns(&self, ptr: *mut u8) -> bool {
        self.region_of(ptr).is_some()
    }

    /// Frees one of this arena's blocks; false (and nothing done) for any other block.
    fn dealloc(&mut self, ptr: *mut u8, layout: Layout) -> bool {
        let Some(i) = self.region_of(ptr) else {
            return false;
        };
        match Arena::class_of(layout) {
            Some(c) => {
                // SAFETY: the block is at least 16 bytes, ours, and no longer in use.
                unsafe { ptr.cast::<*mut u8>().write(self.free[c]) };
                self.free[c] = ptr;
                self.free_count[c] += 1;
                self.freed_since[c] += 1;
            }
            None => {
                let (start, len) = self.regions[i];
                // SAFETY: the region is a large block's own mapping, no longer in use.
                unsafe { libc::munmap(start as *mut libc::c_void, len) };
                self.count -= 1;
                self.regions[i] = self.regions[self.count];
            }
        }
        true
    }
}

/// Gives back the pages `start..end` of an arena, page-aligned, none of whose bytes is
/// in use or holds a free list's link (none when empty): 1 for the syscall, else 0.
fn give_back_run(start: usize, end: usize) -> usize {
    if end <= start {
        return 0;
    }
    // SAFETY: as the callers guarantee, the pages are an arena's own, page-aligned, and
    // nothing on them is in use or read again before it is written. Advisory: should it
    // fail, the pages merely stay resident.
    unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
    1
}

/// Sorts a free list by address through its own links (a bottom-up merge sort: no
/// memory besides the blocks, as an allocator needs) and returns its new head.
///
/// # Safety
/// `head` starts a list of blocks, each at least a pointer long, holding the next one's
/// address, the last a null one; nothing else uses them.
unsafe fn sort_free_list(head: *mut u8) -> *mut u8 {
    let next = |block: *mut u8| {
        // SAFETY: every block on the list is a pointer-sized link no one else uses.
        unsafe { block.cast::<*mut u8>().read() }
    };
    let link = |block: *mut u8, to: *mut u8| {
        // SAFETY: as above, and writable.
        unsafe { block.cast::<*mut u8>().write(to) }
    };
    let mut list = head;
    let mut width = 1usize;
    loop {
        let (mut left, mut tail) = (list, std::ptr::null_mut::<u8>());
        list = std::ptr::null_mut();
        let mut merges = 0;
        while !left.is_null() {
            merges += 1;
            // Two sorted runs of `width`: `left` and the one after it.
            let (mut right, mut left_len) = (left, 0usize);
            while left_len < width && !right.is_null() {
                left_len += 1;
                right = next(right);
            }
            let mut right_len = width;
            while left_len > 0 || (right_len > 0 && !right.is_null()) {
                let take_left = right_len == 0 || right.is_null() || (left_len > 0 && (left as usize) <= (right as usize));
                let block = if take_left { left } else { right };
                if take_left {
                    left = next(left);
                    left_len -= 1;
                } else {
                    right = next(right);
                    right_len -= 1;
                }
                if tail.is_null() {
                    list = block;
                } else {
                    link(tail, block);
                }
                tail = block;
            }
            left = right;
        }
        if !tail.is_null() {
            link(tail, std::ptr::null_mut());
        }
        if merges <= 1 {
            return list;
        }
        width *= 2;
    }
}

// SAFETY: the system allocator's blocks come from it and go back to it; the arenas
// return blocks of at least the layout's size and alignment (class blocks are aligned
// to their power-of-two size within page-aligned slabs; large ones are page-aligned
// mappings) and take back only blocks they gave.
unsafe impl GlobalAlloc for ForkAllocator {
    // Out of line: inlined at every allocation site, it would grow the binary by half a MB.
    #[inline(never)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match allocations() {
            // SAFETY: forwarded with the caller's guarantees.
            Allocations::System => unsafe { System.alloc(layout) },
            Allocations::MasterArena => MASTER_ARENA.with(|a| a.alloc(layout)),
            Allocations::ChildArena => CHILD_ARENA.with(|a| a.alloc(layout)),
        }
    }

    #[inline(never)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if allocations() == Allocations::ChildArena {
            // The master's blocks, system or arena, are left alone.
            CHILD_ARENA.with(|a| a.dealloc(ptr, layout));

        } else if !MASTER_ARENA.with(|a| a.dealloc(ptr, layout)) {
            // SAFETY: not the master arena's, so the system allocator's, with the caller's guarantees.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[inline(never)]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let arena = match allocations() {
            // SAFETY: forwarded with the caller's guarantees.
            Allocations::System => return unsafe { System.alloc_zeroed(layout) },
            Allocations::MasterArena => &MASTER_ARENA,
            Allocations::ChildArena => &CHILD_ARENA,
        };
        let (p, fresh) = arena.with(|a| a.alloc_fresh(layout));
        // A block never used (a large block's own mapping, a class block new from its
        // slab) is zero already: writing it would make its pages resident when most
        // stay unused (a request buffer sized for --max-size, tables by rule count).
        if !p.is_null() && !fresh {
            // SAFETY: p is a block of at least layout.size() bytes.
            unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
        }
        p
    }

    #[inline(never)]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let mode = allocations();
        let arena = match mode {
            Allocations::System if !MASTER_ARENA.with(|a| a.owns(ptr)) => {
                // SAFETY: the system allocator's block, forwarded with the caller's guarantees.
                return unsafe { System.realloc(ptr, layout, new_size) };
            }
            Allocations::System | Allocations::MasterArena => &MASTER_ARENA,
            Allocations::ChildArena => &CHILD_ARENA,
        };
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        let owned = arena.with(|a| a.owns(ptr));
        let same_class = Arena::class_of(layout).is_some() && Arena::class_of(layout) == Arena::class_of(new_layout);
        if owned && same_class {
            return ptr; // one of this arena's class blocks: it already has room
        }
        // SAFETY: a fresh block from whoever takes new allocations now.
        let p = unsafe { self.alloc(new_layout) };
        if !p.is_null() {
            // SAFETY: both blocks hold at least the smaller size and do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size)) };
            // SAFETY: the old block, no longer used, freed to whoever gave it (a child
            // leaves the master's alone).
            unsafe { self.dealloc(ptr, layout) };
        }
        p
    }
}

/// The parent's pid.
pub fn getppid() -> libc::pid_t {
    // SAFETY: getppid has no arguments and cannot fail.
    unsafe { libc::getppid() }
}

/// Exits the process at once, without running destructors (a forked child's copy of master state).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and is always safe to call.
    unsafe { libc::_exit(code) }
}

/// Opens syslog with ident `siftd` and the pid in each line.
pub fn open_syslog(facility: libc::c_int) {
    // SAFETY: the ident is a static NUL-terminated string that outlives the process's use of it.
    unsafe { libc::openlog(c"siftd".as_ptr(), libc::LOG_PID | libc::LOG_NDELAY, facility) };
}

/// Sends one line to syslog.
pub fn syslog(priority: libc::c_int, text: &CString) {
    // SAFETY: "%s" with one valid C string argument.
    unsafe { libc::syslog(priority, c"%s".as_ptr(), text.as_ptr()) };
}

/// Closes a raw fd that some owner in a forked child's copy of master state holds;
/// the child never uses that owner again (it leaves through [`exit_now`]).
pub fn close(fd: RawFd) -> io::Result<()> {
    syscall!(close(fd)).map(drop)
}

/// The current time as an RFC 2822 date in UTC, for `_DATE_` and the report's `Received` header.
pub fn rfc2822_now() -> String {
    // SAFETY: time(NULL) is always valid.
    let now = unsafe { libc::time(std::ptr::null_mut()) };
    // SAFETY: an all-zero tm is a valid out-value for gmtime_r.
    let mut tm: libc::tm = unsafe { mem::zeroed() };
    // SAFETY: both pointers are valid for the call.
    if unsafe { libc::gmtime_r(&now, &mut tm) }.is_null() {
        return String::from("Thu, 01 Jan 1970 00:00:00 +0000");
    }
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} +0000",
        DAYS.get(tm.tm_wday as usize).unwrap_or(&"Sun"),
        tm.tm_mday,
        MONTHS.get(tm.tm_mon as usize).unwrap_or(&"Jan"),
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// Takes ownership of a listening stream socket this process inherited (systemd's
/// socket activation passes them from fd 3 on) and marks it close-on-exec. Refuses an
/// fd that is not a listening stream socket, so a wrong `LISTEN_FDS` cannot make us
/// adopt a file or the syslog socket.
pub fn adopt_listener(fd: RawFd) -> io::Result<OwnedFd> {
    for (option, want) in [(libc::SO_TYPE, libc::SOCK_STREAM), (libc::SO_ACCEPTCONN, 1)] {
        let mut value: libc::c_int = 0;
        let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: value and len are valid out-pointers and len is value's size.
        syscall!(getsockopt(fd, libc::SOL_SOCKET, option, (&mut value as *mut libc::c_int).cast(), &mut len))?;
        if value != want {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a listening stream socket"));
        }
    }
    let flags = syscall!(fcntl(fd, libc::F_GETFD))?;
    syscall!(fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC))?;
    // SAFETY: fd is an open socket (getsockopt succeeded) that this process inherited;
    // nothing in it owns the fd yet, and the caller adopts each inherited fd once.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// CPU time this thread has used: benchmarks report it beside wall time, as it is
/// steadier on a shared machine.
pub fn thread_cpu_time() -> std::time::Duration {
    // SAFETY: an all-zero timespec is a valid out-value.
    let mut ts: libc::timespec = unsafe { mem::zeroed() };
    // SAFETY: the pointer is valid for the call; the clock id is a constant.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_file_table() {
        let dir = std::env::temp_dir().join(format!("siftd-map-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let big: Vec<u8> = (0..3 * 4096 + 17).map(|i| (i * 31 % 251) as u8).collect();
        // File contents: the mapping holds exactly them, page-aligned.
        let cases: [&[u8]; 3] = [b"", b"SIFTDFA\0", &big];
        for (i, contents) in cases.iter().enumerate() {
            let path = dir.join(format!("{i}"));
            std::fs::write(&path, contents).expect("write");
            let file = std::fs::File::open(&path).expect("open");
            let mapped = map_file(&file).expect("maps");
            assert_eq!(mapped.as_ref(), *contents, "case {i}");
            assert_eq!(mapped.as_ref().as_ptr() as usize % 4, 0, "case {i}");
            // Replaced by rename while mapped: the mapping keeps the old bytes.
            let tmp = dir.join("tmp");
            std::fs::write(&tmp, b"new").expect("write");
            std::fs::rename(&tmp, &path).expect("rename");
            assert_eq!(mapped.as_ref(), *contents, "case {i} after rename");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Tests that switch [`Allocations`] take turns.
    static MODE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn allocation_modes_table() {
        let _mode = MODE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let small = Layout::from_size_align(48, 8).expect("layout");
        let class = Arena::class_of(small).expect("a class");
        let alloc = |mode| {
            set_allocations(mode);
            // SAFETY: a non-zero layout.
            let p = unsafe { ForkAllocator.alloc(small) };
            assert!(!p.is_null());
            // SAFETY: p is 48 writable bytes.
            unsafe { std::ptr::write_bytes(p, 0x5a, 48) };
            p
        };
        let from_master = alloc(Allocations::MasterArena);
        let from_system = alloc(Allocations::System);
        let from_child = alloc(Allocations::ChildArena);
        let owner = |p| (MASTER_ARENA.with(|a| a.owns(p)), CHILD_ARENA.with(|a| a.owns(p)));
        assert_eq!(owner(from_master), (true, false));
        assert_eq!(owner(from_system), (false, false));
        assert_eq!(owner(from_child), (false, true));
        // (mode, block): freed by whoever gave it, except that a child leaves the master's alone.
        let cases = [
            (Allocations::ChildArena, from_master, false),
            (Allocations::ChildArena, from_child, true),
            (Allocations::System, from_master, true),
            (Allocations::System, from_system, true),
        ];
        for (mode, block, freed) in cases {
            set_allocations(mode);
            let arena = if block == from_child { &CHILD_ARENA } else { &MASTER_ARENA };
            // SAFETY: a live block of this layout (the child case leaves it live).
            unsafe { ForkAllocator.dealloc(block, small) };
            if block != from_system {
                assert_eq!(arena.with(|a| a.free[class]) == block, freed, "{mode:?}");
            }
            if !freed {
                // SAFETY: the block was left alone, so still readable.
                assert_eq!(unsafe { std::slice::from_raw_parts(block, 48) }, &[0x5a; 48], "{mode:?}: not written");
            }
        }
        // The master's event loop moves a startup (system) block into its arena when it grows it.
        let grown_from = alloc(Allocations::System);
        set_allocations(Allocations::MasterArena);
        // SAFETY: a live system block of this layout.
        let grown = unsafe { ForkAllocator.realloc(grown_from, small, 4000) };
        assert_eq!(owner(grown), (true, false));
        // SAFETY: the first 48 bytes were copied.
        assert_eq!(unsafe { std::slice::from_raw_parts(grown, 48) }, &[0x5a; 48]);
        // SAFETY: a live block of the grown layout.
        unsafe { ForkAllocator.dealloc(grown, Layout::from_size_align(4000, 8).expect("layout")) };
        set_allocations(Allocations::System);
    }

    #[test]
    fn release_pages_table() {
        let mut buf = vec![0xa5u8; 16 * PAGE];
        let base = buf.as_ptr() as usize;
        let page_at = |off: usize| (base + off).div_ceil(PAGE) * PAGE - base;
        // (start, end): bytes outside the whole pages inside start..end keep their value.
        let cases = [(0, 0), (1, 100), (1, 3 * PAGE + 5), (page_at(PAGE), page_at(PAGE) + 4 * PAGE), (0, 16 * PAGE)];
        for (start, end) in cases {
            buf.fill(0xa5);
            release_pages(&mut buf[start..end]).expect("madvise");
            let (first, last) = ((base + start).div_ceil(PAGE) * PAGE, (base + end) / PAGE * PAGE);
            for (i, &b) in buf.iter().enumerate() {
                if base + i < first || base + i >= last {
                    assert_eq!(b, 0xa5, "{start}..{end}: byte {i} kept");
                } else if cfg!(target_os = "linux") {
                    assert_eq!(b, 0, "{start}..{end}: byte {i} given back (zero on Linux)");
                }
            }
        }
    }

    #[test]
    fn release_spare_pages_table() {
        // (bytes kept): the buffer empties, keeps its allocation, and the whole pages
        // of it past the kept bytes go back (zero on Linux).
        for keep in [0, 100, PAGE, 3 * PAGE + 1, 16 * PAGE, 64 * PAGE] {
            let mut v: Vec<u8> = Vec::with_capacity(16 * PAGE);
            v.resize(16 * PAGE, 0xa5);
            let (base, capacity) = (v.as_ptr() as usize, v.capacity());
            release_spare_pages(&mut v, keep).expect("madvise");
            assert_eq!((v.len(), v.capacity(), v.as_ptr() as usize), (0, capacity, base), "{keep}");
            // SAFETY: the allocation's bytes, all written above; reading them as u8 is
            // reading the test's own memory.
            let bytes = unsafe { std::slice::from_raw_parts(v.as_ptr(), capacity) };
            let first = (base + keep.min(capacity)).div_ceil(PAGE) * PAGE - base;
            let last = (base + capacity) / PAGE * PAGE - base;
            for (i, &b) in bytes.iter().enumerate() {
                if i < first || i >= last {
                    assert_eq!(b, 0xa5, "{keep}: byte {i} kept");
                } else if cfg!(target_os = "linux") {
                    assert_eq!(b, 0, "{keep}: byte {i} given back");
                }
            }
        }
    }

    #[test]
    fn freed_blocks_give_back_table() {
        /// What stays resident of a freed block.
        #[derive(Debug, PartialEq)]
        enum Kept {
            /// All of it: the free list's link in its first bytes, the rest as written.
            Whole,
            /// Nothing.
            Nothing,
        }
        // (block size, blocks freed, freed in reverse, what stays of each of the last
        // GIVEN_BACK_SLOTS freed, of each freed before them, syscalls to give them back)
        let many = GIVEN_BACK_SLOTS + 2;
        let cases = [
            (64, 3, false, Kept::Whole, Kept::Whole, 0),
            (4096, 3, false, Kept::Whole, Kept::Whole, 0),
            // Adjacent blocks go back in one run, whatever order they were freed in.
            (8192, 3, false, Kept::Nothing, Kept::Nothing, 1),
            (8192, 3, true, Kept::Nothing, Kept::Nothing, 1),
            (16384, 2, false, Kept::Nothing, Kept::Nothing, 1),
            (32768, 2, true, Kept::Nothing, Kept::Nothing, 1),
            // Past the class's slots blocks stay on the free list.
            (8192, many, false, Kept::Nothing, Kept::Whole, 1),
            (64, many, false, Kept::Whole, Kept::Whole, 0),
        ];
        for (size, count, reverse, within, past, runs) in cases {
            let mut arena = Box::new(Arena { give_back: GIVE_BACK_BLOCK, ..Arena::EMPTY });
            let layout = Layout::from_size_align(size, 8).expect("layout");
            let blocks: Vec<*mut u8> = (0..count).map(|_| arena.alloc(layout)).collect();
            for &a in &blocks {
                assert!(!a.is_null(), "{size}");
                // SAFETY: a is a block of `size` bytes.
                unsafe { std::ptr::write_bytes(a, 0xa5, size) };
            }
            let mut order = blocks.clone();
            if reverse {
                order.reverse();
            }
            for &a in &order {
                arena.dealloc(a, layout);
            }
            let written = |a: *mut u8| {
                // SAFETY: the freed block stays mapped in the arena's slab; reading it is
                // reading the test's own memory.
                let bytes = unsafe { std::slice::from_raw_parts(a, size) };
                bytes[8..].iter().all(|&b| b == 0xa5)
            };
            assert!(blocks.iter().all(|&a| written(a)), "{size}: a free does not give back");
            assert_eq!(arena.give_back_freed(), runs, "{size} x{count}: syscalls");
            for (i, &a) in order.iter().enumerate() {
                let seen = if written(a) { Kept::Whole } else { Kept::Nothing };
                // Pages given back read as zero on Linux; elsewhere they may keep their bytes.
                if cfg!(target_os = "linux") {
                    let kept = if i + GIVEN_BACK_SLOTS >= count { &within } else { &past };
                    assert_eq!(&seen, kept, "{size}: block {i} of {count}");
                }
            }
            assert_eq!(arena.give_back_freed(), 0, "{size}: nothing freed since");
            let mut again: Vec<*mut u8> = (0..count).map(|_| arena.alloc(layout)).collect();
            let mut freed = blocks.clone();
            again.sort();
            freed.sort();
            assert_eq!(again, freed, "{size}: every freed block is reused, none carved anew");
            let (regions, n) = (arena.regions, arena.count);
            for &(start, len) in &regions[..n] {
                // SAFETY: the test's own mappings, no longer used.
                unsafe { libc::munmap(start as *mut libc::c_void, len) };
            }
        }
    }

    #[test]
    fn sort_free_list_table() {
        // (list order, by index into the slots): any order comes out by address.
        let orders: [&[usize]; 7] = [&[], &[0], &[0, 1], &[1, 0], &[4, 3, 2, 1, 0], &[2, 7, 0, 5, 3, 6, 1, 4], &[8, 1, 6, 3, 0, 5, 2, 7, 4]];
        let mut slots = vec![0usize; 16];
        let base = slots.as_mut_ptr();
        for order in orders {
            // Each slot is a block; the list links them in `order`.
            let mut head = std::ptr::null_mut::<u8>();
            for &i in order.iter().rev() {
                // SAFETY: i indexes `slots`, a pointer-sized, writable slot.
                let block = unsafe { base.add(i) };
                // SAFETY: as above.
                unsafe { block.cast::<*mut u8>().write(head) };
                head = block.cast();
            }
            // SAFETY: a list of the test's own slots, null-terminated.
            let mut block = unsafe { sort_free_list(head) };
            let mut seen = Vec::new();
            while !block.is_null() {
                seen.push((block as usize - base as usize) / std::mem::size_of::<usize>());
                // SAFETY: as above.
                block = unsafe { block.cast::<*mut u8>().read() };
            }
            let mut want = order.to_vec();
            want.sort_unstable();
            assert_eq!(seen, want, "{order:?}");
        }
    }

    #[test]
    fn small_blocks_give_back_whole_pages_table() {
        /// Which blocks of each page are freed.
        #[derive(Clone, Copy, Debug)]
        enum Freed {
            All,
            /// All, a block of each page in turn: the free list mixes the pages.
            AllInTurn,
            AllButOneAPage,
            EveryOtherPage,
        }
        // (block size, pages of blocks, what is freed, syscalls, pages given back)
        let cases = [
            (64, 16, Freed::All, 1, 16),
            (32, 12, Freed::All, 1, 12),
            (2048, 10, Freed::All, 1, 10),
            (4096, 9, Freed::All, 1, 9),
            (64, 16, Freed::AllInTurn, 1, 16),
            (512, 20, Freed::AllInTurn, 1, 20),
            (64, 16, Freed::AllButOneAPage, 0, 0),
            (2048, 16, Freed::EveryOtherPage, 8, 8),
            // Under SMALL_GIVE_BACK freed bytes: nothing goes.
            (64, 4, Freed::All, 0, 0),
            // Past the class's slots the rest stay on the free list.
            (4096, EMPTY_PAGE_SLOTS + 6, Freed::All, 1, EMPTY_PAGE_SLOTS),
        ];
        for (size, pages, freed, runs, given) in cases {
            let mut arena = Box::new(Arena { give_back: GIVE_BACK_BLOCK, ..Arena::EMPTY });
            let layout = Layout::from_size_align(size, 8).expect("layout");
            let per_page = PAGE / size;
            let blocks: Vec<*mut u8> = (0..pages * per_page).map(|_| arena.alloc(layout)).collect();
            assert!(blocks.iter().all(|b| !b.is_null()), "{size}");
            let mut freed_blocks = Vec::new();
            let mut order: Vec<usize> = (0..blocks.len()).collect();
            if let Freed::AllInTurn = freed {
                order.sort_by_key(|&i| (i % per_page, i / per_page));
            }
            for i in order {
                let b = blocks[i];
                let (page, at) = (i / per_page, i % per_page);
                let free = match freed {
                    Freed::All | Freed::AllInTurn => true,
                    Freed::AllButOneAPage => at != 0,
                    Freed::EveryOtherPage => page % 2 == 0,
                };
                // SAFETY: b is a block of `size` bytes.
                unsafe { std::ptr::write_bytes(b, 0xa5, size) };
                if free {
                    arena.dealloc(b, layout);
                    freed_blocks.push(b);
                }
            }
            let c = Arena::class_of(layout).expect("a class");
            assert_eq!(arena.give_back_freed(), runs, "{size} x{pages} {freed:?}: syscalls");
            assert_eq!(arena.empty_count[c], given, "{size} x{pages} {freed:?}: pages given back");
            assert_eq!(arena.free_count[c], freed_blocks.len() - given * per_page, "{size}: left on the free list");
            if cfg!(target_os = "linux") {
                let zero = freed_blocks.iter().filter(|&&b| {
                    // SAFETY: the block stays mapped in the arena's slab.
                    unsafe { std::slice::from_raw_parts(b, size) }.iter().all(|&x| x == 0)
                });
                assert_eq!(zero.count(), given * per_page, "{size}: the blocks given back read zero");
            }
            assert_eq!(arena.give_back_freed(), 0, "{size}: nothing freed since");
            if let Freed::AllButOneAPage = freed {
                // What stays partly in use is not sorted again until as much more is freed.
                assert_eq!(arena.freed_since[c], 0, "{size}: counted from the pass");
            }
            // Every freed block is handed out again, once, before any new one.
            let mut again: Vec<*mut u8> = (0..freed_blocks.len()).map(|_| arena.alloc(layout)).collect();
            for &b in &again {
                // SAFETY: a live block of `size` bytes.
                unsafe { std::ptr::write_bytes(b, 0x5a, size) };
            }
            again.sort();
            freed_blocks.sort();
            assert_eq!(again, freed_blocks, "{size} x{pages} {freed:?}: reused, none carved anew");
            assert_eq!((arena.free_count[c], arena.empty_count[c]), (0, 0), "{size}: all taken");
            let (regions, n) = (arena.regions, arena.count);
            for &(start, len) in &regions[..n] {
                // SAFETY: the test's own mappings, no longer used.
                unsafe { libc::munmap(start as *mut libc::c_void, len) };
            }
        }
    }

    #[test]
    fn zeroed_blocks_table() {
        let _mode = MODE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // (size): a zeroed block reads zero whether new or reused; only a new one is
        // left unwritten.
        let sizes = [48, 4096, 8192, 32768, 100_000];
        let mut arena = Box::new(Arena { give_back: GIVE_BACK_BLOCK, ..Arena::EMPTY });
        for size in sizes {
            let layout = Layout::from_size_align(size, 8).expect("layout");
            let (a, fresh) = arena.alloc_fresh(layout);
            assert!(fresh, "{size}: new");
            arena.dealloc(a, layout);
            let (b, fresh) = arena.alloc_fresh(layout);
            let class = Arena::class_of(layout).is_some();
            assert_eq!(fresh, !class, "{size}: a class block is reused, a large one mapped anew");
            assert!(!class || b == a, "{size}: the freed block");
            arena.dealloc(b, layout);
        }
        set_allocations(Allocations::ChildArena);
        for size in sizes {
            let layout = Layout::from_size_align(size, 8).expect("layout");
            for round in 0..2 {
                // SAFETY: a non-zero layout.
                let p = unsafe { ForkAllocator.alloc_zeroed(layout) };
                assert!(!p.is_null(), "{size}");
                // SAFETY: p is `size` writable bytes.
                let bytes = unsafe { std::slice::from_raw_parts_mut(p, size) };
                assert!(bytes.iter().all(|&b| b == 0), "{size}: round {round} reads zero");
                bytes.fill(0xa5);
                // SAFETY: a live block of this layout.
                unsafe { ForkAllocator.dealloc(p, layout) };
            }
        }
        set_allocations(Allocations::System);
        let (regions, n) = (arena.regions, arena.count);
        for &(start, len) in &regions[..n] {
            // SAFETY: the test's own mappings, no longer used.
            unsafe { libc::munmap(start as *mut libc::c_void, len) };
        }
    }

    #[test]
    fn child_arena_table() {
        let mut arena = Box::new(Arena::EMPTY);
        // (size, align): each block is aligned, writable, and reused once freed.
        let cases: &[(usize, usize)] = &[(1, 1), (16, 8), (24, 8), (100, 64), (4096, 4096), (32768, 8), (32769, 8), (3 << 20, 16)];
        for &(size, align) in cases {
            let layout = Layout::from_size_align(size, align).expect("layout");
            let a = arena.alloc(layout);
            assert!(!a.is_null() && a as usize % align == 0, "{size}/{align}");
            // SAFETY: a is a block of at least `size` bytes.
            unsafe { std::ptr::write_bytes(a, 0xa5, size) };
            let b = arena.alloc(layout);
            assert!(b as usize >= a as usize + size || b as usize + size <= a as usize, "{size}/{align}: blocks overlap");
            arena.dealloc(a, layout);
            let c = arena.alloc(layout);
            if Arena::class_of(layout).is_some() {
                assert_eq!(c, a, "{size}/{align}: a freed block is reused");
            }
            arena.dealloc(b, layout);
            arena.dealloc(c, layout);
        }
        // Growing a block the arena does not own (the master's) within one size class
        // moves it: the system allocator may have given it fewer bytes than the class.
        let _mode = MODE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        set_allocations(Allocations::ChildArena);
        let mut master = [7u8; 20];
        let layout20 = Layout::from_size_align(20, 1).expect("layout");
        // SAFETY: the "old block" is readable for 20 bytes; the result is a new arena block.
        let grown = unsafe { ForkAllocator.realloc(master.as_mut_ptr(), layout20, 30) };
        set_allocations(Allocations::System);
        assert!(!grown.is_null() && grown != master.as_mut_ptr());
        // SAFETY: grown holds the 20 copied bytes.
        assert_eq!(unsafe { std::slice::from_raw_parts(grown, 20) }, &[7u8; 20]);
        assert_eq!(master, [7u8; 20], "the master's block is neither freed nor written");
        // A block the arena does not own (the master's) is left alone.
        let mut outside = [0u8; 64];
        assert!(!arena.dealloc(outside.as_mut_ptr(), Layout::from_size_align(64, 8).expect("layout")));
        assert_eq!(outside, [0u8; 64]);
        let (regions, count) = (arena.regions, arena.count);
        for &(start, len) in &regions[..count] {
            // SAFETY: the test's own mappings, no longer used.
            unsafe { libc::munmap(start as *mut libc::c_void, len) };
        }
    }
}
