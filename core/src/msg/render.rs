//! Text assembly as SpamAssassin's `Message::get_body_text_array_common` and
//! `get_decoded_body_text_array` do it: per-part scan-size cuts, white space
//! folding into paragraphs, and the split of long lines.

use alloc::vec::Vec;
use core::ops::Range;

use super::lines::{lines, next_line, Eol};

/// SpamAssassin's `MAX_BODY_LINE_LENGTH`.
pub(crate) const MAX_LINE: usize = 2048;

/// Whether any line of `src`, terminator included, is longer than `MAX_LINE`.
fn has_long_line(src: &[u8], term: u8) -> bool {
    if src.len() <= MAX_LINE {
        return false;
    }
    let mut last = 0;
    for nl in memchr::memchr_iter(term, src) {
        if nl + 1 - last > MAX_LINE {
            return true;
        }
        last = nl + 1;
    }
    src.len() - last > MAX_LINE
}

/// Where a leaf's text sits in its message, for SpamAssassin's squash of long
/// runs of blank lines (done on a message's body lines before MIME parsing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RunContext {
    /// Blank lines of the message body just before the text (a part's separator line).
    pub blank_before: usize,
    /// The text starts the message body.
    pub body_top: bool,
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|&b| super::decode::is_perl_space(b))
}

/// Which lines of a blank run to keep. SpamAssassin keeps 20 of a longer run: the
/// first and the last 19 (21 at the top of a body: the first two and the last 19).
fn keep_blank(index: usize, total: usize, top: bool) -> bool {
    if top {
        total <= 21 || index < 2 || index + 19 >= total
    } else {
        total <= 20 || index == 0 || index + 19 >= total
    }
}

/// Length of the run of blank lines starting at `pos`.
fn blank_run(buf: &[u8], pos: usize, end: usize, eol: Eol) -> usize {
    lines(buf, pos, end, eol).take_while(|l| is_blank(l.text(buf))).count()
}

/// Whether `src` holds a stretch of white space with `len` or more `term` bytes in
/// it. Reads one byte in `len` (any such stretch covers one of them) and looks
/// around the white ones.
fn has_space_stretch(src: &[u8], len: usize, term: u8) -> bool {
    let Some(mut p) = len.checked_sub(1) else { return true };
    while let Some(&b) = src.get(p) {
        if !super::decode::is_perl_space(b) {
            p += len;
            continue;
        }
        let before = src.get(..p).unwrap_or(&[]).iter().rev().take_while(|&&b| super::decode::is_perl_space(b)).count();
        let after = src.get(p..).unwrap_or(&[]).iter().take_while(|&&b| super::decode::is_perl_space(b)).count();
        if before + after >= len {
            let stretch = src.get(p - before..p + after).unwrap_or(&[]);
            if memchr::memchr_iter(term, stretch).count() >= len {
                return true;
            }
        }
        // The byte after the stretch is not white: a later stretch starts beyond it.
        p += after + len;
    }
    false
}

/// Whether the text has a blank run SpamAssassin would shorten.
fn has_long_blank_run(buf: &[u8], start: usize, end: usize, eol: Eol, ctx: RunContext) -> bool {
    // More than 20 blank lines (20 after a blank separator) span at least 19 line
    // ends with only white space around them.
    let term = if eol == Eol::Cr { b'\r' } else { b'\n' };
    if !has_space_stretch(buf.get(start..end.min(buf.len())).unwrap_or(&[]), 19, term) {
        return false;
    }
    let mut run = 0usize;
    let mut first = true;
    for line in lines(buf, start, end, eol) {
        if is_blank(line.text(buf)) {
            if run == 0 && first {
                run = ctx.blank_before;
            }
            run += 1;
            if run > 20 {
                return true;
            }
        } else {
            run = 0;
        }
        first = false;
    }
    false
}

