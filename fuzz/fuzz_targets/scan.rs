//! Any bytes as a message: parse, render and scan with the embedded rules.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sift_core::rules::{cf, RuleSet, DEFAULT_RULES};
use sift_core::scan::Scratch;

static RULES: OnceLock<RuleSet> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let rules = RULES.get_or_init(|| {
        let config = cf::parse_str("default.cf", DEFAULT_RULES).expect("embedded rules parse");
        RuleSet::compile(&config).expect("embedded rules compile")
    });
    let mut scratch = Scratch::new(rules);
    let v = rules.scan(data, &mut scratch);
    let _ = v.is_spam();
});
