//! SpamAssassin's MIMEEval: the MIME summary `_check_attachments` builds from every
//! part's headers and raw lines, `check_base64_length`, `check_ma_non_text` and the
//! parse flags.

use super::{bad, number, opt_number, BodyScratch};
use crate::msg::Message;
use crate::rules::eval::{Args, EvalError};

/// A value of the MIME summary, by SpamAssassin's `check_for_mime` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MimeKey {
    /// `mime_base64_count`: parts with a base64 transfer encoding.
    Base64Count,
    /// `mime_qp_count`: quoted-printable escapes beyond trailing white space (parts
    /// when no quoted-printable line was seen).
    QpCount,
    /// `mime_base64_encoded_text`: ASCII text sent in base64.
    Base64EncodedText,
    /// `mime_qp_long_line`: a quoted-printable line over 78 characters.
    QpLongLine,
    /// `mime_faraway_charset`: never with `ok_locales all`.
    FarawayCharset,
    /// `mime_bad_iso_charset`: an `iso-x-y` charset that does not exist.
    BadIsoCharset,
    /// `mime_attachment`: parts with an attachment disposition.
    Attachment,
    /// `mime_body_html_count`: `text/html` parts.
    BodyHtmlCount,
    /// `mime_body_text_count`: other `text/*` parts.
    BodyTextCount,
    /// `mime_multipart_alternative`.
    MultipartAlternative,
    /// `mime_multipart_ratio`: text/plain over text/html bytes of an alternative.
    MultipartRatio,
    /// `mime_qp_ratio`: escapes per quoted-printable byte.
    QpRatio,
    /// `mime_ascii_text_illegal`: lines of US-ASCII text with illegal bytes.
    AsciiTextIllegal,
    /// `mime_text_unicode_ratio`: `&#xHHHH;` escapes per character of plain text.
    TextUnicodeRatio,
    /// A key SpamAssassin never sets: the test never hits.
    Never,
}

impl MimeKey {
    fn parse(function: &str, key: &str) -> Result<MimeKey, EvalError> {
        Ok(match key {
            "mime_base64_count" => MimeKey::Base64Count,
            "mime_qp_count" => MimeKey::QpCount,
            "mime_base64_encoded_text" => MimeKey::Base64EncodedText,
            "mime_qp_long_line" => MimeKey::QpLongLine,
            "mime_faraway_charset" => MimeKey::FarawayCharset,
            "mime_bad_iso_charset" => MimeKey::BadIsoCharset,
            "mime_attachment" => MimeKey::Attachment,
            "mime_body_html_count" => MimeKey::BodyHtmlCount,
            "mime_body_text_count" => MimeKey::BodyTextCount,
            "mime_multipart_alternative" => MimeKey::MultipartAlternative,
            "mime_multipart_ratio" => MimeKey::MultipartRatio,
            "mime_qp_ratio" => MimeKey::QpRatio,
            "mime_ascii_text_illegal" => MimeKey::AsciiTextIllegal,
            "mime_text_unicode_ratio" => MimeKey::TextUnicodeRatio,
            "mime_missing_boundary" | "mime_html_charsets" | "mime_qp_bytes" => {
                return Err(bad(function, "MIME result not computed by sift"))
            }
            _ => MimeKey::Never,
        })
    }
}

/// A parse flag of SpamAssassin's `Message` (`check_msg_parse_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseFlag {
    /// `missing_head_body_separator`.
    MissingHeadBodySeparator,
    /// `truncated_header`.
    TruncatedHeader,
    /// `missing_mime_head_body_separator`.
    MissingMimeHeadBodySeparator,
    /// `missing_mime_headers`.
    MissingMimeHeaders,
    /// `mime_epilogue_exists`.
    MimeEpilogueExists,
    /// `mimepart_limit_exceeded`.
    MimepartLimitExceeded,
}

