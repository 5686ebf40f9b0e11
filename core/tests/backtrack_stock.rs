//! The stock SpamAssassin 4.0.1 rules whose regexes have no DFA form: each one
//! must compile to a backtracking program and a relaxed regex that builds a DFA,
//! and on corpus text the program must find what Perl (SpamAssassin's own
//! `compile_regexp`) finds, while the relaxed DFA matches at least wherever Perl does.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use regex_automata::nfa::thompson;
use regex_automata::util::syntax;
use regex_automata::{hybrid, Input};
use sift_core::rules::backtrack::{
    Backtrack, BacktrackScratch, Undecided, DEFAULT_STEPS_PER_BYTE, DEFAULT_STEP_BUDGET,
};
use sift_core::rules::{perl, Config, RuleSet, RuleType};

mod support;
use support::perl::perl_lines;
use support::{corpus_folder, public_corpus, rule_pattern, stock_config, RULES_DIR};

/// Most `/g` matches compared per text.
const MAX_COUNT: u32 = 20;

/// A stock rule that needs backtracking, compiled.
struct Needing<'c> {
    name: &'c str,
    ty: &'static str,
    perl: &'c str,
    compiled: Result<Backtrack, String>,
}

/// Every stock pattern whose translation failed for a reason backtracking handles.
fn needing(config: &Config) -> (Vec<Needing<'_>>, BTreeMap<&'static str, usize>) {
    let mut out = Vec::new();
    let mut per_type: BTreeMap<&'static str, usize> = BTreeMap::new();
    for rule in &config.rules {
        let Some((ty, p)) = rule_pattern(&rule.kind) else { continue };
        let Err(why) = p.translated() else { continue };
        if !why.needs_backtracking() {
            continue;
        }
        *per_type.entry(ty).or_default() += 1;
        let compiled = perl::backtrack(&p.perl).map_err(|e| e.to_string());
        out.push(Needing { name: &rule.name, ty, perl: &p.perl, compiled });
    }
    (out, per_type)
}

/// A lazy DFA of a relaxed regex, to search corpus text with.
fn relaxed_dfa(relaxed: &str) -> Result<hybrid::dfa::DFA, String> {
    hybrid::dfa::Builder::new()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .thompson(thompson::Config::new().utf8(false).shrink(false))
        .configure(hybrid::dfa::Config::new().cache_capacity(1024 * 1024).skip_cache_capacity_check(true))
        .build(relaxed)
        .map_err(|e| e.to_string())
}

#[test]
fn stock_rules_needing_backtracking_compile() {
    let Some(config) = stock_config() else {
        println!("{RULES_DIR} absent: skipped");
        return;
    };
    let (rules, per_type) = needing(&config);
    let mut failed = Vec::new();
    let (mut dense, mut lazy) = (0, 0);
    let (mut longest, mut total) = (0, 0);
    for r in &rules {
        match &r.compiled {
            Ok(b) => {
                longest = longest.max(b.program.len());
                total += b.program.len();
                let rule_type = match r.ty {
                    "body" => RuleType::Body,
                    "uri" => RuleType::Uri,
                    "rawbody" => RuleType::RawBody,
                    _ => RuleType::Header,
                };
                match RuleSet::fits_dense(&b.relaxed, rule_type) {
                    Ok(true) => dense += 1,
                    Ok(false) => lazy += 1,
                    Err(e) => failed.push(format!("{}: relaxed {} does not build: {e}", r.name, b.relaxed)),
                }
            }
            Err(e) => failed.push(format!("{}: {} does not compile: {e}", r.name, r.perl)),
        }
    }
    println!("stock patterns needing backtracking: {}", rules.len());
    for (ty, n) in &per_type {
        println!("  {ty:<11} {n}");
    }
    println!(
        "compiled: {}; relaxed DFAs dense {dense}, lazy {lazy}; programs {total} instructions in all, longest {longest}",
        rules.len() - failed.len()
    );
    for f in &failed {
        println!("  FAILED {f}");
    }
    assert!(rules.len() > 150, "expected the stock rules' ~220 such patterns, found {}", rules.len());
    assert!(failed.is_empty(), "{} of {} do not compile", failed.len(), rules.len());

    // A scratch sized for every program: calls allocate nothing.
    let programs: Vec<_> = rules.iter().filter_map(|r| r.compiled.as_ref().ok()).map(|b| &b.program).collect();
    let mut scratch = BacktrackScratch::for_programs(programs.iter().copied());
    let long = "aaaa bbbb ".repeat(400);
    let texts: [&[u8]; 6] = [
        b"From: \"John Smith\" <jsmith@example.com>",
        b"Subject: C i a l i s for $1,000.00 USD today!!",
        b"[ ip=10.1.2.3 rdns=mail.example.com helo=mail.example.com by=mx.example.org ident= envfrom= intl=0 id=x auth= msa=0 ]",
        b"<a href=\"http://example.com/x\">http://example.org</a> <img src=\"http://x.example/y/Cz.jpg\">",
        b"To: bob@example.com\nFrom: bob@example.com\nSubject: bob@example.com hello",
        long.as_bytes(),
    ];
    let mut hits = 0u32;
    let info = allocation_counter::measure(|| {
        for p in &programs {
            for t in texts {
                hits += p.count_matches(t, 5, &mut scratch).count;
                hits += u32::from(p.find_at(t, 1, &mut scratch).is_ok_and(|m| m.is_some()));
            }
        }
    });
    assert_eq!(info.count_total, 0, "allocations in {} backtracking calls: {info:?}", programs.len() * texts.len() * 2);
    assert!(hits > 0, "some stock pattern matches the sample texts");
}

