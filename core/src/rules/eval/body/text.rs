//! Tests on the body text: SpamAssassin's BodyEval (`multipart_alternative_difference`,
//! `check_blank_line_ratio`, `tvd_vertical_words`, `check_stock_info`,
//! `check_body_length`) and MIMEEval's `check_for_uppercase`.

use alloc::vec::Vec;

use super::mime::MimeFacts;
use super::{bad, number, BodyScratch};
use crate::msg::Message;
use crate::rules::eval::{Args, EvalError};

/// Distinct words counted per multipart/alternative; more are not compared.
const WORD_SLOTS: usize = 2048;

/// One text test with its arguments.
#[derive(Debug, Clone)]
enum Test {
    /// `check_for_uppercase(min, max)`: `min < percent of capitals <= max`.
    Uppercase { min: f64, max: f64 },
    /// `check_body_length(max)`: the body after the headers is at most `max` bytes.
    BodyLength(f64),
    /// `check_blank_line_ratio(min, max, minlines)` on the decoded text lines.
    BlankLineRatio { min: f64, max: f64, min_lines: f64 },
    /// `tvd_vertical_words(min, max)`: `min <= largest space percentage < max`.
    VerticalWords { min: f64, max: f64 },
    /// `check_stock_info(min)`: stock-tip labels in the first text/plain part.
    StockInfo(f64),
    /// `multipart_alternative_difference(min, max)`: percent of HTML words missing
    /// from the text alternative; `max` `None` for `undef`.
    AltDifference { min: f64, max: Option<f64> },
    /// `multipart_alternative_difference_count(ratio, minhtml)`.
    AltDifferenceCount { ratio: f64, min_html: f64 },
}

/// One such test with its arguments, ready to run.
#[derive(Debug, Clone)]
pub struct TextEval(Test);

impl TextEval {
    /// The test for `function(args)`; `None` when `function` is not one of these.
    pub fn parse(function: &str, args: &Args) -> Option<Result<TextEval, EvalError>> {
        let n = |i: usize| number(function, args, i);
        let t = || -> Result<Test, EvalError> {
            Ok(match function {
                "check_for_uppercase" => Test::Uppercase { min: n(0)?, max: n(1)? },
                "check_body_length" => Test::BodyLength(n(0)?),
                "check_blank_line_ratio" => {
                    let min_lines = match args.get(2) {
                        Some(_) => n(2)?,
                        None => 1.0,
                    };
                    Test::BlankLineRatio { min: n(0)?, max: n(1)?, min_lines: if min_lines < 1.0 { 1.0 } else { min_lines } }
                }
                "tvd_vertical_words" => {
                    let max = n(1)?;
                    Test::VerticalWords { min: n(0)?, max: if max >= 100.0 { 101.0 } else { max } }
                }
                "check_stock_info" => Test::StockInfo(n(0)?),
                "multipart_alternative_difference" => {
                    let max = match args.get(1).map(|s| s.as_str()) {
                        Some("undef") | None => None,
                        Some(_) => Some(n(1)?),
                    };
                    Test::AltDifference { min: n(0)?, max }
                }
                "multipart_alternative_difference_count" => Test::AltDifferenceCount { ratio: n(0)?, min_html: n(1)? },
                _ => return Err(bad(function, "")),
            })
        };
        match function {
            "check_for_uppercase" | "check_body_length" | "check_blank_line_ratio" | "tvd_vertical_words"
            | "check_stock_info" | "multipart_alternative_difference" | "multipart_alternative_difference_count" => Some(t().map(TextEval)),
            _ => None,
        }
    }

