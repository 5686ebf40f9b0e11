//! Helpers shared by sift-core's integration tests: the public corpus and the
//! stock SpamAssassin rules. Each test file is its own crate and uses only some of them.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use sift_core::rules::cf::{Includer, Parser};
use sift_core::rules::{Config, HeaderTest, Pattern, RuleKind};

pub mod perl;

/// Site config dir: `*.pre` read first, `*.cf` last.
pub const SITE_DIR: &str = "/etc/spamassassin";
/// Default rules dir: `*.cf`.
pub const RULES_DIR: &str = "/usr/share/spamassassin";

/// Reads includes relative to the including file.
struct FsIncluder;

impl Includer for FsIncluder {
    fn read(&mut self, from: &str, path: &str) -> Result<Vec<u8>, String> {
        let dir = Path::new(from).parent().unwrap_or(Path::new("."));
        fs::read(dir.join(path)).map_err(|e| format!("{path}: {e}"))
    }
}

/// Regular files of `dir` (only those ending in `.ext` when given), in
/// SpamAssassin's order (byte order of names); none when `dir` is unreadable.
pub fn files(dir: &Path, ext: Option<&str>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file() && ext.is_none_or(|x| p.extension().is_some_and(|e| e.eq_ignore_ascii_case(x))))
                .collect()
        })
        .unwrap_or_default();
    out.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    out
}

/// The stock rules as SpamAssassin loads them, or `None` when not installed.
pub fn stock_config() -> Option<Config> {
    stock_config_and("")
}

/// The stock rules with `extra` read last, as a site file would be.
pub fn stock_config_and(extra: &str) -> Option<Config> {
    if !Path::new(RULES_DIR).is_dir() {
        return None;
    }
    let (site, rules) = (Path::new(SITE_DIR), Path::new(RULES_DIR));
    let mut order = files(site, Some("pre"));
    order.extend(files(rules, Some("cf")));
    order.extend(files(site, Some("cf")));
    let mut parser = Parser::new();
    for path in &order {
        let text = fs::read(path).expect("readable rule file");
        parser.parse_file(&path.to_string_lossy(), &text, &mut FsIncluder).expect("stock rules parse");
    }
    parser.parse_file("extra.cf", extra.as_bytes(), &mut FsIncluder).expect("extra rules parse");
    Some(parser.finish())
}

/// The stock rules, or `None` after printing the SKIP line a bench ends with.
pub fn stock_config_or_skip() -> Option<Config> {
    let config = stock_config();
    if config.is_none() {
        println!("SKIP: stock rules not found at {RULES_DIR}");
    }
    config
}

/// A rule's pattern, with its type's name (`body`, `header`...), for the rules that have one.
pub fn rule_pattern(kind: &RuleKind) -> Option<(&'static str, &Pattern)> {
    match kind {
        RuleKind::Body(p) => Some(("body", p)),
        RuleKind::RawBody(p) => Some(("rawbody", p)),
        RuleKind::Full(p) => Some(("full", p)),
        RuleKind::Uri(p) => Some(("uri", p)),
        RuleKind::MimeHeader { pattern, .. } => Some(("mimeheader", pattern)),
        RuleKind::Header(h) => match &h.test {
            HeaderTest::Matches(p) | HeaderTest::NotMatches(p) => Some(("header", p)),
            HeaderTest::Exists => None,
        },
        _ => None,
    }
}

/// The SpamAssassin public corpus, found from this crate's directory.
pub fn public_corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/spamassassin-public")
}

/// The first `limit / 5` messages (by name) of each of the corpus's five
/// folders; `None` when the corpus or one of its files cannot be read.
pub fn corpus_messages(limit: usize) -> Option<Vec<Vec<u8>>> {
    if !public_corpus().is_dir() {
        return None;
    }
    let mut out = Vec::new();
    for group in ["spam", "easy_ham", "hard_ham", "spam_2", "easy_ham_2"] {
        for f in corpus_folder(group)?.into_iter().take(limit / 5) {
            out.push(fs::read(f).ok()?);
        }
    }
    Some(out)
}

/// Every entry of one folder of the corpus (`spam`, `easy_ham`...), sorted;
/// `None` when the folder cannot be read.
pub fn corpus_folder(group: &str) -> Option<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = fs::read_dir(public_corpus().join(group)).ok()?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    Some(files)
}
