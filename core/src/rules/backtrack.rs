//! A bounded backtracking matcher for the Perl constructs that have no DFA form:
//! lookahead and lookbehind (positive and negative), backreferences, atomic groups
//! and possessive quantifiers.
//!
//! A pattern that uses them is compiled twice (see [`crate::rules::perl::backtrack`]):
//! - a **relaxed** regex for the DFA and its literal prefilter, which matches every
//!   text the Perl regex matches (lookarounds dropped, or kept as plain text where
//!   that is sound; a backreference replaced by its group's pattern; atomic and
//!   possessive made plain; long counted repetitions opened up), so the automaton
//!   never loses a hit;
//! - an exact **[`Program`]** with Perl's leftmost, priority-ordered semantics,
//!   run only on the texts (lines) where the relaxed DFA matched.
//!
//! A run is bounded: every instruction, every backtrack and every byte a
//! repetition scans costs a step, and a call stops after the scratch's step
//! budget (a base plus an allowance per byte of text, so the work stays linear
//! in the text) or when its fixed stack is full, with the answer [`Undecided`]. The
//! stack is explicit (no recursion on input) and sized when the scratch is made,
//! so a warm call allocates nothing.
//!
//! An undecided text must never make a rule hit: a `=~` rule counts it as not
//! matching, a `!~` rule as matching. Perl itself would always decide, so either
//! way can disagree with SpamAssassin; this way no rule fires on a guess, which
//! suits SpamAssassin's aversion to false positives (most rules add score). The
//! relaxed DFA's answer is no guide here: dropping a negative
//! lookaround turns an exclusion into a match, so it is often far too broad.
//! Exhaustion is rare: none in 41,000 runs over stock rules and corpus mail
//! (`core/tests/backtrack_stock.rs`).
//!
//! Shortcuts keep the common shapes cheap without changing a result: start
//! positions are found with memchr on the rarest byte of a fixed prefix, which is
//! checked before the program runs; a repeat whose class cannot overlap what
//! follows it keeps no frame; runs and give-backs are searched with memchr, and
//! a repeat giving back skips places where the frame-free instructions after it
//! (a backreference among them) fail; the lines a loop over whole lines walks are
//! noted once a search, so later starts stop walking where they meet them.
//!
//! Matching is on bytes with perl.rs's semantics: `/i` folds ASCII only, classes
//! are the translated byte classes, `$` is end of text (a lookahead `(?=\n?\z)`,
//! Perl's `$` without `/m`, is one instruction).
//!
//! The eval tests' own patterns ([`crate::rules::eval::re`]) run here too, built by
//! `compile_captures`: no relaxed form (no DFA screens their texts), every
//! capture group recorded for [`Program::capture`], and a literal every match
//! contains checked before any attempt.

use alloc::boxed::Box;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use regex_syntax::hir::{self, Class, ClassBytes, ClassBytesRange, Hir, HirKind, Look};

mod image;

/// Names of the placeholder groups perl.rs writes in its backtracking translation.
/// A capture `(?P<c3>...)` is Perl group 3; a backreference is an (otherwise
/// meaningless) group named `r{k}_{n}` or, under `/i`, `ri{k}_{n}`; `{k}` only
/// keeps names unique.
pub(crate) struct Special;

impl Special {
    /// A Perl capture group; the number follows.
    pub(crate) const CAPTURE: &'static str = "c";
    /// `(?=...)`
    pub(crate) const AHEAD: &'static str = "pa";
    /// `(?!...)`
    pub(crate) const NOT_AHEAD: &'static str = "na";
    /// `(?<=...)`
    pub(crate) const BEHIND: &'static str = "pb";
    /// `(?<!...)`
    pub(crate) const NOT_BEHIND: &'static str = "nb";
    /// `(?>...)`, and a possessive quantifier with its atom.
    pub(crate) const ATOMIC: &'static str = "at";
    /// A backreference, case-sensitive.
    pub(crate) const BACKREF: &'static str = "r";
    /// A backreference under `/i`.
    pub(crate) const BACKREF_FOLD: &'static str = "ri";
}

/// Steps a call may take by default, whatever the text's length.
pub const DEFAULT_STEP_BUDGET: u32 = 100_000;
/// Steps a call may take by default for each byte of the text, on top of
/// [`DEFAULT_STEP_BUDGET`]: a pattern that is linear in practice gets through a
/// long text, while catastrophic backtracking is still cut off, and the work for
/// one message stays linear in its size.
pub const DEFAULT_STEPS_PER_BYTE: u32 = 32;
/// Backtracking frames a scratch holds by default (20 bytes each).
pub const DEFAULT_STACK_FRAMES: usize = 2048;

/// Most instructions in one program.
const MAX_INSTS: usize = 1 << 16;
/// Deepest HIR nesting walked.
const MAX_DEPTH: usize = 300;
/// Nesting limit given to the parser.
const NEST_LIMIT: u32 = 250;
/// Perl's longest lookbehind.
const MAX_LOOKBEHIND: u32 = 255;
/// In the relaxed form, counted repetitions with bounds above this become open
/// (`X{0,2048}` is `X*`): the DFA stays small, the program is still exact.
pub(crate) const RELAX_REPEAT: u32 = 16;
/// A relaxed form that opens no counted repetition: a screen that counts, where its
/// DFA is small enough.
pub(crate) const RELAX_NONE: u32 = u32::MAX;
/// The loosest relaxed form opens every counted repetition but `?` (`X{1,15}` is
/// `X+`, `X{5}` is `X+`): a screen for patterns whose DFA grows with the counting.
pub(crate) const RELAX_EVERY_REPEAT: u32 = 1;
/// "No position", "no marker", "no follow class".
const NONE: u32 = u32::MAX;
const NO_CLASS: u16 = u16::MAX;
/// A repetition's maximum when it has none (Perl's own counts stop at 65534).
const UNBOUNDED: u16 = u16::MAX;

/// A stored repetition bound as a count (`UNBOUNDED`: no bound).
fn wide(bound: u16) -> u32 {
    if bound == UNBOUNDED {
        NONE
    } else {
        u32::from(bound)
    }
}

/// A count as stored in an instruction.
fn narrow(count: u32) -> Result<u16, BacktrackError> {
    u16::try_from(count).ok().filter(|&c| c != UNBOUNDED).ok_or(BacktrackError::TooLarge)
}

/// Why a pattern has no backtracking program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BacktrackError {
    /// The translation did not parse (a bug in the translation, or a limit).
    Parse(String),
    /// A backreference to a group the pattern does not have (Perl rejects it too).
    NoSuchGroup(u32),
    /// A lookbehind with no bound on its length, or longer than Perl allows.
    Lookbehind,
    /// A construct the matcher does not implement, named.
    Construct(&'static str),
    /// More instructions, classes or counters than a program may have.
    TooLarge,
    /// Nested too deeply.
    TooDeep,
}

impl fmt::Display for BacktrackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BacktrackError::Parse(e) => write!(f, "backtracking translation does not parse: {e}"),
            BacktrackError::NoSuchGroup(n) => write!(f, "reference to nonexistent group {n}"),
            BacktrackError::Lookbehind => f.write_str("lookbehind of unbounded length or longer than 255"),
            BacktrackError::Construct(what) => write!(f, "{what} in a backtracking pattern"),
            BacktrackError::TooLarge => f.write_str("backtracking program too large"),
            BacktrackError::TooDeep => f.write_str("backtracking pattern nested too deeply"),
        }
    }
}

/// Why a call gave no answer. The text must not make the rule hit (see the module
/// documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Undecided {
    /// The step budget ran out.
    StepLimit,
    /// The backtracking stack is full.
    StackLimit,
    /// The text is longer than positions can count (4 GiB).
    TooLong,
}

impl fmt::Display for Undecided {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Undecided::StepLimit => f.write_str("backtracking step budget exhausted"),
            Undecided::StackLimit => f.write_str("backtracking stack full"),
            Undecided::TooLong => f.write_str("text too long for the backtracking matcher"),
        }
    }
}

/// A pattern compiled both ways: see the module documentation.
#[derive(Debug, Clone)]
pub struct Backtrack {
    /// regex-automata syntax (bytes, no Unicode) matching at least every text the
    /// Perl regex matches: build the DFA and the prefilter literals from it.
    pub relaxed: String,
    /// The exact matcher that confirms the relaxed DFA's hits.
    pub program: Program,
}

/// 256 bits: a set of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ByteSet {
    lo: u128,
    hi: u128,
}

impl ByteSet {
    const ALL: ByteSet = ByteSet { lo: u128::MAX, hi: u128::MAX };

    pub(crate) fn contains(&self, b: u8) -> bool {
        if b < 128 {
            self.lo >> b & 1 == 1
        } else {
            self.hi >> (b - 128) & 1 == 1
        }
    }

    pub(crate) fn insert(&mut self, b: u8) {
        if b < 128 {
            self.lo |= 1 << b;
        } else {
            self.hi |= 1 << (b - 128);
        }
    }

    pub(crate) fn single(b: u8) -> ByteSet {
        let mut s = ByteSet::default();
        s.insert(b);
        s
    }

    pub(crate) fn union(self, other: ByteSet) -> ByteSet {
        ByteSet { lo: self.lo | other.lo, hi: self.hi | other.hi }
    }

    fn intersect(self, other: ByteSet) -> ByteSet {
        ByteSet { lo: self.lo & other.lo, hi: self.hi & other.hi }
    }

    pub(crate) fn count(&self) -> u32 {
        self.lo.count_ones() + self.hi.count_ones()
    }

    /// Bytes of an image: bit `b` of the set is bit `b % 8` of byte `b / 8`.
    pub(crate) const IMAGE_LEN: usize = 32;

    /// Its image, [`ByteSet::IMAGE_LEN`] bytes appended to `out`.
    pub(crate) fn write_image(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.lo.to_le_bytes());
        out.extend_from_slice(&self.hi.to_le_bytes());
    }

    /// The set `write_image` wrote to `bytes`; `None` unless they are that long.
    pub(crate) fn read_image(bytes: &[u8]) -> Option<ByteSet> {
        let (lo, hi) = bytes.split_first_chunk::<16>()?;
        let hi: &[u8; 16] = hi.try_into().ok()?;
        Some(ByteSet { lo: u128::from_le_bytes(*lo), hi: u128::from_le_bytes(*hi) })
    }

    /// Whether every byte of it is above 0x7f.
    pub(crate) fn is_non_ascii(&self) -> bool {
        self.lo == 0
    }

    /// Its bytes in increasing order, a set bit at a time.
    pub(crate) fn bytes(&self) -> impl Iterator<Item = u8> {
        let (mut lo, mut hi) = (self.lo, self.hi);
        core::iter::from_fn(move || {
            if lo != 0 {
                let b = lo.trailing_zeros() as u8;
                lo &= lo - 1;
                Some(b)
            } else if hi != 0 {
                let b = hi.trailing_zeros() as u8;
                hi &= hi - 1;
                Some(128 + b)
            } else {
                None
            }
        })
    }

    fn of_class(class: &Class) -> Result<ByteSet, BacktrackError> {
        let mut s = ByteSet::default();
        match class {
            Class::Bytes(c) => {
                for r in c.iter() {
                    for b in r.start()..=r.end() {
                        s.insert(b);
                    }
                }
            }
            Class::Unicode(c) => {
                for r in c.iter() {
                    let (lo, hi) = (u32::from(r.start()), u32::from(r.end()));
                    let (Ok(lo), Ok(hi)) = (u8::try_from(lo), u8::try_from(hi)) else {
                        return Err(BacktrackError::Construct("class beyond bytes"));
                    };
                    for b in lo..=hi {
                        s.insert(b);
                    }
                }
            }
        }
        Ok(s)
    }
}

/// A zero-width assertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Assert {
    Start,
    End,
    StartLine,
    EndLine,
    Word,
    NotWord,
    WordStart,
    WordEnd,
    WordStartHalf,
    WordEndHalf,
    /// Perl's `$` without `/m`: the end, or before a final `\n`.
    EndBeforeNewline,
}

impl Assert {
    fn of(look: Look) -> Result<Assert, BacktrackError> {
        Ok(match look {
            Look::Start => Assert::Start,
            Look::End => Assert::End,
            Look::StartLF => Assert::StartLine,
            Look::EndLF => Assert::EndLine,
            Look::WordAscii => Assert::Word,
            Look::WordAsciiNegate => Assert::NotWord,
            Look::WordStartAscii => Assert::WordStart,
            Look::WordEndAscii => Assert::WordEnd,
            Look::WordStartHalfAscii => Assert::WordStartHalf,
            Look::WordEndHalfAscii => Assert::WordEndHalf,
            _ => return Err(BacktrackError::Construct("Unicode or CRLF assertion")),
        })
    }
}

/// Which construct a marker frame belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MarkerKind {
    Ahead,
    NotAhead,
    Behind,
    NotBehind,
    Atomic,
}

impl MarkerKind {
    fn negative(self) -> bool {
        matches!(self, MarkerKind::NotAhead | MarkerKind::NotBehind)
    }

    fn behind(self) -> bool {
        matches!(self, MarkerKind::Behind | MarkerKind::NotBehind)
    }
}

/// One instruction. `pc` values index `Program::insts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inst {
    /// The whole pattern matched.
    Match,
    Byte(u8),
    /// `len` bytes of `Program::bytes` from `start`.
    Literal {
        start: u32,
        len: u32,
    },
    /// One byte of class `Program::classes[.0]`.
    Class(u16),
    Look(Assert),
    /// Go on at `first`; on failure, at `second`. With a `guard` class, go
    /// straight to `second` when the next byte is not in it (`first` cannot match).
    Split {
        first: u32,
        second: u32,
        guard: u16,
    },
    Jump(u32),
    /// One byte of `class`, `min..=max` times (`max` = `NONE`: no bound). `follow`:
    /// the class the next byte must be in for the rest to match, or `NO_CLASS`.
    Repeat {
        class: u16,
        min: u16,
        max: u16,
        greedy: bool,
        possessive: bool,
        follow: u16,
    },
    /// Starts a counted loop: its counter to 0.
    RepeatStart {
        counter: u16,
    },
    /// Loop head: enter the body (at `pc + 2`) or leave (at `exit`).
    RepeatLoop {
        counter: u16,
        min: u16,
        max: u16,
        greedy: bool,
        exit: u32,
    },
    /// At `pc + 1` of a lazy loop's head: enters the body when leaving failed.
    RepeatEnter {
        counter: u16,
    },
    /// End of the body: back to `loop_pc`, unless the iteration matched nothing.
    /// `body_first`: the class the body begins with, which is what follows while the
    /// loop is below its minimum (it must go round again), or `NO_CLASS`.
    RepeatEnd {
        counter: u16,
        loop_pc: u32,
        body_first: u16,
    },
    /// In place of a loop's `RepeatStart`: a greedy loop whose body is two runs of
    /// disjoint classes, each taken whole (`(?:[^\n]{1,100}\n+)*`, lines). The loop
    /// it stands for follows (its runs at `pc + 3` and `pc + 4`, its end at
    /// `exit - 1`). Its turns are walked with no frame each, and given back to ends
    /// where what follows can begin.
    Runs {
        min: u16,
        max: u16,
        exit: u32,
    },
    /// A referenced capture group opens / closes.
    Open(u16),
    Close(u16),
    /// The text captured by a group, again (ASCII case-folded when `fold`).
    Backref {
        slot: u16,
        fold: bool,
    },
    /// A lookaround: its body follows; `end` is the instruction after its `LookEnd`.
    LookStart {
        kind: MarkerKind,
        min: u16,
        max: u16,
        end: u32,
    },
    LookEnd,
    AtomicStart,
    AtomicEnd,
}

/// Where a match can start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Anchor {
    Anywhere,
    /// Only at the start of the text.
    Start,
    /// Only at the start of a line.
    Line,
}

/// A byte set small enough for memchr: at most three bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Few {
    Empty,
    One(u8),
    Two(u8, u8),
    Three(u8, u8, u8),
    /// More than three bytes.
    Many,
}

impl Few {
    fn of(set: ByteSet) -> Few {
        if set.count() > 3 {
            return Few::Many;
        }
        let mut bytes = set.bytes();
        match (set.count(), bytes.next(), bytes.next(), bytes.next()) {
            (0, ..) => Few::Empty,
            (1, Some(a), _, _) => Few::One(a),
            (2, Some(a), Some(b), _) => Few::Two(a, b),
            (3, Some(a), Some(b), Some(c)) => Few::Three(a, b, c),
            _ => Few::Many,
        }
    }

    /// The first byte of `hay` in the set: `Err` when the set is `Many`.
    fn find(self, hay: &[u8]) -> Result<Option<usize>, ()> {
        Ok(match self {
            Few::Empty => None,
            Few::One(a) => memchr::memchr(a, hay),
            Few::Two(a, b) => memchr::memchr2(a, b, hay),
            Few::Three(a, b, c) => memchr::memchr3(a, b, c, hay),
            Few::Many => return Err(()),
        })
    }

    /// The last byte of `hay` in the set: `Err` when the set is `Many`.
    fn rfind(self, hay: &[u8]) -> Result<Option<usize>, ()> {
        Ok(match self {
            Few::Empty => None,
            Few::One(a) => memchr::memrchr(a, hay),
            Few::Two(a, b) => memchr::memrchr2(a, b, hay),
            Few::Three(a, b, c) => memchr::memrchr3(a, b, c, hay),
            Few::Many => return Err(()),
        })
    }
}

/// A class as memchr can search it: its bytes, and the bytes outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ClassScan {
    inside: Few,
    outside: Few,
}

impl ClassScan {
    fn of(set: ByteSet) -> ClassScan {
        let outside = ByteSet { lo: !set.lo, hi: !set.hi };
        ClassScan { inside: Few::of(set), outside: Few::of(outside) }
    }
}

/// Which bytes the search looks for before trying a start position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// Every position.
    Any,
    /// The byte `offset` bytes after the start is one of `bytes` (not `Many`).
    Bytes { offset: u32, bytes: Few },
    /// The first byte is in this set.
    Set(ByteSet),
}

impl Scan {
    /// The scan for a byte set `offset` bytes into every match.
    fn of(set: ByteSet, offset: u32) -> Scan {
        match Few::of(set) {
            Few::Many if offset == 0 && set != ByteSet::ALL => Scan::Set(set),
            Few::Many | Few::Empty => Scan::Any,
            bytes => Scan::Bytes { offset, bytes },
        }
    }
}

