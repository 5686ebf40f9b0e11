//! Synthetic extremes through the whole scan: each gets a verdict, with the overflow
//! flags that say which capacity it exceeded.

use sift_core::rules::{cf, RuleSet, DEFAULT_RULES};
use sift_core::scan::Scratch;

fn big_body(bytes: usize) -> Vec<u8> {
    let mut m = b"From: a@example.com\nTo: b@example.org\nSubject: big\n\n".to_vec();
    let line = b"The quick brown fox jumps over the lazy dog; click here for free money now!\n";
    while m.len() < bytes {
        m.extend_from_slice(line);
    }
    m
}

fn many_headers(n: usize) -> Vec<u8> {
    let mut m = Vec::new();
    for i in 0..n {
        m.extend_from_slice(format!("X-Header-{i}: value {i}\n").as_bytes());
    }
    m.extend_from_slice(b"Subject: many headers\n\nbody\n");
    m
}

fn many_parts(n: usize) -> Vec<u8> {
    let mut m = b"Subject: parts\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n\n".to_vec();
    for i in 0..n {
        m.extend_from_slice(format!("--b\nContent-Type: text/plain\n\npart {i}\n").as_bytes());
    }
    m.extend_from_slice(b"--b--\n");
    m
}

fn deep_nesting(depth: usize) -> Vec<u8> {
    let mut m = b"Subject: deep\nMIME-Version: 1.0\n".to_vec();
    for i in 0..depth {
        m.extend_from_slice(format!("Content-Type: multipart/mixed; boundary=\"b{i}\"\n\n--b{i}\n").as_bytes());
    }
    m.extend_from_slice(b"Content-Type: text/plain\n\ninnermost text\n");
    for i in (0..depth).rev() {
        m.extend_from_slice(format!("--b{i}--\n").as_bytes());
    }
    m
}

#[test]
fn extremes_table() {
    let config = cf::parse_str("default.cf", DEFAULT_RULES).expect("embedded rules parse");
    let rules = RuleSet::compile(&config).expect("embedded rules compile");
    let mut scratch = Scratch::new(&rules);
    // (name, message, headers overflow, parts overflow, depth overflow)
    let cases: Vec<(&str, Vec<u8>, bool, bool, bool)> = vec![
        ("10 MB body", big_body(10 * 1024 * 1024), false, false, false),
        ("10,000 headers", many_headers(10_000), true, false, false),
        ("1,000 MIME parts", many_parts(1_000), false, true, false),
        ("nesting 100 deep", deep_nesting(100), false, false, true),
    ];
    for (name, message, headers, parts, depth) in cases {
        let started = std::time::Instant::now();
        let v = rules.scan(&message, &mut scratch);
        let o = v.overflow;
        assert_eq!((o.headers, o.parts, o.depth), (headers, parts, depth), "{name}: {o:?}");
        assert!(v.score.0 > i32::MIN, "{name}: a verdict");
        eprintln!("{name}: score {} in {:?}", v.score, started.elapsed());
    }
}
