//! Parser for the SpamAssassin `.cf` rule language into a [`Config`].
//!
//! Follows `Mail::SpamAssassin::Conf::Parser` of SpamAssassin 4.0.1, line by line:
//! `#` starts a comment unless preceded by `\` (then `\#` becomes `#`), leading and
//! trailing whitespace go, the first word (lowercased, `-` read as `_`) is the
//! directive. `lang xx` lines apply only when `xx` is a prefix of `en_US`.
//!
//! Conditionals (`if`, `ifplugin`, `else`, `endif`) nest per file. `ifplugin X` and
//! `plugin(X)` are true when a `loadplugin`/`tryplugin` line named `X` earlier.
//! `can(M::f)` and `has(M::f)` are true for exactly the functions SpamAssassin
//! 4.0.1 defines: every `Mail::SpamAssassin::Conf::feature_*` of its Conf.pm, its
//! `has_tflags_nosubject`, `has_tflags_nolog`, `perl_min_version_5010000`, the
//! `compat_*` flags set by `enable_compat`, and the `has_*` functions of a bundled
//! plugin once that plugin is loaded. `version` is 4.000001, `perl_version`
//! 5.036000, `local_tests_only` 0. `and`, `or` and `not` are accepted as well.
//!
//! Rules: a later definition of a name replaces the earlier one in place;
//! `score`, `describe` and `tflags` apply at [`Parser::finish`] to whatever rules
//! exist then. `rules_matching(GLOB)` in metas and the `replace_*` templates
//! (ReplaceTags) are expanded at `finish`, as SpamAssassin does after parsing.
//! `mimeheader` and `replace_*` are always available (SpamAssassin needs the
//! MIMEHeader and ReplaceTags plugins loaded).
//!
//! Every other directive of a stock SpamAssassin 4.0.1 install is recognised and
//! ignored with one lint note per directive name, giving the number of lines;
//! anything else gets a lint note per line. Malformed lines never stop parsing.
//! Differences from SpamAssassin: `include` inside a false conditional is not
//! read, a file already read is skipped with a note, and an `if` that cannot be
//! evaluated counts as false.
//!
//! Hostile input is bounded: metas deeper than [`MAX_META_DEPTH`] (parentheses,
//! unary operators, tree depth; long `+`, `&&`, `||` chains are balanced) are
//! dropped with a note, includes nest at most 16 deep, ReplaceTags output is
//! capped at 1 MiB per regex, `rules_matching` at a fixed amount of work.

use alloc::borrow::Cow;
use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::perl::{self, Unsupported};
use super::{
    AddHeader, AddHeaderWhen, AddrList, Config, EvalOn, EvalSettings, HeaderField, HeaderForm, HeaderRule, HeaderTest,
    LintNote, MetaExpr, MetaOp, NetList, NetRange, Origin, Pattern, RcvdEntry, RuleDef, RuleKind, TFlags,
};
use crate::score::Score;

/// The SpamAssassin version we stand in for, as `require_version` spells it.
pub const SA_VERSION: &str = "4.000001";
/// `version` in `if` expressions.
const SA_VERSION_NUMBER: f64 = 4.000001;
/// `perl_version` in `if` expressions: the Perl SpamAssassin 4.0.1 is packaged with.
const PERL_VERSION_NUMBER: f64 = 5.036;
/// The locale `lang` lines are compared with.
const LANG: &str = "en_us";
/// Deepest meta expression (parentheses, unary operators, tree depth) accepted.
pub const MAX_META_DEPTH: usize = 64;
/// Deepest `if` expression nesting accepted.
const MAX_IF_DEPTH: usize = 64;
/// Deepest chain of `include`s followed.
const MAX_INCLUDE_DEPTH: usize = 16;
/// Longest excerpt of a line quoted in a lint note.
const MAX_QUOTE: usize = 120;
/// Longest rule name SpamAssassin accepts.
const MAX_RULE_NAME: usize = 100;
/// Longest `rules_matching` glob.
const MAX_GLOB: usize = 128;

/// `Mail::SpamAssassin::Conf` functions that `can()` finds in SpamAssassin 4.0.1.
const CONF_FUNCTIONS: &[&str] = &[
    "feature_bayes_auto_learn_on_error",
    "feature_bayes_stopwords",
    "feature_blocklist_welcomelist",
    "feature_bug6558_free",
    "feature_capture_rules",
    "feature_compile_regexp",
    "feature_dns_block_rule",
    "feature_dns_local_ports_permit_avoid",
    "feature_dns_query_restriction",
    "feature_edns",
    "feature_geodb",
    "feature_get_host",
    "feature_header_address_parser",
    "feature_header_first_last",
    "feature_header_match_many",
    "feature_local_tests_only",
    "feature_meta_rules_matching",
    "feature_originating_ip_headers",
    "feature_registryboundaries",
    "feature_subjprefix",
    "feature_uri_host_listed",
    "feature_welcomelist_blocklist",
    "feature_yesno_takes_args",
    "has_tflags_nolog",
    "has_tflags_nosubject",
    "perl_min_version_5010000",
];

/// `has_*` functions of the plugins bundled with SpamAssassin 4.0.1: (plugin, function).
const PLUGIN_FUNCTIONS: &[(&str, &str)] = &[
    ("ASN", "has_asn_geodb"),
    ("ASN", "has_asn_lookup_ipv6"),
    ("ASN", "has_check_asn"),
    ("ASN", "has_check_asn_tag"),
    ("AskDNS", "has_tag_header"),
    ("BodyEval", "has_check_body_length"),
    ("BodyEval", "has_plaintext_body_sig_ratio"),
    ("DKIM", "has_arc"),
    ("DNSEval", "has_tflags_domains_only"),
    ("DNSEval", "has_tflags_ips_only"),
    ("DecodeShortURLs", "has_autoclean"),
    ("DecodeShortURLs", "has_clear"),
    ("DecodeShortURLs", "has_get"),
    ("DecodeShortURLs", "has_max_redirections"),
    ("DecodeShortURLs", "has_short_url"),
    ("DecodeShortURLs", "has_short_url_code"),
    ("DecodeShortURLs", "has_short_url_redir"),
    ("DecodeShortURLs", "has_timeout"),
    ("DecodeShortURLs", "has_user_agent"),
    ("HashBL", "has_hashbl_attachments"),
    ("HashBL", "has_hashbl_bodyre"),
    ("HashBL", "has_hashbl_bodyre_num"),
    ("HashBL", "has_hashbl_email_domain"),
    ("HashBL", "has_hashbl_email_domain_alias"),
    ("HashBL", "has_hashbl_email_regex"),
    ("HashBL", "has_hashbl_email_welcomelist"),
    ("HashBL", "has_hashbl_email_whitelist"),
    ("HashBL", "has_hashbl_emails"),
    ("HashBL", "has_hashbl_ignore"),
    ("HashBL", "has_hashbl_sha256"),
    ("HashBL", "has_hashbl_tag"),
    ("HashBL", "has_hashbl_uris"),
    ("MIMEEval", "has_check_abundant_unicode_ratio"),
    ("MIMEEval", "has_check_for_ascii_text_illegal"),
    ("MIMEEval", "has_check_qp_ratio"),
    ("MIMEHeader", "has_all_header"),
    ("MIMEHeader", "has_capture_rules"),
    ("MIMEHeader", "has_tflags_concat"),
    ("MIMEHeader", "has_tflags_multiple"),
    ("MIMEHeader", "has_tflags_range"),
    ("OLEVBMacro", "has_olemacro_mhtml_uri"),
    ("OLEVBMacro", "has_olemacro_redirect_uri"),
    ("OLEVBMacro", "has_olertfobject"),
    ("Pyzor", "has_fork"),
    ("Pyzor", "has_perl"),
    ("Razor2", "has_fork"),
    ("SPF", "has_check_for_spf_errors"),
    ("SPF", "has_check_spf_skipped_noenvfrom"),
    ("URIDNSBL", "has_subtest_for_ranges"),
    ("URIDNSBL", "has_tflags_domains_only"),
    ("URIDNSBL", "has_tflags_notrim"),
    ("URIDNSBL", "has_uridnsbl_a_ns"),
    ("URIDNSBL", "has_uridnsbl_for_a"),
    ("URIDNSBL", "has_uridnsbl_skip_mailto"),
    ("URIDetail", "has_host_key"),
];

/// Header modifiers SpamAssassin 4.0.1 accepts.
const HEADER_MODIFIERS: &[&str] = &["raw", "addr", "name", "host", "domain", "ip", "revip", "first", "last"];

/// Every directive SpamAssassin 4.0.1 and its bundled plugins register (sorted):
/// those this parser does not act on are ignored with a note per directive.
#[rustfmt::skip]
const SA_DIRECTIVES: &[&str] = &[
    "add_header", "adsp_override", "all_spam_to", "allow_user_rules", "always_trust_envelope_sender", "askdns",
    "asn_lookup", "asn_lookup_ipv6", "asn_prefer_geodb", "asn_prefix", "asn_use_dns", "asn_use_geodb",
    "authres_ignored_authserv", "authres_networks", "authres_trusted_authserv", "auto_welcomelist_db_modules",
    "auto_welcomelist_distinguish_signed", "auto_welcomelist_factor", "auto_welcomelist_factory",
    "auto_welcomelist_file_mode", "auto_welcomelist_ipv4_mask_len", "auto_welcomelist_ipv6_mask_len",
    "auto_welcomelist_path", "auto_whitelist_db_modules", "auto_whitelist_distinguish_signed",
    "auto_whitelist_factor", "auto_whitelist_factory", "auto_whitelist_file_mode", "auto_whitelist_ipv4_mask_len",
    "auto_whitelist_ipv6_mask_len", "auto_whitelist_path", "bayes_auto_expire", "bayes_auto_learn",
    "bayes_auto_learn_on_error", "bayes_auto_learn_threshold_nonspam", "bayes_auto_learn_threshold_spam",
    "bayes_expiry_max_db_size", "bayes_file_mode", "bayes_ignore_from", "bayes_ignore_header", "bayes_ignore_to",
    "bayes_journal_max_size", "bayes_learn_during_report", "bayes_learn_to_journal", "bayes_max_token_length",
    "bayes_min_ham_num", "bayes_min_spam_num", "bayes_path", "bayes_seen_ttl", "bayes_sql_dsn",
    "bayes_sql_override_username", "bayes_sql_password", "bayes_sql_username", "bayes_sql_username_authorized",
    "bayes_stopword_languages", "bayes_store_module", "bayes_token_sources", "bayes_token_ttl",
    "bayes_use_hapaxes", "blacklist_from", "blacklist_subject", "blacklist_to", "blacklist_uri_host",
    "blocklist_from", "blocklist_subject", "blocklist_to", "blocklist_uri_host", "body", "body_part_scan_size",
    "clear_asn_lookups", "clear_dns_query_restriction", "clear_dns_query_restrictions", "clear_dns_servers",
    "clear_headers", "clear_internal_networks", "clear_msa_networks", "clear_originating_ip_headers",
    "clear_report_template", "clear_trusted_networks", "clear_unsafe_report_template",
    "clear_uridnsbl_skip_domain", "clear_url_shortener", "clear_util_rb", "country_db_path", "country_db_type",
    "dcc_body_max", "dcc_dccifd_path", "dcc_fuz1_max", "dcc_fuz2_max", "dcc_home", "dcc_learn_score",
    "dcc_options", "dcc_path", "dcc_rep_percent", "dcc_timeout", "dccifd_options", "def_welcomelist_auth",
    "def_welcomelist_from_dkim", "def_welcomelist_from_rcvd", "def_welcomelist_from_spf", "def_whitelist_auth",
    "def_whitelist_from_dkim", "def_whitelist_from_rcvd", "def_whitelist_from_spf", "delist_uri_host", "describe",
    "dkim_minimum_key_bits", "dkim_timeout", "dmarc_save_reports", "dns_available", "dns_block_rule",
    "dns_block_time", "dns_local_ports_avoid", "dns_local_ports_none", "dns_local_ports_permit", "dns_options",
    "dns_query_restriction", "dns_server", "dns_test_interval", "do_not_use_mail_spf", "do_not_use_mail_spf_query",
    "enable_compat", "enlist_addrlist", "enlist_uri_host", "envelope_sender_header", "extracttext_maxparts",
    "extracttext_timeout", "extracttext_use", "file", "fns_add_addrlist", "fns_check", "fns_extrachars",
    "fns_ignore_dkim", "fns_ignore_headers", "fns_remove_addrlist", "fold_headers", "freemail_add_describe_email",
    "freemail_domains", "freemail_import_def_welcomelist_auth", "freemail_import_def_whitelist_auth",
    "freemail_import_welcomelist_auth", "freemail_import_whitelist_auth", "freemail_max_body_emails",
    "freemail_max_body_freemails", "freemail_skip_bulk_envfrom", "freemail_skip_when_over_max",
    "freemail_welcomelist", "freemail_whitelist", "full", "geodb_module", "geodb_options", "geodb_search_path",
    "hashbl_email_domain_alias", "hashbl_email_regex", "hashbl_email_welcomelist", "hashbl_email_whitelist",
    "hashbl_ignore", "header", "ignore_always_matching_regexps", "ignore_received_spf_header",
    "inactive_languages", "internal_networks", "loadplugin", "lock_method", "max_short_url_redirections",
    "max_short_urls", "mbox_format_from_regex", "meta", "mimeheader", "more_spam_to", "msa_networks",
    "normalize_charset", "ok_languages", "ok_locales", "olemacro_download_marker", "olemacro_extended_scan",
    "olemacro_exts", "olemacro_macro_exts", "olemacro_max_file", "olemacro_num_mime", "olemacro_num_zip",
    "olemacro_prefer_contentdisposition", "olemacro_skip_ctypes", "olemacro_skip_exts", "olemacro_zip_depth",
    "olemacro_zips", "originating_ip_headers", "parse_dkim_uris", "phishing_openphish_feed",
    "phishing_phishstats_feed", "phishing_phishstats_minscore", "phishing_phishtank_feed", "phishing_uri_noparam",
    "priority", "pyzor_count_min", "pyzor_fork", "pyzor_max", "pyzor_options", "pyzor_path", "pyzor_perl",
    "pyzor_server_file", "pyzor_timeout", "pyzor_welcomelist_factor", "pyzor_welcomelist_min",
    "pyzor_whitelist_factor", "pyzor_whitelist_min", "rawbody", "rawbody_part_scan_size", "razor_config",
    "razor_fork", "razor_timeout", "rbl_headers", "rbl_timeout", "redirector_pattern", "remove_header",
    "replace_end", "replace_inter", "replace_post", "replace_pre", "replace_rules", "replace_start", "replace_tag",
    "report", "report_charset", "report_contact", "report_hostname", "report_safe", "report_safe_copy_headers",
    "report_wrap_width", "require_version", "required_hits", "required_score", "resource_limit_cpu",
    "resource_limit_mem", "reuse", "rewrite_header", "run_reuse_tests_only", "score", "shortcircuit",
    "shortcircuit_ham_score", "shortcircuit_max_spam_score", "shortcircuit_min_ham_score",
    "shortcircuit_spam_score", "skip_rbl_checks", "skip_uribl_checks", "spamcop_from_address",
    "spamcop_max_report_size", "spamcop_relayhost", "spamcop_to_address", "spf_timeout", "subjprefix", "test",
    "textcat_acceptable_score", "textcat_max_languages", "textcat_max_ngrams", "textcat_optimal_ngrams", "tflags",
    "time_limit", "trigger_config", "trigger_ratio", "trigger_target", "trusted_networks", "tryplugin",
    "txrep_autolearn", "txrep_dilution_factor", "txrep_expiry_days", "txrep_factor", "txrep_factory",
    "txrep_ipv4_mask_len", "txrep_ipv6_mask_len", "txrep_learn_bonus", "txrep_learn_penalty",
    "txrep_report_details", "txrep_spf", "txrep_track_messages", "txrep_user2global_ratio", "txrep_weight_domain",
    "txrep_weight_email", "txrep_weight_email_ip", "txrep_weight_helo", "txrep_weight_ip", "txrep_welcomelist_out",
    "txrep_whitelist_out", "unblacklist_from", "unblocklist_from", "unsafe_report", "unwelcomelist_auth",
    "unwelcomelist_from", "unwelcomelist_from_dkim", "unwelcomelist_from_rcvd", "unwelcomelist_from_spf",
    "unwhitelist_auth", "unwhitelist_from", "unwhitelist_from_dkim", "unwhitelist_from_rcvd",
    "unwhitelist_from_spf", "uri", "uri_block_cc", "uri_block_cidr", "uri_block_cont", "uri_block_exclude",
    "uri_block_isp", "uri_country_db_isp_path", "uri_country_db_path", "uri_detail", "uridnsbl",
    "uridnsbl_max_domains", "uridnsbl_skip_domain", "uridnsbl_skip_mailto", "uridnsbl_timeout", "uridnssub",
    "urifullnsrhsbl", "urifullnsrhssub", "urinsrhsbl", "urinsrhssub", "urirhsbl", "urirhssub", "url_shortener",
    "url_shortener_cache_autoclean", "url_shortener_cache_dsn", "url_shortener_cache_password",
    "url_shortener_cache_ttl", "url_shortener_cache_type", "url_shortener_cache_username", "url_shortener_get",
    "url_shortener_loginfo", "url_shortener_timeout", "url_shortener_user_agent", "use_auto_welcomelist",
    "use_auto_whitelist", "use_bayes", "use_bayes_rules", "use_dcc", "use_dcc_rep", "use_learner",
    "use_newest_received_spf_header", "use_pyzor", "use_razor2", "use_txrep", "user_awl_dsn",
    "user_awl_sql_override_username", "user_awl_sql_password", "user_awl_sql_table", "user_awl_sql_username",
    "user_scores_dsn", "user_scores_fallback_to_global", "user_scores_ldap_password", "user_scores_ldap_username",
    "user_scores_sql_custom_query", "user_scores_sql_password", "user_scores_sql_username", "util_rb_2tld",
    "util_rb_3tld", "util_rb_tld", "version_tag", "welcomelist_allows_relays", "welcomelist_auth",
    "welcomelist_bounce_relays", "welcomelist_from", "welcomelist_from_dkim", "welcomelist_from_rcvd",
    "welcomelist_from_spf", "welcomelist_subject", "welcomelist_to", "welcomelist_uri_host",
    "whitelist_allows_relays", "whitelist_auth", "whitelist_bounce_relays", "whitelist_from",
    "whitelist_from_dkim", "whitelist_from_rcvd", "whitelist_from_spf", "whitelist_subject", "whitelist_to",
    "whitelist_uri_host",
];

