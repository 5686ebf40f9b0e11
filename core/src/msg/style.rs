//! The text style stack of SpamAssassin's `HTML.pm` (`text_style`,
//! `html_font_invisible`, `name_to_rgb`): just enough of fonts, colours and CSS
//! to tell whether a run of text is invisible, which decides some spaces at line
//! edges of the rendered body.

use super::decode::is_perl_space;
use super::entities::COLORS;
use super::stats::Hiding;

/// Deepest style nesting tracked; deeper tags are ignored.
const MAX_STYLES: usize = 64;

/// A colour as `name_to_rgb` leaves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Color {
    /// `#rrggbb`.
    Hex(u32),
    /// `#` with no digits.
    Empty,
    /// Not a colour SpamAssassin understands.
    Invalid,
    /// CSS `transparent`, resolved when the style is complete.
    Transparent,
}

/// Tags that change the text style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StyleTag {
    Default,
    Body,
    Font,
    Table,
    Tr,
    Td,
    Big,
    Small,
    Basefont,
    Span,
    P,
    Div,
    A,
}

impl StyleTag {
    /// The style tag for a lowercase tag name (`th` counts as `td`).
    pub fn from_name(tag: &[u8]) -> Option<StyleTag> {
        Some(match tag {
            b"body" => StyleTag::Body,
            b"font" => StyleTag::Font,
            b"table" => StyleTag::Table,
            b"tr" => StyleTag::Tr,
            b"td" | b"th" => StyleTag::Td,
            b"big" => StyleTag::Big,
            b"small" => StyleTag::Small,
            b"basefont" => StyleTag::Basefont,
            b"span" => StyleTag::Span,
            b"p" => StyleTag::P,
            b"div" => StyleTag::Div,
            b"a" => StyleTag::A,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Style {
    tag: StyleTag,
    fg: Color,
    bg: Color,
    size: i64,
    display_none: bool,
    hidden: bool,
}

/// The stack of text styles of one HTML document.
pub(crate) struct Styles {
    stack: [Style; MAX_STYLES],
    len: usize,
    basefont: i64,
    min_size: i64,
    max_size: i64,
}

impl Styles {
    pub fn new() -> Styles {
        let default = Style {
            tag: StyleTag::Default,
            fg: Color::Hex(0),
            bg: Color::Hex(0xffffff),
            size: 3,
            display_none: false,
            hidden: false,
        };
        Styles { stack: [default; MAX_STYLES], len: 1, basefont: 3, min_size: 3, max_size: 3 }
    }

    fn top(&self) -> Style {
        let [first, ..] = self.stack;
        self.stack.get(self.len.saturating_sub(1)).copied().unwrap_or(first)
    }

    fn contains(&self, tag: StyleTag) -> bool {
        self.stack.get(..self.len).unwrap_or(&[]).iter().any(|s| s.tag == tag)
    }

    fn pop(&mut self) -> Option<Style> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        self.stack.get(self.len).copied()
    }

    fn push(&mut self, s: Style) {
        if let Some(slot) = self.stack.get_mut(self.len) {
            *slot = s;
            self.len += 1;
        }
    }

    /// A start tag. `attr` gives an attribute's value by name.
    pub fn open<'d>(&mut self, tag: StyleTag, attr: impl Fn(&[u8]) -> Option<&'d [u8]>) {
        if tag == StyleTag::Basefont {
            if let Some(n) = attr(b"size").and_then(leading_number) {
                self.basefont = n;
                return;
            }
        }
        if matches!(tag, StyleTag::Td | StyleTag::Tr) && self.contains(tag) {
            loop {
                let top = self.top().tag;
                let closes = match tag {
                    StyleTag::Td => matches!(top, StyleTag::Font | StyleTag::Td),
                    _ => matches!(top, StyleTag::Font | StyleTag::Td | StyleTag::Tr),
                };
                if !closes || self.len <= 1 {
                    break;
                }
                self.pop();
            }
        }
        let parent = self.top();
        let mut new = Style { tag, ..parent };
        match tag {
            StyleTag::Big => new.size = new.size.saturating_add(1),
            StyleTag::Small => new.size = new.size.saturating_sub(1),
            _ => {
                let color_attr: &[u8] = match tag {
                    StyleTag::Body => b"text",
                    StyleTag::Font | StyleTag::Basefont => b"color",
                    _ => b"",
                };
                if !color_attr.is_empty() {
                    if let Some(v) = attr(color_attr) {
                        new.fg = name_to_rgb(v);
                    }
                }
                if matches!(tag, StyleTag::Font | StyleTag::Basefont) {
                    if let Some(v) = attr(b"size") {
                        let t = v.get(v.iter().take_while(|&&b| is_perl_space(b)).count()..).unwrap_or(&[]);
                        if matches!(t.first(), Some(b'+' | b'-')) && t.get(1).is_some_and(u8::is_ascii_digit) {
                            let n = leading_number(t.get(1..).unwrap_or(&[])).unwrap_or(0);
                            let n = if t.first() == Some(&b'-') { -n } else { n };
                            new.size = self.basefont.saturating_add(n);
                        } else if let Some(n) = leading_number(t) {
                            new.size = n;
                        }
                    }
                }
                if matches!(tag, StyleTag::Table | StyleTag::Tr | StyleTag::Td | StyleTag::Span | StyleTag::P | StyleTag::Div | StyleTag::A) {
                    if let Some(css) = attr(b"style") {
                        apply_css(&mut new, &parent, css);
                    }
                }
                // SpamAssassin notes the size after each attribute it accepts for the tag.
                let accepted: &[&[u8]] = match tag {
                    StyleTag::Body => &[b"text", b"bgcolor", b"link", b"alink", b"vlink", b"background"],
                    StyleTag::Font | StyleTag::Basefont => &[b"color", b"face", b"size"],
                    StyleTag::Table | StyleTag::Tr | StyleTag::Td => &[b"bgcolor", b"style"],
                    StyleTag::Span | StyleTag::P | StyleTag::Div | StyleTag::A => &[b"style"],
                    _ => &[],
                };
                if accepted.iter().any(|name| attr(name).is_some()) {
                    if new.size > self.max_size {
                        self.max_size = new.size;
                    } else if new.size < self.min_size {
                        self.min_size = new.size;
                    }
                }
            }
        }
        self.push(new);
    }

    /// An end tag.
    pub fn close(&mut self, tag: StyleTag) {
        if tag == StyleTag::Body || !self.contains(tag) {
            return;
        }
        while let Some(s) = self.pop() {
            if s.tag == tag {
                break;
            }
        }
    }

    /// SpamAssassin's `html_font_invisible` for text written in the current style.
    pub fn invisible(&self) -> bool {
        self.hiding() != Hiding::Visible
    }

    /// Whether and why `html_font_invisible` hides text written in the current style.
    pub fn hiding(&self) -> Hiding {
        let s = self.top();
        let same = match (s.fg, s.bg) {
            (Color::Invalid, Color::Invalid) | (Color::Empty, Color::Empty) => true,
            (Color::Hex(a), Color::Hex(b)) => a == b,
            _ => false,
        };
        if same {
            return Hiding::LowContrast;
        }
        if let (Color::Hex(f), Color::Hex(b)) = (s.fg, s.bg) {
            let channel = |c: u32, shift: u32| ((c >> shift) & 0xff) as f64;
            let dr = channel(f, 16) - channel(b, 16);
            let dg = channel(f, 8) - channel(b, 8);
            let db = channel(f, 0) - channel(b, 0);
            let d2 = (0.2126 * dr) * (0.2126 * dr) + (0.7152 * dg) * (0.7152 * dg) + (0.0722 * db) * (0.0722 * db);
            if d2 < 144.0 {
                return Hiding::LowContrast;
            }
        }
        if s.fg == Color::Invalid || s.bg == Color::Invalid {
            return Hiding::InvalidColor;
        }
        if s.size <= 1 || s.display_none || s.hidden {
            return Hiding::Other;
        }
        Hiding::Visible
    }

    /// The smallest and largest font sizes set by an attribute so far (`min_size`, `max_size`).
    pub fn size_range(&self) -> (i64, i64) {
        (self.min_size, self.max_size)
    }
}

/// `^\s*(\d+)`.
fn leading_number(v: &[u8]) -> Option<i64> {
    let t = v.get(v.iter().take_while(|&&b| is_perl_space(b)).count()..)?;
    let digits = t.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    Some(t.get(..digits)?.iter().fold(0i64, |a, &d| a.saturating_mul(10).saturating_add(i64::from(d - b'0'))))
}

fn trim(v: &[u8]) -> &[u8] {
    let a = v.iter().take_while(|&&b| is_perl_space(b)).count();
    let b = v.len() - v.get(a..).unwrap_or(&[]).iter().rev().take_while(|&&b| is_perl_space(b)).count();
    v.get(a..b.max(a)).unwrap_or(&[])
}

/// The `style` attribute's colours, background and display/visibility.
fn apply_css(new: &mut Style, parent: &Style, css: &[u8]) {
    for decl in css.split(|&b| b == b';') {
        let d = trim(decl);
        let lower_starts = |p: &[u8]| d.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p));
        let (is_bg, rest) = if lower_starts(b"background-color:") {
            (true, d.get(17..))
        } else if lower_starts(b"color:") {
            (false, d.get(6..))
        } else {
            (false, None)
        };
        if let Some(rest) = rest {
            let mut buf = [0u8; 64];
            let value = lower_into(trim(rest), &mut buf);
            let value = strip_important(value);
            let color = if memchr::memmem::find(value, b"rgb").is_some() {
                let mut parts = [0u32; 3];
                let mut idx = 0;
                let mut any = [false; 3];
                for &b in value {
                    if b == b',' {
                        idx += 1;
                    } else if b.is_ascii_digit() && idx < 3 {
                        if let (Some(p), Some(a)) = (parts.get_mut(idx), any.get_mut(idx)) {
                            *p = p.saturating_mul(10).saturating_add(u32::from(b - b'0'));
                            *a = true;
                        }
                    }
                }
                let c = |i: usize| parts.get(i).copied().unwrap_or(0).min(255);
                Some(Color::Hex((c(0) << 16) | (c(1) << 8) | c(2)))
            } else if value == b"inherit" {
                None
            } else if value == b"transparent" {
                Some(Color::Transparent)
            } else {
                Some(name_to_rgb(value))
            };
            if let Some(c) = color {
                if is_bg {
                    new.bg = c;
                } else {
                    new.fg = c;
                }
            }
        } else if let Some(rest) = d.strip_prefix(b"background:") {
            let mut buf = [0u8; 256];
            let value = lower_into(trim(rest), &mut buf);
            if let Some(c) = background_color(value) {
                new.bg = c;
            }
        } else {
            let name_len = d.iter().take_while(|b| b.is_ascii_alphabetic() || matches!(b, b'_' | b'-')).count();
            let name = d.get(..name_len).unwrap_or(&[]);
            let after = trim(d.get(name_len..).unwrap_or(&[]));
            if name_len > 0 && after.first() == Some(&b':') {
                let value = trim(after.get(1..).unwrap_or(&[]));
                if !value.is_empty() {
                    if name == b"display" {
                        new.display_none = value.eq_ignore_ascii_case(b"none");
                    } else if name == b"visibility" {
                        new.hidden = value.eq_ignore_ascii_case(b"hidden");
                    }
                }
            }
        }
    }
    if new.bg == Color::Transparent {
        new.bg = parent.bg;
    }
    if new.fg == Color::Transparent {
        new.fg = new.bg;
    }
}

