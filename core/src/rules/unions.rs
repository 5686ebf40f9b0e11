//! Unions of a line target's unfiltered patterns. A pattern without prefilter literals
//! costs a DFA pass over every text of its target; a few of them with dense DFAs,
//! determinized together, cost one pass that tells which of them can match, and only
//! those search again (or none, when the union's hit is the answer). Patterns whose
//! DFAs are lazy form unions of their own, lazy DFAs of their NFAs together; one too big
//! to share is a union of one over its own DFA. Two unions of a kind walk a text
//! together.

use alloc::string::String;
use alloc::vec::Vec;

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::hybrid::{self, LazyStateID};
use regex_automata::nfa::thompson;
use regex_automata::{Input, MatchKind};
use regex_syntax::hir::Hir;

use super::cache::{self, Cached};
use super::compile::{build_lazy, build_nfa_many, end_before_newline, LineEnds, parse_hir, CompiledPattern, Dense, MatchNeeds, Matcher, TargetProgram, AUTOMATA_REVISION};
use super::literal::find_any;
use super::narrow::{NarrowDfa, NarrowTables, Placed, TablePart};
use super::{Config, RuleKind};

/// Largest dense DFA of one union, shared by all processes: a bigger automaton is slower
/// to search (a 256 KiB union's pass costs up to twice one pattern's) and to build.
const UNION_LIMIT: usize = 256 * 1024;
/// Most patterns in one union: the bits of the mask its search fills.
pub(crate) const UNION_MEMBERS: usize = 64;
/// Most NFA states of the members of one lazy union. A bigger union saves more passes
/// once its cache is warm, but each of its states joins more members' states, so a young
/// worker (replaced every 200 connections under spamd's `--max-conn-per-child`) builds more of them, each costlier:
/// with the stock rules, unions up to 15,000 states took 13% off a warm scan's
/// instructions and added 11% to a new worker's first 200 messages; up to 4,000, 10%
/// off and 1% off.
const LAZY_UNION_STATES: usize = 4_000;

/// Which unfiltered patterns a union takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnionKind {
    /// Those with a dense DFA (or dense screen): the union is a dense DFA.
    Dense,
    /// Those with a lazy DFA (or lazy screen): the union is a lazy DFA.
    Lazy,
}

/// A union's automaton.
pub(crate) enum UnionAutomaton {
    /// Shared by all processes.
    Dense(alloc::boxed::Box<NarrowDfa>),
    /// The rule set's lazy DFA of this index (for a union of one, its member's own),
    /// with a cache in each scratch.
    Lazy(usize),
    /// A union of one over its member's own DFA (or screen), narrow once the rules are
    /// compiled.
    Own,
}

/// Unfiltered line patterns searched as one DFA.
pub(crate) struct Union {
    pub(crate) automaton: UnionAutomaton,
    /// Pattern indices, by the union's pattern id.
    pub(crate) members: Vec<u32>,
    /// Members, by bit, whose hit in the union is their result: a DFA of the same regex
    /// (not a screen) counting one match at most. The others search again when found.
    pub(crate) decided: u64,
}

/// What a union's walk says of one member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Member {
    /// It matches nowhere in the text walked.
    Absent,
    /// Its hit in the union is its result.
    Hit,
    /// It must search the text itself (found, or the walk failed).
    Search,
}

impl Union {
    /// What `found`, a walk's members by bit (none when the walk failed), says of
    /// member `bit`.
    pub(crate) fn member(&self, found: Option<u64>, bit: usize) -> Member {
        let bit = 1u64 << bit;
        match found {
            Some(found) if found & bit == 0 => Member::Absent,
            Some(_) if self.decided & bit != 0 => Member::Hit,
            _ => Member::Search,
        }
    }

    /// The members with a match in `text`, as bits by pattern id, and in `first_ends`
    /// by pattern id where the first match of each found one ends; `None` when the
    /// search failed and every member must search itself. One pass over the text, which
    /// stops once every member is found; a lazy union's DFA and this worker's cache for
    /// it come from `lazy`, by the DFA's index; a union of one over its member's own
    /// dense DFA finds it in `patterns`, its target's; a dense DFA's table is in
    /// `tables`. The pass starts at `from`, a line start before which no member can match.
    pub(crate) fn finds<'e>(
        &self,
        text: &[u8],
        from: usize,
        first_ends: &mut [u32; UNION_MEMBERS],
        (patterns, tables): (&[CompiledPattern], &NarrowTables),
        lazy: impl FnOnce(usize) -> Option<(&'e hybrid::dfa::DFA, &'e mut hybrid::dfa::Cache)>,
    ) -> Option<u64> {
        match &self.automaton {
            UnionAutomaton::Dense(_) | UnionAutomaton::Own => {
                let mut walk = DenseWalk::new(self, self.dense(patterns, tables)?, from);
                walk.finish(text, first_ends)
            }
            UnionAutomaton::Lazy(i) => {
                let (dfa, cache) = lazy(*i)?;
                let mut walk = LazyWalk::new(self, dfa, cache, text, from);
                walk.finish(cache, text, first_ends)
            }
        }
    }

    /// The DFA of a dense union or of a union of one over its member's own, which is in
    /// `patterns` (`None` for one that did not fit 16-bit rows: its members search alone),
    /// with its table in `tables`.
    fn dense<'a>(&'a self, patterns: &'a [CompiledPattern], tables: &'a NarrowTables) -> Option<Placed<'a>> {
        tables.place(self.narrow_dfa(patterns)?)
    }

    /// The narrow DFA of a dense union or of a union of one over its member's own.
    fn narrow_dfa<'a>(&'a self, patterns: &'a [CompiledPattern]) -> Option<&'a NarrowDfa> {
        match &self.automaton {
            UnionAutomaton::Dense(dfa) => Some(dfa),
            UnionAutomaton::Own => match &patterns.get(*self.members.first()? as usize)?.matcher {
                Matcher::Narrow(dfa) => Some(dfa),
                Matcher::Backtrack { relaxed, .. } => match &**relaxed {
                    Matcher::Narrow(dfa) => Some(dfa),
                    _ => None,
                },
                Matcher::Lazy(_) | Matcher::Dense(_) | Matcher::Repeat(_) => None,
            },
            UnionAutomaton::Lazy(_) => None,
        }
    }

    /// [`Union::finds`] of `self` and `other` over the same text, each with its own
    /// `first_ends`; `None` unless both are dense (`patterns` and `tables` as for
    /// [`Union::finds`]).
    /// The two walks take a byte each a round: a DFA step waits on the load of the step
    /// before, so one walk leaves the core idle where two overlap.
    pub(crate) fn finds_two(
        &self,
        other: &Union,
        text: &[u8],
        from: (usize, usize),
        first_ends: (&mut [u32; UNION_MEMBERS], &mut [u32; UNION_MEMBERS]),
        (patterns, tables): (&[CompiledPattern], &NarrowTables),
    ) -> Option<(Option<u64>, Option<u64>)> {
        let (a, b) = (self.dense(patterns, tables)?, other.dense(patterns, tables)?);
        let (mut one, mut two) = (DenseWalk::new(self, a, from.0), DenseWalk::new(other, b, from.1));
        while one.outcome.is_none() && two.outcome.is_none() {
            // Most rounds find both walks at one place: each byte is then read once.
            let (xs, ys) = (text.get(one.at..).unwrap_or_default(), text.get(two.at..).unwrap_or_default());
            let (x, y, steps, special) = if one.at == two.at {
                step_two::<true>(a, b, xs, ys, one.state, two.state)
            } else {
                step_two::<false>(a, b, xs, ys, one.state, two.state)
            };
            (one.state, two.state) = (x, y);
            one.at += steps;
            two.at += steps;
            if !special {
                break;
            }
            if a.is_special(x) {
                one.special(text, first_ends.0);
            }
            if b.is_special(y) {
                two.special(text, first_ends.1);
            }
        }
        Some((one.finish(text, first_ends.0), two.finish(text, first_ends.1)))
    }

    /// [`Union::finds_two`] of two lazy unions, each with this worker's cache of its
    /// DFA (`one` for `self`, `two` for `other`); `None` unless both are lazy.
    pub(crate) fn finds_two_lazy(
        &self,
        other: &Union,
        one: (&hybrid::dfa::DFA, &mut hybrid::dfa::Cache),
        two: (&hybrid::dfa::DFA, &mut hybrid::dfa::Cache),
        text: &[u8],
        from: (usize, usize),
        first_ends: (&mut [u32; UNION_MEMBERS], &mut [u32; UNION_MEMBERS]),
    ) -> Option<(Option<u64>, Option<u64>)> {
        let (UnionAutomaton::Lazy(_), UnionAutomaton::Lazy(_)) = (&self.automaton, &other.automaton) else { return None };
        let ((a, cache_a), (b, cache_b)) = (one, two);
        let (mut x, mut y) = (LazyWalk::new(self, a, cache_a, text, from.0), LazyWalk::new(other, b, cache_b, text, from.1));
        while x.outcome.is_none() && y.outcome.is_none() {
            // A tagged state (a match) takes its next step through the checked path.
            if x.state.is_tagged() {
                x.step_checked(cache_a, text, first_ends.0);
                continue;
            }
            if y.state.is_tagged() {
                y.step_checked(cache_b, text, first_ends.1);
                continue;
            }
            let lazy = ((a, &*cache_a), (b, &*cache_b));
            let (xs, ys) = (text.get(x.at..).unwrap_or_default(), text.get(y.at..).unwrap_or_default());
            let (p, q, steps, tagged) = if x.at == y.at {
                lazy_two::<true>(lazy, xs, ys, x.state, y.state)
            } else {
                lazy_two::<false>(lazy, xs, ys, x.state, y.state)
            };
            (x.state, y.state) = (p, q);
            x.at += steps;
            y.at += steps;
            let Some((np, nq)) = tagged else { break };
            x.take(np, cache_a, text, first_ends.0);
            y.take(nq, cache_b, text, first_ends.1);
        }
        Some((x.finish(cache_a, text, first_ends.0), y.finish(cache_b, text, first_ends.1)))
    }

    /// Every member's bit.
    fn all(&self) -> u64 {
        match self.members.len() {
            n if n >= 64 => u64::MAX,
            n => (1u64 << n) - 1,
        }
    }

    /// The `len` patterns a match state reports (`pattern(i)`), as bits; those also in
    /// `new` get `end` in `first_ends`.
    fn patterns_of(&self, len: usize, pattern: impl Fn(usize) -> usize, new: u64, end: usize, first_ends: &mut [u32; UNION_MEMBERS]) -> u64 {
        let mut bits = 0u64;
        for i in 0..len {
            let id = pattern(i);
            let bit = 1u64.checked_shl(id as u32).unwrap_or(0);
            if let (true, Some(slot)) = (new & bit != 0, first_ends.get_mut(id)) {
                *slot = u32::try_from(end).unwrap_or(u32::MAX);
            }
            bits |= bit;
        }
        bits
    }
}

