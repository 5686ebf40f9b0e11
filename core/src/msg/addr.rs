//! Addresses and display names in From/To-style values, as SpamAssassin's
//! `:addr` and `:name` header modifiers give them (`Util::parse_header_addresses`,
//! its internal parser). Of Email::Address::XS, which SpamAssassin consults for values
//! its own parser gets wrong, only the reading of a value where that parser finds
//! nothing at all is emulated, for an address written whole after a `<`.

use alloc::vec::Vec;

use super::decode::is_perl_space;
use super::uri::is_fqdn_valid;

/// One address of a header value, as slices of the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Address<'v> {
    /// The display name as written (quotes and comments not yet removed).
    pub phrase: Option<&'v [u8]>,
    /// The address, cut after its domain.
    pub address: Option<&'v [u8]>,
    /// A comment after the address, `(...)` without the parentheses.
    pub comment: Option<&'v [u8]>,
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while s.get(i).copied().is_some_and(is_perl_space) {
        i += 1;
    }
    i
}

/// End of a quoted string starting at `i` (`"..."` with backslash escapes).
fn quoted_end(s: &[u8], i: usize) -> Option<usize> {
    if s.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    loop {
        match s.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => j += 2,
            _ => j += 1,
        }
    }
}

/// End of a phrase: quoted strings and runs of `[^",;<]`.
fn phrase_end(s: &[u8], mut i: usize) -> usize {
    loop {
        match s.get(i) {
            Some(b'"') => match quoted_end(s, i) {
                Some(e) => i = e,
                None => return i,
            },
            Some(b',' | b';' | b'<') | None => return i,
            Some(_) => {
                while s.get(i).is_some_and(|&b| !matches!(b, b'"' | b',' | b';' | b'<')) {
                    i += 1;
                }
            }
        }
    }
}

fn local_char(b: u8) -> bool {
    !(b == b'@' || is_perl_space(b) || matches!(b, b'<' | b'>' | b'(' | b')' | b'[' | b']' | b',' | b':' | b';'))
}

fn domain_char(b: u8) -> bool {
    !(b == b'"' || is_perl_space(b) || matches!(b, b'<' | b'>' | b'(' | b')' | b'[' | b']' | b',' | b':' | b';'))
}

/// End of `header_address_mailre` matched at `i`.
fn mailre_end(s: &[u8], i: usize) -> Option<usize> {
    // A quoted local part, or else (as Perl backtracks into the other alternative) an
    // unquoted one, whose bytes may be quotes too: `"Name"user@host`.
    let quoted = (s.get(i) == Some(&b'"')).then(|| quoted_end(s, i)).flatten().filter(|&j| s.get(j) == Some(&b'@'));
    let mut j = match quoted {
        Some(j) => j,
        None => {
            let n = s.get(i..)?.iter().take_while(|&&b| local_char(b)).count();
            if n == 0 {
                return None;
            }
            i + n
        }
    };
    if s.get(j) != Some(&b'@') {
        return None;
    }
    j += 1;
    if s.get(j) == Some(&b'[') {
        let n = s.get(j + 1..)?.iter().take_while(|b| b.is_ascii_digit() || matches!(b, b':' | b'.')).count();
        if n > 0 && s.get(j + 1 + n) == Some(&b']') {
            return Some(j + n + 2);
        }
    }
    let n = s.get(j..)?.iter().take_while(|&&b| domain_char(b)).count();
    (n > 0).then_some(j + n)
}

/// Optional `(comment)` then `\s*(?:[,;]|\z)` from `e`: (end, comment).
fn tail(s: &[u8], e: usize) -> Option<(usize, Option<(usize, usize)>)> {
    let t = skip_ws(s, e);
    if s.get(t) == Some(&b'(') {
        let mut j = t + 1;
        let close = loop {
            match s.get(j) {
                Some(b')') => break Some(j),
                Some(b'(') | None => break None,
                Some(b'\\') => j += 2,
                Some(_) => j += 1,
            }
        };
        if let Some(c) = close {
            let u = skip_ws(s, c + 1);
            match s.get(u) {
                None => return Some((u, Some((t + 1, c)))),
                Some(b',' | b';') => return Some((u + 1, Some((t + 1, c)))),
                _ => {}
            }
        }
    }
    match s.get(t) {
        None => Some((t, None)),
        Some(b',' | b';') => Some((t + 1, None)),
        _ => None,
    }
}

