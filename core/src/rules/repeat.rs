//! Line patterns that are one part repeated, `(?:X){n}`: SpamAssassin's
//! `__FILL_THIS_FORM_{LONG,SHORT}{1,2}` repeat a list of form fields five and three times.
//! The DFA of the whole repeats X's states in every combination of how far each
//! overlapping try has got, so it is too big to be dense and its lazy cache grows to
//! MiB in every child, rebuilt as it fills. Whether a line matches needs less: a chain
//! of `n` matches of X, each starting where the one before ends. One walk of X's
//! anchored DFA from each place X can start (by its first two bytes), left to right,
//! records at every match end how long a chain ends there.
//!
//! Walks from places close together can cover the same bytes (a part with `a+b`, on a
//! run of `a`s, walks the run from each of them), so a search is bounded as the
//! backtracker's are: past [`STEPS_PER_BYTE`] steps a byte of the line, it counts as
//! not matching, as a rule never hits on a guess. The stock parts take about two a
//! byte and never reach it on the public corpus: their unbounded repeats are of single
//! letters no field name starts with twice (`ad+res+`), and their openings skip the run.

use alloc::vec::Vec;

use regex_automata::hybrid::{self, LazyStateID};
use regex_automata::util::start;
use regex_automata::{Anchored, Input};
use regex_syntax::hir::{Hir, HirKind};

use super::backtrack::{ByteSet, Pairs};

/// Most repeats a chain counts: the bits of one place's mask.
const MAX_TIMES: u32 = 15;
/// Places the ends of a chain's walks start with, grown when a match of X is longer.
pub(crate) const ENDS_START: usize = 1024;
/// Steps the walks of one search may take, a byte of its text.
const STEPS_PER_BYTE: usize = 64;
/// Steps any search may take, however short its text.
const STEPS_BASE: usize = 4096;

/// A line pattern searched as a chain of its part's matches. Built only for rules that
/// count one hit at most: it tells whether a line matches, not where.
#[derive(Debug, Clone)]
pub(crate) struct Repeat {
    /// Index into the rule set's lazy DFAs: X's, reporting every match end.
    pub(crate) unit: usize,
    /// Matches of X a chain needs.
    pub(crate) times: u32,
    /// How a match of X can start: no walk starts elsewhere.
    pub(crate) openings: Openings,
}

/// The first two bytes a match of a part can start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Openings {
    /// Bytes a match can start with.
    first: ByteSet,
    /// For each byte `a`, the bytes `b` a match can start with after it (all, when
    /// `a` alone is a match).
    pairs: alloc::boxed::Box<Pairs>,
}

impl Openings {
    /// The openings of the matches of anchored `dfa`, whatever comes before them;
    /// `None` when its states could not be built. Bytes of one of the DFA's byte classes
    /// take the same transitions, so one byte of each class stands for all of them: a
    /// part of 20 classes steps 400 pairs, not 65,536 (startup builds one per repeat).
    pub(crate) fn of(dfa: &hybrid::dfa::DFA) -> Option<Openings> {
        let classes = dfa.byte_classes();
        let mut members = alloc::vec![ByteSet::default(); classes.alphabet_len()];
        let mut representatives = Vec::new();
        for byte in 0..=u8::MAX {
            let class = members.get_mut(usize::from(classes.get(byte)))?;
            if *class == ByteSet::default() {
                representatives.push(byte);
            }
            class.insert(byte);
        }
        let mut cache = dfa.create_cache();
        let mut first = ByteSet::default();
        let mut pairs = alloc::boxed::Box::new([ByteSet::default(); 256]);
        for before in super::LOOK_BEHIND_SAMPLES {
            let config = start::Config::new().anchored(Anchored::Yes).look_behind(before);
            for &a in &representatives {
                // Looked up each time: a step that clears the cache renumbers its states.
                let state = dfa.start_state(&mut cache, &config).ok()?;
                if dfa.next_state(&mut cache, state, a).ok()?.is_dead() {
                    continue;
                }
                let a_class = *members.get(usize::from(classes.get(a)))?;
                first = first.union(a_class);
                let mut after = ByteSet::default();
                for &b in &representatives {
                    let state = dfa.start_state(&mut cache, &config).ok()?;
                    let after_a = dfa.next_state(&mut cache, state, a).ok()?;
                    if !dfa.next_state(&mut cache, after_a, b).ok()?.is_dead() {
                        after = after.union(*members.get(usize::from(classes.get(b)))?);
                    }
                }
                for x in 0..=u8::MAX {
                    if a_class.contains(x) {
                        let row = pairs.get_mut(usize::from(x))?;
                        *row = row.union(after);
                    }
                }
            }
        }
        Some(Openings { first, pairs })
    }

