//! A view over one message held in a caller's buffer, rendered the way
//! SpamAssassin renders a message for its rules.
//!
//! [`Message::parse`] never fails: malformed input still yields headers, text and
//! URIs (best effort), and anything beyond a fixed capacity is dropped and flagged
//! in [`Overflow`]. All derived text lives in a caller-owned [`MessageBuffers`],
//! reused from message to message, so parsing allocates nothing once warm.
//!
//! INTERFACE CONTRACT (implemented in the submodules):
//! - line endings LF, CRLF and bare CR are all accepted;
//! - header values are unfolded for `decoded` (RFC 2047 words decoded to UTF-8),
//!   kept byte-exact for `raw`; neither includes the trailing line ending;
//! - `body()`: rendered text of the text parts (decoded, HTML turned to text,
//!   paragraphs joined into single lines), the Subject as the first line, lines
//!   separated by `\n`, no trailing `\n`; `body_lines()`: the same, with the `\n`
//!   SpamAssassin's last body line has when its text ends with blank lines;
//! - `rawbody()`: transfer-decoded text parts, not rendered, each part starting on
//!   a new line (bytes kept in the part's charset, as SpamAssassin keeps them);
//!   `rawbody_pieces()`: the ranges of it that `rawbody` rules see one at a time;
//! - `uris()`: every URI found in text and HTML attributes, one per line.
//!
//! Layout: `header` (fields, RFC 2047), `decode` (base64, quoted-printable),
//! `charset` (to UTF-8), `mime` (Content-Type), `parse` (the MIME walk), `render`
//! (body text assembly), `html` and `style` (HTML to text), `uri` (URI finding and
//! cleaning), `addr` (`:addr` and `:name`), `stats` (what SpamAssassin's eval tests
//! read that only the parse sees: `HTML.pm`'s results per HTML part, parse flags).
//!
//! Known differences from SpamAssassin 4.0.1 (checked against it on the shared
//! corpora: body 99.1%, rawbody 100%, URIs 99.85% identical on the public corpus):
//! - East Asian multi-byte charsets (GB2312/GBK, Big5, EUC-KR, ISO-2022-JP,
//!   Shift_JIS, EUC-JP) are not converted: their bytes are kept;
//! - bare-CR messages are split into lines (SpamAssassin sees one long line);
//! - no IDNA for non-ASCII host names, no configured `redirector_pattern`s;
//! - `rawbody` holds parts one after the other, each starting on a new line; rules
//!   that need SpamAssassin's 2-4 KiB pieces get them from `rawbody_pieces()`, but a
//!   `^` under `/m` holds after a piece's final `\n` too (Perl's does not), which only
//!   patterns that can match the empty string there see;
//! - a body line over 2048 bytes is cut into pieces as SpamAssassin cuts it, but each
//!   piece but the last ends with a `\n` (SpamAssassin's have none), which a body
//!   rule's match may end with.

mod addr;
mod charset;
mod charset_tables;
mod decode;
mod entities;
mod header;
mod html;
mod lines;
mod mime;
mod parse;
mod render;
mod stats;
mod style;
mod tlds;
mod uri;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};

/// Numbers each [`MessageBuffers`], so that [`Message::serial`] is unique in a process.
static BUFFERS_MADE: AtomicU32 = AtomicU32::new(0);

pub use addr::{addresses, first_address, first_display_name, first_display_name_decoded, Address, Addresses};
pub use stats::{tag_hash, HtmlOverflow, HtmlStats, ParseFlags};
// The header splitter the rewriter shares (it re-splits the raw message as SpamAssassin does).
pub(crate) use header::{message_head, Fields};
pub(crate) use lines::Eol;

/// Capacities that bound the work and memory spent on one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Top-level headers kept; later ones are dropped and flagged.
    pub max_headers: usize,
    /// MIME parts kept (leaves and containers together).
    pub max_parts: usize,
    /// MIME nesting depth followed (SpamAssassin's `subparse`: each multipart or
    /// embedded message level uses one).
    pub max_depth: usize,
    /// Decoded bytes of one text part that go into `body` (SpamAssassin's `body_part_scan_size`).
    pub body_part_scan_size: usize,
    /// Decoded bytes of one part that go into `rawbody` (SpamAssassin's `rawbody_part_scan_size`).
    pub rawbody_part_scan_size: usize,
    /// URIs kept.
    pub max_uris: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_headers: 1000,
            max_parts: 1000,
            max_depth: 20,
            body_part_scan_size: 50_000,
            rawbody_part_scan_size: 500_000,
            max_uris: 1000,
        }
    }
}