/// One MIMEEval test with its arguments.
#[derive(Debug, Clone)]
enum Test {
    /// `check_for_mime(key)`: the summary value is true.
    ForMime(MimeKey),
    /// `check_for_mime_html()`: the message is HTML or has an HTML part.
    Html,
    /// `check_for_mime_html_only()`: HTML parts and no other text parts.
    HtmlOnly,
    /// `check_mime_multipart_ratio(min, max)`: `min <= ratio < max`.
    MultipartRatio { min: f64, max: f64 },
    /// `check_for_ascii_text_illegal()`.
    AsciiTextIllegal,
    /// `check_abundant_unicode_ratio(ratio)`; `None` when SpamAssassin rejects the ratio.
    AbundantUnicode(Option<f64>),
    /// `check_qp_ratio(min)`.
    QpRatio(f64),
    /// `check_base64_length(min[, max])` on the longest base64 line.
    Base64Length { min: f64, max: Option<f64> },
    /// `check_ma_non_text()`: a multipart/alternative with a non-text part.
    MaNonText,
    /// `check_for_faraway_charset()`: never with `ok_locales all`.
    FarawayCharset,
    /// `check_msg_parse_flags(flag)`.
    ParseFlag(ParseFlag),
}

/// One such test with its arguments, ready to run.
#[derive(Debug, Clone)]
pub struct MimeEval(Test);

impl MimeEval {
    /// The test for `function(args)`; `None` when `function` is not one of these.
    pub fn parse(function: &str, args: &Args) -> Option<Result<MimeEval, EvalError>> {
        let arg = |i: usize| args.get(i).map(|s| s.as_str()).ok_or_else(|| bad(function, "missing argument"));
        let t = || -> Result<Test, EvalError> {
            Ok(match function {
                "check_for_mime" => Test::ForMime(MimeKey::parse(function, arg(0)?)?),
                "check_for_mime_html" => Test::Html,
                "check_for_mime_html_only" => Test::HtmlOnly,
                "check_mime_multipart_ratio" => {
                    Test::MultipartRatio { min: number(function, args, 0)?, max: number(function, args, 1)? }
                }
                "check_for_ascii_text_illegal" => Test::AsciiTextIllegal,
                "check_abundant_unicode_ratio" => {
                    // SpamAssassin ignores a ratio not written as /^\d{0,3}\.\d{1,3}$/.
                    let text = arg(0)?;
                    let ok = text.split_once('.').is_some_and(|(i, f)| {
                        i.len() <= 3 && (1..=3).contains(&f.len()) && (i.bytes().chain(f.bytes())).all(|b| b.is_ascii_digit())
                    });
                    Test::AbundantUnicode(if ok { Some(number(function, args, 0)?) } else { None })
                }
                "check_qp_ratio" => Test::QpRatio(number(function, args, 0)?),
                "check_base64_length" => {
                    Test::Base64Length { min: number(function, args, 0)?, max: opt_number(function, args, 1)? }
                }
                "check_ma_non_text" => Test::MaNonText,
                "check_for_faraway_charset" => Test::FarawayCharset,
                "check_msg_parse_flags" => Test::ParseFlag(match arg(0)? {
                    "missing_head_body_separator" => ParseFlag::MissingHeadBodySeparator,
                    "truncated_header" => ParseFlag::TruncatedHeader,
                    "missing_mime_head_body_separator" => ParseFlag::MissingMimeHeadBodySeparator,
                    "missing_mime_headers" => ParseFlag::MissingMimeHeaders,
                    "mime_epilogue_exists" => ParseFlag::MimeEpilogueExists,
                    "mimepart_limit_exceeded" => ParseFlag::MimepartLimitExceeded,
                    _ => return Err(bad(function, "parse flag not recorded by sift")),
                }),
                _ => return Err(bad(function, "")),
            })
        };
        match function {
            "check_for_mime" | "check_for_mime_html" | "check_for_mime_html_only" | "check_mime_multipart_ratio"
            | "check_for_ascii_text_illegal" | "check_abundant_unicode_ratio" | "check_qp_ratio" | "check_base64_length"
            | "check_ma_non_text" | "check_for_faraway_charset" | "check_msg_parse_flags" => Some(t().map(MimeEval)),
            _ => None,
        }
    }