/// Directive prefixes plugins handle themselves (`bayes_stopword_en`, `hashbl_acl_x`).
const SA_DIRECTIVE_PREFIXES: &[&str] = &["bayes_stopword_", "hashbl_acl_"];

/// Reads files named by `include` directives (paths as written, relative to the
/// including file's directory: the implementor resolves them).
pub trait Includer {
    /// Contents of `path`, as seen from the file `from`.
    fn read(&mut self, from: &str, path: &str) -> Result<Vec<u8>, String>;
}

/// An [`Includer`] for rule text with no file system: every include fails.
pub struct NoIncludes;

impl Includer for NoIncludes {
    fn read(&mut self, _from: &str, path: &str) -> Result<Vec<u8>, String> {
        Err(alloc::format!("include {path}: no file system"))
    }
}

/// Why a rule file could not be read at all (everything else becomes a lint note).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// An included file could not be read.
    Include {
        /// The including file.
        file: String,
        /// The line of the include directive.
        line: u32,
        /// The reason.
        reason: String,
    },
}

impl core::fmt::Display for ParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ParseError::Include { file, line, reason } => write!(f, "{file}:{line}: {reason}"),
        }
    }
}

/// ReplaceTags settings. `replace_start` and `replace_end` are taken as literal
/// text (SpamAssassin reads them as regex fragments; the stock rules keep `<` `>`).
struct ReplaceTags {
    start: String,
    end: String,
    tag: BTreeMap<String, String>,
    pre: BTreeMap<String, String>,
    inter: BTreeMap<String, String>,
    post: BTreeMap<String, String>,
    rules: BTreeSet<String>,
}

/// A directive ignored on purpose: where first seen and how many lines.
struct Ignored {
    first: Origin,
    lines: u32,
}

/// An open `if`/`ifplugin` of the current file.
struct IfFrame {
    kind: &'static str,
    /// Whether lines were being skipped before this conditional.
    saved_skip: bool,
    line: u32,
}

/// Conditional state of one file being read.
#[derive(Default)]
struct FileState {
    ifs: Vec<IfFrame>,
    skip: bool,
}

/// Accumulates rule files, in the order SpamAssassin reads them, into one [`Config`].
pub struct Parser {
    config: Config,
    /// Rule name to index in `config.rules`.
    index: BTreeMap<String, usize>,
    scores: BTreeMap<String, [Score; 4]>,
    describes: BTreeMap<String, String>,
    tflags: BTreeMap<String, TFlags>,
    plugins: BTreeSet<String>,
    compat: BTreeSet<String>,
    files_read: BTreeSet<String>,
    replace: ReplaceTags,
    ignored: BTreeMap<String, Ignored>,
}

impl Default for Parser {
    fn default() -> Self {
        Self::new()
    }
}

/// Perl's `\s`.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C)
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// SpamAssassin's rule name syntax, `[_a-zA-Z][_a-zA-Z0-9]{0,127}`.
fn is_rule_name(name: &str) -> bool {
    let b = name.as_bytes();
    b.first().is_some_and(|&c| c.is_ascii_alphabetic() || c == b'_') && b.len() <= 128 && b.iter().all(|&c| is_word(c))
}

/// Splits at the first run of whitespace: (first word, rest).
fn split_word(text: &str) -> (&str, &str) {
    match text.find(|c: char| c.is_ascii() && is_space(c as u8)) {
        Some(i) => {
            let (word, rest) = text.split_at(i);
            (word, rest.trim_start_matches(|c: char| c.is_ascii() && is_space(c as u8)))
        }
        None => (text, ""),
    }
}

fn trim(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_ascii() && is_space(c as u8))
}

/// A line excerpt for a note: at most [`MAX_QUOTE`] characters.
fn quote(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTE) {
        Some((i, _)) => format!("{}...", text.get(..i).unwrap_or("")),
        None => text.to_string(),
    }
}

/// Text of a line: valid UTF-8 kept, each other byte written `\xHH` (what a raw
/// byte means in a regex).
fn bytes_to_text(bytes: &[u8]) -> Cow<'_, str> {
    match core::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => Cow::Owned(escape_invalid(bytes)),
    }
}

/// [`bytes_to_text`] of a line that is not valid UTF-8.
fn escape_invalid(mut bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    loop {
        match core::str::from_utf8(bytes) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let (good, bad) = bytes.split_at(e.valid_up_to());
                out.push_str(core::str::from_utf8(good).unwrap_or(""));
                let n = e.error_len().unwrap_or(bad.len()).max(1);
                for b in bad.iter().take(n) {
                    // After an unpaired backslash the byte was escaped: `\` + byte
                    // means the byte, as `\xHH` does.
                    let backslashes = out.bytes().rev().take_while(|&c| c == b'\\').count();
                    let escape = if backslashes % 2 == 1 { "" } else { "\\" };
                    out.push_str(&format!("{escape}x{b:02X}"));
                }
                bytes = bad.get(n..).unwrap_or(&[]);
            }
        }
    }
}

/// Removes a comment (`#` not after `\`), unescapes `\#`, trims whitespace; most
/// lines come back borrowed.
fn clean_line(raw: &[u8]) -> Cow<'_, [u8]> {
    let mut end = raw.len();
    for (i, &b) in raw.iter().enumerate() {
        if b == b'#' && (i == 0 || raw.get(i - 1) != Some(&b'\\')) {
            end = i;
            break;
        }
    }
    let kept = raw.get(..end).unwrap_or(&[]);
    // `\#` and `#` are not white space: trimming first trims the same bytes.
    let start = kept.iter().position(|&b| !is_space(b)).unwrap_or(kept.len());
    let stop = kept.iter().rposition(|&b| !is_space(b)).map_or(start, |p| p + 1);
    let kept = kept.get(start..stop).unwrap_or(&[]);
    if !kept.windows(2).any(|w| w == b"\\#") {
        return Cow::Borrowed(kept);
    }
    let mut line = Vec::with_capacity(kept.len());
    let mut i = 0;
    while let Some(&b) = kept.get(i) {
        if b == b'\\' && kept.get(i + 1) == Some(&b'#') {
            line.push(b'#');
            i += 2;
        } else {
            line.push(b);
            i += 1;
        }
    }
    Cow::Owned(line)
}

/// `path` as seen from `from`: relative paths start in `from`'s directory;
/// `.` and `dir/..` segments are removed.
fn join_path(from: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        match from.rfind('/') {
            Some(i) => format!("{}{}", from.get(..=i).unwrap_or(""), path),
            None => path.to_string(),
        }
    };
    let absolute = joined.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in joined.split('/') {
        match seg {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            _ => parts.push(seg),
        }
    }
    let mut out = String::from(if absolute { "/" } else { "" });
    out.push_str(&parts.join("/"));
    out
}

/// Perl's truth of a number.
fn truth(v: f64) -> f64 {
    if v != 0.0 {
        1.0
    } else {
        0.0
    }
}

