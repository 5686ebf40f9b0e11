//! NFAs made smaller before any automaton is built from them.
//!
//! SpamAssassin's letter tags spell each letter as an alternation of byte sequences
//! (`[aA@]|\xc3[\x80-\x85]|\xf0\x9d(?:\x90[\x80\x9a]|\x91[\x8e\xa8]|...)`), which the
//! Thompson compiler turns into a union with one state for each alternative's first
//! byte. Where those bytes are apart, the alternatives are one state that steps on any
//! of them; and states that step alike to the same states are one state. The same
//! matches, in far fewer states: a lazy DFA's NFA is shared by every process, and each
//! worker's cache for it keeps two sets as long as its states.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use regex_automata::nfa::thompson::{self, SparseTransitions, State, Transition};
use regex_automata::util::primitives::StateID;

use super::cache::{nfa_from_image, states_image};

/// Nested unions inlined into their parent at most this deep.
const MAX_INLINE_DEPTH: usize = 8;
/// Rounds of both passes of [`shrink`] at most.
const MAX_SHRINK_ROUNDS: usize = 8;
/// [`merge_equal_states`]'s marks for a state not yet found and one whose successors
/// are still being visited; classes are state indexes, below both.
const UNSEEN: u32 = u32::MAX;
const OPEN: u32 = u32::MAX - 1;

/// An NFA's states and where its searches start.
struct Graph {
    states: Vec<State>,
    anchored: StateID,
    unanchored: StateID,
    pattern_starts: Vec<StateID>,
}

/// `nfa` made smaller: [`merge_alternates`] and [`merge_equal_states`] by turns, each
/// letting the other find more, until neither finds anything. `None` when nothing
/// shrinks, or `nfa` is not one the compile cache's image holds.
pub(super) fn shrink(nfa: &thompson::NFA) -> Option<thompson::NFA> {
    if nfa.is_utf8() || nfa.is_reverse() {
        return None;
    }
    let pattern_starts = nfa.patterns().map(|p| nfa.start_pattern(p)).collect::<Option<_>>()?;
    let mut graph = Graph { states: nfa.states().to_vec(), anchored: nfa.start_anchored(), unanchored: nfa.start_unanchored(), pattern_starts };
    let mut shrunk = false;
    for _ in 0..MAX_SHRINK_ROUNDS {
        let mut round = false;
        for pass in [merge_alternates, merge_equal_states] {
            if let Some(smaller) = pass(&graph) {
                graph = smaller;
                round = true;
            }
        }
        if !round {
            break;
        }
        shrunk = true;
    }
    if !shrunk {
        return None;
    }
    let image = states_image(&graph.states, graph.anchored, graph.unanchored, &graph.pattern_starts)?;
    nfa_from_image(&image)
}

/// An alternate of a union once merged: a state of the NFA, or a new state stepping
/// on bytes to where several alternates stepped (by byte).
enum Alternate {
    Old(StateID),
    Merged(Vec<Transition>),
}

/// `graph` with each run of a union's alternates that step on single bytes, no byte to
/// two different states, merged into one state, and the states then unreached dropped.
/// Priority is kept: a run stays where its alternates were, and within it no byte can
/// go two ways. `None` when nothing merges.
fn merge_alternates(graph: &Graph) -> Option<Graph> {
    let states = &graph.states[..];
    let n = states.len();
    // How many states and starts lead to each state: a union led to by its parent alone
    // can be inlined there without being kept too.
    let mut references = vec![0u32; n];
    let starts = graph.pattern_starts.iter().copied().chain([graph.anchored, graph.unanchored]);
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
                    ids.push(StateID::new(n + added.len()).ok()?);
                    // One range is made a `ByteRange` when the states are renumbered.
                    added.push((i, State::Sparse(SparseTransitions { transitions: transitions.into_boxed_slice() })));
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
    let pattern_starts: Vec<StateID> = graph.pattern_starts.iter().map(|&s| resolve(s)).collect();
    let (anchored, unanchored) = (resolve(graph.anchored), resolve(graph.unanchored));
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
    let pattern_starts = pattern_starts.iter().map(|&s| map(s)).collect::<Option<_>>()?;
    Some(Graph { states: out, anchored: map(anchored)?, unanchored: map(unanchored)?, pattern_starts })
}

