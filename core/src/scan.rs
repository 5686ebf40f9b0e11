//! Running a compiled [`RuleSet`] over a message.
//!
//! A scan reads the rule set through `&self` and writes only into the caller's
//! [`Scratch`]: rule sets compiled before a fork stay untouched in shared pages,
//! and once a scratch is warm a scan allocates nothing.

use alloc::vec::Vec;
use core::ops::Range;

use regex_automata::dfa::Automaton;
use regex_automata::{hybrid, Anchored, HalfMatch, Input};

use crate::msg::{self, release_above, Limits, Message, MessageBuffers};
use crate::rules::eval::{EvalContext, EvalScratch};
use crate::rules::backtrack::{BacktrackScratch, Program};
use crate::rules::literal::LiteralAutomaton;
use crate::rules::repeat::ENDS_START;
use crate::rules::{HeaderField, HeaderForm, RuleSet};
use crate::rules::compile::{eval_meta, CompiledPattern, HeaderCheckTest, LineEnds, MatchNeeds, MatchRoom, Matcher, RuleType, TargetProgram, NO_BOUND};
use crate::rules::demand::{DemandScratch, STAGES};
use crate::rules::narrow::NarrowTables;
use crate::rules::unions::{Member, Union, UnionAutomaton, UNION_MEMBERS};
use crate::score::Score;

/// Per-worker state of scans: message buffers, hit counts, DFA caches.
/// Made once per rule set and reused for every message.
pub struct Scratch {
    ruleset: u32,
    limits: Limits,
    pub(crate) msg: MessageBuffers,
    counts: Vec<u32>,
    hits: Vec<u32>,
    epoch: u32,
    literal_epoch: Vec<u32>,
    literal_first: Vec<u32>,
    literal_last: Vec<u32>,
    literals_hit: Vec<u32>,
    literal_head: Vec<u32>,
    hit_pos: Vec<u32>,
    hit_next: Vec<u32>,
    starts: Vec<u32>,
    pattern_epoch: Vec<u32>,
    pattern_first: Vec<u32>,
    pattern_last: Vec<u32>,
    candidates: Vec<u32>,
    header_text: HeaderText,
    meta_stack: Vec<f64>,
    meta_marks: MetaMarks,
    /// One per lazy DFA, made when a scan first runs it: a worker pays only for the
    /// lazy DFAs its mail needs.
    caches: Vec<CacheSlot>,
    /// Most bytes `caches` may keep between scans.
    cache_budget: usize,
    /// Scans made with this scratch: when each cache was last used.
    scans: u64,
    backtrack: BacktrackScratch,
    /// The ends of the chains a repeated pattern's search keeps (`rules::repeat`).
    repeat_ends: Vec<u16>,
    eval: EvalScratch,
    demand: DemandScratch,
    /// The checks of the running stage deferred to its end.
    deferred: Vec<Deferred>,
}

impl Scratch {
    /// Scratch for scanning with `rules`, messages parsed under default [`Limits`].
    pub fn new(rules: &RuleSet) -> Scratch {
        Scratch::with_limits(rules, Limits::default())
    }

    /// Scratch for scanning with `rules`, messages parsed under `limits`.
    pub fn with_limits(rules: &RuleSet, limits: Limits) -> Scratch {
        let n = rules.rules.len();
        let lits = rules.max_literals;
        let pats = rules.max_patterns.max(rules.headers.len());
        Scratch {
            ruleset: rules.id,
            limits,
            msg: MessageBuffers::new(limits),
            counts: alloc::vec![0; n],
            hits: Vec::with_capacity(n),
            epoch: 0,
            literal_epoch: alloc::vec![0; lits],
            literal_first: alloc::vec![0; lits],
            literal_last: alloc::vec![0; lits],
            literals_hit: Vec::with_capacity(lits),
            literal_head: alloc::vec![NO_HIT; lits],
            hit_pos: Vec::with_capacity(MAX_HITS),
            hit_next: Vec::with_capacity(MAX_HITS),
            starts: Vec::with_capacity(MAX_HITS),
            pattern_epoch: alloc::vec![0; pats],
            pattern_first: alloc::vec![0; pats],
            pattern_last: alloc::vec![0; pats],
            candidates: Vec::with_capacity(pats),
            header_text: HeaderText {
                all: Vec::with_capacity(4096),
                target: Vec::with_capacity(1024),
                names: NameScratch::default(),
            },
            meta_stack: Vec::with_capacity(rules.meta_stack),
            meta_marks: MetaMarks { epoch: 0, marked: alloc::vec![0; rules.metas.len()] },
            caches: rules.lazy_dfas.iter().map(|_| CacheSlot::default()).collect(),
            cache_budget: usize::MAX,
            scans: 0,
            backtrack: BacktrackScratch::for_programs(rules.programs.iter()),
            repeat_ends: alloc::vec![0; ENDS_START],
            eval: EvalScratch::default(),
            demand: DemandScratch::new(&rules.demand, n, rules.metas.len()),
            deferred: Vec::with_capacity(rules.max_patterns),
        }
    }
}

impl Scratch {
    /// Heap bytes the lazy DFAs' caches hold now: the part of a worker's private
    /// memory that grows with the mail it has seen.
    pub fn lazy_cache_bytes(&self) -> usize {
        self.caches.iter().map(CacheSlot::bytes).sum()
    }

    /// Times the lazy DFAs' caches kept now were cleared for room within one search:
    /// states rebuilt over and over, which a bench should see.
    pub fn lazy_cache_clears(&self) -> usize {
        self.caches.iter().filter_map(|slot| slot.cache.as_ref()).map(hybrid::dfa::Cache::clear_count).sum()
    }

    /// Frees the message buffers a scan grew past `bytes` each, and returns how many
    /// bytes that gave back. A worker calls it between messages so that one large
    /// message does not leave it holding that message's size for good; the next
    /// large message allocates them again, typical mail does not.
    pub fn release_buffers_above(&mut self, bytes: usize) -> usize {
        let names = &mut self.header_text.names;
        let mut freed = self.msg.release_above(bytes) + release_above(&mut names.out, bytes);
        for v in names.work.iter_mut() {
            freed += release_above(v, bytes);
        }
        let repeat_bytes = self.repeat_ends.capacity() * 2;
        if self.repeat_ends.len() > ENDS_START && repeat_bytes > bytes {
            self.repeat_ends = alloc::vec![0; ENDS_START];
            freed += repeat_bytes;
        }
        freed + release_above(&mut self.header_text.all, bytes) + release_above(&mut self.header_text.target, bytes)
    }

    /// Caps what the lazy DFAs' caches keep between scans: after a scan that leaves
    /// them above `bytes`, the least recently used are dropped until they fit. A worker's
    /// memory then stays bounded whatever mail it sees, at the cost of rebuilding states
    /// of the DFAs its mail needs least. Default: no cap.
    pub fn set_lazy_cache_budget(&mut self, bytes: usize) {
        self.cache_budget = bytes;
    }

    /// Drops lazy DFA caches while they hold more than the budget: the least recently
    /// used first, of those the largest. Dropping the largest alone would throw away the
    /// hot caches of the big DFAs that most mail runs, only to rebuild them.
    fn trim_caches(&mut self) {
        if self.cache_budget == usize::MAX {
            return;
        }
        let mut total = self.lazy_cache_bytes();
        while total > self.cache_budget {
            let stalest = self
                .caches
                .iter_mut()
                .filter(|slot| slot.cache.is_some())
                .min_by_key(|slot| (slot.last_scan, core::cmp::Reverse(slot.bytes())));
            let Some(cache) = stalest.and_then(|slot| slot.cache.take()) else { break };
            total = total.saturating_sub(cache.memory_usage());
        }
    }
}

/// A lazy DFA's cache in a scratch, with the scan that last used it.
#[derive(Default)]
struct CacheSlot {
    cache: Option<hybrid::dfa::Cache>,
    last_scan: u64,
}

impl CacheSlot {
    fn bytes(&self) -> usize {
        self.cache.as_ref().map_or(0, hybrid::dfa::Cache::memory_usage)
    }
}

/// The outcome of one scan.
pub struct Verdict<'a> {
    rules: &'a RuleSet,
    hits: &'a [u32],
    counts: &'a [u32],
    /// Sum of the scores of the rules that hit.
    pub score: Score,
    /// The rule set's `required_score`.
    pub required: Score,
    /// Capacities the message exceeded while it was parsed.
    pub overflow: msg::Overflow,
    /// The message's body text as `body` rules read it (Subject first).
    pub body_text: &'a [u8],
}

/// One rule that hit, as reports show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit<'a> {
    /// Rule name.
    pub name: &'a str,
    /// Its score.
    pub score: Score,
    /// Its description (may be empty).
    pub describe: &'a str,
    /// Its rule type.
    pub rule_type: RuleType,
    /// How many times it matched (1 unless `tflags multiple`).
    pub count: u32,
}

impl<'a> Verdict<'a> {
    /// Spam when the score reaches the required score.
    pub fn is_spam(&self) -> bool {
        self.score >= self.required
    }

    /// The scored rules that hit, sorted by name as SpamAssassin lists them.
    pub fn hits(&self) -> impl Iterator<Item = Hit<'a>> + 'a {
        let rules = self.rules;
        let counts = self.counts;
        self.hits.iter().filter_map(move |&id| {
            let r = rules.rules.get(id as usize)?;
            r.scored.then(|| Hit {
                name: r.name.as_str(),
                score: r.score,
                describe: r.describe.as_str(),
                rule_type: r.rule_type,
                count: counts.get(id as usize).copied().unwrap_or(0),
            })
        })
    }

    /// Every rule that hit, `__` sub-rules included, sorted by name. Sub-rules that no
    /// scored rule reads run only when a template lists them (`_SUBTESTS_`).
    pub fn all_hits(&self) -> impl Iterator<Item = &'a str> + 'a {
        let rules = self.rules;
        self.hits.iter().filter_map(move |&id| rules.rules.get(id as usize).map(|r| r.name.as_str()))
    }
}

/// Where a scan's time goes: [`RuleSet::scan_probed`] reads the probe's clock around
/// each rule and each phase, so a bench can tell which rules bound the scan.
pub trait Probe {
    /// A reading of the probe's clock, in units of its choosing.
    fn now(&mut self) -> u64;
    /// `cost` took the time from `started` (a reading of [`Probe::now`]) to now.
    fn spent(&mut self, cost: Cost, started: u64);
}

/// What a [`Probe`]'s time was spent on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cost {
    /// One rule's pattern or test, by rule id ([`RuleSet::rule_name`]).
    Rule(u32),
    /// Parsing and rendering the message.
    Parse,
    /// Reading the `Received` chain for the eval tests.
    Relays,
    /// Preparing a target's text and finding its prefilter literals.
    Prefilter(RuleType),
    /// Searching a target's text with its unions of unfiltered patterns.
    Unions(RuleType),
    /// Running the metas.
    Metas,
    /// Deciding whether deferred sub-rules must run: the text's sub-rules run on demand.
    Demand,
}

/// The probe of a plain scan: no clock, nothing recorded.
struct Unprobed;

impl Probe for Unprobed {
    #[inline(always)]
    fn now(&mut self) -> u64 {
        0
    }

    #[inline(always)]
    fn spent(&mut self, _: Cost, _: u64) {}
}

impl RuleSet {
    /// Scans `raw`, a whole message, with this rule set. Allocates nothing once `scratch` is warm.
    // Out of line so that `bench/instructions` finds it by name in every build.
    #[inline(never)]
    pub fn scan<'a>(&'a self, raw: &[u8], scratch: &'a mut Scratch) -> Verdict<'a> {
        self.scan_probed(raw, scratch, &mut Unprobed)
    }

    /// [`RuleSet::scan`], timing each rule and phase with `probe`: for profiling.
    pub fn scan_probed<'a, P: Probe>(&'a self, raw: &[u8], scratch: &'a mut Scratch, probe: &mut P) -> Verdict<'a> {
        if scratch.ruleset != self.id {
            *scratch = Scratch::with_limits(self, scratch.limits);
        }
        for &id in &scratch.hits {
            if let Some(c) = scratch.counts.get_mut(id as usize) {
                *c = 0;
            }
        }
        scratch.hits.clear();
        scratch.scans += 1;
        let Scratch { msg: bufs, .. } = scratch;
        let started = probe.now();
        let message = Message::parse(raw, bufs);
        probe.spent(Cost::Parse, started);
        let overflow = message.overflow();
        let started = probe.now();
        scratch.eval.prepare(&message, &self.eval_data);
        probe.spent(Cost::Relays, started);
        scratch.demand.begin_scan();
        let mut state = ScanState {
            rules: self,
            counts: &mut scratch.counts,
            hits: &mut scratch.hits,
            demand: &mut scratch.demand,
            deferred: &mut scratch.deferred,
        };
        let mut lines = LineScratch {
            epoch: scratch.epoch,
            literal_epoch: &mut scratch.literal_epoch,
            literal_first: &mut scratch.literal_first,
            literal_last: &mut scratch.literal_last,
            literals_hit: &mut scratch.literals_hit,
            literal_head: &mut scratch.literal_head,
            hit_pos: &mut scratch.hit_pos,
            hit_next: &mut scratch.hit_next,
            starts: &mut scratch.starts,
            hits_overflow: false,
            longest_line: None,
            pattern_epoch: &mut scratch.pattern_epoch,
            pattern_first: &mut scratch.pattern_first,
            pattern_last: &mut scratch.pattern_last,
            candidates: &mut scratch.candidates,
            engines: Engines {
                dfas: &self.lazy_dfas,
                narrow: &self.narrow_tables,
                caches: &mut scratch.caches,
                scan: scratch.scans,
                programs: &self.programs,
                backtrack: &mut scratch.backtrack,
                repeat_ends: &mut scratch.repeat_ends,
            },
        };
        let eval = &mut scratch.eval;
        // Each stage runs the checks of its rule type, and may defer its rules on demand.
        for stage in STAGES {
            state.demand.begin_stage(stage);
            match stage {
                RuleType::Header => self.scan_headers(&message, &mut state, &mut lines, &mut scratch.header_text, eval, probe),
                RuleType::Eval => self.run_evals(&message, &mut state, eval, probe),
                RuleType::MimeHeader => self.scan_mimeheaders(&message, &mut state, &mut lines.engines, probe),
                RuleType::Uri => run_lines(&self.uri, (stage, Literals::Own), message.uris(), &mut state, &mut lines, probe),
                RuleType::Full => {
                    let whole = core::iter::once(0..message.raw().len());
                    run_whole(&self.full, (stage, Literals::Own), (message.raw(), whole), &mut state, &mut lines, probe);
                }
                RuleType::Body => run_lines(&self.body, (stage, Literals::Own), message.body_lines(), &mut state, &mut lines, probe),
                RuleType::RawBody => {
                    // One literal pass for both programs, which share its table; pieces
                    // first: the line pass decides its deferred rules once every rawbody
                    // rule has run.
                    let text = message.rawbody();
                    let started = probe.now();
                    find_literals_of(&self.rawbody, text, &mut lines);
                    probe.spent(Cost::Prefilter(stage), started);
                    let pieces = Literals::Found { offset: self.rawbody.patterns.len() };
                    run_whole(&self.rawbody_pieces, (stage, pieces), (text, message.rawbody_pieces()), &mut state, &mut lines, probe);
                    run_lines(&self.rawbody, (stage, Literals::Found { offset: 0 }), text, &mut state, &mut lines, probe);
                }
                RuleType::Meta => {}
            }
        }
        scratch.epoch = lines.epoch;
        let started = probe.now();
        self.run_metas(&mut state, &mut scratch.meta_stack, &mut scratch.meta_marks);
        probe.spent(Cost::Metas, started);
        scratch.trim_caches();

        let mut score = Score::ZERO;
        for &id in scratch.hits.iter() {
            if let (Some(r), Some(&count)) = (self.rules.get(id as usize), scratch.counts.get(id as usize)) {
                if r.scored {
                    // As in SpamAssassin, a `multiple` rule scores once per match.
                    let times = i32::try_from(count).unwrap_or(i32::MAX);
                    score += Score(r.score.0.saturating_mul(times));
                }
            }
        }
        let names = &self.rules;
        scratch.hits.sort_unstable_by(|a, b| {
            let na = names.get(*a as usize).map_or("", |r| r.name.as_str());
            let nb = names.get(*b as usize).map_or("", |r| r.name.as_str());
            na.cmp(nb)
        });
        Verdict {
            rules: self,
            hits: &scratch.hits,
            counts: &scratch.counts,
            score,
            required: self.required,
            overflow,
            body_text: scratch.msg.body(),
        }
    }

