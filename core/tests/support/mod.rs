//! Helpers shared by sift-core's integration tests. Each test file is its own
//! crate and uses only some of them.
#![allow(dead_code)]

use std::fs;
use std::path::PathBuf;

/// The SpamAssassin public corpus, found from this crate's directory.
pub fn public_corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/spamassassin-public")
}

/// The first `limit / 5` messages (by name) of each of the corpus's five
/// folders; `None` when the corpus or one of its files cannot be read.
pub fn corpus_messages(limit: usize) -> Option<Vec<Vec<u8>>> {
    let root = public_corpus();
    if !root.is_dir() {
        return None;
    }
    let mut out = Vec::new();
    for group in ["spam", "easy_ham", "hard_ham", "spam_2", "easy_ham_2"] {
        let mut files: Vec<PathBuf> = fs::read_dir(root.join(group)).ok()?.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for f in files.into_iter().take(limit / 5) {
            out.push(fs::read(f).ok()?);
        }
    }
    Some(out)
}
