//! Compiles a [`Config`] into a [`RuleSet`]: prefilter automata, DFAs, meta programs.

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering};

use regex_automata::dfa::{dense, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::prefilter::Prefilter;
use regex_automata::util::syntax;
use regex_automata::{hybrid, MatchKind};
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::{
    Capture, Class, ClassBytes, ClassBytesRange, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look, Repetition,
};

use super::backtrack::{self, Backtrack, Program};
use super::cache::{self, Cached, DfaCache, ProgramShelf};
use super::demand::{DemandPlan, PlanRule};
use super::eval::{EvalData, EvalError, EvalTest};
use super::EvalOn;
use super::jobs::{run_here, Job, Spread, Work};
use super::literal::LiteralAutomaton;
use super::narrow::{NarrowDfa, NarrowTables, TablePart};
use super::nfa;
use super::repeat::{self, Openings, Repeat};
use super::unions::{Union, UnionAutomaton, UnionKind, UnionPlan};
use super::perl;
use super::{
    literal, Config, HeaderField, HeaderForm, HeaderTest, MetaExpr, MetaOp, Pattern, RuleDef, RuleKind,
};
use crate::score::Score;

/// Largest Aho-Corasick DFA a target's prefilter may use; beyond, its contiguous NFA.
const PREFILTER_DFA_LIMIT: usize = 4 * 1024 * 1024;

/// Largest dense DFA built for one pattern; larger ones run as a lazy DFA.
const DENSE_LIMIT: usize = 192 * 1024;
/// Largest dense DFA taken to screen for a pattern that would otherwise run as a lazy
/// DFA: shared by all processes, where the lazy DFA's cache grows in every child. For a
/// pattern behind prefilter literals, what it keeps in 16-bit rows counts.
const SCREEN_DENSE_LIMIT: usize = 256 * 1024;
/// Largest screen determinized, before minimizing brings it under [`SCREEN_DENSE_LIMIT`].
const SCREEN_BUILD_LIMIT: usize = 2 * SCREEN_DENSE_LIMIT;
/// Most memory the cache of one lazy DFA may take, per scratch (filled only as states are
/// met); large enough that real mail does not clear it, so warm scans allocate nothing.
const LAZY_CACHE: usize = 1024 * 1024;
/// NFA states above which a lazy DFA's states are so many that [`LAZY_CACHE`] would be
/// cleared and refilled over and over on ordinary mail.
const BIG_NFA: usize = 1000;
/// Cache limit for those lazy DFAs.
const BIG_LAZY_CACHE: usize = 4 * 1024 * 1024;
/// The relaxed forms a dense screen may take, the tightest first: counted repeats
/// opened above these bounds.
const SCREEN_RELAXATIONS: [u32; 2] = [backtrack::RELAX_REPEAT, backtrack::RELAX_EVERY_REPEAT];
/// Bump when the automaton a pattern compiles to changes (how Perl patterns translate,
/// how lines are made local, the syntax or DFA configuration): entries of
/// `--compile-cache` files from before then miss.
pub(crate) const AUTOMATA_REVISION: u32 = 15;
/// Deepest meta expression compiled.
const META_DEPTH: usize = 64;

static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// The kind of a rule, as lint output and reports name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RuleType {
    /// `header`
    Header,
    /// `body`
    Body,
    /// `rawbody`
    RawBody,
    /// `full`
    Full,
    /// `uri`
    Uri,
    /// `mimeheader`
    MimeHeader,
    /// `meta`
    Meta,
    /// any `eval:` rule
    Eval,
}

impl RuleType {
    /// Every type, in lint order.
    pub const ALL: [RuleType; 8] = [
        RuleType::Header,
        RuleType::Body,
        RuleType::RawBody,
        RuleType::Full,
        RuleType::Uri,
        RuleType::MimeHeader,
        RuleType::Meta,
        RuleType::Eval,
    ];

    /// The directive word.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleType::Header => "header",
            RuleType::Body => "body",
            RuleType::RawBody => "rawbody",
            RuleType::Full => "full",
            RuleType::Uri => "uri",
            RuleType::MimeHeader => "mimeheader",
            RuleType::Meta => "meta",
            RuleType::Eval => "eval",
        }
    }

    /// The prefix SpamAssassin's report puts before a description.
    pub fn report_prefix(self) -> &'static str {
        match self {
            RuleType::Header | RuleType::MimeHeader => "",
            RuleType::Body => "BODY: ",
            RuleType::RawBody => "RAW: ",
            RuleType::Full => "FULL: ",
            RuleType::Uri => "URI: ",
            RuleType::Meta | RuleType::Eval => "",
        }
    }

    fn of(kind: &RuleKind) -> RuleType {
        match kind {
            RuleKind::Header(_) => RuleType::Header,
            RuleKind::Body(_) => RuleType::Body,
            RuleKind::RawBody(_) => RuleType::RawBody,
            RuleKind::Full(_) => RuleType::Full,
            RuleKind::Uri(_) => RuleType::Uri,
            RuleKind::MimeHeader { .. } => RuleType::MimeHeader,
            RuleKind::Meta(_) => RuleType::Meta,
            RuleKind::Eval { .. } => RuleType::Eval,
        }
    }
}

impl fmt::Display for RuleType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Why a defined rule will not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DisabledReason {
    /// The Perl regex has no linear-time translation.
    Regex(super::perl::Unsupported),
    /// The translated regex did not build.
    Build(String),
    /// An `eval:` function sift does not implement, or whose arguments it does not understand.
    Eval(EvalError),
    /// A meta expression that refers to itself, directly or not.
    MetaCycle,
    /// A meta expression nested too deeply.
    MetaTooDeep,
}

impl fmt::Display for DisabledReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DisabledReason::Regex(u) => write!(f, "regex: {u}"),
            DisabledReason::Build(e) => write!(f, "regex does not compile: {e}"),
            DisabledReason::Eval(e) => write!(f, "{e}"),
            DisabledReason::MetaCycle => f.write_str("meta expression depends on itself"),
            DisabledReason::MetaTooDeep => f.write_str("meta expression nested too deeply"),
        }
    }
}

/// A rule that was defined but will not run, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disabled {
    /// Rule name.
    pub name: String,
    /// Rule type.
    pub rule_type: RuleType,
    /// Why.
    pub reason: DisabledReason,
    /// Its index in the configuration.
    rule: u32,
}

/// Counts of one rule type, for lint output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TypeCounts {
    /// Rules defined.
    pub defined: usize,
    /// Rules compiled (they run unless their score is 0 or nothing reads them).
    pub compiled: usize,
    /// Rules that cannot run.
    pub disabled: usize,
    /// Compiled rules whose score in the active score set is 0, so they do not run.
    pub zero_score: usize,
    /// Compiled `__` sub-rules that no scored rule reads (through metas) and no
    /// template lists, so they do not run: their hits could change nothing.
    pub unread: usize,
    /// Compiled patterns that run as a lazy DFA because a dense one would be too big.
    pub lazy: usize,
    /// Compiled patterns with no prefilter literal, run on every text of their target.
    pub unfiltered: usize,
}

/// Per-type counts over a whole rule set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleSummary {
    /// Counts in [`RuleType::ALL`] order.
    pub counts: [TypeCounts; 8],
}

impl RuleSummary {
    /// The counts for one type.
    pub fn get(&self, t: RuleType) -> TypeCounts {
        self.counts.get(t as usize).copied().unwrap_or_default()
    }

    fn get_mut(&mut self, t: RuleType) -> &mut TypeCounts {
        &mut self.counts[t as usize]
    }
}

/// Why a rule set could not be built at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompileError {
    /// A prefilter automaton could not be built (too many literals for this target).
    Prefilter(String),
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::Prefilter(e) => write!(f, "prefilter automaton: {e}"),
        }
    }
}

/// What a rule is in the compiled set.
#[derive(Debug, Clone)]
pub(crate) struct RuleInfo {
    pub(crate) name: String,
    pub(crate) describe: String,
    pub(crate) rule_type: RuleType,
    pub(crate) score: Score,
    /// Counts toward the score and shows in reports (`__` rules and score 0 do not).
    pub(crate) scored: bool,
    /// Runs at all.
    pub(crate) active: bool,
    /// A sub-rule nothing reads (see [`TypeCounts::unread`]): does not run.
    pub(crate) unread: bool,
    /// Most matches counted: 1 unless `tflags multiple`.
    pub(crate) max_hits: u32,
}

/// How many jobs turn dense DFAs into narrow ones at load.
const NARROW_JOBS: usize = 8;

/// A regex ready to run: dense when small enough, lazy otherwise.
pub(crate) enum Matcher {
    Dense(alloc::boxed::Box<dense::DFA<Vec<u32>>>),
    /// A dense DFA in 16-bit rows: what [`Matcher::Dense`] becomes once the rules are
    /// compiled (one too big for the rows stays dense).
    Narrow(alloc::boxed::Box<super::narrow::NarrowDfa>),
    /// Index into `RuleSet::lazy_dfas` and the scratch's caches.
    Lazy(usize),
    /// A Perl pattern with lookaround or backreferences: its relaxed form (which matches
    /// at least whatever Perl matches) screens the text, then the bounded backtracking
    /// program (index into `RuleSet::programs`) decides.
    Backtrack { relaxed: alloc::boxed::Box<Matcher>, program: u32 },
    /// A line pattern that repeats one part, searched as a chain of the part's
    /// matches: its own DFA would be too big (see [`super::repeat`]). Whether a line
    /// matches, no more: only for rules that count one hit.
    Repeat(alloc::boxed::Box<Repeat>),
}

impl Matcher {
    /// The dense DFA that decides or screens, if it is one.
    fn dense(&self) -> Option<&dense::DFA<Vec<u32>>> {
        match self {
            Matcher::Dense(dfa) => Some(dfa),
            Matcher::Backtrack { relaxed, .. } => relaxed.dense(),
            Matcher::Narrow(_) | Matcher::Lazy(_) | Matcher::Repeat(_) => None,
        }
    }

    /// Turns its dense DFA (the decider or the screen) into a [`NarrowDfa`] where one
    /// fits, its table into `part`.
    pub(super) fn narrow(&mut self, part: &mut TablePart) {
        match self {
            Matcher::Dense(dfa) => {
                if let Some(narrow) = NarrowDfa::of(dfa, part) {
                    *self = Matcher::Narrow(alloc::boxed::Box::new(narrow));
                }
            }
            Matcher::Backtrack { relaxed, .. } => relaxed.narrow(part),
            Matcher::Narrow(_) | Matcher::Lazy(_) | Matcher::Repeat(_) => {}
        }
    }
}

/// One compiled pattern of a target.
pub(crate) struct CompiledPattern {
    pub(crate) rule: u32,
    pub(crate) matcher: Matcher,
    /// For a line pattern counting many hits that is only a few literals: they count
    /// its matches without the matcher.
    pub(crate) exact: Option<alloc::boxed::Box<literal::ExactLiterals>>,
    /// A body rule's with `tflags nosubject`: the text's first line, the Subject, is
    /// not searched.
    pub(crate) skips_subject: bool,
}

/// The patterns of one target (body, rawbody, full or uri) with their prefilter.
#[derive(Default)]
pub(crate) struct TargetProgram {
    pub(crate) patterns: Vec<CompiledPattern>,
    pub(crate) prefilter: Option<LiteralAutomaton>,
    /// Literal id → pattern indices it makes candidates.
    pub(crate) literal_patterns: Vec<Vec<u32>>,
    /// Pattern index → its literal ids (empty for unfiltered patterns).
    pub(crate) pattern_literals: Vec<Vec<u32>>,
    /// Pattern index → literal hits a line needs before the pattern can match in it.
    pub(crate) pattern_min_hits: Vec<u32>,
    /// Pattern index → whether every match starts where one of its literals occurs.
    pub(crate) pattern_starts_match: Vec<bool>,
    /// Pattern index → what a text needs to hold one of its matches.
    pub(crate) pattern_needs: Vec<MatchNeeds>,
    /// Pattern index → the most bytes a match of it spans, when a rawbody piece's
    /// pattern has a bound ([`NO_BOUND`] otherwise): it is searched only that far around
    /// its literals.
    pub(crate) pattern_longest: Vec<u32>,
    /// Patterns with no literal and in no union: always run.
    pub(crate) unfiltered: Vec<u32>,
    /// Unfiltered patterns searched together: only the members a union finds run.
    pub(crate) unions: Vec<Union>,
    /// How its lines end, for a line target.
    pub(crate) line_ends: LineEnds,
}

/// How a header target is assembled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeaderTarget {
    pub(crate) field: HeaderField,
    pub(crate) form: HeaderForm,
}

/// One header rule, compiled.
pub(crate) struct HeaderCheck {
    pub(crate) rule: u32,
    pub(crate) target: u32,
    pub(crate) test: HeaderCheckTest,
    pub(crate) if_unset: Option<String>,
    /// Literals (ids into the header prefilter) one of which must occur; empty: always run.
    pub(crate) literals: Vec<u32>,
    /// What the target needs to hold a match.
    pub(crate) needs: MatchNeeds,
}

pub(crate) enum HeaderCheckTest {
    Matches(Matcher),
    NotMatches(Matcher),
    Exists,
}

/// One `mimeheader` rule, compiled.
pub(crate) struct MimeHeaderCheck {
    pub(crate) rule: u32,
    /// The header name, lowercased.
    pub(crate) name: String,
    pub(crate) raw: bool,
    pub(crate) matcher: Matcher,
    /// What the target needs to hold a match.
    pub(crate) needs: MatchNeeds,
}

/// Meta expressions as postfix programs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum MetaStep {
    Rule(u32),
    Number(f64),
    Not,
    Neg,
    Op(MetaOp),
    /// `&&` after its left side: when that is 0 it is the value and the right side,
    /// the steps up to `.0`, is skipped; otherwise the right side's value is.
    AndThen(u32),
    /// `||` after its left side: when that is not 0 it is the value and the right side,
    /// the steps up to `.0`, is skipped; otherwise the right side's value is.
    OrElse(u32),
}

pub(crate) struct MetaProgram {
    pub(crate) rule: u32,
    pub(crate) steps: Vec<MetaStep>,
    /// Its value when every rule it reads is 0: a meta none of whose rules hit need
    /// not run.
    pub(crate) at_zero: bool,
}

/// For each rule, the metas that read it (indices into `RuleSet::metas`), so a scan
/// runs only the metas whose rules hit.
#[derive(Default)]
pub(crate) struct MetaReaders {
    /// Rule id → its range in `metas`: `start[rule]..start[rule + 1]`.
    pub(crate) start: Vec<u32>,
    pub(crate) metas: Vec<u32>,
}

impl MetaReaders {
    /// The metas that read `rule`.
    pub(crate) fn of(&self, rule: u32) -> &[u32] {
        let (Some(&from), Some(&to)) = (self.start.get(rule as usize), self.start.get(rule as usize + 1)) else {
            return &[];
        };
        self.metas.get(from as usize..to as usize).unwrap_or_default()
    }
}

/// An eval rule and its native test.
pub(crate) struct EvalCheck {
    pub(crate) rule: u32,
    pub(crate) test: EvalTest,
}

/// A compiled, immutable rule set. Built once; scans borrow it shared.
pub struct RuleSet {
    pub(crate) id: u32,
    pub(crate) rules: Vec<RuleInfo>,
    pub(crate) required: Score,
    pub(crate) body: TargetProgram,
    pub(crate) rawbody: TargetProgram,
    /// The `rawbody` patterns that run on each piece of the text whole.
    pub(crate) rawbody_pieces: TargetProgram,
    pub(crate) full: TargetProgram,
    pub(crate) uri: TargetProgram,
    pub(crate) header_targets: Vec<HeaderTarget>,
    /// Header checks, grouped by target.
    pub(crate) headers: Vec<HeaderCheck>,
    pub(crate) header_prefilter: Option<LiteralAutomaton>,
    /// Whether a header check on a relays' pseudo-header has prefilter literals: the
    /// prefilter then reads the relays' texts too.
    pub(crate) relay_literals: bool,
    pub(crate) header_literal_count: usize,
    pub(crate) mimeheaders: Vec<MimeHeaderCheck>,
    pub(crate) metas: Vec<MetaProgram>,
    pub(crate) meta_readers: MetaReaders,
    /// The sub-rules a scan runs only when a scored rule may still depend on them.
    pub(crate) demand: DemandPlan,
    /// Native eval tests, run once per message before the metas.
    pub(crate) evals: Vec<EvalCheck>,
    pub(crate) eval_data: EvalData,
    pub(crate) lazy_dfas: Vec<hybrid::dfa::DFA>,
    /// The tables of every narrow DFA (patterns' and unions').
    pub(crate) narrow_tables: NarrowTables,
    /// Whether patterns small enough get a dense DFA (false: only lazy ones, see [`RuleSet::check`]).
    dense: bool,
    /// Backtracking programs of the patterns DFAs cannot express exactly.
    pub(crate) programs: Vec<Program>,
    pub(crate) max_literals: usize,
    pub(crate) max_patterns: usize,
    pub(crate) meta_stack: usize,
    disabled: Vec<Disabled>,
    deferred_disable: Vec<(u32, DisabledReason)>,
    /// During a build: prefilters by needle set, so patterns with equal sets share one.
    prefilters: Prefilters,
    /// During a build: the relaxed regex of each program's screen, by program index.
    program_relaxed: Vec<String>,
    summary: RuleSummary,
    config: Config,
}