    /// Whether the test hits on `m`.
    pub fn run(&self, m: &Message<'_>, scratch: &mut BodyScratch) -> bool {
        match &self.0 {
            Test::Uppercase { min, max } => {
                let caps = match scratch.text.uppercase {
                    Some(v) => v,
                    None => {
                        let facts = *scratch.mime.get_or_insert_with(|| MimeFacts::of(m));
                        let v = if facts.caps_charset { 0.0 } else { uppercase_percent(m.body(), m.body_ends_with_newline()) };
                        scratch.text.uppercase = Some(v);
                        v
                    }
                };
                caps > *min && caps <= *max
            }
            Test::BodyLength(max) => (m.body_len() as f64) <= *max,
            Test::BlankLineRatio { min, max, min_lines } => {
                let (blank, lines) = *scratch.text.blank_lines.get_or_insert_with(|| {
                    m.parts().map(|p| blank_lines(p.decoded())).fold((0, 0), |(b, n), (pb, pn)| (b + pb, n + pn))
                });
                let ratio = if (lines as f64) < *min_lines { -1.0 } else { 100.0 * blank as f64 / lines as f64 };
                ratio <= *max && (*min == 0.0 || ratio > *min)
            }
            Test::VerticalWords { min, max } => {
                let v = *scratch.text.vertical.get_or_insert_with(|| vertical_words(m.body(), m.body_ends_with_newline())) as f64;
                v >= *min && v < *max
            }
            Test::StockInfo(min) => {
                let n = *scratch.text.stock.get_or_insert_with(|| stock_info(m));
                *min == 0.0 || f64::from(n) >= *min
            }
            Test::AltDifference { min, max } => {
                let d = alt_difference(m, scratch);
                (*min == 0.0 || d.percent > *min) && max.is_none_or(|max| d.percent <= max)
            }
            Test::AltDifferenceCount { ratio, min_html } => {
                let d = alt_difference(m, scratch);
                f64::from(d.html) > *min_html && f64::from(d.text) / f64::from(d.html) > *ratio
            }
        }
    }
}

/// Per-message results of the text tests, computed on first use.
#[derive(Debug, Default)]
pub struct TextCache {
    uppercase: Option<f64>,
    blank_lines: Option<(u64, u64)>,
    vertical: Option<i64>,
    stock: Option<u32>,
    alt: Option<AltDifference>,
    /// Word table of `multipart_alternative_difference`, reserved on first use.
    words: Vec<WordSlot>,
}

impl TextCache {
    /// Forgets the results, keeping the word table's memory.
    pub(crate) fn clear(&mut self) {
        let words = core::mem::take(&mut self.words);
        *self = TextCache { words, ..TextCache::default() };
    }
}

/// Lines of text with their length as SpamAssassin's array holds them: each with
/// its line end, the last one only with `final_newline`.
fn body_lines(body: &[u8], final_newline: bool) -> impl Iterator<Item = (&[u8], usize)> {
    let mut rest = Some(body);
    core::iter::from_fn(move || {
        let r = rest?;
        if r.is_empty() {
            rest = None;
            return None;
        }
        match memchr::memchr(b'\n', r) {
            Some(k) => {
                rest = r.get(k + 1..);
                Some((r.get(..k).unwrap_or(&[]), k + 1))
            }
            None => {
                rest = None;
                Some((r, r.len() + usize::from(final_newline)))
            }
        }
    })
}

/// Perl's `\s` on bytes.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// `check_for_uppercase`'s percentage of capitals among letters and digits, over
/// lines with an inner space, when they hold 200 bytes or more.
fn uppercase_percent(body: &[u8], final_newline: bool) -> f64 {
    let mut len = 0usize;
    let mut lower = 0u64;
    let mut upper = 0u64;
    // Most bodies hold no escape byte: then no line needs searching for one.
    let escapes = memchr::memchr(0x1b, body).is_some();
    for (line, with_end) in body_lines(body, final_newline) {
        if !has_inner_space(line) || is_base64_pair(line) {
            continue;
        }
        // Shift-JIS escapes (`\x1b$B … \x1b(B`, greedy) are removed first.
        let shift_jis = if escapes { (memchr::memmem::find(line, b"\x1b$B"), memchr::memmem::rfind(line, b"\x1b(B")) } else { (None, None) };
        let (kept_a, kept_b) = match shift_jis {
            (Some(a), Some(b)) if b >= a + 3 => (line.get(..a).unwrap_or(&[]), line.get(b + 3..).unwrap_or(&[])),
            _ => (line, &[][..]),
        };
        len += with_end - (line.len() - kept_a.len() - kept_b.len());
        for part in [kept_a, kept_b] {
            let (l, u) = count_cases(part);
            lower += l;
            upper += u;
        }
    }
    if len < 200 || upper + lower == 0 {
        return 0.0;
    }
    upper as f64 / (upper + lower) as f64 * 100.0
}

