//! Facts about a message that SpamAssassin's eval tests read and that only the
//! parse sees: the results of `HTML.pm` for each HTML part (tag counts, ratios,
//! comments, anchor and title texts, image areas, font flags) and the parse flags
//! of `Message.pm` (`missing_head_body_separator`, `mime_epilogue_exists`, …).
//!
//! Everything lives in fixed-capacity tables reserved once in [`super::MessageBuffers`]
//! and refilled for each message: no allocation once warm. What does not fit is
//! dropped and flagged in [`HtmlOverflow`].

use alloc::vec::Vec;

/// HTML parts whose statistics are kept; later ones are not recorded.
pub(crate) const MAX_HTML_PARTS: usize = 16;
/// Distinct tag names counted per HTML part.
pub(crate) const TAG_SLOTS: usize = 128;
/// Bytes kept per text list (comments, anchors, titles) over all HTML parts.
pub(crate) const MAX_LIST_BYTES: usize = 1 << 20;

/// SpamAssassin's `MAX_URI_LENGTH`, in characters.
const MAX_URI_CHARS: usize = 8192;

/// The parse flags of SpamAssassin's `Message` (`check_msg_parse_flags`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseFlags {
    /// The top-level header block did not end with a blank line.
    pub missing_head_body_separator: bool,
    /// A top-level header name or value was cut at SpamAssassin's maximum length.
    pub truncated_header: bool,
    /// A MIME part's headers were followed by text rather than a blank line.
    pub missing_mime_head_body_separator: bool,
    /// A MIME boundary line was not followed by a header line.
    pub missing_mime_headers: bool,
    /// Text other than white space and dots follows a closing MIME boundary.
    pub mime_epilogue_exists: bool,
}

/// Capacities the HTML statistics ran out of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HtmlOverflow {
    /// More HTML parts than recorded.
    pub parts: bool,
    /// More distinct tag names in a part than its table holds.
    pub tags: bool,
    /// A comment, anchor or title text was cut.
    pub texts: bool,
}

/// What `HTML.pm` and `Node::rendered` report for one HTML part (`html_all`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HtmlStats {
    /// Characters of the HTML source (`length`).
    pub length: u64,
    /// Characters of the rendered text (`html_length`).
    pub html_length: u64,
    /// Rendered characters that are not white space (`non_space_len`).
    pub non_space_len: u64,
    /// Guessed pixel area of the images with a width and height (`image_area`).
    pub image_area: f64,
    /// Smallest and largest font size set (`min_size`, `max_size`).
    pub min_size: i64,
    /// See `min_size`.
    pub max_size: i64,
    /// Start and end tags, plus `<!doctype>` (`tags`).
    pub tags: u32,
    /// Of those, HTML 4 elements (`elements`).
    pub elements: u32,
    /// Distinct tag names (`tags_seen`).
    pub tags_seen: u32,
    /// Distinct element names (`elements_seen`).
    pub elements_seen: u32,
    /// End tags without an open tag (`closed_extra`).
    pub closed_extra: u32,
    /// Text runs glued to the previous run inside a word (`obfuscation`).
    pub obfuscation: u32,
    /// Text in a colour too close to its background (`font_low_contrast`).
    pub font_low_contrast: bool,
    /// Text in a colour SpamAssassin cannot read (`font_invalid_color`).
    pub font_invalid_color: bool,
    /// A `<font face>` that is not a list of font names (`font_face_bad`).
    pub font_face_bad: bool,
    /// A form posting to `mailto:` (`form_action_mailto`).
    pub form_action_mailto: bool,
    /// An `<object>` or `<embed>` (`embeds`).
    pub embeds: bool,
    /// A URI longer than SpamAssassin keeps (`uri_truncated`).
    pub uri_truncated: bool,
    /// An `<iframe src>` naming something (`uri_detail` with type `iframe`).
    pub iframe_src: bool,
    /// Slots of this part's tag table in the shared table.
    pub(crate) tag_slots: (u32, u32),
    /// This part's records in the comment, anchor and title lists.
    pub(crate) comments: (u32, u32),
    pub(crate) anchors: (u32, u32),
    pub(crate) titles: (u32, u32),
}