    /// Whether the test hits on `m`.
    pub fn run(&self, m: &Message<'_>, scratch: &mut BodyScratch) -> bool {
        if let Test::ParseFlag(flag) = &self.0 {
            let f = m.parse_flags();
            return match flag {
                ParseFlag::MissingHeadBodySeparator => f.missing_head_body_separator,
                ParseFlag::TruncatedHeader => f.truncated_header,
                ParseFlag::MissingMimeHeadBodySeparator => f.missing_mime_head_body_separator,
                ParseFlag::MissingMimeHeaders => f.missing_mime_headers,
                ParseFlag::MimeEpilogueExists => f.mime_epilogue_exists,
                ParseFlag::MimepartLimitExceeded => m.overflow().parts,
            };
        }
        if matches!(self.0, Test::FarawayCharset) {
            return false;
        }
        let facts = *scratch.mime.get_or_insert_with(|| MimeFacts::of(m));
        match &self.0 {
            Test::ForMime(key) => facts.value(*key) != 0.0,
            Test::Html => top_is_html(m) || facts.html_parts > 0,
            Test::HtmlOnly => top_is_html(m) || (facts.html_parts > 0 && facts.text_parts == 0),
            Test::MultipartRatio { min, max } => facts.multipart_ratio >= *min && facts.multipart_ratio < *max,
            Test::AsciiTextIllegal => facts.ascii_text_illegal > 0,
            Test::AbundantUnicode(ratio) => ratio.is_some_and(|r| facts.text_unicode_ratio() >= r),
            Test::QpRatio(min) => facts.qp_ratio() >= *min,
            Test::Base64Length { min, max } => {
                let len = facts.base64_length as f64;
                !max.is_some_and(|max| len > max) && len >= *min
            }
            Test::MaNonText => facts.ma_non_text,
            Test::FarawayCharset | Test::ParseFlag(_) => false,
        }
    }
}

/// `$pms->get('Content-Type') =~ m{^text/html}i`: the first Content-Type field.
fn top_is_html(m: &Message<'_>) -> bool {
    m.headers_named(b"content-type")
        .next()
        .is_some_and(|h| h.decoded.get(..9).is_some_and(|p| p.eq_ignore_ascii_case(b"text/html")))
}

/// What `_check_attachments` and friends find in a message.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MimeFacts {
    base64_parts: u32,
    qp_parts: u32,
    /// Quoted-printable escapes counted, minus trailing `=20`/`=09` runs.
    qp_escapes: f64,
    /// Bytes of quoted-printable lines.
    qp_bytes: u64,
    qp_long_line: bool,
    base64_encoded_text: bool,
    bad_iso_charset: bool,
    attachments: u32,
    html_parts: u32,
    text_parts: u32,
    multipart_alternative: bool,
    multipart_ratio: f64,
    ascii_text_illegal: u32,
    unicode_escapes: u64,
    plain_chars: u64,
    /// A charset of the message or a part is one that writes in capitals (`CHARSETS_LIKELY_TO_FP_AS_CAPS`).
    pub(crate) caps_charset: bool,
    /// Longest raw line of a base64 part.
    base64_length: usize,
    ma_non_text: bool,
}

