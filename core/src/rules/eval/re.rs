//! The patterns the eval tests use (the `Received` parser's MTA formats, the
//! forged-relay checks, the arguments of a few eval functions), run by the rule
//! engine's backtracking matcher, [`crate::rules::backtrack`]: Perl syntax as
//! perl.rs translates it, compiled to a [`Program`] that records its captures.
//!
//! This module adds what the eval code needs on top: SpamAssassin's IP-address
//! patterns callable as `(?&NAME)`, Perl's `$` (the end, or before a final `\n`:
//! header values end with one), capture groups readable after a match, and a
//! step allowance shared by all the searches of one message: a search that
//! exceeds its budget reports no match, so the cost per message stays bounded
//! whatever it holds. Searches run in a caller-owned [`Search`], so a warm run
//! allocates nothing.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

pub use crate::rules::backtrack::{find_bytes, find_bytes_icase};
use regex_syntax::hir::Hir;

use crate::rules::backtrack::{self, BacktrackError, BacktrackScratch, Program};
use crate::rules::perl::{self, Unsupported};
use crate::rules::cache::ProgramShelf;

/// Capture groups a pattern may have (group 0 is the whole match).
pub const MAX_GROUPS: usize = 10;
/// Steps one search may take before it gives up (reports no match).
const STEP_BUDGET: u32 = 200_000;

/// Why a pattern does not compile (a bug in this crate's pattern text, or a bad
/// eval argument in a rule file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternError {
    /// perl.rs refuses it.
    Perl(Unsupported),
    /// The matcher cannot run it.
    Program(BacktrackError),
    /// `(?&NAME)` of a name that is not a sub-pattern.
    UnknownSub,
    /// More than [`MAX_GROUPS`] - 1 capture groups.
    TooManyGroups,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::Perl(why) => write!(f, "pattern error: {why}"),
            PatternError::Program(why) => write!(f, "pattern error: {why}"),
            PatternError::UnknownSub => f.write_str("pattern error: unknown sub-pattern"),
            PatternError::TooManyGroups => f.write_str("pattern error: too many groups"),
        }
    }
}

/// Perl's `\s` on bytes: space, `\t`, `\n`, `\x0b`, `\f`, `\r`.
pub fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Perl's `\w` on bytes (ASCII).
pub fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Regex {
    /// `None`: the pattern never matches.
    program: Option<Program>,
}

/// Where searches keep their state: the matcher's scratch, the last match's
/// groups and the step allowance.
#[derive(Debug)]
pub struct Search {
    scratch: BacktrackScratch,
    /// Group `g` of the last match at `g` (`NONE`: unset).
    groups: [(u32, u32); MAX_GROUPS],
    /// Steps all further searches may still take together (see [`Search::allow`]).
    allowance: u64,
}

const NONE: u32 = u32::MAX;

impl Default for Search {
    fn default() -> Self {
        Search { scratch: BacktrackScratch::default(), groups: [(NONE, NONE); MAX_GROUPS], allowance: u64::MAX }
    }
}

impl Search {
    /// Sets how many steps all further searches together may take; once spent,
    /// searches report no match. Callers set it per message to bound hostile input.
    pub fn allow(&mut self, steps: u64) {
        self.allowance = steps;
    }

    /// Steps still allowed (see [`Search::allow`]).
    pub fn allowance(&self) -> u64 {
        self.allowance
    }

    /// Capture group `g` of the last successful search, as a range of the haystack.
    pub fn group(&self, g: usize) -> Option<(usize, usize)> {
        let &(a, b) = self.groups.get(g)?;
        (a != NONE && b != NONE && a <= b).then_some((a as usize, b as usize))
    }

    /// Capture group `g` of the last successful search in `hay`.
    pub fn text<'h>(&self, hay: &'h [u8], g: usize) -> Option<&'h [u8]> {
        self.group(g).and_then(|(a, b)| hay.get(a..b))
    }
}

/// The program of `pattern`, which may call the sub-patterns of `subs` as `(?&NAME)`.
fn program(pattern: &str, icase: bool, subs: Option<&Subs>) -> Result<Program, PatternError> {
    let named = subs.map_or(&[][..], |s| &s.texts[..]);
    let parsed = subs.and_then(|s| s.parsed.get(usize::from(icase))).filter(|p| !p.is_empty());
    let body = expand(pattern, named, parsed.is_some())?;
    let extended = perl::translate_backtracking(&body, if icase { "i" } else { "" }).map_err(PatternError::Perl)?;
    let program = match parsed {
        Some(parsed) => backtrack::compile_captures_with(&extended, parsed),
        None => backtrack::compile_captures(&extended),
    }
    .map_err(PatternError::Program)?;
    if program.captures() >= MAX_GROUPS {
        return Err(PatternError::TooManyGroups);
    }
    Ok(program)
}

