//! A prefilter table's Aho-Corasick DFA in compact rows: ASCII case is folded into the
//! byte classes (a letter and its other case share a column, every byte no literal holds
//! shares one more), and a state is a 16-bit row number. A table of letters, digits and
//! punctuation needs 64 columns of two bytes where the crate's case-insensitive DFA has
//! up to 256 of four, so tables that would be the crate's NFA fit as a DFA.

use alloc::vec;
use alloc::vec::Vec;

use super::halves::{self, Walk};

/// Most states: a row number is 16 bits, one of them kept for "no edge" while building.
const MAX_STATES: usize = u16::MAX as usize;
/// "No trie edge" while building.
const NO_EDGE: u16 = u16::MAX;

/// The Aho-Corasick DFA (overlapping, every hit reported) of a set of literals, ASCII
/// case ignored.
pub(crate) struct CompactDfa {
    /// Byte → column.
    columns: [u8; 256],
    /// log2 of the row width.
    shift: u32,
    /// Row by row, the next state of each state on each column. The states that end a
    /// literal are numbered first.
    next: Vec<u16>,
    /// States below this one end at least one literal.
    matching: u16,
    start: u16,
    /// The literals state `s` ends: `ended[ended_from[s]..ended_from[s + 1]]`.
    ended_from: Vec<u32>,
    ended: Vec<u32>,
    /// Each literal's length, for where its hit starts.
    lens: Vec<u32>,
    /// The longest literal: a state depends on no more bytes than this.
    longest: usize,
}

/// Why a table gets no compact DFA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TooBig {
    /// More trie states than a row number can name.
    States(usize),
    /// More bytes than the caller allows.
    Bytes(usize),
}

impl core::fmt::Display for TooBig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TooBig::States(n) => write!(f, "{n} trie states, more than a 16-bit row number names"),
            TooBig::Bytes(n) => write!(f, "a {n}-byte table, over the bound"),
        }
    }
}

impl CompactDfa {
    /// The DFA of `literals` (their ids are their indices), or why not: more states than
    /// 16 bits name or more than `limit` bytes. An empty literal never hits.
    pub(crate) fn new(literals: &[Vec<u8>], limit: usize) -> Result<CompactDfa, TooBig> {
        let (columns, width) = fold_columns(literals);
        let shift = width.trailing_zeros();
        let states = 1 + trie_size(literals);
        if states > MAX_STATES {
            return Err(TooBig::States(states));
        }
        let bytes = (states << shift) * 2;
        if bytes > limit {
            return Err(TooBig::Bytes(bytes));
        }
        // The trie: edges where a literal goes on, the literals each node ends.
        let mut next = vec![NO_EDGE; width];
        let mut ends: Vec<Vec<u32>> = vec![Vec::new()];
        for (id, literal) in literals.iter().enumerate() {
            if literal.is_empty() {
                continue;
            }
            let mut node = 0usize;
            for &byte in literal {
                let slot = (node << shift) | usize::from(columns[usize::from(byte)]);
                node = match next.get(slot).copied() {
                    Some(child) if child != NO_EDGE => usize::from(child),
                    _ => {
                        let child = ends.len();
                        ends.push(Vec::new());
                        next.resize((child + 1) << shift, NO_EDGE);
                        if let Some(edge) = next.get_mut(slot) {
                            *edge = child as u16;
                        }
                        child
                    }
                };
            }
            if let Some(e) = ends.get_mut(node) {
                e.push(id as u32);
            }
        }
        // Breadth first, each node's missing edges are those of its longest proper suffix
        // in the trie (its failure node), whose row is complete by then; a node ends what
        // its failure node ends too.
        let mut fail = vec![0u16; ends.len()];
        let mut order = Vec::with_capacity(ends.len());
        order.push(0u16);
        let mut i = 0usize;
        while let Some(&node) = order.get(i) {
            i += 1;
            let node = usize::from(node);
            let failure = usize::from(fail.get(node).copied().unwrap_or(0));
            for column in 0..width {
                let slot = (node << shift) | column;
                let fallback = if node == 0 { 0 } else { next.get((failure << shift) | column).copied().unwrap_or(0) };
                match next.get(slot).copied() {
                    Some(NO_EDGE) | None => {
                        if let Some(edge) = next.get_mut(slot) {
                            *edge = fallback;
                        }
                    }
                    Some(child) => {
                        if let Some(f) = fail.get_mut(usize::from(child)) {
                            *f = fallback;
                        }
                        let inherited = ends.get(usize::from(fallback)).cloned().unwrap_or_default();
                        if let Some(e) = ends.get_mut(usize::from(child)) {
                            e.extend(inherited);
                        }
                        order.push(child);
                    }
                }
            }
        }
        // Renumbered: the matching states first, so one comparison tells a hit.
        let mut renumber = vec![0u16; ends.len()];
        let mut matching = 0u16;
        for (node, e) in ends.iter().enumerate() {
            if !e.is_empty() {
                renumber[node] = matching;
                matching += 1;
            }
        }
        let mut other = matching;
        for (node, e) in ends.iter().enumerate() {
            if e.is_empty() {
                renumber[node] = other;
                other += 1;
            }
        }
        let mut rows = vec![0u16; next.len()];
        let mut ended_from = vec![0u32; usize::from(matching) + 1];
        let mut ended = Vec::new();
        let mut by_new: Vec<usize> = (0..ends.len()).collect();
        by_new.sort_unstable_by_key(|&node| renumber[node]);
        for (new, &node) in by_new.iter().enumerate() {
            let (Some(from), Some(to)) = (next.get(node << shift..(node + 1) << shift), rows.get_mut(new << shift..(new + 1) << shift))
            else {
                continue;
            };
            for (t, &f) in to.iter_mut().zip(from) {
                *t = renumber[usize::from(f)];
            }
            if new < usize::from(matching) {
                ended.extend(ends.get(node).into_iter().flatten());
                if let Some(end) = ended_from.get_mut(new + 1) {
                    *end = ended.len() as u32;
                }
            }
        }
        Ok(CompactDfa {
            columns,
            shift,
            next: rows,
            matching,
            start: renumber[0],
            ended_from,
            ended,
            lens: literals.iter().map(|l| l.len() as u32).collect(),
            longest: literals.iter().map(Vec::len).max().unwrap_or(0),
        })
    }

