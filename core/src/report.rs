//! The verdict rendered as SpamAssassin renders it: the `Spam:` line of spamd, the
//! rule list of `X-Spam-Status`, and the "Content analysis details" table.
//!
//! Everything here reads a verdict through [`VerdictView`], which [`Verdict`]
//! implements and tests can implement with values of their own.

use alloc::vec::Vec;
use core::fmt::{self, Write};

use crate::scan::{Hit, Verdict};
use crate::score::Score;

/// What reports and responses need to know about a scanned message.
pub trait VerdictView {
    /// Sum of the scores of the rules that hit.
    fn score(&self) -> Score;
    /// The score at which a message is spam.
    fn required(&self) -> Score;
    /// Spam when the score reaches the required score.
    fn is_spam(&self) -> bool {
        self.score() >= self.required()
    }
    /// The scored rules that hit, in the order reports list them.
    fn hits(&self) -> impl Iterator<Item = Hit<'_>> + '_;
    /// `__` sub-rules that hit (for `_SUBTESTS_`).
    fn subtests(&self) -> impl Iterator<Item = &str> + '_ {
        core::iter::empty()
    }
    /// The message's rendered body text, Subject first, one paragraph per line,
    /// as SpamAssassin renders it for `body` rules (for `_PREVIEW_`).
    fn body_text(&self) -> &[u8];
}

impl VerdictView for Verdict<'_> {
    fn score(&self) -> Score {
        self.score
    }

    fn required(&self) -> Score {
        self.required
    }

    fn is_spam(&self) -> bool {
        Verdict::is_spam(self)
    }

    fn hits<'s>(&'s self) -> impl Iterator<Item = Hit<'s>> + 's {
        Verdict::hits(self)
    }

    fn subtests<'s>(&'s self) -> impl Iterator<Item = &'s str> + 's {
        self.all_hits().filter(|n| n.starts_with("__")).map(|n| -> &'s str { n })
    }

    fn body_text(&self) -> &[u8] {
        self.body_text
    }
}

/// `True ; 15.0 / 5.0`: the value of spamd's `Spam:` response header.
pub fn write_spam_line<V: VerdictView + ?Sized>(v: &V, out: &mut dyn Write) -> fmt::Result {
    write_spam_line_words(v, "True", "False", out)
}

/// The `Spam:` value with the given words for spam and ham (REPORT_IFSPAM says `Yes`/`No`).
pub fn write_spam_line_words<V: VerdictView + ?Sized>(v: &V, spam: &str, ham: &str, out: &mut dyn Write) -> fmt::Result {
    out.write_str(if v.is_spam() { spam } else { ham })?;
    out.write_str(" ; ")?;
    write_score_tag(v, out)?;
    write!(out, " / {}", v.required().display(1))
}

/// The score as spamd and `_SCORE_` show it (SpamAssassin's `get_tag_value_for_score`):
/// one decimal, except that a ham whose rounded score reaches the rounded required
/// score shows the required score less 0.1, so that it never looks like spam.
pub fn write_score_tag<V: VerdictView + ?Sized>(v: &V, out: &mut dyn Write) -> fmt::Result {
    let mut score = heapless::String::<32>::new();
    let mut required = heapless::String::<32>::new();
    let _ = write!(score, "{}", v.score().display(1));
    let _ = write!(required, "{}", v.required().display(1));
    let (s, r) = (tenths(&score), tenths(&required));
    if v.is_spam() || s < r {
        return out.write_str(&score);
    }
    write_perl_float(r as f64 / 10.0 - 0.1, out)
}

/// `-12.3` as a count of tenths.
fn tenths(text: &str) -> i64 {
    let negative = text.starts_with('-');
    let digits = text.bytes().filter(u8::is_ascii_digit).fold(0i64, |n, d| n.saturating_mul(10).saturating_add(i64::from(d - b'0')));
    if negative {
        -digits
    } else {
        digits
    }
}

/// A float as Perl prints a number: `%.15g`.
pub(crate) fn write_perl_float(x: f64, out: &mut dyn Write) -> fmt::Result {
    if x == 0.0 {
        return out.write_str("0");
    }
    if !x.is_finite() {
        return out.write_str(if x.is_nan() { "NaN" } else if x > 0.0 { "Inf" } else { "-Inf" });
    }
    let mut e = heapless::String::<40>::new();
    let _ = write!(e, "{x:.14e}");
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: heapless::String<20> = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    if negative {
        out.write_str("-")?;
    }
    if (-5..15).contains(&exp) {
        if exp < 0 {
            out.write_str("0.")?;
            for _ in 0..(-exp - 1) {
                out.write_str("0")?;
            }
            out.write_str(digits)
        } else {
            let point = exp as usize + 1;
            for (i, c) in digits.char_indices() {
                if i == point {
                    out.write_str(".")?;
                }
                out.write_char(c)?;
            }
            for _ in digits.len()..point {
                out.write_str("0")?;
            }
            Ok(())
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.write_str(first)?;
        if !rest.is_empty() {
            write!(out, ".{rest}")?;
        }
        write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.unsigned_abs())
    }
}

