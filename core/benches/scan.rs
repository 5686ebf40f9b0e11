//! Core scan throughput on one core over the SpamAssassin public corpus, embedded rules.
//! Run: `cargo bench -p sift-core --bench scan` (SIFT_BENCH_PASSES sets the timed passes).

use std::fs;
use std::time::Instant;

use sift_core::msg::{Limits, Message, MessageBuffers};
use sift_core::rules::{cf, RuleSet, DEFAULT_RULES};
use sift_core::scan::Scratch;

#[path = "support/corpus.rs"]
mod corpus;
#[path = "support/profile.rs"]
mod profile;

fn main() {
    let Some(paths) = corpus::paths_or_skip() else { return };
    let messages: Vec<Vec<u8>> = paths.iter().filter_map(|p| fs::read(p).ok()).collect();
    let raw_bytes: usize = messages.iter().map(Vec::len).sum();

    let started = Instant::now();
    let config = cf::parse_str("default.cf", DEFAULT_RULES).expect("embedded rules parse");
    let rules = RuleSet::compile(&config).expect("embedded rules compile");
    let compile_time = started.elapsed();

    let mut bufs = MessageBuffers::new(Limits::default());
    let mut rendered = 0usize;
    for m in &messages {
        let msg = Message::parse(m, &mut bufs);
        rendered += msg.body().len() + msg.rawbody().len() + msg.uris().len();
    }

    let mut scratch = Scratch::new(&rules);
    for m in &messages {
        let _ = rules.scan(m, &mut scratch);
    }
    let passes: usize = std::env::var("SIFT_BENCH_PASSES").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let started = Instant::now();
    let mut spam = 0usize;
    for _ in 0..passes {
        for m in &messages {
            spam += usize::from(rules.scan(m, &mut scratch).is_spam());
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let n = (messages.len() * passes) as f64;
    println!("corpus: {} messages, {:.1} MB raw, {:.1} MB rendered text (body+rawbody+uri)", messages.len(), raw_bytes as f64 / 1e6, rendered as f64 / 1e6);
    println!("rules: embedded, {} defined, compiled in {:.1} ms", rules.rule_count(), compile_time.as_secs_f64() * 1e3);
    println!("scan (one core, {passes} passes): {:.0} messages/s, {:.1} MB/s raw, {:.1} MB/s rendered, {:.1} us/message", n / secs, raw_bytes as f64 * passes as f64 / secs / 1e6, rendered as f64 * passes as f64 / secs / 1e6, secs / n * 1e6);
    println!("verdicts: {} spam of {} per pass", spam / passes, messages.len());
    // A worker's memory that grows with the mail it sees (the rest is shared or fixed).
    println!("lazy DFA caches of this worker after the passes: {} KiB", scratch.lazy_cache_bytes() / 1024);
    profile::print_if_asked(&rules, &messages, &mut scratch);
}