    /// Whether a match can start at `at` in `text`.
    fn admit(&self, text: &[u8], at: usize) -> bool {
        match (text.get(at), text.get(at + 1)) {
            (Some(&a), Some(&b)) => self.pairs.get(usize::from(a)).is_some_and(|row| row.contains(b)),
            (Some(&a), None) => self.first.contains(a),
            _ => false,
        }
    }

    /// Of the 65,536 pairs of bytes, how many a match can start with.
    pub(crate) fn pairs(&self) -> u32 {
        self.pairs.iter().map(ByteSet::count).sum()
    }

    /// Bytes of an image: the first bytes, then each byte's row of pairs.
    pub(crate) const IMAGE_LEN: usize = 257 * ByteSet::IMAGE_LEN;

    /// Its image, appended to `out`: a compile cache keeps it, so a start need not
    /// determinize the part's pairs again.
    pub(crate) fn write_image(&self, out: &mut Vec<u8>) {
        self.first.write_image(out);
        for row in self.pairs.iter() {
            row.write_image(out);
        }
    }

    /// The openings `write_image` wrote to `bytes`; `None` unless they are that long.
    pub(crate) fn read_image(bytes: &[u8]) -> Option<Openings> {
        if bytes.len() != Self::IMAGE_LEN {
            return None;
        }
        let mut sets = bytes.chunks_exact(ByteSet::IMAGE_LEN).map(ByteSet::read_image);
        let first = sets.next()??;
        let mut pairs = alloc::boxed::Box::new([ByteSet::default(); 256]);
        for (row, set) in pairs.iter_mut().zip(sets) {
            *row = set?;
        }
        Some(Openings { first, pairs })
    }
}

/// The part `hir` repeats and how many times at least, when `hir` is nothing else
/// (around captures) and the part matches no empty text. `X{n,m}` and `X{n,}` match a
/// line when `X{n}` does.
pub(crate) fn split(hir: &Hir) -> Option<(&Hir, u32)> {
    match hir.kind() {
        HirKind::Capture(c) => split(&c.sub),
        HirKind::Repetition(rep)
            if (2..=MAX_TIMES).contains(&rep.min) && rep.sub.properties().minimum_len().is_some_and(|len| len > 0) =>
        {
            Some((&rep.sub, rep.min))
        }
        _ => None,
    }
}

impl Repeat {
    /// Whether `text` holds `times` matches of X end to start. `ends` is the caller's
    /// scratch: one mask per place, bit k set when a chain of k matches ends there,
    /// kept for the places a walk can still reach (a ring, grown as walks need).
    pub(crate) fn is_match(&self, dfa: &hybrid::dfa::DFA, cache: &mut hybrid::dfa::Cache, text: &[u8], ends: &mut Vec<u16>) -> bool {
        if ends.len() < ENDS_START {
            ends.resize(ENDS_START, 0);
        }
        ends.fill(0);
        let goal = 1u16 << self.times;
        let mut steps = text.len().saturating_mul(STEPS_PER_BYTE).saturating_add(STEPS_BASE);
        for at in 0..text.len() {
            let ring = ends.len() - 1;
            let slot = ends.get_mut(at & ring).map_or(0, core::mem::take);
            if !self.openings.admit(text, at) {
                continue;
            }
            // Every place starts a chain of none; the chains ending here go on.
            let chains = (slot | 1) << 1;
            match walk(dfa, cache, text, (at, &mut steps), chains, goal, ends) {
                Walk::Goal => return true,
                Walk::Failed => return false,
                Walk::Done => {}
            }
        }
        false
    }
}