/// A rule's score as Perl prints the number read from the rule file: `1.3`, `1000`, `-0.001`.
pub(crate) fn write_milli_number(score: Score, out: &mut dyn Write) -> fmt::Result {
    let m = score.0;
    if m < 0 {
        out.write_str("-")?;
    }
    let abs = m.unsigned_abs();
    write!(out, "{}", abs / 1000)?;
    let frac = abs % 1000;
    if frac != 0 {
        let mut f = heapless::String::<4>::new();
        let _ = write!(f, "{frac:03}");
        write!(out, ".{}", f.trim_end_matches('0'))?;
    }
    Ok(())
}

/// Calls `f` with each hit in name order (Perl's `sort`), whatever order the view has.
pub(crate) fn for_each_hit_by_name<V: VerdictView + ?Sized>(v: &V, mut f: impl FnMut(&Hit<'_>)) {
    let mut last: Option<&str> = None;
    loop {
        let next = v.hits().filter(|h| last.is_none_or(|l| h.name > l)).min_by(|a, b| a.name.cmp(b.name));
        let Some(hit) = next else { return };
        f(&hit);
        last = Some(hit.name);
    }
}

/// Calls `f` with each sub-rule name in name order.
pub(crate) fn for_each_subtest_by_name<V: VerdictView + ?Sized>(v: &V, mut f: impl FnMut(&str)) {
    let mut last: Option<&str> = None;
    loop {
        let next = v.subtests().filter(|n| last.is_none_or(|l| *n > l)).min();
        let Some(name) = next else { return };
        f(name);
        last = Some(name);
    }
}

/// The names of the scored rules that hit, sorted and joined with `separator`, as
/// spamd's SYMBOLS response and the `tests=` part of `X-Spam-Status` list them.
pub fn write_rule_names<V: VerdictView + ?Sized>(v: &V, separator: &str, out: &mut dyn Write) -> fmt::Result {
    let mut result = Ok(());
    let mut first = true;
    for_each_hit_by_name(v, |hit| {
        if !first {
            result = result.and_then(|_| out.write_str(separator));
        }
        first = false;
        result = result.and_then(|_| out.write_str(hit.name));
    });
    result
}

/// A score as the report column shows it: `%4.1f`, or `%4.0f` from ten points on.
fn report_score(score: Score) -> heapless::String<16> {
    let mut s = heapless::String::new();
    let shown = if score.0 >= 10_000 || score.0 <= -10_000 { score.display(0) } else { score.display(1) };
    let _ = write!(s, "{shown:>4}");
    s
}

/// Where `wrap` breaks lines: Perl's `split(/(\s)/)` or `split(/((?<=[\s,]))/)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WrapBreak {
    /// At each whitespace character (kept as its own piece).
    Whitespace,
    /// After each whitespace character or comma.
    AfterSpaceOrComma,
}

/// Perl's `\s` on bytes.
pub(crate) fn is_perl_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The pieces Perl's `split` makes for [`wrap`], separators included.
struct Pieces<'t> {
    text: &'t [u8],
    pos: usize,
    brk: WrapBreak,
    /// The next piece is a separator.
    separator_next: bool,
}

impl<'t> Iterator for Pieces<'t> {
    type Item = &'t [u8];

    fn next(&mut self) -> Option<&'t [u8]> {
        let rest = self.text.get(self.pos..)?;
        if self.separator_next {
            self.separator_next = false;
            return match self.brk {
                WrapBreak::Whitespace => {
                    self.pos += 1;
                    rest.get(..1)
                }
                // A zero-width separator; none after the last segment.
                WrapBreak::AfterSpaceOrComma => (!rest.is_empty()).then_some(&rest[..0]),
            };
        }
        let len = match self.brk {
            WrapBreak::Whitespace => rest.iter().position(|&b| is_perl_space(b)),
            WrapBreak::AfterSpaceOrComma => rest.iter().position(|&b| is_perl_space(b) || b == b',').map(|i| i + 1),
        };
        match len {
            Some(n) => {
                self.pos += n;
                self.separator_next = true;
                rest.get(..n)
            }
            // The last field; Perl drops it when empty.
            None => {
                self.pos = self.text.len() + 1;
                (!rest.is_empty()).then_some(rest)
            }
        }
    }
}