/// The exact matcher of one pattern. Immutable; runs with a [`BacktrackScratch`].
#[derive(Debug, Clone)]
pub struct Program {
    insts: Vec<Inst>,
    classes: Vec<ByteSet>,
    /// `classes` as memchr searches them.
    class_scans: Vec<ClassScan>,
    bytes: Vec<u8>,
    /// Capture groups a backreference reads.
    groups: usize,
    counters: usize,
    anchor: Anchor,
    /// How the search skips to where a match can start.
    scan: Scan,
    /// With a `Scan::Set` that lets most places through: the bytes that can follow
    /// each first byte of a match (all, after a byte that is a match alone).
    pairs: Option<Box<Pairs>>,
    /// The program begins with `prefix_pc` instructions that each match fixed
    /// bytes (or an assertion `anchor` already guarantees), `prefix_len` bytes in
    /// all: the search checks them before running the program from after them.
    prefix_pc: u32,
    prefix_len: u32,
    /// Shortest match.
    min_len: u32,
    /// The pattern starts with `X+` (greedy or possessive, unbounded): when an
    /// attempt inside a run of X fails, the rest of the run fails too (Perl's
    /// PREGf_SKIP), so only the first position of each run is tried.
    skip_runs: Option<u16>,
    /// Perl capture groups recorded, when the program records them all
    /// ([`compile_captures`]; group `n` is in slot `n - 1`); 0 otherwise.
    captures: u16,
    /// Bytes every match contains, checked before any attempt (programs that
    /// record captures only; others run where a DFA already found them).
    required: Required,
}

/// A literal every match contains: `len` bytes of `Program::bytes` from `start`
/// (none when `len` is 0), looked for at its rarest byte, `key`; ASCII case
/// ignored when `fold`.
#[derive(Debug, Clone, Copy, Default)]
struct Required {
    start: u32,
    len: u16,
    key: u16,
    fold: bool,
}

/// Shortest required literal worth a check.
const MIN_REQUIRED: usize = 3;

/// For each byte, the bytes that can follow it at the start of a match.
pub(crate) type Pairs = [ByteSet; 256];

/// Most first bytes a program's scan lets through before its pairs are kept too.
const PAIRS_FROM: u32 = 16;
/// Most of the 65,536 pairs of bytes the kept pairs may let through.
const PAIRS_AT_MOST: u32 = 4096;

/// What the first two bytes of a match of a pattern can be.
#[derive(Clone)]
struct Openings {
    /// It can match empty (assertions count as empty).
    nullable: bool,
    /// Bytes a non-empty match can start with.
    first: ByteSet,
    /// Bytes that are a whole match alone.
    single: ByteSet,
    /// The first two bytes of the longer matches.
    pairs: Box<Pairs>,
}

impl Openings {
    fn empty() -> Openings {
        Openings { nullable: true, first: ByteSet::default(), single: ByteSet::default(), pairs: Box::new([ByteSet::default(); 256]) }
    }

    fn any() -> Openings {
        Openings { nullable: true, first: ByteSet::ALL, single: ByteSet::ALL, pairs: Box::new([ByteSet::ALL; 256]) }
    }

    fn union(mut self, other: &Openings) -> Openings {
        self.nullable |= other.nullable;
        self.first = self.first.union(other.first);
        self.single = self.single.union(other.single);
        for (row, more) in self.pairs.iter_mut().zip(other.pairs.iter()) {
            *row = row.union(*more);
        }
        self
    }

    /// Of `self` followed by `next`.
    fn then(mut self, next: &Openings) -> Openings {
        for a in self.single.bytes() {
            if let Some(row) = self.pairs.get_mut(usize::from(a)) {
                *row = row.union(next.first);
            }
        }
        let single = match (self.nullable, next.nullable) {
            (true, true) => self.single.union(next.single),
            (true, false) => next.single,
            (false, true) => self.single,
            (false, false) => ByteSet::default(),
        };
        if self.nullable {
            self.first = self.first.union(next.first);
            for (row, more) in self.pairs.iter_mut().zip(next.pairs.iter()) {
                *row = row.union(*more);
            }
        }
        self.single = single;
        self.nullable &= next.nullable;
        self
    }

    /// The pairs a scan checks: a byte that is a match alone lets any byte follow.
    fn kept(mut self) -> Box<Pairs> {
        for a in self.single.bytes() {
            if let Some(row) = self.pairs.get_mut(usize::from(a)) {
                *row = ByteSet::ALL;
            }
        }
        self.pairs
    }
}

/// The openings of the matches of `hir`, a superset: lookarounds count as empty, a
/// backreference as anything.
fn openings(hir: &Hir, depth: usize) -> Openings {
    if depth > MAX_DEPTH {
        return Openings::any();
    }
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Openings::empty(),
        HirKind::Literal(lit) => {
            let mut o = Openings::empty();
            match (lit.0.first(), lit.0.get(1)) {
                (Some(&a), Some(&b)) => {
                    o.first = ByteSet::single(a);
                    if let Some(row) = o.pairs.get_mut(usize::from(a)) {
                        *row = ByteSet::single(b);
                    }
                }
                (Some(&a), None) => {
                    o.first = ByteSet::single(a);
                    o.single = o.first;
                }
                _ => return o,
            }
            o.nullable = false;
            o
        }
        HirKind::Class(c) => {
            let set = ByteSet::of_class(c).unwrap_or(ByteSet::ALL);
            Openings { nullable: false, first: set, single: set, pairs: Box::new([ByteSet::default(); 256]) }
        }
        HirKind::Repetition(rep) if rep.max == Some(0) => Openings::empty(),
        HirKind::Repetition(rep) => {
            let once = openings(&rep.sub, depth + 1);
            let twice = if rep.max == Some(1) { once.clone() } else { once.clone().then(&once).union(&once) };
            Openings { nullable: twice.nullable || rep.min == 0, ..twice }
        }
        HirKind::Capture(cap) => match placeholder(cap) {
            Placeholder::Look(_) => Openings::empty(),
            Placeholder::Backref { .. } => Openings::any(),
            _ => openings(&cap.sub, depth + 1),
        },
        HirKind::Concat(subs) => subs.iter().fold(Openings::empty(), |o, s| o.then(&openings(s, depth + 1))),
        HirKind::Alternation(subs) => {
            let mut o = Openings::empty();
            o.nullable = false;
            for s in subs {
                o = o.union(&openings(s, depth + 1));
            }
            o
        }
    }
}

/// Working memory of the matcher, reused across programs and calls.
#[derive(Debug)]
pub struct BacktrackScratch {
    stack: Vec<Frame>,
    stack_limit: usize,
    /// Ends of `Runs` loops' turns still to give back to, each loop's above the last's.
    ends: Vec<u32>,
    /// The turns one `Runs` loop walked in this search, for walks that meet them.
    runs_memo: RunsMemo,
    groups: Vec<GroupSlots>,
    counters: Vec<CounterSlots>,
    budget: u32,
    per_byte: u32,
    last_steps: u32,
    deepest: usize,
}

/// Matches counted the way Perl's `/g` finds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchCount {
    /// Matches found.
    pub count: u32,
    /// Set when counting stopped before the text was searched to its end.
    pub undecided: Option<Undecided>,
}

/// Where the first walk of a `Runs` loop went in one search: each place its turns
/// reached, and those where what follows the loop can begin. A turn from a place always
/// ends at the same place, so a later walk (from another start, or another try of the
/// same start) that reaches one of them goes on as the first did and takes its ends
/// without walking: a header block's lines are walked once, not once for each
/// `Received` line a pattern starts from. Kept for a loop with no bounds whose tail
/// reads no capture, where every walk's ends agree.
#[derive(Debug)]
struct RunsMemo {
    /// The loop's instruction; `NONE`: no walk noted yet in this search.
    pc: u32,
    /// The noted walk is whole: it went to its last turn with room for every place.
    whole: bool,
    /// Places the turns reached, in order.
    reached: Vec<u32>,
    /// Those where the loop's tail matches, in order.
    stops: Vec<u32>,
}

impl RunsMemo {
    fn with_capacity(places: usize) -> RunsMemo {
        RunsMemo { pc: NONE, whole: false, reached: Vec::with_capacity(places), stops: Vec::with_capacity(places) }
    }

    /// Forgets the last search's walk.
    fn clear(&mut self) {
        self.pc = NONE;
        self.whole = false;
        self.reached.clear();
        self.stops.clear();
    }

    /// Notes a place the walk reached; false when there is no room left (nothing
    /// grows during a search).
    fn note(&mut self, at: u32, stop: bool) -> bool {
        if self.reached.len() >= self.reached.capacity() || (stop && self.stops.len() >= self.stops.capacity()) {
            return false;
        }
        self.reached.push(at);
        if stop {
            self.stops.push(at);
        }
        true
    }

    /// When the noted walk of the loop at `pc` reached `at`: its stops from `at` on.
    fn stops_from(&self, pc: u32, at: u32) -> Option<&[u32]> {
        if self.pc != pc || !self.whole || self.reached.binary_search(&at).is_err() {
            return None;
        }
        self.stops.get(self.stops.partition_point(|&s| s < at)..)
    }
}

#[derive(Debug, Clone, Copy)]
struct GroupSlots {
    /// Where the group's current attempt began.
    open: u32,
    /// The last completed capture.
    start: u32,
    end: u32,
}

impl GroupSlots {
    const UNSET: GroupSlots = GroupSlots { open: NONE, start: NONE, end: NONE };
}

#[derive(Debug, Clone, Copy)]
struct CounterSlots {
    count: u32,
    /// Where the current iteration began.
    start: u32,
}

/// A backtracking stack entry: a place to resume, or a change to undo.
#[derive(Debug, Clone, Copy)]
enum Frame {
    Alt {
        pc: u32,
        pos: u32,
    },
    /// A greedy loop may stop after `count` iterations, the last begun at
    /// `start`: the counter goes back to that and the match resumes at `pc`.
    LoopExit {
        pc: u32,
        pos: u32,
        slot: u16,
        count: u32,
        start: u32,
    },
    /// A greedy `Repeat` at `pc` may give bytes back down to `min`.
    GiveBack {
        pc: u32,
        min: u32,
        pos: u32,
    },
    /// A `Runs` loop, going on at `exit`, may give back to the ends its turns
    /// left at `ends[base..top]` (the last first).
    RunsBack {
        exit: u32,
        base: u32,
        top: u32,
    },
    /// A lazy `Repeat` at `pc` may take more, having taken `count`.
    TakeMore {
        pc: u32,
        pos: u32,
        count: u32,
    },
    /// The next start a lookbehind body (at `pc`) may try, up to `last`.
    Behind {
        pc: u32,
        next: u32,
        last: u32,
    },
    /// An open lookaround or atomic group: where it began, where it goes on
    /// (`pc`), and the marker below it.
    Marker {
        kind: MarkerKind,
        pos: u32,
        pc: u32,
        prev: u32,
    },
    UndoGroup {
        slot: u16,
        start: u32,
        end: u32,
    },
    UndoOpen {
        slot: u16,
        open: u32,
    },
    UndoCounter {
        slot: u16,
        count: u32,
        start: u32,
    },
}

impl Frame {
    fn is_undo(&self) -> bool {
        matches!(self, Frame::UndoGroup { .. } | Frame::UndoOpen { .. } | Frame::UndoCounter { .. })
    }
}

impl Default for BacktrackScratch {
    fn default() -> Self {
        BacktrackScratch::with_limits(DEFAULT_STEP_BUDGET, DEFAULT_STEPS_PER_BYTE, DEFAULT_STACK_FRAMES)
    }
}

impl BacktrackScratch {
    /// A scratch whose calls may take `budget + per_byte * text length` steps and
    /// hold `frames` backtracking frames.
    pub fn with_limits(budget: u32, per_byte: u32, frames: usize) -> Self {
        BacktrackScratch {
            stack: Vec::with_capacity(frames),
            ends: Vec::with_capacity(frames),
            runs_memo: RunsMemo::with_capacity(frames.min(RUNS_MEMO_PLACES)),
            stack_limit: frames,
            groups: Vec::new(),
            counters: Vec::new(),
            budget,
            per_byte,
            last_steps: 0,
            deepest: 0,
        }
    }

    /// A scratch with default limits, sized for all of `programs`.
    pub fn for_programs<'p>(programs: impl IntoIterator<Item = &'p Program>) -> Self {
        let mut s = BacktrackScratch::default();
        for p in programs {
            s.fit(p);
        }
        s
    }

    /// Grows the scratch to run `program` (allocates only when it is too small).
    pub fn fit(&mut self, program: &Program) {
        if self.groups.len() < program.groups {
            self.groups.resize(program.groups, GroupSlots::UNSET);
        }
        if self.counters.len() < program.counters {
            self.counters.resize(program.counters, CounterSlots { count: 0, start: NONE });
        }
    }

    /// Sets the step budget of later calls: `budget + per_byte * text length`.
    pub fn set_budget(&mut self, budget: u32, per_byte: u32) {
        self.budget = budget;
        self.per_byte = per_byte;
    }

    /// Steps the last call took.
    pub fn last_steps(&self) -> u32 {
        self.last_steps
    }

    /// Steps a call on a text of `len` bytes may take.
    pub fn budget_for(&self, len: usize) -> u32 {
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        self.budget.saturating_add(self.per_byte.saturating_mul(len))
    }

    /// Deepest the stack went in the last call, in frames.
    pub fn deepest_stack(&self) -> usize {
        self.deepest
    }
}

impl Program {
    /// Leftmost match at or after `start` as Perl finds it: `(start, end)`.
    /// Assertions and lookbehind see the whole of `hay`, so `/g` can continue
    /// from a previous match's end.
    pub fn find_at(
        &self,
        hay: &[u8],
        start: usize,
        scratch: &mut BacktrackScratch,
    ) -> Result<Option<(usize, usize)>, Undecided> {
        let budget = scratch.budget_for(hay.len());
        self.search(hay, start, None, scratch, budget)
    }

    /// Whether the pattern matches somewhere in `hay`.
    pub fn is_match(&self, hay: &[u8], scratch: &mut BacktrackScratch) -> Result<bool, Undecided> {
        self.find_at(hay, 0, scratch).map(|m| m.is_some())
    }

    /// Counts matches as `while ($text =~ /re/g)` does, at most `max`: after an
    /// empty match the next may not be empty at the same place. All the searches
    /// share one step budget.
    pub fn count_matches(&self, hay: &[u8], max: u32, scratch: &mut BacktrackScratch) -> MatchCount {
        let mut count = 0;
        let mut pos = 0;
        let mut forbid_empty = None;
        let budget = scratch.budget_for(hay.len());
        let mut left = budget;
        let mut undecided = None;
        let mut deepest = 0;
        while count < max {
            let found = self.search(hay, pos, forbid_empty, scratch, left);
            left -= scratch.last_steps.min(left);
            deepest = deepest.max(scratch.deepest);
            match found {
                Ok(Some((s, e))) => {
                    count += 1;
                    forbid_empty = (s == e).then_some(e);
                    pos = e;
                }
                Ok(None) => break,
                Err(why) => {
                    undecided = Some(why);
                    break;
                }
            }
        }
        scratch.last_steps = budget - left;
        scratch.deepest = deepest;
        MatchCount { count, undecided }
    }

    fn search(
        &self,
        hay: &[u8],
        start: usize,
        forbid_empty: Option<usize>,
        scratch: &mut BacktrackScratch,
        budget: u32,
    ) -> Result<Option<(usize, usize)>, Undecided> {
        scratch.last_steps = 0;
        scratch.deepest = 0;
        let len = u32::try_from(hay.len()).ok().filter(|&l| l < NONE).ok_or(Undecided::TooLong)?;
        let r = self.required;
        if r.len > 0 {
            let needle = self.bytes.get(r.start as usize..r.start as usize + usize::from(r.len)).unwrap_or(&[]);
            if hay.get(start..).and_then(|h| find_anchored(h, needle, usize::from(r.key), r.fold)).is_none() {
                return Ok(None);
            }
        }
        scratch.fit(self);
        scratch.runs_memo.clear();
        let forbid = forbid_empty.and_then(|f| u32::try_from(f).ok()).unwrap_or(NONE);
        let mut vm = Vm { prog: self, hay, len, steps: budget, top: NONE, forbid, s: scratch };
        let result = vm.search(start);
        let used = budget - vm.steps;
        scratch.last_steps = used;
        result
    }

    /// Capture groups the program records (none unless built to record them).
    pub fn captures(&self) -> usize {
        usize::from(self.captures)
    }

    /// Where capture group `n` (from 1) of the match the last call found lies,
    /// when the group took part and the program records captures.
    pub fn capture(&self, scratch: &BacktrackScratch, n: usize) -> Option<(usize, usize)> {
        let slot = n.checked_sub(1).filter(|&s| s < self.captures())?;
        let g = scratch.groups.get(slot)?;
        (g.start != NONE && g.end != NONE && g.start <= g.end).then_some((g.start as usize, g.end as usize))
    }

    /// Bytes the shortest match takes.
    pub(crate) fn min_len(&self) -> u32 {
        self.min_len
    }

    /// Instructions in the program.
    pub fn len(&self) -> usize {
        self.insts.len()
    }

    /// Whether the program has no instructions (never: it ends with a match).
    pub fn is_empty(&self) -> bool {
        self.insts.is_empty()
    }
}

struct Vm<'p, 'h, 's> {
    prog: &'p Program,
    hay: &'h [u8],
    len: u32,
    s: &'s mut BacktrackScratch,
    steps: u32,
    /// Index of the topmost marker frame.
    top: u32,
    /// A match may not be empty at this position (`NONE`: no restriction).
    forbid: u32,
}

enum Next {
    Go(u32, u32),
    Fail,
    Done(u32),
}

