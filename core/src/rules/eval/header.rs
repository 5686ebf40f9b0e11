//! Eval tests on headers, addresses and relays: SpamAssassin's HeaderEval,
//! RelayEval, FreeMail, WLBLEval, WelcomeListSubject and VBounce functions, and the
//! network functions (DNS lists, SPF, DKIM, Razor, ...) recognized and reported as
//! unavailable offline.
//!
//! Values are read the way SpamAssassin's `PerMsgStatus::get` gives them: a header
//! in scalar context is every instance's decoded value followed by `\n`, joined;
//! `:addr` in list context is every address of every instance.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use super::dates::{parse_rfc822_date, received_date};
use super::freemail::{body_freemails, FreemailData};
use super::re::{is_space, is_word, never, Patterns, Regex, Search};
use super::relays::{ReceivedParser, Relays};
use super::wlbl::{self, addr_matches_rcvd, glob_match, in_list, welcomelist_rcvd, AddrSet, Registry};
use super::{Args, EvalContext, EvalError};
use crate::msg::{self, Message};
use crate::rules::{AddrList, Config, EvalOn, HeaderField, NetList, RcvdEntry, RuleKind};
use crate::rules::cache::ProgramShelf;

/// A native header eval test.
#[derive(Debug, Clone)]
pub enum HeaderEval {
    /// A deprecated function SpamAssassin keeps as always false.
    Never,
    /// `check_all_trusted`
    AllTrusted,
    /// `check_no_relays`
    NoRelays,
    /// `check_relays_unparseable`
    RelaysUnparseable,
    /// `helo_ip_mismatch`
    HeloIpMismatch,
    /// `check_for_no_rdns_dotcom_helo`
    NoRdnsDotcomHelo,
    /// `check_for_forged_received_trail`
    ForgedReceivedTrail,
    /// `check_for_forged_received_ip_helo`
    ForgedReceivedIpHelo,
    /// `check_for_sender_no_reverse`
    SenderNoReverse,
    /// `check_for_numeric_helo`
    NumericHelo,
    /// `check_for_from_domain_in_received_headers(domain, desired)`
    FromDomainInReceived {
        /// The `From` test: `\b\Qdomain\E`, any case.
        from: Box<Regex>,
        /// The relays test with the domain interpolated as SpamAssassin does.
        relays: Box<Regex>,
        /// `desired` is `true`.
        desired: bool,
    },
    /// `check_mailfrom_matches_rcvd`
    MailfromMatchesRcvd,
    /// `check_for_fake_aol_relay_in_rcvd`
    FakeAolRelay,
    /// `check_for_faraway_charset_in_headers` with `ok_locales all`
    FarawayCharsetInHeaders,
    /// `check_illegal_chars(header, ratio, count)`
    IllegalChars {
        /// Header name, `ALL` for the whole header block.
        header: String,
        /// Minimum share of illegal bytes.
        ratio: f64,
        /// Minimum number of illegal bytes.
        count: f64,
    },
    /// `gated_through_received_hdr_remover`
    GatedThroughReceivedHdrRemover,
    /// `check_for_forged_hotmail_received_headers`
    ForgedHotmail,
    /// `check_for_no_hotmail_received_headers`
    NoHotmail,
    /// `check_for_msn_groups_headers`
    MsnGroups,
    /// `check_for_forged_eudoramail_received_headers`
    ForgedEudoramail,
    /// `check_for_forged_yahoo_received_headers`
    ForgedYahoo,
    /// `check_for_forged_juno_received_headers`
    ForgedJuno,
    /// `check_for_forged_gmail_received_headers`
    ForgedGmail,
    /// `check_for_forged_gw05_received_headers`
    ForgedGw05,
    /// `check_for_matching_env_and_hdr_from`
    MatchingEnvAndHdrFrom,
    /// `sorted_recipients`
    SortedRecipients,
    /// `similar_recipients(min, max)`
    SimilarRecipients {
        /// Lower bound (inclusive), `None` for `undef`.
        min: Option<f64>,
        /// Upper bound (exclusive), `None` for `undef`.
        max: Option<f64>,
    },
    /// `check_for_missing_to_header`
    MissingToHeader,
    /// `check_for_shifted_date(min, max)` in hours
    ShiftedDate {
        /// Lower bound (inclusive), `None` for `undef`.
        min: Option<f64>,
        /// Upper bound (exclusive), `None` for `undef`.
        max: Option<f64>,
    },
    /// `subject_is_all_caps`
    SubjectIsAllCaps,
    /// `check_for_to_in_subject('user')` (`true`) or `('address')`
    ToInSubject {
        /// The `user` form.
        user: bool,
    },
    /// `check_outlook_message_id`
    OutlookMessageId,
    /// `check_messageid_not_usable`
    MessageIdNotUsable,
    /// `check_header_count_range(header, min, max)`
    HeaderCountRange {
        /// Header name.
        header: String,
        /// Minimum count.
        min: f64,
        /// Maximum count.
        max: f64,
    },
    /// `check_unresolved_template`
    UnresolvedTemplate,
    /// `check_ratware_name_id`
    RatwareNameId,
    /// `check_ratware_envelope_from`
    RatwareEnvelopeFrom,
    /// `check_equal_from_domains`
    EqualFromDomains,
    /// `check_freemail_from([regex])`
    FreemailFrom(Option<Box<Regex>>),
    /// `check_freemail_header(header, [regex])`
    FreemailHeader {
        /// Header name (modifiers dropped).
        header: String,
        /// Only addresses matching it count.
        re: Option<Box<Regex>>,
    },
    /// `check_freemail_replyto(['replyto'|'reply'])`
    FreemailReplyto {
        /// The `reply` form.
        reply: bool,
    },
    /// `check_freemail_body([regex])`
    FreemailBody(Option<Box<Regex>>),
    /// `check_from_in_list(list)`, `check_from_in_blocklist` (`blocklist_from`)
    FromInList(String),
    /// `check_to_in_list(list)`, `check_to_in_blocklist`, `check_to_in_welcomelist`, ...
    ToInList(String),
    /// `check_replyto_in_list(list)`
    ReplytoInList(String),
    /// `check_from_in_welcomelist`
    FromInWelcomelist,
    /// `check_forged_in_welcomelist`
    ForgedInWelcomelist,
    /// `check_from_in_default_welcomelist`
    FromInDefaultWelcomelist,
    /// `check_forged_in_default_welcomelist`
    ForgedInDefaultWelcomelist,
    /// `check_subject_in_welcomelist` (`true`) or `check_subject_in_blocklist`
    SubjectInList {
        /// The welcome list.
        welcome: bool,
    },
}

/// Functions of SpamAssassin plugins that need the network, a learned database or an
/// external program, with what they need.
const UNAVAILABLE: &[(&str, &str)] = &[
    ("check_rbl", "network test (DNS blocklist)"),
    ("check_rbl_sub", "network test (DNS blocklist)"),
    ("check_rbl_txt", "network test (DNS blocklist)"),
    ("check_rbl_results_for", "network test (DNS blocklist)"),
    ("check_rbl_from_host", "network test (DNS blocklist)"),
    ("check_rbl_from_domain", "network test (DNS blocklist)"),
    ("check_rbl_envfrom", "network test (DNS blocklist)"),
    ("check_rbl_headers", "network test (DNS blocklist)"),
    ("check_rbl_ns_from", "network test (DNS blocklist)"),
    ("check_rbl_rcvd", "network test (DNS blocklist)"),
    ("check_dns_sender", "network test (DNS)"),
    ("check_uridnsbl", "network test (URI DNS blocklist)"),
    ("check_uribl", "network test (URI DNS blocklist)"),
    ("check_hashbl_bodyre", "network test (hash DNS blocklist)"),
    ("check_hashbl_emails", "network test (hash DNS blocklist)"),
    ("check_hashbl_uris", "network test (hash DNS blocklist)"),
    ("check_hashbl_attachments", "network test (hash DNS blocklist)"),
    ("check_razor2", "network test (Razor2)"),
    ("check_razor2_range", "network test (Razor2)"),
    ("check_pyzor", "network test (Pyzor)"),
    ("check_dcc", "network test (DCC)"),
    ("check_dcc_reputation_range", "network test (DCC)"),
    ("check_senders_reputation", "needs the TxRep reputation database"),
    ("check_from_in_auto_welcomelist", "needs the auto-welcomelist database"),
    ("check_from_in_auto_whitelist", "needs the auto-welcomelist database"),
    ("check_bayes", "needs Bayes learning (off in score set 0)"),
    ("check_dmarc_pass", "network test (DMARC needs DKIM and SPF)"),
    ("check_dmarc_reject", "network test (DMARC needs DKIM and SPF)"),
    ("check_dmarc_quarantine", "network test (DMARC needs DKIM and SPF)"),
    ("check_dmarc_none", "network test (DMARC needs DKIM and SPF)"),
    ("check_dmarc_missing", "network test (DMARC needs DKIM and SPF)"),
    ("check_arc_signed", "network test (ARC/DKIM keys from DNS)"),
    ("check_arc_valid", "network test (ARC/DKIM keys from DNS)"),
    ("check_dkim_adsp", "network test (DKIM keys and policies from DNS)"),
    ("check_dkim_dependable", "network test (DKIM keys from DNS)"),
    ("check_dkim_signall", "network test (DKIM policies from DNS)"),
    ("check_dkim_signed", "network test (DKIM signatures need keys from DNS)"),
    ("check_dkim_signsome", "network test (DKIM policies from DNS)"),
    ("check_dkim_testing", "network test (DKIM keys from DNS)"),
    ("check_dkim_valid", "network test (DKIM keys from DNS)"),
    ("check_dkim_valid_author_sig", "network test (DKIM keys from DNS)"),
    ("check_dkim_valid_envelopefrom", "network test (DKIM keys from DNS)"),
    ("check_for_dkim_welcomelist_from", "network test (DKIM keys from DNS)"),
    ("check_for_dkim_whitelist_from", "network test (DKIM keys from DNS)"),
    ("check_for_def_dkim_welcomelist_from", "network test (DKIM keys from DNS)"),
    ("check_for_def_dkim_whitelist_from", "network test (DKIM keys from DNS)"),
    ("check_for_spf_pass", "network test (SPF)"),
    ("check_for_spf_neutral", "network test (SPF)"),
    ("check_for_spf_none", "network test (SPF)"),
    ("check_for_spf_fail", "network test (SPF)"),
    ("check_for_spf_softfail", "network test (SPF)"),
    ("check_for_spf_permerror", "network test (SPF)"),
    ("check_for_spf_temperror", "network test (SPF)"),
    ("check_for_spf_helo_pass", "network test (SPF)"),
    ("check_for_spf_helo_neutral", "network test (SPF)"),
    ("check_for_spf_helo_none", "network test (SPF)"),
    ("check_for_spf_helo_fail", "network test (SPF)"),
    ("check_for_spf_helo_softfail", "network test (SPF)"),
    ("check_for_spf_helo_permerror", "network test (SPF)"),
    ("check_for_spf_helo_temperror", "network test (SPF)"),
    ("check_for_spf_welcomelist_from", "network test (SPF)"),
    ("check_for_spf_whitelist_from", "network test (SPF)"),
    ("check_for_def_spf_welcomelist_from", "network test (SPF)"),
    ("check_for_def_spf_whitelist_from", "network test (SPF)"),
    ("check_asn", "network test (ASN lookups)"),
    ("check_phishing", "needs downloaded phishing feeds"),
    ("short_url", "network test (short URL redirections)"),
    ("short_url_chained", "network test (short URL redirections)"),
    ("short_url_200", "network test (short URL redirections)"),
    ("short_url_404", "network test (short URL redirections)"),
    ("short_url_code", "network test (short URL redirections)"),
    ("check_access_database", "needs an access database file"),
];

macro_rules! fixed_patterns {
    ($( $name:ident = $icase:literal $pat:literal; )*) => {
        /// Indexes of [`FIXED`].
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy)]
        #[repr(usize)]
        enum X { $($name,)* }
        /// The fixed patterns of the header tests, `(pattern, /i)`, in [`X`] order.
        const FIXED: &[(&str, bool)] = &[ $(($pat, $icase),)* ];
    };
}

