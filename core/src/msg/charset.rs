//! Charset names and conversion to UTF-8 the way SpamAssassin's `Node::_normalize`
//! does it with `normalize_charset` on (its default).
//!
//! Single-byte charsets are converted with tables; UTF-16 is detected as SpamAssassin
//! detects it. Multi-byte East Asian charsets have no tables here: their bytes are kept.

use alloc::vec::Vec;

use super::charset_tables as t;

/// What a declared charset name means to the converter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Charset {
    /// US-ASCII and its aliases.
    Ascii,
    /// UTF-8.
    Utf8,
    /// UTF-16 of either byte order, detected from the data.
    Utf16,
    /// UTF-7 (RFC 2152).
    Utf7,
    /// ISO-8859-1 proper (C1 controls at 0x80..=0x9F).
    Latin1,
    /// A single-byte charset: code points of bytes 0x80..=0xFF, 0 where undefined.
    Table(&'static [u16; 128]),
    /// A multi-byte charset we keep as bytes.
    Multibyte,
    /// A name we do not know: 8-bit text falls back to Windows-1252 as in SpamAssassin.
    Unknown,
}

/// Removes surrounding white space and quotes from a charset parameter.
fn trim_name(name: &[u8]) -> &[u8] {
    let mut n = name;
    while let [first, rest @ ..] = n {
        if first.is_ascii_whitespace() || *first == b'"' || *first == b'\'' {
            n = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = n {
        if last.is_ascii_whitespace() || *last == b'"' || *last == b'\'' {
            n = rest;
        } else {
            break;
        }
    }
    n
}

/// Interprets a declared charset name (case and punctuation insensitive).
pub(crate) fn lookup(name: &[u8]) -> Charset {
    let name = trim_name(name);
    // Compact form: lowercase alphanumerics only, at most 24 of them.
    let mut buf = [0u8; 24];
    let mut n = 0;
    for &b in name {
        if b.is_ascii_alphanumeric() {
            match buf.get_mut(n) {
                Some(slot) => *slot = b.to_ascii_lowercase(),
                None => return Charset::Unknown,
            }
            n += 1;
        }
    }
    let c = buf.get(..n).unwrap_or(&[]);
    // SpamAssassin decodes a declared ISO-8859-1 as Windows-1252; other Latin-1
    // aliases go through Encode, which keeps C1 controls.
    if matches!(name.len(), 9 | 10)
        && (name.eq_ignore_ascii_case(b"iso-8859-1") || name.eq_ignore_ascii_case(b"iso8859-1"))
    {
        return Charset::Table(&t::CP1252);
    }
    if let Some(num) = c.strip_prefix(b"iso8859") {
        return iso8859(num);
    }
    if let Some(num) = c.strip_prefix(b"latin") {
        return match num {
            b"1" => Charset::Latin1,
            b"2" => Charset::Table(&t::ISO_8859_2),
            b"3" => Charset::Table(&t::ISO_8859_3),
            b"4" => Charset::Table(&t::ISO_8859_4),
            b"5" => Charset::Table(&t::ISO_8859_9),
            b"6" => Charset::Table(&t::ISO_8859_10),
            b"7" => Charset::Table(&t::ISO_8859_13),
            b"8" => Charset::Table(&t::ISO_8859_14),
            b"9" => Charset::Table(&t::ISO_8859_15),
            b"10" => Charset::Table(&t::ISO_8859_16),
            _ => Charset::Unknown,
        };
    }
    for prefix in [&b"windows"[..], b"cp", b"win", b"xcp"] {
        if let Some(num) = c.strip_prefix(prefix) {
            if let Some(cs) = windows(num) {
                return cs;
            }
        }
    }
    match c {
        b"usascii" | b"ascii" | b"ansix341968" | b"ansix341986" | b"iso646us" | b"us" | b"ibm367"
        | b"cp367" | b"csascii" => Charset::Ascii,
        b"utf8" | b"unicode11utf8" | b"xunicode20utf8" => Charset::Utf8,
        b"utf16" | b"utf16le" | b"utf16be" | b"ucs2" | b"unicode" => Charset::Utf16,
        b"utf7" | b"unicode11utf7" | b"csunicode11utf7" => Charset::Utf7,
        b"l1" | b"ibm819" | b"csisolatin1" => Charset::Latin1,
        b"koi8r" | b"cskoi8r" => Charset::Table(&t::KOI8_R),
        b"koi8u" => Charset::Table(&t::KOI8_U),
        b"ibm866" | b"866" | b"csibm866" => Charset::Table(&t::CP866),
        b"macroman" | b"xmacroman" | b"macintosh" | b"mac" => Charset::Table(&t::MACROMAN),
        b"tis620" | b"thai" => Charset::Table(&t::ISO_8859_11),
        b"cyrillic" => Charset::Table(&t::ISO_8859_5),
        b"arabic" => Charset::Table(&t::ISO_8859_6),
        b"greek" | b"greek8" => Charset::Table(&t::ISO_8859_7),
        b"hebrew" => Charset::Table(&t::ISO_8859_8),
        b"gb2312" | b"gbk" | b"gb18030" | b"euccn" | b"xeuccn" | b"big5" | b"big5hkscs" | b"shiftjis"
        | b"sjis" | b"xsjis" | b"mskanji" | b"eucjp" | b"xeucjp" | b"euckr" | b"ksc56011987" | b"iso2022jp"
        | b"iso2022kr" | b"iso2022cn" | b"hzgb2312" | b"utf32" | b"utf32le"
        | b"utf32be" | b"euctw" | b"johab" => Charset::Multibyte,
        _ => Charset::Unknown,
    }
}

fn iso8859(num: &[u8]) -> Charset {
    match num {
        b"1" => Charset::Latin1,
        b"2" => Charset::Table(&t::ISO_8859_2),
        b"3" => Charset::Table(&t::ISO_8859_3),
        b"4" => Charset::Table(&t::ISO_8859_4),
        b"5" => Charset::Table(&t::ISO_8859_5),
        b"6" => Charset::Table(&t::ISO_8859_6),
        b"7" => Charset::Table(&t::ISO_8859_7),
        b"8" | b"8i" => Charset::Table(&t::ISO_8859_8),
        b"9" => Charset::Table(&t::ISO_8859_9),
        b"10" => Charset::Table(&t::ISO_8859_10),
        b"11" => Charset::Table(&t::ISO_8859_11),
        b"13" => Charset::Table(&t::ISO_8859_13),
        b"14" => Charset::Table(&t::ISO_8859_14),
        b"15" => Charset::Table(&t::ISO_8859_15),
        b"16" => Charset::Table(&t::ISO_8859_16),
        _ => Charset::Unknown,
    }
}

fn windows(num: &[u8]) -> Option<Charset> {
    Some(match num {
        b"1250" => Charset::Table(&t::CP1250),
        b"1251" => Charset::Table(&t::CP1251),
        b"1252" => Charset::Table(&t::CP1252),
        b"1253" => Charset::Table(&t::CP1253),
        b"1254" => Charset::Table(&t::CP1254),
        b"1255" => Charset::Table(&t::CP1255),
        b"1256" => Charset::Table(&t::CP1256),
        b"1257" => Charset::Table(&t::CP1257),
        b"1258" => Charset::Table(&t::CP1258),
        b"874" => Charset::Table(&t::CP874),
        b"866" => Charset::Table(&t::CP866),
        b"932" | b"936" | b"949" | b"950" => Charset::Multibyte,
        _ => return None,
    })
}

/// Appends the UTF-8 encoding of code point `cp` (U+FFFD if invalid).
pub(crate) fn push_char(out: &mut Vec<u8>, cp: u32) {
    let c = char::from_u32(cp).unwrap_or('\u{fffd}');
    let mut buf = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}

/// Appends `src` decoded with a single-byte table. With `strict`, stops and returns
/// false at the first undefined byte; otherwise undefined bytes become U+FFFD.
fn decode_table(src: &[u8], table: &[u16; 128], strict: bool, out: &mut Vec<u8>) -> bool {
    out.reserve(src.len() + src.len() / 2);
    let mut rest = src;
    while !rest.is_empty() {
        let ascii = rest.iter().position(|b| !b.is_ascii()).unwrap_or(rest.len());
        out.extend_from_slice(rest.get(..ascii).unwrap_or(&[]));
        let Some(&b) = rest.get(ascii) else { break };
        let cp = table.get(usize::from(b & 0x7f)).copied().unwrap_or(0);
        if cp == 0 {
            if strict {
                return false;
            }
            push_char(out, 0xfffd);
        } else {
            push_char(out, u32::from(cp));
        }
        rest = rest.get(ascii + 1..).unwrap_or(&[]);
    }
    true
}

fn decode_latin1(src: &[u8], out: &mut Vec<u8>) {
    out.reserve(src.len() + src.len() / 2);
    for &b in src {
        if b.is_ascii() {
            out.push(b);
        } else {
            push_char(out, u32::from(b));
        }
    }
}

/// Appends `src` as UTF-8, each invalid sequence replaced by U+FFFD.
fn decode_utf8_lossy(src: &[u8], out: &mut Vec<u8>) {
    for chunk in src.utf8_chunks() {
        out.extend_from_slice(chunk.valid().as_bytes());
        if !chunk.invalid().is_empty() {
            push_char(out, 0xfffd);
        }
    }
}

/// SpamAssassin's `detect_utf16`: the byte order from where spaces sit, or none.
/// Data starting with a byte order mark gets none (SpamAssassin leaves it to Perl, which fails).
fn detect_utf16(src: &[u8]) -> Option<bool> {
    if src.starts_with(b"\xff\xfe") || src.starts_with(b"\xfe\xff") {
        return None;
    }
    let (mut le, mut be) = (0u32, 0u32);
    let (mut even, mut odd) = (0u64, 0u64);
    for pair in src.chunks(2) {
        let a = pair.first().copied().unwrap_or(0);
        let b = pair.get(1).copied().unwrap_or(0);
        even += u64::from(a >> 4) + u64::from(a & 15);
        odd += u64::from(b >> 4) + u64::from(b & 15);
        if a == 0x20 && b == 0 {
            le += 1;
        }
        if a == 0 && b == 0x20 {
            be += 1;
        }
    }
    if even > odd * 4 {
        le += 1;
    }
    if odd * 4 > even {
        be += 1;
    }
    match le.cmp(&be) {
        core::cmp::Ordering::Greater => Some(true),
        core::cmp::Ordering::Less => Some(false),
        core::cmp::Ordering::Equal => None,
    }
}

/// Appends UTF-16 decoded to UTF-8. With `strict`, fails on any bad unit.
fn decode_utf16(src: &[u8], little: bool, strict: bool, out: &mut Vec<u8>) -> bool {
    if strict && src.len() % 2 != 0 {
        return false;
    }
    let units = src.chunks_exact(2).map(|p| {
        let (a, b) = (p.first().copied().unwrap_or(0), p.get(1).copied().unwrap_or(0));
        if little {
            u16::from_le_bytes([a, b])
        } else {
            u16::from_be_bytes([a, b])
        }
    });
    for c in char::decode_utf16(units) {
        match c {
            Ok(c) => push_char(out, u32::from(c)),
            Err(_) if strict => return false,
            Err(_) => push_char(out, 0xfffd),
        }
    }
    true
}

fn b64_value(b: u8) -> Option<u32> {
    Some(u32::from(match b {
        b'A'..=b'Z' => b - b'A',
        b'a'..=b'z' => b - b'a' + 26,
        b'0'..=b'9' => b - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    }))
}

/// Appends UTF-7 decoded to UTF-8. With `strict`, fails on 8-bit bytes or bad
/// UTF-16 inside a shifted section.
fn decode_utf7(src: &[u8], strict: bool, out: &mut Vec<u8>) -> bool {
    let mut i = 0;
    let mut pending_high: Option<u16> = None;
    while let Some(&b) = src.get(i) {
        if b >= 0x80 {
            if strict {
                return false;
            }
            push_char(out, 0xfffd);
            i += 1;
            continue;
        }
        if b != b'+' {
            out.push(b);
            i += 1;
            continue;
        }
        i += 1;
        if src.get(i) == Some(&b'-') {
            out.push(b'+');
            i += 1;
            continue;
        }
        // A shifted section: modified base64 of UTF-16 big-endian units.
        let mut bits = 0u32;
        let mut nbits = 0u32;
        while let Some(v) = src.get(i).copied().and_then(b64_value) {
            bits = (bits << 6) | v;
            nbits += 6;
            i += 1;
            if nbits >= 16 {
                nbits -= 16;
                let unit = ((bits >> nbits) & 0xffff) as u16;
                match (pending_high.take(), unit) {
                    (None, 0xd800..=0xdbff) => pending_high = Some(unit),
                    (Some(h), 0xdc00..=0xdfff) => {
                        let cp = 0x10000 + ((u32::from(h) - 0xd800) << 10) + (u32::from(unit) - 0xdc00);
                        push_char(out, cp);
                    }
                    (Some(_), _) | (None, 0xdc00..=0xdfff) => {
                        if strict {
                            return false;
                        }
                        push_char(out, 0xfffd);
                    }
                    (None, u) => push_char(out, u32::from(u)),
                }
            }
        }
        if src.get(i) == Some(&b'-') {
            i += 1;
        }
    }
    if pending_high.is_some() {
        if strict {
            return false;
        }
        push_char(out, 0xfffd);
    }
    true
}

/// The last resort of SpamAssassin for undecodable 8-bit text: Windows-1252.
fn fallback(src: &[u8], out: &mut Vec<u8>) {
    decode_table(src, &t::CP1252, false, out);
}

/// Body text to UTF-8 (`_normalize` without insisting on the declared charset).
///
/// Returns `src` itself when nothing changes; otherwise the converted text, written
/// into `out` (cleared first).
pub(crate) fn body_to_utf8<'s>(src: &'s [u8], cs: Charset, out: &'s mut Vec<u8>) -> &'s [u8] {
    out.clear();
    if cs == Charset::Utf7 {
        if decode_utf7(src, true, out) {
            return out.as_slice();
        }
        out.clear();
        if src.is_ascii() {
            return src;
        }
    }
    if src.is_ascii() {
        if cs == Charset::Utf16 && !src.is_empty() {
            if let Some(little) = detect_utf16(src) {
                if decode_utf16(src, little, true, out) {
                    return out.as_slice();
                }
                out.clear();
            }
        }
        return src;
    }
    if core::str::from_utf8(src).is_ok() {
        return src;
    }
    let done = match cs {
        Charset::Table(table) => {
            if decode_table(src, table, true, out) {
                true
            } else {
                out.clear();
                false
            }
        }
        Charset::Latin1 => {
            decode_latin1(src, out);
            true
        }
        Charset::Utf16 => match detect_utf16(src) {
            Some(little) => {
                if decode_utf16(src, little, true, out) {
                    true
                } else {
                    out.clear();
                    false
                }
            }
            None => false,
        },
        Charset::Multibyte => return src,
        Charset::Ascii | Charset::Utf8 | Charset::Utf7 | Charset::Unknown => false,
    };
    if !done {
        fallback(src, out);
    }
    out.as_slice()
}

/// Appends the text of encoded words to `out` as UTF-8, insisting on the declared
/// charset as SpamAssassin does for RFC 2047 words.
pub(crate) fn word_to_utf8(src: &[u8], cs: Charset, out: &mut Vec<u8>) {
    if cs == Charset::Utf7 {
        decode_utf7(src, false, out);
        return;
    }
    if src.is_ascii() {
        if cs == Charset::Utf16 && !src.is_empty() {
            if let Some(little) = detect_utf16(src) {
                decode_utf16(src, little, false, out);
                return;
            }
        }
        out.extend_from_slice(src);
        return;
    }
    match cs {
        Charset::Ascii => {
            for &b in src {
                if b.is_ascii() {
                    out.push(b);
                } else {
                    push_char(out, 0xfffd);
                }
            }
        }
        Charset::Utf8 => decode_utf8_lossy(src, out),
        Charset::Table(table) => {
            decode_table(src, table, false, out);
        }
        Charset::Latin1 => decode_latin1(src, out),
        Charset::Utf16 => match detect_utf16(src) {
            Some(little) => {
                decode_utf16(src, little, false, out);
            }
            None => fallback(src, out),
        },
        Charset::Multibyte => out.extend_from_slice(src),
        Charset::Utf7 | Charset::Unknown => fallback(src, out),
    }
}

/// Appends an 8-bit header value: kept if valid UTF-8, else read as Windows-1252.
pub(crate) fn header_to_utf8(src: &[u8], out: &mut Vec<u8>) {
    if core::str::from_utf8(src).is_ok() {
        out.extend_from_slice(src);
    } else {
        fallback(src, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_table() {
        let cases: &[(&[u8], Charset)] = &[
            (b"us-ascii", Charset::Ascii),
            (b"US-ASCII", Charset::Ascii),
            (b"ANSI_X3.4-1968", Charset::Ascii),
            (b"utf-8", Charset::Utf8),
            (b"\"UTF8\"", Charset::Utf8),
            (b"utf-8\" ", Charset::Utf8),
            (b"ISO-8859-1", Charset::Table(&t::CP1252)),
            (b"iso8859-1", Charset::Table(&t::CP1252)),
            (b"latin1", Charset::Latin1),
            (b"iso_8859-1", Charset::Latin1),
            (b"ISO-8859-15", Charset::Table(&t::ISO_8859_15)),
            (b"latin9", Charset::Table(&t::ISO_8859_15)),
            (b"windows-1252", Charset::Table(&t::CP1252)),
            (b"cp1251", Charset::Table(&t::CP1251)),
            (b"koi8-r", Charset::Table(&t::KOI8_R)),
            (b"gb2312", Charset::Multibyte),
            (b"iso-2022-jp", Charset::Multibyte),
            (b"utf-16le", Charset::Utf16),
            (b"x-unknown", Charset::Unknown),
            (b"", Charset::Unknown),
            (b"a-very-long-charset-name-that-is-not-real", Charset::Unknown),
        ];
        for (name, want) in cases {
            assert_eq!(lookup(name), *want, "{:?}", core::str::from_utf8(name));
        }
    }

    #[test]
    fn body_to_utf8_table() {
        let cases: &[(&[u8], &[u8], &[u8])] = &[
            (b"plain", b"us-ascii", b"plain"),
            (b"caf\xc3\xa9", b"iso-8859-1", b"caf\xc3\xa9"),
            (b"caf\xe9", b"iso-8859-1", b"caf\xc3\xa9"),
            (b"\x93q\x94", b"iso-8859-1", b"\xe2\x80\x9cq\xe2\x80\x9d"),
            (b"\x93q\x94", b"latin1", b"\xc2\x93q\xc2\x94"),
            (b"caf\xe9", b"us-ascii", b"caf\xc3\xa9"),
            (b"caf\xe9", b"utf-8", b"caf\xc3\xa9"),
            (b"\xa4", b"iso-8859-15", b"\xe2\x82\xac"),
            (b"\xc1\xc2", b"koi8-r", b"\xd0\xb0\xd0\xb1"),
            (b"\xb0\xa1", b"gb2312", b"\xb0\xa1"),
            (b"\x81x", b"windows-1252", b"\xef\xbf\xbdx"),
            (b"\xe9", b"x-unknown", b"\xc3\xa9"),
            // ISO-8859-8 leaves 0xA1 undefined: strict decoding fails, Windows-1252 follows.
            (b"\xa1", b"iso-8859-8", b"\xc2\xa1"),
            (b"h\x00i\x00 \x00", b"utf-16", b"hi "),
            (b"Fr+APY-sche 1+-1", b"utf-7", b"Fr\xc3\xb6sche 1+1"),
            (b"+2D3eAA-", b"UTF-7", b"\xf0\x9f\x98\x80"),
        ];
        for (src, cs, want) in cases {
            let mut out = Vec::new();
            let got = body_to_utf8(src, lookup(cs), &mut out);
            assert_eq!(got, *want, "{:?} as {:?}", src, core::str::from_utf8(cs));
        }
    }

    #[test]
    fn word_to_utf8_table() {
        let cases: &[(&[u8], &[u8], &[u8])] = &[
            (b"caf\xe9", b"iso-8859-1", b"caf\xc3\xa9"),
            (b"caf\xc3\xa9", b"iso-8859-1", b"caf\xc3\x83\xc2\xa9"),
            (b"caf\xe9", b"us-ascii", b"caf\xef\xbf\xbd"),
            (b"caf\xe9", b"utf-8", b"caf\xef\xbf\xbd"),
            (b"caf\xe9", b"x-bogus", b"caf\xc3\xa9"),
            (b"\xb0\xa1", b"big5", b"\xb0\xa1"),
            (b"ascii", b"koi8-r", b"ascii"),
            (b"M+APw-ller", b"utf-7", b"M\xc3\xbcller"),
        ];
        for (src, cs, want) in cases {
            let mut out = Vec::new();
            word_to_utf8(src, lookup(cs), &mut out);
            assert_eq!(out, *want, "{:?} as {:?}", src, core::str::from_utf8(cs));
        }
    }
}