fn syntax_config() -> syntax::Config {
    syntax::Config::new().unicode(false).utf8(false)
}

pub(super) fn parse_hir(translated: &str) -> Result<Hir, String> {
    regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .nest_limit(100)
        .build()
        .parse(translated)
        .map_err(|e| e.to_string())
}

/// A pattern compiled for matching, with its prefilter literals.
struct Built {
    matcher: Matcher,
    required: Option<literal::Required>,
    needs: MatchNeeds,
    /// For a line pattern counting many hits: its literals, when it is only those.
    exact: Option<alloc::boxed::Box<literal::ExactLiterals>>,
}

/// What a text needs to hold a match of a pattern: a byte one of which every match
/// holds (for a pattern without required literals, whose prefilter cannot tell), and
/// room. A text that lacks either is not searched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MatchNeeds {
    pub(crate) byte: Option<literal::RequiredByte>,
    pub(crate) room: MatchRoom,
}

impl MatchNeeds {
    /// Whether `text` cannot hold a match: it lacks the byte, or the room
    /// (`longest_line` measures its longest line, asked only when that decides).
    pub(crate) fn rule_out(&self, text: &[u8], longest_line: impl FnOnce() -> usize) -> bool {
        self.byte.as_ref().is_some_and(|byte| byte.find(text).is_none()) || self.room.rules_out(text, longest_line)
    }
}

/// The room every match of a pattern takes: `len` bytes at least, all on one line
/// when `one_line`. A text without that room is not searched (`__LONGLINE` on a
/// message of short lines, fifty addresses in a `To` of two).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MatchRoom {
    pub(crate) len: u32,
    pub(crate) one_line: bool,
    /// A match may be empty (in the body, then not after the text's final `\n`: no
    /// line of SpamAssassin's starts there).
    pub(crate) empty: bool,
}

impl MatchRoom {
    /// The room the matches of `hir` take.
    pub(crate) fn of(hir: &Hir) -> MatchRoom {
        // No minimum (a pattern that never matches): no bound either.
        let min = hir.properties().minimum_len();
        let len = min.map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX));
        MatchRoom { len, one_line: !crosses_lines(hir, 0), empty: min == Some(0) }
    }

    /// The room the matches of a line pattern take: `local`, its [`line_local`] form,
    /// or `through`, its matches that end with a line's `\n` (which takes no room on
    /// the line).
    pub(crate) fn of_line(local: &Hir, through: Option<&Hir>) -> MatchRoom {
        let room = MatchRoom::of(local);
        let through_len = through.map(|t| MatchRoom::of(t).len.saturating_sub(1));
        MatchRoom { len: through_len.map_or(room.len, |t| t.min(room.len)), ..room }
    }

    /// Whether no match fits in `text`, whose longest line `longest_line` measures
    /// (asked only for a one-line match longer than most lines are).
    pub(crate) fn rules_out(self, text: &[u8], longest_line: impl FnOnce() -> usize) -> bool {
        let len = self.len as usize;
        len > text.len() || (self.one_line && len > SHORT_LINE && len > longest_line())
    }
}

/// Lines of mail are at most 78 bytes, as RFC 5322 asks: a match that fits in one is
/// not worth measuring lines for.
const SHORT_LINE: usize = 78;

/// Whether a match of `hir` can hold a `\n` (when unsure: yes).
fn crosses_lines(hir: &Hir, depth: usize) -> bool {
    if depth > META_DEPTH * 4 {
        return true;
    }
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => false,
        HirKind::Literal(lit) => lit.0.contains(&b'\n'),
        HirKind::Class(Class::Bytes(c)) => c.ranges().iter().any(|r| r.start() <= b'\n' && b'\n' <= r.end()),
        HirKind::Class(Class::Unicode(c)) => c.ranges().iter().any(|r| r.start() <= '\n' && '\n' <= r.end()),
        HirKind::Repetition(rep) => rep.max != Some(0) && crosses_lines(&rep.sub, depth + 1),
        HirKind::Capture(c) => crosses_lines(&c.sub, depth + 1),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => subs.iter().any(|h| crosses_lines(h, depth + 1)),
    }
}

/// Whether a match of `hir` is anchored at its text's start or end (`^` or `$` without
/// `/m`, `\A`, `\z`).
fn anchors_text(hir: &Hir, depth: usize) -> bool {
    if depth > META_DEPTH * 4 {
        return true;
    }
    match hir.kind() {
        HirKind::Look(look) => matches!(look, Look::Start | Look::End),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => false,
        HirKind::Repetition(rep) => anchors_text(&rep.sub, depth + 1),
        HirKind::Capture(c) => anchors_text(&c.sub, depth + 1),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => subs.iter().any(|h| anchors_text(h, depth + 1)),
    }
}

/// [`TargetProgram::pattern_longest`] of a pattern whose matches have no known bound.
pub(crate) const NO_BOUND: u32 = u32::MAX;

/// For a `rawbody` pattern that must run on each piece of the text whole
/// ([`crate::msg::Message::rawbody_pieces`]) rather than line by line, the most bytes a
/// match of it spans as it is searched ([`NO_BOUND`] for none known, or when it
/// backtracks: its program searches a piece whole); `None` for one that runs on lines.
/// A pattern runs on pieces when a match of it, or what its lookaround reads, may hold a
/// `\n`, or when it is anchored at the piece's start or end (when unsure: it does).
fn piece_bound(p: &Pattern) -> Option<u32> {
    let (hir, backtracks) = match p.translated() {
        Ok(t) => (parse_hir(&t).ok(), false),
        Err(why) if why.needs_backtracking() => (perl::backtracking_hir(&p.perl).ok(), true),
        Err(_) => (None, true),
    };
    let Some(hir) = hir else { return Some(NO_BOUND) };
    if !crosses_lines(&hir, 0) && !anchors_text(&hir, 0) {
        return None;
    }
    let longest = end_before_newline(&hir, 0).properties().maximum_len().and_then(|n| u32::try_from(n).ok());
    Some(longest.filter(|_| !backtracks).unwrap_or(NO_BOUND))
}

/// How the lines of a line target end as SpamAssassin matches them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum LineEnds {
    /// With no line end: each URI, each rawbody line a pattern that cannot hold a
    /// `\n` runs on.
    #[default]
    Bare,
    /// With their `\n` (the body's: every line but the last, and the last too when
    /// SpamAssassin's text ends with one): a match may end with it.
    Newline,
}

impl LineEnds {
    /// `hir` made to match, in a text of many lines, what it matches in each of these
    /// lines alone: [`line_local`], or [`body_line_local`].
    pub(crate) fn local(self, hir: &Hir, depth: usize) -> Hir {
        match self {
            LineEnds::Bare => line_local(hir, depth),
            LineEnds::Newline => body_line_local(hir, depth),
        }
    }
}

/// How the text a pattern runs on is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Span {
    /// One string: a header, a MIME header, the whole message.
    Whole,
    /// `\n`-separated lines (body, rawbody, uri), each matched on its own.
    Lines(LineEnds),
    /// Lines, of a rule that counts one hit: only whether a line matches is asked.
    LinesOnce(LineEnds),
    /// The whole message (`full`): when the required literals start every match, it is
    /// searched only where they occur, so its DFA starts anchored too.
    Message,
    /// A piece of a rawbody text, which may end with a `\n`: Perl's `$` holds before it.
    Pieces,
}

/// Where a compile gets its dense DFAs.
pub(super) enum Dense<'c> {
    /// None: every pattern runs lazily (lint).
    Skip,
    /// Determinized here.
    Build,
    /// Taken from, or determinized and added to, a cache.
    Cached(&'c mut DfaCache),
}

/// The cache key of a pattern compiled from `source`, written as `tag` says (`perl` as
/// in a rule, `regex` in regex-automata syntax), for lines cut as `span`, by this compiler.
fn pattern_key(tag: &[u8], source: &str, span: Span, dense_limit: usize) -> cache::Key {
    let span_tag: &[u8] = match span {
        Span::Whole => b"whole",
        Span::Lines(LineEnds::Bare) => b"lines",
        Span::LinesOnce(LineEnds::Bare) => b"lines once",
        Span::Lines(LineEnds::Newline) => b"body lines",
        Span::LinesOnce(LineEnds::Newline) => b"body lines once",
        Span::Message => b"message",
        Span::Pieces => b"pieces",
    };
    cache::key(&[
        tag,
        source.as_bytes(),
        span_tag,
        &dense_limit.to_le_bytes(),
        &AUTOMATA_REVISION.to_le_bytes(),
        env!("CARGO_PKG_VERSION").as_bytes(),
    ])
}

/// What the cache holds under a pattern's key.
enum Lookup {
    /// A matcher, built without parsing.
    Found(Built),
    /// Too big for a dense DFA; its NFA was not kept.
    TooBig,
    /// Not in the cache, or no cache.
    Unknown,
}

/// The matcher the cache keeps under `key`: a dense DFA, or the NFA of a lazy one.
fn cached_matcher(key: &cache::Key, lazy: &mut Vec<hybrid::dfa::DFA>, dense: &mut Dense<'_>) -> Result<Lookup, DisabledReason> {
    let Dense::Cached(c) = dense else { return Ok(Lookup::Unknown) };
    Ok(match c.get(key) {
        Some(Cached { dfa: Some(mut dfa), required, needs, exact, prefilter, .. }) => {
            dfa.set_prefilter(prefilter);
            Lookup::Found(Built { matcher: Matcher::Dense(alloc::boxed::Box::new(dfa)), required, needs, exact })
        }
        Some(Cached { dfa: None, nfa: Some(part), times, openings, required, needs, exact, .. }) if times > 1 => {
            match build_repeat(part, times, openings, lazy)? {
                Some(r) => Lookup::Found(Built { matcher: Matcher::Repeat(alloc::boxed::Box::new(r)), required, needs, exact }),
                None => Lookup::TooBig,
            }
        }
        Some(Cached { dfa: None, nfa: Some(nfa), required, needs, exact, prefilter, .. }) => {
            let matcher = Matcher::Lazy(build_lazy(nfa, prefilter, MatchKind::LeftmostFirst, lazy)?);
            Lookup::Found(Built { matcher, required, needs, exact })
        }
        Some(_) => Lookup::TooBig,
        None => Lookup::Unknown,
    })
}

/// The matcher of a regex in regex-automata syntax, from the cache or built.
fn build_matcher(
    translated: &str,
    span: Span,
    dense_limit: usize,
    lazy: &mut Vec<hybrid::dfa::DFA>,
    prefilters: &mut Prefilters,
    dense: &mut Dense<'_>,
) -> Result<Built, DisabledReason> {
    let key = pattern_key(b"regex", translated, span, dense_limit);
    match cached_matcher(&key, lazy, dense)? {
        Lookup::Found(built) => Ok(built),
        Lookup::TooBig => compile_matcher(translated, key, None, span, lazy, prefilters, dense),
        Lookup::Unknown => compile_matcher(translated, key, Some(dense_limit), span, lazy, prefilters, dense),
    }
}

/// Parses and compiles `translated`, as a dense DFA up to `dense_limit` bytes (none: known
/// too big) or else a lazy one; a cache records the outcome under `key`.
fn compile_matcher(
    translated: &str,
    key: cache::Key,
    dense_limit: Option<usize>,
    span: Span,
    lazy: &mut Vec<hybrid::dfa::DFA>,
    prefilters: &mut Prefilters,
    dense: &mut Dense<'_>,
) -> Result<Built, DisabledReason> {
    let hir = parse_hir(translated).map_err(DisabledReason::Build)?;
    let required = match span {
        Span::Message => literal::prefixes(&hir).or_else(|| literal::requirement(&hir)),
        _ => literal::requirement(&hir),
    };
    let anchored = required.as_ref().is_some_and(|r| r.starts_match);
    let byte = if required.is_none() { literal::required_byte(&hir) } else { None };
    // On body lines, the matches that end with the line's `\n`.
    let through = match span {
        Span::Lines(LineEnds::Newline) | Span::LinesOnce(LineEnds::Newline) => through_line_end(&hir, 0),
        _ => None,
    };
    // A pattern that may end with a line's `\n` is not counted by its literals alone.
    let exact = match span {
        Span::Lines(_) if through.is_none() => literal::ExactLiterals::of(&hir).map(alloc::boxed::Box::new),
        _ => None,
    };
    // Should its DFA be too big to be dense, a rule counting one hit may chain the part
    // its pattern repeats.
    let part = match span {
        Span::LinesOnce(ends) => repeat::split(&hir).map(|(part, times)| (ends.local(part, 0), times)),
        _ => None,
    };
    let (searched, room) = match span {
        Span::Whole | Span::Message => (hir, None),
        Span::Pieces => (end_before_newline(&hir, 0), None),
        Span::Lines(ends) | Span::LinesOnce(ends) => (ends.local(&hir, 0), Some(MatchRoom::of_line(&line_local(&hir, 0), through.as_ref()))),
    };
    let needs = MatchNeeds { byte, room: room.unwrap_or_else(|| MatchRoom::of(&searched)) };
    // A line pattern behind prefilter literals runs only on the lines holding them: a
    // prefix prefilter saves little there, and costs a build at every start.
    let prefix = match (span, &required) {
        (Span::Lines(_) | Span::LinesOnce(_), Some(_)) => None,
        _ => prefix_needles(&searched, prefilters),
    };
    let prefilter = prefix.as_deref().and_then(|p| prefilters.fast(p));
    let nfa = build_nfa(&searched)?;
    let built = match (&*dense, dense_limit) {
        (Dense::Skip, _) | (_, None) => None,
        (_, Some(limit)) => build_dense(&nfa, prefilter.clone(), anchored, limit),
    };
    let repeat = match (&built, part) {
        (None, Some((part, times))) => repeat_of(&part, times, lazy)?,
        _ => None,
    };
    if let (Dense::Cached(c), Some(_)) = (dense, dense_limit) {
        let kept_nfa = match (&built, &repeat) {
            (Some(_), _) => None,
            (None, Some((r, part))) => Some((part, r.times)),
            (None, None) => Some((&nfa, 1)),
        };
        let openings = repeat.as_ref().map(|(r, _)| &r.openings);
        c.put(key, built.as_ref(), kept_nfa, openings, required.as_ref(), &needs, exact.as_deref(), prefix.as_deref());
    }
    let matcher = match (built, repeat) {
        (Some(dfa), _) => Matcher::Dense(alloc::boxed::Box::new(dfa)),
        (None, Some((r, _))) => Matcher::Repeat(alloc::boxed::Box::new(r)),
        (None, None) => Matcher::Lazy(build_lazy(nfa, prefilter, MatchKind::LeftmostFirst, lazy)?),
    };
    Ok(Built { matcher, required, needs, exact })
}

/// Most pairs of bytes (of 65,536) the part of a [`Repeat`] may start with. Its chain
/// walks from every place one of them is; a part that starts almost anywhere (`.` or
/// `\W` in front) would walk from most places, which costs more than one pass of the
/// whole pattern's DFA. The stock parts start with 348 (`__FILL_THIS_FORM_LONG2`) and
/// 910 (`__FILL_THIS_FORM_LONG1`, whose line numbers may start with `(`).
const REPEAT_PAIRS: u32 = 4096;

/// The chain of `times` matches of `part` (made local to lines), with the part's NFA,
/// when it starts with few enough pairs of bytes.
fn repeat_of(part: &Hir, times: u32, lazy: &mut Vec<hybrid::dfa::DFA>) -> Result<Option<(Repeat, thompson::NFA)>, DisabledReason> {
    let nfa = build_nfa(part)?;
    Ok(build_repeat(nfa.clone(), times, None, lazy)?.map(|r| (r, nfa)))
}

/// The chain of `times` matches of `part`, whose lazy DFA joins `lazy`; `None` when it
/// starts with too many pairs of bytes. `known`: its openings, kept by a compile cache
/// (else found by stepping the part's DFA).
fn build_repeat(
    part: thompson::NFA,
    times: u32,
    known: Option<Openings>,
    lazy: &mut Vec<hybrid::dfa::DFA>,
) -> Result<Option<Repeat>, DisabledReason> {
    let unit = build_lazy(part, None, MatchKind::All, lazy)?;
    match known.or_else(|| lazy.get(unit).and_then(Openings::of)) {
        Some(openings) if openings.pairs() <= REPEAT_PAIRS => Ok(Some(Repeat { unit, times, openings })),
        _ => {
            lazy.pop();
            Ok(None)
        }
    }
}

/// The cache key of the backtracking compile of `perl`.
fn backtrack_key(perl: &str) -> cache::Key {
    cache::key(&[b"backtrack", perl.as_bytes(), &AUTOMATA_REVISION.to_le_bytes(), env!("CARGO_PKG_VERSION").as_bytes()])
}

/// The backtracking compile of `perl` when the cache holds one.
fn backtrack_known(perl: &str, dense: &mut Dense<'_>) -> Option<Backtrack> {
    let Dense::Cached(cache) = dense else { return None };
    cache.get_backtrack(&backtrack_key(perl))
}

