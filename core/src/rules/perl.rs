//! Translation of Perl regular expressions, as written in SpamAssassin rules, into
//! the syntax of regex-automata (byte mode, ASCII classes).
//!
//! SpamAssassin matches its rules against byte strings, so the translation keeps
//! Perl's semantics on bytes: `\w`, `\d`, `\s`, POSIX classes and `/i` are ASCII;
//! `\h`, `\v` and `\R` include the Latin-1 bytes `\xA0` and `\x85`; a raw
//! non-ASCII byte or `\xHH` is that byte; a code point above 0xFF (`\x{2019}`)
//! becomes its UTF-8 byte sequence. `$`, `\Z` and `\z` all become the end of
//! input; where a text may end with a `\n` (a body line, a rawbody piece), the
//! compile lets that end hold before it too, as Perl's `$` does.
//!
//! The output never uses the `x` flag: whitespace and comments of `/x` patterns
//! are removed here. Capture groups become non-capturing (nothing reads them).
//! Constructs a linear-time automaton cannot run (lookaround, backreferences,
//! atomic groups, possessive quantifiers, recursion, `\G`, `\K`, embedded code)
//! are reported as [`Unsupported`]; so are patterns Perl itself rejects.
//!
//! The first four of those still run, through [`backtrack()`]: a relaxed
//! translation for the automaton and an exact [`backtrack::Program`] that confirms
//! its hits.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::Write as _;

use super::backtrack::{self, Backtrack, BacktrackError};

/// Why a Perl regex has no translation into a linear-time automaton.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsupported {
    /// Not a `/re/flags` or `m{re}flags` literal.
    Delimiters,
    /// `(?=`, `(?!`, `(?<=`, `(?<!`.
    Lookaround,
    /// `\1`, `\k<name>`.
    Backreference,
    /// `(?>...)`.
    AtomicGroup,
    /// `a++`, `a*+`.
    Possessive,
    /// Another construct, named.
    Construct(String),
    /// Not a valid Perl regex: Perl itself would reject it.
    Invalid(String),
}

impl Unsupported {
    /// Whether [`backtrack()`] may run a pattern refused for this reason: it has
    /// lookaround, backreferences, atomic groups or possessive quantifiers.
    pub fn needs_backtracking(&self) -> bool {
        matches!(
            self,
            Unsupported::Lookaround | Unsupported::Backreference | Unsupported::AtomicGroup | Unsupported::Possessive
        )
    }
}

impl core::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Unsupported::Delimiters => f.write_str("not a /regex/ literal"),
            Unsupported::Lookaround => f.write_str("lookaround assertion"),
            Unsupported::Backreference => f.write_str("backreference"),
            Unsupported::AtomicGroup => f.write_str("atomic group"),
            Unsupported::Possessive => f.write_str("possessive quantifier"),
            Unsupported::Construct(what) => write!(f, "unsupported construct: {what}"),
            Unsupported::Invalid(why) => write!(f, "invalid Perl regex: {why}"),
        }
    }
}

/// Deepest group nesting translated; regex-syntax refuses deeper than 250 levels
/// (groups and repetitions together).
const MAX_GROUP_DEPTH: usize = 100;

/// Perl's largest finite quantifier bound.
const MAX_REPEAT: u32 = 65534;

/// `\v`: vertical whitespace, as Perl sees it on bytes.
const VSPACE: &str = "[\\n\\x0B\\x0C\\r\\x85]";
/// `\V`.
const NOT_VSPACE: &str = "[^\\n\\x0B\\x0C\\r\\x85]";
/// `\h`: horizontal whitespace on bytes.
const HSPACE: &str = "[\\t \\xA0]";
/// `\H`.
const NOT_HSPACE: &str = "[^\\t \\xA0]";

/// POSIX class names Perl knows.
const POSIX_CLASSES: &[&str] = &[
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space", "upper", "word",
    "xdigit",
];

fn invalid(why: &str) -> Unsupported {
    Unsupported::Invalid(String::from(why))
}

fn construct(what: &str) -> Unsupported {
    Unsupported::Construct(String::from(what))
}

/// Translates a Perl regex literal (`/re/imsx`, `m{re}i`, `m!re!`) to regex-automata syntax.
pub fn translate(perl: &str) -> Result<String, Unsupported> {
    let (body, flags) = split_literal(perl)?;
    translate_body(body, flags)
}

/// How a Perl regex literal runs: as an automaton alone, or as an automaton
/// over a relaxed form whose hits a backtracking [`backtrack::Program`] confirms.
pub enum Plan {
    /// The exact translation, as [`translate`] gives it.
    Automaton(String),
    /// The pattern needs Perl's backtracking semantics.
    Backtrack(alloc::boxed::Box<Backtrack>),
}

/// [`translate`], or when that fails for a reason [`Unsupported::needs_backtracking`]
/// accepts, [`backtrack()`].
pub fn plan(perl: &str) -> Result<Plan, Unsupported> {
    match translate(perl) {
        Ok(t) => Ok(Plan::Automaton(t)),
        Err(why) if why.needs_backtracking() => backtrack(perl).map(|b| Plan::Backtrack(alloc::boxed::Box::new(b))),
        Err(why) => Err(why),
    }
}

/// Compiles a Perl regex literal that uses lookaround, backreferences, atomic
/// groups or possessive quantifiers: a relaxed translation that matches every
/// text the Perl regex matches (and has a DFA), and the exact backtracking
/// [`backtrack::Program`].
pub fn backtrack(perl: &str) -> Result<Backtrack, Unsupported> {
    let (body, flags) = split_literal(perl)?;
    let extended = translate_backtracking(body, flags)?;
    backtrack::compile_extended(&extended).map_err(unsupported)
}

/// The backtracking translation of a Perl regex literal as a syntax tree: lookaround,
/// atomic groups and backreferences are marked groups holding what they match or read.
pub(crate) fn backtracking_hir(perl: &str) -> Result<regex_syntax::hir::Hir, Unsupported> {
    let (body, flags) = split_literal(perl)?;
    let extended = translate_backtracking(body, flags)?;
    backtrack::parse_sub(&extended).map_err(unsupported)
}

/// [`backtrack()`]'s relaxed form, one for each bound above which counted repetitions
/// are opened, without the program.
pub(crate) fn relaxed_forms(perl: &str, bounds: &[u32]) -> Result<Vec<String>, Unsupported> {
    let (body, flags) = split_literal(perl)?;
    let extended = translate_backtracking(body, flags)?;
    backtrack::relaxed_forms(&extended, bounds).map_err(unsupported)
}

fn unsupported(e: BacktrackError) -> Unsupported {
    match e {
        BacktrackError::NoSuchGroup(_) => Unsupported::Invalid(e.to_string()),
        _ => Unsupported::Construct(e.to_string()),
    }
}

/// Splits a regex literal into its body and modifier letters, the way
/// SpamAssassin's `compile_regexp` strips delimiters: `/re/`, `m` or `qr` with a
/// bracket pair or any other non-word character; modifiers are the letters after
/// the closing delimiter (`e` refused). An unescaped delimiter inside the body is
/// refused unless the delimiters are `{}`, `()` or `[]`.
pub fn split_literal(perl: &str) -> Result<(&str, &str), Unsupported> {
    let (rest, close) = if let Some(rest) = perl.strip_prefix('/') {
        (rest, b'/')
    } else {
        let rest = perl.strip_prefix("qr").or_else(|| perl.strip_prefix('m')).ok_or(Unsupported::Delimiters)?;
        let open = *rest.as_bytes().first().ok_or(Unsupported::Delimiters)?;
        let close = match open {
            b'{' => b'}',
            b'(' => b')',
            b'<' => b'>',
            b'[' => b']',
            b'\\' => return Err(Unsupported::Delimiters),
            d if d.is_ascii() && !is_word_byte(d) => d,
            _ => return Err(Unsupported::Delimiters),
        };
        // `open` is ASCII, so index 1 is a character boundary.
        (rest.get(1..).ok_or(Unsupported::Delimiters)?, close)
    };
    let bytes = rest.as_bytes();
    let flags_len = bytes.iter().rev().take_while(|&&b| matches!(b, b'a'..=b'd' | b'f'..=b'z')).count();
    let flags_start = bytes.len() - flags_len;
    let body_end = flags_start.checked_sub(1).ok_or(Unsupported::Delimiters)?;
    if bytes.get(body_end) != Some(&close) {
        return Err(Unsupported::Delimiters);
    }
    let body = rest.get(..body_end).ok_or(Unsupported::Delimiters)?;
    let flags = rest.get(flags_start..).ok_or(Unsupported::Delimiters)?;
    if !matches!(close, b'}' | b')' | b']') && has_unescaped(body.as_bytes(), close) {
        return Err(Unsupported::Delimiters);
    }
    Ok((body, flags))
}

/// Whether `delim` occurs in `body` not preceded by a backslash, after removing
/// every `\\` pair (SpamAssassin's check).
fn has_unescaped(body: &[u8], delim: u8) -> bool {
    let mut i = 0;
    while let Some(found) = body.get(i..).and_then(|rest| memchr::memchr2(b'\\', delim, rest)) {
        let at = i + found;
        let pair = body.get(at + 1) == Some(&b'\\');
        if body.get(at) == Some(&delim) && !(delim == b'\\' && pair) {
            return true;
        }
        // A backslash: with the next byte it is a `\\` pair or an escape; either way
        // that byte is not a bare delimiter.
        i = at + 2;
    }
    false
}