/// One dense union's pass over a text, resumable: [`Union::finds_two`] steps two at
/// once and hands each its special states.
struct DenseWalk<'u> {
    union: &'u Union,
    dfa: Placed<'u>,
    state: u16,
    /// The place after the byte that led to `state`.
    at: usize,
    found: u64,
    /// Match states met before, by a few bits of their id, with what they report:
    /// a text that matches often enters the same few again and again.
    met: [(u16, u64); 8],
    /// What the pass found, once it has ended early (`Some(None)`: it failed).
    outcome: Option<Option<u64>>,
}

impl<'u> DenseWalk<'u> {
    /// The pass from `from`, which it starts as the start of a text.
    fn new(union: &'u Union, dfa: Placed<'u>, from: usize) -> DenseWalk<'u> {
        let start = dfa.start_of_text();
        DenseWalk {
            union,
            dfa,
            state: start.unwrap_or(0),
            at: from,
            found: 0,
            met: [(0, 0u64); 8],
            outcome: if start.is_some() { None } else { Some(None) },
        }
    }

    /// Takes the special state just entered: a match's members, the end of the pass
    /// (dead, quit, every member found), or a skip to the next byte that leaves it.
    fn special(&mut self, text: &[u8], first_ends: &mut [u32; UNION_MEMBERS]) {
        let (dfa, state) = (self.dfa, self.state);
        if dfa.is_match(state) {
            let slot = dfa.row(state) % self.met.len();
            self.found |= match self.met.get(slot) {
                Some(&(seen, bits)) if seen == state => bits,
                _ => {
                    // A match state is entered one byte after the match ends.
                    let patterns = dfa.patterns(state);
                    let bits = self.union.patterns_of(patterns.len(), |i| patterns.get(i).map_or(usize::MAX, |&p| p as usize), !self.found, self.at - 1, first_ends);
                    if let Some(entry) = self.met.get_mut(slot) {
                        *entry = (state, bits);
                    }
                    bits
                }
            };
            if self.found == self.union.all() {
                self.outcome = Some(Some(self.found));
                return;
            }
        } else if dfa.is_dead(state) {
            self.outcome = Some(Some(self.found));
            return;
        } else if dfa.is_quit(state) {
            self.outcome = Some(None);
            return;
        }
        let accelerator = dfa.accelerator(state);
        if !accelerator.is_empty() {
            // The state stays itself on every byte but these.
            let next = find_any(accelerator, text.get(self.at..).unwrap_or_default());
            self.at = next.map_or(text.len(), |i| self.at + i);
        }
    }

    /// Walks on alone to the end of the text: what the pass found.
    fn finish(&mut self, text: &[u8], first_ends: &mut [u32; UNION_MEMBERS]) -> Option<u64> {
        while self.outcome.is_none() {
            let special;
            (self.state, self.at, special) = self.dfa.to_special(self.state, text, self.at);
            if !special {
                let end = self.dfa.next_eoi_state(self.state);
                if self.dfa.is_match(end) {
                    let patterns = self.dfa.patterns(end);
                    self.found |= self.union.patterns_of(patterns.len(), |i| patterns.get(i).map_or(usize::MAX, |&p| p as usize), !self.found, text.len(), first_ends);
                }
                return Some(self.found);
            }
            self.special(text, first_ends);
        }
        self.outcome.unwrap_or(None)
    }
}

/// One lazy union's pass over a text, resumable: [`Union::finds_two_lazy`] steps two
/// at once. Its cache is lent to each call.
struct LazyWalk<'u> {
    union: &'u Union,
    dfa: &'u hybrid::dfa::DFA,
    state: LazyStateID,
    /// The place after the byte that led to `state`.
    at: usize,
    found: u64,
    /// What the pass found, once it has ended early (`Some(None)`: it failed).
    outcome: Option<Option<u64>>,
}