    /// Calls `hit(literal, start)` for every occurrence of every literal in `text`,
    /// overlapping ones too, in the order they end.
    pub(crate) fn for_each_hit(&self, text: &[u8], mut hit: impl FnMut(usize, usize)) {
        halves::for_each_hit(self, text, &mut hit);
    }

    /// Steps from `state` over `text` from `at`, four bytes a round, until a state that
    /// ends a literal: it, the position after its byte and true; or the state at the end
    /// and false.
    fn to_match(&self, mut state: usize, text: &[u8], mut at: usize) -> (usize, usize, bool) {
        let matching = usize::from(self.matching);
        let step = |state, byte| self.step(state, byte);
        while let Some(&[b0, b1, b2, b3]) = text.get(at..).and_then(<[u8]>::first_chunk::<4>) {
            let s0 = step(state, b0);
            if s0 < matching {
                return (s0, at + 1, true);
            }
            let s1 = step(s0, b1);
            if s1 < matching {
                return (s1, at + 2, true);
            }
            let s2 = step(s1, b2);
            if s2 < matching {
                return (s2, at + 3, true);
            }
            state = step(s2, b3);
            at += 4;
            if state < matching {
                return (state, at, true);
            }
        }
        while let Some(&byte) = text.get(at) {
            state = step(state, byte);
            at += 1;
            if state < matching {
                return (state, at, true);
            }
        }
        (state, at, false)
    }

    /// Heap bytes.
    pub(crate) fn memory_usage(&self) -> usize {
        self.next.len() * 2 + (self.ended_from.len() + self.ended.len() + self.lens.len()) * 4
    }
}

impl halves::Walk for CompactDfa {
    type State = usize;

    fn start(&self) -> usize {
        usize::from(self.start)
    }

    fn step(&self, state: usize, byte: u8) -> usize {
        let column = usize::from(self.columns[usize::from(byte)]);
        usize::from(self.next.get((state << self.shift) | column).copied().unwrap_or(0))
    }

    fn ends_literal(&self, state: usize) -> bool {
        state < usize::from(self.matching)
    }

    fn longest(&self) -> usize {
        self.longest
    }

