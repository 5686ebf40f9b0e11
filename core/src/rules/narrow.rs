//! A dense DFA in 16-bit rows: the states and transitions of a regex-automata dense
//! DFA, each row exactly as wide as the DFA's byte classes (the crate pads a row to a
//! power of two) and each state a 16-bit row offset (the crate's are 32 bits). Every
//! child shares the rules' automata, so their size is memory of every process: on the
//! stock rules these rows take a third of the crate's. The search is the crate's
//! forward search, step for step (start states by look-behind, the prefilter at a
//! start state, accelerated states, a match seen one byte late, the end-of-input
//! step), so it finds what the crate's DFA finds.

use alloc::vec;
use alloc::vec::Vec;

use regex_automata::dfa::{dense, Automaton};
use regex_automata::util::prefilter::Prefilter;
use regex_automata::util::primitives::{PatternID, StateID};
use regex_automata::{Anchored, HalfMatch, Input, Span};
use regex_automata::util::start;

/// What a special state is (bits of [`Special::kind`]).
const DEAD: u8 = 1;
const QUIT: u8 = 2;
const MATCH: u8 = 4;
const ACCEL: u8 = 8;
const START: u8 = 16;
/// No start state for this mode (an anchored search of a DFA built unanchored only).
const NO_START: u16 = u16::MAX;
/// One byte for each look-behind kind a start state depends on: none (the text's
/// start), `\n`, `\r`, a word byte, any other byte.
const BEHIND_SAMPLES: [Option<u8>; 5] = [None, Some(b'\n'), Some(b'\r'), Some(b'a'), Some(b' ')];

/// Which of [`BEHIND_SAMPLES`] stands for the byte before a search.
fn behind_kind(byte: Option<u8>) -> usize {
    match byte {
        None => 0,
        Some(b'\n') => 1,
        Some(b'\r') => 2,
        Some(b) if b.is_ascii_alphanumeric() || b == b'_' => 3,
        Some(_) => 4,
    }
}

/// A state the search stops at: its kinds and, when accelerated, the bytes that leave it.
#[derive(Debug, Clone, Copy)]
struct Special {
    kind: u8,
    needles: [u8; 3],
    needle_count: u8,
}

/// A single-pattern dense DFA of at most 65,535 transitions, searched forward as
/// regex-automata searches the DFA it was made from.
#[derive(Debug)]
pub(crate) struct NarrowDfa {
    /// Byte to column.
    classes: [u8; 256],
    /// Columns a row: the byte classes, then end of input.
    stride: usize,
    /// Row by row, each state's next state as its row's offset. The special states'
    /// rows come first, the dead state's at 0.
    next: Vec<u16>,
    /// Offsets below this one are special states.
    special_end: u16,
    /// By row, the special states.
    specials: Vec<Special>,
    /// Start state by mode (unanchored, anchored) and look-behind kind.
    starts: [[u16; 5]; 2],
    /// One unanchored start state whatever the look-behind: the prefilter's skips need
    /// not recompute it.
    universal_start: bool,
    prefilter: Option<Prefilter>,
}