fixed_patterns! {
    AolRly = true r" rly-[a-z][a-z]\d\d\.";
    AolRelayVia = false r"/AOL-\d+\.\d+\.\d+\)";
    AolEsmtp = false r"ESMTP id (?:RELAY|MAILRELAY|MAILIN)";
    Ezmlm = false r"^contact \S+\@\S+\; run by ezmlm$";
    MailingListTo = false r"^mailing list \S+\@\S+";
    QmailInvoked = false r"qmail \d+ invoked (?:from network|by .{3,20})\); \d+ ... \d+";
    MsnGroupsRcvd = false r"from groups\.msn\.com \(\S+\.msn\.com ";
    HotmailPickup = false r"from mail pickup service by hotmail\.com with Microsoft SMTPSVC;";
    AnyIp = false r"(?&IP)";
    HotmailOrig = false r"hotmail\.com|msonline\-outlook";
    Hotmail1 = false r"from (?:\S*\.)?hotmail.com \(\S+\.hotmail(?:\.msn)?\.com[ \)]";
    Hotmail2 = false r"from \S*\.outbound\.protection\.outlook\.com \(\S+\.outbound\.protection\.outlook\.com[ \)]";
    Hotmail3 = false r"from \S*\.(?:eur|nam)prd\d+\.prod\.outlook\.com \((?&IP)\)";
    Hotmail4 = false r"from \S*\.hotmail.com \(\[(?&IP)\][ \):]";
    Hotmail5 = false r"from \S+ by \S+\.hotmail(?:\.msn)?\.com with HTTP\;";
    Hotmail6 = false r"from \[66\.218.\S+\] by \S+\.yahoo\.com";
    HotmailHelo = false r"(?:from |HELO |helo=)\S*hotmail\.com\b";
    FromHotmail = true r"\bhotmail\.com$";
    MsnGroupsTo = true r"<(\S+)\@groups\.msn\.com>";
    MsnPickup = false r"from mail pickup service by ((?:p\d\d\.)groups\.msn\.com)\b";
    FromEudoramail = true r"\beudoramail\.com$";
    Whowhere = false r"by \S*whowhere.com\;";
    FromYahoo = true r"\byahoo\.com$";
    YahooTrusted = false r" rdns=\S+\.yahoo\.com ";
    YahooUntrusted = false r"^[^\]]+ rdns=\S+\.yahoo\.com ";
    Yahoo1 = false r"by web\S+\.mail\S*\.yahoo\.com via HTTP";
    Yahoo2 = false r"by sonic\S+\.consmr\.mail\S*\.yahoo\.com with HTTP";
    Yahoo3 = false r"by smtp\S+\.yahoo\.com with SMTP";
    Yahoo4 = false r"from \[(?&IP)\] by \S+\.(?:groups|scd|dcn)\.yahoo\.com with NNFMP";
    YahooBulk = false r"\bmailer\d+\.bulk\.scd\.yahoo\.com\b";
    FromReplyYahoo = true r"\@reply\.yahoo\.com$";
    YahooStory = false r"by \w+\.\w+\.yahoo\.com \(\d+\.\d+\.\d+/\d+\.\d+\.\d+\)(?: with ESMTP)? id \w+";
    FromJuno = true r"\bjuno\.com$";
    Juno1 = false r"from.*\b(?:juno|untd)\.com.*[\[\(](?&IP)[\]\)].*by";
    Juno2 = false r" cookie\.(?:juno|untd)\.com ";
    Juno3 = false r"from.*\bmail\.com.*\[(?&IP)\].*by";
    Juno4 = false r"from (webmail\S+\.untd\.com) \(\1 \[(?&IP)\]\) by";
    MailerMailCom = false r"\bmail\.com";
    MailerWebmail = false r"^Webmail Version \d";
    FromGmail = true r"\bgmail\.com$";
    GmailXr1 = false r"by 10\.\S+ with SMTP id \S+";
    GmailXr2 = false r"by 2002\:a\d\d\:\w+\:\S+ with SMTP id \S+";
    GmailRcvd = false r"by smtp\.googlemail\.com with ESMTPSA id \S+";
    Gw05 = false r"\nfrom\s(\S+)\sby\s(\S+)\swith\sESMTP\;\s+\S\S\S,\s+\d+\s+\S\S\S\s+\d{4}\s+\d\d:\d\d:\d\d\s+[-+]*\d{4}\n$";
    DotcomHelo = true r"(?:\.|^)(lycos\.com|lycos\.co\.uk|hotmail\.com|localhost\.com|excite\.com|caramail\.com|cs\.com|aol\.com|msn\.com|yahoo\.com|drizzle\.com)$";
    NumericHelo = true r"\bhelo=((?&IPV4))(?=[\x00- ,;\[()<>]|\z)";
    ListUnsub = true r"<mailto:(?:leave-\S+|\S+-unsubscribe)\@\S+>$";
    CwtDce = false r"/CWT/DCE\)";
    IPlanet = false r"iPlanet Messaging Server";
    Template = false r"%[A-Z][A-Z_-]";
    TemplateOk = true r"^(?:X-VMS-To|X-UIDL|X-Face|To|Cc|From|Subject|References|In-Reply-To|(?:X-|Resent-|X-Original-)?Message-Id):";
    OutlookId = false r"^<[0-9a-f]{4}([0-9a-f]{8})\$[0-9a-f]{8}\$[0-9a-f]{8}\@";
    RatwareId = false r"<[A-Z]{28}\.([^>]+?)>";
    Srs = true r"^SRS\d[=+-]";
    CapsCharset = true r"=\?[-_a-z0-9]*(?:koi|jp|jis|euc|gb|big5|isoir|cp1251|windows-1251|georgianps|pt154|tis)[-_a-z0-9]*\?";
    SubjectPrefix = true r"^(?:(?:Re|Fwd|Fw|Aw|Antwort|WG|SV|VB|VS|VL):\s*)+";
    ForgedBy = false r"^\w+(?:[\w.-]+\.)+\w+$";
    LocalhostName = false r"^localhost(?:\.localdomain)?$";
    DottedQuad = false r"^\d+\.\d+\.\d+\.\d+$";
    FetchmailLocal = false r"\bfrom (?:localhost\s|(?:\S+ ){1,2}\S*\b127\.0\.0\.1\b)";
    QmailUid = false r"qmail \d+ invoked by uid \d+";
    FetchmailBy = false r"\bby localhost with \w+ \(fetchmail-[\d.]+";
    RcvdFor = false r" for <?(\S+\@(\S+?))>?;";
}

/// The fixed patterns, compiled once per rule set.
#[derive(Debug, Clone)]
pub struct HeaderPatterns {
    fixed: Vec<Regex>,
    /// `IS_IP_PRIVATE`, `IS_IPV4_ADDRESS` and the sub-patterns.
    pub family: Patterns,
    is_ip_private: Regex,
}

/// Patterns that match nothing: a placeholder, cheap to make.
impl Default for HeaderPatterns {
    fn default() -> Self {
        HeaderPatterns { fixed: Vec::new(), family: Patterns::default(), is_ip_private: never() }
    }
}

impl HeaderPatterns {
    fn new(shelf: &mut ProgramShelf) -> HeaderPatterns {
        let family = Patterns::with_programs(shelf);
        let fixed = FIXED.iter().map(|(p, icase)| family.fixed_from(p, *icase, shelf)).collect();
        let is_ip_private = family.fixed_from(r"^(?:(?&PRIVATE))$", false, shelf);
        HeaderPatterns { fixed, family, is_ip_private }
    }

    fn get(&self, x: X) -> &Regex {
        self.fixed.get(x as usize).unwrap_or(&self.is_ip_private)
    }

    #[cfg(test)]
    fn broken() -> Vec<&'static str> {
        let family = Patterns::new();
        FIXED.iter().filter(|(p, icase)| family.compile(p, *icase).is_err()).map(|(p, _)| *p).collect()
    }
}

/// What header tests read from the rule files.
#[derive(Debug, Clone, Default)]
pub struct HeaderData {
    /// The compiled Received formats and IP patterns.
    pub received: ReceivedParser,
    /// Where the trust boundary lies.
    pub trust: Trust,
    /// `originating_ip_headers`.
    pub originating_ip_headers: Vec<String>,
    /// `envelope_sender_header`.
    pub envelope_sender_header: Option<String>,
    /// Registry boundaries (`util_rb_*tld`).
    pub registry: Registry,
    /// `freemail_domains` and friends.
    pub freemail: FreemailData,
    /// Named address lists.
    pub lists: Vec<AddrList>,
    /// `welcomelist_from_rcvd`.
    pub welcomelist_from_rcvd: Vec<RcvdEntry>,
    /// `def_welcomelist_from_rcvd`.
    pub def_welcomelist_from_rcvd: Vec<RcvdEntry>,
    /// `ok_locales` allows every charset.
    pub all_locales: bool,
    /// The fixed patterns of the tests.
    pub patterns: HeaderPatterns,
    /// Some rule reads relays, the envelope sender or a pseudo-header: the
    /// `Received` chain is parsed for every message (otherwise it is skipped).
    pub needs_relays: bool,
}

/// `trusted_networks`, `internal_networks` and `msa_networks`.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    /// `trusted_networks`.
    pub trusted: NetList,
    /// `internal_networks`.
    pub internal: NetList,
    /// `msa_networks`.
    pub msa: NetList,
}

impl HeaderData {
    /// Prepares header-test data from `config`.
    pub fn new(config: &Config) -> HeaderData {
        HeaderData::with_programs(config, &mut ProgramShelf::default())
    }

    /// [`HeaderData::new`], taking compiled programs from `shelf`.
    pub(crate) fn with_programs(config: &Config, shelf: &mut ProgramShelf) -> HeaderData {
        let ev = &config.eval;
        let patterns = HeaderPatterns::new(shelf);
        let freemail = FreemailData::with_programs(ev, &patterns.family, shelf);
        HeaderData {
            received: ReceivedParser::with(patterns.family.clone(), shelf),
            trust: Trust {
                trusted: ev.trusted_networks.clone(),
                internal: ev.internal_networks.clone(),
                msa: ev.msa_networks.clone(),
            },
            originating_ip_headers: ev.originating_ip_headers.clone(),
            envelope_sender_header: ev.envelope_sender_header.clone(),
            registry: Registry::new(ev),
            freemail,
            lists: ev.addr_lists.clone(),
            welcomelist_from_rcvd: ev.welcomelist_from_rcvd.clone(),
            def_welcomelist_from_rcvd: ev.def_welcomelist_from_rcvd.clone(),
            all_locales: ev.ok_locales.as_deref().is_none_or(|l| l.split_ascii_whitespace().any(|w| w == "all")),
            patterns,
            needs_relays: true,
        }
        .with_needs(config)
    }

    /// Whether any rule of `config` reads what the relays give.
    fn with_needs(mut self, config: &Config) -> HeaderData {
        self.needs_relays = config.rules.iter().any(|r| match &r.kind {
            RuleKind::Header(h) => {
                matches!(&h.field, HeaderField::Named(n) if super::relays::is_pseudo_header(n.as_bytes()))
            }
            RuleKind::Eval { on, function, args } => super::parse_args(args)
                .ok()
                .and_then(|a| HeaderEval::parse(*on, function, &a, &self))
                .is_some_and(|t| !matches!(t, Ok(HeaderEval::Never) | Err(_))),
            _ => false,
        });
        self
    }

    fn list(&self, name: &str) -> Option<&AddrList> {
        wlbl::list(&self.lists, name)
    }
}

/// A value computed once per message, tagged with the message it belongs to.
#[derive(Debug, Default, Clone, Copy)]
struct Cached<T> {
    generation: u64,
    value: Option<T>,
}

impl<T: Copy> Cached<T> {
    /// The value when it belongs to message `generation`.
    fn fresh(&self, generation: u64) -> Option<T> {
        if self.generation == generation {
            self.value
        } else {
            None
        }
    }

    fn set(&mut self, generation: u64, value: T) -> T {
        *self = Cached { generation, value: Some(value) };
        value
    }
}

/// Header tests' per-worker buffers.
#[derive(Debug, Default)]
pub struct HeaderScratch {
    search: Search,
    a: Vec<u8>,
    b: Vec<u8>,
    addrs: AddrSet,
    addrs2: AddrSet,
    /// `all_from_addrs` of the message `from_generation`, which four tests read.
    from_addrs: AddrSet,
    from_generation: u64,
    body_emails: AddrSet,
    body_freemails: AddrSet,
    date_diff: Cached<i64>,
    recipients: Cached<(bool, f64)>,
    hotmail: Cached<(bool, bool)>,
    gated: Cached<bool>,
    forged: Cached<(u32, u32)>,
    welcomelisted: Cached<i32>,
    default_welcomelisted: Cached<i32>,
    body_generation: u64,
    body_usable: bool,
    /// The message [`HeaderScratch::search`]'s allowance was set for.
    steps_generation: u64,
}

/// Matcher steps the header tests of one message may take together (real mail takes
/// a small fraction); past it their patterns report no match.
pub const EVAL_STEPS: u64 = 4_000_000;

fn parse_bound(function: &str, v: &str) -> Result<Option<f64>, EvalError> {
    if v == "undef" {
        return Ok(None);
    }
    v.trim()
        .parse::<f64>()
        .map(Some)
        .map_err(|_| EvalError::BadArguments { function: function.into(), why: alloc::format!("not a number: {v}") })
}

