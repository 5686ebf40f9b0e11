//! Dates in headers as SpamAssassin reads them (`Util::parse_rfc822_date`), and the
//! tests built on them: `check_for_shifted_date` (the `DATE_IN_PAST_*` and
//! `DATE_IN_FUTURE_*` rules) and `check_outlook_message_id`.

use super::re::is_space;

/// Month names, lowercase, January first.
const MONTHS: [&[u8; 3]; 12] =
    [b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov", b"dec"];

/// SpamAssassin's table of time-zone names: (name, offset in minutes east of UTC).
const ZONES: [(&[u8], i32); 54] = [
    (b"UT", 0),
    (b"UTC", 0),
    (b"NDT", -150),
    (b"AST", -240),
    (b"ADT", -180),
    (b"NST", -210),
    (b"EST", -300),
    (b"EDT", -240),
    (b"CST", -360),
    (b"CDT", -300),
    (b"MST", -420),
    (b"MDT", -360),
    (b"PST", -480),
    (b"PDT", -420),
    (b"HST", -600),
    (b"AKST", -540),
    (b"AKDT", -480),
    (b"HADT", -540),
    (b"HAST", -600),
    (b"GMT", 0),
    (b"BST", 60),
    (b"IST", 60),
    (b"WET", 0),
    (b"WEST", 60),
    (b"CET", 60),
    (b"CEST", 120),
    (b"EET", 120),
    (b"EEST", 180),
    (b"MSK", 180),
    (b"MSD", 240),
    (b"MET", 60),
    (b"MEZ", 60),
    (b"MEST", 120),
    (b"MESZ", 120),
    (b"BRST", -120),
    (b"BRT", -180),
    (b"AEST", 600),
    (b"AEDT", 660),
    (b"ACST", 570),
    (b"ACDT", 630),
    (b"AWST", 480),
    (b"NZST", 720),
    (b"NZDT", 780),
    (b"JST", 540),
    (b"KST", 540),
    (b"HKT", 480),
    (b"SGT", 480),
    (b"PHT", 480),
    (b"IDT", 180),
    // Names SpamAssassin's `\b[A-Z]{2,4}(?:-DST)?\b` can take that are not in its
    // table fall back to -0000; listed here only to keep the array size honest.
    (b"", 0),
    (b"", 0),
    (b"", 0),
    (b"", 0),
    (b"", 0),
];

/// Bytes of a date string looked at (SpamAssassin has no limit; real dates are short).
const MAX_DATE: usize = 2048;

/// A scratch copy of a date string as `parse_rfc822_date` rewrites it:
/// `" $date "`, commas (and following spaces) as one space, white space squeezed.
struct Squeezed {
    buf: [u8; MAX_DATE],
    len: usize,
}

impl Squeezed {
    fn new(date: &[u8]) -> Squeezed {
        let mut s = Squeezed { buf: [0; MAX_DATE], len: 0 };
        let push = |s: &mut Squeezed, b: u8| {
            if s.len < MAX_DATE {
                if let Some(slot) = s.buf.get_mut(s.len) {
                    *slot = b;
                }
                s.len += 1;
            }
        };
        push(&mut s, b' ');
        let mut i = 0;
        let date = date.get(..MAX_DATE - 2).unwrap_or(date);
        while let Some(&b) = date.get(i) {
            i += 1;
            if b == b',' {
                // s/, */ /g
                while date.get(i) == Some(&b' ') {
                    i += 1;
                }
                push(&mut s, b' ');
            } else {
                push(&mut s, b);
            }
        }
        push(&mut s, b' ');
        // s/\s+/ /g
        let mut out = 0;
        let mut space = false;
        for k in 0..s.len {
            let b = s.buf.get(k).copied().unwrap_or(b' ');
            if is_space(b) {
                if !space {
                    if let Some(slot) = s.buf.get_mut(out) {
                        *slot = b' ';
                    }
                    out += 1;
                }
                space = true;
            } else {
                if let Some(slot) = s.buf.get_mut(out) {
                    *slot = b;
                }
                out += 1;
                space = false;
            }
        }
        s.len = out;
        s
    }

    fn text(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }

    /// Replaces `[a, b)` by one space (SpamAssassin's `s/ ... / /`).
    fn cut(&mut self, a: usize, b: usize) {
        if a >= b || b > self.len {
            return;
        }
        if let Some(slot) = self.buf.get_mut(a) {
            *slot = b' ';
        }
        self.buf.copy_within(b..self.len, a + 1);
        self.len -= b - a - 1;
    }
}

fn digits(s: &[u8], i: usize) -> usize {
    s.get(i..).map_or(0, |r| r.iter().take_while(|b| b.is_ascii_digit()).count())
}

fn number(s: &[u8]) -> i64 {
    s.iter().take(18).fold(0i64, |acc, &d| acc * 10 + i64::from(d - b'0'))
}

fn month_at(s: &[u8], i: usize) -> Option<u32> {
    let word = s.get(i..i + 3)?;
    MONTHS.iter().position(|m| m.eq_ignore_ascii_case(word)).map(|p| p as u32 + 1)
}

/// Day, month, the year digits' range and the range of text the date form covers.
type DateParts = (i64, u32, (usize, usize), (usize, usize));

/// SpamAssassin's three date forms, tried in its order over the whole string:
/// ` DD Mon YYYY `, ` Mon +DD hh:mm:ss YYYY `, ` DD Mon YY(Y) `. Returns day, month,
/// the year digits' range and the range to cut.
fn find_date(s: &[u8]) -> Option<DateParts> {
    for form in 0..3 {
        for i in (0..s.len()).filter(|&i| s.get(i) == Some(&b' ')) {
            let hit = if form == 1 { month_first(s, i) } else { day_first(s, i, form == 0) };
            if hit.is_some() {
                return hit;
            }
        }
    }
    None
}

/// ` (\d+) (Mon) (\d{4}) ` (`four`) or ` (\d+) (Mon) (\d{2,3}) ` at `i`.
fn day_first(s: &[u8], i: usize, four: bool) -> Option<DateParts> {
    let d = digits(s, i + 1);
    if d == 0 || s.get(i + 1 + d) != Some(&b' ') {
        return None;
    }
    let day = number(s.get(i + 1..i + 1 + d)?);
    let month = month_at(s, i + 2 + d)?;
    if s.get(i + 5 + d) != Some(&b' ') {
        return None;
    }
    let ys = i + 6 + d;
    let y = digits(s, ys);
    let ok = if four { y == 4 } else { (2..=3).contains(&y) };
    if !ok || s.get(ys + y) != Some(&b' ') {
        return None;
    }
    Some((day, month, (ys, ys + y), (i, ys + y + 1)))
}

/// ` (Mon) +(\d+) \d+:\d+:\d+ (\d{4}) ` at `i`.
fn month_first(s: &[u8], i: usize) -> Option<DateParts> {
    let month = month_at(s, i + 1)?;
    let mut j = i + 4;
    let spaces = s.get(j..)?.iter().take_while(|&&b| b == b' ').count();
    if spaces == 0 {
        return None;
    }
    j += spaces;
    let d = digits(s, j);
    if d == 0 || s.get(j + d) != Some(&b' ') {
        return None;
    }
    let day = number(s.get(j..j + d)?);
    j += d + 1;
    for sep in [b':', b':', b' '] {
        let n = digits(s, j);
        if n == 0 || s.get(j + n) != Some(&sep) {
            return None;
        }
        j += n + 1;
    }
    if digits(s, j) != 4 || s.get(j + 4) != Some(&b' ') {
        return None;
    }
    Some((day, month, (j, j + 4), (i, j + 5)))
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: u32, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// SpamAssassin's `parse_rfc822_date`: seconds since the epoch, or `None`.
pub fn parse_rfc822_date(date: &[u8]) -> Option<i64> {
    let mut sq = Squeezed::new(date);
    let (day, month, (ya, yb), (ca, cb)) = find_date(sq.text())?;
    let ytext = sq.text().get(ya..yb)?;
    let mut year = number(ytext);
    if ytext.len() == 2 && year < 50 {
        year += 2000;
    } else if ytext.len() != 4 {
        year += 1900;
    }
    sq.cut(ca, cb);
    // hh:mm(:ss)?
    let (mut hh, mut mm, mut ss) = (0i64, 0i64, 0i64);
    {
        let s = sq.text();
        let mut hit = None;
        let mut i = 0;
        while i < s.len() {
            if s.get(i) == Some(&b' ') {
                let h = digits(s, i + 1);
                if (1..=2).contains(&h) && s.get(i + 1 + h) == Some(&b':') && digits(s, i + 2 + h) >= 2 {
                    let m_at = i + 2 + h;
                    let mut end = m_at + 2;
                    let mut sec = 0;
                    if s.get(end) == Some(&b':') && digits(s, end + 1) >= 2 && s.get(end + 3) == Some(&b' ') {
                        sec = number(s.get(end + 1..end + 3)?);
                        end += 3;
                    }
                    if s.get(end) == Some(&b' ') {
                        hit = Some((number(s.get(i + 1..i + 1 + h)?), number(s.get(m_at..m_at + 2)?), sec, i, end + 1));
                    }
                }
            }
            if hit.is_some() {
                break;
            }
            i += 1;
        }
        if let Some((h, m, sec, a, b)) = hit {
            hh = h;
            mm = m;
            ss = sec;
            sq.cut(a, b);
        }
    }
    // Time zone: " [-+]dddd " first, else the first \b[A-Z]{2,4}(-DST)?\b if known.
    let mut tz_minutes: i32 = 0;
    {
        let s = sq.text();
        let numeric = (0..s.len()).find(|&i| {
            s.get(i) == Some(&b' ')
                && matches!(s.get(i + 1), Some(b'-' | b'+'))
                && digits(s, i + 2) >= 4
                && s.get(i + 6) == Some(&b' ')
        });
        if let Some(i) = numeric {
            let sign = if s.get(i + 1) == Some(&b'-') { -1 } else { 1 };
            let v = s.get(i + 2..i + 6).map(number).unwrap_or(0) as i32;
            tz_minutes = sign * ((v / 100) * 60 + v % 100);
        } else if let Some(name) = zone_name(s) {
            if let Some(&(_, off)) = ZONES.iter().find(|(n, _)| !n.is_empty() && *n == name) {
                tz_minutes = off;
            }
        }
    }
    ss = ss.min(59);
    mm = mm.min(59);
    hh = hh.min(23);
    let mut day = day;
    let mut month = month;
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let max_day = match month {
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 31,
    };
    if day > max_day {
        day = 1;
        month += 1;
        if month > 12 {
            month = 1;
            year += 1;
        }
    }
    year = year.clamp(1970, 2037);
    if day < 1 {
        // Time::Local croaks on day 0.
        return None;
    }
    let mut time = days_from_civil(year, month, day) * 86_400 + hh * 3600 + mm * 60 + ss;
    let off = i64::from(tz_minutes) * 60;
    if off <= 0 {
        time -= off;
    } else if time < off {
        time = 0;
    } else {
        time -= off;
    }
    Some(time)
}

/// The first `\b([A-Z]{2,4}(?:-DST)?)\b` of `s`.
fn zone_name(s: &[u8]) -> Option<&[u8]> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < s.len() {
        let boundary = i == 0 || !s.get(i - 1).copied().is_some_and(word);
        if boundary && s.get(i).is_some_and(u8::is_ascii_uppercase) {
            let n = s.get(i..).map_or(0, |r| r.iter().take(4).take_while(|b| b.is_ascii_uppercase()).count());
            // Greedy [A-Z]{2,4}, then optional -DST, then \b; backtrack the length.
            for len in (2..=n).rev() {
                let end = i + len;
                if s.get(end..end + 4) == Some(b"-DST") && !s.get(end + 4).copied().is_some_and(word) {
                    return s.get(i..end + 4);
                }
                if !s.get(end).copied().is_some_and(word) {
                    return s.get(i..end);
                }
            }
        }
        i += 1;
    }
    None
}

/// `\s.?\d+ \S\S\S \d+ \d+:\d+:\d+ \S+` in `line`: the date SpamAssassin takes from a
/// Received line (the text of group 1, leading white space included).
pub fn received_date(line: &[u8]) -> Option<&[u8]> {
    let ns = |b: &u8| !is_space(*b);
    for start in 0..line.len() {
        if !line.get(start).is_some_and(|&b| is_space(b)) {
            continue;
        }
        // `.?` then `\d+`: try with and without the optional character.
        for skip in [1usize, 0] {
            let mut j = start + 1 + skip;
            if skip == 1 && line.get(start + 1).is_none_or(|&b| b == b'\n') {
                continue;
            }
            let d = digits(line, j);
            if d == 0 {
                continue;
            }
            j += d;
            if line.get(j) != Some(&b' ')
                || !line.get(j + 1..j + 4).is_some_and(|w| w.iter().all(ns))
                || line.get(j + 4) != Some(&b' ')
            {
                continue;
            }
            j += 5;
            let y = digits(line, j);
            if y == 0 || line.get(j + y) != Some(&b' ') {
                continue;
            }
            j += y + 1;
            let mut ok = true;
            for k in 0..3 {
                let n = digits(line, j);
                if n == 0 {
                    ok = false;
                    break;
                }
                j += n;
                let sep = if k < 2 { b':' } else { b' ' };
                if line.get(j) != Some(&sep) {
                    ok = false;
                    break;
                }
                j += 1;
            }
            if !ok {
                continue;
            }
            let tz = line.get(j..).map_or(0, |r| r.iter().take_while(|b| ns(b)).count());
            if tz == 0 {
                continue;
            }
            return line.get(start..j + tz);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc822_dates_table() {
        // Values from SpamAssassin 4.0.1's parse_rfc822_date.
        let cases: &[(&str, Option<i64>)] = &[
            ("Mon, 1 Jan 2001 00:00:00 +0000", Some(978307200)),
            ("Thu, 22 Aug 2002 13:14:15 -0700", Some(1030047255)),
            ("22 Aug 02 13:14:15 PDT", Some(1030047255)),
            ("Thu Aug 22 13:14:15 2002", Some(1029974400)),
            ("Sat, 31 Feb 2004 10:00:00 +0100", Some(1078131600)),
            ("Fri, 01 Mar 1963 10:00:00 GMT", Some(5133600)),
            ("Wed, 1 Jan 2050 00:00:00 +0000", Some(2114380800)),
            ("1 Jan 2001 25:61:61 XYZ", Some(978393599)),
            ("Mon, 0 Jan 2001 00:00:00 +0000", None),
            ("garbage", None),
            ("Tue, 3 Sep 2002 1:02 +0200", Some(1031007720)),
            ("Tue,3 Sep 2002 01:02:03 +0930 (EST)", Some(1030980723)),
            ("3 Sep 102 01:02:03 EDT", Some(1031029323)),
            ("Sep  3 01:02:03 2002 +0100", Some(1031007600)),
            ("31 Dec 1969 23:00:00 +0200", Some(31525200)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_rfc822_date(text.as_bytes()), *want, "{text}");
        }
    }

    #[test]
    fn received_dates() {
        let line = b"from x by y id 1; Thu, 22 Aug 2002 13:14:15 -0700 (PDT)";
        assert_eq!(received_date(line), Some(&b" 22 Aug 2002 13:14:15 -0700"[..]));
        assert_eq!(received_date(b"from x by y"), None);
    }
}
