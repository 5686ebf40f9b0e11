//! Header evals against SpamAssassin itself: the relay pseudo-headers and
//! `EnvelopeFrom` of every message of the public corpus, as SpamAssassin 4.0.1
//! computes them (`PerMsgStatus::extract_message_metadata` then `get`), compared
//! with what `Relays::read` gives for the same message and the stock rules.
//!
//! Needs perl with Mail::SpamAssassin and ../shared/corpus, so it is `#[ignore]`d:
//! `cargo test -p sift-core --test eval_header -- --ignored --nocapture`.
//! `SIFT_SA_RELAYS=FILE` reuses (or, when absent, writes) SpamAssassin's answers.

use std::collections::BTreeMap;
use std::path::PathBuf;

use sift_core::msg::{Limits, Message, MessageBuffers};
use sift_core::rules::eval::header::HeaderData;
use sift_core::rules::eval::relays::Relays;
use sift_core::rules::eval::{EvalContext, EvalData, EvalScratch, EvalTest};
use sift_core::rules::RuleKind;

mod support;
use support::{files, public_corpus, stock_config, RULES_DIR, SITE_DIR};

/// EnvelopeFrom values that differ because of the `:addr` parser, not the relays.
const KNOWN_ADDRESS_DIFFERENCES: usize = 2;
const NAMES: [&str; 5] = [
    "X-Spam-Relays-Untrusted",
    "X-Spam-Relays-Trusted",
    "X-Spam-Relays-Internal",
    "X-Spam-Relays-External",
    "EnvelopeFrom",
];

/// Prints, per message file given, a tab-separated line: the file, then each of
/// [`NAMES`] as SpamAssassin's `get` returns it (`\N` for undef).
const PERL_DUMP: &str = r#"
use strict; use warnings;
use Mail::SpamAssassin;
my $sa = Mail::SpamAssassin->new({ rules_filename => $ENV{SA_RULES}, site_rules_filename => $ENV{SA_SITE},
  local_tests_only => 1, dont_copy_prefs => 1, userprefs_filename => '/dev/null' });
$sa->init(1);
binmode STDOUT;
while (my $file = <STDIN>) {
  chomp $file;
  open(my $fh, '<', $file) or next; binmode $fh; local $/; my $text = <$fh>; close $fh;
  my $msg = $sa->parse($text);
  my $pms = Mail::SpamAssassin::PerMsgStatus->new($sa, $msg);
  $pms->extract_message_metadata();
  my @out = ($file);
  for my $h (qw(X-Spam-Relays-Untrusted X-Spam-Relays-Trusted X-Spam-Relays-Internal X-Spam-Relays-External EnvelopeFrom)) {
    my @v = $pms->get($h);
    my $v = @v ? $v[0] : "\\N";
    $v =~ s/[\t\n]/ /g;
    push @out, $v;
  }
  print join("\t", @out), "\n";
  $pms->finish; $msg->finish;
}
"#;

fn corpus_files() -> Vec<PathBuf> {
    let root = public_corpus();
    let mut out = Vec::new();
    for dir in ["easy_ham", "easy_ham_2", "hard_ham", "spam", "spam_2"] {
        out.extend(
            files(&root.join(dir), None)
                .into_iter()
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| !n.starts_with('.') && n != "cmds")),
        );
    }
    out
}

/// SpamAssassin's answers: file -> values of [`NAMES`] (`None` = undef).
fn spamassassin_answers(files: &[PathBuf]) -> Option<BTreeMap<String, Vec<Option<String>>>> {
    let cache = std::env::var_os("SIFT_SA_RELAYS").map(PathBuf::from);
    let text = match cache.as_ref().and_then(|c| std::fs::read(c).ok()) {
        Some(t) => t,
        None => {
            use std::io::Write;
            let mut child = std::process::Command::new("perl")
                .arg("-e")
                .arg(PERL_DUMP)
                .env("SA_RULES", RULES_DIR)
                .env("SA_SITE", SITE_DIR)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .ok()?;
            let list: String = files.iter().map(|f| format!("{}\n", f.display())).collect();
            let mut stdin = child.stdin.take()?;
            let writer = std::thread::spawn(move || stdin.write_all(list.as_bytes()));
            let out = child.wait_with_output().ok()?;
            let _ = writer.join();
            if !out.status.success() {
                return None;
            }
            if let Some(c) = &cache {
                let _ = std::fs::write(c, &out.stdout);
            }
            out.stdout
        }
    };
    let mut answers = BTreeMap::new();
    for line in String::from_utf8_lossy(&text).lines() {
        let mut cols = line.split('\t');
        let Some(file) = cols.next() else { continue };
        let values: Vec<Option<String>> = cols.map(|v| (v != "\\N").then(|| v.to_string())).collect();
        answers.insert(file.to_string(), values);
    }
    Some(answers)
}