impl MimeFacts {
    /// Computes the summary of `m`.
    pub fn of(m: &Message<'_>) -> MimeFacts {
        let mut f = MimeFacts { multipart_ratio: 1.0, ..MimeFacts::default() };
        let mut last_html: Option<u64> = None;
        let mut last_text: Option<u64> = None;
        // Depths of the multipart/alternative ancestors of the current part.
        let mut alternatives = [0usize; 16];
        let mut open = 0usize;
        // `get_charset_from_ct_line($pms->get('Content-Type'))`: all Content-Type fields joined.
        if let Some(ct) = m.headers_named(b"content-type").find(|h| ct_line_charset(h.decoded).is_some()) {
            f.caps_charset |= ct_line_charset(ct.decoded).is_some_and(is_caps_charset);
        }
        for part in m.parts() {
            let ctype = part.content_type();
            let cte = part.header(b"content-transfer-encoding").unwrap_or(&[]);
            let cd = part.header(b"content-disposition").unwrap_or(&[]);
            let charset = part.charset();
            let depth = part.depth();
            while open > 0 && alternatives.get(open - 1).is_some_and(|&d| d >= depth) {
                open -= 1;
            }
            // `check_ma_non_text`: a direct leaf child of a multipart/alternative that is not text.
            let parent_alternative = open > 0 && alternatives.get(open - 1).is_some_and(|&d| d + 1 == depth);
            if parent_alternative
                && part.is_leaf()
                && ctype != b"multipart/related"
                && ctype != b"application/rtf"
                && !starts_ci(ctype, b"text/")
            {
                f.ma_non_text = true;
            }
            if ctype == b"multipart/alternative" {
                f.multipart_alternative = true;
                if !part.is_leaf() {
                    if let Some(slot) = alternatives.get_mut(open) {
                        *slot = depth;
                        open += 1;
                    }
                }
            }
            f.header_facts(ctype, cte, cd, charset);
            if !part.is_leaf() {
                continue;
            }
            let attachment = contains_ci(cd, b"attachment");
            let raw = part.raw_body();
            if f.multipart_alternative && !attachment && (ctype == b"text/plain" || ctype == b"text/html") {
                let bytes = raw.len() as u64;
                if ctype == b"text/html" {
                    last_html = Some(bytes);
                } else {
                    last_text = Some(bytes);
                }
            } else if !attachment {
                if ctype == b"text/html" {
                    last_html = Some(0);
                } else if ctype == b"text/plain" {
                    last_text = Some(0);
                }
            }
            f.line_facts(ctype, cte, charset, raw);
        }
        if f.multipart_alternative {
            if let (Some(text), Some(html)) = (last_text, last_html) {
                if html > 0 {
                    f.multipart_ratio = text as f64 / html as f64;
                }
            }
        }
        f
    }

    /// `_check_mime_header` for one part, and the base64 line length of `check_base64_length`.
    fn header_facts(&mut self, ctype: &[u8], cte: &[u8], cd: &[u8], charset: &[u8]) {
        if ctype == b"text/html" {
            self.html_parts += 1;
        } else if starts_ci(ctype, b"text") {
            self.text_parts += 1;
        }
        let base64 = contains_ci(cte, b"base64");
        if base64 {
            self.base64_parts += 1;
        } else if contains_ci(cte, b"quoted-printable") {
            self.qp_parts += 1;
        }
        if contains_ci(cd, b"attachment") {
            self.attachments += 1;
        }
        let ascii_names: [&[u8]; 11] = [
            b"us-ascii",
            b"ansi_x3.4-1968",
            b"iso-ir-6",
            b"ansi_x3.4-1986",
            b"iso_646.irv:1991",
            b"ascii",
            b"iso646-us",
            b"us",
            b"ibm367",
            b"cp367",
            b"csascii",
        ];
        let ascii_charset = charset.is_empty() || ascii_names.iter().any(|n| contains_ci(charset, n));
        let inline_or_attached = starts_ci(cd, b"attachment") || starts_ci(cd, b"inline");
        if ctype.starts_with(b"text") && base64 && ascii_charset && !inline_or_attached {
            self.base64_encoded_text = true;
        }
        if bad_iso_charset(charset) {
            self.bad_iso_charset = true;
        }
        if charset.iter().any(u8::is_ascii_alphabetic) && is_caps_charset(charset) {
            self.caps_charset = true;
        }
    }

