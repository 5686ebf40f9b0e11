//! `siftd --lint`: what the rule files define, what compiled, what is disabled and why.

use std::fmt::Write as _;

use sift_core::rules::{Config, RuleSet, RuleType};

use crate::json;

/// The lint report as text.
pub fn text(config: &Config, rules: &RuleSet) -> String {
    let mut out = String::new();
    let summary = rules.summary();
    let _ = writeln!(out, "{:<11} {:>8} {:>8} {:>8} {:>10} {:>8} {:>10}", "type", "defined", "compiled", "disabled", "zero-score", "unread", "unfiltered");
    let mut total = sift_core::rules::TypeCounts::default();
    for t in RuleType::ALL {
        let c = summary.get(t);
        if c.defined == 0 {
            continue;
        }
        total.defined += c.defined;
        total.compiled += c.compiled;
        total.disabled += c.disabled;
        total.zero_score += c.zero_score;
        total.unread += c.unread;
        total.unfiltered += c.unfiltered;
        let _ = writeln!(out, "{:<11} {:>8} {:>8} {:>8} {:>10} {:>8} {:>10}", t.as_str(), c.defined, c.compiled, c.disabled, c.zero_score, c.unread, c.unfiltered);
    }
    let _ = writeln!(out, "{:<11} {:>8} {:>8} {:>8} {:>10} {:>8} {:>10}", "total", total.defined, total.compiled, total.disabled, total.zero_score, total.unread, total.unfiltered);
    let _ = writeln!(out, "required_score {}", rules.required_score().display(1));
    if !rules.disabled().is_empty() {
        let _ = writeln!(out, "\ndisabled rules ({}):", rules.disabled().len());
        for d in rules.disabled() {
            let _ = writeln!(out, "  {} ({}): {}", d.name, d.rule_type, d.reason);
        }
    }
    if !config.notes.is_empty() {
        let _ = writeln!(out, "\nnotes ({}):", config.notes.len());
        for n in &config.notes {
            let _ = writeln!(out, "  {}:{}: {}", n.origin.file, n.origin.line, n.message);
        }
    }
    out
}

/// The lint report as one JSON object.
pub fn json(config: &Config, rules: &RuleSet) -> String {
    let mut out = String::from("{\"types\":{");
    let summary = rules.summary();
    let mut first = true;
    for t in RuleType::ALL {
        let c = summary.get(t);
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(
            out,
            "\"{}\":{{\"defined\":{},\"compiled\":{},\"disabled\":{},\"zero_score\":{},\"unread\":{},\"unfiltered\":{}}}",
            t.as_str(), c.defined, c.compiled, c.disabled, c.zero_score, c.unread, c.unfiltered
        );
    }
    let _ = write!(out, "}},\"required_score\":{},\"disabled\":[", rules.required_score().display(3));
    for (i, d) in rules.disabled().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":");
        json::push_str(&mut out, &d.name);
        let _ = write!(out, ",\"type\":\"{}\",\"reason\":", d.rule_type);
        json::push_str(&mut out, &d.reason.to_string());
        out.push('}');
    }
    out.push_str("],\"notes\":[");
    for (i, n) in config.notes.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"file\":");
        json::push_str(&mut out, &n.origin.file);
        let _ = write!(out, ",\"line\":{},\"message\":", n.origin.line);
        json::push_str(&mut out, &n.message);
        out.push('}');
    }
    out.push_str("]}\n");
    out
}
