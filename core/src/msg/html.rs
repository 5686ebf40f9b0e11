//! HTML to text as SpamAssassin's `HTML.pm` renders it on top of HTML::Parser:
//! tags dropped, entities decoded, script/style/comments removed, block elements
//! turned into line breaks, and URIs gathered from links, images, forms and the like.
//! Font colours, sizes and CSS are followed (`style`) to tell invisible text. When
//! the parser asks for it, every tag, text run, comment and declaration is also
//! reported to a [`HtmlRecorder`] (the statistics of `HTML.pm`'s results).

use alloc::vec::Vec;

use super::charset::push_char;
use super::entities::ENTITIES;
use super::render::unicode_space_len;
use super::stats::{HtmlRecorder, TagAttrs};
use super::style::{StyleTag, Styles};

/// SpamAssassin's `MAX_URI_LENGTH`.
pub(crate) const MAX_URI: usize = 8192;

/// Most attributes looked at on one tag; later ones are ignored.
const MAX_ATTRS: usize = 32;

/// Where rendered text and URIs go, with scratch space.
pub(crate) struct HtmlSink<'s> {
    /// Rendered text is appended here.
    pub text: &'s mut Vec<u8>,
    /// URIs as records: a little-endian u32 length, then the bytes.
    pub uris: &'s mut Vec<u8>,
    /// How many URI records may still be added.
    pub uri_room: usize,
    /// A URI was dropped for want of room.
    pub uri_overflow: bool,
    /// Displayed text held a character above U+00FF (Perl would hold it as characters).
    pub wide: bool,
    /// Scratch: the preprocessed document.
    pub pre: &'s mut Vec<u8>,
    /// Scratch: decoded attribute values and resolved URIs.
    pub attr: &'s mut Vec<u8>,
    /// Scratch: the current `<base href>`.
    pub base: &'s mut Vec<u8>,
    /// Scratch: entity-decoded text.
    pub ent: &'s mut Vec<u8>,
    /// Scratch: a resolved URI.
    pub resolved: &'s mut Vec<u8>,
    /// Scratch: a path being cleaned.
    pub path: &'s mut Vec<u8>,
    /// Where this part's HTML statistics go, when they are kept.
    pub record: Option<HtmlRecorder<'s>>,
}

/// What was last appended to the rendered text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    Nothing,
    /// Text starting at this offset of the output, and whether it was invisible.
    Text(usize, bool),
    /// A line break or space from a block element.
    Space,
}

/// Elements whose content HTML::Parser does not parse as markup.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Literal {
    /// Content is text with entities decoded (`title`, `textarea`).
    Decoded,
    /// Content is text as is (`script`, `style`, `xmp`, `iframe`).
    Raw,
    /// Everything to the end of the document is text (`plaintext`).
    Rest,
}

#[derive(Clone, Copy)]
struct Attr {
    name: (usize, usize),
    value: (usize, usize),
}

struct Renderer<'s, 'k> {
    sink: &'k mut HtmlSink<'s>,
    last: Last,
    in_script: i32,
    in_style: i32,
    attrs: [Attr; MAX_ATTRS],
    attr_count: usize,
    styles: Styles,
    /// The last search for a comment end: from where, and the `-->` found.
    comment_end: Option<(usize, Option<usize>)>,
    /// No `</title>` follows this point.
    no_title_end: Option<usize>,
}

/// Renders the HTML document `src` (UTF-8) into `sink.text`, gathering URIs.
pub(crate) fn render(src: &[u8], sink: &mut HtmlSink<'_>) {
    let text_start = sink.text.len();
    if let Some(r) = sink.record.as_mut() {
        r.source(src);
    }
    let mut pre = core::mem::take(sink.pre);
    preprocess(src, &mut pre);
    sink.base.clear();
    let mut r = Renderer {
        sink,
        last: Last::Nothing,
        in_script: 0,
        in_style: 0,
        attrs: [Attr { name: (0, 0), value: (0, 0) }; MAX_ATTRS],
        attr_count: 0,
        styles: Styles::new(),
        comment_end: None,
        no_title_end: None,
    };
    r.run(&pre);
    *r.sink.pre = pre;
    let (min_size, max_size) = r.styles.size_range();
    let HtmlSink { text, record, .. } = &mut *r.sink;
    if let Some(rec) = record.as_mut() {
        rec.stats.min_size = min_size;
        rec.stats.max_size = max_size;
        rec.finish(text.get(text_start..).unwrap_or(&[]));
    }
}

/// SpamAssassin's textual fixes before parsing: `&nbsp;` becomes a space,
/// `<tag/>` becomes `<tag>`, curly double quotes become `"`.
fn preprocess(src: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(src.len());
    let mut i = 0;
    while i < src.len() {
        let rest = src.get(i..).unwrap_or(&[]);
        let Some(k) = memchr::memchr3(b'&', b'<', 0xe2, rest) else {
            out.extend_from_slice(rest);
            break;
        };
        out.extend_from_slice(rest.get(..k).unwrap_or(&[]));
        let at = rest.get(k..).unwrap_or(&[]);
        if at.starts_with(b"&nbsp;") {
            out.push(b' ');
            i += k + 6;
        } else if at.starts_with(b"\xe2\x80\x9c") || at.starts_with(b"\xe2\x80\x9d") {
            out.push(b'"');
            i += k + 3;
        } else if let Some(len) = self_closing(at) {
            let word = at.iter().skip(1).take_while(|&&b| is_word(b)).count();
            out.extend_from_slice(at.get(..=word).unwrap_or(&[]));
            out.push(b'>');
            i += k + len;
        } else {
            out.push(at.first().copied().unwrap_or(0));
            i += k + 1;
        }
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Length of `<\w+\s*/>` at the start of `s`.
fn self_closing(s: &[u8]) -> Option<usize> {
    let rest = s.strip_prefix(b"<")?;
    let word = rest.iter().take_while(|&&b| is_word(b)).count();
    if word == 0 {
        return None;
    }
    let after = rest.get(word..)?;
    let ws = after.iter().take_while(|&&b| super::decode::is_perl_space(b)).count();
    after.get(ws..)?.starts_with(b"/>").then_some(1 + word + ws + 2)
}

fn is_html_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0c)
}

/// White space HTML text folds (Perl's `\s` on bytes).
fn is_fold_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0c | 0x0b)
}

