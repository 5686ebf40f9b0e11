//! SpamAssassin rules: the `.cf` language ([`cf`]), Perl regex translation
//! ([`perl`]), a bounded backtracking matcher for the Perl constructs with no DFA
//! form ([`backtrack`]), and the compiled, immutable [`RuleSet`] a scan runs.
//!
//! Loading is two steps. [`cf::Parser`] reads rule files into a [`Config`], a
//! plain model of every rule and setting; nothing in it is compiled. [`RuleSet::compile`]
//! turns a `Config` into automata. A rule that cannot be compiled is disabled with
//! its reason; it never stops the rest from loading.

use alloc::string::String;
use alloc::vec::Vec;

use crate::score::Score;

pub mod backtrack;
pub mod cache;
pub mod cf;
pub mod eval;
pub mod jobs;
pub mod perl;

/// The default rule set written by this project, compiled into every binary.
pub const DEFAULT_RULES: &str = include_str!("default.cf");

/// Where a definition came from, for lint output.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Origin {
    /// File name as given to the parser.
    pub file: String,
    /// 1-based line number.
    pub line: u32,
}

/// A regular expression as written in a rule. It is translated when compiled, not
/// when parsed: a start with a warm compile cache finds its automaton by the Perl text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// The Perl source, delimiters and modifiers included, as in the rule file.
    pub perl: String,
    /// Why the rule around it cannot run the pattern (a header modifier sift lacks, a
    /// ReplaceTags expansion too long), whatever the pattern itself.
    pub refused: Option<perl::Unsupported>,
}

impl Pattern {
    /// A pattern as written, not refused.
    pub fn new(perl: String) -> Pattern {
        Pattern { perl, refused: None }
    }

    /// The translation to regex-automata syntax (bytes mode, no Unicode classes), or
    /// why it has none.
    pub fn translated(&self) -> Result<String, perl::Unsupported> {
        if let Some(why) = &self.refused {
            return Err(why.clone());
        }
        if perl::has_capture_template(&self.perl) {
            return Err(perl::Unsupported::Construct(String::from("capture template %{...}")));
        }
        perl::translate(&self.perl)
    }
}

/// Which header(s) a header rule reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderField {
    /// One named header, all its instances joined with `\n` (name compared case-insensitively).
    Named(String),
    /// `ALL`: the whole header block.
    All,
    /// `ToCc`: To and Cc together.
    ToCc,
    /// `MESSAGEID`: Message-Id and its variants.
    MessageId,
}

/// Which form of the header value a rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderForm {
    /// Unfolded and RFC 2047-decoded (the default).
    Decoded,
    /// `:raw`: as in the message.
    Raw,
    /// `:addr`: the first e-mail address.
    Addr,
    /// `:name`: the first display name.
    Name,
    /// `:name:raw`: the first display name, not RFC 2047-decoded.
    NameRaw,
}

/// What a header rule tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderTest {
    /// `=~ /re/`.
    Matches(Pattern),
    /// `!~ /re/`.
    NotMatches(Pattern),
    /// `exists:Name`.
    Exists,
}

/// A header rule's target and test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderRule {
    /// Which header(s).
    pub field: HeaderField,
    /// Which form of the value.
    pub form: HeaderForm,
    /// The test.
    pub test: HeaderTest,
    /// `[if-unset: TEXT]`: the value used when the header is absent.
    pub if_unset: Option<String>,
}

/// A `meta` expression over other rules' results.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaExpr {
    /// Another rule's hit count (0 when it did not hit).
    Rule(String),
    /// A number literal.
    Number(f64),
    /// `!e`
    Not(alloc::boxed::Box<MetaExpr>),
    /// `-e`
    Neg(alloc::boxed::Box<MetaExpr>),
    /// A binary operation.
    Binary(MetaOp, alloc::boxed::Box<MetaExpr>, alloc::boxed::Box<MetaExpr>),
}

/// Binary operators of meta expressions, Perl's precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaOp {
    /// `&&`
    And,
    /// `||`
    Or,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

