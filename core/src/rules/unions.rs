//! Unions of a line target's unfiltered patterns. A pattern without prefilter literals
//! costs a DFA pass over every text of its target; a few of them with dense DFAs,
//! determinized together, cost one pass that tells which of them can match, and only
//! those search again (or none, when the union's hit is the answer).

use alloc::string::String;
use alloc::vec::Vec;

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::util::primitives::StateID;
use regex_automata::{Input, MatchKind};
use regex_syntax::hir::Hir;

use super::cache::{self, Cached};
use super::compile::{line_local, nfa_compiler, parse_hir, Dense, Matcher, TargetProgram, AUTOMATA_REVISION};
use super::literal::find_any;
use super::{Config, RuleKind};

/// Largest dense DFA of one union, shared by all processes: a bigger automaton is slower
/// to search (a 256 KiB union's pass costs up to twice one pattern's) and to build.
const UNION_LIMIT: usize = 256 * 1024;
/// Most patterns in one union: the bits of the mask its search fills.
pub(crate) const UNION_MEMBERS: usize = 64;

/// Unfiltered line patterns searched as one dense DFA.
pub(crate) struct Union {
    pub(crate) dfa: dense::DFA<Vec<u32>>,
    /// Pattern indices, by the union's pattern id.
    pub(crate) members: Vec<u32>,
    /// Members, by bit, whose hit in the union is their result: a dense DFA of the same
    /// regex counting one match at most. The others search again when found.
    pub(crate) decided: u64,
}

impl Union {
    /// The members with a match in `text`, as bits by pattern id, and in `first_ends`
    /// by pattern id where the first match of each found one ends; `None` when the
    /// search failed and every member must search itself. One pass over the text, which
    /// stops once every member is found and skips with memchr where a state lets it.
    pub(crate) fn finds(&self, text: &[u8], first_ends: &mut [u32; UNION_MEMBERS]) -> Option<u64> {
        let dfa = &self.dfa;
        let all = match self.members.len() {
            n if n >= 64 => u64::MAX,
            n => (1u64 << n) - 1,
        };
        let mut found = 0u64;
        // Match states met before, by a few bits of their id, with what they report:
        // a text that matches often enters the same few again and again.
        let mut met = [(StateID::ZERO, 0u64); 8];
        let mut state = dfa.start_state_forward(&Input::new(text)).ok()?;
        let mut at = 0usize;
        loop {
            let special;
            (state, at, special) = to_special(dfa, state, text, at);
            if !special {
                break;
            }
            if dfa.is_match_state(state) {
                let slot = (state.as_usize() >> dfa.stride2()) % met.len();
                found |= match met.get(slot) {
                    Some(&(seen, bits)) if seen == state => bits,
                    _ => {
                        // A match state is entered one byte after the match ends.
                        let bits = self.patterns_of(state, !found, at - 1, first_ends);
                        if let Some(entry) = met.get_mut(slot) {
                            *entry = (state, bits);
                        }
                        bits
                    }
                };
                if found == all {
                    return Some(found);
                }
            } else if dfa.is_dead_state(state) {
                return Some(found);
            } else if dfa.is_quit_state(state) {
                return None;
            }
            if dfa.is_accel_state(state) {
                // The state stays itself on every byte but these.
                let next = find_any(dfa.accelerator(state), text.get(at..).unwrap_or_default());
                at = next.map_or(text.len(), |i| at + i);
            }
        }
        state = dfa.next_eoi_state(state);
        if dfa.is_match_state(state) {
            found |= self.patterns_of(state, !found, text.len(), first_ends);
        }
        Some(found)
    }