/// Which capacities a message exceeded; the message was still parsed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overflow {
    /// More headers than `max_headers` (or MIME part headers than their pool holds).
    pub headers: bool,
    /// More MIME parts than `max_parts`.
    pub parts: bool,
    /// Nesting deeper than `max_depth`.
    pub depth: bool,
    /// More URIs than `max_uris`.
    pub uris: bool,
    /// A part was cut at its scan size, or a header name or value at SpamAssassin's maximum length.
    pub truncated: bool,
}

/// Which buffer a [`Span`] points into.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Src {
    /// The message itself.
    #[default]
    Raw,
    /// Decoded bodies of encoded embedded messages.
    Nested,
    /// Decoded header values.
    HeaderText,
    /// Content types, boundaries and the like.
    Meta,
}

/// A byte range of one of the message's buffers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub src: Src,
    pub start: u32,
    pub end: u32,
}

impl Span {
    /// A span; offsets are below `u32::MAX` because messages are cut there.
    pub fn new(src: Src, start: usize, end: usize) -> Span {
        let clamp = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Span { src, start: clamp(start), end: clamp(end.max(start)) }
    }

    /// Bytes the span covers.
    pub fn len(&self) -> usize {
        self.end.saturating_sub(self.start) as usize
    }
}

/// What kind of node a MIME part is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PartKind {
    Leaf,
    Multipart,
    /// `message/rfc822` whose embedded message follows as its child.
    Message,
}

/// One MIME part in the index.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PartRec {
    pub depth: u16,
    /// The part's body as it stands in the message, before any decoding.
    pub body: Span,
    /// Its whole rendered text in `part_text`, when kept.
    pub rendered: Option<(u32, u32)>,
    /// Its HTML statistics, for a rendered HTML part.
    pub html: Option<u16>,
    /// Its text in `rawbody` (empty for parts that are not there).
    pub decoded: (u32, u32),
    pub kind: PartKind,
    pub ctype: Span,
    pub charset: Span,
    pub top_headers: bool,
    pub headers: (u32, u32),
    pub effective_html: bool,
    pub text: bool,
}

/// Scratch buffers reused between messages.
#[derive(Default)]
pub(crate) struct Scratch {
    pub h1: Vec<u8>,
    pub h2: Vec<u8>,
    pub h3: Vec<u8>,
    pub prep: Vec<u8>,
    pub dec: Vec<u8>,
    pub conv: Vec<u8>,
    pub rend: Vec<u8>,
    pub pre: Vec<u8>,
    pub attr: Vec<u8>,
    pub base: Vec<u8>,
    pub ent: Vec<u8>,
    pub resolved: Vec<u8>,
    pub path: Vec<u8>,
    pub split: Vec<u8>,
    pub gather: Vec<u8>,
    pub seen: Vec<u8>,
    pub u1: Vec<u8>,
    pub u2: Vec<u8>,
    pub u3: Vec<u8>,
    pub u4: Vec<u8>,
    pub u5: Vec<u8>,
}

impl Scratch {
    fn release_above(&mut self, keep: usize) -> usize {
        let mut freed = 0;
        for v in [
            &mut self.h1,
            &mut self.h2,
            &mut self.h3,
            &mut self.prep,
            &mut self.dec,
            &mut self.conv,
            &mut self.rend,
            &mut self.pre,
            &mut self.attr,
            &mut self.base,
            &mut self.ent,
            &mut self.resolved,
            &mut self.path,
            &mut self.split,
            &mut self.gather,
            &mut self.seen,
            &mut self.u1,
            &mut self.u2,
            &mut self.u3,
            &mut self.u4,
            &mut self.u5,
        ] {
            freed += release_above(v, keep);
        }
        freed
    }

    fn capacities(&self) -> [usize; 21] {
        [
            self.h1.capacity(),
            self.h2.capacity(),
            self.h3.capacity(),
            self.prep.capacity(),
            self.dec.capacity(),
            self.conv.capacity(),
            self.rend.capacity(),
            self.pre.capacity(),
            self.attr.capacity(),
            self.base.capacity(),
            self.ent.capacity(),
            self.resolved.capacity(),
            self.path.capacity(),
            self.split.capacity(),
            self.gather.capacity(),
            self.seen.capacity(),
            self.u1.capacity(),
            self.u2.capacity(),
            self.u3.capacity(),
            self.u4.capacity(),
            self.u5.capacity(),
        ]
    }
}

