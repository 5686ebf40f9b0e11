//! The rules and messages the shell-common benches take, included with `#[path]` by
//! stock.rs and text_rules.rs: SIFT_BENCH_RULES / SIFT_BENCH_SITE name the rule
//! directories or files (default the Debian ones), SIFT_BENCH_EVERY=k keeps every k-th
//! message, for quick comparisons, SIFT_BENCH_PASSES=N sets the timed passes.

use std::fs;
use std::path::PathBuf;

use siftd_common::load::RuleSources;

/// The rule sources, or `None` after printing the SKIP line a bench ends with.
pub fn sources_or_skip() -> Option<RuleSources> {
    let rules = PathBuf::from(std::env::var("SIFT_BENCH_RULES").unwrap_or_else(|_| "/usr/share/spamassassin".into()));
    let site = PathBuf::from(std::env::var("SIFT_BENCH_SITE").unwrap_or_else(|_| "/etc/spamassassin".into()));
    if !rules.exists() {
        println!("SKIP: rules not found at {} (apt-get install spamassassin)", rules.display());
        return None;
    }
    Some(RuleSources { config_paths: vec![rules], site_path: site.is_dir().then_some(site) })
}

/// The messages at `paths` a bench runs on: every k-th one with SIFT_BENCH_EVERY=k.
pub fn messages(paths: &[PathBuf]) -> Vec<Vec<u8>> {
    let every: usize = std::env::var("SIFT_BENCH_EVERY").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
    paths.iter().step_by(every).filter_map(|p| fs::read(p).ok()).collect()
}

/// Timed passes: SIFT_BENCH_PASSES, default 3, at least 1.
pub fn passes() -> usize {
    std::env::var("SIFT_BENCH_PASSES").ok().and_then(|v| v.parse().ok()).unwrap_or(3).max(1)
}