impl Regex {
    /// Compiles `pattern` (Perl syntax); `icase` is Perl's `/i`.
    pub fn new(pattern: &str, icase: bool) -> Result<Regex, PatternError> {
        Regex::with_subs(pattern, icase, None)
    }

    /// Compiles `pattern`, which may call the sub-patterns in `named` as `(?&NAME)`.
    fn with_subs(pattern: &str, icase: bool, subs: Option<&Subs>) -> Result<Regex, PatternError> {
        Ok(Regex { program: Some(program(pattern, icase, subs)?) })
    }

    /// Whether the pattern matches anywhere in `hay`.
    pub fn is_match(&self, hay: &[u8], search: &mut Search) -> bool {
        self.find_at(hay, 0, search)
    }

    /// Searches `hay` from `start`; on a match the groups are in `search`.
    pub fn find_at(&self, hay: &[u8], start: usize, search: &mut Search) -> bool {
        search.groups = [(NONE, NONE); MAX_GROUPS];
        let limit = u32::try_from(search.allowance.min(u64::from(STEP_BUDGET))).unwrap_or(STEP_BUDGET);
        let Some(program) = self.program.as_ref().filter(|_| limit > 0) else { return false };
        search.scratch.set_budget(limit, 0);
        let found = program.find_at(hay, start, &mut search.scratch);
        search.allowance = search.allowance.saturating_sub(u64::from(search.scratch.last_steps()));
        let Ok(Some((a, b))) = found else { return false };
        let narrow = |p: usize| u32::try_from(p).unwrap_or(NONE);
        for (g, slot) in search.groups.iter_mut().enumerate() {
            *slot = match g {
                0 => (narrow(a), narrow(b)),
                _ => program.capture(&search.scratch, g).map_or((NONE, NONE), |(a, b)| (narrow(a), narrow(b))),
            };
        }
        true
    }
}

