//! A small backtracking matcher for the fixed patterns the eval tests use (the
//! `Received` parser's MTA formats, the forged-relay checks): Perl's semantics
//! (leftmost, first alternative wins, greedy and lazy quantifiers, captures,
//! lookahead, fixed-width lookbehind, backreferences) on bytes, ASCII classes.
//!
//! Only patterns written in this crate are compiled here, never rule-file text, and
//! every run has a step budget: a search that exceeds it reports no match, so the
//! cost per header stays bounded whatever the message holds. Searches write into a
//! caller-owned [`Search`], so a warm run allocates nothing.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

/// Capture groups a pattern may have (group 0 is the whole match).
pub const MAX_GROUPS: usize = 10;
/// Steps one search may take before it gives up (reports no match).
const STEP_BUDGET: u32 = 200_000;
/// Backtracking entries one search may hold before it gives up (8 bytes each).
const STACK_LIMIT: usize = 4096;
/// Lookaround nesting allowed in a pattern.
const MAX_LOOK_DEPTH: u32 = 2;
/// Nested runs (lookarounds, sub-pattern calls) allowed while matching.
const MAX_RUN_DEPTH: u32 = 6;

/// A pattern that does not compile (a bug in this crate's pattern text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    /// Byte offset in the pattern.
    pub at: usize,
    /// What is wrong.
    pub why: &'static str,
}

impl core::fmt::Display for PatternError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "pattern error at {}: {}", self.at, self.why)
    }
}

type Set = [u64; 4];

fn set_has(set: &Set, b: u8) -> bool {
    set.get(usize::from(b >> 6)).is_some_and(|w| w & (1u64 << (b & 63)) != 0)
}

fn set_add(set: &mut Set, b: u8) {
    if let Some(w) = set.get_mut(usize::from(b >> 6)) {
        *w |= 1u64 << (b & 63);
    }
}

fn set_range(set: &mut Set, lo: u8, hi: u8) {
    for b in lo..=hi {
        set_add(set, b);
    }
}

fn set_union(set: &mut Set, other: &Set) {
    for (a, b) in set.iter_mut().zip(other.iter()) {
        *a |= *b;
    }
}

fn set_not(set: &Set) -> Set {
    [!set[0], !set[1], !set[2], !set[3]]
}

/// Perl's `\s` on bytes: space, `\t`, `\n`, `\x0b`, `\f`, `\r`.
pub fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Perl's `\w` on bytes (ASCII).
pub fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn class_set(kind: u8) -> Set {
    let mut s = [0u64; 4];
    match kind {
        b'd' | b'D' => set_range(&mut s, b'0', b'9'),
        b's' | b'S' => {
            for b in 0..=255u8 {
                if is_space(b) {
                    set_add(&mut s, b);
                }
            }
        }
        _ => {
            for b in 0..=255u8 {
                if is_word(b) {
                    set_add(&mut s, b);
                }
            }
        }
    }
    if kind.is_ascii_uppercase() {
        set_not(&s)
    } else {
        s
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Assertion {
    /// `^` (no /m): start of text.
    Start,
    /// `$` (no /m): end of text or before a final `\n`.
    End,
    /// `\z`
    EndAbs,
    /// `\b`
    WordBoundary,
    /// `\B`
    NotWordBoundary,
}

#[derive(Debug, Clone)]
enum Node {
    Empty,
    Set(Box<Set>),
    Assert(Assertion),
    Group(Option<u8>, Box<Node>),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
        greedy: bool,
    },
    Look {
        ahead: bool,
        negate: bool,
        node: Box<Node>,
    },
    BackRef(u8),
    /// `(?&NAME)`: a named sub-pattern, matched atomically.
    Call(u8),
}

#[derive(Debug, Clone, Copy)]
enum Inst {
    Set(u16),
    /// `class{min,max}` greedy (`max` `u16::MAX`: unbounded).
    Star {
        set: u16,
        min: u16,
        max: u16,
        /// The class the next consuming instruction needs ([`NO_FOLLOW`]: not a
        /// plain class): bytes are given back only down to one in it.
        follow: u16,
    },
    /// A [`Inst::Star`] never given back: the next instruction needs a byte its class lacks.
    Possessive {
        set: u16,
        min: u16,
        max: u16,
    },
    Split(u32, u32),
    Jmp(u32),
    Save(u8),
    Assert(Assertion),
    /// A lookaround: its body runs from the next instruction to `end` (exclusive,
    /// ending in `Match`); the pattern goes on at `end`.
    Look {
        ahead: bool,
        negate: bool,
        width: u16,
        end: u32,
    },
    BackRef(u8),
    Call(u8),
    Match,
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Regex {
    prog: Vec<Inst>,
    sets: Vec<Set>,
    groups: u8,
    /// Starts with `^`: only position 0 is tried.
    anchored: bool,
    /// Bytes a match can start with, when known: other positions are skipped.
    first: Option<Set>,
    /// Backreferences compare case-insensitively.
    icase: bool,
    /// Sub-patterns called with `(?&NAME)`.
    subs: Vec<Arc<Regex>>,
    /// A cheap necessary condition for a match at a position (sub-patterns only).
    guard: Option<Guard>,
    /// Bytes every match starts with (after zero-width assertions), when two or more:
    /// candidate positions are found with a substring search.
    prefix: Vec<u8>,
    /// `prefix` is lower case and letters in it match either case.
    prefix_icase: bool,
    /// The index of the byte of `prefix` searched for first.
    prefix_anchor: usize,
    /// Bytes every match contains (lower case when `required_icase`), when three or
    /// more: a text without them is rejected before any match is tried.
    required: Vec<u8>,
    required_icase: bool,
    /// The index of the byte of `required` searched for first.
    required_anchor: usize,
}

/// [`Inst::Star`] without a known follow class.
const NO_FOLLOW: u16 = u16::MAX;

/// Native pre-checks of the IP sub-patterns: a position where they fail cannot
/// start a match, so the full pattern is not tried there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guard {
    /// `IP_ADDRESS`
    Ip,
    /// `IPV4_ADDRESS`
    Ipv4,
    /// `LOCALHOST`
    Localhost,
}

impl Guard {
    fn may_start(self, h: &[u8], p: usize) -> bool {
        let prev = p.checked_sub(1).and_then(|i| h.get(i)).copied();
        let Some(c) = h.get(p).copied() else {
            return false;
        };
        let quad_start = || {
            let n = h.get(p..).map_or(0, |r| r.iter().take(4).take_while(|b| b.is_ascii_digit()).count());
            (1..=3).contains(&n) && h.get(p + n) == Some(&b'.')
        };
        let ipv4 = || c.is_ascii_digit() && !prev.is_some_and(|b| is_word(b) || b == b':') && quad_start();
        let hexc = |b: u8| b.is_ascii_hexdigit() || b == b':';
        let ipv6 = || {
            h.get(p..p + 5).is_some_and(|w| w.eq_ignore_ascii_case(b"ipv6:"))
                || (hexc(c)
                    && !prev.is_some_and(hexc)
                    && h.get(p..).is_some_and(|r| r.iter().take(45).take_while(|&&b| hexc(b)).any(|&b| b == b':')))
        };
        match self {
            Guard::Ipv4 => c.is_ascii_digit() && !prev.is_some_and(is_word) && quad_start(),
            Guard::Ip => ipv4() || ipv6(),
            Guard::Localhost => {
                h.get(p..p + 9).is_some_and(|w| w.eq_ignore_ascii_case(b"localhost")) || ipv4() || ipv6()
            }
        }
    }

    fn first_set(self) -> Set {
        let mut s = [0u64; 4];
        set_range(&mut s, b'0', b'9');
        if self != Guard::Ipv4 {
            set_range(&mut s, b'a', b'f');
            set_range(&mut s, b'A', b'F');
            for b in [b':', b'i', b'I'] {
                set_add(&mut s, b);
            }
        }
        if self == Guard::Localhost {
            set_add(&mut s, b'l');
            set_add(&mut s, b'L');
        }
        s
    }
}

struct Parser<'p, 's> {
    p: &'p [u8],
    i: usize,
    icase: bool,
    groups: u8,
    named: &'s [(&'static str, Arc<Regex>)],
    used: Vec<Arc<Regex>>,
}