/// A leaf's text as SpamAssassin holds it before transfer decoding: line ends made
/// `\n`, long blank runs squashed, and, inside `levels` multipart containers, long
/// lines cut every 2048 bytes with `levels` line breaks (each multipart level
/// splits once more).
///
/// Returns false when `buf[start..end]` is already in that form; otherwise the text
/// is written to `out` (cleared first).
pub(crate) fn prepare_content(buf: &[u8], start: usize, end: usize, eol: Eol, levels: u16, ctx: RunContext, out: &mut Vec<u8>) -> bool {
    let src = buf.get(start..end).unwrap_or(&[]);
    let needs_eol = match eol {
        Eol::Lf => false,
        Eol::Crlf => super::decode::find_short(src, b"\r\n").is_some(),
        Eol::Cr => memchr::memchr(b'\r', src).is_some(),
    };
    let term = if eol == Eol::Cr { b'\r' } else { b'\n' };
    let needs_split = levels > 0 && has_long_line(src, term);
    let needs_squash = has_long_blank_run(buf, start, end, eol, ctx);
    if !needs_eol && !needs_split && !needs_squash {
        return false;
    }
    out.clear();
    out.reserve(src.len() + 16);
    let mut pos = start;
    let mut first = true;
    while let Some(line) = next_line(buf, pos, end, eol) {
        let text = line.text(buf);
        if needs_squash && is_blank(text) {
            // The whole run at once: keep what SpamAssassin keeps.
            let before = if first { ctx.blank_before } else { 0 };
            let top = first && ctx.body_top;
            let inside = blank_run(buf, pos, end, eol);
            let total = before + inside;
            for (k, l) in lines(buf, pos, end, eol).take(inside).enumerate() {
                if keep_blank(before + k, total, top) {
                    let full = if eol == Eol::Lf { buf.get(l.start..l.end - usize::from(l.terminated())).unwrap_or(&[]) } else { l.text(buf) };
                    out.extend_from_slice(full);
                    if l.terminated() {
                        out.push(b'\n');
                    }
                }
                pos = l.end;
            }
            first = false;
            continue;
        }
        first = false;
        pos = line.end;
        let terminated = line.terminated();
        // Without CRLF mode a CR before the LF is text, as SpamAssassin keeps it.
        let text = if eol == Eol::Lf {
            buf.get(line.start..line.end - usize::from(terminated)).unwrap_or(text)
        } else {
            text
        };
        if !needs_split {
            out.extend_from_slice(text);
            if terminated {
                out.push(b'\n');
            }
            continue;
        }
        let total = text.len() + usize::from(terminated);
        let mut off = 0;
        while total - off > MAX_LINE {
            push_virtual(out, text, terminated, off, off + MAX_LINE);
            for _ in 0..levels {
                out.push(b'\n');
            }
            off += MAX_LINE;
        }
        push_virtual(out, text, terminated, off, total);
    }
    true
}

