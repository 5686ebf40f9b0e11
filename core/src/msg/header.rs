//! Header fields: splitting a header block into fields the way SpamAssassin's
//! `Message::new` does, and decoding values (unfolding, RFC 2047 encoded words,
//! 8-bit text) the way `Node::header` and `Node::_decode_header` do.

use alloc::vec::Vec;

use super::charset;
use super::decode::{base64_decode, find_short, is_perl_space, q_word_decode};
use super::lines::{detect_eol, next_line, Eol, Line};
use super::{Span, Src};

/// SpamAssassin's `MAX_HEADER_KEY_LENGTH`.
const MAX_KEY: usize = 256;
/// SpamAssassin's `MAX_HEADER_VALUE_LENGTH`.
const MAX_VALUE: usize = 8192;

/// One stored header field.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HeaderRec {
    pub name: Span,
    pub raw: Span,
    pub decoded: Span,
}

/// Where headers go: a fixed-capacity index plus the text buffer for decoded values.
pub(crate) struct HeaderStore<'s> {
    pub index: &'s mut Vec<HeaderRec>,
    pub cap: usize,
    pub text: &'s mut Vec<u8>,
    pub tmp: &'s mut Vec<u8>,
    pub tmp2: &'s mut Vec<u8>,
    pub tmp3: &'s mut Vec<u8>,
    /// More fields than `cap`.
    pub overflow: bool,
    /// A name or value was cut at SpamAssassin's maximum length.
    pub truncated: bool,
}

/// The decoded values of the fields the parser needs (the last of each, as SpamAssassin takes).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Wanted {
    pub content_type: Option<Span>,
    pub transfer_encoding: Option<Span>,
    pub disposition: Option<Span>,
    pub subject: Option<Span>,
}

impl Wanted {
    fn note(&mut self, name: &[u8], decoded: Span) {
        let slot = if name.eq_ignore_ascii_case(b"content-type") {
            &mut self.content_type
        } else if name.eq_ignore_ascii_case(b"content-transfer-encoding") {
            &mut self.transfer_encoding
        } else if name.eq_ignore_ascii_case(b"content-disposition") {
            &mut self.disposition
        } else if name.eq_ignore_ascii_case(b"subject") {
            &mut self.subject
        } else {
            return;
        };
        *slot = Some(decoded);
    }
}

impl HeaderStore<'_> {
    /// Stores the field in `buf[start..end]` (its first line's start to its last line's
    /// text end). Returns `None` when it has no colon. `trim_key` strips white space
    /// before the colon (top-level fields); MIME part fields keep it, as in SpamAssassin.
    pub fn add(&mut self, buf: &[u8], src: Src, start: usize, end: usize, trim_key: bool, wanted: &mut Wanted) -> Option<HeaderRec> {
        let field = buf.get(start..end)?;
        let colon = memchr::memchr(b':', field)?;
        let mut key_end = start + colon;
        if trim_key {
            while key_end > start && matches!(buf.get(key_end - 1), Some(b' ' | b'\t')) {
                key_end -= 1;
            }
        }
        if key_end - start > MAX_KEY {
            key_end = start + MAX_KEY;
            self.truncated = true;
        }
        let mut value_end = end;
        let value_start = start + colon + 1;
        if value_end - value_start > MAX_VALUE {
            value_end = value_start + MAX_VALUE;
            self.truncated = true;
        }
        let name = buf.get(start..key_end).unwrap_or(&[]);
        let raw = buf.get(value_start..value_end).unwrap_or(&[]);
        let decoded = match decode_value(name, raw, self.text, self.tmp, self.tmp2, self.tmp3) {
            Decoded::Raw(a, b) => Span::new(src, value_start + a, value_start + b),
            Decoded::Out(a, b) => Span::new(Src::HeaderText, a, b),
        };
        let rec = HeaderRec {
            name: Span::new(src, start, key_end),
            raw: Span::new(src, value_start, value_end),
            decoded,
        };
        wanted.note(name, decoded);
        if self.index.len() < self.cap {
            self.index.push(rec);
        } else {
            self.overflow = true;
        }
        Some(rec)
    }
}

/// Where a decoded value lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decoded {
    /// A sub-range of the raw value: nothing needed decoding.
    Raw(usize, usize),
    /// A range of the output buffer.
    Out(usize, usize),
}