impl<'u> LazyWalk<'u> {
    /// The pass from `from`, which it starts as the start of a text.
    fn new(union: &'u Union, dfa: &'u hybrid::dfa::DFA, cache: &mut hybrid::dfa::Cache, text: &[u8], from: usize) -> LazyWalk<'u> {
        let start = dfa.start_state_forward(cache, &Input::new(text.get(from..).unwrap_or_default())).ok();
        LazyWalk {
            union,
            dfa,
            state: start.unwrap_or_default(),
            at: from,
            found: 0,
            outcome: if start.is_some() { None } else { Some(None) },
        }
    }

    /// Takes `next`, the state after the byte at `at` from untagged `state`: one not
    /// built yet is built now; a tagged one is a match, or the end of the pass.
    fn take(&mut self, next: LazyStateID, cache: &mut hybrid::dfa::Cache, text: &[u8], first_ends: &mut [u32; UNION_MEMBERS]) {
        if next.is_unknown() {
            self.step_checked(cache, text, first_ends);
            return;
        }
        self.state = next;
        self.at += 1;
        self.tagged(cache, first_ends);
    }

    /// One step through the checked path, which builds a state not built yet (and the
    /// only one a tagged state may take).
    fn step_checked(&mut self, cache: &mut hybrid::dfa::Cache, text: &[u8], first_ends: &mut [u32; UNION_MEMBERS]) {
        let Some(&byte) = text.get(self.at) else {
            self.outcome = Some(self.end(cache, text, first_ends));
            return;
        };
        match self.dfa.next_state(cache, self.state, byte) {
            Ok(next) => {
                self.state = next;
                self.at += 1;
                self.tagged(cache, first_ends);
            }
            Err(_) => self.outcome = Some(None),
        }
    }

    /// Takes the state just entered if tagged: a match's members, or the end of the pass
    /// (dead, quit, every member found).
    fn tagged(&mut self, cache: &hybrid::dfa::Cache, first_ends: &mut [u32; UNION_MEMBERS]) {
        let (dfa, state) = (self.dfa, self.state);
        if !state.is_tagged() {
            return;
        }
        if state.is_match() {
            // A match state is entered one byte after the match ends.
            self.found |= self.union.patterns_of(dfa.match_len(cache, state), |i| dfa.match_pattern(cache, state, i).as_usize(), !self.found, self.at - 1, first_ends);
            if self.found == self.union.all() {
                self.outcome = Some(Some(self.found));
            }
        } else if state.is_dead() {
            self.outcome = Some(Some(self.found));
        } else if state.is_quit() {
            self.outcome = Some(None);
        }
    }

    /// The end of the text: what a match there adds.
    fn end(&mut self, cache: &mut hybrid::dfa::Cache, text: &[u8], first_ends: &mut [u32; UNION_MEMBERS]) -> Option<u64> {
        let dfa = self.dfa;
        let state = dfa.next_eoi_state(cache, self.state).ok()?;
        if state.is_match() {
            let cache = &*cache;
            self.found |= self.union.patterns_of(dfa.match_len(cache, state), |i| dfa.match_pattern(cache, state, i).as_usize(), !self.found, text.len(), first_ends);
        }
        Some(self.found)
    }

    /// Walks on alone to the end of the text, four bytes a round while the states stay
    /// untagged: what the pass found.
    fn finish(&mut self, cache: &mut hybrid::dfa::Cache, text: &[u8], first_ends: &mut [u32; UNION_MEMBERS]) -> Option<u64> {
        while self.outcome.is_none() {
            if self.state.is_tagged() {
                self.step_checked(cache, text, first_ends);
                continue;
            }
            let (before, next, after) = to_tagged(self.dfa, cache, self.state, text, self.at);
            self.state = before;
            match next {
                None => {
                    self.at = after;
                    return self.end(cache, text, first_ends);
                }
                Some(next) => {
                    // `before` is the state at the byte that led to `next`.
                    self.at = after - 1;
                    self.take(next, cache, text, first_ends);
                }
            }
        }
        self.outcome.unwrap_or(None)
    }
}

/// Steps `a` from `x` over `xs` and `b` from `y` over `ys`, two bytes a round, until
/// either enters a special state: both states, the bytes stepped and whether one is
/// special (at the end of the shorter text, a byte left over is not stepped).
/// `TOGETHER`: the walks are at one place (`ys` is `xs`), so each byte is read once.
/// Not inlined, as its lazy twin: inside the scan's loop the walk's tables and text
/// did not fit the registers and were read back from the stack at every byte (2.2% more
/// instructions a scan).
#[inline(never)]
fn step_two<const TOGETHER: bool>(a: Placed<'_>, b: Placed<'_>, xs: &[u8], ys: &[u8], mut x: u16, mut y: u16) -> (u16, u16, usize, bool) {
    let mut steps = 0usize;
    let ys = if TOGETHER { xs } else { ys };
    for (pc, qc) in xs.chunks_exact(2).zip(ys.chunks_exact(2)) {
        let (&[p0, p1], &[q0, q1]) = (pc, qc) else { break };
        let (q0, q1) = if TOGETHER { (p0, p1) } else { (q0, q1) };
        x = a.step(x, p0);
        y = b.step(y, q0);
        if a.is_special(x) | b.is_special(y) {
            return (x, y, steps + 1, true);
        }
        x = a.step(x, p1);
        y = b.step(y, q1);
        steps += 2;
        if a.is_special(x) | b.is_special(y) {
            return (x, y, steps, true);
        }
    }
    (x, y, steps, false)
}

/// A lazy DFA with this worker's cache of it.
type LazyWith<'a> = (&'a hybrid::dfa::DFA, &'a hybrid::dfa::Cache);

/// [`step_two`] of two lazy DFAs, while their states stay untagged: the last untagged
/// states, the bytes stepped, and the next states once either is tagged (none at the end
/// of the shorter text, where a byte left over is not stepped).
#[inline(never)]
fn lazy_two<const TOGETHER: bool>((a, b): (LazyWith<'_>, LazyWith<'_>), xs: &[u8], ys: &[u8], mut x: LazyStateID, mut y: LazyStateID) -> (LazyStateID, LazyStateID, usize, Option<(LazyStateID, LazyStateID)>) {
    let mut steps = 0usize;
    let ys = if TOGETHER { xs } else { ys };
    for (pc, qc) in xs.chunks_exact(2).zip(ys.chunks_exact(2)) {
        let (&[p0, p1], &[q0, q1]) = (pc, qc) else { break };
        let (q0, q1) = if TOGETHER { (p0, p1) } else { (q0, q1) };
        let (nx, ny) = (a.0.next_state_untagged(a.1, x, p0), b.0.next_state_untagged(b.1, y, q0));
        if nx.is_tagged() || ny.is_tagged() {
            return (x, y, steps, Some((nx, ny)));
        }
        let (mx, my) = (a.0.next_state_untagged(a.1, nx, p1), b.0.next_state_untagged(b.1, ny, q1));
        if mx.is_tagged() || my.is_tagged() {
            return (nx, ny, steps + 1, Some((mx, my)));
        }
        (x, y) = (mx, my);
        steps += 2;
    }
    (x, y, steps, None)
}


