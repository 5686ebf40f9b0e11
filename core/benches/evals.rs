//! The native `eval:` tests of the stock SpamAssassin rules over the public corpus: CPU
//! time of the eval phase per message (`EvalScratch::prepare` plus every test, in the
//! order the scan runs them) and the costliest eval functions, the mean over the passes.
//! Two kinds of pass. One times each message's whole eval phase with a single clock
//! pair, and reads the thread's CPU time (Linux schedstat: immune to the other
//! processes of a shared machine) over a pass that only parses and one that parses and
//! runs the evals: their difference is the phase's CPU time. The other times prepare and
//! each test alone (the clock's own cost, measured empty, is taken off each span).
//! Run: `cargo bench -p sift-core --features std --bench evals` (SIFT_BENCH_PASSES sets
//! the timed passes of each kind, SIFT_BENCH_TOP how many functions are listed). On a
//! busy machine count instructions instead: SIFT_BENCH_MODE=parse runs only the parsing
//! of the whole passes, SIFT_BENCH_MODE=evals parsing and evals; the difference of
//! `perf stat -e instructions:u` over the two runs is the eval phase's (where the machine
//! has no counters: `valgrind --tool=callgrind --toggle-collect=*EvalScratch*prepare*
//! --toggle-collect=*EvalTest*run*`, with SIFT_BENCH_EVERY=k to keep every k-th message).

use std::collections::HashMap;
use std::fs;
use std::hint::black_box;
use std::time::{Duration, Instant};

use sift_core::msg::{Limits, Message, MessageBuffers};
use sift_core::rules::eval::{compiled_tests, EvalContext, EvalScratch};
use sift_core::rules::{RuleKind, RuleSet};

#[path = "support/corpus.rs"]
mod corpus;
#[path = "../tests/support/mod.rs"]
mod stock;

/// CPU time this thread has run (Linux schedstat), or `None` elsewhere.
fn cpu_time() -> Option<Duration> {
    let s = fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok().map(Duration::from_nanos)
}

/// Mean cost of one `Instant::now()` pair with nothing between, in ns.
fn clock_cost() -> f64 {
    let rounds = 200_000u32;
    let mut sum = Duration::ZERO;
    for _ in 0..rounds {
        let a = Instant::now();
        sum += black_box(Instant::now()) - a;
    }
    sum.as_nanos() as f64 / f64::from(rounds)
}

fn main() {
    let Some(config) = stock::stock_config_or_skip() else { return };
    let Some(paths) = corpus::paths_or_skip() else { return };
    let every: usize = std::env::var("SIFT_BENCH_EVERY").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
    let messages: Vec<Vec<u8>> = paths.iter().step_by(every).filter_map(|p| fs::read(p).ok()).collect();
    let rules = RuleSet::compile(&config).expect("stock rules compile");
    let functions: HashMap<&str, &str> = config
        .rules
        .iter()
        .filter_map(|r| match &r.kind {
            RuleKind::Eval { function, .. } => Some((r.name.as_str(), function.as_str())),
            _ => None,
        })
        .collect();
    let (data, tests) = compiled_tests(&rules);
    let tests: Vec<_> = tests.collect();
    let names: Vec<&str> = tests.iter().map(|(rule, _)| functions.get(rule).copied().unwrap_or(rule)).collect();

    let passes: u32 = std::env::var("SIFT_BENCH_PASSES").ok().and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    let top: usize = std::env::var("SIFT_BENCH_TOP").ok().and_then(|v| v.parse().ok()).unwrap_or(15);
    let mut bufs = MessageBuffers::new(Limits::default());
    let mut scratch = EvalScratch::default();
    let mut hits = 0u64;

    // Whole-phase passes (pass 0 warms up): each pass parses every message alone, then
    // parses and runs the eval phase; the eval phase's thread CPU time is the difference.
    let mode = std::env::var("SIFT_BENCH_MODE").unwrap_or_default();
    let mut whole = Duration::ZERO;
    let mut cpu_evals: Vec<f64> = Vec::new();
    for pass in 0..=passes {
        let before = cpu_time();
        for m in &messages {
            black_box(Message::parse(m, &mut bufs).serial());
        }
        let parsed = cpu_time();
        let mut wall = Duration::ZERO;
        for m in messages.iter().filter(|_| mode != "parse") {
            let msg = Message::parse(m, &mut bufs);
            let started = Instant::now();
            scratch.prepare(&msg, data);
            let EvalScratch { relays, tests: ts } = &mut scratch;
            let cx = EvalContext { message: &msg, data, relays };
            for (_, t) in &tests {
                let n = t.run(&cx, ts);
                if pass == 0 {
                    hits += u64::from(n);
                }
            }
            wall += started.elapsed();
        }
        let done = cpu_time();
        if pass > 0 {
            whole += wall;
            if let (Some(a), Some(b), Some(c)) = (before, parsed, done) {
                let eval = c.saturating_sub(b).as_secs_f64() - b.saturating_sub(a).as_secs_f64();
                cpu_evals.push(eval * 1e6 / messages.len() as f64);
            }
        }
    }

    if !mode.is_empty() {
        println!("SIFT_BENCH_MODE={mode}: whole passes only, for `perf stat`; {hits} hits");
        return;
    }

    // Per-test passes.
    let overhead = clock_cost();
    let mut per_test = vec![0f64; tests.len()];
    let mut prepare = 0f64;
    for pass in 0..=passes {
        for m in &messages {
            let msg = Message::parse(m, &mut bufs);
            let started = Instant::now();
            scratch.prepare(&msg, data);
            let took = started.elapsed().as_nanos() as f64 - overhead;
            if pass > 0 {
                prepare += took;
            }
            let EvalScratch { relays, tests: ts } = &mut scratch;
            let cx = EvalContext { message: &msg, data, relays };
            for (i, (_, t)) in tests.iter().enumerate() {
                let started = Instant::now();
                black_box(t.run(&cx, ts));
                let took = started.elapsed().as_nanos() as f64 - overhead;
                if pass > 0 {
                    if let Some(s) = per_test.get_mut(i) {
                        *s += took;
                    }
                }
            }
        }
    }

    let n = messages.len() as f64 * f64::from(passes);
    let us = |ns: f64| ns / n / 1e3;
    println!("corpus: {} messages; {} eval tests of the stock rules; {hits} hits per pass", messages.len(), tests.len());
    let cpu_mean = cpu_evals.iter().sum::<f64>() / cpu_evals.len().max(1) as f64;
    let cpu_min = cpu_evals.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "eval phase, whole ({passes} passes): {:.1} us/message wall (mean); thread CPU, (parse+evals) - parse: {cpu_mean:.1} us/message mean, {cpu_min:.1} min",
        whole.as_secs_f64() * 1e6 / n,
    );
    let summed: f64 = per_test.iter().sum::<f64>() + prepare;
    println!(
        "eval phase, per span (clock pair {overhead:.0} ns taken off each): {:.1} us/message; prepare {:.1} us/message",
        us(summed),
        us(prepare)
    );
    let mut by_function: HashMap<&str, (f64, usize)> = HashMap::new();
    for (name, t) in names.iter().zip(&per_test) {
        let e = by_function.entry(name).or_default();
        e.0 += t;
        e.1 += 1;
    }
    let mut ranked: Vec<_> = by_function.into_iter().collect();
    ranked.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
    println!("top eval functions (us/message, rules):");
    for (name, (t, rules)) in ranked.iter().take(top) {
        println!("  {:>7.2}  {:>3}  {name}", us(*t), rules);
    }
}
