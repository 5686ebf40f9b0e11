//! A warm scan allocates nothing: proven with a counting global allocator over real mail.

use sift_core::rules::{cf, RuleSet, DEFAULT_RULES};
use sift_core::scan::Scratch;

mod support;
use support::corpus_messages;

#[test]
fn warm_scans_allocate_nothing() {
    let Some(messages) = corpus_messages(150) else {
        eprintln!("SKIP: ../shared/corpus/spamassassin-public not found");
        return;
    };
    assert!(messages.len() >= 100, "need at least 100 messages, have {}", messages.len());
    let config = cf::parse_str("default.cf", DEFAULT_RULES).expect("default rules parse");
    let rules = RuleSet::compile(&config).expect("default rules compile");
    let mut scratch = Scratch::new(&rules);
    let mut spam = 0;
    for m in &messages {
        spam += usize::from(rules.scan(m, &mut scratch).is_spam());
    }
    let info = allocation_counter::measure(|| {
        let mut again = 0;
        for m in &messages {
            again += usize::from(rules.scan(m, &mut scratch).is_spam());
        }
        assert_eq!(again, spam, "a second pass gives the same verdicts");
    });
    assert_eq!(info.count_total, 0, "allocations during {} warm scans: {info:?}", messages.len());
}