    /// The patterns match state `state` reports, as bits; those also in `new` get
    /// `end` in `first_ends`.
    fn patterns_of(&self, state: StateID, new: u64, end: usize, first_ends: &mut [u32; UNION_MEMBERS]) -> u64 {
        let mut bits = 0u64;
        for i in 0..self.dfa.match_len(state) {
            let id = self.dfa.match_pattern(state, i).as_usize();
            let bit = 1u64.checked_shl(id as u32).unwrap_or(0);
            if let (true, Some(slot)) = (new & bit != 0, first_ends.get_mut(id)) {
                *slot = u32::try_from(end).unwrap_or(u32::MAX);
            }
            bits |= bit;
        }
        bits
    }
}

/// Steps `dfa` from `state` over `text` from `at`, four bytes a round, until a special
/// state: it, the position after its byte and true; or the state at the end and false.
/// The prefilter tables' `literal::to_special` is its twin over another crate's
/// automaton: one generic over closures cost 4% more instructions in the scan.
fn to_special(dfa: &dense::DFA<Vec<u32>>, mut state: StateID, text: &[u8], mut at: usize) -> (StateID, usize, bool) {
    while let Some(&[b0, b1, b2, b3]) = text.get(at..).and_then(<[u8]>::first_chunk::<4>) {
        let s0 = dfa.next_state(state, b0);
        if dfa.is_special_state(s0) {
            return (s0, at + 1, true);
        }
        let s1 = dfa.next_state(s0, b1);
        if dfa.is_special_state(s1) {
            return (s1, at + 2, true);
        }
        let s2 = dfa.next_state(s1, b2);
        if dfa.is_special_state(s2) {
            return (s2, at + 3, true);
        }
        state = dfa.next_state(s2, b3);
        at += 4;
        if dfa.is_special_state(state) {
            return (state, at, true);
        }
    }
    while let Some(&byte) = text.get(at) {
        state = dfa.next_state(state, byte);
        at += 1;
        if dfa.is_special_state(state) {
            return (state, at, true);
        }
    }
    (state, at, false)
}

/// Consecutive candidates, in grouping order: a union of `members` of them, or one
/// that stays alone (`dfa` none).
pub(super) struct Group {
    members: usize,
    dfa: Option<dense::DFA<Vec<u32>>>,
}

/// The unions of one target, between the rule loop and the end of a compile: the
/// groups a cache knew, and the regexes of the candidates left to group.
#[derive(Default)]
pub(crate) struct UnionPlan {
    /// Unfiltered patterns with a dense DFA (or dense screen), smallest first.
    candidates: Vec<u32>,
    /// The cache's name for this list of candidates; none without a cache.
    list: Option<cache::Key>,
    known: Vec<Group>,
    /// Regexes of the candidates after those `known` covers (none: it has none, and
    /// stays alone).
    pub(super) sources: Vec<Option<String>>,
}

