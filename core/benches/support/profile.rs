//! Time per rule and per phase over the corpus, for the benches (`SIFT_BENCH_PROFILE=N`
//! prints the N costliest), included with `#[path]` by core/benches/scan.rs and
//! shell-common/benches/stock.rs.

use std::collections::BTreeMap;
use std::time::Instant;

use sift_core::rules::RuleSet;
use sift_core::scan::{Cost, Probe, Scratch};

/// Nanoseconds and runs per cost.
struct Clock {
    epoch: Instant,
    spent: BTreeMap<Cost, (u64, u64)>,
}

impl Probe for Clock {
    fn now(&mut self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn spent(&mut self, cost: Cost, started: u64) {
        let took = self.now().saturating_sub(started);
        let entry = self.spent.entry(cost).or_insert((0, 0));
        entry.0 += took;
        entry.1 += 1;
    }
}

/// With `SIFT_BENCH_PROFILE=N` set, one more pass over `messages` timing every rule and
/// phase, then the N costliest, in microseconds per message. Reading the clock adds
/// about a fifth to the scan on this VM: the shares are what to read.
pub fn print_if_asked(rules: &RuleSet, messages: &[Vec<u8>], scratch: &mut Scratch) {
    let Some(top) = std::env::var("SIFT_BENCH_PROFILE").ok().and_then(|v| v.parse::<usize>().ok()) else { return };
    let mut clock = Clock { epoch: Instant::now(), spent: BTreeMap::new() };
    let started = Instant::now();
    for m in messages {
        let _ = rules.scan_probed(m, scratch, &mut clock);
    }
    let n = messages.len().max(1) as f64;
    let mut costs: Vec<(Cost, (u64, u64))> = clock.spent.into_iter().collect();
    costs.sort_by_key(|(_, (ns, _))| std::cmp::Reverse(*ns));
    let timed: u64 = costs.iter().map(|(_, (ns, _))| ns).sum();
    println!(
        "profile: {:.1} us/message scanned, {:.1} timed; the {top} costliest (us/message, messages that ran it):",
        started.elapsed().as_secs_f64() * 1e6 / n,
        timed as f64 / 1e3 / n
    );
    for (cost, (ns, runs)) in costs.iter().take(top) {
        let name = match cost {
            Cost::Rule(id) => rules.rule_name(*id).to_string(),
            Cost::Prefilter(t) => format!("({} prefilter and text)", t.as_str()),
            Cost::Unions(t) => format!("({} unions)", t.as_str()),
            other => format!("({other:?})"),
        };
        println!("  {:8.2} {:7} {name}", *ns as f64 / 1e3 / n, runs);
    }
}
