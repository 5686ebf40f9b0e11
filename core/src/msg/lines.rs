//! Line splitting over a byte range: LF (with CRLF) or, for text without any LF, bare CR.

/// How lines end in one source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Eol {
    /// `\n`; a `\r` before it is text (SpamAssassin keeps it in the body).
    Lf,
    /// CRLF, as SpamAssassin decides it: the first or last line ends in CRLF.
    Crlf,
    /// A bare `\r` (text with no `\n` at all).
    Cr,
}

/// Picks the line ending of `buf` (a message from its first header line): bare CR
/// if it has CRs and no LF, CRLF if its first or last line ends in CRLF.
pub(crate) fn detect_eol(buf: &[u8]) -> Eol {
    match memchr::memchr(b'\n', buf) {
        None if memchr::memchr(b'\r', buf).is_some() => Eol::Cr,
        None => Eol::Lf,
        Some(first) => {
            let crlf_at = |nl: usize| nl > 0 && buf.get(nl - 1) == Some(&b'\r');
            if crlf_at(first) || (buf.last() == Some(&b'\n') && crlf_at(buf.len() - 1)) {
                Eol::Crlf
            } else {
                Eol::Lf
            }
        }
    }
}

/// One line: `start..content_end` is its text, `end` is past its terminator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line {
    pub start: usize,
    pub content_end: usize,
    pub end: usize,
}

impl Line {
    /// The line's text without its terminator.
    pub fn text<'b>(&self, buf: &'b [u8]) -> &'b [u8] {
        buf.get(self.start..self.content_end).unwrap_or(&[])
    }

    /// Whether a terminator follows the text.
    pub fn terminated(&self) -> bool {
        self.end > self.content_end
    }
}

/// The line starting at `pos`, not reaching past `limit`; `None` at `limit`.
pub(crate) fn next_line(buf: &[u8], pos: usize, limit: usize, eol: Eol) -> Option<Line> {
    let limit = limit.min(buf.len());
    if pos >= limit {
        return None;
    }
    let hay = buf.get(pos..limit)?;
    let term = if eol == Eol::Cr { b'\r' } else { b'\n' };
    match memchr::memchr(term, hay) {
        Some(i) => {
            let at = pos + i;
            let content_end = if eol != Eol::Cr && at > pos && buf.get(at - 1) == Some(&b'\r') { at - 1 } else { at };
            Some(Line { start: pos, content_end, end: at + 1 })
        }
        None => Some(Line { start: pos, content_end: limit, end: limit }),
    }
}

/// Iterator over the lines of `buf[pos..limit]`.
pub(crate) fn lines(buf: &[u8], pos: usize, limit: usize, eol: Eol) -> impl Iterator<Item = Line> + '_ {
    let mut at = pos;
    core::iter::from_fn(move || {
        let line = next_line(buf, at, limit, eol)?;
        at = line.end;
        Some(line)
    })
}

/// The pieces of `buf` between `\n` bytes, as `buf.split(|&b| b == b'\n')` gives
/// them (an empty piece after a final `\n`), found with `memchr`.
pub(crate) fn split_lf(buf: &[u8]) -> impl Iterator<Item = &[u8]> + '_ {
    let mut rest = Some(buf);
    core::iter::from_fn(move || {
        let r = rest?;
        match memchr::memchr(b'\n', r) {
            Some(i) => {
                rest = r.get(i + 1..);
                r.get(..i)
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn line_table() {
        // (text, eol, [(text, terminated)])
        let cases: &[(&[u8], Eol, &[(&[u8], bool)])] = &[
            (b"a\nb\n", Eol::Lf, &[(b"a", true), (b"b", true)]),
            (b"a\r\nb", Eol::Crlf, &[(b"a", true), (b"b", false)]),
            (b"a\nb\r\nc\n", Eol::Lf, &[(b"a", true), (b"b", true), (b"c", true)]),
            (b"a\nb\r\n", Eol::Crlf, &[(b"a", true), (b"b", true)]),
            (b"a\rb\n", Eol::Lf, &[(b"a\rb", true)]),
            (b"a\rb\r", Eol::Cr, &[(b"a", true), (b"b", true)]),
            (b"\n\n", Eol::Lf, &[(b"", true), (b"", true)]),
            (b"", Eol::Lf, &[]),
        ];
        for (text, eol, want) in cases {
            assert_eq!(detect_eol(text), *eol);
            let got: Vec<(&[u8], bool)> = lines(text, 0, text.len(), *eol).map(|l| (l.text(text), l.terminated())).collect();
            assert_eq!(got.as_slice(), *want);
        }
    }

    #[test]
    fn split_lf_table() {
        let cases: &[&[u8]] = &[b"", b"\n", b"a", b"a\n", b"\na", b"a\nb", b"a\n\nb\n", b"\n\n\n", b"a\rb\r\n"];
        for text in cases {
            let want: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
            let got: Vec<&[u8]> = split_lf(text).collect();
            assert_eq!(got, want, "{:?}", core::str::from_utf8(text));
        }
    }
}