/// Trims white space off both ends of `s[a..b]`.
fn trimmed(s: &[u8], a: usize, b: usize) -> (usize, usize) {
    let mut a = a;
    let mut b = b;
    while a < b && s.get(a).copied().is_some_and(is_perl_space) {
        a += 1;
    }
    while b > a && s.get(b - 1).copied().is_some_and(is_perl_space) {
        b -= 1;
    }
    (a, b)
}

/// Whether `a` is acceptable to `_valid_parsed_address`.
fn valid_address(a: &[u8]) -> bool {
    !a.starts_with(b"\"\"@") && a.iter().filter(|&&b| b == b'"').count() != 1
}

/// Cut after the domain: `s/^(([^\@]*)\@([^\@]*)).*/$1/`.
fn cut_address(a: &[u8]) -> &[u8] {
    match memchr::memchr(b'@', a) {
        Some(at) => {
            let second = a.get(at + 1..).and_then(|r| memchr::memchr(b'@', r)).map_or(a.len(), |k| at + 1 + k);
            a.get(..second).unwrap_or(a)
        }
        None => a,
    }
}

/// The part of a value the parser works on: trailing space off and a group
/// name (`name: ... ;`) reduced to its members.
fn reduce(value: &[u8]) -> &[u8] {
    let (_, end) = trimmed(value, 0, value.len());
    let mut s = value.get(..end).unwrap_or(&[]);
    let name = s.iter().take_while(|&&b| !matches!(b, b'"' | b'(' | b')' | b'<' | b'>' | b':')).count();
    if name > 0 && s.get(name) == Some(&b':') {
        let from = skip_ws(s, name + 1);
        if s.get(from) == Some(&b';') {
            return &[];
        }
        s = s.get(from..).unwrap_or(&[]);
    }
    s
}

/// Iterator over the addresses of a header value (the raw value, as `:addr` uses).
pub struct Addresses<'v> {
    s: &'v [u8],
    pos: usize,
    /// Past the main loop: looking for `<addr>` in what was left.
    last_ditch: bool,
    done: bool,
    /// Whether the internal parser gave anything; Email::Address::XS's reading is
    /// taken only when it gave nothing.
    found: bool,
    xs_tried: bool,
}

/// The addresses SpamAssassin's internal parser finds in `value`, in order.
pub fn addresses(value: &[u8]) -> Addresses<'_> {
    let s = reduce(value);
    let done = !s.iter().any(|&b| !is_perl_space(b));
    Addresses { s, pos: 0, last_ditch: false, done, found: false, xs_tried: done }
}

impl<'v> Addresses<'v> {
    fn main_step(&mut self) -> Option<Address<'v>> {
        let s = self.s;
        let j = skip_ws(s, self.pos);
        if j >= s.len() {
            return None;
        }
        let ph = phrase_end(s, j);
        // A phrase (maybe empty) then `<address>`.
        let k = skip_ws(s, ph);
        if s.get(k) == Some(&b'<') {
            if let Some(gt) = s.get(k + 1..).and_then(|r| memchr::memchr(b'>', r)).map(|g| k + 1 + g) {
                let mut e = gt + 1;
                loop {
                    let t = skip_ws(s, e);
                    if s.get(t) != Some(&b'<') {
                        break;
                    }
                    match s.get(t + 1..).and_then(|r| memchr::memchr(b'>', r)) {
                        Some(g) => e = t + 1 + g + 1,
                        None => break,
                    }
                }
                let (a, b) = trimmed(s, k + 1, gt);
                let inner = s.get(a..b).unwrap_or(&[]);
                // `<\s*([^>\@]*\S+|\s*)\s*>`: nothing after an `@` is white space.
                let enclosed = inner.iter().position(|&b| b == b'@').is_none_or(|at| !inner.iter().skip(at).any(|&b| is_perl_space(b)));
                if let Some((end, comment)) = tail(s, e).filter(|_| enclosed) {
                    self.pos = end;
                    let address = (mailre_end(inner, 0) == Some(inner.len()) && valid_address(inner)).then(|| cut_address(inner));
                    let phrase = (ph > j).then(|| s.get(j..ph).unwrap_or(&[]));
                    return Some(self.finish(phrase, address, comment));
                }
            }
        }
        // A bare address.
        if let Some(me) = mailre_end(s, j) {
            if let Some((end, comment)) = tail(s, me) {
                self.pos = end;
                let a = s.get(j..me).unwrap_or(&[]);
                let address = valid_address(a).then(|| cut_address(a));
                return Some(self.finish(None, address, comment));
            }
        }
        // A phrase alone.
        if ph > j {
            if let Some((end, comment)) = tail(s, ph) {
                self.pos = end;
                return Some(self.finish(Some(s.get(j..ph).unwrap_or(&[])), None, comment));
            }
        }
        None
    }

    fn finish(&self, phrase: Option<&'v [u8]>, mut address: Option<&'v [u8]>, comment: Option<(usize, usize)>) -> Address<'v> {
        let comment = comment.map(|(a, b)| self.s.get(a..b).unwrap_or(&[]));
        let mut phrase = phrase.map(|p| {
            let (a, b) = trimmed(p, 0, p.len());
            p.get(a..b).unwrap_or(&[])
        });
        if let Some(p) = phrase {
            let looks_like_mail = mailre_end(p, 0) == Some(p.len())
                && valid_address(p)
                && p.get(p.iter().position(|&b| b == b'@').map_or(p.len(), |k| k + 1)..).is_some_and(|h| {
                    let h = h.get(..h.iter().position(|&b| b == b'@').unwrap_or(h.len())).unwrap_or(&[]);
                    is_fqdn_valid(h)
                });
            if address.is_none() && looks_like_mail {
                address = Some(cut_address(p));
                phrase = None;
            } else if address.is_some_and(|a| a == p) || p.is_empty() {
                phrase = None;
            }
        }
        if phrase.is_none() {
            phrase = comment;
        }
        Address { phrase, address, comment }
    }

    fn ditch_step(&mut self) -> Option<Address<'v>> {
        let s = self.s;
        while let Some(k) = s.get(self.pos..).and_then(|r| memchr::memchr(b'<', r)) {
            let start = self.pos + k + 1;
            self.pos = start;
            if let Some(me) = mailre_end(s, start) {
                if s.get(me) == Some(&b'>') {
                    let a = s.get(start..me).unwrap_or(&[]);
                    self.pos = me + 1;
                    if valid_address(a) {
                        return Some(Address { phrase: None, address: Some(cut_address(a)), comment: None });
                    }
                }
            }
        }
        None
    }
}