impl Parser<'_, '_> {
    fn err(&self, why: &'static str) -> PatternError {
        PatternError { at: self.i, why }
    }

    fn peek(&self) -> Option<u8> {
        self.p.get(self.i).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn literal(&self, b: u8) -> Node {
        let mut s = [0u64; 4];
        set_add(&mut s, b);
        if self.icase && b.is_ascii_alphabetic() {
            set_add(&mut s, b.to_ascii_lowercase());
            set_add(&mut s, b.to_ascii_uppercase());
        }
        Node::Set(Box::new(s))
    }

    fn alternation(&mut self, depth: u32) -> Result<Node, PatternError> {
        if depth > 32 {
            return Err(self.err("nested too deeply"));
        }
        let mut alts = alloc::vec![self.concat(depth)?];
        while self.eat(b'|') {
            alts.push(self.concat(depth)?);
        }
        Ok(if alts.len() == 1 { alts.pop().unwrap_or(Node::Empty) } else { Node::Alt(alts) })
    }

    fn concat(&mut self, depth: u32) -> Result<Node, PatternError> {
        let mut items = Vec::new();
        while let Some(b) = self.peek() {
            if b == b'|' || b == b')' {
                break;
            }
            let atom = self.atom(depth)?;
            let atom = self.quantified(atom)?;
            items.push(atom);
        }
        Ok(Node::Concat(items))
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.i;
        let mut n: u32 = 0;
        while let Some(d) = self.peek().filter(u8::is_ascii_digit) {
            n = n.checked_mul(10)?.checked_add(u32::from(d - b'0'))?;
            self.i += 1;
        }
        (self.i > start).then_some(n)
    }

    fn quantified(&mut self, atom: Node) -> Result<Node, PatternError> {
        let (min, max) = match self.peek() {
            Some(b'*') => (0, None),
            Some(b'+') => (1, None),
            Some(b'?') => (0, Some(1)),
            Some(b'{') => {
                let save = self.i;
                self.i += 1;
                let Some(min) = self.number() else {
                    self.i = save;
                    return Ok(atom);
                };
                let max = if self.eat(b',') { self.number() } else { Some(min) };
                if !self.eat(b'}') {
                    return Err(self.err("bad {n,m}"));
                }
                self.i -= 1;
                (min, max)
            }
            _ => return Ok(atom),
        };
        self.i += 1;
        if max.is_some_and(|m| m < min) || min > 255 || max.is_some_and(|m| m > 255) {
            return Err(self.err("bad repetition count"));
        }
        let greedy = !self.eat(b'?');
        if matches!(self.peek(), Some(b'*' | b'+' | b'?' | b'{')) {
            return Err(self.err("nested quantifier"));
        }
        Ok(Node::Repeat { node: Box::new(atom), min, max, greedy })
    }

    fn escape_set(&mut self) -> Result<Result<Set, u8>, PatternError> {
        let Some(c) = self.peek() else {
            return Err(self.err("trailing backslash"));
        };
        self.i += 1;
        Ok(match c {
            b'd' | b'D' | b's' | b'S' | b'w' | b'W' => Ok(class_set(c)),
            b't' => Err(b'\t'),
            b'n' => Err(b'\n'),
            b'r' => Err(b'\r'),
            b'f' => Err(0x0c),
            b'e' => Err(0x1b),
            b'0' => Err(0),
            b'x' => {
                let hex = |b: u8| char::from(b).to_digit(16);
                let (Some(h), Some(l)) = (self.peek().and_then(hex), self.p.get(self.i + 1).copied().and_then(hex))
                else {
                    return Err(self.err("bad \\x"));
                };
                self.i += 2;
                Err(u8::try_from(h * 16 + l).unwrap_or(0))
            }
            c if c.is_ascii_alphanumeric() => return Err(self.err("unknown escape")),
            c => Err(c),
        })
    }

    fn bracket(&mut self) -> Result<Node, PatternError> {
        let negate = self.eat(b'^');
        let mut s = [0u64; 4];
        let mut first = true;
        loop {
            let Some(b) = self.peek() else {
                return Err(self.err("unclosed ["));
            };
            if b == b']' && !first {
                self.i += 1;
                break;
            }
            first = false;
            self.i += 1;
            let lo = if b == b'\\' {
                match self.escape_set()? {
                    Ok(class) => {
                        set_union(&mut s, &class);
                        continue;
                    }
                    Err(byte) => byte,
                }
            } else {
                b
            };
            if self.peek() == Some(b'-') && self.p.get(self.i + 1).is_some_and(|&n| n != b']') {
                self.i += 1;
                let Some(h) = self.peek() else {
                    return Err(self.err("unclosed ["));
                };
                self.i += 1;
                let hi = if h == b'\\' {
                    match self.escape_set()? {
                        Ok(_) => return Err(self.err("class in range")),
                        Err(byte) => byte,
                    }
                } else {
                    h
                };
                if hi < lo {
                    return Err(self.err("bad range"));
                }
                set_range(&mut s, lo, hi);
            } else {
                set_add(&mut s, lo);
            }
        }
        if self.icase {
            for b in b'a'..=b'z' {
                let u = b.to_ascii_uppercase();
                if set_has(&s, b) || set_has(&s, u) {
                    set_add(&mut s, b);
                    set_add(&mut s, u);
                }
            }
        }
        Ok(Node::Set(Box::new(if negate { set_not(&s) } else { s })))
    }

    fn atom(&mut self, depth: u32) -> Result<Node, PatternError> {
        let Some(b) = self.peek() else {
            return Err(self.err("unexpected end"));
        };
        self.i += 1;
        match b {
            b'.' => {
                let mut s = set_not(&[0; 4]);
                if let Some(w) = s.get_mut(0) {
                    *w &= !(1u64 << b'\n');
                }
                Ok(Node::Set(Box::new(s)))
            }
            b'^' => Ok(Node::Assert(Assertion::Start)),
            b'$' => Ok(Node::Assert(Assertion::End)),
            b'[' => self.bracket(),
            b'(' => {
                let node = if self.eat(b'?') {
                    let kind = self.peek();
                    self.i += 1;
                    match kind {
                        Some(b':') => Node::Group(None, Box::new(self.alternation(depth + 1)?)),
                        Some(b'i') | Some(b'-') => {
                            let on = kind == Some(b'i');
                            if !on && !self.eat(b'i') {
                                return Err(self.err("unsupported flag"));
                            }
                            if !self.eat(b':') {
                                return Err(self.err("only (?i:...) and (?-i:...) flags"));
                            }
                            let outer = self.icase;
                            self.icase = on;
                            let inner = self.alternation(depth + 1);
                            self.icase = outer;
                            Node::Group(None, Box::new(inner?))
                        }
                        Some(b'&') => {
                            let start = self.i;
                            while self.peek().is_some_and(|b| b.is_ascii_alphanumeric()) {
                                self.i += 1;
                            }
                            let name = self.p.get(start..self.i).unwrap_or(&[]);
                            let Some((_, sub)) = self.named.iter().find(|(n, _)| n.as_bytes() == name) else {
                                return Err(self.err("unknown sub-pattern"));
                            };
                            let idx = match self.used.iter().position(|u| Arc::ptr_eq(u, sub)) {
                                Some(i) => i,
                                None => {
                                    self.used.push(Arc::clone(sub));
                                    self.used.len() - 1
                                }
                            };
                            Node::Call(u8::try_from(idx).map_err(|_| self.err("too many sub-patterns"))?)
                        }
                        Some(b'=') | Some(b'!') => Node::Look {
                            ahead: true,
                            negate: kind == Some(b'!'),
                            node: Box::new(self.alternation(depth + 1)?),
                        },
                        Some(b'<') => {
                            let negate = match self.peek() {
                                Some(b'!') => true,
                                Some(b'=') => false,
                                _ => return Err(self.err("bad lookbehind")),
                            };
                            self.i += 1;
                            Node::Look { ahead: false, negate, node: Box::new(self.alternation(depth + 1)?) }
                        }
                        _ => return Err(self.err("unsupported group")),
                    }
                } else {
                    self.groups += 1;
                    if usize::from(self.groups) >= MAX_GROUPS {
                        return Err(self.err("too many groups"));
                    }
                    let n = self.groups;
                    Node::Group(Some(n), Box::new(self.alternation(depth + 1)?))
                };
                if !self.eat(b')') {
                    return Err(self.err("unclosed ("));
                }
                Ok(node)
            }
            b')' | b'|' => Err(self.err("unexpected")),
            b'*' | b'+' | b'?' => Err(self.err("quantifier without atom")),
            b'\\' => {
                match self.peek() {
                    Some(b'b') => {
                        self.i += 1;
                        return Ok(Node::Assert(Assertion::WordBoundary));
                    }
                    Some(b'B') => {
                        self.i += 1;
                        return Ok(Node::Assert(Assertion::NotWordBoundary));
                    }
                    Some(b'z') => {
                        self.i += 1;
                        return Ok(Node::Assert(Assertion::EndAbs));
                    }
                    Some(b'A') => {
                        self.i += 1;
                        return Ok(Node::Assert(Assertion::Start));
                    }
                    Some(d @ b'1'..=b'9') => {
                        self.i += 1;
                        return Ok(Node::BackRef(d - b'0'));
                    }
                    _ => {}
                }
                match self.escape_set()? {
                    Ok(class) => Ok(Node::Set(Box::new(class))),
                    Err(byte) => Ok(self.literal(byte)),
                }
            }
            b => Ok(self.literal(b)),
        }
    }
}

/// How rare each byte is in mail headers, roughly (0 commonest): the substring
/// searches look for the rarest byte of their needle first.
const RARITY: [u8; 256] = {
    let mut t = [3u8; 256];
    let mut b = 0;
    while b < 256 {
        if (b as u8).is_ascii_alphanumeric() {
            t[b] = 2;
        }
        b += 1;
    }
    let common = b"etaoinsrhldcm.";
    let mut i = 0;
    while i < common.len() {
        t[common[i] as usize] = 1;
        i += 1;
    }
    t[b' ' as usize] = 0;
    t
};

/// The index of the rarest byte of `needle` (the first of equals).
fn anchor_of(needle: &[u8]) -> usize {
    let rarity = |b: u8| RARITY.get(usize::from(b)).copied().unwrap_or(0);
    let mut best = (0, 0);
    for (i, &b) in needle.iter().enumerate() {
        let r = rarity(b);
        if r > best.1 || i == 0 {
            best = (i, r);
        }
        if r == 3 {
            break;
        }
    }
    best.0
}

/// The first position of `needle` (not empty) in `hay`: short needles in short lines,
/// where a scan for its rarest byte beats setting up a substring searcher.
pub fn find_bytes(hay: &[u8], needle: &[u8]) -> Option<usize> {
    find_anchored(hay, needle, anchor_of(needle), false)
}

/// [`find_bytes`] ignoring ASCII case: `needle` (not empty) is lower case.
pub fn find_bytes_icase(hay: &[u8], needle: &[u8]) -> Option<usize> {
    find_anchored(hay, needle, anchor_of(needle), true)
}

/// The first position of `needle` in `hay`, found by looking for its byte `k` first.
fn find_anchored(hay: &[u8], needle: &[u8], k: usize, icase: bool) -> Option<usize> {
    let &lower = needle.get(k)?;
    let upper = if icase { lower.to_ascii_uppercase() } else { lower };
    // Candidates for the anchor byte start at `k`: the needle starts `k` bytes before.
    let mut from = k;
    loop {
        let r = hay.get(from..)?;
        let found = if upper == lower { memchr::memchr(lower, r) } else { memchr::memchr2(lower, upper, r) }?;
        let start = from + found - k;
        let window = hay.get(start..start + needle.len())?;
        if if icase { window.eq_ignore_ascii_case(needle) } else { window == needle } {
            return Some(start);
        }
        from += found + 1;
    }
}

/// The literal bytes every match of `node` starts with (after leading assertions),
/// and whether they match in either case (then they are given lower case). A prefix
/// stops where a byte would need the other mode.
fn literal_prefix(node: &Node) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut icase: Option<bool> = None;
    let Node::Concat(items) = node else { return (out, false) };
    for item in items.iter().skip_while(|n| matches!(n, Node::Assert(_))) {
        let Node::Set(set) = item else { break };
        let Some((byte, folded)) = set_literal(set) else { break };
        if let Some(f) = folded {
            if icase.is_some_and(|m| m != f) {
                break;
            }
            icase = Some(f);
        }
        out.push(byte);
    }
    (out, icase == Some(true))
}

