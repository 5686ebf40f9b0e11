//! SpamAssassin's ImageInfo: counts and pixel areas of the GIF, PNG and JPEG parts,
//! read from their headers while the base64 text is decoded on the fly (nothing is
//! buffered, whatever the image size).

use super::{bad, number, opt_number, BodyScratch};
use crate::msg::Message;
use crate::rules::eval::{Args, EvalError};
use crate::rules::EvalOn;

/// Image sizes remembered per message for `image_size_*`.
const MAX_SIZES: usize = 32;

/// Which images a test counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    /// `all`.
    All,
    /// `gif`.
    Gif,
    /// `png`.
    Png,
    /// `jpeg`.
    Jpeg,
    /// Any other name: SpamAssassin has no value for it, the test never hits.
    None,
}

impl ImageKind {
    fn parse(name: &str) -> ImageKind {
        match name {
            "all" => ImageKind::All,
            "gif" => ImageKind::Gif,
            "png" => ImageKind::Png,
            "jpeg" => ImageKind::Jpeg,
            _ => ImageKind::None,
        }
    }

    fn index(self) -> Option<usize> {
        match self {
            ImageKind::Gif => Some(0),
            ImageKind::Png => Some(1),
            ImageKind::Jpeg => Some(2),
            ImageKind::All | ImageKind::None => None,
        }
    }
}

/// One ImageInfo test with its arguments.
#[derive(Debug, Clone)]
enum Test {
    /// `image_count(kind, min[, max])`.
    Count { kind: ImageKind, min: f64, max: Option<f64> },
    /// `pixel_coverage(kind, min[, max])`: summed pixel area.
    Pixels { kind: ImageKind, min: f64, max: Option<f64> },
    /// `image_to_text_ratio(kind, min, max)`: text length over pixel area, `max` excluded;
    /// `raw` for a `rawbody` rule (decoded text rather than rendered).
    TextRatio { kind: ImageKind, min: f64, max: f64, raw: bool },
    /// `image_size_exact(kind, height, width)`.
    SizeExact { kind: ImageKind, height: f64, width: f64 },
    /// `image_size_range(kind, minh, minw[, maxh[, maxw]])`.
    SizeRange { kind: ImageKind, min_h: f64, min_w: f64, max_h: Option<f64>, max_w: Option<f64> },
}

/// One such test with its arguments, ready to run.
#[derive(Debug, Clone)]
pub struct ImageEval(Test);

impl ImageEval {
    /// The test for `function(args)`; `None` when `function` is not one of these.
    pub fn parse(on: EvalOn, function: &str, args: &Args) -> Option<Result<ImageEval, EvalError>> {
        let kind = || args.first().map(|k| ImageKind::parse(k)).ok_or_else(|| bad(function, "missing argument"));
        let t = || -> Result<Test, EvalError> {
            Ok(match function {
                "image_count" => Test::Count { kind: kind()?, min: number(function, args, 1)?, max: opt_number(function, args, 2)? },
                "pixel_coverage" => Test::Pixels { kind: kind()?, min: number(function, args, 1)?, max: opt_number(function, args, 2)? },
                "image_to_text_ratio" => {
                    let raw = match on {
                        EvalOn::Body => false,
                        EvalOn::RawBody => true,
                        _ => return Err(bad(function, "only body and rawbody rules")),
                    };
                    Test::TextRatio { kind: kind()?, min: number(function, args, 1)?, max: number(function, args, 2)?, raw }
                }
                "image_size_exact" => {
                    Test::SizeExact { kind: kind()?, height: number(function, args, 1)?, width: number(function, args, 2)? }
                }
                "image_size_range" => Test::SizeRange {
                    kind: kind()?,
                    min_h: number(function, args, 1)?,
                    min_w: number(function, args, 2)?,
                    max_h: opt_number(function, args, 3)?,
                    max_w: opt_number(function, args, 4)?,
                },
                _ => return Err(bad(function, "")),
            })
        };
        match function {
            "image_count" | "pixel_coverage" | "image_to_text_ratio" | "image_size_exact" | "image_size_range" => Some(t().map(ImageEval)),
            _ => None,
        }
    }

