//! Deployment as an admin runs it: siftd started with listening sockets passed the way
//! systemd passes them (`systemd-socket-activate`, or python3 doing the same), answering
//! the real `spamc`; and the shipped unit, default and rc.d files checked against the
//! binary. Tests print SKIP when spamc or both activators are missing.

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::GTUBE;

fn have(program: &str, version_arg: &str) -> bool {
    Command::new(program).arg(version_arg).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A scratch directory for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("sift-deploy-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where spamc connects.
#[derive(Clone)]
enum Endpoint {
    Tcp(u16),
    Unix(PathBuf),
}

impl Endpoint {
    fn listen_arg(&self) -> String {
        match self {
            Endpoint::Tcp(port) => format!("127.0.0.1:{port}"),
            Endpoint::Unix(path) => path.display().to_string(),
        }
    }

    fn spamc(&self, args: &[&str], input: &str) -> (String, i32) {
        let mut cmd = Command::new("spamc");
        match self {
            Endpoint::Tcp(port) => cmd.args(["-d", "127.0.0.1", "-p", &port.to_string()]),
            Endpoint::Unix(path) => cmd.arg("-U").arg(path),
        };
        common::run_spamc(cmd, args, input)
    }
}

/// Runs siftd with one listening socket passed as fd 3 (`LISTEN_PID`, `LISTEN_FDS=1`,
/// `LISTEN_FDNAMES`), by systemd's own tool when installed, else by python3.
fn activated_command(endpoint: &Endpoint, fd_name: &str) -> Option<Command> {
    let siftd = env!("CARGO_BIN_EXE_siftd");
    if have("systemd-socket-activate", "--version") {
        let mut cmd = Command::new("systemd-socket-activate");
        cmd.args(["-l", &endpoint.listen_arg(), &format!("--fdname={fd_name}"), siftd]);
        return Some(cmd);
    }
    if have("python3", "--version") {
        // What systemd does: bind, listen, put the socket at fd 3, set the variables, exec.
        const PASS: &str = "import os, socket, sys\n\
            addr, name = sys.argv[1], sys.argv[2]\n\
            if addr.startswith('/'):\n    s = socket.socket(socket.AF_UNIX); s.bind(addr)\n\
            else:\n    h, p = addr.rsplit(':', 1); s = socket.socket(); s.bind((h, int(p)))\n\
            s.listen(64)\n\
            os.dup2(s.fileno(), 3); os.set_inheritable(3, True)\n\
            os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1', LISTEN_FDNAMES=name)\n\
            os.execv(sys.argv[3], sys.argv[3:])\n";
        let mut cmd = Command::new("python3");
        cmd.args(["-c", PASS, &endpoint.listen_arg(), fd_name, siftd]);
        return Some(cmd);
    }
    None
}

/// A socket-activated siftd; the activator is killed when dropped.
struct Activated {
    activator: Child,
    log: PathBuf,
    pidfile: PathBuf,
}

impl Activated {
    /// Starts siftd on `endpoint` as a socket unit would and waits for its answer to PING.
    fn start(endpoint: &Endpoint, dir: &Path, extra: &[&str]) -> Option<Activated> {
        let log = dir.join("siftd.log");
        let pidfile = dir.join("siftd.pid");
        let mut cmd = activated_command(endpoint, "siftd.socket")?;
        let activator = cmd
            .arg("-s")
            .arg(&log)
            .arg("-r")
            .arg(&pidfile)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the activator");
        let a = Activated { activator, log, pidfile };
        // systemd-socket-activate starts siftd on the first connection, as systemd does.
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if endpoint.spamc(&["-K"], "").1 == 0 {
                return Some(a);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("socket-activated siftd did not answer PING; log:\n{}", a.log_text());
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn siftd_pid(&self) -> String {
        std::fs::read_to_string(&self.pidfile).expect("siftd's pid file").trim().to_string()
    }

    /// SIGTERM to siftd; waits until it removed its pid file.
    fn stop(&self) {
        let ok = Command::new("kill").args(["-s", "TERM", &self.siftd_pid()]).status().expect("kill").success();
        assert!(ok, "kill siftd");
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.pidfile.exists() {
            assert!(Instant::now() < deadline, "siftd did not stop; log:\n{}", self.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Activated {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.pidfile) {
            let _ = Command::new("kill").args(["-s", "KILL", pid.trim()]).status();
        }
        let _ = self.activator.kill();
        let _ = self.activator.wait();
    }
}

macro_rules! require {
    ($cond:expr, $why:expr) => {
        if !$cond {
            eprintln!("SKIP: {}", $why);
            return;
        }
    };
}

/// Serves spamc on the passed socket, binds nothing itself, and leaves the socket to its owner.
fn serves_on_passed_socket(endpoint: Endpoint, dir: &Path) -> Activated {
    // An explicit --listen elsewhere must be ignored while sockets are passed.
    let unused = free_port();
    let unused_arg = format!("127.0.0.1:{unused}");
    let siftd = Activated::start(&endpoint, dir, &["-i", &unused_arg]).expect("an activator");
    let (out, code) = endpoint.spamc(&["-c"], GTUBE);
    assert_eq!(code, 1, "GTUBE over the passed socket: {out}");
    assert!(out.trim().ends_with("/5.0"), "{out}");
    let (out, code) = endpoint.spamc(&["-c"], common::HAM);
    assert_eq!(code, 0, "ham over the passed socket: {out}");
    assert!(TcpStream::connect(("127.0.0.1", unused)).is_err(), "siftd bound --listen although sockets were passed");
    let log = siftd.log_text();
    let name = format!("{} (passed as siftd.socket)", endpoint.listen_arg());
    assert!(log.contains(&format!("server started on {name}")), "{log}");
    assert!(log.contains("socket activation: using the passed sockets"), "{log}");
    assert!(log.contains("]: result: Y "), "{log}");
    siftd
}

#[test]
fn tcp_socket_activation_answers_spamc() {
    require!(have("spamc", "-V"), "spamc not installed (apt-get install spamc)");
    require!(activated_command(&Endpoint::Tcp(0), "x").is_some(), "neither systemd-socket-activate nor python3");
    let dir = Scratch::new("tcp");
    let siftd = serves_on_passed_socket(Endpoint::Tcp(free_port()), &dir.0);
    siftd.stop();
    assert!(siftd.log_text().contains("server stopped"));
}

#[test]
fn unix_socket_activation_answers_spamc_and_leaves_the_socket_file() {
    require!(have("spamc", "-V"), "spamc not installed (apt-get install spamc)");
    require!(activated_command(&Endpoint::Tcp(0), "x").is_some(), "neither systemd-socket-activate nor python3");
    let dir = Scratch::new("unix");
    let path = dir.0.join("siftd.sock");
    let siftd = serves_on_passed_socket(Endpoint::Unix(path.clone()), &dir.0);
    siftd.stop();
    assert!(path.exists(), "siftd removed a socket file it did not create");
}

#[test]
fn variables_for_another_process_are_ignored() {
    require!(have("spamc", "-V"), "spamc not installed (apt-get install spamc)");
    let dir = Scratch::new("other-pid");
    let port = free_port();
    let log = dir.0.join("siftd.log");
    // LISTEN_PID names pid 1: the fds are not ours, so siftd binds --listen itself.
    let mut child = Command::new(env!("CARGO_BIN_EXE_siftd"))
        .env("LISTEN_PID", "1")
        .env("LISTEN_FDS", "1")
        .arg("-s")
        .arg(&log)
        .args(["-i", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .spawn()
        .expect("start siftd");
    let endpoint = Endpoint::Tcp(port);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut answered = false;
    while Instant::now() < deadline && !answered {
        answered = endpoint.spamc(&["-K"], "").1 == 0;
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(answered, "siftd did not bind --listen: {text}");
    assert!(text.contains(&format!("server started on 127.0.0.1:{port}")) && !text.contains("(passed"), "{text}");
}

#[test]
fn a_passed_fd_that_is_not_a_listening_socket_is_refused() {
    // sh puts /dev/null at fd 3 and execs siftd in its own pid, as a broken manager would.
    let siftd = env!("CARGO_BIN_EXE_siftd");
    let port = free_port();
    let out = Command::new("sh")
        .args(["-c", "LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" -s stderr -i 127.0.0.1:\"$1\" 3</dev/null", siftd, &port.to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("run sh");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(err.contains("socket activation: fd 3: "), "{err}");
}

/// The words of a shell assignment `NAME="..."` in `text`, from its first uncommented line.
fn assigned_words(text: &str, name: &str) -> Option<Vec<String>> {
    let line = text.lines().map(str::trim).find(|l| l.starts_with(&format!("{name}=")))?;
    let value = line.split_once('=')?.1.trim_matches('"');
    Some(value.split_whitespace().map(str::to_string).collect())
}

#[test]
fn shipped_files_agree_with_the_binary() {
    let dist = repo().join("dist");
    let read = |p: &str| std::fs::read_to_string(dist.join(p)).unwrap_or_else(|e| panic!("dist/{p}: {e}"));
    let service = read("systemd/siftd.service");
    let socket = read("systemd/siftd.socket");
    let default = read("debian/default");

    let exec: Vec<&str> = service.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("ExecStart").split_whitespace().collect();
    assert_eq!(exec, ["/usr/sbin/siftd", "$OPTIONS"], "the package installs /usr/sbin/siftd and .ci/deb runs this line");
    assert!(service.contains("EnvironmentFile=-/etc/default/siftd"));
    assert!(service.contains("ExecReload=/bin/kill -HUP $MAINPID"));
    assert!(socket.lines().any(|l| l == "ListenStream=127.0.0.1:783"), "{socket}");

    // The default file's OPTIONS and the rc.d scripts' fixed options are options siftd takes.
    let mut cases: Vec<(String, Vec<String>)> = vec![("/etc/default/siftd OPTIONS".into(), assigned_words(&default, "OPTIONS").expect("OPTIONS="))];
    let freebsd = read("freebsd/rc.d/siftd");
    let fixed = assigned_words(&freebsd, "command_args").expect("command_args=");
    let fixed = fixed.into_iter().map(|w| w.replace("${pidfile}", "/var/run/siftd/siftd.pid").replace("${siftd_runas}", "siftd")).collect();
    cases.push(("FreeBSD command_args".into(), fixed));
    let openbsd = read("openbsd/rc.d/siftd");
    assert!(openbsd.contains("rc_exec \"${daemon} -d -u _siftd ${daemon_flags}\""), "{openbsd}");
    cases.push(("OpenBSD rc_start".into(), vec!["-d".into(), "-u".into(), "_siftd".into()]));
    for (what, words) in cases {
        let out = common::siftd().args(&words).arg("--lint").output().expect("run siftd");
        assert!(out.status.success(), "{what} {words:?} refused: {}", String::from_utf8_lossy(&out.stderr));
    }

    // rc.d scripts are at least valid shell.
    for script in ["freebsd/rc.d/siftd", "openbsd/rc.d/siftd"] {
        let out = Command::new("sh").arg("-n").arg(dist.join(script)).output().expect("sh -n");
        assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(read(script).contains("siftd_flags"), "{script} documents siftd_flags");
    }
    assert!(freebsd.contains("rcvar=\"siftd_enable\""));
}
