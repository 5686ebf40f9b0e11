//! A dense DFA in 16-bit rows: the states and transitions of a regex-automata dense
//! DFA, each row exactly as wide as the DFA's byte classes (the crate pads a row to a
//! power of two) and each state a 16-bit row offset (the crate's are 32 bits). Every
//! child shares the rules' automata, so their size is memory of every process: on the
//! stock rules these rows take a third of the crate's. The search is the crate's
//! forward search, step for step (start states by look-behind, the prefilter at a
//! start state, accelerated states, a match seen one byte late, the end-of-input
//! step), so it finds what the crate's DFA finds. A rule set keeps every one's rows
//! end to end ([`NarrowTables`]), and a step reads them through a fixed-size window,
//! with no bounds check.

use alloc::vec;
use alloc::vec::Vec;

use regex_automata::dfa::{dense, Automaton};
use regex_automata::util::prefilter::Prefilter;
use regex_automata::util::primitives::{PatternID, StateID};
use regex_automata::{Anchored, HalfMatch, Input, Span};
use regex_automata::util::start;

use super::{look_behind_kind, LOOK_BEHIND_SAMPLES};

/// What a special state is (bits of [`Special::kind`]).
const DEAD: u8 = 1;
const QUIT: u8 = 2;
const MATCH: u8 = 4;
const ACCEL: u8 = 8;
const START: u8 = 16;
/// No start state for this mode (an anchored search of a DFA built unanchored only).
const NO_START: u16 = u16::MAX;

/// A state the search stops at: its kinds, when accelerated the bytes that leave it,
/// when a match the patterns it reports (`NarrowDfa::patterns[first..first + count]`).
#[derive(Debug, Clone, Copy, Default)]
struct Special {
    kind: u8,
    needles: [u8; 3],
    needle_count: u8,
    pattern_count: u16,
    first_pattern: u32,
}

/// A dense DFA of at most 65,535 transitions, searched forward as regex-automata
/// searches the DFA it was made from; the rules' unions walk it byte by byte.
#[derive(Debug)]
pub(crate) struct NarrowDfa {
    /// Byte to column.
    classes: [u8; 256],
    /// Columns a row: the byte classes, then end of input.
    stride: usize,
    /// Where its table is: the [`TablePart`] it was made into and the offset there.
    /// The table holds, row by row, each state's next state as its row's offset; the
    /// special states' rows come first, the dead state's at 0.
    table: (usize, usize),
    /// Offsets below this one are special states.
    special_end: u16,
    /// By row, the special states.
    specials: Vec<Special>,
    /// The patterns match states report, each state's together.
    patterns: Vec<u32>,
    /// Start state by mode (unanchored, anchored) and look-behind kind ([`look_behind_kind`]).
    starts: [[u16; 5]; 2],
    /// One unanchored start state whatever the look-behind: the prefilter's skips need
    /// not recompute it.
    universal_start: bool,
    prefilter: Option<Prefilter>,
}

