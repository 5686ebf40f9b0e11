//! Helpers shared by the integration tests: run the real siftd binary.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The siftd binary cargo built for this test run.
pub fn siftd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_siftd"))
}

/// The shared corpus folder, if present.
pub fn corpus(sub: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus").join(sub);
    p.is_dir().then_some(p)
}

/// Runs `cmd` with a virtual-memory cap (KiB) and a deadline; kills it past the deadline.
pub fn run_bounded(cmd: &mut Command, memory_kib: u64, deadline: Duration) -> Output {
    let program = cmd.get_program().to_owned();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!("ulimit -v {memory_kib} && exec \"$0\" \"$@\""))
        .arg(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = sh.spawn().expect("spawn siftd");
    let started = Instant::now();
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let out_thread = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err_thread = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let stdout = out_thread.join().unwrap_or_default().into_bytes();
            let stderr = err_thread.join().unwrap_or_default().into_bytes();
            return Output { status, stdout, stderr };
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            panic!("siftd did not finish within {deadline:?}: hang");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub const GTUBE: &str = include_str!("data/gtube.eml");

pub const HAM: &str = include_str!("data/ham.eml");
