//! Scan throughput and startup cost with the stock SpamAssassin rules, on one core.
//! Run: `cargo bench -p siftd-common --bench stock` (SIFT_BENCH_RULES, SIFT_BENCH_SITE,
//! SIFT_BENCH_EVERY, SIFT_BENCH_PASSES: see support/inputs.rs; SIFT_BENCH_CACHE_MIB,
//! SIFT_BENCH_CACHE_CURVE: the lazy DFA caches' cap).

use std::time::Instant;

use sift_core::msg::{Limits, Message, MessageBuffers};
use sift_core::rules::RuleSet;
use sift_core::scan::Scratch;
use siftd_common::load::load_config;
use siftd_common::sys::thread_cpu_time;

#[path = "../../core/benches/support/corpus.rs"]
mod corpus;
#[path = "../../core/benches/support/profile.rs"]
mod profile;
#[path = "support/inputs.rs"]
mod inputs;

fn main() {
    let Some(paths) = corpus::paths_or_skip() else { return };
    let Some(sources) = inputs::sources_or_skip() else { return };
    let messages = inputs::messages(&paths);
    let raw_bytes: usize = messages.iter().map(Vec::len).sum();

    let started = Instant::now();
    let config = match load_config(&sources) {
        Ok(c) => c,
        Err(e) => {
            println!("SKIP: stock rules do not load: {e}");
            return;
        }
    };
    let parse_time = started.elapsed();
    let started = Instant::now();
    let rules = match RuleSet::compile(&config) {
        Ok(r) => r,
        Err(e) => {
            println!("FAIL: stock rules do not compile: {e}");
            std::process::exit(1);
        }
    };
    let compile_time = started.elapsed();
    // The daemon's --compile-cache: a second compile takes the dense DFAs from the first.
    let mut cache = sift_core::rules::cache::DfaCache::new();
    let _ = RuleSet::compile_cached(&config, &mut cache, &siftd_common::load::run_on_all_cores);
    let cache = sift_core::rules::cache::DfaCache::from_bytes(&cache.to_bytes());
    let started = Instant::now();
    let warm_time = cache.ok().and_then(|mut c| RuleSet::compile_cached(&config, &mut c, &siftd_common::load::run_on_all_cores).ok()).map(|_| started.elapsed());

    let mut bufs = MessageBuffers::new(Limits::default());
    let mut rendered = 0usize;
    let started = Instant::now();
    for m in &messages {
        let msg = Message::parse(m, &mut bufs);
        rendered += msg.body().len() + msg.rawbody().len() + msg.uris().len();
    }
    let parse_secs = started.elapsed().as_secs_f64();

    let mut scratch = Scratch::new(&rules);
    // SIFT_BENCH_CACHE_MIB: the daemon's --lazy-cache-mib.
    if let Some(mib) = std::env::var("SIFT_BENCH_CACHE_MIB").ok().and_then(|v| v.parse::<usize>().ok()) {
        scratch.set_lazy_cache_budget(mib << 20);
    }
    for m in &messages {
        let _ = rules.scan(m, &mut scratch);
    }
    let passes = inputs::passes();
    let started = Instant::now();
    let cpu_started = thread_cpu_time();
    let mut spam = 0usize;
    // The fastest pass: the least disturbed by the rest of a shared machine.
    let mut fastest = f64::MAX;
    for _ in 0..passes {
        let pass_started = thread_cpu_time();
        for m in &messages {
            spam += usize::from(rules.scan(m, &mut scratch).is_spam());
        }
        fastest = fastest.min((thread_cpu_time() - pass_started).as_secs_f64());
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu_secs = (thread_cpu_time() - cpu_started).as_secs_f64();
    let n = (messages.len() * passes) as f64;
    let summary = rules.summary();
    println!("corpus: {} messages, {:.1} MB raw, {:.1} MB rendered text (body+rawbody+uri)", messages.len(), raw_bytes as f64 / 1e6, rendered as f64 / 1e6);
    println!("rules: stock, {} defined; read+parse {:.1} ms, compile {:.1} ms", rules.rule_count(), parse_time.as_secs_f64() * 1e3, compile_time.as_secs_f64() * 1e3);
    let _ = summary;
    if let Some(t) = warm_time {
        println!("compile with a warm DFA cache: {:.1} ms", t.as_secs_f64() * 1e3);
    }
    println!("automata: {:.1} MiB", rules.automata_bytes() as f64 / 1048576.0);
    let (lazy_dfas, nfa_states) = rules.lazy_nfa_states();
    println!("lazy DFAs: {lazy_dfas}, their NFAs {nfa_states} states");
    println!("message parse+render only: {:.0} messages/s, {:.1} MB/s rendered", messages.len() as f64 / parse_secs, rendered as f64 / parse_secs / 1e6);
    println!("scan (one core, {passes} passes): {:.0} messages/s, {:.1} MB/s raw, {:.1} MB/s rendered, {:.1} us/message", n / secs, raw_bytes as f64 * passes as f64 / secs / 1e6, rendered as f64 * passes as f64 / secs / 1e6, secs / n * 1e6);
    println!("scan CPU time: {:.0} messages/s, {:.1} MB/s rendered, {:.1} us/message", n / cpu_secs, rendered as f64 * passes as f64 / cpu_secs / 1e6, cpu_secs / n * 1e6);
    println!("fastest pass: {:.1} us/message of CPU", fastest / messages.len().max(1) as f64 * 1e6);
    println!("verdicts: {} spam of {} per pass", spam / passes, messages.len());
    println!(
        "lazy DFA caches of this worker after the passes: {:.1} MiB, cleared for room {} times",
        scratch.lazy_cache_bytes() as f64 / 1048576.0,
        scratch.lazy_cache_clears()
    );
    profile::print_if_asked(&rules, &messages, &mut scratch);
    print_cache_curve(&rules, &messages);
}

/// With `SIFT_BENCH_CACHE_CURVE=24,4,0` (MiB, the daemon's `--lazy-cache-mib`): for each
/// cap, a fresh worker's scratch, one pass to fill it and one timed; the caps taken in
/// turn, twice, so that the machine's drift hits them all. Prints each cap's fastest
/// timed pass and what its caches kept: the memory a child saves against the CPU it pays.
fn print_cache_curve(rules: &RuleSet, messages: &[Vec<u8>]) {
    let Ok(list) = std::env::var("SIFT_BENCH_CACHE_CURVE") else { return };
    let caps: Vec<usize> = list.split(',').filter_map(|v| v.trim().parse().ok()).collect();
    let mut fastest = vec![f64::MAX; caps.len()];
    let mut kept = vec![0usize; caps.len()];
    for _round in 0..2 {
        for (i, &mib) in caps.iter().enumerate() {
            let mut scratch = Scratch::new(rules);
            scratch.set_lazy_cache_budget(mib << 20);
            for m in messages {
                let _ = rules.scan(m, &mut scratch);
            }
            let started = thread_cpu_time();
            for m in messages {
                let _ = rules.scan(m, &mut scratch);
            }
            fastest[i] = fastest[i].min((thread_cpu_time() - started).as_secs_f64());
            kept[i] = scratch.lazy_cache_bytes();
        }
    }
    let n = messages.len().max(1) as f64;
    println!("lazy DFA cache cap (MiB), fastest of 2 passes (us/message of CPU), caches kept after it (MiB):");
    for ((mib, secs), bytes) in caps.iter().zip(&fastest).zip(&kept) {
        println!("  {mib:>4}  {:>8.1}  {:>5.1}", secs / n * 1e6, *bytes as f64 / 1048576.0);
    }
}