/// Frees `v` when its capacity is above `keep`; the bytes freed.
pub(crate) fn release_above(v: &mut Vec<u8>, keep: usize) -> usize {
    let held = v.capacity();
    if held <= keep {
        return 0;
    }
    *v = Vec::new();
    held
}

/// Caller-owned buffers a [`Message`] is parsed into; reuse one per worker.
pub struct MessageBuffers {
    limits: Limits,
    headers: Vec<header::HeaderRec>,
    part_headers: Vec<header::HeaderRec>,
    part_header_cap: usize,
    parts: Vec<PartRec>,
    frames: Vec<parse::Frame>,
    uri_slots: uri::SlotTable,
    seen_slots: uri::SlotTable,
    header_text: Vec<u8>,
    meta: Vec<u8>,
    nested: Vec<u8>,
    body: Vec<u8>,
    rawbody: Vec<u8>,
    uris: Vec<u8>,
    html_uris: Vec<u8>,
    scratch: Scratch,
    header_block: (usize, usize),
    body_start: usize,
    uri_count: usize,
    overflow: Overflow,
    html: stats::HtmlTables,
    flags: ParseFlags,
    part_text: Vec<u8>,
    body_newline: bool,
    serial: u64,
}

impl MessageBuffers {
    /// The rendered body text of the message last parsed into these buffers, as
    /// [`Message::body`] gave it: kept for the verdict after the message is gone.
    pub(crate) fn body(&self) -> &[u8] {
        let len = self.body.len() - usize::from(self.body_newline);
        self.body.get(..len).unwrap_or_default()
    }

    /// Buffers for messages parsed under `limits`; fixed-capacity indexes are reserved now.
    pub fn new(limits: Limits) -> Self {
        let part_header_cap = limits.max_headers.saturating_add(limits.max_parts.saturating_mul(4));
        MessageBuffers {
            limits,
            headers: Vec::with_capacity(limits.max_headers),
            part_headers: Vec::with_capacity(part_header_cap),
            part_header_cap,
            parts: Vec::with_capacity(limits.max_parts),
            frames: Vec::with_capacity(limits.max_depth.saturating_add(2)),
            uri_slots: uri::SlotTable::with_items(limits.max_uris),
            seen_slots: uri::SlotTable::with_items(limits.max_uris.saturating_mul(2)),
            header_text: Vec::new(),
            meta: Vec::new(),
            nested: Vec::new(),
            body: Vec::new(),
            rawbody: Vec::new(),
            uris: Vec::new(),
            html_uris: Vec::new(),
            scratch: Scratch::default(),
            header_block: (0, 0),
            body_start: 0,
            uri_count: 0,
            overflow: Overflow::default(),
            html: stats::HtmlTables::new(),
            flags: ParseFlags::default(),
            part_text: Vec::new(),
            body_newline: false,
            serial: u64::from(BUFFERS_MADE.fetch_add(1, Ordering::Relaxed)) << 32,
        }
    }

    /// The limits these buffers were made with.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Frees every text buffer that a message grew past `keep` bytes and returns the
    /// bytes freed: a worker that saw one large message then holds what typical mail
    /// needs, not that message's size, until the next large one.
    pub fn release_above(&mut self, keep: usize) -> usize {
        let mut freed = 0;
        for v in [
            &mut self.header_text,
            &mut self.meta,
            &mut self.nested,
            &mut self.body,
            &mut self.rawbody,
            &mut self.uris,
            &mut self.html_uris,
            &mut self.part_text,
            &mut self.html.comments,
            &mut self.html.anchors,
            &mut self.html.titles,
        ] {
            freed += release_above(v, keep);
        }
        freed + self.scratch.release_above(keep)
    }

    /// Capacity of every buffer, to check that re-parsing does not grow them.
    pub fn capacities(&self) -> Vec<usize> {
        let mut v = Vec::with_capacity(40);
        v.extend_from_slice(&[
            self.headers.capacity(),
            self.part_headers.capacity(),
            self.parts.capacity(),
            self.frames.capacity(),
            self.uri_slots.capacity(),
            self.seen_slots.capacity(),
            self.header_text.capacity(),
            self.meta.capacity(),
            self.nested.capacity(),
            self.body.capacity(),
            self.rawbody.capacity(),
            self.uris.capacity(),
            self.html_uris.capacity(),
            self.part_text.capacity(),
        ]);
        v.extend_from_slice(&self.scratch.capacities());
        v.extend_from_slice(&self.html.capacities());
        v
    }