fn bad(function: &str, why: &str) -> EvalError {
    EvalError::BadArguments { function: function.into(), why: why.into() }
}

/// A header name with its `:modifiers` removed.
fn bare_header(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

impl HeaderEval {
    /// The test for `function(args)`; `None` when the function is not a header test.
    pub fn parse(on: EvalOn, function: &str, args: &Args, data: &HeaderData) -> Option<Result<HeaderEval, EvalError>> {
        let _ = on;
        if let Some(&(_, why)) = UNAVAILABLE.iter().find(|(f, _)| *f == function) {
            return Some(Err(EvalError::Unavailable { function: function.into(), why }));
        }
        let arg = |k: usize| args.get(k).map(String::as_str);
        let pats = &data.patterns.family;
        let regex_arg = |k: usize| -> Result<Option<Box<Regex>>, EvalError> {
            match arg(k) {
                None => Ok(None),
                Some(p) => pats
                    .compile(p, false)
                    .map(|r| Some(Box::new(r)))
                    .map_err(|e| bad(function, &alloc::format!("regex {p}: {e}"))),
            }
        };
        let list_arg = || -> Result<String, EvalError> {
            arg(0).map(String::from).ok_or_else(|| bad(function, "needs a list name"))
        };
        let test = match function {
            "check_for_unique_subject_id" | "check_for_illegal_ip" => Ok(HeaderEval::Never),
            "check_all_trusted" => Ok(HeaderEval::AllTrusted),
            "check_no_relays" => Ok(HeaderEval::NoRelays),
            "check_relays_unparseable" => Ok(HeaderEval::RelaysUnparseable),
            "helo_ip_mismatch" => Ok(HeaderEval::HeloIpMismatch),
            "check_for_no_rdns_dotcom_helo" => Ok(HeaderEval::NoRdnsDotcomHelo),
            "check_for_forged_received_trail" => Ok(HeaderEval::ForgedReceivedTrail),
            "check_for_forged_received_ip_helo" => Ok(HeaderEval::ForgedReceivedIpHelo),
            "check_for_sender_no_reverse" => Ok(HeaderEval::SenderNoReverse),
            "check_for_numeric_helo" => Ok(HeaderEval::NumericHelo),
            "check_for_from_domain_in_received_headers" => (|| {
                let domain = arg(0).ok_or_else(|| bad(function, "needs a domain"))?;
                let desired = arg(1).ok_or_else(|| bad(function, "needs 'true' or 'false'"))? == "true";
                let quoted = super::re::quote(domain.as_bytes());
                let from = pats
                    .compile(&alloc::format!(r"\b{quoted}"), true)
                    .map_err(|e| bad(function, &alloc::format!("{e}")))?;
                let relays = pats
                    .compile(&alloc::format!(r" rdns=\S*\b{domain} [^\]]*by=\S*\b{domain} "), false)
                    .map_err(|e| bad(function, &alloc::format!("domain {domain}: {e}")))?;
                Ok(HeaderEval::FromDomainInReceived { from: Box::new(from), relays: Box::new(relays), desired })
            })(),
            "check_mailfrom_matches_rcvd" => Ok(HeaderEval::MailfromMatchesRcvd),
            "check_for_fake_aol_relay_in_rcvd" => Ok(HeaderEval::FakeAolRelay),
            "check_for_faraway_charset_in_headers" => {
                if data.all_locales {
                    Ok(HeaderEval::FarawayCharsetInHeaders)
                } else {
                    Err(bad(function, "ok_locales other than 'all' not supported"))
                }
            }
            "check_illegal_chars" => (|| {
                let header = arg(0).ok_or_else(|| bad(function, "needs a header"))?;
                let ratio = parse_bound(function, arg(1).unwrap_or("0"))?.unwrap_or(0.0);
                let count = parse_bound(function, arg(2).unwrap_or("0"))?.unwrap_or(0.0);
                Ok(HeaderEval::IllegalChars {
                    header: String::from(header.strip_suffix(":raw").unwrap_or(header)),
                    ratio,
                    count,
                })
            })(),
            "gated_through_received_hdr_remover" => Ok(HeaderEval::GatedThroughReceivedHdrRemover),
            "check_for_forged_hotmail_received_headers" => Ok(HeaderEval::ForgedHotmail),
            "check_for_no_hotmail_received_headers" => Ok(HeaderEval::NoHotmail),
            "check_for_msn_groups_headers" => Ok(HeaderEval::MsnGroups),
            "check_for_forged_eudoramail_received_headers" => Ok(HeaderEval::ForgedEudoramail),
            "check_for_forged_yahoo_received_headers" => Ok(HeaderEval::ForgedYahoo),
            "check_for_forged_juno_received_headers" => Ok(HeaderEval::ForgedJuno),
            "check_for_forged_gmail_received_headers" => Ok(HeaderEval::ForgedGmail),
            "check_for_forged_gw05_received_headers" => Ok(HeaderEval::ForgedGw05),
            "check_for_matching_env_and_hdr_from" => Ok(HeaderEval::MatchingEnvAndHdrFrom),
            "sorted_recipients" => Ok(HeaderEval::SortedRecipients),
            "similar_recipients" => (|| {
                let min = parse_bound(function, arg(0).unwrap_or("undef"))?;
                let max = parse_bound(function, arg(1).unwrap_or("undef"))?;
                Ok(HeaderEval::SimilarRecipients { min, max })
            })(),
            "check_for_missing_to_header" => Ok(HeaderEval::MissingToHeader),
            "check_for_shifted_date" => (|| {
                let min = parse_bound(function, arg(0).unwrap_or("undef"))?;
                let max = parse_bound(function, arg(1).unwrap_or("undef"))?;
                Ok(HeaderEval::ShiftedDate { min, max })
            })(),
            "subject_is_all_caps" => Ok(HeaderEval::SubjectIsAllCaps),
            "check_for_to_in_subject" => match arg(0) {
                Some("user") => Ok(HeaderEval::ToInSubject { user: true }),
                Some("address") => Ok(HeaderEval::ToInSubject { user: false }),
                _ => Ok(HeaderEval::Never),
            },
            "check_outlook_message_id" => Ok(HeaderEval::OutlookMessageId),
            "check_messageid_not_usable" => Ok(HeaderEval::MessageIdNotUsable),
            "check_header_count_range" => (|| {
                let header = arg(0).ok_or_else(|| bad(function, "needs a header"))?;
                let min = parse_bound(function, arg(1).unwrap_or("0"))?.unwrap_or(0.0);
                let max = parse_bound(function, arg(2).unwrap_or("0"))?.unwrap_or(0.0);
                Ok(HeaderEval::HeaderCountRange { header: String::from(header), min, max })
            })(),
            "check_unresolved_template" => Ok(HeaderEval::UnresolvedTemplate),
            "check_ratware_name_id" => Ok(HeaderEval::RatwareNameId),
            "check_ratware_envelope_from" => Ok(HeaderEval::RatwareEnvelopeFrom),
            "check_equal_from_domains" => Ok(HeaderEval::EqualFromDomains),
            "check_freemail_from" => regex_arg(0).map(HeaderEval::FreemailFrom),
            "check_freemail_header" => (|| {
                let header = arg(0).ok_or_else(|| bad(function, "needs a header"))?;
                Ok(HeaderEval::FreemailHeader { header: String::from(bare_header(header)), re: regex_arg(1)? })
            })(),
            "check_freemail_replyto" => match arg(0) {
                None | Some("replyto") => Ok(HeaderEval::FreemailReplyto { reply: false }),
                Some("reply") => Ok(HeaderEval::FreemailReplyto { reply: true }),
                Some(_) => Ok(HeaderEval::Never),
            },
            "check_freemail_body" => regex_arg(0).map(HeaderEval::FreemailBody),
            "check_from_in_list" => list_arg().map(HeaderEval::FromInList),
            "check_to_in_list" => list_arg().map(HeaderEval::ToInList),
            "check_replyto_in_list" => list_arg().map(HeaderEval::ReplytoInList),
            "check_from_in_blocklist" | "check_from_in_blacklist" => {
                Ok(HeaderEval::FromInList("blocklist_from".into()))
            }
            "check_to_in_blocklist" | "check_to_in_blacklist" => Ok(HeaderEval::ToInList("blocklist_to".into())),
            "check_to_in_welcomelist" | "check_to_in_whitelist" => Ok(HeaderEval::ToInList("welcomelist_to".into())),
            "check_to_in_more_spam" => Ok(HeaderEval::ToInList("more_spam_to".into())),
            "check_to_in_all_spam" => Ok(HeaderEval::ToInList("all_spam_to".into())),
            "check_from_in_welcomelist" | "check_from_in_whitelist" => Ok(HeaderEval::FromInWelcomelist),
            "check_forged_in_welcomelist" | "check_forged_in_whitelist" => Ok(HeaderEval::ForgedInWelcomelist),
            "check_from_in_default_welcomelist" | "check_from_in_default_whitelist" => {
                Ok(HeaderEval::FromInDefaultWelcomelist)
            }
            "check_forged_in_default_welcomelist" | "check_forged_in_default_whitelist" => {
                Ok(HeaderEval::ForgedInDefaultWelcomelist)
            }
            "check_subject_in_welcomelist" | "check_subject_in_whitelist" => {
                Ok(HeaderEval::SubjectInList { welcome: true })
            }
            "check_subject_in_blocklist" | "check_subject_in_blacklist" => {
                Ok(HeaderEval::SubjectInList { welcome: false })
            }
            "have_any_bounce_relays" | "check_welcomelist_bounce_relays" | "check_whitelist_bounce_relays" => {
                if data.list("welcomelist_bounce_relays").is_some_and(|l| !l.globs.is_empty()) {
                    Err(bad(function, "welcomelist_bounce_relays set: bounce detection not implemented"))
                } else {
                    Ok(HeaderEval::Never)
                }
            }
            _ => return None,
        };
        Some(test)
    }

    /// Hits of this test on the message in `cx`.
    pub fn run(&self, cx: &EvalContext<'_, '_>, scratch: &mut HeaderScratch) -> u32 {
        u32::from(self.hit(cx, scratch))
    }

    fn hit(&self, cx: &EvalContext<'_, '_>, s: &mut HeaderScratch) -> bool {
        let m = cx.message;
        let relays = cx.relays;
        let data = &cx.data.header;
        let pats = &data.patterns;
        let generation = relays.generation();
        if s.steps_generation != generation {
            s.steps_generation = generation;
            s.search.allow(EVAL_STEPS);
        }
        match self {
            HeaderEval::Never => false,
            HeaderEval::AllTrusted => {
                relays.num_trusted() > 0 && relays.num_untrusted() == 0 && relays.num_unparseable() == 0
            }
            HeaderEval::NoRelays => {
                relays.num_trusted() == 0 && relays.num_untrusted() == 0 && relays.num_unparseable() == 0
            }
            HeaderEval::RelaysUnparseable => relays.num_unparseable() > 0,
            HeaderEval::HeloIpMismatch => helo_ip_mismatch(relays, pats, &mut s.search),
            HeaderEval::NoRdnsDotcomHelo => no_rdns_dotcom_helo(relays, pats, &mut s.search),
            HeaderEval::ForgedReceivedTrail | HeaderEval::ForgedReceivedIpHelo => {
                let (from, ip_helo) = match s.forged.fresh(generation) {
                    Some(v) => v,
                    None => {
                        let v = forged_received(relays, pats, &mut s.search);
                        s.forged.set(generation, v)
                    }
                };
                if matches!(self, HeaderEval::ForgedReceivedTrail) {
                    from > 1
                } else {
                    ip_helo > 0
                }
            }
            HeaderEval::SenderNoReverse => {
                relays.untrusted().last().is_some_and(|r| r.rdns.contains(&b'.') && !r.ip_private)
            }
            HeaderEval::NumericHelo => {
                s.a.clear();
                if relays.pseudo_header(b"X-Spam-Relays-Untrusted", &mut s.a) != Some(true) || s.a.is_empty() {
                    return false;
                }
                // The first match only, as Perl's `&&` on a match in scalar context.
                if !pats.get(X::NumericHelo).is_match(&s.a, &mut s.search) {
                    return false;
                }
                let Some((a, b)) = s.search.group(1) else {
                    return false;
                };
                s.b.clear();
                s.b.extend_from_slice(s.a.get(a..b).unwrap_or(&[]));
                !pats.is_ip_private.is_match(&s.b, &mut s.search)
            }
            HeaderEval::FromDomainInReceived { from, relays: re, desired } => {
                let addr = first_addr(m, relays, b"From");
                if !from.is_match(addr, &mut s.search) {
                    return false;
                }
                s.a.clear();
                relays.pseudo_header(b"X-Spam-Relays-Trusted", &mut s.a);
                s.a.push(b'\n');
                relays.pseudo_header(b"X-Spam-Relays-Untrusted", &mut s.a);
                re.is_match(&s.a, &mut s.search) == *desired
            }
            HeaderEval::MailfromMatchesRcvd => {
                let sender = first_addr(m, relays, b"EnvelopeFrom");
                !sender.is_empty() && addr_matches_rcvd(&data.registry, relays, sender)
            }
            HeaderEval::FakeAolRelay => {
                get_joined(m, b"Received", &mut s.a);
                squeeze_spaces(&mut s.a);
                pats.get(X::AolRly).is_match(&s.a, &mut s.search)
                    && !pats.get(X::AolRelayVia).is_match(&s.a, &mut s.search)
                    && !pats.get(X::AolEsmtp).is_match(&s.a, &mut s.search)
            }
            HeaderEval::FarawayCharsetInHeaders => false,
            HeaderEval::IllegalChars { header, ratio, count } => illegal_chars(m, header, *ratio, *count, &mut s.a),
            HeaderEval::GatedThroughReceivedHdrRemover => gated(m, pats, s, generation),
            HeaderEval::ForgedHotmail | HeaderEval::NoHotmail => {
                let (forged, missing) = match s.hotmail.fresh(generation) {
                    Some(v) => v,
                    None => {
                        let v = hotmail(m, relays, pats, s);
                        s.hotmail.set(generation, v)
                    }
                };
                if matches!(self, HeaderEval::ForgedHotmail) {
                    forged
                } else {
                    missing
                }
            }
            HeaderEval::MsnGroups => msn_groups(m, relays, pats, s),
            HeaderEval::ForgedEudoramail => eudoramail(m, relays, pats, s),
            HeaderEval::ForgedYahoo => yahoo(m, relays, pats, s),
            HeaderEval::ForgedJuno => juno(m, relays, pats, s),
            HeaderEval::ForgedGmail => gmail(m, relays, pats, s),
            HeaderEval::ForgedGw05 => {
                get_joined(m, b"Received", &mut s.a);
                if !pats.get(X::Gw05).is_match(&s.a, &mut s.search) {
                    return false;
                }
                let by = s.search.text(&s.a, 2).unwrap_or(&[]);
                s.search.group(1).is_some() && !by.contains(&b'.')
            }
            HeaderEval::MatchingEnvAndHdrFrom => {
                let env = first_addr(m, relays, b"EnvelopeFrom");
                let from = first_addr(m, relays, b"From");
                env.eq_ignore_ascii_case(from)
            }
            HeaderEval::SortedRecipients => recipients_cached(m, relays, s, generation).0,
            HeaderEval::SimilarRecipients { min, max } => {
                let sim = recipients_cached(m, relays, s, generation).1;
                min.is_none_or(|v| sim >= v) && max.is_none_or(|v| sim < v)
            }
            HeaderEval::MissingToHeader => !has_header(m, b"To") && !has_header(m, b"Apparently-To"),
            HeaderEval::ShiftedDate { min, max } => {
                let diff = match s.date_diff.fresh(generation) {
                    Some(d) => d,
                    None => {
                        let d = date_diff(m, pats, &mut s.search);
                        s.date_diff.set(generation, d)
                    }
                } as f64;
                min.is_none_or(|v| diff >= 3600.0 * v) && max.is_none_or(|v| diff < 3600.0 * v)
            }
            HeaderEval::SubjectIsAllCaps => subject_is_all_caps(m, pats, s),
            HeaderEval::ToInSubject { user } => to_in_subject(m, relays, *user, &mut s.a),
            HeaderEval::OutlookMessageId => outlook_message_id(m, pats, s),
            HeaderEval::MessageIdNotUsable => {
                get_joined(m, b"List-Unsubscribe", &mut s.a);
                if pats.get(X::ListUnsub).is_match(&s.a, &mut s.search) || gated(m, pats, s, generation) {
                    return true;
                }
                get_joined(m, b"Received", &mut s.a);
                pats.get(X::CwtDce).is_match(&s.a, &mut s.search) || pats.get(X::IPlanet).is_match(&s.a, &mut s.search)
            }
            HeaderEval::HeaderCountRange { header, min, max } => {
                // Distinct values; an empty value counts too (SpamAssassin sees "\n").
                let name = header.as_bytes();
                s.addrs.clear();
                let mut empty = false;
                for h in m.headers_named(name) {
                    if h.decoded.is_empty() {
                        empty = true;
                    }
                    s.addrs.add(h.decoded, false, false);
                }
                let n = (s.addrs.len() + usize::from(empty)) as f64;
                n >= *min && n <= *max
            }
            HeaderEval::UnresolvedTemplate => m.headers().any(|h| {
                s.a.clear();
                s.a.extend_from_slice(h.name);
                s.a.extend_from_slice(b": ");
                s.a.extend_from_slice(h.decoded);
                pats.get(X::Template).is_match(&s.a, &mut s.search)
                    && !pats.get(X::TemplateOk).is_match(&s.a, &mut s.search)
            }),
            HeaderEval::RatwareNameId => ratware_name_id(m, pats, s),
            HeaderEval::RatwareEnvelopeFrom => ratware_envelope_from(m, relays, data, pats, &mut s.search),
            HeaderEval::EqualFromDomains => {
                let from = second_level(after_last_at(first_addr(m, relays, b"From")));
                let env = second_level(after_last_at(first_addr(m, relays, b"EnvelopeFrom")));
                !from.is_empty() && !env.is_empty() && !from.eq_ignore_ascii_case(env)
            }
            HeaderEval::FreemailFrom(re) => {
                if !data.freemail.available() {
                    return false;
                }
                fill_from_addrs(m, relays, s, generation);
                lowercase_set(&s.from_addrs, &mut s.addrs2);
                freemail_any(&data.freemail, &s.addrs2, re.as_deref(), &mut s.search)
            }
            HeaderEval::FreemailHeader { header, re } => {
                if !data.freemail.available() {
                    return false;
                }
                s.addrs.clear();
                for_each_addr(m, relays, header.as_bytes(), |a| s.addrs.add(a, false, true));
                freemail_any(&data.freemail, &s.addrs, re.as_deref(), &mut s.search)
            }
            HeaderEval::FreemailReplyto { reply } => freemail_replyto(m, relays, data, *reply, s),
            HeaderEval::FreemailBody(re) => {
                if !data.freemail.available() || !body_usable(m, data, s, generation) {
                    return false;
                }
                match re {
                    Some(r) => s.body_freemails.iter().any(|e| r.is_match(e, &mut s.search)),
                    None => !s.body_freemails.is_empty(),
                }
            }
            HeaderEval::FromInList(name) => {
                let Some(list) = data.list(name) else {
                    return false;
                };
                fill_from_addrs(m, relays, s, generation);
                s.from_addrs.iter().any(|a| in_list(Some(list), a))
            }
            HeaderEval::ToInList(name) => {
                let Some(list) = data.list(name) else {
                    return false;
                };
                all_to_addrs(m, pats, &mut s.addrs, &mut s.search);
                s.addrs.iter().any(|a| in_list(Some(list), a))
            }
            HeaderEval::ReplytoInList(name) => {
                let Some(list) = data.list(name) else {
                    return false;
                };
                let r = first_addr(m, relays, b"Reply-To");
                !r.is_empty() && in_list(Some(list), r)
            }
            HeaderEval::FromInWelcomelist => welcomelisted(m, relays, data, s, generation) > 0,
            HeaderEval::FromInDefaultWelcomelist => default_welcomelisted(m, relays, data, s, generation) > 0,
            HeaderEval::ForgedInWelcomelist => {
                welcomelisted(m, relays, data, s, generation) < 0
                    && default_welcomelisted(m, relays, data, s, generation) == 0
            }
            HeaderEval::ForgedInDefaultWelcomelist => {
                default_welcomelisted(m, relays, data, s, generation) < 0
                    && welcomelisted(m, relays, data, s, generation) == 0
            }
            HeaderEval::SubjectInList { welcome } => {
                let name = if *welcome { "welcomelist_subject" } else { "blocklist_subject" };
                let Some(list) = data.list(name) else {
                    return false;
                };
                if !get_joined(m, b"Subject", &mut s.a) {
                    return false;
                }
                s.a.make_ascii_lowercase();
                // Globs match anywhere in the subject.
                list.globs.iter().any(|g| {
                    let g = g.as_bytes();
                    (0..=s.a.len()).any(|i| (i..=s.a.len()).any(|j| glob_match(g, s.a.get(i..j).unwrap_or(&[]), false)))
                })
            }
        }
    }
}

// ---------------------------------------------------------------- SpamAssassin's `get`

/// `get(name)` in scalar context into `out` (cleared): each instance's decoded value
/// and `\n`. Returns whether the header exists.
fn get_joined(m: &Message<'_>, name: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let mut found = false;
    for h in m.headers_named(name) {
        out.extend_from_slice(h.decoded);
        out.push(b'\n');
        found = true;
    }
    found
}

fn has_header(m: &Message<'_>, name: &[u8]) -> bool {
    m.headers_named(name).next().is_some()
}

/// `get('MESSAGEID')` in scalar context.
fn get_message_id(m: &Message<'_>, out: &mut Vec<u8>) {
    out.clear();
    for name in [&b"X-Message-Id"[..], b"Resent-Message-Id", b"X-Original-Message-ID", b"Message-Id"] {
        for h in m.headers_named(name) {
            out.extend_from_slice(h.decoded);
            out.push(b'\n');
        }
    }
}

/// Calls `f` with every address of `get('name:addr')` in list context (`ToCc`,
/// `EnvelopeFrom` and ordinary headers).
fn for_each_addr<'m>(m: &Message<'m>, relays: &'m Relays, name: &[u8], mut f: impl FnMut(&'m [u8])) {
    if name.eq_ignore_ascii_case(b"EnvelopeFrom") {
        if let Some(env) = relays.envelope_from() {
            for a in msg::addresses(env).filter_map(|a| a.address) {
                f(a);
            }
        }
        return;
    }
    let names: [&[u8]; 2] = if name.eq_ignore_ascii_case(b"ToCc") { [b"To", b"Cc"] } else { [name, b""] };
    for n in names.iter().filter(|n| !n.is_empty()) {
        for h in m.headers_named(n) {
            for a in msg::addresses(h.raw).filter_map(|a| a.address) {
                f(a);
            }
        }
    }
}

