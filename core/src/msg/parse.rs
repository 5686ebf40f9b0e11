//! The parse of one message: top-level headers, then the MIME tree walked depth
//! first with an explicit stack (SpamAssassin's `_parse_multipart`, `_parse_normal`
//! and embedded `message/rfc822` handling), each leaf decoded and rendered as it is
//! reached, then URIs.

use super::charset::{self, Charset};
use super::decode::{base64_decode, is_perl_space, qp_decode, squash_crlf};
use super::header::{is_field_start, message_head, parse_block, HeaderStore, Wanted};
use super::html::{self, HtmlSink};
use super::lines::{next_line, split_lf, Eol};
use super::mime::{disposition_name, find_boundary, is_html_name, parse_content_type};
use super::render::{body_cut, fold, prepare_content, rawbody_cut, split_long_lines, BodyWriter, RunContext};
use super::stats::{HtmlTables, ParseFlags};
use super::uri::{add_uri, text_uri, ByteSet, Offer, TextScanner, UriSet, Work};
use super::{MessageBuffers, Overflow, PartKind, PartRec, Scratch, Span, Src};
use alloc::vec::Vec;

/// A multipart container being split into its parts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frame {
    src: Src,
    eol: Eol,
    /// Next line to read and the end of the container's body.
    pos: usize,
    end: usize,
    /// The boundary, in the meta buffer.
    boundary: (usize, usize),
    /// SpamAssassin's `subparse` left for the children.
    child_budget: u16,
    /// Multipart containers around the children (each splits long lines once).
    levels: u16,
    /// Depth of the children in the tree.
    depth: u16,
    /// `multipart/digest`: children without a type are `message/rfc822`.
    digest: bool,
    /// A child reuses this boundary (SpamAssassin bug 7358): skip delimiters until its close.
    nested_dup: bool,
    /// The first child has no header section (SpamAssassin inserted a blank line).
    first_headerless: bool,
    done: bool,
}

/// Which headers a part has.
#[derive(Debug, Clone, Copy)]
struct HeadersRef {
    top: bool,
    start: u32,
    end: u32,
}

/// A part about to be classified.
#[derive(Debug, Clone, Copy)]
struct Node {
    src: Src,
    eol: Eol,
    body: (usize, usize),
    depth: u16,
    budget: u16,
    levels: u16,
    headers: HeadersRef,
    wanted: Wanted,
    /// The root of a message (top or embedded), not a part of a multipart.
    root: bool,
    /// The body follows a blank separator line of the message body.
    blank_before: bool,
    /// Boundary inherited from the parent multipart (meta range).
    inherited: Option<(usize, usize)>,
    digest_child: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cte {
    Base64,
    QuotedPrintable,
    Identity,
}

/// Everything a walk writes.
struct Walk<'w> {
    raw: &'w [u8],
    limits: super::Limits,
    part_headers: &'w mut Vec<super::header::HeaderRec>,
    part_header_cap: usize,
    parts: &'w mut Vec<PartRec>,
    frames: &'w mut Vec<Frame>,
    header_text: &'w mut Vec<u8>,
    meta: &'w mut Vec<u8>,
    nested: &'w mut Vec<u8>,
    body: &'w mut Vec<u8>,
    rawbody: &'w mut Vec<u8>,
    html_uris: &'w mut Vec<u8>,
    s: &'w mut Scratch,
    html: &'w mut HtmlTables,
    part_text: &'w mut Vec<u8>,
    /// The first text/plain part's text is kept.
    plain_kept: bool,
    flags: ParseFlags,
    writer: BodyWriter,
    overflow: Overflow,
    uri_room: usize,
    leaves: usize,
    stop: bool,
}

fn source<'b>(raw: &'b [u8], nested: &'b [u8], src: Src) -> &'b [u8] {
    match src {
        Src::Nested => nested,
        _ => raw,
    }
}

fn span_bytes<'b>(raw: &'b [u8], nested: &'b [u8], header_text: &'b [u8], meta: &'b [u8], span: Span) -> &'b [u8] {
    let buf = match span.src {
        Src::Raw => raw,
        Src::Nested => nested,
        Src::HeaderText => header_text,
        Src::Meta => meta,
    };
    buf.get(span.start as usize..span.end as usize).unwrap_or(&[])
}

