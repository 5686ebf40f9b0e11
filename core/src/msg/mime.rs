//! Content-Type parsing as SpamAssassin's `Util::parse_content_type` does it.

use alloc::vec::Vec;

use super::decode::is_perl_space;

/// A byte range inside the parsed header value.
pub(crate) type Range = (usize, usize);

/// What a Content-Type value says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ContentType {
    /// Where the lowercased `type/subtype` was written in the output buffer.
    pub mime: Range,
    /// The boundary parameter, quotes removed.
    pub boundary: Option<Range>,
    /// The charset parameter.
    pub charset: Option<Range>,
    /// The name or filename parameter.
    pub name: Option<Range>,
    /// No usable type was given (text/plain assumed).
    pub missing: bool,
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Positions just after each case-insensitive occurrence of `key` that starts at a
/// word boundary (`\bkey`).
fn keyword_ends<'v>(value: &'v [u8], key: &'static [u8]) -> impl Iterator<Item = usize> + 'v {
    let mut from = 0;
    core::iter::from_fn(move || {
        while from + key.len() <= value.len() {
            let at = from;
            from += 1;
            let cand = value.get(at..at + key.len())?;
            if !cand.eq_ignore_ascii_case(key) {
                continue;
            }
            let boundary_ok = at == 0 || !value.get(at - 1).copied().is_some_and(is_word);
            // `\b` also needs the keyword to start with a word character, which all ours do.
            if boundary_ok {
                return Some(at + key.len());
            }
        }
        None
    })
}

fn skip_spaces(value: &[u8], mut i: usize) -> usize {
    while value.get(i).copied().is_some_and(is_perl_space) {
        i += 1;
    }
    i
}

/// `\bboundary\s*=\s*("[^"]+|[^\s";]+(?=[\s;]|$))`, quotes removed.
pub(crate) fn find_boundary(value: &[u8]) -> Option<Range> {
    for after in keyword_ends(value, b"boundary") {
        let mut i = skip_spaces(value, after);
        if value.get(i) != Some(&b'=') {
            continue;
        }
        i = skip_spaces(value, i + 1);
        if value.get(i) == Some(&b'"') {
            let start = i + 1;
            let len = value.get(start..).unwrap_or(&[]).iter().take_while(|&&b| b != b'"').count();
            if len > 0 {
                return Some((start, start + len));
            }
            continue;
        }
        let start = i;
        let len = value
            .get(start..)
            .unwrap_or(&[])
            .iter()
            .take_while(|&&b| !is_perl_space(b) && b != b'"' && b != b';')
            .count();
        let next = value.get(start + len).copied();
        if len > 0 && (next.is_none() || next.is_some_and(|b| is_perl_space(b) || b == b';')) {
            return Some((start, start + len));
        }
    }
    None
}