impl NarrowDfa {
    /// The DFA `dfa` in 16-bit rows, or `None` when it does not fit them: more
    /// transitions than 16 bits name, start states that depend on more than the
    /// look-behind kinds of [`LOOK_BEHIND_SAMPLES`], empty matches the crate's search would skip inside a
    /// UTF-8 character. Its table goes to the end of `part`.
    pub(crate) fn of(dfa: &dense::DFA<Vec<u32>>, part: &mut TablePart) -> Option<NarrowDfa> {
        let byte_classes = dfa.byte_classes();
        let stride = dfa.alphabet_len();
        let eoi = stride.checked_sub(1)?;
        if (dfa.has_empty() && dfa.is_utf8()) || byte_classes.eoi().as_usize() != eoi || !dfa.is_dead_state(StateID::ZERO) {
            return None;
        }
        let mut classes = [0u8; 256];
        // A byte of each class, to step the DFA by.
        let mut samples: Vec<Option<u8>> = vec![None; eoi];
        for byte in 0..=255u8 {
            let class = byte_classes.get(byte);
            classes[usize::from(byte)] = class;
            samples.get_mut(usize::from(class))?.get_or_insert(byte);
        }
        let samples: Vec<u8> = samples.into_iter().collect::<Option<_>>()?;

        let start_of = |mode: Anchored, behind: Option<u8>| dfa.start_state(&start::Config::new().anchored(mode).look_behind(behind)).ok();
        let mut start_ids = [[None; 5]; 2];
        for (ids, mode) in start_ids.iter_mut().zip([Anchored::No, Anchored::Yes]) {
            for (id, &behind) in ids.iter_mut().zip(LOOK_BEHIND_SAMPLES.iter()) {
                *id = start_of(mode, behind);
            }
        }

        // Row by row from the dead state's, each row a state of `dfa` (its rows keep
        // their order: the special states come first there too), until every state a
        // transition or a start names has its row.
        let shift = dfa.stride2();
        let row = |id: StateID| id.as_usize() >> shift;
        let mut rows = start_ids.iter().flatten().flatten().map(|&id| row(id) + 1).max().unwrap_or(1);
        // Row numbers first, offsets once all fit. The crate's table is most of its
        // bytes: room for as many rows as it holds, at most what 16 bits name.
        let most_rows = (dfa.memory_usage() / (dfa.stride() * 4)).min(usize::from(u16::MAX) / stride);
        let mut next: Vec<u16> = Vec::with_capacity(most_rows * stride);
        let mut specials = Vec::new();
        let mut patterns = Vec::new();
        let mut r = 0;
        while r < rows {
            let id = StateID::new(r << shift).ok()?;
            let from = next.len();
            next.resize(from + stride, 0);
            let (columns, eoi_column) = next.get_mut(from..)?.split_at_mut(stride - 1);
            // Row numbers past 16 bits are refused below, before any is read.
            let mut most = row(dfa.next_eoi_state(id));
            *eoi_column.first_mut()? = most as u16;
            for (slot, &byte) in columns.iter_mut().zip(&samples) {
                let to = row(dfa.next_state(id, byte));
                most = most.max(to);
                *slot = to as u16;
            }
            rows = rows.max(most + 1);
            if rows * stride > usize::from(u16::MAX) {
                return None;
            }
            if dfa.is_special_state(id) {
                // Special states are the first rows, or the search would miss one.
                if specials.len() != r {
                    return None;
                }
                specials.push(special_of(dfa, id, &mut patterns)?);
            }
            r += 1;
        }
        let special_rows = specials.len();
        // A start after each byte is the one its kind's sample gives. Without quit bytes
        // (each steps every state but the dead and quit ones to a quit state, a start
        // state too) a universal start is so for all; otherwise each byte is asked.
        // (`next` holds row numbers yet.)
        let is_quit = |to: u16| specials.get(usize::from(to)).is_some_and(|s| s.kind & QUIT != 0);
        let start_row = start_ids.iter().flatten().flatten().next().map(|&id| row(id));
        let quit_bytes = start_row.is_some_and(|r| next.get(r * stride..(r + 1) * stride).is_some_and(|columns| columns.iter().any(|&to| is_quit(to))));
        for (ids, mode) in start_ids.iter().zip([Anchored::No, Anchored::Yes]) {
            // No start at a text's start: a mode the DFA was not built for.
            let universal = !quit_bytes && dfa.universal_start_state(mode).is_some();
            if ids[0].is_some() && !universal && (0..=255u8).any(|b| start_of(mode, Some(b)) != ids[look_behind_kind(Some(b))]) {
                return None;
            }
        }
        // Every row times the width fits in 16 bits (and is below NO_START).
        for to in &mut next {
            *to *= stride as u16;
        }
        let offset = |id: StateID| u16::try_from(row(id) * stride).ok();
        let mut starts = [[NO_START; 5]; 2];
        for (mode_starts, ids) in starts.iter_mut().zip(start_ids.iter()) {
            for (start, id) in mode_starts.iter_mut().zip(ids.iter()) {
                if let Some(id) = id {
                    *start = offset(*id)?;
                }
            }
        }
        let special_end = u16::try_from(special_rows * stride).ok()?;
        // Copied, not moved: the part grows by a few large blocks, and this one's
        // room, freed at once, is the next one's.
        let table = (part.id, part.all.len());
        part.all.extend_from_slice(&next);
        Some(NarrowDfa {
            classes,
            stride,
            table,
            special_end,
            specials,
            patterns,
            starts,
            universal_start: dfa.universal_start_state(Anchored::No).is_some(),
            prefilter: dfa.get_prefilter().cloned(),
        })
    }

