//! A long text walked as two halves at once: an automaton's step on a byte waits on its
//! step on the byte before, so one walk leaves the CPU idle where two overlap.

/// An Aho-Corasick automaton over a table's literals, as the walks see it.
pub(super) trait Walk {
    type State: Copy;
    /// The state before any byte.
    fn start(&self) -> Self::State;
    /// The state after `byte`.
    fn step(&self, state: Self::State, byte: u8) -> Self::State;
    /// Whether `state` ends a literal (or may: `report` then tells).
    fn ends_literal(&self, state: Self::State) -> bool;
    /// The longest literal: a state depends on no more bytes before it than this.
    fn longest(&self) -> usize;
    /// Reports the literals `state`, reached at `at`, ends.
    fn report(&self, state: Self::State, at: usize, hit: &mut impl FnMut(usize, usize));
    /// Reports every hit from `at` to the end of `text`, starting in `state`.
    fn hits_from(&self, state: Self::State, text: &[u8], at: usize, hit: &mut impl FnMut(usize, usize));
}

/// Texts at least this long are walked as two halves at once.
pub(super) const TWO_HALVES_FROM: usize = 512;
/// Hits of the second half held until the first half is done; past them, the second
/// half waits for the first.
const HELD_HITS: usize = 64;

/// Calls `hit(literal, start)` for every hit of `walk`'s literals in `text`, in the
/// order they end, as one walk from the start would.
pub(super) fn for_each_hit<W: Walk>(walk: &W, text: &[u8], hit: &mut impl FnMut(usize, usize)) {
    let (start, longest) = (walk.start(), walk.longest());
    if text.len() < TWO_HALVES_FROM || longest > text.len() / 4 || u32::try_from(text.len()).is_err() {
        walk.hits_from(start, text, 0, hit);
        return;
    }
    // The second half starts `longest` bytes before `mid`, from the start state: by
    // `mid` it is in the state a walk from the text's start reaches there, and it reports
    // only the hits that end after `mid`. They wait in `held`, so that hits still come in
    // the order they end. Both halves take as many steps.
    let mid = (text.len() + longest) / 2;
    let (first, _) = text.split_at(mid);
    let mut held = [(start, 0u32); HELD_HITS];
    let mut count = 0usize;
    let (mut a_state, mut a_at) = (start, 0usize);
    let (mut b_state, mut b_at) = (start, mid - longest);
    let mut waiting = false;
    while let (Some(&a_byte), Some(&b_byte)) = (first.get(a_at), text.get(b_at)) {
        a_state = walk.step(a_state, a_byte);
        b_state = walk.step(b_state, b_byte);
        a_at += 1;
        b_at += 1;
        if walk.ends_literal(a_state) {
            walk.report(a_state, a_at, hit);
        }
        if walk.ends_literal(b_state) && b_at > mid {
            match held.get_mut(count) {
                Some(slot) => {
                    *slot = (b_state, b_at as u32);
                    count += 1;
                }
                None => {
                    // Full: the second half goes on after the first, from this hit.
                    waiting = true;
                    break;
                }
            }
        }
    }
    walk.hits_from(a_state, first, a_at, hit);
    for &(state, at) in held.get(..count).unwrap_or_default() {
        walk.report(state, at as usize, hit);
    }
    if waiting {
        walk.report(b_state, b_at, hit);
    }
    walk.hits_from(b_state, text, b_at, hit);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::literal::{compact::CompactDfa, LiteralAutomaton, NfaWalk};
    use alloc::vec::Vec;

    /// Every hit as one walk from the start reports them, in order.
    fn one_walk<W: Walk>(walk: &W, text: &[u8]) -> Vec<(usize, usize)> {
        let mut hits = Vec::new();
        walk.hits_from(walk.start(), text, 0, &mut |literal, start| hits.push((literal, start)));
        hits
    }

    fn halves<W: Walk>(walk: &W, text: &[u8]) -> Vec<(usize, usize)> {
        let mut hits = Vec::new();
        for_each_hit(walk, text, &mut |literal, start| hits.push((literal, start)));
        hits
    }

    /// Literals, a text length, the bytes the text is drawn from.
    type HalvesCase<'a> = (&'a [&'a [u8]], usize, &'a [u8]);

    #[test]
    fn two_halves_report_what_one_walk_does_in_its_order_table() {
        // Hits rare, dense enough to fill the held hits (every byte ends "a"), a literal
        // as long as a quarter of the text, lengths on both sides of the threshold.
        let long = alloc::vec![b'a'; 200];
        let cases: &[HalvesCase<'_>] = &[
            (&[b"he", b"she", b"his", b"hers"], 4_000, b"hers "),
            (&[b"a"], 2_000, b"a"),
            (&[b"a", b"aa", b"aaa"], 1_000, b"ab"),
            (&[b"xyz"], 600, b"ab"),
            (&[b"ab", &long], 800, b"a"),
            (&[b"ab", &long], 1_000, b"ab"),
            (&[b"", b"b"], TWO_HALVES_FROM - 1, b"ab"),
            (&[b"ba", b"ab"], TWO_HALVES_FROM, b"ab"),
            (&[b"ba", b"abab"], TWO_HALVES_FROM + 1, b"ab"),
        ];
        let mut random = crate::rules::Xorshift(0x9e37_79b9);
        for &(literals, len, alphabet) in cases {
            let literals: Vec<Vec<u8>> = literals.iter().map(|l| l.to_vec()).collect();
            let dfa = CompactDfa::new(&literals, usize::MAX).expect("fits");
            let Ok(LiteralAutomaton::Nfa(nfa)) = LiteralAutomaton::nfa(&literals) else { panic!("an NFA") };
            let nfa = NfaWalk(&*nfa);
            for _ in 0..20 {
                let text: Vec<u8> = (0..len).map(|_| alphabet[random.below(alphabet.len())]).collect();
                let want = one_walk(&dfa, &text);
                assert_eq!(halves(&dfa, &text), want, "DFA: {literals:?} over {len} bytes");
                // The NFA finds the same hits (and the empty literal everywhere, which the
                // DFA never reports); it orders those ending together its own way.
                let (mut from_nfa, mut sorted) = (halves(&nfa, &text), want.clone());
                assert_eq!(from_nfa, one_walk(&nfa, &text), "NFA: {literals:?} over {len} bytes");
                from_nfa.retain(|&(literal, _)| !literals[literal].is_empty());
                from_nfa.sort_unstable();
                sorted.sort_unstable();
                assert_eq!(from_nfa, sorted, "NFA against DFA: {literals:?} over {len} bytes");
            }
        }
    }
}