impl HtmlStats {
    fn new(tag_slots: (u32, u32), lists: [u32; 3]) -> HtmlStats {
        let [c, a, t] = lists;
        HtmlStats {
            length: 0,
            html_length: 0,
            non_space_len: 0,
            image_area: 0.0,
            min_size: 3,
            max_size: 3,
            tags: 0,
            elements: 0,
            tags_seen: 0,
            elements_seen: 0,
            closed_extra: 0,
            obfuscation: 0,
            font_low_contrast: false,
            font_invalid_color: false,
            font_face_bad: false,
            form_action_mailto: false,
            embeds: false,
            uri_truncated: false,
            iframe_src: false,
            tag_slots,
            comments: (c, c),
            anchors: (a, a),
            titles: (t, t),
        }
    }

    /// `closed_extra / tags`, when there were tags.
    pub fn closed_extra_ratio(&self) -> Option<f64> {
        (self.tags > 0).then(|| f64::from(self.closed_extra) / f64::from(self.tags))
    }

    /// `(tags - elements) / tags`, when there were elements.
    pub fn bad_tag_ratio(&self) -> Option<f64> {
        (self.tags > 0 && self.elements > 0).then(|| f64::from(self.tags - self.elements.min(self.tags)) / f64::from(self.tags))
    }

    /// `(tags_seen - elements_seen) / tags_seen`, when elements were seen.
    pub fn non_element_ratio(&self) -> Option<f64> {
        (self.tags_seen > 0 && self.elements_seen > 0).then(|| {
            f64::from(self.tags_seen - self.elements_seen.min(self.tags_seen)) / f64::from(self.tags_seen)
        })
    }

    /// `obfuscation / tags`, when there was any obfuscation.
    pub fn obfuscation_ratio(&self) -> Option<f64> {
        (self.tags > 0 && self.obfuscation > 0).then(|| f64::from(self.obfuscation) / f64::from(self.tags))
    }
}

/// One slot of a tag-name table: a name hash (0 = free) and its open count.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TagSlot {
    hash: u64,
    count: i64,
}

/// The tag-name key used by the tables: FNV-1a over the lowercased name, never 0.
pub fn tag_hash(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h ^= u64::from(b.to_ascii_lowercase());
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.max(1)
}

/// The slot of `hash` in `table`, or the free slot where it goes; `None` when full.
fn probe(table: &[TagSlot], hash: u64) -> Option<usize> {
    let n = table.len();
    if n == 0 {
        return None;
    }
    let start = (hash % n as u64) as usize;
    (start..n).chain(0..start).find(|&i| table.get(i).is_some_and(|s| s.hash == hash || s.hash == 0))
}

/// The open count of tag `hash` in `table` (`inside{tag}`), if the tag was seen.
pub(crate) fn inside(table: &[TagSlot], hash: u64) -> Option<i64> {
    let slot = table.get(probe(table, hash)?)?;
    (slot.hash == hash).then_some(slot.count)
}

/// HTML statistics of a message, as the parser stores them.
pub(crate) struct HtmlTables {
    pub stats: Vec<HtmlStats>,
    pub tags: Vec<TagSlot>,
    /// Records (u32 little-endian length, then the bytes) of each list.
    pub comments: Vec<u8>,
    pub anchors: Vec<u8>,
    pub titles: Vec<u8>,
    pub overflow: HtmlOverflow,
}

impl HtmlTables {
    pub fn new() -> HtmlTables {
        HtmlTables {
            stats: Vec::with_capacity(MAX_HTML_PARTS),
            tags: alloc::vec![TagSlot::default(); MAX_HTML_PARTS * TAG_SLOTS],
            comments: Vec::new(),
            anchors: Vec::new(),
            titles: Vec::new(),
            overflow: HtmlOverflow::default(),
        }
    }