/// Whether `mime` starts with `word` as a whole word (`^word\b`).
fn starts_word(mime: &[u8], word: &[u8]) -> bool {
    mime.starts_with(word) && !mime.get(word.len()).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// `^[\041-\071\073-\176]+:`: a header line as SpamAssassin's MIME checks see one.
fn is_strict_field(text: &[u8]) -> bool {
    let n = text.iter().take_while(|&&b| matches!(b, 0x21..=0x39 | 0x3b..=0x7e)).count();
    n > 0 && text.get(n) == Some(&b':')
}

/// Whether `text` (a line without its end) is `--boundary` or `--boundary--`,
/// trailing white space allowed: `Some(true)` for the closing one.
fn boundary_line(text: &[u8], boundary: &[u8]) -> Option<bool> {
    let rest = text.strip_prefix(b"--")?.strip_prefix(boundary)?;
    let (close, rest) = match rest.strip_prefix(b"--") {
        Some(r) => (true, r),
        None => (false, rest),
    };
    rest.iter().all(|&b| is_perl_space(b)).then_some(close)
}

/// Parses `raw` into `bufs`.
pub(crate) fn parse(raw: &[u8], bufs: &mut MessageBuffers) {
    let limits = bufs.limits;
    let raw = raw.get(..raw.len().min(u32::MAX as usize)).unwrap_or(&[]);
    bufs.reset();
    let MessageBuffers {
        headers,
        part_headers,
        parts,
        frames,
        uri_slots,
        seen_slots,
        header_text,
        meta,
        nested,
        body,
        rawbody,
        uris,
        html_uris,
        scratch,
        header_block,
        body_start,
        uri_count,
        overflow: final_overflow,
        part_header_cap,
        html,
        flags: final_flags,
        part_text,
        body_newline,
        ..
    } = bufs;
    let mut flags = ParseFlags::default();
    let mut overflow = Overflow::default();

    // Top-level header block, after any mbox line.
    let (head, eol) = message_head(raw, 0, raw.len(), true);
    let mut wanted = Wanted::default();
    let block = {
        let mut store = HeaderStore {
            index: headers,
            cap: limits.max_headers,
            text: header_text,
            tmp: &mut scratch.h1,
            tmp2: &mut scratch.h2,
            tmp3: &mut scratch.h3,
            overflow: false,
            truncated: false,
        };
        let b = parse_block(raw, Src::Raw, head, raw.len(), eol, &mut store, &mut wanted);
        overflow.headers |= store.overflow;
        overflow.truncated |= store.truncated;
        flags.truncated_header = store.truncated;
        b
    };
    *header_block = (block.start, block.end);
    *body_start = block.body_start;
    // A blank line lies between the last field and the body unless the block ended otherwise.
    flags.missing_head_body_separator = block.body_start <= block.end;

    // The body text starts with the Subject line.
    if let Some(subject) = wanted.subject {
        body.extend_from_slice(span_bytes(raw, &[], header_text, &[], subject));
    }
    body.push(b'\n');

    let mut walk = Walk {
        raw,
        limits,
        part_headers,
        part_header_cap: *part_header_cap,
        parts,
        frames,
        header_text,
        meta,
        nested,
        body,
        rawbody,
        html_uris,
        s: scratch,
        html,
        part_text,
        plain_kept: false,
        flags,
        writer: BodyWriter::default(),
        overflow,
        uri_room: limits.max_uris.saturating_mul(4),
        leaves: 0,
        stop: false,
    };
    let root = Node {
        src: Src::Raw,
        eol,
        body: (block.body_start, raw.len()),
        depth: 0,
        budget: u16::try_from(limits.max_depth).unwrap_or(u16::MAX),
        levels: 0,
        headers: HeadersRef { top: true, start: 0, end: 0 },
        wanted,
        root: true,
        blank_before: false,
        inherited: None,
        digest_child: false,
    };
    walk.node(root);
    while !walk.stop {
        let Some(frame) = walk.frames.last().copied() else { break };
        if frame.done {
            walk.frames.pop();
            continue;
        }
        walk.next_child();
    }
    fold(&walk.s.gather, walk.body, walk.writer.flagged());
    if walk.leaves == 0 {
        walk.body.clear();
    } else {
        if split_long_lines(walk.body, 0, &mut walk.s.split) {
            walk.body.clear();
            walk.body.extend_from_slice(&walk.s.split);
        }
        *body_newline = walk.body.last() == Some(&b'\n');
    }
    let mut overflow = walk.overflow;
    *final_flags = walk.flags;

    // URIs: first from the rendered text, then from HTML attributes.
    uri_slots.reset(limits.max_uris);
    let mut set = UriSet { out: uris, slots: uri_slots, count: 0, max: limits.max_uris, overflow: false };
    {
        let Scratch { u1, u2, u3, u4, u5, seen, .. } = &mut *walk.s;
        let mut work = Work::new(u1, u2, u3);
        let mut scanner = TextScanner::new();
        // URIs already cleaned are not cleaned again (SpamAssassin's %seen).
        seen.clear();
        seen_slots.reset(limits.max_uris.saturating_mul(2));
        let mut seen_set = ByteSet { arena: seen, slots: seen_slots, count: 0, max: limits.max_uris.saturating_mul(2), sep: None };
        for line in split_lf(walk.body) {
            scanner.scan(line, |raw_uri, kind| {
                if text_uri(raw_uri, kind, u4, u5) && seen_set.offer(u4) != Offer::Present {
                    add_uri(u4, true, false, &mut set, &mut work);
                }
            });
        }
        // HTML URIs never need a domain; they get their own repeat check.
        seen_set.arena.clear();
        seen_set.slots.reset(seen_set.max);
        seen_set.count = 0;
        let mut rec = walk.html_uris.as_slice();
        while let Some(len) = rec.get(..4).and_then(|l| <[u8; 4]>::try_from(l).ok()).map(|l| u32::from_le_bytes(l) as usize) {
            let Some(uri) = rec.get(4..4 + len) else { break };
            if seen_set.offer(uri) != Offer::Present {
                add_uri(uri, false, true, &mut set, &mut work);
            }
            rec = rec.get(4 + len..).unwrap_or(&[]);
        }
    }
    overflow.uris |= set.overflow;
    *uri_count = set.count;
    *final_overflow = overflow;
}

impl Walk<'_> {
    /// Resolves a span against this message's buffers.
    fn bytes(&self, span: Span) -> &[u8] {
        span_bytes(self.raw, self.nested, self.header_text, self.meta, span)
    }

    /// Classifies a part and records it; containers push a frame or continue with
    /// their embedded message, leaves are decoded and rendered.
    fn node(&mut self, mut node: Node) {
        loop {
            if self.parts.len() >= self.parts.capacity().min(self.limits.max_parts) {
                self.overflow.parts = true;
                self.stop = true;
                return;
            }
            let ct_span = node.wanted.content_type;
            let ct_value = ct_span.map(|s| span_bytes(self.raw, self.nested, self.header_text, &[], s));
            let ct = parse_content_type(ct_value, self.meta);
            let mut mime = ct.mime;
            if ct.missing && node.digest_child {
                let at = self.meta.len();
                self.meta.extend_from_slice(b"message/rfc822");
                mime = (at, self.meta.len());
            }
            let own_boundary = match (ct.boundary, ct_span) {
                (Some((a, b)), Some(span)) => Some(Span::new(span.src, span.start as usize + a, span.start as usize + b)),
                _ => None,
            };
            let charset_span = match (ct.charset, ct_span) {
                (Some((a, b)), Some(span)) => Span::new(span.src, span.start as usize + a, span.start as usize + b),
                _ => Span::default(),
            };
            let declared_multipart = self.meta.get(mime.0..mime.1).is_some_and(|m| m.starts_with(b"multipart/"));
            // SpamAssassin inserts a blank line at the top of a message root's
            // multipart body whose first line is text other than the boundary.
            let insert_blank = node.root && declared_multipart && {
                let own = own_boundary.map(|b| self.bytes(b));
                self.root_needs_blank(&node, own)
            };
            // A message root that says multipart but has no boundary is text/plain.
            if node.root && declared_multipart && own_boundary.is_none() && !ct.missing {
                let at = self.meta.len();
                self.meta.extend_from_slice(b"text/plain");
                mime = (at, self.meta.len());
            }
            let name_html = {
                let disp = node.wanted.disposition.map(|s| self.bytes(s));
                let name = disp.and_then(disposition_name).or_else(|| {
                    ct.name.and_then(|(a, b)| ct_value.and_then(|v| v.get(a..b)))
                });
                name.is_some_and(is_html_name)
            };
            let cte = match node.wanted.transfer_encoding.map(|s| self.bytes(s)) {
                Some(v) if v.eq_ignore_ascii_case(b"base64") => Cte::Base64,
                Some(v) if v.eq_ignore_ascii_case(b"quoted-printable") => Cte::QuotedPrintable,
                _ => Cte::Identity,
            };
            let mime_bytes = self.meta.get(mime.0..mime.1).unwrap_or(&[]);
            let is_multipart = mime_bytes.starts_with(b"multipart/");
            let is_text = mime_bytes.starts_with(b"text/");
            let is_message = mime_bytes.starts_with(b"message/") && mime_bytes != b"message/partial";
            let embeds = mime_bytes == b"message/rfc822" || mime_bytes == b"message/global";
            let digest = mime_bytes == b"multipart/digest";
            let index = self.parts.len();
            self.parts.push(PartRec {
                depth: node.depth,
                body: Span::new(node.src, node.body.0, node.body.1),
                rendered: None,
                decoded: (0, 0),
                html: None,
                kind: PartKind::Leaf,
                ctype: Span::new(Src::Meta, mime.0, mime.1),
                charset: charset_span,
                top_headers: node.headers.top,
                headers: (node.headers.start, node.headers.end),
                effective_html: name_html,
                text: is_text || name_html,
            });
            // The boundary used if this is parsed as a multipart: its own or the parent's.
            let boundary = match own_boundary {
                Some(b) => {
                    let at = self.meta.len();
                    let bytes_len = (b.end - b.start) as usize;
                    let start = b.start as usize;
                    match b.src {
                        Src::Raw => self.meta.extend_from_slice(self.raw.get(start..start + bytes_len).unwrap_or(&[])),
                        Src::Nested => self.meta.extend_from_slice(self.nested.get(start..start + bytes_len).unwrap_or(&[])),
                        Src::HeaderText => self.meta.extend_from_slice(self.header_text.get(start..start + bytes_len).unwrap_or(&[])),
                        Src::Meta => self.meta.extend_from_within(start..start + bytes_len),
                    }
                    Some((at, self.meta.len()))
                }
                None => node.inherited,
            };
            if is_multipart && boundary.is_some() {
                if node.budget > 0 {
                    if let Some(p) = self.parts.get_mut(index) {
                        p.kind = PartKind::Multipart;
                    }
                    self.push_frame(&node, boundary.unwrap_or((0, 0)), digest, insert_blank);
                    return;
                }
                self.overflow.depth = true;
            }
            if is_message && embeds {
                if node.budget == 0 {
                    self.overflow.depth = true;
                } else if let Some((src, start, end)) = self.embedded(&node, cte) {
                    if let Some(p) = self.parts.get_mut(index) {
                        p.kind = PartKind::Message;
                    }
                    let buf = source(self.raw, self.nested, src);
                    let (start, eol) = message_head(buf, start, end, true);
                    let first = self.part_headers.len();
                    let mut wanted = Wanted::default();
                    let mut store = HeaderStore {
                        index: self.part_headers,
                        cap: self.part_header_cap,
                        text: self.header_text,
                        tmp: &mut self.s.h1,
                        tmp2: &mut self.s.h2,
                        tmp3: &mut self.s.h3,
                        overflow: false,
                        truncated: false,
                    };
                    let block = parse_block(buf, src, start, end, eol, &mut store, &mut wanted);
                    self.overflow.headers |= store.overflow;
                    self.overflow.truncated |= store.truncated;
                    node = Node {
                        src,
                        eol,
                        body: (block.body_start, end),
                        depth: node.depth.saturating_add(1),
                        budget: node.budget - 1,
                        levels: node.levels,
                        headers: HeadersRef { top: false, start: first as u32, end: self.part_headers.len() as u32 },
                        wanted,
                        root: true,
                        blank_before: false,
                        inherited: None,
                        digest_child: false,
                    };
                    continue;
                }
            }
            let charset = charset::lookup(self.bytes(charset_span));
            self.leaf(&node, mime, cte, charset, name_html, insert_blank && !is_multipart);
            return;
        }
    }

    /// SpamAssassin's blank-line insertion test for a message root's body: two or
    /// more lines, the first with text, and not starting with `--boundary`.
    fn root_needs_blank(&self, node: &Node, boundary: Option<&[u8]>) -> bool {
        let buf = source(self.raw, self.nested, node.src);
        let Some(first) = next_line(buf, node.body.0, node.body.1, node.eol) else { return false };
        if first.end >= node.body.1 {
            return false;
        }
        let text = buf.get(first.start..first.end).unwrap_or(&[]);
        if text.iter().all(|&b| is_perl_space(b)) {
            return false;
        }
        match boundary {
            Some(bnd) => !(text.starts_with(b"--") && text.get(2..).is_some_and(|t| t.starts_with(bnd))),
            None => true,
        }
    }

    /// The decoded body of an embedded message, as a range of a source.
    fn embedded(&mut self, node: &Node, cte: Cte) -> Option<(Src, usize, usize)> {
        let (start, end) = node.body;
        if cte == Cte::Identity {
            let buf = source(self.raw, self.nested, node.src);
            let text = buf.get(start..end).unwrap_or(&[]);
            return (!text.is_empty()).then_some((node.src, start, end));
        }
        let dec = &mut self.s.dec;
        dec.clear();
        {
            let buf = source(self.raw, self.nested, node.src);
            let text = buf.get(start..end).unwrap_or(&[]);
            if cte == Cte::Base64 {
                base64_decode(text, dec);
                squash_crlf(dec, 0);
            } else {
                qp_decode(text, dec);
            }
        }
        if dec.is_empty() {
            return None;
        }
        let at = self.nested.len();
        self.nested.extend_from_slice(dec);
        Some((Src::Nested, at, self.nested.len()))
    }

    fn push_frame(&mut self, node: &Node, boundary: (usize, usize), digest: bool, insert_blank: bool) {
        let buf = source(self.raw, self.nested, node.src);
        let bnd = self.meta.get(boundary.0..boundary.1).unwrap_or(&[]);
        let mut pos = node.body.0;
        let mut found = false;
        let mut at = node.body.0;
        while let Some(line) = next_line(buf, at, node.body.1, node.eol) {
            if boundary_line(line.text(buf), bnd) == Some(false) {
                pos = line.end;
                found = true;
                if next_line(buf, line.end, node.body.1, node.eol).is_some_and(|l| !is_strict_field(l.text(buf))) {
                    self.flags.missing_mime_headers = true;
                }
                break;
            }
            at = line.end;
        }
        if self.frames.len() >= self.frames.capacity() {
            self.overflow.depth = true;
            return;
        }
        self.frames.push(Frame {
            src: node.src,
            eol: node.eol,
            pos,
            end: node.body.1,
            boundary,
            child_budget: node.budget.saturating_sub(1),
            levels: node.levels.saturating_add(1),
            depth: node.depth.saturating_add(1),
            digest,
            nested_dup: false,
            first_headerless: !found && insert_blank,
            done: false,
        });
    }

    /// Reads the next part of the innermost multipart and handles it.
    fn next_child(&mut self) {
        let Some(mut frame) = self.frames.last().copied() else { return };
        let buf = source(self.raw, self.nested, frame.src);
        let bnd = self.meta.get(frame.boundary.0..frame.boundary.1).unwrap_or(&[]);
        let hdr_start = self.part_headers.len();
        let mut wanted = Wanted::default();
        let mut store = HeaderStore {
            index: self.part_headers,
            cap: self.part_header_cap,
            text: self.header_text,
            tmp: &mut self.s.h1,
            tmp2: &mut self.s.h2,
            tmp3: &mut self.s.h3,
            overflow: false,
            truncated: false,
        };
        let mut in_body = frame.first_headerless;
        frame.first_headerless = false;
        let mut body_start = in_body.then_some(frame.pos);
        let mut field: Option<(usize, usize)> = None;
        let mut pos = frame.pos;
        let mut child_body = None;
        let mut after_blank = false;
        loop {
            // In a part's body only lines starting with `--` matter: jump to the next one.
            if in_body && !buf.get(pos..frame.end).is_some_and(|r| r.starts_with(b"--")) {
                let needle: &[u8] = if frame.eol == Eol::Cr { b"\r--" } else { b"\n--" };
                match buf.get(pos..frame.end).and_then(|r| memchr::memmem::find(r, needle)) {
                    Some(k) => pos += k + 1,
                    None => {
                        // No boundary follows: the part runs to the end.
                        if pos < frame.end {
                            frame.pos = frame.end;
                            frame.done = true;
                            child_body = Some((body_start.unwrap_or(pos), frame.end));
                        }
                        break;
                    }
                }
            }
            let Some(line) = next_line(buf, pos, frame.end, frame.eol) else { break };
            let text = line.text(buf);
            let is_last = line.end >= frame.end;
            let mut found = if text.starts_with(b"--") { boundary_line(text, bnd) } else { None };
            if let Some(close) = found {
                if frame.nested_dup {
                    found = None;
                    if close {
                        frame.nested_dup = false;
                    }
                }
            }
            if is_last || found.is_some() {
                let range = match found {
                    None => (body_start.unwrap_or(line.start), line.end),
                    Some(_) => match body_start {
                        Some(bs) if bs < line.start => (bs, strip_line_end(buf, bs, line.start, frame.eol)),
                        _ => (line.start, line.start),
                    },
                };
                frame.pos = line.end;
                frame.done = is_last || found == Some(true);
                // After a closing boundary, text other than white space and dots is an
                // epilogue; after an opening one, the next line should be a header.
                let epilogue = buf.get(line.end..frame.end).unwrap_or(&[]);
                if found == Some(true) && epilogue.iter().any(|&b| !is_perl_space(b) && b != b'.') {
                    self.flags.mime_epilogue_exists = true;
                }
                if found == Some(false) && next_line(buf, line.end, frame.end, frame.eol).is_some_and(|l| !is_strict_field(l.text(buf))) {
                    self.flags.missing_mime_headers = true;
                }
                child_body = Some(range);
                break;
            }
            pos = line.end;
            if in_body {
                continue;
            }
            if is_field_start(text) {
                if let Some((s, e)) = field.take() {
                    store.add(buf, frame.src, s, e, false, &mut wanted);
                }
                field = Some((line.start, line.content_end));
                continue;
            }
            if matches!(text.first(), Some(b' ' | b'\t')) {
                if let Some(f) = field.as_mut() {
                    f.1 = line.content_end;
                    continue;
                }
            }
            if let Some((s, e)) = field.take() {
                let rec = store.add(buf, frame.src, s, e, false, &mut wanted);
                let is_ct = rec.is_some_and(|r| {
                    let name = buf.get(r.name.start as usize..r.name.end as usize).unwrap_or(&[]);
                    name.eq_ignore_ascii_case(b"content-type")
                });
                if is_ct {
                    if let Some(ct) = wanted.content_type {
                        let value = span_bytes(self.raw, self.nested, store.text, &[], ct);
                        let same = find_boundary(value).and_then(|(a, b)| value.get(a..b)) == Some(bnd);
                        if same {
                            frame.nested_dup = true;
                        }
                    }
                }
            }
            in_body = true;
            after_blank = text.is_empty();
            if !text.is_empty() && text != b"\r" {
                self.flags.missing_mime_head_body_separator = true;
            }
            body_start = Some(if text.is_empty() { line.end } else { line.start });
        }
        self.overflow.headers |= store.overflow;
        self.overflow.truncated |= store.truncated;
        let hdr_end = self.part_headers.len();
        let Some(body) = child_body else {
            frame.done = true;
            if let Some(top) = self.frames.last_mut() {
                *top = frame;
            }
            return;
        };
        if let Some(top) = self.frames.last_mut() {
            *top = frame;
        }
        let child = Node {
            src: frame.src,
            eol: frame.eol,
            body,
            depth: frame.depth,
            budget: frame.child_budget,
            levels: frame.levels,
            headers: HeadersRef { top: false, start: hdr_start as u32, end: hdr_end as u32 },
            wanted,
            root: false,
            blank_before: after_blank,
            inherited: Some(frame.boundary),
            digest_child: frame.digest,
        };
        self.node(child);
    }

    /// Decodes a leaf and adds it to the raw body and the rendered body.
    fn leaf(&mut self, node: &Node, mime: (usize, usize), cte: Cte, cs: Charset, name_html: bool, leading_newline: bool) {
        self.leaves += 1;
        if self.writer.started() {
            self.writer.push(&mut self.s.gather, b"\n", false);
        }
        let mime = self.meta.get(mime.0..mime.1).unwrap_or(&[]);
        let is_html = name_html || mime == b"text/html";
        let raw_ok = (name_html || starts_word(mime, b"text") || starts_word(mime, b"message")) && mime != b"text/calendar";
        let body_ok = is_html || mime == b"text/plain";
        if !raw_ok && !body_ok {
            return;
        }
        let buf = source(self.raw, self.nested, node.src);
        let s = &mut *self.s;
        let (start, end) = node.body;
        let runs = RunContext { blank_before: usize::from(node.blank_before), body_top: node.root };
        // Transfer decoding.
        let decoded: &[u8] = match cte {
            Cte::Base64 => {
                s.dec.clear();
                base64_decode(buf.get(start..end).unwrap_or(&[]), &mut s.dec);
                if mime.starts_with(b"text/") || mime.starts_with(b"message/") {
                    squash_crlf(&mut s.dec, 0);
                }
                &s.dec
            }
            Cte::QuotedPrintable => {
                let prepared = prepare_content(buf, start, end, node.eol, node.levels, runs, &mut s.prep);
                let text = if prepared { s.prep.as_slice() } else { buf.get(start..end).unwrap_or(&[]) };
                s.dec.clear();
                if leading_newline {
                    s.dec.push(b'\n');
                }
                qp_decode(text, &mut s.dec);
                &s.dec
            }
            Cte::Identity => {
                let prepared = prepare_content(buf, start, end, node.eol, node.levels, runs, &mut s.prep);
                let text = if prepared { s.prep.as_slice() } else { buf.get(start..end).unwrap_or(&[]) };
                if leading_newline {
                    s.dec.clear();
                    s.dec.push(b'\n');
                    s.dec.extend_from_slice(text);
                    &s.dec
                } else {
                    text
                }
            }
        };
        if raw_ok {
            let keep = match rawbody_cut(decoded, self.limits.rawbody_part_scan_size) {
                Some(n) => {
                    self.overflow.truncated = true;
                    n
                }
                None => decoded.len(),
            };
            if !self.rawbody.is_empty() && self.rawbody.last() != Some(&b'\n') {
                self.rawbody.push(b'\n');
            }
            let at = self.rawbody.len();
            self.rawbody.extend_from_slice(decoded.get(..keep).unwrap_or(&[]));
            if let Some(p) = self.parts.last_mut() {
                p.decoded = (u32::try_from(at).unwrap_or(u32::MAX), u32::try_from(self.rawbody.len()).unwrap_or(u32::MAX));
            }
        }
        if !body_ok {
            return;
        }
        let text = charset::body_to_utf8(decoded, cs, &mut s.conv);
        let mut flagged = !text.is_ascii();
        let rendered: &[u8] = if is_html && !text.is_empty() {
            s.rend.clear();
            let html_index = self.html.stats.len();
            let record = self.html.start_part();
            if record.is_some() {
                if let Some(p) = self.parts.last_mut() {
                    p.html = u16::try_from(html_index).ok();
                }
            }
            let mut sink = HtmlSink {
                text: &mut s.rend,
                uris: self.html_uris,
                uri_room: self.uri_room,
                uri_overflow: false,
                wide: false,
                pre: &mut s.pre,
                attr: &mut s.attr,
                base: &mut s.base,
                ent: &mut s.ent,
                resolved: &mut s.resolved,
                path: &mut s.path,
                record,
            };
            html::render(text, &mut sink);
            self.uri_room = sink.uri_room;
            self.overflow.uris |= sink.uri_overflow;
            flagged |= sink.wide;
            &s.rend
        } else {
            text
        };
        let keep = match body_cut(rendered, self.limits.body_part_scan_size) {
            Some(n) => {
                self.overflow.truncated = true;
                n
            }
            None => rendered.len(),
        };
        self.writer.push(&mut s.gather, rendered.get(..keep).unwrap_or(&[]), flagged);
        // The whole rendered text of the parts the multipart/alternative and stock
        // tests read again: those under a multipart/alternative and the first text/plain.
        let first_plain = mime == b"text/plain" && !self.plain_kept;
        if first_plain || under_alternative(self.parts, self.meta) {
            self.plain_kept |= mime == b"text/plain";
            let at = self.part_text.len();
            self.part_text.extend_from_slice(rendered);
            let range = (u32::try_from(at).unwrap_or(u32::MAX), u32::try_from(self.part_text.len()).unwrap_or(u32::MAX));
            if let Some(p) = self.parts.last_mut() {
                p.rendered = Some(range);
            }
        }
    }

}

