//! Loads the stock SpamAssassin 4.0.1 rules the way SpamAssassin does and checks
//! the rule counts against what SpamAssassin itself reports; prints how many
//! patterns translate, per rule type, and why the others do not.

use std::collections::BTreeMap;

use sift_core::rules::{EvalOn, Pattern, RuleKind};

mod support;
use support::perl::perl_lines;
use support::{corpus_folder, rule_pattern, stock_config, RULES_DIR};

/// Counts per rule type as SpamAssassin 4.0.1 reports them for this install
/// (`perl` with Mail::SpamAssassin: `test_types` after init, mimeheader evals
/// split out, `reuse`/`askdns` placeholders left out): (type, count).
const SA_COUNTS: &[(&str, usize)] = &[
    ("header", 769),
    ("header eval", 170),
    ("body", 622),
    ("body eval", 145),
    ("rawbody", 58),
    ("rawbody eval", 7),
    ("full", 4),
    ("full eval", 13),
    ("uri", 144),
    ("meta", 921),
    ("mimeheader", 61),
];

fn type_name(kind: &RuleKind) -> &'static str {
    match kind {
        RuleKind::Header(_) => "header",
        RuleKind::Body(_) => "body",
        RuleKind::RawBody(_) => "rawbody",
        RuleKind::Full(_) => "full",
        RuleKind::Uri(_) => "uri",
        RuleKind::MimeHeader { .. } => "mimeheader",
        RuleKind::Meta(_) => "meta",
        RuleKind::Eval { on: EvalOn::Header, .. } => "header eval",
        RuleKind::Eval { on: EvalOn::Body, .. } => "body eval",
        RuleKind::Eval { on: EvalOn::RawBody, .. } => "rawbody eval",
        RuleKind::Eval { on: EvalOn::Full, .. } => "full eval",
        RuleKind::Eval { on: EvalOn::Uri, .. } => "uri eval",
    }
}

#[test]
fn stock_rules_load_like_spamassassin() {
    let Some(config) = stock_config() else {
        println!("{RULES_DIR} absent: stock rules test skipped");
        return;
    };

    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    // type -> (patterns, translated, reason -> count)
    let mut translation: BTreeMap<&str, (usize, usize, BTreeMap<String, usize>)> = BTreeMap::new();
    let syntax = regex_syntax::ParserBuilder::new().unicode(false).utf8(false).build();
    let mut syntax = syntax;
    for rule in &config.rules {
        let ty = type_name(&rule.kind);
        *counts.entry(ty).or_default() += 1;
        if let Some((_, p)) = rule_pattern(&rule.kind) {
            let entry = translation.entry(ty).or_default();
            entry.0 += 1;
            match p.translated() {
                Ok(out) => {
                    entry.1 += 1;
                    assert!(syntax.parse(&out).is_ok(), "{}: {} -> {out} does not parse", rule.name, p.perl);
                }
                Err(why) => *entry.2.entry(why.to_string()).or_default() += 1,
            }
        }
    }
    println!("rules: {}", config.rules.len());
    for (ty, n) in &counts {
        println!("  {ty:<13} {n}");
    }
    println!("patterns translated:");
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for (ty, (total, ok, why)) in &translation {
        println!("  {ty:<13} {ok}/{total}");
        for (reason, n) in why {
            println!("      {n:>4}  {reason}");
            *reasons.entry(reason.clone()).or_default() += n;
        }
    }
    println!("untranslated, all types:");
    for (reason, n) in &reasons {
        println!("  {n:>4}  {reason}");
    }
    println!("lint notes: {}", config.notes.len());
    for note in &config.notes {
        println!("  {}:{}: {}", note.origin.file, note.origin.line, note.message);
    }
    println!("required_score {}, report_safe {}", config.required_score, config.report_safe);
    for h in &config.add_headers {
        println!("  add_header {:?} {} {}", h.when, h.name, h.template);
    }

    for (ty, want) in SA_COUNTS {
        let got = counts.get(ty).copied().unwrap_or(0);
        let tolerance = want / 50 + 1;
        assert!(got.abs_diff(*want) <= tolerance, "{ty}: {got} rules, SpamAssassin has {want}");
    }
    assert_eq!(config.required_score.0, 5000);
    let unknown: Vec<_> = config.notes.iter().filter(|n| n.message.starts_with("unknown directive")).collect();
    assert!(unknown.is_empty(), "unknown directives in stock rules: {unknown:?}");
}