/// A glob of `rules_matching()`: `*` any run, `?` one character.
fn glob_matches(glob: &[u8], name: &[u8]) -> bool {
    let (mut g, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match glob.get(g) {
            Some(b'*') => {
                star = Some((g, n));
                g += 1;
            }
            Some(&c) if c == b'?' || Some(&c) == name.get(n) => {
                g += 1;
                n += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    g = sg + 1;
                    n = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    glob.get(g..).unwrap_or(&[]).iter().all(|&c| c == b'*')
}

impl Parser {
    /// A parser with SpamAssassin's defaults (required_score 5.0, report_safe 1,
    /// the `Checker-Version` header).
    pub fn new() -> Self {
        let config = Config {
            required_score: Score::points(5),
            report_safe: 1,
            add_headers: alloc::vec![AddHeader {
                when: AddHeaderWhen::All,
                name: String::from("Checker-Version"),
                template: String::from("SpamAssassin _VERSION_ (_SUBVERSION_) on _HOSTNAME_"),
            }],
            eval: EvalSettings {
                trusted_networks: NetList { loopback: true, ..NetList::default() },
                internal_networks: NetList { loopback: true, ..NetList::default() },
                ..EvalSettings::default()
            },
            ..Config::default()
        };
        Parser {
            config,
            index: BTreeMap::new(),
            scores: BTreeMap::new(),
            describes: BTreeMap::new(),
            tflags: BTreeMap::new(),
            plugins: BTreeSet::new(),
            compat: BTreeSet::new(),
            files_read: BTreeSet::new(),
            replace: ReplaceTags {
                start: String::from("<"),
                end: String::from(">"),
                tag: BTreeMap::new(),
                pre: BTreeMap::new(),
                inter: BTreeMap::new(),
                post: BTreeMap::new(),
                rules: BTreeSet::new(),
            },
            ignored: BTreeMap::new(),
        }
    }

    /// Parses one file's text; `name` is used in lint notes and to resolve includes.
    pub fn parse_file(&mut self, name: &str, text: &[u8], includer: &mut dyn Includer) -> Result<(), ParseError> {
        if !self.files_read.insert(name.to_string()) {
            self.note(&Origin { file: name.to_string(), line: 0 }, String::from("file already read: skipped"));
            return Ok(());
        }
        self.parse_text(name, text, includer, 0)
    }

    /// Whether a `loadplugin` or `tryplugin` line named `plugin` so far.
    pub fn plugin_loaded(&self, plugin: &str) -> bool {
        self.plugins.contains(plugin)
    }

    /// The accumulated configuration: scores, descriptions, tflags, `rules_matching`
    /// and ReplaceTags templates applied, and the summary lint notes added.
    pub fn finish(mut self) -> Config {
        self.expand_rules_matching();
        self.apply_replace_tags();
        for rule in &mut self.config.rules {
            rule.score = self.scores.get(&rule.name).copied();
            rule.describe = self.describes.get(&rule.name).cloned();
            rule.tflags = self.tflags.get(&rule.name).copied().unwrap_or_default();
        }
        // Lists of thousands of domains: repeats dropped once here, not searched per entry.
        let ev = &mut self.config.eval;
        for list in [
            &mut ev.freemail_domains,
            &mut ev.freemail_domain_globs,
            &mut ev.util_rb_tld,
            &mut ev.util_rb_2tld,
            &mut ev.util_rb_3tld,
        ] {
            dedup_keep_first(list);
        }
        let ignored = core::mem::take(&mut self.ignored);
        for (directive, Ignored { first, lines }) in ignored {
            let why = match directive.as_str() {
                "priority" => "rule order does not change results",
                "test" => "regression test strings",
                "reuse" => "mass-check only",
                "file" => "internal to SpamAssassin",
                _ => "not used by sift",
            };
            let plural = if lines == 1 { "" } else { "s" };
            self.note(&first, format!("{directive}: {lines} line{plural} ignored ({why})"));
        }
        self.config
    }

    fn note(&mut self, origin: &Origin, message: String) {
        self.config.notes.push(LintNote { origin: origin.clone(), message });
    }

    fn ignore(&mut self, directive: &str, origin: &Origin) {
        match self.ignored.get_mut(directive) {
            Some(entry) => entry.lines = entry.lines.saturating_add(1),
            None => {
                self.ignored.insert(directive.to_string(), Ignored { first: origin.clone(), lines: 1 });
            }
        }
    }

    fn parse_text(
        &mut self,
        name: &str,
        text: &[u8],
        includer: &mut dyn Includer,
        depth: usize,
    ) -> Result<(), ParseError> {
        let mut state = FileState::default();
        let mut line_no: u32 = 0;
        for raw in text.split(|&b| b == b'\n') {
            line_no = line_no.saturating_add(1);
            let cleaned = clean_line(raw);
            if cleaned.is_empty() {
                continue;
            }
            let line = bytes_to_text(&cleaned);
            let origin = Origin { file: name.to_string(), line: line_no };
            let mut directive: &str = &line;
            if let Some(rest) = directive.strip_prefix("lang") {
                let (lang, after) = split_word(trim(rest));
                if rest.starts_with(|c: char| c.is_ascii() && is_space(c as u8)) && !after.is_empty() {
                    if !LANG.starts_with(lang.to_ascii_lowercase().as_str()) {
                        continue;
                    }
                    directive = after;
                }
            }
            let (word, value) = split_word(directive);
            let key: Cow<'_, str> = if word.bytes().any(|b| b.is_ascii_uppercase() || b == b'-') {
                Cow::Owned(word.to_ascii_lowercase().replace('-', "_"))
            } else {
                Cow::Borrowed(word)
            };
            match &*key {
                "endif" => {
                    if !value.is_empty() {
                        self.note(&origin, String::from("endif must be standalone"));
                    } else if let Some(frame) = state.ifs.pop() {
                        state.skip = frame.saved_skip;
                    } else {
                        self.note(&origin, String::from("endif without if"));
                    }
                    continue;
                }
                "else" => {
                    if !value.is_empty() {
                        self.note(&origin, String::from("else must be standalone"));
                    } else if state.ifs.is_empty() {
                        self.note(&origin, String::from("else without if"));
                    } else if state.ifs.iter().any(|f| f.saved_skip) {
                        state.skip = true;
                    } else {
                        state.skip = !state.skip;
                    }
                    continue;
                }
                "if" | "ifplugin" => {
                    let kind = if key == "if" { "if" } else { "ifplugin" };
                    if value.is_empty() {
                        self.note(&origin, format!("{kind} without a condition"));
                        continue;
                    }
                    let truth = if kind == "ifplugin" {
                        self.plugin_condition(value)
                    } else {
                        match self.eval_condition(value) {
                            Ok(v) => v,
                            Err(why) => {
                                self.note(&origin, format!("if {}: {why}; taken as false", quote(value)));
                                false
                            }
                        }
                    };
                    state.ifs.push(IfFrame { kind, saved_skip: state.skip, line: line_no });
                    if !truth {
                        state.skip = true;
                    }
                    continue;
                }
                _ => {}
            }
            if state.skip {
                continue;
            }
            if key == "include" {
                self.include(name, value, &origin, includer, depth)?;
                continue;
            }
            if key == "require_version" {
                if value.is_empty() {
                    self.note(&origin, String::from("require_version without a version"));
                } else if value != SA_VERSION && value != "@@VERSION@@" {
                    self.note(&origin, format!("file requires version {}: rest of the block skipped", quote(value)));
                    state.skip = true;
                }
                continue;
            }
            self.directive(&key, value, &line, &origin);
        }
        for frame in state.ifs {
            let origin = Origin { file: name.to_string(), line: frame.line };
            self.note(&origin, format!("unclosed {}", frame.kind));
        }
        Ok(())
    }

    fn include(
        &mut self,
        from: &str,
        path: &str,
        origin: &Origin,
        includer: &mut dyn Includer,
        depth: usize,
    ) -> Result<(), ParseError> {
        if path.is_empty() {
            self.note(origin, String::from("include without a file"));
            return Ok(());
        }
        if depth >= MAX_INCLUDE_DEPTH {
            self.note(origin, format!("include {}: nested too deep", quote(path)));
            return Ok(());
        }
        let target = join_path(from, path);
        if self.files_read.contains(&target) {
            self.note(origin, format!("include {}: file already read", quote(path)));
            return Ok(());
        }
        let text = includer.read(from, path).map_err(|reason| ParseError::Include {
            file: from.to_string(),
            line: origin.line,
            reason,
        })?;
        self.files_read.insert(target.clone());
        self.parse_text(&target, &text, includer, depth + 1)
    }

    /// One directive line outside conditionals; `line` is the whole line for notes.
    fn directive(&mut self, key: &str, value: &str, line: &str, origin: &Origin) {
        let result = match key {
            "header" => self.header_rule(value, origin),
            "body" => self.pattern_rule(EvalOn::Body, value, origin),
            "rawbody" => self.pattern_rule(EvalOn::RawBody, value, origin),
            "full" => self.pattern_rule(EvalOn::Full, value, origin),
            "uri" => self.pattern_rule(EvalOn::Uri, value, origin),
            "mimeheader" => self.mimeheader_rule(value, origin),
            "meta" => self.meta_rule(value, origin),
            "score" => self.score(value),
            "describe" => self.key_value(value).map(|(k, v)| {
                self.describes.insert(k, v);
            }),
            "tflags" => self.key_value(value).map(|(k, v)| {
                self.tflags.insert(k, parse_tflags(&v));
            }),
            "replace_tag" | "replace_pre" | "replace_inter" | "replace_post" => self.key_value(value).map(|(k, v)| {
                let map = match key {
                    "replace_tag" => &mut self.replace.tag,
                    "replace_pre" => &mut self.replace.pre,
                    "replace_inter" => &mut self.replace.inter,
                    _ => &mut self.replace.post,
                };
                map.insert(k, v);
            }),
            "replace_rules" => {
                if value.is_empty() {
                    Err(String::from("missing value"))
                } else {
                    self.replace.rules.extend(value.split_ascii_whitespace().map(String::from));
                    Ok(())
                }
            }
            "replace_start" | "replace_end" => {
                if value.is_empty() {
                    Err(String::from("missing value"))
                } else {
                    let slot = if key == "replace_start" { &mut self.replace.start } else { &mut self.replace.end };
                    *slot = value.to_string();
                    Ok(())
                }
            }
            "required_score" | "required_hits" => self.required_score(value),
            "report_safe" => self.report_safe(value),
            "add_header" => self.add_header(value),
            "remove_header" => self.remove_header(value),
            "rewrite_header" => self.rewrite_header(value),
            "clear_headers" => self.clear_headers(value),
            "loadplugin" | "tryplugin" => self.load_plugin(value),
            "enable_compat" => {
                if value.is_empty() || value.len() > 128 || !value.bytes().all(is_word) {
                    Err(String::from("invalid value"))
                } else {
                    self.compat.insert(value.to_string());
                    Ok(())
                }
            }
            _ => match self.eval_setting(key, value) {
                Some(result) => result,
                None => {
                    if SA_DIRECTIVES.binary_search(&key).is_ok()
                        || SA_DIRECTIVE_PREFIXES.iter().any(|p| key.starts_with(p))
                    {
                        self.ignore(key, origin);
                    } else {
                        self.note(origin, format!("unknown directive: {}", quote(line)));
                    }
                    Ok(())
                }
            },
        };
        if let Err(why) = result {
            self.note(origin, format!("{key}: {why}: {}", quote(line)));
        }
    }

    /// The settings the header eval tests read; `None` when `key` is not one of them.
    fn eval_setting(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        let words = || value.split_ascii_whitespace();
        let need_value = || {
            if value.is_empty() {
                Err(String::from("missing value"))
            } else {
                Ok(())
            }
        };
        let no_value = || {
            if value.is_empty() {
                Ok(())
            } else {
                Err(String::from("invalid value"))
            }
        };
        let ev = &mut self.config.eval;
        let result = match key {
            "trusted_networks" | "internal_networks" | "msa_networks" => need_value().and_then(|()| {
                let list = match key {
                    "trusted_networks" => &mut ev.trusted_networks,
                    "internal_networks" => &mut ev.internal_networks,
                    _ => &mut ev.msa_networks,
                };
                let mut bad = Vec::new();
                for net in words() {
                    match NetRange::parse(net) {
                        Some(range) => list.entries.push(range),
                        None => bad.push(net),
                    }
                }
                list.configured = true;
                if bad.is_empty() {
                    Ok(())
                } else {
                    Err(format!("invalid address {}", bad.join(" ")))
                }
            }),
            "clear_trusted_networks" | "clear_internal_networks" | "clear_msa_networks" => no_value().map(|()| {
                let list = match key {
                    "clear_trusted_networks" => &mut ev.trusted_networks,
                    "clear_internal_networks" => &mut ev.internal_networks,
                    _ => &mut ev.msa_networks,
                };
                list.entries.clear();
                list.configured = false;
            }),
            "originating_ip_headers" => need_value().map(|()| {
                for name in words() {
                    if !ev.originating_ip_headers.iter().any(|h| h.eq_ignore_ascii_case(name)) {
                        ev.originating_ip_headers.push(name.to_string());
                    }
                }
            }),
            "clear_originating_ip_headers" => no_value().map(|()| ev.originating_ip_headers.clear()),
            "envelope_sender_header" => need_value().map(|()| ev.envelope_sender_header = Some(value.to_string())),
            "freemail_domains" => {
                let mut bad = Vec::new();
                for d in words() {
                    if !d.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'*' | b'?' | b'-')) {
                        bad.push(d);
                        continue;
                    }
                    let d = d.to_ascii_lowercase();
                    let list =
                        if d.contains(['*', '?']) { &mut ev.freemail_domain_globs } else { &mut ev.freemail_domains };
                    list.push(d);
                }
                if bad.is_empty() {
                    Ok(())
                } else {
                    Err(format!("invalid freemail_domains {}", bad.join(" ")))
                }
            }
            "freemail_welcomelist" | "freemail_whitelist" => {
                let mut bad = Vec::new();
                for a in words() {
                    let a = a.to_ascii_lowercase();
                    let ok =
                        a.as_bytes().windows(3).any(|w| is_word(w[0]) && matches!(w[1], b'.' | b'@') && is_word(w[2]));
                    if ok {
                        if !ev.freemail_welcomelist.contains(&a) {
                            ev.freemail_welcomelist.push(a);
                        }
                    } else {
                        bad.push(a);
                    }
                }
                if bad.is_empty() {
                    Ok(())
                } else {
                    Err(format!("invalid freemail_welcomelist {}", bad.join(" ")))
                }
            }
            "util_rb_tld" | "util_rb_2tld" | "util_rb_3tld" => need_value().map(|()| {
                let list = match key {
                    "util_rb_tld" => &mut ev.util_rb_tld,
                    "util_rb_2tld" => &mut ev.util_rb_2tld,
                    _ => &mut ev.util_rb_3tld,
                };
                list.extend(words().map(str::to_ascii_lowercase));
            }),
            "clear_util_rb" => no_value().map(|()| {
                ev.util_rb_tld.clear();
                ev.util_rb_2tld.clear();
                ev.util_rb_3tld.clear();
            }),
            "ok_locales" => need_value().map(|()| ev.ok_locales = Some(value.to_string())),
            "welcomelist_from"
            | "whitelist_from"
            | "blocklist_from"
            | "blacklist_from"
            | "welcomelist_to"
            | "whitelist_to"
            | "blocklist_to"
            | "blacklist_to"
            | "more_spam_to"
            | "all_spam_to"
            | "welcomelist_allows_relays"
            | "whitelist_allows_relays" => need_value().map(|()| {
                let name = addr_list_name(key);
                add_to_addr_list(&mut ev.addr_lists, name, words());
            }),
            "unwelcomelist_from" | "unwhitelist_from" | "unblocklist_from" | "unblacklist_from" => {
                need_value().map(|()| {
                    let name = if key.contains("block") || key.contains("black") {
                        "blocklist_from"
                    } else {
                        "welcomelist_from"
                    };
                    if let Some(list) = ev.addr_lists.iter_mut().find(|l| l.name == name) {
                        for a in words() {
                            let a = a.to_ascii_lowercase();
                            list.globs.retain(|g| *g != a);
                        }
                    }
                })
            }
            "enlist_addrlist" => {
                let parsed = value.strip_prefix('(').and_then(|v| v.split_once(')')).and_then(|(name, rest)| {
                    let rest = rest.trim_start();
                    (!name.is_empty() && !rest.is_empty() && rest.len() < value.len() - name.len() - 1)
                        .then_some((name, rest))
                });
                match parsed {
                    Some((name, rest)) => {
                        add_to_addr_list(&mut ev.addr_lists, name, rest.split_ascii_whitespace());
                        Ok(())
                    }
                    None => Err(String::from("missing value")),
                }
            }
            "welcomelist_from_rcvd"
            | "whitelist_from_rcvd"
            | "def_welcomelist_from_rcvd"
            | "def_whitelist_from_rcvd" => {
                let parts: Vec<&str> = words().collect();
                match parts.as_slice() {
                    [] => Err(String::from("missing value")),
                    [addr, relay] => {
                        let list = if key.starts_with("def_") {
                            &mut ev.def_welcomelist_from_rcvd
                        } else {
                            &mut ev.welcomelist_from_rcvd
                        };
                        list.push(RcvdEntry { glob: addr.to_ascii_lowercase(), relay: relay.to_ascii_lowercase() });
                        Ok(())
                    }
                    _ => Err(String::from("invalid value")),
                }
            }
            "unwelcomelist_from_rcvd" | "unwhitelist_from_rcvd" => need_value().map(|()| {
                for a in words() {
                    let a = a.to_ascii_lowercase();
                    ev.welcomelist_from_rcvd.retain(|e| e.glob != a);
                    ev.def_welcomelist_from_rcvd.retain(|e| e.glob != a);
                }
            }),
            _ => return None,
        };
        Some(result)
    }

    /// `NAME value` of describe, tflags, replace_*: both required.
    fn key_value(&self, value: &str) -> Result<(String, String), String> {
        let (k, v) = split_word(value);
        if k.is_empty() || v.is_empty() {
            return Err(String::from("missing value"));
        }
        Ok((k.to_string(), v.to_string()))
    }

    /// Adds or replaces a rule, keeping the position of its first definition.
    fn define(&mut self, name: &str, kind: RuleKind, origin: &Origin) -> Result<(), String> {
        if !is_rule_name(name) {
            return Err(format!("invalid rule name {}", quote(name)));
        }
        if name.len() > MAX_RULE_NAME {
            return Err(String::from("rule name longer than 100 characters"));
        }
        if let Some(rule) = self.index.get(name).and_then(|&i| self.config.rules.get_mut(i)) {
            rule.kind = kind;
            rule.origin = origin.clone();
            return Ok(());
        }
        self.index.insert(name.to_string(), self.config.rules.len());
        self.config.rules.push(RuleDef {
            name: name.to_string(),
            kind,
            score: None,
            describe: None,
            tflags: TFlags::default(),
            origin: origin.clone(),
        });
        Ok(())
    }

    /// `body|rawbody|full|uri NAME /re/` or `NAME eval:fn(args)`.
    fn pattern_rule(&mut self, on: EvalOn, value: &str, origin: &Origin) -> Result<(), String> {
        let (name, rest) = split_word(value);
        if rest.is_empty() {
            return Err(String::from("missing value"));
        }
        if on != EvalOn::Uri {
            if let Some(call) = rest.strip_prefix("eval:") {
                let kind = eval_kind(on, call)?;
                return self.define(name, kind, origin);
            }
        }
        let pattern = make_pattern(rest)?;
        let kind = match on {
            EvalOn::Body => RuleKind::Body(pattern),
            EvalOn::RawBody => RuleKind::RawBody(pattern),
            EvalOn::Full => RuleKind::Full(pattern),
            EvalOn::Uri | EvalOn::Header => RuleKind::Uri(pattern),
        };
        self.define(name, kind, origin)
    }

    /// `header NAME Field[:mods] =~ /re/ [if-unset: X]`, `exists:Field`, `eval:`.
    fn header_rule(&mut self, value: &str, origin: &Origin) -> Result<(), String> {
        let (name, rest) = split_word(value);
        if rest.is_empty() {
            return Err(String::from("missing value"));
        }
        if let Some(call) = rest.strip_prefix("eval:").or_else(|| rest.strip_prefix("rbleval:")) {
            let kind = eval_kind(EvalOn::Header, call)?;
            return self.define(name, kind, origin);
        }
        if let Some(field) = rest.strip_prefix("exists:") {
            let field = field.strip_suffix(':').unwrap_or(field);
            if field.is_empty() || !field.bytes().all(|b| is_word(b) || b == b'.' || b == b'-') {
                return Err(format!("invalid header name {}", quote(field)));
            }
            let rule = HeaderRule {
                field: header_field(field),
                form: HeaderForm::Decoded,
                test: HeaderTest::Exists,
                if_unset: None,
            };
            return self.define(name, RuleKind::Header(rule), origin);
        }
        let b = rest.as_bytes();
        let field_end = b.iter().take_while(|&&c| is_word(c) || c == b'.' || c == b'-').count();
        if field_end == 0 {
            return Err(String::from("invalid header test"));
        }
        let field = rest.get(..field_end).unwrap_or("");
        let mut i = field_end;
        let mut modifiers: Vec<&str> = Vec::new();
        if b.get(i) == Some(&b':') {
            let mut j = i;
            while modifiers.len() < 2 && b.get(j) == Some(&b':') && b.get(j + 1).is_some_and(u8::is_ascii_lowercase) {
                let start = j + 1;
                j = start;
                while b.get(j).is_some_and(u8::is_ascii_lowercase) {
                    j += 1;
                }
                modifiers.push(rest.get(start..j).unwrap_or(""));
            }
            i = if modifiers.is_empty() { i + 1 } else { j };
        }
        let (negated, pattern_text) = match_test(rest, i, "header")?;
        if let Some(bad) = modifiers.iter().find(|m| !HEADER_MODIFIERS.contains(m)) {
            return Err(format!("invalid header modifier :{bad}"));
        }
        let (pattern_text, if_unset) = split_if_unset(pattern_text);
        let mut pattern = make_pattern(pattern_text)?;
        let has = |m: &str| modifiers.contains(&m);
        let form = if has("addr") {
            HeaderForm::Addr
        } else if has("name") && has("raw") {
            HeaderForm::NameRaw
        } else if has("name") {
            HeaderForm::Name
        } else if has("raw") {
            HeaderForm::Raw
        } else {
            HeaderForm::Decoded
        };
        if let Some(other) = modifiers.iter().find(|m| !matches!(**m, "raw" | "addr" | "name")) {
            pattern.refused = Some(Unsupported::Construct(format!("header modifier :{other}")));
        }
        let field = header_field(field);
        let test = if negated { HeaderTest::NotMatches(pattern) } else { HeaderTest::Matches(pattern) };
        let rule = HeaderRule { field, form, test, if_unset: if_unset.map(String::from) };
        self.define(name, RuleKind::Header(rule), origin)
    }

    /// `mimeheader NAME Field[:raw] =~ /re/`.
    fn mimeheader_rule(&mut self, value: &str, origin: &Origin) -> Result<(), String> {
        let (name, rest) = split_word(value);
        if !is_rule_name(name) {
            return Err(String::from("invalid rule name"));
        }
        if rest.is_empty() {
            return Err(String::from("missing value"));
        }
        let b = rest.as_bytes();
        let field_end = b.iter().take_while(|&&c| c != b':' && !is_space(c)).count();
        if field_end == 0 {
            return Err(String::from("invalid mimeheader test"));
        }
        let field = rest.get(..field_end).unwrap_or("");
        let mut i = field_end;
        let mut raw = false;
        if b.get(i) == Some(&b':') {
            i += 1;
            if rest.get(i..).is_some_and(|r| r.starts_with("raw")) {
                raw = true;
                i += 3;
            }
        }
        let (negated, pattern_text) = match_test(rest, i, "mimeheader")?;
        let (pattern_text, if_unset) = split_if_unset(pattern_text);
        let mut pattern = make_pattern(pattern_text)?;
        if negated {
            pattern.refused = Some(Unsupported::Construct(String::from("negated mimeheader")));
        } else if if_unset.is_some() {
            pattern.refused = Some(Unsupported::Construct(String::from("mimeheader if-unset")));
        }
        let kind = RuleKind::MimeHeader { name: field.to_string(), raw, pattern };
        self.define(name, kind, origin)
    }

    /// `meta NAME expression`.
    fn meta_rule(&mut self, value: &str, origin: &Origin) -> Result<(), String> {
        let (name, rest) = split_word(value);
        if rest.is_empty() {
            return Err(String::from("missing value"));
        }
        let expr = parse_meta(rest)?;
        self.define(name, RuleKind::Meta(expr), origin)
    }

    /// `score NAME s` or `score NAME s0 s1 s2 s3`; `(n)` scores are relative.
    fn score(&mut self, value: &str) -> Result<(), String> {
        let mut words = value.split_ascii_whitespace();
        let rule = words.next().ok_or_else(|| String::from("missing value"))?;
        let texts: Vec<&str> = words.collect();
        if texts.len() != 1 && texts.len() != 4 {
            return Err(String::from("needs a rule name and 1 or 4 scores"));
        }
        let mut relative = false;
        let mut values = [Score::ZERO; 4];
        for (slot, text) in values.iter_mut().zip(texts.iter().cycle()) {
            let inner = match text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
                Some(inner) => {
                    relative = true;
                    inner
                }
                None => text,
            };
            let digits = inner.strip_prefix('-').unwrap_or(inner);
            let (whole, frac) = digits.split_once('.').unwrap_or((digits, "1"));
            let plain = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
            if !plain(whole) || !plain(frac) {
                return Err(format!("non-numeric score {}", quote(text)));
            }
            *slot = Score::parse(inner).map_err(|e| format!("{e}: {}", quote(text)))?;
        }
        if relative {
            let Some(old) = self.scores.get(rule).copied() else {
                return Err(String::from("relative score without a previous score"));
            };
            for (v, o) in values.iter_mut().zip(old.iter()) {
                *v = *o + *v;
            }
        }
        self.scores.insert(rule.to_string(), values);
        Ok(())
    }

    fn required_score(&mut self, value: &str) -> Result<(), String> {
        let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
        let whole = digits.split_once('.').map_or(digits, |(w, _)| w);
        let frac = digits.split_once('.').map_or("", |(_, f)| f);
        if whole.is_empty() || !whole.bytes().all(|c| c.is_ascii_digit()) || !frac.bytes().all(|c| c.is_ascii_digit()) {
            return Err(String::from("invalid value"));
        }
        self.config.required_score = Score::parse(value).map_err(|e| e.to_string())?;
        Ok(())
    }

    fn report_safe(&mut self, value: &str) -> Result<(), String> {
        let level = match value {
            "0" => 0,
            "1" => 1,
            "2" => 2,
            _ => return Err(String::from("invalid value")),
        };
        self.config.report_safe = level;
        let has_report = self
            .config
            .add_headers
            .iter()
            .any(|h| h.when != AddHeaderWhen::Ham && h.name.eq_ignore_ascii_case("report"));
        if level == 0 && !has_report {
            self.config.add_headers.push(AddHeader {
                when: AddHeaderWhen::Spam,
                name: String::from("Report"),
                template: String::from("_REPORT_"),
            });
        }
        Ok(())
    }

    /// `add_header spam|ham|all NAME TEMPLATE`.
    fn add_header(&mut self, value: &str) -> Result<(), String> {
        let (when, rest) = split_word(value);
        let when = parse_when(when)?;
        let (name, template) = split_word(rest);
        if !is_header_name(name) || template.is_empty() {
            return Err(String::from("invalid value"));
        }
        let template = template.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(template);
        remove_headers_named(&mut self.config.add_headers, when, name);
        self.config.add_headers.push(AddHeader { when, name: name.to_string(), template: unescape_template(template) });
        Ok(())
    }

    /// `remove_header spam|ham|all NAME`.
    fn remove_header(&mut self, value: &str) -> Result<(), String> {
        let (when, name) = split_word(value);
        let when = parse_when(when)?;
        if !is_header_name(name) {
            return Err(String::from("invalid value"));
        }
        if name == "Checker-Version" {
            return Ok(());
        }
        remove_headers_named(&mut self.config.add_headers, when, name);
        self.config.remove_headers.push((when, name.to_string()));
        Ok(())
    }

    /// `rewrite_header Subject|From|To TEXT`; no text removes the rewrite.
    fn rewrite_header(&mut self, value: &str) -> Result<(), String> {
        let (header, text) = split_word(value);
        if header.is_empty() {
            return Err(String::from("missing value"));
        }
        let header = match header.to_ascii_lowercase().as_str() {
            "subject" => "Subject",
            "from" => "From",
            "to" => "To",
            _ => return Err(String::from("only Subject, From and To can be rewritten")),
        };
        self.config.rewrite_headers.retain(|(h, _)| h != header);
        if !text.is_empty() {
            let text = if header == "Subject" { text.to_string() } else { text.replace('(', "[").replace(')', "]") };
            self.config.rewrite_headers.push((header.to_string(), text));
        }
        Ok(())
    }

    /// `clear_headers`: only the first `Checker-Version` of the ham list stays.
    fn clear_headers(&mut self, value: &str) -> Result<(), String> {
        if !value.is_empty() {
            return Err(String::from("takes no value"));
        }
        let kept = self
            .config
            .add_headers
            .iter()
            .find(|h| h.when != AddHeaderWhen::Spam && h.name.eq_ignore_ascii_case("checker-version"))
            .cloned();
        self.config.add_headers.clear();
        if let Some(mut header) = kept {
            header.when = AddHeaderWhen::All;
            self.config.add_headers.push(header);
        }
        Ok(())
    }

    /// `loadplugin Module [path.pm]`.
    fn load_plugin(&mut self, value: &str) -> Result<(), String> {
        let (module, path) = split_word(value);
        let segments: Vec<&str> = module.split("::").collect();
        let module_ok = segments.len() <= 11 && segments.iter().all(|s| !s.is_empty() && s.bytes().all(is_word));
        let path_ok = path.is_empty()
            || (!path.contains(|c: char| c.is_ascii() && is_space(c as u8))
                && path.to_ascii_lowercase().ends_with(".pm")
                && path.len() > 3);
        if module.is_empty() || !module_ok || !path_ok {
            return Err(String::from("invalid value"));
        }
        let module = match module {
            "Mail::SpamAssassin::Plugin::Dmarc" => "Mail::SpamAssassin::Plugin::DMARC",
            "Mail::SpamAssassin::Plugin::WhiteListSubject" => "Mail::SpamAssassin::Plugin::WelcomeListSubject",
            m => m,
        };
        self.plugins.insert(module.to_string());
        Ok(())
    }

    /// `ifplugin NAME`.
    fn plugin_condition(&self, name: &str) -> bool {
        let name = match name {
            "Mail::SpamAssassin::Plugin::Dmarc" => "Mail::SpamAssassin::Plugin::DMARC",
            "Mail::SpamAssassin::Plugin::WhiteListSubject" => "Mail::SpamAssassin::Plugin::WelcomeListSubject",
            n => n,
        };
        name == "Mail::SpamAssassin::Plugin::RaciallyCharged" || self.plugins.contains(name)
    }

    /// `can(Module::function)` / `has(...)`.
    fn function_exists(&self, path: &str) -> bool {
        let Some((module, function)) = path.rsplit_once("::") else {
            return false;
        };
        if module == "Mail::SpamAssassin::Conf" {
            return CONF_FUNCTIONS.contains(&function)
                || function.strip_prefix("compat_").is_some_and(|flag| self.compat.contains(flag));
        }
        let Some(plugin) = module.strip_prefix("Mail::SpamAssassin::Plugin::") else {
            return false;
        };
        self.plugins.contains(module) && PLUGIN_FUNCTIONS.contains(&(plugin, function))
    }

    /// Evaluates an `if` expression.
    fn eval_condition(&self, expr: &str) -> Result<bool, String> {
        let tokens = tokenize(expr, Grammar::Condition)?;
        let mut eval = CondEval { parser: self, tokens, pos: 0, depth: 0 };
        let v = eval.or()?;
        if eval.pos != eval.tokens.len() {
            return Err(String::from("unexpected token"));
        }
        Ok(v != 0.0)
    }

    /// Replaces `rules_matching(GLOB)` in metas by the sum of the matching rules.
    fn expand_rules_matching(&mut self) {
        let names: Vec<String> = self.index.keys().cloned().collect();
        let mut globs = GlobExpansion { names: &names, budget: GLOB_BUDGET, refused: Vec::new() };
        for rule in &mut self.config.rules {
            if let RuleKind::Meta(expr) = &mut rule.kind {
                expand_globs(expr, &mut globs, &rule.name, 0);
                for glob in globs.refused.drain(..) {
                    self.config.notes.push(LintNote {
                        origin: rule.origin.clone(),
                        message: format!("rules_matching({glob}): too many rules or too much work, taken as 0"),
                    });
                }
            }
        }
    }

    /// SpamAssassin's ReplaceTags: template tags in the regexes of `replace_rules`.
    fn apply_replace_tags(&mut self) {
        let rules: Vec<String> = self.replace.rules.iter().cloned().collect();
        let mut budget = REPLACED_BUDGET;
        for name in rules {
            let Some(rule) = self.index.get(&name).and_then(|&i| self.config.rules.get_mut(i)) else {
                continue;
            };
            let pattern = match &mut rule.kind {
                RuleKind::Body(p) | RuleKind::RawBody(p) | RuleKind::Full(p) | RuleKind::Uri(p) => p,
                RuleKind::Header(HeaderRule { test: HeaderTest::Matches(p) | HeaderTest::NotMatches(p), .. }) => p,
                _ => continue,
            };
            let Ok((body, flags)) = perl::split_literal(&pattern.perl) else {
                continue;
            };
            // SpamAssassin edits the compiled regex as a string: `(?aa)`, then the
            // modifiers, then the body. The prefix matters (a leading tag is then
            // never preceded by an empty piece); it is dropped again afterwards.
            let original = if flags.is_empty() { format!("(?aa){body}") } else { format!("(?aa)(?{flags}){body}") };
            let Some(replaced) = replace_tags(&original, &self.replace, budget.min(MAX_REPLACED_LEN)) else {
                pattern.refused = Some(Unsupported::Construct(String::from("ReplaceTags expansion too long")));
                continue;
            };
            budget = budget.saturating_sub(replaced.len());
            if replaced != original {
                let replaced = replaced.strip_prefix("(?aa)").unwrap_or(&replaced);
                let perl_text = format!("/{}/", escape_slashes(replaced));
                pattern.perl = perl_text;
            }
        }
    }
}