/// Appends `src` with each run of white space made one space; a leading run is
/// dropped with `skip_lead`. Text between runs that are a lone space is copied whole.
fn fold_text(src: &[u8], skip_lead: bool, out: &mut Vec<u8>) {
    out.reserve(src.len());
    let lead = src.iter().take_while(|&&b| is_fold_space(b)).count();
    if lead > 0 && !skip_lead {
        out.push(b' ');
    }
    let mut copied = lead;
    let mut i = lead;
    while let Some(&b) = src.get(i) {
        if !is_fold_space(b) || (b == b' ' && !src.get(i + 1).copied().is_some_and(is_fold_space)) {
            i += 1;
            continue;
        }
        out.extend_from_slice(src.get(copied..i).unwrap_or(&[]));
        out.push(b' ');
        i += src.get(i..).unwrap_or(&[]).iter().take_while(|&&b| is_fold_space(b)).count();
        copied = i;
    }
    out.extend_from_slice(src.get(copied..).unwrap_or(&[]));
}

/// Finds `needle` case-insensitively (needle lowercase ASCII).
fn find_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let mut from = 0;
    while let Some(k) = hay.get(from..).and_then(|h| memchr::memchr2(first, first.to_ascii_uppercase(), h)) {
        let at = from + k;
        if hay.get(at..at + needle.len()).is_some_and(|w| w.eq_ignore_ascii_case(needle)) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Lowercase copy of a short tag name, or `None` if it is too long to be one we know.
fn tag_key(name: &[u8]) -> Option<([u8; 12], usize)> {
    if name.len() > 12 {
        return None;
    }
    let mut k = [0u8; 12];
    for (slot, b) in k.iter_mut().zip(name) {
        *slot = b.to_ascii_lowercase();
    }
    Some((k, name.len()))
}

/// The block-element break SpamAssassin inserts for a tag, start or end.
fn tag_break(tag: &[u8]) -> Option<&'static [u8]> {
    Some(match tag {
        b"br" | b"div" => b"\n",
        b"li" | b"th" | b"td" | b"dt" | b"dd" | b"embed" | b"h1" | b"h2" | b"h3" | b"h4" | b"h5" | b"h6" => b" ",
        b"p" | b"hr" | b"blockquote" | b"pre" | b"listing" | b"plaintext" | b"xmp" | b"title" => b"\n\n",
        _ => return None,
    })
}

fn literal_kind(tag: &[u8]) -> Option<Literal> {
    Some(match tag {
        b"title" | b"textarea" => Literal::Decoded,
        b"script" | b"style" | b"xmp" | b"iframe" => Literal::Raw,
        b"plaintext" => Literal::Rest,
        _ => return None,
    })
}

impl Renderer<'_, '_> {
    fn run(&mut self, doc: &[u8]) {
        let mut i = 0;
        let mut text_from = 0;
        while i < doc.len() {
            let Some(k) = doc.get(i..).and_then(|d| memchr::memchr(b'<', d)) else { break };
            let lt = i + k;
            let next = doc.get(lt + 1).copied();
            match next {
                Some(c) if c.is_ascii_alphabetic() || c == b'_' || c == b':' => {
                    self.text(doc.get(text_from..lt).unwrap_or(&[]), true);
                    let Some((end, name)) = self.parse_start_tag(doc, lt) else {
                        // HTML::Parser reports an unterminated tag as a comment.
                        self.comment(doc.get(lt..).unwrap_or(&[]));
                        return;
                    };
                    let tag = doc.get(name.0..name.1).unwrap_or(&[]);
                    let acts = self.sink.record.as_mut().is_some_and(|r| r.tag(tag, true));
                    let literal = tag_key(tag).and_then(|(k, n)| {
                        let key = k.get(..n).unwrap_or(&[]);
                        self.start_tag(doc, key);
                        if acts {
                            self.start_tests(doc, key);
                        }
                        literal_kind(key).map(|l| (l, k, n))
                    });
                    i = end;
                    text_from = end;
                    if let Some((kind, k, n)) = literal {
                        let key = k.get(..n).unwrap_or(&[]);
                        i = self.literal(doc, end, key, kind);
                        text_from = i;
                    }
                }
                Some(b'/') if doc.get(lt + 2).is_some_and(|&c| c.is_ascii_alphabetic() || c == b'_' || c == b':') => {
                    self.text(doc.get(text_from..lt).unwrap_or(&[]), true);
                    let name_len =
                        doc.get(lt + 2..).unwrap_or(&[]).iter().take_while(|&&b| !is_html_space(b) && b != b'>').count();
                    let Some(gt) = doc.get(lt + 2 + name_len..).and_then(|d| memchr::memchr(b'>', d)) else {
                        self.comment(doc.get(lt..).unwrap_or(&[]));
                        return;
                    };
                    let name = doc.get(lt + 2..lt + 2 + name_len).unwrap_or(&[]);
                    if let Some(r) = self.sink.record.as_mut() {
                        r.tag(name, false);
                    }
                    if let Some((k, n)) = tag_key(name) {
                        self.end_tag(k.get(..n).unwrap_or(&[]));
                    }
                    i = lt + 2 + name_len + gt + 1;
                    text_from = i;
                }
                Some(b'!') => {
                    self.text(doc.get(text_from..lt).unwrap_or(&[]), true);
                    let Some(end) = self.markup_decl(doc, lt) else { return };
                    i = end;
                    text_from = end;
                }
                Some(b'/' | b'?') => {
                    self.text(doc.get(text_from..lt).unwrap_or(&[]), true);
                    let Some(gt) = doc.get(lt..).and_then(|d| memchr::memchr(b'>', d)) else { return };
                    if next == Some(b'/') {
                        // HTML::Parser: `</x…>` is an end tag whatever `x` is; `</ …>` a comment.
                        let markup = doc.get(lt..lt + gt + 1).unwrap_or(&[]);
                        match markup.get(2) {
                            Some(&c) if !is_html_space(c) && c != b'>' => {
                                let n = markup.get(2..).unwrap_or(&[]).iter().take_while(|&&b| !is_html_space(b) && b != b'>').count();
                                self.end_event(markup.get(2..2 + n).unwrap_or(&[]));
                            }
                            _ => self.comment(markup),
                        }
                    }
                    i = lt + gt + 1;
                    text_from = i;
                }
                _ => {
                    // HTML::Parser ends a text event before a `<` that starts no markup.
                    self.text(doc.get(text_from..lt).unwrap_or(&[]), true);
                    text_from = lt;
                    i = lt + 1;
                }
            }
        }
        self.text(doc.get(text_from..).unwrap_or(&[]), true);
    }

