//! The message SpamAssassin 4.0.1 hands back for PROCESS and HEADERS, and its
//! report: `X-Spam-*` headers (`add_header`, folded as SpamAssassin folds them),
//! `remove_header`, `rewrite_header Subject|From|To`, `report_safe` 0, 1 and 2,
//! and templates with their `_TAGS_`.
//!
//! The raw message is split into mbox line, header block and body by the message
//! parser's splitter ([`msg::Fields`], SpamAssassin's `Message::new`), reading a
//! text without LF as one line as SpamAssassin does.
//!
//! What sift prints where SpamAssassin prints its own state:
//! - `_VERSION_` is sift's version (`x.y.z`, the shape SpamAssassin's has),
//!   `_SUBVERSION_` is `sift` (SpamAssassin: a release date), so the stock
//!   `X-Spam-Checker-Version` reads `SpamAssassin 0.1.0 (sift) on host`;
//! - `_AUTOLEARN_` is `disabled`, what SpamAssassin prints with Bayes auto-learning
//!   off (sift has no Bayes);
//! - the `Received` header of `report_safe` says `with sift (version x.y.z)`;
//! - relay, Bayes and timing tags (`_LASTEXTERNALIP_`, `_BAYES_` …) are empty or
//!   neutral; `_HEADER(Name)_` gives the raw, unfolded value (not RFC 2047-decoded).
//!
//! Writing allocates nothing once the [`RewriteScratch`] buffers have grown.

use alloc::string::String;
use alloc::vec::Vec;

use super::sink::{put_fmt, Crlf, FmtSink, Sink};
use crate::msg::{self, Eol};
use crate::report::{self, First, VerdictView, WrapBreak};
use crate::rules::{AddHeaderWhen, Config};

/// The `X-Spam-Checker-Version` template SpamAssassin always starts with.
pub const CHECKER_VERSION_TEMPLATE: &str = "SpamAssassin _VERSION_ (_SUBVERSION_) on _HOSTNAME_";

/// The stock `report` template (10_default_prefs.cf of SpamAssassin 4.0.1).
pub const STOCK_REPORT_TEMPLATE: &str = "Spam detection software, running on the system \"_HOSTNAME_\",\n\
has_YESNO(, NOT)_ identified this incoming email as_YESNO( possible,)_ spam.  The original\n\
message has been attached to this so you can view it or label\n\
similar future email.  If you have any questions, see\n\
_CONTACTADDRESS_ for details.\n\
\n\
Content preview:  _PREVIEW_\n\
\n\
Content analysis details:   (_SCORE_ points, _REQD_ required)\n\
\n \
pts rule name              description\n\
---- ---------------------- --------------------------------------------------\n\
_SUMMARY_\n";

/// The stock `unsafe_report` template, appended to the report when the original
/// message is not plain text.
pub const STOCK_UNSAFE_REPORT_TEMPLATE: &str = "The original message was not completely plain text, and may be unsafe to\n\
open with some email clients; in particular, it may contain a virus,\n\
or confirm that your address can receive spam.  If you wish to view\n\
it, it may be safer to save it to a file and open it with an editor.\n";

/// SpamAssassin's default `report_contact`.
pub const DEFAULT_CONTACT_ADDRESS: &str = "the administrator of that system";

/// The rewriting settings: SpamAssassin's `headers_spam`/`headers_ham` lists and
/// the report options. Built once when rules are loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewriteSettings {
    /// `report_safe`: 0 headers only, 1 wrap spam as message/rfc822, 2 as text/plain.
    pub report_safe: u8,
    /// Headers added to spam: (name after `X-Spam-`, template), in order.
    pub headers_spam: Vec<(String, String)>,
    /// Headers added to ham.
    pub headers_ham: Vec<(String, String)>,
    /// `rewrite_header Subject`.
    pub rewrite_subject: Option<String>,
    /// `rewrite_header From` (parentheses already turned into brackets).
    pub rewrite_from: Option<String>,
    /// `rewrite_header To` (parentheses already turned into brackets).
    pub rewrite_to: Option<String>,
    /// `report` template.
    pub report_template: String,
    /// `unsafe_report` template.
    pub unsafe_report_template: String,
    /// `report_charset`.
    pub report_charset: String,
    /// `report_wrap_width`.
    pub report_wrap_width: usize,
    /// `fold_headers`.
    pub fold_headers: bool,
    /// Content-Description of the wrapped original.
    pub encapsulated_content_description: String,
    /// `report_safe_copy_headers`.
    pub copy_headers: Vec<String>,
}

impl Default for RewriteSettings {
    fn default() -> Self {
        Self::stock()
    }
}

impl RewriteSettings {
    /// SpamAssassin's built-in state before any rule file: only `Checker-Version`,
    /// `report_safe 1`, no report text beyond the stock templates.
    pub fn base() -> Self {
        let checker = (String::from("Checker-Version"), String::from(CHECKER_VERSION_TEMPLATE));
        RewriteSettings {
            report_safe: 1,
            headers_spam: alloc::vec![checker.clone()],
            headers_ham: alloc::vec![checker],
            rewrite_subject: None,
            rewrite_from: None,
            rewrite_to: None,
            report_template: String::from(STOCK_REPORT_TEMPLATE),
            unsafe_report_template: String::from(STOCK_UNSAFE_REPORT_TEMPLATE),
            report_charset: String::from("UTF-8"),
            report_wrap_width: report::REPORT_WRAP_WIDTH,
            fold_headers: true,
            encapsulated_content_description: String::from("original message before SpamAssassin"),
            copy_headers: Vec::new(),
        }
    }

    /// SpamAssassin 4.0.1 with its stock 10_default_prefs.cf: `Checker-Version`,
    /// `Flag` (spam), `Level` and `Status` headers, `report_safe 1`.
    pub fn stock() -> Self {
        let mut s = Self::base();
        s.clear_headers();
        s.add_header(AddHeaderWhen::All, "Checker-Version", CHECKER_VERSION_TEMPLATE);
        s.add_header(AddHeaderWhen::Spam, "Flag", "_YESNOCAPS_");
        s.add_header(AddHeaderWhen::All, "Level", "_STARS(*)_");
        s.add_header(
            AddHeaderWhen::All,
            "Status",
            "_YESNO_, score=_SCORE_ required=_REQD_ tests=_TESTS_ autolearn=_AUTOLEARN_ version=_VERSION_",
        );
        s
    }

