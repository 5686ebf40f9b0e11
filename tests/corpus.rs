//! Every corpus file gets a verdict from `siftd scan`: no panic, no hang, bounded memory.
//! Also prints the confusion matrix of the embedded rules on spamassassin-public.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{corpus, run_bounded, siftd};

/// Virtual memory cap for one siftd process.
const MEMORY_KIB: u64 = 2 * 1024 * 1024;
const BATCH: usize = 500;

fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read corpus dir").flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Scans `files` in batches; returns (file, spam) for each, asserting each got exactly one verdict.
fn scan_all(files: &[PathBuf]) -> Vec<(String, bool)> {
    let mut verdicts = Vec::with_capacity(files.len());
    for batch in files.chunks(BATCH) {
        let mut cmd = siftd();
        cmd.args(["scan", "--json"]).args(batch);
        let out = run_bounded(&mut cmd, MEMORY_KIB, Duration::from_secs(600));
        let code = out.status.code();
        assert!(
            code == Some(0) || code == Some(1),
            "siftd failed ({:?}) on a batch starting at {}: {}",
            out.status,
            batch[0].display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), batch.len(), "one verdict per file in batch starting at {}", batch[0].display());
        for (line, file) in lines.iter().zip(batch) {
            let name = file.to_string_lossy();
            let mut quoted = String::new();
            siftd_json_str(&mut quoted, &name);
            assert!(line.starts_with(&format!("{{\"file\":{quoted}")), "verdict out of order for {name}: {line}");
            assert!(line.contains("\"score\":") && line.contains("\"hits\":["), "{line}");
            verdicts.push((name.into_owned(), line.contains("\"spam\":true")));
        }
    }
    verdicts
}

fn siftd_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[test]
fn robustness_corpus_gets_verdicts() {
    let Some(dir) = corpus("robustness") else {
        eprintln!("SKIP: ../shared/corpus/robustness not found");
        return;
    };
    let files = files_under(&dir);
    assert!(files.len() > 1000, "expected the whole robustness corpus, found {}", files.len());
    let verdicts = scan_all(&files);
    assert_eq!(verdicts.len(), files.len());
}

#[test]
fn spamassassin_public_confusion_matrix() {
    let Some(dir) = corpus("spamassassin-public") else {
        eprintln!("SKIP: ../shared/corpus/spamassassin-public not found");
        return;
    };
    let files = files_under(&dir);
    assert!(files.len() > 6000, "expected the whole public corpus, found {}", files.len());
    let verdicts = scan_all(&files);
    let groups = ["easy_ham/", "easy_ham_2/", "hard_ham/", "spam/", "spam_2/"];
    let mut table = Vec::new();
    let (mut tp, mut fn_, mut fp, mut tn) = (0usize, 0usize, 0usize, 0usize);
    for g in groups {
        let is_spam_group = g.starts_with("spam");
        let in_group: Vec<bool> = verdicts.iter().filter(|(f, _)| f.contains(&format!("/{g}"))).map(|(_, s)| *s).collect();
        let spam = in_group.iter().filter(|s| **s).count();
        table.push((g.trim_end_matches('/'), in_group.len(), spam));
        if is_spam_group {
            tp += spam;
            fn_ += in_group.len() - spam;
        } else {
            fp += spam;
            tn += in_group.len() - spam;
        }
    }
    println!("\nembedded rules on spamassassin-public (required_score 5.0):");
    println!("| folder | messages | verdict spam | verdict ham |");
    println!("|---|---:|---:|---:|");
    for (g, n, s) in &table {
        println!("| {g} | {n} | {s} | {} |", n - s);
    }
    println!("\n|  | predicted spam | predicted ham |");
    println!("|---|---:|---:|");
    println!("| spam ({}) | {tp} | {fn_} |", tp + fn_);
    println!("| ham ({}) | {fp} | {tn} |", fp + tn);
    let recall = tp as f64 / (tp + fn_) as f64;
    let fp_rate = fp as f64 / (fp + tn) as f64;
    println!("\nspam recall {:.1}%, ham false-positive rate {:.2}%", recall * 100.0, fp_rate * 100.0);
    assert!(recall > fp_rate + 0.3, "the embedded rules must separate spam from ham: recall {recall:.3}, fp rate {fp_rate:.3}");
}