    /// Comments, declarations and marked sections; returns where parsing resumes.
    fn markup_decl(&mut self, doc: &[u8], lt: usize) -> Option<usize> {
        let rest = doc.get(lt..)?;
        if rest.starts_with(b"<!--") {
            // Up to `-->`, or, when there is none, to the first `>`.
            // The search for `-->` is remembered, so many unclosed comments cost one scan.
            let from = lt + 4;
            let found = match self.comment_end {
                Some((at, end)) if from >= at && end.is_none_or(|e| from <= e) => end,
                _ => {
                    let end = doc.get(from..).and_then(|b| memchr::memmem::find(b, b"-->")).map(|k| from + k);
                    self.comment_end = Some((from, end));
                    end
                }
            };
            let end = match found {
                Some(end) => Some(end + 3),
                None => doc.get(from..).and_then(|b| memchr::memchr(b'>', b)).map(|gt| from + gt + 1),
            };
            self.comment(doc.get(lt..end.unwrap_or(doc.len())).unwrap_or(&[]));
            return end;
        }
        if rest.starts_with(b"<![") {
            let kw = rest.get(3..)?.iter().take_while(|b| b.is_ascii_alphabetic()).count();
            let ws = rest.get(3 + kw..)?.iter().take_while(|&&b| is_html_space(b)).count();
            if kw > 0 && rest.get(3 + kw + ws) == Some(&b'[') {
                let start = lt + 3 + kw + ws + 1;
                let end = memchr::memmem::find(doc.get(start..)?, b"]]>")?;
                let keyword = rest.get(3..3 + kw)?;
                if !keyword.eq_ignore_ascii_case(b"ignore") {
                    self.text(doc.get(start..start + end)?, false);
                }
                return Some(start + end + 3);
            }
        }
        let Some(gt) = memchr::memchr(b'>', rest) else {
            self.comment(rest);
            return None;
        };
        // `<!doctype …>` and `<!entity …>` are declarations; anything else a comment.
        let keyword = |k: &[u8]| {
            rest.get(2..2 + k.len()).is_some_and(|w| w.eq_ignore_ascii_case(k))
                && rest.get(2 + k.len()).is_some_and(|&b| is_html_space(b) || b == b'>')
        };
        let declaration = |k: &[u8]| keyword(k) && valid_declaration(rest.get(2 + k.len()..gt).unwrap_or(&[]));
        if declaration(b"doctype") {
            if let Some(r) = self.sink.record.as_mut() {
                r.doctype();
            }
        } else if !declaration(b"entity") {
            self.comment(rest.get(..=gt).unwrap_or(&[]));
        }
        Some(lt + gt + 1)
    }

    fn comment(&mut self, text: &[u8]) {
        if let Some(r) = self.sink.record.as_mut() {
            r.comment(text);
        }
    }

    /// SpamAssassin's `html_tests` on the current start tag.
    fn start_tests(&mut self, doc: &[u8], tag: &[u8]) {
        if !matches!(tag, b"font" | b"img" | b"form" | b"object" | b"embed" | b"a" | b"title") {
            return;
        }
        let attrs = TagAttrs {
            face: self.attr(doc, b"face"),
            width: self.attr(doc, b"width"),
            height: self.attr(doc, b"height"),
            action: self.attr(doc, b"action"),
        };
        let HtmlSink { record, ent, .. } = &mut *self.sink;
        if let Some(r) = record.as_mut() {
            r.start_tests(tag, &attrs, ent);
        }
    }

    fn end_event(&mut self, tag: &[u8]) {
        if let Some(r) = self.sink.record.as_mut() {
            r.tag(tag, false);
        }
    }

    /// Parses a start tag at `lt`: its attributes into `self.attrs`; returns the
    /// position after `>` and the name's range. `None` when it never ends.
    fn parse_start_tag(&mut self, doc: &[u8], lt: usize) -> Option<(usize, (usize, usize))> {
        let name_start = lt + 1;
        let mut i = name_start;
        while doc.get(i).is_some_and(|&b| !is_html_space(b) && b != b'>') {
            i += 1;
        }
        let name = (name_start, i);
        self.attr_count = 0;
        loop {
            while doc.get(i).copied().is_some_and(is_html_space) {
                i += 1;
            }
            match doc.get(i) {
                None => return None,
                Some(b'>') => return Some((i + 1, name)),
                Some(_) => {}
            }
            let an_start = i;
            i += 1;
            while doc.get(i).is_some_and(|&b| !is_html_space(b) && b != b'=' && b != b'>') {
                i += 1;
            }
            let an = (an_start, i);
            let mut j = i;
            while doc.get(j).copied().is_some_and(is_html_space) {
                j += 1;
            }
            let value = if doc.get(j) == Some(&b'=') {
                j += 1;
                while doc.get(j).copied().is_some_and(is_html_space) {
                    j += 1;
                }
                match doc.get(j) {
                    Some(&q @ (b'"' | b'\'')) => {
                        let close = memchr::memchr(q, doc.get(j + 1..)?)?;
                        i = j + 1 + close + 1;
                        (j + 1, j + 1 + close)
                    }
                    _ => {
                        let v_start = j;
                        while doc.get(j).is_some_and(|&b| !is_html_space(b) && b != b'>') {
                            j += 1;
                        }
                        i = j;
                        (v_start, j)
                    }
                }
            } else {
                an
            };
            if self.attr_count < MAX_ATTRS {
                if let Some(slot) = self.attrs.get_mut(self.attr_count) {
                    *slot = Attr { name: an, value };
                }
                self.attr_count += 1;
            }
        }
    }

