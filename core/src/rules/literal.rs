//! Required literals of a regex: a small set of byte strings, at least one of which
//! occurs (ASCII case-insensitively) in every match. They feed the Aho-Corasick
//! prefilter; a rule whose literals never occur in a text cannot match it.

use alloc::vec::Vec;
use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::nfa::contiguous;
use aho_corasick::{Anchored, BuildError, MatchKind};
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::{Capture, Class, ClassBytes, ClassBytesRange, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Repetition};

use super::backtrack::ByteSet;

mod compact;
mod exact;
mod halves;

pub(crate) use compact::CompactDfa;
pub(crate) use exact::ExactLiterals;

/// A prefilter table's automaton over its literals, ASCII case ignored: a compact DFA
/// when the table is small enough, else the crate's contiguous NFA (shared by all
/// processes either way).
pub(crate) enum LiteralAutomaton {
    Dfa(alloc::boxed::Box<CompactDfa>),
    Nfa(alloc::boxed::Box<contiguous::NFA>),
}

impl LiteralAutomaton {
    /// The DFA of `literals`, or `None` when it would take more than `limit` bytes.
    pub(crate) fn dfa(literals: &[Vec<u8>], limit: usize) -> Option<LiteralAutomaton> {
        CompactDfa::new(literals, limit).ok().map(|dfa| LiteralAutomaton::Dfa(alloc::boxed::Box::new(dfa)))
    }

    /// The contiguous NFA of `literals`: slower than the DFA, far smaller.
    pub(crate) fn nfa(literals: &[Vec<u8>]) -> Result<LiteralAutomaton, BuildError> {
        contiguous::Builder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .prefilter(false)
            .build(literals)
            .map(|nfa| LiteralAutomaton::Nfa(alloc::boxed::Box::new(nfa)))
    }

    /// Calls `hit(literal, start)` for every occurrence of every literal in `text`,
    /// overlapping ones too, in the order they end. Our own walk, a long text's two
    /// halves at once: the crate's overlapping iterator returns to its caller at every
    /// hit and costs about twice the instructions a byte.
    pub(crate) fn for_each_hit(&self, text: &[u8], mut hit: impl FnMut(usize, usize)) {
        match self {
            LiteralAutomaton::Dfa(a) => a.for_each_hit(text, hit),
            LiteralAutomaton::Nfa(a) => halves::for_each_hit(&NfaWalk(&**a), text, &mut hit),
        }
    }

    /// Heap bytes of the automaton.
    pub(crate) fn memory_usage(&self) -> usize {
        match self {
            LiteralAutomaton::Dfa(a) => a.memory_usage(),
            LiteralAutomaton::Nfa(a) => a.memory_usage(),
        }
    }
}

/// The crate's NFA as the walks see it.
struct NfaWalk<'a, A>(&'a A);

impl<A: Automaton> halves::Walk for NfaWalk<'_, A> {
    type State = StateID;

    fn start(&self) -> StateID {
        // An unanchored table always has one; else the dead state, which ends nothing.
        self.0.start_state(Anchored::No).unwrap_or(StateID::ZERO)
    }

    fn step(&self, state: StateID, byte: u8) -> StateID {
        self.0.next_state(Anchored::No, state, byte)
    }

    fn ends_literal(&self, state: StateID) -> bool {
        self.0.is_special(state)
    }

    fn longest(&self) -> usize {
        self.0.max_pattern_len()
    }

    fn report(&self, state: StateID, at: usize, hit: &mut impl FnMut(usize, usize)) {
        for i in 0..self.0.match_len(state) {
            let literal = self.0.match_pattern(state, i);
            hit(literal.as_usize(), at.saturating_sub(self.0.pattern_len(literal)));
        }
    }

    fn hits_from(&self, mut state: StateID, text: &[u8], mut at: usize, hit: &mut impl FnMut(usize, usize)) {
        loop {
            let special;
            (state, at, special) = to_special(self.0, state, text, at);
            if !special || self.0.is_dead(state) {
                return;
            }
            self.report(state, at, hit);
        }
    }
}