/// `get('name:addr')` in scalar context: the first address, or empty.
fn first_addr<'m>(m: &Message<'m>, relays: &'m Relays, name: &[u8]) -> &'m [u8] {
    let mut first: Option<&'m [u8]> = None;
    for_each_addr(m, relays, name, |a| {
        if first.is_none() {
            first = Some(a);
        }
    });
    first.unwrap_or(&[])
}

/// `s/\s+/ /gs` in place.
fn squeeze_spaces(buf: &mut Vec<u8>) {
    let mut out = 0;
    let mut space = false;
    for i in 0..buf.len() {
        let b = buf.get(i).copied().unwrap_or(b' ');
        if is_space(b) {
            if !space {
                if let Some(slot) = buf.get_mut(out) {
                    *slot = b' ';
                }
                out += 1;
            }
            space = true;
        } else {
            if let Some(slot) = buf.get_mut(out) {
                *slot = b;
            }
            out += 1;
            space = false;
        }
    }
    buf.truncate(out);
}

/// A free mail address in `set` (matching `re` when given).
fn freemail_any(fm: &FreemailData, set: &AddrSet, re: Option<&Regex>, search: &mut Search) -> bool {
    for e in set.iter() {
        if fm.is_freemail(e, search) && re.is_none_or(|r| r.is_match(e, search)) {
            return true;
        }
    }
    false
}

fn lowercase_set(from: &AddrSet, to: &mut AddrSet) {
    to.clear();
    for a in from.iter() {
        to.add(a, false, true);
    }
}

/// [`all_from_addrs`] into `s.from_addrs`, unless they are already message `generation`'s.
fn fill_from_addrs(m: &Message<'_>, relays: &Relays, s: &mut HeaderScratch, generation: u64) {
    if s.from_generation != generation {
        all_from_addrs(m, relays, &mut s.from_addrs);
        s.from_generation = generation;
    }
}

/// `all_from_addrs`: Resent-From (first header), else From, Envelope-Sender,
/// Resent-Sender, X-Envelope-From and EnvelopeFrom; dots squeezed, duplicates dropped.
fn all_from_addrs(m: &Message<'_>, relays: &Relays, out: &mut AddrSet) {
    out.clear();
    if let Some(h) = m.headers_named(b"Resent-From").next() {
        for a in msg::addresses(h.raw).filter_map(|a| a.address) {
            out.add(a, false, false);
        }
        if !out.is_empty() {
            return;
        }
    }
    for name in [&b"From"[..], b"Envelope-Sender", b"Resent-Sender", b"X-Envelope-From", b"EnvelopeFrom"] {
        for_each_addr(m, relays, name, |a| out.add(a, true, false));
    }
}