    fn scan_headers(
        &self,
        message: &Message<'_>,
        state: &mut ScanState<'_>,
        lines: &mut LineScratch<'_>,
        text: &mut HeaderText,
        eval: &EvalScratch,
        probe: &mut impl Probe,
    ) {
        if self.headers.is_empty() {
            return;
        }
        let started = probe.now();
        let HeaderText { all: all_headers, target, names } = text;
        // The decoded header block: the `ALL` target and, with the raw block, the prefilter's haystack.
        message.decoded_header_block(all_headers);
        let epoch = lines.next_epoch();
        if let Some(literals) = &self.header_prefilter {
            // The relays' pseudo-headers are a haystack too: `target` is free until the checks.
            target.clear();
            if self.relay_literals {
                eval.relays.write_relay_texts(target);
            }
            for hay in [message.header_block(), all_headers.as_slice(), target.as_slice()] {
                literals.for_each_hit(hay, |literal, _| {
                    if let Some(e) = lines.literal_epoch.get_mut(literal) {
                        *e = epoch;
                    }
                });
            }
        }
        probe.spent(Cost::Prefilter(RuleType::Header), started);
        let mut built_for: Option<u32> = None;
        let mut present = false;
        for check in &self.headers {
            let started = probe.now();
            let candidate = check.literals.is_empty()
                || check.literals.iter().any(|&l| lines.literal_epoch.get(l as usize) == Some(&epoch));
            if !candidate {
                continue;
            }
            if built_for != Some(check.target) {
                present = match self.header_targets.get(check.target as usize) {
                    Some(t) => build_header_target(message, &t.field, t.form, all_headers, names, target, eval),
                    None => false,
                };
                built_for = Some(check.target);
            }
            let text: &[u8] = match (&check.if_unset, present) {
                (Some(unset), false) => unset.as_bytes(),
                _ => target.as_slice(),
            };
            let max = state.max_hits(check.rule);
            let hopeless = check.needs.rule_out(text, || longest_line(text));
            let n = match &check.test {
                HeaderCheckTest::Exists => u32::from(present),
                HeaderCheckTest::Matches(_) if hopeless => 0,
                HeaderCheckTest::Matches(m) => count_matches(m, text, max, &mut lines.engines),
                HeaderCheckTest::NotMatches(m) => u32::from(hopeless || count_matches(m, text, 1, &mut lines.engines) == 0),
            };
            state.add(check.rule, n);
            probe.spent(Cost::Rule(check.rule), started);
        }
    }

    fn scan_mimeheaders(&self, message: &Message<'_>, state: &mut ScanState<'_>, engines: &mut Engines<'_>, probe: &mut impl Probe) {
        if self.mimeheaders.is_empty() {
            return;
        }
        for part in message.parts() {
            for h in part.headers() {
                let first = self.mimeheaders.partition_point(|c| lowercase_cmp(c.name.as_bytes(), h.name).is_lt());
                let same_name = self.mimeheaders.get(first..).unwrap_or_default().iter();
                for check in same_name.take_while(|c| c.name.as_bytes().eq_ignore_ascii_case(h.name)) {
                    let max = state.max_hits(check.rule);
                    if max > 0 {
                        let started = probe.now();
                        let value = if check.raw { h.raw } else { h.decoded };
                        let hopeless = check.needs.rule_out(value, || longest_line(value));
                        let n = if hopeless { 0 } else { count_matches(&check.matcher, value, max, engines) };
                        state.add(check.rule, n);
                        probe.spent(Cost::Rule(check.rule), started);
                    }
                }
            }
        }
    }

    fn run_evals(&self, message: &Message<'_>, state: &mut ScanState<'_>, eval: &mut EvalScratch, probe: &mut impl Probe) {
        if self.evals.is_empty() {
            return;
        }
        let EvalScratch { relays, tests } = eval;
        let cx = EvalContext { message, data: &self.eval_data, relays };
        for check in &self.evals {
            let started = probe.now();
            let n = check.test.run(&cx, tests).min(state.max_hits(check.rule));
            state.add(check.rule, n);
            probe.spent(Cost::Rule(check.rule), started);
        }
    }

    /// Runs the metas whose rules hit; the others keep their value at zero. Metas are
    /// in dependency order, so a meta that hits marks its readers before they come.
    fn run_metas(&self, state: &mut ScanState<'_>, stack: &mut Vec<f64>, marks: &mut MetaMarks) {
        let epoch = marks.next_epoch();
        let readers = &self.meta_readers;
        for &rule in state.hits.iter() {
            marks.mark_all(readers.of(rule), epoch);
        }
        for (index, meta) in self.metas.iter().enumerate() {
            let hit = if marks.marked(index, epoch) {
                let counts = &*state.counts;
                eval_meta(&meta.steps, |id| counts.get(id as usize).copied().unwrap_or(0), stack) != 0.0
            } else {
                meta.at_zero
            };
            if hit {
                state.add(meta.rule, 1);
                marks.mark_all(readers.of(meta.rule), epoch);
            }
        }
    }
}

/// Which metas a scan must run: an epoch per meta, so no clearing between scans.
struct MetaMarks {
    epoch: u32,
    marked: Vec<u32>,
}

impl MetaMarks {
    fn next_epoch(&mut self) -> u32 {
        advance_epoch(&mut self.epoch, &mut [&mut self.marked])
    }

    fn mark_all(&mut self, metas: &[u32], epoch: u32) {
        for &m in metas {
            if let Some(slot) = self.marked.get_mut(m as usize) {
                *slot = epoch;
            }
        }
    }

    fn marked(&self, meta: usize, epoch: u32) -> bool {
        self.marked.get(meta) == Some(&epoch)
    }
}

/// Orders `a` (lowercase) against `b` as if `b` were lowercased too.
fn lowercase_cmp(a: &[u8], b: &[u8]) -> core::cmp::Ordering {
    a.iter().copied().cmp(b.iter().map(u8::to_ascii_lowercase))
}


/// Writes a header rule's target into `out`; returns whether any such header exists.
fn build_header_target(
    message: &Message<'_>,
    field: &HeaderField,
    form: HeaderForm,
    all_headers: &[u8],
    names: &mut NameScratch,
    out: &mut Vec<u8>,
    eval: &EvalScratch,
) -> bool {
    out.clear();
    if let HeaderField::Named(name) = field {
        if let Some(present) = eval.relays.pseudo_header_in(message, name.as_bytes(), out) {
            return present;
        }
    }
    let mut present = false;
    let mut push = |value: &[u8], out: &mut Vec<u8>| {
        if present {
            out.push(b'\n');
        }
        present = true;
        out.extend_from_slice(value);
    };
    let mut add_named = |name: &[u8], out: &mut Vec<u8>, skip_empty: bool| {
        for h in message.headers_named(name) {
            match form {
                HeaderForm::Decoded | HeaderForm::Raw => {
                    let value = if form == HeaderForm::Raw { h.raw } else { h.decoded };
                    if skip_empty && value.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    push(value, out);
                }
                // As SpamAssassin: every address of every instance.
                HeaderForm::Addr => {
                    for a in msg::addresses(h.raw).filter_map(|a| a.address) {
                        push(a, out);
                    }
                }
                HeaderForm::Name => {
                    let n = msg::first_display_name_decoded(h.raw, &mut names.out, &mut names.work);
                    if !n.is_empty() {
                        push(n, out);
                    }
                }
                HeaderForm::NameRaw => {
                    let n = msg::first_display_name(h.raw);
                    if !n.is_empty() {
                        push(n, out);
                    }
                }
            }
        }
    };
    match field {
        HeaderField::Named(name) => add_named(name.as_bytes(), out, false),
        HeaderField::ToCc => {
            add_named(b"To", out, false);
            add_named(b"Cc", out, false);
        }
        HeaderField::MessageId => {
            for name in [&b"X-Message-Id"[..], b"Resent-Message-Id", b"X-Original-Message-ID", b"Message-Id"] {
                add_named(name, out, true);
            }
        }
        HeaderField::All => {
            let block = if form == HeaderForm::Raw { message.header_block() } else { all_headers };
            out.extend_from_slice(block);
            return !block.is_empty();
        }
    }
    present
}

/// Header texts rules read: the decoded block, one target, display names.
struct HeaderText {
    all: Vec<u8>,
    target: Vec<u8>,
    names: NameScratch,
}

/// Buffers for decoding display names (`:name`).
#[derive(Default)]
struct NameScratch {
    out: Vec<u8>,
    work: [Vec<u8>; 4],
}

/// Hit counts being gathered for one message, and the checks deferred in its stage.
struct ScanState<'s> {
    rules: &'s RuleSet,
    counts: &'s mut Vec<u32>,
    hits: &'s mut Vec<u32>,
    demand: &'s mut DemandScratch,
    deferred: &'s mut Vec<Deferred>,
}

/// A check deferred to the end of its stage, its rule being on demand.
#[derive(Debug, Clone, Copy)]
struct Deferred {
    rule: u32,
    run: DeferredRun,
}

/// What a deferred check runs.
#[derive(Debug, Clone, Copy)]
enum DeferredRun {
    /// A `full` pattern, on the whole message.
    Whole(u32),
    /// A line pattern, on the lines that hold its literals.
    Candidate(u32),
    /// A line pattern, on the lines from a line start.
    From { pattern: u32, from: u32 },
}

impl ScanState<'_> {
    /// Defers `run`, a check of `rule`, to the end of its stage when the rule is on
    /// demand (and the queue has room): whether it did.
    fn defer(&mut self, rule: u32, run: DeferredRun) -> bool {
        if !self.rules.demand.on_demand(rule) || self.deferred.len() >= self.deferred.capacity() {
            return false;
        }
        self.demand.defer(rule);
        self.deferred.push(Deferred { rule, run });
        true
    }

    /// The next deferred check, from `*next` in the queue, that must run; the queue
    /// empties once none is left.
    fn next_needed(&mut self, next: &mut usize, probe: &mut impl Probe) -> Option<Deferred> {
        while let Some(&deferred) = self.deferred.get(*next) {
            *next += 1;
            let started = probe.now();
            let needed = self.demand.take(self.rules, self.counts, deferred.rule);
            probe.spent(Cost::Demand, started);
            if needed {
                return Some(deferred);
            }
        }
        self.deferred.clear();
        None
    }

    fn max_hits(&self, rule: u32) -> u32 {
        let max = self.rules.rules.get(rule as usize).map_or(1, |r| r.max_hits);
        let have = self.counts.get(rule as usize).copied().unwrap_or(0);
        max.saturating_sub(have)
    }

    fn add(&mut self, rule: u32, n: u32) {
        if n == 0 {
            return;
        }
        let max = self.rules.rules.get(rule as usize).map_or(1, |r| r.max_hits);
        if let Some(c) = self.counts.get_mut(rule as usize) {
            if *c == 0 && self.hits.len() < self.hits.capacity() {
                self.hits.push(rule);
            }
            *c = c.saturating_add(n).min(max);
        }
    }
}

/// Borrowed scratch arrays for prefiltered line scans.
struct LineScratch<'s> {
    epoch: u32,
    literal_epoch: &'s mut [u32],
    literal_first: &'s mut [u32],
    literal_last: &'s mut [u32],
    literals_hit: &'s mut Vec<u32>,
    /// Literal id → its latest hit in `hit_pos` (chained through `hit_next`).
    literal_head: &'s mut [u32],
    hit_pos: &'s mut Vec<u32>,
    hit_next: &'s mut Vec<u32>,
    /// A candidate's line starts, or where its matches may start.
    starts: &'s mut Vec<u32>,
    /// More hits than `hit_pos` holds: candidates fall back to their whole span.
    hits_overflow: bool,
    /// The longest line of the text the pass is on, once measured.
    longest_line: Option<usize>,
    pattern_epoch: &'s mut [u32],
    pattern_first: &'s mut [u32],
    pattern_last: &'s mut [u32],
    candidates: &'s mut Vec<u32>,
    engines: Engines<'s>,
}