/// Steps `automaton` from `state` over `text` from `at`, four bytes a round, until a
/// special state: it, the position after its byte and true; or the state at the end
/// and false.
fn to_special<A: Automaton>(automaton: &A, mut state: StateID, text: &[u8], mut at: usize) -> (StateID, usize, bool) {
    let next = |state, byte| automaton.next_state(Anchored::No, state, byte);
    while let Some(&[b0, b1, b2, b3]) = text.get(at..).and_then(<[u8]>::first_chunk::<4>) {
        let s0 = next(state, b0);
        if automaton.is_special(s0) {
            return (s0, at + 1, true);
        }
        let s1 = next(s0, b1);
        if automaton.is_special(s1) {
            return (s1, at + 2, true);
        }
        let s2 = next(s1, b2);
        if automaton.is_special(s2) {
            return (s2, at + 3, true);
        }
        state = next(s2, b3);
        at += 4;
        if automaton.is_special(state) {
            return (state, at, true);
        }
    }
    while let Some(&byte) = text.get(at) {
        state = next(state, byte);
        at += 1;
        if automaton.is_special(state) {
            return (state, at, true);
        }
    }
    (state, at, false)
}

/// Most alternatives a literal set may hold.
const MAX_SET: usize = 24;
/// Most literals an alternation's required set may hold: wide word lists (`city|country|
/// address|...`) still give a prefilter, which costs far less than a pass over every line.
const MAX_WIDE: usize = 96;
/// Longest literal kept; longer ones are cut (a prefix of a required literal is required too).
const MAX_LEN: usize = 48;
/// Distinct (case-folded) bytes a class may have and still expand into literals.
const MAX_CLASS: usize = 4;
/// Shortest literal worth a prefilter entry: shorter ones would hit almost every text.
pub(crate) const MIN_USEFUL: usize = 3;
/// Deepest HIR nesting walked; deeper parts count as unknown.
const MAX_DEPTH: usize = 200;

type Set = Vec<Vec<u8>>;

enum Info {
    /// Every match is one of these strings (lowercased).
    Exact(Set),
    /// Every match contains one of these (lowercased); `None`: nothing known.
    Inexact(Option<Set>),
    /// Every match starts with one of `head` and ends with one of `tail`: `ab+`.
    Around { head: Set, tail: Set },
}

impl Info {
    /// What is known when only containment counts.
    fn inexact(self) -> Info {
        match self {
            Info::Around { head, tail } => Info::Inexact(better(as_required(&head), as_required(&tail))),
            other => other,
        }
    }
}

/// The required literals of a pattern and how many times they must occur.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Required {
    /// Lowercased; every match holds at least one of them.
    pub(crate) literals: Set,
    /// Occurrences (at distinct positions) every match holds: `(?:...){5}` needs five
    /// of its copies' literals, so a line with fewer cannot match.
    pub(crate) min_hits: u32,
    /// Every match begins with one of `literals`: a search of the whole text need only
    /// try the places where the prefilter found one.
    pub(crate) starts_match: bool,
}

/// What `hir` requires: its literals and, for a repeated group, how many of them.
pub(crate) fn requirement(hir: &Hir) -> Option<Required> {
    let mut top = hir;
    while let HirKind::Capture(c) = top.kind() {
        top = &c.sub;
    }
    if let HirKind::Repetition(rep) = top.kind() {
        if rep.min >= 2 {
            if let Some(literals) = required(&rep.sub) {
                return Some(Required { literals, min_hits: rep.min, starts_match: false });
            }
        }
    }
    required(hir).map(|literals| Required { literals, min_hits: 1, starts_match: false })
}

/// Literals (lowercased) one of which every match of `hir` begins with, when there are
/// few and none is too short for a prefilter: a search of a whole text need then only
/// try the places where one occurs. The pattern is lowercased first (which keeps every
/// match, lowercased, a match) so that case-insensitive letters do not multiply them.
pub(crate) fn prefixes(hir: &Hir) -> Option<Required> {
    let folded = lowercased(hir, 0)?;
    let mut extractor = Extractor::new();
    extractor.kind(ExtractKind::Prefix);
    let seq = extractor.extract(&folded);
    let literals = fewest_prefixes(dedup(seq.literals()?.iter().map(|l| lower(l.as_bytes())).collect()));
    (!literals.is_empty() && literals.len() <= MAX_WIDE && quality(&literals) >= MIN_USEFUL)
        .then_some(Required { literals, min_hits: 1, starts_match: true })
}