    /// The raw value of the first attribute called `name` on the current tag.
    fn attr<'d>(&self, doc: &'d [u8], name: &[u8]) -> Option<&'d [u8]> {
        find_attr(self.attrs.get(..self.attr_count).unwrap_or(&[]), doc, name)
    }

    /// Text content of a literal element, up to its end tag; returns where parsing resumes.
    fn literal(&mut self, doc: &[u8], from: usize, tag: &[u8], kind: Literal) -> usize {
        if kind == Literal::Rest {
            self.text(doc.get(from..).unwrap_or(&[]), false);
            return doc.len();
        }
        // A title without an end tag is common in junk; remember that there is none.
        if tag == b"title" && self.no_title_end.is_some_and(|at| from >= at) {
            return self.unclosed_title(doc, from, tag);
        }
        let mut search = from;
        while let Some(k) = doc.get(search..).and_then(|d| memchr::memmem::find(d, b"</")) {
            let at = search + k;
            let name_at = at + 2;
            let matches_name = doc.get(name_at..name_at + tag.len()).is_some_and(|n| n.eq_ignore_ascii_case(tag));
            if matches_name {
                let mut j = name_at + tag.len();
                while doc.get(j).copied().is_some_and(is_html_space) {
                    j += 1;
                }
                if doc.get(j) == Some(&b'>') {
                    self.text(doc.get(from..at).unwrap_or(&[]), kind == Literal::Decoded);
                    self.end_event(tag);
                    self.end_tag(tag);
                    return j + 1;
                }
            }
            search = at + 2;
        }
        if tag == b"title" {
            self.no_title_end = Some(from);
            return self.unclosed_title(doc, from, tag);
        }
        // Script and style stay open (SpamAssassin closes them after the end);
        // textarea, xmp and iframe run to the end as text.
        self.text(doc.get(from..).unwrap_or(&[]), kind == Literal::Decoded);
        doc.len()
    }

    /// An unclosed title ends at the first tag; the rest is parsed again (what
    /// HTML::Parser does at the end of input).
    fn unclosed_title(&mut self, doc: &[u8], from: usize, tag: &[u8]) -> usize {
        let stop = doc.get(from..).and_then(|d| memchr::memchr(b'<', d)).map_or(doc.len(), |k| from + k);
        self.text(doc.get(from..stop).unwrap_or(&[]), true);
        self.end_event(tag);
        self.end_tag(tag);
        stop
    }

    fn start_tag(&mut self, doc: &[u8], tag: &[u8]) {
        if let Some(st) = StyleTag::from_name(tag) {
            let attrs = self.attrs.get(..self.attr_count.min(MAX_ATTRS)).unwrap_or(&[]);
            self.styles.open(st, |n| find_attr(attrs, doc, n));
        }
        match tag {
            b"script" => self.in_script += 1,
            b"style" => self.in_style += 1,
            _ => {}
        }
        if let Some(ws) = tag_break(tag) {
            self.block_break(ws);
        }
        self.tag_uris(doc, tag);
    }

    fn end_tag(&mut self, tag: &[u8]) {
        if let Some(st) = StyleTag::from_name(tag) {
            self.styles.close(st);
        }
        match tag {
            b"script" => self.in_script = (self.in_script - 1).max(0),
            b"style" => self.in_style = (self.in_style - 1).max(0),
            _ => {}
        }
        if let Some(ws) = tag_break(tag) {
            self.block_break(ws);
        }
    }

    /// A block element's break: the space ending the text before it is dropped.
    fn block_break(&mut self, ws: &[u8]) {
        if let Last::Text(start, false) = self.last {
            if self.sink.text.len() > start && self.sink.text.last() == Some(&b' ') {
                self.sink.text.pop();
            }
        }
        self.sink.text.extend_from_slice(ws);
        self.last = Last::Space;
    }

    /// A run of document text: entities decoded, white space folded to one space.
    fn text(&mut self, raw: &[u8], decode: bool) {
        if raw.is_empty() || self.in_script > 0 || self.in_style > 0 {
            return;
        }
        let HtmlSink { text: out, ent, wide, record, .. } = &mut *self.sink;
        let src: &[u8] = if decode && memchr::memchr(b'&', raw).is_some() {
            ent.clear();
            if decode_entities(raw, ent, true) {
                *wide = true;
            }
            ent.as_slice()
        } else {
            raw
        };
        if let Some(r) = record.as_mut() {
            let previous: Option<&[u8]> = match self.last {
                Last::Nothing => None,
                Last::Text(start, _) => Some(out.get(start..).unwrap_or(&[])),
                Last::Space => Some(b" "),
            };
            let styles = &self.styles;
            r.text(src, previous, || styles.hiding());
        }
        // Invisible text (by font, colour or CSS) keeps its edge spaces.
        let mut k = 0;
        let mut visible_chars = false;
        while let Some(&b) = src.get(k) {
            if matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0c | 0x0b) {
                k += 1;
            } else if b == 0xc2 && src.get(k + 1) == Some(&0xa0) {
                k += 2;
            } else {
                visible_chars = true;
                break;
            }
        }
        let invisible = visible_chars && self.styles.invisible();
        let start = out.len();
        let skip_lead = self.last == Last::Space && !invisible;
        fold_text(src, skip_lead, out);
        self.last = Last::Text(start, invisible);
    }

    /// URIs named by a start tag's attributes, as SpamAssassin's `html_uri`.
    fn tag_uris(&mut self, doc: &[u8], tag: &[u8]) {
        match tag {
            b"body" | b"table" | b"tr" | b"td" => {
                if let Some(v) = self.attr(doc, b"background") {
                    self.push_uri(v, false);
                }
            }
            b"a" | b"area" | b"link" => {
                let href = self.attr(doc, b"href");
                if let Some(v) = href {
                    self.push_uri(v, true);
                }
                if tag == b"a" {
                    // SpamAssassin also keeps each anchor's href as written
                    // (unresolved), and "" for an anchor without one.
                    let (a, b) = match href {
                        Some(v) => self.decoded_attr(v, true),
                        None => (0, 0),
                    };
                    let HtmlSink { attr, uris, uri_room, uri_overflow, .. } = &mut *self.sink;
                    let value = if href.is_some() { attr.get(a..b).unwrap_or(&[]) } else { &[][..] };
                    record_uri(uris, uri_room, uri_overflow, value);
                }
                if let Some(v) = self.attr(doc, b"data-saferedirecturl") {
                    self.push_uri(v, false);
                }
            }
            b"img" | b"frame" | b"iframe" | b"embed" | b"script" | b"bgsound" => {
                if let Some(v) = self.attr(doc, b"src") {
                    self.push_uri(v, false);
                    if tag == b"iframe" {
                        let (a, b) = self.decoded_attr(v, false);
                        if let (true, Some(r)) = (a < b, self.sink.record.as_mut()) {
                            r.iframe_src();
                        }
                    }
                }
            }
            b"form" => {
                if let Some(v) = self.attr(doc, b"action") {
                    self.push_uri(v, false);
                }
            }
            b"base" => {
                if let Some(v) = self.attr(doc, b"href") {
                    if !v.is_empty() && v != b"0" {
                        self.set_base(v);
                    }
                }
            }
            b"meta" => {
                let refresh = self.attr(doc, b"http-equiv").is_some_and(|v| find_ci(v, b"refresh").is_some());
                if let (true, Some(content)) = (refresh, self.attr(doc, b"content")) {
                    self.meta_refresh(content);
                }
            }
            _ => {}
        }
    }

    /// Decodes an attribute value into `attr` and trims it as `canon_uri` does.
    fn decoded_attr(&mut self, raw: &[u8], strip_bom: bool) -> (usize, usize) {
        let buf = &mut *self.sink.attr;
        buf.clear();
        decode_entities(raw, buf, false);
        if strip_bom {
            // Remove every U+FEFF in one pass.
            let bom = "\u{feff}".as_bytes();
            let mut w = 0;
            let mut r = 0;
            while r < buf.len() {
                if buf.get(r..r + 3) == Some(bom) {
                    r += 3;
                    continue;
                }
                let b = buf.get(r).copied().unwrap_or(0);
                if let Some(slot) = buf.get_mut(w) {
                    *slot = b;
                }
                w += 1;
                r += 1;
            }
            buf.truncate(w);
        }
        let mut a = 0;
        let mut b = buf.len();
        loop {
            let rest = buf.get(a..b).unwrap_or(&[]);
            let n = match rest.first() {
                Some(&c) if super::decode::is_perl_space(c) => 1,
                Some(_) => unicode_space_len(rest),
                None => 0,
            };
            if n == 0 {
                break;
            }
            a += n;
        }
        while b > a {
            let c = buf.get(b - 1).copied().unwrap_or(0);
            if super::decode::is_perl_space(c) {
                b -= 1;
            } else if b >= a + 2 && buf.get(b - 2..b) == Some(&b"\xc2\xa0"[..]) {
                b -= 2;
            } else {
                break;
            }
        }
        if b - a > MAX_URI {
            if let Some(r) = self.sink.record.as_mut() {
                r.uri(super::stats::char_count(buf.get(a..b).unwrap_or(&[])) as usize);
            }
            b = a + MAX_URI;
        }
        (a, b)
    }

    fn push_uri(&mut self, raw: &[u8], strip_bom: bool) {
        let (a, b) = self.decoded_attr(raw, strip_bom);
        self.push_decoded(a, b);
    }

    /// Resolves `attr[a..b]` against the base and records it.
    fn push_decoded(&mut self, a: usize, b: usize) {
        if a >= b {
            return;
        }
        let HtmlSink { attr, base, resolved, path, uris, uri_room, uri_overflow, .. } = &mut *self.sink;
        let uri = attr.get(a..b).unwrap_or(&[]);
        let opaque = [&b"data:"[..], b"mailto:", b"file:", b"cid:", b"tel:"]
            .iter()
            .any(|p| uri.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p)));
        resolved.clear();
        if opaque {
            resolved.extend_from_slice(uri);
        } else {
            target_uri(base, uri, resolved, path);
        }
        if resolved.is_empty() {
            return;
        }
        record_uri(uris, uri_room, uri_overflow, resolved);
    }

    fn set_base(&mut self, raw: &[u8]) {
        let (a, b) = self.decoded_attr(raw, false);
        self.push_decoded(a, b);
        let uri = self.sink.attr.get(a..b).unwrap_or(&[]);
        let scheme_len = uri.iter().take_while(|b| b.is_ascii_alphabetic()).count();
        let lower: [u8; 6] = core::array::from_fn(|i| uri.get(i).map_or(0, u8::to_ascii_lowercase));
        let known = matches!(&lower[..scheme_len.min(6)], b"http" | b"https" | b"ftp") && uri.get(scheme_len) == Some(&b':');
        if !known {
            return;
        }
        let base = &mut *self.sink.base;
        base.clear();
        base.extend_from_slice(strip_file_name(uri));
        if base.last() != Some(&b'/') {
            base.push(b'/');
        }
    }

    fn meta_refresh(&mut self, raw: &[u8]) {
        let (a, b) = self.decoded_attr(raw, false);
        let content = self.sink.attr.get(a..b).unwrap_or(&[]);
        // `\burl\s*=` must occur; the value follows the last such occurrence.
        let mut after = None;
        let mut from = 0;
        while let Some(k) = content.get(from..).and_then(|c| find_ci(c, b"url")) {
            let at = from + k;
            let word_start = at == 0 || !content.get(at - 1).copied().is_some_and(is_word);
            let mut j = at + 3;
            while content.get(j).copied().is_some_and(super::decode::is_perl_space) {
                j += 1;
            }
            if word_start && content.get(j) == Some(&b'=') {
                j += 1;
                while content.get(j).copied().is_some_and(super::decode::is_perl_space) {
                    j += 1;
                }
                after = Some(j);
            }
            from = at + 1;
        }
        let Some(start) = after else { return };
        let rest = content.get(start..).unwrap_or(&[]);
        let mut end = memchr::memchr(b';', rest).unwrap_or(rest.len());
        if end < rest.len() {
            while end > 0 && rest.get(end - 1).copied().is_some_and(super::decode::is_perl_space) {
                end -= 1;
            }
        }
        self.push_decoded(a + start, a + start + end);
    }
}