    /// Bytes `dfa` keeps once compiled: its table in 16-bit rows and the rest, when it
    /// fits them ([`NarrowDfa::of`]); else its own.
    pub(crate) fn kept_bytes(dfa: &dense::DFA<Vec<u32>>) -> usize {
        let mut part = TablePart::new(0, 0);
        match NarrowDfa::of(dfa, &mut part) {
            Some(narrow) => narrow.memory_usage() + part.all.len() * 2,
            None => dfa.memory_usage(),
        }
    }

    /// Bytes held but its table, which [`NarrowTables`] counts, for the rule set's
    /// automata figure (as the crate's figure for a dense DFA, without the prefilter,
    /// which DFAs with the same literals share).
    pub(crate) fn memory_usage(&self) -> usize {
        core::mem::size_of::<NarrowDfa>() + self.specials.len() * core::mem::size_of::<Special>() + self.patterns.len() * 4
    }

    /// Whether a walk must stop at `state`: a match, dead, quit, accelerated or (with a
    /// prefilter) start state.
    #[inline(always)]
    pub(crate) fn is_special(&self, state: u16) -> bool {
        state < self.special_end
    }

    /// The unanchored start state of a text's start; `None` when the DFA has none.
    pub(crate) fn start_of_text(&self) -> Option<u16> {
        self.start(0, &[], 0)
    }

    /// Whether `state` is entered one byte after a match ends.
    pub(crate) fn is_match(&self, state: u16) -> bool {
        self.special(state).kind & MATCH != 0
    }

    /// Whether no match can follow `state`.
    pub(crate) fn is_dead(&self, state: u16) -> bool {
        self.special(state).kind & DEAD != 0
    }

    /// Whether the search fails at `state` (a byte the DFA was built to give up on).
    pub(crate) fn is_quit(&self, state: u16) -> bool {
        self.special(state).kind & QUIT != 0
    }

    /// The bytes that leave an accelerated `state` (none for another).
    pub(crate) fn accelerator(&self, state: u16) -> &[u8] {
        let special = self.specials.get(self.row(state)).filter(|_| self.is_special(state));
        special.and_then(|s| s.needles.get(..usize::from(s.needle_count))).unwrap_or_default()
    }

    /// The patterns a match `state` reports (none for another).
    pub(crate) fn patterns(&self, state: u16) -> &[u32] {
        let special = self.special(state);
        let first = special.first_pattern as usize;
        self.patterns.get(first..first + usize::from(special.pattern_count)).unwrap_or_default()
    }

    /// `state`'s row number.
    pub(crate) fn row(&self, state: u16) -> usize {
        usize::from(state) / self.stride
    }

    /// The first pattern a match state reports, as the crate's search reports it.
    fn first_pattern(&self, special: Special) -> PatternID {
        let id = self.patterns.get(special.first_pattern as usize).copied().unwrap_or(0);
        PatternID::new(id as usize).unwrap_or(PatternID::ZERO)
    }

    /// What the state at `offset` is (nothing special for a row past the special ones).
    fn special(&self, offset: u16) -> Special {
        if offset >= self.special_end {
            return Special::default();
        }
        self.specials.get(self.row(offset)).copied().unwrap_or(Special { kind: DEAD, ..Special::default() })
    }

    /// The start state of a search from `at` in `hay`, by mode; `None` when the DFA has none.
    fn start(&self, mode: usize, hay: &[u8], at: usize) -> Option<u16> {
        let behind = at.checked_sub(1).and_then(|i| hay.get(i)).copied();
        let id = *self.starts.get(mode)?.get(look_behind_kind(behind))?;
        (id != NO_START).then_some(id)
    }
}

/// Entries a narrow DFA's table may have (16-bit offsets), and so the window a search
/// reads it through.
const WINDOW: usize = 1 << 16;

/// The narrow DFAs' tables of a rule set, end to end, then a window's room of zeros:
/// each DFA's table is then the start of a fixed-size window, which a step indexes by
/// a 16-bit offset with no bounds check.
#[derive(Debug, Default)]
pub(crate) struct NarrowTables {
    all: Vec<u16>,
    /// Where each [`TablePart`] starts in `all`, by its id.
    starts: Vec<usize>,
}

/// The tables of the narrow DFAs one job makes, end to end: joined into
/// [`NarrowTables`] once all are made. A table made in its own block and freed once
/// copied would leave a hole between the blocks that stay.
#[derive(Debug)]
pub(crate) struct TablePart {
    id: usize,
    all: Vec<u16>,
}