    /// Whether the test hits on `m`.
    pub fn run(&self, m: &Message<'_>, scratch: &mut BodyScratch) -> bool {
        let facts = scratch.images.get_or_insert_with(|| ImageFacts::of(m));
        match &self.0 {
            Test::Count { kind, min, max } => facts.count(*kind).is_some_and(|v| in_range(v, *min, *max, false)),
            Test::Pixels { kind, min, max } => facts.pixels(*kind).is_some_and(|v| in_range(v, *min, *max, false)),
            Test::TextRatio { kind, min, max, raw } => {
                let text = if *raw {
                    m.parts().map(|p| p.decoded().len()).sum()
                } else {
                    m.body().len() + usize::from(m.body_ends_with_newline())
                };
                match facts.pixels(*kind) {
                    Some(px) if text > 0 && px > 0.0 => in_range(text as f64 / px, *min, Some(*max), true),
                    _ => false,
                }
            }
            Test::SizeExact { kind, height, width } => {
                facts.sizes(*kind).any(|(h, w)| f64::from(h) == *height && f64::from(w) == *width)
            }
            Test::SizeRange { kind, min_h, min_w, max_h, max_w } => facts.sizes(*kind).any(|(h, w)| {
                let (h, w) = (f64::from(h), f64::from(w));
                h >= *min_h && w >= *min_w && max_h.is_none_or(|m| h <= m) && max_w.is_none_or(|m| w <= m)
            }),
        }
    }
}

/// ImageInfo's `result_check`.
fn in_range(v: f64, min: f64, max: Option<f64>, max_excluded: bool) -> bool {
    if v < min || max.is_some_and(|m| v > m) {
        return false;
    }
    !(max_excluded && max.is_some_and(|m| v == m))
}

/// What ImageInfo's `_get_images` finds, per kind (gif, png, jpeg).
#[derive(Debug, Clone, Copy, Default)]
pub struct ImageFacts {
    counts: [u32; 3],
    pixels: [f64; 3],
    /// (kind index, height, width) of images with a size.
    sizes: [(u8, u32, u32); MAX_SIZES],
    size_count: usize,
}

impl ImageFacts {
    /// Reads the image parts of `m`.
    pub fn of(m: &Message<'_>) -> ImageFacts {
        let mut f = ImageFacts::default();
        for p in m.parts().filter(|p| p.is_leaf()) {
            let kind = match p.content_type() {
                b"image/gif" => ImageKind::Gif,
                b"image/png" => ImageKind::Png,
                b"image/jpeg" | b"image/jpg" => ImageKind::Jpeg,
                _ => continue,
            };
            let cte = p.header(b"content-transfer-encoding").unwrap_or(&[]);
            if !cte.eq_ignore_ascii_case(b"base64") {
                continue;
            }
            let Some(k) = kind.index() else { continue };
            let mut data = Base64Stream::new(p.raw_body());
            let size = match kind {
                ImageKind::Gif => gif_size(&mut data),
                ImageKind::Png => png_size(&mut data),
                _ => jpeg_size(&mut data),
            };
            if let Some(c) = f.counts.get_mut(k) {
                *c += 1;
            }
            if let Some((w, h)) = size.filter(|&(w, h)| w > 0 && h > 0) {
                if let Some(px) = f.pixels.get_mut(k) {
                    *px += f64::from(w) * f64::from(h);
                }
                if let Some(slot) = f.sizes.get_mut(f.size_count) {
                    *slot = (k as u8, h, w);
                    f.size_count += 1;
                }
            }
        }
        f
    }

    fn count(&self, kind: ImageKind) -> Option<f64> {
        match kind {
            ImageKind::All => Some(f64::from(self.counts.iter().sum::<u32>())),
            ImageKind::None => None,
            k => k.index().and_then(|i| self.counts.get(i)).map(|&c| f64::from(c)),
        }
    }

    fn pixels(&self, kind: ImageKind) -> Option<f64> {
        match kind {
            ImageKind::All => Some(self.pixels.iter().sum()),
            ImageKind::None => None,
            k => k.index().and_then(|i| self.pixels.get(i)).copied(),
        }
    }

    fn sizes(&self, kind: ImageKind) -> impl Iterator<Item = (u32, u32)> + '_ {
        let want = kind.index();
        let any = kind == ImageKind::All;
        self.sizes
            .get(..self.size_count)
            .unwrap_or(&[])
            .iter()
            .filter(move |(k, _, _)| any || want == Some(usize::from(*k)))
            .map(|&(_, h, w)| (h, w))
    }
}

/// `GIF8[79]a` then width and height, little-endian.
fn gif_size(d: &mut Base64Stream<'_>) -> Option<(u32, u32)> {
    let mut head = [0u8; 10];
    if d.read(&mut head) < 10 {
        return None;
    }
    if !(head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a")) {
        return None;
    }
    let [_, _, _, _, _, _, w0, w1, h0, h1] = head;
    Some((u32::from(u16::from_le_bytes([w0, w1])), u32::from(u16::from_le_bytes([h0, h1]))))
}

