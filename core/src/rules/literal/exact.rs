//! Patterns that are a few short literals, none a prefix of another (`/e/`, the
//! look-alikes of SpamAssassin's `<lcase_e>`): at each place at most one of them can
//! match, so the pattern's leftmost-first matches are its literals' occurrences, left
//! to right. A rule counting many hits of one (`tflags multiple`) counts them in one
//! pass over the text, not with a DFA search started again after every match.

use alloc::vec::Vec;
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::Hir;

/// Most literals a pattern may have to be counted this way, and their longest length.
const MAX_LITERALS: usize = 64;
const MAX_LEN: usize = 8;

/// A pattern whose every match is one of `literals` (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExactLiterals {
    /// Sorted; those beginning with byte `b` are `literals[first[b].0..first[b].1]`.
    literals: Vec<Vec<u8>>,
    first: [(u8, u8); 256],
    /// When every literal is one byte, and there are at most three: memchr finds them.
    bytes: Option<Vec<u8>>,
}

impl ExactLiterals {
    /// The literals of `hir`, when it is nothing but a few short ones, none empty, none
    /// holding a `\n` (its matches stay within a line), none a prefix of another.
    pub(crate) fn of(hir: &Hir) -> Option<ExactLiterals> {
        // The extractor reads an assertion as matching the empty string.
        if !hir.properties().look_set().is_empty() {
            return None;
        }
        let mut extractor = Extractor::new();
        extractor.kind(ExtractKind::Prefix).limit_total(MAX_LITERALS).limit_literal_len(MAX_LEN);
        let seq = extractor.extract(hir);
        if !seq.is_exact() {
            return None;
        }
        ExactLiterals::from_literals(seq.literals()?.iter().map(|l| l.as_bytes().to_vec()).collect())
    }

    /// The pattern that is `literals` (as [`ExactLiterals::literals`] gives them, or in
    /// any order), when they meet the terms of [`ExactLiterals::of`].
    pub(crate) fn from_literals(mut literals: Vec<Vec<u8>>) -> Option<ExactLiterals> {
        literals.sort_unstable();
        literals.dedup();
        let usable = |l: &Vec<u8>| !l.is_empty() && l.len() <= MAX_LEN && !l.contains(&b'\n');
        if literals.is_empty() || literals.len() > MAX_LITERALS || !literals.iter().all(usable) {
            return None;
        }
        // Sorted, a literal that begins another sorts right before one that begins with it.
        if literals.windows(2).any(|w| matches!(w, [a, b] if b.starts_with(a))) {
            return None;
        }
        let mut first = [(0u8, 0u8); 256];
        for (i, l) in literals.iter().enumerate() {
            let (Some(&b), Ok(i)) = (l.first(), u8::try_from(i)) else { return None };
            let slot = first.get_mut(usize::from(b))?;
            *slot = if slot.0 == slot.1 { (i, i + 1) } else { (slot.0, i + 1) };
        }
        let bytes = (literals.len() <= 3 && literals.iter().all(|l| l.len() == 1)).then(|| literals.iter().filter_map(|l| l.first().copied()).collect());
        Some(ExactLiterals { literals, first, bytes })
    }

    /// The literals, sorted.
    pub(crate) fn literals(&self) -> &[Vec<u8>] {
        &self.literals
    }

