//! The verdict rendered as SpamAssassin renders it: the `Spam:` line of spamd, the
//! rule list of `X-Spam-Status`, and the "Content analysis details" table.

use core::fmt::{self, Write};

use crate::scan::Verdict;
use crate::score::Score;

/// `True ; 15.0 / 5.0`: the value of spamd's `Spam:` response header.
pub fn write_spam_line(v: &Verdict<'_>, out: &mut dyn Write) -> fmt::Result {
    let word = if v.is_spam() { "True" } else { "False" };
    write!(out, "{word} ; {} / {}", v.score.display(1), v.required.display(1))
}

/// The names of the scored rules that hit, comma-separated and sorted, as spamd's
/// SYMBOLS response and the `tests=` part of `X-Spam-Status` list them.
pub fn write_rule_names(v: &Verdict<'_>, separator: &str, out: &mut dyn Write) -> fmt::Result {
    for (i, hit) in v.hits().enumerate() {
        if i > 0 {
            out.write_str(separator)?;
        }
        out.write_str(hit.name)?;
    }
    Ok(())
}

/// A score as the report column shows it: `%4.1f`, or `%4.0f` from ten points on.
fn report_score(score: Score) -> crate::score::ScoreDisplay {
    if score.0 >= 10_000 || score.0 <= -10_000 {
        score.display(0)
    } else {
        score.display(1)
    }
}

/// The "Content analysis details" block of SpamAssassin's report: header, column
/// titles and one line per rule that hit.
pub fn write_analysis(v: &Verdict<'_>, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "Content analysis details:   ({} points, {} required)", v.score.display(1), v.required.display(1))?;
    writeln!(out)?;
    writeln!(out, " pts rule name              description")?;
    writeln!(out, "---- ---------------------- --------------------------------------------------")?;
    write_summary(v, out)
}

/// SpamAssassin's `_SUMMARY_`: one line per rule that hit.
pub fn write_summary(v: &Verdict<'_>, out: &mut dyn Write) -> fmt::Result {
    for hit in v.hits() {
        let desc = if hit.describe.is_empty() { "No description available." } else { hit.describe };
        writeln!(
            out,
            "{:>4} {:<22} {}{}",
            report_score(hit.score),
            hit.name,
            hit.rule_type.report_prefix(),
            desc
        )?;
    }
    Ok(())
}