/// Lowercase copy of `v` into `buf` (cut at its size).
fn lower_into<'b>(v: &[u8], buf: &'b mut [u8]) -> &'b [u8] {
    let n = v.len().min(buf.len());
    for (slot, b) in buf.iter_mut().zip(v) {
        *slot = b.to_ascii_lowercase();
    }
    buf.get(..n).unwrap_or(&[])
}

/// `s/\s*!\s*important$//`.
fn strip_important(v: &[u8]) -> &[u8] {
    let Some(t) = v.strip_suffix(b"important") else { return v };
    let t = trim_end(t);
    match t.strip_suffix(b"!") {
        Some(t) => trim_end(t),
        None => v,
    }
}

fn trim_end(v: &[u8]) -> &[u8] {
    let n = v.iter().rev().take_while(|&&b| is_perl_space(b)).count();
    v.get(..v.len() - n).unwrap_or(&[])
}

/// The first valid colour among the tokens of the last layer of a CSS `background`.
fn background_color(v: &[u8]) -> Option<Color> {
    // Layers split on top-level commas; tokens on top-level spaces.
    let mut depth = 0u32;
    let mut quote = 0u8;
    let mut layer_start = 0;
    for (i, &b) in v.iter().enumerate() {
        match (quote, b) {
            (0, b'(') => depth += 1,
            (0, b')') => depth = depth.saturating_sub(1),
            (0, b'"' | b'\'') => quote = b,
            (q, c) if q != 0 && c == q => quote = 0,
            (0, b',') if depth == 0 => layer_start = i + 1,
            _ => {}
        }
    }
    let layer = v.get(layer_start..).unwrap_or(&[]);
    let mut depth = 0u32;
    let mut quote = 0u8;
    let mut tok_start = 0;
    for i in 0..=layer.len() {
        let b = layer.get(i).copied();
        let split = match (quote, b) {
            (_, None) => true,
            (0, Some(b' ')) if depth == 0 => true,
            (0, Some(b'(')) => {
                depth += 1;
                false
            }
            (0, Some(b')')) => {
                depth = depth.saturating_sub(1);
                false
            }
            (0, Some(q @ (b'"' | b'\''))) => {
                quote = q;
                false
            }
            (q, Some(c)) if q != 0 && c == q => {
                quote = 0;
                false
            }
            _ => false,
        };
        if split {
            let tok = layer.get(tok_start..i).unwrap_or(&[]);
            tok_start = i + 1;
            if !tok.is_empty() {
                let c = name_to_rgb(tok);
                if c != Color::Invalid {
                    return Some(c);
                }
            }
        }
    }
    None
}

