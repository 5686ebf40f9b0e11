//! `siftd scan` and `siftd --lint` as a user runs them.

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{siftd, GTUBE, HAM};

fn write_temp(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sift-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write temp file");
    path
}

#[test]
fn scan_exit_status_table() {
    let gtube = write_temp("gtube.eml", GTUBE);
    let ham = write_temp("ham.eml", HAM);
    let missing = std::path::PathBuf::from("/nonexistent/sift/message.eml");
    let cases: &[(&[&std::path::Path], i32)] = &[
        (&[&ham], 0),
        (&[&gtube], 1),
        (&[&ham, &gtube], 1),
        (&[&missing], 66),
        (&[&ham, &missing], 66),
    ];
    for (files, want) in cases {
        let out = siftd().arg("scan").args(files.iter()).output().expect("run siftd");
        assert_eq!(out.status.code(), Some(*want), "files {files:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn scan_text_shows_spam_line_and_rules() {
    let gtube = write_temp("gtube2.eml", GTUBE);
    let out = siftd().arg("scan").arg(&gtube).output().expect("run siftd");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Spam: True ; "), "{text}");
    assert!(text.contains("GTUBE"), "{text}");
    assert!(text.contains("Content analysis details:"), "{text}");
}

#[test]
fn scan_json_from_stdin() {
    let mut child = siftd()
        .args(["scan", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn siftd");
    child.stdin.take().expect("stdin").write_all(GTUBE.as_bytes()).expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(1));
    let line = String::from_utf8_lossy(&out.stdout);
    for needle in ["\"file\":\"-\"", "\"spam\":true", "\"hits\":[", "\"GTUBE\"", "\"required\":5.000"] {
        assert!(line.contains(needle), "{needle} missing in {line}");
    }
    assert_eq!(line.lines().count(), 1);
}

#[test]
fn missing_rules_directory_is_a_config_error() {
    let ham = write_temp("ham2.eml", HAM);
    let out = siftd().args(["scan", "-C", "/nonexistent/sift-rules"]).arg(&ham).output().expect("run siftd");
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/sift-rules"));
}

#[test]
fn rules_directory_replaces_embedded_rules() {
    let dir = std::env::temp_dir().join(format!("sift-cli-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("rules dir");
    std::fs::write(dir.join("10_lunch.cf"), "body LUNCH /\\blunch\\b/i\nscore LUNCH 6\ndescribe LUNCH Talks about lunch\n").expect("write rules");
    let ham = write_temp("ham3.eml", HAM);
    let out = siftd().args(["scan", "--json", "-C"]).arg(&dir).arg(&ham).output().expect("run siftd");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"LUNCH\""));
}

#[test]
fn lint_counts_and_reasons() {
    let out = siftd().arg("--lint").output().expect("run siftd");
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("body") && text.contains("total"), "{text}");

    let dir = std::env::temp_dir().join(format!("sift-lint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("rules dir");
    std::fs::write(dir.join("50_bad.cf"), "body GOOD /fine/\nbody LOOK /foo(?=bar)/\nbody GEE /\\Gfoo/\nbody EV eval:check_something()\nbody __SUB /no reader/\n").expect("write rules");
    let out = siftd().args(["--lint", "--json", "-C"]).arg(&dir).output().expect("run siftd");
    assert_eq!(out.status.code(), Some(0));
    let json = String::from_utf8_lossy(&out.stdout);
    // Lookaround runs (relaxed DFA + bounded backtracking); \G does not.
    assert!(!json.contains("\"name\":\"LOOK\""), "{json}");
    assert!(json.contains("\"name\":\"GEE\""), "{json}");
    assert!(json.contains("\"name\":\"EV\""), "{json}");
    assert!(!json.contains("\"name\":\"GOOD\""), "{json}");
    // A sub-rule no scored rule reads compiles but does not run.
    assert!(json.contains("\"body\":{\"defined\":4,\"compiled\":3,\"disabled\":1,\"zero_score\":0,\"unread\":1,"), "{json}");
}

#[test]
fn scan_with_compile_cache_table() {
    // A cold cache, the warm one it left, and a damaged one all give the verdicts the
    // plain compile gives; a damaged file is reported and rebuilt, not fatal.
    let gtube = write_temp("gtube3.eml", GTUBE);
    let ham = write_temp("ham3.eml", HAM);
    let cache = std::env::temp_dir().join(format!("sift-cli-cache-{}.dfa", std::process::id()));
    let _ = std::fs::remove_file(&cache);
    let scan = |cached: bool| {
        let mut cmd = siftd();
        if cached {
            cmd.arg("--compile-cache").arg(&cache);
        }
        let out = cmd.args(["scan", "--json"]).arg(&gtube).arg(&ham).output().expect("run siftd");
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, plain, _) = scan(false);
    assert_eq!(code, Some(1));
    // (cache state before the run, whether stderr reports a problem)
    let rows: &[(&str, bool)] = &[("missing", false), ("warm", false), ("damaged", true), ("rebuilt", false)];
    for &(state, reported) in rows {
        if state == "damaged" {
            let mut bytes = std::fs::read(&cache).expect("cache written");
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0x55;
            std::fs::write(&cache, bytes).expect("damage cache");
        }
        let (code, out, err) = scan(true);
        assert_eq!((code, out.as_str()), (Some(1), plain.as_str()), "{state}: {err}");
        assert_eq!(err.contains("compile cache"), reported, "{state}: {err}");
        assert!(cache.exists(), "{state}");
    }
    let _ = std::fs::remove_file(&cache);
}