/// ASCII lower-case letters and digits, and upper-case letters, in `text`; branch-free,
/// so that the compiler counts many bytes at a time.
fn count_cases(text: &[u8]) -> (u64, u64) {
    let (mut lower, mut upper) = (0u64, 0u64);
    for &c in text {
        lower += u64::from((c.wrapping_sub(b'a') < 26) | (c.wrapping_sub(b'0') < 10));
        upper += u64::from(c.wrapping_sub(b'A') < 26);
    }
    (lower, upper)
}

/// `/\S\s+\S/`: white space between two other characters.
fn has_inner_space(line: &[u8]) -> bool {
    let mut word = false;
    let mut gap = false;
    for &b in line {
        if is_space(b) {
            gap = word;
        } else if gap {
            return true;
        } else {
            word = true;
        }
    }
    false
}

/// `^(?:[A-Za-z0-9+/=]{60,76} ){2}`: leftover base64 in a forwarded message.
fn is_base64_pair(line: &[u8]) -> bool {
    let mut at = 0;
    for _ in 0..2 {
        let n = line.get(at..).unwrap_or(&[]).iter().take_while(|&&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=').count();
        if !(60..=76).contains(&n) || line.get(at + n) != Some(&b' ') {
            return false;
        }
        at += n + 1;
    }
    true
}

/// Blank and total lines of a part's decoded text, cut into paragraphs as
/// SpamAssassin's decoded body array holds it (`check_blank_line_ratio`).
fn blank_lines(text: &[u8]) -> (u64, u64) {
    let mut blank = 0;
    let mut lines = 0;
    for chunk in paragraphs(text) {
        for (line, _) in body_lines(chunk, false) {
            lines += 1;
            if line.iter().all(|&b| is_space(b)) {
                blank += 1;
            }
        }
    }
    (blank, lines)
}

/// `tvd_vertical_words`: the largest percentage of spaces to other bytes over lines
/// longer than 5 bytes; -1 without such lines.
fn vertical_words(body: &[u8], final_newline: bool) -> i64 {
    let mut best = -1i64;
    for (line, with_end) in body_lines(body, final_newline) {
        if with_end <= 5 {
            continue;
        }
        let spaces = line.iter().filter(|&&b| b == b' ').count();
        let others = with_end - spaces;
        let pct = if spaces > others || others == 0 { 100 } else { (100 * spaces / others) as i64 };
        best = best.max(pct);
    }
    best
}

/// `check_stock_info`: distinct stock-tip labels (`Symbol:`, `Target price:` …) in
/// the first text/plain part.
fn stock_info(m: &Message<'_>) -> u32 {
    let Some(part) = m.parts().find(|p| p.content_type() == b"text/plain") else { return 0 };
    let Some(text) = part.rendered() else { return 0 };
    let mut seen = [[0u8; 32]; 16];
    let mut count = 0usize;
    for chunk in paragraphs(text) {
        let mut pos = 0;
        while let Some((label, end)) = next_label(chunk, pos) {
            pos = end;
            let mut key = [0u8; 32];
            let mut n = 0;
            for c in label.iter().map(u8::to_ascii_lowercase).filter(u8::is_ascii_lowercase) {
                if let Some(slot) = key.get_mut(n) {
                    *slot = c;
                    n += 1;
                }
            }
            let Some(hit) = stock_word(key.get(..n).unwrap_or(&[])) else { continue };
            let mut word = [0u8; 32];
            for (slot, &b) in word.iter_mut().skip(1).zip(hit) {
                *slot = b;
            }
            if let Some(first) = word.first_mut() {
                *first = hit.len() as u8;
            }
            if !seen.get(..count).unwrap_or(&[]).contains(&word) {
                if let Some(slot) = seen.get_mut(count) {
                    *slot = word;
                    count += 1;
                }
            }
        }
    }
    count as u32
}

/// SpamAssassin's `split_into_array_of_short_paragraphs`: pieces of 2-4 KiB cut
/// after a line end, a `>` or a space where possible.
fn paragraphs(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    const MAX: usize = 2048;
    let mut ofs = 0;
    let mut done = false;
    core::iter::from_fn(move || {
        if done || ofs >= text.len() {
            return None;
        }
        if text.len() <= MAX || text.len() - ofs <= 2 * MAX {
            done = true;
            return text.get(ofs..);
        }
        let find = |c: u8| text.get(ofs + MAX..).and_then(|r| memchr::memchr(c, r)).map(|k| ofs + MAX + k);
        let fits = |j: usize| j - ofs < 2 * MAX;
        let j = [b'\n', b'>', b' '].iter().find_map(|&c| find(c).filter(|&j| fits(j))).unwrap_or(ofs + MAX);
        let piece = text.get(ofs..=j);
        ofs = j + 1;
        piece
    })
}

/// The next match of `^\s*([^:\s][^:\n]{2,29})\s*:\s*\S` (with `/m`) at or after
/// `from`: the label's span without trailing white space, and where the match ends.
fn next_label(text: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let mut start = from;
    loop {
        // `^`: a line start at or after `start`.
        if start > 0 && text.get(start - 1) != Some(&b'\n') {
            start = start + memchr::memchr(b'\n', text.get(start..)?)? + 1;
        }
        if start >= text.len() {
            return None;
        }
        if let Some(found) = label_at(text, start) {
            return Some(found);
        }
        start += 1;
    }
}

/// The label match starting at line start `at`, if any.
fn label_at(text: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let skip_space = |mut i: usize| {
        while text.get(i).copied().is_some_and(is_space) {
            i += 1;
        }
        i
    };
    let first = skip_space(at);
    if matches!(text.get(first), None | Some(b':')) {
        return None;
    }
    let run = text.get(first..)?.iter().take_while(|&&b| b != b':' && b != b'\n').count();
    let label = text.get(first..first + run)?;
    let trimmed = label.len() - label.iter().rev().take_while(|&&b| is_space(b)).count();
    if run < 3 || trimmed > 30 {
        return None;
    }
    let colon = skip_space(first + run);
    if text.get(colon) != Some(&b':') {
        return None;
    }
    let value = skip_space(colon + 1);
    text.get(value)?;
    Some((label.get(..trimmed)?, value + 1))
}

/// The stock-tip word `str` ends with, as SpamAssassin's pattern matches it (the
/// first alternative anchored at the start, the others only at the end).
fn stock_word(s: &[u8]) -> Option<&[u8]> {
    (0..s.len()).find_map(|i| {
        let tail = s.get(i..)?;
        is_stock_word(tail, i == 0).then_some(tail)
    })
}

fn is_stock_word(w: &[u8], at_start: bool) -> bool {
    if at_start && (w == b"tradedate" || w == b"tradingdate") {
        return true;
    }
    const WORDS: &[&[u8]] = &[
        b"company",
        b"companyname",
        b"target",
        b"ticker",
        b"openingp",
        b"openingprice",
        b"currentp",
        b"currentprice",
        b"projected",
        b"position",
        b"expectations",
        b"weekhigh",
        b"weekshigh",
        b"marketperformance",
        b"sector",
        b"recommendation",
        b"rating",
    ];
    if WORDS.contains(&w) {
        return true;
    }
    for period in [&b"year"[..], b"week", b"month", b"day", b"price"] {
        if let Some(rest) = w.strip_prefix(period) {
            if rest == b"target" || rest == b"estimate" || rest == b"estimates" {
                return true;
            }
        }
    }
    // s\w?(?:t\w?o\w?c\w?k|y\w?m(?:\w?b\w?o\w?l)?)
    let Some(rest) = w.strip_prefix(b"s") else { return false };
    spaced(rest, b"tock") || spaced(rest, b"ym") || spaced(rest, b"ymbol")
}

/// Whether `w` is `letters` with at most one extra letter before each of them
/// (`\w?l\w?e…`), the first letter included.
fn spaced(w: &[u8], letters: &[u8]) -> bool {
    let Some((&first, rest)) = letters.split_first() else { return w.is_empty() };
    (w.first() == Some(&first) && spaced(w.get(1..).unwrap_or(&[]), rest))
        || (w.get(1) == Some(&first) && spaced(w.get(2..).unwrap_or(&[]), rest))
}

/// `_multipart_alternative_difference`'s results.
#[derive(Debug, Clone, Copy, Default)]
struct AltDifference {
    percent: f64,
    html: u32,
    text: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct WordSlot {
    hash: u64,
    html: u32,
    text: u32,
}

fn alt_difference(m: &Message<'_>, scratch: &mut BodyScratch) -> AltDifference {
    if let Some(d) = scratch.text.alt {
        return d;
    }
    let d = compute_alt_difference(m, &mut scratch.text.words);
    scratch.text.alt = Some(d);
    d
}

/// For each multipart/alternative: how many distinct HTML words occur more often in
/// the HTML than in the text alternatives, in percent of distinct HTML words; the
/// largest over the message, with the word counts of the last one.
fn compute_alt_difference(m: &Message<'_>, words: &mut Vec<WordSlot>) -> AltDifference {
    let mut out = AltDifference::default();
    // Exchange meeting requests (an alternative of text/html and text/calendar) are skipped.
    let root_alt = m.parts().next().is_some_and(|r| r.content_type() == b"multipart/alternative");
    if root_alt {
        let mut kids = m.parts().filter(|p| p.depth() == 1);
        let (first, second, third) = (kids.next(), kids.next(), kids.next());
        let single = |p: Option<crate::msg::Part<'_>>, t: &[u8]| p.is_some_and(|p| p.content_type() == t && p.is_leaf());
        if third.is_none() && single(first, b"text/html") && single(second, b"text/calendar") {
            return out;
        }
    }
    if words.capacity() < WORD_SLOTS {
        words.reserve_exact(WORD_SLOTS - words.len());
    }
    for (i, alt) in m.parts().enumerate() {
        if alt.content_type() != b"multipart/alternative" || alt.is_leaf() {
            continue;
        }
        words.clear();
        words.resize(WORD_SLOTS, WordSlot::default());
        let mut html_words = 0u32;
        let mut text_words = 0u32;
        // SpamAssassin's "\n" pseudo-word: an HTML alternative with images but no words.
        let mut image_mark = false;
        for p in m.parts().skip(i + 1).take_while(|p| p.depth() > alt.depth()) {
            let ct = p.content_type();
            if !ct.starts_with(b"text") || ct.get(4).is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_') {
                continue;
            }
            let Some(text) = p.rendered() else { continue };
            let html = p.is_html() && p.html().is_some();
            for w in tokens(text) {
                if let Some(slot) = word_slot(words, w) {
                    let count = if html { &mut slot.html } else { &mut slot.text };
                    if *count == 0 {
                        if html {
                            html_words += 1;
                        } else {
                            text_words += 1;
                        }
                    }
                    *count = count.saturating_add(1);
                }
            }
            if html && html_words == 0 && !image_mark && p.html().is_some_and(|h| h.inside(crate::msg::tag_hash(b"img")).is_some()) {
                image_mark = true;
            }
        }
        let orig = html_words + u32::from(image_mark);
        if orig == 0 {
            continue;
        }
        out.html = orig;
        out.text = text_words;
        let left = words.iter().filter(|s| s.html > s.text).count() as u32 + u32::from(image_mark);
        let diff = f64::from(left) / f64::from(orig) * 100.0;
        if diff > out.percent {
            out.percent = diff;
        }
    }
    out
}

/// The slot of word `w`, inserting it; `None` when the table is full.
fn word_slot<'t>(table: &'t mut [WordSlot], w: &[u8]) -> Option<&'t mut WordSlot> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in w {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let h = h.max(1);
    let n = table.len();
    if n == 0 {
        return None;
    }
    let start = (h % n as u64) as usize;
    let i = (0..n).map(|k| (start + k) % n).find(|&i| table.get(i).is_some_and(|s| s.hash == h || s.hash == 0))?;
    let slot = table.get_mut(i)?;
    slot.hash = h;
    Some(slot)
}