/// Fields SpamAssassin never RFC 2047-decodes.
fn skips_encoded_words(name: &[u8]) -> bool {
    const NAMES: [&[u8]; 8] = [
        b"received",
        b"message-id",
        b"resent-message-id",
        b"date",
        b"resent-date",
        b"mime-version",
        b"references",
        b"in-reply-to",
    ];
    NAMES.iter().any(|n| name.eq_ignore_ascii_case(n))
        || name.get(..5).is_some_and(|p| p.eq_ignore_ascii_case(b"list-"))
}

fn trim_range(v: &[u8]) -> (usize, usize) {
    let a = v.iter().take_while(|&&b| is_perl_space(b)).count();
    let b = v.len() - v.get(a..).unwrap_or(&[]).iter().rev().take_while(|&&b| is_perl_space(b)).count();
    (a, b.max(a))
}

/// Decodes a header value: unfolds, trims, reads invalid UTF-8 as Windows-1252 and
/// decodes RFC 2047 words (unless the field is one SpamAssassin leaves alone).
pub(crate) fn decode_value(
    name: &[u8],
    raw: &[u8],
    out: &mut Vec<u8>,
    tmp: &mut Vec<u8>,
    tmp2: &mut Vec<u8>,
    words: &mut Vec<u8>,
) -> Decoded {
    let (a, b) = trim_range(raw);
    let t = raw.get(a..b).unwrap_or(&[]);
    let has_eol = memchr::memchr2(b'\n', b'\r', t).is_some();
    let text_ok = t.is_ascii() || core::str::from_utf8(t).is_ok();
    let has_words = !skips_encoded_words(name) && find_short(t, b"=?").is_some();
    if !has_eol && text_ok && !has_words {
        return Decoded::Raw(a, b);
    }
    // Unfold: a line end followed by blanks becomes one space; other line ends vanish.
    tmp.clear();
    let mut i = 0;
    while let Some(&c) = raw.get(i) {
        if c == b'\n' || c == b'\r' {
            let crlf = c == b'\r' && raw.get(i + 1) == Some(&b'\n');
            let after = i + if crlf { 2 } else { 1 };
            // A lone CR is text unless it folds a line (bare-CR messages).
            if c == b'\r' && !crlf && !matches!(raw.get(after), Some(b' ' | b'\t')) {
                tmp.push(c);
                i += 1;
                continue;
            }
            i = after;
            if matches!(raw.get(i), Some(b' ' | b'\t')) {
                while matches!(raw.get(i), Some(b' ' | b'\t')) {
                    i += 1;
                }
                tmp.push(b' ');
            }
            continue;
        }
        let rest = raw.get(i..).unwrap_or(&[]);
        let run = memchr::memchr2(b'\n', b'\r', rest).unwrap_or(rest.len());
        tmp.extend_from_slice(raw.get(i..i + run).unwrap_or(&[]));
        i += run;
    }
    let (ta, tb) = trim_range(tmp);
    let mut text: &[u8] = tmp.get(ta..tb).unwrap_or(&[]);
    if !text.is_ascii() && core::str::from_utf8(text).is_err() {
        tmp2.clear();
        charset::header_to_utf8(text, tmp2);
        text = tmp2.as_slice();
    }
    let start = out.len();
    if has_words {
        decode_words(text, out, words);
    } else {
        out.extend_from_slice(text);
    }
    Decoded::Out(start, out.len())
}

/// An RFC 2047 encoded word at the start of `s`: (charset, is_b, text, length).
fn encoded_word(s: &[u8]) -> Option<(&[u8], bool, &[u8], usize)> {
    let rest = s.strip_prefix(b"=?")?;
    let cs_len = rest.iter().take_while(|&&b| b.is_ascii_alphanumeric() || matches!(b, b'*' | b'_' | b'-')).count();
    if cs_len == 0 {
        return None;
    }
    let charset = rest.get(..cs_len)?;
    let is_b = match rest.get(cs_len..cs_len + 3)? {
        [b'?', b'b' | b'B', b'?'] => true,
        [b'?', b'q' | b'Q', b'?'] => false,
        _ => return None,
    };
    let text_start = cs_len + 3;
    let text_len = memchr::memchr(b'?', rest.get(text_start..)?)?;
    if rest.get(text_start + text_len + 1) != Some(&b'=') {
        return None;
    }
    let text = rest.get(text_start..text_start + text_len)?;
    Some((charset, is_b, text, 2 + text_start + text_len + 2))
}