/// The byte a class stands for, when it is one byte, or one letter in either case
/// (then `Some(true)` and the lower case letter); `(byte, None)` for a non-letter.
fn set_literal(set: &Set) -> Option<(u8, Option<bool>)> {
    let mut members = [0u8; 2];
    let mut count = 0;
    for b in 0..=255u8 {
        if set_has(set, b) {
            *members.get_mut(count)? = b;
            count += 1;
        }
    }
    let [a, b] = members;
    match count {
        1 => Some((a, a.is_ascii_alphabetic().then_some(false))),
        2 if a.is_ascii_uppercase() && b == a.to_ascii_lowercase() => Some((b, Some(true))),
        _ => None,
    }
}

/// The longest run of literal bytes among the items every match of `node` goes
/// through in order (top level, and groups that are not repeated or alternated),
/// and whether it matches in either case.
fn required_literal(node: &Node) -> (Vec<u8>, bool) {
    fn walk(node: &Node, run: &mut (Vec<u8>, Option<bool>), best: &mut (Vec<u8>, bool)) {
        let mut end_run = |run: &mut (Vec<u8>, Option<bool>)| {
            if run.0.len() > best.0.len() {
                *best = (core::mem::take(&mut run.0), run.1 == Some(true));
            }
            run.0.clear();
            run.1 = None;
        };
        match node {
            Node::Concat(items) => {
                for item in items {
                    walk(item, run, best);
                }
            }
            Node::Group(_, inner) => walk(inner, run, best),
            // Zero-width: the bytes on both sides are still consecutive.
            Node::Assert(_) | Node::Empty => {}
            Node::Set(set) => match set_literal(set) {
                Some((b, mode)) => {
                    if mode.is_some() && run.1.is_some() && mode != run.1 {
                        end_run(run);
                    }
                    if mode.is_some() {
                        run.1 = mode;
                    }
                    run.0.push(b);
                }
                None => end_run(run),
            },
            _ => end_run(run),
        }
    }
    let mut run = (Vec::new(), None);
    let mut best = (Vec::new(), false);
    walk(node, &mut run, &mut best);
    if run.0.len() > best.0.len() {
        best = (run.0, run.1 == Some(true));
    }
    best
}