/// Evaluator of `if` expressions.
struct CondEval<'p> {
    parser: &'p Parser,
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

impl CondEval<'_> {
    fn peek_op(&self) -> Option<&'static str> {
        match self.tokens.get(self.pos) {
            Some(Token::Op(op)) => Some(op),
            Some(Token::Word(w)) if w == "and" => Some("&&"),
            Some(Token::Word(w)) if w == "or" => Some("||"),
            Some(Token::Word(w)) if w == "not" => Some("!"),
            _ => None,
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), String> {
        if self.peek_op() == Some(op) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected {op}"))
        }
    }

    fn or(&mut self) -> Result<f64, String> {
        let mut v = self.and()?;
        while self.peek_op() == Some("||") {
            self.pos += 1;
            let r = self.and()?;
            v = if v != 0.0 { v } else { r };
        }
        Ok(v)
    }

    fn and(&mut self) -> Result<f64, String> {
        let mut v = self.comparison()?;
        while self.peek_op() == Some("&&") {
            self.pos += 1;
            let r = self.comparison()?;
            v = if v == 0.0 { v } else { r };
        }
        Ok(v)
    }

    fn comparison(&mut self) -> Result<f64, String> {
        let l = self.sum()?;
        let op = match self.peek_op() {
            Some(op @ ("==" | "!=" | "<" | "<=" | ">" | ">=")) => op,
            _ => return Ok(l),
        };
        self.pos += 1;
        let r = self.sum()?;
        let t = match op {
            "==" => l == r,
            "!=" => l != r,
            "<" => l < r,
            "<=" => l <= r,
            ">" => l > r,
            _ => l >= r,
        };
        Ok(if t { 1.0 } else { 0.0 })
    }

    fn sum(&mut self) -> Result<f64, String> {
        let mut v = self.product()?;
        while let Some(op @ ("+" | "-")) = self.peek_op() {
            self.pos += 1;
            let r = self.product()?;
            v = if op == "+" { v + r } else { v - r };
        }
        Ok(v)
    }

    fn product(&mut self) -> Result<f64, String> {
        let mut v = self.unary()?;
        while let Some(op @ ("*" | "/")) = self.peek_op() {
            self.pos += 1;
            let r = self.unary()?;
            if op == "/" && r == 0.0 {
                return Err(String::from("division by zero"));
            }
            v = if op == "*" { v * r } else { v / r };
        }
        Ok(v)
    }

    fn unary(&mut self) -> Result<f64, String> {
        self.depth += 1;
        if self.depth > MAX_IF_DEPTH {
            return Err(String::from("nested too deep"));
        }
        let v = match self.peek_op() {
            Some("!") => {
                self.pos += 1;
                1.0 - truth(self.unary()?)
            }
            Some("-") => {
                self.pos += 1;
                -self.unary()?
            }
            Some("+") => {
                self.pos += 1;
                self.unary()?
            }
            _ => self.primary()?,
        };
        self.depth -= 1;
        Ok(v)
    }

    fn primary(&mut self) -> Result<f64, String> {
        let token = self.tokens.get(self.pos).cloned().ok_or_else(|| String::from("unexpected end"))?;
        self.pos += 1;
        match token {
            Token::Num(v) => Ok(v),
            Token::Op("(") => {
                let v = self.or()?;
                self.expect(")")?;
                Ok(v)
            }
            Token::Op(op) => Err(format!("unexpected {op}")),
            Token::Word(w) => match w.as_str() {
                "version" => Ok(SA_VERSION_NUMBER),
                "perl_version" => Ok(PERL_VERSION_NUMBER),
                "local_tests_only" => Ok(0.0),
                "plugin" | "can" | "has" => {
                    self.expect("(")?;
                    let arg = match self.tokens.get(self.pos) {
                        Some(Token::Word(a)) => a.clone(),
                        _ => return Err(format!("{w}() needs a name")),
                    };
                    self.pos += 1;
                    self.expect(")")?;
                    let found = if w == "plugin" {
                        self.parser.plugin_condition(&arg)
                    } else {
                        self.parser.function_exists(&arg)
                    };
                    Ok(if found { 1.0 } else { 0.0 })
                }
                _ => Err(format!("unknown word {}", quote(&w))),
            },
        }
    }
}

/// A rule's regex: `Err` for a text that is not a regex literal (the rule is not
/// defined, as in SpamAssassin); otherwise the pattern and its translation.
/// SpamAssassin 4's name for an address-list directive (`whitelist_*` and
/// `blacklist_*` are aliases of `welcomelist_*` and `blocklist_*`).
fn addr_list_name(key: &str) -> &str {
    match key {
        "whitelist_from" => "welcomelist_from",
        "blacklist_from" => "blocklist_from",
        "whitelist_to" => "welcomelist_to",
        "blacklist_to" => "blocklist_to",
        "whitelist_allows_relays" => "welcomelist_allows_relays",
        k => k,
    }
}

/// Adds lowercased address globs to the list `name`, creating it.
fn add_to_addr_list<'a>(lists: &mut Vec<AddrList>, name: &str, addrs: impl Iterator<Item = &'a str>) {
    let index = match lists.iter().position(|l| l.name == name) {
        Some(i) => i,
        None => {
            lists.push(AddrList { name: name.to_string(), globs: Vec::new() });
            lists.len() - 1
        }
    };
    if let Some(list) = lists.get_mut(index) {
        for a in addrs {
            let a = a.to_ascii_lowercase();
            if !list.globs.contains(&a) {
                list.globs.push(a);
            }
        }
    }
}

fn make_pattern(text: &str) -> Result<Pattern, String> {
    if let Err(e) = perl::split_literal(text) {
        return Err(format!("{e} {}", quote(text)));
    }
    Ok(Pattern::new(text.to_string()))
}


/// Splits `pattern [if-unset: TEXT]`.
fn split_if_unset(text: &str) -> (&str, Option<&str>) {
    let mut from = 0;
    while let Some(found) = text.get(from..).and_then(|t| t.find("[if-unset:")) {
        let k = from + found;
        let before = text.get(..k).unwrap_or("");
        let after = text.get(k + "[if-unset:".len()..).unwrap_or("");
        let preceded = before.ends_with(|c: char| c.is_ascii() && is_space(c as u8));
        let spaced = after.starts_with(|c: char| c.is_ascii() && is_space(c as u8));
        if preceded && spaced && text.ends_with(']') {
            let value = after
                .strip_suffix(']')
                .unwrap_or(after)
                .trim_start_matches(|c: char| c.is_ascii() && is_space(c as u8));
            if !value.is_empty() {
                return (trim(before), Some(value));
            }
        }
        from = k + 1;
    }
    (text, None)
}

