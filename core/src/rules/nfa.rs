//! NFAs made smaller before any automaton is built from them.
//!
//! SpamAssassin's letter tags spell each letter as an alternation of byte sequences
//! (`[aA@]|\xc3[\x80-\x85]|\xf0\x9d(?:\x90[\x80\x9a]|\x91[\x8e\xa8]|...)`), which the
//! Thompson compiler turns into a union with one state for each alternative's first
//! byte. Where those bytes are apart, the alternatives are one state that steps on any
//! of them: the same matches, in far fewer states. A lazy DFA's NFA is shared by every
//! process, and each worker's cache for it keeps two sets as long as its states.

use alloc::vec;
use alloc::vec::Vec;

use regex_automata::nfa::thompson::{self, SparseTransitions, State, Transition};
use regex_automata::util::primitives::StateID;

use super::cache::{nfa_from_image, states_image};

/// Nested unions inlined into their parent at most this deep.
const MAX_INLINE_DEPTH: usize = 8;

/// An alternate of a union once merged: a state of the NFA, or a new state stepping
/// on bytes to where several alternates stepped (by byte).
enum Alternate {
    Old(StateID),
    Merged(Vec<Transition>),
}

/// `nfa` with each run of a union's alternates that step on single bytes, no byte to
/// two different states, merged into one state, and the states then unreached dropped.
/// Priority is kept: a run stays where its alternates were, and within it no byte can
/// go two ways. `None` when nothing merges or `nfa` is not one [`states_image`] takes.
pub(super) fn merge_alternates(nfa: &thompson::NFA) -> Option<thompson::NFA> {
    if nfa.is_utf8() || nfa.is_reverse() {
        return None;
    }
    let states = nfa.states();
    let n = states.len();
    // How many states and starts lead to each state: a union led to by its parent alone
    // can be inlined there without being kept too.
    let mut references = vec![0u32; n];
    let starts = nfa.patterns().filter_map(|p| nfa.start_pattern(p)).chain([nfa.start_anchored(), nfa.start_unanchored()]);
    for id in states.iter().flat_map(successors).chain(starts) {
        if let Some(r) = references.get_mut(id.as_usize()) {
            *r = r.saturating_add(1);
        }
    }
    // States added: each placed after the union it was merged for.
    let mut added: Vec<(usize, State)> = Vec::new();
    let mut replaced: Vec<Option<State>> = vec![None; n];
    // A union left with one alternate is that alternate.
    let mut alias: Vec<Option<StateID>> = vec![None; n];
    for (i, state) in states.iter().enumerate() {
        let alternates: &[StateID] = match state {
            State::Union { alternates } => alternates,
            State::BinaryUnion { alt1, alt2 } => &[*alt1, *alt2],
            _ => continue,
        };
        let mut flat = Vec::with_capacity(alternates.len());
        inline_unions(states, &references, alternates, 0, &mut flat);
        let merged = merge_runs(states, &flat);
        if merged.iter().all(|a| matches!(a, Alternate::Old(_))) && merged.len() == alternates.len() {
            continue;
        }
        let mut ids = Vec::with_capacity(merged.len());
        for a in merged {
            match a {
                Alternate::Old(id) => ids.push(id),
                Alternate::Merged(transitions) => {
                    let id = StateID::new(n + added.len()).ok()?;
                    let state = match transitions.as_slice() {
                        [one] => State::ByteRange { trans: *one },
                        _ => State::Sparse(SparseTransitions { transitions: transitions.into_boxed_slice() }),
                    };
                    added.push((i, state));
                    ids.push(id);
                }
            }
        }
        match ids.as_slice() {
            [one] => *alias.get_mut(i)? = Some(*one),
            [alt1, alt2] => *replaced.get_mut(i)? = Some(State::BinaryUnion { alt1: *alt1, alt2: *alt2 }),
            _ => *replaced.get_mut(i)? = Some(State::Union { alternates: ids.into_boxed_slice() }),
        }
    }
    if added.is_empty() {
        return None;
    }
    let state_of = |id: usize| -> Option<&State> {
        match id.checked_sub(n) {
            None => replaced.get(id)?.as_ref().or_else(|| states.get(id)),
            Some(k) => added.get(k).map(|(_, s)| s),
        }
    };
    let resolve = |mut id: StateID| -> StateID {
        for _ in 0..n {
            match alias.get(id.as_usize()).copied().flatten() {
                Some(to) => id = to,
                None => break,
            }
        }
        id
    };
    let pattern_starts: Vec<StateID> = nfa.patterns().map(|p| nfa.start_pattern(p).map(resolve)).collect::<Option<_>>()?;
    let (anchored, unanchored) = (resolve(nfa.start_anchored()), resolve(nfa.start_unanchored()));
    // States reached from the starts, through the merged states.
    let total = n + added.len();
    let mut reached = vec![false; total];
    let mut stack: Vec<StateID> = pattern_starts.iter().copied().chain([anchored, unanchored]).collect();
    while let Some(id) = stack.pop() {
        let seen = reached.get_mut(id.as_usize())?;
        if core::mem::replace(seen, true) {
            continue;
        }
        for next in successors(state_of(id.as_usize())?) {
            stack.push(resolve(next));
        }
    }
    // The new order: the old states kept, each union's merged states after it.
    let mut order: Vec<usize> = Vec::with_capacity(total);
    let mut merged_for = added.iter().enumerate().map(|(k, &(i, _))| (i, n + k)).peekable();
    for i in 0..n {
        if reached.get(i) == Some(&true) && alias.get(i) == Some(&None) {
            order.push(i);
        }
        while let Some((_, id)) = merged_for.next_if(|&(at, _)| at == i) {
            if reached.get(id) == Some(&true) {
                order.push(id);
            }
        }
    }
    if order.len() >= n {
        return None;
    }
    let mut new_id = vec![StateID::ZERO; total];
    for (to, &from) in order.iter().enumerate() {
        *new_id.get_mut(from)? = StateID::new(to).ok()?;
    }
    let map = |id: StateID| new_id.get(resolve(id).as_usize()).copied();
    let mut out = Vec::with_capacity(order.len());
    for &i in &order {
        out.push(remapped(state_of(i)?, &map)?);
    }
    let starts: Vec<StateID> = pattern_starts.iter().map(|&s| map(s)).collect::<Option<_>>()?;
    let image = states_image(&out, map(anchored)?, map(unanchored)?, &starts)?;
    nfa_from_image(&image)
}