fn hex_digit(b: u8) -> Option<u32> {
    (b as char).to_digit(16)
}

/// SpamAssassin's `name_to_rgb`.
pub(crate) fn name_to_rgb(v: &[u8]) -> Color {
    let mut buf = [0u8; 128];
    let lower = lower_into(trim(v), &mut buf);
    if let Ok(k) = COLORS.binary_search_by(|c| c.0.cmp(lower)) {
        if let Some(&(_, hex)) = COLORS.get(k) {
            return Color::Hex(hex);
        }
    }
    let plain = lower.iter().all(|&b| b == b'#' || b.is_ascii_hexdigit());
    // `rgb(...)` written with numbers or percentages.
    let mut digits = [0u8; 24];
    let mut n = 0;
    let mut push_hex = |value: u64, n: &mut usize| {
        // `dec2hex`: at least two hex digits, no upper bound.
        let mut tmp = [0u8; 16];
        let mut len = 0;
        let mut v = value;
        loop {
            if let Some(slot) = tmp.get_mut(len) {
                *slot = b"0123456789abcdef"[(v & 15) as usize];
            }
            len += 1;
            v >>= 4;
            if v == 0 || len >= 16 {
                break;
            }
        }
        if len < 2 {
            if let Some(slot) = digits.get_mut(*n) {
                *slot = b'0';
            }
            *n += 1;
        }
        for i in (0..len).rev() {
            if let (Some(slot), Some(&d)) = (digits.get_mut(*n), tmp.get(i)) {
                *slot = d;
            }
            *n += 1;
        }
    };
    let rgb = rgb_call(lower);
    let hex_src: &[u8] = if let Some((vals, pct)) = rgb {
        for v in vals {
            let v = if pct { v.saturating_mul(255) / 100 } else { v };
            push_hex(v, &mut n);
        }
        digits.get(..n.min(digits.len())).unwrap_or(&[])
    } else if plain && lower.first() == Some(&b'#') {
        lower
    } else {
        return Color::Invalid;
    };
    // Keep hex digits; 6 at most, 4 or 5 cut to 3; padded to 3 or 6; 3 doubled.
    let mut hex = [0u8; 6];
    let mut len = 0;
    let total = hex_src.iter().filter(|b| b.is_ascii_hexdigit()).count();
    let keep = if total > 6 {
        6
    } else if total > 3 && total < 6 {
        3
    } else {
        total
    };
    for &b in hex_src.iter().filter(|b| b.is_ascii_hexdigit()).take(keep) {
        if let Some(slot) = hex.get_mut(len) {
            *slot = b;
        }
        len += 1;
    }
    if len == 0 {
        return Color::Empty;
    }
    while len % 3 != 0 {
        if let Some(slot) = hex.get_mut(len) {
            *slot = b'0';
        }
        len += 1;
    }
    let value = if len == 3 {
        hex.iter().take(3).fold(0u32, |a, &d| {
            let x = hex_digit(d).unwrap_or(0);
            (a << 8) | (x << 4) | x
        })
    } else {
        hex.iter().take(6).fold(0u32, |a, &d| (a << 4) | hex_digit(d).unwrap_or(0))
    };
    Color::Hex(value)
}