/// Steps lazy `dfa` from untagged `state` over `text` from `at`, four bytes a round,
/// while its states stay untagged (built, neither match, dead nor quit): the last
/// untagged state, the tagged one after it and the place after its byte; or the state
/// at the end, none, and the end. [`to_special`]'s twin for a lazy DFA.
fn to_tagged(
    dfa: &hybrid::dfa::DFA,
    cache: &hybrid::dfa::Cache,
    mut state: LazyStateID,
    text: &[u8],
    mut at: usize,
) -> (LazyStateID, Option<LazyStateID>, usize) {
    while let Some(&[b0, b1, b2, b3]) = text.get(at..).and_then(<[u8]>::first_chunk::<4>) {
        let s0 = dfa.next_state_untagged(cache, state, b0);
        if s0.is_tagged() {
            return (state, Some(s0), at + 1);
        }
        let s1 = dfa.next_state_untagged(cache, s0, b1);
        if s1.is_tagged() {
            return (s0, Some(s1), at + 2);
        }
        let s2 = dfa.next_state_untagged(cache, s1, b2);
        if s2.is_tagged() {
            return (s1, Some(s2), at + 3);
        }
        let s3 = dfa.next_state_untagged(cache, s2, b3);
        if s3.is_tagged() {
            return (s2, Some(s3), at + 4);
        }
        state = s3;
        at += 4;
    }
    while let Some(&byte) = text.get(at) {
        let next = dfa.next_state_untagged(cache, state, byte);
        at += 1;
        if next.is_tagged() {
            return (state, Some(next), at);
        }
        state = next;
    }
    (state, None, at)
}

/// Consecutive candidates, in grouping order: a union of `members` of them, or one
/// that stays alone (`automaton` none).
pub(super) struct Group {
    members: usize,
    automaton: Option<Grouped>,
}

/// A group's automaton as grouping builds it (and a cache keeps it).
pub(super) enum Grouped {
    Dense(alloc::boxed::Box<dense::DFA<Vec<u32>>>),
    /// The members' NFAs together, which a lazy DFA runs.
    Lazy(thompson::NFA),
}

impl Grouped {
    fn pattern_len(&self) -> usize {
        match self {
            Grouped::Dense(dfa) => dfa.pattern_len(),
            Grouped::Lazy(nfa) => nfa.pattern_len(),
        }
    }
}

/// The unions of one kind of one target, between the rule loop and the end of a
/// compile: the groups a cache knew, and the regexes of the candidates left to group.
pub(crate) struct UnionPlan {
    kind: UnionKind,
    /// Its members run on rawbody's pieces whole, not on lines.
    pieces: bool,
    /// How the lines its members run on end.
    line_ends: LineEnds,
    /// Unfiltered patterns with a DFA (or screen) of this kind, smallest first.
    candidates: Vec<u32>,
    /// The cache's name for this list of candidates; none without a cache.
    list: Option<cache::Key>,
    known: Vec<Group>,
    /// Regexes of the candidates after those `known` covers (none: it has none, and
    /// stays alone).
    sources: Vec<Option<String>>,
    /// Their automata's sizes: dense DFA bytes, or NFA states.
    sizes: Vec<usize>,
}

impl UnionPlan {
    /// The plan for `program`'s unfiltered patterns of `kind`; `relaxed`: each
    /// backtracking program's relaxed regex, by program index; `lazy`: the rule set's
    /// lazy DFAs. A cache's groups are taken as they are; what it lacks is grouped
    /// again by [`group`] (a job).
    pub(super) fn new(
        (program, pieces): (&TargetProgram, bool),
        kind: UnionKind,
        config: &Config,
        relaxed: &[String],
        lazy: &[hybrid::dfa::DFA],
        dense: &mut Dense<'_>,
    ) -> UnionPlan {
        let mut plan = UnionPlan { kind, pieces, line_ends: program.line_ends, candidates: Vec::new(), list: None, known: Vec::new(), sources: Vec::new(), sizes: Vec::new() };
        if matches!(dense, Dense::Skip) {
            return plan;
        }
        // Patterns that match single bytes stay out. At line starts only that matters
        // for a rule counting many hits, which searches again whatever its union finds;
        // one counting a single hit, as quoted lines, is rare at line starts and alone
        // would search every line after its byte's first.
        let counts_many = |rule: u32| config.rules.get(rule as usize).is_some_and(|r| r.tflags.multiple || r.tflags.maxhits.is_some_and(|m| m > 1));
        let mut candidates: Vec<(usize, u32)> = program
            .unfiltered
            .iter()
            .filter_map(|&p| {
                // A union's hit may be in the Subject, which such a pattern skips, or an
                // empty match after the body's final `\n`, where no line starts.
                let compiled = program.patterns.get(p as usize).filter(|c| !c.skips_subject)?;
                let empty = program.pattern_needs.get(p as usize).is_some_and(|n| n.room.empty);
                if empty && program.line_ends == LineEnds::Newline {
                    return None;
                }
                let screen = match &compiled.matcher {
                    Matcher::Backtrack { relaxed, .. } => &**relaxed,
                    m => m,
                };
                let size = match (kind, screen) {
                    (UnionKind::Dense, Matcher::Dense(dfa)) if matches_one_byte(dfa, counts_many(compiled.rule)) => return None,
                    (UnionKind::Dense, Matcher::Dense(dfa)) => dfa.memory_usage(),
                    (UnionKind::Lazy, Matcher::Lazy(i)) => lazy.get(*i)?.get_nfa().states().len(),
                    _ => return None,
                };
                Some((size, p))
            })
            .collect();
        if candidates.len() < 2 {
            return plan;
        }
        // Small automata first: more of them fit together.
        candidates.sort_unstable();
        let sizes: Vec<usize> = candidates.iter().map(|&(size, _)| size).collect();
        plan.candidates = candidates.into_iter().map(|(_, p)| p).collect();
        if let Dense::Cached(cache) = dense {
            let mut named = Vec::new();
            for &p in &plan.candidates {
                let (tag, text) = identity(program, p, config, relaxed);
                named.push(tag);
                named.extend_from_slice(&(text.len() as u32).to_le_bytes());
                named.extend_from_slice(text.as_bytes());
            }
            let (tag, limit) = match (kind, pieces, program.line_ends) {
                (UnionKind::Dense, false, LineEnds::Bare) => (&b"unions"[..], UNION_LIMIT),
                (UnionKind::Lazy, false, LineEnds::Bare) => (&b"lazy unions"[..], LAZY_UNION_STATES),
                (UnionKind::Dense, false, LineEnds::Newline) => (&b"body unions"[..], UNION_LIMIT),
                (UnionKind::Lazy, false, LineEnds::Newline) => (&b"lazy body unions"[..], LAZY_UNION_STATES),
                (UnionKind::Dense, true, _) => (&b"piece unions"[..], UNION_LIMIT),
                (UnionKind::Lazy, true, _) => (&b"lazy piece unions"[..], LAZY_UNION_STATES),
            };
            let list = cache::key(&[tag, &named, &limit.to_le_bytes(), &AUTOMATA_REVISION.to_le_bytes(), env!("CARGO_PKG_VERSION").as_bytes()]);
            let mut covered = 0usize;
            while covered < plan.candidates.len() {
                let automaton = match cache.get(&group_key(&list, plan.known.len())) {
                    Some(Cached { dfa: Some(dfa), .. }) if kind == UnionKind::Dense => Some(Grouped::Dense(alloc::boxed::Box::new(dfa))),
                    Some(Cached { nfa: Some(nfa), .. }) if kind == UnionKind::Lazy => Some(Grouped::Lazy(nfa)),
                    Some(Cached { dfa: None, nfa: None, .. }) => None,
                    _ => break,
                };
                let members = automaton.as_ref().map_or(1, Grouped::pattern_len);
                if (automaton.is_some() && members < 2) || covered + members > plan.candidates.len() {
                    break;
                }
                covered += members;
                plan.known.push(Group { members, automaton });
            }
            plan.list = Some(list);
        }
        let covered: usize = plan.known.iter().map(|g| g.members).sum();
        let rest = plan.candidates.get(covered..).unwrap_or_default();
        plan.sources = rest.iter().map(|&p| regex_of(program, p, config, relaxed)).collect();
        plan.sizes = sizes.get(covered..).unwrap_or_default().to_vec();
        plan
    }