impl UnionPlan {
    /// The plan for `program`'s unfiltered patterns; `relaxed`: each backtracking
    /// program's relaxed regex, by program index. A cache's groups are taken as they
    /// are; what it lacks is grouped again by [`group`] (a job).
    pub(super) fn new(program: &TargetProgram, config: &Config, relaxed: &[String], dense: &mut Dense<'_>) -> UnionPlan {
        if matches!(dense, Dense::Skip) {
            return UnionPlan::default();
        }
        let mut candidates: Vec<(usize, u32)> = program
            .unfiltered
            .iter()
            .filter_map(|&p| {
                let bytes = match &program.patterns.get(p as usize)?.matcher {
                    Matcher::Dense(dfa) => dfa.memory_usage(),
                    Matcher::Backtrack { relaxed, .. } => match &**relaxed {
                        Matcher::Dense(dfa) => dfa.memory_usage(),
                        _ => return None,
                    },
                    Matcher::Lazy(_) => return None,
                };
                Some((bytes, p))
            })
            .collect();
        if candidates.len() < 2 {
            return UnionPlan::default();
        }
        // Small automata first: more of them fit together.
        candidates.sort_unstable();
        let candidates: Vec<u32> = candidates.into_iter().map(|(_, p)| p).collect();
        let mut plan = UnionPlan { candidates, ..UnionPlan::default() };
        if let Dense::Cached(cache) = dense {
            let mut named = Vec::new();
            for &p in &plan.candidates {
                let (tag, text) = identity(program, p, config, relaxed);
                named.push(tag);
                named.extend_from_slice(&(text.len() as u32).to_le_bytes());
                named.extend_from_slice(text.as_bytes());
            }
            let list = cache::key(&[
                b"unions",
                &named,
                &UNION_LIMIT.to_le_bytes(),
                &AUTOMATA_REVISION.to_le_bytes(),
                env!("CARGO_PKG_VERSION").as_bytes(),
            ]);
            let mut covered = 0usize;
            while covered < plan.candidates.len() {
                let group = match cache.get(&group_key(&list, plan.known.len())) {
                    Some(Cached { dfa: Some(dfa), .. }) if dfa.pattern_len() >= 2 && covered + dfa.pattern_len() <= plan.candidates.len() => {
                        Group { members: dfa.pattern_len(), dfa: Some(dfa) }
                    }
                    Some(Cached { dfa: None, .. }) => Group { members: 1, dfa: None },
                    _ => break,
                };
                covered += group.members;
                plan.known.push(group);
            }
            plan.list = Some(list);
        }
        let covered: usize = plan.known.iter().map(|g| g.members).sum();
        let rest = plan.candidates.get(covered..).unwrap_or_default();
        plan.sources = rest.iter().map(|&p| regex_of(program, p, config, relaxed)).collect();
        plan
    }

    /// Sets `program`'s unions and unfiltered patterns from the known groups and `built`
    /// (what [`group`] made of the sources), recording those in a cache; `max_hits`:
    /// each rule's, by rule id.
    pub(super) fn finish(self, program: &mut TargetProgram, built: Vec<Group>, max_hits: &[u32], dense: &mut Dense<'_>) {
        if self.candidates.is_empty() {
            return;
        }
        let mut groups = self.known;
        for group in built {
            if let (Dense::Cached(cache), Some(list)) = (&mut *dense, &self.list) {
                cache.put(group_key(list, groups.len()), group.dfa.as_ref(), None, None, None, None);
            }
            groups.push(group);
        }
        let mut alone: Vec<u32> = program.unfiltered.iter().copied().filter(|p| !self.candidates.contains(p)).collect();
        let mut rest = self.candidates.as_slice();
        for group in groups {
            let Some((members, after)) = rest.split_at_checked(group.members) else { break };
            rest = after;
            match group.dfa {
                Some(dfa) if members.len() >= 2 && dfa.pattern_len() == members.len() => {
                    let mut decided = 0u64;
                    for (bit, &p) in members.iter().enumerate() {
                        let exact = program
                            .patterns
                            .get(p as usize)
                            .is_some_and(|c| matches!(c.matcher, Matcher::Dense(_)) && max_hits.get(c.rule as usize) == Some(&1));
                        if exact {
                            decided |= 1u64.checked_shl(bit as u32).unwrap_or(0);
                        }
                    }
                    program.unions.push(Union { dfa, members: members.to_vec(), decided });
                }
                _ => alone.extend_from_slice(members),
            }
        }
        alone.extend_from_slice(rest);
        alone.sort_unstable();
        program.unfiltered = alone;
    }
}

/// The cache key of group `index` of the candidate list named `list`.
fn group_key(list: &cache::Key, index: usize) -> cache::Key {
    cache::key(&[b"union", list, &(index as u32).to_le_bytes()])
}

/// What names pattern `p`'s automaton in a union's key: its rule's Perl text for a
/// dense DFA (a warm start translates nothing), the relaxed regex for a screen.
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

/// The regex pattern `p`'s dense DFA was built from.
fn regex_of(program: &TargetProgram, p: u32, config: &Config, relaxed: &[String]) -> Option<String> {
    let compiled = program.patterns.get(p as usize)?;
    match &compiled.matcher {
        Matcher::Backtrack { program, .. } => relaxed.get(*program as usize).cloned(),
        _ => perl_pattern(config, compiled.rule)?.translated().ok(),
    }
}

