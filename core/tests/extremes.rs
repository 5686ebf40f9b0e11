//! Synthetic extremes through the whole scan: each gets a verdict, with the overflow
//! flags that say which capacity it exceeded.

use sift_core::rules::{cf, RuleSet, DEFAULT_RULES};
use sift_core::scan::Scratch;

mod synthetic;
use synthetic::{big_body, deep_nesting, many_headers, many_parts};

#[test]
fn extremes_table() {
    let config = cf::parse_str("default.cf", DEFAULT_RULES).expect("embedded rules parse");
    let rules = RuleSet::compile(&config).expect("embedded rules compile");
    let mut scratch = Scratch::new(&rules);
    // (name, message, headers overflow, parts overflow, depth overflow)
    let cases: Vec<(&str, Vec<u8>, bool, bool, bool)> = vec![
        ("10 MB body", big_body(10 * 1024 * 1024), false, false, false),
        ("10,000 headers", many_headers(10_000), true, false, false),
        ("1,000 MIME parts", many_parts(1_000), false, true, false),
        ("nesting 100 deep", deep_nesting(100), false, false, true),
    ];
    for (name, message, headers, parts, depth) in cases {
        let started = std::time::Instant::now();
        let v = rules.scan(&message, &mut scratch);
        let o = v.overflow;
        assert_eq!((o.headers, o.parts, o.depth), (headers, parts, depth), "{name}: {o:?}");
        assert!(v.score.0 > i32::MIN, "{name}: a verdict");
        eprintln!("{name}: score {} in {:?}", v.score, started.elapsed());
    }
}