/// `eval:fn(args)` of a rule declared with `on`.
fn eval_kind(on: EvalOn, call: &str) -> Result<RuleKind, String> {
    let fn_len = call.bytes().take_while(|&c| is_word(c)).count();
    let function = call.get(..fn_len).unwrap_or("");
    let args = call.get(fn_len..).and_then(|r| r.strip_prefix('(')).and_then(|r| r.strip_suffix(')'));
    match args {
        Some(args) if fn_len > 0 => Ok(RuleKind::Eval { on, function: function.to_string(), args: args.to_string() }),
        _ => Err(format!("invalid eval call {}", quote(call))),
    }
}

fn parse_tflags(text: &str) -> TFlags {
    let mut flags = TFlags::default();
    for word in text.split_ascii_whitespace() {
        match word {
            "multiple" => flags.multiple = true,
            "nice" => flags.nice = true,
            "net" => flags.net = true,
            "learn" => flags.learn = true,
            "noautolearn" => flags.noautolearn = true,
            "nosubject" => flags.nosubject = true,
            _ => {
                if let Some(n) = word.strip_prefix("maxhits=").and_then(|n| n.parse::<u32>().ok()) {
                    flags.maxhits = Some(n);
                }
            }
        }
    }
    flags
}

fn parse_when(word: &str) -> Result<AddHeaderWhen, String> {
    match word {
        "spam" => Ok(AddHeaderWhen::Spam),
        "ham" => Ok(AddHeaderWhen::Ham),
        "all" => Ok(AddHeaderWhen::All),
        _ => Err(String::from("expected spam, ham or all")),
    }
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Removes header `name` from the lists `when` names (an `All` entry narrows).
fn remove_headers_named(list: &mut Vec<AddHeader>, when: AddHeaderWhen, name: &str) {
    list.retain_mut(|h| {
        if !h.name.eq_ignore_ascii_case(name) {
            return true;
        }
        match (h.when, when) {
            (_, AddHeaderWhen::All) => false,
            (AddHeaderWhen::All, AddHeaderWhen::Spam) => {
                h.when = AddHeaderWhen::Ham;
                true
            }
            (AddHeaderWhen::All, AddHeaderWhen::Ham) => {
                h.when = AddHeaderWhen::Spam;
                true
            }
            (have, remove) => have != remove,
        }
    });
}

/// `add_header` escapes: `\\` a backslash, `\t` tab, `\n` newline, others removed.
fn unescape_template(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some(_) => {}
            None => out.push('\\'),
        }
    }
    out
}

/// Escapes `/` not already escaped, so a regex body fits in `/.../`.
fn escape_slashes(body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 4);
    let mut escaped = false;
    for c in body.chars() {
        if c == '/' && !escaped {
            out.push('\\');
        }
        escaped = c == '\\' && !escaped;
        out.push(c);
    }
    out
}

/// Replaces `rules_matching(GLOB)` placeholders in `expr` (depth bounded by the
/// parser's limit).
fn expand_globs(expr: &mut MetaExpr, globs: &mut GlobExpansion<'_>, own: &str, depth: usize) {
    if depth > MAX_META_DEPTH + 1 {
        return;
    }
    match expr {
        MetaExpr::Rule(name) => {
            let Some(glob) = name.strip_prefix("rules_matching(").and_then(|g| g.strip_suffix(')')) else {
                return;
            };
            let cost = globs.names.len() as u64;
            let affordable = globs.budget >= cost;
            let matching: Vec<(MetaExpr, usize)> = if affordable {
                globs.budget -= cost;
                globs
                    .names
                    .iter()
                    .filter(|n| n.as_str() != own && glob_matches(glob.as_bytes(), n.as_bytes()))
                    .map(|n| (MetaExpr::Rule(n.clone()), 1))
                    .collect()
            } else {
                Vec::new()
            };
            if !affordable || matching.len() > MAX_GLOB_RULES {
                globs.refused.push(glob.to_string());
                *expr = MetaExpr::Number(0.0);
                return;
            }
            *expr = if matching.is_empty() { MetaExpr::Number(0.0) } else { balanced(MetaOp::Add, matching).0 };
        }
        MetaExpr::Number(_) => {}
        MetaExpr::Not(inner) | MetaExpr::Neg(inner) => expand_globs(inner, globs, own, depth + 1),
        MetaExpr::Binary(_, l, r) => {
            expand_globs(l, globs, own, depth + 1);
            expand_globs(r, globs, own, depth + 1);
        }
    }
}

/// Glob comparisons allowed for all `rules_matching()` expansions together.
const GLOB_BUDGET: u64 = 1_000_000;
/// Most rules one `rules_matching()` may stand for.
const MAX_GLOB_RULES: usize = 10_000;

/// State of the `rules_matching()` expansions of one configuration.
struct GlobExpansion<'a> {
    /// All rule names, sorted.
    names: &'a [String],
    /// Glob comparisons left.
    budget: u64,
    /// Globs of the current rule that were refused.
    refused: Vec<String>,
}

/// Combines operands of an associative operator into a balanced tree; returns
/// the tree and its depth.
fn balanced(op: MetaOp, mut items: Vec<(MetaExpr, usize)>) -> (MetaExpr, usize) {
    while items.len() > 1 {
        let mut next = Vec::with_capacity(items.len().div_ceil(2));
        let mut iter = items.into_iter();
        while let Some((l, ld)) = iter.next() {
            match iter.next() {
                Some((r, rd)) => next.push((MetaExpr::Binary(op, Box::new(l), Box::new(r)), ld.max(rd) + 1)),
                None => next.push((l, ld)),
            }
        }
        items = next;
    }
    items.pop().unwrap_or((MetaExpr::Number(0.0), 1))
}

/// Parses a meta expression with Perl's precedence: `||` < `&&` < `== !=` <
/// `< <= > >=` < `+ -` < `* /` < unary `! -`.
fn parse_meta(text: &str) -> Result<MetaExpr, String> {
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    if compact.contains("**") {
        return Err(String::from("** is not allowed"));
    }
    let tokens = tokenize(text, Grammar::Meta)?;
    if tokens == [Token::Op("("), Token::Op(")")] {
        return Ok(MetaExpr::Number(0.0));
    }
    let mut p = MetaParser { tokens, pos: 0, nesting: 0 };
    let (expr, depth) = p.or()?;
    if p.pos != p.tokens.len() {
        return Err(String::from("unexpected token in meta expression"));
    }
    if depth > MAX_META_DEPTH {
        return Err(format!("meta expression deeper than {MAX_META_DEPTH}"));
    }
    Ok(expr)
}

struct MetaParser {
    tokens: Vec<Token>,
    pos: usize,
    /// Parentheses and unary operators open.
    nesting: usize,
}

type Node = (MetaExpr, usize);

fn binary(op: MetaOp, l: Node, r: Node) -> Result<Node, String> {
    let depth = l.1.max(r.1) + 1;
    if depth > MAX_META_DEPTH {
        return Err(format!("meta expression deeper than {MAX_META_DEPTH}"));
    }
    Ok((MetaExpr::Binary(op, Box::new(l.0), Box::new(r.0)), depth))
}

impl MetaParser {
    fn peek_op(&self) -> Option<&'static str> {
        match self.tokens.get(self.pos) {
            Some(Token::Op(op)) => Some(op),
            _ => None,
        }
    }

    /// Operands joined by an associative operator, as a balanced tree.
    fn chain(
        &mut self,
        op_text: &str,
        op: MetaOp,
        next: fn(&mut Self) -> Result<Node, String>,
    ) -> Result<Node, String> {
        let mut items = alloc::vec![next(self)?];
        while self.peek_op() == Some(op_text) {
            self.pos += 1;
            items.push(next(self)?);
        }
        let node = balanced(op, items);
        if node.1 > MAX_META_DEPTH {
            return Err(format!("meta expression deeper than {MAX_META_DEPTH}"));
        }
        Ok(node)
    }

    fn or(&mut self) -> Result<Node, String> {
        self.chain("||", MetaOp::Or, Self::and)
    }

    fn and(&mut self) -> Result<Node, String> {
        self.chain("&&", MetaOp::And, Self::equality)
    }

    fn equality(&mut self) -> Result<Node, String> {
        let l = self.relational()?;
        let op = match self.peek_op() {
            Some("==") => MetaOp::Eq,
            Some("!=") => MetaOp::Ne,
            _ => return Ok(l),
        };
        self.pos += 1;
        let r = self.relational()?;
        if matches!(self.peek_op(), Some("==" | "!=")) {
            return Err(String::from("chained comparison"));
        }
        binary(op, l, r)
    }

    fn relational(&mut self) -> Result<Node, String> {
        let l = self.additive()?;
        let op = match self.peek_op() {
            Some("<") => MetaOp::Lt,
            Some("<=") => MetaOp::Le,
            Some(">") => MetaOp::Gt,
            Some(">=") => MetaOp::Ge,
            _ => return Ok(l),
        };
        self.pos += 1;
        let r = self.additive()?;
        if matches!(self.peek_op(), Some("<" | "<=" | ">" | ">=")) {
            return Err(String::from("chained comparison"));
        }
        binary(op, l, r)
    }

    fn additive(&mut self) -> Result<Node, String> {
        let first = self.multiplicative()?;
        let mut rest: Vec<(MetaOp, Node)> = Vec::new();
        while let Some(op @ ("+" | "-")) = self.peek_op() {
            self.pos += 1;
            let op = if op == "+" { MetaOp::Add } else { MetaOp::Sub };
            rest.push((op, self.multiplicative()?));
        }
        if rest.iter().all(|(op, _)| *op == MetaOp::Add) {
            let mut items = alloc::vec![first];
            items.extend(rest.into_iter().map(|(_, n)| n));
            let node = balanced(MetaOp::Add, items);
            if node.1 > MAX_META_DEPTH {
                return Err(format!("meta expression deeper than {MAX_META_DEPTH}"));
            }
            return Ok(node);
        }
        let mut acc = first;
        for (op, node) in rest {
            acc = binary(op, acc, node)?;
        }
        Ok(acc)
    }

    fn multiplicative(&mut self) -> Result<Node, String> {
        let mut acc = self.unary()?;
        while let Some(op @ ("*" | "/")) = self.peek_op() {
            self.pos += 1;
            let op = if op == "*" { MetaOp::Mul } else { MetaOp::Div };
            let r = self.unary()?;
            acc = binary(op, acc, r)?;
        }
        Ok(acc)
    }

    fn enter(&mut self) -> Result<(), String> {
        self.nesting += 1;
        if self.nesting > MAX_META_DEPTH {
            return Err(format!("meta expression nested deeper than {MAX_META_DEPTH}"));
        }
        Ok(())
    }

    fn unary(&mut self) -> Result<Node, String> {
        let op = self.peek_op();
        if !matches!(op, Some("!" | "-" | "+")) {
            return self.primary();
        }
        self.pos += 1;
        self.enter()?;
        let inner = self.unary()?;
        self.nesting -= 1;
        let depth = inner.1 + 1;
        if depth > MAX_META_DEPTH {
            return Err(format!("meta expression deeper than {MAX_META_DEPTH}"));
        }
        Ok(match op {
            Some("!") => (MetaExpr::Not(Box::new(inner.0)), depth),
            Some("-") => (MetaExpr::Neg(Box::new(inner.0)), depth),
            _ => inner,
        })
    }

    fn primary(&mut self) -> Result<Node, String> {
        let token = self.tokens.get(self.pos).cloned().ok_or_else(|| String::from("incomplete meta expression"))?;
        self.pos += 1;
        match token {
            Token::Num(v) => Ok((MetaExpr::Number(v), 1)),
            Token::Word(name) => Ok((MetaExpr::Rule(name), 1)),
            Token::Op("(") => {
                self.enter()?;
                let inner = self.or()?;
                self.nesting -= 1;
                if self.peek_op() != Some(")") {
                    return Err(String::from("missing ) in meta expression"));
                }
                self.pos += 1;
                Ok(inner)
            }
            Token::Op(op) => Err(format!("unexpected {op} in meta expression")),
        }
    }
}

/// Finds `start(.+?)end` at or after `from`: (match start, name start, name end, match end).
fn find_tag(s: &[u8], from: usize, start: &[u8], end: &[u8]) -> Option<(usize, usize, usize, usize)> {
    if start.is_empty() || end.is_empty() {
        return None;
    }
    if let Some(found) = find_bytes(s.get(from..)?, start) {
        let m = from + found;
        let name_start = m + start.len();
        // No end after this start means none after a later one either.
        let e = s.get(name_start + 1..).and_then(|r| find_bytes(r, end))?;
        let name_end = name_start + 1 + e;
        return Some((m, name_start, name_end, name_end + end.len()));
    }
    None
}

fn find_bytes(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Removes the first `<KIND NAME>` and returns NAME.
fn take_directive(re: &mut Vec<u8>, kind: &str, start: &[u8], end: &[u8]) -> Option<Vec<u8>> {
    let mut opener = start.to_vec();
    opener.extend_from_slice(kind.as_bytes());
    opener.push(b' ');
    let m = find_bytes(re, &opener)?;
    let name_start = m + opener.len();
    let e = re.get(name_start + 1..).and_then(|r| find_bytes(r, end))?;
    let name_end = name_start + 1 + e;
    let name = re.get(name_start..name_end)?.to_vec();
    re.drain(m..name_end + end.len());
    Some(name)
}

/// Perl's `split(/(<[^<>]+>)/, $re)`: text and tags alternating, trailing empty
/// fields dropped.
fn split_tags(re: &[u8]) -> Vec<Vec<u8>> {
    let mut pieces = Vec::new();
    let mut text_start = 0;
    let mut i = 0;
    while let Some(&b) = re.get(i) {
        if b != b'<' {
            i += 1;
            continue;
        }
        let len = re.get(i + 1..).unwrap_or(&[]).iter().take_while(|&&c| c != b'<' && c != b'>').count();
        let close = i + 1 + len;
        if len > 0 && re.get(close) == Some(&b'>') {
            pieces.push(re.get(text_start..i).unwrap_or(&[]).to_vec());
            pieces.push(re.get(i..=close).unwrap_or(&[]).to_vec());
            text_start = close + 1;
            i = close + 1;
        } else {
            i = close.max(i + 1);
        }
    }
    pieces.push(re.get(text_start..).unwrap_or(&[]).to_vec());
    while pieces.last().is_some_and(Vec::is_empty) {
        pieces.pop();
    }
    pieces
}

/// Perl's truth of a string setting.
fn truthy(value: Option<&String>) -> Option<&String> {
    value.filter(|v| !v.is_empty() && v.as_str() != "0")
}

/// Longest regex ReplaceTags may produce (templates can grow it exponentially;
/// the longest stock expansion is 224 KB).
const MAX_REPLACED_LEN: usize = 1 << 20;
/// Bytes all ReplaceTags expansions of a configuration may produce together.
const REPLACED_BUDGET: usize = 64 << 20;

/// SpamAssassin's ReplaceTags expansion of one regex (`(?flags)body`); `None`
/// when the result would exceed `max_len` bytes.
fn replace_tags(original: &str, rt: &ReplaceTags, max_len: usize) -> Option<String> {
    let (start, end) = (rt.start.as_bytes(), rt.end.as_bytes());
    let mut re = original.as_bytes().to_vec();
    let mut passes = 0;
    loop {
        let lookup = |map: &'_ BTreeMap<String, String>, name: Option<Vec<u8>>| -> Option<Vec<u8>> {
            let name = String::from_utf8(name?).ok()?;
            truthy(map.get(&name)).map(|v| v.as_bytes().to_vec())
        };
        let pre = lookup(&rt.pre, take_directive(&mut re, "pre", start, end));
        let post = lookup(&rt.post, take_directive(&mut re, "post", start, end));
        let inter = lookup(&rt.inter, take_directive(&mut re, "inter", start, end));
        let mut pieces = split_tags(&re);
        let mut again = false;
        for piece in &mut pieces {
            if let Some(pre) = &pre {
                if let Some((m, ..)) = find_tag(piece, 0, start, end) {
                    piece.splice(m..m, pre.iter().copied());
                }
            }
            if let Some(post) = &post {
                let mut out = Vec::with_capacity(piece.len() + post.len());
                let mut from = 0;
                while let Some((_, _, _, m_end)) = find_tag(piece, from, start, end) {
                    out.extend_from_slice(piece.get(from..m_end).unwrap_or(&[]));
                    out.extend_from_slice(post);
                    from = m_end;
                    if out.len() > max_len {
                        return None;
                    }
                }
                out.extend_from_slice(piece.get(from..).unwrap_or(&[]));
                *piece = out;
            }
            if let Some(inter) = &inter {
                if piece.is_empty() {
                    piece.extend_from_slice(inter);
                }
            }
            let Some((_, ns, ne, _)) = find_tag(piece, 0, start, end) else {
                continue;
            };
            let Some(name) = piece.get(ns..ne).and_then(|n| core::str::from_utf8(n).ok()) else {
                continue;
            };
            let Some(replacement) = truthy(rt.tag.get(name)) else {
                continue;
            };
            let mut needle = start.to_vec();
            needle.extend_from_slice(name.as_bytes());
            needle.extend_from_slice(end);
            let mut out = Vec::with_capacity(piece.len() + replacement.len());
            let mut i = 0;
            while i < piece.len() {
                if piece.get(i..).is_some_and(|r| r.starts_with(&needle)) {
                    out.extend_from_slice(replacement.as_bytes());
                    i += needle.len();
                    if out.len() > max_len {
                        return None;
                    }
                } else {
                    out.extend(piece.get(i).copied());
                    i += 1;
                }
            }
            *piece = out;
            if has_tag(replacement) {
                again = true;
            }
        }
        re = pieces.concat();
        if re.len() > max_len {
            return None;
        }
        passes += 1;
        if !(again && passes <= 5) {
            break;
        }
    }
    Some(String::from_utf8(re).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// Whether `text` contains `<[^>]+>`.
fn has_tag(text: &str) -> bool {
    // For each `>`, the first `<` since the previous `>` must not be just before it.
    let mut first_open: Option<usize> = None;
    for (i, c) in text.bytes().enumerate() {
        match c {
            b'<' if first_open.is_none() => first_open = Some(i),
            b'>' => {
                if first_open.is_some_and(|o| o + 1 < i) {
                    return true;
                }
                first_open = None;
            }
            _ => {}
        }
    }
    false
}

/// Parses rule text that has no includes, such as [`super::DEFAULT_RULES`].
pub fn parse_str(name: &str, text: &str) -> Result<Config, ParseError> {
    let mut p = Parser::new();
    p.parse_file(name, text.as_bytes(), &mut NoIncludes)?;
    Ok(p.finish())
}

/// The header(s) a field name in a header rule stands for, pseudo-headers included.
fn header_field(name: &str) -> HeaderField {
    match name {
        "ALL" => HeaderField::All,
        "MESSAGEID" => HeaderField::MessageId,
        f if f.eq_ignore_ascii_case("ToCc") => HeaderField::ToCc,
        f => HeaderField::Named(f.to_string()),
    }
}

/// After a header name at byte `i` of `rest`: `=~ /re/` or `!~ /re/` gives (negated, pattern text).
fn match_test<'r>(rest: &'r str, mut i: usize, what: &str) -> Result<(bool, &'r str), String> {
    let b = rest.as_bytes();
    while b.get(i).is_some_and(|&c| is_space(c)) {
        i += 1;
    }
    let negated = match (b.get(i), b.get(i + 1)) {
        (Some(b'='), Some(b'~')) => false,
        (Some(b'!'), Some(b'~')) => true,
        _ => return Err(format!("invalid {what} test")),
    };
    let pattern_text = trim(rest.get(i + 2..).unwrap_or(""));
    if pattern_text.is_empty() {
        return Err(format!("invalid {what} test"));
    }
    Ok((negated, pattern_text))
}

/// The two expression languages of rule files, which share one tokenizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grammar {
    /// `if` conditions: words may be module paths (`Mail::SpamAssassin::Conf::x`).
    Condition,
    /// `meta` expressions: words are rule names, `rules_matching(GLOB)` or `local_tests_only`.
    Meta,
}