/// SpamAssassin 4's `%{TAG}` capture templates (filled at scan time from other
/// rules' named captures): not supported. The syntax is Conf::Parser's:
/// `%{NAME}` or `%{NAME(args)}`, NAME `[A-Z][A-Z0-9]*(_[A-Z0-9]+)*`, no `\` before.
pub(crate) fn has_capture_template(text: &str) -> bool {
    let b = text.as_bytes();
    (0..b.len()).any(|i| {
        if b.get(i..i + 2) != Some(b"%{") || (i > 0 && b.get(i - 1) == Some(&b'\\')) {
            return false;
        }
        let mut j = i + 2;
        if !b.get(j).is_some_and(u8::is_ascii_uppercase) {
            return false;
        }
        let upper_digit = |c: &u8| c.is_ascii_uppercase() || c.is_ascii_digit();
        while b.get(j).is_some_and(upper_digit) {
            j += 1;
        }
        while b.get(j) == Some(&b'_') && b.get(j + 1).is_some_and(upper_digit) {
            j += 1;
            while b.get(j).is_some_and(upper_digit) {
                j += 1;
            }
        }
        if b.get(j) == Some(&b'(') {
            j += 1;
            while b.get(j).is_some_and(|&c| c != b')' && c != b'}') {
                j += 1;
            }
            if b.get(j) != Some(&b')') {
                return false;
            }
            j += 1;
        }
        b.get(j) == Some(&b'}')
    })
}

/// Translates a regex body with its modifier letters (`i m s x`; `o g c` ignored;
/// `a d l n p` change nothing on bytes; others unsupported).
pub fn translate_body(body: &str, flags: &str) -> Result<String, Unsupported> {
    translate_with(body, flags, Mode::Automaton)
}

/// What a translation is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// regex-automata syntax; constructs without a DFA form are errors.
    Automaton,
    /// regex-syntax with the placeholder groups [`backtrack`] reads: Perl captures
    /// are named groups, lookarounds, atomic groups and backreferences are
    /// specially named groups (see `backtrack::Special`).
    Backtrack,
}

/// The backtracking translation of a regex body: regex-syntax with the named
/// placeholder groups `backtrack` reads.
pub(crate) fn translate_backtracking(body: &str, flags: &str) -> Result<String, Unsupported> {
    translate_with(body, flags, Mode::Backtrack)
}

fn translate_with(body: &str, flags: &str, mode: Mode) -> Result<String, Unsupported> {
    let mut prefix = String::new();
    let mut x = false;
    for f in flags.bytes() {
        match f {
            b'i' | b'm' | b's' => {
                if !prefix.as_bytes().contains(&f) {
                    prefix.push(char::from(f));
                }
            }
            b'x' if x => return Err(construct("/xx modifier")),
            b'x' => x = true,
            b'o' | b'g' | b'c' | b'a' | b'd' | b'l' | b'n' | b'p' => {}
            b'u' => return Err(construct("/u modifier")),
            other => return Err(Unsupported::Invalid(format!("unknown modifier /{}", char::from(other)))),
        }
    }
    let mut t = Translator::new(body.as_bytes(), x, mode);
    t.i = prefix.contains('i');
    t.run()?;
    if prefix.is_empty() {
        Ok(t.out)
    } else {
        Ok(format!("(?{prefix}){}", t.out))
    }
}

/// What the item before the current position is, for quantifier checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prev {
    /// Start of pattern, group or alternative.
    Nothing,
    /// Something a quantifier may follow.
    Atom,
    /// A zero-width assertion.
    Assertion,
    /// A quantifier.
    Quantified,
}

/// One member of a bracketed class.
enum Member {
    /// A code point (a byte when <= 0xFF).
    Char(u32),
    /// A class usable inside brackets: `\d`, `[[:alpha:]]`, `[\t \xA0]`.
    Set(String),
}

/// What an open group saved.
struct OpenGroup {
    /// `x` outside the group.
    x: bool,
    /// `i` outside the group.
    i: bool,
    /// Where the group's text starts in the output.
    out_start: usize,
}

struct Translator<'a> {
    src: &'a [u8],
    pos: usize,
    out: String,
    mode: Mode,
    /// Extended (`/x`) mode in effect.
    x: bool,
    /// Case-insensitive (`/i`) mode in effect.
    i: bool,
    /// The open groups.
    groups: Vec<OpenGroup>,
    /// Capture groups opened so far (decides `\10`: backreference or octal).
    captures: u32,
    /// Named capture groups: name, number.
    names: Vec<(Vec<u8>, u32)>,
    /// Placeholder groups emitted so far (their names must differ).
    specials: u32,
    /// Where the last atom starts in the output (a possessive quantifier wraps it).
    atom_start: usize,
    prev: Prev,
    /// Inside `\Q...\E`.
    quoting: bool,
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whitespace ignored by `/x`.
fn is_x_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C)
}

/// Appends byte `b` as a literal valid inside and outside brackets.
fn push_byte(out: &mut String, b: u8) {
    let c = char::from(b);
    if b.is_ascii_alphanumeric() || b == b'_' {
        out.push(c);
    } else if b.is_ascii() && regex_syntax::is_meta_character(c) {
        out.push('\\');
        out.push(c);
    } else if (0x20..0x7F).contains(&b) {
        out.push(c);
    } else {
        // By hand: `write!` costs more than the rest of a translation.
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        out.push_str("\\x");
        for nibble in [b >> 4, b & 0xF] {
            out.push(char::from(HEX.get(usize::from(nibble)).copied().unwrap_or(b'0')));
        }
    }
}

/// A code point as the UTF-8 byte sequence it is in the text, or why not.
fn utf8_bytes(cp: u32) -> Result<([u8; 4], usize), Unsupported> {
    let c = char::from_u32(cp).ok_or_else(|| construct("code point not a Unicode scalar value"))?;
    let mut buf = [0u8; 4];
    let n = c.encode_utf8(&mut buf).len();
    Ok((buf, n))
}

/// Alternatives matching the UTF-8 encodings of code points `lo..=hi` (all > 0xFF).
fn push_utf8_range(out: &mut String, lo: u32, hi: u32, first: &mut bool) -> Result<(), Unsupported> {
    // Surrogates have no UTF-8 encoding: split around them.
    for (a, b) in [(lo, hi.min(0xD7FF)), (lo.max(0xE000), hi)] {
        if a > b {
            continue;
        }
        let start = char::from_u32(a).ok_or_else(|| construct("code point not a Unicode scalar value"))?;
        let end = char::from_u32(b).ok_or_else(|| construct("code point not a Unicode scalar value"))?;
        for seq in regex_syntax::utf8::Utf8Sequences::new(start, end) {
            if !*first {
                out.push('|');
            }
            *first = false;
            for range in seq.as_slice() {
                if range.start == range.end {
                    let _ = write!(out, "\\x{:02X}", range.start);
                } else {
                    let _ = write!(out, "[\\x{:02X}-\\x{:02X}]", range.start, range.end);
                }
            }
        }
    }
    Ok(())
}

/// A POSIX class or ASCII property, as a bracketed class.
fn posix_set(name: &str, negated: bool) -> String {
    if negated {
        format!("[[:^{name}:]]")
    } else {
        format!("[[:{name}:]]")
    }
}

impl<'a> Translator<'a> {
    fn new(src: &'a [u8], x: bool, mode: Mode) -> Self {
        Translator {
            src,
            pos: 0,
            out: String::with_capacity(src.len() + 8),
            mode,
            x,
            i: false,
            groups: Vec::new(),
            captures: 0,
            names: Vec::new(),
            specials: 0,
            atom_start: 0,
            prev: Prev::Nothing,
            quoting: false,
        }
    }

    /// The next placeholder number.
    fn special(&mut self) -> u32 {
        self.specials = self.specials.saturating_add(1);
        self.specials
    }

    /// Opens a placeholder group of `kind` ([`backtrack::Special`] prefix), or
    /// refuses it with `why` when translating for an automaton.
    fn open_special(&mut self, kind: &str, why: Unsupported) -> Result<(), Unsupported> {
        if self.mode == Mode::Automaton {
            return Err(why);
        }
        let k = self.special();
        let text = format!("(?P<{kind}{k}>");
        self.open(self.x, self.i, &text)
    }

    /// A backreference to group `n`.
    fn backref(&mut self, n: u32) -> Result<(), Unsupported> {
        if self.mode == Mode::Automaton {
            return Err(Unsupported::Backreference);
        }
        if n == 0 {
            return Err(invalid("reference to group 0"));
        }
        let k = self.special();
        let kind = if self.i { backtrack::Special::BACKREF_FOLD } else { backtrack::Special::BACKREF };
        // The group's content only keeps regex-syntax from treating it as empty.
        let _ = write!(self.out, "(?P<{kind}{k}_{n}>(?s:.)*)");
        self.prev = Prev::Atom;
        Ok(())
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.src.get(self.pos.checked_add(ahead)?).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Some(b)
    }