    /// The settings a rule set's [`Config`] asks for, over [`base`](Self::base):
    /// its `add_header`s in order, then its `remove_header`s, `report_safe` and
    /// `rewrite_header`s. (The `Config` does not keep the relative order of
    /// `add_header` and `remove_header`; removals are applied last.)
    pub fn from_config(config: &Config) -> Self {
        let mut s = Self::base();
        for h in &config.add_headers {
            s.add_header(h.when, &h.name, &h.template);
        }
        for (when, name) in &config.remove_headers {
            s.remove_header(*when, name);
        }
        s.set_report_safe(config.report_safe);
        for (name, text) in &config.rewrite_headers {
            s.rewrite_header(name, text);
        }
        s
    }

    /// `add_header`: replaces a header of the same name (any case) and moves it last.
    pub fn add_header(&mut self, when: AddHeaderWhen, name: &str, template: &str) {
        let entry = (String::from(name), String::from(template));
        if matches!(when, AddHeaderWhen::Ham | AddHeaderWhen::All) {
            self.headers_ham.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            self.headers_ham.push(entry.clone());
        }
        if matches!(when, AddHeaderWhen::Spam | AddHeaderWhen::All) {
            self.headers_spam.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            self.headers_spam.push(entry);
        }
    }

    /// `remove_header`; `Checker-Version` cannot be removed.
    pub fn remove_header(&mut self, when: AddHeaderWhen, name: &str) {
        if name == "Checker-Version" {
            return;
        }
        if matches!(when, AddHeaderWhen::Ham | AddHeaderWhen::All) {
            self.headers_ham.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        }
        if matches!(when, AddHeaderWhen::Spam | AddHeaderWhen::All) {
            self.headers_spam.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        }
    }

    /// `clear_headers`: all but the first `Checker-Version`.
    pub fn clear_headers(&mut self) {
        let checker = self.headers_ham.iter().find(|(n, _)| n.eq_ignore_ascii_case("checker-version")).cloned();
        self.headers_ham.clear();
        self.headers_spam.clear();
        if let Some(c) = checker {
            self.headers_ham.push(c.clone());
            self.headers_spam.push(c);
        }
    }

    /// `report_safe N` (clamped to 2); 0 adds `X-Spam-Report: _REPORT_` to spam
    /// unless a `Report` header is already there.
    pub fn set_report_safe(&mut self, n: u8) {
        self.report_safe = n.min(2);
        if self.report_safe == 0 && !self.headers_spam.iter().any(|(n, _)| n.eq_ignore_ascii_case("report")) {
            self.headers_spam.push((String::from("Report"), String::from("_REPORT_")));
        }
    }

    /// `rewrite_header Subject|From|To TEXT`; empty text removes it; other names are ignored.
    pub fn rewrite_header(&mut self, name: &str, text: &str) {
        let text = text.trim();
        let value = (!text.is_empty()).then(|| String::from(text));
        if name.eq_ignore_ascii_case("subject") {
            self.rewrite_subject = value;
        } else if name.eq_ignore_ascii_case("from") {
            self.rewrite_from = value.map(|v| v.replace('(', "[").replace(')', "]"));
        } else if name.eq_ignore_ascii_case("to") {
            self.rewrite_to = value.map(|v| v.replace('(', "[").replace(')', "]"));
        }
    }
}

/// Per-message facts that are not in the verdict: host, time, contact, versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Environment<'e> {
    /// `_HOSTNAME_` and the `Received` header of report_safe.
    pub hostname: &'e str,
    /// `_DATE_` and the `Received` header: an RFC 2822 date.
    pub date: &'e str,
    /// `_CONTACTADDRESS_` (`report_contact`).
    pub contact_address: &'e str,
    /// `_VERSION_`.
    pub version: &'e str,
    /// `_SUBVERSION_`.
    pub subversion: &'e str,
    /// `_AUTOLEARN_`.
    pub autolearn: &'e str,
    /// `_REMOTEHOSTNAME_`.
    pub remote_hostname: &'e str,
    /// `_REMOTEHOSTADDR_`.
    pub remote_addr: &'e str,
    /// The MIME boundary of report_safe is `----------=_%08X.%08X` of these
    /// (SpamAssassin: the time and a random number).
    pub boundary_seed: [u32; 2],
}

impl<'e> Environment<'e> {
    /// An environment with sift's defaults for everything but host and date.
    pub fn new(hostname: &'e str, date: &'e str) -> Self {
        Environment {
            hostname,
            date,
            contact_address: DEFAULT_CONTACT_ADDRESS,
            version: env!("CARGO_PKG_VERSION"),
            subversion: "sift",
            autolearn: "disabled",
            remote_hostname: "localhost",
            remote_addr: "127.0.0.1",
            boundary_seed: [0, 0],
        }
    }
}

/// Buffers a rewrite expands templates into; keep one per worker.
#[derive(Debug, Default)]
pub struct RewriteScratch {
    bufs: Bufs,
    report: Vec<u8>,
    tags: [Vec<u8>; 3],
}

/// Buffers for expanding one template.
#[derive(Debug, Default)]
struct Bufs {
    expanded: Vec<u8>,
    folded: Vec<u8>,
    text: Vec<u8>,
    preview: Vec<u8>,
}

impl RewriteScratch {
    /// Empty buffers.
    pub fn new() -> Self {
        Self::default()
    }
}

// ---------------------------------------------------------------------------
// The raw message as SpamAssassin splits it.

/// Lines ending in `\n` (the last one may not).
fn lines(b: &[u8]) -> impl Iterator<Item = &[u8]> {
    b.split_inclusive(|&c| c == b'\n')
}

fn starts_with_ignore_case(hay: &[u8], prefix: &[u8]) -> bool {
    hay.get(..prefix.len()).is_some_and(|h| h.eq_ignore_ascii_case(prefix))
}

fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

/// A message split into mbox line, header block (blank line included) and body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Split<'m> {
    pub(crate) mbox: &'m [u8],
    pub(crate) headers: &'m [u8],
    pub(crate) body: &'m [u8],
    pub(crate) crlf: bool,
}

/// A header value as `get_pristine_header` returns it: from after the colon and
/// blanks through the final newline (continuations included).
#[derive(Debug, Clone, Copy)]
struct Value<'m> {
    bytes: &'m [u8],
    /// The value ended at end of input without a newline: SpamAssassin then
    /// falls back to the parsed header, unfolded and trimmed, plus a newline.
    unterminated: bool,
}