/// The backtracking compile of `perl`, from the cache when it holds one.
fn backtrack_cached(perl: &str, dense: &mut Dense<'_>) -> Result<Backtrack, DisabledReason> {
    if let Some(found) = backtrack_known(perl, dense) {
        return Ok(found);
    }
    let compiled = perl::backtrack(perl).map_err(DisabledReason::Regex)?;
    if let Dense::Cached(cache) = dense {
        cache.put_backtrack(backtrack_key(perl), &compiled);
    }
    Ok(compiled)
}

/// Most prefix literals kept for a search prefilter.
const MAX_PREFIXES: usize = 64;

/// The literals every match of `hir` starts with, when a fast prefilter can search for them.
fn prefix_needles(hir: &Hir, prefilters: &mut Prefilters) -> Option<Vec<Vec<u8>>> {
    let mut extractor = Extractor::new();
    extractor.kind(ExtractKind::Prefix);
    let mut seq = extractor.extract(hir);
    seq.optimize_for_prefix_by_preference();
    let needles: Vec<Vec<u8>> = seq.literals()?.iter().map(|l| l.as_bytes().to_vec()).collect();
    (!needles.is_empty() && needles.len() <= MAX_PREFIXES && prefilters.fast(&needles).is_some()).then_some(needles)
}

/// Prefilters built so far, by needle set: a set many patterns start with (a word in
/// every case spelling, say) is built once and shared.
#[derive(Default)]
struct Prefilters(BTreeMap<Vec<Vec<u8>>, Option<Prefilter>>);

impl Prefilters {
    /// [`fast_prefilter`] over `needles`, built once per set.
    fn fast(&mut self, needles: &[Vec<u8>]) -> Option<Prefilter> {
        if let Some(known) = self.0.get(needles) {
            return known.clone();
        }
        let built = fast_prefilter(needles);
        self.0.insert(needles.to_vec(), built.clone());
        built
    }
}

/// A prefilter over `needles` when it is much faster than the automaton it guards (SIMD
/// or memchr): a DFA then skips to where a match can start instead of stepping every byte.
pub(super) fn fast_prefilter(needles: &[Vec<u8>]) -> Option<Prefilter> {
    Prefilter::new(MatchKind::LeftmostFirst, needles).filter(Prefilter::is_fast)
}

fn build_nfa(hir: &Hir) -> Result<thompson::NFA, DisabledReason> {
    build_nfa_many(core::slice::from_ref(hir))
}

/// The NFA of `hirs`, one pattern each, made smaller ([`nfa::shrink`]: a union's byte
/// alternates and equal states merged): every automaton of the rules is built from one.
pub(super) fn build_nfa_many(hirs: &[Hir]) -> Result<thompson::NFA, DisabledReason> {
    let nfa = nfa_compiler().build_many_from_hir(hirs).map_err(|e| DisabledReason::Build(e.to_string()))?;
    Ok(nfa::shrink(&nfa).unwrap_or(nfa))
}

/// The NFA compiler of every pattern: bytes, no Unicode, no captures.
pub(super) fn nfa_compiler() -> thompson::Compiler {
    let mut compiler = thompson::Compiler::new();
    compiler
        .syntax(syntax_config())
        .configure(thompson::Config::new().utf8(false).shrink(false).which_captures(thompson::WhichCaptures::None));
    compiler
}

/// `hir` with each leaf (literal, class, look) `leaf` rewrites replaced, the rest kept:
/// the frame of [`end_before_newline`] and [`line_local`].
fn map_leaves(hir: &Hir, depth: usize, leaf: &dyn Fn(&Hir) -> Option<Hir>) -> Hir {
    if depth > META_DEPTH * 4 {
        return Hir::fail();
    }
    let map = |sub: &Hir| map_leaves(sub, depth + 1, leaf);
    match hir.kind() {
        HirKind::Repetition(rep) => Hir::repetition(Repetition { sub: alloc::boxed::Box::new(map(&rep.sub)), ..rep.clone() }),
        HirKind::Capture(c) => Hir::capture(Capture { sub: alloc::boxed::Box::new(map(&c.sub)), ..c.clone() }),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(map).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(map).collect()),
        _ => leaf(hir).unwrap_or_else(|| hir.clone()),
    }
}

/// `hir` with Perl's `$` (and `\Z`) for a text that may end with a `\n`: the end
/// holds before that `\n` too (the translation makes `$` the text's end). `\z` gets
/// the same, having the same translation.
pub(super) fn end_before_newline(hir: &Hir, depth: usize) -> Hir {
    map_leaves(hir, depth, &|leaf| match leaf.kind() {
        HirKind::Look(Look::End) => {
            let newline = Hir::repetition(Repetition { min: 0, max: Some(1), greedy: true, sub: alloc::boxed::Box::new(Hir::literal(*b"\n")) });
            Some(Hir::concat(alloc::vec![newline, Hir::look(Look::End)]))
        }
        _ => None,
    })
}

/// `hir` made to match, in a text of many lines, exactly what it matches in each line
/// alone: no match crosses a `\n` (classes and literals lose it) and `^`/`$` become
/// line anchors. One search then covers every line of a text instead of one call a line.
pub(super) fn line_local(hir: &Hir, depth: usize) -> Hir {
    map_leaves(hir, depth, &|leaf| match leaf.kind() {
        HirKind::Literal(lit) if lit.0.contains(&b'\n') => Some(Hir::fail()),
        HirKind::Class(Class::Bytes(c)) => {
            let mut c = c.clone();
            c.difference(&ClassBytes::new([ClassBytesRange::new(b'\n', b'\n')]));
            Some(Hir::class(Class::Bytes(c)))
        }
        HirKind::Class(Class::Unicode(c)) => {
            let mut c = c.clone();
            c.difference(&ClassUnicode::new([ClassUnicodeRange::new('\n', '\n')]));
            Some(Hir::class(Class::Unicode(c)))
        }
        HirKind::Look(Look::Start) => Some(Hir::look(Look::StartLF)),
        HirKind::Look(Look::End) => Some(Hir::look(Look::EndLF)),
        _ => None,
    })
}

/// `hir` made to match, in the body's text, what it matches in each of SpamAssassin's
/// body lines, which keep their `\n`: what [`line_local`] matches, or a match that
/// ends with the line's `\n` ([`through_line_end`]). The two share what comes before
/// the part that may take the `\n`, so the automaton grows by little more than that
/// part; a greedy part tries the `\n` first, a lazy one last, as Perl's would.
pub(super) fn body_line_local(hir: &Hir, depth: usize) -> Hir {
    if depth > META_DEPTH * 4 {
        return Hir::fail();
    }
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => line_local(hir, depth),
        // Alone, a literal ending with `\n` or a class holding it takes the line's.
        HirKind::Literal(_) => through_line_end(hir, depth).unwrap_or_else(|| line_local(hir, depth)),
        HirKind::Class(_) => match through_line_end(hir, depth) {
            Some(_) => hir.clone(),
            None => line_local(hir, depth),
        },
        HirKind::Capture(c) => body_line_local(&c.sub, depth + 1),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(|sub| body_line_local(sub, depth + 1)).collect()),
        HirKind::Concat(subs) => {
            // Only parts all of whose followers can match empty after the `\n` may take it.
            let mut first_end = subs.len().saturating_sub(1);
            while first_end > 0 && subs.get(first_end).is_some_and(|sub| empty_at_line_end(sub, depth + 1)) {
                first_end -= 1;
            }
            let mut tail = subs.last().map_or_else(Hir::empty, |last| body_line_local(last, depth + 1));
            for sub in subs.iter().take(subs.len().saturating_sub(1)).skip(first_end).rev() {
                let on = Hir::concat(alloc::vec![line_local(sub, depth + 1), tail]);
                tail = match through_line_end(sub, depth + 1) {
                    Some(through) => prefer(through, on, has_lazy_repeat(sub, depth + 1)),
                    None => on,
                };
            }
            let mut parts: Vec<Hir> = subs.iter().take(first_end).map(|sub| line_local(sub, depth + 1)).collect();
            parts.push(tail);
            Hir::concat(parts)
        }
        HirKind::Repetition(rep) => {
            if through_line_end(&rep.sub, depth + 1).is_none() || empty_at_line_end(&rep.sub, depth + 1) {
                // (The repeats after one taking the `\n` may be empty ones there.)
                return match through_line_end(hir, depth) {
                    Some(through) => prefer(through, line_local(hir, depth), has_lazy_repeat(hir, depth)),
                    None => line_local(hir, depth),
                };
            }
            // All but the last repeat stay on the line; the last may take the `\n`.
            let max = match rep.max {
                Some(0) => return Hir::empty(),
                max => max.map(|m| m - 1),
            };
            let before = Repetition { min: rep.min.saturating_sub(1), max, greedy: rep.greedy, sub: alloc::boxed::Box::new(line_local(&rep.sub, depth + 1)) };
            let some = Hir::concat(alloc::vec![Hir::repetition(before), body_line_local(&rep.sub, depth + 1)]);
            match rep.min {
                0 => Hir::repetition(Repetition { min: 0, max: Some(1), greedy: rep.greedy, sub: alloc::boxed::Box::new(some) }),
                _ => some,
            }
        }
    }
}

/// `first` or `second`, in that order of preference unless `swap`.
fn prefer(first: Hir, second: Hir, swap: bool) -> Hir {
    Hir::alternation(if swap { alloc::vec![second, first] } else { alloc::vec![first, second] })
}

/// Whether `hir` holds a lazy repeat (`+?`, `*?`, ...).
fn has_lazy_repeat(hir: &Hir, depth: usize) -> bool {
    if depth > META_DEPTH * 4 {
        return false;
    }
    match hir.kind() {
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => false,
        HirKind::Repetition(rep) => !rep.greedy || has_lazy_repeat(&rep.sub, depth + 1),
        HirKind::Capture(c) => has_lazy_repeat(&c.sub, depth + 1),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => subs.iter().any(|sub| has_lazy_repeat(sub, depth + 1)),
    }
}

/// The matches of `hir` whose last byte is a line's `\n`, made line-local up to it;
/// `None` when no match can end so. After that `\n` only what matches empty at the
/// end of SpamAssassin's line ([`empty_at_line_end`]) may follow.
fn through_line_end(hir: &Hir, depth: usize) -> Option<Hir> {
    if depth > META_DEPTH * 4 {
        return None;
    }
    let newline = || Hir::literal(*b"\n");
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => None,
        HirKind::Literal(lit) => memchr::memchr(b'\n', &lit.0).is_some_and(|at| at + 1 == lit.0.len()).then(|| hir.clone()),
        HirKind::Class(Class::Bytes(c)) => c.ranges().iter().any(|r| r.start() <= b'\n' && b'\n' <= r.end()).then(newline),
        HirKind::Class(Class::Unicode(c)) => c.ranges().iter().any(|r| r.start() <= '\n' && '\n' <= r.end()).then(newline),
        HirKind::Capture(c) => through_line_end(&c.sub, depth + 1),
        HirKind::Alternation(subs) => {
            let through: Vec<Hir> = subs.iter().filter_map(|sub| through_line_end(sub, depth + 1)).collect();
            (!through.is_empty()).then(|| Hir::alternation(through))
        }
        HirKind::Concat(subs) => {
            // The `\n` ends any part all of whose followers can match empty there.
            let mut through = Vec::new();
            for (i, sub) in subs.iter().enumerate().rev() {
                if let Some(last) = through_line_end(sub, depth + 1) {
                    let mut parts: Vec<Hir> = subs.iter().take(i).map(|s| line_local(s, depth + 1)).collect();
                    parts.push(last);
                    through.push(Hir::concat(parts));
                }
                if !empty_at_line_end(sub, depth + 1) {
                    break;
                }
            }
            through.reverse();
            (!through.is_empty()).then(|| Hir::alternation(through))
        }
        HirKind::Repetition(rep) => {
            let last = through_line_end(&rep.sub, depth + 1)?;
            let max = match rep.max {
                Some(0) => return None,
                max => max.map(|m| m - 1),
            };
            // The repeats owed after the last byte's may all be empty ones there.
            let min = if empty_at_line_end(&rep.sub, depth + 1) { 0 } else { rep.min.saturating_sub(1) };
            let before = Hir::repetition(Repetition { min, max, greedy: rep.greedy, sub: alloc::boxed::Box::new(line_local(&rep.sub, depth + 1)) });
            Some(Hir::concat(alloc::vec![before, last]))
        }
    }
}

/// Whether `hir` can match empty at the end of a SpamAssassin body line, just after its
/// `\n`: `$`, `\z` and `\B` hold there, `^` and `\b` do not.
fn empty_at_line_end(hir: &Hir, depth: usize) -> bool {
    if depth > META_DEPTH * 4 {
        return false;
    }
    match hir.kind() {
        HirKind::Empty => true,
        HirKind::Literal(_) | HirKind::Class(_) => false,
        HirKind::Look(look) => matches!(
            look,
            Look::End
                | Look::EndLF
                | Look::EndCRLF
                | Look::WordAsciiNegate
                | Look::WordUnicodeNegate
                | Look::WordStartHalfAscii
                | Look::WordEndHalfAscii
                | Look::WordStartHalfUnicode
                | Look::WordEndHalfUnicode
        ),
        HirKind::Repetition(rep) => rep.min == 0 || empty_at_line_end(&rep.sub, depth + 1),
        HirKind::Capture(c) => empty_at_line_end(&c.sub, depth + 1),
        HirKind::Concat(subs) => subs.iter().all(|sub| empty_at_line_end(sub, depth + 1)),
        HirKind::Alternation(subs) => subs.iter().any(|sub| empty_at_line_end(sub, depth + 1)),
    }
}

/// A dense DFA, or `None` when it would exceed `dense_limit` bytes; `anchored`: one that
/// can also start anchored.
pub(super) fn build_dense(nfa: &thompson::NFA, prefilter: Option<Prefilter>, anchored: bool, dense_limit: usize) -> Option<dense::DFA<Vec<u32>>> {
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .start_kind(if anchored { StartKind::Both } else { StartKind::Unanchored })
                .specialize_start_states(prefilter.is_some())
                .prefilter(prefilter)
                .match_kind(MatchKind::LeftmostFirst)
                .minimize(true)
                .dfa_size_limit(Some(dense_limit))
                .determinize_size_limit(Some(dense_limit)),
        )
        .build_from_nfa(nfa)
        .ok()
}

/// Adds a lazy DFA to `lazy` and returns its index. A big one gets a big cache, also
/// when it runs only on the lines that hold its literals: on the public corpus the
/// four that overflowed a small one (`__FILL_THIS_FORM_LONG2`, `__PCT_FOR_YOU_3`, ...)
/// were cleared 490 times a pass, a fifth of the scan's time spent rebuilding states.
/// The worker's `--lazy-cache-mib` bounds them all together. A union's reports every
/// match of each member (`MatchKind::All`).
pub(super) fn build_lazy(
    nfa: thompson::NFA,
    prefilter: Option<Prefilter>,
    match_kind: MatchKind,
    lazy: &mut Vec<hybrid::dfa::DFA>,
) -> Result<usize, DisabledReason> {
    let capacity = if nfa.states().len() > BIG_NFA { BIG_LAZY_CACHE } else { LAZY_CACHE };
    let dfa = hybrid::dfa::Builder::new()
        .configure(
            hybrid::dfa::Config::new()
                .specialize_start_states(prefilter.is_some())
                .prefilter(prefilter)
                .match_kind(match_kind)
                .cache_capacity(capacity)
                .skip_cache_capacity_check(true),
        )
        .build_from_nfa(nfa)
        .map_err(|e| DisabledReason::Build(e.to_string()))?;
    lazy.push(dfa);
    Ok(lazy.len() - 1)
}

/// The score `def` counts with in the active score set.
fn rule_score(def: &RuleDef) -> Score {
    def.score.map(|s| s[0]).unwrap_or_else(|| default_score(def))
}

/// Rule indexes by name, as metas name the rules they read.
fn rules_by_name(config: &Config) -> BTreeMap<&str, u32> {
    config.rules.iter().enumerate().map(|(i, r)| (r.name.as_str(), i as u32)).collect()
}

/// By rule index, the `__` sub-rules whose hits nothing reads: no scored rule reaches
/// them through metas, and no template lists sub-rules (`_SUBTESTS_`). They need not run.
fn unread_subrules(config: &Config, by_name: &BTreeMap<&str, u32>) -> Vec<bool> {
    let n = config.rules.len();
    if lists_subtests(config) {
        return alloc::vec![false; n];
    }
    let mut read = alloc::vec![false; n];
    let mut stack: Vec<usize> = config
        .rules
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.name.starts_with("__") && rule_score(r) != Score::ZERO)
        .map(|(i, _)| i)
        .collect();
    let mut deps = Vec::new();
    while let Some(i) = stack.pop() {
        let Some(seen) = read.get_mut(i) else { continue };
        if *seen {
            continue;
        }
        *seen = true;
        if let Some(RuleKind::Meta(expr)) = config.rules.get(i).map(|r| &r.kind) {
            deps.clear();
            meta_deps(expr, &mut deps, 0);
            stack.extend(deps.iter().filter_map(|d| by_name.get(d).map(|&i| i as usize)));
        }
    }
    config.rules.iter().zip(read).map(|(r, read)| r.name.starts_with("__") && !read).collect()
}