/// Converts the bytes of a run of same-charset words and appends them.
fn flush_words(charset_name: &[u8], bytes: &[u8], out: &mut Vec<u8>) {
    let name = charset_name.get(..memchr::memchr(b'*', charset_name).unwrap_or(charset_name.len())).unwrap_or(&[]);
    charset::word_to_utf8(bytes, charset::lookup(name), out);
}

/// Appends `s` with its encoded words decoded (`words` is scratch). Adjacent words
/// lose the white space between them; consecutive words in the same charset are
/// converted together, as SpamAssassin groups them.
pub(crate) fn decode_words(s: &[u8], out: &mut Vec<u8>, words: &mut Vec<u8>) {
    let mut run_charset: &[u8] = &[];
    let mut in_run = false;
    words.clear();
    let mut i = 0;
    while i < s.len() {
        let rest = s.get(i..).unwrap_or(&[]);
        if let Some((cs, is_b, text, len)) = encoded_word(rest) {
            if in_run && !run_charset.eq_ignore_ascii_case(cs) {
                flush_words(run_charset, words, out);
                words.clear();
            }
            in_run = true;
            run_charset = cs;
            if is_b {
                base64_decode(text, words);
            } else {
                q_word_decode(text, words);
            }
            i += len;
            // White space between two encoded words is dropped.
            let ws = s.get(i..).unwrap_or(&[]).iter().take_while(|&&b| is_perl_space(b)).count();
            if ws > 0 && s.get(i + ws..).and_then(encoded_word).is_some() {
                i += ws;
            }
            continue;
        }
        if in_run {
            flush_words(run_charset, words, out);
            words.clear();
            in_run = false;
        }
        let len = if rest.first() == Some(&b'=') { 1 } else { memchr::memchr(b'=', rest).unwrap_or(rest.len()) };
        out.extend_from_slice(rest.get(..len).unwrap_or(&[]));
        i += len;
    }
    if in_run {
        flush_words(run_charset, words, out);
        words.clear();
    }
}

/// Result of splitting a top-level header block.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Block {
    /// Start of the first field (after any mbox `From ` line).
    pub start: usize,
    /// End of the last field line, terminator included; the blank line is not.
    pub end: usize,
    /// Where the body starts.
    pub body_start: usize,
}

/// Whether a line starts a field: `^[\041-\071\073-\176]+[ \t]*:`.
pub(crate) fn is_field_start(line: &[u8]) -> bool {
    let name_len = line.iter().take_while(|&&b| matches!(b, 0x21..=0x39 | 0x3b..=0x7e)).count();
    if name_len == 0 {
        return false;
    }
    let rest = line.get(name_len..).unwrap_or(&[]);
    let blanks = rest.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    rest.get(blanks) == Some(&b':')
}

/// `/^From\s+(?!:)/` on a message's first line, its line end included: an mbox
/// separator. (`From  :` is one too: the regex backtracks to a single blank.)
fn is_mbox_line(line: &[u8]) -> bool {
    let Some(rest) = line.strip_prefix(b"From") else { return false };
    let ws = rest.iter().take_while(|&&b| is_perl_space(b)).count();
    ws >= 2 || (ws == 1 && rest.get(1) != Some(&b':'))
}

/// Where the header block of the message in `buf[start..limit]` starts (past an
/// mbox `From ` line) and how its lines end, as SpamAssassin's `Message::new`
/// decides: CRLF when the first line after the mbox line, or the last line, ends
/// in CRLF. A text without any LF is split at CRs when `bare_cr` (sift's parse);
/// SpamAssassin reads it as one line.
pub(crate) fn message_head(buf: &[u8], start: usize, limit: usize, bare_cr: bool) -> (usize, Eol) {
    let eol = match detect_eol(buf.get(start..limit).unwrap_or(&[])) {
        Eol::Cr if !bare_cr => Eol::Lf,
        e => e,
    };
    let head = next_line(buf, start, limit, eol).filter(|l| buf.get(l.start..l.end).is_some_and(is_mbox_line)).map_or(start, |l| l.end);
    if head == start || eol == Eol::Cr {
        return (head, eol);
    }
    match detect_eol(buf.get(head..limit).unwrap_or(&[])) {
        Eol::Crlf => (head, Eol::Crlf),
        _ => (head, Eol::Lf),
    }
}