/// Whether the rest of a `<!doctype` or `<!entity` declaration parses as one for
/// HTML::Parser: quoted strings closed, `--` comments closed, no token starting with `-`.
fn valid_declaration(body: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = body.get(i) {
        match b {
            b if is_html_space(b) => i += 1,
            b'"' | b'\'' => match memchr::memchr(b, body.get(i + 1..).unwrap_or(&[])) {
                Some(k) => i += k + 2,
                None => return false,
            },
            b'-' => {
                if body.get(i + 1) != Some(&b'-') {
                    return false;
                }
                match memchr::memmem::find(body.get(i + 2..).unwrap_or(&[]), b"--") {
                    Some(k) => i += k + 4,
                    None => return false,
                }
            }
            _ => {
                while body.get(i).is_some_and(|&c| !is_html_space(c) && c != b'"' && c != b'\'') {
                    i += 1;
                }
            }
        }
    }
    true
}

/// Appends a URI record (length, then bytes) if there is room.
fn record_uri(uris: &mut Vec<u8>, room: &mut usize, overflow: &mut bool, uri: &[u8]) {
    if *room == 0 {
        *overflow = true;
        return;
    }
    *room -= 1;
    let len = u32::try_from(uri.len()).unwrap_or(u32::MAX);
    uris.extend_from_slice(&len.to_le_bytes());
    uris.extend_from_slice(uri);
}