impl LineScratch<'_> {
    /// A fresh epoch: marks left by the previous pass no longer count.
    fn next_epoch(&mut self) -> u32 {
        advance_epoch(&mut self.epoch, &mut [&mut *self.literal_epoch, &mut *self.pattern_epoch])
    }

    /// Whether `text`, the text of this pass, has no room for a match taking `room`.
    fn no_room(&mut self, room: MatchRoom, text: &[u8]) -> bool {
        let known = &mut self.longest_line;
        room.rules_out(text, || *known.get_or_insert_with(|| longest_line(text)))
    }

    /// Whether pattern `p` of `program` cannot match in `text`, the text of this pass.
    fn cannot_hold(&mut self, program: &TargetProgram, p: u32, text: &[u8]) -> bool {
        let Some(needs) = program.pattern_needs.get(p as usize) else { return false };
        let known = &mut self.longest_line;
        needs.rule_out(text, || *known.get_or_insert_with(|| longest_line(text)))
    }
}

/// The length of the longest `\n`-separated line of `text`.
fn longest_line(text: &[u8]) -> usize {
    let mut longest = 0;
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', text).chain(core::iter::once(text.len())) {
        longest = longest.max(end - start);
        start = end + 1;
    }
    longest
}

/// Moves `epoch` on: a mark equal to the new value was set in this pass. On wrap-around
/// every mark is cleared first, so an old mark never reads as new.
fn advance_epoch(epoch: &mut u32, marks: &mut [&mut [u32]]) -> u32 {
    *epoch = epoch.wrapping_add(1);
    if *epoch == 0 {
        marks.iter_mut().for_each(|m| m.fill(0));
        *epoch = 1;
    }
    *epoch
}

/// A lazy DFA and this worker's cache for it.
type LazyEngine<'e> = (&'e hybrid::dfa::DFA, &'e mut hybrid::dfa::Cache);

/// Lazy DFA `i` of `dfas` with its cache in `caches` (made on first use), marked as used
/// by scan `scan`.
fn lazy_engine<'e>(dfas: &'e [hybrid::dfa::DFA], caches: &'e mut [CacheSlot], scan: u64, i: usize) -> Option<LazyEngine<'e>> {
    let (dfa, slot) = (dfas.get(i)?, caches.get_mut(i)?);
    slot.last_scan = scan;
    Some((dfa, slot.cache.get_or_insert_with(|| dfa.create_cache())))
}

/// The rule set's lazy DFAs, narrow DFAs' tables and backtracking programs, with this
/// scratch's caches for them.
pub(crate) struct Engines<'s> {
    dfas: &'s [hybrid::dfa::DFA],
    /// The narrow DFAs' tables.
    narrow: &'s NarrowTables,
    caches: &'s mut [CacheSlot],
    /// This scan's number, marked on each cache it uses.
    scan: u64,
    programs: &'s [Program],
    backtrack: &'s mut BacktrackScratch,
    repeat_ends: &'s mut Vec<u16>,
}

impl Engines<'_> {
    /// Lazy DFA `i` with this scratch's cache for it (made on first use), marked as used
    /// by this scan.
    fn lazy(&mut self, i: usize) -> Option<(&hybrid::dfa::DFA, &mut hybrid::dfa::Cache)> {
        lazy_engine(self.dfas, self.caches, self.scan, i)
    }

    /// Lazy DFA `i`, the part of a repeat, as [`Engines::lazy`], with the scratch its
    /// chains keep their ends in.
    fn repeat(&mut self, i: usize) -> Option<(&hybrid::dfa::DFA, &mut hybrid::dfa::Cache, &mut Vec<u16>)> {
        let (dfa, cache) = lazy_engine(self.dfas, self.caches, self.scan, i)?;
        Some((dfa, cache, &mut *self.repeat_ends))
    }

    /// Lazy DFAs `i` and `j` (not the same) with their caches, as [`Engines::lazy`].
    fn lazy_two(&mut self, i: usize, j: usize) -> Option<(LazyEngine<'_>, LazyEngine<'_>)> {
        let (low, high) = (i.min(j), i.max(j));
        if low == high {
            return None;
        }
        let (before, after) = self.caches.split_at_mut_checked(high)?;
        let (slot_low, slot_high) = (before.get_mut(low)?, after.first_mut()?);
        let (dfa_low, dfa_high) = (self.dfas.get(low)?, self.dfas.get(high)?);
        slot_low.last_scan = self.scan;
        slot_high.last_scan = self.scan;
        let low_pair = (dfa_low, slot_low.cache.get_or_insert_with(|| dfa_low.create_cache()));
        let high_pair = (dfa_high, slot_high.cache.get_or_insert_with(|| dfa_high.create_cache()));
        Some(if i < j { (low_pair, high_pair) } else { (high_pair, low_pair) })
    }
}

/// Marks the `literals` found in `text`, keeping each one's first and last position.
fn find_literals(literals: &LiteralAutomaton, text: &[u8], s: &mut LineScratch<'_>) {
    s.literals_hit.clear();
    s.hit_pos.clear();
    s.hit_next.clear();
    s.hits_overflow = false;
    literals.for_each_hit(text, |lit, start| {
        let pos = start as u32;
        let (Some(e), Some(first), Some(last), Some(head)) = (
            s.literal_epoch.get_mut(lit),
            s.literal_first.get_mut(lit),
            s.literal_last.get_mut(lit),
            s.literal_head.get_mut(lit),
        ) else {
            return;
        };
        if *e != s.epoch {
            *e = s.epoch;
            *first = pos;
            *last = pos;
            *head = NO_HIT;
            if s.literals_hit.len() < s.literals_hit.capacity() {
                s.literals_hit.push(lit as u32);
            }
        } else {
            *last = pos;
        }
        if s.hit_pos.len() < MAX_HITS {
            let index = s.hit_pos.len() as u32;
            s.hit_pos.push(pos);
            s.hit_next.push(*head);
            *head = index;
        } else {
            s.hits_overflow = true;
        }
    });
}

/// Marks no (further) hit in a literal's chain.
const NO_HIT: u32 = u32::MAX;
/// Most literal hits remembered per pass; beyond, candidates scan their whole span.
const MAX_HITS: usize = 4096;

/// Start offsets of the lines of `text` where a literal of pattern `p` occurs, sorted,
/// into `s.starts`; false when the hits overflowed and lines are not known.
fn candidate_lines(program: &TargetProgram, p: u32, text: &[u8], s: &mut LineScratch<'_>) -> bool {
    if !literal_hits(program, p, s, |pos| line_start(text, pos as usize) as u32) {
        return false;
    }
    let min_hits = program.pattern_min_hits.get(p as usize).copied().unwrap_or(1);
    if min_hits <= 1 {
        s.starts.dedup();
    } else {
        // Keep the lines holding at least `min_hits` hits (each hit pushed its line once).
        keep_repeated(s.starts, min_hits as usize);
    }
    true
}

/// Where the literals of pattern `p` occur, sorted and each once, into `s.starts`;
/// false when the hits overflowed and the places are not known.
fn candidate_starts(program: &TargetProgram, p: u32, s: &mut LineScratch<'_>) -> bool {
    if !literal_hits(program, p, s, |pos| pos) {
        return false;
    }
    s.starts.dedup();
    true
}

/// `place` of every hit of a literal of pattern `p`, sorted, into `s.starts`; false
/// when the hits overflowed.
fn literal_hits(program: &TargetProgram, p: u32, s: &mut LineScratch<'_>, place: impl Fn(u32) -> u32) -> bool {
    s.starts.clear();
    if s.hits_overflow {
        return false;
    }
    let Some(lits) = program.pattern_literals.get(p as usize) else { return false };
    for &lit in lits {
        if s.literal_epoch.get(lit as usize) != Some(&s.epoch) {
            continue;
        }
        let mut h = s.literal_head.get(lit as usize).copied().unwrap_or(NO_HIT);
        while let (Some(&pos), Some(&next)) = (s.hit_pos.get(h as usize), s.hit_next.get(h as usize)) {
            if s.starts.len() < s.starts.capacity() {
                s.starts.push(place(pos));
            }
            h = next;
        }
    }
    s.starts.sort_unstable();
    true
}

/// Reduces sorted `starts` to one entry per value that occurs at least `min` times.
fn keep_repeated(starts: &mut Vec<u32>, min: usize) {
    let mut kept = 0usize;
    let mut i = 0usize;
    while let Some(&v) = starts.get(i) {
        let run = starts.get(i..).map_or(0, |rest| rest.iter().take_while(|&&x| x == v).count());
        if run >= min {
            if let Some(slot) = starts.get_mut(kept) {
                *slot = v;
            }
            kept += 1;
        }
        i += run.max(1);
    }
    starts.truncate(kept);
}

/// Patterns whose literals occur, each with the span of text where they occur.
fn gather_candidates(program: &TargetProgram, offset: usize, s: &mut LineScratch<'_>) {
    s.candidates.clear();
    for &lit in s.literals_hit.iter() {
        let (Some(&first), Some(&last)) = (s.literal_first.get(lit as usize), s.literal_last.get(lit as usize))
        else {
            continue;
        };
        let Some(users) = program.literal_patterns.get(lit as usize) else { continue };
        for &p in users {
            let slot = p as usize + offset;
            let (Some(e), Some(pf), Some(pl)) = (s.pattern_epoch.get_mut(slot), s.pattern_first.get_mut(slot), s.pattern_last.get_mut(slot))
            else {
                continue;
            };
            if *e != s.epoch {
                *e = s.epoch;
                *pf = first;
                *pl = last;
                if s.candidates.len() < s.candidates.capacity() {
                    s.candidates.push(p);
                }
            } else {
                *pf = (*pf).min(first);
                *pl = (*pl).max(last);
            }
        }
    }
}

/// Starts a pass over `text`: finds the literals of `program`'s table (none without one).
fn find_literals_of(program: &TargetProgram, text: &[u8], s: &mut LineScratch<'_>) {
    s.next_epoch();
    s.longest_line = None;
    match &program.prefilter {
        Some(literals) => find_literals(literals, text, s),
        None => {
            s.literals_hit.clear();
            s.hit_pos.clear();
            s.hit_next.clear();
        }
    }
}

/// Where a pass's candidates come from.
#[derive(Clone, Copy)]
enum Literals {
    /// A pass of the program's own literal table.
    Own,
    /// The pass made before, of another program's table it shares; its patterns take
    /// the scratch's pattern slots from `offset` on.
    Found { offset: usize },
}

/// The candidates of a pass over `text` of `program`: the patterns whose literals occur in it.
fn prefilter(program: &TargetProgram, literals: Literals, text: &[u8], s: &mut LineScratch<'_>) {
    let offset = match literals {
        Literals::Own => {
            find_literals_of(program, text, s);
            0
        }
        Literals::Found { offset } => offset,
    };
    gather_candidates(program, offset, s);
}

/// Runs a line-oriented target (`body`, `rawbody`, `uri`): each pattern sees one line at a time.
fn run_lines(
    program: &TargetProgram,
    (target, literals): (RuleType, Literals),
    text: &[u8],
    state: &mut ScanState<'_>,
    s: &mut LineScratch<'_>,
    probe: &mut impl Probe,
) {
    if program.patterns.is_empty() {
        return;
    }
    let started = probe.now();
    prefilter(program, literals, text, s);
    probe.spent(Cost::Prefilter(target), started);
    for i in 0..s.candidates.len() {
        let started = probe.now();
        let Some(&p) = s.candidates.get(i) else { break };
        let Some(pattern) = program.patterns.get(p as usize) else { continue };
        if !s.cannot_hold(program, p, text) && !state.defer(pattern.rule, DeferredRun::Candidate(p)) {
            run_candidate(program, p, text, state, s);
        }
        probe.spent(Cost::Rule(pattern.rule), started);
    }
    // Where a union's pass starts: a union of one whose member needs a byte starts at
    // the line of its first, and has nothing to find without it.
    let start_of = |u: &Union| match u.members.as_slice() {
        &[p] => match program.pattern_needs.get(p as usize).and_then(|needs| needs.byte.as_ref()) {
            Some(byte) => byte.find(text).map(|at| line_start(text, at)),
            None => Some(0),
        },
        _ => Some(0),
    };
    let mut i = 0;
    // The start of union `i` when the pass before looked it up already.
    let mut known_start = None;
    while let Some(union) = program.unions.get(i) {
        let Some(from) = known_start.take().unwrap_or_else(|| start_of(union)) else {
            i += 1;
            continue;
        };
        let started = probe.now();
        let (mut first_ends, mut next_ends) = ([0u32; UNION_MEMBERS], [0u32; UNION_MEMBERS]);
        let next_start = program.unions.get(i + 1).map(start_of);
        // Two dense unions, or two lazy ones, walk the text together.
        let two = program.unions.get(i + 1).and_then(|next| {
            let froms = (from, next_start??);
            let found = match (&union.automaton, &next.automaton) {
                (UnionAutomaton::Lazy(a), UnionAutomaton::Lazy(b)) => {
                    let (one, two) = s.engines.lazy_two(*a, *b)?;
                    union.finds_two_lazy(next, one, two, text, froms, (&mut first_ends, &mut next_ends))?
                }
                _ => union.finds_two(next, text, froms, (&mut first_ends, &mut next_ends), (&program.patterns, s.engines.narrow))?,
            };
            Some((next, found))
        });
        let found = match two {
            Some((_, (found, _))) => found,
            None => union.finds(text, from, &mut first_ends, (&program.patterns, s.engines.narrow), |i| s.engines.lazy(i)),
        };
        probe.spent(Cost::Unions(target), started);
        take_union(program, union, found.map(|f| (f, &first_ends)), text, state, s, probe);
        if let Some((next, (_, next_found))) = two {
            take_union(program, next, next_found.map(|f| (f, &next_ends)), text, state, s, probe);
        }
        if two.is_none() {
            known_start = next_start;
        }
        i += if two.is_some() { 2 } else { 1 };
    }
    for &p in &program.unfiltered {
        run_unfiltered(program, p, text, 0, state, s, probe);
    }
    let mut next = 0;
    while let Some(deferred) = state.next_needed(&mut next, probe) {
        let started = probe.now();
        match deferred.run {
            DeferredRun::Candidate(p) => run_candidate(program, p, text, state, s),
            DeferredRun::From { pattern, from } => search_unfiltered(program, pattern, text, from as usize, state, s),
            // A line stage defers no `full` pattern.
            DeferredRun::Whole(_) => {}
        }
        probe.spent(Cost::Rule(deferred.rule), started);
    }
}