impl<'m> Value<'m> {
    /// The value without its line ending, the line ending, and whether the
    /// value must be unfolded when written.
    fn parts(&self) -> (&'m [u8], &'static [u8], bool) {
        if self.unterminated {
            let b = self.bytes;
            let start = b.iter().position(|&c| !report::is_perl_space(c)).unwrap_or(b.len());
            let end = b.iter().rposition(|&c| !report::is_perl_space(c)).map_or(start, |i| i + 1);
            (b.get(start..end).unwrap_or_default(), b"\n", true)
        } else if let Some(v) = self.bytes.strip_suffix(b"\r\n") {
            (v, b"\r\n", false)
        } else if let Some(v) = self.bytes.strip_suffix(b"\n") {
            (v, b"\n", false)
        } else {
            (self.bytes, b"", false)
        }
    }
}

/// Writes `content`, replacing each `\n` and the blanks after it with a space when `unfold`.
fn put_content(w: &mut dyn Sink, content: &[u8], unfold: bool) {
    if !unfold {
        w.put(content);
        return;
    }
    let mut rest = content;
    while let Some(i) = memchr::memchr(b'\n', rest) {
        let blanks = rest.get(i + 1..).unwrap_or_default().iter().take_while(|&&b| b == b' ' || b == b'\t').count();
        if blanks == 0 {
            w.put(rest.get(..=i).unwrap_or_default());
        } else {
            w.put(rest.get(..i).unwrap_or_default());
            w.put(b" ");
        }
        rest = rest.get(i + 1 + blanks..).unwrap_or_default();
    }
    w.put(rest);
}

impl<'m> Split<'m> {
    pub(crate) fn new(raw: &'m [u8]) -> Split<'m> {
        let raw: &[u8] = if raw.is_empty() { b"\n" } else { raw };
        let (head, eol) = msg::message_head(raw, 0, raw.len(), false);
        let mut fields = msg::Fields::new(raw, head, raw.len(), eol);
        fields.by_ref().for_each(drop);
        let body_start = fields.block().body_start;
        Split {
            mbox: raw.get(..head).unwrap_or_default(),
            headers: raw.get(head..body_start).unwrap_or_default(),
            body: raw.get(body_start..).unwrap_or_default(),
            crlf: eol == Eol::Crlf,
        }
    }

    /// Every instance of header `name`, in order (`get_pristine_header` in list context).
    fn pristine_all<'s>(&'s self, name: &'s [u8]) -> impl Iterator<Item = Value<'m>> + 's {
        let block = self.headers;
        let eol = if self.crlf { Eol::Crlf } else { Eol::Lf };
        msg::Fields::new(block, 0, block.len(), eol).filter_map(move |f| {
            let after = block.get(f.start..f.end).filter(|l| starts_with_ignore_case(l, name))?.get(name.len()..)?;
            let blanks = after.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
            let value = after.get(blanks..)?.strip_prefix(b":")?;
            let value = value.get(value.iter().take_while(|&&b| b == b' ' || b == b'\t').count()..)?;
            // Without a final newline SpamAssassin's regex fails and it falls back to the parsed header.
            Some(Value { bytes: value, unterminated: !f.terminated() })
        })
    }

    /// The last instance of header `name` (`get_pristine_header` in scalar context).
    fn pristine(&self, name: &[u8]) -> Option<Value<'m>> {
        self.pristine_all(name).last()
    }
}

// ---------------------------------------------------------------------------
// Templates and tags.

/// What tags read.
struct Ctx<'a, V: VerdictView + ?Sized> {
    view: &'a V,
    settings: &'a RewriteSettings,
    env: &'a Environment<'a>,
    msg: &'a Split<'a>,
}

/// A tag found in a template: name, argument, end of the match.
struct Tag<'t> {
    name: &'t [u8],
    arg: Option<&'t [u8]>,
    end: usize,
}

