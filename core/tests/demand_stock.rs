//! The stock rules run their text sub-rules on demand: on a sample of the public
//! corpus every verdict (score, scored hits and their counts) is the one the same
//! rules give with every sub-rule run, as they do when a template lists `_SUBTESTS_`.

use sift_core::rules::cache::DfaCache;
use sift_core::rules::jobs::run_here;
use sift_core::rules::RuleSet;
use sift_core::scan::Scratch;

mod support;
use support::{corpus_messages, stock_config_and, RULES_DIR};

#[test]
fn stock_verdicts_are_those_of_every_sub_rule_run() {
    let (Some(on_demand), Some(every), Some(messages)) =
        (stock_config_and(""), stock_config_and("add_header all Sub _SUBTESTS_\n"), corpus_messages(250))
    else {
        println!("SKIP: the stock rules ({RULES_DIR}) or ../shared/corpus not found");
        return;
    };
    let mut cache = DfaCache::new();
    let on_demand = RuleSet::compile_cached(&on_demand, &mut cache, &run_here).expect("stock rules compile");
    let every = RuleSet::compile_cached(&every, &mut cache, &run_here).expect("stock rules compile");
    let (mut s1, mut s2) = (Scratch::new(&on_demand), Scratch::new(&every));
    let mut fewer_sub_hits = 0;
    for (i, message) in messages.iter().enumerate() {
        let (a, b) = (on_demand.scan(message, &mut s1), every.scan(message, &mut s2));
        let scored = |v: &sift_core::scan::Verdict<'_>| v.hits().map(|h| (h.name.to_string(), h.count)).collect::<Vec<_>>();
        assert_eq!((a.score, scored(&a)), (b.score, scored(&b)), "message {i}");
        if a.all_hits().count() < b.all_hits().count() {
            fewer_sub_hits += 1;
        }
    }
    // Skipped sub-rules that would have hit show as fewer hits.
    assert!(fewer_sub_hits * 10 > messages.len(), "sub-rules skipped on {fewer_sub_hits} messages of {}", messages.len());
}