    /// Sets `program`'s unions and unfiltered patterns from the known groups and `built`
    /// (what [`group`] made of the sources), recording those in a cache; `max_hits`:
    /// each rule's, by rule id; a lazy union's DFA joins `lazy`, a dense one's table `part`.
    pub(super) fn finish(
        self,
        program: &mut TargetProgram,
        built: Vec<Group>,
        max_hits: &[u32],
        (lazy, part): (&mut Vec<hybrid::dfa::DFA>, &mut TablePart),
        dense: &mut Dense<'_>,
    ) {
        if self.candidates.is_empty() {
            return;
        }
        let mut groups = self.known;
        for group in built {
            if let (Dense::Cached(cache), Some(list)) = (&mut *dense, &self.list) {
                let (dfa, nfa) = match &group.automaton {
                    Some(Grouped::Dense(dfa)) => (Some(&**dfa), None),
                    Some(Grouped::Lazy(nfa)) => (None, Some((nfa, 1))),
                    None => (None, None),
                };
                cache.put(group_key(list, groups.len()), dfa, nfa, None, None, &MatchNeeds::default(), None, None);
            }
            groups.push(group);
        }
        let mut alone: Vec<u32> = program.unfiltered.iter().copied().filter(|p| !self.candidates.contains(p)).collect();
        let mut rest = self.candidates.as_slice();
        for group in groups {
            let Some((members, after)) = rest.split_at_checked(group.members) else { break };
            rest = after;
            let automaton = match group.automaton {
                Some(built) if members.len() >= 2 && built.pattern_len() == members.len() => match built {
                    // One that does not fit 16-bit rows leaves its members alone.
                    Grouped::Dense(dfa) => NarrowDfa::of(&dfa, part).map(|n| UnionAutomaton::Dense(alloc::boxed::Box::new(n))),
                    Grouped::Lazy(nfa) => build_lazy(nfa, None, MatchKind::All, lazy).ok().map(UnionAutomaton::Lazy),
                },
                // A pattern alone is a union of one over its own DFA, so that it can walk
                // beside another union.
                None => match members {
                    &[p] => own_automaton(program, p, self.kind, lazy),
                    _ => None,
                },
                _ => None,
            };
            let Some(automaton) = automaton else {
                alone.extend_from_slice(members);
                continue;
            };
            // A member whose automaton is its exact regex, counting one match at most,
            // takes the union's hit as its result.
            let mut decided = 0u64;
            for (bit, &p) in members.iter().enumerate() {
                let exact = program
                    .patterns
                    .get(p as usize)
                    .is_some_and(|c| !matches!(c.matcher, Matcher::Backtrack { .. }) && max_hits.get(c.rule as usize) == Some(&1));
                if exact {
                    decided |= 1u64.checked_shl(bit as u32).unwrap_or(0);
                }
            }
            program.unions.push(Union { automaton, members: members.to_vec(), decided });
        }
        alone.extend_from_slice(rest);
        alone.sort_unstable();
        program.unfiltered = alone;
    }
}

/// Pattern `p`'s own DFA (or screen's), of `kind`, as the automaton of a union of one,
/// when a pass of it so costs what its own search does: the DFA has no prefilter to
/// skip with. (One whose matches need a byte starts at the line of its first.)
fn own_automaton(program: &TargetProgram, p: u32, kind: UnionKind, lazy: &[hybrid::dfa::DFA]) -> Option<UnionAutomaton> {
    let screen = match &program.patterns.get(p as usize)?.matcher {
        Matcher::Backtrack { relaxed, .. } => &**relaxed,
        m => m,
    };
    match (kind, screen) {
        (UnionKind::Lazy, Matcher::Lazy(i)) => lazy.get(*i)?.get_config().get_prefilter().is_none().then_some(UnionAutomaton::Lazy(*i)),
        (UnionKind::Dense, Matcher::Dense(dfa)) => dfa.get_prefilter().is_none().then_some(UnionAutomaton::Own),
        _ => None,
    }
}

/// Whether `dfa` matches a single byte (or nothing) inside a text, after a word byte
/// or a space and before one, or (`lines`) at the start or end of a line too: a pattern
/// that matches so much would hold its union's pass in match states wherever it
/// matches, and searched alone it stops at its first match or skips to its bytes.
fn matches_one_byte(dfa: &dense::DFA<Vec<u32>>, lines: bool) -> bool {
    let around: &[u8] = if lines { b"x \n" } else { b"x " };
    around.iter().any(|&before| {
        let text = [before, 0];
        let Ok(start) = dfa.start_state_forward(&Input::new(&text[..]).range(1..)) else { return false };
        // A match state is entered one byte after the match ends.
        (0..=255u8).any(|byte| {
            let next = dfa.next_state(start, byte);
            dfa.is_match_state(next) || around.iter().any(|&after| dfa.is_match_state(dfa.next_state(next, after)))
        })
    })
}

/// The cache key of group `index` of the candidate list named `list`.
fn group_key(list: &cache::Key, index: usize) -> cache::Key {
    cache::key(&[b"union", list, &(index as u32).to_le_bytes()])
}

/// What names pattern `p`'s automaton in a union's key: its rule's Perl text for an
/// exact DFA (a warm start translates nothing), the relaxed regex for a screen.
fn identity<'c>(program: &TargetProgram, p: u32, config: &'c Config, relaxed: &'c [String]) -> (u8, &'c str) {
    let Some(compiled) = program.patterns.get(p as usize) else { return (0, "") };
    match &compiled.matcher {
        Matcher::Backtrack { program, .. } => (b'r', relaxed.get(*program as usize).map_or("", String::as_str)),
        _ => (b'p', perl_pattern(config, compiled.rule).map_or("", |pattern| pattern.perl.as_str())),
    }
}

fn perl_pattern(config: &Config, rule: u32) -> Option<&super::Pattern> {
    match &config.rules.get(rule as usize)?.kind {
        RuleKind::Body(p) | RuleKind::RawBody(p) | RuleKind::Uri(p) | RuleKind::Full(p) => Some(p),
        _ => None,
    }
}

/// The regex pattern `p`'s DFA was built from.
fn regex_of(program: &TargetProgram, p: u32, config: &Config, relaxed: &[String]) -> Option<String> {
    let compiled = program.patterns.get(p as usize)?;
    match &compiled.matcher {
        Matcher::Backtrack { program, .. } => relaxed.get(*program as usize).cloned(),
        _ => perl_pattern(config, compiled.rule)?.translated().ok(),
    }
}

/// Groups a plan's sources greedily, in order, into unions of its kind: (members,
/// automaton), none for a regex that fits with no neighbour (or is missing or does not
/// parse).
pub(super) fn group(plan: &UnionPlan) -> Vec<Group> {
    let ends = plan.line_ends;
    let local = |hir: &Hir, depth: usize| if plan.pieces { end_before_newline(hir, depth) } else { ends.local(hir, depth) };
    match plan.kind {
        UnionKind::Dense => group_dense(&plan.sources, &local),
        UnionKind::Lazy => group_lazy(&plan.sources, &plan.sizes, &local),
    }
}