/// Whether two classes share no byte.
fn disjoint(a: &Set, b: &Set) -> bool {
    a.iter().zip(b.iter()).all(|(x, y)| x & y == 0)
}

/// Fixed width of a node in bytes, if it has one (for lookbehind).
fn width(node: &Node) -> Option<u32> {
    match node {
        Node::Empty | Node::Assert(_) | Node::Look { .. } => Some(0),
        Node::Set(_) => Some(1),
        Node::Group(_, n) => width(n),
        Node::Concat(items) => items.iter().try_fold(0u32, |acc, n| acc.checked_add(width(n)?)),
        Node::Alt(alts) => {
            let first = width(alts.first()?)?;
            alts.iter().all(|a| width(a) == Some(first)).then_some(first)
        }
        Node::Repeat { node, min, max, .. } => (Some(*min) == *max).then(|| width(node).map(|w| w * min)).flatten(),
        Node::BackRef(_) | Node::Call(_) => None,
    }
}

/// Bytes a node's match can start with; `None` when it may match empty (or start
/// with anything past an assertion).
fn first_bytes(node: &Node, subs: &[Arc<Regex>]) -> Option<Set> {
    match node {
        Node::Set(s) => Some(**s),
        Node::Group(_, n) => first_bytes(n, subs),
        // Assertions and lookarounds consume nothing: the next item gives the first byte.
        Node::Concat(items) => {
            items.iter().find(|n| !matches!(n, Node::Assert(_) | Node::Look { .. })).and_then(|n| first_bytes(n, subs))
        }
        Node::Alt(alts) => {
            let mut s = [0u64; 4];
            for a in alts {
                set_union(&mut s, &first_bytes(a, subs)?);
            }
            Some(s)
        }
        Node::Repeat { node, min, .. } if *min > 0 => first_bytes(node, subs),
        Node::Call(k) => subs.get(usize::from(*k)).and_then(|r| r.guard.map(Guard::first_set).or(r.first)),
        _ => None,
    }
}

struct Compiler {
    prog: Vec<Inst>,
    sets: Vec<Set>,
    look_depth: u32,
}

impl Compiler {
    fn pc(&self) -> u32 {
        u32::try_from(self.prog.len()).unwrap_or(u32::MAX)
    }

    fn emit(&mut self, inst: Inst) -> usize {
        self.prog.push(inst);
        self.prog.len() - 1
    }

    fn patch(&mut self, at: usize, inst: Inst) {
        if let Some(slot) = self.prog.get_mut(at) {
            *slot = inst;
        }
    }

    /// Gives each class run the bytes its match can go on with (what the next consuming
    /// instructions accept, past captures, jumps, branches and zero-width assertions),
    /// when they are known: a run whose class shares none of them is never given back
    /// ([`Inst::Possessive`]), others give back only down to one of them.
    fn link_follows(&mut self, subs: &[Arc<Regex>]) -> Result<(), PatternError> {
        for i in 0..self.prog.len() {
            let Some(&Inst::Star { set, min, max, .. }) = self.prog.get(i) else { continue };
            let Some(next) = self.follow_set(i + 1, subs) else { continue };
            let Some(class) = self.sets.get(usize::from(set)) else { continue };
            let inst = if disjoint(class, &next) {
                Inst::Possessive { set, min, max }
            } else {
                Inst::Star { set, min, max, follow: self.set_index(&next)? }
            };
            self.patch(i, inst);
        }
        Ok(())
    }