/// `set` cut to the longest length that leaves no more distinct members than the
/// shortest useful cut does, without members that start with another: one entry for
/// `content-type:\t`, `content-type: ` and the rest.
fn fewest_prefixes(set: Set) -> Set {
    let cut = |len: usize| dedup(set.iter().map(|l| l.get(..len).unwrap_or(l).to_vec()).collect());
    let fewest = cut(MIN_USEFUL).len();
    let longest = set.iter().map(Vec::len).max().unwrap_or(0);
    let len = (MIN_USEFUL..=longest).rev().find(|&len| cut(len).len() <= fewest).unwrap_or(longest);
    let kept = cut(len);
    kept.iter().filter(|l| !kept.iter().any(|k| k.len() < l.len() && l.starts_with(k))).cloned().collect()
}

/// `hir` with every ASCII letter lowercased, or `None` when too deep to walk.
fn lowercased(hir: &Hir, depth: usize) -> Option<Hir> {
    if depth > MAX_DEPTH {
        return None;
    }
    Some(match hir.kind() {
        HirKind::Literal(lit) => Hir::literal(lit.0.to_ascii_lowercase()),
        HirKind::Class(Class::Bytes(c)) => {
            let mut bytes = [false; 256];
            for r in c.iter() {
                for b in r.start()..=r.end() {
                    bytes[usize::from(b.to_ascii_lowercase())] = true;
                }
            }
            let ranges = (0..=255u8).filter(|&b| bytes[usize::from(b)]).map(|b| ClassBytesRange::new(b, b));
            Hir::class(Class::Bytes(ClassBytes::new(ranges)))
        }
        HirKind::Class(Class::Unicode(c)) => {
            let mut lowered = c.clone();
            for r in c.iter() {
                let (lo, hi) = (u32::from(r.start()), u32::from(r.end()).min(0x7f));
                for cp in lo..=hi {
                    let ch = char::from(cp as u8).to_ascii_lowercase();
                    lowered.union(&ClassUnicode::new([ClassUnicodeRange::new(ch, ch)]));
                }
            }
            // Upper-case ASCII letters are gone from the text once it is lowercased.
            lowered.difference(&ClassUnicode::new([ClassUnicodeRange::new('A', 'Z')]));
            Hir::class(Class::Unicode(lowered))
        }
        HirKind::Repetition(rep) => {
            Hir::repetition(Repetition { sub: alloc::boxed::Box::new(lowercased(&rep.sub, depth + 1)?), ..rep.clone() })
        }
        HirKind::Capture(c) => Hir::capture(Capture { sub: alloc::boxed::Box::new(lowercased(&c.sub, depth + 1)?), ..c.clone() }),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(|h| lowercased(h, depth + 1)).collect::<Option<_>>()?),
        HirKind::Alternation(subs) => {
            Hir::alternation(subs.iter().map(|h| lowercased(h, depth + 1)).collect::<Option<_>>()?)
        }
        HirKind::Empty | HirKind::Look(_) => hir.clone(),
    })
}

/// The required literals of `hir`, lowercased, or `None` when no useful set exists.
pub(crate) fn required(hir: &Hir) -> Option<Set> {
    let set = match walk(hir, 0).inexact() {
        Info::Exact(s) => s,
        Info::Inexact(s) => s?,
        Info::Around { .. } => return None,
    };
    (quality(&set) >= MIN_USEFUL).then_some(set)
}

/// The shortest literal of a set: how selective it is as a prefilter.
fn quality(set: &Set) -> usize {
    set.iter().map(Vec::len).min().unwrap_or(0)
}

fn better(a: Option<Set>, b: Option<Set>) -> Option<Set> {
    match (a, b) {
        (Some(a), Some(b)) => {
            let (qa, qb) = (quality(&a), quality(&b));
            if qb > qa || (qb == qa && b.len() < a.len()) {
                Some(b)
            } else {
                Some(a)
            }
        }
        (a, None) => a,
        (None, b) => b,
    }
}

fn lower(bytes: &[u8]) -> Vec<u8> {
    let mut v: Vec<u8> = bytes.iter().take(MAX_LEN).map(u8::to_ascii_lowercase).collect();
    v.shrink_to_fit();
    v
}

fn dedup(mut set: Set) -> Set {
    set.sort_unstable();
    set.dedup();
    set
}

/// The exact set as a required set: useless when it holds the empty string.
fn as_required(set: &Set) -> Option<Set> {
    (!set.is_empty() && quality(set) > 0).then(|| set.clone())
}

