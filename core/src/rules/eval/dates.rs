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

/// What a run of digits in a date form is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    Skip,
    Day,
    Year,
    Hour,
    Minute,
    Second,
}

/// One piece of a date form, as in SpamAssassin's regexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    /// This byte.
    Is(u8),
    /// ` +`
    Spaces,
    /// `\s`
    Ws,
    /// `.`: a byte but `\n`.
    NotNewline,
    /// `\S`
    NotWs,
    /// `\S+`
    NotWsRun,
    /// `(Jan|Feb|...|Dec)`, any case.
    Month,
    /// `\d{lo,hi}`, read as `Num`: the whole run of digits (in these forms a non-digit follows).
    Digits(Num, usize, usize),
}

const SP: Tok = Tok::Is(b' ');
const COLON: Tok = Tok::Is(b':');
/// `\d+`
const N: Tok = Tok::Digits(Num::Skip, 1, usize::MAX);
const DAY: Tok = Tok::Digits(Num::Day, 1, usize::MAX);
const HOUR: Tok = Tok::Digits(Num::Hour, 1, 2);
const MINUTE: Tok = Tok::Digits(Num::Minute, 2, 2);

/// `parse_rfc822_date`'s three date forms, each tried over the whole string in this order:
/// ` (\d+) (Mon) (\d{4}) `, ` (Mon) +(\d+) \d+:\d+:\d+ (\d{4}) `, ` (\d+) (Mon) (\d{2,3}) `.
const DATE_FORMS: [&[Tok]; 3] = [
    &[SP, DAY, SP, Tok::Month, SP, Tok::Digits(Num::Year, 4, 4), SP],
    &[SP, Tok::Month, Tok::Spaces, DAY, SP, N, COLON, N, COLON, N, SP, Tok::Digits(Num::Year, 4, 4), SP],
    &[SP, DAY, SP, Tok::Month, SP, Tok::Digits(Num::Year, 2, 3), SP],
];

/// Its time: ` (\d?\d):(\d\d)(:(\d\d))? `.
const TIME_FORMS: [&[Tok]; 2] = [
    &[SP, HOUR, COLON, MINUTE, COLON, Tok::Digits(Num::Second, 2, 2), SP],
    &[SP, HOUR, COLON, MINUTE, SP],
];

/// The date of a Received line: `\s.?\d+ \S\S\S \d+ \d+:\d+:\d+ \S+`.
const RECEIVED_FORMS: [&[Tok]; 2] = [
    &[
        Tok::Ws, Tok::NotNewline, N, SP, Tok::NotWs, Tok::NotWs, Tok::NotWs, SP, N, SP, N, COLON, N, COLON, N, SP,
        Tok::NotWsRun,
    ],
    &[Tok::Ws, N, SP, Tok::NotWs, Tok::NotWs, Tok::NotWs, SP, N, SP, N, COLON, N, COLON, N, SP, Tok::NotWsRun],
];

/// What a form matched: its numbers, the year digits' range and the bytes it covers.
#[derive(Debug, Clone, Copy, Default)]
struct Found {
    day: i64,
    month: u32,
    year: (usize, usize),
    hour: i64,
    minute: i64,
    second: i64,
    start: usize,
    end: usize,
}