    fn run(&mut self) -> Result<(), Unsupported> {
        while let Some(b) = self.peek() {
            let before = self.out.len();
            if self.quoting {
                if b == b'\\' && self.peek_at(1) == Some(b'E') {
                    self.pos += 2;
                    self.quoting = false;
                } else {
                    self.pos += 1;
                    self.literal(u32::from(b))?;
                    self.atom_start = before;
                }
                continue;
            }
            if self.x {
                if is_x_space(b) {
                    self.pos += 1;
                    continue;
                }
                if b == b'#' {
                    while let Some(c) = self.bump() {
                        if c == b'\n' {
                            break;
                        }
                    }
                    continue;
                }
            }
            self.pos += 1;
            match b {
                b'\\' => self.escape()?,
                b'[' => self.class()?,
                b'(' => self.open_group()?,
                b')' => {
                    let saved = self.groups.pop().ok_or_else(|| invalid("unmatched )"))?;
                    self.x = saved.x;
                    self.i = saved.i;
                    self.out.push(')');
                    self.prev = Prev::Atom;
                    self.atom_start = saved.out_start;
                    continue;
                }
                b'|' => {
                    self.out.push('|');
                    self.prev = Prev::Nothing;
                }
                b'*' => self.quantify("*")?,
                b'+' => self.quantify("+")?,
                b'?' => self.quantify("?")?,
                b'{' => match self.brace_quantifier()? {
                    Some((q, len)) if self.prev != Prev::Nothing => {
                        self.pos += len;
                        self.quantify(&q)?;
                    }
                    _ => self.literal(u32::from(b'{'))?,
                },
                b'^' | b'$' => {
                    self.out.push(char::from(b));
                    self.prev = Prev::Assertion;
                }
                b'.' => self.atom("."),
                _ => self.literal(u32::from(b))?,
            }
            if self.prev == Prev::Atom && self.out.len() > before {
                self.atom_start = before;
            }
        }
        if !self.groups.is_empty() {
            return Err(invalid("unmatched ("));
        }
        Ok(())
    }

    fn atom(&mut self, text: &str) {
        self.out.push_str(text);
        self.prev = Prev::Atom;
    }

    fn assertion(&mut self, text: &str) {
        self.out.push_str(text);
        self.prev = Prev::Assertion;
    }

    /// A literal code point: a byte when <= 0xFF, else its UTF-8 bytes as one atom.
    fn literal(&mut self, cp: u32) -> Result<(), Unsupported> {
        if let Ok(b) = u8::try_from(cp) {
            push_byte(&mut self.out, b);
        } else {
            let (buf, n) = utf8_bytes(cp)?;
            self.out.push_str("(?:");
            for &b in buf.get(..n).unwrap_or(&[]) {
                push_byte(&mut self.out, b);
            }
            self.out.push(')');
        }
        self.prev = Prev::Atom;
        Ok(())
    }

    fn quantify(&mut self, q: &str) -> Result<(), Unsupported> {
        match self.prev {
            Prev::Atom => {}
            Prev::Nothing => return Err(invalid("quantifier follows nothing")),
            Prev::Assertion => return Err(invalid("quantifier on a zero-width assertion")),
            Prev::Quantified => return Err(invalid("nested quantifiers")),
        }
        self.out.push_str(q);
        match self.peek() {
            Some(b'?') => {
                self.pos += 1;
                self.out.push('?');
            }
            Some(b'+') if self.mode == Mode::Automaton => return Err(Unsupported::Possessive),
            Some(b'+') => {
                // `a*+` is `(?>a*)`.
                self.pos += 1;
                let k = self.special();
                let start = self.atom_start.min(self.out.len());
                let open = format!("(?P<{}{k}>", backtrack::Special::ATOMIC);
                if !self.out.is_char_boundary(start) {
                    return Err(invalid("possessive quantifier on nothing"));
                }
                self.out.insert_str(start, &open);
                self.out.push(')');
            }
            _ => {}
        }
        self.prev = Prev::Quantified;
        Ok(())
    }

    /// At the byte after `{`: a quantifier `{n}`, `{n,}`, `{n,m}`, `{,m}` (blanks
    /// allowed inside, as Perl 5.34+), normalized, with the bytes it spans after `{`.
    fn brace_quantifier(&self) -> Result<Option<(String, usize)>, Unsupported> {
        let rest = self.src.get(self.pos..).unwrap_or(&[]);
        let mut i = 0;
        let blanks = |i: &mut usize| {
            while matches!(rest.get(*i), Some(b' ' | b'\t')) {
                *i += 1;
            }
        };
        let number = |i: &mut usize| -> Option<u32> {
            let start = *i;
            let mut n: u32 = 0;
            while let Some(d) = rest.get(*i).filter(|d| d.is_ascii_digit()) {
                n = n.saturating_mul(10).saturating_add(u32::from(d - b'0'));
                *i += 1;
            }
            (*i > start).then_some(n)
        };
        blanks(&mut i);
        let min = number(&mut i);
        blanks(&mut i);
        let mut comma = false;
        let mut max = None;
        if rest.get(i) == Some(&b',') {
            comma = true;
            i += 1;
            blanks(&mut i);
            max = number(&mut i);
            blanks(&mut i);
        }
        if rest.get(i) != Some(&b'}') || (min.is_none() && max.is_none()) {
            return Ok(None);
        }
        i += 1;
        if min.unwrap_or(0) > MAX_REPEAT || max.unwrap_or(0) > MAX_REPEAT {
            return Err(invalid("quantifier bound above 65534"));
        }
        let q = match (min, comma, max) {
            (Some(n), false, _) => format!("{{{n}}}"),
            (Some(n), true, None) => format!("{{{n},}}"),
            (Some(n), true, Some(m)) if n > m => return Err(invalid("quantifier {n,m} with n > m")),
            (Some(n), true, Some(m)) => format!("{{{n},{m}}}"),
            (None, _, Some(m)) => format!("{{0,{m}}}"),
            (None, _, None) => return Ok(None),
        };
        Ok(Some((q, i)))
    }

    fn open(&mut self, new_x: bool, new_i: bool, text: &str) -> Result<(), Unsupported> {
        if self.groups.len() >= MAX_GROUP_DEPTH {
            return Err(construct("groups nested too deep"));
        }
        self.groups.push(OpenGroup { x: self.x, i: self.i, out_start: self.out.len() });
        self.x = new_x;
        self.i = new_i;
        self.out.push_str(text);
        self.prev = Prev::Nothing;
        Ok(())
    }

    /// After `(`.
    fn open_group(&mut self) -> Result<(), Unsupported> {
        match self.peek() {
            Some(b'*') => {
                use backtrack::Special;
                let rest = self.src.get(self.pos + 1..).unwrap_or(&[]);
                const VERBS: &[(&[u8], &str)] = &[
                    (b"atomic:", Special::ATOMIC),
                    (b"pla:", Special::AHEAD),
                    (b"positive_lookahead:", Special::AHEAD),
                    (b"nla:", Special::NOT_AHEAD),
                    (b"negative_lookahead:", Special::NOT_AHEAD),
                    (b"plb:", Special::BEHIND),
                    (b"positive_lookbehind:", Special::BEHIND),
                    (b"nlb:", Special::NOT_BEHIND),
                    (b"negative_lookbehind:", Special::NOT_BEHIND),
                ];
                let Some(&(verb, kind)) = VERBS.iter().find(|(verb, _)| rest.starts_with(verb)) else {
                    return Err(construct("backtracking control verb"));
                };
                let why = if kind == Special::ATOMIC { Unsupported::AtomicGroup } else { Unsupported::Lookaround };
                self.open_special(kind, why)?;
                self.pos += 1 + verb.len();
                Ok(())
            }
            Some(b'?') => {
                self.pos += 1;
                self.extended_group()
            }
            _ => {
                self.captures = self.captures.saturating_add(1);
                self.open_capture()
            }
        }
    }

    /// Opens capture group number `self.captures`: a plain group for an
    /// automaton, a named one for a backtracking program.
    fn open_capture(&mut self) -> Result<(), Unsupported> {
        match self.mode {
            Mode::Automaton => self.open(self.x, self.i, "(?:"),
            Mode::Backtrack => {
                let text = format!("(?P<{}{}>", backtrack::Special::CAPTURE, self.captures);
                self.open(self.x, self.i, &text)
            }
        }
    }