    /// Bytes the match can go on with from `pc` at a position that is not the end of
    /// the text; `None` when any byte might do (a match, a lookaround, a backreference).
    fn follow_set(&self, pc: usize, subs: &[Arc<Regex>]) -> Option<Set> {
        let mut out = [0u64; 4];
        let mut todo = alloc::vec![pc];
        let mut seen = Vec::new();
        while let Some(pc) = todo.pop() {
            if seen.contains(&pc) {
                continue;
            }
            if seen.len() >= 64 {
                return None;
            }
            seen.push(pc);
            match *self.prog.get(pc)? {
                Inst::Set(f) => set_union(&mut out, self.sets.get(usize::from(f))?),
                Inst::Star { set, min, .. } | Inst::Possessive { set, min, .. } => {
                    set_union(&mut out, self.sets.get(usize::from(set))?);
                    if min == 0 {
                        todo.push(pc + 1);
                    }
                }
                Inst::Save(_) => todo.push(pc + 1),
                Inst::Jmp(t) => todo.push(t as usize),
                Inst::Split(a, b) => {
                    todo.push(a as usize);
                    todo.push(b as usize);
                }
                // Not at the end of the text, `$` needs the final `\n` and `\z` fails.
                Inst::Assert(Assertion::End) => set_add(&mut out, b'\n'),
                Inst::Assert(Assertion::EndAbs) => {}
                // Other assertions consume nothing: what follows them decides.
                Inst::Assert(_) => todo.push(pc + 1),
                Inst::Call(k) => {
                    let sub = subs.get(usize::from(k))?;
                    set_union(&mut out, &sub.guard.map(Guard::first_set).or(sub.first)?);
                }
                Inst::Look { .. } | Inst::BackRef(_) | Inst::Match => return None,
            }
        }
        Some(out)
    }

    fn set_index(&mut self, set: &Set) -> Result<u16, PatternError> {
        let idx = match self.sets.iter().position(|x| x == set) {
            Some(i) => i,
            None => {
                self.sets.push(*set);
                self.sets.len() - 1
            }
        };
        u16::try_from(idx).map_err(|_| PatternError { at: 0, why: "too many classes" })
    }

    fn node(&mut self, node: &Node) -> Result<(), PatternError> {
        if self.prog.len() > 20_000 {
            return Err(PatternError { at: 0, why: "pattern too large" });
        }
        match node {
            Node::Empty => {}
            Node::Set(s) => {
                let idx = self.set_index(s)?;
                self.emit(Inst::Set(idx));
            }
            Node::Assert(a) => {
                self.emit(Inst::Assert(*a));
            }
            Node::Group(None, n) => self.node(n)?,
            Node::Group(Some(g), n) => {
                self.emit(Inst::Save(g * 2));
                self.node(n)?;
                self.emit(Inst::Save(g * 2 + 1));
            }
            Node::Concat(items) => {
                for n in items {
                    self.node(n)?;
                }
            }
            Node::Alt(alts) => {
                let mut jumps = Vec::new();
                for (k, a) in alts.iter().enumerate() {
                    if k + 1 < alts.len() {
                        let split = self.emit(Inst::Split(0, 0));
                        let body = self.pc();
                        self.node(a)?;
                        jumps.push(self.emit(Inst::Jmp(0)));
                        let next = self.pc();
                        self.patch(split, Inst::Split(body, next));
                    } else {
                        self.node(a)?;
                    }
                }
                let end = self.pc();
                for j in jumps {
                    self.patch(j, Inst::Jmp(end));
                }
            }
            Node::Repeat { node, min, max, greedy } if *greedy && matches!(**node, Node::Set(_)) => {
                // A greedy run of one class: consumed at once, given back one byte at a time.
                let Node::Set(set) = &**node else { return Ok(()) };
                let idx = self.set_index(set)?;
                let min = u16::try_from(*min).map_err(|_| PatternError { at: 0, why: "repetition too large" })?;
                let max = match max {
                    Some(m) => u16::try_from(*m).map_err(|_| PatternError { at: 0, why: "repetition too large" })?,
                    None => u16::MAX,
                };
                self.emit(Inst::Star { set: idx, min, max, follow: NO_FOLLOW });
            }
            Node::Repeat { node, min, max, greedy } => {
                for _ in 0..*min {
                    self.node(node)?;
                }
                match max {
                    None => {
                        let split = self.emit(Inst::Split(0, 0));
                        let body = self.pc();
                        self.node(node)?;
                        self.emit(Inst::Jmp(u32::try_from(split).unwrap_or(0)));
                        let end = self.pc();
                        self.patch(split, if *greedy { Inst::Split(body, end) } else { Inst::Split(end, body) });
                    }
                    Some(max) => {
                        let mut splits = Vec::new();
                        for _ in *min..*max {
                            splits.push(self.emit(Inst::Split(0, 0)));
                            self.node(node)?;
                        }
                        let end = self.pc();
                        for s in splits {
                            let body = u32::try_from(s + 1).unwrap_or(0);
                            self.patch(s, if *greedy { Inst::Split(body, end) } else { Inst::Split(end, body) });
                        }
                    }
                }
            }
            Node::Look { ahead, negate, node } => {
                if self.look_depth >= MAX_LOOK_DEPTH {
                    return Err(PatternError { at: 0, why: "lookarounds nested too deeply" });
                }
                let w = if *ahead {
                    0
                } else {
                    let w = width(node).ok_or(PatternError { at: 0, why: "lookbehind not fixed width" })?;
                    u16::try_from(w).map_err(|_| PatternError { at: 0, why: "lookbehind too wide" })?
                };
                let at = self.emit(Inst::Match);
                self.look_depth += 1;
                self.node(node)?;
                self.look_depth -= 1;
                self.emit(Inst::Match);
                let end = self.pc();
                self.patch(at, Inst::Look { ahead: *ahead, negate: *negate, width: w, end });
            }
            Node::BackRef(g) => {
                self.emit(Inst::BackRef(*g));
            }
            Node::Call(k) => {
                self.emit(Inst::Call(*k));
            }
        }
        Ok(())
    }
}

/// Where a search keeps its state: captures and the backtracking stack.
#[derive(Debug)]
pub struct Search {
    slots: [u32; MAX_GROUPS * 2],
    stack: Vec<Frame>,
    steps: u32,
    /// Steps this search may still take over all its searches (see [`Search::allow`]).
    allowance: u64,
    /// The step limit of the current search.
    limit: u32,
}

impl Default for Search {
    fn default() -> Self {
        Search { slots: [NONE; MAX_GROUPS * 2], stack: Vec::new(), steps: 0, allowance: u64::MAX, limit: STEP_BUDGET }
    }
}