/// Perl side of the differential check: per pattern, one `0`/`1` per text.
const PERL_MATCHES: &str = r#"
  print join('', map { $_ =~ $re ? '1' : '0' } @texts), "\n";
"#;

/// Texts to match: lines of corpus messages, and runs of five lines joined with
/// `\n` (for `/m` and `/s`), none ending in a newline.
fn sample_texts(limit: usize) -> Vec<Vec<u8>> {
    let mut texts = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for dir in ["spam", "easy_ham", "spam_2", "hard_ham"] {
        let Some(entries) = corpus_folder(dir) else { continue };
        for file in entries.iter().take(60) {
            let Ok(data) = std::fs::read(file) else { continue };
            let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l)).collect();
            for line in &lines {
                if !line.is_empty() && seen.insert(line.to_vec()) {
                    texts.push(line.to_vec());
                }
            }
            for chunk in lines.chunks(5) {
                let mut joined = chunk.join(&b'\n');
                while joined.last() == Some(&b'\n') {
                    joined.pop();
                }
                texts.push(joined);
            }
            if texts.len() >= limit {
                return texts;
            }
        }
    }
    texts
}

/// Runs every translated stock pattern through Perl (SpamAssassin's own
/// `compile_regexp`) and through regex-automata on corpus text and reports the
/// patterns whose results differ. Needs perl with Mail::SpamAssassin and the corpus.
#[test]
#[ignore = "slow; needs perl, Mail::SpamAssassin and ../shared/corpus"]
fn translations_match_like_perl() {
    use regex_automata::hybrid::dfa::DFA;
    use regex_automata::util::syntax;
    use regex_automata::Input;

    let Some(config) = stock_config() else {
        println!("{RULES_DIR} absent: skipped");
        return;
    };
    let patterns: Vec<(&str, &Pattern)> = config
        .rules
        .iter()
        .filter_map(|r| rule_pattern(&r.kind).map(|(_, p)| (r.name.as_str(), p)))
        .filter(|(_, p)| p.translated().is_ok())
        .collect();
    let texts = sample_texts(6000);
    if texts.is_empty() {
        println!("corpus absent: skipped");
        return;
    }
    let Some(perl_lines) = perl_lines(patterns.iter().map(|(_, p)| &p.perl), &texts, PERL_MATCHES, &[]) else { return };
    let syntax = syntax::Config::new().unicode(false).utf8(false);
    let mut differing = 0;
    let mut perl_errors = 0;
    for ((name, p), perl_line) in patterns.iter().zip(&perl_lines) {
        if perl_line.starts_with("ERR") {
            perl_errors += 1;
            println!("{name}: perl rejects {}: {perl_line}", p.perl);
            continue;
        }
        let out = p.translated().expect("filtered");
        let out = out.as_str();
        let re = match DFA::builder().syntax(syntax).build(out) {
            Ok(re) => re,
            Err(e) => {
                println!("{name}: regex-automata rejects {out}: {e}");
                differing += 1;
                continue;
            }
        };
        let mut cache = re.create_cache();
        let mut diffs = Vec::new();
        for (text, want) in texts.iter().zip(perl_line.bytes()) {
            let got = re.try_search_fwd(&mut cache, &Input::new(text).earliest(true)).expect("search").is_some();
            if got != (want == b'1') {
                diffs.push(String::from_utf8_lossy(text).chars().take(100).collect::<String>());
            }
        }
        if !diffs.is_empty() {
            differing += 1;
            println!(
                "{name}: {} -> {out}: {} of {} texts differ, e.g. {:?}",
                p.perl,
                diffs.len(),
                texts.len(),
                diffs[0]
            );
        }
    }
    println!("{} patterns, {} texts: {differing} differ, {perl_errors} rejected by perl", patterns.len(), texts.len());
    assert_eq!(differing, 0);
}