impl Vm<'_, '_, '_> {
    fn tick(&mut self, n: u32) -> Result<(), Undecided> {
        match self.steps.checked_sub(n) {
            Some(left) => {
                self.steps = left;
                Ok(())
            }
            None => {
                self.steps = 0;
                Err(Undecided::StepLimit)
            }
        }
    }

    fn push(&mut self, frame: Frame) -> Result<(), Undecided> {
        let n = self.s.stack.len();
        if n >= self.s.stack_limit {
            return Err(Undecided::StackLimit);
        }
        self.s.stack.push(frame);
        if n + 1 > self.s.deepest {
            self.s.deepest = n + 1;
        }
        Ok(())
    }

    fn byte(&self, pos: u32) -> Option<u8> {
        self.hay.get(pos as usize).copied()
    }

    fn class(&self, c: u16) -> ByteSet {
        self.prog.classes.get(usize::from(c)).copied().unwrap_or_default()
    }

    fn in_class(&self, c: u16, pos: u32) -> bool {
        self.byte(pos).is_some_and(|b| self.class(c).contains(b))
    }

    fn class_scan(&self, c: u16) -> ClassScan {
        let many = ClassScan { inside: Few::Many, outside: Few::Many };
        self.prog.class_scans.get(usize::from(c)).copied().unwrap_or(many)
    }

    /// How many bytes at the start of `run` are in class `c`.
    fn run_len(&self, c: u16, run: &[u8]) -> usize {
        match self.class_scan(c).outside.find(run) {
            Ok(found) => found.unwrap_or(run.len()),
            Err(()) => {
                let set = self.class(c);
                run.iter().position(|&b| !set.contains(b)).unwrap_or(run.len())
            }
        }
    }

    /// The last position in `lo..=hi` where what follows a repeat can begin.
    fn last_follow(&self, follow: u16, lo: u32, hi: u32) -> Option<u32> {
        if follow == NO_CLASS {
            return Some(hi);
        }
        let end = (hi as usize).saturating_add(1).min(self.hay.len());
        let window = self.hay.get(lo as usize..end).unwrap_or(&[]);
        let found = match self.class_scan(follow).inside.rfind(window) {
            Ok(found) => found,
            Err(()) => {
                let set = self.class(follow);
                window.iter().rposition(|&b| set.contains(b))
            }
        };
        found.map(|p| lo + p as u32)
    }

    /// The captured text of group `slot`, when set.
    fn captured(&self, slot: u16) -> Option<&[u8]> {
        let g = self.s.groups.get(usize::from(slot))?;
        self.hay.get(g.start as usize..g.end as usize)
    }

    /// The length of group `slot`'s text when it occurs again at `pos`.
    fn backref(&mut self, slot: u16, fold: bool, pos: u32) -> Result<Option<u32>, Undecided> {
        let hay = self.hay;
        let Some(captured) = self.captured(slot) else { return Ok(None) };
        let len = captured.len();
        let here = hay.get(pos as usize..(pos as usize).saturating_add(len));
        let same = here.is_some_and(|h| if fold { h.eq_ignore_ascii_case(captured) } else { h == captured });
        self.tick(len as u32 / 16)?;
        Ok(same.then_some(len as u32))
    }

    /// Whether the instructions from `pc` that decide without a frame (bytes,
    /// classes, literals, assertions, backreferences; at most [`TAIL_INSTS`])
    /// match at `pos`. When they do not, running them would fail there and
    /// backtrack, so a repeat giving back can skip `pos`.
    fn tail_matches(&mut self, mut pc: u32, mut pos: u32) -> Result<bool, Undecided> {
        for _ in 0..TAIL_INSTS {
            let ok = match self.prog.insts.get(pc as usize) {
                Some(&Inst::Byte(b)) => {
                    pos += 1;
                    self.byte(pos - 1) == Some(b)
                }
                Some(&Inst::Class(c)) => {
                    pos += 1;
                    self.in_class(c, pos - 1)
                }
                Some(&Inst::Literal { start, len }) => {
                    let want = self.prog.bytes.get(start as usize..start as usize + len as usize);
                    let have = self.hay.get(pos as usize..(pos as usize).saturating_add(len as usize));
                    pos = pos.saturating_add(len);
                    want.is_some() && want == have
                }
                Some(&Inst::Look(a)) => self.assert(a, pos),
                Some(&Inst::Backref { slot, fold }) => match self.backref(slot, fold, pos)? {
                    Some(len) => {
                        pos += len;
                        true
                    }
                    None => false,
                },
                _ => return Ok(true),
            };
            if !ok {
                return Ok(false);
            }
            pc += 1;
        }
        Ok(true)
    }

    /// Whether [`Vm::tail_matches`] from `pc` reads a capture (a backreference).
    fn tail_reads_captures(&self, pc: u32) -> bool {
        let tail = self.prog.insts.get(pc as usize..).unwrap_or(&[]);
        for inst in tail.iter().take(TAIL_INSTS) {
            match inst {
                Inst::Backref { .. } => return true,
                Inst::Byte(_) | Inst::Class(_) | Inst::Literal { .. } | Inst::Look(_) => {}
                _ => return false,
            }
        }
        false
    }

    /// The bytes a backreference at `pc` can begin with, when known.
    fn backref_first(&self, pc: u32) -> Option<Few> {
        let Some(&Inst::Backref { slot, fold }) = self.prog.insts.get(pc as usize) else { return None };
        let &b = self.captured(slot)?.first()?;
        let (l, u) = (b.to_ascii_lowercase(), b.to_ascii_uppercase());
        Some(if fold && l != u { Few::Two(l, u) } else { Few::One(b) })
    }

    /// The last position in `lo..=hi` where the repeat at `pc` (with follow
    /// class `follow`) can stop: what follows can begin there.
    fn last_stop(&mut self, pc: u32, follow: u16, lo: u32, hi: u32) -> Result<Option<u32>, Undecided> {
        let first = if follow == NO_CLASS { self.backref_first(pc + 1) } else { None };
        // A line assertion next (`.{1,2048}^\1` under `/m`): only line edges can stop it.
        let edge = match self.prog.insts.get(pc as usize + 1) {
            Some(&Inst::Look(a @ (Assert::StartLine | Assert::EndLine))) if follow == NO_CLASS => Some(a),
            _ => None,
        };
        let mut hi = hi;
        loop {
            let found = match (first, edge) {
                (Some(few), _) => {
                    let end = (hi as usize).saturating_add(1).min(self.hay.len());
                    let window = self.hay.get(lo as usize..end).unwrap_or(&[]);
                    few.rfind(window).ok().flatten().map(|p| lo + p as u32)
                }
                (None, Some(Assert::StartLine)) => self.last_line_start(lo, hi),
                (None, Some(_)) => self.last_line_end(lo, hi),
                (None, None) => self.last_follow(follow, lo, hi),
            };
            let Some(c) = found else { return Ok(None) };
            if self.tail_matches(pc + 1, c)? {
                return Ok(Some(c));
            }
            self.tick(1)?;
            if c <= lo {
                return Ok(None);
            }
            hi = c - 1;
        }
    }

    /// The last position in `lo..=hi` where a line starts (`^` under `/m` holds).
    fn last_line_start(&self, lo: u32, hi: u32) -> Option<u32> {
        // A line starts after each `\n`, and at 0.
        let from = lo.saturating_sub(1) as usize;
        let after_newline = self.hay.get(from..hi as usize).and_then(|w| memchr::memrchr(b'\n', w)).map(|j| (from + j + 1) as u32);
        after_newline.or((lo == 0).then_some(0))
    }

    /// The last position in `lo..=hi` where a line ends (`$` under `/m` holds).
    fn last_line_end(&self, lo: u32, hi: u32) -> Option<u32> {
        if hi >= self.len {
            return Some(self.len);
        }
        let end = (hi as usize).saturating_add(1).min(self.hay.len());
        self.hay.get(lo as usize..end).and_then(|w| memchr::memrchr(b'\n', w)).map(|j| lo + j as u32)
    }

    /// The follow class of the repeat at `pc` (`follow` as compiled) as things
    /// stand: when it ends a loop's body and the loop is below its minimum, what the
    /// body begins with. A frame backtracked into sees the count it was pushed
    /// under: the counter's undo frames above it are popped first.
    fn follow_now(&self, pc: u32, follow: u16) -> u16 {
        let Some(&Inst::RepeatEnd { counter, loop_pc, body_first }) = self.prog.insts.get(pc as usize + 1) else { return follow };
        if body_first == NO_CLASS {
            return follow;
        }
        let Some(&Inst::RepeatLoop { min, .. }) = self.prog.insts.get(loop_pc as usize) else { return follow };
        if self.counter(counter).count < u32::from(min) {
            body_first
        } else {
            follow
        }
    }

    /// Whether the byte at `pos` can begin what follows a repeat.
    fn follow_ok(&self, follow: u16, pos: u32) -> bool {
        follow == NO_CLASS || self.in_class(follow, pos)
    }

    fn is_word(&self, pos: u32) -> bool {
        self.byte(pos).is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
    }

    fn assert(&self, a: Assert, pos: u32) -> bool {
        let before = pos.checked_sub(1).is_some_and(|p| self.is_word(p));
        let after = self.is_word(pos);
        match a {
            Assert::Start => pos == 0,
            Assert::End => pos == self.len,
            Assert::StartLine => pos == 0 || self.byte(pos - 1) == Some(b'\n'),
            Assert::EndLine => pos == self.len || self.byte(pos) == Some(b'\n'),
            Assert::Word => before != after,
            Assert::NotWord => before == after,
            Assert::WordStart => !before && after,
            Assert::WordEnd => before && !after,
            Assert::WordStartHalf => !before,
            Assert::WordEndHalf => !after,
            Assert::EndBeforeNewline => pos == self.len || (pos + 1 == self.len && self.byte(pos) == Some(b'\n')),
        }
    }

    /// The next position at or after `at` where a match may start, its fixed
    /// prefix checked.
    fn candidate(&self, mut at: usize) -> Option<usize> {
        let hay = self.hay;
        let min_len = self.prog.min_len as usize;
        loop {
            if hay.len().checked_sub(at)? < min_len {
                return None;
            }
            match self.prog.anchor {
                Anchor::Start if at != 0 => return None,
                Anchor::Line if at != 0 && hay.get(at - 1) != Some(&b'\n') => {
                    at += memchr::memchr(b'\n', hay.get(at..)?)? + 1;
                    continue;
                }
                _ => {}
            }
            let skip = match self.prog.scan {
                // One place to try: no scan ahead.
                _ if self.prog.anchor == Anchor::Start => 0,
                Scan::Any => 0,
                Scan::Bytes { offset, bytes } => bytes.find(hay.get(at + offset as usize..)?).ok()??,
                Scan::Set(set) => hay.get(at..)?.iter().position(|&b| set.contains(b))?,
            };
            if skip > 0 {
                at += skip;
                continue;
            }
            if let (Some(pairs), Some(&a), Some(&b)) = (&self.prog.pairs, hay.get(at), hay.get(at + 1)) {
                if !pairs.get(usize::from(a)).is_some_and(|row| row.contains(b)) {
                    at += 1;
                    continue;
                }
            }
            if self.prefix_matches(at) {
                return Some(at);
            }
            at += 1;
        }
    }

    /// Whether the program's fixed prefix matches at `at`.
    fn prefix_matches(&self, at: usize) -> bool {
        let mut pos = at;
        let prefix = self.prog.insts.get(..self.prog.prefix_pc as usize).unwrap_or(&[]);
        for inst in prefix {
            let ok = match *inst {
                Inst::Byte(b) => {
                    pos += 1;
                    self.hay.get(pos - 1) == Some(&b)
                }
                Inst::Class(c) => {
                    pos += 1;
                    self.hay.get(pos - 1).is_some_and(|&b| self.class(c).contains(b))
                }
                Inst::Literal { start, len } => {
                    let (start, len) = (start as usize, len as usize);
                    let want = self.prog.bytes.get(start..start + len);
                    pos += len;
                    want.is_some_and(|w| self.hay.get(pos - len..pos) == Some(w))
                }
                _ => true,
            };
            if !ok {
                return false;
            }
        }
        true
    }

    fn search(&mut self, start: usize) -> Result<Option<(usize, usize)>, Undecided> {
        let mut at = start;
        while let Some(c) = self.candidate(at) {
            let pos = u32::try_from(c).map_err(|_| Undecided::TooLong)?;
            if let Some(end) = self.run(pos)? {
                return Ok(Some((c, end as usize)));
            }
            at = c + 1;
            if let Some(class) = self.prog.skip_runs {
                if self.in_class(class, pos) {
                    while self.hay.get(at).is_some_and(|&b| self.class(class).contains(b)) {
                        at += 1;
                    }
                }
            }
        }
        Ok(None)
    }

    /// One anchored attempt at `at`: the end of the match Perl would pick there.
    fn run(&mut self, at: u32) -> Result<Option<u32>, Undecided> {
        self.s.stack.clear();
        self.s.ends.clear();
        self.top = NONE;
        for g in self.s.groups.iter_mut().take(self.prog.groups) {
            *g = GroupSlots::UNSET;
        }
        let (mut pc, mut pos) = (self.prog.prefix_pc, at + self.prog.prefix_len);
        loop {
            self.tick(1)?;
            let next = match self.prog.insts.get(pc as usize) {
                Some(&inst) => self.step(inst, pc, pos, at)?,
                None => Next::Fail,
            };
            match next {
                Next::Go(p, q) => (pc, pos) = (p, q),
                Next::Done(end) => return Ok(Some(end)),
                Next::Fail => match self.backtrack()? {
                    Some((p, q)) => (pc, pos) = (p, q),
                    None => return Ok(None),
                },
            }
        }
    }

    fn step(&mut self, inst: Inst, pc: u32, pos: u32, at: u32) -> Result<Next, Undecided> {
        let next = pc + 1;
        Ok(match inst {
            Inst::Match => {
                if pos == at && at == self.forbid {
                    Next::Fail
                } else {
                    Next::Done(pos)
                }
            }
            Inst::Byte(b) => {
                if self.byte(pos) == Some(b) {
                    Next::Go(next, pos + 1)
                } else {
                    Next::Fail
                }
            }
            Inst::Literal { start, len } => {
                let want = self.prog.bytes.get(start as usize..(start as usize).saturating_add(len as usize));
                let have = self.hay.get(pos as usize..(pos as usize).saturating_add(len as usize));
                match (want, have) {
                    (Some(w), Some(h)) if w == h => Next::Go(next, pos + len),
                    _ => Next::Fail,
                }
            }
            Inst::Class(c) => {
                if self.in_class(c, pos) {
                    Next::Go(next, pos + 1)
                } else {
                    Next::Fail
                }
            }
            Inst::Look(a) => {
                if self.assert(a, pos) {
                    Next::Go(next, pos)
                } else {
                    Next::Fail
                }
            }
            Inst::Split { first, second, guard } => {
                if guard != NO_CLASS && !self.in_class(guard, pos) {
                    Next::Go(second, pos)
                } else {
                    self.push(Frame::Alt { pc: second, pos })?;
                    Next::Go(first, pos)
                }
            }
            Inst::Jump(to) => Next::Go(to, pos),
            Inst::Repeat { class, min, max, greedy, possessive, follow } => {
                let follow = self.follow_now(pc, follow);
                self.repeat(pc, pos, class, u32::from(min), wide(max), greedy || possessive, possessive, follow)?
            }
            Inst::RepeatStart { counter } => {
                self.set_counter(counter, 0, NONE)?;
                Next::Go(next, pos)
            }
            Inst::Runs { min, max, exit } => self.runs(pc, pos, u32::from(min), wide(max), exit)?,
            Inst::RepeatLoop { counter, min, max, greedy, exit } => {
                let (min, max) = (u32::from(min), wide(max));
                let c = self.counter(counter);
                let body = pc + 2;
                if c.count < min {
                    self.set_counter(counter, c.count + 1, pos)?;
                    Next::Go(body, pos)
                } else if c.count < max {
                    if greedy {
                        // One frame both to stop here and to undo the count.
                        self.push(Frame::LoopExit { pc: exit, pos, slot: counter, count: c.count, start: c.start })?;
                        if let Some(slot) = self.s.counters.get_mut(usize::from(counter)) {
                            *slot = CounterSlots { count: c.count + 1, start: pos };
                        }
                        Next::Go(body, pos)
                    } else {
                        self.push(Frame::Alt { pc: next, pos })?;
                        Next::Go(exit, pos)
                    }
                } else {
                    Next::Go(exit, pos)
                }
            }
            Inst::RepeatEnter { counter } => {
                let n = self.counter(counter).count;
                self.set_counter(counter, n.saturating_add(1), pos)?;
                Next::Go(next, pos)
            }
            Inst::RepeatEnd { counter, loop_pc, .. } => {
                let Some(&Inst::RepeatLoop { min, exit, .. }) = self.prog.insts.get(loop_pc as usize) else {
                    return Ok(Next::Fail);
                };
                let c = self.counter(counter);
                // Perl: an iteration that matched nothing ends the loop once `min` is reached.
                if c.count >= u32::from(min) && pos == c.start {
                    Next::Go(exit, pos)
                } else {
                    Next::Go(loop_pc, pos)
                }
            }
            Inst::Open(slot) => {
                let Some(g) = self.s.groups.get(usize::from(slot)).copied() else { return Ok(Next::Fail) };
                self.push(Frame::UndoOpen { slot, open: g.open })?;
                if let Some(g) = self.s.groups.get_mut(usize::from(slot)) {
                    g.open = pos;
                }
                Next::Go(next, pos)
            }
            Inst::Close(slot) => {
                let Some(g) = self.s.groups.get(usize::from(slot)).copied() else { return Ok(Next::Fail) };
                self.push(Frame::UndoGroup { slot, start: g.start, end: g.end })?;
                if let Some(g) = self.s.groups.get_mut(usize::from(slot)) {
                    g.start = g.open;
                    g.end = pos;
                }
                Next::Go(next, pos)
            }
            Inst::Backref { slot, fold } => match self.backref(slot, fold, pos)? {
                Some(len) => Next::Go(next, pos + len),
                None => Next::Fail,
            },
            Inst::LookStart { kind, min, max, end } => {
                let (min, max) = (u32::from(min), u32::from(max));
                let marker = u32::try_from(self.s.stack.len()).map_err(|_| Undecided::StackLimit)?;
                self.push(Frame::Marker { kind, pos, pc: end, prev: self.top })?;
                self.top = marker;
                if !kind.behind() {
                    Next::Go(next, pos)
                } else if let Some(last) = pos.checked_sub(min) {
                    let first = pos.saturating_sub(max);
                    if first < last {
                        self.push(Frame::Behind { pc: next, next: first + 1, last })?;
                    }
                    Next::Go(next, first)
                } else {
                    Next::Fail
                }
            }
            Inst::LookEnd => {
                let Some(&Frame::Marker { kind, pos: began, pc: cont, .. }) = self.s.stack.get(self.top as usize)
                else {
                    return Ok(Next::Fail);
                };
                if kind.behind() && pos != began {
                    Next::Fail
                } else {
                    self.cut()?;
                    if kind.negative() {
                        Next::Fail
                    } else {
                        Next::Go(cont, began)
                    }
                }
            }
            Inst::AtomicStart => {
                let marker = u32::try_from(self.s.stack.len()).map_err(|_| Undecided::StackLimit)?;
                self.push(Frame::Marker { kind: MarkerKind::Atomic, pos, pc: next, prev: self.top })?;
                self.top = marker;
                Next::Go(next, pos)
            }
            Inst::AtomicEnd => {
                self.cut()?;
                Next::Go(next, pos)
            }
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn repeat(
        &mut self,
        pc: u32,
        pos: u32,
        class: u16,
        min: u32,
        max: u32,
        greedy: bool,
        possessive: bool,
        follow: u16,
    ) -> Result<Next, Undecided> {
        let room = self.len - pos;
        if min > room {
            return Ok(Next::Fail);
        }
        let set = self.class(class);
        let lo = pos + min;
        if greedy {
            let limit = pos + max.min(room);
            let run = self.hay.get(pos as usize..limit as usize).unwrap_or(&[]);
            let n = self.run_len(class, run) as u32;
            self.tick(n)?;
            if n < min {
                return Ok(Next::Fail);
            }
            let hi = pos + n;
            if possessive {
                return Ok(if self.follow_ok(follow, hi) { Next::Go(pc + 1, hi) } else { Next::Fail });
            }
            let Some(c) = self.last_stop(pc, follow, lo, hi)? else {
                self.tick(hi - lo)?;
                return Ok(Next::Fail);
            };
            self.tick(hi - c)?;
            if c > lo {
                self.push(Frame::GiveBack { pc, min: lo, pos: c })?;
            }
            Ok(Next::Go(pc + 1, c))
        } else {
            let first = self.hay.get(pos as usize..lo as usize).unwrap_or(&[]);
            if first.iter().any(|&b| !set.contains(b)) {
                return Ok(Next::Fail);
            }
            self.tick(min)?;
            let (mut c, mut n) = (lo, min);
            while !self.follow_ok(follow, c) {
                if n >= max || !self.byte(c).is_some_and(|b| set.contains(b)) {
                    return Ok(Next::Fail);
                }
                c += 1;
                n += 1;
                self.tick(1)?;
            }
            if n < max {
                self.push(Frame::TakeMore { pc, pos: c, count: n })?;
            }
            Ok(Next::Go(pc + 1, c))
        }
    }

    /// Enters the [`Inst::Runs`] loop at `pc` at `pos`: takes as many turns as it can
    /// (at most `max`), noting each end past the first `min` turns where the
    /// instructions at `exit` can begin, then goes on there from the last of them; a
    /// frame keeps the others.
    fn runs(&mut self, pc: u32, pos: u32, min: u32, max: u32, exit: u32) -> Result<Next, Undecided> {
        let base = self.s.ends.len();
        // Its two runs, read once for all its turns (none: it takes no turn).
        let runs = match (self.prog.insts.get(pc as usize + 3), self.prog.insts.get(pc as usize + 4)) {
            (Some(&Inst::Repeat { class: a, min: a_min, max: a_max, .. }), Some(&Inst::Repeat { class: b, min: b_min, max: b_max, .. })) => {
                Some([(a, a_min, a_max), (b, b_min, b_max)])
            }
            _ => None,
        };
        // Every walk of an unbounded loop from a place goes on alike, with the same
        // ends when its tail reads no capture: the first walk is noted for the others.
        let memo = min == 0 && max == NONE && runs.is_some() && !self.tail_reads_captures(exit);
        let noting = memo && self.s.runs_memo.pc == NONE;
        if noting {
            self.s.runs_memo.pc = pc;
        }
        let mut noted = noting;
        let (mut at, mut turns) = (pos, 0u32);
        loop {
            if memo && !noting {
                if let Some(stops) = self.s.runs_memo.stops_from(pc, at) {
                    if self.s.ends.len() + stops.len() > self.s.stack_limit {
                        return Err(Undecided::StackLimit);
                    }
                    self.s.ends.extend_from_slice(stops);
                    self.tick(1)?;
                    break;
                }
            }
            let stop = turns >= min && self.tail_matches(exit, at)?;
            if stop {
                if self.s.ends.len() >= self.s.stack_limit {
                    return Err(Undecided::StackLimit);
                }
                self.s.ends.push(at);
            }
            if noted {
                noted = self.s.runs_memo.note(at, stop);
            }
            if turns >= max {
                break;
            }
            let next = match runs {
                Some(runs) => self.turn(runs, at)?,
                None => None,
            };
            let Some(end) = next else { break };
            at = end;
            turns += 1;
        }
        self.s.runs_memo.whole |= noted;
        if turns < min {
            self.s.ends.truncate(base);
            return Ok(Next::Fail);
        }
        let base = u32::try_from(base).map_err(|_| Undecided::StackLimit)?;
        let top = u32::try_from(self.s.ends.len()).map_err(|_| Undecided::StackLimit)?;
        Ok(match self.runs_give_back(exit, base, top)? {
            Some(c) => Next::Go(exit, c),
            None => Next::Fail,
        })
    }

    /// Where a turn of a `Runs` loop from `at` ends: its first run, then its second (each
    /// a class with its bounds), each taken whole within its bounds; `None` when one
    /// falls short.
    fn turn(&mut self, runs: [(u16, u16, u16); 2], at: u32) -> Result<Option<u32>, Undecided> {
        let mut end = at;
        for (class, min, max) in runs {
            let limit = end + wide(max).min(self.len - end);
            let n = self.run_len(class, self.hay.get(end as usize..limit as usize).unwrap_or(&[])) as u32;
            self.tick(n.max(1))?;
            if n < u32::from(min) {
                return Ok(None);
            }
            end += n;
        }
        Ok(Some(end))
    }

    /// The last of the ends `ends[base..top]` a `Runs` loop noted (dropping it and any
    /// noted above it), a frame keeping the rest.
    fn runs_give_back(&mut self, exit: u32, base: u32, top: u32) -> Result<Option<u32>, Undecided> {
        if top <= base {
            return Ok(None);
        }
        let last = top - 1;
        let c = self.s.ends.get(last as usize).copied();
        self.s.ends.truncate(last as usize);
        if last > base {
            self.push(Frame::RunsBack { exit, base, top: last })?;
        }
        Ok(c)
    }

    fn counter(&self, c: u16) -> CounterSlots {
        self.s.counters.get(usize::from(c)).copied().unwrap_or(CounterSlots { count: 0, start: NONE })
    }

    fn set_counter(&mut self, c: u16, count: u32, start: u32) -> Result<(), Undecided> {
        let old = self.counter(c);
        self.push(Frame::UndoCounter { slot: c, count: old.count, start: old.start })?;
        if let Some(slot) = self.s.counters.get_mut(usize::from(c)) {
            *slot = CounterSlots { count, start };
        }
        Ok(())
    }

    /// Ends the construct of the topmost marker: drops its frames but keeps the
    /// undo entries, so captures made inside survive and are undone later.
    fn cut(&mut self) -> Result<(), Undecided> {
        let m = self.top as usize;
        let Some(&Frame::Marker { prev, .. }) = self.s.stack.get(m) else { return Ok(()) };
        let n = self.s.stack.len();
        self.tick(u32::try_from(n - m).unwrap_or(NONE))?;
        let mut w = m;
        for r in m + 1..n {
            let Some(f) = self.s.stack.get(r).copied() else { break };
            if f.is_undo() {
                if let Some(slot) = self.s.stack.get_mut(w) {
                    *slot = f;
                }
                w += 1;
            }
        }
        self.s.stack.truncate(w);
        self.top = prev;
        Ok(())
    }

    /// Pops frames until one says where to resume; `None` when none is left.
    fn backtrack(&mut self) -> Result<Option<(u32, u32)>, Undecided> {
        while let Some(frame) = self.s.stack.pop() {
            self.tick(1)?;
            match frame {
                Frame::Alt { pc, pos } => return Ok(Some((pc, pos))),
                Frame::LoopExit { pc, pos, slot, count, start } => {
                    if let Some(c) = self.s.counters.get_mut(usize::from(slot)) {
                        *c = CounterSlots { count, start };
                    }
                    return Ok(Some((pc, pos)));
                }
                Frame::GiveBack { pc, min, pos } => {
                    let Some(&Inst::Repeat { follow, .. }) = self.prog.insts.get(pc as usize) else { continue };
                    if pos <= min {
                        continue;
                    }
                    let follow = self.follow_now(pc, follow);
                    match self.last_stop(pc, follow, min, pos - 1)? {
                        Some(c) => {
                            self.tick(pos - c)?;
                            if c > min {
                                self.push(Frame::GiveBack { pc, min, pos: c })?;
                            }
                            return Ok(Some((pc + 1, c)));
                        }
                        None => self.tick(pos - min)?,
                    }
                }
                Frame::RunsBack { exit, base, top } => {
                    if let Some(c) = self.runs_give_back(exit, base, top)? {
                        return Ok(Some((exit, c)));
                    }
                }
                Frame::TakeMore { pc, pos, count } => {
                    let Some(&Inst::Repeat { class, max, follow, .. }) = self.prog.insts.get(pc as usize) else {
                        continue;
                    };
                    let follow = self.follow_now(pc, follow);
                    let (mut c, mut n, max) = (pos, count, wide(max));
                    while n < max && self.in_class(class, c) {
                        c += 1;
                        n += 1;
                        self.tick(1)?;
                        if self.follow_ok(follow, c) {
                            if n < max {
                                self.push(Frame::TakeMore { pc, pos: c, count: n })?;
                            }
                            return Ok(Some((pc + 1, c)));
                        }
                    }
                }
                Frame::Behind { pc, next, last } => {
                    if next < last {
                        self.push(Frame::Behind { pc, next: next + 1, last })?;
                    }
                    return Ok(Some((pc, next)));
                }
                Frame::Marker { kind, pos, pc, prev } => {
                    self.top = prev;
                    // The body of a negative lookaround failed: the assertion holds.
                    if kind.negative() {
                        return Ok(Some((pc, pos)));
                    }
                }
                Frame::UndoGroup { slot, start, end } => {
                    if let Some(g) = self.s.groups.get_mut(usize::from(slot)) {
                        g.start = start;
                        g.end = end;
                    }
                }
                Frame::UndoOpen { slot, open } => {
                    if let Some(g) = self.s.groups.get_mut(usize::from(slot)) {
                        g.open = open;
                    }
                }
                Frame::UndoCounter { slot, count, start } => {
                    if let Some(c) = self.s.counters.get_mut(usize::from(slot)) {
                        *c = CounterSlots { count, start };
                    }
                }
            }
        }
        Ok(None)
    }
}

/// What a named group of the backtracking translation stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placeholder {
    /// A group with no special meaning.
    Plain,
    Capture(u32),
    Look(MarkerKind),
    Atomic,
    Backref {
        group: u32,
        fold: bool,
    },
}

fn placeholder(cap: &hir::Capture) -> Placeholder {
    let Some(name) = cap.name.as_deref() else { return Placeholder::Plain };
    let kind_len = name.bytes().take_while(u8::is_ascii_alphabetic).count();
    let (Some(kind), Some(rest)) = (name.get(..kind_len), name.get(kind_len..)) else {
        return Placeholder::Plain;
    };
    let number = |s: &str| s.parse::<u32>().ok();
    let found = match kind {
        Special::CAPTURE => number(rest).map(Placeholder::Capture),
        Special::AHEAD => Some(Placeholder::Look(MarkerKind::Ahead)),
        Special::NOT_AHEAD => Some(Placeholder::Look(MarkerKind::NotAhead)),
        Special::BEHIND => Some(Placeholder::Look(MarkerKind::Behind)),
        Special::NOT_BEHIND => Some(Placeholder::Look(MarkerKind::NotBehind)),
        Special::ATOMIC => Some(Placeholder::Atomic),
        Special::BACKREF | Special::BACKREF_FOLD => rest
            .split_once('_')
            .and_then(|(_, n)| number(n))
            .map(|group| Placeholder::Backref { group, fold: kind == Special::BACKREF_FOLD }),
        _ => None,
    };
    found.unwrap_or(Placeholder::Plain)
}

/// The Perl capture groups of a pattern.
struct Groups<'h> {
    /// Group number → its sub-pattern.
    subs: Vec<Option<&'h Hir>>,
    /// Group number → a backreference reads it.
    referenced: Vec<bool>,
    /// Group number → it contains a backreference.
    has_backref: Vec<bool>,
    /// Group number → its slot in the scratch, when referenced.
    slots: Vec<Option<u16>>,
}