/// How a walk of X from one place ended.
enum Walk {
    /// A chain reached its goal.
    Goal,
    /// The lazy DFA failed, or the search ran out of steps: the line counts as not
    /// matching.
    Failed,
    Done,
}

/// Walks X anchored from `from`, adding `chains` at each match end, within `steps`.
fn walk(dfa: &hybrid::dfa::DFA, cache: &mut hybrid::dfa::Cache, text: &[u8], (from, steps): (usize, &mut usize), chains: u16, goal: u16, ends: &mut Vec<u16>) -> Walk {
    let input = Input::new(text).range(from..).anchored(Anchored::Yes);
    let Ok(mut state) = dfa.start_state_forward(cache, &input) else { return Walk::Failed };
    let mut at = from;
    loop {
        let Some(left) = steps.checked_sub(1) else { return Walk::Failed };
        *steps = left;
        let next: Result<LazyStateID, _> = match text.get(at) {
            Some(&byte) => dfa.next_state(cache, state, byte),
            None => dfa.next_eoi_state(cache, state),
        };
        let Ok(next) = next else { return Walk::Failed };
        state = next;
        if state.is_tagged() {
            // A match state is entered one byte after the match ends. A match ending with
            // a body line's `\n` ends the line: it only completes a chain.
            let line_ended = at > from && text.get(at - 1) == Some(&b'\n');
            if state.is_match() && (if line_ended { chains } else { add(ends, from, at, chains) }) & goal != 0 {
                return Walk::Goal;
            }
            if state.is_dead() || state.is_quit() {
                return Walk::Done;
            }
        }
        if at >= text.len() {
            return Walk::Done;
        }
        at += 1;
    }
}