/// What `wrap` puts before the first piece.
#[derive(Debug, Clone, Copy)]
pub(crate) enum First<'a> {
    /// These bytes (nothing when empty).
    Text(&'a [u8]),
    /// This many spaces.
    Spaces(usize),
}

fn shown_len(piece: &[u8]) -> usize {
    piece.len() + 7 * piece.iter().filter(|&&b| b == b'\t').count()
}

/// SpamAssassin's `Util::wrap`, appended to `out`: pieces are joined into lines of at
/// most `width` (tabs count 8), a new line starts with `prefix`; with `overflow`,
/// a line may run past `width` by its last piece. Its quirks are kept: the first
/// piece of a line is taken whatever its length, and a break before a separator
/// starts the next line with it.
pub(crate) fn wrap(text: &[u8], prefix: &[u8], first: First<'_>, width: usize, overflow: bool, brk: WrapBreak, out: &mut Vec<u8>) {
    let mut pieces = Pieces { text, pos: 0, brk, separator_next: false };
    let mut line_start = out.len();
    let mut line_len = match first {
        First::Text(t) if !t.is_empty() => {
            out.extend_from_slice(t);
            shown_len(t)
        }
        First::Spaces(n) if n > 0 => {
            out.resize(out.len() + n, b' ');
            n
        }
        _ => match pieces.next() {
            Some(p) => {
                out.extend_from_slice(p);
                shown_len(p)
            }
            None => return,
        },
    };
    let mut merged = false;
    let mut fresh_prefix = false;
    let mut next = pieces.next();
    while let Some(piece) = next {
        let mut len = line_len;
        if merged && !overflow {
            len += shown_len(piece);
        }
        // Perl would loop forever on a prefix wider than the width: merge instead.
        if len <= width || fresh_prefix {
            out.extend_from_slice(piece);
            line_len += shown_len(piece);
            merged = true;
            fresh_prefix = false;
            next = pieces.next();
        } else {
            while out.len() > line_start && out.last().is_some_and(|&b| is_perl_space(b)) {
                out.pop();
            }
            out.push(b'\n');
            line_start = out.len();
            out.extend_from_slice(prefix);
            line_len = shown_len(prefix);
            merged = false;
            fresh_prefix = line_len > width;
        }
    }
}

/// SpamAssassin's `_wrap_desc`: `desc` wrapped as if `indent` columns were already used,
/// continuation lines starting with `prefix`, leading whitespace removed.
fn wrap_description(desc: &str, indent: usize, prefix: &[u8], width: usize, out: &mut Vec<u8>) {
    let mark = out.len();
    wrap(desc.as_bytes(), prefix, First::Spaces(indent), width, false, WrapBreak::Whitespace, out);
    let lead = out.get(mark..).unwrap_or_default().iter().take_while(|&&b| is_perl_space(b)).count();
    out.drain(mark..mark + lead);
}

fn description<'h>(hit: &Hit<'h>) -> &'h str {
    if hit.describe.is_empty() {
        "No description available."
    } else {
        hit.describe
    }
}

/// One line of `_SUMMARY_` (the report's table): `%s %-22s %s%s\n`, description wrapped.
pub(crate) fn push_summary_line(hit: &Hit<'_>, width: usize, out: &mut Vec<u8>) {
    let score = report_score(hit.score);
    let area = hit.rule_type.report_prefix();
    out.extend_from_slice(score.as_bytes());
    out.push(b' ');
    out.extend_from_slice(hit.name.as_bytes());
    for _ in hit.name.len()..22 {
        out.push(b' ');
    }
    out.push(b' ');
    out.extend_from_slice(area.as_bytes());
    let indent = 3 + hit.name.len() + score.len() + area.len();
    wrap_description(description(hit), indent, &[b' '; 28], width, out);
    out.push(b'\n');
}

/// One entry of `_REPORT_` (the `X-Spam-Report` header): `* %s %s %s%s\n`, description wrapped.
pub(crate) fn push_report_line(hit: &Hit<'_>, width: usize, out: &mut Vec<u8>) {
    let score = report_score(hit.score);
    let area = hit.rule_type.report_prefix();
    out.extend_from_slice(b"* ");
    out.extend_from_slice(score.as_bytes());
    out.push(b' ');
    out.extend_from_slice(hit.name.as_bytes());
    out.push(b' ');
    out.extend_from_slice(area.as_bytes());
    let indent = 4 + hit.name.len() + score.len() + area.len();
    wrap_description(description(hit), indent, b"*      ", width, out);
    out.push(b'\n');
}