/// What part of the message a rule reads and how it decides.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleKind {
    /// `header`
    Header(HeaderRule),
    /// `body`: rendered text, one paragraph per line.
    Body(Pattern),
    /// `rawbody`: decoded, unrendered text.
    RawBody(Pattern),
    /// `full`: the whole raw message.
    Full(Pattern),
    /// `uri`: each extracted URI.
    Uri(Pattern),
    /// `mimeheader NAME =~ /re/`: headers of MIME parts.
    MimeHeader {
        /// Header name.
        name: String,
        /// `:raw` given.
        raw: bool,
        /// The pattern.
        pattern: Pattern,
    },
    /// `meta`
    Meta(MetaExpr),
    /// `header|body|rawbody|full|uri NAME eval:function(args)`.
    Eval {
        /// The rule type word it was declared with.
        on: EvalOn,
        /// Function name.
        function: String,
        /// Argument text between the parentheses, unparsed.
        args: String,
    },
}

/// The rule type an `eval:` rule was declared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvalOn {
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
}

/// `tflags` of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TFlags {
    /// Count every match, not just the first.
    pub multiple: bool,
    /// Stop counting at this many matches (implies `multiple`).
    pub maxhits: Option<u32>,
    /// A ham sign: negative score expected.
    pub nice: bool,
    /// Needs the network; off in score set 0.
    pub net: bool,
    /// Needs Bayes learning.
    pub learn: bool,
    /// Hit on the first match only on full (SpamAssassin default); kept for completeness.
    pub noautolearn: bool,
    /// `body` rules only: the Subject is not part of the text matched.
    pub nosubject: bool,
}

/// One rule as defined in the rule files.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleDef {
    /// Rule name.
    pub name: String,
    /// What it tests.
    pub kind: RuleKind,
    /// The four score sets (no net/no bayes, net, bayes, net+bayes); `None` when no `score` line.
    pub score: Option<[Score; 4]>,
    /// `describe` text (English, or `lang en`).
    pub describe: Option<String>,
    /// `tflags`.
    pub tflags: TFlags,
    /// Where the rule was defined.
    pub origin: Origin,
}

/// `add_header` directive: which messages, header name suffix, template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddHeader {
    /// `spam`, `ham` or `all`.
    pub when: AddHeaderWhen,
    /// Name after `X-Spam-`.
    pub name: String,
    /// Template with `_TAG_`s.
    pub template: String,
}

/// When an `add_header` applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddHeaderWhen {
    /// Spam only.
    Spam,
    /// Ham only.
    Ham,
    /// Both.
    All,
}

/// A note about a line of a rule file that was not understood or deliberately ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LintNote {
    /// Where.
    pub origin: Origin,
    /// What and why.
    pub message: String,
}

/// Everything the rule files say: rules in definition order and settings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// Rules by first definition order; a later definition of a name replaces the earlier one in place.
    pub rules: Vec<RuleDef>,
    /// `required_score`, default 5.0.
    pub required_score: Score,
    /// `report_safe` (0, 1 or 2), default 1.
    pub report_safe: u8,
    /// Headers to add, in order, as SpamAssassin's lists end up after every
    /// `add_header`, `remove_header`, `clear_headers` and `report_safe 0`: starts with
    /// `Checker-Version`; filtering by `when` gives the spam and the ham list.
    pub add_headers: Vec<AddHeader>,
    /// `remove_header` directives: (when, name), already applied to `add_headers`.
    pub remove_headers: Vec<(AddHeaderWhen, String)>,
    /// `rewrite_header Subject|From|To TEXT`.
    pub rewrite_headers: Vec<(String, String)>,
    /// Lines not understood or ignored on purpose.
    pub notes: Vec<LintNote>,
    /// Settings the header eval tests read (networks, address lists, freemail, ...).
    pub eval: EvalSettings,
}

impl Config {
    /// Its settings without the rules: what a compiled rule set keeps (the rules are
    /// compiled, and copying thousands of definitions only to drop them costs a start).
    pub fn settings(&self) -> Config {
        Config {
            rules: Vec::new(),
            required_score: self.required_score,
            report_safe: self.report_safe,
            add_headers: self.add_headers.clone(),
            remove_headers: self.remove_headers.clone(),
            rewrite_headers: self.rewrite_headers.clone(),
            notes: self.notes.clone(),
            eval: self.eval.clone(),
        }
    }
}

/// One entry of a network list such as `trusted_networks`: an address range, or an
/// exclusion (`!addr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetRange {
    /// `!` given: addresses in the range are not in the list.
    pub exclude: bool,
    /// The address, IPv4 mapped into IPv6 (`::ffff:a.b.c.d`).
    pub addr: [u8; 16],
    /// Prefix length over the 128 bits (IPv4 `/n` is stored as `96 + n`).
    pub prefix: u8,
}