impl NarrowDfa {
    /// The DFA `dfa` in 16-bit rows, or `None` when it does not fit them: more than one
    /// pattern, more transitions than 16 bits name, start states that depend on more
    /// than the look-behind kinds above, empty matches the crate's search would skip
    /// inside a UTF-8 character.
    pub(crate) fn of(dfa: &dense::DFA<Vec<u32>>) -> Option<NarrowDfa> {
        let byte_classes = dfa.byte_classes();
        let stride = dfa.alphabet_len();
        let eoi = stride.checked_sub(1)?;
        if dfa.pattern_len() != 1 || (dfa.has_empty() && dfa.is_utf8()) || byte_classes.eoi().as_usize() != eoi || !dfa.is_dead_state(StateID::ZERO) {
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

        let mut start_ids = [[None; 5]; 2];
        for (ids, mode) in start_ids.iter_mut().zip([Anchored::No, Anchored::Yes]) {
            let of = |behind: Option<u8>| dfa.start_state(&start::Config::new().anchored(mode).look_behind(behind)).ok();
            for (id, &behind) in ids.iter_mut().zip(BEHIND_SAMPLES.iter()) {
                *id = of(behind);
            }
            if (0..=255u8).any(|b| of(Some(b)) != ids[behind_kind(Some(b))]) {
                return None;
            }
        }

        // Row by row from the dead state's, each row a state of `dfa` (its rows keep
        // their order: the special states come first there too), until every state a
        // transition or a start names has its row.
        let shift = dfa.stride2();
        let row = |id: StateID| id.as_usize() >> shift;
        let mut rows = start_ids.iter().flatten().flatten().map(|&id| row(id) + 1).max().unwrap_or(1);
        // Row numbers first, offsets once all fit.
        let mut next: Vec<u16> = Vec::new();
        let mut specials = Vec::new();
        let mut r = 0;
        while r < rows {
            let id = StateID::new(r << shift).ok()?;
            next.reserve(stride);
            for to in samples.iter().map(|&byte| dfa.next_state(id, byte)).chain([dfa.next_eoi_state(id)]) {
                let to = row(to);
                rows = rows.max(to + 1);
                // Checked below: a row past 16 bits is refused before it is read.
                next.push(to as u16);
            }
            if rows * stride > usize::from(u16::MAX) {
                return None;
            }
            if dfa.is_special_state(id) {
                // Special states are the first rows, or the search would miss one.
                if specials.len() != r {
                    return None;
                }
                specials.push(special_of(dfa, id)?);
            }
            r += 1;
        }
        let special_rows = specials.len();
        // Every row times the width fits in 16 bits (and is below NO_START).
        for to in &mut next {
            *to *= stride as u16;
        }
        next.shrink_to_fit();
        let offset = |id: StateID| u16::try_from(row(id) * stride).ok();
        let mut starts = [[NO_START; 5]; 2];
        for (mode_starts, ids) in starts.iter_mut().zip(start_ids.iter()) {
            for (start, id) in mode_starts.iter_mut().zip(ids.iter()) {
                if let Some(id) = id {
                    *start = offset(*id)?;
                }
            }
        }
        Some(NarrowDfa {
            classes,
            stride,
            next,
            special_end: u16::try_from(special_rows * stride).ok()?,
            specials,
            starts,
            universal_start: dfa.universal_start_state(Anchored::No).is_some(),
            prefilter: dfa.get_prefilter().cloned(),
        })
    }

    /// Bytes held, for the rule set's automata figure.
    pub(crate) fn memory_usage(&self) -> usize {
        core::mem::size_of::<NarrowDfa>()
            + self.next.len() * 2
            + self.specials.len() * core::mem::size_of::<Special>()
            + self.prefilter.as_ref().map_or(0, Prefilter::memory_usage)
    }

    /// The end of the leftmost-first match in `input` (the earliest one when it asks),
    /// as regex-automata's `try_search_fwd` reports it; `None` also where that search
    /// fails (an anchored search of a DFA built without anchored starts).
    pub(crate) fn find(&self, input: &Input<'_>) -> Option<HalfMatch> {
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
        while at < end {
            state = self.step(state, hay.get(at).copied().unwrap_or(0));
            if state < self.special_end {
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
                    found = Some(HalfMatch::new(PatternID::ZERO, at));
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
            }
            at += 1;
        }
        // The end: the byte after the span, or end of input.
        match hay.get(end) {
            Some(&byte) => {
                let kind = self.special(self.step(state, byte)).kind;
                if kind & MATCH != 0 {
                    found = Some(HalfMatch::new(PatternID::ZERO, end));
                } else if kind & QUIT != 0 {
                    return None;
                }
            }
            None => {
                let at_end = self.next.get(usize::from(state) + self.stride - 1).copied().unwrap_or(0);
                if self.special(at_end).kind & MATCH != 0 {
                    found = Some(HalfMatch::new(PatternID::ZERO, hay.len()));
                }
            }
        }
        found
    }

    /// The state after `state` on `byte` (the dead state's row where the table has none,
    /// which cannot be).
    #[inline(always)]
    fn step(&self, state: u16, byte: u8) -> u16 {
        let column = usize::from(self.classes[usize::from(byte)]);
        self.next.get(usize::from(state) + column).copied().unwrap_or(0)
    }

    /// What the state at `offset` is (nothing special for a row past the special ones).
    fn special(&self, offset: u16) -> Special {
        if offset >= self.special_end {
            return Special { kind: 0, needles: [0; 3], needle_count: 0 };
        }
        self.specials.get(usize::from(offset) / self.stride).copied().unwrap_or(Special { kind: DEAD, needles: [0; 3], needle_count: 0 })
    }

    /// The start state of a search from `at` in `hay`, by mode; `None` when the DFA has none.
    fn start(&self, mode: usize, hay: &[u8], at: usize) -> Option<u16> {
        let behind = at.checked_sub(1).and_then(|i| hay.get(i)).copied();
        let id = *self.starts.get(mode)?.get(behind_kind(behind))?;
        (id != NO_START).then_some(id)
    }
}

/// What special state `id` of `dfa` is.
fn special_of(dfa: &dense::DFA<Vec<u32>>, id: StateID) -> Option<Special> {
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
    Some(Special { kind, needles, needle_count: accelerator.len() as u8 })
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
    use alloc::vec::Vec;
    use regex_automata::dfa::StartKind;
    use regex_automata::MatchKind;

    /// A dense DFA as the rules build them: leftmost-first, minimized, with the
    /// prefilter of `literals` when given, anchored starts too when `anchored`.
    fn dense_of(pattern: &str, literals: &[&str], anchored: bool) -> dense::DFA<Vec<u32>> {
        let prefilter = (!literals.is_empty()).then(|| Prefilter::new(MatchKind::LeftmostFirst, literals)).flatten();
        dense::Builder::new()
            .configure(
                dense::Config::new()
                    .start_kind(if anchored { StartKind::Both } else { StartKind::Unanchored })
                    .specialize_start_states(prefilter.is_some())
                    .prefilter(prefilter)
                    .match_kind(MatchKind::LeftmostFirst)
                    .minimize(true),
            )
            .syntax(regex_automata::util::syntax::Config::new().unicode(false).utf8(false))
            .thompson(regex_automata::nfa::thompson::Config::new().utf8(false))
            .build(pattern)
            .expect("pattern builds")
    }

    #[test]
    fn narrow_finds_what_dense_finds_table() {
        // (pattern, prefilter literals, anchored starts too)
        let cases: &[(&str, &[&str], bool)] = &[
            (r"foo", &[], false),
            (r"foo", &["foo"], true),
            (r"(?i)click\s+here", &["click"], false),
            (r"\bfree\b", &[], true),
            (r"(?m)^Subject: .*win", &[], true),
            (r"(?m)money$", &[], false),
            (r"a[^x]*b", &[], false),
            (r"x{2,}y?", &[], true),
            (r"", &[], true),
            (r"\d{3}[- ]\d{4}", &[], false),
            (r"(?s)viagra.{0,10}cialis", &["viagra"], false),
            (r"$", &[], false),
            (r"\Bing\b", &[], false),
            // After the prefilter's skip the start state depends on the byte before it.
            (r"\bfree\b", &["free"], false),
            // An accelerated state entered on one of its own needles.
            (r"ab[^b]*c", &[], false),
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
            let narrow = NarrowDfa::of(&dfa).expect("fits");
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
    fn narrow_refuses_what_does_not_fit_table() {
        let two = dense::DFA::new_many(&["foo", "bar"]).expect("builds");
        // 2^12 states remember the last 12 a/b bytes, and the literal makes 24 more byte
        // classes: more rows times columns than 16 bits name.
        let big = dense::DFA::new(r"[ab]*a[ab]{11}|cdefghijklmnopqrstuvwxyz").expect("builds");
        let cases: &[(&str, &dense::DFA<Vec<u32>>)] = &[("two patterns", &two), ("65,536 transitions or more", &big)];
        for &(why, dfa) in cases {
            assert!(NarrowDfa::of(dfa).is_none(), "{why}");
        }
    }
}
