//! Transfer decodings as SpamAssassin's `Util::base64_decode` and `Util::qp_decode`
//! apply them: tolerant of bad input, never failing.

use alloc::vec::Vec;

/// Perl's `\s` on bytes: space, tab, LF, CR, form feed, vertical tab.
pub(crate) fn is_perl_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0c | 0x0b)
}

/// The first occurrence of `needle` in `hay`, as `memchr::memmem::find` gives it,
/// for a short needle whose first byte is rare in `hay`: no searcher to build.
pub(crate) fn find_short(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let Some((&first, tail)) = needle.split_first() else { return Some(0) };
    let mut from = 0;
    while let Some(k) = hay.get(from..).and_then(|h| memchr::memchr(first, h)) {
        let at = from + k;
        let after = hay.get(at + 1..)?;
        if after.starts_with(tail) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

const INVALID: u8 = 0xff;
const PAD: u8 = 0xfe;

/// Base64 alphabet value of each byte; `PAD` for `=`, `INVALID` otherwise.
static B64: [u8; 256] = {
    let mut t = [INVALID; 256];
    let mut i = 0u8;
    while i < 26 {
        t[(b'A' + i) as usize] = i;
        t[(b'a' + i) as usize] = 26 + i;
        i += 1;
    }
    let mut d = 0u8;
    while d < 10 {
        t[(b'0' + d) as usize] = 52 + d;
        d += 1;
    }
    t[b'+' as usize] = 62;
    t[b'/' as usize] = 63;
    t[b'=' as usize] = PAD;
    t
};

/// Appends the base64 decoding of `src` to `out`, as SpamAssassin does.
///
/// White space is ignored. When the rest is clean base64 (alphabet and `=` only,
/// length a multiple of 4), an `=` inside the data counts as `A`; otherwise bytes
/// outside the alphabet are dropped and an inner `=` counts as `/` (SpamAssassin's
/// uudecode path). Trailing `=` are padding; a lone trailing sextet is dropped.
pub(crate) fn base64_decode(src: &[u8], out: &mut Vec<u8>) {
    let mut count = 0usize;
    let mut clean = true;
    let mut last_data = None;
    for (i, &b) in src.iter().enumerate() {
        if is_perl_space(b) {
            continue;
        }
        count += 1;
        match B64[b as usize] {
            INVALID => clean = false,
            PAD => {}
            _ => last_data = Some(i),
        }
    }
    let Some(last_data) = last_data else { return };
    clean = clean && count >= 2 && count % 4 == 0;
    let inner_pad = if clean { 0 } else { 63 };
    out.reserve(count / 4 * 3 + 3);
    let mut acc = 0u32;
    let mut n = 0u32;
    for &b in src.get(..=last_data).unwrap_or(&[]) {
        let v = match B64[b as usize] {
            INVALID => continue,
            PAD => inner_pad,
            v => v,
        };
        acc = (acc << 6) | u32::from(v);
        n += 1;
        if n == 4 {
            out.extend_from_slice(&[(acc >> 16) as u8, (acc >> 8) as u8, acc as u8]);
            acc = 0;
            n = 0;
        }
    }
    match n {
        2 => out.push((acc >> 4) as u8),
        3 => out.extend_from_slice(&[(acc >> 10) as u8, (acc >> 2) as u8]),
        _ => {}
    }
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Appends the quoted-printable decoding of `src` (a body) to `out`, CRLF turned to LF.
///
/// As SpamAssassin: white space before a line end is dropped, `=` before a line end
/// joins lines, `=XX` (either case) becomes a byte, anything else stays as it is.
pub(crate) fn qp_decode(src: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.reserve(src.len());
    let mut rest = src;
    // Pass 1: trailing white space and soft line breaks.
    while !rest.is_empty() {
        let (line, had_nl, next) = match memchr::memchr(b'\n', rest) {
            Some(i) => (rest.get(..i).unwrap_or(&[]), true, rest.get(i + 1..).unwrap_or(&[])),
            None => (rest, false, &[][..]),
        };
        rest = next;
        if !had_nl {
            out.extend_from_slice(line);
            break;
        }
        let mut content = line;
        if let [head @ .., b'\r'] = content {
            content = head;
        }
        while let [head @ .., b' ' | b'\t'] = content {
            content = head;
        }
        if let [head @ .., b'='] = content {
            out.extend_from_slice(head);
        } else {
            out.extend_from_slice(content);
            out.push(b'\n');
        }
    }
    // Pass 2, in place: `=XX` escapes, then CRLF to LF.
    let mut r = start;
    let mut w = start;
    let end = out.len();
    while r < end {
        // Bytes other than `=` and LF are kept as they are: move them in one go.
        let plain = out.get(r..end).map_or(0, |s| memchr::memchr2(b'=', b'\n', s).unwrap_or(s.len()));
        if plain > 0 {
            if w < r && r + plain <= out.len() {
                out.copy_within(r..r + plain, w);
            }
            w += plain;
            r += plain;
            continue;
        }
        let b = out.get(r).copied().unwrap_or(0);
        let mut byte = b;
        let mut used = 1;
        if b == b'=' {
            let h = out.get(r + 1).copied().and_then(hex_val);
            let l = out.get(r + 2).copied().and_then(hex_val);
            if let (Some(h), Some(l)) = (h, l) {
                byte = (h << 4) | l;
                used = 3;
            }
        }
        if byte == b'\n' && w > start && out.get(w - 1) == Some(&b'\r') {
            w -= 1;
        }
        if let Some(slot) = out.get_mut(w) {
            *slot = byte;
        }
        w += 1;
        r += used;
    }
    out.truncate(w);
}

/// Appends the RFC 2047 `Q` decoding of an encoded word's text: `_` is a space, `=XX` a byte.
pub(crate) fn q_word_decode(src: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while let Some(&b) = src.get(i) {
        match b {
            b'_' => {
                out.push(b' ');
                i += 1;
            }
            b'=' => {
                let h = src.get(i + 1).copied().and_then(hex_val);
                let l = src.get(i + 2).copied().and_then(hex_val);
                if let (Some(h), Some(l)) = (h, l) {
                    out.push((h << 4) | l);
                    i += 3;
                } else {
                    out.push(b'=');
                    i += 1;
                }
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
}

/// Replaces CRLF by LF in `buf[start..]`, in place.
pub(crate) fn squash_crlf(buf: &mut Vec<u8>, start: usize) {
    let Some(first) = buf.get(start..).and_then(|s| find_short(s, b"\r\n")) else {
        return;
    };
    let mut w = start + first;
    let mut r = w;
    let end = buf.len();
    while r < end {
        let b = buf.get(r).copied().unwrap_or(0);
        if b == b'\r' && buf.get(r + 1) == Some(&b'\n') {
            r += 1;
            continue;
        }
        if let Some(slot) = buf.get_mut(w) {
            *slot = b;
        }
        w += 1;
        r += 1;
    }
    buf.truncate(w);
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn b64(s: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        base64_decode(s, &mut v);
        v
    }

    #[test]
    fn base64_table() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"aGVsbG8gd29ybGQ=", b"hello world"),
            (b"aGVs\nbG8g\r\nd29y bGQ=", b"hello world"),
            (b"aGVsbG8", b"hello"),
            (b"aGVsbG8==", b"hello"),
            (b"aGVs*bG8!", b"hello"),
            (b"", b""),
            (b"====", b""),
            (b"QQ", b"A"),
            (b"QUI", b"AB"),
            (b"QUJD", b"ABC"),
            (b"QUJDR", b"ABC"),
            // Clean data: an inner '=' counts as 'A'.
            (b"QQ==QUJD", b"A\x00\x00ABC"),
            // Dirty data: an inner '=' counts as '/'.
            (b"QQ==QUJD!", b"A\x0f\xffABC"),
        ];
        for (input, want) in cases {
            assert_eq!(b64(input), *want, "input {:?}", core::str::from_utf8(input));
        }
    }

    fn qp(s: &[u8]) -> Vec<u8> {
        let mut v = vec![b'x'];
        qp_decode(s, &mut v);
        v.remove(0);
        v
    }

    #[test]
    fn qp_table() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"caf=C3=A9", b"caf\xc3\xa9"),
            (b"caf=c3=a9", b"caf\xc3\xa9"),
            (b"soft=\nbreak", b"softbreak"),
            (b"soft=\r\nbreak", b"softbreak"),
            (b"trail   \nx", b"trail\nx"),
            (b"trail = \nx", b"trail x"),
            (b"crlf\r\nline", b"crlf\nline"),
            (b"bad=ZZ=4", b"bad=ZZ=4"),
            (b"==\n41", b"A"),
            (b"=0D=0A", b"\n"),
            (b"end  ", b"end  "),
            (b"a=\n", b"a"),
            (b"x\r\r\nz", b"x\nz"),
            (b"\r=0Ax", b"\nx"),
            (b"=0D\nx", b"\nx"),
            (b"a=3D=3D\n=3Db", b"a==\n=b"),
            (b"no escapes here\nline two\n", b"no escapes here\nline two\n"),
            (b"=3D\r\nmore text after=\r\n=41", b"=\nmore text afterA"),
            (b"=", b"="),
            (b"=\r", b"=\r"),
        ];
        for (input, want) in cases {
            assert_eq!(qp(input), *want, "input {:?}", core::str::from_utf8(input));
        }
    }

    #[test]
    fn find_short_table() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"ab=?cd", b"=?"),
            (b"a==b=?", b"=?"),
            (b"a=b", b"=?"),
            (b"=", b"=?"),
            (b"", b"=?"),
            (b"abc", b""),
            (b"x\r\r\n", b"\r\n"),
            (b"100%%20x", b"%20"),
            (b"&amp;&#", b"&#"),
            (b"&nbsp", b"&nbsp;"),
        ];
        for (hay, needle) in cases {
            assert_eq!(find_short(hay, needle), memchr::memmem::find(hay, needle), "{hay:?} {needle:?}");
        }
    }

    #[test]
    fn q_word_table() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"caf=C3=A9_au_lait", b"caf\xc3\xa9 au lait"),
            (b"a=5Fb", b"a_b"),
            (b"=_x", b"= x"),
            (b"=4", b"=4"),
        ];
        for (input, want) in cases {
            let mut v = Vec::new();
            q_word_decode(input, &mut v);
            assert_eq!(v, *want);
        }
    }

    #[test]
    fn squash_crlf_table() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"a\r\nb\r\n", b"a\nb\n"),
            (b"a\rb\n", b"a\rb\n"),
            (b"\r\r\n", b"\r\n"),
            (b"none", b"none"),
        ];
        for (input, want) in cases {
            let mut v = b"keep\r\n".to_vec();
            v.extend_from_slice(input);
            squash_crlf(&mut v, 6);
            assert_eq!(v.get(6..).unwrap_or(&[]), *want);
        }
    }
}