    /// The per-line checks of `_check_attachments` on a leaf's raw lines.
    fn line_facts(&mut self, ctype: &[u8], cte: &[u8], charset: &[u8], raw: &[u8]) {
        let qp = eq_ci(cte, b"quoted-printable");
        let ascii_plain = ctype == b"text/plain" && (charset.is_empty() || eq_ci(charset, b"us-ascii"));
        let unicode_plain = ctype == b"text/plain" && (cte.is_empty() || eq_ci(cte, b"7bit") || eq_ci(cte, b"8bit"));
        let base64 = ctype != b"application/ics" && eq_ci(trim_newline(cte), b"base64");
        if !(qp || ascii_plain || unicode_plain || base64) {
            return;
        }
        for line in raw_lines(raw) {
            if qp && !line.starts_with(b"SPAM: ") {
                if line.len() > 79 {
                    self.qp_long_line = true;
                }
                self.qp_bytes += line.len() as u64;
                if memchr::memchr(b'=', line).is_some() {
                    let n = qp_escapes(line);
                    if n > 0 {
                        self.qp_escapes += n as f64 - trailing_space_escapes(line) as f64;
                    }
                }
            }
            if ascii_plain && line.iter().any(|&b| b == 0 || b == b'\r' || b >= 0x80) {
                self.ascii_text_illegal += 1;
            }
            if unicode_plain {
                let n = unicode_escapes(line);
                self.unicode_escapes += n as u64;
                self.plain_chars += (line.len() - 8 * n) as u64;
            }
            if base64 {
                // SpamAssassin splits lines over 2048 bytes (MAX_BODY_LINE_LENGTH) into pieces.
                self.base64_length = self.base64_length.max(line.len().min(2049));
            }
        }
    }

    fn qp_ratio(&self) -> f64 {
        if self.qp_bytes > 0 {
            self.qp_escapes / self.qp_bytes as f64
        } else {
            0.0
        }
    }

    fn text_unicode_ratio(&self) -> f64 {
        if self.plain_chars > 0 {
            self.unicode_escapes as f64 / self.plain_chars as f64
        } else {
            0.0
        }
    }

    fn value(&self, key: MimeKey) -> f64 {
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        match key {
            MimeKey::Base64Count => f64::from(self.base64_parts),
            MimeKey::QpCount => {
                if self.qp_bytes > 0 {
                    self.qp_escapes
                } else {
                    f64::from(self.qp_parts)
                }
            }
            MimeKey::Base64EncodedText => flag(self.base64_encoded_text),
            MimeKey::QpLongLine => flag(self.qp_long_line),
            MimeKey::FarawayCharset | MimeKey::Never => 0.0,
            MimeKey::BadIsoCharset => flag(self.bad_iso_charset),
            MimeKey::Attachment => f64::from(self.attachments),
            MimeKey::BodyHtmlCount => f64::from(self.html_parts),
            MimeKey::BodyTextCount => f64::from(self.text_parts),
            MimeKey::MultipartAlternative => flag(self.multipart_alternative),
            MimeKey::MultipartRatio => self.multipart_ratio,
            MimeKey::QpRatio => self.qp_ratio(),
            MimeKey::AsciiTextIllegal => f64::from(self.ascii_text_illegal),
            MimeKey::TextUnicodeRatio => self.text_unicode_ratio(),
        }
    }
}

/// The raw lines of a part body, each with its line end (SpamAssassin's `$p->raw()`).
fn raw_lines(raw: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = raw;
    core::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let n = memchr::memchr(b'\n', rest).map_or(rest.len(), |k| k + 1);
        let (line, after) = rest.split_at(n);
        rest = after;
        Some(line)
    })
}

/// `=(?:09|3[0-9ABCEF]|[2456][0-9A-F]|7[0-9A-E])` matches in a line.
fn qp_escapes(line: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while let Some(k) = line.get(i..).and_then(|r| memchr::memchr(b'=', r)) {
        let at = i + k;
        if let (Some(&a), Some(&b)) = (line.get(at + 1), line.get(at + 2)) {
            let upper_hex = |c: u8| c.is_ascii_digit() || (b'A'..=b'F').contains(&c);
            let ok = match a {
                b'0' => b == b'9',
                b'3' => upper_hex(b) && b != b'D',
                b'2' | b'4' | b'5' | b'6' => upper_hex(b),
                b'7' => upper_hex(b) && b != b'F',
                _ => false,
            };
            if ok {
                n += 1;
                i = at + 3;
                continue;
            }
        }
        i = at + 1;
    }
    n
}