/// Whether a template shows which sub-rules hit (`_SUBTESTS_`): they must then all run.
fn lists_subtests(config: &Config) -> bool {
    let templates = config.add_headers.iter().map(|h| h.template.as_str());
    let rewrites = config.rewrite_headers.iter().map(|(_, text)| text.as_str());
    templates.chain(rewrites).any(|t| t.contains("_SUBTESTS"))
}

/// SpamAssassin's default when a rule has no `score` line.
fn default_score(def: &RuleDef) -> Score {
    let base = if def.name.starts_with("T_") { Score(10) } else { Score::points(1) };
    if def.tflags.nice {
        Score(-base.0)
    } else {
        base
    }
}

/// Collects literals of one target into a prefilter.
#[derive(Default)]
pub(crate) struct LiteralTable {
    literals: Vec<Vec<u8>>,
    ids: BTreeMap<Vec<u8>, usize>,
    users: Vec<Vec<u32>>,
}

/// Marks a user of rawbody's literal table that is a pattern of the pieces program.
const PIECE_USER: u32 = 1 << 31;

/// Rawbody's literal users split by program: (the line patterns', the pieces patterns'),
/// each by literal id.
fn split_users(users: Vec<Vec<u32>>) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    users
        .into_iter()
        .map(|u| {
            let (pieces, lines): (Vec<u32>, Vec<u32>) = u.into_iter().partition(|&p| p & PIECE_USER != 0);
            (lines, pieces.into_iter().map(|p| p & !PIECE_USER).collect())
        })
        .unzip()
}

impl LiteralTable {
    fn add(&mut self, lit: Vec<u8>, user: u32) -> u32 {
        let id = match self.ids.get(&lit) {
            Some(&i) => i,
            None => {
                self.ids.insert(lit.clone(), self.literals.len());
                self.literals.push(lit);
                self.users.push(Vec::new());
                self.literals.len() - 1
            }
        };
        if let Some(u) = self.users.get_mut(id) {
            if u.last() != Some(&user) {
                u.push(user);
            }
        }
        id as u32
    }

    pub(crate) fn automaton(&self) -> Result<Option<LiteralAutomaton>, CompileError> {
        if self.literals.is_empty() {
            return Ok(None);
        }
        // A DFA scans about twice as fast as the NFA; it is shared by every child, but
        // kept within a bound (checked before it is built).
        match LiteralAutomaton::dfa(&self.literals, PREFILTER_DFA_LIMIT) {
            Some(dfa) => Ok(Some(dfa)),
            None => LiteralAutomaton::nfa(&self.literals).map(Some).map_err(|e| CompileError::Prefilter(e.to_string())),
        }
    }
}

impl RuleSet {
    /// Compiles `config` with score set 0 (no network tests, no Bayes), as sift runs.
    /// Rules that do not run (score 0, sub-rules nothing reads) are not built, so a
    /// pattern of theirs that could not compile is not reported: [`RuleSet::check`] is.
    pub fn compile(config: &Config) -> Result<RuleSet, CompileError> {
        RuleSet::build(config, Dense::Build, &run_here)
    }

    /// Compiles as [`RuleSet::compile`] does, taking the dense DFAs `cache` holds and
    /// adding those it lacks: a restart or reload with the same rules skips determinizing.
    /// The prefilter tables and the eval tests' patterns are built as one batch of jobs
    /// for `spread`, which may run them on several threads.
    pub fn compile_cached(config: &Config, cache: &mut DfaCache, spread: Spread<'_>) -> Result<RuleSet, CompileError> {
        cache.start_compile();
        RuleSet::build(config, Dense::Cached(cache), spread)
    }

    /// Compiles `config` as [`RuleSet::compile`] does but determinizes no dense DFA (every
    /// pattern is left to a lazy DFA): which rules run and why the others do not, in a
    /// fraction of the time, as `--lint` needs. Scans with it are correct but slower. It
    /// builds the rules that do not run too, to say whether they would compile.
    pub fn check(config: &Config) -> Result<RuleSet, CompileError> {
        RuleSet::build(config, Dense::Skip, &run_here)
    }

    fn build(config: &Config, mut dense: Dense<'_>, spread: Spread<'_>) -> Result<RuleSet, CompileError> {
        let mut set = RuleSet {
            dense: !matches!(dense, Dense::Skip),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            rules: Vec::with_capacity(config.rules.len()),
            required: config.required_score,
            body: TargetProgram { line_ends: LineEnds::Newline, ..TargetProgram::default() },
            rawbody: TargetProgram::default(),
            rawbody_pieces: TargetProgram::default(),
            full: TargetProgram::default(),
            uri: TargetProgram::default(),
            header_targets: Vec::new(),
            headers: Vec::new(),
            header_prefilter: None,
            relay_literals: false,
            header_literal_count: 0,
            mimeheaders: Vec::new(),
            metas: Vec::new(),
            meta_readers: MetaReaders::default(),
            demand: DemandPlan::default(),
            evals: Vec::new(),
            eval_data: EvalData::default(),
            lazy_dfas: Vec::new(),
            narrow_tables: NarrowTables::default(),
            programs: Vec::new(),
            max_literals: 0,
            max_patterns: 0,
            meta_stack: 0,
            disabled: Vec::new(),
            deferred_disable: Vec::new(),
            prefilters: Prefilters::default(),
            program_relaxed: Vec::new(),
            summary: RuleSummary::default(),
            config: config.settings(),
        };

        let mut tables: [LiteralTable; 4] = Default::default();
        let mut header_table = LiteralTable::default();

        // The eval tests' data is built while the other rules compile; eval rules wait for it.
        let shelf = match &mut dense {
            Dense::Cached(c) => c.lend_programs(),
            _ => ProgramShelf::default(),
        };
        let mut evals = [Job(Work::Evals { config, shelf, built: None })];
        let by_name = rules_by_name(config);
        let unread = unread_subrules(config, &by_name);
        spread(&mut evals, &mut || {
            for (index, def) in config.rules.iter().enumerate() {
                set.add_info(def, unread.get(index).copied().unwrap_or(false));
                if !matches!(def.kind, RuleKind::Eval { .. }) {
                    let result = set.compile_rule(index as u32, def, &mut tables, &mut header_table, &mut dense);
                    set.note_result(index, result);
                }
            }
        });
        let [evals] = evals;
        let (eval_data, shelf) = evals.into_evals();
        set.eval_data = eval_data;
        if let Dense::Cached(c) = &mut dense {
            c.return_programs(shelf);
        }

        // The prefilter tables and the unions are built while the eval rules and the metas compile.
        let plans = [
            ((&set.body, false), UnionKind::Dense),
            ((&set.rawbody, false), UnionKind::Dense),
            ((&set.uri, false), UnionKind::Dense),
            ((&set.rawbody_pieces, true), UnionKind::Dense),
            ((&set.body, false), UnionKind::Lazy),
            ((&set.rawbody, false), UnionKind::Lazy),
            ((&set.uri, false), UnionKind::Lazy),
            ((&set.rawbody_pieces, true), UnionKind::Lazy),
        ]
        .map(|(program, kind)| UnionPlan::new(program, kind, config, &set.program_relaxed, &set.lazy_dfas, &mut dense));
        let [t_body, mut t_raw, t_full, t_uri] = tables;
        // The pieces program's literals are in rawbody's table: one pass finds both's.
        (t_raw.users, set.rawbody_pieces.literal_patterns) = split_users(core::mem::take(&mut t_raw.users));
        // Longest first: unions a cache lacks, the header table's Aho-Corasick DFA, then the body's NFA.
        let [p_body, p_raw, p_uri, p_pieces, l_body, l_raw, l_uri, l_pieces] = &plans;
        let mut jobs = [
            Job(Work::Unions { plan: p_body, built: None }),
            Job(Work::Unions { plan: l_body, built: None }),
            Job(Work::Unions { plan: p_raw, built: None }),
            Job(Work::Unions { plan: p_uri, built: None }),
            Job(Work::Unions { plan: l_raw, built: None }),
            Job(Work::Unions { plan: l_uri, built: None }),
            Job(Work::Unions { plan: p_pieces, built: None }),
            Job(Work::Unions { plan: l_pieces, built: None }),
            Job(Work::Table { table: &header_table, built: None }),
            Job(Work::Table { table: &t_body, built: None }),
            Job(Work::Table { table: &t_uri, built: None }),
            Job(Work::Table { table: &t_raw, built: None }),
            Job(Work::Table { table: &t_full, built: None }),
        ];
        spread(&mut jobs, &mut || {
            for (index, def) in config.rules.iter().enumerate() {
                if let RuleKind::Eval { on, function, args } = &def.kind {
                    let result = set.compile_eval(index as u32, *on, function, args);
                    set.note_result(index, result);
                }
            }
            set.compile_metas(config, &by_name);
        });
        let [u_body, l_body, u_raw, u_uri, l_raw, l_uri, u_pieces, l_pieces, header, body, uri, raw, full] = jobs;
        let grouped = [u_body, u_raw, u_uri, u_pieces, l_body, l_raw, l_uri, l_pieces].map(Job::into_unions);
        let prefilters = [body.into_table()?, raw.into_table()?, full.into_table()?, uri.into_table()?];
        set.header_prefilter = header.into_table()?;

        for ((program, table), prefilter) in [
            (&mut set.body, t_body),
            (&mut set.rawbody, t_raw),
            (&mut set.full, t_full),
            (&mut set.uri, t_uri),
        ]
        .into_iter()
        .zip(prefilters)
        {
            program.prefilter = prefilter;
            set.max_literals = set.max_literals.max(table.literals.len());
            set.max_patterns = set.max_patterns.max(program.patterns.len());
            program.literal_patterns = table.users;
        }
        // Rawbody's literal pass gathers the candidates of both its programs, each in
        // its own range of the scratch's pattern slots.
        set.max_patterns = set.max_patterns.max(set.rawbody.patterns.len() + set.rawbody_pieces.patterns.len());
        let max_hits: Vec<u32> = set.rules.iter().map(|r| r.max_hits).collect();
        let mut union_tables = TablePart::new(0, 0);
        // The plans and their groups: the four programs' dense unions, then their lazy ones.
        for (i, (plan, built)) in plans.into_iter().zip(grouped).enumerate() {
            let program = match i % 4 {
                0 => &mut set.body,
                1 => &mut set.rawbody,
                2 => &mut set.uri,
                _ => &mut set.rawbody_pieces,
            };
            plan.finish(program, built, &max_hits, (&mut set.lazy_dfas, &mut union_tables), &mut dense);
        }
        set.program_relaxed = Vec::new();
        set.header_literal_count = header_table.literals.len();
        set.max_literals = set.max_literals.max(header_table.literals.len());
        // Group header checks by target so each target text is assembled once.
        set.headers.sort_by_key(|c| c.target);
        // MIME header checks by name: a part's header finds its checks by binary search.
        set.mimeheaders.sort_by(|a, b| a.name.cmp(&b.name));
        set.prefilters = Prefilters::default();
        // The unions' narrow tables, then each narrowing job's.
        let mut parts = alloc::vec![union_tables];
        if set.dense {
            parts.extend(set.narrow_dense(spread));
        }
        set.narrow_tables = NarrowTables::join(parts);
        // Lint lists them in the order the rule files define them.
        set.disabled.sort_by_key(|d| d.rule);
        let rules: Vec<PlanRule<'_>> = set
            .rules
            .iter()
            .zip(&config.rules)
            .map(|(r, def)| {
                let expr = match &def.kind {
                    RuleKind::Meta(e) => Some(e),
                    _ => None,
                };
                PlanRule { name: &r.name, rule_type: r.rule_type, active: r.active, expr }
            })
            .collect();
        let lookup = |name: &str| by_name.get(name).copied();
        set.demand = DemandPlan::new(&rules, &set.metas, &set.meta_readers, &lookup, !lists_subtests(config));
        Ok(set)
    }

    /// Makes the patterns' dense DFAs [`NarrowDfa`]s: the same automata in about a third
    /// of the memory, which every child shares. In jobs for `spread`, each with a part of
    /// the tables (ids from 1): those parts.
    fn narrow_dense(&mut self, spread: Spread<'_>) -> Vec<TablePart> {
        let mut matchers: Vec<&mut Matcher> = Vec::new();
        for program in [&mut self.body, &mut self.rawbody, &mut self.full, &mut self.uri, &mut self.rawbody_pieces] {
            matchers.extend(program.patterns.iter_mut().map(|p| &mut p.matcher));
        }
        for check in &mut self.headers {
            if let HeaderCheckTest::Matches(m) | HeaderCheckTest::NotMatches(m) = &mut check.test {
                matchers.push(m);
            }
        }
        matchers.extend(self.mimeheaders.iter_mut().map(|c| &mut c.matcher));
        matchers.retain(|m| m.dense().is_some());
        // Jobs of about equal bytes, so that the threads finish together.
        let total: usize = matchers.iter().filter_map(|m| m.dense()).map(|d| d.memory_usage()).sum();
        let share = total / NARROW_JOBS + 1;
        let mut jobs: Vec<Job<'_>> = Vec::new();
        let mut batch: Vec<&mut Matcher> = Vec::new();
        let mut bytes = 0;
        for m in matchers {
            bytes += m.dense().map_or(0, |d| d.memory_usage());
            batch.push(m);
            if bytes >= share {
                let part = TablePart::new(jobs.len() + 1, bytes / 4);
                jobs.push(Job(Work::Narrow { matchers: core::mem::take(&mut batch), part }));
                bytes = 0;
            }
        }
        let part = TablePart::new(jobs.len() + 1, bytes / 4);
        jobs.push(Job(Work::Narrow { matchers: batch, part }));
        spread(&mut jobs, &mut || {});
        jobs.into_iter()
            .filter_map(|job| match job.0 {
                Work::Narrow { part, .. } => Some(part),
                _ => None,
            })
            .collect()
    }

    /// Records what `def` is before it compiles: name, type, score, hit limit; an
    /// `unread` sub-rule does not run.
    fn add_info(&mut self, def: &RuleDef, unread: bool) {
        let rule_type = RuleType::of(&def.kind);
        let score = rule_score(def);
        let max_hits = if def.tflags.multiple || def.tflags.maxhits.is_some() {
            def.tflags.maxhits.unwrap_or(u32::MAX).max(1)
        } else {
            1
        };
        self.rules.push(RuleInfo {
            name: def.name.clone(),
            describe: def.describe.clone().unwrap_or_default(),
            rule_type,
            score,
            scored: !def.name.starts_with("__") && score != Score::ZERO,
            active: score != Score::ZERO && !unread,
            unread,
            max_hits,
        });
        self.summary.get_mut(rule_type).defined += 1;
    }

    /// Counts rule `index` as compiled, or disables it with its reason.
    fn note_result(&mut self, index: usize, result: Result<(), DisabledReason>) {
        let Some(info) = self.rules.get_mut(index) else { return };
        let counts = &mut self.summary.counts[info.rule_type as usize];
        match result {
            Ok(()) => {
                counts.compiled += 1;
                if info.score == Score::ZERO {
                    counts.zero_score += 1;
                } else if info.unread {
                    counts.unread += 1;
                }
            }
            Err(reason) => {
                counts.disabled += 1;
                info.active = false;
                info.scored = false;
                self.disabled.push(Disabled { name: info.name.clone(), rule_type: info.rule_type, reason, rule: index as u32 });
            }
        }
    }