/// `all_to_addrs`: Resent-To/Cc (first headers), else the recipients of the three
/// newest Received lines and the usual recipient headers.
fn all_to_addrs(m: &Message<'_>, pats: &HeaderPatterns, out: &mut AddrSet, search: &mut Search) {
    out.clear();
    for name in [&b"Resent-To"[..], b"Resent-Cc"] {
        if let Some(h) = m.headers_named(name).next() {
            for a in msg::addresses(h.raw).filter_map(|a| a.address) {
                out.add(a, false, false);
            }
        }
    }
    if !out.is_empty() {
        return;
    }
    let re = pats.get(X::RcvdFor);
    for h in m.headers_named(b"Received").take(3) {
        if re.is_match(h.decoded, search) {
            let host = search.text(h.decoded, 2).unwrap_or(&[]);
            if is_fqdn_valid(host) {
                if let Some(addr) = search.text(h.decoded, 1) {
                    out.add(addr, false, false);
                }
            }
        }
    }
    for name in [
        &b"To"[..],
        b"Apparently-To",
        b"Delivered-To",
        b"Envelope-Recipients",
        b"Apparently-Resent-To",
        b"X-Envelope-To",
        b"Envelope-To",
        b"X-Delivered-To",
        b"X-Original-To",
        b"X-Rcpt-To",
        b"X-Real-To",
        b"Cc",
    ] {
        for h in m.headers_named(name) {
            for a in msg::addresses(h.raw).filter_map(|a| a.address) {
                out.add(a, false, false);
            }
        }
    }
}

/// `Util::is_fqdn_valid` for an ASCII host: two or more labels of letters, digits,
/// `-` and `_` (not at the ends; `_` not in the last two), 253 bytes at most.
fn is_fqdn_valid(host: &[u8]) -> bool {
    let mut h = host;
    while let Some(rest) = h.strip_suffix(b".") {
        h = rest;
    }
    if h.len() > 253 {
        return false;
    }
    let labels = h.split(|&b| b == b'.').count();
    if labels < 2 {
        return false;
    }
    h.split(|&b| b == b'.').enumerate().all(|(i, label)| {
        let ok = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
        !label.is_empty()
            && label.len() <= 63
            && label.iter().all(|b| ok(b) || *b == b'-')
            && label.first().is_some_and(ok)
            && label.last().is_some_and(ok)
            && !(labels - i <= 2 && label.contains(&b'_'))
    })
}

// ---------------------------------------------------------------- RelayEval

fn is_public_ipv4(text: &[u8], pats: &HeaderPatterns, search: &mut Search) -> bool {
    pats.family.is_ipv4.is_match(text, search) && !pats.is_ip_private.is_match(text, search)
}

fn helo_ip_mismatch(relays: &Relays, pats: &HeaderPatterns, search: &mut Search) -> bool {
    relays.untrusted().any(|r| {
        if !is_public_ipv4(r.helo, pats, search) {
            return false;
        }
        // The HELO's /24 prefix ("a.b.c.").
        let prefix_len = r.helo.iter().enumerate().filter(|&(_, &b)| b == b'.').nth(2).map(|(i, _)| i + 1);
        let Some(prefix_len) = prefix_len else {
            return false;
        };
        let prefix = r.helo.get(..prefix_len).unwrap_or(&[]);
        let digits_ok = prefix.split(|&b| b == b'.').take(3).all(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit));
        is_public_ipv4(r.ip, pats, search) && r.helo != r.ip && digits_ok && !r.ip.starts_with(prefix)
    })
}

fn no_rdns_dotcom_helo(relays: &Relays, pats: &HeaderPatterns, search: &mut Search) -> bool {
    // SpamAssassin resets its flag at every public relay: the last one decides.
    let mut flag = false;
    for r in relays.untrusted().filter(|r| !r.ip_private) {
        flag = pats.get(X::DotcomHelo).is_match(r.helo, search) && r.no_reverse_dns;
    }
    flag
}

/// `hostname_to_domain` of RelayEval, lowercased, into a fixed buffer.
fn hostname_to_domain(host: &[u8]) -> &[u8] {
    if !host.iter().any(u8::is_ascii_alphabetic) {
        return host;
    }
    // split(/\./) drops trailing empty fields
    let mut trimmed = host;
    while let Some(rest) = trimmed.strip_suffix(b".") {
        trimmed = rest;
    }
    let parts = trimmed.split(|&b| b == b'.').count();
    let last = trimmed.rsplit(|&b| b == b'.').next().unwrap_or(&[]);
    let long_tld = last.iter().filter(|&&b| !is_space(b)).count() >= 3 && {
        // /(?:\S{3,}|ie|fr|de)/: three non-spaces anywhere, or ie/fr/de inside
        let mut run = 0;
        last.iter().any(|&b| {
            run = if is_space(b) { 0 } else { run + 1 };
            run >= 3
        })
    } || last.windows(2).any(|w| w == b"ie" || w == b"fr" || w == b"de");
    let keep = if parts > 1 && long_tld {
        2
    } else if parts > 2 {
        3
    } else {
        return host;
    };
    let mut dots = 0;
    for (i, &b) in trimmed.iter().enumerate().rev() {
        if b == b'.' {
            dots += 1;
            if dots == keep {
                return trimmed.get(i + 1..).unwrap_or(&[]);
            }
        }
    }
    trimmed
}

/// `_check_for_forged_received`: (mismatch_from, mismatch_ip_helo).
fn forged_received(relays: &Relays, pats: &HeaderPatterns, search: &mut Search) -> (u32, u32) {
    let by_re = pats.get(X::ForgedBy);
    let mut mismatch_from = 0;
    let mut mismatch_ip_helo = 0;
    let mut lower = [[0u8; 256]; 3];
    let mut prev_from: Option<([u8; 256], usize)> = None;
    for r in relays.untrusted() {
        let mut lc = |k: usize, v: &[u8]| -> usize {
            let n = v.len().min(256);
            if let Some(buf) = lower.get_mut(k) {
                for (slot, b) in buf.iter_mut().zip(v) {
                    *slot = b.to_ascii_lowercase();
                }
            }
            n
        };
        let (nb, nr, nh) = (lc(0, r.by), lc(1, r.rdns), lc(2, r.helo));
        let [by_buf, rdns_buf, helo_buf] = &lower;
        let by = hostname_to_domain(by_buf.get(..nb).unwrap_or(&[]));
        let mut from: Option<&[u8]> = Some(hostname_to_domain(rdns_buf.get(..nr).unwrap_or(&[])));
        let helo = hostname_to_domain(helo_buf.get(..nh).unwrap_or(&[]));
        if !by_re.is_match(by, search) {
            // `next` before $from[$i] is possibly cleared: it stays as computed.
            prev_from = from.map(copy_256);
            continue;
        }
        if from.is_some_and(|f| pats.get(X::LocalhostName).is_match(f, search)) && r.ip == b"127.0.0.1" {
            from = None;
        }
        let quad = pats.get(X::DottedQuad);
        if quad.is_match(helo, search) && quad.is_match(r.ip, search) && r.ip != helo {
            let class_b = |v: &[u8]| -> Option<usize> {
                v.iter().enumerate().filter(|&(_, &b)| b == b'.').nth(1).map(|(i, _)| i)
            };
            let (hb, fb) = (class_b(helo), class_b(r.ip));
            if let (Some(hb), Some(fb)) = (hb, fb) {
                if helo.get(..hb) != r.ip.get(..fb) && !pats.is_ip_private.is_match(helo, search) {
                    mismatch_ip_helo += 1;
                }
            }
        }
        if let Some((p, n)) = &prev_from {
            let prev = p.get(..*n).unwrap_or(&[]);
            let welcomelisted = by == b"msn.com" && prev == b"hotmail.com";
            if by_re.is_match(prev, search) && by != prev && !welcomelisted {
                mismatch_from += 1;
            }
        }
        prev_from = from.map(copy_256);
    }
    (mismatch_from, mismatch_ip_helo)
}

fn copy_256(v: &[u8]) -> ([u8; 256], usize) {
    let mut buf = [0u8; 256];
    let n = v.len().min(256);
    for (slot, b) in buf.iter_mut().zip(v) {
        *slot = *b;
    }
    (buf, n)
}

// ---------------------------------------------------------------- HeaderEval

/// `check_illegal_chars`.
fn illegal_chars(m: &Message<'_>, header: &str, ratio: f64, count: f64, buf: &mut Vec<u8>) -> bool {
    buf.clear();
    if header == "ALL" {
        buf.extend_from_slice(m.header_block());
        if !buf.is_empty() && buf.last() != Some(&b'\n') {
            buf.push(b'\n');
        }
    } else {
        for h in m.headers_named(header.as_bytes()) {
            buf.extend_from_slice(h.raw);
            buf.push(b'\n');
        }
    }
    if !buf.iter().any(|&b| !is_space(b)) {
        return false;
    }
    if !buf.is_ascii() && core::str::from_utf8(buf).is_ok() {
        let controls = buf.iter().any(|&b| matches!(b, 0x00..=0x08 | 0x0b | 0x0c | 0x0e..=0x1f));
        if !controls {
            return false;
        }
    }
    let mut illegal =
        buf.iter().filter(|&&b| matches!(b, 0x00..=0x08 | 0x0b | 0x0c | 0x0e..=0x1f | 0x7f..=0xff)).count();
    if illegal > 0 && header.eq_ignore_ascii_case("subject") {
        let exempt = buf.iter().filter(|&&b| matches!(b, 0xa2 | 0xa3 | 0xae)).count();
        if exempt == 1 {
            illegal -= 1;
        }
    }
    let illegal = illegal as f64;
    illegal / buf.len() as f64 >= ratio && illegal >= count
}

/// `gated_through_received_hdr_remover`, once a message (four tests ask).
fn gated(m: &Message<'_>, pats: &HeaderPatterns, s: &mut HeaderScratch, generation: u64) -> bool {
    match s.gated.fresh(generation) {
        Some(v) => v,
        None => {
            let v = gated_through_remover(m, pats, s);
            s.gated.set(generation, v)
        }
    }
}

/// `gated_through_received_hdr_remover`, computed (in `s.b`, which it leaves changed).
fn gated_through_remover(m: &Message<'_>, pats: &HeaderPatterns, s: &mut HeaderScratch) -> bool {
    let ezmlm = m
        .headers_named(b"Mailing-List")
        .any(|h| pats.get(X::Ezmlm).is_match(h.decoded, &mut s.search));
    if ezmlm {
        let dl = m
            .headers_named(b"Delivered-To")
            .any(|h| pats.get(X::MailingListTo).is_match(h.decoded, &mut s.search));
        get_joined(m, b"Received", &mut s.b);
        if dl && pats.get(X::QmailInvoked).is_match(&s.b, &mut s.search) {
            return true;
        }
    }
    if !get_joined(m, b"Received", &mut s.b) {
        return true;
    }
    pats.get(X::MsnGroupsRcvd).is_match(&s.b, &mut s.search)
}

/// `_check_for_forged_hotmail_received_headers`: (forged, hotmail address without hotmail relay).
fn hotmail(m: &Message<'_>, relays: &Relays, pats: &HeaderPatterns, s: &mut HeaderScratch) -> (bool, bool) {
    // The Received lines, squeezed, stay in `s.a` throughout (the helpers use `s.b`).
    get_joined(m, b"Received", &mut s.a);
    squeeze_spaces(&mut s.a);
    if pats.get(X::HotmailPickup).is_match(&s.a, &mut s.search) || msn_groups(m, relays, pats, s) {
        return (false, false);
    }
    let ip = get_joined(m, b"X-Originating-Ip", &mut s.b) && pats.get(X::AnyIp).is_match(&s.b, &mut s.search);
    let orig = get_joined(m, b"X-OriginatorOrg", &mut s.b) && pats.get(X::HotmailOrig).is_match(&s.b, &mut s.search);
    if gated(m, pats, s, relays.generation()) {
        return (false, false);
    }
    let rc = |x: X, s: &mut HeaderScratch| pats.get(x).is_match(&s.a, &mut s.search);
    if (ip && rc(X::Hotmail1, s))
        || (orig && rc(X::Hotmail2, s))
        || (orig && rc(X::Hotmail3, s))
        || (ip && rc(X::Hotmail4, s))
        || (ip && rc(X::Hotmail5, s))
        || (ip && rc(X::Hotmail6, s))
    {
        return (false, false);
    }
    if rc(X::HotmailHelo, s) {
        return (true, false);
    }
    let from = first_addr(m, relays, b"From");
    (false, pats.get(X::FromHotmail).is_match(from, &mut s.search))
}