/// `alternates` with each union among them that nothing else leads to replaced by its
/// own alternates, in order (the same order of preference), down to [`MAX_INLINE_DEPTH`].
fn inline_unions(states: &[State], references: &[u32], alternates: &[StateID], depth: usize, out: &mut Vec<StateID>) {
    for &a in alternates {
        let inner = match states.get(a.as_usize()) {
            _ if depth >= MAX_INLINE_DEPTH || references.get(a.as_usize()) != Some(&1) => None,
            Some(State::Union { alternates }) => Some(&alternates[..]),
            Some(State::BinaryUnion { alt1, alt2 }) => Some(&[*alt1, *alt2][..]),
            _ => None,
        };
        match inner {
            Some(inner) => inline_unions(states, references, inner, depth + 1, out),
            None => out.push(a),
        }
    }
}

/// The byte transitions of a state that steps on one byte, none for any other state.
fn byte_steps(state: Option<&State>) -> Option<&[Transition]> {
    match state? {
        State::ByteRange { trans } => Some(core::slice::from_ref(trans)),
        State::Sparse(sparse) => Some(&sparse.transitions),
        _ => None,
    }
}

/// `alternates` with each run of byte-stepping states that send no byte two ways
/// merged into one.
fn merge_runs(states: &[State], alternates: &[StateID]) -> Vec<Alternate> {
    let mut out = Vec::with_capacity(alternates.len());
    let mut run: Vec<StateID> = Vec::new();
    let mut next_of: [Option<StateID>; 256] = [None; 256];
    for &a in alternates {
        let Some(steps) = byte_steps(states.get(a.as_usize())) else {
            close_run(&mut run, &mut next_of, &mut out);
            out.push(Alternate::Old(a));
            continue;
        };
        let clashes = steps.iter().any(|t| (t.start..=t.end).any(|b| next_of[usize::from(b)].is_some_and(|to| to != t.next)));
        if clashes {
            close_run(&mut run, &mut next_of, &mut out);
        }
        for t in steps {
            for b in t.start..=t.end {
                next_of[usize::from(b)] = Some(t.next);
            }
        }
        run.push(a);
    }
    close_run(&mut run, &mut next_of, &mut out);
    out
}

/// Ends a run of [`merge_runs`]: one state stays itself; more become one whose ranges
/// join neighbouring bytes that go to the same state.
fn close_run(run: &mut Vec<StateID>, next_of: &mut [Option<StateID>; 256], out: &mut Vec<Alternate>) {
    match run.as_slice() {
        [] => {}
        [one] => out.push(Alternate::Old(*one)),
        _ => {
            let mut transitions: Vec<Transition> = Vec::new();
            for (b, next) in next_of.iter().enumerate() {
                let Some(next) = *next else { continue };
                let b = b as u8;
                match transitions.last_mut() {
                    Some(t) if t.next == next && t.end.checked_add(1) == Some(b) => t.end = b,
                    _ => transitions.push(Transition { start: b, end: b, next }),
                }
            }
            out.push(Alternate::Merged(transitions));
        }
    }
    run.clear();
    *next_of = [None; 256];
}