/// `grep(/\w/, split(/\s+/, $text))` on UTF-8 text.
fn tokens(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|&b| is_space(b)).flat_map(split_unicode_space).filter(|w| has_word_char(w))
}

/// Splits at the Unicode spaces of Perl's `\s` above ASCII.
fn split_unicode_space(w: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(w);
    core::iter::from_fn(move || {
        let r = rest?;
        let mut i = 0;
        while i < r.len() {
            let n = unicode_space_len(r.get(i..).unwrap_or(&[]));
            if n > 0 {
                rest = r.get(i + n..);
                return Some(r.get(..i).unwrap_or(&[]));
            }
            i += 1;
        }
        rest = None;
        Some(r)
    })
}

fn unicode_space_len(s: &[u8]) -> usize {
    match s {
        [0xc2, 0x85 | 0xa0, ..] => 2,
        [0xe1, 0x9a, 0x80, ..] => 3,
        [0xe2, 0x80, 0x80..=0x8a | 0xa8 | 0xa9 | 0xaf, ..] => 3,
        [0xe2, 0x81, 0x9f, ..] => 3,
        [0xe3, 0x80, 0x80, ..] => 3,
        _ => 0,
    }
}

/// Whether `w` holds a word character (`\w`): ASCII letters, digits, `_`, or a
/// non-ASCII letter or digit.
fn has_word_char(w: &[u8]) -> bool {
    if w.iter().any(|&b| b.is_ascii_alphanumeric() || b == b'_') {
        return true;
    }
    if w.is_ascii() {
        return false;
    }
    match core::str::from_utf8(w) {
        Ok(s) => s.chars().any(char::is_alphanumeric),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uppercase_table() {
        let shout = "THIS IS ALL IN CAPITALS AND IT GOES ON FOR A WHILE SO THAT IT REACHES THE MINIMUM LENGTH\n";
        let calm = "this is all in small letters and it goes on for a while so that it reaches the minimum\n";
        let body = alloc::format!("subject\n{shout}{shout}{shout}");
        assert_eq!(uppercase_percent(body.as_bytes(), false), 100.0);
        let mixed = alloc::format!("subject\n{shout}{calm}{calm}");
        let p = uppercase_percent(mixed.as_bytes(), false);
        assert!(p > 25.0 && p < 50.0, "{p}");
        assert_eq!(uppercase_percent(b"SHORT TEXT", false), 0.0);
        assert!(is_base64_pair(
            b"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2 QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2 x"
        ));
    }

    /// `uppercase_percent` as written first: escapes searched in every line, letters
    /// counted one branch at a time.
    fn uppercase_percent_by_line(body: &[u8], final_newline: bool) -> f64 {
        let (mut len, mut lower, mut upper) = (0usize, 0u64, 0u64);
        for (line, with_end) in body_lines(body, final_newline) {
            if !has_inner_space(line) || is_base64_pair(line) {
                continue;
            }
            let (kept_a, kept_b) = match (memchr::memmem::find(line, b"\x1b$B"), memchr::memmem::rfind(line, b"\x1b(B")) {
                (Some(a), Some(b)) if b >= a + 3 => (&line[..a], &line[b + 3..]),
                _ => (line, &[][..]),
            };
            len += with_end - (line.len() - kept_a.len() - kept_b.len());
            for &c in kept_a.iter().chain(kept_b) {
                if c.is_ascii_lowercase() || c.is_ascii_digit() {
                    lower += 1;
                } else if c.is_ascii_uppercase() {
                    upper += 1;
                }
            }
        }
        if len < 200 || upper + lower == 0 {
            return 0.0;
        }
        upper as f64 / (upper + lower) as f64 * 100.0
    }

    #[test]
    fn uppercase_percent_agrees_with_line_by_line_table() {
        let all_bytes: Vec<u8> = (0..=255u8).chain(b" x Y".iter().copied()).collect();
        let line = "Mixed Case 42 words, AND SOME SHOUTING, then calm again for a while.\n";
        let cases: Vec<Vec<u8>> = alloc::vec![
            all_bytes,
            line.repeat(4).into_bytes(),
            // Shift-JIS escapes: what lies between them is not counted, in one line or
            // greedily across several on a line.
            alloc::format!("s\n{}ab CD \x1b$BXYZW\x1b(B ef GH\n", line.repeat(3)).into_bytes(),
            alloc::format!("s\n{}ab \x1b$BQQ\x1b(B cd \x1b$BRR\x1b(B EF\n", line.repeat(3)).into_bytes(),
            // An escape that opens and never closes, and a close before its open.
            alloc::format!("s\n{}ab \x1b$BQQ cd\n{}EF \x1b(B gh \x1b$B\n", line.repeat(2), line).into_bytes(),
            [&b"s\r\n"[..], line.repeat(3).as_bytes(), b"\xc3\x89T\xc3\xa9 \xff\x1b AB\r\n"].concat(),
        ];
        for body in &cases {
            for final_newline in [false, true] {
                let (got, want) = (uppercase_percent(body, final_newline), uppercase_percent_by_line(body, final_newline));
                assert_eq!(got.to_bits(), want.to_bits(), "{}", alloc::string::String::from_utf8_lossy(body));
            }
        }
        // Every byte is classed as the ASCII predicates class it.
        for c in 0..=255u8 {
            let want = (u64::from(c.is_ascii_lowercase() || c.is_ascii_digit()), u64::from(c.is_ascii_uppercase()));
            assert_eq!(count_cases(&[c]), want, "{c}");
        }
    }

    #[test]
    fn vertical_and_blank_lines() {
        assert_eq!(vertical_words(b"subj\nv e r t i c a l", false), 87);
        assert_eq!(vertical_words(b"subj\nv  e  r  t", false), 100);
        assert_eq!(vertical_words(b"s\nab cd ef", false), 33);
        assert_eq!(vertical_words(b"s\nab", false), -1);
        assert_eq!(blank_lines(b"a\n\n \nb\n"), (2, 4));
    }

    #[test]
    fn stock_words_table() {
        let cases: &[(&[u8], Option<&[u8]>)] = &[
            (b"symbol", Some(b"symbol")),
            (b"sym", Some(b"sym")),
            (b"stxoxcxk", Some(b"stxoxcxk")),
            (b"companyname", Some(b"companyname")),
            (b"thecompany", Some(b"company")),
            (b"xtradedate", None),
            (b"tradingdate", Some(b"tradingdate")),
            (b"yeartarget", Some(b"yeartarget")),
            (b"weekshigh", Some(b"weekshigh")),
            (b"hello", None),
        ];
        for (w, want) in cases {
            assert_eq!(stock_word(w), *want, "{:?}", core::str::from_utf8(w));
        }
        let labels = |t: &'static [u8]| {
            let mut out = Vec::new();
            let mut pos = 0;
            while let Some((l, end)) = next_label(t, pos) {
                out.push(l);
                pos = end;
            }
            out
        };
        assert_eq!(labels(b"  Symbol: XYZ\nTarget Price :  $5"), [&b"Symbol"[..], b"Target Price"]);
        assert_eq!(labels(b"ab: c\nSymbol:\n"), Vec::<&[u8]>::new());
        assert_eq!(labels(b"a very long label that goes on and on: x"), Vec::<&[u8]>::new());
        // The value may sit on the next line; the line it sits on is then not searched.
        assert_eq!(labels(b"if x is not None:\n    yield 'position: x'\nSector: y"), [&b"if x is not None"[..], b"Sector"]);
    }

    #[test]
    fn tokens_keep_words_only() {
        let t: Vec<&[u8]> = tokens("a - b\u{a0}c ** 9".as_bytes()).collect();
        assert_eq!(t, [&b"a"[..], b"b", b"c", b"9"]);
    }
}
