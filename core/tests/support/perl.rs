//! The Perl side of the stock tests' differential checks: SpamAssassin's own
//! `Util::compile_regexp` run over patterns and texts.

use std::sync::atomic::{AtomicU32, Ordering};

/// Start of every matcher script: reads the hex-encoded patterns and texts files named by
/// its first two arguments (the rest stay in `@args`) and compiles each pattern as
/// SpamAssassin does, printing `ERR <why>` for one Perl rejects. The caller's code follows
/// with `$re` and `@texts` in scope and prints the pattern's one line.
const PREAMBLE: &str = r#"
use strict; use warnings; no warnings;
use Mail::SpamAssassin::Util qw(compile_regexp);
my ($pfile, $tfile, @args) = @ARGV;
open(my $tf, '<', $tfile) or die; my @texts = map { chomp; pack('H*', $_) } <$tf>;
open(my $pf, '<', $pfile) or die;
while (my $p = <$pf>) {
  chomp $p; $p = pack('H*', $p);
  my ($re, $err) = compile_regexp($p, 1);
  if (!$re) { print "ERR $err\n"; next; }
"#;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `items` hex-encoded, one a line; how many.
fn write_hex<I: AsRef<[u8]>>(path: &std::path::Path, items: impl IntoIterator<Item = I>) -> usize {
    let lines: Vec<String> = items.into_iter().map(|i| hex(i.as_ref())).collect();
    std::fs::write(path, lines.join("\n") + "\n").expect("write perl input");
    lines.len()
}

/// Runs `per_pattern` (Perl printing one line for `$re` over `@texts`, reading `@args`)
/// for each of `patterns`: the lines perl printed, one per pattern, or `None` after
/// saying why when perl with Mail::SpamAssassin cannot run.
pub fn perl_lines<P: AsRef<[u8]>, T: AsRef<[u8]>>(
    patterns: impl IntoIterator<Item = P>,
    texts: impl IntoIterator<Item = T>,
    per_pattern: &str,
    args: &[&str],
) -> Option<Vec<String>> {
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sift-perl-match-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (pfile, tfile) = (dir.join("patterns"), dir.join("texts"));
    let patterns = write_hex(&pfile, patterns);
    write_hex(&tfile, texts);
    let script = format!("{PREAMBLE}{per_pattern}\n}}\n");
    let output = std::process::Command::new("perl").arg("-e").arg(script).arg(&pfile).arg(&tfile).args(args).output();
    let _ = std::fs::remove_dir_all(&dir);
    let output = match output {
        Ok(o) if o.status.success() => o,
        other => {
            println!("perl with Mail::SpamAssassin unavailable ({other:?}): skipped");
            return None;
        }
    };
    let lines: Vec<String> = String::from_utf8_lossy(&output.stdout).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), patterns, "one perl line per pattern");
    Some(lines)
}