impl TablePart {
    /// An empty part, `id` among those [`NarrowTables::join`] joins, with room for
    /// `entries` (the tables of DFAs whose crate tables hold as many 32-bit entries fit,
    /// so it need not grow: each block it grew out of would stay a hole).
    pub(crate) fn new(id: usize, entries: usize) -> TablePart {
        TablePart { id, all: Vec::with_capacity(entries) }
    }
}

impl NarrowTables {
    /// The tables of `parts`, each DFA's where its part put it.
    pub(crate) fn join(parts: Vec<TablePart>) -> NarrowTables {
        // Zeroed at once: a fresh mapping's pages past the tables, the last window's
        // room, are never touched, so never resident.
        let total: usize = parts.iter().map(|p| p.all.len()).sum();
        let mut tables = NarrowTables { all: alloc::vec![0; total + WINDOW], starts: Vec::new() };
        let mut end = 0;
        for part in parts {
            if tables.starts.len() <= part.id {
                tables.starts.resize(part.id + 1, usize::MAX);
            }
            if let (Some(start), Some(room)) = (tables.starts.get_mut(part.id), tables.all.get_mut(end..end + part.all.len())) {
                *start = end;
                room.copy_from_slice(&part.all);
            }
            end += part.all.len();
        }
        tables
    }

    /// Bytes held.
    pub(crate) fn memory_usage(&self) -> usize {
        self.all.capacity() * 2 + self.starts.capacity() * core::mem::size_of::<usize>()
    }

    /// `dfa` with its table's window, to search; `None` when its table is not here.
    pub(crate) fn place<'a>(&'a self, dfa: &'a NarrowDfa) -> Option<Placed<'a>> {
        let (part, offset) = dfa.table;
        let base = self.starts.get(part)?.checked_add(offset)?;
        let rows = self.all.get(base..base.checked_add(WINDOW)?)?.try_into().ok()?;
        Some(Placed { dfa, rows })
    }
}

/// A narrow DFA with the window of [`NarrowTables`] its table starts, as searches step it.
#[derive(Clone, Copy)]
pub(crate) struct Placed<'a> {
    dfa: &'a NarrowDfa,
    rows: &'a [u16; WINDOW],
}

impl core::ops::Deref for Placed<'_> {
    type Target = NarrowDfa;

    fn deref(&self) -> &NarrowDfa {
        self.dfa
    }
}