/// Runs candidate line pattern `p` over the lines of `text` where its literals occur.
fn run_candidate(program: &TargetProgram, p: u32, text: &[u8], state: &mut ScanState<'_>, s: &mut LineScratch<'_>) {
    let (Some(&first), Some(&last), Some(pattern)) =
        (s.pattern_first.get(p as usize), s.pattern_last.get(p as usize), program.patterns.get(p as usize))
    else {
        return;
    };
    // Only lines holding one of its literals can match (a pattern that is only
    // literals counts them over the lines from first to last at once). Lines next to
    // each other are searched as one text, which most often does not match.
    let floor = searched_from(pattern, text);
    if pattern.exact.is_none() && candidate_lines(program, p, text, s) {
        let mut j = s.starts.partition_point(|&start| (start as usize) < floor);
        while let Some(&start) = s.starts.get(j) {
            let max = state.max_hits(pattern.rule);
            if max == 0 {
                break;
            }
            let (start, first_end) = (start as usize, line_end(text, start as usize));
            let mut end = first_end;
            j += 1;
            while let Some(&next) = s.starts.get(j).filter(|&&next| next as usize == end + 1) {
                end = line_end(text, next as usize);
                j += 1;
            }
            let lines = text.get(start..past_line_end(program, text, end)).unwrap_or(&[]);
            let n = if end == first_end {
                count_matches(&pattern.matcher, lines, max, &mut s.engines)
            } else {
                count_in_lines(&pattern.matcher, (lines, program.line_ends), max, &mut s.engines)
            };
            state.add(pattern.rule, n);
        }
        return;
    }
    let (start, end) = (line_start(text, first as usize).max(floor), past_line_end(program, text, line_end(text, last as usize)));
    let lines = text.get(start..end).unwrap_or(&[]);
    let n = count_pattern_in_lines(pattern, (lines, program.line_ends), state.max_hits(pattern.rule), &mut s.engines);
    state.add(pattern.rule, n);
}

/// Where in `text` line pattern `pattern` is searched from: past the first line, the
/// Subject, for a body rule with `tflags nosubject`, else the start.
fn searched_from(pattern: &CompiledPattern, text: &[u8]) -> usize {
    match pattern.skips_subject {
        true => memchr::memchr(b'\n', text).map_or(text.len(), |i| i + 1),
        false => 0,
    }
}

/// Takes what `union` found for its members: the members found by bit and where each
/// one's first match ends, or `None` when its search failed. A decided member takes
/// its hit; the others found search from the line of their first match.
fn take_union(
    program: &TargetProgram,
    union: &Union,
    found: Option<(u64, &[u32; UNION_MEMBERS])>,
    text: &[u8],
    state: &mut ScanState<'_>,
    s: &mut LineScratch<'_>,
    probe: &mut impl Probe,
) {
    for (bit, &p) in union.members.iter().enumerate() {
        match union.member(found.map(|(found, _)| found), bit) {
            Member::Absent => {}
            Member::Hit => {
                if let Some(pattern) = program.patterns.get(p as usize) {
                    state.add(pattern.rule, 1);
                }
            }
            Member::Search => {
                // No line before the one of the member's first match in the union can match
                // (that match may end past its line's `\n`).
                let from = found.and_then(|(_, ends)| ends.get(bit).copied()).map_or(0, |end| line_start(text, (end as usize).saturating_sub(1)));
                run_unfiltered(program, p, text, from, state, s, probe);
            }
        }
    }
}

/// The lines an unfiltered pattern needing `needs` is searched in, of `text` (all of
/// the pass's), and how they end. In the body, one that may match empty sees them
/// without their `\n`: it would match after each, where SpamAssassin's lines have
/// nothing (so neither after the text's final one).
fn lines_of<'t>(program: &TargetProgram, needs: &MatchNeeds, text: &'t [u8]) -> (&'t [u8], LineEnds) {
    match (program.line_ends, text.split_last()) {
        (LineEnds::Newline, Some((b'\n', lines))) if needs.room.empty => (lines, LineEnds::Bare),
        (LineEnds::Newline, _) if needs.room.empty => (text, LineEnds::Bare),
        (ends, _) => (text, ends),
    }
}

/// Runs unfiltered line pattern `p` over the lines of `text` from `from`, a line start
/// before which it cannot match (or defers it).
fn run_unfiltered(program: &TargetProgram, p: u32, text: &[u8], from: usize, state: &mut ScanState<'_>, s: &mut LineScratch<'_>, probe: &mut impl Probe) {
    let started = probe.now();
    let (Some(pattern), Some(needs)) = (program.patterns.get(p as usize), program.pattern_needs.get(p as usize)) else { return };
    let from = from.max(searched_from(pattern, text));
    // No match starts before the line of the first byte every match needs.
    let from = match &needs.byte {
        _ if s.no_room(needs.room, text) => None,
        Some(byte) => text.get(from..).and_then(|rest| byte.find(rest)).map(|at| line_start(text, from + at)),
        None => Some(from),
    };
    if let Some(from) = from {
        let deferred = DeferredRun::From { pattern: p, from: from as u32 };
        if !state.defer(pattern.rule, deferred) {
            search_unfiltered(program, p, text, from, state, s);
        }
    }
    probe.spent(Cost::Rule(pattern.rule), started);
}

/// Counts the matches of line pattern `p` in the lines of `text` from line start `from`.
fn search_unfiltered(program: &TargetProgram, p: u32, text: &[u8], from: usize, state: &mut ScanState<'_>, s: &mut LineScratch<'_>) {
    let (Some(pattern), Some(needs)) = (program.patterns.get(p as usize), program.pattern_needs.get(p as usize)) else { return };
    let (text, ends) = lines_of(program, needs, text);
    let n = count_pattern_in_lines(pattern, (text.get(from..).unwrap_or_default(), ends), state.max_hits(pattern.rule), &mut s.engines);
    state.add(pattern.rule, n);
}

/// Runs the patterns of `program` on each of `pieces` of `text` whole: the message for
/// `full`, the pieces SpamAssassin cuts `rawbody` into. A `full` rule may be deferred;
/// a `rawbody` one is not, since the line pass after it decides the stage's deferrals.
fn run_whole(
    program: &TargetProgram,
    (target, literals): (RuleType, Literals),
    (text, pieces): (&[u8], impl Iterator<Item = Range<usize>> + Clone),
    state: &mut ScanState<'_>,
    s: &mut LineScratch<'_>,
    probe: &mut impl Probe,
) {
    if program.patterns.is_empty() {
        return;
    }
    let may_defer = target == RuleType::Full;
    let started = probe.now();
    prefilter(program, literals, text, s);
    probe.spent(Cost::Prefilter(target), started);
    for i in 0..s.candidates.len() + program.unfiltered.len() {
        let started = probe.now();
        // The candidates, then the unfiltered patterns.
        let Some(p) = s.candidates.get(i).or_else(|| program.unfiltered.get(i - s.candidates.len())).copied() else { break };
        let Some(pattern) = program.patterns.get(p as usize) else { continue };
        // Runs now unless it cannot hold a match or waits for demand.
        if !(s.cannot_hold(program, p, text) || (may_defer && state.defer(pattern.rule, DeferredRun::Whole(p)))) {
            run_whole_pattern(program, p, text, pieces.clone(), state, s);
        }
        probe.spent(Cost::Rule(pattern.rule), started);
    }
    // Rawbody's unfiltered patterns in unions: one walk of each piece tells which
    // members can match it.
    for union in &program.unions {
        for piece in pieces.clone() {
            let hay = text.get(piece).unwrap_or_default();
            let started = probe.now();
            let mut first_ends = [0u32; UNION_MEMBERS];
            let found = union.finds(hay, 0, &mut first_ends, (&program.patterns, s.engines.narrow), |i| s.engines.lazy(i));
            probe.spent(Cost::Unions(target), started);
            for (bit, &p) in union.members.iter().enumerate() {
                let Some(pattern) = program.patterns.get(p as usize) else { continue };
                match union.member(found, bit) {
                    Member::Absent => {}
                    Member::Hit => state.add(pattern.rule, 1),
                    Member::Search => {
                        let started = probe.now();
                        let n = count_matches(&pattern.matcher, hay, state.max_hits(pattern.rule), &mut s.engines);
                        state.add(pattern.rule, n);
                        probe.spent(Cost::Rule(pattern.rule), started);
                    }
                }
            }
        }
    }
    let mut next = 0;
    while let Some(deferred) = state.next_needed(&mut next, probe) {
        let started = probe.now();
        if let DeferredRun::Whole(p) = deferred.run {
            run_whole_pattern(program, p, text, pieces.clone(), state, s);
        }
        probe.spent(Cost::Rule(deferred.rule), started);
    }
}

/// Counts the matches of pattern `p` in `pieces` of `text`, each searched whole.
fn run_whole_pattern(
    program: &TargetProgram,
    p: u32,
    text: &[u8],
    pieces: impl Iterator<Item = Range<usize>>,
    state: &mut ScanState<'_>,
    s: &mut LineScratch<'_>,
) {
    let Some(pattern) = program.patterns.get(p as usize) else { return };
    let max = state.max_hits(pattern.rule);
    // A backtracking pattern's screen is searched in one pass (never anchored: see
    // `RuleSet::build_pattern`).
    let anchored = program.pattern_starts_match.get(p as usize) == Some(&true)
        && !matches!(pattern.matcher, Matcher::Backtrack { .. });
    if anchored && candidate_starts(program, p, s) {
        // Only `full` patterns start at their literals, and the message is one piece.
        let n = count_from(&pattern.matcher, text, s.starts, max, &mut s.engines);
        state.add(pattern.rule, n);
        return;
    }
    // A DFA whose matches span at most `longest` bytes, each holding one of its
    // literals, is searched only that far around them.
    let longest = program.pattern_longest.get(p as usize).copied().unwrap_or(NO_BOUND);
    let bounded = longest != NO_BOUND && matches!(pattern.matcher, Matcher::Dense(_) | Matcher::Narrow(_) | Matcher::Lazy(_));
    let mut pieces = pieces.peekable();
    let first = pieces.next();
    // Of several pieces, only those holding one of its literals can match.
    let places = (bounded || pieces.peek().is_some())
        && program.pattern_literals.get(p as usize).is_some_and(|lits| !lits.is_empty())
        && candidate_starts(program, p, s);
    let mut n = 0;
    for piece in first.into_iter().chain(pieces) {
        if n >= max {
            break;
        }
        if places && !holds_any(s.starts, &piece) {
            continue;
        }
        let hay = text.get(piece.clone()).unwrap_or_default();
        n += if places && bounded {
            count_near(&pattern.matcher, hay, (piece.start, s.starts), longest as usize, max - n, &mut s.engines)
        } else {
            count_matches(&pattern.matcher, hay, max - n, &mut s.engines)
        };
    }
    state.add(pattern.rule, n);
}

/// [`count_matches`] of a DFA `matcher` in `hay`, a piece starting at `offset` of the
/// text `places` (sorted) are in, every match of which spans at most `longest` bytes and
/// holds one of the places: only the stretches within `longest` of one are searched, in
/// the whole piece's context, so each finds what a search of the piece finds there.
fn count_near(matcher: &Matcher, hay: &[u8], (offset, places): (usize, &[u32]), longest: usize, max: u32, engines: &mut Engines<'_>) -> u32 {
    let mut count = 0u32;
    let mut pos = 0usize;
    let mut i = places.partition_point(|&at| (at as usize) < offset);
    while count < max {
        let Some(at) = places.get(i).map(|&at| at as usize - offset).filter(|&at| at < hay.len()) else { break };
        // A stretch: from `longest` before this place to `longest` after the last one
        // whose own stretch meets it.
        let start = at.saturating_sub(longest).max(pos);
        let mut end = (at + longest).min(hay.len());
        i += 1;
        while let Some(next) = places.get(i).map(|&at| at as usize - offset).filter(|&next| next < hay.len() && next.saturating_sub(longest) <= end) {
            end = (next + longest).min(hay.len());
            i += 1;
        }
        let mut from = start;
        while count < max && from <= end {
            let Some(m) = search(matcher, &Input::new(hay).range(from..end).earliest(max == 1), engines) else { break };
            count += 1;
            let found = m.offset();
            from = if found > from { found } else { from + 1 };
        }
        pos = from;
    }
    count
}

/// Whether sorted `places` has one in `range`.
fn holds_any(places: &[u32], range: &Range<usize>) -> bool {
    let i = places.partition_point(|&at| (at as usize) < range.start);
    places.get(i).is_some_and(|&at| (at as usize) < range.end)
}

fn line_start(text: &[u8], pos: usize) -> usize {
    memchr::memrchr(b'\n', text.get(..pos).unwrap_or(text)).map_or(0, |i| i + 1)
}

fn line_end(text: &[u8], pos: usize) -> usize {
    match text.get(pos..) {
        Some(rest) => memchr::memchr(b'\n', rest).map_or(text.len(), |i| pos + i),
        None => text.len(),
    }
}

/// Where the searched text of lines ending at `end` (a [`line_end`]) ends: past the `\n`
/// there when `program`'s lines keep theirs.
fn past_line_end(program: &TargetProgram, text: &[u8], end: usize) -> usize {
    match program.line_ends {
        LineEnds::Newline => (end + 1).min(text.len()),
        LineEnds::Bare => end,
    }
}

/// Matches of a line-target `matcher` in the `\n`-separated lines of `text`, ending as
/// `ends` says, at most `max` in all. Its automaton never matches across a line break,
/// so one search tells whether any line matches; counting (empty matches at line
/// starts) and backtracking programs, which would match across lines, go line by line
/// when it does.
fn count_in_lines(matcher: &Matcher, (text, ends): (&[u8], LineEnds), max: u32, engines: &mut Engines<'_>) -> u32 {
    let screen = match matcher {
        Matcher::Backtrack { relaxed, .. } => relaxed,
        m => m,
    };
    if max == 0 || count_matches(screen, text, 1, engines) == 0 {
        return 0;
    }
    if max == 1 && core::ptr::eq(screen, matcher) {
        return 1;
    }
    match_lines(matcher, (text, ends), max, engines)
}