    fn reset(&mut self) {
        self.headers.clear();
        self.part_headers.clear();
        self.parts.clear();
        self.frames.clear();
        self.header_text.clear();
        self.meta.clear();
        self.nested.clear();
        self.body.clear();
        self.rawbody.clear();
        self.uris.clear();
        self.html_uris.clear();
        self.part_text.clear();
        self.body_newline = false;
        self.scratch.gather.clear();
        self.header_block = (0, 0);
        self.body_start = 0;
        self.uri_count = 0;
        self.overflow = Overflow::default();
        self.html.reset();
        self.flags = ParseFlags::default();
        self.serial = (self.serial & !0xffff_ffff) | u64::from((self.serial as u32).wrapping_add(1));
    }

    fn bytes<'a>(&'a self, raw: &'a [u8], span: Span) -> &'a [u8] {
        let buf: &[u8] = match span.src {
            Src::Raw => raw,
            Src::Nested => &self.nested,
            Src::HeaderText => &self.header_text,
            Src::Meta => &self.meta,
        };
        buf.get(span.start as usize..span.end as usize).unwrap_or(&[])
    }

    fn header<'a>(&'a self, raw: &'a [u8], rec: &header::HeaderRec) -> Header<'a> {
        Header { name: self.bytes(raw, rec.name), raw: self.bytes(raw, rec.raw), decoded: self.bytes(raw, rec.decoded) }
    }
}

/// The last of `list` whose name (read with `bytes`) is `name`, ignoring ASCII case:
/// only names are read, from the end.
fn last_named<'r>(list: &'r [header::HeaderRec], name: &[u8], bytes: impl Fn(Span) -> &'r [u8]) -> Option<&'r header::HeaderRec> {
    list.iter().rev().find(|h| is_named(h, name, &bytes))
}

/// Whether header `h` is called `name` (case-insensitive): lengths first, so most
/// headers are told apart without reading their names.
fn is_named<'r>(h: &header::HeaderRec, name: &[u8], bytes: impl Fn(Span) -> &'r [u8]) -> bool {
    h.name.len() == name.len() && bytes(h.name).eq_ignore_ascii_case(name)
}

/// One header field of a message or MIME part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// Field name as written (case kept).
    pub name: &'a [u8],
    /// Value exactly as in the message after the colon, folding kept, no trailing line end.
    pub raw: &'a [u8],
    /// Value unfolded, RFC 2047 words decoded to UTF-8, leading white space trimmed.
    pub decoded: &'a [u8],
}

/// A parsed message: borrows the raw bytes and the buffers it was parsed into.
pub struct Message<'a> {
    raw: &'a [u8],
    bufs: &'a MessageBuffers,
}