/// `check_for_msn_groups_headers`.
fn msn_groups(m: &Message<'_>, relays: &Relays, pats: &HeaderPatterns, s: &mut HeaderScratch) -> bool {
    let _ = relays;
    get_joined(m, b"To", &mut s.b);
    if !pats.get(X::MsnGroupsTo).is_match(&s.b, &mut s.search) {
        return false;
    }
    let Some((la, lb)) = s.search.group(1) else {
        return false;
    };
    let mut list = [0u8; 128];
    let listname = s.b.get(la..lb).unwrap_or(&[]);
    let ln = listname.len().min(128);
    for (slot, b) in list.iter_mut().zip(listname) {
        *slot = *b;
    }
    let listname = list.get(..ln).unwrap_or(&[]);
    get_joined(m, b"Received", &mut s.b);
    if !pats.get(X::MsnPickup).is_match(&s.b, &mut s.search) {
        return false;
    }
    let server = s.search.text(&s.b, 1).map(copy_256).unwrap_or(([0; 256], 0));
    let server = server.0.get(..server.1).unwrap_or(&[]);
    get_joined(m, b"Message-Id", &mut s.b);
    let mid = s.b.as_slice();
    if listname == b"notifications" {
        // ^<\S+\@$server>
        let Some(rest) = mid.strip_prefix(b"<") else {
            return false;
        };
        let tail_len = server.len() + 2;
        return rest.iter().position(|&b| is_space(b)).is_none_or(|p| p > 0)
            && rest.windows(tail_len).any(|w| {
                w.first() == Some(&b'@') && w.get(1..=server.len()) == Some(server) && w.last() == Some(&b'>')
            });
    }
    // ^<$listname-\S+\@groups\.msn\.com>
    let starts =
        mid.strip_prefix(b"<").is_some_and(|r| r.starts_with(listname) && r.get(listname.len()) == Some(&b'-'));
    if !starts || !mid.windows(17).any(|w| w == b"@groups.msn.com>") {
        return false;
    }
    let env = first_addr(m, relays, b"EnvelopeFrom");
    env.windows(listname.len() + 7).any(|w| w.starts_with(listname) && w.ends_with(b"-bounce"))
        && env.ends_with(b"@groups.msn.com")
}

fn eudoramail(m: &Message<'_>, relays: &Relays, pats: &HeaderPatterns, s: &mut HeaderScratch) -> bool {
    let from = first_addr(m, relays, b"From");
    if !pats.get(X::FromEudoramail).is_match(from, &mut s.search) {
        return false;
    }
    let ip = get_joined(m, b"X-Sender-Ip", &mut s.b) && pats.get(X::AnyIp).is_match(&s.b, &mut s.search);
    if gated(m, pats, s, relays.generation()) {
        return false;
    }
    get_joined(m, b"Received", &mut s.a);
    squeeze_spaces(&mut s.a);
    !(pats.get(X::Whowhere).is_match(&s.a, &mut s.search) && ip)
}

fn yahoo(m: &Message<'_>, relays: &Relays, pats: &HeaderPatterns, s: &mut HeaderScratch) -> bool {
    let from = first_addr(m, relays, b"From");
    if !pats.get(X::FromYahoo).is_match(from, &mut s.search) {
        return false;
    }
    get_joined(m, b"Received", &mut s.a);
    let resent = get_joined(m, b"Resent-From", &mut s.b) && get_joined(m, b"Resent-To", &mut s.b);
    if resent && get_joined(m, b"X-Received", &mut s.b) {
        core::mem::swap(&mut s.a, &mut s.b);
    }
    squeeze_spaces(&mut s.a);
    if gated(m, pats, s, relays.generation()) {
        return false;
    }
    // gated() used s.b only; s.a still holds the Received text.
    s.b.clear();
    relays.pseudo_header(b"X-Spam-Relays-Trusted", &mut s.b);
    if pats.get(X::YahooTrusted).is_match(&s.b, &mut s.search) {
        return false;
    }
    s.b.clear();
    relays.pseudo_header(b"X-Spam-Relays-Untrusted", &mut s.b);
    if pats.get(X::YahooUntrusted).is_match(&s.b, &mut s.search) {
        return false;
    }
    let rc = |x: X, s: &mut HeaderScratch| pats.get(x).is_match(&s.a, &mut s.search);
    if rc(X::Yahoo1, s) || rc(X::Yahoo2, s) || rc(X::Yahoo3, s) || rc(X::Yahoo4, s) {
        return false;
    }
    if rc(X::YahooBulk, s) && pats.get(X::FromReplyYahoo).is_match(from, &mut s.search) {
        return false;
    }
    !rc(X::YahooStory, s)
}

fn juno(m: &Message<'_>, relays: &Relays, pats: &HeaderPatterns, s: &mut HeaderScratch) -> bool {
    let from = first_addr(m, relays, b"From");
    if !pats.get(X::FromJuno).is_match(from, &mut s.search) || gated(m, pats, s, relays.generation()) {
        return false;
    }
    get_joined(m, b"Received", &mut s.a);
    let xorig = get_joined(m, b"X-Originating-IP", &mut s.b) && !s.b.is_empty();
    let xorig_ip = xorig && pats.get(X::AnyIp).is_match(&s.b, &mut s.search);
    get_joined(m, b"X-Mailer", &mut s.b);
    let rc = |x: X, s: &mut HeaderScratch| pats.get(x).is_match(&s.a, &mut s.search);
    if xorig {
        if !rc(X::Juno1, s) && !rc(X::Juno2, s) {
            return true;
        }
        return !s.b.windows(5).any(|w| w == b"Juno ");
    }
    if rc(X::Juno3, s) {
        if !pats.get(X::MailerMailCom).is_match(&s.b, &mut s.search) {
            return true;
        }
    } else if rc(X::Juno4, s) {
        if !pats.get(X::MailerWebmail).is_match(&s.b, &mut s.search) {
            return true;
        }
    } else {
        return true;
    }
    !xorig_ip
}

fn gmail(m: &Message<'_>, relays: &Relays, pats: &HeaderPatterns, s: &mut HeaderScratch) -> bool {
    let from = first_addr(m, relays, b"From");
    if !pats.get(X::FromGmail).is_match(from, &mut s.search) {
        return false;
    }
    get_joined(m, b"X-Received", &mut s.a);
    if pats.get(X::GmailXr1).is_match(&s.a, &mut s.search) || pats.get(X::GmailXr2).is_match(&s.a, &mut s.search) {
        return false;
    }
    get_joined(m, b"Received", &mut s.a);
    if pats.get(X::GmailRcvd).is_match(&s.a, &mut s.search) {
        return false;
    }
    get_joined(m, b"X-Gm-Message-State", &mut s.a);
    get_joined(m, b"X-Google-Smtp-Source", &mut s.b);
    !(s.a.len() >= 60 && s.b.len() >= 60)
}

/// `sorted_recipients` and `similar_recipients` values, once per message.
fn recipients_cached(m: &Message<'_>, relays: &Relays, s: &mut HeaderScratch, generation: u64) -> (bool, f64) {
    if let Some(v) = s.recipients.fresh(generation) {
        return v;
    }
    let v = recipients(m, relays, &mut s.addrs);
    s.recipients.set(generation, v)
}

/// `_check_recipients`: (sorted, similarity) of the To and Cc addresses (and Bcc
/// when those are fewer than five), neighbours that repeat dropped.
fn recipients(m: &Message<'_>, relays: &Relays, list: &mut AddrSet) -> (bool, f64) {
    const SORTED_COUNT: usize = 7;
    const SIMILAR_COUNT: usize = 5;
    list.clear();
    let mut inputs = 0usize;
    let mut stopped = false;
    for name in [&b"ToCc"[..], b"Bcc"] {
        for_each_addr(m, relays, name, |a| {
            inputs += 1;
            // `while (my $current = shift @inputs)` stops at a false value.
            if stopped || a.is_empty() || a == b"0" {
                stopped = true;
                return;
            }
            if list.len() < 256 {
                list.push_unless_last(a);
            }
        });
        if inputs >= SIMILAR_COUNT {
            break;
        }
    }
    let count = list.len();
    let sorted = count >= SORTED_COUNT && list.iter().zip(list.iter().skip(1)).all(|(a, b)| a <= b);
    if count < SIMILAR_COUNT {
        return (sorted, 0.0);
    }
    // @fqhn keeps only the addresses that have an @, but is indexed like @address: the
    // i-th address pairs with the i-th domain, or with none past the last.
    let domains = || {
        list.iter()
            .filter_map(|a| a.iter().position(|&b| b == b'@').map(|p| a.get(p + 1..).unwrap_or(&[])))
            .chain(core::iter::repeat(&[][..]))
    };
    let (mut hits, mut combinations) = (0u64, 0u64);
    for ((i, ai), fi) in list.iter().enumerate().zip(domains()) {
        for (aj, fj) in list.iter().zip(domains()).skip(i + 1) {
            if first_two(ai) == first_two(aj) {
                hits += 1;
            }
            if first_two(fi) == first_two(fj) && fi != fj {
                hits += 1;
            }
            combinations += 1;
        }
    }
    (sorted, hits as f64 / combinations.max(1) as f64)
}

/// `substr($v, 0, 2)`
fn first_two(v: &[u8]) -> &[u8] {
    v.get(..2).unwrap_or(v)
}

/// `_check_date_diff`: the Date header's offset from the closest Received date, in seconds.
fn date_diff(m: &Message<'_>, pats: &HeaderPatterns, search: &mut Search) -> i64 {
    // The first Resent-Date that parses, else the first Date.
    let mut date_time = None;
    for name in [&b"Resent-Date"[..], b"Date"] {
        date_time = m
            .headers_named(name)
            .filter(|h| !h.decoded.is_empty())
            .find_map(|h| parse_rfc822_date(h.decoded));
        if date_time.is_some() {
            break;
        }
    }
    let Some(date_time) = date_time else { return 0 };
    let received = || {
        m.headers_named(b"Received")
            .map(|h| h.decoded)
            .filter(|v| v.iter().any(|&c| !is_space(c)))
    };
    // A fetchmail hand-over at the top is left out.
    let mut skip = 0usize;
    let first_local = received()
        .next()
        .is_some_and(|r| pats.get(X::FetchmailLocal).is_match(r, search) || pats.get(X::QmailUid).is_match(r, search));
    if first_local {
        skip = 1;
    }
    if received().nth(skip).is_some_and(|r| pats.get(X::FetchmailBy).is_match(r, search)) {
        skip += 1;
    } else if first_local {
        skip = 0;
    }
    // The smallest absolute difference (the first of equals), leaving out a last zero.
    let mut best_before_last: Option<i64> = None;
    let mut last: Option<i64> = None;
    let mut count = 0usize;
    for d in received().skip(skip).filter_map(|r| received_date(r).and_then(parse_rfc822_date)) {
        let diff = date_time - d;
        if let Some(prev) = last {
            if best_before_last.is_none_or(|b: i64| prev.unsigned_abs() < b.unsigned_abs()) {
                best_before_last = Some(prev);
            }
        }
        last = Some(diff);
        count += 1;
    }
    match (best_before_last, last) {
        (None, None) => 0,
        (Some(b), Some(0)) if count > 1 => b,
        (Some(b), Some(l)) => {
            if l.unsigned_abs() < b.unsigned_abs() {
                l
            } else {
                b
            }
        }
        (None, Some(l)) => l,
        (Some(b), None) => b,
    }
}

fn subject_is_all_caps(m: &Message<'_>, pats: &HeaderPatterns, s: &mut HeaderScratch) -> bool {
    get_joined(m, b"Subject", &mut s.a);
    let text = trim_space(&s.a);
    let mut start = 0;
    if pats.get(X::SubjectPrefix).is_match(text, &mut s.search) {
        start = s.search.group(0).map_or(0, |(_, e)| e);
    }
    let subject = text.get(start..).unwrap_or(&[]);
    if !subject.iter().any(|&b| is_space(b)) || subject.len() < 10 {
        return false;
    }
    let letters = subject.iter().filter(|b| b.is_ascii_alphabetic());
    let mut any = false;
    let mut all_upper = true;
    for &b in letters {
        any = true;
        all_upper &= b.is_ascii_uppercase();
    }
    if !any || !all_upper {
        return false;
    }
    s.b.clear();
    for h in m.headers_named(b"Subject") {
        s.b.extend_from_slice(h.raw);
        s.b.push(b'\n');
    }
    !pats.get(X::CapsCharset).is_match(&s.b, &mut s.search)
}

fn trim_space(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|&b| !is_space(b)).unwrap_or(v.len());
    let end = v.iter().rposition(|&b| !is_space(b)).map_or(start, |p| p + 1);
    v.get(start..end).unwrap_or(&[])
}