/// The raw value of the first attribute called `name`.
fn find_attr<'d>(attrs: &[Attr], doc: &'d [u8], name: &[u8]) -> Option<&'d [u8]> {
    attrs.iter().find_map(|a| {
        let n = doc.get(a.name.0..a.name.1)?;
        n.eq_ignore_ascii_case(name).then(|| doc.get(a.value.0..a.value.1)).flatten()
    })
}

/// `s@^([a-z]+:/{0,2}[^/]+/.*?)[^/\.]+\.[^/\.]{2,4}$@$1@i` on a base href.
fn strip_file_name(uri: &[u8]) -> &[u8] {
    let scheme = uri.iter().take_while(|b| b.is_ascii_alphabetic()).count();
    if scheme == 0 || uri.get(scheme) != Some(&b':') {
        return uri;
    }
    let mut i = scheme + 1;
    let slashes = uri.get(i..).unwrap_or(&[]).iter().take(2).take_while(|&&b| b == b'/').count();
    i += slashes;
    let host = uri.get(i..).unwrap_or(&[]).iter().take_while(|&&b| b != b'/').count();
    if host == 0 || uri.get(i + host) != Some(&b'/') {
        return uri;
    }
    let dir_min = i + host + 1;
    // The file name: the last segment, `[^/.]+\.[^/.]{2,4}` exactly.
    let last_slash = memchr::memrchr(b'/', uri).unwrap_or(0);
    let seg_start = (last_slash + 1).max(dir_min);
    if last_slash + 1 < dir_min {
        return uri;
    }
    let seg = uri.get(seg_start..).unwrap_or(&[]);
    let Some(dot) = memchr::memchr(b'.', seg) else { return uri };
    let ext = seg.get(dot + 1..).unwrap_or(&[]);
    if dot == 0 || !(2..=4).contains(&ext.len()) || ext.contains(&b'.') {
        return uri;
    }
    uri.get(..seg_start).unwrap_or(uri)
}

/// Parts of a URI reference: `^(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?`.
#[derive(Debug, Clone, Copy, Default)]
struct Parts<'u> {
    scheme: Option<&'u [u8]>,
    authority: Option<&'u [u8]>,
    path: &'u [u8],
    query: Option<&'u [u8]>,
    fragment: Option<&'u [u8]>,
}

fn parse_parts(u: &[u8]) -> Parts<'_> {
    let mut p = Parts::default();
    let mut i = 0;
    let s = u.iter().take_while(|&&b| !matches!(b, b':' | b'/' | b'?' | b'#')).count();
    if s > 0 && u.get(s) == Some(&b':') {
        p.scheme = u.get(..s);
        i = s + 1;
    }
    if u.get(i..i + 2) == Some(&b"//"[..]) {
        let a = u.get(i + 2..).unwrap_or(&[]).iter().take_while(|&&b| !matches!(b, b'/' | b'?' | b'#')).count();
        p.authority = u.get(i + 2..i + 2 + a);
        i += 2 + a;
    }
    let path = u.get(i..).unwrap_or(&[]).iter().take_while(|&&b| b != b'?' && b != b'#').count();
    p.path = u.get(i..i + path).unwrap_or(&[]);
    i += path;
    if u.get(i) == Some(&b'?') {
        let q = u.get(i + 1..).unwrap_or(&[]).iter().take_while(|&&b| b != b'#').count();
        p.query = u.get(i + 1..i + 1 + q);
        i += 1 + q;
    }
    if u.get(i) == Some(&b'#') {
        let rest = u.get(i + 1..).unwrap_or(&[]);
        let f = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        p.fragment = rest.get(..f);
    }
    p
}

/// Appends `input` with `.` and `..` segments removed (HTML.pm's `_remove_dot_segments`);
/// `input` is used as working space.
fn remove_dot_segments(input: &mut [u8], out: &mut Vec<u8>) {
    let base = out.len();
    let len = input.len();
    let mut c = if input.starts_with(b"./") {
        1
    } else if input.starts_with(b"../") {
        2
    } else {
        0
    };
    while c < len {
        let rest = input.get(c..).unwrap_or(&[]);
        if rest == b"0" {
            break;
        }
        if rest == b"/." {
            if let Some(x) = input.get_mut(c + 1) {
                *x = b'/';
            }
            c += 1;
        } else if rest.starts_with(b"/./") {
            c += 2;
        } else if rest == b"/.." || rest.starts_with(b"/../") {
            let at_end = rest.len() == 3;
            if at_end {
                if let Some(x) = input.get_mut(c + 2) {
                    *x = b'/';
                }
            }
            c += if at_end { 2 } else { 3 };
            let seg = out.get(base..).unwrap_or(&[]);
            let keep = memchr::memrchr(b'/', seg).unwrap_or(0);
            out.truncate(base + keep);
        } else {
            let slash = usize::from(rest.first() == Some(&b'/'));
            let seg = rest.get(slash..).unwrap_or(&[]).iter().take_while(|&&b| b != b'/').count();
            out.extend_from_slice(rest.get(..slash + seg).unwrap_or(&[]));
            c += slash + seg;
        }
    }
}