impl<'h> Groups<'h> {
    /// The groups of `hir`; with `all`, every capture group gets a slot, not only
    /// those a backreference reads.
    fn of(hir: &'h Hir, all: bool) -> Result<Groups<'h>, BacktrackError> {
        let mut g = Groups { subs: Vec::new(), referenced: Vec::new(), has_backref: Vec::new(), slots: Vec::new() };
        let mut refs: Vec<u32> = Vec::new();
        let mut open: Vec<u32> = Vec::new();
        g.walk(hir, &mut open, &mut refs, 0)?;
        for n in refs {
            match g.referenced.get_mut(n as usize) {
                Some(r) if g.subs.get(n as usize).is_some_and(Option::is_some) => *r = true,
                _ => return Err(BacktrackError::NoSuchGroup(n)),
            }
        }
        if all {
            for (r, s) in g.referenced.iter_mut().zip(&g.subs) {
                *r |= s.is_some();
            }
        }
        let mut next = 0u16;
        g.slots = g
            .referenced
            .iter()
            .map(|&r| {
                r.then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        Ok(g)
    }

    fn walk(
        &mut self,
        hir: &'h Hir,
        open: &mut Vec<u32>,
        refs: &mut Vec<u32>,
        depth: usize,
    ) -> Result<(), BacktrackError> {
        if depth > MAX_DEPTH {
            return Err(BacktrackError::TooDeep);
        }
        match hir.kind() {
            HirKind::Capture(cap) => match placeholder(cap) {
                Placeholder::Capture(n) => {
                    let i = n as usize;
                    if self.subs.len() <= i {
                        self.subs.resize(i + 1, None);
                        self.referenced.resize(i + 1, false);
                        self.has_backref.resize(i + 1, false);
                    }
                    if let Some(s) = self.subs.get_mut(i) {
                        *s = Some(&cap.sub);
                    }
                    open.push(n);
                    self.walk(&cap.sub, open, refs, depth + 1)?;
                    open.pop();
                }
                Placeholder::Backref { group, .. } => {
                    refs.push(group);
                    for &e in open.iter() {
                        if let Some(h) = self.has_backref.get_mut(e as usize) {
                            *h = true;
                        }
                    }
                }
                _ => self.walk(&cap.sub, open, refs, depth + 1)?,
            },
            HirKind::Repetition(rep) => self.walk(&rep.sub, open, refs, depth + 1)?,
            HirKind::Concat(subs) | HirKind::Alternation(subs) => {
                for s in subs {
                    self.walk(s, open, refs, depth + 1)?;
                }
            }
            HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => {}
        }
        Ok(())
    }

    fn slot(&self, n: u32) -> Option<u16> {
        self.slots.get(n as usize).copied().flatten()
    }
}

/// Parses a backtracking translation from perl.rs and builds both forms.
pub(crate) fn compile_extended(extended: &str) -> Result<Backtrack, BacktrackError> {
    let hir = parse(extended)?;
    let groups = Groups::of(&hir, false)?;
    // A rule's text may end with a `\n` (a body line, a piece, the message), before which
    // Perl's `$` holds; the translation gives `\z` the same.
    let program = build(&hir, &groups, false, Assert::EndBeforeNewline)?;
    Ok(Backtrack { relaxed: relax(&hir, &groups, RELAX_REPEAT)?, program })
}

/// The relaxed forms of a backtracking translation, one for each bound: counted
/// repetitions above it are open. No program is built.
pub(crate) fn relaxed_forms(extended: &str, bounds: &[u32]) -> Result<Vec<String>, BacktrackError> {
    let hir = parse(extended)?;
    let groups = Groups::of(&hir, false)?;
    bounds.iter().map(|&open_above| relax(&hir, &groups, open_above)).collect()
}

fn relax(hir: &Hir, groups: &Groups<'_>, open_above: u32) -> Result<String, BacktrackError> {
    let relaxer = Relaxer { groups, open_above };
    Ok(relaxer.relax(hir, Position { head: true, tail: true }, &mut Vec::new(), 0)?.to_string())
}

/// Parses a backtracking translation from perl.rs into the exact program alone,
/// recording every capture group (read them with [`Program::capture`]): for
/// patterns whose captures the caller reads, run on texts no DFA screened.
pub(crate) fn compile_captures(extended: &str) -> Result<Program, BacktrackError> {
    let hir = parse(extended)?;
    let groups = Groups::of(&hir, true)?;
    build(&hir, &groups, true, Assert::End)
}

/// Opens the placeholder of a spliced sub-pattern: `(?>`, these bytes, the sub-pattern's
/// digit, `)` in Perl syntax. No real pattern holds them.
pub(crate) const SUB_MARKER: &str = r"\x00\x01\x02";

/// [`compile_captures`] for a pattern whose placeholder groups ([`SUB_MARKER`]) stand
/// for `subs`, each parsed once by [`parse_sub`] and spliced in here: a sub-pattern that
/// many patterns call is not parsed again for each.
pub(crate) fn compile_captures_with(extended: &str, subs: &[Hir]) -> Result<Program, BacktrackError> {
    let hir = splice(&parse(extended)?, subs);
    let groups = Groups::of(&hir, true)?;
    build(&hir, &groups, true, Assert::End)
}

/// A sub-pattern's backtracking translation, parsed for [`compile_captures_with`].
pub(crate) fn parse_sub(extended: &str) -> Result<Hir, BacktrackError> {
    parse(extended)
}

/// `hir` with each placeholder group's literal replaced by the sub-pattern it names.
/// Recursion is bounded: the parser refused anything nested deeper than its limit.
fn splice(hir: &Hir, subs: &[Hir]) -> Hir {
    match hir.kind() {
        HirKind::Capture(c) => {
            let placeholder = match c.sub.kind() {
                HirKind::Literal(lit) => match *lit.0 {
                    [0, 1, 2, digit] => subs.get(usize::from(digit.wrapping_sub(b'0'))),
                    _ => None,
                },
                _ => None,
            };
            let sub = placeholder.cloned().unwrap_or_else(|| splice(&c.sub, subs));
            Hir::capture(hir::Capture { index: c.index, name: c.name.clone(), sub: Box::new(sub) })
        }
        HirKind::Repetition(r) => Hir::repetition(hir::Repetition { min: r.min, max: r.max, greedy: r.greedy, sub: Box::new(splice(&r.sub, subs)) }),
        HirKind::Concat(parts) => Hir::concat(parts.iter().map(|h| splice(h, subs)).collect()),
        HirKind::Alternation(parts) => Hir::alternation(parts.iter().map(|h| splice(h, subs)).collect()),
        _ => hir.clone(),
    }
}

fn parse(extended: &str) -> Result<Hir, BacktrackError> {
    regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .nest_limit(NEST_LIMIT)
        .build()
        .parse(extended)
        .map_err(|e| BacktrackError::Parse(e.to_string()))
}

/// The program of `hir`; `end`: what the text's end compiles to (an eval's pattern
/// says which end it means: `(?=\n?\z)` for Perl's `$`).
fn build(hir: &Hir, groups: &Groups<'_>, captures: bool, end: Assert) -> Result<Program, BacktrackError> {
    let mut c = Compiler { insts: Vec::new(), classes: Vec::new(), bytes: Vec::new(), counters: 0, groups, end };
    c.compile(hir, 0)?;
    c.push(Inst::Match)?;
    c.fill_follow();
    c.fill_runs();
    let (nullable, first) = first_bytes(hir, 0);
    let anchor = anchor(hir, 0);
    let (prefix_pc, prefix_len, scan) = c.prefix(anchor);
    let scan = match scan {
        Scan::Any if !nullable => Scan::of(first, 0),
        scan => scan,
    };
    // A scan letting most places through checks the second byte too, when that helps.
    let pairs = match scan {
        Scan::Set(set) if set.count() > PAIRS_FROM => {
            let o = openings(hir, 0);
            let pairs = (!o.nullable).then(|| o.kept());
            pairs.filter(|p| p.iter().map(ByteSet::count).sum::<u32>() <= PAIRS_AT_MOST)
        }
        _ => None,
    };
    let skip_runs = match c.insts.first() {
        Some(&Inst::Repeat { class, min, max: UNBOUNDED, greedy: true, .. }) if min > 0 => Some(class),
        _ => None,
    };
    let mut required = Required::default();
    if captures {
        let (bytes, fold) = required_literal(hir);
        if bytes.len() >= MIN_REQUIRED && bytes.len() > prefix_len as usize {
            if let (Ok(start), Ok(len), Ok(key)) =
                (u32::try_from(c.bytes.len()), u16::try_from(bytes.len()), u16::try_from(anchor_of(&bytes)))
            {
                c.bytes.extend_from_slice(&bytes);
                required = Required { start, len, key, fold };
            }
        }
    }
    let captures = match captures {
        // Every group recorded, numbered from 1 without a gap: group `n` has slot `n - 1`.
        true if groups.slots.iter().skip(1).enumerate().all(|(i, s)| *s == u16::try_from(i).ok()) => {
            u16::try_from(groups.slots.len().saturating_sub(1)).map_err(|_| BacktrackError::TooLarge)?
        }
        true => return Err(BacktrackError::Construct("capture groups numbered with gaps")),
        false => 0,
    };
    Ok(Program {
        insts: c.insts,
        class_scans: c.classes.iter().map(|&set| ClassScan::of(set)).collect(),
        classes: c.classes,
        bytes: c.bytes,
        groups: groups.slots.iter().flatten().count(),
        counters: usize::from(c.counters),
        anchor,
        scan,
        pairs,
        prefix_pc,
        prefix_len,
        min_len: min_len(hir, 0),
        skip_runs,
        captures,
        required,
    })
}

struct Compiler<'g, 'h> {
    insts: Vec<Inst>,
    classes: Vec<ByteSet>,
    bytes: Vec<u8>,
    counters: u16,
    groups: &'g Groups<'h>,
    /// What the text's end (`$`, `\z`) compiles to.
    end: Assert,
}

impl Compiler<'_, '_> {
    fn push(&mut self, inst: Inst) -> Result<u32, BacktrackError> {
        if self.insts.len() >= MAX_INSTS {
            return Err(BacktrackError::TooLarge);
        }
        self.insts.push(inst);
        Ok((self.insts.len() - 1) as u32)
    }

    fn here(&self) -> u32 {
        self.insts.len() as u32
    }

    fn patch(&mut self, at: u32, inst: Inst) {
        if let Some(slot) = self.insts.get_mut(at as usize) {
            *slot = inst;
        }
    }

    fn class(&mut self, set: ByteSet) -> Result<u16, BacktrackError> {
        if let Some(i) = self.classes.iter().position(|c| *c == set) {
            return Ok(i as u16);
        }
        if self.classes.len() >= usize::from(NO_CLASS) {
            return Err(BacktrackError::TooLarge);
        }
        self.classes.push(set);
        Ok((self.classes.len() - 1) as u16)
    }

    /// The byte set of a pattern that always matches exactly one byte.
    fn single_byte(&self, hir: &Hir) -> Option<ByteSet> {
        match hir.kind() {
            HirKind::Literal(lit) if lit.0.len() == 1 => lit.0.first().map(|&b| ByteSet::single(b)),
            HirKind::Class(c) => ByteSet::of_class(c).ok(),
            HirKind::Capture(cap) => match placeholder(cap) {
                Placeholder::Capture(n) if self.groups.slot(n).is_none() => match cap.sub.kind() {
                    HirKind::Literal(_) | HirKind::Class(_) => self.single_byte(&cap.sub),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        }
    }

    fn compile(&mut self, hir: &Hir, depth: usize) -> Result<(), BacktrackError> {
        if depth > MAX_DEPTH {
            return Err(BacktrackError::TooDeep);
        }
        match hir.kind() {
            HirKind::Empty => {}
            HirKind::Literal(lit) => {
                if let [b] = &*lit.0 {
                    self.push(Inst::Byte(*b))?;
                } else if !lit.0.is_empty() {
                    let start = u32::try_from(self.bytes.len()).map_err(|_| BacktrackError::TooLarge)?;
                    let len = u32::try_from(lit.0.len()).map_err(|_| BacktrackError::TooLarge)?;
                    self.bytes.extend_from_slice(&lit.0);
                    self.push(Inst::Literal { start, len })?;
                }
            }
            HirKind::Class(c) => {
                let set = ByteSet::of_class(c)?;
                let i = self.class(set)?;
                self.push(Inst::Class(i))?;
            }
            HirKind::Look(l) => {
                let assert = match l {
                    Look::End => self.end,
                    l => Assert::of(*l)?,
                };
                self.push(Inst::Look(assert))?;
            }
            HirKind::Repetition(rep) => self.repetition(rep, false, depth)?,
            HirKind::Capture(cap) => match placeholder(cap) {
                Placeholder::Plain => self.compile(&cap.sub, depth + 1)?,
                Placeholder::Capture(n) => match self.groups.slot(n) {
                    Some(slot) => {
                        self.push(Inst::Open(slot))?;
                        self.compile(&cap.sub, depth + 1)?;
                        self.push(Inst::Close(slot))?;
                    }
                    None => self.compile(&cap.sub, depth + 1)?,
                },
                Placeholder::Look(MarkerKind::Ahead) if is_end_before_newline(&cap.sub) => {
                    self.push(Inst::Look(Assert::EndBeforeNewline))?;
                }
                Placeholder::Look(kind) => {
                    let (min, max) = if kind.behind() {
                        let (min, max) = len_bounds(&cap.sub, 0);
                        match max {
                            Some(max) if max <= MAX_LOOKBEHIND => (narrow(min)?, narrow(max)?),
                            _ => return Err(BacktrackError::Lookbehind),
                        }
                    } else {
                        (0, 0)
                    };
                    let start = self.push(Inst::LookStart { kind, min, max, end: 0 })?;
                    self.compile(&cap.sub, depth + 1)?;
                    self.push(Inst::LookEnd)?;
                    let end = self.here();
                    self.patch(start, Inst::LookStart { kind, min, max, end });
                }
                Placeholder::Atomic => match cap.sub.kind() {
                    HirKind::Repetition(rep) if rep.greedy && self.single_byte(&rep.sub).is_some() => {
                        self.repetition(rep, true, depth)?;
                    }
                    _ => {
                        self.push(Inst::AtomicStart)?;
                        self.compile(&cap.sub, depth + 1)?;
                        self.push(Inst::AtomicEnd)?;
                    }
                },
                Placeholder::Backref { group, fold } => {
                    let slot = self.groups.slot(group).ok_or(BacktrackError::NoSuchGroup(group))?;
                    self.push(Inst::Backref { slot, fold })?;
                }
            },
            HirKind::Concat(subs) => {
                for s in subs {
                    self.compile(s, depth + 1)?;
                }
            }
            HirKind::Alternation(subs) => {
                let mut jumps = Vec::new();
                let last = subs.len().saturating_sub(1);
                for (i, s) in subs.iter().enumerate() {
                    if i < last {
                        let split = self.push(Inst::Split { first: 0, second: 0, guard: NO_CLASS })?;
                        self.compile(s, depth + 1)?;
                        jumps.push(self.push(Inst::Jump(0))?);
                        let second = self.here();
                        let guard = match first_bytes(s, 0) {
                            (false, set) if set != ByteSet::ALL => self.class(set)?,
                            _ => NO_CLASS,
                        };
                        self.patch(split, Inst::Split { first: split + 1, second, guard });
                    } else {
                        self.compile(s, depth + 1)?;
                    }
                }
                let end = self.here();
                for j in jumps {
                    self.patch(j, Inst::Jump(end));
                }
            }
        }
        Ok(())
    }

    fn repetition(&mut self, rep: &hir::Repetition, possessive: bool, depth: usize) -> Result<(), BacktrackError> {
        let (min, max) = (narrow(rep.min)?, rep.max.map_or(Ok(UNBOUNDED), narrow)?);
        if let Some(set) = self.single_byte(&rep.sub) {
            let class = self.class(set)?;
            self.push(Inst::Repeat { class, min, max, greedy: rep.greedy, possessive, follow: NO_CLASS })?;
            return Ok(());
        }
        if possessive {
            self.push(Inst::AtomicStart)?;
        }
        if rep.min == 0 && rep.max == Some(1) {
            let split = self.push(Inst::Split { first: 0, second: 0, guard: NO_CLASS })?;
            self.compile(&rep.sub, depth + 1)?;
            let after = self.here();
            let guard = match first_bytes(&rep.sub, 0) {
                (false, set) if rep.greedy && set != ByteSet::ALL => self.class(set)?,
                _ => NO_CLASS,
            };
            let inst = if rep.greedy {
                Inst::Split { first: split + 1, second: after, guard }
            } else {
                Inst::Split { first: after, second: split + 1, guard: NO_CLASS }
            };
            self.patch(split, inst);
        } else {
            let counter = self.counters;
            self.counters = self.counters.checked_add(1).ok_or(BacktrackError::TooLarge)?;
            self.push(Inst::RepeatStart { counter })?;
            let head = self.push(Inst::RepeatLoop { counter, min, max, greedy: rep.greedy, exit: 0 })?;
            self.push(Inst::RepeatEnter { counter })?;
            self.compile(&rep.sub, depth + 1)?;
            self.push(Inst::RepeatEnd { counter, loop_pc: head, body_first: NO_CLASS })?;
            let exit = self.here();
            self.patch(head, Inst::RepeatLoop { counter, min, max, greedy: rep.greedy, exit });
        }
        if possessive {
            self.push(Inst::AtomicEnd)?;
        }
        Ok(())
    }

    /// Notes, for each single-byte repeat, the bytes what follows it must start
    /// with, so giving back and taking more can skip hopeless positions. A repeat
    /// whose class and follow set are disjoint can only end where its run ends
    /// (every byte it could give back or take is in its class, so not in the
    /// follow set): it becomes possessive and leaves no frame to backtrack into.
    /// A loop whose body ends with such a repeat notes what its body begins with.
    fn fill_follow(&mut self) {
        for pc in 0..self.insts.len() {
            let after_repeat = pc.checked_sub(1).and_then(|p| self.insts.get(p)).is_some_and(|i| matches!(i, Inst::Repeat { .. }));
            if let (Some(&Inst::RepeatEnd { counter, loop_pc, .. }), true) = (self.insts.get(pc), after_repeat) {
                let body_first = self.body_first(loop_pc);
                if let Some(slot) = self.insts.get_mut(pc) {
                    *slot = Inst::RepeatEnd { counter, loop_pc, body_first };
                }
            }
            let Some(&Inst::Repeat { class, min, max, greedy, possessive, .. }) = self.insts.get(pc) else {
                continue;
            };
            let mut fuel = FIRST_AT_FUEL;
            let Some(set) = self.first_at(pc + 1, &mut fuel) else { continue };
            let Ok(follow) = self.class(set) else { continue };
            let disjoint = self.classes.get(usize::from(class)).is_some_and(|c| c.intersect(set).count() == 0);
            let possessive = possessive || disjoint;
            let greedy = greedy || disjoint;
            if let Some(slot) = self.insts.get_mut(pc) {
                *slot = Inst::Repeat { class, min, max, greedy, possessive, follow };
            }
        }
    }

    /// Marks the loops [`Inst::Runs`] walks: greedy, their body two single-byte repeats
    /// of disjoint classes, each at least one byte and taken whole (possessive, as
    /// `fill_follow` found: no byte of a run can begin what follows it).
    fn fill_runs(&mut self) {
        for pc in 0..self.insts.len() {
            let Some(loop_insts) = self.insts.get(pc..pc + 6) else { break };
            let &[Inst::RepeatStart { counter }, Inst::RepeatLoop { counter: head, min, max, greedy: true, exit }, Inst::RepeatEnter { .. }, Inst::Repeat { class: a, min: a_min, possessive: true, .. }, Inst::Repeat { class: b, min: b_min, possessive: true, .. }, Inst::RepeatEnd { loop_pc, .. }] =
                loop_insts
            else {
                continue;
            };
            let class = |c: u16| self.classes.get(usize::from(c)).copied();
            let disjoint = matches!((class(a), class(b)), (Some(x), Some(y)) if x.intersect(y).count() == 0);
            if counter == head && loop_pc as usize == pc + 1 && exit as usize == pc + 6 && a_min > 0 && b_min > 0 && disjoint {
                if let Some(slot) = self.insts.get_mut(pc) {
                    *slot = Inst::Runs { min, max, exit };
                }
            }
        }
    }

    /// The class the body of the loop at `loop_pc` begins with, when the loop must go
    /// round more than once (`(?:,[^,]{1,90}){50}`): until it has, a repeat that ends
    /// the body can only be followed by that (see `Vm::follow_now`).
    fn body_first(&mut self, loop_pc: u32) -> u16 {
        match self.insts.get(loop_pc as usize) {
            Some(&Inst::RepeatLoop { min, .. }) if min >= 2 => {}
            _ => return NO_CLASS,
        }
        let mut fuel = FIRST_AT_FUEL;
        match self.first_at(loop_pc as usize + 2, &mut fuel) {
            Some(set) => self.class(set).unwrap_or(NO_CLASS),
            None => NO_CLASS,
        }
    }

    /// The leading instructions that match fixed bytes (or assert what `anchor`
    /// guarantees): how many, the bytes they match, and the scan for the
    /// rarest bytes at one offset into them.
    fn prefix(&self, anchor: Anchor) -> (u32, u32, Scan) {
        let (mut pc, mut len) = (0u32, 0u32);
        let mut best: Option<(ByteSet, u32)> = None;
        let mut first = None;
        let mut consider = |set: ByteSet, offset: u32| {
            if offset == 0 {
                first = Some(set);
            }
            if best.is_none_or(|(b, _)| scan_weight(set) < scan_weight(b)) {
                best = Some((set, offset));
            }
        };
        while len < MAX_PREFIX {
            match self.insts.get(pc as usize) {
                Some(&Inst::Byte(b)) => consider(ByteSet::single(b), len),
                Some(&Inst::Class(c)) => match self.classes.get(usize::from(c)) {
                    Some(&set) => consider(set, len),
                    None => break,
                },
                Some(&Inst::Literal { start, len: n }) => {
                    let Some(bytes) = self.bytes.get(start as usize..start as usize + n as usize) else { break };
                    for (i, &b) in bytes.iter().enumerate() {
                        consider(ByteSet::single(b), len + i as u32);
                    }
                }
                Some(Inst::Look(Assert::Start)) if pc == 0 && anchor == Anchor::Start => {}
                Some(Inst::Look(Assert::StartLine)) if pc == 0 && anchor == Anchor::Line => {}
                _ => break,
            }
            if let Some(&Inst::Literal { len: n, .. }) = self.insts.get(pc as usize) {
                len += n;
            } else if !matches!(self.insts.get(pc as usize), Some(Inst::Look(_))) {
                len += 1;
            }
            pc += 1;
        }
        let scan = match best {
            Some((set, offset)) if set.count() <= 3 => Scan::of(set, offset),
            _ => first.map_or(Scan::Any, |set| Scan::of(set, 0)),
        };
        (pc, len, scan)
    }

    /// The bytes a match from `pc` must begin with, when plain to see: a
    /// superset of what can follow, through jumps, alternatives and loops.
    /// `fuel` bounds the instructions visited.
    fn first_at(&self, pc: usize, fuel: &mut u32) -> Option<ByteSet> {
        *fuel = fuel.checked_sub(1)?;
        match *self.insts.get(pc)? {
            Inst::Byte(b) => Some(ByteSet::single(b)),
            Inst::Literal { start, .. } => self.bytes.get(start as usize).map(|&b| ByteSet::single(b)),
            Inst::Class(c) => self.classes.get(usize::from(c)).copied(),
            Inst::Repeat { class, min, .. } => {
                let set = self.classes.get(usize::from(class)).copied()?;
                if min > 0 {
                    Some(set)
                } else {
                    Some(set.union(self.first_at(pc + 1, fuel)?))
                }
            }
            Inst::Jump(to) => self.first_at(to as usize, fuel),
            Inst::Open(_) | Inst::Close(_) | Inst::Look(_) | Inst::RepeatStart { .. } | Inst::Runs { .. } => self.first_at(pc + 1, fuel),
            Inst::Split { first, second, .. } => {
                Some(self.first_at(first as usize, fuel)?.union(self.first_at(second as usize, fuel)?))
            }
            // The body (at `pc + 2`) or what follows the loop.
            Inst::RepeatLoop { exit, .. } => {
                Some(self.first_at(pc + 2, fuel)?.union(self.first_at(exit as usize, fuel)?))
            }
            Inst::RepeatEnd { loop_pc, .. } => self.first_at(loop_pc as usize, fuel),
            _ => None,
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

/// How often a scan for `set` stops, roughly: the sum of its bytes' frequencies
/// in mail headers, sets of more than three bytes (memchr cannot search them) last.
fn scan_weight(set: ByteSet) -> u32 {
    if set.count() > 3 {
        return 1000 + set.count();
    }
    set.bytes().map(|b| RARITY.get(usize::from(b)).and_then(|&r| [16, 4, 2, 1].get(usize::from(r))).copied().unwrap_or(1)).sum()
}

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

/// Bytes every match of `hir` contains, consecutive, the longest such run found
/// through the top-level sequence and the groups in it that are neither repeated
/// nor alternatives; and whether it must be searched ignoring ASCII case (then it
/// is lower case).
fn required_literal(hir: &Hir) -> (Vec<u8>, bool) {
    let mut best = (Vec::new(), false);
    let mut run = (Vec::new(), false);
    let mut todo = alloc::vec![hir];
    let end_run = |run: &mut (Vec<u8>, bool), best: &mut (Vec<u8>, bool)| {
        if run.0.len() > best.0.len() {
            *best = core::mem::take(run);
        }
        *run = (Vec::new(), false);
    };
    while let Some(h) = todo.pop() {
        if todo.len() > MAX_DEPTH {
            break;
        }
        match h.kind() {
            HirKind::Concat(subs) => todo.extend(subs.iter().rev()),
            HirKind::Literal(lit) => run.0.extend_from_slice(&lit.0),
            HirKind::Empty | HirKind::Look(_) => {}
            HirKind::Class(c) => match ByteSet::of_class(c).map(|s| (s.count(), s)) {
                Ok((1, set)) => run.0.extend(set.bytes()),
                Ok((2, set)) if set.bytes().all(|b| b.is_ascii_alphabetic()) => {
                    let mut letters = set.bytes().map(|b| b.to_ascii_lowercase());
                    match (letters.next(), letters.next()) {
                        (Some(a), Some(b)) if a == b => {
                            run.0.push(a);
                            run.1 = true;
                        }
                        _ => end_run(&mut run, &mut best),
                    }
                }
                _ => end_run(&mut run, &mut best),
            },
            HirKind::Capture(cap) => match placeholder(cap) {
                Placeholder::Plain | Placeholder::Capture(_) | Placeholder::Atomic => todo.push(&cap.sub),
                // Zero-width: the bytes on both sides are consecutive.
                Placeholder::Look(_) => {}
                Placeholder::Backref { .. } => end_run(&mut run, &mut best),
            },
            HirKind::Repetition(_) | HirKind::Alternation(_) => end_run(&mut run, &mut best),
        }
    }
    end_run(&mut run, &mut best);
    if best.1 {
        best.0.make_ascii_lowercase();
    }
    best
}

/// Most instructions a repeat giving back checks at each place it could stop.
const TAIL_INSTS: usize = 8;
/// Most places a noted `Runs` walk keeps (a header block of more lines is walked
/// from each start as before).
const RUNS_MEMO_PLACES: usize = 512;
/// Most bytes of a program's fixed prefix checked before it runs.
const MAX_PREFIX: u32 = 32;
/// Most instructions [`Compiler::first_at`] visits for one question.
const FIRST_AT_FUEL: u32 = 64;

/// Whether `hir` is `\n?\z`: in a lookahead, Perl's `$` without `/m`.
fn is_end_before_newline(hir: &Hir) -> bool {
    let HirKind::Concat(subs) = hir.kind() else { return false };
    let [newline, end] = subs.as_slice() else { return false };
    let optional_newline = match newline.kind() {
        HirKind::Repetition(rep) => {
            rep.min == 0 && rep.max == Some(1) && matches!(rep.sub.kind(), HirKind::Literal(lit) if *lit.0 == *b"\n")
        }
        _ => false,
    };
    optional_newline && matches!(end.kind(), HirKind::Look(Look::End))
}

/// Shortest and longest match of `hir` (lookarounds and backreference
/// placeholders count as zero and unbounded width as they should).
fn len_bounds(hir: &Hir, depth: usize) -> (u32, Option<u32>) {
    if depth > MAX_DEPTH {
        return (0, None);
    }
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => (0, Some(0)),
        HirKind::Literal(lit) => {
            let n = u32::try_from(lit.0.len()).unwrap_or(NONE);
            (n, Some(n))
        }
        HirKind::Class(_) => (1, Some(1)),
        HirKind::Repetition(rep) => {
            let (min, max) = len_bounds(&rep.sub, depth + 1);
            let max = match (max, rep.max) {
                (Some(0), _) => Some(0),
                (Some(a), Some(b)) => a.checked_mul(b),
                _ => None,
            };
            (min.saturating_mul(rep.min), max)
        }
        HirKind::Capture(cap) => match placeholder(cap) {
            Placeholder::Look(_) => (0, Some(0)),
            Placeholder::Backref { .. } => (0, None),
            _ => len_bounds(&cap.sub, depth + 1),
        },
        HirKind::Concat(subs) => subs.iter().fold((0, Some(0)), |(lo, hi), s| {
            let (a, b) = len_bounds(s, depth + 1);
            (lo.saturating_add(a), hi.zip(b).and_then(|(x, y)| x.checked_add(y)))
        }),
        HirKind::Alternation(subs) => {
            let mut lo = NONE;
            let mut hi = Some(0u32);
            for s in subs {
                let (a, b) = len_bounds(s, depth + 1);
                lo = lo.min(a);
                hi = hi.zip(b).map(|(x, y)| x.max(y));
            }
            (if subs.is_empty() { 0 } else { lo }, hi)
        }
    }
}

fn min_len(hir: &Hir, depth: usize) -> u32 {
    len_bounds(hir, depth).0
}

/// Whether `hir` can match empty, and the bytes a non-empty match can begin with.
fn first_bytes(hir: &Hir, depth: usize) -> (bool, ByteSet) {
    if depth > MAX_DEPTH {
        return (true, ByteSet::ALL);
    }
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => (true, ByteSet::default()),
        HirKind::Literal(lit) => match lit.0.first() {
            Some(&b) => (false, ByteSet::single(b)),
            None => (true, ByteSet::default()),
        },
        HirKind::Class(c) => (false, ByteSet::of_class(c).unwrap_or(ByteSet::ALL)),
        HirKind::Repetition(rep) => {
            let (nullable, set) = first_bytes(&rep.sub, depth + 1);
            (nullable || rep.min == 0, set)
        }
        HirKind::Capture(cap) => match placeholder(cap) {
            Placeholder::Look(_) => (true, ByteSet::default()),
            Placeholder::Backref { .. } => (true, ByteSet::ALL),
            _ => first_bytes(&cap.sub, depth + 1),
        },
        HirKind::Concat(subs) => {
            let mut set = ByteSet::default();
            for s in subs {
                let (nullable, first) = first_bytes(s, depth + 1);
                set = set.union(first);
                if !nullable {
                    return (false, set);
                }
            }
            (true, set)
        }
        HirKind::Alternation(subs) => subs.iter().fold((false, ByteSet::default()), |(n, set), s| {
            let (nullable, first) = first_bytes(s, depth + 1);
            (n || nullable, set.union(first))
        }),
    }
}

/// Where every match of `hir` must start.
fn anchor(hir: &Hir, depth: usize) -> Anchor {
    if depth > MAX_DEPTH {
        return Anchor::Anywhere;
    }
    match hir.kind() {
        HirKind::Look(Look::Start) => Anchor::Start,
        HirKind::Look(Look::StartLF) => Anchor::Line,
        HirKind::Concat(subs) => subs.first().map_or(Anchor::Anywhere, |s| anchor(s, depth + 1)),
        HirKind::Capture(cap) => match placeholder(cap) {
            Placeholder::Capture(_) | Placeholder::Atomic | Placeholder::Plain => anchor(&cap.sub, depth + 1),
            _ => Anchor::Anywhere,
        },
        HirKind::Alternation(subs) => {
            let mut all = Anchor::Start;
            for s in subs {
                match anchor(s, depth + 1) {
                    Anchor::Anywhere => return Anchor::Anywhere,
                    Anchor::Line => all = Anchor::Line,
                    Anchor::Start => {}
                }
            }
            all
        }
        _ => Anchor::Anywhere,
    }
}

/// Where a sub-pattern sits in the whole: first thing matched, last thing matched.
#[derive(Clone, Copy)]
struct Position {
    head: bool,
    tail: bool,
}

const INNER: Position = Position { head: false, tail: false };

/// Builds the relaxed form: a plain regex matching a superset of the texts the
/// Perl pattern matches.
struct Relaxer<'g, 'h> {
    groups: &'g Groups<'h>,
    /// Counted repetitions with bounds above this become open.
    open_above: u32,
}

fn any_bytes() -> Hir {
    let class = Class::Bytes(ClassBytes::new([ClassBytesRange::new(0, 255)]));
    Hir::repetition(hir::Repetition { min: 0, max: None, greedy: true, sub: Box::new(Hir::class(class)) })
}

impl Relaxer<'_, '_> {
    fn relax(&self, hir: &Hir, at: Position, open: &mut Vec<u32>, depth: usize) -> Result<Hir, BacktrackError> {
        if depth > MAX_DEPTH {
            return Err(BacktrackError::TooDeep);
        }
        Ok(match hir.kind() {
            HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => hir.clone(),
            HirKind::Repetition(rep) => {
                let mut sub = self.relax(&rep.sub, INNER, open, depth + 1)?;
                if matches!(sub.kind(), HirKind::Repetition(_)) {
                    // A group the relaxing dropped: printed bare, `(?:X{1,3})?` would
                    // read back as the lazy `X{1,3}?`, which needs a match of X.
                    sub = Hir::capture(hir::Capture { index: 1, name: None, sub: Box::new(sub) });
                }
                let (min, max) = match rep.max {
                    Some(m) if m <= self.open_above => (rep.min, rep.max),
                    _ if rep.min > self.open_above => (1, None),
                    _ => (rep.min, None),
                };
                Hir::repetition(hir::Repetition { min, max, greedy: rep.greedy, sub: Box::new(sub) })
            }
            HirKind::Capture(cap) => match placeholder(cap) {
                Placeholder::Plain | Placeholder::Atomic => self.relax(&cap.sub, at, open, depth + 1)?,
                Placeholder::Capture(n) => {
                    open.push(n);
                    let sub = self.relax(&cap.sub, at, open, depth + 1);
                    open.pop();
                    sub?
                }
                // Where nothing is matched before (lookbehind) or after (lookahead),
                // the looked-at text is part of the text matched.
                Placeholder::Look(MarkerKind::Ahead) if at.tail => {
                    self.relax(&cap.sub, Position { head: false, tail: true }, open, depth + 1)?
                }
                Placeholder::Look(MarkerKind::Behind) if at.head => {
                    self.relax(&cap.sub, Position { head: true, tail: false }, open, depth + 1)?
                }
                Placeholder::Look(_) => Hir::empty(),
                Placeholder::Backref { group, fold } => self.backref(group, fold, open, depth)?,
            },
            HirKind::Concat(subs) => {
                let last = subs.len().saturating_sub(1);
                let mut out = Vec::with_capacity(subs.len());
                for (i, s) in subs.iter().enumerate() {
                    let p = Position { head: at.head && i == 0, tail: at.tail && i == last };
                    out.push(self.relax(s, p, open, depth + 1)?);
                }
                Hir::concat(out)
            }
            HirKind::Alternation(subs) => {
                let mut out = Vec::with_capacity(subs.len());
                for s in subs {
                    out.push(self.relax(s, at, open, depth + 1)?);
                }
                Hir::alternation(out)
            }
        })
    }

    /// A backreference: any text its group can capture (so without the group's
    /// assertions, which held where it was captured), case-folded under `/i`;
    /// any bytes when the group refers to itself or holds backreferences.
    fn backref(&self, group: u32, fold: bool, open: &[u32], depth: usize) -> Result<Hir, BacktrackError> {
        let i = group as usize;
        let sub = self.groups.subs.get(i).copied().flatten();
        let nested = self.groups.has_backref.get(i).copied().unwrap_or(true) || open.contains(&group);
        let Some(sub) = sub.filter(|_| !nested) else { return Ok(any_bytes()) };
        let relaxed = self.relax(sub, INNER, &mut Vec::new(), depth + 1)?;
        let plain = strip_looks(&relaxed, 0)?;
        if fold {
            fold_case(&plain, 0)
        } else {
            Ok(plain)
        }
    }
}

fn strip_looks(hir: &Hir, depth: usize) -> Result<Hir, BacktrackError> {
    map_hir(hir, depth, &|h| match h.kind() {
        HirKind::Look(_) => Some(Hir::empty()),
        _ => None,
    })
}

/// `hir` matching ASCII case-insensitively.
fn fold_case(hir: &Hir, depth: usize) -> Result<Hir, BacktrackError> {
    map_hir(hir, depth, &|h| match h.kind() {
        HirKind::Literal(lit) => Some(Hir::concat(
            lit.0
                .iter()
                .map(|&b| {
                    if b.is_ascii_alphabetic() {
                        let (l, u) = (b.to_ascii_lowercase(), b.to_ascii_uppercase());
                        Hir::class(Class::Bytes(ClassBytes::new([
                            ClassBytesRange::new(l, l),
                            ClassBytesRange::new(u, u),
                        ])))
                    } else {
                        Hir::literal([b])
                    }
                })
                .collect(),
        )),
        HirKind::Class(Class::Bytes(c)) => {
            let mut c = c.clone();
            c.case_fold_simple();
            Some(Hir::class(Class::Bytes(c)))
        }
        _ => None,
    })
}

/// Rebuilds `hir` bottom-up, replacing the leaves `leaf` gives a replacement for.
fn map_hir(hir: &Hir, depth: usize, leaf: &dyn Fn(&Hir) -> Option<Hir>) -> Result<Hir, BacktrackError> {
    if depth > MAX_DEPTH {
        return Err(BacktrackError::TooDeep);
    }
    if let Some(h) = leaf(hir) {
        return Ok(h);
    }
    Ok(match hir.kind() {
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => hir.clone(),
        HirKind::Repetition(rep) => Hir::repetition(hir::Repetition {
            min: rep.min,
            max: rep.max,
            greedy: rep.greedy,
            sub: Box::new(map_hir(&rep.sub, depth + 1, leaf)?),
        }),
        HirKind::Capture(cap) => map_hir(&cap.sub, depth + 1, leaf)?,
        HirKind::Concat(subs) => {
            Hir::concat(subs.iter().map(|s| map_hir(s, depth + 1, leaf)).collect::<Result<Vec<_>, _>>()?)
        }
        HirKind::Alternation(subs) => {
            Hir::alternation(subs.iter().map(|s| map_hir(s, depth + 1, leaf)).collect::<Result<Vec<_>, _>>()?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::perl;

    fn program(perl_re: &str) -> Backtrack {
        match perl::backtrack(perl_re) {
            Ok(b) => b,
            Err(e) => panic!("{perl_re}: {e}"),
        }
    }

    /// (pattern, text, leftmost match as Perl reports it, matches `/g` counts):
    /// expectations from perl 5.36.
    #[test]
    fn matches_like_perl_table() {
        type Row = (&'static str, &'static str, Option<(usize, usize)>, u32);
        let rows: &[Row] = &[
            // Lookahead.
            (r"/foo(?=bar)/", "foobaz foobar", Some((7, 10)), 1),
            (r"/foo(?!bar)/", "foobar foobaz", Some((7, 10)), 1),
            (r"/^(?!.*spam).*ham/", "ham and spam", None, 0),
            (r"/^(?!.*spam).*ham/", "ham only", Some((0, 3)), 1),
            (r"/\d+(?=px)/", "10em 20px 30px", Some((5, 7)), 2),
            (r"/(?:(?!ab).)+/", "xxabyy", Some((0, 2)), 2),
            (r"/helo=(!(?!(?:10|127)\.)| )/", "helo=!10.1 helo=!8.8", Some((11, 17)), 1),
            // A lookahead is atomic: its captures are not retried.
            (r"/(?=(\w+))\1x/", "abcx", None, 0),
            // Lookbehind, fixed and variable length.
            (r"/(?<=\$)\d+/", "cost $42", Some((6, 8)), 1),
            (r"/(?<!\$)\b\d+/", "$42 and 17", Some((8, 10)), 1),
            (r"/(?<=%20|..[=+\s])x/", "a=x", None, 0),
            (r"/(?<=%20|..[=+\s])x/", "%20x", Some((3, 4)), 1),
            (r"/(?<=%20|..[=+\s])x/", "ax", None, 0),
            (r"/(?<!^)b/", "bab", Some((2, 3)), 1),
            (r"/(?<=[?&])id=/", "x?id=1&id=2", Some((2, 5)), 2),
            // Backreferences.
            (r"/(\w)\1/", "abccd", Some((2, 4)), 1),
            (r"/(a|b)\1/i", "aB aA", Some((3, 5)), 1),
            (r"/(?i:(a))\1/", "aA Aa aa", Some((6, 8)), 1),
            (r"/(a)(?i)\1/", "aA", Some((0, 2)), 1),
            (r"/([a-z]{1,2})(?:\1){3}/", "abababa xyxyxyxy", Some((8, 16)), 1),
            (r"/(\w+)\s\1\b/", "hello help hello hello", Some((11, 22)), 1),
            (r"/(a)?b\1/", "b", None, 0),
            (r"/(a)?b\1/", "aba", Some((0, 3)), 1),
            (r"/(?:(a)|b\1)+/", "aba", Some((0, 3)), 1),
            (r"/(?<n>ab)\k<n>/", "abab", Some((0, 4)), 1),
            (r"/(a)(b)\g{-1}/", "abb", Some((0, 3)), 1),
            (r"/(a)\g1/", "aa", Some((0, 2)), 1),
            // Atomic groups and possessive quantifiers.
            (r"/(?>a+)b/", "aaab", Some((0, 4)), 1),
            (r"/(?>a+)ab/", "aaab", None, 0),
            (r"/a++b/", "aab", Some((0, 3)), 1),
            (r"/a++a/", "aaa", None, 0),
            (r"/(?>x|xy)z/", "xyz", None, 0),
            (r"/(?:ab)++ab/", "ababab", None, 0),
            (r"/\w\w++\@/", "ab@", Some((0, 3)), 1),
            // Greedy and lazy.
            (r"/<.+>/", "<a><b>", Some((0, 6)), 1),
            (r"/<.+?>/", "<a><b>", Some((0, 3)), 2),
            (r"/a{2,3}?/", "aaaa", Some((0, 2)), 2),
            (r"/(?:a|b)*?c/", "abc", Some((0, 3)), 1),
            (r"/(?:a|b){2,}?c/", "ababc", Some((0, 5)), 1),
            (r"/(?:a|b){2}c/", "abac", Some((1, 4)), 1),
            // Anchors, alternation order, empty iterations, empty matches under /g.
            (r"/^b/m", "a\nb", Some((2, 3)), 1),
            (r"/^b/", "a\nb", None, 0),
            (r"/a$/m", "a\nb", Some((0, 1)), 1),
            (r"/a$/", "a\nb", None, 0),
            (r"/\bx/", "ax x", Some((3, 4)), 1),
            (r"/a|ab/", "ab", Some((0, 1)), 1),
            (r"/(?:a|ab)(?=b)/", "ab", Some((0, 1)), 1),
            (r"/(?:a?)*b/", "b", Some((0, 1)), 1),
            (r"/a*/", "aab", Some((0, 2)), 3),
            (r"/a*?/", "aab", Some((0, 0)), 6),
            (r"/(?=a)/", "aab", Some((0, 0)), 2),
            (r"/x*/", "ab", Some((0, 0)), 3),
            // Only the first position of a run is tried when the pattern starts with `X+`.
            (r"/\S+(?<!\?=)<\w+/", "a=?= b?=<x c<y", Some((11, 14)), 1),
            (r"/\S+(?<!\?=)<\w+/", "=?utf-8?Q?x?=<a@b>", None, 0),
            (r"/a+b/", "aacaab", Some((3, 6)), 1),
            (r"/\w+c/", "abcab", Some((0, 3)), 1),
            (r"/\s+x/", "  y  x", Some((3, 6)), 1),
            (r"/[a-z]++\d/", "abc abc1", Some((4, 8)), 1),
            // Alternatives and options skipped by their first byte.
            (r"/(?:ab|cd|ef)+g/", "abcdxefg", Some((5, 8)), 1),
            (r"/x(?:ab)?c/", "xac xabc xc", Some((4, 8)), 2),
            // A repeat whose class and follow set are disjoint runs possessively;
            // where they meet (/i folds `k` into the class) it still gives back.
            (r"/[a-z]+k/i", "abck", Some((0, 4)), 1),
            (r"/[a-z]+K/", "abcK abK", Some((0, 4)), 2),
            (r"/[^\n]+\n+x/", "ab\n\ncd\nx", Some((4, 8)), 1),
            (r"/a+ab/", "aaab", Some((0, 4)), 1),
            // Follow sets through loops: the body's first byte or the exit's.
            (r"/(?:x\d+)*y/", "x12x3y", Some((0, 6)), 1),
            (r"/(?:x\d+)*\dy/", "x123y", Some((0, 5)), 1),
            (r"/(?:x\d+)*?y/", "x1x2y", Some((0, 5)), 1),
            // Fixed prefixes: scanned at their rarest byte, case-sensitive or
            // folded; none inside an alternation.
            (r"/[a-z]q[0-9]/", "xq bq2 aq", Some((3, 6)), 1),
            (r"/(?:abc|abd)x/", "abcy abdx", Some((5, 9)), 1),
            (r"/From: x/", "from: x From: x", Some((8, 15)), 1),
            (r"/From: x/i", "from: x From: x", Some((0, 7)), 2),
            (r"/^To: (\w)\1/m", "xTo: aa\nTo: bb", Some((8, 14)), 1),
            (r"/^to: (\w)\1/mi", "To: ab\nTO: cc", Some((7, 13)), 1),
            (r"/\nsubj: ([a-z]+)\1/i", "\nSubj: abAB\nsubj: xx", Some((0, 11)), 2),
            // Giving back stops only where the instructions after the repeat
            // (bytes, classes, assertions, a backreference) match.
            (r"/(ab)[^\n]{0,10}\1x/i", "abzzABy ABx", Some((0, 11)), 1),
            (r"/(ab)[^\n]{0,10}\1x/", "abzzABx abx", Some((0, 11)), 1),
            (r"/(\w+)[^\n]{0,20}\1;/", "ab cab; ab;", Some((0, 11)), 1),
            (r"/[^\n]{0,30} for (\w+);/", "by x for you, for me; done", Some((0, 21)), 1),
            (r"/[^\n]{0,30} FOR (\w+);/i", "by x for you, For me; done", Some((0, 21)), 1),
            (r"/\w+\b:/", "ab cd: x", Some((3, 6)), 1),
            (r"/[^:]{2,}(?=:)\w/", "ab:c", None, 0),
            // Shaped like stock rules.
            (
                r"/\nReceived:[^\n]{0,200} for <?([^\n\s>;]+)>?;(?:[^\n]+\n+)*Subject: [^\n]{0,100}\1[^a-z0-9]/ism",
                "x\nReceived: by a for <bob@x.org>; now\nTo: y\nSubject: hi bob@x.org!\nZ: z",
                Some((1, 66)),
                1,
            ),
            (
                r"/\nReceived:[^\n]{0,200} for <?([^\n\s>;]+)>?;(?:[^\n]+\n+)*Subject: [^\n]{0,100}\1[^a-z0-9]/ism",
                "x\nReceived: by a for <bob@x.org>; now\nTo: y\nSubject: hi bob@x.orgs\nZ: z",
                None,
                0,
            ),
            (
                r"/^(?!(?:mail|bounce)[_.-])[^@]*(?:[bcdfg]{5}|([a-z]{1,2})(?:\1){3})/mi",
                "mail.xyxyxyxy\nqwbcdfgz",
                Some((14, 21)),
                1,
            ),
        ];
        let mut scratch = BacktrackScratch::default();
        for &(re, hay, want, count) in rows {
            let b = program(re);
            let got = b.program.find_at(hay.as_bytes(), 0, &mut scratch);
            assert_eq!(got, Ok(want), "{re} on {hay:?}");
            let counted = b.program.count_matches(hay.as_bytes(), u32::MAX, &mut scratch);
            assert_eq!(counted, MatchCount { count, undecided: None }, "{re} /g on {hay:?}");
        }
    }

    /// The shortcuts apply where they are sound and only there.
    #[test]
    fn fast_paths_apply_only_where_sound() {
        let possessive = |re: &str| -> Vec<bool> {
            let b = program(re);
            b.program
                .insts
                .iter()
                .filter_map(|i| match i {
                    Inst::Repeat { possessive, .. } => Some(*possessive),
                    _ => None,
                })
                .collect()
        };
        let rows: &[(&str, &[bool])] = &[
            (r"/[a-z]+K/", &[true]),
            (r"/[a-z]+k/i", &[false]),
            (r"/a+ab/", &[false]),
            (r"/[^\n]+\n+x/", &[true, true]),
            (r"/(?:x\d+)*y/", &[true]),
            (r"/(?:x\d+)*\dy/", &[false]),
            (r"/(?:[^\n]+\n+)*Subject/i", &[true, true]),
            // What follows is unknown (a backreference, the end): no change.
            (r"/(a)b+\1/", &[false]),
            (r"/b+/", &[false]),
        ];
        for (re, want) in rows {
            assert_eq!(possessive(re), *want, "{re}");
        }
        let set_of = |f: fn(u8) -> bool| {
            let mut set = ByteSet::default();
            (0..=255u8).filter(|&b| f(b)).for_each(|b| set.insert(b));
            set
        };
        // (pattern, instructions and bytes of the checked prefix, scan).
        let rows: &[(&str, u32, u32, Scan)] = &[
            // The rarest byte in mail headers: `:` rather than `F` or a space.
            (r"/From: x/", 1, 7, Scan::Bytes { offset: 4, bytes: Few::One(b':') }),
            (r"/From: x/i", 6, 7, Scan::Bytes { offset: 4, bytes: Few::One(b':') }),
            (r"/[a-z]q[0-9]/", 3, 3, Scan::Bytes { offset: 1, bytes: Few::One(b'q') }),
            (r"/^To: (\w)\1/m", 2, 4, Scan::Bytes { offset: 2, bytes: Few::One(b':') }),
            (r"/ with x/i", 7, 7, Scan::Bytes { offset: 1, bytes: Few::Two(b'W', b'w') }),
            // An alternation ends the prefix; the first bytes still guide the scan.
            (r"/(?:abc|abd)x/", 0, 0, Scan::Bytes { offset: 0, bytes: Few::One(b'a') }),
            (r"/(?:ab|cd|ef|gh)x/", 0, 0, Scan::Set(set_of(|b| matches!(b, b'a' | b'c' | b'e' | b'g')))),
            (r"/(a)\1/", 0, 0, Scan::Bytes { offset: 0, bytes: Few::One(b'a') }),
            (r"/\w+x/", 0, 0, Scan::Set(set_of(|b| b.is_ascii_alphanumeric() || b == b'_'))),
            (r"/(?=a)\s*/", 0, 0, Scan::Any),
        ];
        for &(re, pc, len, scan) in rows {
            let b = program(re);
            assert_eq!((b.program.prefix_pc, b.program.prefix_len, b.program.scan), (pc, len, scan), "{re}");
        }
    }

    /// Checking the second byte of a start changes no answer: on generated texts, a
    /// program with its pairs finds what it finds without them. Each pattern keeps
    /// pairs, and they leave out most of the pairs its first bytes would let through.
    #[test]
    fn pairs_keep_every_match_table() {
        let cases: &[(&str, &[&str])] = &[
            (
                r"/(?:your\s?|full\s|copy\s)?(?:name|city|zip|address|phone|email|work|gender)[:\s]{1,3}(?!x)/i",
                &["your", "Full ", "name", "CITY", "zi", "p", ":", " ", "\n", "x", "ci"],
            ),
            (r"/(?:[a-r]b?|c)(?:d|e*f)[^a]{0,2}(?<!x)/", &["a", "b", "c", "d", "e", "f", "x"]),
            (r"/[a-z]x?y(?=q|$)/", &["a", "x", "y", "q", " ", "z"]),
            (r"/(?:[a-s]|ij)(?:k|(l))\1?m/", &["a", "i", "j", "k", "l", "m"]),
            (r"/[a-s]{2,3}!/", &["a", "b", "t", "!"]),
            (r"/[a-r]x|q/", &["q", "a", "x", "b"]),
        ];
        let mut random = crate::rules::Xorshift(0x9e37_79b9);
        let mut next = |n: usize| random.below(n);
        let mut scratch = BacktrackScratch::default();
        for (pattern, tokens) in cases {
            let with = program(pattern).program;
            let pairs = with.pairs.as_ref().map_or(0, |p| p.iter().map(ByteSet::count).sum::<u32>());
            let first = match with.scan {
                Scan::Set(set) => set.count(),
                _ => 0,
            };
            assert!(pairs > 0 && pairs < first * 128, "{pattern}: {pairs} pairs of {first} first bytes");
            let without = Program { pairs: None, ..with.clone() };
            let mut matched = 0;
            for _ in 0..3000 {
                let len = next(12);
                let text: Vec<u8> = (0..len).flat_map(|_| tokens.get(next(tokens.len())).map_or(&b""[..], |t| t.as_bytes())).copied().collect();
                let want = without.count_matches(&text, 5, &mut scratch).count;
                assert_eq!(with.count_matches(&text, 5, &mut scratch).count, want, "{pattern} on {:?}", String::from_utf8_lossy(&text));
                matched += usize::from(want > 0);
            }
            assert!(matched > 100, "{pattern}: {matched} of 3000 match");
        }
    }

    #[test]
    fn byte_sets_table() {
        // (bytes inserted, what a memchr scan gets)
        let rows: &[(&[u8], Few)] = &[
            (b"", Few::Empty),
            (b"\x00", Few::One(0)),
            (b"\xFF\x7F", Few::Two(0x7F, 0xFF)),
            (b"\x80a\x01", Few::Three(0x01, b'a', 0x80)),
            (b"abcd", Few::Many),
        ];
        for &(inserted, want) in rows {
            let mut set = ByteSet::default();
            inserted.iter().for_each(|&b| set.insert(b));
            let mut sorted = inserted.to_vec();
            sorted.sort_unstable();
            assert_eq!(set.bytes().collect::<Vec<u8>>(), sorted, "{inserted:?}");
            assert_eq!(Few::of(set), want, "{inserted:?}");
        }
        assert_eq!(ByteSet::ALL.bytes().count(), 256);
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

    fn captures_program(body: &str, flags: &str) -> Program {
        let extended = perl::translate_backtracking(body, flags).expect("translates");
        compile_captures(&extended).unwrap_or_else(|e| panic!("{body}: {e}"))
    }

    /// Programs built to record captures report every group, as Perl's `$1`...
    #[test]
    fn captures_like_perl_table() {
        type Row = (&'static str, &'static str, &'static str, Option<&'static [Option<&'static str>]>);
        let rows: &[Row] = &[
            (r"(\S+) \((\S+)\[(\d+)\]\)", "", "h (a.b[12])", Some(&[Some("h"), Some("a.b"), Some("12")])),
            (r"a(.*?)c", "", "abcbc", Some(&[Some("b")])),
            (r"(x)?y", "", "y", Some(&[None])),
            (r"(?:(a)|b)+", "", "ab", Some(&[Some("a")])),
            (r"(a|ab)(c|bcd)(d*)", "", "abcd", Some(&[Some("a"), Some("bcd"), Some("")])),
            (r"(\w+) \1", "", "say hello hello", Some(&[Some("hello")])),
            (r"^(?:from )?(\S+)", "", "from a b", Some(&[Some("a")])),
            (r"with (smtp)", "i", "a WITH SMTP", Some(&[Some("SMTP")])),
            // Perl's `$` without /m, as the eval patterns write it: before a final newline.
            (r"(\S+)(?=\n?\z)", "", "a bc\n", Some(&[Some("bc")])),
            (r"(\S+)(?=\n?\z)", "", "a bc\n\n", None),
            (r"(\S+)\z", "", "a bc\n", None),
        ];
        let mut scratch = BacktrackScratch::default();
        for &(body, flags, hay, want) in rows {
            let p = captures_program(body, flags);
            let got = match p.find_at(hay.as_bytes(), 0, &mut scratch) {
                Ok(Some(_)) => Some(
                    (1..=p.captures())
                        .map(|n| p.capture(&scratch, n).and_then(|(a, b)| hay.get(a..b)))
                        .collect::<Vec<_>>(),
                ),
                _ => None,
            };
            assert_eq!(got.as_deref(), want, "{body} on {hay:?}");
            assert_eq!(p.capture(&scratch, 0), None);
            assert_eq!(p.capture(&scratch, p.captures() + 1), None);
        }
        // Rule programs record only what a backreference reads.
        assert_eq!(program(r"/(a)(b)\2/").program.captures(), 0);
    }

    #[test]
    fn perl_dollar_is_one_instruction() {
        let p = captures_program(r"a(?=\n?\z)", "");
        assert!(p.insts.contains(&Inst::Look(Assert::EndBeforeNewline)));
        assert!(!p.insts.iter().any(|i| matches!(i, Inst::LookStart { .. })));
    }

    #[test]
    fn required_literals_table() {
        // (pattern, flags, required literal, folded)
        let rows: &[(&str, &str, &str, bool)] = &[
            (r"^(\S+) \((\S+) \[x\]\).*\) by (\S+)", "", " [x])", false),
            (r"(?:from |HELO )\S*hotmail\.com\b", "", "hotmail.com", false),
            (r"\w+(?i:cde)f", "", "cdef", true),
            (r"(?:a|b)(?i:cde)f", "", "", false),
            (r"\S+ with (a|b)", "i", " with ", true),
            (r"(x)?abcd(?=e)fg", "", "abcdfg", false),
            (r"a(?:bcd)+", "", "", false),
            // A fixed prefix is checked anyway: no separate literal.
            (r"helo=(\S+)", "", "", false),
        ];
        for &(body, flags, want, fold) in rows {
            let p = captures_program(body, flags);
            let r = p.required;
            let got = p.bytes.get(r.start as usize..r.start as usize + usize::from(r.len)).unwrap_or(&[]);
            assert_eq!((got, r.fold && r.len > 0), (want.as_bytes(), fold), "{body}");
        }
        let p = captures_program(r"(?:x|y)\S*hotmail\.com", "i");
        let mut scratch = BacktrackScratch::default();
        assert_eq!(p.find_at(b"X.HotMail.COM", 0, &mut scratch), Ok(Some((0, 13))));
        assert_eq!(p.find_at(b"X.HotMail.CO x.hotmail.co", 0, &mut scratch), Ok(None));
        assert_eq!(scratch.last_steps(), 0, "rejected before any attempt");
    }

    #[test]
    fn find_at_continues_where_told() {
        let b = program(r"/(?<=a)b/");
        let mut scratch = BacktrackScratch::default();
        // The lookbehind sees the text before `start`.
        assert_eq!(b.program.find_at(b"ab ab", 1, &mut scratch), Ok(Some((1, 2))));
        assert_eq!(b.program.find_at(b"ab ab", 2, &mut scratch), Ok(Some((4, 5))));
        assert_eq!(b.program.find_at(b"ab ab", 5, &mut scratch), Ok(None));
        assert_eq!(b.program.find_at(b"ab ab", 9, &mut scratch), Ok(None));
    }

    #[test]
    fn catastrophic_patterns_stop_at_the_budget() {
        let mut scratch = BacktrackScratch::default();
        let hay = [b'a'; 64];
        for re in [r"/(a+)+b/", r"/(?:a|aa)*b/", r"/(\w*)*\d(?=x)/"] {
            let b = program(re);
            assert_eq!(b.program.find_at(&hay, 0, &mut scratch), Err(Undecided::StepLimit), "{re}");
            assert_eq!(scratch.last_steps(), scratch.budget_for(hay.len()), "{re}");
        }
        // The same patterns decide short texts.
        let b = program(r"/(a+)+b/");
        assert_eq!(b.program.find_at(b"aaab", 0, &mut scratch), Ok(Some((0, 4))));
        assert!(scratch.last_steps() < 100);
        // A tiny budget: undecided, and counting reports what it found before.
        let mut small = BacktrackScratch::with_limits(50, 0, DEFAULT_STACK_FRAMES);
        let b = program(r"/(?=a)a/");
        let counted = b.program.count_matches(&[b'a'; 40], u32::MAX, &mut small);
        assert_eq!(counted.undecided, Some(Undecided::StepLimit));
        assert!(counted.count > 0 && counted.count < 40);
    }

    #[test]
    fn line_edges_bound_give_backs_table() {
        // A repeat followed by `^` or `$` under `/m` gives back only to line edges (a
        // look 2,048 bytes ahead for a line, `__FROM_NAME_IN_MSG`, tries its 41 lines,
        // not every byte) and finds what Perl finds (perl 5.36; `(?:$)` keeps Perl from
        // reading `$\` as a variable). (pattern, text, leftmost match)
        let lines: String = (0..40).map(|i| alloc::format!("line {i:02} of the message body, nothing to see\n")).collect();
        let named = alloc::format!("From: Joe Bloggs <joe@example.org>\n{lines}Joe Bloggs\n");
        let unnamed = alloc::format!("From: Joe Bloggs <joe@example.org>\n{lines}Jim Bloggs\n");
        let from_name = r"/^From:\s+([^<]\S+\s\S+)\s(?=.{1,2048}^\1\r?$)/sm";
        type Row<'a> = (&'a str, &'a str, Option<(usize, usize)>);
        let rows: &[Row<'_>] = &[
            (from_name, &named, Some((0, 17))),
            (from_name, &unnamed, None),
            (r"/(?:.{0,5})^b/m", "b", Some((0, 1))),
            (r"/a.{0,20}(?:$)\nc/sm", "ab\ncd\ncd", Some((0, 7))),
            // A backreference after the edge: no follow class, so the edges are searched.
            (r"/(?=(b))(?:.{0,5})^\1/m", "bxxxx", Some((0, 1))),
            (r"/(y)\n.{0,5}^\1/sm", "y\nyzz", Some((0, 3))),
            (r"/(\n)a.{0,20}(?:$)\1c/sm", "\nab\ncd\ncd", Some((0, 8))),
            (r"/(?:.{0,5})^b/sm", "xx\nb", Some((0, 4))),
            (r"/(?:.{0,5})^b/sm", "xx\nxb", None),
            (r"/a.{0,9}$/sm", "ab\ncd", Some((0, 5))),
            (r"/a.{0,9}(?:$)\nc/sm", "ab\ncd", Some((0, 4))),
            (r"/a.{1,2048}(?:$)\nEND/sm", &alloc::format!("a{lines}END"), Some((0, lines.len() + 4))),
            (r"/a.{1,2048}(?:$)\nEND/sm", &alloc::format!("a{lines}NED"), None),
        ];
        let mut scratch = BacktrackScratch::default();
        for &(re, hay, want) in rows {
            let b = program(re);
            assert_eq!(b.program.find_at(hay.as_bytes(), 0, &mut scratch), Ok(want), "{re} on {hay:?}");
        }
    }

    #[test]
    fn loops_below_their_minimum_table() {
        // A repeat that ends a loop's body, while the loop is below its minimum, gives
        // back only to where the body can begin again, and finds what Perl finds
        // (perl 5.36). (pattern, text, leftmost match)
        type Row<'a> = (&'a str, &'a str, Option<(usize, usize)>);
        let rows: &[Row<'_>] = &[
            (r"/(?:a[ab]{1,3}){2}b/", "aabab", None),
            (r"/(?:,[^,]{1,90}){3}/", ",aa,b,cc,d", Some((0, 8))),
            (r"/(?:,[^,]{1,90}){3}/", ",a,b", None),
            (r"/(?:,[^,]{1,5}){2,3}x/", ",ab,cd,ef,gx", Some((3, 12))),
            (r"/(?:,[^,]{1,5}?){3}x/", ",ab,cd,efx", Some((0, 10))),
            (r"/(?:x[^x]{1,3}){2}/", "xaxaax", Some((0, 5))),
            (r"/(?:a\d{1,3}){3}b/", "a1a22a333b", Some((0, 10))),
            (r"/(?:a\d+){3}(?!\d)/", "a1a22a3a4", Some((0, 7))),
        ];
        let mut scratch = BacktrackScratch::default();
        for &(re, hay, want) in rows {
            let b = program(re);
            assert_eq!(b.program.find_at(hay.as_bytes(), 0, &mut scratch), Ok(want), "{re} on {hay:?}");
        }
        // `__TO_WAY_TOO_MANY` on forty addresses: each start gives back only to commas
        // and is decided (giving back every byte ran out of steps, undecided).
        let to: String = (0..40).map(|i| alloc::format!(", person{i:02} <person{i:02}@example.org>")).collect();
        let b = program(r"/(?:,[^,]{1,90}){50}/");
        assert_eq!(b.program.find_at(to.as_bytes(), 0, &mut scratch), Ok(None));
    }

    /// Noting what a loop's body begins with changes no answer: on generated texts, a
    /// program finds and counts what it does with every loop end's class taken out.
    #[test]
    fn loop_classes_keep_every_match_table() {
        let cases: &[(&str, &[&str])] = &[
            (r"/(?:,[^,]{1,4}){3}/", &[",", "a", "b"]),
            (r"/(?:a[ab]{1,3}){2,4}b/", &["a", "b", "c"]),
            (r"/(?:x[^x]{0,3}){2}y/", &["x", "y", "z"]),
            (r"/(?:[ab][^,]+?){3},/", &["a", "b", ",", "c"]),
            (r"/(?:(?:a|bc)[^a]{1,3}){2,3}(?!c)/", &["a", "b", "c", "d"]),
            (r"/(?:(?:,[^,]{1,2}){2};){2}/", &[",a", ",ab", ";", ","]),
        ];
        let mut random = crate::rules::Xorshift(0x5eed_1234);
        for (pattern, tokens) in cases {
            let with = program(pattern).program;
            let mut without = with.clone();
            let mut classes = 0;
            for inst in &mut without.insts {
                if let Inst::RepeatEnd { body_first, .. } = inst {
                    classes += usize::from(*body_first != NO_CLASS);
                    *body_first = NO_CLASS;
                }
            }
            assert!(classes > 0, "{pattern}: no loop end notes its body's class");
            assert_same_matches(pattern, &with, &without, tokens, 16, &mut random);
        }
    }

    /// `with` and `without`, one pattern's program with and without a shortcut, give the
    /// same leftmost match and count on 3,000 texts of up to `most` of `tokens` each, of
    /// which more than 50 match.
    fn assert_same_matches(pattern: &str, with: &Program, without: &Program, tokens: &[&str], most: usize, random: &mut crate::rules::Xorshift) {
        let mut scratch = BacktrackScratch::default();
        let mut matched = 0;
        for _ in 0..3000 {
            let len = random.below(most);
            let text: Vec<u8> = (0..len).flat_map(|_| tokens.get(random.below(tokens.len())).map_or(&b""[..], |t| t.as_bytes())).copied().collect();
            let shown = String::from_utf8_lossy(&text);
            let want = without.find_at(&text, 0, &mut scratch);
            assert_eq!(with.find_at(&text, 0, &mut scratch), want, "{pattern} on {shown:?}");
            let count = without.count_matches(&text, 5, &mut scratch).count;
            assert_eq!(with.count_matches(&text, 5, &mut scratch).count, count, "{pattern} on {shown:?}");
            matched += usize::from(count > 0);
        }
        assert!(matched > 50, "{pattern}: {matched} of 3000 match");
    }

    #[test]
    fn runs_keep_every_match_table() {
        // Loops walked as runs, each against the same program running them as loops.
        let cases: &[(&str, &[&str])] = &[
            (r"/(\w+)\n(?:[^\n]{1,5}\n+)*T: \1/", &["ab", "a", "T: ", "\n", "\n\n", "b", " "]),
            (r"/a(?:[^\n]+\n+)*^b/m", &["a", "b", "\n", "c", "\n\n"]),
            (r"/(?:[^\n]{1,3}\n+){2,4}x/", &["a", "x", "\n", "ab", "\n\n", "abcd"]),
            (r"/(?:[ab]+c+)*d/", &["a", "b", "c", "d", "e"]),
            (r"/q(?:[^\n]{2}\n{1,2})*z/", &["q", "ab", "\n", "\n\n\n", "a", "z"]),
            (r"/(?i:from: )(\S+)\n(?:[^\n]{1,9}\n+)*to: \1[\n,]/", &["From: ab\n", "from: a\n", "to: ab,", "TO: a\n", "to: abc\n", "xy\n", "\n", "a"]),
            // Many starts walking one loop (its first walk noted for the others), and
            // a tail that reads a capture (not noted).
            (r"/\nR:[^\n]{0,9} f <?([^\n\s>;]+)>?;(?:[^\n]+\n+)*S: [^\n]{0,5}\1[^a-z0-9]/i", &["\nR: x f <ab>;", "\nr: f a;", " y", "\n", "\n\n", "S: ", "s: ab.", "ab", "a", ";", " f "]),
            (r"/(\w)(?:[^\n]+\n+)*x\1/", &["a", "b", "xa", "xb", "\n", "\n\n", " "]),
            // Loops with a least or most count: the turns a walk took decide its ends (not noted).
            (r"/(\w)(?:[^\n]+\n+){2,}x[^\n]{0,3}\1/", &["a", "b", "xa", "xb", "\n", "\n\n", " "]),
            (r"/(\w)(?:[^\n]+\n+){0,2}x[^\n]{0,3}\1/", &["a", "b", "xa", "xb", "\n", "\n\n", " "]),
        ];
        let mut random = crate::rules::Xorshift(0x5eed_4321);
        let mut scratch = BacktrackScratch::default();
        for (pattern, tokens) in cases {
            let with = program(pattern).program;
            let mut without = with.clone();
            let mut runs = 0;
            for pc in 0..without.insts.len() {
                let head = without.insts.get(pc + 1).copied();
                if let (Some(Inst::Runs { .. }), Some(Inst::RepeatLoop { counter, .. })) = (without.insts.get_mut(pc), head) {
                    without.insts[pc] = Inst::RepeatStart { counter };
                    runs += 1;
                }
            }
            assert!(runs > 0, "{pattern}: no loop walked as runs");
            assert_same_matches(pattern, &with, &without, tokens, 24, &mut random);
        }
        // A turn given back whose rest fails gives back the turn before it.
        type Row<'a> = (&'a str, &'a [u8], Option<(usize, usize)>);
        let rows: &[Row<'_>] = &[
            (r"/(\w+)\n(?:[^\n]{1,5}\n+)*T: \1/", b"ab\nT: ab\nT: x\n", Some((0, 8))),
            (r"/(\w+)\n(?:[^\n]{1,7}\n+)*T: \w*\1;/", b"ab\nT: xab;\n\nT: x\n", Some((0, 10))),
            (r"/(?:[^\n]{1,3}\n+){2,4}x/", b"a\nb\nxc\nd\n", Some((0, 5))),
        ];
        for (pattern, text, want) in rows {
            assert_eq!(program(pattern).program.find_at(text, 0, &mut scratch), Ok(*want), "{pattern}");
        }
        // Loops that are not two whole runs stay loops.
        for pattern in [r"/(?:[^\n]+\n+)*\n/", r"/(?:[^\n]{2}\n+)*$/", r"/(?:[^\n]+\n+)*?x/", r"/(?:[a-c]+[b-d]+)*x/", r"/(?:[a-c]++[b-d]++)*x/", r"/(?:[^\n]*\n+)*x/", r"/(?:a+(b)+)*x\1/"] {
            let runs = program(pattern).program.insts.iter().filter(|i| matches!(i, Inst::Runs { .. })).count();
            assert_eq!(runs, 0, "{pattern}");
        }
    }

    #[test]
    fn runs_walk_each_line_once_table() {
        // (lines each start tries, lines after them): every start's walk meets the
        // first's, so the steps grow with the text, not with starts times lines; past
        // the places a memo keeps, each start walks again, with the same matches.
        let pattern = r"/\nR: (\w+);(?:[^\n]+\n+)*S: [^\n]{0,9}\1\n/";
        let with = program(pattern).program;
        let mut scratch = BacktrackScratch::default();
        for (starts, filler) in [(1usize, 10usize), (40, 400), (200, 250), (3, RUNS_MEMO_PLACES)] {
            let noted = starts + filler < RUNS_MEMO_PLACES;
            let mut text = String::from("x");
            for i in 0..starts {
                text.push_str(&alloc::format!("\nR: a{i}; d"));
            }
            for _ in 0..filler {
                text.push_str("\nsome header line");
            }
            let first = alloc::format!("{text}\nS: a0\n");
            assert_eq!(with.find_at(first.as_bytes(), 0, &mut scratch), Ok(Some((1, first.len()))), "{starts} starts");
            // The subject holds the last start's capture: every start tries.
            let last = alloc::format!("{text}\nS: a{}\n", starts - 1);
            let at = last.find(&alloc::format!("\nR: a{}; d", starts - 1)).expect("the last start");
            assert_eq!(with.find_at(last.as_bytes(), 0, &mut scratch), Ok(Some((at, last.len()))), "{starts} starts");
            if noted {
                assert!(scratch.last_steps() < 4 * last.len() as u32, "{starts} starts: {} steps for {} bytes", scratch.last_steps(), last.len());
            }
        }
    }

    #[test]
    fn a_full_stack_is_undecided() {
        let b = program(r"/(?:ab|cd)*e/");
        let mut small = BacktrackScratch::with_limits(DEFAULT_STEP_BUDGET, 0, 16);
        assert_eq!(b.program.find_at(b"ababababababababababe", 0, &mut small), Err(Undecided::StackLimit));
        assert!(small.deepest_stack() <= 16);
        let mut big = BacktrackScratch::default();
        assert_eq!(b.program.find_at(b"ababababababababababe", 0, &mut big), Ok(Some((0, 21))));
    }

    #[test]
    fn long_lines_fit_the_default_stack() {
        // One frame per iteration of a general greedy loop.
        let b = program(r"/(?:(?!ab).)+x/");
        let mut hay = alloc::vec![b'a'; DEFAULT_STACK_FRAMES - 100];
        hay.push(b'x');
        let mut scratch = BacktrackScratch::default();
        assert_eq!(b.program.find_at(&hay, 0, &mut scratch), Ok(Some((0, hay.len()))));
        assert!(scratch.deepest_stack() <= hay.len() + 4, "{} frames", scratch.deepest_stack());
        assert!(core::mem::size_of::<Frame>() <= 20, "frames are {} bytes", core::mem::size_of::<Frame>());
        assert!(core::mem::size_of::<Inst>() <= 12, "instructions are {} bytes", core::mem::size_of::<Inst>());
    }

    #[test]
    fn relaxed_forms_table() {
        let rows: &[(&str, &str)] = &[
            // A lookahead at the end is kept; elsewhere, and negative ones, dropped.
            (r"/foo(?=bar)/", "(?:foobar)"),
            (r"/foo(?=bar)x/", "(?:foox)"),
            (r"/foo(?!bar)/", "(?:foo)"),
            // A lookbehind at the start is kept.
            (r"/(?<=\$)\d/", r"(?:\$(?-u:[0-9]))"),
            (r"/x(?<=\$)\d/", r"(?:x(?-u:[0-9]))"),
            // A backreference is its group's text, assertions removed, folded under /i.
            (r"/(\bab)\1/", r"(?:(?-u:\b)(?:abab))"),
            (r"/(ab)(?i:\1)/", r"(?:(?:ab)(?-u:[Aa])(?-u:[Bb]))"),
            (r"/(a\1)/", r"(?:a(?-u:[\x00-\xFF])*)"),
            // Atomic and possessive are plain; long counts open up.
            (r"/(?>a+)b/", "(?:a+b)"),
            (r"/a++b/", "(?:a+b)"),
            (r"/(?=x)a{0,200}b{3,4}c{20,30}/", "(?:a*b{3,4}c+)"),
            // A repeat of a repeat keeps a group: not the lazy `[0-9]{1,3}?`.
            (r"/(?=x)(?:\d{1,3})?M/", "(?:((?-u:[0-9]){1,3})?M)"),
            (r"/(?=x)(?:a{2,40})+/", "(a{2,})+"),
        ];
        for (re, want) in rows {
            assert_eq!(program(re).relaxed, *want, "{re}");
        }
        // The loosest form opens every count but `?`, a repeat of a repeat still grouped.
        let loosest: &[(&str, &str)] = &[
            (r"/(?=x)a{0,200}b{3,4}c{20,30}d?/", "(?:a*b+c+d?)"),
            (r"/(?=x)(?:a{1,15}\s){0,10}b{5}/", r"(?:(?:a+(?-u:[\x09-\x0D\x20]))*b+)"),
            (r"/(?=x)(?:\d{1,3})?M/", "(?:((?-u:[0-9])+)?M)"),
        ];
        for (re, want) in loosest {
            let Ok(forms) = perl::relaxed_forms(re, &[RELAX_REPEAT, RELAX_EVERY_REPEAT]) else { panic!("{re} does not compile") };
            assert_eq!(forms.first(), Some(&program(re).relaxed), "{re}: the first form is the compile's");
            assert_eq!(forms.get(1).map(String::as_str), Some(*want), "{re}");
        }
    }

    #[test]
    fn compile_errors() {
        let rows: &[(&str, BacktrackError)] = &[
            (r"/(a)\2/", BacktrackError::NoSuchGroup(2)),
            (r"/(?<=a+)b/", BacktrackError::Lookbehind),
            (r"/(?<=a{300})b/", BacktrackError::Lookbehind),
            (r"/(a)(?<=\1)b/", BacktrackError::Lookbehind),
        ];
        for (re, want) in rows {
            let (body, flags) = perl::split_literal(re).expect("literal");
            let extended = perl::translate_backtracking(body, flags).expect("translates");
            assert_eq!(compile_extended(&extended).map(|_| ()), Err(want.clone()), "{re}");
        }
    }

    #[test]
    fn hostile_texts_do_not_panic() {
        let patterns = [
            r"/(?<=ab|c)(?!x)(\w+?)\1{2,}+(?>[^x]*)$/m",
            r"/(?:(?<!\d)(a|)\1)*?(?=\b)/i",
            r"/^(?:(\w)(?:(?!\1).){0,3})+$/",
        ];
        let texts: [&[u8]; 6] = [
            b"",
            b"\n",
            b"abcabc\nabababab",
            &[0xFF; 40],
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!",
            b"c1a\n\nx",
        ];
        let mut scratch = BacktrackScratch::with_limits(20_000, 4, 256);
        for re in patterns {
            let b = program(re);
            for t in texts {
                for start in 0..=t.len() + 1 {
                    let _ = b.program.find_at(t, start, &mut scratch);
                }
                let _ = b.program.count_matches(t, 1000, &mut scratch);
            }
        }
    }
}