/// The named sub-patterns `(?&NAME)` calls: their texts, and each parsed once (as
/// written, and under `/i`), so that the patterns calling them splice it in instead of
/// parsing it again (the IP-address patterns are most of every Received pattern).
#[derive(Debug, Clone)]
struct Subs {
    texts: [(&'static str, String); 4],
    /// By `/i`: every text parsed; empty when not parsed (then texts are inlined).
    parsed: [Vec<Hir>; 2],
}

impl Subs {
    /// The texts only: patterns inline them.
    fn texts() -> Subs {
        Subs {
            texts: [("IP", ip_text()), ("IPV4", ipv4_text()), ("LOCALHOST", localhost_text()), ("PRIVATE", ip_private_text())],
            parsed: [Vec::new(), Vec::new()],
        }
    }

    /// The texts, each parsed.
    fn parsed() -> Subs {
        let mut subs = Subs::texts();
        for (icase, parsed) in subs.parsed.iter_mut().enumerate() {
            let flags = if icase == 1 { "i" } else { "" };
            let each = subs.texts.iter().map(|(_, text)| {
                let extended = perl::translate_backtracking(text, flags).ok()?;
                backtrack::parse_sub(&extended).ok()
            });
            *parsed = each.collect::<Option<Vec<Hir>>>().unwrap_or_default();
        }
        subs
    }
}

/// `pattern` with each `(?&NAME)` replaced by its sub-pattern, as an atomic group,
/// and each `$` outside a class by Perl's meaning without `/m`.
fn expand(pattern: &str, named: &[(&str, String)], splice: bool) -> Result<String, PatternError> {
    let mut out = String::with_capacity(pattern.len());
    let mut in_class = false;
    let mut rest = pattern;
    while let Some(c) = rest.chars().next() {
        let mut len = c.len_utf8();
        match c {
            '\\' => len += rest.get(1..).and_then(|r| r.chars().next()).map_or(0, char::len_utf8),
            '[' if !in_class => {
                in_class = true;
                // A `]` right after `[` or `[^` is a member.
                let members = rest.get(1..).unwrap_or("");
                let members = members.strip_prefix('^').unwrap_or(members);
                if members.starts_with(']') {
                    len = rest.len() - members.len() + 1;
                }
            }
            // A POSIX class inside brackets (`[[:alpha:]$]`) does not close them.
            '[' if rest.starts_with("[:") => len = rest.find(":]").map_or(len, |e| e + 2),
            ']' if in_class => in_class = false,
            '$' if !in_class => {
                out.push_str("(?=\\n?\\z)");
                rest = rest.get(1..).unwrap_or("");
                continue;
            }
            '(' if !in_class && rest.starts_with("(?&") => {
                let name_end = rest.find(')').ok_or(PatternError::UnknownSub)?;
                let name = rest.get(3..name_end).unwrap_or("");
                let index = named.iter().position(|(n, _)| *n == name).ok_or(PatternError::UnknownSub)?;
                out.push_str("(?>");
                match named.get(index) {
                    Some(_) if splice => {
                        out.push_str(backtrack::SUB_MARKER);
                        out.push(char::from(b'0' + index as u8));
                    }
                    Some((_, text)) => out.push_str(text),
                    None => return Err(PatternError::UnknownSub),
                }
                out.push(')');
                rest = rest.get(name_end + 1..).unwrap_or("");
                continue;
            }
            _ => {}
        }
        out.push_str(rest.get(..len).unwrap_or(rest));
        rest = rest.get(len..).unwrap_or("");
    }
    Ok(out)
}

/// One octet of a dotted quad, as SpamAssassin's `IPV4_ADDRESS` spells it.
const OCTET: &str = r"(?:1\d\d|2[0-4]\d|25[0-5]|[1-9]\d|\d)";

/// SpamAssassin's `IPV4_ADDRESS`.
fn ipv4_text() -> String {
    alloc::format!(r"\b{o}\.{o}\.{o}\.{o}\b", o = OCTET)
}

/// What every IPv4 or IPv6 address starts with (a dotted quad's first octet, an
/// IPv6 group or colon): a lookahead before the alternatives, so that a place
/// where none can match is left after a few steps.
const IP_START: &str = r"(?=\d{1,3}\.|IPv6:|[a-f0-9]{0,4}:)";

/// SpamAssassin's `IP_ADDRESS` (IPv4, IPv4-mapped IPv6, IPv6; case-insensitive).
fn ip_text() -> String {
    let h = "[a-f0-9]{1,4}";
    let q = alloc::format!(r"{o}\.{o}\.{o}\.{o}", o = OCTET);
    alloc::format!(
        concat!(
            r"(?i:{IP_START}(?:\b(?<!:){q}\b|(?:IPv6:|(?<![a-f0-9:]))(?:",
            r"(?:(?:{h}:){{6}}|::(?:{h}:){{0,5}}|(?:{h}:){{1,5}}:|{h}::(?:{h}:){{1,4}}|(?:{h}:){{2}}:(?:{h}:){{1,3}}",
            r"|(?:{h}:){{3}}:(?:{h}:){{1,2}}|(?:{h}:){{4}}:{h}:){q}",
            r"|(?:{h}:){{7}}{h}|:(?::{h}){{1,7}}|(?:{h}:){{1,7}}:|{h}:(?::{h}){{1,6}}|(?:{h}:){{2}}(?::{h}){{1,5}}",
            r"|(?:{h}:){{3}}(?::{h}){{1,4}}|(?:{h}:){{4}}(?::{h}){{1,3}}|(?:{h}:){{5}}(?::{h}){{1,2}}|(?:{h}:){{6}}:{h}|::",
            r")(?![a-f0-9:])))"
        ),
        q = q,
        h = h,
        IP_START = IP_START
    )
}

/// The IPv4-mapped IPv6 prefixes of `IP_PRIVATE` and `LOCALHOST` (`0{1,4}` groups then `ffff:`).
const MAPPED_PREFIX: &str = concat!(
    r"(?:(?:0{1,4}:){5}ffff:|::(?:0{1,4}:){0,4}ffff:|(?:0{1,4}:){1,4}:ffff:|0{1,4}::(?:0{1,4}:){1,3}ffff:",
    r"|(?:0{1,4}:){2}:0{1,2}:ffff:|(?:0{1,4}:){3}:0:ffff:|(?:0{1,4}:){4}:ffff:)"
);

/// The IPv6 spellings of `::1` in `IP_PRIVATE` and `LOCALHOST`.
const LOOPBACK6: &str = concat!(
    r"(?:0{1,4}:){7}0{0,3}1|:(?::0{1,4}){0,6}:0{0,3}1|0{1,4}:(?::0{1,4}){0,5}:0{0,3}1",
    r"|(?:0{1,4}:){2}(?::0{1,4}){0,4}:0{0,3}1|(?:0{1,4}:){3}(?::0{1,4}){0,3}:0{0,3}1",
    r"|(?:0{1,4}:){4}(?::0{1,4}){0,2}:0{0,3}1|(?:0{1,4}:){5}(?::0{1,4}){0,1}:0{0,3}1|(?:0{1,4}:){6}:0{0,3}1"
);

/// SpamAssassin's `LOCALHOST`.
fn localhost_text() -> String {
    alloc::format!(
        r"(?i:(?=localhost|127\.|IPv6:|[a-f0-9]{{0,4}}:)(?:localhost(?:\.localdomain)?|\b(?<!:)127\.0\.0\.1\b|(?:IPv6:|(?<![a-f0-9:]))(?:{MAPPED_PREFIX}127\.0\.0\.1|{LOOPBACK6})(?![a-f0-9:])))"
    )
}

/// SpamAssassin's `IP_PRIVATE` without its leading `^`.
fn ip_private_text() -> String {
    let v4 =
        r"(?:10|127|169\.254|172\.(?:1[6-9]|2[0-9]|3[01])|192\.168|100\.(?:6[4-9]|[7-9][0-9]|1[01][0-9]|12[0-7]))\..*";
    alloc::format!(
        r"(?i:{v4}|(?:IPv6:|(?<![a-f0-9:]))(?:{MAPPED_PREFIX}{v4}|fe[89ab][0-9a-f]:.*|{LOOPBACK6})(?![a-f0-9:]))"
    )
}

/// SpamAssassin's IP-address patterns, callable from other patterns as `(?&IP)`
/// (`IP_ADDRESS`), `(?&IPV4)` (`IPV4_ADDRESS`), `(?&LOCALHOST)` and `(?&PRIVATE)`
/// (`IP_PRIVATE` without its `^`).
#[derive(Debug, Clone)]
pub struct Patterns {
    subs: Subs,
    /// `IP_PRIVATE`, anchored at the start of the text.
    pub ip_private: Regex,
    /// `^IP_ADDRESS$`... as `IS_IPV4_ADDRESS`: the whole text is a dotted quad.
    pub is_ipv4: Regex,
}

/// The sub-patterns, with fixed patterns that match nothing: a placeholder, cheap to make.
impl Default for Patterns {
    fn default() -> Self {
        Patterns { subs: Subs::texts(), ip_private: never(), is_ipv4: never() }
    }
}

impl Patterns {
    /// Compiles the IP-address family.
    pub fn new() -> Patterns {
        Patterns::with_programs(&mut ProgramShelf::default())
    }

    /// [`Patterns::new`], taking compiled programs from `shelf` (and shelving new ones).
    pub(crate) fn with_programs(shelf: &mut ProgramShelf) -> Patterns {
        let mut patterns = Patterns { subs: Subs::parsed(), ip_private: never(), is_ipv4: never() };
        patterns.ip_private = patterns.fixed_from("^(?&PRIVATE)", false, shelf);
        patterns.is_ipv4 = patterns.fixed_from("^(?&IPV4)$", false, shelf);
        patterns
    }

    /// Compiles `pattern`, which may use `(?&IP)`, `(?&IPV4)`, `(?&LOCALHOST)` and `(?&PRIVATE)`.
    pub fn compile(&self, pattern: &str, icase: bool) -> Result<Regex, PatternError> {
        Regex::with_subs(pattern, icase, Some(&self.subs))
    }

    /// [`Patterns::compile`] for a pattern known to be valid; an invalid one (a bug
    /// the tests catch) becomes a pattern that never matches.
    pub fn fixed(&self, pattern: &str, icase: bool) -> Regex {
        self.fixed_from(pattern, icase, &mut ProgramShelf::default())
    }

    /// [`Patterns::fixed`], its program from `shelf` when a compile cache kept it.
    pub(crate) fn fixed_from(&self, pattern: &str, icase: bool, shelf: &mut ProgramShelf) -> Regex {
        match shelf.program(pattern, icase, || program(pattern, icase, Some(&self.subs))) {
            Ok(program) => Regex { program: Some(program) },
            Err(_) => never(),
        }
    }
}

/// A pattern that matches nothing.
pub fn never() -> Regex {
    Regex { program: None }
}

/// The program `pattern` compiles to with every sub-pattern's text inlined and parsed
/// with it, as [`Patterns::compile`] did before splicing: the tests compare the two.
#[cfg(test)]
pub(crate) fn inlined_program(pattern: &str, icase: bool) -> alloc::string::String {
    alloc::format!("{:?}", Regex::with_subs(pattern, icase, Some(&Subs::texts())))
}

/// Perl's `\Q...\E`: `text` with every non-word byte escaped.
pub fn quote(text: &[u8]) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for &b in text {
        if !is_word(b) {
            if b.is_ascii() && !b.is_ascii_control() {
                out.push('\\');
                out.push(char::from(b));
            } else {
                out.push_str(&alloc::format!("\\x{b:02x}"));
            }
        } else {
            out.push(char::from(b));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(p: &str, icase: bool, hay: &str) -> Option<alloc::vec::Vec<Option<String>>> {
        let re = Regex::new(p, icase).unwrap_or_else(|e| panic!("{p}: {e}"));
        let mut s = Search::default();
        if !re.is_match(hay.as_bytes(), &mut s) {
            return None;
        }
        Some(
            (0..=re.program.as_ref().map_or(0, Program::captures))
                .map(|g| s.text(hay.as_bytes(), g).map(|t| String::from_utf8_lossy(t).into_owned()))
                .collect(),
        )
    }

    #[test]
    fn perl_semantics_table() {
        // (pattern, /i, haystack, expected group texts or None for no match)
        type Case<'a> = (&'a str, bool, &'a str, Option<&'a [Option<&'a str>]>);
        let cases: &[Case] = &[
            ("abc", false, "xxabcxx", Some(&[Some("abc")])),
            ("^abc", false, "xabc", None),
            ("a.c$", false, "abc\n", Some(&[Some("abc")])),
            ("a.c\\z", false, "abc\n", None),
            (
                "(\\S+) \\((\\S+)\\[(\\d+)\\]\\)",
                false,
                "h (a.b[12])",
                Some(&[Some("h (a.b[12])"), Some("h"), Some("a.b"), Some("12")]),
            ),
            ("a(.*?)c", false, "abcbc", Some(&[Some("abc"), Some("b")])),
            ("a(.*)c", false, "abcbc", Some(&[Some("abcbc"), Some("bcb")])),
            ("(?:HELO|EHLO) (\\S*)", false, "x EHLO foo bar", Some(&[Some("EHLO foo"), Some("foo")])),
            ("helo", true, "HeLo", Some(&[Some("HeLo")])),
            ("[^\\s;]+", false, "  ab;c", Some(&[Some("ab")])),
            ("x{2,3}", false, "xxxx", Some(&[Some("xxx")])),
            ("x{2,3}?", false, "xxxx", Some(&[Some("xx")])),
            ("x{2}", false, "x", None),
            ("\\bfoo\\b", false, "a foo.", Some(&[Some("foo")])),
            ("\\bfoo\\b", false, "afoo", None),
            ("(?<!:)\\b1\\.2", false, "::1.2", None),
            ("(?<!:)\\b1\\.2", false, " 1.2", Some(&[Some("1.2")])),
            ("(?<![a-f0-9:])ab", false, "cab ab", Some(&[Some("ab")])),
            ("\\d+(?! id )", false, "12 id ", Some(&[Some("1")])),
            ("a(?=b)", false, "acab", Some(&[Some("a")])),
            ("(a|ab)(c|bcd)(d*)", false, "abcd", Some(&[Some("abcd"), Some("a"), Some("bcd"), Some("")])),
            ("(\\w+) \\1", false, "say hello hello", Some(&[Some("hello hello"), Some("hello")])),
            ("(x)?y", false, "y", Some(&[Some("y"), None])),
            ("^(?:from )?(\\S+)", false, "from a b", Some(&[Some("from a"), Some("a")])),
            // Runs never given back (the next byte is outside the class) and runs given
            // back only to a byte the rest can start with.
            ("^(\\S+) \\((\\S+)\\)", false, "host (x) y", Some(&[Some("host (x)"), Some("host"), Some("x")])),
            ("^(\\S+) \\(", false, "host [x] (y)", None),
            ("(\\d+)\\d", false, "a12345", Some(&[Some("12345"), Some("1234")])),
            ("x(\\S*)( |;|$)", false, "xab;cd ", Some(&[Some("xab;cd "), Some("ab;cd"), Some(" ")])),
            ("x(\\S*)(?:;|$)", false, "xab;cd", Some(&[Some("xab;cd"), Some("ab;cd")])),
            ("x(\\S*)(?:;|$)", false, "xab;cd\n", Some(&[Some("xab;cd"), Some("ab;cd")])),
            ("x(\\S+)\\z", false, "xab\n", None),
            ("a(.*)\\) by", false, "a(b) c) by d) by", Some(&[Some("a(b) c) by d) by"), Some("(b) c) by d")])),
            ("a(.*)\\) by", false, "a(b) c) bx", None),
            ("(\\S+)\\b", false, "ab;", Some(&[Some("ab"), Some("ab")])),
            ("\\w+(?:\\.|x)*y", false, "ab.x.y", Some(&[Some("ab.x.y")])),
            // Case-insensitive prefixes and required literals.
            (" with (smtp)", true, "a WITH  x With SMTP", Some(&[Some(" With SMTP"), Some("SMTP")])),
            ("\\b(?:x|y)\\S*hotmail\\.com\\b", false, "y.hotmail.co x.hotmail.com", Some(&[Some("x.hotmail.com")])),
            ("(?:x|y)\\S*hotmail\\.com", true, "X.HotMail.COM", Some(&[Some("X.HotMail.COM")])),
            ("(?:x|y)\\S*hotmail\\.com", false, "X.HotMail.COM", None),
            ("(?:a|b)(?i:cde)f", false, "bCdEf", Some(&[Some("bCdEf")])),
            ("(?:a|b)(?i:cde)f", false, "bCdEF", None),
        ];
        for (p, icase, hay, want) in cases {
            let got = find(p, *icase, hay);
            let want = want.map(|w| w.iter().map(|g| g.map(String::from)).collect::<alloc::vec::Vec<_>>());
            assert_eq!(got, want, "{p} on {hay:?}");
        }
    }

    #[test]
    fn expansion_table() {
        let named = [("IP", String::from("[0-9.]+"))];
        let rows: &[(&str, &str)] = &[
            (r"a$", r"a(?=\n?\z)"),
            (r"a\$b\\$", r"a\$b\\(?=\n?\z)"),
            (r"[$]x[^]$]y[[:alpha:]$]$", r"[$]x[^]$]y[[:alpha:]$](?=\n?\z)"),
            (r"\[((?&IP))\]", r"\[((?>[0-9.]+))\]"),
            (r"[(?&IP)]", r"[(?&IP)]"),
        ];
        for (p, want) in rows {
            assert_eq!(expand(p, &named, false).as_deref(), Ok(*want), "{p}");
        }
        assert_eq!(expand(r"a(?&IP)b", &named, true).as_deref(), Ok(r"a(?>\x00\x01\x020)b"));
        // Every sub-pattern parses, as written and under /i: the family splices them.
        assert!(Subs::parsed().parsed.iter().all(|p| p.len() == Subs::texts().texts.len()));
        for p in [r"(?&NOPE)", r"(?&IP", r"x(?&)"] {
            assert_eq!(expand(p, &named, false), Err(PatternError::UnknownSub), "{p}");
        }
    }

    #[test]
    fn bad_patterns_are_errors() {
        for p in ["(", "a)", "[a", "a**", "(?<!a+)b", "(a)\\2", "(?&NOPE)", "x{3,2}", "(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)"] {
            assert!(Regex::new(p, false).is_err(), "{p}");
        }
    }

    #[test]
    fn catastrophic_patterns_give_up() {
        let re = Regex::new("(a*)*(a*)*(a*)*b", false).unwrap_or_else(|_| never());
        let hay = [b'a'; 64];
        let mut s = Search::default();
        assert!(!re.is_match(&hay, &mut s));
        assert_eq!(u64::MAX - s.allowance(), u64::from(STEP_BUDGET));
        // A search past the allowance reports no match; the next message's allowance is fresh.
        s.allow(0);
        assert!(!Regex::new("a", false).is_ok_and(|re| re.is_match(b"a", &mut s)));
        s.allow(100);
        assert!(Regex::new("a", false).is_ok_and(|re| re.is_match(b"a", &mut s)));
    }

    #[test]
    fn quote_escapes_non_words() {
        assert_eq!(quote(b"a.b-c"), "a\\.b\\-c");
        let re = Regex::new(&alloc::format!("^{}$", quote(b"x+y@z.com")), false).unwrap_or_else(|_| never());
        let mut s = Search::default();
        assert!(re.is_match(b"x+y@z.com", &mut s));
        assert!(!re.is_match(b"xxy@z.com", &mut s));
    }
}