/// Appends the reference `r` resolved against `base` (HTML.pm's `target_uri`,
/// non-strict); `tmp` is scratch.
fn target_uri(base: &[u8], r: &[u8], out: &mut Vec<u8>, tmp: &mut Vec<u8>) {
    let rp = parse_parts(r);
    let bp = parse_parts(base);
    let same_scheme = matches!((rp.scheme, bp.scheme), (Some(x), Some(y)) if x == y);
    let r_scheme = if same_scheme { None } else { rp.scheme };
    tmp.clear();
    let (scheme, authority, query, clean_path);
    if r_scheme.is_some() || rp.authority.is_some() {
        scheme = if r_scheme.is_some() { r_scheme } else { bp.scheme };
        authority = rp.authority;
        query = rp.query;
        tmp.extend_from_slice(rp.path);
        clean_path = true;
    } else {
        scheme = bp.scheme;
        authority = bp.authority;
        if rp.path.is_empty() {
            tmp.extend_from_slice(bp.path);
            query = rp.query.or(bp.query);
            clean_path = false;
        } else {
            query = rp.query;
            if rp.path.first() != Some(&b'/') {
                if bp.authority.is_some() && (bp.path.is_empty() || bp.path == b"0") {
                    tmp.push(b'/');
                } else if let Some(k) = memchr::memrchr(b'/', bp.path) {
                    tmp.extend_from_slice(bp.path.get(..=k).unwrap_or(&[]));
                }
            }
            tmp.extend_from_slice(rp.path);
            clean_path = true;
        }
    }
    if let Some(s) = scheme.filter(|s| !s.is_empty() && *s != b"0") {
        out.extend_from_slice(s);
        out.push(b':');
    } else if let Some(a) = authority {
        let prefix = |p: &[u8]| {
            a.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p)) && {
                let digits = a.get(p.len()..).unwrap_or(&[]).iter().take_while(|b| b.is_ascii_digit()).count();
                a.get(p.len() + digits) == Some(&b'.')
            }
        };
        if prefix(b"www") {
            out.extend_from_slice(b"http:");
        } else if prefix(b"ftp") {
            out.extend_from_slice(b"ftp:");
        }
    }
    if let Some(a) = authority {
        out.extend_from_slice(b"//");
        out.extend_from_slice(a);
    }
    if clean_path {
        remove_dot_segments(tmp, out);
    } else {
        out.extend_from_slice(tmp);
    }
    if let Some(q) = query {
        out.push(b'?');
        out.extend_from_slice(q);
    }
    if let Some(f) = rp.fragment {
        out.push(b'#');
        out.extend_from_slice(f);
    }
}

/// Decodes one entity at the start of `s` (which starts with `&`) into `out`;
/// returns the bytes used, 0 if it is not an entity HTML::Parser decodes. In text
/// (`prefix`), a name may also start with an entity usable without `;` (`&copyright`
/// is `©right`); in attribute values it may not.
pub(crate) fn decode_entity(s: &[u8], out: &mut Vec<u8>, prefix: bool) -> usize {
    let Some(rest) = s.strip_prefix(b"&") else { return 0 };
    if let Some(num) = rest.strip_prefix(b"#") {
        let (hex, digits) = match num.first() {
            Some(b'x' | b'X') => (true, num.get(1..).unwrap_or(&[])),
            _ => (false, num),
        };
        let n = digits
            .iter()
            .take_while(|b| if hex { b.is_ascii_hexdigit() } else { b.is_ascii_digit() })
            .count();
        if n == 0 {
            return 0;
        }
        let mut value: u32 = 0;
        for &d in digits.get(..n).unwrap_or(&[]) {
            let v = (d as char).to_digit(16).unwrap_or(0);
            value = match value.checked_mul(if hex { 16 } else { 10 }).and_then(|x| x.checked_add(v)) {
                Some(x) if x <= 0x10ffff => x,
                _ => return 0,
            };
        }
        if value == 0 {
            return 0;
        }
        push_char(out, value);
        let mut used = 1 + 1 + usize::from(hex) + n;
        if s.get(used) == Some(&b';') {
            used += 1;
        }
        return used;
    }
    let n = rest.iter().take_while(|b| b.is_ascii_alphanumeric()).count();
    if n == 0 || !rest.first().is_some_and(u8::is_ascii_alphabetic) {
        return 0;
    }
    let name = rest.get(..n).unwrap_or(&[]);
    let semi = rest.get(n) == Some(&b';');
    if let Ok(k) = ENTITIES.binary_search_by(|e| e.0.cmp(name)) {
        if let Some(&(_, cp, needs_semi)) = ENTITIES.get(k) {
            if semi || !needs_semi {
                push_char(out, cp);
                return 1 + n + usize::from(semi);
            }
        }
    }
    if !prefix {
        return 0;
    }
    // The longest prefix that is an entity usable without `;`.
    for len in (2..n.min(8)).rev() {
        let prefix = name.get(..len).unwrap_or(&[]);
        if let Ok(k) = ENTITIES.binary_search_by(|e| e.0.cmp(prefix)) {
            if let Some(&(_, cp, false)) = ENTITIES.get(k) {
                push_char(out, cp);
                return 1 + len;
            }
        }
    }
    0
}