/// A required set cut down to at most `MAX_WIDE` members: members that contain another
/// member are dropped (the shorter one occurs wherever they do), then all are cut to the
/// longest common length that leaves few enough distinct prefixes.
fn shrink(set: Set) -> Option<Set> {
    let mut set = dedup(set);
    if set.len() <= MAX_WIDE {
        return Some(set);
    }
    set.sort_unstable_by_key(Vec::len);
    let mut kept: Set = Vec::new();
    for lit in set {
        if !kept.iter().any(|k| contains(&lit, k)) {
            kept.push(lit);
        }
    }
    let longest = kept.iter().map(Vec::len).max().unwrap_or(0);
    for len in (MIN_USEFUL..=longest).rev() {
        let cut = dedup(kept.iter().map(|l| l.get(..len).unwrap_or(l).to_vec()).collect());
        if cut.len() <= MAX_WIDE {
            return Some(cut);
        }
    }
    None
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

fn cross(a: &Set, b: &Set) -> Option<Set> {
    if a.len().saturating_mul(b.len()) > MAX_SET {
        return None;
    }
    let mut out = Vec::with_capacity(a.len() * b.len());
    for x in a {
        for y in b {
            if x.len() + y.len() > MAX_LEN {
                return None;
            }
            let mut s = x.clone();
            s.extend_from_slice(y);
            out.push(s);
        }
    }
    Some(dedup(out))
}

fn class_set(class: &Class) -> Option<Set> {
    let mut bytes: Vec<u8> = Vec::new();
    match class {
        Class::Bytes(c) => {
            for r in c.iter() {
                let (lo, hi) = (r.start(), r.end());
                if usize::from(hi - lo) >= MAX_CLASS * 2 {
                    return None;
                }
                for b in lo..=hi {
                    bytes.push(b.to_ascii_lowercase());
                }
            }
        }
        Class::Unicode(c) => {
            for r in c.iter() {
                let (lo, hi) = (u32::from(r.start()), u32::from(r.end()));
                if hi > 0x7f || hi - lo >= (MAX_CLASS * 2) as u32 {
                    return None;
                }
                for cp in lo..=hi {
                    bytes.push((cp as u8).to_ascii_lowercase());
                }
            }
        }
    }
    bytes.sort_unstable();
    bytes.dedup();
    if bytes.is_empty() || bytes.len() > MAX_CLASS {
        return None;
    }
    Some(bytes.into_iter().map(|b| alloc::vec![b]).collect())
}

fn walk(hir: &Hir, depth: usize) -> Info {
    if depth > MAX_DEPTH {
        return Info::Inexact(None);
    }
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Info::Exact(alloc::vec![Vec::new()]),
        HirKind::Literal(lit) => Info::Exact(alloc::vec![lower(&lit.0)]),
        HirKind::Class(c) => match class_set(c) {
            Some(s) => Info::Exact(s),
            None => Info::Inexact(None),
        },
        HirKind::Capture(c) => walk(&c.sub, depth + 1),
        HirKind::Repetition(rep) => {
            let sub = walk(&rep.sub, depth + 1);
            match sub {
                Info::Exact(s) => {
                    // Small bounded repetitions of exact strings stay exact: `colou?r`.
                    if let Some(max) = rep.max {
                        if max <= 3 && max >= rep.min {
                            let mut all: Set = Vec::new();
                            let mut power: Set = alloc::vec![Vec::new()];
                            let mut ok = true;
                            for n in 0..=max {
                                if n >= rep.min {
                                    all.extend(power.iter().cloned());
                                }
                                if n < max {
                                    match cross(&power, &s) {
                                        Some(p) => power = p,
                                        None => {
                                            ok = false;
                                            break;
                                        }
                                    }
                                }
                            }
                            if ok && all.len() <= MAX_SET {
                                return Info::Exact(dedup(all));
                            }
                        }
                    }
                    match (rep.min >= 1, as_required(&s)) {
                        (true, Some(s)) => {
                            let head = (1..rep.min.min(3)).try_fold(s.clone(), |acc, _| cross(&acc, &s));
                            Info::Around { head: head.unwrap_or_else(|| s.clone()), tail: s }
                        }
                        _ => Info::Inexact(None),
                    }
                }
                other if rep.min >= 1 => other.inexact(),
                _ => Info::Inexact(None),
            }
        }
        HirKind::Concat(subs) => {
            let mut best: Option<Set> = None;
            let mut acc: Option<Set> = Some(alloc::vec![Vec::new()]);
            let mut exact = true;
            for sub in subs {
                match walk(sub, depth + 1) {
                    Info::Exact(s) => {
                        let next = acc.as_ref().and_then(|a| cross(a, &s));
                        match next {
                            Some(n) => acc = Some(n),
                            None => {
                                exact = false;
                                if let Some(a) = acc.take() {
                                    best = better(best, as_required(&a));
                                }
                                acc = Some(s);
                            }
                        }
                    }
                    Info::Inexact(req) => {
                        exact = false;
                        if let Some(a) = acc.take() {
                            best = better(best, as_required(&a));
                        }
                        best = better(best, req);
                        acc = Some(alloc::vec![Vec::new()]);
                    }
                    Info::Around { head, tail } => {
                        exact = false;
                        let joined = acc.take().map(|a| cross(&a, &head).map_or(a, |j| j));
                        best = better(best, joined.as_ref().and_then(as_required));
                        best = better(best, as_required(&head));
                        acc = Some(tail);
                    }
                }
            }
            match acc {
                Some(a) if exact => Info::Exact(a),
                Some(a) => Info::Inexact(better(best, as_required(&a))),
                None => Info::Inexact(best),
            }
        }
        HirKind::Alternation(subs) => {
            let mut exact: Set = Vec::new();
            let mut all_exact = true;
            let mut required: Option<Set> = Some(Vec::new());
            for sub in subs {
                match walk(sub, depth + 1).inexact() {
                    Info::Exact(s) => {
                        if let Some(r) = required.as_mut() {
                            match as_required(&s) {
                                Some(q) => r.extend(q),
                                None => required = None,
                            }
                        }
                        exact.extend(s);
                    }
                    Info::Inexact(req) => {
                        all_exact = false;
                        match (required.as_mut(), req) {
                            (Some(r), Some(q)) => r.extend(q),
                            _ => required = None,
                        }
                    }
                    Info::Around { .. } => required = None,
                }
            }
            if all_exact && exact.len() <= MAX_SET {
                return Info::Exact(dedup(exact));
            }
            Info::Inexact(required.and_then(shrink))
        }
    }
}

