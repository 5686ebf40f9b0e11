//! The backtracking programs of the stock `header ... ALL` rules (backreferences,
//! lookaround) on the corpus header blocks, where the relaxed DFA lets them through:
//! CPU time per message and the costliest patterns, the mean over the passes. The
//! thread's CPU time is read from /proc, which for the running thread advances in
//! scheduler ticks (a few ms): only sums over many calls mean anything.
//! Run: `cargo bench -p sift-core --features std --bench backtrack` (SIFT_BENCH_PASSES sets the
//! timed passes, SIFT_BENCH_RULE keeps only the rules whose names contain it).

use std::fs;
use std::time::Duration;

use regex_automata::nfa::thompson;
use regex_automata::util::syntax;
use regex_automata::{hybrid, Input, MatchKind};
use sift_core::msg::{Limits, Message, MessageBuffers};
use sift_core::rules::backtrack::{Backtrack, BacktrackScratch};
use sift_core::rules::{perl, HeaderField, HeaderForm, HeaderTest, RuleKind};

#[path = "support/corpus.rs"]
mod corpus;
#[path = "../tests/support/mod.rs"]
mod stock;

/// CPU time this thread has run (Linux schedstat), or `None` elsewhere.
fn cpu_time() -> Option<Duration> {
    let s = fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok().map(Duration::from_nanos)
}

fn relaxed_dfa(relaxed: &str) -> Option<hybrid::dfa::DFA> {
    let nfa = thompson::Compiler::new()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .configure(thompson::Config::new().utf8(false).shrink(false))
        .build(relaxed)
        .ok()?;
    hybrid::dfa::Builder::new()
        .configure(hybrid::dfa::Config::new().match_kind(MatchKind::LeftmostFirst).cache_capacity(1 << 20))
        .build_from_nfa(nfa)
        .ok()
}

/// One stock `ALL` rule the backtracker runs, and the messages its screen passes.
struct Case {
    name: String,
    raw: bool,
    program: Backtrack,
    texts: Vec<usize>,
    /// CPU time over all timed passes.
    time: Duration,
    /// Steps in one pass.
    steps: u64,
}

fn main() {
    let Some(config) = stock::stock_config_or_skip() else { return };
    let Some(paths) = corpus::paths_or_skip() else { return };
    // Header blocks as the scan builds its `ALL` targets: decoded and raw.
    let mut bufs = MessageBuffers::new(Limits::default());
    let mut decoded: Vec<Vec<u8>> = Vec::new();
    let mut raw: Vec<Vec<u8>> = Vec::new();
    for p in &paths {
        let Ok(data) = fs::read(p) else { continue };
        let msg = Message::parse(&data, &mut bufs);
        let mut all = Vec::new();
        msg.decoded_header_block(&mut all);
        decoded.push(all);
        raw.push(msg.header_block().to_vec());
    }

    let only = std::env::var("SIFT_BENCH_RULE").unwrap_or_default();
    let mut cases = Vec::new();
    for rule in config.rules.iter().filter(|r| r.name.contains(&only)) {
        let RuleKind::Header(h) = &rule.kind else { continue };
        let (HeaderTest::Matches(p) | HeaderTest::NotMatches(p)) = &h.test else { continue };
        if h.field != HeaderField::All {
            continue;
        }
        let Err(why) = p.translated() else { continue };
        if !why.needs_backtracking() {
            continue;
        }
        let Ok(program) = perl::backtrack(&p.perl) else { continue };
        let Some(dfa) = relaxed_dfa(&program.relaxed) else { continue };
        let mut cache = dfa.create_cache();
        let is_raw = h.form == HeaderForm::Raw;
        let texts = if is_raw { &raw } else { &decoded };
        let passing = (0..texts.len())
            .filter(|&i| {
                let input = Input::new(&texts[i]).earliest(true);
                dfa.try_search_fwd(&mut cache, &input).ok().flatten().is_some()
            })
            .collect();
        let name = rule.name.clone();
        cases.push(Case { name, raw: is_raw, program, texts: passing, time: Duration::ZERO, steps: 0 });
    }

    let mut scratch = BacktrackScratch::for_programs(cases.iter().map(|c| &c.program.program));
    let passes: u32 = std::env::var("SIFT_BENCH_PASSES").ok().and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    let (mut hits, mut undecided, mut calls) = (0u64, 0u64, 0u64);
    for pass in 0..=passes {
        for c in &mut cases {
            let texts = if c.raw { &raw } else { &decoded };
            let started = cpu_time().unwrap_or_default();
            let mut steps = 0u64;
            for &i in &c.texts {
                let m = c.program.program.count_matches(&texts[i], 1, &mut scratch);
                steps += u64::from(scratch.last_steps());
                if pass == 0 {
                    hits += u64::from(m.count);
                    undecided += u64::from(m.undecided.is_some());
                    calls += 1;
                }
            }
            // Pass 0 warms up.
            if pass > 0 {
                c.time += cpu_time().unwrap_or_default().saturating_sub(started);
                c.steps = steps;
            }
        }
    }
    let n = decoded.len() as f64;
    let per_pass = f64::from(passes);
    let total: Duration = cases.iter().map(|c| c.time).sum();
    let steps: u64 = cases.iter().map(|c| c.steps).sum();
    println!("corpus: {} messages; {} stock ALL rules run by the backtracker", decoded.len(), cases.len());
    println!("runs per pass (relaxed screen passed): {calls}; hits {hits}; undecided {undecided}");
    println!(
        "backtracker CPU time (mean of {passes} passes): {:.1} us/message, {:.0} steps/message, {:.2} ns/step",
        total.as_secs_f64() / per_pass / n * 1e6,
        steps as f64 / n,
        total.as_nanos() as f64 / per_pass / steps.max(1) as f64
    );
    cases.sort_by_key(|c| std::cmp::Reverse(c.time));
    println!("top patterns (us/message, runs/pass, steps/run):");
    for c in cases.iter().take(10) {
        println!(
            "  {:>6.2}  {:>5}  {:>7.0}  {}",
            c.time.as_secs_f64() / per_pass / n * 1e6,
            c.texts.len(),
            c.steps as f64 / c.texts.len().max(1) as f64,
            c.name
        );
    }
}