    fn compile_rule(
        &mut self,
        rule: u32,
        def: &RuleDef,
        tables: &mut [LiteralTable; 4],
        header_table: &mut LiteralTable,
        dense: &mut Dense<'_>,
    ) -> Result<(), DisabledReason> {
        let active = self.rules.get(rule as usize).is_some_and(|r| r.active);
        if !active && self.dense {
            // Never run: neither its automaton nor a cache entry for it is needed.
            return Ok(());
        }
        let on_pieces = match &def.kind {
            RuleKind::RawBody(p) => piece_bound(p),
            _ => None,
        };
        let target_program = |kind: &RuleKind| match kind {
            RuleKind::Body(_) => Some(0),
            RuleKind::RawBody(_) if on_pieces.is_some() => Some(4),
            RuleKind::RawBody(_) => Some(1),
            RuleKind::Full(_) => Some(2),
            RuleKind::Uri(_) => Some(3),
            _ => None,
        };
        match &def.kind {
            RuleKind::Body(p) | RuleKind::RawBody(p) | RuleKind::Full(p) | RuleKind::Uri(p) => {
                let which = target_program(&def.kind).unwrap_or(0);
                let once = self.rules.get(rule as usize).is_some_and(|r| r.max_hits == 1);
                let span = match (which, once) {
                    (2, _) => Span::Message,
                    (4, _) => Span::Pieces,
                    (0, true) => Span::LinesOnce(LineEnds::Newline),
                    (0, false) => Span::Lines(LineEnds::Newline),
                    (_, true) => Span::LinesOnce(LineEnds::Bare),
                    (_, false) => Span::Lines(LineEnds::Bare),
                };
                let built = self.build_pattern(p, span, dense)?;
                let rule_type = RuleType::of(&def.kind);
                self.note_matcher(rule_type, &built);
                if !active {
                    return Ok(());
                }
                let program = match which {
                    0 => &mut self.body,
                    1 => &mut self.rawbody,
                    2 => &mut self.full,
                    4 => &mut self.rawbody_pieces,
                    _ => &mut self.uri,
                };
                let index = program.patterns.len() as u32;
                let mut own = Vec::new();
                let mut min_hits = 1;
                let mut starts_match = false;
                match built.required {
                    Some(req) => {
                        let (table, user) = if which == 4 { (1, index | PIECE_USER) } else { (which, index) };
                        if let Some(table) = tables.get_mut(table) {
                            for lit in req.literals {
                                own.push(table.add(lit, user));
                            }
                        }
                        min_hits = req.min_hits;
                        starts_match = req.starts_match;
                    }
                    None => program.unfiltered.push(index),
                }
                program.pattern_literals.push(own);
                program.pattern_min_hits.push(min_hits);
                program.pattern_starts_match.push(starts_match);
                program.pattern_needs.push(built.needs);
                program.pattern_longest.push(on_pieces.unwrap_or(NO_BOUND));
                let skips_subject = which == 0 && def.tflags.nosubject;
                program.patterns.push(CompiledPattern { rule, matcher: built.matcher, exact: built.exact, skips_subject });
                Ok(())
            }
            RuleKind::Header(h) => {
                let (test, literals, needs) = match &h.test {
                    HeaderTest::Exists => (HeaderCheckTest::Exists, None, MatchNeeds::default()),
                    HeaderTest::Matches(p) => {
                        let built = self.build_pattern(p, Span::Whole, dense)?;
                        self.note_matcher(RuleType::Header, &built);
                        let literals = built.required.map(|r| r.literals);
                        (HeaderCheckTest::Matches(built.matcher), literals, built.needs)
                    }
                    HeaderTest::NotMatches(p) => {
                        let built = self.build_pattern(p, Span::Whole, dense)?;
                        self.note_matcher(RuleType::Header, &built);
                        // A negated test must run whether or not its literals occur.
                        (HeaderCheckTest::NotMatches(built.matcher), None, built.needs)
                    }
                };
                if !active {
                    return Ok(());
                }
                let key = HeaderTarget { field: h.field.clone(), form: h.form };
                let target = match self.header_targets.iter().position(|t| *t == key) {
                    Some(i) => i,
                    None => {
                        self.header_targets.push(key);
                        self.header_targets.len() - 1
                    }
                } as u32;
                let check_index = self.headers.len() as u32;
                // A rule with an if-unset value may match text that is not in the message.
                // A pseudo-header's text is not in the header block the prefilter reads
                // (those the relays make are in a haystack of their own).
                let named = |is: fn(&[u8]) -> bool| matches!(&h.field, HeaderField::Named(n) if is(n.as_bytes()));
                let relay_text = named(super::eval::relays::is_relay_text);
                let pseudo = named(super::eval::relays::is_pseudo_header) && !relay_text;
                let literals = if h.if_unset.is_some() || pseudo { None } else { literals };
                let literal_ids: Vec<u32> = literals
                    .map(|lits| lits.into_iter().map(|l| header_table.add(l, check_index)).collect())
                    .unwrap_or_default();
                self.relay_literals |= relay_text && !literal_ids.is_empty();
                self.headers.push(HeaderCheck {
                    rule,
                    target,
                    test,
                    if_unset: h.if_unset.clone(),
                    literals: literal_ids,
                    needs,
                });
                Ok(())
            }
            RuleKind::MimeHeader { name, raw, pattern } => {
                let built = self.build_pattern(pattern, Span::Whole, dense)?;
                self.note_matcher(RuleType::MimeHeader, &built);
                if active {
                    self.mimeheaders.push(MimeHeaderCheck {
                        rule,
                        name: name.to_ascii_lowercase(),
                        raw: *raw,
                        matcher: built.matcher,
                        needs: built.needs,
                    });
                }
                Ok(())
            }
            RuleKind::Meta(_) => Ok(()),
            RuleKind::Eval { on, function, args } => self.compile_eval(rule, *on, function, args),
        }
    }

    /// Parses an eval rule's test; needs the eval data built.
    fn compile_eval(&mut self, rule: u32, on: EvalOn, function: &str, args: &str) -> Result<(), DisabledReason> {
        let test = EvalTest::parse(on, function, args, &self.eval_data).map_err(DisabledReason::Eval)?;
        if self.rules.get(rule as usize).is_some_and(|r| r.active) {
            self.evals.push(EvalCheck { rule, test });
        }
        Ok(())
    }

    /// Builds a rule's pattern: a DFA from its translation, or, for Perl features DFAs
    /// lack, a DFA of its relaxed form confirmed by a backtracking program. A warm cache
    /// knows either by the Perl text, which is then not translated at all.
    fn build_pattern(&mut self, p: &Pattern, span: Span, dense: &mut Dense<'_>) -> Result<Built, DisabledReason> {
        if let Some(why) = &p.refused {
            return Err(DisabledReason::Regex(why.clone()));
        }
        let key = pattern_key(b"perl", &p.perl, span, DENSE_LIMIT);
        // A screen (a relaxed form's DFA) is searched in one pass over the pattern's text: a
        // `full` pattern's over the whole message, never anchored (from each place its
        // literals start, a repeat the relaxing opened could walk to the end every time).
        let screen_span = if span == Span::Message { Span::Whole } else { span };
        // A pattern the cache knows runs on a backtracking program, whether for Perl
        // features DFAs lack or for a dense screen in place of a lazy DFA.
        let backtracking = match backtrack_known(&p.perl, dense) {
            Some(bt) => Some(bt),
            None => {
                let known_too_big = match cached_matcher(&key, &mut self.lazy_dfas, dense)? {
                    Lookup::Found(built) => return Ok(built),
                    Lookup::TooBig => true,
                    Lookup::Unknown => false,
                };
                match p.translated() {
                    Ok(t) => {
                        let dense_limit = (!known_too_big).then_some(DENSE_LIMIT);
                        let built = compile_matcher(&t, key, dense_limit, span, &mut self.lazy_dfas, &mut self.prefilters, dense)?;
                        if let (Matcher::Lazy(_), Ok(mut bt)) = (&built.matcher, perl::backtrack(&p.perl)) {
                            if let Some(screen) = self.dense_screen(p, screen_span, &built, key, &mut bt, dense)? {
                                return Ok(self.confirmed(screen, bt));
                            }
                        }
                        return Ok(built);
                    }
                    Err(why) if why.needs_backtracking() => None,
                    Err(why) => return Err(DisabledReason::Regex(why)),
                }
            }
        };
        let decided = backtracking.is_some();
        let mut bt = match backtracking {
            Some(bt) => bt,
            None => backtrack_cached(&p.perl, dense)?,
        };
        // A dense screen a cache kept was built under the larger limit.
        let screen_key = pattern_key(b"regex", &bt.relaxed, screen_span, SCREEN_BUILD_LIMIT);
        let known_screen = match cached_matcher(&screen_key, &mut self.lazy_dfas, dense)? {
            Lookup::Found(built @ Built { matcher: Matcher::Dense(_), .. }) => Some(built),
            Lookup::Found(_) => {
                // A form too big to screen, met earlier in this compile: its lazy DFA goes.
                self.lazy_dfas.pop();
                None
            }
            Lookup::TooBig | Lookup::Unknown => None,
        };
        let built = match known_screen {
            Some(built) => built,
            None => build_matcher(&bt.relaxed, screen_span, DENSE_LIMIT, &mut self.lazy_dfas, &mut self.prefilters, dense)?,
        };
        if !decided {
            // A dense screen may keep the counts the relaxed form opened; a cache keeps
            // the choice.
            if let Some(screen) = self.counting_screen(p, screen_span, &built, &mut bt, dense)? {
                return Ok(self.confirmed(screen, bt));
            }
            // A lazy screen may give way to a looser dense one; a cache keeps the choice.
            let given_up = pattern_key(b"regex", &bt.relaxed, screen_span, DENSE_LIMIT);
            if let Some(screen) = self.dense_screen(p, screen_span, &built, given_up, &mut bt, dense)? {
                return Ok(self.confirmed(screen, bt));
            }
        }
        Ok(self.confirmed(built, bt))
    }

    /// For a pattern whose relaxed form opened long counted repeats (`{26,33}` became
    /// `+`) and is a dense screen: the dense screen of the form that keeps the counts,
    /// when it fits [`DENSE_LIMIT`] too (`bt` then takes that form). It lets far fewer
    /// lines through to the program (`__LITECOIN_ID`: a word of 27 to 34 letters, not
    /// any word), for a larger DFA every process shares.
    fn counting_screen(&mut self, p: &Pattern, span: Span, built: &Built, bt: &mut Backtrack, dense: &mut Dense<'_>) -> Result<Option<Built>, DisabledReason> {
        if !matches!(built.matcher, Matcher::Dense(_)) {
            return Ok(None);
        }
        let Ok(forms) = perl::relaxed_forms(&p.perl, &[backtrack::RELAX_NONE]) else { return Ok(None) };
        let Some(counting) = forms.into_iter().next().filter(|form| *form != bt.relaxed) else { return Ok(None) };
        let screen = build_matcher(&counting, span, DENSE_LIMIT, &mut self.lazy_dfas, &mut self.prefilters, dense)?;
        let taken = matches!(screen.matcher, Matcher::Dense(_));
        if matches!(screen.matcher, Matcher::Lazy(_)) {
            self.lazy_dfas.pop();
        }
        // The form not taken stays out of the cache's next image.
        let dropped = if taken { core::mem::replace(&mut bt.relaxed, counting) } else { counting };
        if let Dense::Cached(cache) = dense {
            cache.forget(&pattern_key(b"regex", &dropped, span, DENSE_LIMIT));
            if taken {
                cache.put_backtrack(backtrack_key(&p.perl), bt);
            }
        }
        Ok(taken.then_some(screen))
    }

    /// `screen`'s hits confirmed by `program`, which joins the set's programs.
    fn confirmed(&mut self, screen: Built, bt: Backtrack) -> Built {
        let index = self.programs.len() as u32;
        // The screen may be looser (`{50}` opened to `+`); the program knows the shortest match.
        let mut needs = screen.needs;
        needs.room.len = needs.room.len.max(bt.program.min_len());
        self.programs.push(bt.program);
        self.program_relaxed.push(bt.relaxed);
        Built {
            matcher: Matcher::Backtrack { relaxed: alloc::boxed::Box::new(screen.matcher), program: index },
            required: screen.required,
            needs,
            // The screen's literals are the relaxed form's, not the pattern's.
            exact: None,
        }
    }

    /// Trades a lazy DFA, which costs every child a cache of its own, for a dense DFA
    /// of a relaxed form of the pattern that screens the text, with the exact
    /// backtracking program `bt` to confirm, both shared by all children. The relaxed
    /// forms tried open long counted repeats (`[^>]{0,100}` is `[^>]*`), then every
    /// counted repeat (`(?:\w{1,15}\s){0,10}` is `(?:\w+\s)*`); the one taken becomes
    /// `bt`'s, and the automaton `built` had, under `given_up`, leaves the cache's next
    /// image. None when `built` is not a lazy DFA or no form fits [`SCREEN_DENSE_LIMIT`].
    fn dense_screen(
        &mut self,
        p: &Pattern,
        span: Span,
        built: &Built,
        given_up: cache::Key,
        bt: &mut Backtrack,
        dense: &mut Dense<'_>,
    ) -> Result<Option<Built>, DisabledReason> {
        let index = match &built.matcher {
            Matcher::Lazy(i) => *i,
            Matcher::Backtrack { relaxed, .. } => match **relaxed {
                Matcher::Lazy(i) => i,
                _ => return Ok(None),
            },
            Matcher::Dense(_) | Matcher::Narrow(_) | Matcher::Repeat(_) => return Ok(None),
        };
        if matches!(dense, Dense::Skip) || index + 1 != self.lazy_dfas.len() {
            return Ok(None);
        }
        let Ok(forms) = perl::relaxed_forms(&p.perl, &SCREEN_RELAXATIONS) else { return Ok(None) };
        let filtered = built.required.is_some();
        // Every form is tried; the smallest dense DFA is taken.
        let mut best: Option<(Built, usize, usize)> = None;
        for (i, relaxed) in forms.iter().enumerate() {
            if forms.get(..i).is_some_and(|before| before.contains(relaxed)) {
                continue;
            }
            let screen = build_matcher(relaxed, span, SCREEN_BUILD_LIMIT, &mut self.lazy_dfas, &mut self.prefilters, dense)?;
            let bytes = match &screen.matcher {
                // Forms are ranked by the crate's bytes; one larger than the limit there may
                // still fit it in 16-bit rows, for a pattern behind prefilter literals only
                // (an unfiltered one would join a dense union).
                Matcher::Dense(dfa)
                    if dfa.memory_usage() <= SCREEN_DENSE_LIMIT || (filtered && NarrowDfa::kept_bytes(dfa) <= SCREEN_DENSE_LIMIT) =>
                {
                    dfa.memory_usage()
                }
                Matcher::Dense(_) | Matcher::Narrow(_) => usize::MAX,
                Matcher::Lazy(_) | Matcher::Repeat(_) => {
                    self.lazy_dfas.pop();
                    usize::MAX
                }
                Matcher::Backtrack { .. } => usize::MAX,
            };
            // The automata not taken stay out of the cache's next image.
            let dropped = if best.as_ref().is_none_or(|(_, least, _)| bytes < *least) && bytes != usize::MAX {
                best.replace((screen, bytes, i)).map(|(_, _, old)| old)
            } else {
                Some(i)
            };
            if let (Some(form), Dense::Cached(cache)) = (dropped.and_then(|d| forms.get(d)), &mut *dense) {
                cache.forget(&pattern_key(b"regex", form, span, SCREEN_BUILD_LIMIT));
            }
        }
        let Some((screen, _, i)) = best else { return Ok(None) };
        self.lazy_dfas.pop();
        if let Some(relaxed) = forms.into_iter().nth(i) {
            bt.relaxed = relaxed;
        }
        if let Dense::Cached(cache) = dense {
            cache.forget(&given_up);
            cache.put_backtrack(backtrack_key(&p.perl), bt);
        }
        Ok(Some(screen))
    }

    fn note_matcher(&mut self, rule_type: RuleType, built: &Built) {
        let dense = self.dense;
        let counts = self.summary.get_mut(rule_type);
        let lazy = match &built.matcher {
            Matcher::Backtrack { relaxed, .. } => matches!(**relaxed, Matcher::Lazy(_)),
            m => matches!(m, Matcher::Lazy(_) | Matcher::Repeat(_)),
        };
        if dense && lazy {
            counts.lazy += 1;
        }
        if built.required.is_none() {
            counts.unfiltered += 1;
        }
    }