/// Matches of line pattern `pattern` in the lines of `text`, at most `max`: its
/// literals' occurrences when it is only literals, else its matcher's.
fn count_pattern_in_lines(pattern: &CompiledPattern, (text, ends): (&[u8], LineEnds), max: u32, engines: &mut Engines<'_>) -> u32 {
    match &pattern.exact {
        Some(exact) => exact.count(text, max),
        None => count_in_lines(&pattern.matcher, (text, ends), max, engines),
    }
}

/// Matches of `matcher` in each `\n`-separated line of `text`, with its `\n` when
/// `ends` says lines keep it, at most `max` in all.
fn match_lines(matcher: &Matcher, (text, ends): (&[u8], LineEnds), max: u32, engines: &mut Engines<'_>) -> u32 {
    let newline = |&b: &u8| b == b'\n';
    match ends {
        LineEnds::Newline => match_each(matcher, text.split_inclusive(newline), max, engines),
        LineEnds::Bare => match_each(matcher, text.split(newline), max, engines),
    }
}

/// Matches of `matcher` in each of `lines`, at most `max` in all.
fn match_each<'t>(matcher: &Matcher, lines: impl Iterator<Item = &'t [u8]>, max: u32, engines: &mut Engines<'_>) -> u32 {
    let mut total = 0u32;
    if max == 0 {
        return 0;
    }
    for line in lines {
        total = total.saturating_add(count_matches(matcher, line, max - total, engines));
        if total >= max {
            break;
        }
    }
    total
}

/// Non-overlapping matches in `hay`, leftmost-first as Perl's `/g` finds them, at most `max`.
pub(crate) fn count_matches(matcher: &Matcher, hay: &[u8], max: u32, engines: &mut Engines<'_>) -> u32 {
    if let Matcher::Backtrack { relaxed, program } = matcher {
        // The relaxed DFA screens; the program decides (an undecided search counts as no match).
        if max == 0 || count_matches(relaxed, hay, 1, engines) == 0 {
            return 0;
        }
        return match engines.programs.get(*program as usize) {
            Some(p) => p.count_matches(hay, max, engines.backtrack).count,
            None => 0,
        };
    }
    if let Matcher::Repeat(repeat) = matcher {
        // Built only for rules counting one hit: whether `hay` matches.
        let Some((dfa, cache, ends)) = engines.repeat(repeat.unit) else { return 0 };
        return u32::from(max > 0 && repeat.is_match(dfa, cache, hay, ends));
    }
    let mut count = 0u32;
    let mut pos = 0usize;
    while count < max && pos <= hay.len() {
        let Some(m) = search(matcher, &Input::new(hay).range(pos..).earliest(max == 1), engines) else { break };
        count += 1;
        let end = m.offset();
        pos = if end > pos { end } else { pos + 1 };
    }
    count
}

/// Non-overlapping matches in `hay` as [`count_matches`] counts them, at most `max`, of a
/// DFA whose every match starts at one of `starts` (sorted): each is tried anchored.
fn count_from(matcher: &Matcher, hay: &[u8], starts: &[u32], max: u32, engines: &mut Engines<'_>) -> u32 {
    let mut count = 0u32;
    let mut pos = 0usize;
    for &start in starts {
        let start = start as usize;
        if count >= max {
            break;
        }
        if start < pos || start > hay.len() {
            continue;
        }
        let input = Input::new(hay).range(start..).anchored(Anchored::Yes).earliest(max == 1);
        if let Some(m) = search(matcher, &input, engines) {
            count += 1;
            pos = m.offset().max(start + 1);
        }
    }
    count
}

