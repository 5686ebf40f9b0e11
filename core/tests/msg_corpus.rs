//! Every message of the shared corpora goes through the message view without a
//! panic, within its limits, with sane output; a second pass grows no buffer.
//!
//! Corpora: `../../shared/corpus/{robustness,spamassassin-public}` from this crate;
//! each sweep is skipped, with a message, when its folder is absent.

use std::fs;
use std::path::{Path, PathBuf};

use sift_core::msg::{Limits, Message, MessageBuffers};

fn corpus_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus")
}

/// All regular files under `dir`, sorted, MANIFEST and README files left out.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if !matches!(p.file_name().and_then(|n| n.to_str()), Some("MANIFEST.tsv" | "README.md")) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Parses every file of one corpus folder and checks each result.
fn sweep(name: &str) -> Option<(usize, usize)> {
    let dir = corpus_root().join(name);
    if !dir.is_dir() {
        eprintln!("SKIP: corpus folder {} not found", dir.display());
        return None;
    }
    let limits = Limits::default();
    let mut bufs = MessageBuffers::new(limits);
    let (mut count, mut bytes) = (0, 0);
    for path in files_under(&dir) {
        let Ok(raw) = fs::read(&path) else { continue };
        let m = Message::parse(&raw, &mut bufs);
        check(&m, &limits, &path);
        count += 1;
        bytes += raw.len();
    }
    Some((count, bytes))
}

fn check(m: &Message<'_>, limits: &Limits, path: &Path) {
    let what = path.display();
    assert!(m.headers().count() <= limits.max_headers, "{what}: headers");
    assert!(m.parts().count() <= limits.max_parts, "{what}: parts");
    assert!(m.uri_count() <= limits.max_uris, "{what}: uris");
    let body = m.body();
    // SpamAssassin cuts lines longer than 2048 bytes (after a space, at most 2049).
    assert!(body.split(|&b| b == b'\n').all(|l| l.len() <= 2049), "{what}: long body line");
    assert!(!m.uris().contains(&b'\r'), "{what}: CR in a URI");
    // The last Subject, decoded, is the first line of the body.
    if let Some(subject) = m.header(b"Subject") {
        let s = subject.decoded;
        if !body.is_empty() && s.len() < 2000 && !s.contains(&b'\n') {
            let first = body.split(|&b| b == b'\n').next().unwrap_or(&[]);
            assert_eq!(first, s, "{what}: first body line is the Subject");
        }
    } else if !body.is_empty() {
        assert_eq!(body.first(), Some(&b'\n'), "{what}: no Subject, empty first line");
    }
    for h in m.headers() {
        let _ = (sift_core::msg::first_address(h.raw), sift_core::msg::first_display_name(h.raw));
    }
}

#[test]
fn robustness_corpus_parses() {
    let started = std::time::Instant::now();
    if let Some((n, bytes)) = sweep("robustness") {
        eprintln!("robustness: {n} files, {bytes} bytes in {:?}", started.elapsed());
        assert!(n > 1000, "expected the robustness corpus, found {n} files");
    }
}

#[test]
fn spamassassin_public_corpus_parses() {
    let started = std::time::Instant::now();
    if let Some((n, bytes)) = sweep("spamassassin-public") {
        eprintln!("spamassassin-public: {n} files, {bytes} bytes in {:?}", started.elapsed());
        assert!(n > 6000, "expected the public corpus, found {n} files");
    }
}

/// Parsing the same messages again, once warm, grows no buffer.
#[test]
fn reparse_of_corpus_grows_nothing() {
    let dir = corpus_root().join("spamassassin-public");
    if !dir.is_dir() {
        eprintln!("SKIP: corpus folder {} not found", dir.display());
        return;
    }
    let messages: Vec<Vec<u8>> = files_under(&dir).into_iter().step_by(60).take(100).filter_map(|p| fs::read(p).ok()).collect();
    assert!(messages.len() >= 100);
    let mut bufs = MessageBuffers::new(Limits::default());
    for m in &messages {
        let _ = Message::parse(m, &mut bufs);
    }
    let warm = bufs.capacities();
    for m in &messages {
        let parsed = Message::parse(m, &mut bufs);
        let _ = (parsed.body().len(), parsed.uris().len());
        assert_eq!(bufs.capacities(), warm, "a buffer grew on a warm re-parse");
    }
}