/// Dense unions, each under [`UNION_LIMIT`].
fn group_dense(sources: &[Option<String>], local: &dyn Fn(&Hir, usize) -> Hir) -> Vec<Group> {
    let mut groups = Vec::new();
    let mut current: Vec<Hir> = Vec::new();
    let mut fitting = None;
    for source in sources {
        let Some(Ok(hir)) = source.as_deref().map(parse_hir) else {
            close(&mut groups, &mut current, fitting.take());
            groups.push(Group { members: 1, automaton: None });
            continue;
        };
        current.push(local(&hir, 0));
        if current.len() == 1 {
            continue;
        }
        match (current.len() <= UNION_MEMBERS).then(|| build(&current)).flatten() {
            Some(dfa) => fitting = Some(Grouped::Dense(alloc::boxed::Box::new(dfa))),
            None => {
                // The group before this regex is closed; this one starts the next.
                let last = current.pop();
                close(&mut groups, &mut current, fitting.take());
                current.extend(last);
            }
        }
    }
    close(&mut groups, &mut current, fitting);
    groups
}

/// Lazy unions, each of at most [`LAZY_UNION_STATES`] NFA states (`sizes`: each
/// source's) unless one pattern alone has more.
fn group_lazy(sources: &[Option<String>], sizes: &[usize], local: &dyn Fn(&Hir, usize) -> Hir) -> Vec<Group> {
    let mut groups = Vec::new();
    let mut current: Vec<Hir> = Vec::new();
    let mut states = 0usize;
    let close_lazy = |groups: &mut Vec<Group>, current: &mut Vec<Hir>| {
        let nfa = (current.len() >= 2).then(|| build_nfa_many(current).ok()).flatten();
        close(groups, current, nfa.map(Grouped::Lazy));
    };
    for (source, &size) in sources.iter().zip(sizes) {
        let Some(Ok(hir)) = source.as_deref().map(parse_hir) else {
            close_lazy(&mut groups, &mut current);
            states = 0;
            groups.push(Group { members: 1, automaton: None });
            continue;
        };
        if !current.is_empty() && (states + size > LAZY_UNION_STATES || current.len() >= UNION_MEMBERS) {
            close_lazy(&mut groups, &mut current);
            states = 0;
        }
        states += size;
        current.push(local(&hir, 0));
    }
    close_lazy(&mut groups, &mut current);
    groups
}

/// Ends the group `current`: a union, or one member alone.
fn close(groups: &mut Vec<Group>, current: &mut Vec<Hir>, automaton: Option<Grouped>) {
    match (current.len(), automaton) {
        (0, _) => {}
        (n, Some(automaton)) if n >= 2 => groups.push(Group { members: n, automaton: Some(automaton) }),
        (n, _) => groups.extend((0..n).map(|_| Group { members: 1, automaton: None })),
    }
    current.clear();
}