    pub fn reset(&mut self) {
        self.stats.clear();
        self.comments.clear();
        self.anchors.clear();
        self.titles.clear();
        self.overflow = HtmlOverflow::default();
    }

    pub fn capacities(&self) -> [usize; 5] {
        [self.stats.capacity(), self.tags.capacity(), self.comments.capacity(), self.anchors.capacity(), self.titles.capacity()]
    }

    /// A recorder for the next HTML part, or `None` when no more parts are recorded.
    pub fn start_part(&mut self) -> Option<HtmlRecorder<'_>> {
        let index = self.stats.len();
        if index >= MAX_HTML_PARTS {
            self.overflow.parts = true;
            return None;
        }
        let from = index * TAG_SLOTS;
        let tags = self.tags.get_mut(from..from + TAG_SLOTS)?;
        tags.fill(TagSlot::default());
        let lists = [self.comments.len(), self.anchors.len(), self.titles.len()].map(|n| u32::try_from(n).unwrap_or(u32::MAX));
        self.stats.push(HtmlStats::new((from as u32, (from + TAG_SLOTS) as u32), lists));
        let stats = self.stats.last_mut()?;
        Some(HtmlRecorder {
            stats,
            tags,
            comments: &mut self.comments,
            anchors: &mut self.anchors,
            titles: &mut self.titles,
            overflow: &mut self.overflow,
            open_anchor: None,
            open_title: None,
            inside_a: 0,
            inside_title: 0,
            inside_script: 0,
            inside_style: 0,
        })
    }
}

/// Elements of the HTML 4.01 and XHTML 1.0 DTDs plus a few common ones (`%elements`).
fn is_element(tag: &[u8]) -> bool {
    matches!(
        tag,
        b"a" | b"abbr" | b"acronym" | b"address" | b"area" | b"b" | b"base" | b"bdo" | b"big" | b"blockquote"
            | b"body" | b"br" | b"button" | b"caption" | b"cite" | b"code" | b"col" | b"colgroup" | b"dd"
            | b"del" | b"dfn" | b"div" | b"dl" | b"dt" | b"em" | b"fieldset" | b"form" | b"h1" | b"h2" | b"h3"
            | b"h4" | b"h5" | b"h6" | b"head" | b"hr" | b"html" | b"i" | b"img" | b"input" | b"ins" | b"kbd"
            | b"label" | b"legend" | b"li" | b"link" | b"map" | b"meta" | b"noscript" | b"object" | b"ol"
            | b"optgroup" | b"option" | b"p" | b"param" | b"pre" | b"q" | b"samp" | b"script" | b"select"
            | b"small" | b"span" | b"strong" | b"style" | b"sub" | b"sup" | b"table" | b"tbody" | b"td"
            | b"textarea" | b"tfoot" | b"th" | b"thead" | b"title" | b"tr" | b"tt" | b"ul" | b"var"
            | b"applet" | b"basefont" | b"center" | b"dir" | b"font" | b"frame" | b"frameset" | b"iframe"
            | b"isindex" | b"menu" | b"noframes" | b"s" | b"strike" | b"u" | b"nobr" | b"x-sigsep" | b"x-tab"
    )
}

/// Non-standard tags SpamAssassin renders but does not count as valid (`%tricks`).
fn is_trick(tag: &[u8]) -> bool {
    matches!(tag, b"bgsound" | b"embed" | b"listing" | b"plaintext" | b"xmp")
}