/// Groups `sources` greedily, in order, into unions under [`UNION_LIMIT`]: (members,
/// union DFA), none for a regex that fits with no neighbour (or is missing or does not
/// parse).
pub(super) fn group(sources: &[Option<String>]) -> Vec<Group> {
    let mut groups = Vec::new();
    let mut current: Vec<Hir> = Vec::new();
    let mut fitting = None;
    for source in sources {
        let Some(Ok(hir)) = source.as_deref().map(parse_hir) else {
            close(&mut groups, &mut current, fitting.take());
            groups.push(Group { members: 1, dfa: None });
            continue;
        };
        current.push(line_local(&hir, 0));
        if current.len() == 1 {
            continue;
        }
        match (current.len() <= UNION_MEMBERS).then(|| build(&current)).flatten() {
            Some(dfa) => fitting = Some(dfa),
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

/// Ends the group `current`: a union, or one member alone.
fn close(groups: &mut Vec<Group>, current: &mut Vec<Hir>, dfa: Option<dense::DFA<Vec<u32>>>) {
    match (current.len(), dfa) {
        (0, _) => {}
        (n, Some(dfa)) if n >= 2 => groups.push(Group { members: n, dfa: Some(dfa) }),
        (n, _) => groups.extend((0..n).map(|_| Group { members: 1, dfa: None })),
    }
    current.clear();
}

/// The dense DFA reporting every match of each of `hirs` (`MatchKind::All`), or none
/// over [`UNION_LIMIT`].
fn build(hirs: &[Hir]) -> Option<dense::DFA<Vec<u32>>> {
    let nfa = nfa_compiler().build_many_from_hir(hirs).ok()?;
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

    /// `list`'s regexes, "-" standing for a missing one.
    fn regexes(list: &[&str]) -> Vec<Option<String>> {
        list.iter().map(|s| (*s != "-").then(|| s.to_string())).collect()
    }

    #[test]
    fn group_table() {
        // Too big to share a union with anything under the limit.
        let big = r"(?:[a-z]{1,40}\s){30}x";
        let tiny: Vec<String> = (0..65).map(|i| alloc::format!("t{i}x")).collect();
        let tiny: Vec<&str> = tiny.iter().map(String::as_str).collect();
        // (regexes, members of each run: a union from 2 up, 1 alone)
        let cases: &[(&[&str], &[usize])] = &[
            (&["a", "b", "c"], &[3]),
            (&["a"], &[1]),
            (&[], &[]),
            (&["(", "a", "b"], &[1, 2]),
            (&["a", "-", "b", "c"], &[1, 1, 2]),
            (&["a", big, "b"], &[1, 1, 1]),
            (&["a", "b", big, "c", "d"], &[2, 1, 2]),
            (&tiny, &[64, 1]),
        ];
        for (sources, want) in cases {
            let grouped = group(&regexes(sources));
            let got: Vec<usize> = grouped.iter().map(|g| g.members).collect();
            assert_eq!(&got, want, "{sources:?}");
            for g in &grouped {
                assert_eq!(g.dfa.as_ref().map(|d| d.pattern_len()), (g.members > 1).then_some(g.members), "{sources:?}");
            }
        }
    }

    #[test]
    fn finds_table() {
        // Every match counts, also one inside another's, and each regex holds to one
        // line as in the target it runs on.
        let union = |sources: &[&str]| {
            let Group { members, dfa } = group(&regexes(sources)).pop().expect("one group");
            Union { dfa: dfa.expect("a union"), members: (0..members as u32).collect(), decided: 0 }
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
            let mut first_ends = [0u32; UNION_MEMBERS];
            assert_eq!(union(sources).finds(text.as_bytes(), &mut first_ends), Some(*want), "{text:?}");
            assert_eq!(first_ends.get(..ends.len()), Some(*ends), "{text:?}");
        }
    }
}