    fn report(&self, state: usize, at: usize, hit: &mut impl FnMut(usize, usize)) {
        let from = self.ended_from.get(state).map_or(0, |&f| f as usize);
        let to = self.ended_from.get(state + 1).map_or(0, |&t| t as usize);
        for &literal in self.ended.get(from..to).unwrap_or_default() {
            let len = self.lens.get(literal as usize).map_or(0, |&l| l as usize);
            hit(literal as usize, at.saturating_sub(len));
        }
    }

    fn hits_from(&self, mut state: usize, text: &[u8], mut at: usize, hit: &mut impl FnMut(usize, usize)) {
        loop {
            let found;
            (state, at, found) = self.to_match(state, text, at);
            if !found {
                return;
            }
            self.report(state, at, hit);
        }
    }
}

/// Each byte's column, and the row width (a power of two): one column per distinct
/// lowercased byte of the literals, shared with its uppercase letter, and column 0 for
/// every other byte.
fn fold_columns(literals: &[Vec<u8>]) -> ([u8; 256], usize) {
    let mut used = [false; 256];
    for &byte in literals.iter().flatten() {
        used[usize::from(byte.to_ascii_lowercase())] = true;
    }
    let mut columns = [0u8; 256];
    let mut count = 1usize;
    for byte in 0..=255u8 {
        if used[usize::from(byte)] && !byte.is_ascii_uppercase() {
            columns[usize::from(byte)] = count as u8;
            if byte.is_ascii_lowercase() {
                columns[usize::from(byte.to_ascii_uppercase())] = count as u8;
            }
            count += 1;
        }
    }
    (columns, count.next_power_of_two())
}