    /// After `(?`.
    fn extended_group(&mut self) -> Result<(), Unsupported> {
        use backtrack::Special;
        let Some(c) = self.peek() else {
            return Err(invalid("unterminated group"));
        };
        match c {
            b'#' => {
                while let Some(b) = self.bump() {
                    if b == b')' {
                        return Ok(());
                    }
                }
                Err(invalid("unterminated (?# comment"))
            }
            b':' => {
                self.pos += 1;
                self.open(self.x, self.i, "(?:")
            }
            // Branch reset renumbers captures: fine when nothing reads them.
            b'|' if self.mode == Mode::Automaton => {
                self.pos += 1;
                self.open(self.x, self.i, "(?:")
            }
            b'|' => Err(construct("branch reset (?|...) with backtracking")),
            b'=' | b'!' | b'>' => {
                let (kind, why) = match c {
                    b'=' => (Special::AHEAD, Unsupported::Lookaround),
                    b'!' => (Special::NOT_AHEAD, Unsupported::Lookaround),
                    _ => (Special::ATOMIC, Unsupported::AtomicGroup),
                };
                self.open_special(kind, why)?;
                self.pos += 1;
                Ok(())
            }
            b'<' => match self.peek_at(1) {
                Some(d @ (b'=' | b'!')) => {
                    let kind = if d == b'=' { Special::BEHIND } else { Special::NOT_BEHIND };
                    self.open_special(kind, Unsupported::Lookaround)?;
                    self.pos += 2;
                    Ok(())
                }
                _ => {
                    self.pos += 1;
                    self.named_group(b'>')
                }
            },
            b'\'' => {
                self.pos += 1;
                self.named_group(b'\'')
            }
            b'P' => match self.peek_at(1) {
                Some(b'<') => {
                    self.pos += 2;
                    self.named_group(b'>')
                }
                Some(b'=') => {
                    self.pos += 2;
                    let n = self.named_reference(b')')?;
                    self.backref(n)
                }
                Some(b'>') => Err(construct("recursion")),
                _ => Err(invalid("unknown (?P construct")),
            },
            b'(' => Err(construct("conditional")),
            b'{' => Err(construct("embedded code")),
            b'?' if self.peek_at(1) == Some(b'{') => Err(construct("embedded code")),
            b'R' | b'&' | b'+' | b'0'..=b'9' => Err(construct("recursion")),
            b'-' if self.peek_at(1).is_some_and(|d| d.is_ascii_digit()) => Err(construct("recursion")),
            b'^' | b'-' | b')' | b'a'..=b'z' | b'A'..=b'Z' => self.flag_group(),
            _ => Err(invalid("unknown (? construct")),
        }
    }

    /// A group name up to `close` (consumed); `None` when not a valid name.
    fn group_name(&mut self, close: u8) -> Option<Vec<u8>> {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if b == close {
                break;
            }
            if !is_word_byte(b) {
                return None;
            }
            self.pos += 1;
        }
        let name = self.src.get(start..self.pos).unwrap_or(&[]).to_vec();
        if self.bump() != Some(close) || name.first().is_none_or(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(name)
    }

    /// After `(?<`, `(?'` or `(?P<`: a named capture group.
    fn named_group(&mut self, close: u8) -> Result<(), Unsupported> {
        let name = self.group_name(close).ok_or_else(|| invalid("bad group name"))?;
        self.captures = self.captures.saturating_add(1);
        if self.mode == Mode::Backtrack {
            self.names.push((name, self.captures));
        }
        self.open_capture()
    }

    /// A reference by name up to `close`: the number of the group of that name.
    fn named_reference(&mut self, close: u8) -> Result<u32, Unsupported> {
        if self.mode == Mode::Automaton {
            return Err(Unsupported::Backreference);
        }
        let name = self.group_name(close).ok_or_else(|| invalid("bad group name in reference"))?;
        let mut found = self.names.iter().filter(|(n, _)| *n == name).map(|&(_, number)| number);
        match (found.next(), found.next()) {
            (Some(n), None) => Ok(n),
            (Some(_), Some(_)) => Err(construct("reference to a duplicated group name")),
            (None, _) => Err(invalid("reference to an unknown group name")),
        }
    }

    /// After `(?`: `(?flags)`, `(?flags:`, `(?^flags:`, `(?on-off:`.
    fn flag_group(&mut self) -> Result<(), Unsupported> {
        const LETTERS: [u8; 3] = [b'i', b'm', b's'];
        let mut on = [false; 3];
        let mut off = [false; 3];
        let mut x_set: Option<bool> = None;
        let mut x_count = 0;
        let caret = self.peek() == Some(b'^');
        if caret {
            self.pos += 1;
        }
        let mut negating = false;
        let terminator = loop {
            let Some(c) = self.bump() else {
                return Err(invalid("unterminated group"));
            };
            match c {
                b':' | b')' => break c,
                b'-' if negating || caret => return Err(invalid("bad flag negation")),
                b'-' => negating = true,
                b'i' | b'm' | b's' => {
                    let k = LETTERS.iter().position(|&l| l == c).unwrap_or(0);
                    if let Some(slot) = if negating { off.get_mut(k) } else { on.get_mut(k) } {
                        *slot = true;
                    }
                }
                b'x' => {
                    if !negating {
                        x_count += 1;
                        if x_count > 1 {
                            return Err(construct("/xx modifier"));
                        }
                    }
                    x_set = Some(!negating);
                }
                b'n' | b'p' | b'a' | b'd' | b'l' | b'o' | b'g' | b'c' => {}
                b'u' => return Err(construct("/u modifier")),
                _ => return Err(invalid("unknown group flag")),
            }
        };
        if caret {
            for (o, f) in off.iter_mut().zip(on.iter()) {
                *o = !*f;
            }
            x_set.get_or_insert(false);
        }
        let mut flags = String::new();
        for ((&letter, &o), &f) in LETTERS.iter().zip(off.iter()).zip(on.iter()) {
            if f && !o {
                flags.push(char::from(letter));
            }
        }
        if off.iter().any(|&o| o) {
            flags.push('-');
            for (&letter, &o) in LETTERS.iter().zip(off.iter()) {
                if o {
                    flags.push(char::from(letter));
                }
            }
        }
        let (i_on, i_off) = (on.first().copied().unwrap_or(false), off.first().copied().unwrap_or(false));
        let new_i = if i_off { false } else { i_on || self.i };
        if terminator == b':' {
            let new_x = x_set.unwrap_or(self.x);
            let text = format!("(?{flags}:");
            self.open(new_x, new_i, &text)
        } else {
            if let Some(x) = x_set {
                self.x = x;
            }
            self.i = new_i;
            if !flags.is_empty() {
                let _ = write!(self.out, "(?{flags})");
            }
            self.prev = Prev::Nothing;
            Ok(())
        }
    }

    /// After `\` outside a class.
    fn escape(&mut self) -> Result<(), Unsupported> {
        let Some(c) = self.bump() else {
            return Err(invalid("trailing backslash"));
        };
        match c {
            b'd' | b'D' | b'w' | b'W' | b's' | b'S' => {
                self.out.push('\\');
                self.out.push(char::from(c));
                self.prev = Prev::Atom;
            }
            b'h' => self.atom(HSPACE),
            b'H' => self.atom(NOT_HSPACE),
            b'v' => self.atom(VSPACE),
            b'V' => self.atom(NOT_VSPACE),
            b'R' => self.atom("(?:\\r\\n|[\\n\\x0B\\x0C\\r\\x85])"),
            b'N' if self.peek() == Some(b'{') => {
                let cp = self.named_char()?;
                self.literal(cp)?;
            }
            b'N' => self.atom("[^\\n]"),
            b'b' | b'B' if self.peek() == Some(b'{') => return Err(construct("\\b{} boundary")),
            b'b' => self.assertion("\\b"),
            b'B' => self.assertion("\\B"),
            b'A' => self.assertion("\\A"),
            b'z' | b'Z' => self.assertion("\\z"),
            b'G' => return Err(construct("\\G")),
            b'K' => return Err(construct("\\K")),
            b'X' => return Err(construct("\\X")),
            b'C' => self.atom("(?s:.)"),
            b'p' | b'P' => {
                let set = self.property(c == b'P')?;
                self.atom(&set);
            }
            b'Q' => self.quoting = true,
            b'E' => {}
            b'U' | b'L' | b'u' | b'l' | b'F' => return Err(construct("case-changing escape")),
            b'g' => self.g_reference()?,
            b'k' => {
                let close = match self.bump() {
                    Some(b'<') => b'>',
                    Some(b'{') => b'}',
                    Some(b'\'') => b'\'',
                    _ => return Err(invalid("bad \\k reference")),
                };
                let n = self.named_reference(close)?;
                self.backref(n)?;
            }
            b'1'..=b'9' => self.number_escape(c)?,
            _ => {
                let cp = self.char_escape(c)?;
                self.literal(cp)?;
            }
        }
        Ok(())
    }

    /// `\1`..`\9` and longer: a backreference, or octal when there are fewer groups.
    fn number_escape(&mut self, first: u8) -> Result<(), Unsupported> {
        let start = self.pos;
        let mut n = u32::from(first - b'0');
        while let Some(d) = self.peek().filter(|d| d.is_ascii_digit()) {
            n = n.saturating_mul(10).saturating_add(u32::from(d - b'0'));
            self.pos += 1;
        }
        if n < 10 || n <= self.captures || first > b'7' {
            return self.backref(n);
        }
        self.pos = start;
        let cp = self.octal_digits(u32::from(first - b'0'), 2);
        self.literal(cp)
    }

    /// After `\\g`: `\\gN`, `\\g-N`, `\\g{N}`, `\\g{-N}`, `\\g{name}`.
    fn g_reference(&mut self) -> Result<(), Unsupported> {
        if self.mode == Mode::Automaton {
            return Err(Unsupported::Backreference);
        }
        let braced = self.peek() == Some(b'{');
        if braced {
            self.pos += 1;
            if self.peek().is_some_and(|b| is_word_byte(b) && !b.is_ascii_digit()) {
                let n = self.named_reference(b'}')?;
                return self.backref(n);
            }
        }
        let relative = self.peek() == Some(b'-');
        if relative {
            self.pos += 1;
        }
        let mut n: u32 = 0;
        let mut digits = 0;
        while let Some(d) = self.peek().filter(|d| d.is_ascii_digit()) {
            n = n.saturating_mul(10).saturating_add(u32::from(d - b'0'));
            self.pos += 1;
            digits += 1;
        }
        if digits == 0 || (braced && self.bump() != Some(b'}')) {
            return Err(invalid("bad \\g reference"));
        }
        if relative {
            n = (self.captures + 1)
                .checked_sub(n)
                .filter(|&g| g > 0)
                .ok_or_else(|| invalid("bad relative reference"))?;
        }
        self.backref(n)
    }