/// The end of the first match of a DFA `matcher` in `input` (none for a backtracking or
/// a repeat one).
fn search(matcher: &Matcher, input: &Input<'_>, engines: &mut Engines<'_>) -> Option<HalfMatch> {
    match matcher {
        Matcher::Dense(dfa) => dfa.try_search_fwd(input).ok().flatten(),
        Matcher::Narrow(dfa) => engines.narrow.place(dfa)?.find(input),
        Matcher::Lazy(i) => engines.lazy(*i).and_then(|(dfa, cache)| dfa.try_search_fwd(cache, input).ok().flatten()),
        Matcher::Backtrack { .. } | Matcher::Repeat(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::cf::parse_str;
    use crate::rules::literal::RequiredByte;
    use alloc::string::String;
    use alloc::vec::Vec;

    const MSG: &str = "From: \"Cheap Meds\" <deals@pharma.example>\r\nTo: you@example.org\r\nSubject: Buy cheap VIAGRA now\r\nMessage-Id: <abc@pharma.example>\r\nContent-Type: text/plain\r\n\r\nHello friend,\r\nclick here to buy viagra, viagra and more viagra.\r\n\r\nVisit http://pharma.example.com/buy now.\r\n";

    fn hits(rules: &str, message: &str) -> (Vec<String>, i32) {
        let config = parse_str("test.cf", rules).expect("rules parse");
        let set = RuleSet::compile(&config).expect("rules compile");
        let mut scratch = Scratch::new(&set);
        let v = set.scan(message.as_bytes(), &mut scratch);
        (v.hits().map(|h| String::from(h.name)).collect(), v.score.0)
    }

    /// Each row's rules hit `message` with exactly the rules it lists.
    fn assert_hits(message: &str, cases: &[(&str, &[&str])]) {
        for (rules, want) in cases {
            let (got, _) = hits(rules, message);
            let want: Vec<String> = want.iter().map(|s| String::from(*s)).collect();
            assert_eq!(got, want, "rules: {rules}");
        }
    }

    /// `len` characters, each `x` or `y` as a seeded generator's coin falls: text that
    /// keeps meeting new states of a lazy DFA over `[xy]`.
    fn coin_text(len: usize, seed: u32, x: char, y: char) -> String {
        let mut seed = seed;
        (0..len)
            .map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                if seed >> 16 & 1 == 0 { x } else { y }
            })
            .collect()
    }

    #[test]
    fn advance_epoch_table() {
        // (epoch before, marks before) -> (epoch after, marks after): a wrap clears the marks.
        let cases: &[(u32, [u32; 3], u32, [u32; 3])] =
            &[(0, [0, 0, 0], 1, [0, 0, 0]), (7, [7, 3, 0], 8, [7, 3, 0]), (u32::MAX, [u32::MAX, 5, 1], 1, [0, 0, 0])];
        for &(before, marks, after, cleared) in cases {
            let (mut epoch, mut a, mut b) = (before, marks, marks);
            assert_eq!(advance_epoch(&mut epoch, &mut [&mut a, &mut b]), after, "{before}");
            assert_eq!((epoch, a, b), (after, cleared, cleared), "{before}");
        }
    }

    #[test]
    fn rule_types_table() {
        let cases: &[(&str, &[&str])] = &[
            ("body B /click here/", &["B"]),
            ("body B /^Buy cheap VIAGRA/", &["B"]),
            ("body B /clickhere/", &[]),
            ("body B /hello friend/i", &["B"]),
            ("body B /friend.*click/", &["B"]),
            ("body B /friend.*Visit/", &[]),
            ("rawbody R /viagra and more/", &["R"]),
            ("full F /^From: \"Cheap/m", &["F"]),
            ("full F /\\A Received/", &[]),
            ("uri U /pharma\\.example/", &["U"]),
            ("uri U /^https:/", &[]),
            ("header H Subject =~ /viagra/i", &["H"]),
            ("header H Subject =~ /viagra/", &[]),
            ("header H Subject !~ /viagra/", &["H"]),
            ("header H X-Nope =~ /./", &[]),
            ("header H X-Nope !~ /./", &["H"]),
            ("header H exists:Message-Id", &["H"]),
            ("header H exists:X-Mailer", &[]),
            ("header H X-Nope =~ /unset/ [if-unset: unset]", &["H"]),
            ("header H From:addr =~ /^deals\\@pharma\\.example$/", &["H"]),
            ("header H From:name =~ /^Cheap Meds$/", &["H"]),
            ("header H ToCc =~ /you\\@example/", &["H"]),
            ("header H exists:ToCc", &["H"]),
            ("header H exists:MESSAGEID", &["H"]),
            ("header H MESSAGEID =~ /abc\\@pharma/", &["H"]),
            ("header H ALL =~ /^To: you/m", &["H"]),
            ("mimeheader M Content-Type =~ /text\\/plain/", &["M"]),
            ("mimeheader M content-TYPE =~ /text\\/plain/", &["M"]),
            ("mimeheader M Content-Type =~ /text\\/html/", &[]),
            ("mimeheader M X-Nope =~ /./", &[]),
            ("mimeheader A Content-Type =~ /plain/\nmimeheader B Content-Type =~ /^text/\nmimeheader C Content-Typo =~ /./", &["A", "B"]),
            ("body __A /viagra/i\nbody __B /friend/\nmeta M __A && __B", &["M"]),
            ("body __A /viagra/i\nbody __B /nothing here/\nmeta M __A && !__B", &["M"]),
            ("body __A /viagra/i\ntflags __A multiple\nmeta M __A > 3", &["M"]),
            ("body __A /viagra/i\ntflags __A multiple\nmeta M __A > 4", &[]),
            ("body __A /viagra/i\nmeta M (__A + __B) > 1", &[]),
            ("meta M1 M2\nmeta M2 M1\nbody B /viagra/", &["B"]),
            // Metas whose rules did not hit keep their value at zero; one that hits
            // makes its readers run.
            ("meta M1 !__X\nmeta M2 !M1", &["M1"]),
            ("body __X /nothing here/\nbody __Y /viagra/\nmeta M2 !__X\nmeta M3 M2 && __Y", &["M2", "M3"]),
            ("body __Y /viagra/\nmeta M3 (__Y + 1) > 1\nmeta M4 (__Z + 1) > 1", &["M3"]),
            ("meta M5 1", &["M5"]),
            ("body B /viagra/\nscore B 0", &[]),
            ("body T_B /viagra/", &["T_B"]),
            // Perl features DFAs lack: relaxed DFA screens, backtracking decides.
            ("body B /viagra(?! and)/", &["B"]),
            ("body B /buy viagra(?!,)/", &[]),
            ("body B /(?<=to )buy/", &["B"]),
            ("body B /(?<!to )buy viagra/", &[]),
            ("body B /\\b(v\\w+a), \\1\\b/", &["B"]),
            ("body B /(viagra) and \\1 more/", &[]),
            ("header H Subject =~ /cheap (?=VIAGRA)/", &["H"]),
            ("header H Subject !~ /cheap (?=VIAGRA)/", &[]),
            ("body __A /(?<=more )viagra/\ntflags __A multiple\nmeta M __A == 1", &["M"]),
        ];
        assert_hits(MSG, cases);
    }

    #[test]
    fn rawbody_pieces_match_whole_table() {
        // A rawbody rule sees each piece of the text whole, as SpamAssassin 4.0.1 does
        // (every row checked against it): a match may cross lines, not pieces; `^` and
        // `$` without `/m` hold at a piece's start and end only. Body rules see lines.
        let message = "Subject: lines\r\n\r\nfoo\r\nbaz\r\n\r\nboo bar\r\n";
        let cases: &[(&str, &[&str])] = &[
            ("rawbody R /foo\\s+baz/", &["R"]),
            ("rawbody R /(?s)foo.baz/", &["R"]),
            ("rawbody R /foo\\nbaz/", &["R"]),
            ("rawbody R /foo[^x]baz/", &["R"]),
            ("rawbody R /foo.baz/", &[]),
            ("rawbody R /^baz/", &[]),
            ("rawbody R /^baz/m", &["R"]),
            ("rawbody R /^foo/", &["R"]),
            ("rawbody R /^baz$/", &[]),
            ("rawbody R /foo$/", &[]),
            ("rawbody R /bar$/", &["R"]),
            ("rawbody R /\\Abaz/", &[]),
            ("rawbody R /\\Afoo/", &["R"]),
            ("body B /^foo baz$/", &["B"]),
            ("body B /baz\\W+boo/", &[]),
            ("rawbody R /foo(?=\\s+baz)/", &["R"]),
            ("rawbody R /boo(?= bar)/", &["R"]),
            ("rawbody __R /o/\ntflags __R multiple\nmeta M __R == 4", &["M"]),
            ("rawbody __R /^/\ntflags __R multiple\nmeta M __R == 1", &["M"]),
            ("rawbody __R /\\s/\ntflags __R multiple\nmeta M __R == 5", &["M"]),
        ];
        assert_hits(message, cases);
        // Each part is a text of its own.
        let parts = "Subject: parts\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\n\
                     one end\n--b\nContent-Type: text/html\n\n<p>two</p>\n--b--\n";
        let cases: &[(&str, &[&str])] = &[
            ("rawbody R /end\\s+<p>/", &[]),
            ("rawbody R /^<p>two/", &["R"]),
            ("rawbody R /end$/", &["R"]),
            ("rawbody __R /^/\ntflags __R multiple\nmeta M __R == 2", &["M"]),
        ];
        assert_hits(parts, cases);
        // A text of more than 4 KiB is cut at the first line end from byte 2048 on.
        let (a_lines, b_lines) = (std::format!("{}\n", "a".repeat(99)).repeat(20), std::format!("{}\n", "b".repeat(99)).repeat(30));
        let long = std::format!("Subject: long\n\n{a_lines}{}X\nY{b_lines}", "c".repeat(60));
        let cases: &[(&str, &[&str])] = &[
            ("rawbody R /X\\nY/", &[]),
            ("rawbody R /X$/", &["R"]),
            ("rawbody R /^Y/", &["R"]),
            ("rawbody R /X\\s*$/", &["R"]),
            ("rawbody R /a\\n+a/", &["R"]),
        ];
        assert_hits(&long, cases);
        // Counted matches of patterns searched only around their literals, over two
        // pieces: as many as SpamAssassin counts.
        let mut html = String::from("Subject: windows\nContent-Type: text/html\n\n");
        for i in 0..90 {
            html.push_str(&std::format!("filler line {i:02} with some words in it to make it longer\n"));
            if i % 7 == 3 {
                html.push_str(&std::format!("<font color=red\nsize={}>x</font> <font size=9>y</font>\n", i % 5));
            }
        }
        let cases: &[(&str, &[&str])] = &[
            ("rawbody __R /<font[^>]{0,20}size=\\d/i\ntflags __R multiple\nmeta M __R == 26", &["M"]),
            ("rawbody __R /<font\\s+color=red\\s+size=[0-4]/i\ntflags __R multiple\nmeta M __R == 13", &["M"]),
            ("rawbody __R /size=\\d>x<\\/font>\\s<font/i\ntflags __R multiple\nmeta M __R == 13", &["M"]),
        ];
        assert_hits(&html, cases);
    }

    #[test]
    fn nosubject_body_rules_skip_the_subject_table() {
        // (message, rules, hits), each row as SpamAssassin 4.0.1 answers it: a body rule
        // with `tflags nosubject` does not see the first line, the Subject; literal,
        // unfiltered and union-mate patterns alike.
        let cases: &[(&str, &str, &[&str])] = &[
            ("Subject: hello there\n\n \n", "body __B /\\S/\ntflags __B nosubject\nmeta M !__B", &["M"]),
            ("Subject: hello there\n\n \n", "body __B /\\S/\nmeta M !__B", &[]),
            ("Subject: hello there\n\nsay hello\n\nhello again\n", "body __B /\\S/\ntflags __B nosubject\nmeta M !__B", &[]),
            ("Subject: hello there\n\nsay hello\n\nhello again\n", "body __C /hello/\ntflags __C nosubject multiple\nmeta M __C == 2", &["M"]),
            ("Subject: hello there\n\nsay hello\n\nhello again\n", "body __C /hello/\ntflags __C multiple\nmeta M __C == 3", &["M"]),
            ("Subject: hello there\n\nsay hello\n\nhello again\n", "body __C /there/\ntflags __C nosubject\nmeta M !__C", &["M"]),
            ("Subject: hello there\n\nsay hello\n\nhello again\n", "body __C /[a-z]{5}/\ntflags __C nosubject multiple\nmeta M __C == 3", &["M"]),
            (
                "Subject: hello there\n\nsay hello\n\nhello again\n",
                "body __C /[a-z]{5}/\ntflags __C nosubject multiple\nbody __D /[a-y]{5}/\ntflags __D multiple\nmeta M __C == 3 && __D == 5",
                &["M"],
            ),
            ("Subject: hello\n\nno way\n", "body __C /[a-z]{5}/\ntflags __C nosubject\nbody __D /[a-y]{6}/\nmeta M !__C && !__D", &["M"]),
        ];
        for (message, rules, want) in cases {
            assert_hits(message, &[(rules, want)]);
        }
    }

    #[test]
    fn body_lines_keep_their_newline_table() {
        // (message, rules, hits), each row as SpamAssassin 4.0.1 answers it: its body lines
        // are paragraphs that keep their `\n` (the Subject's too; the last line's only
        // when the text ends with blank lines), so a match may end with it, never go past
        // it; `$` holds before it; a pattern that can match empty finds nothing after it.
        let (ends, blank_end) = ("Subject: t\n\nfirst line ends here\n\nsecond para here\n", "Subject: t\n\nfoo here bar\n\nlast here\n\n\n");
        let spaces = "Subject: t\n\nline  one  here  \n\nline two\t\n\n";
        let long = alloc::format!("Subject: t\n\n{}\n\nshort\n", "x".repeat(90));
        let count = |rule: &str, n: u32| alloc::format!("body __A {rule}\ntflags __A multiple\nmeta M __A == {n}");
        let cases: &[(&str, String, &[&str])] = &[
            (ends, "body A /here\\n/".into(), &["A"]),
            (blank_end, "body A /here\\s$/".into(), &["A"]),
            (blank_end, "body A /here\\s\\z/".into(), &["A"]),
            (blank_end, "body A /(?:\\w+\\s){3}/".into(), &["A"]),
            // Backtracking programs see the line with its `\n`.
            (blank_end, "body A /(?<=e)re\\s$/".into(), &["A"]),
            (ends, "body A /(?<=e)re$/".into(), &["A"]),
            (ends, "body A /here(?=\\n)/".into(), &["A"]),
            (ends, "body A /^t\\n/".into(), &["A"]),
            (ends, "body A /t\\n/\ntflags A nosubject".into(), &[]),
            (spaces, count("/\\s+/", 6), &["M"]),
            // A lazy part stops before the `\n`, which a match of its own then takes.
            ("Subject: t\n\nab  \n\ncd\n\n", count("/\\s\\s*?$/", 4), &["M"]),
            ("Subject: t\n\nab  \n\ncd\n\n", count("/\\s\\s*$/", 3), &["M"]),
            (spaces, count("/\\s+?/", 8), &["M"]),
            (spaces, count("/\\s/", 8), &["M"]),
            (blank_end, count("/here\\s/", 2), &["M"]),
            (spaces, count("/^/", 3), &["M"]),
            (spaces, "body A /\\n\\n/".into(), &[]),
            (spaces, "body A /\\s\\n\\S/".into(), &[]),
            (blank_end, "body A /^$/".into(), &[]),
            (blank_end, "body A /^\\s*$/".into(), &[]),
            (ends, "body A /\\n\\w/".into(), &[]),
            // The `\n` takes no room on the line: a line of 90 bytes holds a match of 91.
            (&long, "body A /x{90}\\s/".into(), &["A"]),
            (&long, "body A /x{91}/".into(), &[]),
            // Nor does a pattern that can match empty, with a union mate.
            (blank_end, "body A /^\\s*$/\nbody C /[0-9]\\W/".into(), &[]),
            // A union's first match ends past a line's `\n`: its line is the one before.
            ("Subject: ab\n\ncd ef\n\n\n", alloc::format!("{}\nbody C /[0-9]\\W/", count("/[a-z]\\W/", 3)), &["M"]),
        ];
        for (message, rules, want) in cases {
            assert_hits(message, &[(rules, want)]);
        }
    }

    #[test]
    fn candidate_lines_together_table() {
        // Lines holding a pattern's literal, next to each other, are searched as one
        // text: each still counts its own matches, the last of a run included.
        let message = "Subject: runs\r\n\r\nx foo 1\r\nfoo 2\r\nbar\r\nfoo 3 foo 4\r\nfoo\r\ny foo 5\r\n";
        let cases: &[(&str, &[&str])] = &[
            ("rawbody __R /foo \\d/\ntflags __R multiple\nmeta M __R == 5", &["M"]),
            ("rawbody __R /foo \\d/\ntflags __R multiple maxhits=4\nmeta M __R == 4", &["M"]),
            ("rawbody __R /^foo/m\ntflags __R multiple\nmeta M __R == 3", &["M"]),
            ("rawbody __R /foo$/m\ntflags __R multiple\nmeta M __R == 1", &["M"]),
            ("rawbody __R /foo 5$/\nmeta M __R", &["M"]),
            ("rawbody __R /1[^\\n]+foo/\nmeta M __R", &[]),
        ];
        assert_hits(message, cases);
    }

    #[test]
    fn required_byte_table() {
        // Patterns without literals but with a byte every match holds: a text without it is
        // not searched, a line pattern is searched from the line of the first one. The
        // counts are the ones the scan gave before it skipped anything.
        let message = "Subject: bytes\r\nX-Note: plain\r\nX-Mark: yes! indeed\r\n\r\nno marks here\r\n\r\nwow! such! text\r\n\r\nand more!\r\n";
        let cases: &[(&str, &[&str])] = &[
            ("body __B /\\w!\\s/\ntflags __B multiple\nmeta M __B == 3", &["M"]),
            ("body __B /\\w!/\ntflags __B multiple\nmeta M __B == 3", &["M"]),
            ("body __B /^\\w+!/\ntflags __B multiple\nmeta M __B == 1", &["M"]),
            ("body __B /^/\ntflags __B multiple\nmeta M __B == 4", &["M"]),
            ("body B /^no/", &["B"]),
            ("body B /\\w\\?/", &[]),
            ("body B /[^\\x00-\\x7f]/", &[]),
            ("rawbody __R /^\\w+!/m\ntflags __R multiple\nmeta M __R == 1", &["M"]),
            ("full F /\\w!\\s/", &["F"]),
            ("full F /\\w\\?/", &[]),
            ("header H X-Note =~ /\\w!/", &[]),
            ("header H X-Note !~ /\\w!/", &["H"]),
            ("header H X-Mark =~ /\\w!/", &["H"]),
            ("header H X-Mark !~ /\\w!/", &[]),
            ("mimeheader MH X-Mark =~ /\\w!/", &["MH"]),
            ("mimeheader MH X-Note =~ /\\w!/", &[]),
        ];
        assert_hits(message, cases);
        // The rules above that skip texts do so for a byte they require.
        let config = parse_str("test.cf", "body B /\\w!\\s/\nheader H X-Note !~ /\\w!/\n").expect("rules parse");
        let set = RuleSet::compile(&config).expect("rules compile");
        assert_eq!(set.body.pattern_needs.iter().map(|n| n.byte.clone()).collect::<Vec<_>>(), [Some(RequiredByte::AnyOf(alloc::vec![b'!']))]);
        assert!(set.headers.iter().all(|h| h.needs.byte.is_some()));
    }

    #[test]
    fn match_room_table() {
        // Texts too short for every match, or with no line long enough, are not
        // searched: a match that just fits is still found.
        let xs = "x".repeat(90);
        let message = alloc::format!("Subject: room\r\nX-List: ,a,b,c\r\n\r\n{xs}\r\nshort line\r\n");
        let cases: &[(&str, &[&str])] = &[
            ("full F /^x{90}/m", &["F"]),
            ("full F /^x{91}/m", &[]),
            ("full F /^[^\\n]{91}$/m", &["F"]),
            ("full F /^[^\\n]{92}/m", &[]),
            ("full F /^[^\\n]{90}\\r\\n/m", &["F"]),
            ("body B /x{90} short line/", &["B"]),
            ("body B /x{90} short lines/", &[]),
            ("body B /x{91}/", &[]),
            ("rawbody R /^x{90}\\s*$/m", &["R"]),
            ("header H X-List =~ /(?:,[^,]{1,90}){3}/", &["H"]),
            ("header H X-List =~ /(?:,[^,]{1,90}){4}/", &[]),
            ("header H X-List !~ /(?:,[^,]{1,90}){4}/", &["H"]),
            ("header H X-List !~ /(?:,[^,]{1,90}){3}/", &[]),
            ("header H X-List =~ /(?:,[^,]{1,90}){3}(?!z)/", &["H"]),
            ("header H X-List =~ /(?:,[^,]{1,90}){4}(?!z)/", &[]),
            ("mimeheader MH X-List =~ /(?:,\\w){3}/", &["MH"]),
            ("mimeheader MH X-List =~ /(?:,\\w){4}/", &[]),
        ];
        assert_hits(&message, cases);
        // The room is known where the table relies on it: a one-line `full` match,
        // and backtracked header patterns, one whose screen opens its `{20}` to `+`.
        let rules = "full F /^x{91}/m\nheader H X-List =~ /(?:,[^,]{1,90}){4}(?!z)/\nheader H2 X-List =~ /(?:,[^,]{1,90}){20}(?!z)/\n";
        let set = RuleSet::compile(&parse_str("test.cf", rules).expect("rules parse")).expect("rules compile");
        assert_eq!(set.full.pattern_needs.iter().map(|n| n.room).collect::<Vec<_>>(), [MatchRoom { len: 91, one_line: true, empty: false }]);
        assert_eq!(set.headers.iter().map(|h| h.needs.room.len).collect::<Vec<_>>(), [8, 40]);
    }

    #[test]
    fn unions_table() {
        // Unfiltered body patterns searched as unions: a union's hit is the result of a
        // plain one, while a `multiple` one counts its matches and a backtracking one
        // (whose union member is its relaxed form, `\d+x`) asks its program; one that
        // matches a single byte (`[!?]`) stays out, searched alone, as does a `multiple`
        // one matching a byte at line starts (`__G`), not one counting a single hit (`Q`).
        let rules = "body A /\\d\\d-\\d\\d/\nbody B /[A-Z]{3}!/\nbody C /\\w\\?\\s/\n\
                     body __D /\\w!\\s/\ntflags __D multiple\nmeta M __D == 3\nbody E /\\d+x(?=y)/\n\
                     body __F /[!?]/\ntflags __F multiple\nmeta MF __F == 4\n\
                     body __G /^\\s?\\d/\ntflags __G multiple maxhits=3\nmeta MG __G == 3\nbody Q /^\\s{0,3}>/\n";
        let config = parse_str("test.cf", rules).expect("rules parse");
        let set = RuleSet::compile(&config).expect("rules compile");
        let names = |bits: &dyn Fn(&crate::rules::unions::Union, usize) -> bool| {
            let mut names: Vec<&str> = set
                .body
                .unions
                .iter()
                .flat_map(|u| u.members.iter().enumerate().filter(|(bit, _)| bits(u, *bit)).map(|(_, &p)| p))
                .filter_map(|p| set.body.patterns.get(p as usize).map(|c| set.rule_name(c.rule)))
                .collect();
            names.sort_unstable();
            names
        };
        assert_eq!(names(&|_, _| true), ["A", "B", "C", "E", "Q", "__D"]);
        assert_eq!(names(&|u, bit| u.decided >> bit & 1 == 1), ["A", "B", "C", "Q"]);
        let cases: &[(&str, &[&str])] = &[
            ("call 12-34 now\nWOW! yes! ok! \nthe 5xy\n", &["A", "B", "E", "M"]),
            ("why? not\nsay! it! \nno 9xz here\n", &["C"]),
            ("12-3 WO! 9x\ny\n", &[]),
            // Searched again from the line of the first hit in the union, not after it.
            ("a\nb! c! \nd! \n", &["M"]),
            ("5xz\n6xy\n", &["E"]),
            ("a! b? c! d?\n", &["C", "MF"]),
            ("1\n\n2 >\n\n3\n\n> q\n", &["MG", "Q"]),
        ];
        for (body, want) in cases {
            assert_hits(&alloc::format!("Subject: u\r\n\r\n{body}"), &[(rules, want)]);
        }
    }

    #[test]
    fn relay_texts_prefilter_table() {
        // Rules on the relays' pseudo-headers keep their literals: the prefilter finds
        // them in the relays' texts, which the message's header block does not hold.
        let rules = "header R1 X-Spam-Relays-External =~ /rdns=mail\\.example\\.net /\n\
                     header R2 X-Spam-Relays-External =~ /rdns=\\S+\\.edu /\n\
                     header R3 X-Spam-Relays-Untrusted =~ / helo=mail\\.example\\.net by=/\n\
                     header R4 EnvelopeFrom =~ /bounce\\@example\\.net/\n";
        let config = parse_str("test.cf", rules).expect("rules parse");
        let set = RuleSet::compile(&config).expect("rules compile");
        assert!(set.headers.iter().all(|c| !c.literals.is_empty()), "every rule has literals");
        let received = "Received: from mail.example.net (mail.example.net [192.0.2.7]) by mx.example.org with ESMTP id ABC;\r\n\tMon, 1 Jan 2024 00:00:00 +0000\r\n";
        let cases: &[(String, &[&str])] = &[
            (alloc::format!("Return-Path: <bounce@example.net>\r\n{received}Subject: x\r\n"), &["R1", "R3", "R4"]),
            (alloc::format!("{}Subject: x\r\n", received.replace("example.net", "example.edu")), &["R2"]),
            (String::from("Subject: mail.example.net rdns=mail.example.net \r\n"), &[]),
        ];
        for (headers, want) in cases {
            assert_hits(&alloc::format!("{headers}\r\nbody\n"), &[(rules, want)]);
        }
    }

    /// `rules` with each `<a-z>`, `<0-9>` and `<A-Z>` spelled out as `long` copies of its
    /// class: a run a DFA must count (a counted repeat would make a backtracking program).
    fn spelled(rules: &str, long: usize) -> String {
        ["a-z", "0-9", "A-Z"].iter().fold(String::from(rules), |r, class| r.replace(&alloc::format!("<{class}>"), &alloc::format!("[{class}]").repeat(long)))
    }

    #[test]
    fn lazy_unions_table() {
        // Unfiltered patterns whose DFAs are lazy (a byte 17 from the end: too many
        // states for a dense one) are searched as a lazy union, with the same results:
        // a plain one's hit decides it, a `multiple` one counts, a backtracking one asks
        // its program.
        let rules = spelled(
            "body L1 /[a-z]*[qx]<a-z>[!?]/\nbody L2 /[0-9]*[57]<0-9>[+=]/\nbody __L3 /[A-Z]*[JK]<A-Z>[;:]/\n\
             tflags __L3 multiple\nmeta M __L3 == 3\nbody L4 /[a-z]*[qx]<a-z>[.,](?!q)/\n",
            16,
        );
        let config = parse_str("test.cf", &rules).expect("rules parse");
        let set = RuleSet::compile(&config).expect("rules compile");
        let unions: Vec<(Vec<&str>, Vec<&str>)> = set
            .body
            .unions
            .iter()
            .map(|u| {
                assert!(matches!(u.automaton, crate::rules::unions::UnionAutomaton::Lazy(_)), "a lazy union");
                let name = |&p: &u32| set.body.patterns.get(p as usize).map_or("", |c| set.rule_name(c.rule));
                let decided = u.members.iter().enumerate().filter(|(bit, _)| u.decided >> bit & 1 == 1).map(|(_, p)| name(p));
                let mut members: Vec<&str> = u.members.iter().map(name).collect();
                members.sort_unstable();
                (members, decided.collect())
            })
            .collect();
        assert_eq!(unions.len(), 1, "{unions:?}");
        assert_eq!(unions[0].0, ["L1", "L2", "L4", "__L3"]);
        let mut decided = unions[0].1.clone();
        decided.sort_unstable();
        assert_eq!(decided, ["L1", "L2"]);
        let run = |first: &str, last: char| alloc::format!("{first}{}{last}", "a".repeat(16));
        let digits = alloc::format!("5{}+", "0".repeat(16));
        let caps = alloc::format!("J{}:", "A".repeat(16));
        let cases: &[(String, &[&str])] = &[
            (alloc::format!("one {} here\n", run("q", '!')), &["L1"]),
            (alloc::format!("{digits}\nthen {caps} {caps}\nand {caps}\n"), &["L2", "M"]),
            // Searched again from the line of the first hit in the union, not after it.
            (alloc::format!("{caps}\n{caps}\n{caps} {digits}\n"), &["L2", "M"]),
            (alloc::format!("{}q\n{}\n", run("x", '.'), run("q", '?')), &["L1"]),
            (alloc::format!("{}q\n{}x\n", run("x", '.'), run("q", ',')), &["L4"]),
            (alloc::format!("q{}! {caps}\n", "a".repeat(15)), &[]),
        ];
        for (body, want) in cases {
            assert_hits(&alloc::format!("Subject: u\r\n\r\n{body}"), &[(rules.as_str(), want)]);
        }
    }

    #[test]
    fn singletons_table() {
        // A pattern too big to share a union is a union of one over its own DFA, so two
        // such walk a text together, with the results they have alone: a plain one's hit
        // decides it, a `multiple` one counts, a backtracking one asks its program, and
        // one whose every match holds a byte (`~`) starts at the line of its first, and
        // makes no pass where it is missing. Each tells apart its own letters: dense ones, runs of 9 classes,
        // DFAs of 2^10 states whose unions have 2^20; lazy ones, runs of 2,010, two over
        // a lazy union's 4,000 NFA states (and under 2,048 bytes, where rendered body
        // lines are split).
        type Kind = fn(&crate::rules::unions::UnionAutomaton) -> bool;
        let own: Kind = |a| matches!(a, crate::rules::unions::UnionAutomaton::Own);
        let lazy: Kind = |a| matches!(a, crate::rules::unions::UnionAutomaton::Lazy(_));
        for (long, kind) in [(9, own), (2010, lazy)] {
            let rules = spelled(
                "body B1 /[a-z]*[qxvw]<a-z>[!?.,]/\nbody __B2 /[0-9]*[5678]<0-9>[+=<>]/\n\
                 tflags __B2 multiple\nmeta MB __B2 == 2\nbody B3 /[A-Z]*[JKLM]<A-Z>[;:@%](?!q)/\n\
                 body B4 /[a-z]*[bcdf]<a-z>~/\n",
                long,
            );
            let config = parse_str("test.cf", &rules).expect("rules parse");
            let set = RuleSet::compile(&config).expect("rules compile");
            let name = |p: u32| set.body.patterns.get(p as usize).map_or("", |c| set.rule_name(c.rule));
            let mut singletons: Vec<(&str, bool)> = set
                .body
                .unions
                .iter()
                .map(|u| {
                    assert!(kind(&u.automaton) && u.members.len() == 1, "{long}: alone, each, of its kind");
                    (u.members.first().map_or("", |&p| name(p)), u.decided == 1)
                })
                .collect();
            singletons.sort_unstable();
            assert_eq!(singletons, [("B1", true), ("B3", false), ("B4", true), ("__B2", false)], "{long}");
            assert!(set.body.unfiltered.is_empty(), "{long}");
            let run = |first: &str, fill: &str, last: &str| alloc::format!("{first}{}{last}", fill.repeat(long));
            let cases: &[(String, &[&str])] = &[
                (alloc::format!("one {}\n", run("q", "a", "!")), &["B1"]),
                (alloc::format!("{}\nthen {}\n{}\n", run("5", "0", "+"), run("J", "A", ";"), run("8", "1", "<")), &["B3", "MB"]),
                // Searched again from the line of the first hit in the union, not after it.
                (alloc::format!("{}\n{}\n", run("J", "A", ";q"), run("K", "B", "@")), &["B3"]),
                (alloc::format!("{}\n{}\n", run("b", "a", "~"), run("6", "0", "=")), &["B4"]),
                (alloc::format!("a~\n{}\n", run("b", "a", "!")), &[]),
                (alloc::format!("{}\n{}\n", run("J", "A", ";q"), run("w", "a", ",")), &["B1"]),
            ];
            for (body, want) in cases {
                let (mut got, _) = hits(&rules, &alloc::format!("Subject: u\r\n\r\n{body}"));
                got.sort_unstable();
                assert_eq!(got, *want, "{long}: {:?}", body.get(..40));
            }
        }
    }

    #[test]
    fn repeated_groups_table() {
        // `{3}` of a group with literals: a line needs three literal hits to be tried.
        let message = "Subject: form\r\n\r\nname city\r\n\r\nname, city, country\r\n";
        let cases: &[(&str, &[&str])] = &[
            ("body B /(?:(?:name|city|country)\\W*){3}/", &["B"]),
            ("body B /(?:(?:name|city)\\W*){3}/", &[]),
            ("body B /(?:(?:name|city)\\W*){2}/", &["B"]),
            ("body __B /(?:(?:name|city|country)\\W*){2}/\ntflags __B multiple\nmeta M __B == 2", &["M"]),
        ];
        assert_hits(message, cases);
    }

    #[test]
    fn repeats_table() {
        // `X{2}` whose DFA is too big to be dense (an `a` 15 places back, twice) searches
        // as a chain of X's matches in a rule counting one hit; a `multiple` one counts
        // with the whole pattern's automata.
        let x = "x[ab]*a[ab]{14}y";
        let rules = alloc::format!("body R /(?:{x}){{2}}/\nbody __M /(?:{x}){{2}}/\ntflags __M multiple\nmeta M __M == 2\n");
        let config = parse_str("test.cf", &rules).expect("rules parse");
        let set = RuleSet::compile(&config).expect("rules compile");
        let kinds: Vec<(&str, bool)> =
            set.body.patterns.iter().map(|c| (set.rule_name(c.rule), matches!(c.matcher, Matcher::Repeat(_)))).collect();
        assert_eq!(kinds, [("R", true), ("__M", false)]);
        let one = alloc::format!("xa{}y", "b".repeat(14));
        let cases: &[(String, &[&str])] = &[
            (alloc::format!("{one}{one}\n"), &["R"]),
            (alloc::format!("{one}{one}{one}{one}\n"), &["M", "R"]),
            (alloc::format!("{one}\n{one}\n"), &[]),
            (alloc::format!("{one} {one}\n"), &[]),
            (alloc::format!("{one}xa{}y\n", "b".repeat(13)), &[]),
            (alloc::format!("zz{one}xab{}ay\n", "b".repeat(12)), &["R"]),
            (alloc::format!("zz{one}xab{}ay\n", "b".repeat(13)), &[]),
        ];
        for (body, want) in cases {
            let (mut got, _) = hits(&rules, &alloc::format!("Subject: u\r\n\r\n{body}"));
            got.sort_unstable();
            assert_eq!(got, *want, "{body}");
        }
    }

    #[test]
    fn keep_repeated_table() {
        let cases: &[(&[u32], usize, &[u32])] = &[
            (&[], 2, &[]),
            (&[1, 1, 2, 5, 5, 5], 2, &[1, 5]),
            (&[1, 1, 2, 5, 5, 5], 3, &[5]),
            (&[1, 2, 3], 1, &[1, 2, 3]),
            (&[4, 4, 4, 4], 5, &[]),
        ];
        for (starts, min, want) in cases {
            let mut v = starts.to_vec();
            keep_repeated(&mut v, *min);
            assert_eq!(&v, want, "{starts:?} min {min}");
        }
    }

    #[test]
    fn release_buffers_above_table() {
        let config = parse_str("t.cf", "body WORD /\\bneedle\\b/\nheader SUBJ Subject =~ /big/\nrawbody RAW /<b>/\n").expect("parse");
        let set = RuleSet::compile(&config).expect("compile");
        let big = alloc::format!("Subject: big\r\nContent-Type: text/html\r\n\r\n<b>{}</b> needle\r\n", coin_text(200_000, 5, 'a', ' '));
        let small = "Subject: small\r\n\r\nneedle\r\n";
        // (message, whether a scan of it grows a buffer past 16 KiB)
        let cases: &[(&str, bool)] = &[(big.as_str(), true), (small, false)];
        for &(message, grows) in cases {
            let mut scratch = Scratch::new(&set);
            let first: Vec<u32> = set.scan(message.as_bytes(), &mut scratch).hits.to_vec();
            let freed = scratch.release_buffers_above(16 * 1024);
            assert_eq!(freed > 0, grows, "{} bytes: freed {freed}", message.len());
            assert_eq!(scratch.release_buffers_above(16 * 1024), 0, "nothing left to free");
            let again: Vec<u32> = set.scan(message.as_bytes(), &mut scratch).hits.to_vec();
            assert_eq!(again, first, "the same hits after the release");
            assert!(!first.is_empty(), "the test message hits a rule");
        }
    }

    #[test]
    fn lazy_cache_budget_table() {
        // A pattern too big for a dense DFA, fed text that makes its lazy DFA grow.
        let config = parse_str("t.cf", &alloc::format!("body BIG /[ab]*a{}c/\n", "[ab]".repeat(16))).expect("parse");
        let set = RuleSet::compile(&config).expect("compile");
        assert!(!set.lazy_dfas.is_empty(), "the test needs a lazy DFA");
        let text = coin_text(4000, 7, 'a', 'b');
        let message = alloc::format!("Subject: t\r\n\r\n{text}\r\n");
        let fresh = Scratch::new(&set).lazy_cache_bytes();
        assert_eq!(fresh, 0, "a cache is made when its DFA first runs");
        // (budget, whether the caches may stay above their fresh size)
        let cases: &[(Option<usize>, bool)] = &[(None, true), (Some(usize::MAX), true), (Some(0), false), (Some(fresh), false)];
        for &(budget, grows) in cases {
            let mut scratch = Scratch::new(&set);
            if let Some(b) = budget {
                scratch.set_lazy_cache_budget(b);
            }
            let _ = set.scan(message.as_bytes(), &mut scratch);
            assert_eq!(scratch.lazy_cache_bytes() > fresh, grows, "budget {budget:?}");
        }
    }

    #[test]
    fn probe_table() {
        /// Records what was timed; its clock ticks once a reading.
        #[derive(Default)]
        struct Recorder {
            tick: u64,
            costs: Vec<Cost>,
        }
        impl Probe for Recorder {
            fn now(&mut self) -> u64 {
                self.tick += 1;
                self.tick
            }
            fn spent(&mut self, cost: Cost, started: u64) {
                assert!(started < self.now(), "{cost:?} started after it ended");
                self.costs.push(cost);
            }
        }
        // (rules, rules timed, rules not timed (filtered out), phases timed)
        type Row<'a> = (&'a str, &'a [&'a str], &'a [&'a str], &'a [Cost]);
        let cases: &[Row<'_>] = &[
            ("body A /viagra/i", &["A"], &[], &[Cost::Parse, Cost::Relays, Cost::Prefilter(RuleType::Body), Cost::Metas]),
            ("body A /zzqq/\nbody B /[a-z]+ friend/", &["B"], &["A"], &[Cost::Prefilter(RuleType::Body)]),
            ("header H Subject =~ /viagra/i\nheader N Subject =~ /zzqq/", &["H"], &["N"], &[Cost::Prefilter(RuleType::Header)]),
            ("rawbody R /viagra and/", &["R"], &[], &[Cost::Prefilter(RuleType::RawBody)]),
            ("uri U /pharma/", &["U"], &[], &[Cost::Prefilter(RuleType::Uri)]),
            ("full F /^From: /m", &["F"], &[], &[Cost::Prefilter(RuleType::Full)]),
            ("mimeheader M Content-Type =~ /text/", &["M"], &[], &[Cost::Parse]),
            // Two patterns without literals or a required byte search together: the union
            // decides both (F is in the text, N is not).
            ("body F /[a-z]{2,} [a-z]{2,}/\nbody N /[a-z][0-9][a-z][0-9]/", &[], &["F", "N"], &[Cost::Unions(RuleType::Body)]),
            ("body __A /viagra/i\nmeta M __A", &["__A"], &["M"], &[Cost::Metas]),
        ];
        for (rules, timed, untimed, phases) in cases {
            let set = RuleSet::compile(&parse_str("t.cf", rules).expect("parse")).expect("compile");
            let mut recorder = Recorder::default();
            let mut scratch = Scratch::new(&set);
            let probed: Vec<String> = set.scan_probed(MSG.as_bytes(), &mut scratch, &mut recorder).hits().map(|h| String::from(h.name)).collect();
            let plain: Vec<String> = set.scan(MSG.as_bytes(), &mut scratch).hits().map(|h| String::from(h.name)).collect();
            assert_eq!(probed, plain, "{rules}: a probe changes no verdict");
            let rule_timed = |name: &str| set.rule_id(name).is_some_and(|id| recorder.costs.contains(&Cost::Rule(id)));
            for name in *timed {
                assert!(rule_timed(name), "{rules}: {name} not timed in {:?}", recorder.costs);
            }
            for name in *untimed {
                assert!(!rule_timed(name), "{rules}: {name} timed");
            }
            for phase in *phases {
                assert!(recorder.costs.contains(phase), "{rules}: {phase:?} not timed in {:?}", recorder.costs);
            }
        }
    }

    #[test]
    fn lazy_cache_clears_table() {
        // Each new 17-byte window of random a/b text is a new state of this lazy DFA: a
        // long enough line fills its cache, which is then cleared and refilled.
        let config = parse_str("t.cf", &alloc::format!("body BIG /[ab]*a{}c/\n", "[ab]".repeat(16))).expect("parse");
        let set = RuleSet::compile(&config).expect("compile");
        let cases: &[(usize, bool)] = &[(4_000, false), (300_000, true)];
        for &(len, cleared) in cases {
            let text = coin_text(len, 3, 'a', 'b');
            let mut scratch = Scratch::new(&set);
            let _ = set.scan(alloc::format!("Subject: t\r\n\r\n{text}\r\n").as_bytes(), &mut scratch);
            assert_eq!(scratch.lazy_cache_clears() > 0, cleared, "{len} bytes");
        }
    }

    #[test]
    fn lazy_cache_trim_order_table() {
        // Two lazy DFAs, each run only on the message holding its literal; B's text is
        // longer, so its cache is the larger.
        let config = parse_str("t.cf", &alloc::format!("body A /xqz[ab]*a{}c/\nbody B /wvy[de]*d{}f/\n", "[ab]".repeat(16), "[de]".repeat(16))).expect("parse");
        let set = RuleSet::compile(&config).expect("compile");
        assert_eq!(set.lazy_dfas.len(), 2, "the test needs two lazy DFAs");
        let a = alloc::format!("Subject: t\r\n\r\nxqz{}\r\n", coin_text(300, 11, 'a', 'b'));
        let b = alloc::format!("Subject: t\r\n\r\nwvy{}\r\n", coin_text(4000, 11, 'd', 'e'));
        let kept = |scratch: &Scratch| -> Vec<bool> { scratch.caches.iter().map(|slot| slot.cache.is_some()).collect() };
        let alone = |message: &str| {
            let mut scratch = Scratch::new(&set);
            let _ = set.scan(message.as_bytes(), &mut scratch);
            scratch.lazy_cache_bytes()
        };
        let (size_a, size_b) = (alone(&a), alone(&b));
        assert!(size_b > size_a, "B's cache must be the larger: {size_a} {size_b}");
        // Room for either cache, not both: the one used longest ago goes, even when smaller.
        let budget = size_b;
        let cases: &[(&[&str], [bool; 2])] = &[
            (&[&a], [true, false]),
            (&[&a, &b], [false, true]),
            (&[&b, &a], [true, false]),
            (&[&a, &b, &a], [true, false]),
            (&[&b, &a, &b], [false, true]),
        ];
        for (sequence, want) in cases {
            let mut scratch = Scratch::new(&set);
            scratch.set_lazy_cache_budget(budget);
            for message in sequence.iter() {
                let _ = set.scan(message.as_bytes(), &mut scratch);
            }
            assert_eq!(kept(&scratch), want.to_vec(), "sequence of {} messages", sequence.len());
        }
    }

    #[test]
    fn scores_table() {
        let cases: &[(&str, i32)] = &[
            ("body A /viagra/\nscore A 2.5", 2500),
            ("body A /viagra/\nbody B /friend/\nscore A 2.5\nscore B -1", 1500),
            ("body A /viagra/", 1000),
            ("body T_A /viagra/", 10),
            ("body A /viagra/\ntflags A nice", -1000),
            ("body A /viagra/\ntflags A multiple\nscore A 0.5", 1500),
            ("body A /viagra/\ntflags A multiple maxhits=2\nscore A 0.5", 1000),
            ("body __A /viagra/\nscore __A 3", 0),
        ];
        for (rules, want) in cases {
            let (_, got) = hits(rules, MSG);
            assert_eq!(got, *want, "rules: {rules}");
        }
    }

    #[test]
    fn gtube_is_spam_with_embedded_rules() {
        let config = parse_str("default.cf", crate::rules::DEFAULT_RULES).expect("default rules parse");
        let set = RuleSet::compile(&config).expect("default rules compile");
        assert!(set.disabled().is_empty(), "disabled: {:?}", set.disabled());
        let mut scratch = Scratch::new(&set);
        let gtube = "Subject: test\n\nXJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X\n";
        let v = set.scan(gtube.as_bytes(), &mut scratch);
        assert!(v.is_spam());
        assert!(v.hits().any(|h| h.name == "GTUBE"));
        let v = set.scan(b"Subject: lunch\n\nSee you at noon.\n", &mut scratch);
        assert!(!v.is_spam());
    }

    #[test]
    fn scratch_follows_a_new_rule_set() {
        let a = RuleSet::compile(&parse_str("a.cf", "body A /viagra/").expect("parse")).expect("compile");
        let b = RuleSet::compile(&parse_str("b.cf", "body B1 /zzqq/\nbody B2 /friend/\nbody B3 /viagra/").expect("parse")).expect("compile");
        let mut scratch = Scratch::new(&a);
        assert_eq!(a.scan(MSG.as_bytes(), &mut scratch).hits().count(), 1);
        assert_eq!(b.scan(MSG.as_bytes(), &mut scratch).hits().count(), 2);
    }

    #[test]
    fn anchored_full_search_table() {
        // (full pattern, message body, maxhits): searched only where its prefixes occur,
        // it must count what a search of the whole message counts.
        let long = String::from("zzz") + &coin_text(40, 3, 'a', 'b');
        let unrolled = alloc::format!("/zzz[ab]*a{}/", "[ab]".repeat(14));
        // (pattern, body, maxhits, how it runs: a dense DFA (D), a lazy one (L), a dense
        // screen and a program (S))
        let cases: &[(&str, String, u32, char)] = &[
            (r"/content-type:\s*text\/html/i", "Content-Type: text/html\nCONTENT-TYPE:text/html\ncontent-type: image/png\n".into(), 50, 'D'),
            (r"/\bname=\S+/", "username=a name=b xname=c name=d\n".into(), 50, 'D'),
            ("/abab/", "abababab ab abab\n".into(), 50, 'D'),
            (r"/ab[0-9]/", "ab1 ab2 ab3 ab4 ab5\n".into(), 3, 'D'),
            (r"/^Subject: \w+$/m", "Subject: one\n Subject: two\nSubject: three\n".into(), 50, 'D'),
            (r"/(?:cheap|discount) meds/i", "CHEAP MEDS, discount meds and cheap  meds\n".into(), 50, 'D'),
            // Too big for a dense DFA and no repeat to open: the lazy one starts anchored as well.
            (&unrolled, alloc::format!("{long}\n{long}b\nzzzb\n"), 50, 'L'),
            // With its count opened, a dense screen searched whole and the program.
            (r"/zzz[ab]*a[ab]{14}/", alloc::format!("{long}\n{long}b\nzzzb\n"), 50, 'S'),
        ];
        for (pattern, body, max, runs) in cases {
            let rules = alloc::format!("full F {pattern}\ntflags F multiple maxhits={max}\nscore F 1\n");
            let config = parse_str("test.cf", &rules).expect("rules parse");
            let set = RuleSet::compile(&config).expect("rules compile");
            // A screen is searched whole: where its literals start does not matter.
            if *runs != 'S' {
                assert_eq!(set.full.pattern_starts_match, [true], "{pattern}");
            }
            let matcher = &set.full.patterns.first().expect("one pattern").matcher;
            let got_runs = match matcher {
                Matcher::Dense(_) | Matcher::Narrow(_) => 'D',
                Matcher::Lazy(_) => 'L',
                Matcher::Backtrack { relaxed, .. } if matches!(**relaxed, Matcher::Dense(_) | Matcher::Narrow(_)) => 'S',
                _ => '?',
            };
            assert_eq!(got_runs, *runs, "{pattern}");
            let message = alloc::format!("From: a@example.org\nSubject: t\n\n{body}");
            let mut bufs = MessageBuffers::new(Limits::default());
            let raw = Message::parse(message.as_bytes(), &mut bufs).raw().to_vec();
            let mut caches: Vec<CacheSlot> = set.lazy_dfas.iter().map(|_| CacheSlot::default()).collect();
            let mut backtrack = BacktrackScratch::for_programs(set.programs.iter());
            let mut repeat_ends = Vec::new();
            let mut engines = Engines {
                dfas: &set.lazy_dfas,
                narrow: &set.narrow_tables,
                caches: &mut caches,
                scan: 0,
                programs: &set.programs,
                backtrack: &mut backtrack,
                repeat_ends: &mut repeat_ends,
            };
            let whole = count_matches(matcher, &raw, *max, &mut engines);
            let mut scratch = Scratch::new(&set);
            let got = set.scan(message.as_bytes(), &mut scratch).hits().map(|h| h.count).next().unwrap_or(0);
            assert!(whole > 0, "{pattern}: the case should match");
            assert_eq!(got, whole, "{pattern}");
        }
    }

    #[test]
    fn sub_rules_run_on_demand_table() {
        // A `__` rule of the text runs only while a meta reading it is undecided. Each
        // row: the message's head and body, then the sub-rules that hit with rules on
        // demand; with `_SUBTESTS_` listed every matching sub-rule runs, and the scored
        // hits and score are the same either way.
        const RULES: &str = "header __GATE Subject =~ /gate/\nheader __LIST exists:List-Id\n\
            body __COSTLY /costly/\nbody __DASHED /[0-9]{3}-[a-z]{4}/\nrawbody __RAW /<b>raw/\n\
            uri __URI /example\\.com\\/path/\nfull __FULL /fullmark/\n\
            meta GATED __GATE && __COSTLY\nmeta UNLISTED !__LIST && __DASHED\nmeta EITHER __GATE || __RAW\n\
            meta __BOTH __URI && __FULL\nmeta BOTH_GATED __GATE && __BOTH\n\
            score GATED 1\nscore UNLISTED 1\nscore EITHER 1\nscore BOTH_GATED 1\n";
        const BODY: &str = "Content-Type: text/html\n\n<p>costly 123-abcd fullmark <b>raw http://example.com/path</p>\n";
        let all = ["__COSTLY", "__DASHED", "__FULL", "__RAW", "__URI"];
        let cases: &[(&str, &[&str])] = &[
            // No gate, a list: only __RAW is undecided (EITHER waits on it).
            ("Subject: hello\nList-Id: <l.example>\n", &["__LIST", "__RAW"]),
            // The gate opens GATED and BOTH_GATED, and decides EITHER: __RAW is not needed.
            ("Subject: gate\nList-Id: <l.example>\n", &["__BOTH", "__COSTLY", "__FULL", "__GATE", "__LIST", "__URI"]),
            // No list: UNLISTED needs __DASHED (a pattern with no literal, run from its union).
            ("Subject: hello\n", &["__DASHED", "__RAW"]),
            ("Subject: gate\n", &["__BOTH", "__COSTLY", "__DASHED", "__FULL", "__GATE", "__URI"]),
        ];
        let scan = |rules: &str, message: &str| {
            let set = RuleSet::compile(&parse_str("test.cf", rules).expect("rules parse")).expect("rules compile");
            let mut scratch = Scratch::new(&set);
            let v = set.scan(message.as_bytes(), &mut scratch);
            let subs: Vec<String> = v.all_hits().filter(|n| n.starts_with("__")).map(String::from).collect();
            let scored: Vec<String> = v.hits().map(|h| String::from(h.name)).collect();
            (subs, scored, v.score.0)
        };
        for (head, want) in cases {
            let message = alloc::format!("{head}{BODY}");
            let (subs, scored, score) = scan(RULES, &message);
            assert_eq!(subs, *want, "{head}");
            let listed = alloc::format!("{RULES}add_header all Sub _SUBTESTS_\n");
            let (every, every_scored, every_score) = scan(&listed, &message);
            assert!(all.iter().all(|r| every.iter().any(|h| h == r)), "{head}: {every:?}");
            assert_eq!((scored, score), (every_scored, every_score), "{head}");
        }
    }
}
