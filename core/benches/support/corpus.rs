//! The SpamAssassin public corpus for the benches, included with `#[path]` by
//! core/benches/scan.rs and shell-common/benches/stock.rs: both crates sit one
//! folder below the workspace, so the path from `CARGO_MANIFEST_DIR` holds for both.

use std::fs;
use std::path::{Path, PathBuf};

/// Where the public corpus lives.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/spamassassin-public")
}

/// Every file of every folder under `root`, sorted; `None` when `root` cannot be read.
pub fn message_paths(root: &Path) -> Option<Vec<PathBuf>> {
    let groups = fs::read_dir(root).ok()?;
    let mut paths: Vec<PathBuf> = groups
        .filter_map(|g| g.ok())
        .filter(|g| g.path().is_dir())
        .flat_map(|g| fs::read_dir(g.path()).into_iter().flatten().filter_map(|e| e.ok().map(|e| e.path())))
        .collect();
    paths.sort();
    Some(paths)
}

/// The corpus's message paths, or `None` after printing the SKIP line a bench ends with.
pub fn paths_or_skip() -> Option<Vec<PathBuf>> {
    let root = root();
    let paths = message_paths(&root);
    if paths.is_none() {
        println!("SKIP: corpus not found at {}", root.display());
    }
    paths
}