/// `\bKEY\s*=\s*["']?(.*?)["']?(?:;|$)` for the first occurrence of any of `keys`.
fn find_param(value: &[u8], keys: &[&'static [u8]]) -> Option<Range> {
    // The leftmost occurrence of any key wins, as in a regex alternation.
    let mut best: Option<(usize, Range)> = None;
    for &key in keys {
        for after in keyword_ends(value, key) {
            let mut i = skip_spaces(value, after);
            if value.get(i) != Some(&b'=') {
                continue;
            }
            i = skip_spaces(value, i + 1);
            if matches!(value.get(i), Some(b'"' | b'\'')) {
                i += 1;
            }
            let start = i;
            let mut e = start;
            loop {
                match value.get(e) {
                    None | Some(b';') => break,
                    Some(b'"' | b'\'') if matches!(value.get(e + 1), None | Some(b';')) => break,
                    Some(_) => e += 1,
                }
            }
            let at = after - key.len();
            if best.is_none_or(|(b, _)| at < b) {
                best = Some((at, (start, e)));
            }
            break;
        }
    }
    best.map(|(_, r)| r)
}

/// Bytes SpamAssassin strips from a MIME type after lowercasing it.
fn stripped(b: u8) -> bool {
    matches!(b, 0x00..=0x20 | 0x7f..=0xff | b'"' | b'(' | b')' | b',' | b':'..=b'?' | b'@' | b'['..=b']')
}

/// Parses a Content-Type value (`None` when the header is absent), writing the
/// lowercased `type/subtype` to `out`.
pub(crate) fn parse_content_type(value: Option<&[u8]>, out: &mut Vec<u8>) -> ContentType {
    let default: &[u8] = b"text/plain; charset=us-ascii";
    let (ct, mut missing) = match value {
        Some(v) if !v.is_empty() && v != b"0" => (v, false),
        _ => (default, true),
    };
    let boundary = if missing { None } else { find_boundary(ct) };
    let charset = if missing { None } else { find_param(ct, &[b"charset"]) };
    let name = if missing { None } else { find_param(ct, &[b"name", b"filename"]) };
    // Type: leading space off, cut at ';', then `[^/]+(?:/[^/\s]*)?`.
    let lead = ct.iter().take_while(|&&b| is_perl_space(b)).count();
    let body = ct.get(lead..).unwrap_or(&[]);
    let body = body.get(..memchr::memchr(b';', body).unwrap_or(body.len())).unwrap_or(&[]);
    let major_len = body.iter().take_while(|&&b| b != b'/').count();
    let mut type_len = major_len;
    if major_len > 0 && body.get(major_len) == Some(&b'/') {
        let minor = body.get(major_len + 1..).unwrap_or(&[]);
        type_len = major_len + 1 + minor.iter().take_while(|&&b| b != b'/' && !is_perl_space(b)).count();
    }
    let raw_type = if major_len > 0 { body.get(..type_len).unwrap_or(&[]) } else { &[][..] };
    let start = out.len();
    if raw_type.is_empty() {
        missing = true;
    }
    let is_text = raw_type.len() >= 4
        && raw_type.get(..4).is_some_and(|p| p.eq_ignore_ascii_case(b"text"))
        && !raw_type.get(4).copied().is_some_and(is_word);
    let keep_text = [&b"text/x-vcard"[..], b"text/calendar", b"text/html"]
        .iter()
        .any(|k| raw_type.eq_ignore_ascii_case(k));
    if raw_type.is_empty() || (is_text && !keep_text) {
        out.extend_from_slice(b"text/plain");
    } else {
        out.extend(raw_type.iter().map(u8::to_ascii_lowercase).filter(|&b| !stripped(b)));
    }
    ContentType { mime: (start, out.len()), boundary, charset, name, missing }
}

/// Whether a Content-Disposition value or a name parameter names an HTML file
/// (`name=\s*"?([^";]+)"?` ending in `.htm`, `.html`, `.shtml`).
pub(crate) fn disposition_name(value: &[u8]) -> Option<&[u8]> {
    let mut from = 0;
    while let Some(pos) = value.get(from..).and_then(|v| find_ci(v, b"name=")) {
        let mut i = skip_spaces(value, from + pos + 5);
        if value.get(i) == Some(&b'"') {
            i += 1;
        }
        let len = value.get(i..).unwrap_or(&[]).iter().take_while(|&&b| b != b'"' && b != b';').count();
        if len > 0 {
            return value.get(i..i + len);
        }
        from += pos + 1;
    }
    None
}

fn find_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle))
}