    /// Matches in `text`, as Perl's `/g` finds them, at most `max`.
    pub(crate) fn count(&self, text: &[u8], max: u32) -> u32 {
        let max = max as usize;
        let n = match self.bytes.as_deref() {
            Some(&[a]) => memchr::memchr_iter(a, text).take(max).count(),
            Some(&[a, b]) => memchr::memchr2_iter(a, b, text).take(max).count(),
            Some(&[a, b, c]) => memchr::memchr3_iter(a, b, c, text).take(max).count(),
            _ => self.count_any(text, max),
        };
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    fn count_any(&self, text: &[u8], max: usize) -> usize {
        let mut n = 0;
        let mut at = 0;
        while n < max {
            let Some(skip) = text.get(at..).and_then(|rest| rest.iter().position(|&b| self.begins(b))) else { break };
            at += skip;
            let rest = text.get(at..).unwrap_or_default();
            match self.starting(rest).find(|l| rest.starts_with(l)) {
                Some(l) => {
                    n += 1;
                    at += l.len();
                }
                None => at += 1,
            }
        }
        n
    }

    /// Whether a literal begins with `b`.
    fn begins(&self, b: u8) -> bool {
        self.first.get(usize::from(b)).is_some_and(|&(from, to)| from < to)
    }

    /// The literals that can begin `text`.
    fn starting<'s>(&'s self, text: &[u8]) -> impl Iterator<Item = &'s Vec<u8>> + 's {
        let (from, to) = text.first().and_then(|&b| self.first.get(usize::from(b))).copied().unwrap_or_default();
        self.literals.get(usize::from(from)..usize::from(to)).unwrap_or_default().iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use regex_automata::dfa::{dense, Automaton};
    use regex_automata::Input;

    fn hir(pattern: &str) -> Hir {
        crate::rules::compile::parse_hir(pattern).expect("parses")
    }

    /// Leftmost-first matches of `pattern` in each line of `text`, as a DFA search
    /// started again after each match counts them, at most `max`.
    fn searched(pattern: &str, text: &[u8], max: u32) -> u32 {
        let syntax = regex_automata::util::syntax::Config::new().utf8(false).unicode(false);
        let dfa = dense::Builder::new().syntax(syntax).thompson(regex_automata::nfa::thompson::Config::new().utf8(false)).build(pattern).expect("builds");
        let mut n = 0;
        for line in text.split(|&b| b == b'\n') {
            let mut at = 0;
            while n < max && at <= line.len() {
                let Some(m) = dfa.try_search_fwd(&Input::new(line).range(at..)).expect("searches") else { break };
                n += 1;
                at = if m.offset() > at { m.offset() } else { at + 1 };
            }
        }
        n
    }

    #[test]
    fn which_patterns_table() {
        let cases: &[(&str, Option<&[&[u8]]>)] = &[
            ("e", Some(&[b"e"])),
            ("(?i)e", Some(&[b"E", b"e"])),
            ("[a-c]", Some(&[b"a", b"b", b"c"])),
            (r"e|\xc3[\xa8\xa9]|\xd0\xb5", Some(&[b"e", b"\xc3\xa8", b"\xc3\xa9", b"\xd0\xb5"])),
            ("foo|bar", Some(&[b"bar", b"foo"])),
            // A prefix of another: the longer may be the match where the shorter occurs.
            ("a|ab", None),
            ("ab|a", None),
            // Assertions, repeats, empty matches, line breaks, too many or too long.
            (r"\be", None),
            ("^e", None),
            ("e+", None),
            ("e?", None),
            (r"a\nb", None),
            ("[a-z][a-z]", None),
            ("abcdefghi", None),
            (".", None),
        ];
        for (pattern, want) in cases {
            let got = ExactLiterals::of(&hir(pattern)).map(|e| e.literals);
            let want = want.map(|w| w.iter().map(|l| l.to_vec()).collect::<Vec<_>>());
            assert_eq!(got, want, "{pattern}");
        }
    }

    #[test]
    fn counts_as_searches_table() {
        let patterns = ["e", "(?i)e", "[ab]", "[abcd]", r"e|\xc3[\xa8\xa9\xaa\xab]|\xd0\xb5", "foo|bar|fob", "aa"];
        let texts: &[&[u8]] = &[
            b"",
            b"eee\neEe",
            b"here be \xc3\xa8 and \xc3\xa9\xd0\xb5 e\xc3",
            b"\xc3\xc3\xa8\xd0",
            b"foobar fofoo fob barbar",
            b"aaaaa\naaa",
            b"abcdabcd\nbad cab",
        ];
        for pattern in patterns {
            let exact = ExactLiterals::of(&hir(pattern)).expect("exact literals");
            for text in texts {
                for max in [0, 1, 2, 3, u32::MAX] {
                    let text_name = String::from_utf8_lossy(text);
                    assert_eq!(exact.count(text, max), searched(pattern, text, max), "{pattern} in {text_name:?}, max {max}");
                }
            }
        }
        // Generated texts over the literals' bytes and a few others.
        let mut seed = 7u32;
        let alphabet = b"eEabfor\n \xc3\xa8\xa9\xd0\xb5";
        for _ in 0..300 {
            let text: Vec<u8> = (0..60)
                .map(|_| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    alphabet[(seed >> 16) as usize % alphabet.len()]
                })
                .collect();
            for pattern in patterns {
                let exact = ExactLiterals::of(&hir(pattern)).expect("exact literals");
                assert_eq!(exact.count(&text, u32::MAX), searched(pattern, &text, u32::MAX), "{pattern} in {text:?}");
            }
        }
    }
}