/// Adds `chains` to the mask of place `end`, reached from `from`, and returns it. The
/// ring holds the places from `from` on; one too short for `end` doubles first.
fn add(ends: &mut Vec<u16>, from: usize, end: usize, chains: u16) -> u16 {
    if end - from >= ends.len() {
        let old = ends.len();
        let size = (end - from + 1).next_power_of_two().max(old * 2);
        let mut grown = alloc::vec![0u16; size];
        for place in from..from + old {
            if let (Some(&mask), Some(slot)) = (ends.get(place & (old - 1)), grown.get_mut(place & (size - 1))) {
                *slot = mask;
            }
        }
        *ends = grown;
    }
    let ring = ends.len() - 1;
    match ends.get_mut(end & ring) {
        Some(slot) => {
            *slot |= chains;
            *slot
        }
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::compile::{nfa_compiler, parse_hir, LineEnds};
    use alloc::string::String;
    use regex_automata::MatchKind;

    fn lazy(hir: &Hir, kind: MatchKind) -> hybrid::dfa::DFA {
        let nfa = nfa_compiler().build_from_hir(hir).expect("nfa");
        hybrid::dfa::Builder::new().configure(hybrid::dfa::Config::new().match_kind(kind)).build_from_nfa(nfa).expect("dfa")
    }

    /// A repeated pattern's own lazy DFA and its chain, with their caches, both made
    /// local to body lines (a match may end with a line's `\n`, not go past it).
    struct Both {
        pattern: &'static str,
        whole: (hybrid::dfa::DFA, hybrid::dfa::Cache),
        part: (hybrid::dfa::DFA, hybrid::dfa::Cache),
        repeat: Repeat,
        ends: Vec<u16>,
    }

    impl Both {
        fn new(pattern: &'static str) -> Both {
            let hir = parse_hir(pattern).expect("parses");
            let (unit, times) = split(&hir).expect("a repeat");
            let local = |hir: &Hir| LineEnds::Newline.local(hir, 0);
            let (whole, part) = (lazy(&local(&hir), MatchKind::LeftmostFirst), lazy(&local(unit), MatchKind::All));
            let repeat = Repeat { unit: 0, times, openings: Openings::of(&part).expect("openings") };
            let (whole_cache, part_cache) = (whole.create_cache(), part.create_cache());
            Both { pattern, whole: (whole, whole_cache), part: (part, part_cache), repeat, ends: Vec::new() }
        }

        /// Whether the whole pattern matches `text`, checked to be the chain's answer.
        fn agree(&mut self, text: &[u8]) -> bool {
            let (whole, cache) = &mut self.whole;
            let want = whole.try_search_fwd(cache, &Input::new(text)).expect("searches").is_some();
            let (part, cache) = &mut self.part;
            let got = self.repeat.is_match(part, cache, text, &mut self.ends);
            assert_eq!(got, want, "{} on {:?}", self.pattern, String::from_utf8_lossy(text));
            want
        }
    }

    /// The chain's answer against the whole pattern's own search, on every text.
    #[test]
    fn chain_as_whole_table() {
        let cases: &[(&'static str, &[&str])] = &[
            (r"(?:ab|a){3}", &["aaa", "abab", "ababa", "aab", "ab ab ab", "xaaax", "aa", ""]),
            (r"(?i:(?:name|address)[:\s]{1,3}_{2,}\s?){3}", &["Name: __ Address: ___ name ___", "Name: __ Address: ___", "name:__name:__name:__", "name: _ name: __ name: __"]),
            (r"(?:\bno\b\s?){2,}", &["no no", "nono", "no non", "a no no", "no,no"]),
            (r"(?:^x|y){2}", &["xy", "yy", "yx", "axy"]),
            (r"(?:a$|b){2}", &["ba", "ab", "bb", "bab"]),
            (r"(?:a+b){4}", &["abaabaaabaaaab", "abab", "ababab"]),
        ];
        for (pattern, texts) in cases {
            let mut both = Both::new(pattern);
            for text in texts.iter() {
                both.agree(text.as_bytes());
            }
        }
    }

    /// The same on generated texts over each pattern's alphabet, lines included.
    #[test]
    fn chain_as_whole_generated_table() {
        let cases: &[(&'static str, &[u8])] = &[
            (r"(?m:(?:^a|b\b|ab){2})", b"ab\n"),
            (r"(?:\bn\s?|o+n$){2,}", b"no \n"),
            (r"(?:a[ab]{0,3}b|ba){3}", b"aabbb_"),
            (r"(?:[^\n]a|\Wb){3}", b"ab.\n"),
        ];
        let mut random = crate::rules::Xorshift(0x2545_f491);
        let mut next = |n: usize| random.below(n);
        for (pattern, alphabet) in cases {
            let mut both = Both::new(pattern);
            let mut matched = 0;
            for _ in 0..2000 {
                let len = next(24);
                let text: Vec<u8> = (0..len).map(|_| alphabet.get(next(alphabet.len())).copied().unwrap_or(b'a')).collect();
                matched += usize::from(both.agree(&text));
            }
            // Both answers occur often enough to tell.
            assert!((100..1900).contains(&matched), "{pattern}: {matched} of 2000 match");
        }
    }

    /// A match of X longer than the ring grows it, keeping the chains it holds: the
    /// walk from 0 ends a chain at 1 (`x`) before it grows the ring at `xab..bc`, and
    /// only `x`, `ab` makes two.
    #[test]
    fn long_part_grows_ends_table() {
        let cases: &[(usize, bool)] = &[(10, true), (ENDS_START + 5, true), (3 * ENDS_START, true), (ENDS_START, false)];
        let hir = parse_hir(r"(?:x|x[ab]*c|ab){2}").expect("parses");
        let (unit, times) = split(&hir).expect("a repeat");
        let part = lazy(unit, MatchKind::All);
        let repeat = Repeat { unit: 0, times, openings: Openings::of(&part).expect("openings") };
        let mut cache = part.create_cache();
        for &(run, want) in cases {
            let mut ends = Vec::new();
            let text = if want { alloc::format!("xa{}c", "b".repeat(run)) } else { alloc::format!("x{}c", "b".repeat(run)) };
            assert_eq!(repeat.is_match(&part, &mut cache, text.as_bytes(), &mut ends), want, "run {run}");
            assert!(ends.len() >= ENDS_START);
        }
    }

    /// Walks that cover the same bytes over and over (a run of `a`s, each starting a
    /// part that needs a `b`) run out of steps: no match, found quickly, where a
    /// shorter run still decides.
    #[test]
    fn steps_bound_table() {
        let cases: &[(usize, bool)] = &[(40, true), (2 * STEPS_PER_BYTE, true), (8 * STEPS_PER_BYTE, false), (20_000, false)];
        let hir = parse_hir(r"(?:a+b){2}").expect("parses");
        let (unit, times) = split(&hir).expect("a repeat");
        let part = lazy(unit, MatchKind::All);
        let repeat = Repeat { unit: 0, times, openings: Openings::of(&part).expect("openings") };
        let mut cache = part.create_cache();
        let mut ends = Vec::new();
        for &(run, want) in cases {
            let text = alloc::format!("{}bab", "a".repeat(run));
            assert_eq!(repeat.is_match(&part, &mut cache, text.as_bytes(), &mut ends), want, "run {run}");
        }
    }

    #[test]
    fn split_table() {
        let cases: &[(&str, Option<u32>)] = &[
            (r"(?:ab){5}", Some(5)),
            (r"(ab){3,}", Some(3)),
            (r"(?:ab){2,4}", Some(2)),
            (r"(?:ab){1,4}", None),
            (r"(?:a?){3}", None),
            (r"(?:ab){16}", None),
            (r"x(?:ab){3}", None),
        ];
        for &(pattern, want) in cases {
            let hir = parse_hir(pattern).expect("parses");
            assert_eq!(split(&hir).map(|(_, n)| n), want, "{pattern}");
        }
    }

    /// Every pair of bytes stepped, as `Openings::of` did before it stepped one byte of
    /// each class: what the class walk must give.
    fn openings_by_every_byte(dfa: &hybrid::dfa::DFA) -> Openings {
        let mut cache = dfa.create_cache();
        let (mut first, mut pairs) = (ByteSet::default(), alloc::boxed::Box::new([ByteSet::default(); 256]));
        for before in [None, Some(b'\n'), Some(b'\r'), Some(b'a'), Some(b' ')] {
            let config = start::Config::new().anchored(Anchored::Yes).look_behind(before);
            for a in 0..=u8::MAX {
                let start = dfa.start_state(&mut cache, &config).expect("start");
                let after_a = dfa.next_state(&mut cache, start, a).expect("step");
                if after_a.is_dead() {
                    continue;
                }
                first.insert(a);
                for b in 0..=u8::MAX {
                    let start = dfa.start_state(&mut cache, &config).expect("start");
                    let after_a = dfa.next_state(&mut cache, start, a).expect("step");
                    if !dfa.next_state(&mut cache, after_a, b).expect("step").is_dead() {
                        pairs[usize::from(a)].insert(b);
                    }
                }
            }
        }
        Openings { first, pairs }
    }

    #[test]
    fn openings_by_class_table() {
        // (part, pairs a match can start with)
        let cases: &[(&str, u32)] = &[
            (r"ab", 1),
            (r"a+b", 2),
            (r"(?i)ad+res+", 4),
            (r"[a-z]\d", 26 * 10),
            (r"x|[0-9]", 11 * 256),
            (r"(?m)^ab", 1),
            (r"\bab", 1),
            (r"\Bab", 1),
            (r"[\x80-\xff]{2}", 128 * 128),
            (r"(?:name|address|phone)\W{0,3}", 3),
            (r"(?:\W|_)?(?:first|last)\W?name", 194 * 2 + 2), // a non-word byte or `_` before f or l; fi, la
        ];
        for &(part, want_pairs) in cases {
            let dfa = lazy(&parse_hir(part).expect("parses"), MatchKind::All);
            let (got, oracle) = (Openings::of(&dfa).expect("openings"), openings_by_every_byte(&dfa));
            assert_eq!(got.first, oracle.first, "{part}: first bytes");
            assert_eq!(got.pairs, oracle.pairs, "{part}: pairs");
            assert_eq!(got.pairs(), want_pairs, "{part}: how many pairs");
            // A compile cache keeps them: its image reads back whole, a cut one not at all.
            let mut image = Vec::new();
            got.write_image(&mut image);
            assert_eq!(image.len(), Openings::IMAGE_LEN, "{part}");
            assert_eq!(Openings::read_image(&image).as_ref(), Some(&got), "{part}: image");
            assert_eq!(Openings::read_image(&image[..image.len() - 1]), None, "{part}: cut image");
            image.push(0);
            assert_eq!(Openings::read_image(&image), None, "{part}: longer image");
        }
    }
}