/// The dense DFA reporting every match of each of `hirs` (`MatchKind::All`), or none
/// over [`UNION_LIMIT`].
fn build(hirs: &[Hir]) -> Option<dense::DFA<Vec<u32>>> {
    let nfa = build_nfa_many(hirs).ok()?;
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .start_kind(StartKind::Unanchored)
                .match_kind(MatchKind::All)
                .minimize(true)
                .dfa_size_limit(Some(UNION_LIMIT))
                .determinize_size_limit(Some(2 * UNION_LIMIT)),
        )
        .build_from_nfa(&nfa)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    /// A union's dense DFA in the rows the scan walks.
    fn narrow(dfa: &dense::DFA<Vec<u32>>, part: &mut TablePart) -> alloc::boxed::Box<NarrowDfa> {
        alloc::boxed::Box::new(NarrowDfa::of(dfa, part).expect("fits 16-bit rows"))
    }

    /// `list`'s regexes, "-" standing for a missing one.
    fn regexes(list: &[&str]) -> Vec<Option<String>> {
        list.iter().map(|s| (*s != "-").then(|| s.to_string())).collect()
    }

    /// A plan of `kind` left to group `sources` (NFA `sizes` for a lazy one).
    fn plan(kind: UnionKind, sources: &[&str], sizes: &[usize]) -> UnionPlan {
        UnionPlan { kind, pieces: false, line_ends: LineEnds::Bare, candidates: Vec::new(), list: None, known: Vec::new(), sources: regexes(sources), sizes: sizes.to_vec() }
    }

    /// (kind, regexes, NFA sizes for lazy ones, members of each run: a union from 2 up, 1 alone)
    type GroupCase<'a> = (UnionKind, &'a [&'a str], &'a [usize], &'a [usize]);

    #[test]
    fn group_table() {
        // Too big to share a union with anything under the limit.
        let big = r"(?:[a-z]{1,40}\s){30}x";
        let tiny: Vec<String> = (0..65).map(|i| alloc::format!("t{i}x")).collect();
        let tiny: Vec<&str> = tiny.iter().map(String::as_str).collect();
        let ones = [1usize; 65];
        let cap = LAZY_UNION_STATES;
        let cases: &[GroupCase] = &[
            (UnionKind::Dense, &["a", "b", "c"], &[], &[3]),
            (UnionKind::Dense, &["a"], &[], &[1]),
            (UnionKind::Dense, &[], &[], &[]),
            (UnionKind::Dense, &["(", "a", "b"], &[], &[1, 2]),
            (UnionKind::Dense, &["a", "-", "b", "c"], &[], &[1, 1, 2]),
            (UnionKind::Dense, &["a", big, "b"], &[], &[1, 1, 1]),
            (UnionKind::Dense, &["a", "b", big, "c", "d"], &[], &[2, 1, 2]),
            (UnionKind::Dense, &tiny, &[], &[64, 1]),
            // Lazy unions go by their members' NFA sizes, however big their DFAs.
            (UnionKind::Lazy, &["a", "b", "c"], &[10, 10, 10], &[3]),
            (UnionKind::Lazy, &["a", big, "b"], &[10, 10, 10], &[3]),
            (UnionKind::Lazy, &["a", "b", "c"], &[cap - 10, 10, 10], &[2, 1]),
            (UnionKind::Lazy, &["a", "b", "c"], &[cap - 10, 11, 10], &[1, 2]),
            (UnionKind::Lazy, &["a", "b"], &[cap + 1, 1], &[1, 1]),
            (UnionKind::Lazy, &["a", "(", "b", "c"], &[1, 1, 1, 1], &[1, 1, 2]),
            (UnionKind::Lazy, &["a", "b", "-"], &[1, 1, 1], &[2, 1]),
            (UnionKind::Lazy, &tiny, &ones, &[64, 1]),
        ];
        for (kind, sources, sizes, want) in cases {
            let grouped = group(&plan(*kind, sources, sizes));
            let got: Vec<usize> = grouped.iter().map(|g| g.members).collect();
            assert_eq!(&got, want, "{kind:?} {sources:?}");
            for g in &grouped {
                let of_kind = match &g.automaton {
                    Some(Grouped::Dense(_)) => Some(UnionKind::Dense),
                    Some(Grouped::Lazy(_)) => Some(UnionKind::Lazy),
                    None => None,
                };
                assert_eq!(of_kind, (g.members > 1).then_some(*kind), "{kind:?} {sources:?}");
                assert_eq!(g.automaton.as_ref().map(Grouped::pattern_len), (g.members > 1).then_some(g.members), "{sources:?}");
            }
        }
    }

    #[test]
    fn matches_one_byte_table() {
        // (regex, whether it matches a single byte, or nothing, inside a text)
        let cases: &[(&str, bool)] = &[
            ("e", true),
            (r"[\x80-\xff]", true),
            ("a?", true),
            ("xy|z", true),
            (r"\S", true),
            ("ab", false),
            ("(?:ab){1,2}", false),
            (r"e\d", false),
            // At line starts or ends only: rare in a text of many lines.
            (r"(?m)^\s*\S", false),
            (r"(?m)^\s*$", false),
            (r"(?m)>$", false),
            (r"\bq\b", true),
        ];
        for (regex, want) in cases {
            let dfa = build(&[parse_hir(regex).expect("regex")]).expect("dfa");
            assert_eq!(matches_one_byte(&dfa, false), *want, "{regex}");
        }
        // In a text of lines, at each line's start or end too.
        for (regex, want) in [(r"(?m)^\s*\S", true), (r"(?m)>$", true), (r"(?m)^ab", false), ("ab", false), ("e", true)] {
            let dfa = build(&[parse_hir(regex).expect("regex")]).expect("dfa");
            assert_eq!(matches_one_byte(&dfa, true), want, "{regex} in lines");
        }
    }

    #[test]
    fn finds_table() {
        // Every match counts, also one inside another's, and each regex holds to one
        // line as in the target it runs on; dense and lazy unions alike.
        let grouped = |kind: UnionKind, sources: &[&str]| {
            let Group { members, automaton } = group(&plan(kind, sources, &alloc::vec![1; sources.len()])).pop().expect("one group");
            (members, automaton.expect("a union"))
        };
        // (regexes, text, members found by bit, where each found one's first match ends)
        let cases: &[(&[&str], &str, u64, &[u32])] = &[
            (&["foo", "oba", "^baz", r"x\d+$"], "", 0, &[]),
            (&["foo", "oba", "^baz", r"x\d+$"], "foobar foo", 0b0011, &[3, 5]),
            (&["foo", "oba", "^baz", r"x\d+$"], "a baz", 0, &[]),
            (&["foo", "oba", "^baz", r"x\d+$"], "a\nbaz baz", 0b0100, &[0, 0, 5]),
            (&["foo", "oba", "^baz", r"x\d+$"], "fo\no", 0, &[]),
            (&["foo", "oba", "^baz", r"x\d+$"], "x12\nq\nx3", 0b1000, &[0, 0, 0, 3]),
            (&["foo", "oba", "^baz", r"x\d+$"], "x12q", 0, &[]),
            (&["foo", "oba", "^baz", r"x\d+$"], "foobaz\nbaz x1", 0b1111, &[3, 5, 10, 13]),
            // Found past stretches the search skips (the start state waits for a `z`).
            (&["zq1", "zq2"], "aaaa zq2 bbb", 0b10, &[0, 8]),
            (&["zq1", "zq2"], "aaaa zq", 0, &[]),
            (&["zq1", "zq2"], "zzq1 zq2", 0b11, &[4, 8]),
            // The match state entered at each place of a four-byte round (no skip: the
            // start state leaves on four bytes).
            (&["ab", "cd", "ef", "gh"], "ab........", 0b0001, &[2]),
            (&["ab", "cd", "ef", "gh"], "xab.......", 0b0001, &[3]),
            (&["ab", "cd", "ef", "gh"], "xxab......", 0b0001, &[4]),
            (&["ab", "cd", "ef", "gh"], "xxxab.....", 0b0001, &[5]),
            (&["ab", "cd", "ef", "gh"], "xxxab.gh..cd", 0b1011, &[5, 12, 0, 8]),
        ];
        for (sources, text, want, ends) in cases {
            for kind in [UnionKind::Dense, UnionKind::Lazy] {
                let (members, automaton) = grouped(kind, sources);
                let members = (0..members as u32).collect();
                let mut first_ends = [0u32; UNION_MEMBERS];
                let found = match automaton {
                    Grouped::Dense(dfa) => {
                        let mut part = TablePart::new(0, 0);
                        let union = Union { automaton: UnionAutomaton::Dense(narrow(&dfa, &mut part)), members, decided: 0 };
                        let tables = NarrowTables::join(alloc::vec![part]);
                        union.finds(text.as_bytes(), 0, &mut first_ends, (&[], &tables), |_| None)
                    }
                    Grouped::Lazy(nfa) => {
                        let mut lazy = Vec::new();
                        let index = build_lazy(nfa, None, MatchKind::All, &mut lazy).expect("lazy dfa");
                        let union = Union { automaton: UnionAutomaton::Lazy(index), members, decided: 0 };
                        // A new cache builds states as it goes; a warm one steps four bytes a round.
                        let mut cache = lazy[index].create_cache();
                        let none = NarrowTables::default();
                        let cold = union.finds(text.as_bytes(), 0, &mut first_ends, (&[], &none), |i| Some((&lazy[i], &mut cache)));
                        let mut warm_ends = [0u32; UNION_MEMBERS];
                        let warm = union.finds(text.as_bytes(), 0, &mut warm_ends, (&[], &none), |i| Some((&lazy[i], &mut cache)));
                        assert_eq!((warm, warm_ends), (cold, first_ends), "{text:?} warm");
                        cold
                    }
                };
                assert_eq!(found, Some(*want), "{kind:?} {text:?}");
                assert_eq!(first_ends.get(..ends.len()), Some(*ends), "{kind:?} {text:?}");
            }
        }
    }

    /// `count` texts of up to `longest - 1` bytes of `alphabet`, the same every run.
    fn random_texts(count: usize, longest: u32, alphabet: &[u8]) -> Vec<Vec<u8>> {
        let mut random = crate::rules::Xorshift(0x2545_f491);
        (0..count)
            .map(|_| {
                let len = random.below(longest as usize);
                (0..len).map(|_| alphabet[random.below(alphabet.len())]).collect()
            })
            .collect()
    }

    /// Where two walks over `text` start: both at its start, or one (or both) at its
    /// second line when it has one.
    fn froms(text: &[u8]) -> Vec<(usize, usize)> {
        match text.iter().position(|&b| b == b'\n') {
            Some(end) => alloc::vec![(0, 0), (end + 1, 0), (0, end + 1), (end + 1, end + 1)],
            None => alloc::vec![(0, 0)],
        }
    }

    #[test]
    fn finds_two_as_one_by_one_table() {
        // Two dense unions walked together find what each finds alone: one that skips
        // (`zq`), one done early (`a`, `cc` both found), one ending at a line end; from
        // one place or from two (one walk starts at the second line).
        let sets: &[&[&str]] = &[&["foo", "oba", "^baz", r"x\d+$"], &["zq1", "zq2"], &["ab", "cd", "ef", "gh"], &["a", "cc"]];
        let mut part = TablePart::new(0, 0);
        let unions: Vec<Union> = sets
            .iter()
            .map(|members| match group(&plan(UnionKind::Dense, members, &alloc::vec![1; members.len()])).pop().and_then(|g| g.automaton) {
                Some(Grouped::Dense(dfa)) => Union { automaton: UnionAutomaton::Dense(narrow(&dfa, &mut part)), members: (0..members.len() as u32).collect(), decided: 0 },
                _ => panic!("{members:?}: no dense union"),
            })
            .collect();
        let tables = NarrowTables::join(alloc::vec![part]);
        for text in random_texts(2000, 40, b"abcdefghoqxz12 \n") {
            for from in froms(&text) {
                for (i, one) in unions.iter().enumerate() {
                    for two in unions.iter().skip(i + 1) {
                        let (mut want_one, mut want_two, mut got_one, mut got_two) = ([0u32; UNION_MEMBERS], [0u32; UNION_MEMBERS], [0u32; UNION_MEMBERS], [0u32; UNION_MEMBERS]);
                        let want = (one.finds(&text, from.0, &mut want_one, (&[], &tables), |_| None), two.finds(&text, from.1, &mut want_two, (&[], &tables), |_| None));
                        let got = one.finds_two(two, &text, from, (&mut got_one, &mut got_two), (&[], &tables));
                        assert_eq!((got, got_one, got_two), (Some(want), want_one, want_two), "{from:?} {:?}", core::str::from_utf8(&text));
                    }
                }
            }
        }
        // A lazy union is not walked with another.
        let lazy = Union { automaton: UnionAutomaton::Lazy(0), members: alloc::vec![0], decided: 0 };
        let (mut a, mut b) = ([0u32; UNION_MEMBERS], [0u32; UNION_MEMBERS]);
        assert_eq!(unions[0].finds_two(&lazy, b"foo", (0, 0), (&mut a, &mut b), (&[], &tables)), None);
    }

    #[test]
    fn finds_two_lazy_as_one_by_one_table() {
        // Two lazy unions walked together find what each finds alone, each cache built
        // as it goes (new states at any place of either walk, matches, early ends); a
        // union of one over a pattern's own leftmost-first DFA finds what the pattern's
        // member of a union finds.
        let sets: &[&[&str]] = &[&["foo", "oba", "^baz", r"x\d+$"], &["zq1", "zq2"], &["ab", "b.a", "^ca", "a$", "bb+c"], &["a", "cc"]];
        let mut lazy = Vec::new();
        let mut unions: Vec<Union> = sets
            .iter()
            .map(|members| match group(&plan(UnionKind::Lazy, members, &alloc::vec![1; members.len()])).pop().and_then(|g| g.automaton) {
                Some(Grouped::Lazy(nfa)) => {
                    let index = build_lazy(nfa, None, MatchKind::All, &mut lazy).expect("lazy dfa");
                    Union { automaton: UnionAutomaton::Lazy(index), members: (0..members.len() as u32).collect(), decided: 0 }
                }
                _ => panic!("{members:?}: no lazy union"),
            })
            .collect();
        // `bb+c` alone, as the third union's member 4.
        let own = build_nfa_many(&[LineEnds::Bare.local(&parse_hir("bb+c").expect("regex"), 0)]).expect("nfa");
        let index = build_lazy(own, None, MatchKind::LeftmostFirst, &mut lazy).expect("lazy dfa");
        unions.push(Union { automaton: UnionAutomaton::Lazy(index), members: alloc::vec![0], decided: 0 });
        let index_of = |u: &Union| match u.automaton {
            UnionAutomaton::Lazy(i) => i,
            UnionAutomaton::Dense(_) | UnionAutomaton::Own => usize::MAX,
        };
        let (mut alone, mut paired): (Vec<_>, Vec<_>) = (lazy.iter().map(|d| d.create_cache()).collect(), lazy.iter().map(|d| d.create_cache()).collect());
        for text in random_texts(2000, 40, b"abcfoqxz12 \n") {
            // What each union finds alone from each place a walk starts.
            let mut want = alloc::collections::BTreeMap::new();
            for from in froms(&text).into_iter().flat_map(|(a, b)| [a, b]) {
                for (k, u) in unions.iter().enumerate() {
                    let mut ends = [0u32; UNION_MEMBERS];
                    let i = index_of(u);
                    let found = u.finds(&text, from, &mut ends, (&[], &NarrowTables::default()), |_| Some((&lazy[i], &mut alone[i])));
                    want.insert((k, from), (found, ends));
                }
            }
            let (own_found, own_ends) = want[&(4, 0)];
            let (third_found, third_ends) = want[&(2, 0)];
            assert_eq!((own_found.map(|f| f & 1), own_ends[0]), (third_found.map(|f| f >> 4 & 1), if third_found.is_some_and(|f| f >> 4 & 1 == 1) { third_ends[4] } else { 0 }));
            for from in froms(&text) {
                for (i, one) in unions.iter().enumerate() {
                    for (j, two) in unions.iter().enumerate().skip(i + 1) {
                        let (a, b) = (index_of(one), index_of(two));
                        let (low, high) = paired.split_at_mut(b);
                        let (mut ends_one, mut ends_two) = ([0u32; UNION_MEMBERS], [0u32; UNION_MEMBERS]);
                        let got = one.finds_two_lazy(two, (&lazy[a], &mut low[a]), (&lazy[b], &mut high[0]), &text, from, (&mut ends_one, &mut ends_two));
                        let (want_one, want_two) = (want[&(i, from.0)], want[&(j, from.1)]);
                        assert_eq!(got, Some((want_one.0, want_two.0)), "{i} {j} {from:?} {:?}", core::str::from_utf8(&text));
                        assert_eq!((ends_one, ends_two), (want_one.1, want_two.1), "{i} {j} {from:?} {:?}", core::str::from_utf8(&text));
                    }
                }
            }
        }
    }

    #[test]
    fn lazy_finds_as_dense_table() {
        // One lazy cache over many texts (states built in one text, met again in the
        // next, new ones at any place of a round) finds what the dense union finds.
        let sources: &[&[&str]] = &[&["ab", "b.a", "^ca", "a$", "bb+c"], &["a", "cc"], &[r"\.\.", "^b", "ab?c$"]];
        for members in sources {
            let mut dense = None;
            let mut lazy = Vec::new();
            for kind in [UnionKind::Dense, UnionKind::Lazy] {
                match group(&plan(kind, members, &alloc::vec![1; members.len()])).pop().and_then(|g| g.automaton) {
                    Some(Grouped::Dense(dfa)) => dense = Some(dfa),
                    Some(Grouped::Lazy(nfa)) => {
                        build_lazy(nfa, None, MatchKind::All, &mut lazy).expect("lazy dfa");
                    }
                    None => panic!("{members:?}: no union"),
                }
            }
            let ids: Vec<u32> = (0..members.len() as u32).collect();
            let mut part = TablePart::new(0, 0);
            let dense = Union { automaton: UnionAutomaton::Dense(narrow(&dense.expect("dense union"), &mut part)), members: ids.clone(), decided: 0 };
            let tables = NarrowTables::join(alloc::vec![part]);
            let lazy_union = Union { automaton: UnionAutomaton::Lazy(0), members: ids, decided: 0 };
            let mut cache = lazy.first().expect("lazy union").create_cache();
            for text in random_texts(3000, 24, b"abc.\n") {
                let (mut want_ends, mut got_ends) = ([0u32; UNION_MEMBERS], [0u32; UNION_MEMBERS]);
                let want = dense.finds(&text, 0, &mut want_ends, (&[], &tables), |_| None);
                let got = lazy_union.finds(&text, 0, &mut got_ends, (&[], &tables), |i| Some((lazy.get(i)?, &mut cache)));
                assert_eq!((got, got_ends), (want, want_ends), "{members:?} {:?}", core::str::from_utf8(&text));
            }
        }
    }
}