/// `rgb(N%, N%, N%)` or `rgb(N, N, N)` anywhere in `v`: the numbers and whether they are percentages.
fn rgb_call(v: &[u8]) -> Option<([u64; 3], bool)> {
    let at = memchr::memmem::find(v, b"rgb(")?;
    let inner = v.get(at + 4..)?;
    let close = memchr::memchr(b')', inner)?;
    let inner = inner.get(..close)?;
    if !inner.iter().all(|b| b.is_ascii_digit() || matches!(b, b'%' | b',' | b' ')) {
        return None;
    }
    let mut vals = [0u64; 3];
    let mut pct = [false; 3];
    let mut count = 0;
    for (i, part) in inner.split(|&b| b == b',').enumerate() {
        let p = trim(part);
        let digits = p.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || i >= 3 {
            return None;
        }
        let num = p.get(..digits)?.iter().fold(0u64, |a, &d| a.saturating_mul(10).saturating_add(u64::from(d - b'0')));
        let rest = trim(p.get(digits..).unwrap_or(&[]));
        if let (Some(v), Some(q)) = (vals.get_mut(i), pct.get_mut(i)) {
            *v = num;
            *q = rest == b"%";
        }
        if !(rest.is_empty() || rest == b"%") {
            return None;
        }
        count += 1;
    }
    let [p0, p1, p2] = pct;
    if count != 3 || p0 != p1 || p1 != p2 {
        return None;
    }
    Some((vals, p0))
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;

    #[test]
    fn colors_table() {
        let cases: &[(&[u8], Color)] = &[
            (b"red", Color::Hex(0xff0000)),
            (b" White ", Color::Hex(0xffffff)),
            (b"#fff", Color::Hex(0xffffff)),
            (b"#ABCDEF", Color::Hex(0xabcdef)),
            (b"#abcd", Color::Hex(0xaabbcc)),
            (b"#1234567", Color::Hex(0x123456)),
            (b"#1", Color::Hex(0x110000)),
            (b"#", Color::Empty),
            (b"ff0000", Color::Invalid),
            (b"bogus", Color::Invalid),
            (b"rgb(255, 0, 0)", Color::Hex(0xff0000)),
            (b"rgb(100%,0%,0%)", Color::Hex(0xff0000)),
        ];
        for (name, want) in cases {
            assert_eq!(name_to_rgb(name), *want, "{:?}", core::str::from_utf8(name));
        }
    }

    fn visible_after(tags: &[(StyleTag, &[(&[u8], &[u8])])]) -> bool {
        let mut s = Styles::new();
        for (tag, attrs) in tags {
            s.open(*tag, |n| attrs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v));
        }
        !s.invisible()
    }

    #[test]
    fn invisibility_table() {
        use StyleTag::*;
        let cases: &[(&[(StyleTag, &[(&[u8], &[u8])])], bool)] = &[
            (&[], true),
            (&[(Font, &[(b"size", b"1")])], false),
            (&[(Font, &[(b"size", b"-2")])], false),
            (&[(Font, &[(b"size", b"+1")])], true),
            (&[(Font, &[(b"color", b"#ffffff")])], false),
            (&[(Font, &[(b"color", b"#fefefe")])], false),
            (&[(Font, &[(b"color", b"red")])], true),
            (&[(Font, &[(b"color", b"ff0000")])], false),
            (&[(Span, &[(b"style", b"display: none")])], false),
            (&[(Div, &[(b"style", b"visibility:hidden")])], false),
            (&[(Div, &[(b"style", b"color: #000; background-color: #000")])], false),
            (&[(Div, &[(b"style", b"background: url(x.png) #000")]), (Span, &[(b"style", b"color:black")])], false),
            (&[(Small, &[]), (Small, &[])], false),
            (&[(Big, &[])], true),
        ];
        for (tags, want) in cases {
            assert_eq!(visible_after(tags), *want, "{tags:?}");
        }
        let mut s = Styles::new();
        s.open(StyleTag::Font, |n| (n == b"size").then_some(&b"1"[..]));
        assert!(s.invisible());
        s.close(StyleTag::Font);
        assert!(!s.invisible());
    }
}
