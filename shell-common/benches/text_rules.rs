//! The stock SpamAssassin rules' regexes over whole texts (`body`, `rawbody`, `uri`,
//! `full`) alone (no header rules, eval tests or metas), on one core: what siftd's scan
//! spends on them, to set beside reference engines given the same rules and texts
//! (`bench/hyperscan/run`). Run: `cargo bench -p siftd-common --bench text_rules`.
//! SIFT_BENCH_RULES, SIFT_BENCH_SITE, SIFT_BENCH_EVERY, SIFT_BENCH_PASSES: see
//! support/inputs.rs (`core/src/rules/default.cf` with SIFT_BENCH_SITE=none: the embedded
//! rules). SIFT_BENCH_EXPORT=DIR also writes those rules (DIR/rules) and every message's
//! four texts (DIR/texts) in the format bench/hyperscan/hs_scan.c reads;
//! SIFT_BENCH_LEAVE_OUT=FILE leaves out the rules named in FILE, one a line, and
//! SIFT_BENCH_ONLY=FILE keeps only those (the rules Hyperscan refused, or not, so that
//! every engine runs the same rules).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use sift_core::msg::{Limits, Message, MessageBuffers};
use sift_core::rules::{perl, AddHeader, AddHeaderWhen, Config, RuleKind, RuleSet};
use sift_core::scan::Scratch;
use siftd_common::load::load_config;
use siftd_common::sys::thread_cpu_time;

#[path = "../../core/benches/support/corpus.rs"]
mod corpus;
#[path = "support/inputs.rs"]
mod inputs;

/// The targets kept, in the order the texts are written.
const TARGETS: [&str; 4] = ["body", "rawbody", "uri", "full"];

fn main() {
    let Some(paths) = corpus::paths_or_skip() else { return };
    let Some(sources) = inputs::sources_or_skip() else { return };
    let passes = inputs::passes();
    let messages = inputs::messages(&paths);
    let mut config = match load_config(&sources) {
        Ok(c) => c,
        Err(e) => {
            println!("SKIP: the rules do not load: {e}");
            return;
        }
    };
    let (left_out, only) = (names_in("SIFT_BENCH_LEAVE_OUT"), names_in("SIFT_BENCH_ONLY"));
    let left_out: Vec<&str> = left_out.as_deref().map(|n| n.lines().collect()).unwrap_or_default();
    let only: Option<Vec<&str>> = only.as_deref().map(|n| n.lines().collect());
    config.rules.retain(|r| {
        text_rule(&r.kind).is_some()
            && !left_out.contains(&r.name.as_str())
            && only.as_ref().is_none_or(|only| only.contains(&r.name.as_str()))
    });
    // With their metas gone, no scored rule reads the `__` sub-rules, and siftd would not
    // run them; a header listing sub-rules (as SpamAssassin's `_SUBTESTS_` does) makes
    // every kept rule run, as the reference engines run them all.
    config.add_headers.push(AddHeader { when: AddHeaderWhen::All, name: "Subtests".into(), template: "_SUBTESTS_".into() });
    let rules = match RuleSet::compile(&config) {
        Ok(r) => r,
        Err(e) => {
            println!("FAIL: the text rules do not compile: {e}");
            std::process::exit(1);
        }
    };

    let mut bufs = MessageBuffers::new(Limits::default());
    let parse = fastest_pass(passes, || {
        for m in &messages {
            let _ = Message::parse(m, &mut bufs);
        }
    });
    let mut scratch = Scratch::new(&rules);
    for m in &messages {
        let _ = rules.scan(m, &mut scratch);
    }
    let scan = fastest_pass(passes, || {
        for m in &messages {
            let _ = rules.scan(m, &mut scratch);
        }
    });
    let n = messages.len().max(1) as f64;
    println!("messages: {}", messages.len());
    println!("rules: {} regex rules on body, rawbody, uri and full", rules.rule_count());
    println!("parse+render: {:.1} us/message", parse * 1e6 / n);
    println!("scan: {:.1} us/message", scan * 1e6 / n);
    println!("rules alone (scan less parse): {:.1} us/message", (scan - parse).max(0.0) * 1e6 / n);
    println!("automata (shared): {:.1} MiB", rules.automata_bytes() as f64 / 1048576.0);
    println!("lazy DFA caches after the passes (the worker's own): {:.1} MiB", scratch.lazy_cache_bytes() as f64 / 1048576.0);

    if let Some(dir) = std::env::var_os("SIFT_BENCH_EXPORT") {
        let dir = PathBuf::from(dir);
        match export(&dir, &config, &messages) {
            Ok(()) => println!("exported to {}", dir.display()),
            Err(e) => {
                println!("FAIL: export to {}: {e}", dir.display());
                std::process::exit(1);
            }
        }
    }
}

/// CPU seconds of the fastest of `passes` runs of `pass`: the least disturbed on a shared machine.
fn fastest_pass(passes: usize, mut pass: impl FnMut()) -> f64 {
    (0..passes)
        .map(|_| {
            let started = thread_cpu_time();
            pass();
            (thread_cpu_time() - started).as_secs_f64()
        })
        .fold(f64::MAX, f64::min)
}

/// The rule's target among [`TARGETS`] and its pattern, for a regex rule on a whole text.
fn text_rule(kind: &RuleKind) -> Option<(usize, &str)> {
    let (target, pattern) = match kind {
        RuleKind::Body(p) => (0, p),
        RuleKind::RawBody(p) => (1, p),
        RuleKind::Uri(p) => (2, p),
        RuleKind::Full(p) => (3, p),
        _ => return None,
    };
    pattern.refused.is_none().then_some((target, pattern.perl.as_str()))
}

/// The text of the file environment variable `var` names, if set; a set variable naming
/// no readable file ends the bench.
fn names_in(var: &str) -> Option<String> {
    let path = std::env::var_os(var)?;
    match fs::read_to_string(&path) {
        Ok(names) => Some(names),
        Err(e) => {
            println!("FAIL: {var}: {}: {e}", Path::new(&path).display());
            std::process::exit(1);
        }
    }
}

/// Writes `dir/rules` (per rule: `TARGET FLAGS LEN NAME\n`, the regex's LEN bytes, `\n`;
/// FLAGS its Perl modifiers or `-`) and `dir/texts` (per message, the four texts of
/// [`TARGETS`] in order, each `LEN\n` and its bytes).
fn export(dir: &Path, config: &Config, messages: &[Vec<u8>]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut out = std::io::BufWriter::new(fs::File::create(dir.join("rules"))?);
    for rule in &config.rules {
        let Some((target, source)) = text_rule(&rule.kind) else { continue };
        let Ok((regex, flags)) = perl::split_literal(source) else { continue };
        let flags = if flags.is_empty() { "-" } else { flags };
        writeln!(out, "{} {} {} {}", TARGETS[target], flags, regex.len(), rule.name)?;
        out.write_all(regex.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    let mut out = std::io::BufWriter::new(fs::File::create(dir.join("texts"))?);
    let mut bufs = MessageBuffers::new(Limits::default());
    for m in messages {
        let msg = Message::parse(m, &mut bufs);
        for text in [msg.body(), msg.rawbody(), msg.uris(), msg.raw()] {
            writeln!(out, "{}", text.len())?;
            out.write_all(text)?;
        }
    }
    out.flush()
}