/// `check_for_to_in_subject`.
fn to_in_subject(m: &Message<'_>, relays: &Relays, user: bool, buf: &mut Vec<u8>) -> bool {
    let full_to = first_addr(m, relays, b"To");
    if full_to.is_empty() {
        return false;
    }
    get_joined(m, b"Subject", buf);
    let subject = buf.as_slice();
    let eq_ci = |a: &[u8], b: &[u8]| a.eq_ignore_ascii_case(b);
    // `$` without /m: the end, or before a final newline.
    let at_end = |i: usize| i == subject.len() || (i + 1 == subject.len() && subject.get(i) == Some(&b'\n'));
    if !user {
        // /\b\Q$full_to\E\b/i
        let n = full_to.len();
        let word = |i: usize| subject.get(i).copied().is_some_and(is_word);
        return (0..=subject.len().saturating_sub(n)).any(|i| {
            subject.get(i..i + n).is_some_and(|w| eq_ci(w, full_to))
                && (full_to.first().copied().is_some_and(is_word) != (i > 0 && word(i - 1)))
                && (full_to.last().copied().is_some_and(is_word) != word(i + n))
        });
    }
    let to = full_to.get(..full_to.iter().position(|&b| b == b'@').unwrap_or(full_to.len())).unwrap_or(&[]);
    let n = to.len();
    let to_at = |i: usize, ci: bool| subject.get(i..i + n).is_some_and(|w| if ci { eq_ci(w, to) } else { w == to });
    let punct = |b: Option<&u8>| matches!(b, Some(b',' | b':' | b';' | b'!' | b'?' | b'-'));
    // (?:re|fw):\s*(?:\w+\s+)?TO$
    let prefix = if subject.len() >= 3
        && (eq_ci(subject.get(..3).unwrap_or(&[]), b"re:") || eq_ci(subject.get(..3).unwrap_or(&[]), b"fw:"))
    {
        Some(3)
    } else {
        None
    };
    if let Some(mut i) = prefix {
        while subject.get(i).copied().is_some_and(is_space) {
            i += 1;
        }
        if to_at(i, true) && at_end(i + n) {
            return true;
        }
        let w = subject.get(i..).map_or(0, |r| r.iter().take_while(|&&b| is_word(b)).count());
        let sp = subject.get(i + w..).map_or(0, |r| r.iter().take_while(|&&b| is_space(b)).count());
        if w > 0 && sp > 0 && to_at(i + w + sp, true) && at_end(i + w + sp + n) {
            return true;
        }
    }
    // (?-i:TO)\s*[,:;!?-](?:$|\s)
    if to_at(0, false) {
        let sp = subject.get(n..).map_or(0, |r| r.iter().take_while(|&&b| is_space(b)).count());
        // \s* may give back spaces, but none of them is punctuation: only the full run counts.
        let p = n + sp;
        if punct(subject.get(p)) && (at_end(p + 1) || subject.get(p + 1).copied().is_some_and(is_space)) {
            return true;
        }
    }
    // TO$
    if to_at(0, true) && at_end(n) {
        return true;
    }
    // ,\s*TO[,:;!?-]$
    if subject.first() == Some(&b',') {
        let sp = subject.get(1..).map_or(0, |r| r.iter().take_while(|&&b| is_space(b)).count());
        let i = 1 + sp;
        if to_at(i, true) && punct(subject.get(i + n)) && at_end(i + n + 1) {
            return true;
        }
    }
    false
}

/// `check_outlook_message_id`.
fn outlook_message_id(m: &Message<'_>, pats: &HeaderPatterns, s: &mut HeaderScratch) -> bool {
    get_message_id(m, &mut s.a);
    if !pats.get(X::OutlookId).is_match(&s.a, &mut s.search) {
        return false;
    }
    let token = s.search.text(&s.a, 1).unwrap_or(&[]);
    let timetoken = token.iter().fold(0i64, |acc, &b| acc * 16 + i64::from(char::from(b).to_digit(16).unwrap_or(0)));
    let (x, y) = (0.002_328_306_436_538_7_f64, 27_111_902.832_984_9_f64);
    let fudge = 250;
    // Perl's int() truncates toward zero, as `as` does.
    let expected = |t: i64| (t as f64 * x + y) as i64;
    get_joined(m, b"Date", &mut s.b);
    let date = parse_rfc822_date(&s.b).unwrap_or(0);
    if (timetoken - expected(date)).abs() < fudge {
        return false;
    }
    // SpamAssassin parses the whole Received text here, not the date it matched.
    get_joined(m, b"Received", &mut s.b);
    let rcvd = parse_rfc822_date(&s.b).unwrap_or(0);
    (timetoken - expected(rcvd)).abs() >= fudge
}

fn ratware_name_id(m: &Message<'_>, pats: &HeaderPatterns, s: &mut HeaderScratch) -> bool {
    get_message_id(m, &mut s.a);
    if !pats.get(X::RatwareId).is_match(&s.a, &mut s.search) {
        return false;
    }
    let Some(id) = s.search.text(&s.a, 1) else {
        return false;
    };
    get_joined(m, b"From", &mut s.b);
    // m/\"[^\"]+\"\s*<\Q$1\E>/
    let from = s.b.as_slice();
    let mut i = 0;
    while let Some(q) = from.get(i..).and_then(|r| r.iter().position(|&b| b == b'"')).map(|p| p + i) {
        if let Some(close) = from.get(q + 1..).and_then(|r| r.iter().position(|&b| b == b'"')).map(|p| p + q + 1) {
            if close > q + 1 {
                let mut j = close + 1;
                while from.get(j).copied().is_some_and(is_space) {
                    j += 1;
                }
                if from.get(j) == Some(&b'<')
                    && from.get(j + 1..j + 1 + id.len()) == Some(id)
                    && from.get(j + 1 + id.len()) == Some(&b'>')
                {
                    return true;
                }
            }
        }
        i = q + 1;
    }
    false
}

fn ratware_envelope_from(
    m: &Message<'_>,
    relays: &Relays,
    data: &HeaderData,
    pats: &HeaderPatterns,
    search: &mut Search,
) -> bool {
    let to = first_addr(m, relays, b"To");
    let from = first_addr(m, relays, b"EnvelopeFrom");
    if from.is_empty() || to.is_empty() || pats.get(X::Srs).is_match(from, search) {
        return false;
    }
    // /^([^@]+)\@(.+)$/
    let Some(at) = to.iter().position(|&b| b == b'@') else {
        return false;
    };
    if at == 0 || to.get(at + 1..).is_none_or(|d| d.is_empty()) {
        return false;
    }
    let (user, dom) = (to.get(..at).unwrap_or(&[]), to.get(at + 1..).unwrap_or(&[]));
    let dom = data.registry.domain(dom);
    let dom = dom.text();
    if !data.registry.is_domain_valid(dom) {
        return false;
    }
    // /\b\Q$dom\E.\Q$user\E@/i
    let n = dom.len();
    (0..from.len()).any(|i| {
        let boundary =
            dom.first().copied().is_some_and(is_word) != (i > 0 && from.get(i - 1).copied().is_some_and(is_word));
        boundary
            && from.get(i..i + n).is_some_and(|w| w.eq_ignore_ascii_case(dom))
            && from.get(i + n).is_some_and(|&b| b != b'\n')
            && from.get(i + n + 1..i + n + 1 + user.len()).is_some_and(|w| w.eq_ignore_ascii_case(user))
            && from.get(i + n + 1 + user.len()) == Some(&b'@')
    })
}

/// `/\@([^@]*)\z/`: the text after the last `@` (empty when none).
fn after_last_at(addr: &[u8]) -> &[u8] {
    addr.iter().rposition(|&b| b == b'@').and_then(|p| addr.get(p + 1..)).unwrap_or(&[])
}

/// `s/^.+\.([^\.]+\.[^\.]+)$/$1/`: the last two labels of a name with three or more.
fn second_level(domain: &[u8]) -> &[u8] {
    let Some(last_dot) = domain.iter().rposition(|&b| b == b'.') else {
        return domain;
    };
    let Some(prev_dot) = domain.get(..last_dot).and_then(|d| d.iter().rposition(|&b| b == b'.')) else {
        return domain;
    };
    let labels_ok = last_dot > prev_dot + 1 && last_dot + 1 < domain.len() && prev_dot > 0;
    if labels_ok {
        domain.get(prev_dot + 1..).unwrap_or(domain)
    } else {
        domain
    }
}

// ---------------------------------------------------------------- FreeMail

fn body_usable(m: &Message<'_>, data: &HeaderData, s: &mut HeaderScratch, generation: u64) -> bool {
    if s.body_generation != generation {
        s.body_generation = generation;
        s.body_usable = body_freemails(
            &data.freemail,
            &data.registry,
            m.body(),
            m.uris(),
            &mut s.body_emails,
            &mut s.body_freemails,
            &mut s.search,
        );
    }
    s.body_usable
}

fn freemail_replyto(m: &Message<'_>, relays: &Relays, data: &HeaderData, reply: bool, s: &mut HeaderScratch) -> bool {
    let fm = &data.freemail;
    if !fm.available() {
        return false;
    }
    if let Some(env) = relays.envelope_from() {
        if fm.bulk_envelope_sender(env, &mut s.search) {
            return false;
        }
    }
    s.addrs.clear();
    s.addrs2.clear();
    for_each_addr(m, relays, b"From", |a| s.addrs.add(a, false, true));
    for_each_addr(m, relays, b"Reply-To", |a| s.addrs2.add(a, false, true));
    let from_is_fm = s.addrs.iter().any(|e| fm.is_freemail(e, &mut s.search));
    let replyto_is_fm = s.addrs2.iter().any(|e| fm.is_freemail(e, &mut s.search));
    let from_not_in_replyto = !s.addrs.iter().any(|f| s.addrs2.iter().any(|r| r == f));
    if from_is_fm && replyto_is_fm && from_not_in_replyto {
        return true;
    }
    if !reply && !replyto_is_fm {
        return false;
    }
    // 'reply': a Reply-To that is not free mail, or a From that is not, ends it.
    if reply && ((!s.addrs2.is_empty() && !replyto_is_fm) || !from_is_fm) {
        return false;
    }
    let generation = relays.generation();
    if !body_usable(m, data, s, generation) || s.body_freemails.is_empty() {
        return false;
    }
    let use_replyto = !reply || replyto_is_fm;
    let reply_addrs = if use_replyto { &s.addrs2 } else { &s.addrs };
    s.body_freemails.iter().any(|b| reply_addrs.iter().any(|r| r != b))
}

// ---------------------------------------------------------------- WLBLEval

fn welcomelisted(m: &Message<'_>, relays: &Relays, data: &HeaderData, s: &mut HeaderScratch, generation: u64) -> i32 {
    if s.welcomelisted.generation == generation {
        if let Some(v) = s.welcomelisted.value {
            return v;
        }
    }
    fill_from_addrs(m, relays, s, generation);
    let allows = data.list("welcomelist_allows_relays");
    let mut found = 0;
    for a in s.from_addrs.iter() {
        if in_list(data.list("welcomelist_from"), a) {
            found = 1;
            break;
        }
        match welcomelist_rcvd(&data.welcomelist_from_rcvd, allows, relays, a) {
            1 => {
                found = 1;
                break;
            }
            -1 => found = -1,
            _ => {}
        }
    }
    s.welcomelisted = Cached { generation, value: Some(found) };
    found
}