impl<'v> Iterator for Addresses<'v> {
    type Item = Address<'v>;

    fn next(&mut self) -> Option<Address<'v>> {
        match self.internal_step() {
            Some(a) => {
                self.found = true;
                Some(a)
            }
            None if !self.found && !self.xs_tried => {
                self.xs_tried = true;
                self.xs_step()
            }
            None => None,
        }
    }
}

impl<'v> Addresses<'v> {
    /// The next address of SpamAssassin's internal parser.
    fn internal_step(&mut self) -> Option<Address<'v>> {
        if self.done {
            return None;
        }
        if !self.last_ditch {
            if let Some(a) = self.main_step() {
                return Some(a);
            }
            self.last_ditch = true;
            let rest = self.s.get(self.pos..).unwrap_or(&[]);
            if !rest.contains(&b'@') {
                self.done = true;
                return None;
            }
        }
        let a = self.ditch_step();
        if a.is_none() {
            self.done = true;
        }
        a
    }

    /// Email::Address::XS's first address where the internal parser found none: after
    /// the first `<` (and white space), a local part, `@` and a domain (a run of domain
    /// bytes or a `[...]` literal), whatever junk follows (`<user@[1.2.3.4] [pi]>`,
    /// `<a@b.com junk>`, `<a@b.com`); none after a quote left open. XS reads more
    /// (`<a@ b>` as `a@b`, values with commas), not emulated.
    fn xs_step(&self) -> Option<Address<'v>> {
        let s = self.s;
        let open = memchr::memchr(b'<', s)?;
        if s.get(..open)?.iter().filter(|&&b| b == b'"').count() % 2 == 1 {
            return None;
        }
        let start = skip_ws(s, open + 1);
        let local = match quoted_end(s, start) {
            Some(end) => end,
            None => start + s.get(start..)?.iter().take_while(|&&b| local_char(b) && b != b'"').count(),
        };
        if local == start || s.get(local) != Some(&b'@') {
            return None;
        }
        let domain = local + 1;
        let end = match s.get(domain) {
            Some(b'[') => domain + memchr::memchr(b']', s.get(domain..)?)? + 1,
            _ => domain + s.get(domain..)?.iter().take_while(|&&b| domain_char(b)).count(),
        };
        let a = s.get(start..end).filter(|_| end > domain && !s.get(domain..end).is_some_and(|d| d.iter().any(|&b| is_perl_space(b))))?;
        valid_address(a).then(|| Address { phrase: None, address: Some(cut_address(a)), comment: None })
    }
}