/// Length / 3 of the run `(?:=09|=20)+` that ends the line before trailing white space.
fn trailing_space_escapes(line: &[u8]) -> usize {
    let end = line.len() - line.iter().rev().take_while(|&&b| is_perl_space(b)).count();
    let mut n = 0;
    let mut at = end;
    while at >= 3 && matches!(line.get(at - 3..at), Some(b"=09") | Some(b"=20")) {
        n += 1;
        at -= 3;
    }
    n
}

/// `&#x[0-9A-F]{4};` matches in a line.
fn unicode_escapes(line: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    // Found by their `&` (a substring search would be built again for every line).
    while let Some(k) = line.get(i..).and_then(|r| memchr::memchr(b'&', r)) {
        let at = i + k;
        if line.get(at + 1..at + 3) != Some(b"#x") {
            i = at + 1;
            continue;
        }
        let ok = line.get(at + 3..at + 7).is_some_and(|h| h.iter().all(|&c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c)))
            && line.get(at + 7) == Some(&b';');
        if ok {
            n += 1;
            i = at + 8;
        } else {
            i = at + 1;
        }
    }
    n
}

/// `$charset =~ /iso-\S+-\S+\b/i && $charset !~ /iso-(?:8859-\d{1,2}|2022-(?:jp|kr))\b/`.
fn bad_iso_charset(charset: &[u8]) -> bool {
    let lower = |i: usize| charset.get(i).map(u8::to_ascii_lowercase);
    let word = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_');
    let mut suspicious = false;
    let mut known = false;
    for start in 0..charset.len() {
        if !charset.get(start..start + 4).is_some_and(|w| w.eq_ignore_ascii_case(b"iso-")) {
            continue;
        }
        let rest = start + 4;
        // iso-\S+-\S+\b: some non-space run holding a dash followed by more non-space,
        // ending at a word boundary.
        let run_end = rest + charset.get(rest..).unwrap_or(&[]).iter().take_while(|b| !b.is_ascii_whitespace()).count();
        let run = charset.get(rest..run_end).unwrap_or(&[]);
        if let Some(dash) = run.iter().skip(1).position(|&b| b == b'-').map(|p| p + 1) {
            // Some end in (dash+1 .. run_end] must be a word boundary.
            suspicious |= (rest + dash + 2..=run_end).any(|e| word(lower(e - 1)) != word(lower(e)));
        }
        // iso-(?:8859-\d{1,2}|2022-(?:jp|kr))\b
        let tail = |k: &[u8]| charset.get(rest..rest + k.len()).is_some_and(|w| w.eq_ignore_ascii_case(k));
        if tail(b"8859-") {
            let d = rest + 5;
            let digits = charset.get(d..).unwrap_or(&[]).iter().take_while(|b| b.is_ascii_digit()).count();
            known |= (1..=digits.min(2)).any(|n| word(lower(d + n - 1)) != word(lower(d + n)));
        }
        for k in [&b"2022-jp"[..], b"2022-kr"] {
            if tail(k) && !word(lower(rest + k.len())) {
                known = true;
            }
        }
    }
    suspicious && !known
}

/// `CHARSETS_LIKELY_TO_FP_AS_CAPS`, anchored: `[-_a-z0-9]*(?:koi|jp|…|tis)[-_a-z0-9]*`.
fn is_caps_charset(charset: &[u8]) -> bool {
    const MARKS: [&[u8]; 12] =
        [b"koi", b"jp", b"jis", b"euc", b"gb", b"big5", b"isoir", b"cp1251", b"windows-1251", b"georgianps", b"pt154", b"tis"];
    charset.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') && MARKS.iter().any(|m| contains_ci(charset, m))
}