/// Appends bytes `a..b` of `text` followed (virtually) by its `\n` terminator.
fn push_virtual(out: &mut Vec<u8>, text: &[u8], terminated: bool, a: usize, b: usize) {
    let len = text.len();
    out.extend_from_slice(text.get(a.min(len)..b.min(len)).unwrap_or(&[]));
    if terminated && b > len {
        out.push(b'\n');
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// Number of characters (UTF-8 lead bytes and stray bytes) in `s`.
fn char_count(s: &[u8]) -> usize {
    s.len() - s.iter().filter(|&&b| is_continuation(b)).count()
}

/// Byte offset of character `n` of `s` (or `s.len()`).
fn char_offset(s: &[u8], n: usize) -> usize {
    let mut seen = 0;
    for (i, &b) in s.iter().enumerate() {
        if !is_continuation(b) {
            if seen == n {
                return i;
            }
            seen += 1;
        }
    }
    s.len()
}

/// Length to keep of a rendered part under `body_part_scan_size` (counted in
/// characters as SpamAssassin counts decoded text): up to a line end or space
/// within 1024 characters after the limit, else at the limit.
pub(crate) fn body_cut(text: &[u8], scansize: usize) -> Option<usize> {
    if scansize == 0 || text.len() <= scansize {
        return None;
    }
    let ascii = text.is_ascii();
    if !ascii && char_count(text) <= scansize {
        return None;
    }
    let at = if ascii { scansize } else { char_offset(text, scansize) };
    let near = |i: usize| i - at <= 1024 || char_count(text.get(at..i).unwrap_or(&[])) <= 1024;
    for needle in [b'\n', b' '] {
        if let Some(i) = text.get(at..).and_then(|t| memchr::memchr(needle, t)).map(|i| at + i) {
            if near(i) {
                return Some(i + 1);
            }
        }
    }
    Some(at)
}

/// Length to keep of a decoded part under `rawbody_part_scan_size` (bytes): up to a
/// line end, `>` or space within 1024 bytes after the limit, else at the limit.
pub(crate) fn rawbody_cut(text: &[u8], scansize: usize) -> Option<usize> {
    if scansize == 0 || text.len() <= scansize {
        return None;
    }
    for needle in [b'\n', b'>', b' '] {
        if let Some(i) = text.get(scansize..).and_then(|t| memchr::memchr(needle, t)) {
            if i <= 1024 {
                return Some(scansize + i + 1);
            }
        }
    }
    Some(scansize)
}

/// Class of a byte for white space folding: 1 ASCII space, 2 a possible multi-byte
/// Unicode space lead, 0 other.
static WS_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b' ' as usize] = 1;
    t[b'\t' as usize] = 1;
    t[b'\n' as usize] = 1;
    t[b'\r' as usize] = 1;
    t[0x0b] = 1;
    t[0x0c] = 1;
    t[0xc2] = 2;
    t[0xe1] = 2;
    t[0xe2] = 2;
    t[0xe3] = 2;
    t
};

/// Whether eight bytes are all printable ASCII or space, with no two spaces
/// together (the bit tricks may say no wrongly, never yes wrongly).
fn plain_word(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    let spaces = {
        let x = w ^ (ONES * 0x20);
        x.wrapping_sub(ONES) & !x & HIGH
    };
    let del = {
        let x = w ^ (ONES * 0x7f);
        x.wrapping_sub(ONES) & !x & HIGH
    };
    w & HIGH == 0 && below_space == 0 && del == 0 && spaces & (spaces >> 8) == 0
}

/// Fold classes: 0 plain ASCII, 1 space, 2 other white space, 3 NUL or 8-bit.
static FOLD_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = match i as u8 {
            b' ' => 1,
            b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => 2,
            0 | 0x80..=0xff => 3,
            _ => 0,
        };
        i += 1;
    }
    t
};

/// Length of the Unicode white space character (Perl's `\s` on characters) at the
/// start of `s`, or 0.
pub(crate) fn unicode_space_len(s: &[u8]) -> usize {
    match s {
        [0xc2, 0x85 | 0xa0, ..] => 2,
        [0xe1, 0x9a, 0x80, ..] => 3,
        [0xe2, 0x80, 0x80..=0x8a | 0xa8 | 0xa9 | 0xaf, ..] => 3,
        [0xe2, 0x81, 0x9f, ..] => 3,
        [0xe3, 0x80, 0x80, ..] => 3,
        _ => 0,
    }
}

/// Gathers the text of the parts, separated as SpamAssassin separates them, and
/// whether Perl would hold the result as characters (any part decoded from
/// non-ASCII text, or HTML with an entity above U+00FF).
#[derive(Debug, Default)]
pub(crate) struct BodyWriter {
    started: bool,
    flagged: bool,
}

impl BodyWriter {
    /// Whether any text (even white space) was gathered.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Whether the gathered text counts as characters.
    pub fn flagged(&self) -> bool {
        self.flagged
    }

    /// Adds text; `flagged` says whether this part is held as characters.
    pub fn push(&mut self, gather: &mut Vec<u8>, text: &[u8], flagged: bool) {
        if text.is_empty() {
            return;
        }
        self.started = true;
        self.flagged |= flagged;
        gather.extend_from_slice(text);
    }
}