/// `graph` with states that step alike to the same states made one. Each state's class
/// is found once the classes of the states it goes to are (depth first, each state
/// after its successors), so two chains of equal states become one in a single pass;
/// a state on a cycle still open stands for itself. `None` when no two states are
/// equal.
fn merge_equal_states(graph: &Graph) -> Option<Graph> {
    let states = &graph.states[..];
    let n = states.len();
    if n >= OPEN as usize {
        return None;
    }
    // A state's class: the first state found with what it does.
    let mut class = vec![UNSEEN; n];
    let mut seen: BTreeMap<Vec<u32>, u32> = BTreeMap::new();
    // (state, its next successor to visit)
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if class.get(root) != Some(&UNSEEN) {
            continue;
        }
        *class.get_mut(root)? = OPEN;
        stack.push((root, 0));
        while let Some((i, k)) = stack.last_mut() {
            let (i, state) = (*i, states.get(*i)?);
            if let Some(next) = successor(state, *k) {
                *k += 1;
                let to = class.get_mut(next.as_usize())?;
                if *to == UNSEEN {
                    *to = OPEN;
                    stack.push((next.as_usize(), 0));
                }
                continue;
            }
            let key = state_key(state, i as u32, &class)?;
            *class.get_mut(i)? = *seen.entry(key).or_insert(i as u32);
            stack.pop();
        }
    }
    if seen.len() == n {
        return None;
    }
    // The first state found of each class stays, in its place; the others go.
    let mut new_id = vec![StateID::ZERO; n];
    let mut kept = 0;
    for (i, &c) in class.iter().enumerate() {
        if c as usize == i {
            *new_id.get_mut(i)? = StateID::new(kept).ok()?;
            kept += 1;
        }
    }
    let map = |id: StateID| new_id.get(*class.get(id.as_usize())? as usize).copied();
    let states = states.iter().enumerate().filter(|&(i, _)| class.get(i) == Some(&(i as u32))).map(|(_, s)| remapped(s, &map)).collect::<Option<_>>()?;
    let pattern_starts = graph.pattern_starts.iter().map(|&s| map(s)).collect::<Option<_>>()?;
    Some(Graph { states, anchored: map(graph.anchored)?, unanchored: map(graph.unanchored)?, pattern_starts })
}

/// The `k`th state `state` moves to, by byte or not.
fn successor(state: &State, k: usize) -> Option<StateID> {
    match state {
        State::ByteRange { trans } => (k == 0).then_some(trans.next),
        State::Sparse(sparse) => sparse.transitions.get(k).map(|t| t.next),
        State::Dense(dense) => dense.transitions.get(k).copied(),
        State::Look { next, .. } | State::Capture { next, .. } => (k == 0).then_some(*next),
        State::Union { alternates } => alternates.get(k).copied(),
        State::BinaryUnion { alt1, alt2 } => [*alt1, *alt2].get(k).copied(),
        State::Fail | State::Match { .. } => None,
    }
}

/// What `state` (the `i`th) does, with the states it goes to by their `class` (one
/// still open by itself, past the last class): equal for two states only if either can
/// stand for the other.
fn state_key(state: &State, i: u32, class: &[u32]) -> Option<Vec<u32>> {
    let n = class.len() as u32;
    let c = |id: StateID| match class.get(id.as_usize()).copied()? {
        OPEN => n.checked_add(id.as_u32()),
        c => Some(c),
    };
    Some(match state {
        State::ByteRange { trans } => vec![0, u32::from(trans.start), u32::from(trans.end), c(trans.next)?],
        State::Sparse(sparse) => {
            let mut key = vec![1];
            for t in sparse.transitions.iter() {
                key.extend([u32::from(t.start), u32::from(t.end), c(t.next)?]);
            }
            key
        }
        State::Union { alternates } => core::iter::once(Some(2)).chain(alternates.iter().map(|&a| c(a))).collect::<Option<_>>()?,
        State::BinaryUnion { alt1, alt2 } => vec![3, c(*alt1)?, c(*alt2)?],
        State::Look { look, next } => vec![4, look.as_repr(), c(*next)?],
        State::Match { pattern_id } => vec![5, pattern_id.as_u32()],
        // Never equal to another.
        State::Fail | State::Dense(_) | State::Capture { .. } => vec![6, i],
    })
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
fn successors(state: &State) -> impl Iterator<Item = StateID> + '_ {
    (0..).map_while(move |k| successor(state, k))
}