/// The fields of a header block, split as SpamAssassin's `Message::new` splits
/// them: continuation lines join the field before (or start one), up to three
/// lines that are not fields are kept as fields of their own, and a blank line, a
/// line starting with `--` or a fourth bad line ends the block. Each field is a
/// [`Line`] from its first line's start to its last line's end.
#[derive(Debug)]
pub(crate) struct Fields<'b> {
    buf: &'b [u8],
    eol: Eol,
    limit: usize,
    pos: usize,
    errors: u8,
    field: Option<Line>,
    block: Block,
}

impl<'b> Fields<'b> {
    /// The fields of the header block starting at `start`.
    pub fn new(buf: &'b [u8], start: usize, limit: usize, eol: Eol) -> Self {
        let limit = limit.min(buf.len());
        Fields { buf, eol, limit, pos: start, errors: 0, field: None, block: Block { start, end: limit, body_start: limit } }
    }

    /// Where the block ends and the body starts; final once the fields are all read.
    pub fn block(&self) -> Block {
        self.block
    }
}

impl Iterator for Fields<'_> {
    type Item = Line;

    fn next(&mut self) -> Option<Line> {
        while let Some(line) = next_line(self.buf, self.pos, self.limit, self.eol) {
            let text = line.text(self.buf);
            self.pos = line.end;
            if matches!(text.first(), Some(b' ' | b'\t')) {
                let start = self.field.map_or(line.start, |f| f.start);
                self.field = Some(Line { start, ..line });
                continue;
            }
            // Only a bare line end is blank: in an LF text a CRLF line is not.
            let body_start = if text.is_empty() && (self.eol != Eol::Lf || line.end == line.start + 1) {
                Some(line.end)
            } else if text.starts_with(b"--") {
                Some(line.start)
            } else if !is_field_start(text) {
                self.errors = self.errors.saturating_add(1);
                (self.errors > 3).then_some(line.start)
            } else {
                None
            };
            if let Some(body_start) = body_start {
                self.block.end = line.start;
                self.block.body_start = body_start;
                self.pos = self.limit;
                return self.field.take();
            }
            if let Some(done) = self.field.replace(line) {
                return Some(done);
            }
        }
        self.field.take()
    }
}