impl Placed<'_> {
    /// The end of the leftmost-first match in `input` (the earliest one when it asks),
    /// as regex-automata's `try_search_fwd` reports it; `None` also where that search
    /// fails (an anchored search of a DFA built without anchored starts).
    pub(crate) fn find(self, input: &Input<'_>) -> Option<HalfMatch> {
        if input.is_done() {
            return None;
        }
        let mode = match input.get_anchored() {
            Anchored::No => 0,
            Anchored::Yes => 1,
            Anchored::Pattern(_) => return None,
        };
        let prefilter = if mode == 0 { self.prefilter.as_ref() } else { None };
        let hay = input.haystack();
        let end = input.end();
        let mut at = input.start();
        let mut state = self.start(mode, hay, at)?;
        let mut found = None;
        if let Some(prefilter) = prefilter {
            at = prefilter.find(hay, Span::from(at..end))?.start;
            if !self.universal_start {
                state = self.start(0, hay, at)?;
            }
        }
        let span = hay.get(..end).unwrap_or_default();
        while at < end {
            let (next, after, special) = self.to_special(state, span, at);
            state = next;
            if !special {
                break;
            }
            // The byte that led to the special state.
            at = after - 1;
            let special = self.special(state);
            if special.kind & START != 0 {
                if let Some(prefilter) = prefilter {
                    if found.is_none() {
                        let candidate = prefilter.find(hay, Span::from(at..end))?.start;
                        // Only a skip forward: a start state looping on itself would stall.
                        if candidate > at {
                            at = candidate;
                            if !self.universal_start {
                                state = self.start(0, hay, at)?;
                            }
                            continue;
                        }
                    }
                } else if special.kind & ACCEL != 0 {
                    at = accelerate(special, hay, at, end);
                    continue;
                }
            } else if special.kind & MATCH != 0 {
                found = Some(HalfMatch::new(self.first_pattern(special), at));
                if input.get_earliest() {
                    return found;
                }
                if special.kind & ACCEL != 0 {
                    at = accelerate(special, hay, at, end);
                    continue;
                }
            } else if special.kind & ACCEL != 0 {
                at = accelerate(special, hay, at, end);
                continue;
            } else if special.kind & DEAD != 0 {
                return found;
            } else {
                // A quit state: the crate's search fails.
                return None;
            }
            at += 1;
        }
        // The end: the byte after the span, or end of input.
        match hay.get(end) {
            Some(&byte) => {
                let special = self.special(self.step(state, byte));
                if special.kind & MATCH != 0 {
                    found = Some(HalfMatch::new(self.first_pattern(special), end));
                } else if special.kind & QUIT != 0 {
                    return None;
                }
            }
            None => {
                let special = self.special(self.next_eoi_state(state));
                if special.kind & MATCH != 0 {
                    found = Some(HalfMatch::new(self.first_pattern(special), hay.len()));
                }
            }
        }
        found
    }

    /// The state after `state` (a row's offset) on `byte`.
    #[inline(always)]
    pub(crate) fn step(self, state: u16, byte: u8) -> u16 {
        let column = u16::from(self.dfa.classes[usize::from(byte)]);
        // `of` makes every state a row's offset and every class a column of a table of
        // at most 65,535 entries, so the sum never wraps and stays in this DFA's rows;
        // as a 16-bit index into the window it needs no bounds check (which cost 4.7%
        // of a scan's instructions).
        self.rows[usize::from(state.wrapping_add(column))]
    }

    /// Steps from `state` over `text` from `at`, four bytes a round, until a special
    /// state: it, the position after its byte and true; or the state at the end and
    /// false. The prefilter tables' `literal::to_special` is its twin over another
    /// crate's automaton: one generic over closures cost 4% more instructions in the scan.
    #[inline(always)]
    pub(crate) fn to_special(self, mut state: u16, text: &[u8], mut at: usize) -> (u16, usize, bool) {
        while let Some(&[b0, b1, b2, b3]) = text.get(at..).and_then(<[u8]>::first_chunk::<4>) {
            let s0 = self.step(state, b0);
            if self.is_special(s0) {
                return (s0, at + 1, true);
            }
            let s1 = self.step(s0, b1);
            if self.is_special(s1) {
                return (s1, at + 2, true);
            }
            let s2 = self.step(s1, b2);
            if self.is_special(s2) {
                return (s2, at + 3, true);
            }
            state = self.step(s2, b3);
            at += 4;
            if self.is_special(state) {
                return (state, at, true);
            }
        }
        while let Some(&byte) = text.get(at) {
            state = self.step(state, byte);
            at += 1;
            if self.is_special(state) {
                return (state, at, true);
            }
        }
        (state, at, false)
    }

    /// The state after `state` at the end of the input.
    pub(crate) fn next_eoi_state(self, state: u16) -> u16 {
        self.rows.get(usize::from(state) + self.stride - 1).copied().unwrap_or(0)
    }
}

/// What special state `id` of `dfa` is; a match state's patterns join `patterns`.
fn special_of(dfa: &dense::DFA<Vec<u32>>, id: StateID, patterns: &mut Vec<u32>) -> Option<Special> {
    let mut kind = 0;
    for (yes, bit) in [
        (dfa.is_dead_state(id), DEAD),
        (dfa.is_quit_state(id), QUIT),
        (dfa.is_match_state(id), MATCH),
        (dfa.is_accel_state(id), ACCEL),
        (dfa.is_start_state(id), START),
    ] {
        if yes {
            kind |= bit;
        }
    }
    let accelerator = if kind & ACCEL != 0 { dfa.accelerator(id) } else { &[] };
    let mut needles = [0u8; 3];
    needles.get_mut(..accelerator.len())?.copy_from_slice(accelerator);
    let first_pattern = u32::try_from(patterns.len()).ok()?;
    let pattern_count = if kind & MATCH != 0 { dfa.match_len(id) } else { 0 };
    patterns.extend((0..pattern_count).map(|i| dfa.match_pattern(id, i).as_u32()));
    Some(Special { kind, needles, needle_count: accelerator.len() as u8, pattern_count: u16::try_from(pattern_count).ok()?, first_pattern })
}