/// Whether the last part recorded has a multipart/alternative ancestor.
fn under_alternative(parts: &[PartRec], meta: &[u8]) -> bool {
    let Some((last, before)) = parts.split_last() else { return false };
    let mut depth = last.depth;
    for p in before.iter().rev() {
        if depth == 0 {
            break;
        }
        if p.depth < depth {
            depth = p.depth;
            if meta.get(p.ctype.start as usize..p.ctype.end as usize) == Some(&b"multipart/alternative"[..]) {
                return true;
            }
        }
    }
    false
}

/// End of a part's text before a boundary line: one line end removed (SpamAssassin's chomp).
fn strip_line_end(buf: &[u8], start: usize, end: usize, eol: Eol) -> usize {
    let mut e = end;
    let last = |e: usize| if e > start { buf.get(e - 1).copied() } else { None };
    match eol {
        Eol::Cr => {
            if last(e) == Some(b'\r') {
                e -= 1;
            }
        }
        Eol::Lf | Eol::Crlf => {
            if last(e) == Some(b'\n') {
                e -= 1;
                if eol == Eol::Crlf && last(e) == Some(b'\r') {
                    e -= 1;
                }
            }
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_line_table() {
        let cases: &[(&[u8], &[u8], Option<bool>)] = &[
            (b"--abc", b"abc", Some(false)),
            (b"--abc--", b"abc", Some(true)),
            (b"--abc  \t", b"abc", Some(false)),
            (b"--abc-- ", b"abc", Some(true)),
            (b"--abcd", b"abc", None),
            (b"--abc--x", b"abc", None),
            (b"-abc", b"abc", None),
            (b"--ABC", b"abc", None),
            (b"--a--", b"a--", Some(false)),
            (b"--a----", b"a--", Some(true)),
        ];
        for (line, boundary, want) in cases {
            assert_eq!(boundary_line(line, boundary), *want, "{:?}", core::str::from_utf8(line));
        }
    }

    #[test]
    fn strip_line_end_table() {
        // SpamAssassin chomps one line end before a boundary; in LF mode a CR stays.
        let cases: &[(&[u8], Eol, usize)] = &[
            (b"ab\n", Eol::Lf, 2),
            (b"ab\r\n", Eol::Lf, 3),
            (b"ab\r\n", Eol::Crlf, 2),
            (b"ab\r", Eol::Cr, 2),
            (b"ab", Eol::Lf, 2),
            (b"\n", Eol::Lf, 0),
        ];
        for (text, eol, want) in cases {
            assert_eq!(strip_line_end(text, 0, text.len(), *eol), *want, "{:?}", core::str::from_utf8(text));
        }
    }

    #[test]
    fn starts_word_table() {
        assert!(starts_word(b"text/plain", b"text"));
        assert!(starts_word(b"message/rfc822", b"message"));
        assert!(!starts_word(b"textual/x", b"text"));
        assert!(starts_word(b"text", b"text"));
    }
}
