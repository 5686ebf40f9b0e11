//! `siftd scan FILE...`: the verdict of each message file.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use sift_core::report;
use sift_core::rules::RuleSet;
use sift_core::scan::{Scratch, Verdict};

use crate::exit;
use crate::json;

/// Output format of `scan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// SpamAssassin-style text.
    Text,
    /// One JSON object per message per line.
    Json,
}

fn read_message(path: &Path, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    if path.as_os_str() == "-" {
        io::stdin().lock().read_to_end(buf)?;
    } else {
        fs::File::open(path)?.read_to_end(buf)?;
    }
    Ok(())
}

/// Writes one verdict as a JSON line.
pub fn verdict_json(file: &str, v: &Verdict<'_>, out: &mut String) {
    out.push_str("{\"file\":");
    json::push_str(out, file);
    let _ = write!(out, ",\"score\":{},\"required\":{},\"spam\":{}", v.score.display(3), v.required.display(3), v.is_spam());
    out.push_str(",\"hits\":[");
    for (i, hit) in v.hits().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json::push_str(out, hit.name);
    }
    out.push_str("],\"rules\":[");
    for (i, hit) in v.hits().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":");
        json::push_str(out, hit.name);
        let _ = write!(out, ",\"score\":{},\"count\":{},\"type\":\"{}\",\"describe\":", hit.score.display(3), hit.count, hit.rule_type);
        json::push_str(out, hit.describe);
        out.push('}');
    }
    out.push(']');
    let o = v.overflow;
    let flags = [("headers", o.headers), ("parts", o.parts), ("depth", o.depth), ("uris", o.uris), ("truncated", o.truncated)];
    out.push_str(",\"overflow\":[");
    let mut first = true;
    for (name, set) in flags {
        if set {
            if !first {
                out.push(',');
            }
            first = false;
            json::push_str(out, name);
        }
    }
    out.push_str("]}\n");
}

/// Writes one verdict as SpamAssassin-style text.
pub fn verdict_text(file: &str, v: &Verdict<'_>, out: &mut String) {
    let _ = writeln!(out, "==> {file} <==");
    out.push_str("Spam: ");
    let _ = report::write_spam_line(v, out);
    out.push('\n');
    let _ = report::write_analysis(v, out);
    out.push('\n');
}

/// Scans `files` with `rules`; returns the exit status (0 all ham, 1 any spam, sysexits on error).
pub fn run(rules: &RuleSet, files: &[impl AsRef<Path>], format: Format) -> i32 {
    let mut scratch = Scratch::new(rules);
    let mut message = Vec::new();
    let mut text = String::new();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut status = 0;
    let mut error = 0;
    for file in files {
        let path = file.as_ref();
        let name = path.to_string_lossy();
        if let Err(e) = read_message(path, &mut message) {
            eprintln!("siftd: {name}: {e}");
            error = exit::NOINPUT;
            continue;
        }
        let verdict = rules.scan(&message, &mut scratch);
        text.clear();
        match format {
            Format::Json => verdict_json(&name, &verdict, &mut text),
            Format::Text => verdict_text(&name, &verdict, &mut text),
        }
        if verdict.is_spam() {
            status = 1;
        }
        if out.write_all(text.as_bytes()).is_err() {
            return exit::IOERR;
        }
    }
    if out.flush().is_err() {
        return exit::IOERR;
    }
    if error != 0 {
        error
    } else {
        status
    }
}