impl Grammar {
    /// Whether a number starts at `c` (followed by `next`): a lone `.` is a bad
    /// number in a condition and an unsupported operator in a meta.
    fn starts_number(self, c: u8, next: Option<u8>) -> bool {
        c.is_ascii_digit() || (c == b'.' && (self == Grammar::Condition || next.is_some_and(|d| d.is_ascii_digit())))
    }

    /// Whether `b` continues a word.
    fn in_word(self, b: u8) -> bool {
        is_word(b) || (self == Grammar::Condition && b == b':')
    }
}

/// A token of an `if` condition or a `meta` expression.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Num(f64),
    /// A condition's word, or a meta's rule name or `rules_matching(GLOB)`.
    Word(String),
    Op(&'static str),
}

/// Splits an `if` condition or a `meta` expression into tokens.
fn tokenize(text: &str, grammar: Grammar) -> Result<Vec<Token>, String> {
    let meta = grammar == Grammar::Meta;
    if meta && (text.contains("::") || text.contains("->") || text.contains(['$', '@', '%', ';', '{', '}'])) {
        return Err(String::from("invalid characters in meta expression"));
    }
    let b = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if is_space(c) {
            i += 1;
            continue;
        }
        let rest = b.get(i..).unwrap_or(&[]);
        let next = rest.get(1).copied();
        if grammar.starts_number(c, next) {
            let len = rest.iter().take_while(|d| d.is_ascii_digit() || **d == b'.').count();
            let num = text.get(i..i + len).unwrap_or("");
            tokens.push(Token::Num(num.parse::<f64>().map_err(|_| format!("bad number {}", quote(num)))?));
            i += len;
            continue;
        }
        if is_word(c) {
            let len = rest.iter().take_while(|d| grammar.in_word(**d)).count();
            let word = text.get(i..i + len).unwrap_or("");
            i += len;
            if meta {
                let (token, taken) = meta_word(word, text.get(i..).unwrap_or(""))?;
                tokens.push(token);
                i += taken;
            } else {
                tokens.push(Token::Word(word.to_string()));
            }
            continue;
        }
        if meta && (c, next) == (b'*', Some(b'*')) {
            return Err(String::from("** is not allowed"));
        }
        let Some(op) = operator(c, next) else {
            return Err(match grammar {
                Grammar::Condition => format!("unexpected character {:?}", char::from(c)),
                Grammar::Meta => format!("operator {:?} not supported", char::from(c)),
            });
        };
        i += op.len();
        tokens.push(Token::Op(op));
    }
    Ok(tokens)
}

/// The token a meta's `word` stands for, followed by `after`; and how many
/// bytes of `after` it takes too (the `(GLOB)` of `rules_matching`).
fn meta_word(word: &str, after: &str) -> Result<(Token, usize), String> {
    let after_bytes = after.as_bytes();
    if after_bytes.first() == Some(&b':') {
        return Err(format!("invalid token {}", quote(word)));
    }
    if word == "rules_matching" && after_bytes.first() == Some(&b'(') {
        let Some(close) = after_bytes.iter().position(|&c| c == b')') else {
            return Err(String::from("unterminated rules_matching("));
        };
        let glob = trim(after.get(1..close).unwrap_or(""));
        let glob_ok = glob.len() <= MAX_GLOB
            && glob.bytes().next().is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, b'_' | b'*' | b'?'))
            && glob.bytes().all(|c| is_word(c) || c == b'*' || c == b'?');
        if !glob_ok {
            return Err(format!("invalid rules_matching glob {}", quote(glob)));
        }
        return Ok((Token::Word(format!("rules_matching({glob})")), close + 1));
    }
    if word == "local_tests_only" {
        Ok((Token::Num(0.0), 0))
    } else if is_rule_name(word) {
        Ok((Token::Word(word.to_string()), 0))
    } else {
        Err(format!("invalid token {}", quote(word)))
    }
}

/// The operator starting with `c` (followed by `next`) in `if` and `meta` expressions.
fn operator(c: u8, next: Option<u8>) -> Option<&'static str> {
    Some(match (c, next) {
        (b'|', Some(b'|')) => "||",
        (b'&', Some(b'&')) => "&&",
        (b'=', Some(b'=')) => "==",
        (b'!', Some(b'=')) => "!=",
        (b'>', Some(b'=')) => ">=",
        (b'<', Some(b'=')) => "<=",
        (b'>', _) => ">",
        (b'<', _) => "<",
        (b'!', _) => "!",
        (b'(', _) => "(",
        (b')', _) => ")",
        (b'+', _) => "+",
        (b'-', _) => "-",
        (b'*', _) => "*",
        (b'/', _) => "/",
        _ => return None,
    })
}