/// Appends `s` with its entities decoded (`prefix` as for [`decode_entity`]);
/// true if one was above U+00FF.
pub(crate) fn decode_entities(s: &[u8], out: &mut Vec<u8>, prefix: bool) -> bool {
    let mut wide = false;
    let mut rest = s;
    while let Some(k) = memchr::memchr(b'&', rest) {
        out.extend_from_slice(rest.get(..k).unwrap_or(&[]));
        let at = rest.get(k..).unwrap_or(&[]);
        let before = out.len();
        let used = decode_entity(at, out, prefix);
        if used == 0 {
            out.push(b'&');
            rest = at.get(1..).unwrap_or(&[]);
        } else {
            // UTF-8 of U+0100 and above starts with 0xC4 or more.
            wide |= out.get(before).is_some_and(|&b| b >= 0xc4);
            rest = at.get(used..).unwrap_or(&[]);
        }
    }
    out.extend_from_slice(rest);
    wide
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ents(s: &[u8], prefix: bool) -> Vec<u8> {
        let mut out = Vec::new();
        decode_entities(s, &mut out, prefix);
        out
    }

    /// Expected values are HTML::Parser 3.81's (text and attribute values).
    #[test]
    fn entity_table() {
        let cases: &[(&[u8], &[u8], &[u8])] = &[
            (b"a &amp b &ampx c", b"a & b &x c", b"a & b &ampx c"),
            (b"&lt;&gt; &#65 &#x42; &#0; &#999999999;", b"<> A B &#0; &#999999999;", b"<> A B &#0; &#999999999;"),
            (b"&eacute &Eacute; &hellip &hellip;", b"\xc3\xa9 \xc3\x89 &hellip \xe2\x80\xa6", b"\xc3\xa9 \xc3\x89 &hellip \xe2\x80\xa6"),
            (b"&copyright &notit; &sup2 &AMP;", b"\xc2\xa9right \xc2\xacit; \xc2\xb2 &AMP;", b"&copyright &notit; \xc2\xb2 &AMP;"),
            (b"&sectionid=1&copy=3", b"\xc2\xa7ionid=1\xc2\xa9=3", b"&sectionid=1\xc2\xa9=3"),
            (b"&#55357; &#x110000; &#12a &;", b"\xef\xbf\xbd &#x110000; \x0ca &;", b"\xef\xbf\xbd &#x110000; \x0ca &;"),
        ];
        for (src, text, attr) in cases {
            assert_eq!(ents(src, true), *text, "text {:?}", core::str::from_utf8(src));
            assert_eq!(ents(src, false), *attr, "attr {:?}", core::str::from_utf8(src));
        }
    }

    fn target(base: &[u8], r: &[u8]) -> Vec<u8> {
        let (mut out, mut tmp) = (Vec::new(), Vec::new());
        target_uri(base, r, &mut out, &mut tmp);
        out
    }

    #[test]
    fn target_uri_table() {
        let cases: &[(&[u8], &[u8], &[u8])] = &[
            (b"", b"http://x.com/a", b"http://x.com/a"),
            (b"", b"foo.html", b"foo.html"),
            (b"", b"//www.x.com/p", b"http://www.x.com/p"),
            (b"", b"//cdn.x.com/p", b"//cdn.x.com/p"),
            (b"http://b.org/dir/", b"rel/link.html", b"http://b.org/dir/rel/link.html"),
            (b"http://b.org/dir/", b"../up", b"http://b.org/up"),
            (b"http://b.org/dir/", b"/abs", b"http://b.org/abs"),
            (b"http://b.org/dir/", b"?q", b"http://b.org/dir/?q"),
            (b"http://b.org/dir/", b"#f", b"http://b.org/dir/#f"),
            (b"http://b.org/dir/", b"http:other", b"http://b.org/dir/other"),
            (b"http://b.org", b"x", b"http://b.org/x"),
            (b"", b"./a/./b/../c", b"/a/c"),
        ];
        for (base, r, want) in cases {
            assert_eq!(target(base, r), *want, "{:?} + {:?}", core::str::from_utf8(base), core::str::from_utf8(r));
        }
    }

    #[test]
    fn base_file_name() {
        assert_eq!(strip_file_name(b"http://b.org/dir/page.html"), b"http://b.org/dir/");
        assert_eq!(strip_file_name(b"http://b.org/dir/"), b"http://b.org/dir/");
        assert_eq!(strip_file_name(b"http://b.org"), b"http://b.org");
        assert_eq!(strip_file_name(b"http://b.org/x.tar.gz"), b"http://b.org/x.tar.gz");
    }

    fn render_text(html: &[u8]) -> Vec<u8> {
        let (mut text, mut uris, mut pre, mut attr, mut base, mut ent, mut resolved, mut path) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut sink = HtmlSink {
            text: &mut text,
            uris: &mut uris,
            uri_room: 10,
            uri_overflow: false,
            wide: false,
            pre: &mut pre,
            attr: &mut attr,
            base: &mut base,
            ent: &mut ent,
            resolved: &mut resolved,
            path: &mut path,
            record: None,
        };
        render(html, &mut sink);
        text
    }

    /// Tag and text handling as HTML::Parser does it (events checked with 3.81).
    #[test]
    fn tokenizer_table() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"<br/>x<br />y<p/>z", b"\nx\ny\n\nz"),
            (b"a < b <3 c<1d", b"a < b <3 c<1d"),
            (b"<!-- c1 -- c2 -->a<!--x>b-->c", b"ac"),
            (b"a<!--#rotate>b<!-- x -- >c", b"abc"),
            (b"<!DOCTYPE html>d<?php x ?>e<![CDATA[<b>z</b>]]>f", b"de<b>z</b>f"),
            (b"<title>a&amp;b<br></title>x", b"\n\na&b<br>\n\nx"),
            (b"<textarea>a<b>c</textarea>d", b"a<b>cd"),
            (b"<xmp><b>q</b></xmp>f", b"\n\n<b>q</b>\n\nf"),
            (b"<script>x</scriptfoo>y</script>z", b"z"),
            (b"<title>unclosed<b>x", b"\n\nunclosed\n\nx"),
            (b"<a href=\"x>y\">t</a>", b"t"),
            (b"x<b", b"x"),
            (b"<![if !supportLists]>b<![endif]>c", b"bc"),
            (b"&nbsp;&nbsp;a", b" a"),
            (b"<a\nhref=\"x\"\n>t</a\n>u<p\nclass=x>v", b"tu\n\nv"),
            (b"<SCRIPT>a</Script >b<STYLE\n>c</style>d", b"bd"),
        ];
        for (html, want) in cases {
            assert_eq!(render_text(html), *want, "{:?}", core::str::from_utf8(html));
        }
    }

    #[test]
    fn fold_text_table() {
        // (text, skip_lead, folded)
        let cases: &[(&[u8], bool, &[u8])] = &[
            (b"", false, b""),
            (b" ", false, b" "),
            (b" ", true, b""),
            (b"\t\n ", false, b" "),
            (b"a b", false, b"a b"),
            (b"a b ", true, b"a b "),
            (b"  a  b\tc\r\nd \x0be\x0c", false, b" a b c d e "),
            (b"  a  b", true, b"a b"),
            (b"one two three four five", false, b"one two three four five"),
            (b"a \xc2\xa0 b", false, b"a \xc2\xa0 b"),
            (b"tail\n", false, b"tail "),
        ];
        for (text, skip_lead, want) in cases {
            let mut out = b"x".to_vec();
            fold_text(text, *skip_lead, &mut out);
            assert_eq!(out.get(1..), Some(*want), "{:?}", core::str::from_utf8(text));
        }
    }
}