/// `trusted_networks`, `internal_networks` or `msa_networks`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetList {
    /// Entries in order; the first one that covers an address decides.
    pub entries: Vec<NetRange>,
    /// The directive was used (SpamAssassin's `*_configured`).
    pub configured: bool,
    /// 127.0.0.0/8 and ::1 are implicitly in the list (trusted and internal networks).
    pub loopback: bool,
}

/// A named list of address globs (`welcomelist_from`, `enlist_addrlist (NAME)`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AddrList {
    /// The list name as SpamAssassin 4 stores it (`welcomelist_from`, `blocklist_to`,
    /// `PAYPAL`, ...).
    pub name: String,
    /// Lowercased file-glob patterns (`*` and `?`).
    pub globs: Vec<String>,
}

/// A `welcomelist_from_rcvd`-style entry: an address glob and the relay it must come through.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RcvdEntry {
    /// Lowercased address glob.
    pub glob: String,
    /// rDNS domain (or `[ip]`, `[ip/len]`) of the relay.
    pub relay: String,
}

/// Settings of the header, relay, address and freemail eval tests.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EvalSettings {
    /// `trusted_networks`.
    pub trusted_networks: NetList,
    /// `internal_networks`.
    pub internal_networks: NetList,
    /// `msa_networks`.
    pub msa_networks: NetList,
    /// `originating_ip_headers`, in order, no duplicates (case-insensitive).
    pub originating_ip_headers: Vec<String>,
    /// `envelope_sender_header`.
    pub envelope_sender_header: Option<String>,
    /// `freemail_domains` without wildcards, lowercased.
    pub freemail_domains: Vec<String>,
    /// `freemail_domains` with `*` or `?`, lowercased.
    pub freemail_domain_globs: Vec<String>,
    /// `freemail_welcomelist` / `freemail_whitelist` addresses and domains, lowercased.
    pub freemail_welcomelist: Vec<String>,
    /// `util_rb_tld`, lowercased.
    pub util_rb_tld: Vec<String>,
    /// `util_rb_2tld`, lowercased.
    pub util_rb_2tld: Vec<String>,
    /// `util_rb_3tld`, lowercased.
    pub util_rb_3tld: Vec<String>,
    /// Address lists by name (`welcomelist_from`, `blocklist_from`, `welcomelist_to`,
    /// `blocklist_to`, `more_spam_to`, `all_spam_to`, `welcomelist_allows_relays`,
    /// and `enlist_addrlist` names).
    pub addr_lists: Vec<AddrList>,
    /// `welcomelist_from_rcvd`.
    pub welcomelist_from_rcvd: Vec<RcvdEntry>,
    /// `def_welcomelist_from_rcvd`.
    pub def_welcomelist_from_rcvd: Vec<RcvdEntry>,
    /// `ok_locales` (default `all`).
    pub ok_locales: Option<String>,
}

/// One byte of each look-behind kind a DFA's start state tells apart: none (a text's
/// start), `\n`, `\r`, a word byte, another byte.
pub(crate) const LOOK_BEHIND_SAMPLES: [Option<u8>; 5] = [None, Some(b'\n'), Some(b'\r'), Some(b'a'), Some(b' ')];

/// Which of [`LOOK_BEHIND_SAMPLES`] stands for `byte` before a search.
pub(crate) fn look_behind_kind(byte: Option<u8>) -> usize {
    match byte {
        None => 0,
        Some(b'\n') => 1,
        Some(b'\r') => 2,
        Some(b) if b.is_ascii_alphanumeric() || b == b'_' => 3,
        Some(_) => 4,
    }
}

/// Pseudo-random numbers for tables of generated cases: the same every run.
#[cfg(test)]
pub(crate) struct Xorshift(pub(crate) u32);

#[cfg(test)]
impl Xorshift {
    /// The next number below `n` (not 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0 as usize % n.max(1)
    }
}

pub(crate) mod compile;
pub(crate) mod demand;
pub(crate) mod literal;
pub(crate) mod narrow;
mod nfa;
pub(crate) mod repeat;
pub(crate) mod unions;
pub use compile::{CompileError, Disabled, DisabledReason, RuleSet, RuleSummary, RuleType, TypeCounts};