/// Trie nodes below the root that `literals`, lowercased, need.
fn trie_size(literals: &[Vec<u8>]) -> usize {
    let mut folded: Vec<Vec<u8>> = literals.iter().map(|l| l.to_ascii_lowercase()).collect();
    folded.sort_unstable();
    let mut size = 0usize;
    let mut previous: &[u8] = &[];
    for literal in &folded {
        let shared = literal.iter().zip(previous).take_while(|(a, b)| a == b).count();
        size += literal.len() - shared;
        previous = literal;
    }
    size
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every hit as (literal, start), from the crate's own overlapping search.
    fn oracle(literals: &[Vec<u8>], text: &[u8]) -> Vec<(usize, usize)> {
        let ac = aho_corasick::AhoCorasick::builder().ascii_case_insensitive(true).build(literals).expect("builds");
        let mut hits: Vec<(usize, usize)> = ac.find_overlapping_iter(text).map(|m| (m.pattern().as_usize(), m.start())).collect();
        // The crate orders a position's hits its own way; the prefilter does not care.
        hits.sort_unstable_by_key(|&(literal, start)| (start + literals[literal].len(), literal));
        hits
    }

    fn hits(dfa: &CompactDfa, literals: &[Vec<u8>], text: &[u8]) -> Vec<(usize, usize)> {
        let mut got = Vec::new();
        dfa.for_each_hit(text, |literal, start| got.push((literal, start)));
        got.sort_unstable_by_key(|&(literal, start)| (start + literals[literal].len(), literal));
        got
    }

    #[test]
    fn hits_table() {
        let cases: &[(&[&[u8]], &[u8])] = &[
            (&[b"he", b"she", b"his", b"hers"], b"ushers and HIS sHe"),
            (&[b"abc", b"bc", b"c"], b"xabcxABCabc"),
            (&[b"aa"], b"aaaaA"),
            (&[b"viagra"], b""),
            (&[b"viagra"], b"vi"),
            // Bytes above ASCII keep their case: only ASCII letters fold.
            (&[b"\xc3\xa9t\xc3\xa9", b"\xc3\x89T\xc3\x89"], b"\xc3\xa9t\xc3\xa9 \xc3\x89T\xc3\x89 \xc3\xa9T\xc3\xa9"),
            // A literal twice, and one holding uppercase letters.
            (&[b"free", b"FREE", b"Click Here"], b"FrEe! click HERE"),
            // An empty literal never hits; the others do.
            (&[b"", b"x"], b"axb"),
            // Punctuation and bytes no literal holds share column 0.
            (&[b"$$$", b"100%"], b"win $$$$ 100% \x00\xff"),
        ];
        for (literals, text) in cases {
            let literals: Vec<Vec<u8>> = literals.iter().map(|l| l.to_vec()).collect();
            let dfa = CompactDfa::new(&literals, usize::MAX).expect("fits");
            let want: Vec<(usize, usize)> = oracle(&literals, text).into_iter().filter(|&(l, _)| !literals[l].is_empty()).collect();
            assert_eq!(hits(&dfa, &literals, text), want, "{text:?}");
        }
    }

    #[test]
    fn random_sets_agree_with_the_crate_table() {
        // (literals per set, longest literal, text length): small alphabets make overlaps
        // and shared suffixes common.
        let cases = [(3, 3, 200), (40, 5, 2_000), (300, 8, 5_000), (2_000, 12, 20_000)];
        let alphabet = b"abAB c.\xe9";
        let mut random = crate::rules::Xorshift(0x2545_f491);
        let mut next = || random.below(usize::MAX);
        for (count, longest, text_len) in cases {
            for _ in 0..5 {
                let literals: Vec<Vec<u8>> =
                    (0..count).map(|_| (0..1 + next() % longest).map(|_| alphabet[next() % alphabet.len()]).collect()).collect();
                let text: Vec<u8> = (0..text_len).map(|_| alphabet[next() % alphabet.len()]).collect();
                let dfa = CompactDfa::new(&literals, usize::MAX).expect("fits");
                assert_eq!(hits(&dfa, &literals, &text), oracle(&literals, &text), "{count} literals");
            }
        }
    }

    /// Literals, a byte limit, the outcome.
    type SizeCase = (Vec<Vec<u8>>, usize, Result<(), TooBig>);

    #[test]
    fn too_big_table() {
        // Every five-digit string: a trie of 10 + 100 + ... + 100,000 nodes and the root.
        let many: Vec<Vec<u8>> = (0..100_000u32).map(|i| alloc::format!("{i:05}").into_bytes()).collect();
        let many_nodes = 1 + 10 + 100 + 1_000 + 10_000 + 100_000;
        let cases: [SizeCase; 4] = [
            (alloc::vec![b"abc".to_vec()], usize::MAX, Ok(())),
            // Four states of width 4 (column 0, a, b, c): 32 bytes.
            (alloc::vec![b"abc".to_vec()], 32, Ok(())),
            (alloc::vec![b"abc".to_vec()], 31, Err(TooBig::Bytes(32))),
            (many, usize::MAX, Err(TooBig::States(many_nodes))),
        ];
        for (literals, limit, want) in cases {
            let got = CompactDfa::new(&literals, limit).map(|_| ());
            assert_eq!(got, want, "limit {limit}");
        }
        assert_eq!(alloc::string::ToString::to_string(&TooBig::Bytes(32)), "a 32-byte table, over the bound");
    }

    /// Literals, pairs of bytes that share a column, pairs that do not, the row width.
    type ColumnCase<'a> = (&'a [&'a [u8]], &'a [(u8, u8)], &'a [(u8, u8)], usize);

    #[test]
    fn fold_columns_table() {
        let cases: &[ColumnCase<'_>] = &[
            (&[b"ab"], &[(b'a', b'A'), (b'B', b'b'), (b'x', 0), (b'X', 0xff)], &[(b'a', b'b'), (b'a', b'x')], 4),
            (&[b"A1", b"z"], &[(b'a', b'A'), (b'z', b'Z')], &[(b'1', b'a'), (b'1', 0)], 4),
            (&[b"\xc3\xa9"], &[(b'a', 0)], &[(0xc3, 0xa9), (0xc3, 0)], 4),
            (&[b"abcdefghijklmnopqrstuvwxyz0123456789"], &[(b'q', b'Q')], &[(b'q', b'9')], 64),
        ];
        for (literals, same, different, width) in cases {
            let literals: Vec<Vec<u8>> = literals.iter().map(|l| l.to_vec()).collect();
            let (columns, w) = fold_columns(&literals);
            assert_eq!(w, *width, "{literals:?}");
            for &(a, b) in *same {
                assert_eq!(columns[usize::from(a)], columns[usize::from(b)], "{a} {b}");
            }
            for &(a, b) in *different {
                assert_ne!(columns[usize::from(a)], columns[usize::from(b)], "{a} {b}");
            }
        }
    }
}