fn is_tag_char(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

/// Matches `_([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*(?:\(.*?\))?)_` at `start` (a `_`).
fn match_tag(t: &[u8], start: usize) -> Option<Tag<'_>> {
    let name_start = start + 1;
    if !t.get(name_start).copied().is_some_and(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut end = name_start + 1;
    while t.get(end).copied().is_some_and(is_tag_char) {
        end += 1;
    }
    while t.get(end) == Some(&b'_') && t.get(end + 1).copied().is_some_and(is_tag_char) {
        end += 2;
        while t.get(end).copied().is_some_and(is_tag_char) {
            end += 1;
        }
    }
    if t.get(end) == Some(&b'(') {
        // The shortest argument whose `)` is followed by `_`, within the line.
        let mut p = end + 1;
        while let Some(&b) = t.get(p) {
            if b == b'\n' {
                break;
            }
            if b == b')' && t.get(p + 1) == Some(&b'_') {
                return Some(Tag { name: t.get(name_start..end)?, arg: t.get(end + 1..p), end: p + 2 });
            }
            p += 1;
        }
    } else if t.get(end) == Some(&b'_') {
        return Some(Tag { name: t.get(name_start..end)?, arg: None, end: end + 1 });
    }
    // Backtrack to the last `_` inside the name, which then closes the tag.
    let name = t.get(name_start..end)?;
    let last = name.iter().rposition(|&b| b == b'_')?;
    Some(Tag { name: name.get(..last)?, arg: None, end: name_start + last + 1 })
}

/// Replaces the tags in `template`, appending to `out`; unknown tags stay as written.
fn expand<V: VerdictView + ?Sized>(template: &[u8], ctx: &Ctx<'_, V>, out: &mut Vec<u8>, text: &mut Vec<u8>, preview: &mut Vec<u8>) {
    let mut i = 0;
    while i < template.len() {
        let Some(off) = template.get(i..).and_then(|r| memchr::memchr(b'_', r)) else {
            out.extend_from_slice(template.get(i..).unwrap_or_default());
            return;
        };
        let at = i + off;
        out.extend_from_slice(template.get(i..at).unwrap_or_default());
        match match_tag(template, at) {
            Some(tag) => {
                if !tag_value(&tag, ctx, out, text, preview) {
                    out.extend_from_slice(template.get(at..tag.end).unwrap_or_default());
                }
                i = tag.end;
            }
            None => {
                out.push(b'_');
                i = at + 1;
            }
        }
    }
}

/// `_YESNO(spam,ham)_`: the argument split at its first comma.
fn yes_no(arg: Option<&[u8]>, spam: bool) -> &[u8] {
    let (s, h) = match arg.filter(|a| !a.is_empty()) {
        None => (None, None),
        Some(a) => match a.iter().position(|&b| b == b',') {
            Some(c) => (a.get(..c), a.get(c + 1..)),
            None => (Some(a), None),
        },
    };
    if spam {
        s.unwrap_or(b"Yes")
    } else {
        h.unwrap_or(b"No")
    }
}

/// Writes the value of `tag`; false when the tag is unknown.
fn tag_value<V: VerdictView + ?Sized>(tag: &Tag<'_>, ctx: &Ctx<'_, V>, out: &mut Vec<u8>, text: &mut Vec<u8>, preview: &mut Vec<u8>) -> bool {
    let v = ctx.view;
    match tag.name {
        b"YESNO" => out.extend_from_slice(yes_no(tag.arg, v.is_spam())),
        b"YESNOCAPS" => out.extend(yes_no(tag.arg, v.is_spam()).iter().map(u8::to_ascii_uppercase)),
        b"SCORE" | b"HITS" => {
            let mut score = heapless::String::<48>::new();
            let _ = report::write_score_tag(v, &mut score);
            if let Some(pad) = tag.arg {
                let same = pad.first().is_some_and(|&c| (c == b'0' || c == b' ') && pad.iter().all(|&b| b == c));
                if same {
                    let count = (pad.len() + 3).saturating_sub(score.len());
                    out.extend_from_slice(pad.get(..count.min(pad.len())).unwrap_or_default());
                }
            }
            out.extend_from_slice(score.as_bytes());
        }
        b"REQD" => put_fmt(out, format_args!("{}", v.required().display(1))),
        b"VERSION" => out.extend_from_slice(ctx.env.version.as_bytes()),
        b"SUBVERSION" => out.extend_from_slice(ctx.env.subversion.as_bytes()),
        b"HOSTNAME" => out.extend_from_slice(ctx.env.hostname.as_bytes()),
        b"REMOTEHOSTNAME" => out.extend_from_slice(ctx.env.remote_hostname.as_bytes()),
        b"REMOTEHOSTADDR" => out.extend_from_slice(ctx.env.remote_addr.as_bytes()),
        b"CONTACTADDRESS" => out.extend_from_slice(ctx.env.contact_address.as_bytes()),
        b"DATE" => out.extend_from_slice(ctx.env.date.as_bytes()),
        b"AUTOLEARN" => out.extend_from_slice(ctx.env.autolearn.as_bytes()),
        b"BAYES" => out.extend_from_slice(b"0.5"),
        b"RULESVERSION" | b"SUBJPREFIX" | b"TIMING" | b"FIRSTTRUSTEDIP" | b"FIRSTTRUSTEDREVIP" | b"LASTEXTERNALIP"
        | b"LASTEXTERNALREVIP" | b"LASTEXTERNALRDNS" | b"LASTEXTERNALHELO" => {}
        b"STARS" => {
            let star = arg_or(tag.arg, b"*");
            let n = (v.score().0 / 1000).clamp(0, 50);
            for _ in 0..n {
                out.extend_from_slice(star);
            }
        }
        b"TESTS" | b"TESTSSCORES" => {
            let sep = arg_or(tag.arg, b",");
            let with_scores = tag.name == b"TESTSSCORES";
            let mark = out.len();
            report::for_each_hit_by_name(v, |hit| {
                if out.len() > mark {
                    out.extend_from_slice(sep);
                }
                out.extend_from_slice(hit.name.as_bytes());
                if with_scores {
                    out.push(b'=');
                    let _ = report::write_milli_number(hit.score, &mut FmtSink(out));
                }
            });
            if out.len() == mark {
                out.extend_from_slice(b"none");
            }
        }
        b"SUBTESTS" | b"SUBTESTSCOLLAPSED" => {
            let sep = arg_or(tag.arg, b",");
            let mark = out.len();
            report::for_each_subtest_by_name(v, |name| {
                if out.len() > mark {
                    out.extend_from_slice(sep);
                }
                out.extend_from_slice(name.as_bytes());
            });
            if out.len() == mark {
                out.extend_from_slice(b"none");
            }
        }
        b"REPORT" => {
            out.push(b'\n');
            for hit in v.hits() {
                report::push_report_line(&hit, ctx.settings.report_wrap_width, out);
            }
        }
        b"SUMMARY" => {
            for hit in v.hits() {
                report::push_summary_line(&hit, ctx.settings.report_wrap_width, out);
            }
        }
        b"PREVIEW" => {
            content_preview(v, text, preview);
            out.extend_from_slice(preview);
        }
        b"HEADER" => {
            if let Some(name) = tag.arg.filter(|a| !a.is_empty()) {
                let mark = out.len();
                for value in ctx.msg.pristine_all(name) {
                    if out.len() > mark {
                        out.push(b'\n');
                    }
                    push_unfolded(value.bytes, out);
                }
            }
        }
        _ => return false,
    }
    true
}

/// A tag's argument, or `default` when it is missing or false to Perl (`shift || default`).
fn arg_or<'a>(arg: Option<&'a [u8]>, default: &'a [u8]) -> &'a [u8] {
    match arg {
        Some(a) if !a.is_empty() && a != b"0" => a,
        _ => default,
    }
}

/// A header value without its line breaks and final newline.
fn push_unfolded(value: &[u8], out: &mut Vec<u8>) {
    let value = value.strip_suffix(b"\n").unwrap_or(value);
    let value = value.strip_suffix(b"\r").unwrap_or(value);
    out.extend(value.iter().copied().filter(|&b| b != b'\n' && b != b'\r'));
}

// ---------------------------------------------------------------------------
// _PREVIEW_

/// Paragraphs a content preview takes after the Subject line.
const PREVIEW_PARAGRAPHS: usize = 3;
/// Bytes of a paragraph a content preview keeps; longer ones end in ` [...]`.
const PREVIEW_LINE: usize = 200;

/// Removes every `needle` from `buf`.
fn remove_all(buf: &mut Vec<u8>, needle: &[u8]) {
    let mut w = 0;
    let mut r = 0;
    while r < buf.len() {
        if buf.get(r..r + needle.len()) == Some(needle) {
            r += needle.len();
            continue;
        }
        if let Some(&b) = buf.get(r) {
            if let Some(slot) = buf.get_mut(w) {
                *slot = b;
            }
        }
        w += 1;
        r += 1;
    }
    buf.truncate(w);
}

/// Keeps the bytes for which `keep(buf, index)` holds, in order.
fn retain_indexed(buf: &mut Vec<u8>, mut keep: impl FnMut(&[u8], usize) -> bool) {
    let mut w = 0;
    for r in 0..buf.len() {
        if keep(buf, r) {
            let b = buf.get(r).copied().unwrap_or(0);
            if let Some(slot) = buf.get_mut(w) {
                *slot = b;
            }
            w += 1;
        }
    }
    buf.truncate(w);
}

/// SpamAssassin's `get_content_preview`, into `preview`.
fn content_preview<V: VerdictView + ?Sized>(v: &V, text: &mut Vec<u8>, preview: &mut Vec<u8>) {
    let source = v.body_text();
    // Up to three paragraphs after the Subject line, until 200 bytes; of each, what the
    // cut below keeps (a longer line stops the loop as the whole one would).
    let mut s = core::mem::take(preview);
    s.clear();
    let mut numlines = PREVIEW_PARAGRAPHS;
    for line in lines(source).skip(1) {
        if s.len() >= PREVIEW_LINE || numlines == 0 {
            break;
        }
        numlines -= 1;
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        s.extend_from_slice(body.get(..PREVIEW_LINE + 1).unwrap_or(body));
        s.push(b'\n');
    }
    // s/^(.{200}).+$/$1 [...]/gm
    let mut cut = Vec::new();
    core::mem::swap(&mut cut, text);
    cut.clear();
    for line in lines(&s) {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        if body.len() > PREVIEW_LINE {
            cut.extend_from_slice(body.get(..PREVIEW_LINE).unwrap_or(body));
            cut.extend_from_slice(b" [...]");
            if line.len() > body.len() {
                cut.push(b'\n');
            }
        } else {
            cut.extend_from_slice(line);
        }
    }
    if cut.last() == Some(&b'\n') {
        cut.pop();
    }
    cut.push(b'\n');
    // s/-----Original Message-----.*$//gm
    s.clear();
    for line in lines(&cut) {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        match memchr::memmem::find(body, b"-----Original Message-----") {
            Some(i) => {
                s.extend_from_slice(body.get(..i).unwrap_or_default());
                s.extend_from_slice(line.get(body.len()..).unwrap_or_default());
            }
            None => s.extend_from_slice(line),
        }
    }
    remove_all(&mut s, b"This is a multi-part message in MIME format.");
    // s/[-_*.]{10,}//gs
    let is_rule = |b: u8| matches!(b, b'-' | b'_' | b'*' | b'.');
    let mut run_end = 0;
    retain_indexed(&mut s, |buf, i| {
        if i < run_end {
            return false;
        }
        let run = buf.get(i..).unwrap_or_default().iter().take_while(|&&b| is_rule(b)).count();
        if run >= 10 {
            run_end = i + run;
            return false;
        }
        true
    });
    // s/\s+/ /gs
    retain_indexed(&mut s, |buf, i| {
        !(buf.get(i).copied().is_some_and(report::is_perl_space) && i > 0 && buf.get(i - 1).copied().is_some_and(report::is_perl_space))
    });
    for b in s.iter_mut() {
        if report::is_perl_space(*b) {
            *b = b' ';
        }
    }
    let mut wrapped = cut;
    wrapped.clear();
    report::wrap(&s, b"  ", First::Text(b"Content preview:  "), 75, true, WrapBreak::Whitespace, &mut wrapped);
    let start = match wrapped.strip_prefix(b"Content preview:") {
        Some(rest) => wrapped.len() - rest.len() + rest.iter().take_while(|&&b| report::is_perl_space(b)).count(),
        None => 0,
    };
    s.clear();
    s.extend_from_slice(wrapped.get(start..).unwrap_or_default());
    *preview = s;
    *text = wrapped;
}

// ---------------------------------------------------------------------------
// Header folding and encoding.

/// `_process_header` + `mime_encode_header` + `X-Spam-NAME: …\n`.
fn write_added_header<V: VerdictView + ?Sized>(name: &str, template: &str, ctx: &Ctx<'_, V>, s: &mut Bufs, out: &mut dyn Sink) {
    s.expanded.clear();
    expand(template.as_bytes(), ctx, &mut s.expanded, &mut s.text, &mut s.preview);
    // s/(?:\r?\n)+$//
    while s.expanded.last() == Some(&b'\n') {
        s.expanded.pop();
        if s.expanded.last() == Some(&b'\r') {
            s.expanded.pop();
        }
    }
    s.folded.clear();
    let value: &[u8] = if !ctx.settings.fold_headers {
        s.folded.extend(s.expanded.iter().map(|&b| if b == b'\n' { b' ' } else { b }));
        &s.folded
    } else if s.expanded.contains(&b'\n') {
        // s/\s*\n\s*/\n\t/g: each blank run holding a newline becomes one.
        let e = &s.expanded;
        let mut i = 0;
        while i < e.len() {
            let run = e.get(i..).unwrap_or_default().iter().take_while(|&&b| report::is_perl_space(b)).count();
            if run == 0 {
                s.folded.extend(e.get(i..=i).unwrap_or_default());
                i += 1;
            } else {
                let ws = e.get(i..i + run).unwrap_or_default();
                if ws.contains(&b'\n') {
                    s.folded.extend_from_slice(b"\n\t");
                } else {
                    s.folded.extend_from_slice(ws);
                }
                i += run;
            }
        }
        &s.folded
    } else {
        s.text.clear();
        s.text.extend_from_slice(b"X-Spam-");
        s.text.extend_from_slice(name.as_bytes());
        s.text.extend_from_slice(b"!!");
        s.text.extend_from_slice(&s.expanded);
        report::wrap(&s.text, b"\t", First::Text(b""), 79, false, WrapBreak::AfterSpaceOrComma, &mut s.folded);
        // s/^\s*\n//gm: drop blank lines.
        let mut line_start = true;
        let mut skip_to = 0;
        retain_indexed(&mut s.folded, |buf, i| {
            if i < skip_to {
                return false;
            }
            if line_start {
                let run = buf.get(i..).unwrap_or_default().iter().take_while(|&&b| report::is_perl_space(b)).count();
                let nl = buf.get(i..i + run).and_then(|ws| ws.iter().rposition(|&b| b == b'\n'));
                if let Some(nl) = nl {
                    skip_to = i + nl + 1;
                    return false;
                }
            }
            line_start = buf.get(i) == Some(&b'\n');
            true
        });
        let split = memchr::memmem::find(&s.folded, b"!!").map_or(0, |i| i + 2);
        s.folded.get(split..).unwrap_or_default()
    };
    out.put(b"X-Spam-");
    out.put(name.as_bytes());
    out.put(b": ");
    mime_encode_header(value, out);
    out.put(b"\n");
}

fn is_header_safe(b: u8) -> bool {
    b == b'\t' || (0x20..=0x7e).contains(&b)
}

/// RFC 2047-encodes the lines of a header value that are not plain ASCII, as
/// SpamAssassin's `mime_encode_header` does.
fn mime_encode_header(text: &[u8], out: &mut dyn Sink) {
    for line in lines(text) {
        let (content, newline) = match line.strip_suffix(b"\r\n") {
            Some(c) => (c, line.get(c.len()..).unwrap_or_default()),
            None => match line.strip_suffix(b"\n") {
                Some(c) => (c, &b"\n"[..]),
                None => (line, &b""[..]),
            },
        };
        if content.iter().all(|&b| is_header_safe(b)) {
            out.put(line);
            continue;
        }
        // Suffix: from the first blank after the last unsafe byte.
        let last_bad = content.iter().rposition(|&b| !is_header_safe(b)).unwrap_or(0);
        let suffix_at = content
            .get(last_bad..)
            .unwrap_or_default()
            .iter()
            .position(|&b| b == b' ' || b == b'\t')
            .map_or(content.len(), |i| last_bad + i);
        let (middle, suffix) = content.split_at(suffix_at);
        // Prefix: the safe run up to its last blank.
        let safe = middle.iter().take_while(|&&b| is_header_safe(b)).count();
        let prefix_len = middle.get(..safe).unwrap_or_default().iter().rposition(|&b| b == b' ' || b == b'\t').map_or(0, |i| i + 1);
        let (prefix, word) = middle.split_at(prefix_len);
        out.put(prefix);
        let special = word.iter().filter(|&&b| matches!(b, b'=' | b'?' | b'_') || !(0x20..0x7f).contains(&b)).count();
        if 3 * (word.len() + 2 * special) <= 4 * (word.len() + 2) {
            out.put(b"=?UTF-8?Q?");
            for &b in word {
                match b {
                    b' ' => out.put(b"_"),
                    b'=' | b'?' | b'_' | 0..=0x20 | 0x7f..=0xff => put_fmt(out, format_args!("={b:02X}")),
                    _ => out.put(&[b]),
                }
            }
        } else {
            out.put(b"=?UTF-8?B?");
            put_base64(word, out);
        }
        out.put(b"?=");
        out.put(suffix);
        out.put(newline);
    }
}

fn put_base64(data: &[u8], out: &mut dyn Sink) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in data.chunks(3) {
        let b = [chunk.first().copied().unwrap_or(0), chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let mut quad = [b'='; 4];
        for (i, slot) in quad.iter_mut().enumerate().take(chunk.len() + 1) {
            *slot = ALPHABET[((n >> (18 - 6 * i)) & 63) as usize];
        }
        out.put(&quad);
    }
}

// ---------------------------------------------------------------------------
// Rewriting.

/// Writes SpamAssassin's report (`get_report`) for REPORT and report_safe.
fn build_report<V: VerdictView + ?Sized>(ctx: &Ctx<'_, V>, report: &mut Vec<u8>, bufs: &mut Bufs) {
    report.clear();
    let template: &[u8] = if ctx.settings.report_template.is_empty() {
        b"(no report template found)"
    } else {
        ctx.settings.report_template.as_bytes()
    };
    expand(template, ctx, report, &mut bufs.text, &mut bufs.preview);
    // s/\n*$/\n\n/s
    while report.last() == Some(&b'\n') {
        report.pop();
    }
    report.extend_from_slice(b"\n\n");
}

/// Writes the report that REPORT answers with, for `message` as scanned into `view`.
pub fn write_report<V: VerdictView + ?Sized, W: embedded_io::Write>(
    message: &[u8],
    view: &V,
    settings: &RewriteSettings,
    env: &Environment<'_>,
    scratch: &mut RewriteScratch,
    out: &mut W,
) -> Result<(), W::Error> {
    let report = report_text(message, view, settings, env, scratch);
    out.write_all(report)
}

/// SpamAssassin's `get_report` for `message`, in `scratch`.
pub(crate) fn report_text<'s, V: VerdictView + ?Sized>(
    message: &[u8],
    view: &V,
    settings: &RewriteSettings,
    env: &Environment<'_>,
    scratch: &'s mut RewriteScratch,
) -> &'s [u8] {
    let msg = Split::new(message);
    let ctx = Ctx { view, settings, env, msg: &msg };
    build_report(&ctx, &mut scratch.report, &mut scratch.bufs);
    &scratch.report
}