impl<'a> Message<'a> {
    /// Parses `raw` into `bufs`. Never fails; see [`Message::overflow`].
    pub fn parse(raw: &'a [u8], bufs: &'a mut MessageBuffers) -> Message<'a> {
        parse::parse(raw, bufs);
        Message { raw, bufs }
    }

    /// The whole message as received (`full` rules).
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The top-level headers in message order.
    pub fn headers(&self) -> impl Iterator<Item = Header<'a>> + 'a {
        let (bufs, raw) = (self.bufs, self.raw);
        bufs.headers.iter().map(move |h| bufs.header(raw, h))
    }

    /// The top-level headers called `name` (case-insensitive), in message order.
    pub fn headers_named<'n>(&self, name: &'n [u8]) -> impl Iterator<Item = Header<'a>> + 'n
    where
        'a: 'n,
    {
        let (bufs, raw) = (self.bufs, self.raw);
        bufs.headers.iter().filter(move |h| is_named(h, name, |span| bufs.bytes(raw, span))).map(move |h| bufs.header(raw, h))
    }

    /// The last top-level header called `name` (case-insensitive), as SpamAssassin's
    /// scalar `get_header` picks it.
    pub fn header(&self, name: &[u8]) -> Option<Header<'a>> {
        let (bufs, raw) = (self.bufs, self.raw);
        last_named(&bufs.headers, name, |span| bufs.bytes(raw, span)).map(|h| bufs.header(raw, h))
    }

    /// The top-level headers decoded, one `Name: value` line each, into `out` (cleared
    /// first): what SpamAssassin's `ALL` pseudo-header reads.
    pub fn decoded_header_block(&self, out: &mut Vec<u8>) {
        out.clear();
        for h in self.headers() {
            out.extend_from_slice(h.name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(h.decoded);
            out.push(b'\n');
        }
        if out.last() == Some(&b'\n') {
            out.pop();
        }
    }

    /// The raw top-level header block, without the blank line that ends it.
    pub fn header_block(&self) -> &'a [u8] {
        let (a, b) = self.bufs.header_block;
        self.raw.get(a..b).unwrap_or(&[])
    }

    /// Rendered body text: Subject first, one paragraph per line, `\n` between lines.
    pub fn body(&self) -> &'a [u8] {
        self.bufs.body()
    }

    /// SpamAssassin's body lines as body rules match them, each with its `\n`:
    /// [`Message::body`], then the `\n` that ends its last line when SpamAssassin's
    /// text has one. (SpamAssassin cuts a line over 2048 bytes into pieces without a
    /// `\n`; here each piece but the last ends with one.)
    pub fn body_lines(&self) -> &'a [u8] {
        &self.bufs.body
    }

    /// Whether SpamAssassin's body text ends with a line end that [`Message::body`]
    /// leaves out (its last body line then has one).
    pub fn body_ends_with_newline(&self) -> bool {
        self.bufs.body_newline
    }

    /// Decoded but unrendered body of the text parts, each part on its own lines.
    pub fn rawbody(&self) -> &'a [u8] {
        &self.bufs.rawbody
    }

    /// The pieces of [`Message::rawbody`] that SpamAssassin matches `rawbody` rules on,
    /// one at a time, as ranges of it: each part's text, cut into pieces of 2 to 4 KiB
    /// when longer than 2 KiB. A match never spans two pieces, and `^` without `/m`
    /// only starts one.
    pub fn rawbody_pieces(&self) -> impl Iterator<Item = core::ops::Range<usize>> + Clone + 'a {
        let text: &'a [u8] = &self.bufs.rawbody;
        self.bufs.parts.iter().filter(|p| p.decoded.0 < p.decoded.1).flat_map(move |p| {
            let (a, b) = (p.decoded.0 as usize, p.decoded.1 as usize);
            render::rawbody_pieces(text.get(a..b).unwrap_or(&[])).map(move |r| a + r.start..a + r.end)
        })
    }

    /// URIs found in the message, one per line (an anchor without `href` gives an
    /// empty one, as in SpamAssassin).
    pub fn uris(&self) -> &'a [u8] {
        &self.bufs.uris
    }

    /// How many URIs [`Message::uris`] holds (which tells one empty URI from none).
    pub fn uri_count(&self) -> usize {
        self.bufs.uri_count
    }

    /// Capacities this message exceeded.
    pub fn overflow(&self) -> Overflow {
        self.bufs.overflow
    }

    /// The MIME parts in tree order (the message itself first), containers included.
    pub fn parts(&self) -> impl Iterator<Item = Part<'a>> + 'a {
        let (bufs, raw) = (self.bufs, self.raw);
        bufs.parts.iter().map(move |rec| Part { bufs, raw, rec })
    }

    /// A number no other parse in this process has (until 2^32 parses into one
    /// buffer set): lets callers cache what they derive from one message.
    pub fn serial(&self) -> u64 {
        self.bufs.serial
    }

    /// Bytes after the top-level header block (SpamAssassin's `pristine_body_length`).
    pub fn body_len(&self) -> usize {
        self.raw.len().saturating_sub(self.bufs.body_start)
    }

    /// The parse flags SpamAssassin's `check_msg_parse_flags` reads.
    pub fn parse_flags(&self) -> ParseFlags {
        self.bufs.flags
    }

    /// The HTML statistics of each rendered HTML part, in message order
    /// (SpamAssassin's `html_all`).
    pub fn html_parts(&self) -> impl Iterator<Item = HtmlPart<'a>> + 'a {
        let tables = &self.bufs.html;
        tables.stats.iter().map(move |stats| HtmlPart { stats, tables })
    }

    /// Capacities the HTML statistics ran out of.
    pub fn html_overflow(&self) -> HtmlOverflow {
        self.bufs.html.overflow
    }
}

/// The statistics `HTML.pm` gathers on one HTML part.
#[derive(Clone, Copy)]
pub struct HtmlPart<'a> {
    stats: &'a HtmlStats,
    tables: &'a stats::HtmlTables,
}