/// `^(?:o|st\d):[\w-]+/?$`: Microsoft Office namespace tags.
fn is_namespace(tag: &[u8]) -> bool {
    let rest = match tag {
        [b'o', b':', rest @ ..] => rest,
        [b's', b't', d, b':', rest @ ..] if d.is_ascii_digit() => rest,
        _ => return false,
    };
    let rest = rest.strip_suffix(b"/").unwrap_or(rest);
    !rest.is_empty() && rest.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether a character is in `[^\s\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]`.
fn is_wordish(c: char) -> bool {
    !c.is_whitespace() && !matches!(c, '\x21'..='\x2f' | '\x3a'..='\x40' | '\x5b'..='\x60' | '\x7b'..='\x7e')
}

/// The first and last characters of UTF-8 text (invalid bytes count as U+FFFD).
fn first_char(s: &[u8]) -> Option<char> {
    let n = s.len().min(4);
    let head = s.get(..n)?;
    match core::str::from_utf8(head) {
        Ok(t) => t.chars().next(),
        Err(e) => match core::str::from_utf8(head.get(..e.valid_up_to())?) {
            Ok(t) if !t.is_empty() => t.chars().next(),
            _ => (!s.is_empty()).then_some('\u{fffd}'),
        },
    }
}

fn last_char(s: &[u8]) -> Option<char> {
    let start = s.len().saturating_sub(4);
    for i in start..s.len() {
        if let Some(Ok(t)) = s.get(i..).map(core::str::from_utf8) {
            return t.chars().last();
        }
    }
    (!s.is_empty()).then_some('\u{fffd}')
}

/// Characters of UTF-8 text (bytes that start a character).
pub(crate) fn char_count(s: &[u8]) -> u64 {
    if s.is_ascii() {
        return s.len() as u64;
    }
    // Eight bytes a step: continuation bytes are 0b10xx_xxxx.
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut words = s.chunks_exact(8);
    let mut continuation = 0u64;
    for w in words.by_ref() {
        let w = w.try_into().map_or(0, u64::from_le_bytes);
        continuation += u64::from((w & !(w << 1) & HIGH).count_ones());
    }
    let tail = words.remainder().iter().filter(|&&b| (b as i8) < -0x40).count() as u64;
    s.len() as u64 - continuation - tail
}

/// White-space characters of UTF-8 text (Perl's `\s` on characters).
fn space_count(s: &[u8]) -> u64 {
    // Tab, LF, VT, FF, CR are 9..=13: one range test the compiler can vectorise.
    let ascii = s.iter().map(|&b| u64::from(b == b' ' || b.wrapping_sub(9) < 5)).sum::<u64>();
    if s.is_ascii() {
        return ascii;
    }
    // The other spaces all start with one of these bytes.
    let mut wide = 0;
    for lead in [memchr::memchr2_iter(0xc2, 0xe2, s), memchr::memchr2_iter(0xe1, 0xe3, s)] {
        for i in lead {
            if super::render::unicode_space_len(s.get(i..).unwrap_or(&[])) > 0 {
                wide += 1;
            }
        }
    }
    ascii + wide
}

/// How the current text style hides text, as `html_font_invisible` decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hiding {
    Visible,
    /// Foreground too close to the background.
    LowContrast,
    /// A colour that is not one.
    InvalidColor,
    /// Tiny font, `display: none` or `visibility: hidden`.
    Other,
}

/// Which list a text record goes to.
#[derive(Clone, Copy)]
enum List {
    Comments,
    Anchors,
    Titles,
}

/// Collects one HTML part's statistics while the renderer runs (`HTML.pm`'s
/// `html_tag`, `html_tests`, `html_text`, `html_comment`, `html_declaration`).
pub(crate) struct HtmlRecorder<'t> {
    pub stats: &'t mut HtmlStats,
    tags: &'t mut [TagSlot],
    comments: &'t mut Vec<u8>,
    anchors: &'t mut Vec<u8>,
    titles: &'t mut Vec<u8>,
    overflow: &'t mut HtmlOverflow,
    /// Start of the anchor and title records being filled.
    open_anchor: Option<usize>,
    open_title: Option<usize>,
    inside_a: i64,
    inside_title: i64,
    inside_script: i64,
    inside_style: i64,
}