fn default_welcomelisted(
    m: &Message<'_>,
    relays: &Relays,
    data: &HeaderData,
    s: &mut HeaderScratch,
    generation: u64,
) -> i32 {
    if s.default_welcomelisted.generation == generation {
        if let Some(v) = s.default_welcomelisted.value {
            return v;
        }
    }
    fill_from_addrs(m, relays, s, generation);
    let allows = data.list("welcomelist_allows_relays");
    let mut found = 0;
    for a in s.from_addrs.iter() {
        match welcomelist_rcvd(&data.def_welcomelist_from_rcvd, allows, relays, a) {
            1 => {
                found = 1;
                break;
            }
            -1 => found = -1,
            _ => {}
        }
    }
    s.default_welcomelisted = Cached { generation, value: Some(found) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{Limits, MessageBuffers};
    use crate::rules::cf::{NoIncludes, Parser};
    use crate::rules::eval::{EvalContext, EvalData, EvalTest};

    /// A small stand-in for the stock configuration the tests read.
    const CF: &[u8] = b"originating_ip_headers X-Yahoo-Post-IP X-Originating-IP X-Apparently-From
freemail_domains yahoo.com hotmail.com gmail.com
util_rb_tld com net org biz top uk
util_rb_2tld co.uk
enlist_addrlist (PAYPAL) *@paypal.com *@paypal.co.uk
enlist_addrlist (SUSP_NTLD) *@*.top *@*.xyz
";

    fn data() -> EvalData {
        let mut parser = Parser::new();
        assert!(parser.parse_file("test.cf", CF, &mut NoIncludes).is_ok());
        let config = parser.finish();
        let mut data = EvalData::new(&config);
        data.header.needs_relays = true;
        data
    }

    /// `name(a,b)` into the function name and its argument text.
    fn call(spec: &str) -> (&str, &str) {
        let (name, rest) = spec.split_once('(').unwrap_or((spec, ")"));
        (name, rest.strip_suffix(')').unwrap_or(rest))
    }

    #[test]
    fn header_evals_like_spamassassin_table() {
        const CALLS: &[&str] = &[
            "check_all_trusted()",
            "check_no_relays()",
            "check_relays_unparseable()",
            "helo_ip_mismatch()",
            "check_for_no_rdns_dotcom_helo()",
            "check_for_forged_received_trail()",
            "check_for_forged_received_ip_helo()",
            "check_for_sender_no_reverse()",
            "check_for_numeric_helo()",
            "check_for_from_domain_in_received_headers(example.com,true)",
            "check_mailfrom_matches_rcvd()",
            "check_for_fake_aol_relay_in_rcvd()",
            "check_illegal_chars(Subject,0.00,2)",
            "check_illegal_chars(From,0.20,2)",
            "check_illegal_chars(ALL,0.010,2)",
            "gated_through_received_hdr_remover()",
            "check_for_forged_hotmail_received_headers()",
            "check_for_no_hotmail_received_headers()",
            "check_for_forged_eudoramail_received_headers()",
            "check_for_forged_yahoo_received_headers()",
            "check_for_forged_juno_received_headers()",
            "check_for_forged_gmail_received_headers()",
            "check_for_forged_gw05_received_headers()",
            "check_for_matching_env_and_hdr_from()",
            "sorted_recipients()",
            "similar_recipients(0.65,undef)",
            "check_for_missing_to_header()",
            "check_for_shifted_date(3,6)",
            "check_for_shifted_date(-6,-3)",
            "check_for_shifted_date(undef,-96)",
            "check_for_shifted_date(-240,-96)",
            "subject_is_all_caps()",
            "check_for_to_in_subject(user)",
            "check_outlook_message_id()",
            "check_messageid_not_usable()",
            "check_header_count_range(Subject,2,999)",
            "check_unresolved_template()",
            "check_ratware_name_id()",
            "check_ratware_envelope_from()",
            "check_equal_from_domains()",
            "check_freemail_from()",
            "check_freemail_header(Reply-To,\\d@)",
            "check_freemail_header(EnvelopeFrom)",
            "check_freemail_replyto(replyto)",
            "check_freemail_replyto(reply)",
            "check_from_in_list(PAYPAL)",
            "check_replyto_in_list(SUSP_NTLD)",
        ];
        // (message, SpamAssassin 4.0.1 result of each call, 1 = hit)
        let cases: &[(&[u8], &str)] = &[
            (b"Received: from mail.example.com (mail.example.com [192.0.2.1]) by mx.example.net (8.12.5/8.12.5) with ESMTP id g7MBYrZ04811; Thu, 22 Aug 2002 12:34:53 +0100\nReturn-Path: <joe99@yahoo.com>\nFrom: \"Joe\" <joe99@yahoo.com>\nReply-To: joe123@hotmail.com\nDate: Thu, 22 Aug 2002 16:40:00 +0100\nSubject: HELLO THIS IS ALL CAPS\nMessage-ID: <0a1b3d6e5f6a$1234abcd$5678ef01@example.com>\n\nWrite to friend77@gmail.com today.\n", "00000001000000000001000000110001010000001101100"),
            (b"Return-Path: <bounce@list.example.org>\nReceived: from hotmail.com (mx.spammer.biz [198.51.100.7]) by mx.example.net (8.12.5/8.12.5) with ESMTP id abc123; Thu, 22 Aug 2002 12:34:53 +0100\nFrom: someone@hotmail.com\nTo: aa@example.com, ab@example.com, ac@example.com, ad@example.com, ae@example.com, af@example.com, ag@example.com\nDate: Wed, 14 Aug 2002 12:00:00 +0100\nSubject: Re: aa\nMessage-ID: <ABCDEFGHIJKLMNOPQRSTUVWXYZAB.someone@hotmail.com>\n\nbody\n", "00000001000000001000000010000110100000011000000"),
            (b"Received: from unknown (HELO 203.0.113.9) (198.51.100.20) by mail.example.net with SMTP; 22 Aug 2002 11:00:00 -0000\nReceived: from yahoo.com ([10.1.2.3]) by mail.example.org (8.12/8.12) with ESMTP id x1; Thu, 22 Aug 2002 10:00:00 +0100\nFrom: \"Yahoo User\" <yuser@yahoo.com>\nTo: victim@example.net\nDate: Thu, 22 Aug 2002 10:00:00 +0000\nSubject: hi\nMessage-ID: <12345@example.org>\nList-Unsubscribe: <mailto:leave-list-12@example.org>\n\nbody %FIRST_NAME\n", "00010010100000000001000000000000001000001000000"),
            (b"Received: from aol.com (unknown [198.51.100.33]) by mx.example.net (Postfix) with SMTP id 123ABC; Thu, 22 Aug 2002 12:34:53 +0100\nReceived: from x (y.example.com [203.0.113.77]) by rly-xa01.mx.aol.com (8.12/8.12) with ESMTP id q; Thu, 22 Aug 2002 12:30:00 +0100\nFrom: gmailer@gmail.com\nTo: user@example.net\nCc: other@example.net\nSubject: user: your account\nDate: Thu, 22 Aug 2002 12:00:00 +0100\nMessage-ID: <abc@example.com>\nX-Template: %ADDRESS_HERE\n\nbody\n", "00000001000100000000010000000000100010001000000"),
            (b"Received: from localhost (localhost [127.0.0.1]) by mail.example.org (Postfix) with ESMTP id 1; Thu, 22 Aug 2002 12:00:00 +0100\nReceived: from desk (desk.lan [192.168.1.5]) by mail.example.org (Postfix) with ESMTP id 2; Thu, 22 Aug 2002 11:59:00 +0100\nFrom: boss@example.org\nTo: staff@example.org\nSubject: lunch\nSubject: dinner\nDate: Thu, 22 Aug 2002 11:58:00 +0100\n\nbody\n", "10000000000000000000000000000000000100000000000"),
            (b"From: \"J\xe9r\xf4me\" <jerome@example.com>\nTo: x@example.net\nSubject: caf\xe9 cr\xe8me \xae\nDate: Thu, 22 Aug 2002 11:58:00 +0100\n\nbody\n", "01000000000010110000000000000000001000000000000"),
            (b"Received: garbage that is not a received line\nReceived: from mail.example.com by relay.example.net; Thu, 22 Aug 2002 12:34:53 +0100\nFrom: x@paypal.com\nReply-To: y@example.top\nTo: z@example.net\nSubject: account\nDate: Thu, 22 Aug 2002 11:58:00 +0100\n\nbody\n", "01000000000000000000000000000000000000000000011"),
            (b"Received: from mail.example.com (mail.example.com [192.0.2.1]) by mx.example.net (8.12.5/8.12.5) with ESMTP id g7MBYrZ04811; Thu, 22 Aug 2002 12:34:53 +0100 (envelope-from <example.net.victim@spam.example.com>)\nFrom: \"Someone\" <someone@example.com>\nTo: victim@example.net\nSubject: hello\nDate: Thu, 22 Aug 2002 11:58:00 +0100\n\nbody\n", "00000001001000000000000000000000000000100000000"),
        ];

        let data = data();
        let tests: Vec<EvalTest> = CALLS
            .iter()
            .map(|spec| {
                let (name, args) = call(spec);
                match EvalTest::parse(EvalOn::Header, name, args, &data) {
                    Ok(t) => t,
                    Err(e) => panic!("{spec}: {e}"),
                }
            })
            .collect();
        let mut bufs = MessageBuffers::new(Limits::default());
        let mut scratch = super::super::EvalScratch::default();
        for (k, (raw, want)) in cases.iter().enumerate() {
            let message = Message::parse(raw, &mut bufs);
            scratch.prepare(&message, &data);
            let super::super::EvalScratch { relays, tests: test_scratch } = &mut scratch;
            let cx = EvalContext { message: &message, data: &data, relays };
            for ((spec, test), w) in CALLS.iter().zip(&tests).zip(want.bytes()) {
                let got = test.run(&cx, test_scratch) > 0;
                assert_eq!(got, w == b'1', "message {} {spec}", k + 1);
            }
        }
    }

    #[test]
    fn network_functions_are_reported_as_such() {
        let data = data();
        for f in ["check_rbl", "check_rbl_sub", "check_dkim_valid", "check_for_spf_pass", "check_razor2", "check_bayes"]
        {
            match EvalTest::parse(EvalOn::Header, f, "'a', 'b'", &data) {
                Err(EvalError::Unavailable { why, .. }) => assert!(!why.is_empty(), "{f}"),
                other => panic!("{f}: {:?}", other.map(|_| ())),
            }
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        let data = data();
        for (f, args) in [
            ("check_for_shifted_date", "'x', 'y'"),
            ("check_freemail_header", ""),
            ("check_freemail_header", "'From', '(unclosed'"),
            ("check_from_in_list", ""),
        ] {
            assert!(
                matches!(EvalTest::parse(EvalOn::Header, f, args, &data), Err(EvalError::BadArguments { .. })),
                "{f}({args})"
            );
        }
    }

    #[test]
    fn fixed_patterns_compile() {
        assert_eq!(HeaderPatterns::broken(), Vec::<&str>::new());
        // Splicing the parsed sub-patterns gives the very program inlining their text did.
        let family = Patterns::new();
        for (p, icase) in FIXED.iter().chain(&[(r"^(?:(?&PRIVATE))$", false), (r"x(?&LOCALHOST)|(?&IPV4)y", true)]) {
            let spliced = alloc::format!("{:?}", family.compile(p, *icase));
            assert_eq!(spliced, super::super::re::inlined_program(p, *icase), "{p}");
        }
    }

    #[test]
    fn recipients_table() {
        // (To and Cc, sorted, similarity as SpamAssassin 4.0.1's `_check_recipients`
        // gives them): pairs with the same first two bytes of the address, or of the
        // domain where the domains differ, over all pairs.
        let cases: &[(&str, bool, f64)] = &[
            ("aa1@x.com, aa2@x.com, bb@y.org, cc@z.net, dd@q.io", false, 0.1),
            ("ab@mail.one.com, cd@mail.two.com, ef@other.org, gh@mail.three.com, ij@zzz.com", false, 0.3),
            // An address that parses empty is left out (SpamAssassin's `ToCc:addr` drops it).
            ("ab@mail.one.com, cd@mail.two.com, ef@other.org, local, gh@mail.three.com, ij@zzz.com", false, 0.3),
            ("ab1@h.com, AB1@h.com, ab2@i.com, ab3@j.com, zz@k.com, ab4@l.com", false, 0.6),
            ("a@a.com, b@b.com, c@c.com, d@d.com, e@e.com, f@f.com, g@g.com", true, 0.0),
            ("a@a.com, b@b.com, c@c.com, e@e.com, d@d.com, f@f.com, g@g.com", false, 0.0),
            ("a@a.com, b@b.com, c@c.com, d@d.com", false, 0.0),
        ];
        let data = data();
        let mut bufs = MessageBuffers::new(Limits::default());
        let mut scratch = super::super::EvalScratch::default();
        let mut list = AddrSet::default();
        for (to, sorted, similar) in cases {
            let (first, rest) = to.split_at(to.find(", ").map_or(to.len(), |i| i + 2));
            let raw = alloc::format!("From: x@example.com\nTo: {first}\nCc: {rest}\nSubject: s\n\nbody\n");
            let message = Message::parse(raw.as_bytes(), &mut bufs);
            scratch.prepare(&message, &data);
            let got = recipients(&message, &scratch.relays, &mut list);
            assert_eq!(got.0, *sorted, "{to}");
            assert!((got.1 - similar).abs() < 1e-9, "{to}: {}", got.1);
        }
    }

    #[test]
    fn helpers_table() {
        assert_eq!(second_level(b"mail.sub.example.com"), b"example.com");
        assert_eq!(second_level(b"example.com"), b"example.com");
        assert_eq!(after_last_at(b"a@b@c.d"), b"c.d");
        assert_eq!(hostname_to_domain(b"mx1.mail.example.ie"), b"example.ie");
        assert_eq!(hostname_to_domain(b"a.b.c.tv"), b"b.c.tv");
        assert_eq!(hostname_to_domain(b"10.1.2.3"), b"10.1.2.3");
        assert!(is_fqdn_valid(b"mail.example.com."));
        assert!(is_fqdn_valid(b"_x.example.com"));
        assert!(!is_fqdn_valid(b"ex_ample.com"));
        assert!(!is_fqdn_valid(b"localhost"));
    }
}