/// Writes `message` rewritten as SpamAssassin's `rewrite_mail` does for `view`.
pub fn rewrite<V: VerdictView + ?Sized, W: embedded_io::Write>(
    message: &[u8],
    view: &V,
    settings: &RewriteSettings,
    env: &Environment<'_>,
    scratch: &mut RewriteScratch,
    out: &mut W,
) -> Result<(), W::Error> {
    let mut sink = super::sink::IoSink::new(out);
    rewrite_into(message, view, settings, env, scratch, &mut sink);
    sink.finish()
}

pub(crate) fn rewrite_into<V: VerdictView + ?Sized>(
    message: &[u8],
    view: &V,
    settings: &RewriteSettings,
    env: &Environment<'_>,
    scratch: &mut RewriteScratch,
    out: &mut dyn Sink,
) {
    let msg = Split::new(message);
    let ctx = Ctx { view, settings, env, msg: &msg };
    out.put(msg.mbox);
    if view.is_spam() && settings.report_safe > 0 {
        rewrite_report_safe(&ctx, scratch, out);
    } else {
        rewrite_headers_only(&ctx, scratch, out);
    }
}

/// Expands a `rewrite_header` template into `out`, newlines replaced by `newline`.
fn rewrite_tag<V: VerdictView + ?Sized>(template: &str, ctx: &Ctx<'_, V>, bufs: &mut Bufs, out: &mut Vec<u8>, newline: Option<u8>) {
    out.clear();
    expand(template.as_bytes(), ctx, out, &mut bufs.text, &mut bufs.preview);
    match newline {
        Some(c) => out.iter_mut().filter(|b| **b == b'\n').for_each(|b| *b = c),
        None => out.retain(|&b| b != b'\n'),
    }
}