impl<'a> HtmlPart<'a> {
    /// Counts, sizes, ratios and flags.
    pub fn stats(&self) -> &'a HtmlStats {
        self.stats
    }

    /// How many tags with this name ([`tag_hash`]) are open at the end (`inside{tag}`);
    /// `None` when no such tag occurred.
    pub fn inside(&self, tag: u64) -> Option<i64> {
        let (a, b) = self.stats.tag_slots;
        stats::inside(self.tables.tags.get(a as usize..b as usize).unwrap_or(&[]), tag)
    }

    /// Comments, `<!--` and `-->` included.
    pub fn comments(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        stats::records(&self.tables.comments, self.stats.comments)
    }

    /// Text of each anchor, with `<img>\n` for each image in it.
    pub fn anchors(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        stats::records(&self.tables.anchors, self.stats.anchors)
    }

    /// Text of each title.
    pub fn titles(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        stats::records(&self.tables.titles, self.stats.titles)
    }
}

/// A MIME part of a parsed message.
#[derive(Clone, Copy)]
pub struct Part<'a> {
    bufs: &'a MessageBuffers,
    raw: &'a [u8],
    rec: &'a PartRec,
}

impl<'a> Part<'a> {
    /// Depth in the MIME tree: 0 for the message, 1 for its parts, and so on.
    pub fn depth(&self) -> usize {
        usize::from(self.rec.depth)
    }

    /// The content type as SpamAssassin reads it: lowercase `type/subtype`.
    pub fn content_type(&self) -> &'a [u8] {
        self.bufs.bytes(self.raw, self.rec.ctype)
    }

    /// The charset parameter as written, empty if none.
    pub fn charset(&self) -> &'a [u8] {
        self.bufs.bytes(self.raw, self.rec.charset)
    }

    /// Whether the part is text (`text/*`, or named like an HTML file).
    pub fn is_text(&self) -> bool {
        self.rec.text
    }

    /// Whether the part is a leaf (not a multipart or an embedded message).
    pub fn is_leaf(&self) -> bool {
        self.rec.kind == PartKind::Leaf
    }

    /// The part's body as written in the message (transfer encoding not undone); for a
    /// part of a multipart, without the line end that belongs to the next boundary.
    pub fn raw_body(&self) -> &'a [u8] {
        self.bufs.bytes(self.raw, self.rec.body)
    }

    /// The part's whole rendered text (HTML turned to text, charset converted to UTF-8),
    /// kept for text/plain and text/html parts under a multipart/alternative and for
    /// the first text/plain part; `None` for other parts.
    pub fn rendered(&self) -> Option<&'a [u8]> {
        let (a, b) = self.rec.rendered?;
        self.bufs.part_text.get(a as usize..b as usize)
    }

    /// The part's text as [`Message::rawbody`] holds it (transfer encoding undone);
    /// empty for parts that are not text.
    pub fn decoded(&self) -> &'a [u8] {
        let (a, b) = self.rec.decoded;
        self.bufs.rawbody.get(a as usize..b as usize).unwrap_or(&[])
    }

    /// The HTML statistics of this part, when it was rendered as HTML.
    pub fn html(&self) -> Option<HtmlPart<'a>> {
        let tables = &self.bufs.html;
        tables.stats.get(usize::from(self.rec.html?)).map(|stats| HtmlPart { stats, tables })
    }

    /// The decoded value of the part's last header field called `name` (case-insensitive).
    pub fn header(&self, name: &[u8]) -> Option<&'a [u8]> {
        let (bufs, raw) = (self.bufs, self.raw);
        last_named(self.header_recs(), name, |span| bufs.bytes(raw, span)).map(|h| bufs.bytes(raw, h.decoded))
    }

    /// Whether the part is rendered as HTML (`text/html` or an `.html` file name).
    pub fn is_html(&self) -> bool {
        self.rec.effective_html || self.content_type() == b"text/html"
    }

    /// The part's own header fields, in order.
    pub fn headers(&self) -> impl Iterator<Item = Header<'a>> + 'a {
        let (bufs, raw) = (self.bufs, self.raw);
        self.header_recs().iter().map(move |h| bufs.header(raw, h))
    }

    fn header_recs(&self) -> &'a [header::HeaderRec] {
        if self.rec.top_headers {
            &self.bufs.headers
        } else {
            self.bufs.part_headers.get(self.rec.headers.0 as usize..self.rec.headers.1 as usize).unwrap_or(&[])
        }
    }
}

/// The body text `raw` renders to under default limits: the text a verdict of it carries.
#[cfg(test)]
pub(crate) fn rendered_body(raw: &[u8]) -> Vec<u8> {
    let mut bufs = MessageBuffers::new(Limits::default());
    Message::parse(raw, &mut bufs).body().to_vec()
}

#[cfg(test)]
mod tests;