    /// Orders meta rules so each runs after the metas it reads; cycles are disabled.
    fn compile_metas(&mut self, config: &Config, by_name: &BTreeMap<&str, u32>) {
        let lookup = |name: &str| by_name.get(name).copied();
        let is_meta = |i: u32| matches!(config.rules.get(i as usize).map(|r| &r.kind), Some(RuleKind::Meta(_)));
        let mut pending: Vec<(u32, &MetaExpr)> = config
            .rules
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match &r.kind {
                RuleKind::Meta(e) => Some((i as u32, e)),
                _ => None,
            })
            .collect();
        let mut placed = alloc::vec![false; config.rules.len()];
        let mut deps = Vec::new();
        loop {
            let before = pending.len();
            pending.retain(|&(rule, expr)| {
                deps.clear();
                meta_deps(expr, &mut deps, 0);
                let ready = deps
                    .iter()
                    .filter_map(|d| lookup(d))
                    .all(|d| !is_meta(d) || placed.get(d as usize).copied().unwrap_or(true));
                if !ready {
                    return true;
                }
                if let Some(p) = placed.get_mut(rule as usize) {
                    *p = true;
                }
                let mut steps = Vec::new();
                match meta_steps(expr, &lookup, &mut steps, 0) {
                    Ok(()) => self.metas.push(MetaProgram { rule, steps, at_zero: false }),
                    Err(()) => self.deferred_disable.push((rule, DisabledReason::MetaTooDeep)),
                }
                false
            });
            if pending.is_empty() || pending.len() == before {
                break;
            }
        }
        for (rule, _) in pending {
            self.deferred_disable.push((rule, DisabledReason::MetaCycle));
        }
        for (rule, reason) in core::mem::take(&mut self.deferred_disable) {
            self.disable(rule as usize, reason);
        }
        // A meta that reads a rule which does not run still runs: that rule reads as 0.
        self.metas.retain(|m| self.rules.get(m.rule as usize).is_some_and(|r| r.active));
        self.meta_stack = self.metas.iter().map(|m| m.steps.len()).max().unwrap_or(0) + 1;
        self.index_meta_readers();
    }

    /// Fills `meta_readers` and each meta's value at zero.
    fn index_meta_readers(&mut self) {
        let mut stack = Vec::with_capacity(self.meta_stack);
        for meta in &mut self.metas {
            meta.at_zero = eval_meta(&meta.steps, |_| 0, &mut stack) != 0.0;
        }
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for (index, meta) in self.metas.iter().enumerate() {
            for step in &meta.steps {
                if let MetaStep::Rule(rule) = *step {
                    pairs.push((rule, index as u32));
                }
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        let mut start = alloc::vec![0u32; self.rules.len() + 1];
        for &(rule, _) in &pairs {
            if let Some(s) = start.get_mut(rule as usize + 1) {
                *s += 1;
            }
        }
        for i in 1..start.len() {
            let before = start.get(i - 1).copied().unwrap_or(0);
            if let Some(s) = start.get_mut(i) {
                *s += before;
            }
        }
        self.meta_readers = MetaReaders { start, metas: pairs.into_iter().map(|(_, meta)| meta).collect() };
    }

    fn disable(&mut self, index: usize, reason: DisabledReason) {
        let Some(r) = self.rules.get_mut(index) else { return };
        if self.disabled.iter().any(|d| d.name == r.name) {
            return;
        }
        r.active = false;
        r.scored = false;
        let counts = &mut self.summary.counts[r.rule_type as usize];
        counts.compiled = counts.compiled.saturating_sub(1);
        counts.disabled += 1;
        self.disabled.push(Disabled { name: r.name.clone(), rule_type: r.rule_type, reason, rule: index as u32 });
        self.metas.retain(|m| m.rule as usize != index);
    }

    /// The rule set's `required_score`.
    pub fn required_score(&self) -> Score {
        self.required
    }

    /// Rules that are defined but do not run, with reasons.
    pub fn disabled(&self) -> &[Disabled] {
        &self.disabled
    }

    /// Per-type counts of defined, compiled and disabled rules.
    pub fn summary(&self) -> &RuleSummary {
        &self.summary
    }

    /// Settings of the rule files (report_safe, add_header, …); `rules` is empty here.
    pub fn settings(&self) -> &Config {
        &self.config
    }

    /// Number of rules defined.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// Name of rule `id`.
    pub fn rule_name(&self, id: u32) -> &str {
        self.rules.get(id as usize).map_or("", |r| r.name.as_str())
    }

    /// Looks a rule up by name.
    pub fn rule_id(&self, name: &str) -> Option<u32> {
        self.rules.iter().position(|r| r.name == name).map(|i| i as u32)
    }

    /// The lazy DFAs and the states of the NFAs they run on: each worker's cache for a
    /// lazy DFA holds sets sized to its NFA, whatever the mail.
    pub fn lazy_nfa_states(&self) -> (usize, usize) {
        (self.lazy_dfas.len(), self.lazy_dfas.iter().map(|d| d.get_nfa().states().len()).sum())
    }

    /// Heap bytes of the compiled automata (dense DFAs, lazy DFAs' NFAs, prefilters):
    /// what every child shares with the master after a fork.
    pub fn automata_bytes(&self) -> usize {
        fn matcher(m: &Matcher) -> usize {
            match m {
                Matcher::Dense(d) => d.memory_usage(),
                Matcher::Narrow(d) => d.memory_usage(),
                Matcher::Lazy(_) | Matcher::Repeat(_) => 0,
                Matcher::Backtrack { relaxed, .. } => matcher(relaxed),
            }
        }
        let programs = self.target_programs();
        let mut total: usize = programs
            .iter()
            .map(|p| {
                p.patterns.iter().map(|c| matcher(&c.matcher)).sum::<usize>()
                    + p.unions
                        .iter()
                        .map(|u| match &u.automaton {
                            UnionAutomaton::Dense(dfa) => dfa.memory_usage(),
                            // Its member's own, counted with the patterns.
                            UnionAutomaton::Lazy(_) | UnionAutomaton::Own => 0,
                        })
                        .sum::<usize>()
                    + p.prefilter.as_ref().map_or(0, |a| a.memory_usage())
            })
            .sum();
        total += self
            .headers
            .iter()
            .map(|h| match &h.test {
                HeaderCheckTest::Matches(m) | HeaderCheckTest::NotMatches(m) => matcher(m),
                HeaderCheckTest::Exists => 0,
            })
            .sum::<usize>();
        total += self.mimeheaders.iter().map(|m| matcher(&m.matcher)).sum::<usize>();
        total += self.header_prefilter.as_ref().map_or(0, |a| a.memory_usage());
        total += self.narrow_tables.memory_usage();
        // A lazy DFA holds its NFA behind a shared pointer, which its own figure leaves out.
        total += self.lazy_dfas.iter().map(|d| d.memory_usage() + d.get_nfa().memory_usage()).sum::<usize>();
        total += self.programs.iter().map(|p| p.len() * 12).sum::<usize>();
        total
    }
}

/// The value of a meta program, reading rule counts from `count`.
pub(crate) fn eval_meta(steps: &[MetaStep], count: impl Fn(u32) -> u32, stack: &mut Vec<f64>) -> f64 {
    stack.clear();
    let mut pc = 0usize;
    while let Some(step) = steps.get(pc) {
        pc += 1;
        let value = match *step {
            MetaStep::Rule(id) => f64::from(count(id)),
            MetaStep::Number(n) => n,
            MetaStep::Not => {
                if stack.pop().unwrap_or(0.0) == 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            MetaStep::Neg => -stack.pop().unwrap_or(0.0),
            MetaStep::Op(op) => {
                let b = stack.pop().unwrap_or(0.0);
                let a = stack.pop().unwrap_or(0.0);
                meta_op(op, a, b)
            }
            MetaStep::AndThen(end) | MetaStep::OrElse(end) => {
                let left = stack.last().copied().unwrap_or(0.0);
                let decided = match step {
                    MetaStep::AndThen(_) => left == 0.0,
                    _ => left != 0.0,
                };
                // Jumps only go forward, so every program ends.
                if decided && end as usize > pc {
                    pc = end as usize;
                } else {
                    stack.pop();
                }
                continue;
            }
        };
        if stack.len() < stack.capacity() {
            stack.push(value);
        }
    }
    stack.pop().unwrap_or(0.0)
}

/// One binary meta operator, as Perl evaluates it on numbers.
pub(crate) fn meta_op(op: MetaOp, a: f64, b: f64) -> f64 {
    let truth = |t: bool| if t { 1.0 } else { 0.0 };
    match op {
        MetaOp::And => {
            if a != 0.0 {
                b
            } else {
                a
            }
        }
        MetaOp::Or => {
            if a != 0.0 {
                a
            } else {
                b
            }
        }
        MetaOp::Add => a + b,
        MetaOp::Sub => a - b,
        MetaOp::Mul => a * b,
        MetaOp::Div => {
            if b == 0.0 {
                0.0
            } else {
                a / b
            }
        }
        MetaOp::Gt => truth(a > b),
        MetaOp::Ge => truth(a >= b),
        MetaOp::Lt => truth(a < b),
        MetaOp::Le => truth(a <= b),
        MetaOp::Eq => truth(a == b),
        MetaOp::Ne => truth(a != b),
    }
}

fn meta_deps<'e>(expr: &'e MetaExpr, out: &mut Vec<&'e str>, depth: usize) {
    if depth > META_DEPTH {
        return;
    }
    match expr {
        MetaExpr::Rule(name) => out.push(name),
        MetaExpr::Number(_) => {}
        MetaExpr::Not(e) | MetaExpr::Neg(e) => meta_deps(e, out, depth + 1),
        MetaExpr::Binary(_, a, b) => {
            meta_deps(a, out, depth + 1);
            meta_deps(b, out, depth + 1);
        }
    }
}

/// Postfix steps of `expr`; an unknown rule name reads as 0, as in SpamAssassin.
fn meta_steps(
    expr: &MetaExpr,
    lookup: &dyn Fn(&str) -> Option<u32>,
    out: &mut Vec<MetaStep>,
    depth: usize,
) -> Result<(), ()> {
    if depth > META_DEPTH {
        return Err(());
    }
    match expr {
        MetaExpr::Rule(name) => out.push(match lookup(name) {
            Some(id) => MetaStep::Rule(id),
            None => MetaStep::Number(0.0),
        }),
        MetaExpr::Number(n) => out.push(MetaStep::Number(*n)),
        MetaExpr::Not(e) => {
            meta_steps(e, lookup, out, depth + 1)?;
            out.push(MetaStep::Not);
        }
        MetaExpr::Neg(e) => {
            meta_steps(e, lookup, out, depth + 1)?;
            out.push(MetaStep::Neg);
        }
        MetaExpr::Binary(op @ (MetaOp::And | MetaOp::Or), a, b) => {
            // The right side runs only when the left does not decide (Perl's value:
            // the left side when it decides, else the right side).
            meta_steps(a, lookup, out, depth + 1)?;
            let at = out.len();
            out.push(MetaStep::Number(0.0));
            meta_steps(b, lookup, out, depth + 1)?;
            let end = u32::try_from(out.len()).map_err(|_| ())?;
            if let Some(step) = out.get_mut(at) {
                *step = if *op == MetaOp::And { MetaStep::AndThen(end) } else { MetaStep::OrElse(end) };
            }
        }
        MetaExpr::Binary(op, a, b) => {
            meta_steps(a, lookup, out, depth + 1)?;
            meta_steps(b, lookup, out, depth + 1)?;
            out.push(MetaStep::Op(*op));
        }
    }
    Ok(())
}

impl RuleSet {
    /// The programs of the rule types matched as texts: body, rawbody (by line and by
    /// piece), full and uri.
    pub(crate) fn target_programs(&self) -> [&TargetProgram; 5] {
        [&self.body, &self.rawbody, &self.rawbody_pieces, &self.full, &self.uri]
    }

    /// Whether the relaxed form of a backtracking pattern of a `rule_type` rule gets a dense
    /// DFA (`Ok(true)`) or a lazy one, built as the compile builds it (on body lines, on
    /// URIs alone, on rawbody's pieces, on a whole text); for the stock-rule tests.
    #[doc(hidden)]
    pub fn fits_dense(translated: &str, rule_type: RuleType) -> Result<bool, String> {
        let hir = parse_hir(translated)?;
        let hir = match rule_type {
            RuleType::Body => LineEnds::Newline.local(&hir, 0),
            RuleType::Uri => LineEnds::Bare.local(&hir, 0),
            RuleType::RawBody => end_before_newline(&hir, 0),
            _ => hir,
        };
        let mut prefilters = Prefilters::default();
        let prefilter = prefix_needles(&hir, &mut prefilters).as_deref().and_then(|p| prefilters.fast(p));
        let nfa = build_nfa(&hir).map_err(|e| e.to_string())?;
        Ok(build_dense(&nfa, prefilter, false, DENSE_LIMIT).is_some())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::rules::cache::DfaCache;
    use crate::rules::jobs::{run_here, Job, Spread};
    use crate::rules::cf::parse_str;
    use crate::scan::Scratch;

    /// The value of `expr` evaluated whole, every side of every operator.
    pub(crate) fn meta_value(expr: &MetaExpr, count: &dyn Fn(&str) -> f64) -> f64 {
        match expr {
            MetaExpr::Rule(name) => count(name),
            MetaExpr::Number(n) => *n,
            MetaExpr::Not(e) => f64::from(u8::from(meta_value(e, count) == 0.0)),
            MetaExpr::Neg(e) => -meta_value(e, count),
            MetaExpr::Binary(op, a, b) => meta_op(*op, meta_value(a, count), meta_value(b, count)),
        }
    }

    /// A random meta expression over rules `A`..`C` and the unknown `Z`.
    pub(crate) fn random_meta(rng: &mut crate::rules::Xorshift, depth: usize) -> MetaExpr {
        use alloc::boxed::Box;
        const OPS: [MetaOp; 12] = [
            MetaOp::And, MetaOp::Or, MetaOp::And, MetaOp::Or, MetaOp::Add, MetaOp::Sub,
            MetaOp::Mul, MetaOp::Div, MetaOp::Gt, MetaOp::Ge, MetaOp::Eq, MetaOp::Ne,
        ];
        match (depth, rng.below(6)) {
            (0, _) | (_, 0) => MetaExpr::Rule(String::from(["A", "B", "C", "Z"][rng.below(4)])),
            (_, 1) => MetaExpr::Number(rng.below(3) as f64),
            (_, 2) => MetaExpr::Not(Box::new(random_meta(rng, depth - 1))),
            (_, 3) if rng.below(4) == 0 => MetaExpr::Neg(Box::new(random_meta(rng, depth - 1))),
            _ => MetaExpr::Binary(OPS[rng.below(OPS.len())], Box::new(random_meta(rng, depth - 1)), Box::new(random_meta(rng, depth - 1))),
        }
    }

    #[test]
    fn meta_steps_as_whole_generated_table() {
        // `&&` and `||` skip their right side when the left decides, with Perl's values
        // (the deciding side's, else the right's): every program gives the value of its
        // expression evaluated whole.
        let lookup = |name: &str| ["A", "B", "C"].iter().position(|n| *n == name).map(|i| i as u32);
        let mut rng = crate::rules::Xorshift(0x9e37_79b9);
        let mut skipped = 0usize;
        for case in 0..3_000 {
            let expr = random_meta(&mut rng, 1 + case % 5);
            let counts = [rng.below(3) as u32, rng.below(3) as u32, rng.below(3) as u32];
            let mut steps = Vec::new();
            meta_steps(&expr, &lookup, &mut steps, 0).expect("steps");
            skipped += steps.iter().filter(|s| matches!(s, MetaStep::AndThen(_) | MetaStep::OrElse(_))).count();
            let mut stack = Vec::with_capacity(steps.len() + 1);
            let got = eval_meta(&steps, |id| counts.get(id as usize).copied().unwrap_or(0), &mut stack);
            let count = |name: &str| lookup(name).and_then(|i| counts.get(i as usize)).map_or(0.0, |&c| f64::from(c));
            let want = meta_value(&expr, &count);
            assert!(got == want || (got.is_nan() && want.is_nan()), "{expr:?} {counts:?}: {got} != {want}");
        }
        assert!(skipped > 1_000, "the cases hold `&&` and `||`");
    }

    /// Which form rule `name`'s automaton has: "dense", "narrow", "lazy", ...
    fn form_of(set: &RuleSet, name: &str) -> &'static str {
        fn form(m: &Matcher) -> &'static str {
            match m {
                Matcher::Dense(_) => "dense",
                Matcher::Narrow(_) => "narrow",
                Matcher::Lazy(_) => "lazy",
                Matcher::Repeat(_) => "repeat",
                Matcher::Backtrack { relaxed, .. } => form(relaxed),
            }
        }
        let rule = set.rules.iter().position(|r| r.name == name).expect("rule") as u32;
        let targets = set.target_programs();
        let patterns = targets.iter().flat_map(|t| t.patterns.iter()).map(|p| (p.rule, &p.matcher));
        let headers = set.headers.iter().filter_map(|h| match &h.test {
            HeaderCheckTest::Matches(m) | HeaderCheckTest::NotMatches(m) => Some((h.rule, m)),
            HeaderCheckTest::Exists => None,
        });
        patterns.chain(headers).find(|&(r, _)| r == rule).map_or("none", |(_, m)| form(m))
    }

    #[test]
    fn dense_dfas_become_narrow_table() {
        // (rules, rule, its automaton's form after compiling)
        let cases: &[(&str, &str, &str)] = &[
            ("header H Subject =~ /\\bwin(?:ner)?\\b/i\n", "H", "narrow"),
            ("body B /click\\s+here/i\n", "B", "narrow"),
            ("full F /^From: .*\\d{4}/m\n", "F", "narrow"),
            // A screened rule: its relaxed DFA is the narrow one.
            ("body K /free(?!dom)/\n", "K", "narrow"),
            // With no literal: a union's member, searched again with its own.
            ("body U /[a-z]\\d[a-z]\\d/\nbody V /[a-z]{3}\\d{5}/\n", "U", "narrow"),
        ];
        for &(rules, name, want) in cases {
            let set = RuleSet::compile(&parse_str("t.cf", rules).expect("parse")).expect("compile");
            assert_eq!(form_of(&set, name), want, "{rules}");
        }
    }

    /// On the default rules every dense DFA becomes narrow, those unions of one walk too.
    #[test]
    fn no_dense_dfa_is_left() {
        let set = RuleSet::compile(&parse_str("default.cf", crate::rules::DEFAULT_RULES).expect("parse")).expect("compile");
        let mut own = 0;
        for program in set.target_programs() {
            own += program.unions.iter().filter(|u| matches!(u.automaton, UnionAutomaton::Own)).count();
            for pattern in &program.patterns {
                assert!(pattern.matcher.dense().is_none(), "rule {}", set.rules[pattern.rule as usize].name);
            }
        }
        assert!(own > 0, "the default rules have unions of one");
        for check in &set.headers {
            if let HeaderCheckTest::Matches(m) | HeaderCheckTest::NotMatches(m) = &check.test {
                assert!(m.dense().is_none(), "rule {}", set.rules[check.rule as usize].name);
            }
        }
    }

    #[test]
    fn automata_bytes_count_lazy_nfas_table() {
        // (rules, whether a lazy DFA is among their automata)
        let big = alloc::format!("body BIG /[ab]*a{}c/\n", "[ab]".repeat(16));
        let cases: &[(&str, bool)] = &[(&big, true), ("body SMALL /[ab]*ac/\n", false)];
        for &(rules, lazy) in cases {
            let set = RuleSet::compile(&parse_str("t.cf", rules).expect("parse")).expect("compile");
            assert_eq!(!set.lazy_dfas.is_empty(), lazy, "{rules}");
            let nfas: usize = set.lazy_dfas.iter().map(|d| d.get_nfa().memory_usage()).sum();
            assert_eq!(nfas > 0, lazy, "{rules}");
            // The big pattern's NFA: a dozen states or more for its sixteen classes.
            let (count, states) = set.lazy_nfa_states();
            assert_eq!((count, states >= 16), (usize::from(lazy), lazy), "{rules}");
            // What a fork shares holds the NFAs a lazy DFA runs on.
            assert!(set.automata_bytes() >= nfas + set.body.prefilter.as_ref().map_or(0, |a| a.memory_usage()), "{rules}");
        }
    }

    #[test]
    fn lazy_nfas_are_shrunk_table() {
        // Patterns too big to be dense, whose NFAs shrink (a union's alternates merge).
        let ab = "[ab]".repeat(16);
        let cases = [alloc::format!("(?:x|[yz]w)[ab]*a{ab}c"), alloc::format!(r"[ab]*a{ab}(?:\xc3[\x80-\x85]|\xc4\x80|[aA@])")];
        for pattern in &cases {
            assert!(nfa::shrink(&nfa_compiler().build(pattern).expect("builds")).is_some(), "{pattern}");
            for kind in ["body", "rawbody"] {
                let rules = alloc::format!("{kind} BIG /{pattern}/\n");
                let set = RuleSet::compile(&parse_str("t.cf", &rules).expect("parse")).expect("compile");
                assert!(!set.lazy_dfas.is_empty(), "{rules}");
                for dfa in &set.lazy_dfas {
                    assert!(nfa::shrink(dfa.get_nfa()).is_none(), "{rules}: a lazy DFA's NFA shrinks further");
                }
            }
        }
    }

    /// `check` (for lint) and `compile` agree on what runs and on verdicts; only `compile`
    /// builds dense DFAs.
    #[test]
    fn check_and_compile_agree_table() {
        let rules = "body B /click here/\nbody L /foo(?=bar)/\nbody E eval:check_nothing()\n\
                     header H Subject =~ /viagra/i\nmeta M B && H\nbody BAD /\\Gx/\n";
        let config = parse_str("t.cf", rules).expect("parse");
        let full = RuleSet::compile(&config).expect("compile");
        let lint = RuleSet::check(&config).expect("check");
        for t in RuleType::ALL {
            let (a, b) = (full.summary().get(t), lint.summary().get(t));
            assert_eq!((a.defined, a.compiled, a.disabled, a.unfiltered), (b.defined, b.compiled, b.disabled, b.unfiltered), "{t}");
        }
        let names = |s: &RuleSet| s.disabled().iter().map(|d| d.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&full), names(&lint));
        assert!(full.rules.iter().zip(&lint.rules).all(|(a, b)| a.name == b.name));
        assert!(full.automata_bytes() > lint.automata_bytes() || lint.lazy_dfas.len() > full.lazy_dfas.len());
        let message = b"Subject: cheap viagra\r\n\r\nclick here, foobar\r\n";
        let cases: &[&RuleSet] = &[&full, &lint];
        let mut verdicts = Vec::new();
        for set in cases {
            let mut scratch = Scratch::new(set);
            let v = set.scan(message, &mut scratch);
            verdicts.push(v.hits().map(|h| String::from(h.name)).collect::<Vec<_>>());
        }
        assert_eq!(verdicts[0], ["B", "H", "L", "M"]);
        assert_eq!(verdicts[0], verdicts[1]);
    }

    #[test]
    fn unread_subrules_table() {
        // (rules, the sub-rules nothing reads, every rule that hits the message below)
        let cases: &[(&str, &[&str], &[&str])] = &[
            ("body __A /click/\nbody __B /here/\nmeta M __A\n", &["__B"], &["M", "__A"]),
            ("body __A /click/\nmeta __M __A\nmeta M2 __M && 1\n", &[], &["M2", "__A", "__M"]),
            ("body __A /nomatch/\nmeta M !__A\n", &[], &["M"]),
            // A meta that does not run reads nothing; a sub-rule's own score makes it no reader.
            ("body __A /click/\nmeta M __A\nscore M 0\n", &["__A"], &[]),
            ("body __A /click/\nscore __A 2\n", &["__A"], &[]),
            ("body Z /click/\nscore Z 0\nbody __A /here/\n", &["__A"], &[]),
            // A template that lists sub-rules reads them all.
            ("body __A /click/\nadd_header all Sub _SUBTESTS_\n", &[], &["__A"]),
            ("body __A /click/\nrewrite_header Subject [_SUBTESTSCOLLAPSED_]\n", &[], &["__A"]),
        ];
        let message = b"Subject: x\r\n\r\nclick here\r\n";
        for &(rules, unread, hits) in cases {
            let config = parse_str("t.cf", rules).expect("parse");
            for set in [RuleSet::compile(&config).expect("compile"), RuleSet::check(&config).expect("check")] {
                let got: Vec<&str> = set.rules.iter().filter(|r| r.unread).map(|r| r.name.as_str()).collect();
                assert_eq!(got, unread, "{rules}");
                let counted: usize = RuleType::ALL.iter().map(|&t| set.summary().get(t).unread).sum();
                assert_eq!(counted, unread.len(), "{rules}");
                let mut scratch = Scratch::new(&set);
                let got: Vec<&str> = set.scan(message, &mut scratch).all_hits().collect();
                assert_eq!(got, hits, "{rules}");
            }
        }
    }

    #[test]
    fn rules_that_do_not_run_are_not_built_table() {
        // (rules that run, more that do not, their type, lint's compiled and disabled of
        // that type): a cached compile determinizes no automaton for the latter, while
        // `check` still says whether they compile.
        let cases: &[(&str, &str, RuleType, (usize, usize))] = &[
            ("body A /click/\n", "body Z /here/\nscore Z 0\n", RuleType::Body, (2, 0)),
            ("body A /click/\n", "body __U /there/\n", RuleType::Body, (2, 0)),
            ("body A /click/\n", "body __BAD /\\Gx/\n", RuleType::Body, (1, 1)),
            ("body A /click/\n", "header __H Subject =~ /cheap/\n", RuleType::Header, (1, 0)),
            ("body A /click/\nmeta M __R\n", "rawbody __R /here/\nscore M 0\n", RuleType::RawBody, (1, 0)),
        ];
        let misses = |rules: &str| {
            let mut cache = DfaCache::new();
            RuleSet::compile_cached(&parse_str("t.cf", rules).expect("parse"), &mut cache, &run_here).expect("compile");
            cache.misses()
        };
        for &(runs, idle, idle_type, linted) in cases {
            let both = alloc::format!("{runs}{idle}");
            assert_eq!(misses(&both), misses(runs), "{both}");
            let lint = RuleSet::check(&parse_str("t.cf", &both).expect("parse")).expect("check");
            let counts = lint.summary().get(idle_type);
            assert_eq!((counts.compiled, counts.disabled), linted, "{both}");
        }
    }

    #[test]
    fn evals_and_disabled_order_table() {
        // Eval rules compile after the others (their data is built alongside the
        // prefilters), yet metas read them, and lint lists the disabled in file order.
        let rules = "meta C1 C2\nheader E eval:check_nothing()\nheader T eval:check_for_missing_to_header()\n\
                     body BAD /\\Gx/\nmeta M T && B\nbody B /click here/\nmeta C2 C1\nheader E2 eval:nope()\n";
        let config = parse_str("t.cf", rules).expect("parse");
        let set = RuleSet::compile(&config).expect("compile");
        let disabled: Vec<&str> = set.disabled().iter().map(|d| d.name.as_str()).collect();
        assert_eq!(disabled, ["C1", "E", "BAD", "C2", "E2"]);
        // (message, hits)
        let cases: &[(&[u8], &[&str])] = &[
            (b"Subject: x\r\n\r\nclick here\r\n", &["B", "M", "T"]),
            (b"To: a@b.example\r\nSubject: x\r\n\r\nclick here\r\n", &["B"]),
            (b"Subject: x\r\n\r\nnothing\r\n", &["T"]),
        ];
        let mut scratch = Scratch::new(&set);
        for (message, want) in cases {
            let got: Vec<&str> = set.scan(message, &mut scratch).hits().map(|h| h.name).collect();
            assert_eq!(&got, want, "{}", String::from_utf8_lossy(message));
        }
    }

    #[test]
    fn exact_literals_survive_the_cache_table() {
        // (rule, its body pattern counts its literals without the matcher)
        let cases: &[(&str, bool)] = &[
            ("body LOWER_E /e/\ntflags LOWER_E multiple maxhits=50", true),
            ("body ONCE_E /e/", false),
            ("body WORDS /foo|bar/\ntflags WORDS multiple", true),
            ("body LOOK /\\bfoo/\ntflags LOOK multiple", false),
            ("body PREFIXED /a|ab/\ntflags PREFIXED multiple", false),
        ];
        let rules: String = cases.iter().map(|(r, _)| alloc::format!("{r}\n")).collect();
        let config = parse_str("t.cf", &rules).expect("parse");
        let mut cache = DfaCache::new();
        let cold = RuleSet::compile_cached(&config, &mut cache, &run_here).expect("compile");
        let mut warm_cache = DfaCache::from_bytes(&cache.to_bytes()).expect("reads back");
        let warm = RuleSet::compile_cached(&config, &mut warm_cache, &run_here).expect("compile");
        assert_eq!(warm_cache.misses(), 0);
        let want: Vec<bool> = cases.iter().map(|(_, exact)| *exact).collect();
        for set in [&cold, &warm] {
            let got: Vec<bool> = set.body.patterns.iter().map(|p| p.exact.is_some()).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn counting_screen_table() {
        // A dense screen keeps the counted repeats its relaxed form would open, when its
        // DFA still fits (LTC: a word of 27 to 34 letters, not any word from L); where
        // counting is too big (WIDE) they stay open. The program decides either way.
        let rules = "body LTC /\\b(?<!=)[LM3][a-km-zA-HJ-NP-Z1-9]{26,33}\\b/\n\
                     body WIDE /(?<!x)[ab]*a[ab]{40}c/\n";
        let config = parse_str("t.cf", rules).expect("parse");
        let mut cache = DfaCache::new();
        let set = RuleSet::compile_cached(&config, &mut cache, &run_here).expect("compile");
        // The lazy DFA WIDE's counting form needed is not kept.
        assert!(set.lazy_dfas.is_empty());
        let word = |n: usize| "abcdefghijk".chars().cycle().take(n).collect::<String>();
        // (rule, text, whether its screen lets the text through)
        let screens: Vec<(&str, String, bool)> = alloc::vec![
            ("LTC", String::from("Mike Lee"), false),
            ("LTC", alloc::format!("L{}", word(29)), true),
            ("LTC", alloc::format!("L{}", word(20)), false),
            ("WIDE", String::from("aabc"), true),
        ];
        for (rule, text, through) in &screens {
            let pattern = set.body.patterns.iter().find(|p| set.rules[p.rule as usize].name == *rule).expect("compiled");
            let Matcher::Backtrack { relaxed, .. } = &pattern.matcher else { panic!("{rule}: no program") };
            let input = regex_automata::Input::new(text.as_bytes());
            let found = match &**relaxed {
                Matcher::Narrow(dfa) => set.narrow_tables.place(dfa).and_then(|p| p.find(&input)).is_some(),
                Matcher::Dense(dfa) => regex_automata::dfa::Automaton::try_search_fwd(&**dfa, &input).ok().flatten().is_some(),
                _ => panic!("{rule}: no dense screen"),
            };
            assert_eq!(found, *through, "{rule} on {text:?}");
        }
        let cases: Vec<(String, &[&str])> = alloc::vec![
            (alloc::format!("pay to L{} now", word(29)), &["LTC"]),
            (alloc::format!("pay to =L{} now", word(29)), &[]),
            (alloc::format!("pay to L{} now", word(25)), &[]),
            (alloc::format!("pay to L{} now", word(34)), &[]),
            (String::from("Mike Lee"), &[]),
            (alloc::format!("a{}c", "b".repeat(40)), &["WIDE"]),
            (alloc::format!("xa{}c", "b".repeat(40)), &[]),
            (String::from("aabc"), &[]),
        ];
        for (text, want) in &cases {
            let message = alloc::format!("Subject: t\r\n\r\n{text}\r\n");
            let mut scratch = Scratch::new(&set);
            let got: Vec<&str> = set.scan(message.as_bytes(), &mut scratch).hits().map(|h| h.name).collect();
            assert_eq!(got, *want, "{text}");
        }
        // A warm compile finds the same choice in the cache and nothing the cold one dropped.
        let image = cache.to_bytes();
        let mut warm = DfaCache::from_bytes(&image).expect("reads back");
        warm.prepare(&run_here);
        RuleSet::compile_cached(&config, &mut warm, &run_here).expect("compile");
        assert_eq!(warm.misses(), 0);
        assert_eq!(warm.to_bytes().len(), image.len());
    }

    #[test]
    fn dense_screen_table() {
        // Too big for a dense DFA as written, small with the counted repeats opened: a
        // dense screen and the exact program, no lazy DFA. Long repeats opened (FONT,
        // NEAR), or all of them (YOUR; PCT, whose lookahead needs the program anyway).
        let rules = "rawbody FONT /<font[^>]{0,80}\\bsize\\s*=\\s*7/i\n\
                     body NEAR /\\bmailto:\\S+\\b.{0,30}\\b(?:remove|unsubscribe)\\b/i\n\
                     body YOUR /\\byour?\\s(?:\\w{1,15}\\s){0,10}(?:share|fee)\\b/i\n\
                     body PCT /\\byours?\\s(?!can)(?:\\w{1,15}\\s){0,10}(?:cut|part)\\b/i\n";
        let set = RuleSet::compile(&parse_str("t.cf", rules).expect("parse")).expect("compile");
        let screened = |t: &TargetProgram| t.patterns.iter().all(|p| matches!(&p.matcher, Matcher::Backtrack { relaxed, .. } if matches!(**relaxed, Matcher::Dense(_) | Matcher::Narrow(_))));
        assert!(screened(&set.rawbody) && screened(&set.body) && set.lazy_dfas.is_empty());
        let pad = |n: usize| "a ".repeat(n / 2);
        // (text, rules hit): the bounds hold exactly as Perl reads them.
        let cases: Vec<(String, &[&str])> = alloc::vec![
            (String::from("<font size=7>big</font>"), &["FONT"]),
            (alloc::format!("<font {}size=7>big</font>", pad(70)), &["FONT"]),
            (alloc::format!("<font {}size=7>big</font>", pad(90)), &[]),
            (String::from("write to mailto:x@example.com to be removed, or remove"), &["NEAR"]),
            (alloc::format!("mailto:x@example.com {}remove", pad(28)), &["NEAR"]),
            (alloc::format!("mailto:x@example.com {}remove", pad(40)), &[]),
            (String::from("Your a b c d e f g h i j share"), &["YOUR"]),
            (String::from("your a b c d e f g h i j k share"), &[]),
            (String::from("you abcdefghijklmno fee"), &["YOUR"]),
            (String::from("you abcdefghijklmnop fee"), &[]),
            (String::from("yours is the big cut"), &["PCT"]),
            (String::from("yours can cut"), &[]),
            (String::from("yours a b c d e f g h i j k part"), &[]),
        ];
        // A cache keeps the choice, and no automaton the compile built and did not take:
        // the image a warm compile writes back is the one it read.
        let config = parse_str("t.cf", rules).expect("parse");
        let mut cache = DfaCache::new();
        RuleSet::compile_cached(&config, &mut cache, &run_here).expect("compile");
        let image = cache.to_bytes();
        let mut warm = DfaCache::from_bytes(&image).expect("reads back");
        warm.prepare(&run_here);
        let again = RuleSet::compile_cached(&config, &mut warm, &run_here).expect("compile");
        assert_eq!(warm.misses(), 0);
        assert!(screened(&again.rawbody) && screened(&again.body) && again.lazy_dfas.is_empty());
        assert_eq!(warm.to_bytes().len(), image.len(), "nothing dropped: nothing unused was kept");
        // Two patterns whose one relaxed form is too big to screen: a lazy DFA each, and
        // none left over from the second's look at what the first tried.
        let unrolled = "[ab]".repeat(16);
        let both = alloc::format!("body A /[ab]*a{unrolled}c(?!d)/\nbody B /[ab]*a{unrolled}c(?!e)/\n");
        let lazy = RuleSet::compile_cached(&parse_str("t.cf", &both).expect("parse"), &mut DfaCache::new(), &run_here).expect("compile");
        assert_eq!(lazy.lazy_dfas.len(), 2);
        for (text, want) in cases {
            let message = alloc::format!("Subject: t\r\nContent-Type: text/html\r\n\r\n<html><body>{text}</body></html>\r\n");
            let mut scratch = Scratch::new(&set);
            let hits: Vec<String> = set.scan(message.as_bytes(), &mut scratch).hits().map(|h| String::from(h.name)).collect();
            assert_eq!(hits, want, "{text}");
        }
    }

    #[test]
    fn narrow_screen_table() {
        // A pattern behind prefilter literals whose dense screen is over the limit as the
        // crate keeps it but under it in 16-bit rows: screened, no lazy DFA; the program
        // keeps the lookarounds exact.
        // SpamAssassin's `__LOTTO_AGENT_01`.
        let perl = r"/\b(?:(?:(?:the|y?our)(?:\s\w{1,20})?|contact|accredited|listed)\sclaim(?:s|ing)?(?:\sprocessing)?|fiducia\w+|reimbursement|(?:prize|international|intl|foreign|win+ing)(?:[\s,.]+(?:rem+it+ance|settlement|payment|payout|award|transfer))+|payment|payout|immunity|(?<!memory\s)grants?(?!\smanager))\s?(?:agent|manager|officer|secretary|director|mgr\b)/i";
        let config = parse_str("t.cf", &alloc::format!("body LOTTO {perl}\n")).expect("parse");
        let set = RuleSet::compile(&config).expect("compile");
        let Some(RuleKind::Body(pattern)) = config.rules.first().map(|r| &r.kind) else { panic!("a body rule") };
        let forms = perl::relaxed_forms(&pattern.perl, &SCREEN_RELAXATIONS).expect("relaxes");
        let crate_bytes = forms.iter().filter_map(|f| {
            let nfa = build_nfa(&line_local(&parse_hir(f).ok()?, 0)).ok()?;
            build_dense(&nfa, None, false, SCREEN_BUILD_LIMIT).map(|d| d.memory_usage())
        });
        assert!(crate_bytes.min().is_some_and(|b| b > SCREEN_DENSE_LIMIT), "the case needs a screen over the crate limit");
        let narrow = set.body.patterns.iter().all(|p| matches!(&p.matcher, Matcher::Backtrack { relaxed, .. } if matches!(**relaxed, Matcher::Narrow(_))));
        assert!(narrow && set.lazy_dfas.is_empty());
        // (body line, hits)
        let cases: &[(&str, bool)] = &[
            ("please contact our claims agent today", true),
            ("your lucky claim officer", true),
            ("the winning award director", true),
            ("a fiduciary manager", true),
            ("ask for grants officer", true),
            ("memory grants officer", false),
            ("grants manager", false),
            ("the travel agent", false),
        ];
        for &(line, want) in cases {
            let message = alloc::format!("Subject: t\r\n\r\n{line}\r\n");
            let mut scratch = Scratch::new(&set);
            assert_eq!(set.scan(message.as_bytes(), &mut scratch).hits().next().is_some(), want, "{line}");
        }
    }

    #[test]
    fn full_dense_screen_table() {
        // `full` patterns whose DFA, even anchored at their literals, is too big: a dense
        // screen searched over the message and the exact program, no lazy DFA (each
        // would grow a cache in every child).
        let rules = "full ALT /Content-Type:\\s*multipart\\/alternative[^\\n]{0,100}\\n[\\s\\S]{0,100}Content-Type:\\s*text\\/html/i\n\
                     full EXE /\\bname\\s*=\\s*\"?[^\"\\n]{1,100}\\.(?:exe|scr|pif)\"?\\s*$/mi\n\
                     tflags EXE multiple\n";
        let config = parse_str("t.cf", rules).expect("parse");
        let screened = |set: &RuleSet| {
            let all = set.full.patterns.iter().all(|p| matches!(&p.matcher, Matcher::Backtrack { relaxed, .. } if matches!(**relaxed, Matcher::Dense(_) | Matcher::Narrow(_))));
            all && set.full.patterns.len() == 2 && set.lazy_dfas.is_empty()
        };
        // Cold, and warm from the cache that compile wrote: the same choice, no build.
        let mut cache = DfaCache::new();
        let cold = RuleSet::compile_cached(&config, &mut cache, &run_here).expect("compile");
        let mut warm = DfaCache::from_bytes(&cache.to_bytes()).expect("reads back");
        warm.prepare(&run_here);
        let set = RuleSet::compile_cached(&config, &mut warm, &run_here).expect("compile");
        assert!(screened(&cold) && screened(&set));
        assert_eq!(warm.misses(), 0);
        let gap = |n: usize| "x".repeat(n);
        // (body, hits as (rule, count)): the bounds hold exactly as Perl reads them.
        let alt = |between: &str| alloc::format!("Content-Type: multipart/alternative; b=1\r\n{between}Content-Type: text/html\r\n\r\nhi\r\n");
        let cases: Vec<(String, &[(&str, u32)])> = alloc::vec![
            (alt(""), &[("ALT", 1)]),
            (alt(&alloc::format!("{}\n", gap(97))), &[("ALT", 1)]),
            (alt(&alloc::format!("{}\n", gap(100))), &[]),
            (alloc::format!("Content-Type: multipart/alternative {}\r\nContent-Type: text/html\r\n", gap(120)), &[]),
            (String::from("Content-Type: text/html\r\nContent-Type: multipart/alternative\r\n"), &[]),
            (String::from("name=\"a.exe\"\r\nname = b.scr\r\nname=\"c.pdf\"\r\n"), &[("EXE", 2)]),
            (alloc::format!("name=\"{}.pif\"\r\n", gap(100)), &[("EXE", 1)]),
            (alloc::format!("name=\"{}.pif\"\r\n", gap(101)), &[]),
            (String::from("filename=a.exe\r\n"), &[]),
            // Many places to try, each as long as the gaps allow: the program still decides.
            (alloc::format!("{}name=\"a.exe\"\r\n", alloc::format!("name=\"{}\"\r\n", gap(100)).repeat(3000)), &[("EXE", 1)]),
            (alloc::format!("{}Content-Type: text/html\r\n", "Content-Type: multipart/alternative\r\n".repeat(2000)), &[("ALT", 1)]),
        ];
        for (body, want) in cases {
            let message = alloc::format!("Subject: t\r\nMIME-Version: 1.0\r\n{body}");
            let want: Vec<(String, u32)> = want.iter().map(|&(n, c)| (String::from(n), c)).collect();
            for set in [&cold, &set] {
                let mut scratch = Scratch::new(set);
                let hits: Vec<(String, u32)> = set.scan(message.as_bytes(), &mut scratch).hits().map(|h| (String::from(h.name), h.count)).collect();
                assert_eq!(hits, want, "{body}");
            }
        }
    }

    #[test]
    fn rawbody_patterns_on_pieces_table() {
        // (rawbody pattern, whether it runs on the text's pieces whole, not by line)
        let cases: &[(&str, bool)] = &[
            ("/foo bar/", false),
            ("/a.b/", false),
            ("/^foo/m", false),
            ("/foo$/m", false),
            ("/foo\\s+bar/", true),
            ("/[^>]{3}/", true),
            ("/(?s)a.b/", true),
            ("/a\\nb/", true),
            ("/^foo/", true),
            ("/foo$/", true),
            ("/\\Afoo/", true),
            // Lookaround by what it reads; a backreference may read anything.
            ("/a(?=b)/", false),
            ("/a(?!\\s)/", true),
            ("/a(?=b$)/", true),
            ("/(a)\\1/", true),
        ];
        for &(pattern, pieces) in cases {
            let set = RuleSet::compile(&parse_str("t.cf", &alloc::format!("rawbody R {pattern}\n")).expect("parse")).expect("compile");
            assert_eq!((set.rawbody_pieces.patterns.len(), set.rawbody.patterns.len()), (usize::from(pieces), usize::from(!pieces)), "{pattern}");
        }
    }

    #[test]
    fn cached_unions_table() {
        // Unions come from a warm cache as they were built, with no determinizing; an
        // edited member makes its target's unions build again. Lint builds none.
        let rules = "body A /\\d\\d-\\d\\d/\nbody B /[A-Z]{3}!/\nbody C /\\w\\?\\s/\n\
                     rawbody R /^[ \\t]*\\d{3}\\b/m\nrawbody S /[a-z]{3}\\d{2}/\n";
        let edited = rules.replace("[A-Z]{3}!", "[A-Z]{4}!");
        let message = b"Subject: u\r\n\r\ncall 12-34 now\r\n 123 WOW! ok\r\n";
        let shape = |set: &RuleSet| {
            let of = |t: &TargetProgram| t.unions.iter().map(|u| (u.members.clone(), u.decided, matches!(u.automaton, UnionAutomaton::Dense(_)))).collect::<Vec<_>>();
            let mut scratch = Scratch::new(set);
            let hits: Vec<String> = set.scan(message, &mut scratch).hits().map(|h| String::from(h.name)).collect();
            (of(&set.body), of(&set.rawbody), hits)
        };
        let plain = shape(&RuleSet::compile(&parse_str("t.cf", rules).expect("parse")).expect("compile"));
        assert_eq!(plain.0, [(alloc::vec![1, 0, 2], 0b111, true)]);
        assert_eq!(plain.1, [(alloc::vec![1, 0], 0b11, true)]);
        assert_eq!(plain.2, ["A", "B", "R"]);
        let linted = RuleSet::check(&parse_str("t.cf", rules).expect("parse")).expect("check");
        assert!(linted.body.unions.is_empty() && linted.rawbody.unions.is_empty());
        // (rules, misses: the five patterns, the two unions and the eval tests' programs
        // at first; the edited pattern and its union after)
        let [cold, warm, after_edit] = compiles_through_one_cache([(rules, 7), (rules, 0), (&edited, 2)]);
        assert_eq!((shape(&cold), shape(&warm)), (plain.clone(), plain));
        assert_eq!(shape(&after_edit).2, ["A", "R"]);
    }

    /// Compiles each of `steps`' rules with one cache, written and read back between
    /// compiles, checking how many automata each had to build (the eval tests' own
    /// programs come on top of the first's).
    fn compiles_through_one_cache<const N: usize>(steps: [(&str, usize); N]) -> [RuleSet; N] {
        let evals = {
            let mut empty = DfaCache::new();
            RuleSet::compile_cached(&parse_str("t.cf", "").expect("parse"), &mut empty, &run_here).expect("compile");
            empty.misses()
        };
        let mut cache = DfaCache::new();
        let mut first = true;
        steps.map(|(text, misses)| {
            cache = DfaCache::from_bytes(&cache.to_bytes()).expect("own image reads back");
            let set = RuleSet::compile_cached(&parse_str("t.cf", text).expect("parse"), &mut cache, &run_here).expect("compile");
            assert_eq!(cache.misses(), misses + if first { evals } else { 0 }, "{text}");
            first = false;
            set
        })
    }

    #[test]
    fn cached_lazy_unions_table() {
        // A lazy union's NFA comes from a warm cache as it was built; an edited member
        // builds its union again.
        let span = |class: &str| class.repeat(16);
        let rules = alloc::format!(
            "body L1 /[a-z]*[qx]{}[!?]/\nbody L2 /[0-9]*[57]{}[+=]/\nbody L3 /[A-Z]*[JK]{}[;:]/\n",
            span("[a-z]"),
            span("[0-9]"),
            span("[A-Z]")
        );
        let edited = rules.replace("[57]", "[58]");
        let message = alloc::format!("Subject: u\r\n\r\nsay q{}? and 7{}=\n", "z".repeat(16), "1".repeat(16));
        let shape = |set: &RuleSet| {
            let unions: Vec<(Vec<u32>, u64, usize)> = set
                .body
                .unions
                .iter()
                .filter_map(|u| match u.automaton {
                    UnionAutomaton::Lazy(i) => Some((u.members.clone(), u.decided, set.lazy_dfas.get(i)?.get_nfa().pattern_len())),
                    UnionAutomaton::Dense(_) | UnionAutomaton::Own => None,
                })
                .collect();
            let mut scratch = Scratch::new(set);
            let hits: Vec<String> = set.scan(message.as_bytes(), &mut scratch).hits().map(|h| String::from(h.name)).collect();
            (unions, hits)
        };
        let plain = shape(&RuleSet::compile(&parse_str("t.cf", &rules).expect("parse")).expect("compile"));
        assert_eq!(plain.0.len(), 1, "one lazy union");
        assert_eq!((plain.0[0].1, plain.0[0].2), (0b111, 3));
        assert_eq!(plain.1, ["L1", "L2"]);
        // (rules, misses: each pattern and the dense screen it tried and the union at
        // first; the edited pattern, its screen and its union after)
        let [cold, warm, after_edit] = compiles_through_one_cache([(&rules, 7), (&rules, 0), (&edited, 3)]);
        assert_eq!((shape(&cold), shape(&warm)), (plain.clone(), plain));
        assert_eq!(shape(&after_edit).1, ["L1"]);
    }

    /// A cached compile gives the same verdicts; a second one determinizes nothing, and
    /// an edited rule misses alone.
    #[test]
    fn cached_compile_table() {
        // X has H's Perl text, but a header modifier sift lacks: a warm cache, which knows
        // patterns by their Perl text, must not make it run.
        let rules = "body B /click here/\nbody L /foo(?=bar)/\nrawbody R /^foo/\n\
                     header H Subject =~ /viagra/i\nheader X Subject:host =~ /viagra/i\n\
                     meta M B && H\nbody BIG /(?:[a-z]{1,40}\\s){30}x/\n";
        let edited = rules.replace("click here", "click there");
        let message = b"Subject: cheap viagra\r\n\r\nclick here, foobar\r\n";
        let verdict = |set: &RuleSet| {
            let mut scratch = Scratch::new(set);
            let v = set.scan(message, &mut scratch);
            v.hits().map(|h| String::from(h.name)).collect::<Vec<_>>()
        };
        let config = parse_str("t.cf", rules).expect("parse");
        let plain = verdict(&RuleSet::compile(&config).expect("compile"));
        // However a caller runs the batches of jobs (in order, backwards, or not at all,
        // leaving the work to the compile), the outcome is the same.
        let reversed = |jobs: &mut [Job<'_>], alongside: &mut dyn FnMut()| {
            jobs.iter_mut().rev().for_each(Job::run);
            alongside();
        };
        let skipped = |_: &mut [Job<'_>], alongside: &mut dyn FnMut()| alongside();
        let spreads: [Spread<'_>; 3] = [&run_here, &reversed, &skipped];
        // The eval tests' fixed patterns: compiled and kept by any compile with a cache.
        let mut empty = DfaCache::new();
        RuleSet::compile_cached(&parse_str("t.cf", "").expect("parse"), &mut empty, &run_here).expect("compile");
        let (repeats, evals) = (empty.hits(), empty.misses());
        assert!(evals > 100, "{evals}");
        for (n, spread) in spreads.into_iter().enumerate() {
            let mut cache = DfaCache::new();
            // (rules, image round trip first, hits, misses): five automata and L's program,
            // and the eval programs.
            let cases: &[(&str, bool, usize, usize)] =
                &[(rules, false, repeats, 6 + evals), (rules, true, 6 + evals + repeats, 0), (&edited, true, 5 + evals + repeats, 1)];
            for &(text, reload, hits, misses) in cases {
                if reload {
                    cache = DfaCache::from_bytes(&cache.to_bytes()).expect("own image reads back");
                    cache.prepare(spread);
                }
                let config = parse_str("t.cf", text).expect("parse");
                let set = RuleSet::compile_cached(&config, &mut cache, spread).expect("compile");
                assert_eq!((cache.hits(), cache.misses()), (hits, misses), "{n}: {text}");
                if text == rules {
                    assert_eq!(verdict(&set), plain, "{n}");
                }
            }
        }
        assert_eq!(plain, ["B", "H", "L", "M"]);
    }

    #[test]
    fn match_room_table() {
        // (pattern, shortest match, no match holds a `\n`)
        let rooms: &[(&str, u32, bool)] = &[
            ("abc", 3, true),
            ("a\\nb", 3, false),
            ("(?:,[^,]{1,90}){50}", 100, false),
            ("^[^\\r\\n]{998}", 998, true),
            ("(?m)^x$", 1, true),
            ("(?s)a.b", 3, false),
            ("a\\sb", 3, false),
            ("a|b\\n", 1, false),
            ("a(?:\\n){0}b", 2, true),
            ("x*", 0, true),
        ];
        for &(pattern, len, one_line) in rooms {
            let hir = parse_hir(pattern).expect("parses");
            assert_eq!(MatchRoom::of(&hir), MatchRoom { len, one_line, empty: len == 0 }, "{pattern}");
        }
        // (room, text, whether it rules the text out): lines are measured only past
        // a short line's length.
        let long_line = "y".repeat(80);
        let cases: &[(MatchRoom, &str, bool)] = &[
            (MatchRoom { len: 5, one_line: false, empty: false }, "abcd", true),
            (MatchRoom { len: 5, one_line: false, empty: false }, "abcde", false),
            (MatchRoom { len: 5, one_line: true, empty: false }, "ab\ncd\nef", false),
            (MatchRoom { len: 80, one_line: true, empty: false }, &alloc::format!("a\n{long_line}\nb"), false),
            (MatchRoom { len: 81, one_line: true, empty: false }, &alloc::format!("a\n{long_line}\nb"), true),
            (MatchRoom { len: 81, one_line: false, empty: false }, &alloc::format!("a\n{long_line}\nb"), false),
            (MatchRoom::default(), "", false),
        ];
        for (room, text, out) in cases {
            let longest = text.split('\n').map(str::len).max().unwrap_or(0);
            assert_eq!(room.rules_out(text.as_bytes(), || longest), *out, "{room:?} {text:?}");
        }
    }
}