    /// Reads up to `more` octal digits after an initial value.
    fn octal_digits(&mut self, initial: u32, more: usize) -> u32 {
        let mut v = initial;
        for _ in 0..more {
            match self.peek() {
                Some(d @ b'0'..=b'7') => {
                    v = v * 8 + u32::from(d - b'0');
                    self.pos += 1;
                }
                _ => break,
            }
        }
        v
    }

    /// Escapes with the same meaning inside and outside classes; anything else
    /// after a backslash is that character itself.
    fn char_escape(&mut self, c: u8) -> Result<u32, Unsupported> {
        Ok(match c {
            b'n' => 0x0A,
            b't' => 0x09,
            b'r' => 0x0D,
            b'f' => 0x0C,
            b'a' => 0x07,
            b'e' => 0x1B,
            b'c' => {
                let x = self.bump().filter(u8::is_ascii).ok_or_else(|| invalid("bad \\c escape"))?;
                u32::from(x.to_ascii_uppercase() ^ 0x40)
            }
            b'x' => self.hex()?,
            b'o' => self.braced_number(8)?,
            b'0' => self.octal_digits(0, 2),
            _ => u32::from(c),
        })
    }

    /// After `\x`: `\x{...}` or up to two hex digits.
    fn hex(&mut self) -> Result<u32, Unsupported> {
        if self.peek() == Some(b'{') {
            return self.braced_number(16);
        }
        let mut v = 0;
        for _ in 0..2 {
            match self.peek().and_then(|d| char::from(d).to_digit(16)) {
                Some(d) => {
                    v = v * 16 + d;
                    self.pos += 1;
                }
                None => break,
            }
        }
        Ok(v)
    }

    /// `{digits}` in `radix` (blanks and `_` allowed, a non-digit ends the number).
    fn braced_number(&mut self, radix: u32) -> Result<u32, Unsupported> {
        if self.bump() != Some(b'{') {
            return Err(invalid("missing { in escape"));
        }
        let mut v: u32 = 0;
        let mut in_digits = true;
        loop {
            let Some(b) = self.bump() else {
                return Err(invalid("missing } in escape"));
            };
            match b {
                b'}' => break,
                b' ' | b'\t' | b'_' => {}
                _ => match char::from(b).to_digit(radix) {
                    Some(d) if in_digits => v = v.saturating_mul(radix).saturating_add(d),
                    _ => in_digits = false,
                },
            }
        }
        if v > 0x10FFFF {
            return Err(construct("code point above U+10FFFF"));
        }
        Ok(v)
    }

    /// After `\N`, at `{`: `{U+hex}`; character names are not supported.
    fn named_char(&mut self) -> Result<u32, Unsupported> {
        if self.peek_at(1) != Some(b'U') || self.peek_at(2) != Some(b'+') {
            return Err(construct("\\N{name}"));
        }
        self.pos += 3;
        let mut v: u32 = 0;
        let mut any = false;
        loop {
            let Some(b) = self.bump() else {
                return Err(invalid("missing } in \\N{U+...}"));
            };
            if b == b'}' {
                break;
            }
            let d = char::from(b).to_digit(16).ok_or_else(|| invalid("bad \\N{U+...}"))?;
            v = v.saturating_mul(16).saturating_add(d);
            any = true;
        }
        if !any {
            return Err(invalid("bad \\N{U+...}"));
        }
        if v > 0x10FFFF {
            return Err(construct("code point above U+10FFFF"));
        }
        Ok(v)
    }

    /// After `\p` or `\P`: an ASCII-only property as a bracketed class.
    fn property(&mut self, mut negated: bool) -> Result<String, Unsupported> {
        let name: Vec<u8> = if self.peek() == Some(b'{') {
            self.pos += 1;
            let mut name = Vec::new();
            loop {
                let Some(b) = self.bump() else {
                    return Err(invalid("missing } in \\p{}"));
                };
                if b == b'}' {
                    break;
                }
                name.push(b);
            }
            name
        } else {
            let b = self.bump().ok_or_else(|| invalid("empty \\p"))?;
            alloc::vec![b]
        };
        let mut norm = String::new();
        for (i, &b) in name.iter().enumerate() {
            if i == 0 && b == b'^' {
                negated = !negated;
            } else if !matches!(b, b' ' | b'_' | b'-') {
                norm.push(char::from(b.to_ascii_lowercase()));
            }
        }
        let norm = norm.strip_prefix("is").unwrap_or(&norm);
        if norm == "ascii" {
            return Ok(String::from(if negated { "[^\\x00-\\x7F]" } else { "[\\x00-\\x7F]" }));
        }
        if let Some(class) = norm.strip_prefix("posix") {
            if let Some(&name) = POSIX_CLASSES.iter().find(|&&n| n == class) {
                return Ok(posix_set(name, negated));
            }
        }
        Err(construct("\\p{} Unicode property"))
    }

    /// After `[`: a bracketed class.
    fn class(&mut self) -> Result<(), Unsupported> {
        let negated = self.peek() == Some(b'^');
        if negated {
            self.pos += 1;
        }
        let mut inner = String::new();
        let mut big: Vec<(u32, u32)> = Vec::new();
        let mut first = true;
        loop {
            let Some(b) = self.peek() else {
                return Err(invalid("unterminated character class"));
            };
            if b == b']' && !first && !self.quoting {
                self.pos += 1;
                break;
            }
            first = false;
            let Some(member) = self.class_member()? else {
                continue;
            };
            let lo = match member {
                Member::Set(set) => {
                    inner.push_str(&set);
                    continue;
                }
                Member::Char(lo) => lo,
            };
            let is_range = !self.quoting && self.peek() == Some(b'-') && self.peek_at(1).is_some_and(|c| c != b']');
            if !is_range {
                push_class_char(&mut inner, &mut big, lo);
                continue;
            }
            self.pos += 1;
            match self.class_member()? {
                Some(Member::Char(hi)) => {
                    if hi < lo {
                        return Err(invalid("invalid range in class"));
                    }
                    push_class_range(&mut inner, &mut big, lo, hi);
                }
                Some(Member::Set(set)) => {
                    push_class_char(&mut inner, &mut big, lo);
                    push_byte(&mut inner, b'-');
                    inner.push_str(&set);
                }
                None => {
                    push_class_char(&mut inner, &mut big, lo);
                    push_byte(&mut inner, b'-');
                }
            }
        }
        if big.is_empty() {
            if inner.is_empty() {
                return Err(invalid("empty character class"));
            }
            self.out.push('[');
            if negated {
                self.out.push('^');
            }
            self.out.push_str(&inner);
            self.out.push(']');
        } else {
            if negated {
                return Err(construct("negated class with code points above 0xFF"));
            }
            self.out.push_str("(?:");
            let mut first_alt = true;
            if !inner.is_empty() {
                let _ = write!(self.out, "[{inner}]");
                first_alt = false;
            }
            for (lo, hi) in big {
                push_utf8_range(&mut self.out, lo, hi, &mut first_alt)?;
            }
            self.out.push(')');
        }
        self.prev = Prev::Atom;
        Ok(())
    }

    /// One member of a class (the caller knows a byte is there); `None` for `\Q`/`\E`.
    fn class_member(&mut self) -> Result<Option<Member>, Unsupported> {
        let Some(b) = self.bump() else {
            return Err(invalid("unterminated character class"));
        };
        if self.quoting {
            if b == b'\\' && self.peek() == Some(b'E') {
                self.pos += 1;
                self.quoting = false;
                return Ok(None);
            }
            return Ok(Some(Member::Char(u32::from(b))));
        }
        match b {
            b'\\' => {
                let Some(c) = self.bump() else {
                    return Err(invalid("trailing backslash"));
                };
                let set = |s: &str| Ok(Some(Member::Set(String::from(s))));
                match c {
                    b'd' => set("\\d"),
                    b'D' => set("\\D"),
                    b'w' => set("\\w"),
                    b'W' => set("\\W"),
                    b's' => set("\\s"),
                    b'S' => set("\\S"),
                    b'h' => set(HSPACE),
                    b'H' => set(NOT_HSPACE),
                    b'v' => set(VSPACE),
                    b'V' => set(NOT_VSPACE),
                    b'b' => Ok(Some(Member::Char(0x08))),
                    b'N' if self.peek() == Some(b'{') => Ok(Some(Member::Char(self.named_char()?))),
                    b'N' => Err(invalid("\\N in a class")),
                    b'p' | b'P' => Ok(Some(Member::Set(self.property(c == b'P')?))),
                    b'Q' => {
                        self.quoting = true;
                        Ok(None)
                    }
                    b'E' => Ok(None),
                    b'U' | b'L' | b'u' | b'l' | b'F' => Err(construct("case-changing escape")),
                    b'1'..=b'7' => Ok(Some(Member::Char(self.octal_digits(u32::from(c - b'0'), 2)))),
                    _ => Ok(Some(Member::Char(self.char_escape(c)?))),
                }
            }
            b'[' => match self.posix_class()? {
                Some(set) => Ok(Some(Member::Set(set))),
                None => Ok(Some(Member::Char(u32::from(b'[')))),
            },
            _ => Ok(Some(Member::Char(u32::from(b)))),
        }
    }