impl HtmlRecorder<'_> {
    /// The HTML source, before it is parsed (`length`).
    pub fn source(&mut self, src: &[u8]) {
        self.stats.length = self.stats.length.saturating_add(char_count(src));
    }

    /// A start (`open`) or end tag named `name` (any case). Returns whether the tag is
    /// one SpamAssassin acts on (an element or trick, not a namespace tag).
    pub fn tag(&mut self, name: &[u8], open: bool) -> bool {
        let mut key = [0u8; 32];
        let lower = if name.len() <= key.len() {
            for (k, b) in key.iter_mut().zip(name) {
                *k = b.to_ascii_lowercase();
            }
            key.get(..name.len()).unwrap_or(&[])
        } else {
            // Too long to be an element; only its hash matters.
            &[]
        };
        let namespace = is_namespace(lower);
        let element = is_element(lower);
        let hash = tag_hash(name);
        let slot = probe(self.tags, hash);
        let seen = slot.and_then(|i| self.tags.get(i)).is_none_or(|s| s.hash == hash);
        if slot.is_none() {
            self.overflow.tags = true;
        }
        let s = &mut *self.stats;
        if element || namespace {
            s.elements = s.elements.saturating_add(1);
            if !seen {
                s.elements_seen = s.elements_seen.saturating_add(1);
            }
        }
        s.tags = s.tags.saturating_add(1);
        if !seen {
            s.tags_seen = s.tags_seen.saturating_add(1);
        }
        let mut count = 0;
        if let Some(entry) = slot.and_then(|i| self.tags.get_mut(i)) {
            entry.hash = hash;
            entry.count = entry.count.saturating_add(if open { 1 } else { -1 });
            if entry.count < 0 {
                entry.count = 0;
                s.closed_extra = s.closed_extra.saturating_add(1);
            }
            count = entry.count;
        }
        match lower {
            b"a" => self.inside_a = count,
            b"title" => self.inside_title = count,
            b"script" => self.inside_script = count,
            b"style" => self.inside_style = count,
            _ => {}
        }
        !namespace && (element || is_trick(lower))
    }

    /// `html_tests` for a start tag SpamAssassin acts on. `attrs` holds the raw values
    /// of the attributes the tests read; `scratch` is space to decode them.
    pub fn start_tests(&mut self, tag: &[u8], attrs: &TagAttrs<'_>, scratch: &mut Vec<u8>) {
        match tag {
            b"font" => {
                if let Some(face) = attrs.face {
                    if !is_font_list(decoded(face, scratch)) {
                        self.stats.font_face_bad = true;
                    }
                }
            }
            b"img" => {
                if self.inside_a > 0 {
                    self.append(List::Anchors, b"<img>\n");
                }
                if let (Some(w), Some(h)) = (attrs.width, attrs.height) {
                    let w = image_dimension(decoded(w, scratch), 8.0);
                    let h = image_dimension(decoded(h, scratch), 6.0);
                    let w = if w <= 0.0 { 200.0 } else { w };
                    let h = if h <= 0.0 { 200.0 } else { h };
                    self.stats.image_area += w * h;
                }
            }
            b"form" if attrs.action.is_some_and(|v| find_ci(decoded(v, scratch), b"mailto:")) => {
                self.stats.form_action_mailto = true;
            }
            b"object" | b"embed" => self.stats.embeds = true,
            b"a" => self.open_anchor = self.new_record(List::Anchors),
            b"title" => self.open_title = self.new_record(List::Titles),
            _ => {}
        }
    }

    /// A URI attribute value as `canon_uri` trims it, `chars` characters long.
    pub fn uri(&mut self, chars: usize) {
        if chars > MAX_URI_CHARS {
            self.stats.uri_truncated = true;
        }
    }

    /// An `<iframe src>` with a non-empty value.
    pub fn iframe_src(&mut self) {
        self.stats.iframe_src = true;
    }

    /// A text event (`dtext`), with the text rendered before it (`text[-1]`) and how
    /// the current style hides text (asked only for text that is not all white space).
    pub fn text(&mut self, text: &[u8], previous: Option<&[u8]>, hiding: impl FnOnce() -> Hiding) {
        if self.inside_script > 0 || self.inside_style > 0 {
            return;
        }
        if self.inside_a > 0 {
            self.append(List::Anchors, text);
        }
        if self.inside_title > 0 {
            self.append(List::Titles, text);
        }
        if text.iter().any(|&b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0c | 0x0b)) {
            match hiding() {
                Hiding::LowContrast => self.stats.font_low_contrast = true,
                Hiding::InvalidColor => self.stats.font_invalid_color = true,
                Hiding::Visible | Hiding::Other => {}
            }
        }
        if let Some(prev) = previous {
            if first_char(text).is_some_and(is_wordish) && last_char(prev).is_some_and(is_wordish) {
                self.stats.obfuscation = self.stats.obfuscation.saturating_add(1);
            }
        }
    }

    /// A comment, `<!--` and `-->` included.
    pub fn comment(&mut self, text: &[u8]) {
        let at = self.new_record(List::Comments);
        self.append_at(List::Comments, at, text);
    }

    /// `<!doctype …>`: counted as a tag and an element.
    pub fn doctype(&mut self) {
        let hash = tag_hash(b"!doctype");
        if let Some(entry) = probe(self.tags, hash).and_then(|i| self.tags.get_mut(i)) {
            entry.hash = hash;
            entry.count = 0;
        }
        self.stats.elements = self.stats.elements.saturating_add(1);
        self.stats.tags = self.stats.tags.saturating_add(1);
    }

    /// The end of the document: unclosed `<style>` and `<script>` are closed, as
    /// SpamAssassin does; `rendered` is the part's rendered text.
    pub fn finish(&mut self, rendered: &[u8]) {
        while self.inside_style > 0 {
            self.tag(b"style", false);
        }
        while self.inside_script > 0 {
            self.tag(b"script", false);
        }
        self.stats.html_length = char_count(rendered);
        self.stats.non_space_len = self.stats.html_length.saturating_sub(space_count(rendered));
        self.stats.comments.1 = u32::try_from(self.comments.len()).unwrap_or(u32::MAX);
        self.stats.anchors.1 = u32::try_from(self.anchors.len()).unwrap_or(u32::MAX);
        self.stats.titles.1 = u32::try_from(self.titles.len()).unwrap_or(u32::MAX);
    }

    fn list(&mut self, list: List) -> &mut Vec<u8> {
        match list {
            List::Comments => self.comments,
            List::Anchors => self.anchors,
            List::Titles => self.titles,
        }
    }

    /// Starts an empty record; returns its start.
    fn new_record(&mut self, list: List) -> Option<usize> {
        let buf = self.list(list);
        if buf.len() + 4 > MAX_LIST_BYTES {
            self.overflow.texts = true;
            return None;
        }
        let at = buf.len();
        buf.extend_from_slice(&0u32.to_le_bytes());
        Some(at)
    }

    /// Appends to the record of `list` that starts at `at` (its last one).
    fn append_at(&mut self, list: List, at: Option<usize>, text: &[u8]) {
        let Some(at) = at else { return };
        let buf = self.list(list);
        if at + 4 > buf.len() {
            return;
        }
        let room = MAX_LIST_BYTES.saturating_sub(buf.len());
        let take = text.len().min(room);
        buf.extend_from_slice(text.get(..take).unwrap_or(&[]));
        let len = buf.len() - at - 4;
        if let Some(h) = buf.get_mut(at..at + 4) {
            h.copy_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
        }
        if take < text.len() {
            self.overflow.texts = true;
        }
    }

    /// Appends to the open anchor or title.
    fn append(&mut self, list: List, text: &[u8]) {
        let at = match list {
            List::Anchors => self.open_anchor,
            List::Titles => self.open_title,
            List::Comments => None,
        };
        self.append_at(list, at, text);
    }
}