/// `get_charset_from_ct_line`: the charset parameter of a Content-Type value.
fn ct_line_charset(value: &[u8]) -> Option<&[u8]> {
    let at = (0..value.len()).find(|&i| value.get(i..i + 8).is_some_and(|w| w.eq_ignore_ascii_case(b"charset=")))?;
    let rest = value.get(at + 8..)?;
    for q in [b'"', b'\''] {
        if rest.first() == Some(&q) {
            let inner = rest.get(1..)?;
            let end = memchr::memchr(q, inner)?;
            if end > 0 {
                return inner.get(..end);
            }
        }
    }
    let n = rest.iter().take_while(|b| !b.is_ascii_whitespace()).count();
    (n > 0).then(|| rest.get(..n)).flatten()
}

/// Perl's `\s` on bytes.
fn is_perl_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn trim_newline(v: &[u8]) -> &[u8] {
    v.strip_suffix(b"\n").unwrap_or(v)
}

fn eq_ci(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

fn starts_ci(a: &[u8], prefix: &[u8]) -> bool {
    a.get(..prefix.len()).is_some_and(|p| p.eq_ignore_ascii_case(prefix))
}

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_escape_counts() {
        let cases: &[(&[u8], usize, usize)] = &[
            (b"caf=E9 =3D=20\n", 1, 1),
            (b"a=20b=20=20\n", 3, 2),
            (b"=41=42 x\n", 2, 0),
            (b"=3d lower =3D upper=\n", 0, 0),
            (b"=7F =7E =09\n", 2, 1),
            (b"=20 =20 \t\n", 2, 1),
            (b"no escapes\n", 0, 0),
        ];
        for (line, escapes, trailing) in cases {
            assert_eq!(qp_escapes(line), *escapes, "{:?}", core::str::from_utf8(line));
            assert_eq!(trailing_space_escapes(line), *trailing, "{:?}", core::str::from_utf8(line));
        }
    }

    #[test]
    fn unicode_escape_counts_table() {
        // (line, `&#x[0-9A-F]{4};` matches as Perl's /g counts them)
        let cases: &[(&[u8], usize)] = &[
            (b"&#x00E9;&#x20AC; &#x20ac; &#x12;", 2),
            (b"&&#x0041;&amp;&#x0042;", 2),
            (b"&#X0041; & #x0041; &#x0041", 0),
            (b"&#x&#x0041;;", 1),
            (b"&#x00410041;", 0),
            (b"no escapes at all", 0),
            (b"", 0),
        ];
        for &(line, want) in cases {
            assert_eq!(unicode_escapes(line), want, "{:?}", core::str::from_utf8(line));
        }
    }

    #[test]
    fn charset_classes() {
        let iso: &[(&[u8], bool)] =
            &[(b"iso-8859-1", false), (b"iso-8859-15", false), (b"iso-2022-jp", false), (b"iso-8859-123", true), (b"iso-10646-ucs-2", true), (b"iso-latin1", false), (b"us-ascii", false)];
        for (cs, want) in iso {
            assert_eq!(bad_iso_charset(cs), *want, "{:?}", core::str::from_utf8(cs));
        }
        let caps: &[(&[u8], bool)] = &[(b"koi8-r", true), (b"ISO-2022-JP", true), (b"gb2312", true), (b"utf-8", false), (b"koi8-r;", false)];
        for (cs, want) in caps {
            assert_eq!(is_caps_charset(cs), *want, "{:?}", core::str::from_utf8(cs));
        }
        assert_eq!(ct_line_charset(b"text/plain; charset=\"koi8-r\""), Some(&b"koi8-r"[..]));
        assert_eq!(ct_line_charset(b"text/plain; CHARSET=utf-8; format=flowed"), Some(&b"utf-8;"[..]));
        assert_eq!(ct_line_charset(b"text/plain"), None);
    }
}