const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
enum Frame {
    Alt {
        pc: u32,
        pos: u32,
    },
    Restore {
        slot: u8,
        old: u32,
    },
    /// A greedy class run that can give back bytes down to `min_pos`.
    Star {
        pc: u32,
        min_pos: u32,
        pos: u32,
    },
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
        let a = *self.slots.get(g * 2)?;
        let b = *self.slots.get(g * 2 + 1)?;
        (a != NONE && b != NONE && a <= b).then_some((a as usize, b as usize))
    }

    /// Capture group `g` of the last successful search in `hay`.
    pub fn text<'h>(&self, hay: &'h [u8], g: usize) -> Option<&'h [u8]> {
        self.group(g).and_then(|(a, b)| hay.get(a..b))
    }
}

impl Regex {
    /// Compiles `pattern` (Perl syntax, the subset above); `icase` is Perl's `/i`.
    pub fn new(pattern: &str, icase: bool) -> Result<Regex, PatternError> {
        Regex::with_subs(pattern, icase, &[])
    }

    /// Compiles `pattern`, which may call the sub-patterns in `named` as `(?&NAME)`.
    pub fn with_subs(pattern: &str, icase: bool, named: &[(&'static str, Arc<Regex>)]) -> Result<Regex, PatternError> {
        let mut parser = Parser { p: pattern.as_bytes(), i: 0, icase, groups: 0, named, used: Vec::new() };
        let node = parser.alternation(0)?;
        if parser.i != parser.p.len() {
            return Err(parser.err("unbalanced )"));
        }
        let anchored = match &node {
            Node::Concat(items) => matches!(items.first(), Some(Node::Assert(Assertion::Start))),
            _ => false,
        };
        let first = first_bytes(&node, &parser.used);
        let (mut prefix, prefix_icase) = literal_prefix(&node);
        if prefix.len() < 2 {
            prefix.clear();
        }
        let (mut required, required_icase) = required_literal(&node);
        if required.len() < 3 || required.len() <= prefix.len() {
            required.clear();
        }
        let mut c = Compiler { prog: Vec::new(), sets: Vec::new(), look_depth: 0 };
        c.emit(Inst::Save(0));
        c.node(&node)?;
        c.emit(Inst::Save(1));
        c.emit(Inst::Match);
        c.link_follows(&parser.used)?;
        Ok(Regex {
            prog: c.prog,
            sets: c.sets,
            groups: parser.groups,
            anchored,
            first,
            icase,
            subs: parser.used,
            guard: None,
            prefix_anchor: anchor_of(&prefix),
            prefix,
            prefix_icase,
            required_anchor: anchor_of(&required),
            required,
            required_icase,
        })
    }

    /// Number of capture groups.
    pub fn groups(&self) -> usize {
        usize::from(self.groups)
    }

    /// Whether the pattern matches anywhere in `hay`.
    pub fn is_match(&self, hay: &[u8], search: &mut Search) -> bool {
        self.find_at(hay, 0, search)
    }

    /// Searches `hay` from `start`; on a match the captures are in `search`.
    pub fn find_at(&self, hay: &[u8], start: usize, search: &mut Search) -> bool {
        search.steps = 0;
        search.limit = u32::try_from(search.allowance.min(u64::from(STEP_BUDGET))).unwrap_or(STEP_BUDGET);
        if hay.len() >= NONE as usize || search.limit == 0 {
            return false;
        }
        if !self.required.is_empty()
            && hay
                .get(start..)
                .and_then(|r| find_anchored(r, &self.required, self.required_anchor, self.required_icase))
                .is_none()
        {
            return false;
        }
        let found = self.find_from(hay, start, search);
        search.allowance = search.allowance.saturating_sub(u64::from(search.steps));
        found
    }

    fn find_from(&self, hay: &[u8], start: usize, search: &mut Search) -> bool {
        let last = if self.anchored { start.min(hay.len()) } else { hay.len() };
        let mut pos = start;
        while pos <= last {
            if !self.prefix.is_empty() {
                match hay.get(pos..).and_then(|r| find_anchored(r, &self.prefix, self.prefix_anchor, self.prefix_icase)) {
                    Some(k) => pos += k,
                    None => return false,
                }
                if pos > last {
                    return false;
                }
            } else if let Some(first) = &self.first {
                match hay.get(pos..).and_then(|r| r.iter().position(|&b| set_has(first, b))) {
                    Some(k) => pos += k,
                    None => return false,
                }
                if pos > last {
                    return false;
                }
            }
            search.slots = [NONE; MAX_GROUPS * 2];
            match self.run(hay, 0, pos, None, search, 0) {
                Run::Matched(_) => return true,
                Run::Failed => {}
                Run::GaveUp => return false,
            }
            pos += 1;
        }
        false
    }

    fn set(&self, idx: u16) -> &Set {
        self.sets.get(usize::from(idx)).unwrap_or(&[0; 4])
    }

    /// Runs the program from `pc` at `pos`; `must_end` requires the match to end there
    /// (lookbehind). Returns the end position of the first match.
    fn run(&self, hay: &[u8], pc: u32, pos: usize, must_end: Option<usize>, s: &mut Search, depth: u32) -> Run {
        let base = s.stack.len();
        let mut pc = pc;
        let mut pos = pos;
        let result = 'outer: loop {
            s.steps += 1;
            if s.steps > s.limit {
                break Run::GaveUp;
            }
            let ok = match self.prog.get(pc as usize) {
                None => false,
                Some(&inst) => match inst {
                    Inst::Set(idx) => match hay.get(pos) {
                        Some(&b) if set_has(self.set(idx), b) => {
                            pos += 1;
                            pc += 1;
                            true
                        }
                        _ => false,
                    },
                    Inst::Possessive { set, min, max } => {
                        let class = self.set(set);
                        let limit = if max == u16::MAX { usize::MAX } else { usize::from(max) };
                        let n = hay
                            .get(pos..)
                            .map_or(0, |r| r.iter().take(limit).take_while(|&&b| set_has(class, b)).count());
                        pos += n;
                        pc += 1;
                        n >= usize::from(min)
                    }
                    Inst::Star { set, min, max, .. } => {
                        let class = self.set(set);
                        let limit = if max == u16::MAX { usize::MAX } else { usize::from(max) };
                        let n = hay
                            .get(pos..)
                            .map_or(0, |r| r.iter().take(limit).take_while(|&&b| set_has(class, b)).count());
                        if n < usize::from(min) {
                            false
                        } else {
                            if n > usize::from(min) {
                                if s.stack.len() >= STACK_LIMIT {
                                    break Run::GaveUp;
                                }
                                let min_pos = (pos + usize::from(min)) as u32;
                                s.stack.push(Frame::Star { pc: pc + 1, min_pos, pos: (pos + n) as u32 });
                            }
                            pos += n;
                            pc += 1;
                            true
                        }
                    }
                    Inst::Jmp(t) => {
                        pc = t;
                        true
                    }
                    Inst::Split(a, b) => {
                        if s.stack.len() >= STACK_LIMIT {
                            break Run::GaveUp;
                        }
                        s.stack.push(Frame::Alt { pc: b, pos: pos as u32 });
                        pc = a;
                        true
                    }
                    Inst::Save(slot) => {
                        if let Some(old) = s.slots.get_mut(usize::from(slot)) {
                            if s.stack.len() >= STACK_LIMIT {
                                break Run::GaveUp;
                            }
                            s.stack.push(Frame::Restore { slot, old: *old });
                            *old = pos as u32;
                        }
                        pc += 1;
                        true
                    }
                    Inst::Assert(a) => {
                        pc += 1;
                        assert_at(a, hay, pos)
                    }
                    Inst::BackRef(g) => match s.group(usize::from(g)).and_then(|(a, b)| hay.get(a..b)) {
                        Some(text) => {
                            let end = pos + text.len();
                            let same = hay.get(pos..end).is_some_and(|h| {
                                if self.icase {
                                    h.eq_ignore_ascii_case(text)
                                } else {
                                    h == text
                                }
                            });
                            if same {
                                pos = end;
                                pc += 1;
                            }
                            same
                        }
                        None => false,
                    },
                    Inst::Call(k) => {
                        if depth >= MAX_RUN_DEPTH {
                            break Run::GaveUp;
                        }
                        let Some(sub) = self.subs.get(usize::from(k)) else {
                            break Run::GaveUp;
                        };
                        if sub.guard.is_some_and(|g| !g.may_start(hay, pos)) {
                            false
                        } else {
                            let saved = s.slots;
                            let found = sub.run(hay, 0, pos, None, s, depth + 1);
                            s.slots = saved;
                            match found {
                                Run::Matched(end) => {
                                    pos = end;
                                    pc += 1;
                                    true
                                }
                                Run::Failed => false,
                                Run::GaveUp => break Run::GaveUp,
                            }
                        }
                    }
                    Inst::Look { ahead, negate, width, end } => {
                        if depth >= MAX_RUN_DEPTH {
                            break Run::GaveUp;
                        }
                        let saved = s.slots;
                        let found = if ahead {
                            self.run(hay, pc + 1, pos, None, s, depth + 1)
                        } else {
                            match pos.checked_sub(usize::from(width)) {
                                Some(at) => self.run(hay, pc + 1, at, Some(pos), s, depth + 1),
                                None => Run::Failed,
                            }
                        };
                        s.slots = saved;
                        let hit = match found {
                            Run::Matched(_) => true,
                            Run::Failed => false,
                            Run::GaveUp => break Run::GaveUp,
                        };
                        pc = end;
                        hit != negate
                    }
                    Inst::Match => {
                        if must_end.is_none_or(|e| e == pos) {
                            break Run::Matched(pos);
                        }
                        false
                    }
                },
            };
            if ok {
                continue;
            }
            // Backtrack.
            loop {
                if s.stack.len() <= base {
                    break 'outer Run::Failed;
                }
                match s.stack.pop() {
                    Some(Frame::Alt { pc: p, pos: q }) => {
                        pc = p;
                        pos = q as usize;
                        break;
                    }
                    Some(Frame::Restore { slot, old }) => {
                        if let Some(v) = s.slots.get_mut(usize::from(slot)) {
                            *v = old;
                        }
                    }
                    Some(Frame::Star { pc: p, min_pos, pos: q }) => {
                        let mut back = q.saturating_sub(1);
                        // Only a byte of the follow class can go on: skip to the last one.
                        if let Some(&Inst::Star { follow, .. }) = self.prog.get(p.wrapping_sub(1) as usize) {
                            if follow != NO_FOLLOW {
                                let next = self.set(follow);
                                let window = hay.get(min_pos as usize..=back as usize).unwrap_or(&[]);
                                match window.iter().rposition(|&b| set_has(next, b)) {
                                    Some(k) => back = min_pos + k as u32,
                                    None => continue,
                                }
                            }
                        }
                        if back > min_pos {
                            s.stack.push(Frame::Star { pc: p, min_pos, pos: back });
                        }
                        pc = p;
                        pos = back as usize;
                        break;
                    }
                    None => break 'outer Run::Failed,
                }
            }
        };
        s.stack.truncate(base);
        result
    }
}

enum Run {
    Matched(usize),
    Failed,
    GaveUp,
}

fn assert_at(a: Assertion, hay: &[u8], pos: usize) -> bool {
    match a {
        Assertion::Start => pos == 0,
        Assertion::End => pos == hay.len() || (pos + 1 == hay.len() && hay.get(pos) == Some(&b'\n')),
        Assertion::EndAbs => pos == hay.len(),
        Assertion::WordBoundary | Assertion::NotWordBoundary => {
            let before = pos.checked_sub(1).and_then(|p| hay.get(p)).is_some_and(|&b| is_word(b));
            let after = hay.get(pos).is_some_and(|&b| is_word(b));
            (before != after) == (a == Assertion::WordBoundary)
        }
    }
}

/// One octet of a dotted quad, as SpamAssassin's `IPV4_ADDRESS` spells it.
const OCTET: &str = r"(?:1\d\d|2[0-4]\d|25[0-5]|[1-9]\d|\d)";

/// SpamAssassin's `IPV4_ADDRESS`.
fn ipv4_text() -> String {
    alloc::format!(r"\b{o}\.{o}\.{o}\.{o}\b", o = OCTET)
}

/// SpamAssassin's `IP_ADDRESS` (IPv4, IPv4-mapped IPv6, IPv6; case-insensitive).
fn ip_text() -> String {
    let h = "[a-f0-9]{1,4}";
    let q = alloc::format!(r"{o}\.{o}\.{o}\.{o}", o = OCTET);
    alloc::format!(
        concat!(
            r"(?i:\b(?<!:){q}\b|(?:IPv6:|(?<![a-f0-9:]))(?:",
            r"(?:(?:{h}:){{6}}|::(?:{h}:){{0,5}}|(?:{h}:){{1,5}}:|{h}::(?:{h}:){{1,4}}|(?:{h}:){{2}}:(?:{h}:){{1,3}}",
            r"|(?:{h}:){{3}}:(?:{h}:){{1,2}}|(?:{h}:){{4}}:{h}:){q}",
            r"|(?:{h}:){{7}}{h}|:(?::{h}){{1,7}}|(?:{h}:){{1,7}}:|{h}:(?::{h}){{1,6}}|(?:{h}:){{2}}(?::{h}){{1,5}}",
            r"|(?:{h}:){{3}}(?::{h}){{1,4}}|(?:{h}:){{4}}(?::{h}){{1,3}}|(?:{h}:){{5}}(?::{h}){{1,2}}|(?:{h}:){{6}}:{h}|::",
            r")(?![a-f0-9:]))"
        ),
        q = q,
        h = h
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
        r"(?i:localhost(?:\.localdomain)?|\b(?<!:)127\.0\.0\.1\b|(?:IPv6:|(?<![a-f0-9:]))(?:{MAPPED_PREFIX}127\.0\.0\.1|{LOOPBACK6})(?![a-f0-9:]))"
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

/// SpamAssassin's IP-address patterns, compiled once, callable from other patterns
/// as `(?&IP)` (`IP_ADDRESS`), `(?&IPV4)` (`IPV4_ADDRESS`), `(?&LOCALHOST)` and
/// `(?&PRIVATE)` (`IP_PRIVATE` without its `^`).
#[derive(Debug, Clone)]
pub struct Patterns {
    named: Vec<(&'static str, Arc<Regex>)>,
    /// `IP_PRIVATE`, anchored at the start of the text.
    pub ip_private: Regex,
    /// `^IP_ADDRESS$`... as `IS_IPV4_ADDRESS`: the whole text is a dotted quad.
    pub is_ipv4: Regex,
}

impl Default for Patterns {
    fn default() -> Self {
        Patterns::new()
    }
}

impl Patterns {
    /// Compiles the IP-address family.
    pub fn new() -> Patterns {
        let guarded = |text: &str, g: Guard| Arc::new(Regex { guard: Some(g), ..fixed_plain(text) });
        let ip = guarded(&ip_text(), Guard::Ip);
        let ipv4 = guarded(&ipv4_text(), Guard::Ipv4);
        let localhost = guarded(&localhost_text(), Guard::Localhost);
        let private = Arc::new(fixed_plain(&ip_private_text()));
        let named = alloc::vec![("IP", ip), ("IPV4", ipv4), ("LOCALHOST", localhost), ("PRIVATE", private)];
        let ip_private = Regex::with_subs("^(?&PRIVATE)", false, &named).unwrap_or_else(|_| never());
        let is_ipv4 = Regex::with_subs(r"^(?&IPV4)$", false, &named).unwrap_or_else(|_| never());
        Patterns { named, ip_private, is_ipv4 }
    }

    /// Compiles `pattern`, which may use `(?&IP)`, `(?&IPV4)` and `(?&LOCALHOST)`.
    pub fn compile(&self, pattern: &str, icase: bool) -> Result<Regex, PatternError> {
        Regex::with_subs(pattern, icase, &self.named)
    }

    /// [`Patterns::compile`] for a pattern known to be valid; an invalid one (a bug
    /// the tests catch) becomes a pattern that never matches.
    pub fn fixed(&self, pattern: &str, icase: bool) -> Regex {
        self.compile(pattern, icase).unwrap_or_else(|_| never())
    }
}

fn fixed_plain(pattern: &str) -> Regex {
    Regex::new(pattern, false).unwrap_or_else(|_| never())
}

/// A pattern that matches nothing.
pub fn never() -> Regex {
    let mut s = [0u64; 4];
    s[0] = 0;
    Regex {
        prog: alloc::vec![Inst::Set(0)],
        sets: alloc::vec![s],
        groups: 0,
        anchored: false,
        first: Some(s),
        icase: false,
        subs: Vec::new(),
        guard: None,
        prefix: Vec::new(),
        prefix_icase: false,
        prefix_anchor: 0,
        required: Vec::new(),
        required_icase: false,
        required_anchor: 0,
    }
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
            (0..=re.groups())
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
    fn substring_searches_table() {
        // (haystack, needle, case-insensitive, expected position)
        let cases: &[(&str, &str, bool, Option<usize>)] = &[
            ("a with b", " with ", false, Some(1)),
            ("a WITH b with ", " with ", false, Some(8)),
            ("a WITH b with ", " with ", true, Some(1)),
            ("wwith", " with", false, None),
            (" with", " with", false, Some(0)),
            ("x) by y) by", ") by", false, Some(1)),
            ("%4%40", "%40", false, Some(2)),
            ("", "ab", false, None),
            ("ab", "abc", false, None),
            ("(AUTH: x", "(auth: ", true, Some(0)),
        ];
        for (hay, needle, icase, want) in cases {
            let got = if *icase { find_bytes_icase(hay.as_bytes(), needle.as_bytes()) } else { find_bytes(hay.as_bytes(), needle.as_bytes()) };
            assert_eq!(got, *want, "{needle:?} in {hay:?}");
        }
    }

    #[test]
    fn literal_analysis_table() {
        // (pattern, /i, literal prefix, required literal)
        let cases: &[(&str, bool, &str, &str)] = &[
            (" with (a|b)", true, " with ", ""),
            ("\\bhelo=(\\S+)", false, "helo=", ""),
            ("(?:from |HELO )\\S*hotmail\\.com\\b", false, "", "hotmail.com"),
            ("^(\\S+) \\((\\S+) \\[x\\]\\).*\\) by (\\S+)", false, "", " [x])"),
            ("a(?:bcd)+", false, "", ""),
            ("(?:a|b)(?i:cde)f", false, "", "cde"),
            ("(x)?abcd", false, "", "abcd"),
        ];
        for (p, icase, prefix, required) in cases {
            let re = Regex::new(p, *icase).unwrap_or_else(|e| panic!("{p}: {e}"));
            assert_eq!(re.prefix, prefix.as_bytes(), "prefix of {p}");
            assert_eq!(re.required, required.as_bytes(), "required literal of {p}");
        }
    }

    #[test]
    fn bad_patterns_are_errors() {
        for p in ["(", "a)", "[a", "a**", "(?<!a+)b", "\\q", "x{3,2}"] {
            assert!(Regex::new(p, false).is_err(), "{p}");
        }
    }

    #[test]
    fn catastrophic_patterns_give_up() {
        let re = Regex::new("(a*)*(a*)*(a*)*b", false).unwrap_or_else(|_| never());
        let hay = [b'a'; 64];
        let mut s = Search::default();
        assert!(!re.is_match(&hay, &mut s));
        assert!(s.stack.capacity() <= STACK_LIMIT);
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