/// Perl side: for each pattern, one line listing `text:start:end:count` for every
/// text it matches (`count`: `/g` matches, at most `$args[0]`).
const PERL_MATCHES: &str = r#"
  my @out;
  for my $i (0..$#texts) {
    my $t = $texts[$i];
    next unless $t =~ $re;
    my ($s, $e) = ($-[0], $+[0]);
    my $c = 0;
    while ($t =~ /$re/g) { last if ++$c >= $args[0] }
    push @out, "$i:$s:$e:$c";
  }
  print join(' ', @out), "\n";
"#;

/// What part of a message a sample text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// One line, or five lines joined (a body paragraph, a `/m` text).
    Lines,
    /// A header's value.
    HeaderValue,
    /// The whole header block (`ALL`).
    HeaderBlock,
    /// The whole message.
    Message,
}

/// Whether a rule of type `ty` reads texts like `kind`: where the scan would run it.
fn reads(ty: &str, kind: Kind) -> bool {
    match ty {
        "body" | "rawbody" | "uri" => kind == Kind::Lines,
        "header" | "mimeheader" => matches!(kind, Kind::HeaderValue | Kind::HeaderBlock),
        _ => kind == Kind::Message,
    }
}

/// Corpus texts: single lines, runs of five lines, header values, whole header
/// blocks and whole messages, none ending in a newline.
fn sample_texts(per_dir: usize) -> Vec<(Kind, Vec<u8>)> {
    let mut texts = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut add = |kind: Kind, t: Vec<u8>, texts: &mut Vec<(Kind, Vec<u8>)>| {
        let mut t = t;
        while t.last() == Some(&b'\n') {
            t.pop();
        }
        if !t.is_empty() && seen.insert(t.clone()) {
            texts.push((kind, t));
        }
    };
    for dir in ["spam", "easy_ham", "spam_2", "hard_ham", "easy_ham_2"] {
        let Some(entries) = corpus_folder(dir) else { continue };
        for file in entries.iter().take(per_dir) {
            let Ok(data) = std::fs::read(file) else { continue };
            let data: Vec<u8> = data.into_iter().filter(|&b| b != b'\r').collect();
            let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
            let blank = lines.iter().position(|l| l.is_empty()).unwrap_or(lines.len());
            for line in &lines {
                add(Kind::Lines, line.to_vec(), &mut texts);
            }
            for chunk in lines.chunks(5) {
                add(Kind::Lines, chunk.join(&b'\n'), &mut texts);
            }
            for line in lines.iter().take(blank) {
                if let Some(colon) = line.iter().position(|&b| b == b':') {
                    let value = line.get(colon + 1..).unwrap_or(&[]);
                    let start = value.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(value.len());
                    add(Kind::HeaderValue, value.get(start..).unwrap_or(&[]).to_vec(), &mut texts);
                }
            }
            add(Kind::HeaderBlock, lines.get(..blank).unwrap_or(&[]).join(&b'\n'), &mut texts);
            add(Kind::Message, data.clone(), &mut texts);
        }
    }
    texts
}