/// The states `state` moves to, by byte or not.
fn successors(state: &State) -> Vec<StateID> {
    match state {
        State::ByteRange { trans } => vec![trans.next],
        State::Sparse(sparse) => sparse.transitions.iter().map(|t| t.next).collect(),
        State::Dense(dense) => dense.transitions.to_vec(),
        State::Look { next, .. } | State::Capture { next, .. } => vec![*next],
        State::Union { alternates } => alternates.to_vec(),
        State::BinaryUnion { alt1, alt2 } => vec![*alt1, *alt2],
        State::Fail | State::Match { .. } => Vec::new(),
    }
}

/// `state` with its state ids mapped by `map`.
fn remapped(state: &State, map: &impl Fn(StateID) -> Option<StateID>) -> Option<State> {
    let trans = |t: &Transition| Some(Transition { next: map(t.next)?, ..*t });
    Some(match state {
        State::ByteRange { trans: t } => State::ByteRange { trans: trans(t)? },
        State::Sparse(sparse) => State::Sparse(SparseTransitions { transitions: sparse.transitions.iter().map(trans).collect::<Option<_>>()? }),
        State::Look { look, next } => State::Look { look: *look, next: map(*next)? },
        State::Union { alternates } => State::Union { alternates: alternates.iter().map(|&a| map(a)).collect::<Option<_>>()? },
        State::BinaryUnion { alt1, alt2 } => State::BinaryUnion { alt1: map(*alt1)?, alt2: map(*alt2)? },
        State::Fail => State::Fail,
        State::Match { pattern_id } => State::Match { pattern_id: *pattern_id },
        State::Dense(_) | State::Capture { .. } => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::compile::nfa_compiler;
    use alloc::string::String;
    use regex_automata::dfa::{dense, Automaton, StartKind};
    use regex_automata::{Anchored, Input, MatchKind, PatternSet};

    fn unmerged(patterns: &[&str]) -> thompson::NFA {
        nfa_compiler().build_many(patterns).expect("patterns build")
    }

    fn dfa_of(nfa: &thompson::NFA, kind: MatchKind) -> dense::DFA<Vec<u32>> {
        let config = dense::Config::new().match_kind(kind).start_kind(StartKind::Both);
        dense::Builder::new().configure(config).build_from_nfa(nfa).expect("a dense DFA")
    }

    /// The merged NFA finds what the NFA it came from finds in `hay`: the leftmost-first
    /// match from every place, anchored or not, and which patterns match anywhere.
    fn assert_same_matches(before: &thompson::NFA, after: &thompson::NFA, hays: &[&[u8]], what: &str) {
        let (first_before, first_after) = (dfa_of(before, MatchKind::LeftmostFirst), dfa_of(after, MatchKind::LeftmostFirst));
        let (all_before, all_after) = (dfa_of(before, MatchKind::All), dfa_of(after, MatchKind::All));
        for hay in hays {
            for start in 0..=hay.len() {
                for mode in [Anchored::No, Anchored::Yes] {
                    let input = Input::new(hay).range(start..).anchored(mode);
                    let want = first_before.try_search_fwd(&input).expect("searches");
                    assert_eq!(first_after.try_search_fwd(&input).expect("searches"), want, "{what}: {hay:?} from {start} {mode:?}");
                    let (mut want, mut got) = (PatternSet::new(before.pattern_len()), PatternSet::new(after.pattern_len()));
                    all_before.try_which_overlapping_matches(&input, &mut want).expect("searches");
                    all_after.try_which_overlapping_matches(&input, &mut got).expect("searches");
                    assert_eq!(got, want, "{what}: which match in {hay:?} from {start} {mode:?}");
                }
            }
        }
    }

    /// Patterns, whether states merge, texts.
    type Case<'a> = (&'a [&'a str], bool, &'a [&'a [u8]]);

    #[test]
    fn merge_alternates_table() {
        let cases: &[Case<'_>] = &[
            // A letter tag: first bytes apart merge, then each branch's second byte.
            (
                &[r"(?:[aA@]|\xc3[\x80-\x85]|\xc4[\x80\x81]|&\#97;)x"],
                true,
                &[b"ax", b"\xc3\x81x", b"\xc4\x81x \xc4\x82x", b"&#97;x", b"&#98;x", b"\xc3x"],
            ),
            (&[r"\xf0\x9d(?:\x90[\x80\x9a]|\x91[\x8e\xa8]|\x92\x82)!"], true, &[b"\xf0\x9d\x91\xa8!", b"\xf0\x9d\x92\x82!", b"\xf0\x9d\x92\x83!"]),
            // Both alternates step on `a`, to different states: preference decides.
            (&[r"(?:a|ab)"], false, &[b"ab", b"b"]),
            (&[r"(?:ab|a)"], false, &[b"ab", b"ba"]),
            // `a` and `b` merge; `a+c` starts a run of its own after them.
            (&[r"(?:a|b|a+c)d"], true, &[b"ad", b"aacd", b"bd", b"acd"]),
            // The same byte to the same state twice is one step.
            (&[r"(?:[ab]|[bc]|xy)z"], true, &[b"bz", b"cz", b"xyz"]),
            // Loops: a greedy and a lazy union, whose order decides where a match ends.
            // (Alternates all literals are a trie already: a class keeps these unions.)
            (&[r"(?:x|[yw]w)*z"], true, &[b"xywz", b"z", b"xxy"]),
            (&[r"a(?:x|[yw]z)*?"], true, &[b"axyz", b"a"]),
            (&[r"a(?:x|[yw]z)*"], true, &[b"axyzx", b"ayq"]),
            // An empty alternate ends a run: what comes before it is preferred.
            (&[r"(?:a|[bx]y|)c"], true, &[b"ac", b"c", b"byc"]),
            (&[r"(?:|a|[bx]y)c?"], true, &[b"ac", b"c", b"by"]),
            (&[r"q(?:a|[bx]y|)"], true, &[b"qa", b"q", b"qxy"]),
            // Looks between alternates.
            (&[r"\b(?:a[bx]|cd|e)\b"], true, &[b"ab cd", b"xab", b"e!"]),
            (&[r"(?m)^(?:a|b|[cd]\n)$"], true, &[b"a\nb", b"c\n\n", b"ab"]),
            // Several patterns, each with its own starts and match.
            (&[r"(?:a|[bx]y)c", r"b|d", r"x(?:y|[zw]q)"], true, &[b"byc", b"d xzq", b"ac xy"]),
            (&[r"abc"], false, &[b"abc"]),
        ];
        for &(patterns, merges, hays) in cases {
            let before = unmerged(patterns);
            let after = merge_alternates(&before);
            assert_eq!(after.is_some(), merges, "{patterns:?}");
            let Some(after) = after else { continue };
            assert!(after.states().len() < before.states().len(), "{patterns:?}: {} states, {} before", after.states().len(), before.states().len());
            assert_same_matches(&before, &after, hays, &alloc::format!("{patterns:?}"));
            // Merged once is merged.
            assert!(merge_alternates(&after).is_none(), "{patterns:?} merges twice");
        }
    }

    #[test]
    fn merge_alternates_at_random() {
        // Patterns of random pieces, alternations of bytes and sequences sharing bytes
        // among them, over random texts of their bytes.
        let pieces = [
            r"(?:a|bc|c)", r"(?:ab|b|ca)", r"(?:a|b)*", r"(?:a|b)*?", r"(?:x|y|xa)", r"[ab]", r"\b", r"(?m)^", r"(?m)$", r"c+",
            r"(?:|a|b)", r"(?:a|b|)", r"(?:a|(?:b|c))", r"(?:(?:a|x)|(?:b|y))z?", r"(?:a+|b)", r".",
        ];
        let mut random = crate::rules::Xorshift(0x2545_f491);
        let mut merged = 0;
        for _ in 0..400 {
            let count = 1 + random.below(2);
            let patterns: Vec<String> = (0..count)
                .map(|_| {
                    let len = 1 + random.below(4);
                    (0..len).map(|_| pieces[random.below(pieces.len())]).collect()
                })
                .collect();
            let patterns: Vec<&str> = patterns.iter().map(String::as_str).collect();
            let before = unmerged(&patterns);
            let Some(after) = merge_alternates(&before) else { continue };
            merged += 1;
            let hays: Vec<Vec<u8>> = (0..6).map(|_| (0..random.below(10)).map(|_| b"abcxyz \n"[random.below(8)]).collect()).collect();
            let hays: Vec<&[u8]> = hays.iter().map(Vec::as_slice).collect();
            assert_same_matches(&before, &after, &hays, &alloc::format!("{patterns:?}"));
        }
        assert!(merged > 100, "{merged} of 400 merged");
    }
}