/// `form` matched at `start` of `s`.
fn match_form(s: &[u8], start: usize, form: &[Tok]) -> Option<Found> {
    let mut found = Found { start, ..Found::default() };
    let mut j = start;
    for &tok in form {
        let at = s.get(j).copied();
        let run = |keep: fn(u8) -> bool| s.get(j..).map_or(0, |r| r.iter().take_while(|&&b| keep(b)).count());
        j += match tok {
            Tok::Is(b) => (at == Some(b)).then_some(1)?,
            Tok::Ws => at.is_some_and(is_space).then_some(1)?,
            Tok::NotNewline => at.is_some_and(|b| b != b'\n').then_some(1)?,
            Tok::NotWs => at.is_some_and(|b| !is_space(b)).then_some(1)?,
            Tok::Spaces => Some(run(|b| b == b' ')).filter(|&n| n > 0)?,
            Tok::NotWsRun => Some(run(|b| !is_space(b))).filter(|&n| n > 0)?,
            Tok::Month => {
                found.month = month_at(s, j)?;
                3
            }
            Tok::Digits(num, lo, hi) => {
                let n = digits(s, j);
                if n < lo || n > hi {
                    return None;
                }
                let value = || s.get(j..j + n).map_or(0, number);
                match num {
                    Num::Skip => {}
                    Num::Day => found.day = value(),
                    Num::Year => found.year = (j, j + n),
                    Num::Hour => found.hour = value(),
                    Num::Minute => found.minute = value(),
                    Num::Second => found.second = value(),
                }
                n
            }
        };
    }
    found.end = j;
    Some(found)
}

/// The leftmost match in `s` of any of `forms`, the earlier one first at a position
/// (a regex alternation). The forms of a set start with the same token (a test checks),
/// which picks the positions worth trying.
fn find_any(s: &[u8], forms: &[&[Tok]]) -> Option<Found> {
    let lead = forms.first().and_then(|form| form.first()).copied();
    let may_start = |b: u8| match lead {
        Some(Tok::Is(c)) => b == c,
        Some(Tok::Ws) => is_space(b),
        _ => true,
    };
    let mut starts = s.iter().enumerate().filter(|&(_, &b)| may_start(b));
    starts.find_map(|(i, _)| forms.iter().find_map(|form| match_form(s, i, form)))
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
    // The forms are tried one after the other, each over the whole string.
    let date = DATE_FORMS.iter().find_map(|form| find_any(sq.text(), &[form]))?;
    let ytext = sq.text().get(date.year.0..date.year.1)?;
    let mut year = number(ytext);
    if ytext.len() == 2 && year < 50 {
        year += 2000;
    } else if ytext.len() != 4 {
        year += 1900;
    }
    sq.cut(date.start, date.end);
    let clock = find_any(sq.text(), &TIME_FORMS).inspect(|t| sq.cut(t.start, t.end)).unwrap_or_default();
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
    let (hh, mm, ss) = (clock.hour.min(23), clock.minute.min(59), clock.second.min(59));
    let (mut day, mut month) = (date.day, date.month);
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
    find_any(line, &RECEIVED_FORMS).and_then(|f| line.get(f.start..f.end))
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
    fn forms_of_a_set_start_alike() {
        for set in [&TIME_FORMS[..], &RECEIVED_FORMS[..]] {
            assert!(set.iter().all(|form| !form.is_empty() && form.first() == set[0].first()), "{set:?}");
        }
    }

    #[test]
    fn received_dates() {
        // As Perl's m/(\s.?\d+ \S\S\S \d+ \d+:\d+:\d+ \S+)/ gives $1.
        let cases: &[(&[u8], Option<&[u8]>)] = &[
            (b"from x by y id 1; Thu, 22 Aug 2002 13:14:15 -0700 (PDT)", Some(b" 22 Aug 2002 13:14:15 -0700")),
            (b"from x by y", None),
            (b"from x by y; (22 Aug 2002 13:14:15 -0700)", Some(b" (22 Aug 2002 13:14:15 -0700)")),
            (b"by y\t22 Aug 2002 1:2:3 GMT", Some(b"\t22 Aug 2002 1:2:3 GMT")),
            (b"by y;\n22 Aug 2002 13:14:15 PDT", Some(b"\n22 Aug 2002 13:14:15 PDT")),
            (b"by y 22 Aug 2002 13:14 PDT", None),
            (b"id 123 Aug 2002 13:14:15 x; 9 Sep 2003 01:02:03 +0000", Some(b" 123 Aug 2002 13:14:15 x;")),
        ];
        for &(line, want) in cases {
            assert_eq!(received_date(line), want, "{line:?}");
        }
    }
}