/// `\.s?html?$` case-insensitively.
pub(crate) fn is_html_name(name: &[u8]) -> bool {
    let lower = |i: usize| name.len().checked_sub(i).and_then(|j| name.get(j)).map(u8::to_ascii_lowercase);
    // Ends in "htm" or "html", preceded by "." or ".s".
    let (h_at, ok) = if lower(1) == Some(b'l') { (4, lower(2) == Some(b'm')) } else { (3, lower(1) == Some(b'm')) };
    if !ok || lower(h_at - 1) != Some(b't') || lower(h_at) != Some(b'h') {
        return false;
    }
    lower(h_at + 1) == Some(b'.') || (lower(h_at + 1) == Some(b's') && lower(h_at + 2) == Some(b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(v: &[u8], r: Option<Range>) -> Option<&[u8]> {
        r.and_then(|(s, e)| v.get(s..e))
    }

    #[test]
    fn content_type_table() {
        // (value, type, boundary, charset, name, missing)
        type Case<'a> = (Option<&'a [u8]>, &'a [u8], Option<&'a [u8]>, Option<&'a [u8]>, Option<&'a [u8]>, bool);
        let cases: &[Case] = &[
            (None, b"text/plain", None, None, None, true),
            (Some(b"text/html; charset=utf-8"), b"text/html", None, Some(b"utf-8"), None, false),
            (Some(b"TEXT/HTML;CHARSET=\"UTF-8\""), b"text/html", None, Some(b"UTF-8"), None, false),
            (Some(b"multipart/mixed; boundary=\"abc def\""), b"multipart/mixed", Some(b"abc def"), None, None, false),
            (Some(b"multipart/mixed; boundary=abc;x=1"), b"multipart/mixed", Some(b"abc"), None, None, false),
            (Some(b"multipart/mixed;\tBOUNDARY = \"q"), b"multipart/mixed", Some(b"q"), None, None, false),
            (Some(b"multipart/mixed; xboundary=no"), b"multipart/mixed", None, None, None, false),
            (Some(b"multipart/mixed; boundary=\"\"; boundary=b2"), b"multipart/mixed", Some(b"b2"), None, None, false),
            (Some(b"text/enriched"), b"text/plain", None, None, None, false),
            (Some(b"text"), b"text/plain", None, None, None, false),
            (Some(b"text/x-vcard"), b"text/x-vcard", None, None, None, false),
            (Some(b"textual/thing"), b"textual/thing", None, None, None, false),
            (Some(b"  image/GIF  ; name=\"a.gif\""), b"image/gif", None, None, Some(b"a.gif"), false),
            (Some(b"application/x(y)z"), b"application/xyz", None, None, None, false),
            (Some(b"application/octet-stream; filename='x.html'"), b"application/octet-stream", None, None, Some(b"x.html"), false),
            (Some(b"; charset=utf-8"), b"text/plain", None, Some(b"utf-8"), None, true),
            (Some(b"text/plain; charset=\"utf-8\" ; format=flowed"), b"text/plain", None, Some(b"utf-8\" "), None, false),
            (Some(b"a/b/c"), b"a/b", None, None, None, false),
        ];
        for &(value, ty, boundary, charset, name, missing) in cases {
            let mut out = Vec::new();
            let ct = parse_content_type(value, &mut out);
            let v = value.unwrap_or(b"");
            assert_eq!(out.get(ct.mime.0..ct.mime.1), Some(ty), "{:?}", value.map(core::str::from_utf8));
            assert_eq!(sub(v, ct.boundary), boundary, "boundary of {:?}", core::str::from_utf8(v));
            assert_eq!(sub(v, ct.charset), charset, "charset of {:?}", core::str::from_utf8(v));
            assert_eq!(sub(v, ct.name), name, "name of {:?}", core::str::from_utf8(v));
            assert_eq!(ct.missing, missing);
        }
    }

    #[test]
    fn html_names() {
        let cases: &[(&[u8], bool)] = &[
            (b"a.html", true),
            (b"a.HTM", true),
            (b"x.shtml", true),
            (b"x.xhtml", false),
            (b"html", false),
            (b"a.txt", false),
            (b".htm", true),
            (b"", false),
        ];
        for (name, want) in cases {
            assert_eq!(is_html_name(name), *want, "{:?}", core::str::from_utf8(name));
        }
        assert_eq!(disposition_name(b"attachment; filename=\"page.html\""), Some(&b"page.html"[..]));
        assert_eq!(disposition_name(b"inline"), None);
    }
}