/// What `Header:addr` gives for one header value: its first address, or empty.
pub fn first_address(value: &[u8]) -> &[u8] {
    addresses(value).find_map(|a| a.address).unwrap_or(&[])
}

/// What `Header:name` gives for one value, without decoding: the first display name,
/// trimmed, outer double quotes removed. See [`first_display_name_decoded`] for the
/// exact form (unquoted, comments removed, RFC 2047 words decoded).
pub fn first_display_name(value: &[u8]) -> &[u8] {
    let Some(p) = addresses(value).find_map(|a| a.phrase) else { return &[] };
    match (p.first(), p.last()) {
        (Some(b'"'), Some(b'"')) if p.len() >= 2 && quoted_end(p, 0) == Some(p.len()) => p.get(1..p.len() - 1).unwrap_or(&[]),
        _ => p,
    }
}

/// What `Header:name` gives for one value: the first display name with quotes and
/// comments removed, RFC 2047 words decoded, white space squeezed and one level of
/// single quotes stripped. Written to `out` (cleared first); `scratch` is reused.
pub fn first_display_name_decoded<'o>(value: &[u8], out: &'o mut Vec<u8>, scratch: &mut [Vec<u8>; 4]) -> &'o [u8] {
    out.clear();
    let Some(p) = addresses(value).find_map(|a| a.phrase) else { return out.as_slice() };
    let [plain, tmp, tmp2, words] = scratch;
    plain.clear();
    let mut i = 0;
    while i < p.len() {
        if p.get(i) == Some(&b'"') {
            let end = quoted_end(p, i).unwrap_or(p.len());
            let inner = p.get(i + 1..end.saturating_sub(1).max(i + 1)).unwrap_or(&[]);
            let mut k = 0;
            while let Some(&b) = inner.get(k) {
                if b == b'\\' && inner.get(k + 1).is_some() {
                    plain.push(inner.get(k + 1).copied().unwrap_or(b'\\'));
                    k += 2;
                } else {
                    plain.push(b);
                    k += 1;
                }
            }
            i = end;
        } else {
            let run = p.get(i..).unwrap_or(&[]).iter().take_while(|&&b| b != b'"').count();
            let mut chunk = p.get(i..i + run).unwrap_or(&[]);
            // Comments `( ... )` removed.
            while let Some(open) = memchr::memchr(b'(', chunk) {
                plain.extend_from_slice(chunk.get(..open).unwrap_or(&[]));
                match memchr::memchr(b')', chunk.get(open..).unwrap_or(&[])) {
                    Some(close) => chunk = chunk.get(open + close + 1..).unwrap_or(&[]),
                    None => {
                        plain.extend_from_slice(chunk.get(open..).unwrap_or(&[]));
                        chunk = &[];
                    }
                }
            }
            plain.extend_from_slice(chunk);
            i += run;
        }
    }
    let decoded = super::header::decode_value(b"x-display-name", plain, out, tmp, tmp2, words);
    tmp.clear();
    {
        let text: &[u8] = match decoded {
            super::header::Decoded::Raw(a, b) => plain.get(a..b).unwrap_or(&[]),
            super::header::Decoded::Out(a, b) => out.get(a..b).unwrap_or(&[]),
        };
        // Squeeze white space.
        let mut in_space = false;
        for &b in text {
            if is_perl_space(b) {
                in_space = true;
            } else {
                if in_space && !tmp.is_empty() {
                    tmp.push(b' ');
                }
                in_space = false;
                tmp.push(b);
            }
        }
    }
    out.clear();
    let t = tmp.as_slice();
    let t = match (t.first(), t.last()) {
        (Some(b'\''), Some(b'\'')) if t.len() >= 2 => t.get(1..t.len() - 1).unwrap_or(&[]),
        _ => t,
    };
    out.extend_from_slice(t);
    out.as_slice()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    /// (value, `From:addr`, `From:name`) as SpamAssassin 4.0.1 gives them (first value).
    const CASES: &[(&[u8], &[u8], &[u8])] = &[
        (b"\"Joe Bloggs\" <joe@example.com>", b"joe@example.com", b"Joe Bloggs"),
        (b"Joe Bloggs <joe@example.com>", b"joe@example.com", b"Joe Bloggs"),
        (b"joe@example.com (Joe Bloggs)", b"joe@example.com", b"Joe Bloggs"),
        (b"joe@example.com", b"joe@example.com", b""),
        (b"<joe@example.com>", b"joe@example.com", b""),
        (b"\"joe@example.com\" <other@example.com>", b"other@example.com", b"joe@example.com"),
        (b"undisclosed-recipients: ;", b"", b""),
        (b"Group: a@b.com, c@d.com;", b"a@b.com", b""),
        (b"=?utf-8?q?J=C3=B6rg?= <j@example.de>", b"j@example.de", b"J\xc3\xb6rg"),
        (b"\"'Quoted Name'\" <q@example.com>", b"q@example.com", b"Quoted Name"),
        (b"\"Doe, John\" <john@example.com>, jane@example.com", b"john@example.com", b"Doe, John"),
        (b"Name <bad address>", b"", b"Name"),
        (b"\"Weird \\\"Esc\\\"\" <w@example.com>", b"w@example.com", b"Weird \"Esc\""),
        (b"no address here", b"", b"no address here"),
        (b"a@b.com <c@d.com>", b"c@d.com", b"a@b.com"),
        (b"", b"", b""),
        (b" Folded\n Name <f@example.org>", b"f@example.org", b"Folded Name"),
        // A quoted name run into the local part is part of the address.
        (b"\"Bannedcd\"eowu345@yahoo.com", b"\"Bannedcd\"eowu345@yahoo.com", b""),
    ];

    #[test]
    fn addr_table() {
        for (value, addr, _) in CASES {
            assert_eq!(first_address(value), *addr, "{:?}", String::from_utf8_lossy(value));
        }
    }

    #[test]
    fn name_table() {
        let mut out = Vec::new();
        let mut scratch: [Vec<u8>; 4] = Default::default();
        for (value, _, name) in CASES {
            assert_eq!(first_display_name_decoded(value, &mut out, &mut scratch), *name, "{:?}", String::from_utf8_lossy(value));
        }
        // The slice form: no decoding, outer quotes off.
        assert_eq!(first_display_name(b"\"Joe Bloggs\" <joe@example.com>"), b"Joe Bloggs");
        assert_eq!(first_display_name(b"Joe Bloggs <joe@example.com>"), b"Joe Bloggs");
        assert_eq!(first_display_name(b"joe@example.com (Joe)"), b"Joe");
        assert_eq!(first_display_name(b"joe@example.com"), b"");
    }

    #[test]
    fn xs_fallback_table() {
        // (value, `:addr`), as SpamAssassin 4.0.1's `parse_header_addresses` gives them with
        // Email::Address::XS installed: consulted (and taken) where the internal parser
        // finds nothing; not where it finds a result, even one without an address.
        let cases: &[(&[u8], &[u8])] = &[
            (b"<ngdgpfwxsw@[1086695621] [pi]>", b"ngdgpfwxsw@[1086695621]"),
            (b"Name <a@[1.2.3.4] x>", b"a@[1.2.3.4]"),
            (b"<a@b.com junk>", b"a@b.com"),
            (b"x <a@b.com junk more>", b"a@b.com"),
            (b"<a@b c.com>", b"a@b"),
            (b"<a@b.com", b"a@b.com"),
            (b"<a@b.com junk", b"a@b.com"),
            (b"<\"q x\"@b.com junk>", b"\"q x\"@b.com"),
            (b"<a.b@c.d.e (comment)>", b"a.b@c.d.e"),
            (b"<a@b.com x@y.com>", b"a@b.com"),
            (b"<a@b.com; junk>", b"a@b.com"),
            (b"< a@b.com x>", b"a@b.com"),
            (b"<a(b)c@d.com x>", b""),
            (b"<@b.com x>", b""),
            (b"foo <bar", b""),
            (b"a b <c@d.com x>", b"c@d.com"),
            (b"\"unterminated <c@d.com x>", b""),
            (b"Name <> <c@d.com x>", b""),
            (b"<a b@c.com>", b""),
            (b"a@b.com junk", b""),
        ];
        for (value, want) in cases {
            assert_eq!(first_address(value), *want, "{:?}", String::from_utf8_lossy(value));
        }
    }

    #[test]
    fn all_addresses() {
        let v: Vec<_> = addresses(b"\"Doe, John\" <john@example.com>, jane@example.com (Jane)").collect();
        assert_eq!(v.len(), 2);
        assert_eq!(v.first().and_then(|a| a.address), Some(&b"john@example.com"[..]));
        assert_eq!(v.get(1).and_then(|a| a.address), Some(&b"jane@example.com"[..]));
        assert_eq!(v.get(1).and_then(|a| a.phrase), Some(&b"Jane"[..]));
    }
}