/// Where an accelerated state is left: the next of its needles after `at`, or `end`.
fn accelerate(special: Special, hay: &[u8], at: usize, end: usize) -> usize {
    let from = at + 1;
    let rest = hay.get(from..end).unwrap_or(&[]);
    let [a, b, c] = special.needles;
    let hit = match special.needle_count {
        1 => memchr::memchr(a, rest),
        2 => memchr::memchr2(a, b, rest),
        3 => memchr::memchr3(a, b, c, rest),
        _ => None,
    };
    hit.map_or(end, |i| from + i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::vec::Vec;
    use crate::rules::compile::build_dense;
    use regex_automata::nfa::thompson;
    use regex_automata::MatchKind;

    /// A dense DFA as the rules build them (`build_dense`), with the prefilter of
    /// `literals` when given, anchored starts too when `anchored`.
    fn dense_of(patterns: &[&str], literals: &[&str], anchored: bool) -> dense::DFA<Vec<u32>> {
        let prefilter = (!literals.is_empty()).then(|| Prefilter::new(MatchKind::LeftmostFirst, literals)).flatten();
        let nfa = thompson::Compiler::new()
            .syntax(regex_automata::util::syntax::Config::new().unicode(false).utf8(false))
            .configure(thompson::Config::new().utf8(false).which_captures(thompson::WhichCaptures::None))
            .build_many(patterns)
            .expect("patterns build");
        build_dense(&nfa, prefilter, anchored, usize::MAX).expect("a dense DFA")
    }

    /// `dfa` narrow, and tables of its own.
    fn alone(dfa: &dense::DFA<Vec<u32>>) -> (NarrowDfa, NarrowTables) {
        let mut part = TablePart::new(0, 0);
        let narrow = NarrowDfa::of(dfa, &mut part).expect("fits");
        (narrow, NarrowTables::join(alloc::vec![part]))
    }

    #[test]
    fn narrow_finds_what_dense_finds_table() {
        // (patterns, prefilter literals, anchored starts too)
        let cases: &[(&[&str], &[&str], bool)] = &[
            // A union's: the first pattern a match state reports.
            (&[r"foo", r"o+", r"ba[rz]", r"(?m)^x"], &[], true),
            (&[r"foo"], &[], false),
            (&[r"foo"], &["foo"], true),
            (&[r"(?i)click\s+here"], &["click"], false),
            (&[r"\bfree\b"], &[], true),
            (&[r"(?m)^Subject: .*win"], &[], true),
            (&[r"(?m)money$"], &[], false),
            (&[r"a[^x]*b"], &[], false),
            (&[r"x{2,}y?"], &[], true),
            (&[r""], &[], true),
            (&[r"\d{3}[- ]\d{4}"], &[], false),
            (&[r"(?s)viagra.{0,10}cialis"], &["viagra"], false),
            (&[r"$"], &[], false),
            (&[r"\Bing\b"], &[], false),
            // After the prefilter's skip the start state depends on the byte before it.
            (&[r"\bfree\b"], &["free"], false),
            // An accelerated state entered on one of its own needles.
            (&[r"ab[^b]*c"], &[], false),
        ];
        let hays: &[&[u8]] = &[
            b"",
            b"foo",
            b"xfoofoo\n",
            b"Click   Here now, CLICK HERE",
            b"free freedom free\r\n",
            b"To: a\nSubject: you win\nX: y\r\n",
            b"more money\nmoney\r\nmoney",
            b"aaxb a b axxb ab",
            b"xxxxy xy xx",
            b"call 555-1234 or 555 9876\n",
            b"viagra and cialis, viagra......cialis",
            b"singing in the rain\xff\x80 ing",
            b"xfree free",
            b"xabc abzzc abbc",
        ];
        for &(pattern, literals, anchored) in cases {
            let dfa = dense_of(pattern, literals, anchored);
            let pattern = pattern.join(" | ");
            let (narrow, tables) = alone(&dfa);
            let narrow = tables.place(&narrow).expect("placed");
            for &hay in hays {
                for start in 0..=hay.len() {
                    for end in [start, (start + 3).min(hay.len()), hay.len()] {
                        for mode in [Anchored::No, Anchored::Yes] {
                            for earliest in [false, true] {
                                let input = Input::new(hay).range(start..end).anchored(mode).earliest(earliest);
                                let want = dfa.try_search_fwd(&input).ok().flatten();
                                assert_eq!(narrow.find(&input), want, "{pattern} in {hay:?} {start}..{end} {mode:?} earliest {earliest}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn narrow_finds_what_dense_finds_at_random() {
        // Patterns of random pieces (anchors, word boundaries, classes, repeats, the
        // prefilter's literal) over random texts of their bytes, from every place.
        let pieces = [r"ab", r"b+", r"[^a]", r"\b", r"\B", r"(?m)^", r"(?m)$", r"c?", r".", r"(?:a|bc)", r"\s", r"[a-c]{2}", r"(?i)B"];
        let mut random = crate::rules::Xorshift(0x9e37_79b9);
        for _ in 0..300 {
            let pattern: String = (0..1 + random.below(4)).map(|_| pieces[random.below(pieces.len())]).collect();
            let literals: &[&str] = if random.below(2) == 0 { &["ab"] } else { &[] };
            let dfa = dense_of(&[pattern.as_str()], literals, random.below(2) == 0);
            let (narrow, tables) = alone(&dfa);
            let narrow = tables.place(&narrow).expect("placed");
            for _ in 0..8 {
                let hay: Vec<u8> = (0..random.below(12)).map(|_| b"abc \n\r"[random.below(6)]).collect();
                for start in 0..=hay.len() {
                    for mode in [Anchored::No, Anchored::Yes] {
                        for earliest in [false, true] {
                            let input = Input::new(&hay).range(start..).anchored(mode).earliest(earliest);
                            let want = dfa.try_search_fwd(&input).ok().flatten();
                            assert_eq!(narrow.find(&input), want, "{pattern} {literals:?} in {hay:?} from {start} {mode:?} earliest {earliest}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn tables_place_each_dfa_at_its_own_rows_table() {
        // DFAs made into two parts, joined in another order than their ids: each,
        // wherever its rows start (the last one's window reaching into the room after
        // them), finds what the crate's DFA finds; one of a part not joined has no place.
        let cases: &[&[&str]] = &[&["abc"], &[r"\d{3}-\d{4}"], &["(?i)viagra", "cialis"], &[r"(?m)^x+$"], &["[a-z]+ing"]];
        let hays: &[&[u8]] = &[b"", b"abc", b"call 555-1234 now", b"Viagra cialis", b"y\nxxx\nz", b"singing in the rain"];
        let dfas: Vec<_> = cases.iter().map(|patterns| dense_of(patterns, &[], false)).collect();
        let (mut first, mut second, mut other) = (TablePart::new(0, 0), TablePart::new(1, 4), TablePart::new(2, 0));
        let narrows: Vec<NarrowDfa> = dfas.iter().enumerate().map(|(i, d)| NarrowDfa::of(d, if i < 2 { &mut second } else { &mut first }).expect("fits")).collect();
        let unjoined = NarrowDfa::of(&dfas[0], &mut other).expect("fits");
        let tables = NarrowTables::join(alloc::vec![second, first]);
        for ((narrow, dfa), patterns) in narrows.iter().zip(&dfas).zip(cases) {
            let placed = tables.place(narrow).expect("placed");
            for &hay in hays {
                for start in 0..=hay.len() {
                    let input = Input::new(hay).range(start..);
                    assert_eq!(placed.find(&input), dfa.try_search_fwd(&input).ok().flatten(), "{patterns:?} in {hay:?} from {start}");
                }
            }
        }
        assert!(tables.place(&unjoined).is_none());
    }

    #[test]
    fn narrow_refuses_what_does_not_fit_table() {
        // 2^12 states remember the last 12 a/b bytes, and the literal makes 24 more byte
        // classes: more rows times columns than 16 bits name.
        let big = dense::DFA::new(r"[ab]*a[ab]{11}|cdefghijklmnopqrstuvwxyz").expect("builds");
        // A quit byte: a start after it fails where one after another non-word byte does not.
        let quits = dense::Builder::new().configure(dense::Config::new().quit(b'#', true)).build("a").expect("builds");
        // Empty matches inside a UTF-8 character, which the crate's search skips.
        let empty = dense::DFA::new("").expect("builds");
        let cases: &[(&str, &dense::DFA<Vec<u32>>)] = &[("65,536 transitions or more", &big), ("a quit byte", &quits), ("UTF-8 empty matches", &empty)];
        for &(why, dfa) in cases {
            assert!(NarrowDfa::of(dfa, &mut TablePart::new(0, 0)).is_none(), "{why}");
        }
    }
}