/// Drops repeated entries of `list`, keeping the first of each where it is.
fn dedup_keep_first(list: &mut Vec<String>) {
    let mut order: Vec<usize> = (0..list.len()).collect();
    order.sort_by(|&a, &b| list.get(a).cmp(&list.get(b)).then(a.cmp(&b)));
    let mut keep = alloc::vec![true; list.len()];
    for pair in order.windows(2) {
        if let [a, b] = *pair {
            if list.get(a) == list.get(b) {
                if let Some(k) = keep.get_mut(b) {
                    *k = false;
                }
            }
        }
    }
    let mut index = 0;
    list.retain(|_| {
        index += 1;
        keep.get(index - 1).copied().unwrap_or(true)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// A rule file using every directive this parser acts on.
    const EVERY_DIRECTIVE: &str = "\
# comment line
   # indented comment

loadplugin Mail::SpamAssassin::Plugin::ReplaceTags
tryplugin Mail::SpamAssassin::Plugin::MIMEHeader /x/MIMEHeader.pm
enable_compat welcomelist_blocklist
require_version @@VERSION@@
required_hits 6.5
report_safe 0
score    GTUBE_LIKE 3
header   H_SUBJ     Subject =~ /\\bfree\\b/i   # trailing comment
header   H_NEG      From !~ /@example\\.com$/ [if-unset: nobody@nowhere]
header   H_RAW      Subject:raw =~ /=\\?utf-8\\?/i
header   H_ADDR     From:addr =~ /^[^@]+@[^@]+$/
header   H_NAME     From:name =~ /bank/i
header   H_NAMERAW  From:name:raw =~ /\\#1/
header   H_EXISTS   exists:X-Mailer
header   H_ALL      ALL =~ /^X-Spam/m
header   H_TOCC     ToCc =~ /undisclosed/
header   H_MSGID    MESSAGEID =~ /^<[^>]+>$/
header   H_EVAL     eval:check_for_missing_to_header()
header   H_RBL      eval:check_rbl('zen', 'zen.example.')
body     GTUBE_LIKE /XJS\\*C4JDBQADN1/
body     B_EVAL     eval:check_body_length('100')
rawbody  RB         m{<script}i
rawbody  RB_EVAL    eval:check_stock_info('3')
full     F          /^Received: from/m
full     F_EVAL     eval:check_razor2()
uri      U          m!^https?://bit\\.ly/!
mimeheader M        Content-Type =~ /text\\/html/
mimeheader M_RAW    Content-Type:raw =~ /name=/
meta     META       H_SUBJ && (GTUBE_LIKE || !U) && H_ALL + U > 1
meta     META_GLOB  rules_matching(H_NAME*) >= 1
describe GTUBE_LIKE Looks like GTUBE
describe META       Several things
lang de describe META Mehrere Dinge
lang en describe H_SUBJ Free in the subject
tflags   GTUBE_LIKE multiple maxhits=3 nice
tflags   U          net learn noautolearn nosubject publish
priority META       500
test     GTUBE_LIKE ok XJS*C4JDBQADN1
replace_tag   FREE  (?:free|fr33)
replace_rules R_FREE
body     R_FREE     /<FREE> money/i
ifplugin Mail::SpamAssassin::Plugin::ReplaceTags
  body   IN_IF      /yes/
else
  body   IN_ELSE    /no/
endif
ifplugin Mail::SpamAssassin::Plugin::NotLoaded
  body   NOT_LOADED /x/
endif
if (version >= 3.004000) && can(Mail::SpamAssassin::Conf::feature_bug6558_free)
  if !plugin(Mail::SpamAssassin::Plugin::MIMEHeader)
    body NESTED_FALSE /x/
  else
    body NESTED_TRUE /x/
  endif
endif
if can(Mail::SpamAssassin::Conf::compat_welcomelist_blocklist)
  body COMPAT /x/
endif
add_header all  Tests \"_TESTS_\\tdone\"
add_header spam Flag YES
remove_header ham Level
rewrite_header subject [SPAM] (_SCORE_)
rewrite_header From (spam) x
blocklist_uri_host example.com
blocklist_uri_host example.org
frobnicate now
";

    fn rule<'a>(config: &'a Config, name: &str) -> &'a RuleDef {
        config.rules.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("no rule {name}"))
    }

    fn has_rule(config: &Config, name: &str) -> bool {
        config.rules.iter().any(|r| r.name == name)
    }

    fn header(config: &Config, name: &str) -> HeaderRule {
        match &rule(config, name).kind {
            RuleKind::Header(h) => h.clone(),
            other => panic!("{name} is {other:?}"),
        }
    }

    fn matches(test: &HeaderTest) -> &Pattern {
        match test {
            HeaderTest::Matches(p) | HeaderTest::NotMatches(p) => p,
            HeaderTest::Exists => panic!("exists test"),
        }
    }

    fn has_note(config: &Config, fragment: &str) -> bool {
        config.notes.iter().any(|n| n.message.contains(fragment))
    }

    #[test]
    fn every_directive() {
        let config = parse_str("every.cf", EVERY_DIRECTIVE).expect("parses");
        assert_eq!(config.required_score, Score(6500));
        assert_eq!(config.report_safe, 0);

        let subj = header(&config, "H_SUBJ");
        assert_eq!(subj.field, HeaderField::Named(String::from("Subject")));
        assert_eq!(subj.form, HeaderForm::Decoded);
        assert_eq!(matches(&subj.test).perl, "/\\bfree\\b/i");
        assert_eq!(matches(&subj.test).translated(), Ok(String::from("(?i)\\bfree\\b")));
        let neg = header(&config, "H_NEG");
        assert!(matches!(neg.test, HeaderTest::NotMatches(_)));
        assert_eq!(neg.if_unset.as_deref(), Some("nobody@nowhere"));
        assert_eq!(matches(&neg.test).perl, "/@example\\.com$/");
        assert_eq!(header(&config, "H_RAW").form, HeaderForm::Raw);
        assert_eq!(header(&config, "H_ADDR").form, HeaderForm::Addr);
        assert_eq!(header(&config, "H_NAME").form, HeaderForm::Name);
        let name_raw = header(&config, "H_NAMERAW");
        assert_eq!(name_raw.form, HeaderForm::NameRaw);
        assert_eq!(matches(&name_raw.test).perl, "/#1/", "\\# is unescaped before the regex");
        let exists = header(&config, "H_EXISTS");
        assert_eq!(exists.test, HeaderTest::Exists);
        assert_eq!(exists.field, HeaderField::Named(String::from("X-Mailer")));
        assert_eq!(header(&config, "H_ALL").field, HeaderField::All);
        assert_eq!(header(&config, "H_TOCC").field, HeaderField::ToCc);
        assert_eq!(header(&config, "H_MSGID").field, HeaderField::MessageId);
        assert_eq!(
            rule(&config, "H_RBL").kind,
            RuleKind::Eval {
                on: EvalOn::Header,
                function: String::from("check_rbl"),
                args: String::from("'zen', 'zen.example.'")
            }
        );
        assert!(matches!(rule(&config, "H_EVAL").kind, RuleKind::Eval { on: EvalOn::Header, .. }));
        assert!(matches!(rule(&config, "B_EVAL").kind, RuleKind::Eval { on: EvalOn::Body, .. }));
        assert!(matches!(rule(&config, "RB_EVAL").kind, RuleKind::Eval { on: EvalOn::RawBody, .. }));
        assert!(matches!(rule(&config, "F_EVAL").kind, RuleKind::Eval { on: EvalOn::Full, .. }));
        assert!(
            matches!(&rule(&config, "RB").kind, RuleKind::RawBody(p) if p.translated().as_deref() == Ok("(?i)<script"))
        );
        assert!(
            matches!(&rule(&config, "F").kind, RuleKind::Full(p) if p.translated().as_deref() == Ok("(?m)^Received: from"))
        );
        assert!(
            matches!(&rule(&config, "U").kind, RuleKind::Uri(p) if p.translated().as_deref() == Ok("^https?://bit\\.ly/"))
        );
        match &rule(&config, "M_RAW").kind {
            RuleKind::MimeHeader { name, raw, pattern } => {
                assert_eq!(name, "Content-Type");
                assert!(raw);
                assert_eq!(pattern.translated().as_deref(), Ok("name="));
            }
            other => panic!("M_RAW is {other:?}"),
        }
        assert!(matches!(&rule(&config, "M").kind, RuleKind::MimeHeader { raw: false, .. }));

        // Scores, descriptions, tflags apply whatever the order of lines.
        let gtube = rule(&config, "GTUBE_LIKE");
        assert_eq!(gtube.score, Some([Score(3000); 4]));
        assert_eq!(gtube.describe.as_deref(), Some("Looks like GTUBE"));
        assert_eq!(gtube.tflags, TFlags { multiple: true, maxhits: Some(3), nice: true, ..TFlags::default() });
        assert_eq!(
            rule(&config, "U").tflags,
            TFlags { net: true, learn: true, noautolearn: true, nosubject: true, ..TFlags::default() }
        );
        assert_eq!(rule(&config, "META").describe.as_deref(), Some("Several things"));
        assert_eq!(rule(&config, "H_SUBJ").describe.as_deref(), Some("Free in the subject"));
        assert_eq!(rule(&config, "H_SUBJ").score, None);
        assert_eq!(gtube.origin, Origin { file: String::from("every.cf"), line: 23 });

        // Meta: `&&` below `+`, `>` below `+`, `!` binds tightest.
        let rule_ref = |n: &str| Box::new(MetaExpr::Rule(String::from(n)));
        let want = MetaExpr::Binary(
            MetaOp::And,
            Box::new(MetaExpr::Binary(
                MetaOp::And,
                rule_ref("H_SUBJ"),
                Box::new(MetaExpr::Binary(MetaOp::Or, rule_ref("GTUBE_LIKE"), Box::new(MetaExpr::Not(rule_ref("U"))))),
            )),
            Box::new(MetaExpr::Binary(
                MetaOp::Gt,
                Box::new(MetaExpr::Binary(MetaOp::Add, rule_ref("H_ALL"), rule_ref("U"))),
                Box::new(MetaExpr::Number(1.0)),
            )),
        );
        assert_eq!(rule(&config, "META").kind, RuleKind::Meta(want));
        let glob = MetaExpr::Binary(
            MetaOp::Ge,
            Box::new(MetaExpr::Binary(MetaOp::Add, rule_ref("H_NAME"), rule_ref("H_NAMERAW"))),
            Box::new(MetaExpr::Number(1.0)),
        );
        assert_eq!(rule(&config, "META_GLOB").kind, RuleKind::Meta(glob));

        // ReplaceTags.
        match &rule(&config, "R_FREE").kind {
            RuleKind::Body(p) => {
                assert_eq!(p.perl, "/(?i)(?:free|fr33) money/");
                assert_eq!(p.translated().as_deref(), Ok("(?i)(?:free|fr33) money"));
            }
            other => panic!("R_FREE is {other:?}"),
        }

        // Conditionals.
        assert!(has_rule(&config, "IN_IF"));
        assert!(!has_rule(&config, "IN_ELSE"));
        assert!(!has_rule(&config, "NOT_LOADED"));
        assert!(has_rule(&config, "NESTED_TRUE"));
        assert!(!has_rule(&config, "NESTED_FALSE"));
        assert!(has_rule(&config, "COMPAT"));

        // Headers: defaults, report_safe 0, add/remove in SpamAssassin's order.
        let headers: Vec<(AddHeaderWhen, &str, &str)> =
            config.add_headers.iter().map(|h| (h.when, h.name.as_str(), h.template.as_str())).collect();
        assert_eq!(
            headers,
            vec![
                (AddHeaderWhen::All, "Checker-Version", "SpamAssassin _VERSION_ (_SUBVERSION_) on _HOSTNAME_"),
                (AddHeaderWhen::Spam, "Report", "_REPORT_"),
                (AddHeaderWhen::All, "Tests", "_TESTS_\tdone"),
                (AddHeaderWhen::Spam, "Flag", "YES"),
            ]
        );
        assert_eq!(config.remove_headers, vec![(AddHeaderWhen::Ham, String::from("Level"))]);
        assert_eq!(
            config.rewrite_headers,
            vec![
                (String::from("Subject"), String::from("[SPAM] (_SCORE_)")),
                (String::from("From"), String::from("[spam] x"))
            ]
        );

        // Notes: one per ignored directive name, one per unknown line.
        assert!(has_note(&config, "priority: 1 line ignored"));
        assert!(has_note(&config, "test: 1 line ignored"));
        assert!(has_note(&config, "blocklist_uri_host: 2 lines ignored"));
        let unknown: Vec<&LintNote> =
            config.notes.iter().filter(|n| n.message.starts_with("unknown directive")).collect();
        assert_eq!(unknown.len(), 1);
        assert_eq!(unknown[0].origin, Origin { file: String::from("every.cf"), line: 70 });
        assert_eq!(config.notes.len(), 4, "{:?}", config.notes);
    }

    #[test]
    fn dedup_keep_first_table() {
        let cases: &[(&[&str], &[&str])] = &[
            (&[], &[]),
            (&["com"], &["com"]),
            (&["uk", "com", "uk", "net", "com", "uk"], &["uk", "com", "net"]),
            (&["b", "a", "b", "a"], &["b", "a"]),
        ];
        for (input, want) in cases {
            let mut list: Vec<String> = input.iter().map(|s| String::from(*s)).collect();
            dedup_keep_first(&mut list);
            assert_eq!(&list, want, "{input:?}");
        }
    }

    #[test]
    fn eval_settings() {
        let text = "\
trusted_networks 10.0.0.0/8 !192.168.1.1
trusted_networks [2001:db8::]/32
internal_networks 10.1.
msa_networks 10.2.3.4
clear_msa_networks
originating_ip_headers X-Originating-IP X-SenderIP
originating_ip_headers x-originating-ip
envelope_sender_header X-Envelope-Sender
freemail_domains Yahoo.com mail.*.ru bad_dom@ain
freemail_whitelist friend@yahoo.com
util_rb_tld com uk
util_rb_tld UK
util_rb_2tld co.uk
whitelist_from *@Example.com friend@x.org
unwelcomelist_from friend@x.org
blacklist_to spam@x.org
enlist_addrlist (PAYPAL) *@paypal.com
def_whitelist_from_rcvd *@bank.com bank.com
welcomelist_from_rcvd a@b.c
";
        let config = parse_str("eval.cf", text).expect("parses");
        let ev = &config.eval;
        assert!(ev.trusted_networks.configured && ev.trusted_networks.loopback);
        assert_eq!(ev.trusted_networks.entries.len(), 3);
        assert!(ev.trusted_networks.entries.get(1).is_some_and(|r| r.exclude && r.prefix == 128));
        assert!(ev.internal_networks.configured && ev.internal_networks.entries.first().is_some_and(|r| r.prefix == 112));
        assert!(!ev.msa_networks.configured && ev.msa_networks.entries.is_empty());
        assert_eq!(ev.originating_ip_headers, ["X-Originating-IP", "X-SenderIP"]);
        assert_eq!(ev.envelope_sender_header.as_deref(), Some("X-Envelope-Sender"));
        assert_eq!(ev.freemail_domains, ["yahoo.com"]);
        assert_eq!(ev.freemail_domain_globs, ["mail.*.ru"]);
        assert_eq!(ev.freemail_welcomelist, ["friend@yahoo.com"]);
        assert_eq!((ev.util_rb_tld.len(), ev.util_rb_2tld.len()), (2, 1));
        let list = |name: &str| ev.addr_lists.iter().find(|l| l.name == name).map(|l| l.globs.clone());
        assert_eq!(list("welcomelist_from"), Some(vec![String::from("*@example.com")]));
        assert_eq!(list("blocklist_to"), Some(vec![String::from("spam@x.org")]));
        assert_eq!(list("PAYPAL"), Some(vec![String::from("*@paypal.com")]));
        assert_eq!(ev.def_welcomelist_from_rcvd.len(), 1);
        assert!(ev.welcomelist_from_rcvd.is_empty());
        // The bad freemail domain and the one-word welcomelist_from_rcvd are noted.
        assert!(has_note(&config, "invalid freemail_domains bad_dom@ain"), "{:?}", config.notes);
        assert!(has_note(&config, "welcomelist_from_rcvd: invalid value"), "{:?}", config.notes);
        assert_eq!(config.notes.len(), 2, "{:?}", config.notes);
    }

    #[test]
    fn default_rules_parse() {
        let config = parse_str("default.cf", crate::rules::DEFAULT_RULES).expect("parses");
        let gtube = rule(&config, "GTUBE");
        assert_eq!(gtube.score, Some([Score::points(1000); 4]));
        assert!(matches!(&gtube.kind, RuleKind::Body(p) if p.translated().is_ok()));
        assert!(!has_note(&config, "unknown directive"), "{:?}", config.notes);
    }

    #[test]
    fn lines_comments_and_whitespace() {
        let text = "body A /a\\#b/ # comment\r\n\t  body B /c/\r\n\r\n#body C /d/\n\\#body D /e/\nbody E /f\\\\#g/";
        let config = parse_str("t.cf", text).expect("parses");
        let perl: Vec<(&str, &str)> = config
            .rules
            .iter()
            .map(|r| match &r.kind {
                RuleKind::Body(p) => (r.name.as_str(), p.perl.as_str()),
                _ => ("?", "?"),
            })
            .collect();
        assert_eq!(perl, vec![("A", "/a#b/"), ("B", "/c/"), ("E", "/f\\#g/")]);
        assert_eq!(rule(&config, "B").origin.line, 2);
        assert!(has_note(&config, "unknown directive: #body D /e/"));
    }

    #[test]
    fn conditionals_table() {
        // (condition, rule defined)
        let rows: &[(&str, bool)] = &[
            ("version >= 4.000001", true),
            ("version > 4.000001", false),
            ("(version >= 3.004002)", true),
            ("!((version >= 3.004000))", false),
            ("perl_version >= 5.010", true),
            ("1", true),
            ("0", false),
            ("1 + 1 == 2", true),
            ("2 * 3 - 6", false),
            ("plugin(Mail::SpamAssassin::Plugin::Loaded)", true),
            ("plugin(Mail::SpamAssassin::Plugin::Other)", false),
            ("!plugin(Mail::SpamAssassin::Plugin::Other)", true),
            ("!(!plugin(Mail::SpamAssassin::Plugin::Loaded))", true),
            ("plugin(Mail::SpamAssassin::Plugin::RaciallyCharged)", true),
            ("can(Mail::SpamAssassin::Conf::feature_bug6558_free)", true),
            ("can(Mail::SpamAssassin::Conf::feature_nonexistent)", false),
            ("can(Mail::SpamAssassin::Conf::perl_min_version_5010000)", true),
            ("can(Mail::SpamAssassin::Conf::compat_welcomelist_blocklist)", false),
            ("can(Mail::SpamAssassin::Plugin::BodyEval::has_check_body_length)", true),
            ("can(Mail::SpamAssassin::Plugin::DKIM::has_arc)", false),
            ("has(Mail::SpamAssassin::Plugin::BodyEval::has_plaintext_body_sig_ratio)", true),
            ("can(NoColons)", false),
            ("version >= 4 && can(Mail::SpamAssassin::Conf::feature_geodb)", true),
            ("version >= 5 || local_tests_only", false),
            ("version >= 4 and not local_tests_only", true),
            ("version >= 5 or 1", true),
            ("bareword", false),
            ("(1", false),
            ("1 / 0", false),
            ("$x", false),
        ];
        for (cond, want) in rows {
            let text = format!(
                "loadplugin Mail::SpamAssassin::Plugin::Loaded\n\
                 loadplugin Mail::SpamAssassin::Plugin::BodyEval\n\
                 if {cond}\nbody R /x/\nendif\n"
            );
            let mut p = Parser::new();
            p.parse_file("c.cf", text.as_bytes(), &mut NoIncludes).expect("parses");
            let config = p.finish();
            assert_eq!(has_rule(&config, "R"), *want, "if {cond}: {:?}", config.notes);
        }
    }

    #[test]
    fn tokenize_table() {
        use Grammar::{Condition, Meta};
        let w = |s: &str| Token::Word(String::from(s));
        let (n, o) = (Token::Num, Token::Op);
        // (grammar, text, tokens or error)
        type Row = (Grammar, &'static str, Result<Vec<Token>, &'static str>);
        let rows: Vec<Row> = vec![
            (Condition, "version >= 3.004000", Ok(vec![w("version"), o(">="), n(3.004)])),
            (Condition, "can(Mail::SpamAssassin::Conf::x)", Ok(vec![w("can"), o("("), w("Mail::SpamAssassin::Conf::x"), o(")")])),
            (Condition, "not local_tests_only", Ok(vec![w("not"), w("local_tests_only")])),
            (Condition, "!=!<=<", Ok(vec![o("!="), o("!"), o("<="), o("<")])),
            (Condition, "2**3", Ok(vec![n(2.0), o("*"), o("*"), n(3.0)])),
            (Condition, "a->b", Ok(vec![w("a"), o("-"), o(">"), w("b")])),
            (Condition, ".5", Ok(vec![n(0.5)])),
            (Condition, ". 5", Err("bad number .")),
            (Condition, "1.2.3", Err("bad number 1.2.3")),
            (Condition, "$x", Err("unexpected character '$'")),
            (Meta, "A && (B || !C)", Ok(vec![w("A"), o("&&"), o("("), w("B"), o("||"), o("!"), w("C"), o(")")])),
            (Meta, "rules_matching( __FOO_* ) > 1", Ok(vec![w("rules_matching(__FOO_*)"), o(">"), n(1.0)])),
            (Meta, "rules_matching + 1", Ok(vec![w("rules_matching"), o("+"), n(1.0)])),
            (Meta, "local_tests_only", Ok(vec![n(0.0)])),
            (Meta, "9ABC", Ok(vec![n(9.0), w("ABC")])),
            (Meta, ".5 + A", Ok(vec![n(0.5), o("+"), w("A")])),
            (Meta, ". A", Err("operator '.' not supported")),
            (Meta, "1.2.3", Err("bad number 1.2.3")),
            (Meta, "A ^ B", Err("operator '^' not supported")),
            (Meta, "A ** 2", Err("** is not allowed")),
            (Meta, "can(Mail::X)", Err("invalid characters in meta expression")),
            (Meta, "A -> B", Err("invalid characters in meta expression")),
            (Meta, "A:B", Err("invalid token A")),
            (Meta, "rules_matching(A", Err("unterminated rules_matching(")),
            (Meta, "rules_matching(a b)", Err("invalid rules_matching glob a b")),
            (Meta, "rules_matching(1X)", Err("invalid rules_matching glob 1X")),
        ];
        for (grammar, text, want) in rows {
            assert_eq!(tokenize(text, grammar), want.map_err(String::from), "{grammar:?} {text:?}");
        }
    }

    #[test]
    fn conditionals_nesting_and_imbalance() {
        let text = "\
if 0
  if 1
    body A /a/
  else
    body B /b/
  endif
else
  body C /c/
endif
endif
else
ifplugin
if 1
  body D /d/
";
        let config = parse_str("n.cf", text).expect("parses");
        let names: Vec<&str> = config.rules.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, vec!["C", "D"]);
        assert!(has_note(&config, "endif without if"));
        assert!(has_note(&config, "else without if"));
        assert!(has_note(&config, "ifplugin without a condition"));
        assert!(config.notes.iter().any(|n| n.message == "unclosed if" && n.origin.line == 13));
        // An unclosed if ends with its file.
        let mut p = Parser::new();
        p.parse_file("a.cf", b"if 0\n", &mut NoIncludes).expect("parses");
        p.parse_file("b.cf", b"body E /e/\n", &mut NoIncludes).expect("parses");
        assert!(has_rule(&p.finish(), "E"));
    }

    #[test]
    fn lang_lines() {
        let text = "body A /a/\nlang de describe A Deutsch\nlang en describe A English\nlang en_US score A 2\nlang fr body B /b/\nlang e tflags A nice\n";
        let config = parse_str("l.cf", text).expect("parses");
        let a = rule(&config, "A");
        assert_eq!(a.describe.as_deref(), Some("English"));
        assert_eq!(a.score, Some([Score(2000); 4]));
        assert!(a.tflags.nice);
        assert!(!has_rule(&config, "B"));
        assert!(config.notes.is_empty(), "{:?}", config.notes);
    }

    #[test]
    fn redefinition_and_orphans() {
        let text = "\
score LATE 1.5
describe LATE defined later
body FIRST /one/
body LATE /late/
header FIRST Subject =~ /two/
score FIRST 1 2 3 4
score FIRST (0.5) (0) (-1) (0)
score NEVER 3
describe NEVER never defined
tflags FIRST multiple
tflags FIRST nice
";
        let config = parse_str("r.cf", text).expect("parses");
        let names: Vec<&str> = config.rules.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, vec!["FIRST", "LATE"]);
        let first = rule(&config, "FIRST");
        assert!(matches!(first.kind, RuleKind::Header(_)));
        assert_eq!(first.origin.line, 5);
        assert_eq!(first.score, Some([Score(1500), Score(2000), Score(2000), Score(4000)]));
        assert_eq!(first.tflags, TFlags { nice: true, ..TFlags::default() });
        let late = rule(&config, "LATE");
        assert_eq!(late.score, Some([Score(1500); 4]));
        assert_eq!(late.describe.as_deref(), Some("defined later"));
    }

    #[test]
    fn invalid_lines_table() {
        // (line, note fragment); none defines rule X.
        let rows: &[(&str, &str)] = &[
            ("body X /unterminated", "not a /regex/ literal"),
            ("body X", "missing value"),
            ("body X eval:", "invalid eval call"),
            ("body X eval:f(", "invalid eval call"),
            ("uri X eval:f()", "not a /regex/ literal"),
            ("header X Subject /x/", "invalid header test"),
            ("header X Subject:bogus =~ /x/", "invalid header modifier :bogus"),
            ("header X Subject =~", "invalid header test"),
            ("header X exists:Bad$Name", "invalid header name"),
            ("body 9X /x/", "invalid rule name"),
            ("body X-Y /x/", "invalid rule name"),
            ("meta X A ** 2", "** is not allowed"),
            ("meta X A * * 2", "** is not allowed"),
            ("meta X A::B", "invalid characters"),
            ("meta X $a", "invalid characters"),
            ("meta X A ^ B", "not supported"),
            ("meta X A ? B : C", "not supported"),
            ("meta X (A", "missing )"),
            ("meta X A B", "unexpected token"),
            ("meta X A > B > C", "chained comparison"),
            ("meta X 1.2.3", "bad number"),
            ("meta X rules_matching(", "unterminated"),
            ("mimeheader X Content-Type /x/", "invalid mimeheader test"),
            ("score X", "1 or 4 scores"),
            ("score X 1 2", "1 or 4 scores"),
            ("score X one", "non-numeric score"),
            ("score X .5", "non-numeric score"),
            ("score X (1)", "relative score without a previous score"),
            ("describe X", "missing value"),
            ("required_score lots", "invalid value"),
            ("report_safe 3", "invalid value"),
            ("add_header sometimes Foo bar", "expected spam, ham or all"),
            ("add_header all Foo", "invalid value"),
            ("remove_header all Bad:Name", "invalid value"),
            ("rewrite_header Cc x", "only Subject, From and To"),
            ("clear_headers now", "takes no value"),
            ("loadplugin Bad-Name", "invalid value"),
            ("enable_compat bad-flag", "invalid value"),
            ("include", "include without a file"),
            ("require_version 3.004000", "rest of the block skipped"),
        ];
        for (line, fragment) in rows {
            let text = format!("{line}\nbody Y /y/\n");
            let config = parse_str("i.cf", &text).expect("parses");
            assert!(!has_rule(&config, "X"), "{line}");
            assert!(has_note(&config, fragment), "{line}: {:?}", config.notes);
            let skipped = line.starts_with("require_version");
            assert_eq!(has_rule(&config, "Y"), !skipped, "{line}");
        }
    }

    #[test]
    fn header_modifiers_without_translation() {
        let text = "header A From:host =~ /example/\nheader B From:first:addr =~ /x/\nmimeheader C Content-Type !~ /x/\nmimeheader D Content-Type =~ /x/ [if-unset: y]\nuri E m{^https?://x/\\#%{GB_TO_ADDR}}i\n";
        let config = parse_str("m.cf", text).expect("parses");
        let reason = |name: &str| match &rule(&config, name).kind {
            RuleKind::Header(h) => matches(&h.test).translated().clone(),
            RuleKind::MimeHeader { pattern, .. } | RuleKind::Uri(pattern) => pattern.translated().clone(),
            other => panic!("{other:?}"),
        };
        let construct = |s: &str| Err(Unsupported::Construct(String::from(s)));
        assert_eq!(reason("A"), construct("header modifier :host"));
        assert_eq!(header(&config, "B").form, HeaderForm::Addr);
        assert_eq!(reason("B"), construct("header modifier :first"));
        assert_eq!(reason("C"), construct("negated mimeheader"));
        assert_eq!(reason("D"), construct("mimeheader if-unset"));
        assert_eq!(reason("E"), construct("capture template %{...}"));
    }

    #[test]
    fn replace_tags_like_spamassassin() {
        // Expected values produced by SpamAssassin 4.0.1's ReplaceTags on the same input.
        let text = "\
replace_tag A a
replace_tag B (?:b|bb)
replace_tag C <A>c
replace_inter W1 \\W?
replace_pre P1 x
replace_post P2 {1,2}
body R1 /<A><B>/i
body R2 /<inter W1><A><B>/
body R3 /<post P2><A><B> <C>/
body R4 /<pre P1><A> <B>/
body R5 /z<inter W1><A><B>/
body R6 /<A>/
header R7 Subject =~ /<post P2><inter W1><A><B>\\//i
body R8 /<Z><A>/
body R9 /<A>/
replace_rules R1 R2 R3 R4 R5 R6 R7 R8
";
        let config = parse_str("rt.cf", text).expect("parses");
        let rows: &[(&str, &str)] = &[
            ("R1", "/(?i)a(?:b|bb)/"),
            ("R2", "/a\\W?(?:b|bb)/"),
            ("R3", "/a{1,2}(?:b|bb){1,2} ac{1,2}/"),
            ("R4", "/xa x(?:b|bb)/"),
            ("R5", "/za\\W?(?:b|bb)/"),
            ("R6", "/a/"),
            ("R7", "/(?i)a{1,2}\\W?(?:b|bb){1,2}\\//"),
            ("R8", "/<Z>a/"),
            ("R9", "/<A>/"),
        ];
        for (name, want) in rows {
            let perl = match &rule(&config, name).kind {
                RuleKind::Body(p) => p.clone(),
                RuleKind::Header(h) => matches(&h.test).clone(),
                other => panic!("{other:?}"),
            };
            assert_eq!(perl.perl, *want, "{name}");
            assert_eq!(perl.translated(), perl::translate(want), "{name}");
        }
    }

    #[test]
    fn replace_tags_growth_is_bounded() {
        let text = format!("replace_tag A {}\nbody R /<A>/\nreplace_rules R\n", "<A>".repeat(100));
        let config = parse_str("g.cf", &text).expect("parses");
        match &rule(&config, "R").kind {
            RuleKind::Body(p) => {
                assert_eq!(p.translated(), Err(Unsupported::Construct(String::from("ReplaceTags expansion too long"))))
            }
            other => panic!("{other:?}"),
        }
        let many: String = (0..800).map(|i| format!("body R{i} /x/\nmeta M{i} rules_matching(R*)\n")).collect();
        let config = parse_str("m.cf", &many).expect("parses");
        assert!(matches!(&rule(&config, "M0").kind, RuleKind::Meta(MetaExpr::Binary(MetaOp::Add, ..))));
        assert!(matches!(&rule(&config, "M799").kind, RuleKind::Meta(MetaExpr::Number(_))));
        assert!(has_note(&config, "rules_matching(R*): too many rules or too much work"));
        assert!(has_tag("a<b>"));
        assert!(has_tag("<<b>"));
        assert!(!has_tag("<>"));
        assert!(!has_tag("<<<<"));
        assert!(!has_tag("a>b<"));
    }

    #[test]
    fn header_lists_follow_spamassassin() {
        let text = "\
add_header all Status _YESNO_
add_header spam Flag _YESNOCAPS_
add_header all Level _STARS(*)_
add_header ham Status ham-only
remove_header spam Level
remove_header all Checker-Version
";
        let config = parse_str("h.cf", text).expect("parses");
        let got: Vec<(AddHeaderWhen, &str)> = config.add_headers.iter().map(|h| (h.when, h.name.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (AddHeaderWhen::All, "Checker-Version"),
                (AddHeaderWhen::Spam, "Status"),
                (AddHeaderWhen::Spam, "Flag"),
                (AddHeaderWhen::Ham, "Level"),
                (AddHeaderWhen::Ham, "Status"),
            ]
        );
        let cleared = parse_str("c.cf", &format!("{text}clear_headers\nadd_header all X \\\\y\\z\\n")).expect("parses");
        let got: Vec<(AddHeaderWhen, &str, &str)> =
            cleared.add_headers.iter().map(|h| (h.when, h.name.as_str(), h.template.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (AddHeaderWhen::All, "Checker-Version", "SpamAssassin _VERSION_ (_SUBVERSION_) on _HOSTNAME_"),
                (AddHeaderWhen::All, "X", "\\y\n"),
            ]
        );
        let rewrite = parse_str("w.cf", "rewrite_header Subject [SPAM]\nrewrite_header subject\n").expect("parses");
        assert!(rewrite.rewrite_headers.is_empty());
    }

    struct MapIncluder(Vec<(&'static str, &'static str)>, Vec<String>);

    impl Includer for MapIncluder {
        fn read(&mut self, from: &str, path: &str) -> Result<Vec<u8>, String> {
            let target = join_path(from, path);
            self.1.push(target.clone());
            self.0
                .iter()
                .find(|(name, _)| *name == target)
                .map(|(_, text)| text.as_bytes().to_vec())
                .ok_or_else(|| format!("{target}: not found"))
        }
    }

    #[test]
    fn includes() {
        let mut includer = MapIncluder(
            vec![
                ("/etc/sa/sub/a.cf", "body A /a/\ninclude ../b.cf\ninclude a.cf\n"),
                ("/etc/sa/b.cf", "body B /b/\ninclude sub/a.cf\ninclude ./c.cf\n"),
                ("/etc/sa/c.cf", "if 0\ninclude missing.cf\nendif\nbody C /c/\n"),
                ("/etc/sa/self.cf", "include self2.cf\n"),
            ],
            Vec::new(),
        );
        let mut p = Parser::new();
        p.parse_file("/etc/sa/local.cf", b"include sub/a.cf\nbody L /l/\n", &mut includer).expect("parses");
        let config = p.finish();
        let names: Vec<(&str, &str, u32)> =
            config.rules.iter().map(|r| (r.name.as_str(), r.origin.file.as_str(), r.origin.line)).collect();
        assert_eq!(
            names,
            vec![
                ("A", "/etc/sa/sub/a.cf", 1),
                ("B", "/etc/sa/b.cf", 1),
                ("C", "/etc/sa/c.cf", 4),
                ("L", "/etc/sa/local.cf", 2)
            ]
        );
        assert_eq!(includer.1, vec!["/etc/sa/sub/a.cf", "/etc/sa/b.cf", "/etc/sa/c.cf"]);
        assert!(has_note(&config, "include sub/a.cf: file already read"));
        let mut p = Parser::new();
        let err = p.parse_file("/etc/sa/x.cf", b"body X /x/\ninclude nowhere.cf\n", &mut includer);
        assert_eq!(
            err,
            Err(ParseError::Include {
                file: String::from("/etc/sa/x.cf"),
                line: 2,
                reason: String::from("/etc/sa/nowhere.cf: not found")
            })
        );
        assert_eq!(
            parse_str("n.cf", "include x.cf\n").map(|_| ()).map_err(|e| e.to_string()),
            Err(String::from("n.cf:1: include x.cf: no file system"))
        );
    }

    /// An includer whose every file includes a new one.
    struct EndlessIncluder(u32);

    impl Includer for EndlessIncluder {
        fn read(&mut self, _from: &str, _path: &str) -> Result<Vec<u8>, String> {
            self.0 += 1;
            Ok(format!("include f{}.cf\n", self.0).into_bytes())
        }
    }

    #[test]
    fn include_depth_is_bounded() {
        let mut p = Parser::new();
        p.parse_file("top.cf", b"include f0.cf\n", &mut EndlessIncluder(0)).expect("parses");
        let config = p.finish();
        assert!(has_note(&config, "nested too deep"));
    }

    #[test]
    fn meta_depth_and_width() {
        let deep = format!("meta DEEP {}A{}", "(".repeat(65), ")".repeat(65));
        let ok = format!("meta OK {}A{}", "(".repeat(60), ")".repeat(60));
        let nots = format!("meta NOTS {}A", "!".repeat(100));
        let long_sum: Vec<String> = (0..5000).map(|i| format!("R{i}")).collect();
        let wide = format!("meta WIDE ({}) > 2", long_sum.join(" + "));
        let left_deep = format!("meta SUBS A{}", " - A".repeat(100));
        let text = format!("{deep}\n{ok}\n{nots}\n{wide}\n{left_deep}\n");
        let config = parse_str("d.cf", &text).expect("parses");
        assert!(!has_rule(&config, "DEEP"));
        assert!(has_rule(&config, "OK"));
        assert!(!has_rule(&config, "NOTS"));
        assert!(has_rule(&config, "WIDE"));
        assert!(!has_rule(&config, "SUBS"));
        assert_eq!(config.notes.iter().filter(|n| n.message.contains("deeper than 64")).count(), 3);
    }

    #[test]
    fn hostile_input_does_not_panic() {
        let mut junk: Vec<u8> = (0u8..=255).cycle().take(20_000).collect();
        junk.extend_from_slice(b"\nbody \xff\xfe /\xff/\nbody OK /\xe9t\xc3\xa9/\nheader H \xff =~ /x/\n");
        junk.extend_from_slice(&[b'a'; 100_000]);
        junk.extend_from_slice(b"\nbody LONG /");
        junk.extend(core::iter::repeat_n(b'(', 50_000));
        junk.extend_from_slice(b"/\nmeta M ");
        junk.extend(core::iter::repeat_n(b'(', 50_000));
        junk.extend_from_slice(b"\nif ");
        junk.extend(core::iter::repeat_n(b'(', 50_000));
        junk.extend_from_slice(b"\nendif\nif ");
        junk.extend(core::iter::repeat_n(b'!', 50_000));
        junk.extend_from_slice(b"1\nendif\n");
        let mut p = Parser::new();
        p.parse_file("junk.cf", &junk, &mut NoIncludes).expect("parses");
        let config = p.finish();
        match &rule(&config, "OK").kind {
            RuleKind::Body(p) => {
                assert_eq!(p.perl, "/\\xE9t\u{e9}/");
                assert_eq!(p.translated().as_deref(), Ok("\\xE9t\\xC3\\xA9"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(&rule(&config, "LONG").kind, RuleKind::Body(p) if p.translated().is_err()));
        assert!(!has_rule(&config, "M"));
        for note in &config.notes {
            assert!(note.message.chars().count() < 300, "note too long: {}", note.message.len());
        }
    }

    #[test]
    fn clean_lines_table() {
        // (raw line, cleaned, borrowed from the raw line)
        let rows: &[(&[u8], &[u8], bool)] = &[
            (b"  body X /a/  # comment", b"body X /a/", true),
            (b"# all comment", b"", true),
            (b"\t x \t", b"x", true),
            (b"a \\# b", b"a # b", false),
            (b"a\\#", b"a#", false),
            (b"\\#x  # note", b"#x", false),
            (b"a # b \\# c", b"a", true),
            // A `#` after a backslash is kept, and that `\#` unescaped.
            (b"body X /\\\\#/", b"body X /\\#/", false),
        ];
        for &(raw, want, borrowed) in rows {
            let got = clean_line(raw);
            assert_eq!((&*got, matches!(got, Cow::Borrowed(_))), (want, borrowed), "{:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn helpers() {
        assert_eq!(join_path("/a/b/c.cf", "d.cf"), "/a/b/d.cf");
        assert_eq!(join_path("/a/b/c.cf", "../d.cf"), "/a/d.cf");
        assert_eq!(join_path("/a/b/c.cf", "./x/./d.cf"), "/a/b/x/d.cf");
        assert_eq!(join_path("/a/b/c.cf", "/etc/e.cf"), "/etc/e.cf");
        assert_eq!(join_path("c.cf", "d.cf"), "d.cf");
        assert_eq!(join_path("c.cf", "../d.cf"), "../d.cf");
        assert!(glob_matches(b"__FOO_*", b"__FOO_1"));
        assert!(glob_matches(b"*_?", b"A_B"));
        assert!(!glob_matches(b"*_?", b"A_BC"));
        assert!(glob_matches(b"*", b""));
        assert!(!glob_matches(b"A", b"AB"));
        assert_eq!(split_if_unset("/x/ [if-unset: a b]"), ("/x/", Some("a b")));
        assert_eq!(split_if_unset("/x[if-unset: a]/"), ("/x[if-unset: a]/", None));
        assert_eq!(bytes_to_text(b"a\xffb\xc3\xa9"), "a\\xFFb\u{e9}");
        assert_eq!(bytes_to_text(b"\\\xff\\\\\xfe"), "\\xFF\\\\\\xFE");
        assert!(perl::has_capture_template("/a%{GB_TO_ADDR}/"));
        assert!(perl::has_capture_template("/a%{HDR(From)}/"));
        assert!(!perl::has_capture_template("/a\\%{GB}/"));
        assert!(!perl::has_capture_template("/a%{gb}/"));
        assert!(!perl::has_capture_template("/a%{GB__X}/"));
        assert_eq!(escape_slashes("a/b\\/c\\\\/"), "a\\/b\\/c\\\\\\/");
        assert_eq!(
            split_tags(b"<A><B>x"),
            vec![b"".to_vec(), b"<A>".to_vec(), b"".to_vec(), b"<B>".to_vec(), b"x".to_vec()]
        );
        assert_eq!(split_tags(b"x<A><B>"), vec![b"x".to_vec(), b"<A>".to_vec(), b"".to_vec(), b"<B>".to_vec()]);
        assert_eq!(split_tags(b"a<<b>>"), vec![b"a<".to_vec(), b"<b>".to_vec(), b">".to_vec()]);
    }
}