/// Raw values of the attributes `html_tests` reads.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TagAttrs<'d> {
    pub face: Option<&'d [u8]>,
    pub width: Option<&'d [u8]>,
    pub height: Option<&'d [u8]>,
    pub action: Option<&'d [u8]>,
}

/// An attribute value with its entities decoded (into `scratch` when it has any).
fn decoded<'v>(raw: &'v [u8], scratch: &'v mut Vec<u8>) -> &'v [u8] {
    if memchr::memchr(b'&', raw).is_none() {
        return raw;
    }
    scratch.clear();
    super::html::decode_entities(raw, scratch, false);
    scratch
}

/// The records of a list between two offsets.
pub(crate) fn records(buf: &[u8], range: (u32, u32)) -> impl Iterator<Item = &[u8]> + '_ {
    let mut rest = buf.get(range.0 as usize..range.1 as usize).unwrap_or(&[]);
    core::iter::from_fn(move || {
        let h = rest.get(..4)?;
        let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
        let text = rest.get(4..4 + len)?;
        rest = rest.get(4 + len..).unwrap_or(&[]);
        Some(text)
    })
}

/// `^(\d+)(%)?$` on an image dimension: the number, times `percent` with `%`; 0 otherwise.
fn image_dimension(v: &[u8], percent: f64) -> f64 {
    let digits = v.iter().take_while(|b| b.is_ascii_digit()).count();
    let rest = v.get(digits..).unwrap_or(&[]);
    let scale = match rest {
        b"" | b"\n" => 1.0,
        b"%" | b"%\n" => percent,
        _ => return 0.0,
    };
    if digits == 0 {
        return 0.0;
    }
    let n = v.get(..digits).unwrap_or(&[]).iter().fold(0.0f64, |a, &d| a * 10.0 + f64::from(d - b'0'));
    n * scale
}