/// A few bytes one of which every match of a pattern holds, for the patterns with no
/// prefilter literal: a text without any of them is not searched at all, and a line
/// pattern is searched from the line of the first one. `\w!\s` needs `!`,
/// `[^\x00-\x7f]{12}` a byte above 0x7f.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RequiredByte {
    /// One of these one to three bytes (memchr finds them).
    AnyOf(Vec<u8>),
    /// Any byte above 0x7f.
    NonAscii,
}

impl RequiredByte {
    /// Where the first required byte of `text` is.
    pub(crate) fn find(&self, text: &[u8]) -> Option<usize> {
        match self {
            RequiredByte::AnyOf(bytes) => find_any(bytes, text),
            RequiredByte::NonAscii => {
                // Whole chunks first: `is_ascii` runs a word at a time.
                let mut done = 0;
                for chunk in text.chunks(64) {
                    if !chunk.is_ascii() {
                        return chunk.iter().position(|b| !b.is_ascii()).map(|i| done + i);
                    }
                    done += chunk.len();
                }
                None
            }
        }
    }

    fn of(set: &ByteSet) -> Option<RequiredByte> {
        let count = set.count();
        if count == 0 {
            return None;
        }
        if set.is_non_ascii() {
            return Some(RequiredByte::NonAscii);
        }
        (count <= 3).then(|| RequiredByte::AnyOf(set.bytes().collect()))
    }
}

/// Where the first of one to three `bytes` is in `text`; for more (or none), 0: they
/// tell nothing, so a search starts at the beginning.
pub(crate) fn find_any(bytes: &[u8], text: &[u8]) -> Option<usize> {
    match *bytes {
        [a] => memchr::memchr(a, text),
        [a, b] => memchr::memchr2(a, b, text),
        [a, b, c] => memchr::memchr3(a, b, c, text),
        _ => Some(0),
    }
}

/// How often text holds one of the bytes of `set`, roughly: letters, digits and white
/// space are everywhere, punctuation less so, bytes above 0x7f rare in most mail.
fn commonness(set: &ByteSet) -> u32 {
    set.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b' ' | b'\t' | b'\n' | b'\r' => 16,
            b'.' | b',' | b'-' | b'\'' | b'"' | b':' | b'/' | b'(' | b')' => 4,
            0x80..=0xff => 1,
            _ => 2,
        })
        .sum()
}