/// SpamAssassin's default `report_wrap_width`.
pub const REPORT_WRAP_WIDTH: usize = 75;

/// The "Content analysis details" block of SpamAssassin's report: header, column
/// titles and one line per rule that hit.
pub fn write_analysis<V: VerdictView + ?Sized>(v: &V, out: &mut dyn Write) -> fmt::Result {
    out.write_str("Content analysis details:   (")?;
    write_score_tag(v, out)?;
    writeln!(out, " points, {} required)", v.required().display(1))?;
    writeln!(out)?;
    writeln!(out, " pts rule name              description")?;
    writeln!(out, "---- ---------------------- --------------------------------------------------")?;
    write_summary(v, out)
}

/// SpamAssassin's `_SUMMARY_`: one line per rule that hit, descriptions wrapped at 75 columns.
pub fn write_summary<V: VerdictView + ?Sized>(v: &V, out: &mut dyn Write) -> fmt::Result {
    let mut text = Vec::new();
    for hit in v.hits() {
        text.clear();
        push_summary_line(&hit, REPORT_WRAP_WIDTH, &mut text);
        for chunk in text.utf8_chunks() {
            out.write_str(chunk.valid())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::RuleType;
    use alloc::string::{String, ToString};
    use alloc::vec;

    struct View {
        score: i32,
        required: i32,
        hits: Vec<Hit<'static>>,
    }

    impl VerdictView for View {
        fn score(&self) -> Score {
            Score(self.score)
        }
        fn required(&self) -> Score {
            Score(self.required)
        }
        fn hits(&self) -> impl Iterator<Item = Hit<'_>> + '_ {
            self.hits.iter().copied()
        }
        fn body_text(&self) -> &[u8] {
            b""
        }
    }

    fn hit(name: &'static str, score: i32, describe: &'static str, rule_type: RuleType) -> Hit<'static> {
        Hit { name, score: Score(score), describe, rule_type, count: 1 }
    }

    fn spam_line(score: i32, required: i32) -> String {
        let mut s = String::new();
        write_spam_line(&View { score, required, hits: vec![] }, &mut s).unwrap();
        s
    }

    #[test]
    fn spam_line_table() {
        let cases = [
            (1_001_300, 5000, "True ; 1001.3 / 5.0"),
            (1300, 5000, "False ; 1.3 / 5.0"),
            (5000, 5000, "True ; 5.0 / 5.0"),
            // Ham that rounds up to the threshold shows threshold - 0.1, as spamd does.
            (4960, 5000, "False ; 4.9 / 5.0"),
            (5080, 5100, "False ; 5 / 5.1"),
            (-500, 5000, "False ; -0.5 / 5.0"),
            (250, 5000, "False ; 0.2 / 5.0"),
        ];
        for (score, required, want) in cases {
            assert_eq!(spam_line(score, required), want, "{score} / {required}");
        }
    }

    #[test]
    fn perl_float_table() {
        let cases: &[(f64, &str)] = &[
            (4.9, "4.9"),
            (5.1 - 0.1, "5"),
            (0.1 - 0.1, "0"),
            (-0.1, "-0.1"),
            (1e20, "1e+20"),
            (1.5e-7, "1.5e-07"),
            (123456.0, "123456"),
            (0.001, "0.001"),
        ];
        for (x, want) in cases {
            let mut s = String::new();
            write_perl_float(*x, &mut s).unwrap();
            assert_eq!(s, *want, "{x}");
        }
    }

    #[test]
    fn milli_number_table() {
        let cases = [(1_000_000, "1000"), (1300, "1.3"), (1, "0.001"), (-1, "-0.001"), (0, "0"), (250, "0.25"), (-2100, "-2.1")];
        for (m, want) in cases {
            let mut s = String::new();
            write_milli_number(Score(m), &mut s).unwrap();
            assert_eq!(s, want);
        }
    }

    fn wrapped(text: &str, prefix: &str, first: &str, width: usize, overflow: bool, brk: WrapBreak) -> String {
        let mut out = Vec::new();
        wrap(text.as_bytes(), prefix.as_bytes(), First::Text(first.as_bytes()), width, overflow, brk, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn wrap_table() {
        let status = "X-Spam-Status!!Yes, score=5.2 required=5.0 tests=MISSING_DATE,MISSING_FROM,MISSING_HEADERS,MISSING_MID,NO_HEADERS_MESSAGE,NO_RECEIVED,NO_RELAYS autolearn=no autolearn_force=no version=4.0.1";
        let cases: &[(&str, &str, &str, usize, bool, WrapBreak, &str)] = &[
            // X-Spam-Status as spamd 4.0.1 folded it (captured).
            (
                status,
                "\t",
                "",
                79,
                false,
                WrapBreak::AfterSpaceOrComma,
                "X-Spam-Status!!Yes, score=5.2 required=5.0 tests=MISSING_DATE,MISSING_FROM,\n\tMISSING_HEADERS,MISSING_MID,NO_HEADERS_MESSAGE,NO_RECEIVED,NO_RELAYS\n\tautolearn=no autolearn_force=no version=4.0.1",
            ),
            ("a b c", "  ", "", 77, false, WrapBreak::Whitespace, "a b c"),
            // The break falls on the separator, which then starts the next line (Perl quirk).
            ("aaa bbb ccc", "> ", "", 7, false, WrapBreak::Whitespace, "aaa bbb\n>  ccc"),
            ("aaa bb ccc", "> ", "", 7, false, WrapBreak::Whitespace, "aaa bb\n> ccc"),
            ("", "> ", "", 7, false, WrapBreak::Whitespace, ""),
            ("", "> ", "first", 7, false, WrapBreak::Whitespace, "first"),
            // A line may run over by one piece with overflow; the break lands before the separator.
            ("aaaa bbbb cccc", "  ", "", 6, true, WrapBreak::Whitespace, "aaaa bbbb\n   cccc"),
        ];
        for (text, prefix, first, width, overflow, brk, want) in cases {
            assert_eq!(wrapped(text, prefix, first, *width, *overflow, *brk), *want, "{text:?}");
        }
    }

    #[test]
    fn summary_and_report_lines_match_spamd() {
        // Captured from spamd 4.0.1 (tests/data/proto/rs0/report_gtube.resp and process_gtube.resp).
        let long = hit(
            "LONG_DESC_RULE",
            500,
            "This is a rather long description that goes on and on, well past the width that the report wraps at, to show wrapping",
            RuleType::Body,
        );
        let gtube = hit("GTUBE", 1_000_000, "Generic Test for Unsolicited Bulk Email", RuleType::Body);
        let rcvd = hit("RCVD_ILLEGAL_IP", 1300, "Received: contains illegal IP address", RuleType::Header);
        let mut out = Vec::new();
        for h in [&gtube, &rcvd, &long] {
            push_summary_line(h, REPORT_WRAP_WIDTH, &mut out);
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "1000 GTUBE                  BODY: Generic Test for Unsolicited Bulk Email\n \
             1.3 RCVD_ILLEGAL_IP        Received: contains illegal IP address\n \
             0.5 LONG_DESC_RULE         BODY: This is a rather long description that goes on\n                            \
             and on, well past the width that the report\n                            wraps at, to show wrapping\n"
        );
        let mut out = Vec::new();
        for h in [&gtube, &long] {
            push_report_line(h, REPORT_WRAP_WIDTH, &mut out);
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "* 1000 GTUBE BODY: Generic Test for Unsolicited Bulk Email\n\
             *  0.5 LONG_DESC_RULE BODY: This is a rather long description that goes on\n\
             *      and on, well past the width that the report wraps at, to show\n*      wrapping\n"
        );
    }

    #[test]
    fn names_are_sorted_whatever_the_view_order() {
        let v = View {
            score: 0,
            required: 5000,
            hits: vec![hit("ZED", 1, "", RuleType::Body), hit("ALPHA", 1, "", RuleType::Body), hit("MID", 1, "", RuleType::Body)],
        };
        let mut s = String::new();
        write_rule_names(&v, ",", &mut s).unwrap();
        assert_eq!(s, "ALPHA,MID,ZED");
        let empty = View { score: 0, required: 5000, hits: vec![] };
        let mut s = String::new();
        write_rule_names(&empty, ",", &mut s).unwrap();
        assert_eq!(s, "");
    }

    #[test]
    fn analysis_block() {
        let v = View { score: 1300, required: 5000, hits: vec![hit("RCVD_ILLEGAL_IP", 1300, "Received: contains illegal IP address", RuleType::Header)] };
        let mut s = String::new();
        write_analysis(&v, &mut s).unwrap();
        assert_eq!(
            s,
            "Content analysis details:   (1.3 points, 5.0 required)\n\n pts rule name              description\n\
             ---- ---------------------- --------------------------------------------------\n \
             1.3 RCVD_ILLEGAL_IP        Received: contains illegal IP address\n"
        );
        assert_eq!(v.hits().count(), 1);
        let _ = s.to_string();
    }
}