    /// After `[` inside a class: `[:name:]`, `[:^name:]`; `[.x.]` and `[=x=]` are
    /// errors in Perl. `None` when the `[` is a plain literal.
    fn posix_class(&mut self) -> Result<Option<String>, Unsupported> {
        let Some(delim @ (b':' | b'.' | b'=')) = self.peek() else {
            return Ok(None);
        };
        let rest = self.src.get(self.pos + 1..).unwrap_or(&[]);
        let negated = delim == b':' && rest.first() == Some(&b'^');
        let name_start = usize::from(negated);
        let name_len = rest.get(name_start..).unwrap_or(&[]).iter().take_while(|b| b.is_ascii_alphabetic()).count();
        let after = name_start + name_len;
        if rest.get(after) != Some(&delim) || rest.get(after + 1) != Some(&b']') {
            return Ok(None);
        }
        if delim != b':' {
            return Err(invalid("POSIX [. .] and [= =] are reserved"));
        }
        let name = rest.get(name_start..after).unwrap_or(&[]);
        let Some(&known) = POSIX_CLASSES.iter().find(|n| n.as_bytes() == name) else {
            return Err(invalid("unknown POSIX class"));
        };
        self.pos += 1 + after + 2;
        Ok(Some(posix_set(known, negated)))
    }
}

fn push_class_char(inner: &mut String, big: &mut Vec<(u32, u32)>, cp: u32) {
    match u8::try_from(cp) {
        Ok(b) => push_byte(inner, b),
        Err(_) => big.push((cp, cp)),
    }
}