#[test]
#[ignore = "slow; needs perl, Mail::SpamAssassin and ../shared/corpus"]
fn relays_match_spamassassin() {
    let files = corpus_files();
    let Some(config) = stock_config().filter(|_| !files.is_empty()) else {
        println!("corpus or stock rules absent: skipped");
        return;
    };
    let Some(answers) = spamassassin_answers(&files) else {
        println!("perl with Mail::SpamAssassin unavailable: skipped");
        return;
    };
    let data = HeaderData::new(&config);
    let mut bufs = MessageBuffers::new(Limits::default());
    let mut relays = Relays::default();
    let mut out = Vec::new();
    let mut differ = [0usize; NAMES.len()];
    let mut compared = 0;
    for file in &files {
        let Some(want) = answers.get(&file.display().to_string()) else {
            continue;
        };
        let raw = std::fs::read(file).expect("readable message");
        let message = Message::parse(&raw, &mut bufs);
        relays.read(&message, &data);
        compared += 1;
        for (k, name) in NAMES.iter().enumerate() {
            out.clear();
            let present = relays.pseudo_header(name.as_bytes(), &mut out) == Some(true);
            let got = present.then(|| String::from_utf8_lossy(&out).replace(['\t', '\n'], " "));
            let want = want.get(k).cloned().flatten();
            if got != want {
                if differ[k] < 8 {
                    println!("{} {name}:\n  SA:   {want:?}\n  sift: {got:?}", file.display());
                }
                differ[k] += 1;
            }
        }
    }
    for (name, n) in NAMES.iter().zip(differ) {
        println!("{name}: {n} of {compared} messages differ");
    }
    assert!(compared > 0);
    let [untrusted, trusted, internal, external, envfrom] = differ;
    assert_eq!(untrusted + trusted + internal + external, 0, "relay pseudo-headers differ from SpamAssassin's");
    // Two spam_2 messages have `Return-Path: <x@[1086695621]>`, an address the
    // message parser's `:addr` does not accept and SpamAssassin's does.
    assert!(envfrom <= KNOWN_ADDRESS_DIFFERENCES, "EnvelopeFrom differs on {envfrom} messages");
}

/// The header eval tests of the stock rules, run over corpus messages, allocate
/// nothing once their buffers are warm.
#[test]
fn warm_header_evals_allocate_nothing() {
    let files = corpus_files();
    let Some(config) = stock_config().filter(|_| !files.is_empty()) else {
        println!("corpus or stock rules absent: skipped");
        return;
    };
    let data = EvalData::new(&config);
    let tests: Vec<EvalTest> = config
        .rules
        .iter()
        .filter_map(|r| match &r.kind {
            RuleKind::Eval { on, function, args } => EvalTest::parse(*on, function, args, &data).ok(),
            _ => None,
        })
        .filter(|t| matches!(t, EvalTest::Header(_)))
        .collect();
    assert!(tests.len() > 40, "only {} header eval tests", tests.len());
    let messages: Vec<Vec<u8>> = files.iter().step_by(20).filter_map(|f| std::fs::read(f).ok()).collect();
    let mut bufs = MessageBuffers::new(Limits::default());
    let mut scratch = EvalScratch::default();
    let pass = |bufs: &mut MessageBuffers, scratch: &mut EvalScratch| -> u64 {
        let mut hits = 0u64;
        for raw in &messages {
            let message = Message::parse(raw, bufs);
            scratch.prepare(&message, &data);
            let EvalScratch { relays, tests: test_scratch } = scratch;
            let cx = EvalContext { message: &message, data: &data, relays };
            for t in &tests {
                hits += u64::from(t.run(&cx, test_scratch));
            }
        }
        hits
    };
    let mut first = 0;
    let cold = allocation_counter::measure(|| first = pass(&mut bufs, &mut scratch));
    assert!(cold.count_total > 0, "the counter sees the cold pass's allocations");
    let info = allocation_counter::measure(|| {
        assert_eq!(pass(&mut bufs, &mut scratch), first, "a second pass gives the same hits");
    });
    assert_eq!(info.count_total, 0, "allocations during a warm pass over {} messages: {info:?}", messages.len());
}