/// Runs the stock patterns that need backtracking through Perl and through
/// the program and the relaxed DFA on corpus text. Needs perl with
/// Mail::SpamAssassin, the stock rules and the corpus; skips without them.
#[test]
#[ignore = "slow (about 2 minutes); needs perl, Mail::SpamAssassin, the stock rules and ../shared/corpus"]
fn stock_backtracking_rules_match_like_perl() {
    let Some(config) = stock_config() else {
        println!("{RULES_DIR} absent: skipped");
        return;
    };
    let texts = sample_texts(40);
    if texts.is_empty() {
        println!("corpus {} absent: skipped", public_corpus().display());
        return;
    }
    let (rules, _) = needing(&config);
    let rules: Vec<(&Needing<'_>, &Backtrack)> =
        rules.iter().filter_map(|r| r.compiled.as_ref().ok().map(|b| (r, b))).collect();

    let started = Instant::now();
    let max_count = MAX_COUNT.to_string();
    let (patterns, sample) = (rules.iter().map(|(r, _)| r.perl), texts.iter().map(|(_, t)| t));
    let Some(perl_lines) = perl_lines(patterns, sample, PERL_MATCHES, &[&max_count]) else { return };
    let perl_time = started.elapsed();

    let mut scratch = BacktrackScratch::default();
    let mut mismatches = Vec::new();
    let mut relaxed_misses = Vec::new();
    // Rule -> (texts of its kind where the relaxed DFA matched and the program
    // gave no answer, of how many such texts).
    let mut undecided: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut undecided_elsewhere = 0u64;
    let mut elsewhere: BTreeMap<(&str, String, Undecided), usize> = BTreeMap::new();
    let (mut perl_errors, mut calls, mut perl_hits, mut rules_hit) = (0, 0u64, 0u64, 0);
    let (mut relevant_calls, mut relevant_steps, mut relevant_max) = (0u64, 0u64, (0u32, ""));
    let mut ours = Duration::ZERO;
    let mut all_steps = 0u64;
    let (mut relevant_time, mut slowest) = (Duration::ZERO, Duration::ZERO);
    let mut deepest = (0usize, "");
    for ((rule, b), perl_line) in rules.iter().zip(&perl_lines) {
        if let Some(err) = perl_line.strip_prefix("ERR") {
            perl_errors += 1;
            println!("{}: perl rejects {}: {err}", rule.name, rule.perl);
            continue;
        }
        let mut want: BTreeMap<usize, (usize, usize, u32)> = BTreeMap::new();
        for item in perl_line.split_whitespace() {
            let f: Vec<usize> = item.split(':').map(|n| n.parse().expect("perl output")).collect();
            want.insert(f[0], (f[1], f[2], f[3] as u32));
        }
        perl_hits += want.len() as u64;
        rules_hit += usize::from(!want.is_empty());
        let dfa = relaxed_dfa(&b.relaxed).expect("relaxed builds");
        let mut cache = dfa.create_cache();
        let mut shown = 0;
        for (i, (kind, text)) in texts.iter().enumerate() {
            let expected = want.get(&i).copied();
            let dfa_hit =
                dfa.try_search_fwd(&mut cache, &Input::new(text).earliest(true)).expect("lazy DFA search").is_some();
            if expected.is_some() && !dfa_hit {
                relaxed_misses.push(format!("{}: relaxed {} misses {:?}", rule.name, b.relaxed, lossy(text)));
            }
            // Where the scan would run the program: texts of the rule's kind the DFA matched.
            let relevant = dfa_hit && reads(rule.ty, *kind);
            calls += 1;
            let t = Instant::now();
            let found = b.program.find_at(text, 0, &mut scratch);
            let took = t.elapsed();
            ours += took;
            let steps = scratch.last_steps();
            all_steps += u64::from(steps);
            let depth = scratch.deepest_stack();
            if relevant {
                relevant_calls += 1;
                relevant_steps += u64::from(steps);
                relevant_time += took;
                slowest = slowest.max(took);
                if steps > relevant_max.0 {
                    relevant_max = (steps, rule.name);
                }
                if depth > deepest.0 {
                    deepest = (depth, rule.name);
                }
                undecided.entry(rule.name).or_default().1 += 1;
            }
            let counted = match found {
                Ok(Some(_)) => Some(b.program.count_matches(text, MAX_COUNT, &mut scratch)),
                _ => None,
            };
            let got = match (found, counted) {
                (Ok(Some((s, e))), Some(c)) if c.undecided.is_none() => Ok(Some((s, e, c.count))),
                (Ok(None), _) => Ok(None),
                (Err(why), _) => Err(why),
                (_, _) => Err(Undecided::StepLimit),
            };
            let got = match got {
                Ok(g) => g,
                Err(why) => {
                    if relevant {
                        undecided.entry(rule.name).or_default().0 += 1;
                    } else {
                        undecided_elsewhere += 1;
                        *elsewhere.entry((rule.ty, format!("{kind:?}"), why)).or_default() += 1;
                    }
                    if std::env::var("BT_DIAG").ok().as_deref() == Some(rule.name) {
                        let mut big = BacktrackScratch::with_limits(u32::MAX, 0, 1 << 20);
                        let r = b.program.find_at(text, 0, &mut big);
                        println!(
                            "DIAG {why} {kind:?} relevant {relevant} perl {expected:?} len {} needs {} steps {} frames {r:?}: {:?}",
                            text.len(),
                            big.last_steps(),
                            big.deepest_stack(),
                            lossy(text)
                        );
                    }
                    continue;
                }
            };
            if got != expected {
                if shown < 3 {
                    mismatches.push(format!(
                        "{}: {}: perl {expected:?}, ours {got:?} on {:?}",
                        rule.name,
                        rule.perl,
                        lossy(text)
                    ));
                }
                shown += 1;
            }
        }
    }
    let undecided_rules: Vec<_> = undecided.iter().filter(|(_, (n, _))| *n > 0).collect();
    let undecided_texts: usize = undecided_rules.iter().map(|(_, (n, _))| n).sum();
    println!(
        "{} patterns x {} texts: {perl_hits} perl hits in {rules_hit} rules; {} mismatches, {} relaxed misses, {perl_errors} rejected by perl",
        rules.len(),
        texts.len(),
        mismatches.len(),
        relaxed_misses.len(),
    );
    println!(
        "where the scan would run it (text of the rule's kind, relaxed DFA hit): {relevant_calls} runs, mean {:.1} steps, max {} ({}); \
         undecided {undecided_texts} runs in {} rules (budget {DEFAULT_STEP_BUDGET} + {DEFAULT_STEPS_PER_BYTE}/byte); elsewhere undecided {undecided_elsewhere}",
        relevant_steps as f64 / relevant_calls.max(1) as f64,
        relevant_max.0,
        relevant_max.1,
        undecided_rules.len(),
    );
    println!(
        "deepest stack where the scan would run it: {} frames ({}); time: perl {perl_time:?} (whole run), ours {ours:?} for {calls} first-match searches, {all_steps} steps ({:.1} ns/step)",
        deepest.0,
        deepest.1,
        ours.as_nanos() as f64 / all_steps.max(1) as f64
    );
    println!("time where the scan would run it: {relevant_time:?} in all, slowest call {slowest:?}");
    for ((ty, kind, why), n) in &elsewhere {
        println!("  elsewhere: {ty} rules on {kind}: {n} ({why})");
    }
    for (name, (n, of)) in &undecided_rules {
        println!("  undecided {name}: {n} of {of} runs");
    }
    for m in mismatches.iter().chain(relaxed_misses.iter().take(20)) {
        println!("  {m}");
    }
    assert!(mismatches.is_empty(), "{} patterns differ from perl", mismatches.len());
    assert!(relaxed_misses.is_empty(), "{} relaxed forms miss perl hits", relaxed_misses.len());
}

fn lossy(text: &[u8]) -> String {
    String::from_utf8_lossy(text).chars().take(160).collect()
}