fn push_class_range(inner: &mut String, big: &mut Vec<(u32, u32)>, lo: u32, hi: u32) {
    if lo <= 0xFF {
        let top = hi.min(0xFF);
        // Both fit in a byte here.
        push_byte(inner, u8::try_from(lo).unwrap_or(0));
        if top > lo {
            inner.push('-');
            push_byte(inner, u8::try_from(top).unwrap_or(0xFF));
        }
    }
    if hi > 0xFF {
        big.push((lo.max(0x100), hi));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_parses(out: &str) {
        let parsed = regex_syntax::ParserBuilder::new().unicode(false).utf8(false).build().parse(out);
        assert!(parsed.is_ok(), "output {out:?} does not parse: {parsed:?}");
    }

    #[test]
    fn translate_table() {
        type Row = (&'static str, Result<&'static str, Unsupported>);
        let lookaround = Err(Unsupported::Lookaround);
        let backref = Err(Unsupported::Backreference);
        let delim = Err(Unsupported::Delimiters);
        let rows: &[Row] = &[
            // Delimiters and modifiers.
            ("/abc/", Ok("abc")),
            ("/abc/i", Ok("(?i)abc")),
            ("/a.c/is", Ok("(?is)a.c")),
            ("/^a$/m", Ok("(?m)^a$")),
            ("/abc/og", Ok("abc")),
            ("/abc/ii", Ok("(?i)abc")),
            ("m{a/b}i", Ok("(?i)a/b")),
            ("m(a)", Ok("a")),
            ("m<a>", Ok("a")),
            ("m[a]", Ok("a")),
            ("m!a/b!", Ok("a/b")),
            ("m#a#", Ok("a")),
            ("m|a|", Ok("a")),
            ("m,a\\,b,", Ok("a,b")),
            ("m'https?://'i", Ok("(?i)https?://")),
            ("qr/a/", Ok("a")),
            ("m{a{2}}", Ok("a{2}")),
            ("/a\\/b/", Ok("a/b")),
            ("abc", delim.clone()),
            ("/abc", delim.clone()),
            ("/abc/e", delim.clone()),
            ("/a/b/", delim.clone()),
            ("m\\a\\", delim.clone()),
            ("mxax", delim.clone()),
            ("/", delim.clone()),
            ("m", delim.clone()),
            ("m{", delim.clone()),
            ("/a\\\\/b/", delim.clone()),
            ("m!a\\!b!", Ok("a!b")),
            ("/a/u", Err(Unsupported::Construct(String::from("/u modifier")))),
            ("/a/xx", Err(Unsupported::Construct(String::from("/xx modifier")))),
            ("/a/z", Err(Unsupported::Invalid(String::from("unknown modifier /z")))),
            ("/a/adln", Ok("a")),
            // Lenient escapes: escaped non-word characters are literals.
            ("/\\<a\\>/", Ok("<a>")),
            ("/\\-\\@\\_\\/\\#\\'\\\"/", Ok("\\-@_/\\#'\"")),
            ("/a\\.b\\*/", Ok("a\\.b\\*")),
            ("/\\ /", Ok(" ")),
            ("/\\%\\!\\,/", Ok("%!,")),
            ("/\\y/", Ok("y")),
            // Character escapes.
            ("/\\n\\t\\r\\f\\a\\e/", Ok("\\x0A\\x09\\x0D\\x0C\\x07\\x1B")),
            ("/\\0/", Ok("\\x00")),
            ("/\\012/", Ok("\\x0A")),
            ("/\\08/", Ok("\\x008")),
            ("/\\101/", Ok("A")),
            ("/\\10/", Ok("\\x08")),
            ("/\\18/", Ok("\\x018")),
            ("/\\cA\\c[/", Ok("\\x01\\x1B")),
            ("/\\x41\\x4g\\x/", Ok("A\\x04g\\x00")),
            ("/\\x{41}\\x{ 4_2 }/", Ok("AB")),
            ("/\\x{e9}/", Ok("\\xE9")),
            ("/\\xe9/", Ok("\\xE9")),
            ("/\\x{2019}/", Ok("(?:\\xE2\\x80\\x99)")),
            ("/\\x{2019}+/", Ok("(?:\\xE2\\x80\\x99)+")),
            ("/\\N{U+41}/", Ok("A")),
            ("/\\N{U+263A}/", Ok("(?:\\xE2\\x98\\xBA)")),
            ("/\\o{101}/", Ok("A")),
            ("/é/", Ok("\\xC3\\xA9")),
            ("/a\\é/", Ok("a\\xC3\\xA9")),
            ("/\\x{D800}/", Err(Unsupported::Construct(String::from("code point not a Unicode scalar value")))),
            ("/\\x{110000}/", Err(Unsupported::Construct(String::from("code point above U+10FFFF")))),
            ("/\\N{SNOWMAN}/", Err(Unsupported::Construct(String::from("\\N{name}")))),
            // Classes of characters and assertions.
            ("/\\d\\w\\s\\D\\W\\S/", Ok("\\d\\w\\s\\D\\W\\S")),
            ("/\\h\\H/", Ok("[\\t \\xA0][^\\t \\xA0]")),
            ("/\\v\\V/", Ok("[\\n\\x0B\\x0C\\r\\x85][^\\n\\x0B\\x0C\\r\\x85]")),
            ("/a\\R/", Ok("a(?:\\r\\n|[\\n\\x0B\\x0C\\r\\x85])")),
            ("/\\N/", Ok("[^\\n]")),
            ("/\\bfoo\\B/", Ok("\\bfoo\\B")),
            ("/\\Afoo\\z/", Ok("\\Afoo\\z")),
            ("/foo\\Z/", Ok("foo\\z")),
            ("/foo$/", Ok("foo$")),
            ("/\\C/", Ok("(?s:.)")),
            ("/\\G/", Err(Unsupported::Construct(String::from("\\G")))),
            ("/a\\K/", Err(Unsupported::Construct(String::from("\\K")))),
            ("/\\X/", Err(Unsupported::Construct(String::from("\\X")))),
            ("/\\b{wb}/", Err(Unsupported::Construct(String::from("\\b{} boundary")))),
            ("/\\p{L}/", Err(Unsupported::Construct(String::from("\\p{} Unicode property")))),
            ("/\\pL/", Err(Unsupported::Construct(String::from("\\p{} Unicode property")))),
            ("/\\p{ASCII}\\P{PosixAlpha}/", Ok("[\\x00-\\x7F][[:^alpha:]]")),
            ("/\\p{PosixDigit}/", Ok("[[:digit:]]")),
            ("/\\Ua/", Err(Unsupported::Construct(String::from("case-changing escape")))),
            // \Q...\E.
            ("/\\Qa.b*\\E+/", Ok("a\\.b\\*+")),
            ("/\\Qa.b/", Ok("a\\.b")),
            ("/x\\E/", Ok("x")),
            ("/[\\Q]\\E]/", Ok("[\\]]")),
            // Braces: a quantifier only when well formed.
            ("/a{2}/", Ok("a{2}")),
            ("/a{2,}/", Ok("a{2,}")),
            ("/a{2,5}/", Ok("a{2,5}")),
            ("/a{,5}/", Ok("a{0,5}")),
            ("/a{ 1 , 2 }/", Ok("a{1,2}")),
            ("/a{2}?/", Ok("a{2}?")),
            ("/a{,}/", Ok("a\\{,\\}")),
            ("/a{x}/", Ok("a\\{x\\}")),
            ("/{3}/", Ok("\\{3\\}")),
            ("/a{/", Ok("a\\{")),
            ("/a}/", Ok("a\\}")),
            ("/a]/", Ok("a\\]")),
            ("/a{3,2}/", Err(Unsupported::Invalid(String::from("quantifier {n,m} with n > m")))),
            ("/a{65535}/", Err(Unsupported::Invalid(String::from("quantifier bound above 65534")))),
            ("/x{3}{4}/", Err(Unsupported::Invalid(String::from("nested quantifiers")))),
            ("/a**/", Err(Unsupported::Invalid(String::from("nested quantifiers")))),
            ("/*a/", Err(Unsupported::Invalid(String::from("quantifier follows nothing")))),
            ("/a|*/", Err(Unsupported::Invalid(String::from("quantifier follows nothing")))),
            ("/^*/", Err(Unsupported::Invalid(String::from("quantifier on a zero-width assertion")))),
            ("/a*?b+?c??/", Ok("a*?b+?c??")),
            ("/a++/", Err(Unsupported::Possessive)),
            ("/a*+/", Err(Unsupported::Possessive)),
            ("/a?+/", Err(Unsupported::Possessive)),
            ("/a{2}+/", Err(Unsupported::Possessive)),
            ("/(?:a){2,3}+/", Err(Unsupported::Possessive)),
            // Groups.
            ("/(a|b)c/", Ok("(?:a|b)c")),
            ("/(?:a)/", Ok("(?:a)")),
            ("/(?<n>a)/", Ok("(?:a)")),
            ("/(?P<n>a)/", Ok("(?:a)")),
            ("/(?'n'a)/", Ok("(?:a)")),
            ("/(?<1n>a)/", Err(Unsupported::Invalid(String::from("bad group name")))),
            ("/(?|a|b)/", Ok("(?:a|b)")),
            ("/a(?#comment)b/", Ok("ab")),
            ("/a(?#c)*/", Ok("a*")),
            ("/(?i)a/", Ok("(?i)a")),
            ("/(?i:a)b/", Ok("(?i:a)b")),
            ("/(?-i)a/", Ok("(?-i)a")),
            ("/(?i-s:a)/", Ok("(?i-s:a)")),
            ("/(?^:a)/", Ok("(?-ims:a)")),
            ("/(?^i:a)/", Ok("(?i-ms:a)")),
            ("/(?^)a/", Ok("(?-ims)a")),
            ("/(?ii)a/", Ok("(?i)a")),
            ("/(?i-i)a/", Ok("(?-i)a")),
            ("/(?x)a b/", Ok("ab")),
            ("/(?x:a b) c/", Ok("(?:ab) c")),
            ("/(?a)a/", Ok("a")),
            ("/(?-)a/", Ok("a")),
            ("/(?^-i:a)/", Err(Unsupported::Invalid(String::from("bad flag negation")))),
            ("/(?z)a/", Err(Unsupported::Invalid(String::from("unknown group flag")))),
            ("/(a/", Err(Unsupported::Invalid(String::from("unmatched (")))),
            ("/a)/", Err(Unsupported::Invalid(String::from("unmatched )")))),
            ("/(+a)/", Err(Unsupported::Invalid(String::from("quantifier follows nothing")))),
            ("/(?=a)/", lookaround.clone()),
            ("/(?!a)/", lookaround.clone()),
            ("/(?<=a)/", lookaround.clone()),
            ("/(?<!a)/", lookaround.clone()),
            ("/(*pla:a)/", lookaround.clone()),
            ("/(?>a)/", Err(Unsupported::AtomicGroup)),
            ("/(*atomic:a)/", Err(Unsupported::AtomicGroup)),
            ("/(*FAIL)/", Err(Unsupported::Construct(String::from("backtracking control verb")))),
            ("/(?(1)a|b)/", Err(Unsupported::Construct(String::from("conditional")))),
            ("/(?R)/", Err(Unsupported::Construct(String::from("recursion")))),
            ("/(?1)/", Err(Unsupported::Construct(String::from("recursion")))),
            ("/(?-1)/", Err(Unsupported::Construct(String::from("recursion")))),
            ("/(?&n)/", Err(Unsupported::Construct(String::from("recursion")))),
            ("/(?P>n)/", Err(Unsupported::Construct(String::from("recursion")))),
            ("/(?{ 1 })/", Err(Unsupported::Construct(String::from("embedded code")))),
            ("/(??{ 1 })/", Err(Unsupported::Construct(String::from("embedded code")))),
            // Backreferences.
            ("/(a)\\1/", backref.clone()),
            ("/\\9/", backref.clone()),
            ("/\\g1/", backref.clone()),
            ("/\\g{-1}/", backref.clone()),
            ("/(?<n>a)\\k<n>/", backref.clone()),
            ("/(?P<n>a)(?P=n)/", backref.clone()),
            ("/(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)\\10/", backref.clone()),
            // /x mode.
            ("/a b # comment/x", Ok("ab")),
            ("/a\\ b/x", Ok("a b")),
            ("/a[ ]b/x", Ok("a[ ]b")),
            ("/a #c\n b/x", Ok("ab")),
            ("/a * /x", Ok("a*")),
            ("/a#b/", Ok("a\\#b")),
            // Character classes.
            ("/[abc]/", Ok("[abc]")),
            ("/[^abc]/", Ok("[^abc]")),
            ("/[]abc]/", Ok("[\\]abc]")),
            ("/[^]a]/", Ok("[^\\]a]")),
            ("/[a-z0-9_]/", Ok("[a-z0-9_]")),
            ("/[-a]/", Ok("[\\-a]")),
            ("/[a-]/", Ok("[a\\-]")),
            ("/[a-z-9]/", Ok("[a-z\\-9]")),
            ("/[\\w-z]/", Ok("[\\w\\-z]")),
            ("/[a-\\d]/", Ok("[a\\-\\d]")),
            ("/[\\b]/", Ok("[\\x08]")),
            ("/[[]/", Ok("[\\[]")),
            ("/[a[b]/", Ok("[a\\[b]")),
            ("/[&&]/", Ok("[\\&\\&]")),
            ("/[~~-]/", Ok("[\\~\\~\\-]")),
            ("/[--\\/]/", Ok("[\\--/]")),
            ("/[~~--]/", Err(Unsupported::Invalid(String::from("invalid range in class")))),
            ("/[a&&b]/", Ok("[a\\&\\&b]")),
            ("/[\\^^]/", Ok("[\\^\\^]")),
            ("/[.$()|*+?{}]/", Ok("[\\.\\$\\(\\)\\|\\*\\+\\?\\{\\}]")),
            ("/[\\]\\\\]/", Ok("[\\]\\\\]")),
            ("/[[:alpha:]]/", Ok("[[[:alpha:]]]")),
            ("/[^[:^digit:]x]/", Ok("[^[[:^digit:]]x]")),
            ("/[[:foo:]]/", Err(Unsupported::Invalid(String::from("unknown POSIX class")))),
            ("/[[.a.]]/", Err(Unsupported::Invalid(String::from("POSIX [. .] and [= =] are reserved")))),
            ("/[[:alpha]/", Ok("[\\[:alpha]")),
            ("/[\\h\\v]/", Ok("[[\\t \\xA0][\\n\\x0B\\x0C\\r\\x85]]")),
            ("/[\\x00-\\x1f\\x7f]/", Ok("[\\x00-\\x1F\\x7F]")),
            ("/[\\0-\\7\\10]/", Ok("[\\x00-\\x07\\x08]")),
            ("/[\\8]/", Ok("[8]")),
            ("/[é]/", Ok("[\\xC3\\xA9]")),
            ("/[i\\x{0456}]/", Ok("(?:[i]|\\xD1\\x96)")),
            ("/[\\x{2000}-\\x{200F}]/", Ok("(?:\\xE2\\x80[\\x80-\\x8F])")),
            ("/[\\xf0-\\x{101}]/", Ok("(?:[\\xF0-\\xFF]|\\xC4[\\x80-\\x81])")),
            ("/[^\\x{2019}]/", Err(Unsupported::Construct(String::from("negated class with code points above 0xFF")))),
            ("/[z-a]/", Err(Unsupported::Invalid(String::from("invalid range in class")))),
            ("/[abc/", Err(Unsupported::Invalid(String::from("unterminated character class")))),
            ("/[\\N]/", Err(Unsupported::Invalid(String::from("\\N in a class")))),
            ("/[\\p{L}]/", Err(Unsupported::Construct(String::from("\\p{} Unicode property")))),
            ("/[\\Q\\E]/", Err(Unsupported::Invalid(String::from("empty character class")))),
            // Trailing backslash.
            ("/a\\/", Err(Unsupported::Invalid(String::from("trailing backslash")))),
            ("m{a\\}", Err(Unsupported::Invalid(String::from("trailing backslash")))),
            // Real SpamAssassin rules.
            ("/\\bb(?:itcoin)[i\\x{0456}]t/i", Ok("(?i)\\bb(?:itcoin)(?:[i]|\\xD1\\x96)t")),
            ("m{^https?://[^/?\\s]+?:\\d+(?:/|\\s|$)}", Ok("^https?://[^/\\?\\s]+?:\\d+(?:/|\\s|$)")),
            ("/^\\s*(?:[12]\\d|3[01])\\s+(?i:Jan|Feb)$/", Ok("^\\s*(?:[12]\\d|3[01])\\s+(?i:Jan|Feb)$")),
            ("/X-Spam-Flag: YES/i", Ok("(?i)X\\-Spam\\-Flag: YES")),
        ];
        for (perl, want) in rows {
            let got = translate(perl);
            let want = want.clone().map(String::from);
            assert_eq!(got, want, "translate({perl:?})");
            if let Ok(out) = &got {
                check_parses(out);
            }
        }
    }

    #[test]
    fn backtracking_translation_table() {
        const ANY: &str = "(?s:.)*";
        let rows: &[(&str, Result<String, Unsupported>)] = &[
            ("/(a)\\1/", Ok(format!("(?P<c1>a)(?P<r1_1>{ANY})"))),
            ("/(a)\\1/i", Ok(format!("(?i)(?P<c1>a)(?P<ri1_1>{ANY})"))),
            ("/(a)(?i)\\1/", Ok(format!("(?P<c1>a)(?i)(?P<ri1_1>{ANY})"))),
            ("/(?i:(a))\\1/", Ok(format!("(?i:(?P<c1>a))(?P<r1_1>{ANY})"))),
            ("/(?i)(?-i:(a)\\1)/", Ok(format!("(?i)(?-i:(?P<c1>a)(?P<r1_1>{ANY}))"))),
            ("/(?^i:(a)\\1)/", Ok(format!("(?i-ms:(?P<c1>a)(?P<ri1_1>{ANY}))"))),
            (
                "/(?<n>a)\\k<n>\\k{n}\\k'n'(?P=n)/",
                Ok(format!("(?P<c1>a)(?P<r1_1>{ANY})(?P<r2_1>{ANY})(?P<r3_1>{ANY})(?P<r4_1>{ANY})")),
            ),
            (
                "/(a)(b)\\g1\\g{2}\\g-1\\g{-2}/",
                Ok(format!("(?P<c1>a)(?P<c2>b)(?P<r1_1>{ANY})(?P<r2_2>{ANY})(?P<r3_2>{ANY})(?P<r4_1>{ANY})")),
            ),
            ("/(?=a)(?!b)(?<=c)(?<!d)(?>e)/", Ok(String::from("(?P<pa1>a)(?P<na2>b)(?P<pb3>c)(?P<nb4>d)(?P<at5>e)"))),
            ("/(*pla:a)(*negative_lookbehind:b)(*atomic:c)/", Ok(String::from("(?P<pa1>a)(?P<nb2>b)(?P<at3>c)"))),
            ("/a++/", Ok(String::from("(?P<at1>a+)"))),
            ("/x\\d*+y/", Ok(String::from("x(?P<at1>\\d*)y"))),
            ("/(?:ab){2}+/", Ok(String::from("(?P<at1>(?:ab){2})"))),
            ("/(a)?+/", Ok(String::from("(?P<at1>(?P<c1>a)?)"))),
            ("/\\x{2019}++/", Ok(String::from("(?P<at1>(?:\\xE2\\x80\\x99)+)"))),
            ("/a\\Q+\\E++/", Ok(String::from("a(?P<at1>\\++)"))),
            ("/[ab]*+/", Ok(String::from("(?P<at1>[ab]*)"))),
            ("/(?|(a)|(b))\\1/", Err(Unsupported::Construct(String::from("branch reset (?|...) with backtracking")))),
            ("/\\k<x>(?<x>a)/", Err(Unsupported::Invalid(String::from("reference to an unknown group name")))),
            (
                "/(?<x>a)(?<x>b)\\k<x>/",
                Err(Unsupported::Construct(String::from("reference to a duplicated group name"))),
            ),
            ("/(a)\\g{-2}/", Err(Unsupported::Invalid(String::from("bad relative reference")))),
            ("/\\g/", Err(Unsupported::Invalid(String::from("bad \\g reference")))),
            ("/(?=a)\\G/", Err(Unsupported::Construct(String::from("\\G")))),
        ];
        for (perl, want) in rows {
            let (body, flags) = split_literal(perl).expect("literal");
            let got = translate_backtracking(body, flags);
            assert_eq!(&got, want, "{perl}");
            if let Ok(out) = &got {
                check_parses(out);
            }
        }
    }

    #[test]
    fn plan_table() {
        let rows: &[(&str, Result<bool, Unsupported>)] = &[
            ("/abc/", Ok(false)),
            ("/a(?=b)/", Ok(true)),
            ("/(a)\\1/", Ok(true)),
            ("/(?>a)/", Ok(true)),
            ("/a++/", Ok(true)),
            ("/(a)\\2/", Err(Unsupported::Invalid(String::from("reference to nonexistent group 2")))),
            ("/(?=a)\\p{L}/", Err(Unsupported::Construct(String::from("\\p{} Unicode property")))),
            ("/\\p{L}/", Err(Unsupported::Construct(String::from("\\p{} Unicode property")))),
        ];
        for (perl, want) in rows {
            let got = plan(perl).map(|p| matches!(p, Plan::Backtrack(_)));
            assert_eq!(&got, want, "{perl}");
        }
        assert!(Unsupported::Lookaround.needs_backtracking());
        assert!(!Unsupported::Construct(String::from("\\G")).needs_backtracking());
    }

    #[test]
    fn split_literal_table() {
        let rows: &[(&str, Option<(&str, &str)>)] = &[
            ("/a/", Some(("a", ""))),
            ("/a/imsx", Some(("a", "imsx"))),
            ("m{a}b}", Some(("a}b", ""))),
            ("m(a(b)c)i", Some(("a(b)c", "i"))),
            ("m<a\\>b>", Some(("a\\>b", ""))),
            ("m<a>b>", None),
            ("/a\\\\/", Some(("a\\\\", ""))),
            ("qr{x}", Some(("x", ""))),
            ("m é", None),
        ];
        for (perl, want) in rows {
            assert_eq!(split_literal(perl).ok(), *want, "{perl:?}");
        }
    }

    #[test]
    fn has_unescaped_table() {
        // SpamAssassin's check spelled out: drop every `\\` pair, then look for the
        // delimiter without a backslash before it.
        fn spelled_out(body: &[u8], delim: u8) -> bool {
            let mut prev_backslash = false;
            let mut i = 0;
            while let Some(&b) = body.get(i) {
                if b == b'\\' && body.get(i + 1) == Some(&b'\\') {
                    i += 2;
                    continue;
                }
                if b == delim && !prev_backslash {
                    return true;
                }
                prev_backslash = b == b'\\';
                i += 1;
            }
            false
        }
        let rows: &[(&[u8], u8, bool)] = &[
            (b"abc", b'/', false),
            (b"a/b", b'/', true),
            (b"a\\/b", b'/', false),
            (b"a\\\\/b", b'/', true),
            (b"a\\\\\\/b", b'/', false),
            (b"/", b'/', true),
            (b"\\", b'/', false),
            (b"a\\", b'\\', true),
            (b"a\\\\", b'\\', false),
            (b"\\\\\\", b'\\', true),
            (b"x>", b'>', true),
        ];
        for &(body, delim, want) in rows {
            assert_eq!(has_unescaped(body, delim), want, "{body:?} {delim}");
        }
        // Every body of up to six bytes from `\`, `/` and `a`, against the spelled-out check.
        for len in 0..=6u32 {
            for n in 0..3usize.pow(len) {
                let body: Vec<u8> = (0..len).map(|k| [b'\\', b'/', b'a'][n / 3usize.pow(k) % 3]).collect();
                for delim in [b'/', b'\\'] {
                    assert_eq!(has_unescaped(&body, delim), spelled_out(&body, delim), "{body:?} {delim}");
                }
            }
        }
    }

    #[test]
    fn hostile_inputs_do_not_panic() {
        let mut deep = String::from("/");
        for _ in 0..500 {
            deep.push('(');
        }
        deep.push('a');
        for _ in 0..500 {
            deep.push(')');
        }
        deep.push('/');
        assert_eq!(translate(&deep), Err(Unsupported::Construct(String::from("groups nested too deep"))));
        let inputs = [
            "/\\",
            "/[",
            "/[\\",
            "/(?",
            "/(?<",
            "/(?P",
            "/\\x{",
            "/\\o{1",
            "/\\N{U+",
            "/\\c",
            "/[[:",
            "/a{99999999999999}/",
            "/\\99999999999999999/",
            "/(?#",
            "/\\p{",
            "/[a-/",
            "/[\\x{10FFFF}-\\x{0}]/",
            "m\u{0}a\u{0}",
        ];
        for input in inputs {
            let _ = translate(input);
            let with_end = format!("{input}/");
            if let Ok(out) = translate(&with_end) {
                check_parses(&out);
            }
        }
        // Every printable ASCII pair and triple, as a body, either fails or parses.
        let alphabet: Vec<u8> = (0x20u8..0x7F).collect();
        for &a in &alphabet {
            for &b in &alphabet {
                for c in [b'a', b'\\', b'(', b'[', b'{', b'}', b'*', b'?'] {
                    let body = [a, b, c];
                    let Ok(body) = core::str::from_utf8(&body) else { continue };
                    if let Ok(out) = translate_body(body, "") {
                        check_parses(&out);
                    }
                    if let Ok(out) = translate_body(body, "x") {
                        check_parses(&out);
                    }
                }
            }
        }
    }
}