/// Splits the header block of a message (or of an embedded message) starting at
/// `start`, past any mbox line (see [`message_head`]), and stores its fields.
pub(crate) fn parse_block(
    buf: &[u8],
    src: Src,
    start: usize,
    limit: usize,
    eol: Eol,
    store: &mut HeaderStore<'_>,
    wanted: &mut Wanted,
) -> Block {
    let mut fields = Fields::new(buf, start, limit, eol);
    for f in &mut fields {
        store.add(buf, src, f.start, f.content_end, true, wanted);
    }
    fields.block()
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::{format, vec};

    fn decode(name: &[u8], raw: &[u8]) -> Vec<u8> {
        let (mut out, mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        match decode_value(name, raw, &mut out, &mut a, &mut b, &mut c) {
            Decoded::Raw(s, e) => raw.get(s..e).unwrap_or(&[]).to_vec(),
            Decoded::Out(s, e) => out.get(s..e).unwrap_or(&[]).to_vec(),
        }
    }

    /// Expected values are SpamAssassin 4.0.1's `get_header('Subject')`.
    #[test]
    fn rfc2047_table() {
        let cases: &[(&[u8], &[u8])] = &[
            (b" =?UTF-8?B?Y2Fmw6k=?=", b"caf\xc3\xa9"),
            (b" =?utf-8?q?caf=C3=A9?= =?iso-8859-1?q?caf=E9?=", b"caf\xc3\xa9caf\xc3\xa9"),
            (b" =?iso-8859-1?q?a?=   =?iso-8859-1?q?b?= c =?iso-8859-1?q?d?=", b"ab c d"),
            (b" =?utf-8?q?a_b?=", b"a b"),
            (b" x=?utf-8?q?y?=z", b"xyz"),
            (b" =?bogus?q?=E9?=", b"\xc3\xa9"),
            (b" =?us-ascii?q?=E9?=", b"\xef\xbf\xbd"),
            (b" =?utf-8?b?invalid!!?=", b"\xef\xbf\xbd{\xda\x96'"),
            (b" =?utf-8?q?unterminated", b"=?utf-8?q?unterminated"),
            (b" =?utf-8*en?q?lang?=", b"lang"),
            (b" plain caf\xe9 latin1", b"plain caf\xc3\xa9 latin1"),
            (b" plain caf\xc3\xa9 utf8", b"plain caf\xc3\xa9 utf8"),
            (b" =?koi8-r?b?7sXL?=", b"\xd0\x9d\xd0\xb5\xd0\xba"),
            (b" =?windows-1252?q?=93quoted=94?=", b"\xe2\x80\x9cquoted\xe2\x80\x9d"),
            (b" =?ISO-8859-15?Q?=A4uro?=", b"\xe2\x82\xacuro"),
            (b" =?utf-8?Q?a?==?utf-8?Q?b?=", b"ab"),
            (b" =?utf-8?q?a?=\n =?utf-8?q?b?=", b"ab"),
        ];
        for (raw, want) in cases {
            assert_eq!(decode(b"Subject", raw), *want, "{:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn unfold_table() {
        let cases: &[(&[u8], &[u8], &[u8])] = &[
            (b"Subject", b" plain", b"plain"),
            (b"Subject", b"\tfolded\n\tline  ", b"folded line"),
            (b"Subject", b" a\r\n  b\r\n\tc", b"a b c"),
            (b"Subject", b" a\rb", b"a\rb"),
            (b"Subject", b" a\r b", b"a b"),
            // Received and friends keep encoded words.
            (b"Received", b" from =?utf-8?q?x?= by y", b"from =?utf-8?q?x?= by y"),
            (b"List-Id", b" =?utf-8?q?x?=", b"=?utf-8?q?x?="),
            (b"Subject", b"", b""),
            (b"Received", b" from a\n\tby b\r\n  with c\n id d", b"from a by b with c id d"),
            (b"Subject", b" x\n\ny", b"xy"),
            (b"Subject", b" a\nb\r\nc\rd", b"abc\rd"),
        ];
        for (name, raw, want) in cases {
            assert_eq!(decode(name, raw), *want, "{:?}", String::from_utf8_lossy(raw));
        }
    }

    fn block(text: &[u8]) -> (Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>, Block) {
        let (mut index, mut out, mut a, mut b, mut c) = (Vec::with_capacity(16), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut store = HeaderStore { index: &mut index, cap: 16, text: &mut out, tmp: &mut a, tmp2: &mut b, tmp3: &mut c, overflow: false, truncated: false };
        let mut wanted = Wanted::default();
        let (head, eol) = message_head(text, 0, text.len(), true);
        let blk = parse_block(text, Src::Raw, head, text.len(), eol, &mut store, &mut wanted);
        let get = |s: Span| -> Vec<u8> {
            let buf: &[u8] = if s.src == Src::Raw { text } else { &out };
            buf.get(s.start as usize..s.end as usize).unwrap_or(&[]).to_vec()
        };
        let fields = index.iter().map(|h| (get(h.name), get(h.raw), get(h.decoded))).collect();
        (fields, blk)
    }

    #[test]
    fn block_table() {
        type Field<'a> = (&'a [u8], &'a [u8], &'a [u8]);
        // (message, fields, body start)
        let cases: &[(&[u8], &[Field], usize)] = &[
            (b"A: 1\nB: 2\n\nbody", &[(b"A", b" 1", b"1"), (b"B", b" 2", b"2")], 11),
            (b"A: 1\r\nB: x\r\n y\r\n\r\nbody", &[(b"A", b" 1", b"1"), (b"B", b" x\r\n y", b"x y")], 18),
            (b"A: 1\rB: 2\r\rbody", &[(b"A", b" 1", b"1"), (b"B", b" 2", b"2")], 11),
            (b"From someone Mon Jan 1\nA: 1\n\n", &[(b"A", b" 1", b"1")], 29),
            (b"A: 1\nA: 2\n\n", &[(b"A", b" 1", b"1"), (b"A", b" 2", b"2")], 11),
            // No blank line before the body.
            (b"A: 1\n--boundary\nrest", &[(b"A", b" 1", b"1")], 5),
            (b"A: 1", &[(b"A", b" 1", b"1")], 4),
            // White space before the colon is dropped from the name.
            (b"Key  : v\n\n", &[(b"Key", b" v", b"v")], 10),
            // Up to three garbage lines are tolerated; the fourth starts the body.
            (b"A: 1\nnot a header\nB: 2\n\n", &[(b"A", b" 1", b"1"), (b"B", b" 2", b"2")], 24),
            (b"A: 1\nx\ny\nz\nw\nB: 2\n\n", &[(b"A", b" 1", b"1")], 11),
            (b" cont: first\nA: 1\n\n", &[(b" cont", b" first", b"first"), (b"A", b" 1", b"1")], 19),
            // Checked against SpamAssassin 4.0.1's `Message::new`: `From` and `From  :` lines
            // are mbox separators, `From :` is a field; in an LF message a CRLF line is not
            // blank but a bad line, and the next line starting with `--` ends the head.
            (b"From\nA: b\n\nbody", &[(b"A", b" b", b"b")], 11),
            (b"From  :x\nA: b\n\nbody", &[(b"A", b" b", b"b")], 15),
            (b"From :x\nA: b\r\n\r\nbody\n", &[(b"From", b"x", b"x"), (b"A", b" b", b"b")], 21),
            (b"A: b\n\r\nC: d\n\nbody\n", &[(b"A", b" b", b"b"), (b"C", b" d", b"d")], 13),
            (b"A: b\n\r\n--x\nbody\n", &[(b"A", b" b", b"b")], 7),
            (b"A: caf\xe9\n\n", &[(b"A", b" caf\xe9", b"caf\xc3\xa9")], 9),
        ];
        for (text, want, body) in cases {
            let (fields, blk) = block(text);
            let want: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> = want.iter().map(|(n, r, d)| (n.to_vec(), r.to_vec(), d.to_vec())).collect();
            assert_eq!(fields, want, "{:?}", String::from_utf8_lossy(text));
            assert_eq!(blk.body_start, *body, "body of {:?}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn overflow_and_truncation() {
        let mut text = Vec::new();
        for i in 0..20 {
            text.extend_from_slice(format!("H{i}: v\n").as_bytes());
        }
        text.extend_from_slice(b"Long: ");
        text.extend(vec![b'x'; 9000]);
        text.extend_from_slice(b"\n\n");
        let (mut index, mut out, mut a, mut b, mut c) = (Vec::with_capacity(8), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut store = HeaderStore { index: &mut index, cap: 8, text: &mut out, tmp: &mut a, tmp2: &mut b, tmp3: &mut c, overflow: false, truncated: false };
        let mut wanted = Wanted::default();
        parse_block(&text, Src::Raw, 0, text.len(), Eol::Lf, &mut store, &mut wanted);
        assert!(store.overflow && store.truncated);
        assert_eq!(index.len(), 8);
        assert_eq!(index.capacity(), 8);
    }

    /// Expected values are SpamAssassin 4.0.1's `mbox_sep` and `line_ending` (bare CR aside).
    #[test]
    fn message_head_table() {
        // (message, bare_cr, head start, line ending)
        let cases: &[(&[u8], bool, usize, Eol)] = &[
            (b"A: b\n\nc\n", true, 0, Eol::Lf),
            (b"A: b\r\n\r\nc\n", true, 0, Eol::Crlf),
            (b"A: b\n\nc\r\n", true, 0, Eol::Crlf),
            (b"From x@y Mon\nA: b\r\n\r\n", true, 13, Eol::Crlf),
            (b"From x@y Mon\r\nA: b\n\nc\n", true, 14, Eol::Lf),
            (b"From: x\r\nA: b\n\n", true, 0, Eol::Crlf),
            (b"From :x\nA: b\r\n\r\nc\n", true, 0, Eol::Lf),
            (b"From  :x\nA: b\r\n\r\n", true, 9, Eol::Crlf),
            (b"From\n", true, 5, Eol::Lf),
            (b"Fromage: x\n", true, 0, Eol::Lf),
            (b"A: b\rC: d\r\rbody", true, 0, Eol::Cr),
            (b"A: b\rC: d\r\rbody", false, 0, Eol::Lf),
            (b"From x\rA: b\r\r", true, 7, Eol::Cr),
            (b"From x\rA: b\r\r", false, 13, Eol::Lf),
            (b"", true, 0, Eol::Lf),
        ];
        for (text, bare_cr, head, eol) in cases {
            assert_eq!(message_head(text, 0, text.len(), *bare_cr), (*head, *eol), "{:?}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn field_start_table() {
        let cases: &[(&[u8], bool)] = &[
            (b"Subject: x", true),
            (b"X-A \t: x", true),
            (b"Not a header", false),
            (b": empty name", false),
            (b"Bad\x01Name: x", false),
        ];
        for (line, want) in cases {
            assert_eq!(is_field_start(line), *want, "{:?}", String::from_utf8_lossy(line));
        }
    }
}