/// Folds white space the way SpamAssassin builds its body text and appends the
/// result: a run holding two or more line ends becomes one line end (with a space
/// kept on either side if the run had blanks there), any other run one space.
///
/// With `chars`, Unicode spaces count as white space (Perl's `\s` on characters);
/// without, characters U+0080..=U+00FF are written as single bytes, as Perl writes
/// a byte string.
pub(crate) fn fold(src: &[u8], out: &mut Vec<u8>, chars: bool) {
    out.reserve(src.len());
    let mut in_space = false;
    let mut newlines = 0u32;
    let mut before = false;
    let mut after = false;
    let flush = |out: &mut Vec<u8>, in_space: &mut bool, newlines: u32, before: bool, after: bool| {
        if !*in_space {
            return;
        }
        *in_space = false;
        if newlines >= 2 {
            if before {
                out.push(b' ');
            }
            out.push(b'\n');
            if after {
                out.push(b' ');
            }
        } else {
            out.push(b' ');
        }
    };
    let mut i = 0;
    while i < src.len() {
        let rest = src.get(i..).unwrap_or(&[]);
        // A run of plain bytes, single spaces between words included; eight at a
        // time while they are printable ASCII with no two spaces together.
        let mut plain = 0;
        if rest.first().is_some_and(|&b| FOLD_CLASS[b as usize] == 0) {
            while let (Some(head), Some(&next)) =
                (rest.get(plain..plain + 8).and_then(|h| <[u8; 8]>::try_from(h).ok()), rest.get(plain + 8))
            {
                let [.., last] = head;
                // A space ending the eight bytes must be followed by a plain byte.
                if !plain_word(u64::from_le_bytes(head)) || (last == b' ' && FOLD_CLASS[next as usize] != 0) {
                    break;
                }
                plain += 8;
            }
        }
        while let Some(&b) = rest.get(plain) {
            match FOLD_CLASS[b as usize] {
                0 => plain += 1,
                1 if plain > 0 && rest.get(plain + 1).is_some_and(|&n| FOLD_CLASS[n as usize] == 0) => plain += 2,
                _ => break,
            }
        }
        if plain > 0 {
            flush(out, &mut in_space, newlines, before, after);
            out.extend_from_slice(rest.get(..plain).unwrap_or(&[]));
            i += plain;
            continue;
        }
        let b = rest.first().copied().unwrap_or(0);
        let space = if WS_CLASS[b as usize] == 1 {
            1
        } else if chars {
            unicode_space_len(rest)
        } else {
            0
        };
        if space > 0 {
            if !in_space {
                in_space = true;
                newlines = 0;
                before = false;
                after = false;
            }
            if b == b'\n' {
                newlines = newlines.saturating_add(1);
                after = false;
            } else if newlines == 0 {
                before = true;
            } else {
                after = true;
            }
            i += space;
            continue;
        }
        flush(out, &mut in_space, newlines, before, after);
        match (chars, b, rest.get(1)) {
            // SpamAssassin marks paragraphs with NUL, so a NUL in the text is a line break too.
            (_, 0, _) => {
                out.push(b'\n');
                i += 1;
            }
            (false, 0xc2 | 0xc3, Some(&c)) if c & 0xc0 == 0x80 => {
                out.push(((b & 0x03) << 6) | (c & 0x3f));
                i += 2;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    flush(out, &mut in_space, newlines, before, after);
}

/// SpamAssassin's `split_into_array_of_short_lines` on `src[start..]`: lines longer
/// than 2048 bytes (line end included) are cut after the last space within the
/// first 2049 bytes, or at 2048. Writes the result to `out` and returns true only
/// when something was cut.
pub(crate) fn split_long_lines(src: &[u8], start: usize, out: &mut Vec<u8>) -> bool {
    let text = src.get(start..).unwrap_or(&[]);
    if !has_long_line(text, b'\n') {
        return false;
    }
    out.clear();
    out.extend_from_slice(src.get(..start).unwrap_or(&[]));
    let mut rest = text;
    while !rest.is_empty() {
        let len = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
        let mut line = rest.get(..len).unwrap_or(&[]);
        rest = rest.get(len..).unwrap_or(&[]);
        while line.len() > MAX_LINE {
            let window = line.get(..=MAX_LINE).unwrap_or(line);
            let cut = memchr::memrchr(b' ', window).map_or(MAX_LINE, |i| i + 1);
            out.extend_from_slice(line.get(..cut).unwrap_or(&[]));
            out.push(b'\n');
            line = line.get(cut..).unwrap_or(&[]);
        }
        out.extend_from_slice(line);
    }
    true
}

/// SpamAssassin's `split_into_array_of_short_paragraphs`: the pieces `rawbody` rules
/// match one at a time. A text of up to 2048 bytes is one piece; a longer one is cut
/// into pieces of 2 to 4 KiB, each ending at a line end, else a `>`, else a space
/// found from 2048 bytes on, else at 2049 bytes.
pub(crate) fn rawbody_pieces(text: &[u8]) -> impl Iterator<Item = Range<usize>> + Clone + '_ {
    let (mut ofs, mut done) = (0usize, false);
    core::iter::from_fn(move || {
        if done {
            return None;
        }
        let end = if text.len() - ofs <= 2 * MAX_LINE { text.len() } else { piece_end(text, ofs) };
        let piece = ofs..end;
        (ofs, done) = (end, end >= text.len());
        Some(piece)
    })
}

/// The end of the piece starting at `ofs` of a text with more than 4096 bytes left.
fn piece_end(text: &[u8], ofs: usize) -> usize {
    let from = ofs + MAX_LINE;
    for needle in [b'\n', b'>', b' '] {
        if let Some(i) = text.get(from..).and_then(|t| memchr::memchr(needle, t)) {
            // `j - ofs + 1 <= 2 * MAX_LINE`, j = from + i.
            if MAX_LINE + i < 2 * MAX_LINE {
                return from + i + 1;
            }
        }
    }
    from + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn rawbody_pieces_table() {
        // (text, lengths of its pieces), as `split_into_array_of_short_paragraphs` cuts.
        let lines = |n: usize, len: usize| alloc::format!("{}\n", "a".repeat(len - 1)).repeat(n);
        let cases: Vec<(Vec<u8>, Vec<usize>)> = vec![
            (Vec::new(), vec![0]),
            (b"short\ntext".to_vec(), vec![10]),
            (lines(1, 2048).into_bytes(), vec![2048]),
            // Up to 4096 bytes: one piece.
            (lines(40, 100).into_bytes(), vec![4000]),
            // The first line end from byte 2048 on ends a piece.
            (lines(50, 100).into_bytes(), vec![2100, 2900]),
            (lines(100, 100).into_bytes(), vec![2100, 2100, 2100, 3700]),
            // No line end: a `>`, else a space; the first from byte 2048 on.
            (alloc::format!("{}>{}", "b".repeat(2999), "c".repeat(2000)).into_bytes(), vec![3000, 2000]),
            (alloc::format!("{}>{} {}", "b".repeat(2000), "c".repeat(999), "d".repeat(2000)).into_bytes(), vec![3001, 2000]),
            // A line end too far (a piece at most 4096 bytes): the `>` before it.
            (alloc::format!("{}>{}\n{}", "b".repeat(2100), "c".repeat(2000), "d".repeat(500)).into_bytes(), vec![2101, 2501]),
            // Nothing to cut at: 2049 bytes.
            ("e".repeat(5000).into_bytes(), vec![2049, 2951]),
        ];
        for (text, want) in cases {
            let got: Vec<usize> = rawbody_pieces(&text).map(|r| r.len()).collect();
            assert_eq!(got, want, "a text of {} bytes", text.len());
            assert!(rawbody_pieces(&text).zip(rawbody_pieces(&text).skip(1)).all(|(a, b)| a.end == b.start));
        }
    }

    fn fold_all(pieces: &[&[u8]]) -> Vec<u8> {
        let mut w = BodyWriter::default();
        let mut gather = Vec::new();
        for p in pieces {
            w.push(&mut gather, p, true);
        }
        let mut out = Vec::new();
        fold(&gather, &mut out, w.flagged());
        out
    }

    #[test]
    fn folding_table() {
        let cases: &[(&[&[u8]], &[u8])] = &[
            (&[b"a\nb"], b"a b"),
            (&[b"a\n\nb"], b"a\nb"),
            (&[b"a  \n \n  b"], b"a \n b"),
            (&[b"a\n", b"\nb"], b"a\nb"),
            (&[b"a\t\tb  c"], b"a b c"),
            (&[b"line one\nline two  \n\n\n para"], b"line one line two \n para"),
            (&[b"x\xc2\xa0y"], b"x y"),
            (&[b"x\xe2\x80\x83\n\ny"], b"x \ny"),
            (&[b"caf\xc3\xa9\n"], b"caf\xc3\xa9 "),
            (&[b"\n\n\nstart"], b"\nstart"),
            (&[b"\xe2\x82\xac"], b"\xe2\x82\xac"),
            (&[b"of \x00binary"], b"of \nbinary"),
            (&[b"abcdefg \nhijklmno  pqrstuvw x\ty"], b"abcdefg hijklmno pqrstuvw x y"),
            (&[b"abcdefgh        ijklmnop"], b"abcdefgh ijklmnop"),
        ];
        for (pieces, want) in cases {
            assert_eq!(fold_all(pieces), *want, "{pieces:?}");
        }
        // As bytes: no Unicode spaces, Latin-1 characters as single bytes.
        let mut out = Vec::new();
        fold(b"x\xc2\xa0y caf\xc3\xa9", &mut out, false);
        assert_eq!(out, b"x\xa0y caf\xe9");
    }

    #[test]
    fn split_table() {
        let long_words: Vec<u8> = b"word ".iter().copied().cycle().take(5000).collect();
        let mut out = Vec::new();
        assert!(split_long_lines(&long_words, 0, &mut out));
        let lines: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines.first().map(|l| l.len()), Some(2045));
        assert!(lines.iter().all(|l| l.len() <= 2049));
        let no_space = vec![b'x'; 4100];
        assert!(split_long_lines(&no_space, 0, &mut out));
        let lens: Vec<usize> = out.split(|&b| b == b'\n').map(<[u8]>::len).collect();
        assert_eq!(lens, vec![2048, 2048, 4]);
        assert!(!split_long_lines(b"short\nlines\n", 0, &mut out));
        // A 2048-byte line plus its line end is cut too, leaving an empty line.
        let mut exact = vec![b'y'; 2048];
        exact.push(b'\n');
        assert!(split_long_lines(&exact, 0, &mut out));
        assert_eq!(out.len(), 2050);
    }

    #[test]
    fn cut_table() {
        let mut text = vec![b'a'; 100];
        text.extend_from_slice(b" tail\nmore");
        assert_eq!(body_cut(&text, 0), None);
        assert_eq!(body_cut(&text, 1000), None);
        assert_eq!(body_cut(&text, 50), Some(106));
        assert_eq!(rawbody_cut(&text, 50), Some(106));
        let far = vec![b'b'; 3000];
        assert_eq!(body_cut(&far, 10), Some(10));
        // Characters, not bytes: 60 two-byte characters cut at 50 characters.
        let wide: Vec<u8> = b"\xc3\xa9".iter().copied().cycle().take(120).collect();
        assert_eq!(body_cut(&wide, 50), Some(100));
        assert_eq!(body_cut(&wide, 60), None);
        let mut html = vec![b'c'; 100];
        html.extend_from_slice(b"<b>x");
        assert_eq!(rawbody_cut(&html, 50), Some(103));
    }

    #[test]
    fn space_stretch_table() {
        let spaced = |n: usize| -> Vec<u8> {
            let mut v = b"text ".to_vec();
            v.extend(core::iter::repeat_n(b'\n', n));
            v.extend_from_slice(b"more words here and there");
            v
        };
        for n in 0..60 {
            let text = spaced(n);
            // Shifted so the stretch meets the sampled bytes at every offset.
            for shift in 0..20 {
                let mut t = vec![b'x'; shift];
                t.extend_from_slice(&text);
                let want = n >= 19;
                assert_eq!(has_space_stretch(&t, 19, b'\n'), want, "n {n} shift {shift}");
            }
        }
        assert!(!has_space_stretch(b"", 19, b'\n'));
        assert!(has_space_stretch(b"\n\t\n\n \n\n\n", 6, b'\n'));
        assert!(!has_space_stretch(b"\n\t\n\nx\n\n\n", 6, b'\n'));
        // White space without enough line ends is no blank run.
        assert!(!has_space_stretch(b"a          \n                   b", 2, b'\n'));
        assert!(has_space_stretch(b"a          \n         \n          b", 2, b'\n'));
        assert!(!has_space_stretch(b"a                                   b", 3, b'\n'));
        assert!(has_space_stretch(b"a\r\r\rb", 3, b'\r'));
        assert!(!has_space_stretch(b"a\r\r\rb", 3, b'\n'));
        // Lines of blanks with spaces in them count too.
        let blanks: Vec<u8> = b" \n".iter().copied().cycle().take(42).collect();
        assert!(has_long_blank_run(&blanks, 0, blanks.len(), Eol::Lf, RunContext::default()));
        assert!(!has_long_blank_run(&blanks, 0, 40, Eol::Lf, RunContext::default()));
        assert!(has_long_blank_run(&blanks, 0, 40, Eol::Lf, RunContext { blank_before: 1, body_top: false }));
        // The shortest long run: 20 empty lines after a blank separator.
        assert!(has_long_blank_run(b"\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n", 0, 20, Eol::Lf, RunContext { blank_before: 1, body_top: false }));
    }

    #[test]
    fn prepare_table() {
        let mut out = Vec::new();
        let ctx = RunContext::default();
        assert!(!prepare_content(b"a\nb\n", 0, 4, Eol::Lf, 1, ctx, &mut out));
        assert!(prepare_content(b"a\r\nb\r\n", 0, 6, Eol::Crlf, 0, ctx, &mut out));
        assert_eq!(out, b"a\nb\n");
        assert!(!prepare_content(b"a\r\nb\r\n", 0, 6, Eol::Lf, 0, ctx, &mut out));
        assert!(prepare_content(b"a\rb", 0, 3, Eol::Cr, 0, ctx, &mut out));
        assert_eq!(out, b"a\nb");
        let mut long = vec![b'z'; 2100];
        long.push(b'\n');
        assert!(prepare_content(&long, 0, long.len(), Eol::Lf, 2, ctx, &mut out));
        assert_eq!(out.len(), 2101 + 2);
        assert_eq!(out.get(2048..2051), Some(&b"\n\nz"[..]));
        // Blank runs: 25 tab lines become 20 (the first and the last 19); with the
        // part's separator line counted, 19 of them remain; at a body top, 21.
        let mut text = b"a\n".to_vec();
        for _ in 0..25 {
            text.extend_from_slice(b"\t\n");
        }
        text.extend_from_slice(b"b\n");
        assert!(prepare_content(&text, 0, text.len(), Eol::Lf, 0, ctx, &mut out));
        assert_eq!(out.iter().filter(|&&b| b == b'\t').count(), 20);
        let blanks_first = text.get(2..).unwrap_or(&[]);
        let sep = RunContext { blank_before: 1, body_top: false };
        assert!(prepare_content(blanks_first, 0, blanks_first.len(), Eol::Lf, 0, sep, &mut out));
        assert_eq!(out.iter().filter(|&&b| b == b'\t').count(), 19);
        let top = RunContext { blank_before: 0, body_top: true };
        assert!(prepare_content(blanks_first, 0, blanks_first.len(), Eol::Lf, 0, top, &mut out));
        assert_eq!(out.iter().filter(|&&b| b == b'\t').count(), 21);
        assert!(!prepare_content(b"\n\n\nx\n", 0, 5, Eol::Lf, 0, ctx, &mut out));
    }
}