/// The PNG signature, then 8-byte steps (as SpamAssassin reads) until an `IHDR` of
/// length 13 or `IEND`.
fn png_size(d: &mut Base64Stream<'_>) -> Option<(u32, u32)> {
    let mut sig = [0u8; 8];
    if d.read(&mut sig) < 8 || sig != *b"\x89PNG\r\n\x1a\n" {
        return None;
    }
    loop {
        let mut chunk = [0u8; 8];
        let n = d.read(&mut chunk);
        if n == 0 {
            return None;
        }
        let [l0, l1, l2, l3, t0, t1, t2, t3] = chunk;
        let len = u32::from_be_bytes([l0, l1, l2, l3]);
        let kind = [t0, t1, t2, t3];
        if n == 8 && kind == *b"IEND" {
            return None;
        }
        if n == 8 && kind == *b"IHDR" && len == 13 {
            let mut ihdr = [0u8; 8];
            if d.read(&mut ihdr) < 8 {
                return None;
            }
            let [w0, w1, w2, w3, h0, h1, h2, h3] = ihdr;
            return Some((u32::from_be_bytes([w0, w1, w2, w3]), u32::from_be_bytes([h0, h1, h2, h3])));
        }
        if n < 8 {
            return None;
        }
    }
}

/// The JPEG segments up to the first start-of-frame, whose height and width it holds.
fn jpeg_size(d: &mut Base64Stream<'_>) -> Option<(u32, u32)> {
    let mut soi = [0u8; 2];
    if d.read(&mut soi) < 2 || soi != [0xff, 0xd8] {
        return None;
    }
    loop {
        let mut head = [0u8; 4];
        if d.read(&mut head) < 4 {
            return None;
        }
        let [ff, mark, l0, l1] = head;
        let len = u16::from_be_bytes([l0, l1]);
        if ff != 0xff || mark == 0xda || mark == 0xd9 || len < 2 {
            return None;
        }
        let body = usize::from(len) - 2;
        let sof = matches!(mark, 0xc0..=0xc3 | 0xc5..=0xc7 | 0xc9..=0xcb | 0xcd..=0xcf);
        if sof {
            let mut frame = [0u8; 5];
            let want = body.min(5);
            if d.read(frame.get_mut(..want).unwrap_or(&mut [])) < 5 {
                return None;
            }
            let [_, h0, h1, w0, w1] = frame;
            return Some((u32::from(u16::from_be_bytes([w0, w1])), u32::from(u16::from_be_bytes([h0, h1]))));
        }
        if d.skip(body) < body {
            return None;
        }
    }
}

const INVALID: u8 = 0xff;
const PAD: u8 = 0xfe;