/// The required byte of `hir` that is rarest in text, when one can be looked for.
pub(crate) fn required_byte(hir: &Hir) -> Option<RequiredByte> {
    required_bytes(hir, 0).as_ref().and_then(RequiredByte::of)
}

/// A set of bytes one of which every match of `hir` holds, the rarest found, that
/// [`RequiredByte`] can express (or `None`).
fn required_bytes(hir: &Hir, depth: usize) -> Option<ByteSet> {
    if depth > MAX_DEPTH {
        return None;
    }
    let usable = |set: ByteSet| RequiredByte::of(&set).is_some().then_some(set);
    match hir.kind() {
        HirKind::Literal(lit) => {
            lit.0.iter().map(|&b| ByteSet::single(b)).min_by_key(commonness)
        }
        HirKind::Class(Class::Bytes(c)) => {
            let mut set = ByteSet::default();
            for r in c.ranges() {
                for b in r.start()..=r.end() {
                    set.insert(b);
                }
            }
            usable(set)
        }
        // The parser folds alternations of UTF-8 sequences into these: a code point
        // above 0x7f is bytes above 0x7f.
        HirKind::Class(Class::Unicode(c)) => {
            let mut set = ByteSet::default();
            for r in c.ranges() {
                for b in (r.start() as u32)..=(r.end() as u32).min(0x7f) {
                    set.insert(b as u8);
                }
                if u32::from(r.end()) >= 0x80 {
                    (0x80..=0xffu8).for_each(|b| set.insert(b));
                }
            }
            usable(set)
        }
        HirKind::Empty | HirKind::Look(_) => None,
        HirKind::Repetition(rep) if rep.min >= 1 => required_bytes(&rep.sub, depth + 1),
        HirKind::Repetition(_) => None,
        HirKind::Capture(c) => required_bytes(&c.sub, depth + 1),
        HirKind::Concat(subs) => subs.iter().filter_map(|h| required_bytes(h, depth + 1)).min_by_key(commonness),
        HirKind::Alternation(subs) => {
            let mut set = ByteSet::default();
            for h in subs {
                set = usable(set.union(required_bytes(h, depth + 1)?))?;
            }
            Some(set)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    fn lits(pattern: &str) -> Option<alloc::vec::Vec<String>> {
        let hir = regex_syntax::ParserBuilder::new()
            .unicode(false)
            .utf8(false)
            .build()
            .parse(pattern)
            .expect("test pattern parses");
        required(&hir).map(|s| s.into_iter().map(|l| String::from_utf8_lossy(&l).into_owned()).collect())
    }

    #[test]
    fn required_byte_table() {
        use RequiredByte::{AnyOf, NonAscii};
        let cases: &[(&str, Option<RequiredByte>)] = &[
            (r"\w!\s", Some(AnyOf(alloc::vec![b'!']))),
            (r"[^\x00-\x7f]{12}", Some(NonAscii)),
            (r"(?i)a<b", Some(AnyOf(alloc::vec![b'<']))),
            (r"[#$%]\s+\w", Some(AnyOf(alloc::vec![b'#', b'$', b'%']))),
            (r"\w+@\w+|\w+#\w+", Some(AnyOf(alloc::vec![b'#', b'@']))),
            // The rarest of a concatenation's parts, a digit before a letter.
            (r"(?i)x1", Some(AnyOf(alloc::vec![b'1']))),
            // Optional parts require nothing; no branch may lack a byte.
            (r"a?!?b", Some(AnyOf(alloc::vec![b'b']))),
            (r"!|\w", None),
            (r"x*", None),
            (r"[a-z]{5}", None),
            (r"[!?.,;]", None),
            (r"^$", None),
            (r"\xe2\x80\xa6|\xc2\xa0", Some(NonAscii)),
            (r"\xe2\x80\xa6|\xe2\x80\xa7", Some(NonAscii)),
            (r"\xe2\x80\xa6|!", None),
        ];
        for (pattern, want) in cases {
            let hir = regex_syntax::ParserBuilder::new().unicode(false).utf8(false).build().parse(pattern).expect("test pattern parses");
            assert_eq!(&required_byte(&hir), want, "{pattern}");
        }
        let finds: &[(RequiredByte, &[u8], Option<usize>)] = &[
            (AnyOf(alloc::vec![b'!']), b"abc!d!", Some(3)),
            (AnyOf(alloc::vec![b'!', b'?']), b"ab?c!", Some(2)),
            (AnyOf(alloc::vec![b'#', b'$', b'%']), b"plain", None),
            (NonAscii, b"plain ascii", None),
            (NonAscii, &[b'a'; 70], None),
            (NonAscii, b"caf\xc3\xa9", Some(3)),
        ];
        for (byte, text, want) in finds {
            assert_eq!(byte.find(text), *want, "{byte:?} in {text:?}");
        }
        let mut late = alloc::vec![b'x'; 130];
        late.push(0xe9);
        assert_eq!(NonAscii.find(&late), Some(130));
    }

    /// A pattern, and the literals and hit count it requires.
    type RepeatCase<'a> = (&'a str, Option<(&'a [&'a str], u32)>);

    #[test]
    fn repeated_groups_need_several_hits_table() {
        let cases: &[RepeatCase<'_>] = &[
            (r"(?:(?:name|city)[:, ]+){3}", Some((&["city ", "city,", "city:", "name ", "name,", "name:"], 3))),
            (r"((?:name|city)\s){2,}", Some((&["city", "name"], 2))),
            // One copy required: the plain literal rule.
            (r"(?:(?:name|city)\s)+", Some((&["city", "name"], 1))),
            (r"x(?:(?:name|city)\s){3}", Some((&["city", "name"], 1))),
            // A repeated group with no literal of its own falls back to the whole pattern.
            (r"(?:\w+\s){5}", None),
        ];
        for (pattern, want) in cases {
            let got = regex_syntax::ParserBuilder::new().unicode(false).utf8(false).build().parse(pattern).ok().and_then(|h| requirement(&h));
            let got = got.map(|r| (r.literals.into_iter().map(|l| String::from_utf8_lossy(&l).into_owned()).collect::<alloc::vec::Vec<_>>(), r.min_hits));
            let want = want.map(|(l, n)| (l.iter().map(|s| String::from(*s)).collect::<alloc::vec::Vec<_>>(), n));
            assert_eq!(got, want, "{pattern}");
        }
    }

    #[test]
    fn required_literals_table() {
        let cases: &[(&str, Option<&[&str]>)] = &[
            ("viagra", Some(&["viagra"])),
            ("(?i)ViAgRa", Some(&["viagra"])),
            (r"(?i)\bfree\s+money\b", Some(&["money"])),
            ("colou?r", Some(&["color", "colour"])),
            ("(?:cheap|discount) meds", Some(&["cheap meds", "discount meds"])),
            (r"\d+ percent off", Some(&[" percent off"])),
            ("a.*b", None),
            (r"^\s*$", None),
            ("ab", None),
            ("(?:foo|.*)", None),
            (r"click\W+here", Some(&["click"])),
            ("[Vv]iagra", Some(&["viagra"])),
            ("x{3}yz", Some(&["xxxyz"])),
            ("(?:unsubscribe|remove me)+", Some(&["remove me", "unsubscribe"])),
            // A repetition's first and last copies join the literals around it.
            ("ad+res+", Some(&["dres"])),
            (r"xyz+abc\d", Some(&["zabc"])),
            ("(?:cheap )+meds", Some(&["cheap meds"])),
        ];
        for (pattern, want) in cases {
            let want = want.map(|w| w.iter().map(|s| String::from(*s)).collect::<alloc::vec::Vec<_>>());
            assert_eq!(lits(pattern), want, "{pattern}");
        }
    }

    #[test]
    fn match_prefixes_table() {
        let cases: &[(&str, Option<&[&str]>)] = &[
            ("(?i)Content-Type:\\s*text/html", Some(&["content-type:"])),
            (r"(?im)^name\s*=", Some(&["name"])),
            (r"(?i)\b(?:Bcc|CC):", Some(&["bcc:", "cc:"])),
            ("[Vv]iagra|cialis", Some(&["cialis", "viagra"])),
            // Literals too short, or a start that is no literal at all.
            ("(?i)ab+c", None),
            (r"\w+@example", None),
            (r"(?:x|y)?content", Some(&["content", "xcontent", "ycontent"])),
            (r"x?\w+content", None),
            ("a.*b", None),
        ];
        for (pattern, want) in cases {
            let hir = regex_syntax::ParserBuilder::new().unicode(false).utf8(false).build().parse(pattern).expect("parses");
            let got = prefixes(&hir).map(|r| {
                assert!(r.starts_match && r.min_hits == 1, "{pattern}");
                r.literals.into_iter().map(|l| String::from_utf8_lossy(&l).into_owned()).collect::<alloc::vec::Vec<_>>()
            });
            let want = want.map(|w| w.iter().map(|s| String::from(*s)).collect::<alloc::vec::Vec<_>>());
            assert_eq!(got, want, "{pattern}");
        }
    }

    const WORDS30: [&str; 30] = [
        "word00", "word01", "word02", "word03", "word04", "word05", "word06", "word07", "word08", "word09", "word10", "word11",
        "word12", "word13", "word14", "word15", "word16", "word17", "word18", "word19", "word20", "word21", "word22", "word23",
        "word24", "word25", "word26", "word27", "word28", "word29",
    ];

    #[test]
    fn wide_alternations_shrink_table() {
        let words = |f: &dyn Fn(usize) -> String| (0..120).map(f).collect::<alloc::vec::Vec<_>>().join("|");
        let cases: &[(String, Option<&[&str]>)] = &[
            // Up to MAX_WIDE words stay whole.
            (alloc::format!("(?:{})", (0..30).map(|i| alloc::format!("word{i:02}")).collect::<alloc::vec::Vec<_>>().join("|")), Some(&WORDS30)),
            // 120 words: cut to the longest prefix length leaving at most MAX_WIDE literals.
            (alloc::format!("(?:{})", words(&|i| alloc::format!("word{i:03}"))), Some(&["word00", "word01", "word02", "word03", "word04", "word05", "word06", "word07", "word08", "word09", "word10", "word11"])),
            // A literal holding another is dropped first.
            (alloc::format!("(?:abc|{})", words(&|i| alloc::format!("x{i}abc"))), Some(&["abc"])),
            // Too many distinct prefixes even at the shortest useful length.
            (alloc::format!("(?:{})", words(&|i| alloc::format!("{}{}zz", (b'a' + i as u8 % 26) as char, i))), None),
        ];
        for (pattern, want) in cases {
            let want = want.map(|w| w.iter().map(|s| String::from(*s)).collect::<alloc::vec::Vec<_>>());
            assert_eq!(lits(pattern), want, "{pattern}");
        }
    }

    /// Literals, a text, every hit as (literal, start).
    type HitCase<'a> = (&'a [&'a str], &'a str, &'a [(usize, usize)]);

    #[test]
    fn literal_hits_table() {
        // Both automata report every hit in the order the hits end; the crate's own
        // overlapping search agrees.
        let cases: &[HitCase<'_>] = &[
            (&["abc", "bc", "c"], "xabcx", &[(0, 1), (1, 2), (2, 3)]),
            (&["abc", "bc", "c"], "ABC abc", &[(0, 0), (1, 1), (2, 2), (0, 4), (1, 5), (2, 6)]),
            (&["aa"], "aaaa", &[(0, 0), (0, 1), (0, 2)]),
            (&["foo", "bar"], "no hits here", &[]),
            (&["foo", "bar"], "", &[]),
            (&["end"], "the end", &[(0, 4)]),
            (&["Mixed"], "mIXED", &[(0, 0)]),
        ];
        for (literals, text, want) in cases {
            let literals: Vec<Vec<u8>> = literals.iter().map(|l| l.as_bytes().to_vec()).collect();
            let oracle = aho_corasick::AhoCorasick::builder().ascii_case_insensitive(true).build(&literals).expect("builds");
            let theirs: Vec<(usize, usize)> = oracle.find_overlapping_iter(text.as_bytes()).map(|m| (m.pattern().as_usize(), m.start())).collect();
            assert_eq!(&theirs, want, "{text:?}");
            let automata = [LiteralAutomaton::dfa(&literals, usize::MAX), LiteralAutomaton::nfa(&literals).ok()];
            for automaton in automata.iter().flatten() {
                let mut got = Vec::new();
                automaton.for_each_hit(text.as_bytes(), |literal, start| got.push((literal, start)));
                assert_eq!(&got, want, "{text:?}");
            }
        }
        // A DFA over the limit is refused.
        assert!(LiteralAutomaton::dfa(&[b"abc".to_vec()], 10).is_none());
    }
}