/// report_safe 1 or 2: a new message with the report, the original attached.
fn rewrite_report_safe<V: VerdictView + ?Sized>(ctx: &Ctx<'_, V>, s: &mut RewriteScratch, out: &mut dyn Sink) {
    let msg = ctx.msg;
    let settings = ctx.settings;
    build_report(ctx, &mut s.report, &mut s.bufs);
    let [subject_tag, from_tag, to_tag] = &mut s.tags;
    if let Some(t) = &settings.rewrite_subject {
        rewrite_tag(t, ctx, &mut s.bufs, subject_tag, Some(b' '));
    }
    if let Some(t) = &settings.rewrite_from {
        rewrite_tag(t, ctx, &mut s.bufs, from_tag, None);
    }
    if let Some(t) = &settings.rewrite_to {
        rewrite_tag(t, ctx, &mut s.bufs, to_tag, Some(b' '));
    }
    let mut fixed = Crlf::new(out, msg.crlf);
    let w: &mut dyn Sink = &mut fixed;
    put_fmt(
        w,
        format_args!("Received: from localhost by {}\n\twith sift (version {});\n\t{}\n", ctx.env.hostname, ctx.env.version, ctx.env.date),
    );
    // report_safe_copy_headers named Received go first.
    for name in &settings.copy_headers {
        if name.eq_ignore_ascii_case("received") {
            for value in msg.pristine_all(name.as_bytes()) {
                put_header(w, name.as_bytes(), value);
            }
        }
    }
    // From and To, with a comment added by rewrite_header.
    for (name, tag, configured) in [
        (&b"From"[..], &*from_tag, settings.rewrite_from.is_some()),
        (&b"To"[..], &*to_tag, settings.rewrite_to.is_some()),
    ] {
        let value = msg.pristine(name);
        if configured {
            // s/(?:\t\Q(tag)\E)?$/\t(tag)/ (before the line ending, also a CRLF one)
            let (mut body, ending, unfold) = value.map_or((&b""[..], &b"\n"[..], false), |v| v.parts());
            let comment_len = tag.len() + 3;
            if let Some(tail) = body.len().checked_sub(comment_len).and_then(|at| body.get(at..)) {
                if tail.starts_with(b"\t(") && tail.get(2..tail.len() - 1) == Some(&tag[..]) && tail.ends_with(b")") {
                    body = body.get(..body.len() - comment_len).unwrap_or(body);
                }
            }
            w.put(name);
            w.put(b": ");
            put_content(w, body, unfold);
            w.put(b"\t(");
            w.put(tag);
            w.put(b")");
            w.put(ending);
        } else if let Some(v) = value {
            put_header(w, name, v);
        }
    }
    if let Some(v) = msg.pristine(b"Cc") {
        put_header(w, b"Cc", v);
    }
    let subject = msg.pristine(b"Subject");
    if settings.rewrite_subject.is_some() {
        // s/^(?:\Q$tag\E )?/$tag /
        let (content, ending, unfold) = subject.map_or((&b""[..], &b"\n"[..], false), |v| v.parts());
        let tagged = content.starts_with(subject_tag) && content.get(subject_tag.len()) == Some(&b' ');
        w.put(b"Subject: ");
        w.put(subject_tag);
        w.put(b" ");
        put_content(w, if tagged { content.get(subject_tag.len() + 1..).unwrap_or_default() } else { content }, unfold);
        w.put(ending);
    } else if let Some(v) = subject {
        put_header(w, b"Subject", v);
    }
    if let Some(v) = msg.pristine(b"Date") {
        put_header(w, b"Date", v);
    }
    if let Some(v) = msg.pristine(b"Message-Id") {
        put_header(w, b"Message-Id", v);
    }
    for (name, template) in &settings.headers_spam {
        write_added_header(name, template, ctx, &mut s.bufs, w);
    }
    for name in &settings.copy_headers {
        let lower_is = |n: &str| name.eq_ignore_ascii_case(n);
        let skip = ["from", "to", "cc", "subject", "date", "message-id", "received"].iter().any(|n| lower_is(n));
        let seen_before = settings.copy_headers.iter().take_while(|n| !core::ptr::eq(*n, name)).any(|n| n.eq_ignore_ascii_case(name));
        if !skip && !seen_before {
            for value in msg.pristine_all(name.as_bytes()) {
                put_header(w, name.as_bytes(), value);
            }
        }
    }
    let boundary = boundary(ctx.env.boundary_seed, msg);
    let attachment = msg.pristine(b"Content-Type").is_some_and(|ct| !contains_ignore_case(ct.bytes, b"text/plain"));
    if attachment {
        let b = &mut s.bufs;
        expand(settings.unsafe_report_template.as_bytes(), ctx, &mut s.report, &mut b.text, &mut b.preview);
    }
    let kind = if settings.report_safe > 1 { "text/plain" } else { "message/rfc822" };
    put_fmt(
        w,
        format_args!(
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{boundary}\"\n\n\
             This is a multi-part message in MIME format.\n\n--{boundary}\n\
             Content-Type: text/plain; charset={}\nContent-Disposition: inline\nContent-Transfer-Encoding: 8bit\n\n",
            settings.report_charset
        ),
    );
    w.put(&s.report);
    put_fmt(
        w,
        format_args!(
            "\n\n--{boundary}\nContent-Type: {kind}; x-spam-type=original\nContent-Description: {}\n\
             Content-Disposition: {}\nContent-Transfer-Encoding: 8bit\n\n",
            settings.encapsulated_content_description,
            if attachment { "attachment" } else { "inline" }
        ),
    );
    // The original: SpamAssassin's parser has added the missing CRs to its header block.
    w.put(msg.headers);
    fixed.finish();
    let out = fixed.into_inner();
    out.put(msg.body);
    let mut fixed = Crlf::new(out, msg.crlf);
    put_fmt(&mut fixed, format_args!("\n--{boundary}--\n\n"));
    fixed.finish();
}