/// Case-insensitive search for a lowercase ASCII needle.
fn find_ci(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

/// `^\s*["'.]?[a-z ][a-z -]*[a-z]\d?["']?(?:,\s*["']?[a-z][a-z -]*[a-z]\d?["']?)*;?$` (case-insensitive).
fn is_font_list(v: &[u8]) -> bool {
    let v = v.strip_suffix(b"\n").unwrap_or(v);
    let mut i = v.iter().take_while(|&&b| super::decode::is_perl_space(b)).count();
    let at = |i: usize| v.get(i).copied();
    // One font name: [a-z][a-z -]*[a-z]\d? (the first letter may be a space in the first name).
    let name = |i: &mut usize, first_space: bool| -> bool {
        match at(*i) {
            Some(c) if c.is_ascii_alphabetic() || (first_space && c == b' ') => *i += 1,
            _ => return false,
        }
        let run_start = *i;
        while at(*i).is_some_and(|c| c.is_ascii_alphabetic() || c == b' ' || c == b'-') {
            *i += 1;
        }
        // The run must end with a letter: back off to the last letter.
        let mut end = *i;
        while end > run_start && !at(end - 1).is_some_and(|c| c.is_ascii_alphabetic()) {
            end -= 1;
        }
        if end == run_start {
            // `[a-z -]*` matched nothing usable; the final `[a-z]` must follow directly.
            return false;
        }
        *i = end;
        if at(*i).is_some_and(|c| c.is_ascii_digit()) {
            *i += 1;
        }
        true
    };
    if matches!(at(i), Some(b'"' | b'\'' | b'.')) {
        i += 1;
    }
    if !name(&mut i, true) {
        return false;
    }
    if matches!(at(i), Some(b'"' | b'\'')) {
        i += 1;
    }
    loop {
        if at(i) != Some(b',') {
            break;
        }
        let mut j = i + 1;
        while at(j).is_some_and(super::decode::is_perl_space) {
            j += 1;
        }
        if matches!(at(j), Some(b'"' | b'\'')) {
            j += 1;
        }
        if !name(&mut j, false) {
            break;
        }
        if matches!(at(j), Some(b'"' | b'\'')) {
            j += 1;
        }
        i = j;
    }
    if at(i) == Some(b';') {
        i += 1;
    }
    i == v.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn font_face_table() {
        // Faces from SpamAssassin's bug reports and their verdicts under its regex.
        let cases: &[(&[u8], bool)] = &[
            (b"Arial", true),
            (b"\"Tahoma\", Verdana, Arial, sans-serif", true),
            (b"'Montserrat', sans-serif", true),
            (b"Arial,Helvetica,Sans-Serif;", true),
            (b".SFUIDisplay", true),
            (b"hirakakupro-w3", true),
            (b"  Times New Roman", true),
            (b" Arial", true),
            (b"a", false),
            (b"x%", false),
            (b"Arial,", false),
            (b"Wingdings 2", false),
            (b"Arial2", true),
            (b"Arial22", false),
            (b"", false),
            (b"MS Sans-", false),
        ];
        for (face, ok) in cases {
            assert_eq!(is_font_list(face), *ok, "{:?}", core::str::from_utf8(face));
        }
    }

    #[test]
    fn namespace_tags() {
        for (tag, want) in [(&b"o:p"[..], true), (b"st1:place", true), (b"o:p/", true), (b"x:p", false), (b"o:", false), (b"st:x", false)] {
            assert_eq!(is_namespace(tag), want, "{:?}", core::str::from_utf8(tag));
        }
    }

    #[test]
    fn image_dimension_table() {
        let cases: &[(&[u8], f64)] = &[(b"10", 10.0), (b"10%", 80.0), (b"10px", 0.0), (b"", 0.0), (b"%", 0.0), (b" 10", 0.0)];
        for (v, want) in cases {
            assert_eq!(image_dimension(v, 8.0), *want, "{:?}", core::str::from_utf8(v));
        }
    }

    #[test]
    fn counts() {
        assert_eq!(char_count("a\u{e9}\u{20ac}".as_bytes()), 3);
        // Against a byte-by-byte count, across the eight-byte steps and with stray bytes.
        let texts: [&[u8]; 5] = [b"", b"plain ascii text, longer than eight", "\u{e9}t\u{e9} \u{20ac}\u{1f600} caf\u{e9}s".as_bytes(), b"\x80\xbf\xc0\xff\x7f\x00abcdefghij\x80", b"\xe2\x82"];
        for t in texts {
            let want = t.iter().filter(|&&b| !(0x80..0xc0).contains(&b)).count() as u64;
            assert_eq!(char_count(t), want, "{t:?}");
            let spaces = t.iter().filter(|&&b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)).count() as u64;
            assert_eq!(space_count(t), spaces + u64::from(t.windows(2).any(|w| w == b"\xc2\xa0")), "{t:?}");
        }
        assert_eq!(space_count(b"\x08\t\n\x0b\x0c\r\x0e\x1f \x21"), 6);
        assert_eq!(space_count("a b\u{a0}c\u{3000}\n".as_bytes()), 4);
    }

    #[test]
    fn tag_table_counts_and_overflow() {
        let mut t = HtmlTables::new();
        let Some(mut r) = t.start_part() else { panic!("no recorder") };
        assert!(r.tag(b"P", true));
        assert!(r.tag(b"p", false));
        assert!(r.tag(b"p", false));
        assert!(!r.tag(b"foo", true));
        assert!(!r.tag(b"o:p", true));
        let s = *r.stats;
        assert_eq!((s.tags, s.elements, s.tags_seen, s.elements_seen, s.closed_extra), (5, 4, 3, 2, 1));
        let table = t.tags.get(..TAG_SLOTS).unwrap_or(&[]);
        assert_eq!(inside(table, tag_hash(b"p")), Some(0));
        assert_eq!(inside(table, tag_hash(b"FOO")), Some(1));
        assert_eq!(inside(table, tag_hash(b"bar")), None);
    }
}
