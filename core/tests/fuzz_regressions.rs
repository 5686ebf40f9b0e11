//! Replays every minimized crasher under fuzz/regressions/<target>/ through the same
//! entry point its fuzz target uses (fuzz/src/lib.rs, included here so there is one copy).

#[path = "../../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod entries;

use std::path::Path;

#[test]
fn replay_fuzz_regressions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions");
    let mut replayed = 0usize;
    let Ok(dirs) = std::fs::read_dir(&root) else {
        println!("replayed 0 fuzz regressions (no {})", root.display());
        return;
    };
    let mut files = Vec::new();
    for dir in dirs.flatten() {
        if !dir.path().is_dir() {
            continue;
        }
        let target = dir.file_name().to_string_lossy().into_owned();
        assert!(entries::TARGETS.contains(&target.as_str()), "regressions for unknown target {target}");
        let Ok(inputs) = std::fs::read_dir(dir.path()) else { continue };
        for input in inputs.flatten() {
            if input.path().is_file() && !input.file_name().to_string_lossy().starts_with('.') {
                files.push((target.clone(), input.path()));
            }
        }
    }
    files.sort();
    for (target, path) in files {
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        println!("replay {target} {}", path.display());
        assert!(entries::run(&target, &data));
        replayed += 1;
    }
    println!("replayed {replayed} fuzz regressions");
}

#[test]
fn every_target_runs_on_trivial_inputs() {
    for target in entries::TARGETS {
        for data in [&b""[..], b"\0", b"\xff\xff\xff\xff", b"PROCESS SPAMC/1.5\r\n\r\n"] {
            assert!(entries::run(target, data), "{target}");
        }
    }
}

/// Runs one input by hand: `FUZZ_REPLAY=target:path cargo test --test fuzz_regressions replay_one -- --nocapture`.
#[test]
fn replay_one() {
    let Ok(spec) = std::env::var("FUZZ_REPLAY") else { return };
    let (target, path) = spec.split_once(':').unwrap_or(("", ""));
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    assert!(entries::run(target, &data), "no target {target}");
}