fn b64_value(b: u8) -> u8 {
    match b {
        b'A'..=b'Z' => b - b'A',
        b'a'..=b'z' => b - b'a' + 26,
        b'0'..=b'9' => b - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        b'=' => PAD,
        _ => INVALID,
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Base64 decoded on demand with SpamAssassin's rules (those of `msg::decode`): white
/// space ignored; for clean input an inner `=` counts as `A`, otherwise bytes outside
/// the alphabet are dropped and an inner `=` counts as `/`; trailing `=` are padding.
/// Whether the input is clean is only looked up when an `=` is met, so reading an
/// image header does not walk the whole image.
struct Base64Stream<'a> {
    src: &'a [u8],
    pos: usize,
    /// The value of an inner `=` and one past the last data character, once needed.
    pad: Option<(u8, usize)>,
    acc: u32,
    sextets: u32,
    out: [u8; 3],
    out_pos: usize,
    out_len: usize,
}

impl<'a> Base64Stream<'a> {
    fn new(src: &'a [u8]) -> Base64Stream<'a> {
        Base64Stream { src, pos: 0, pad: None, acc: 0, sextets: 0, out: [0; 3], out_pos: 0, out_len: 0 }
    }

    /// The inner `=` value and the end of the data, from a walk over the whole text.
    fn pad(&mut self) -> (u8, usize) {
        if let Some(p) = self.pad {
            return p;
        }
        let mut count = 0usize;
        let mut clean = true;
        let mut end = 0;
        for (i, &b) in self.src.iter().enumerate() {
            if is_space(b) {
                continue;
            }
            count += 1;
            match b64_value(b) {
                INVALID => clean = false,
                PAD => {}
                _ => end = i + 1,
            }
        }
        clean = clean && count >= 2 && count % 4 == 0;
        let p = (if clean { 0 } else { 63 }, end);
        self.pad = Some(p);
        p
    }

    /// Writes out the last, partial group; `None` when nothing is left.
    fn flush(&mut self) -> Option<()> {
        let (acc, n) = (self.acc, self.sextets);
        self.acc = 0;
        self.sextets = 0;
        self.out_pos = 0;
        self.out_len = match n {
            2 => {
                self.out = [(acc >> 4) as u8, 0, 0];
                1
            }
            3 => {
                self.out = [(acc >> 10) as u8, (acc >> 2) as u8, 0];
                2
            }
            _ => return None,
        };
        Some(())
    }

    fn next(&mut self) -> Option<u8> {
        loop {
            if self.out_pos < self.out_len {
                let b = self.out.get(self.out_pos).copied();
                self.out_pos += 1;
                return b;
            }
            let Some(&b) = self.src.get(self.pos) else {
                self.flush()?;
                continue;
            };
            let v = match b64_value(b) {
                PAD => {
                    let (inner, end) = self.pad();
                    if self.pos >= end {
                        // Only padding and dropped bytes follow.
                        self.pos = self.src.len();
                        self.flush()?;
                        continue;
                    }
                    inner
                }
                INVALID => {
                    self.pos += 1;
                    continue;
                }
                v => v,
            };
            self.pos += 1;
            self.acc = (self.acc << 6) | u32::from(v);
            self.sextets += 1;
            if self.sextets == 4 {
                let acc = self.acc;
                self.out = [(acc >> 16) as u8, (acc >> 8) as u8, acc as u8];
                self.out_pos = 0;
                self.out_len = 3;
                self.acc = 0;
                self.sextets = 0;
            }
        }
    }

    /// Fills `buf` as far as the data goes; returns how many bytes were read.
    fn read(&mut self, buf: &mut [u8]) -> usize {
        let mut n = 0;
        for slot in buf.iter_mut() {
            match self.next() {
                Some(b) => {
                    *slot = b;
                    n += 1;
                }
                None => break,
            }
        }
        n
    }

    /// Skips up to `n` bytes; returns how many there were.
    fn skip(&mut self, n: usize) -> usize {
        let mut k = 0;
        while k < n && self.next().is_some() {
            k += 1;
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::vec::Vec;

    fn b64(data: &[u8]) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut s = String::new();
        for (i, c) in data.chunks(3).enumerate() {
            if i > 0 && i % 19 == 0 {
                s.push('\n');
            }
            let n = c.len();
            let v = (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
            for k in 0..4 {
                if k <= n {
                    s.push(char::from(A[((v >> (18 - 6 * k)) & 63) as usize]));
                } else {
                    s.push('=');
                }
            }
        }
        s
    }

    fn decoded(text: &[u8]) -> Vec<u8> {
        let mut d = Base64Stream::new(text);
        core::iter::from_fn(|| d.next()).collect()
    }

    #[test]
    fn stream_decoding_table() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"aGVsbG8=", b"hello"),
            (b"aGVs\nbG8=\n", b"hello"),
            (b"aGVsbG8", b"hello"),
            (b"aGVsbG8g!!d29ybGQ=", b"hello world"),
            (b"", b""),
            (b"QQ==", b"A"),
            (b"QQ==QUJD", b"A\0\0ABC"),
            (b"QQ==!QUJD", b"A\x0f\xffABC"),
            (b"QUJD====", b"ABC"),
        ];
        for (text, want) in cases {
            assert_eq!(decoded(text), *want, "{:?}", core::str::from_utf8(text));
        }
    }

    #[test]
    fn image_headers() {
        let gif = b"GIF89a\x2c\x01\x96\x00\x80\x00\x00";
        assert_eq!(gif_size(&mut Base64Stream::new(b64(gif).as_bytes())), Some((300, 150)));
        let mut png = Vec::from(&b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x02\x00\x00\x00\x01\x00\x08\x02"[..]);
        png.extend_from_slice(&[0; 10]);
        assert_eq!(png_size(&mut Base64Stream::new(b64(&png).as_bytes())), Some((512, 256)));
        let mut jpeg = Vec::from(&b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"[..]);
        jpeg.extend_from_slice(b"\xff\xc0\x00\x11\x08\x00\x64\x00\xc8\x03\x01\x22\x00");
        assert_eq!(jpeg_size(&mut Base64Stream::new(b64(&jpeg).as_bytes())), Some((200, 100)));
        assert_eq!(jpeg_size(&mut Base64Stream::new(b64(b"\xff\xd8\xff\xda\x00\x10").as_bytes())), None);
        assert_eq!(gif_size(&mut Base64Stream::new(b64(b"GIF8").as_bytes())), None);
    }

    #[test]
    fn range_checks() {
        assert!(in_range(1.0, 1.0, Some(1.0), false));
        assert!(!in_range(1.0, 1.0, Some(1.0), true));
        assert!(in_range(5.0, 2.0, None, false));
        assert!(!in_range(1.0, 2.0, None, false));
    }
}