/// `state` with its state ids mapped by `map`; neighbouring ranges that now go to one
/// state become one range.
fn remapped(state: &State, map: &impl Fn(StateID) -> Option<StateID>) -> Option<State> {
    let trans = |t: &Transition| Some(Transition { next: map(t.next)?, ..*t });
    Some(match state {
        State::ByteRange { trans: t } => State::ByteRange { trans: trans(t)? },
        State::Sparse(sparse) => {
            let mut transitions: Vec<Transition> = Vec::with_capacity(sparse.transitions.len());
            for t in sparse.transitions.iter() {
                let t = trans(t)?;
                match transitions.last_mut() {
                    Some(last) if last.next == t.next && last.end.checked_add(1) == Some(t.start) => last.end = t.end,
                    _ => transitions.push(t),
                }
            }
            match transitions.as_slice() {
                [one] => State::ByteRange { trans: *one },
                _ => State::Sparse(SparseTransitions { transitions: transitions.into_boxed_slice() }),
            }
        }
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
    fn shrink_table() {
        let cases: &[Case<'_>] = &[
            // Unions of the same alternates in another order are not equal: the
            // preferred one decides where `y`'s match ends.
            (&[r"(?:x(?:[ab]c|[ab])|y(?:[ab]|[ab]c))"], true, &[b"xac", b"yac", b"yb"]),
            // Equal tails: `[xy]z` twice is once, and then `a` and `b` step alike.
            (&[r"(?:a[xy]z|b[xy]z|c)q"], true, &[b"axzq", b"byzq", b"cq", b"azq"]),
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
            let after = shrink(&before);
            assert_eq!(after.is_some(), merges, "{patterns:?}");
            let Some(after) = after else { continue };
            assert!(after.states().len() < before.states().len(), "{patterns:?}: {} states, {} before", after.states().len(), before.states().len());
            assert_same_matches(&before, &after, hays, &alloc::format!("{patterns:?}"));
            // Merged once is merged.
            assert!(shrink(&after).is_none(), "{patterns:?} shrinks twice");
        }
    }

    #[test]
    fn shrink_counts_table() {
        // (pattern, states after: the unanchored start's two, then the pattern's; byte
        // classes after, end of input included)
        let cases = [
            // sparse(a-b => tail, c => q), [xy], z, q, match: `a` and `b` one class
            (r"(?:a[xy]z|b[xy]z|c)q", 7, 10),
            // \xce's two branches one: x, sparse(\xce => [\x92\xb2], b => y), [\x92\xb2], y, match
            (r"x(?:\xce[\x92\xb2]|b|\xce[\x92\xb2])y", 7, 13),
            // Equal chains longer than the rounds of both passes: sparse(a-b => [xy]),
            // [xy], b to l, match
            (r"(?:a[xy]bcdefghijkl|b[xy]bcdefghijkl)", 16, 17),
        ];
        for (pattern, states, classes) in cases {
            let shrunk = shrink(&unmerged(&[pattern])).expect("shrinks");
            assert_eq!((shrunk.states().len(), shrunk.byte_classes().alphabet_len()), (states, classes), "{pattern}: {shrunk:?}");
        }
    }

    #[test]
    fn shrink_at_random() {
        // Patterns of random pieces, alternations of bytes and sequences sharing bytes
        // among them, equal tails, counted and lazy repeats, over random texts of their
        // bytes (30,000 sets of patterns passed once; 400 each run).
        let pieces = [
            r"(?:a|bc|c)", r"(?:ab|b|ca)", r"(?:a|b)*", r"(?:a|b)*?", r"(?:x|y|xa)", r"[ab]", r"\b", r"(?m)^", r"(?m)$", r"c+",
            r"(?:|a|b)", r"(?:a|b|)", r"(?:a|(?:b|c))", r"(?:(?:a|x)|(?:b|y))z?", r"(?:a+|b)", r".",
            r"(?:a[xy]z|b[xy]z)", r"(?:x(?:[ab]c|[ab])|y(?:[ab]|[ab]c))", r"[ab]{2,3}", r"(?:a[bc]){1,3}?", r"(?:ab|cb|[ac]x)*",
            r"\B", r"(?i)X",
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
            let Some(after) = shrink(&before) else { continue };
            merged += 1;
            let hays: Vec<Vec<u8>> = (0..6).map(|_| (0..random.below(10)).map(|_| b"abcxyz \n"[random.below(8)]).collect()).collect();
            let hays: Vec<&[u8]> = hays.iter().map(Vec::as_slice).collect();
            assert_same_matches(&before, &after, &hays, &alloc::format!("{patterns:?}"));
        }
        assert!(merged > 100, "{merged} of 400 merged");
    }
}