/// `Name: value` as SpamAssassin copies a pristine header.
fn put_header(w: &mut dyn Sink, name: &[u8], value: Value<'_>) {
    let (content, ending, unfold) = value.parts();
    w.put(name);
    w.put(b": ");
    put_content(w, content, unfold);
    w.put(ending);
}

/// `----------=_%08X.%08X`, lengthened until no line of the original is it as a
/// delimiter. (SpamAssassin only looks for the bare boundary, not for `--boundary`;
/// sift looks for both, so an original cannot end the attachment early.)
fn boundary(seed: [u32; 2], msg: &Split<'_>) -> heapless::String<128> {
    use core::fmt::Write;
    let mut b = heapless::String::<128>::new();
    let _ = write!(b, "----------=_{:08X}.{:08X}", seed[0], seed[1]);
    let mut state = seed[1] ^ 0x9e37_79b9;
    let clashes = |b: &str| {
        let is_delimiter = |line: &[u8]| matches!(line.strip_prefix(b.as_bytes()), Some(b"") | Some(b"--"));
        lines(msg.headers).chain(lines(msg.body)).any(|line| {
            let line = line.strip_suffix(b"\n").unwrap_or(line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            is_delimiter(line) || line.strip_prefix(b"--").is_some_and(is_delimiter)
        })
    };
    for _ in 0..8 {
        if !clashes(&b) {
            break;
        }
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let _ = write!(b, "/{state:08X}");
    }
    b
}

fn is_xspam_line(line: &[u8]) -> bool {
    starts_with_ignore_case(line, b"X-Spam-") && !starts_with_ignore_case(line.get(7..).unwrap_or_default(), b"Prev-")
}

/// The header lines SpamAssassin keeps: `X-Spam-*` fields (not `X-Spam-Prev-*`) are dropped.
fn kept_lines(headers: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut removing = false;
    lines(headers).filter(move |line| {
        if removing && (is_xspam_line(line) || matches!(line.first(), Some(b' ' | b'\t'))) {
            return false;
        }
        removing = is_xspam_line(line);
        !removing
    })
}

/// Which rewritten header a line starts (`/^(From|Subject|To):/i`), if configured.
fn rewritten_header(line: &[u8], settings: &RewriteSettings, spam: bool) -> Option<usize> {
    let names: [(&[u8], bool); 3] = [
        (b"From:", spam && settings.rewrite_from.is_some()),
        (b"Subject:", spam && settings.rewrite_subject.is_some()),
        (b"To:", spam && settings.rewrite_to.is_some()),
    ];
    names.iter().position(|(n, on)| *on && starts_with_ignore_case(line, n))
}

/// report_safe 0 (or ham): the original with markup headers.
fn rewrite_headers_only<V: VerdictView + ?Sized>(ctx: &Ctx<'_, V>, s: &mut RewriteScratch, out: &mut dyn Sink) {
    let msg = ctx.msg;
    let settings = ctx.settings;
    let spam = ctx.view.is_spam();
    let [subject_tag, from_tag, to_tag] = &mut s.tags;
    if spam {
        for (template, tag, parens) in [
            (&settings.rewrite_from, &mut *from_tag, true),
            (&settings.rewrite_subject, &mut *subject_tag, false),
            (&settings.rewrite_to, &mut *to_tag, true),
        ] {
            if let Some(t) = template {
                rewrite_tag(t, ctx, &mut s.bufs, tag, Some(b' '));
                if parens {
                    tag.insert(0, b'(');
                    tag.push(b')');
                }
            }
        }
    }
    let tags: [&[u8]; 3] = [&from_tag[..], &subject_tag[..], &to_tag[..]];
    let count = kept_lines(msg.headers).count();
    let separator = kept_lines(msg.headers).last().filter(|l| l.iter().all(|&b| report::is_perl_space(b)));
    let body_lines = count - usize::from(separator.is_some());
    let mut pre = 0;
    if kept_lines(msg.headers).next().is_some_and(|l| starts_with_ignore_case(l, b"Return-Path:")) && body_lines > 0 {
        pre = 1 + kept_lines(msg.headers).take(body_lines).skip(1).take_while(|l| matches!(l.first(), Some(b' ' | b'\t'))).count();
    }
    let create_subject = settings.rewrite_subject.is_some() && msg.pristine(b"Subject").is_none();

    let mut fixed = Crlf::new(out, msg.crlf);
    let w: &mut dyn Sink = &mut fixed;
    // Lines are written as they are: like SpamAssassin, a last header line without
    // a newline runs into whatever follows it.
    let put_line = |w: &mut dyn Sink, parts: &[&[u8]]| {
        for p in parts {
            w.put(p);
        }
    };
    for line in kept_lines(msg.headers).take(pre) {
        put_line(w, &[line]);
    }
    let added = if spam { &settings.headers_spam } else { &settings.headers_ham };
    for (name, template) in added {
        write_added_header(name, template, ctx, &mut s.bufs, w);
    }
    let created: &[u8] = b"Subject: \n";
    let lines_out = kept_lines(msg.headers).take(body_lines).skip(pre).chain(create_subject.then_some(created));
    for line in lines_out {
        match rewritten_header(line, settings, spam) {
            Some(which) => {
                let colon = line.iter().position(|&b| b == b':').unwrap_or(0);
                let tag = tags.get(which).copied().unwrap_or_default();
                let rest = line.get(colon + 1..).unwrap_or_default();
                let rest = rest.get(rest.iter().take_while(|&&b| b == b' ' || b == b'\t').count()..).unwrap_or_default();
                let had_tag = starts_with_ignore_case(rest, tag) && rest.get(tag.len()) == Some(&b' ');
                let rest = if had_tag { rest.get(tag.len() + 1..).unwrap_or_default() } else { rest };
                put_line(w, &[line.get(..=colon).unwrap_or_default(), b" ", tag, b" ", rest]);
            }
            None => put_line(w, &[line]),
        }
    }
    // The originals of rewritten headers, after all the others.
    let originals = kept_lines(msg.headers).take(body_lines).chain(create_subject.then_some(created));
    for line in originals {
        if rewritten_header(line, settings, spam).is_some() {
            if create_subject {
                put_line(w, &[b"X-Spam-Prev-Subject: (nonexistent)\n"]);
            } else {
                put_line(w, &[b"X-Spam-Prev-", line]);
            }
        }
    }
    if let Some(sep) = separator {
        put_line(w, &[sep]);
    }
    fixed.finish();
    let out = fixed.into_inner();
    out.put(msg.body);
}

#[cfg(test)]
mod tests;
