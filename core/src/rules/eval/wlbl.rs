//! Address lists and domains: SpamAssassin's WLBLEval tests (`welcomelist_from`,
//! `blocklist_to`, `enlist_addrlist` lists, `*_from_rcvd`, the envelope sender's
//! domain against the relays) and its registry boundaries (`util_rb_*tld`).

use alloc::vec::Vec;

use super::relays::{RelayView, Relays};
use crate::rules::{AddrList, EvalSettings, RcvdEntry};

/// Addresses kept per collected set.
const MAX_ADDRS: usize = 256;
/// Bytes of one address kept.
const MAX_ADDR: usize = 320;

/// A small set of addresses built per message in a reused buffer.
#[derive(Debug, Default)]
pub struct AddrSet {
    buf: Vec<u8>,
    spans: Vec<(u32, u32)>,
}

impl AddrSet {
    /// Empties the set.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.spans.clear();
    }

    /// Adds `addr` (dots squeezed when `squeeze`, lowercased when `lower`) unless
    /// empty or already present.
    pub fn add(&mut self, addr: &[u8], squeeze: bool, lower: bool) {
        if addr.is_empty() || self.spans.len() >= MAX_ADDRS {
            return;
        }
        let addr = addr.get(..MAX_ADDR).unwrap_or(addr);
        let start = self.buf.len();
        let mut prev_dot = false;
        for &b in addr {
            if squeeze && b == b'.' && prev_dot {
                continue;
            }
            prev_dot = b == b'.';
            self.buf.push(if lower { b.to_ascii_lowercase() } else { b });
        }
        let new = self.buf.get(start..).unwrap_or(&[]);
        if self.iter().any(|a| a == new) {
            self.buf.truncate(start);
            return;
        }
        self.spans.push((start as u32, self.buf.len() as u32));
    }

    /// Appends `addr` as it is unless it equals the last one ignoring case (a list,
    /// not a set: earlier duplicates stay).
    pub fn push_unless_last(&mut self, addr: &[u8]) {
        let last = self.spans.last().and_then(|&(a, b)| self.buf.get(a as usize..b as usize));
        if self.spans.len() >= MAX_ADDRS || last.is_some_and(|l| l.eq_ignore_ascii_case(addr)) {
            return;
        }
        let addr = addr.get(..MAX_ADDR).unwrap_or(addr);
        let start = self.buf.len();
        self.buf.extend_from_slice(addr);
        self.spans.push((start as u32, self.buf.len() as u32));
    }

    /// The addresses in the order added.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.spans.iter().map(|&(a, b)| self.buf.get(a as usize..b as usize).unwrap_or(&[]))
    }

    /// Number of addresses.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// No addresses.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// Matches a SpamAssassin address glob (`*` any run, `?` one byte; other bytes
/// literal, `\0`, `\\` and `(` standing for `_`) against the whole of `text`,
/// ignoring ASCII case. `star_stops_at_dot` makes `*` match `[^.]*` (freemail
/// domain wildcards).
pub fn glob_match(glob: &[u8], text: &[u8], star_stops_at_dot: bool) -> bool {
    // The literal after the last wildcard ends every match: most texts fail there.
    let tail = glob.get(glob.iter().rposition(|&b| b == b'*' || b == b'?').map_or(0, |p| p + 1)..).unwrap_or(&[]);
    let ends_alike = text.len().checked_sub(tail.len()).and_then(|cut| text.get(cut..)).is_some_and(|end| {
        tail.iter().zip(end).all(|(&g, &t)| glob_byte(g) == t.to_ascii_lowercase())
    });
    ends_alike && glob_walk(glob, text, star_stops_at_dot)
}

/// A glob's literal byte as it compares: lower case, `\0`, `\\` and `(` as `_`.
fn glob_byte(b: u8) -> u8 {
    match b {
        0 | b'\\' | b'(' => b'_',
        b => b.to_ascii_lowercase(),
    }
}

/// [`glob_match`] without its shortcut: each star's run grows until the rest matches.
fn glob_walk(glob: &[u8], text: &[u8], star_stops_at_dot: bool) -> bool {
    let (mut g, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    loop {
        match glob.get(g) {
            Some(b'*') => {
                star = Some((g, t));
                g += 1;
                continue;
            }
            Some(&c) if t < text.len() => {
                let tb = text.get(t).copied().unwrap_or(0);
                if (c == b'?' && tb != b'\n') || glob_byte(c) == tb.to_ascii_lowercase() {
                    g += 1;
                    t += 1;
                    continue;
                }
            }
            None if t == text.len() => return true,
            _ => {}
        }
        match star {
            Some((sg, st)) if st < text.len() => {
                let tb = text.get(st).copied().unwrap_or(0);
                if tb == b'\n' || (star_stops_at_dot && tb == b'.') {
                    return false;
                }
                star = Some((sg, st + 1));
                g = sg + 1;
                t = st + 1;
            }
            _ => return false,
        }
    }
}

/// SpamAssassin's `_check_welcomelist`: `addr` (any case) matches a glob of `list`.
pub fn in_list(list: Option<&AddrList>, addr: &[u8]) -> bool {
    list.is_some_and(|l| l.globs.iter().any(|g| glob_match(g.as_bytes(), addr, false)))
}

/// US state codes (`RegistryBoundaries::US_STATES`).
const US_STATES: &[&[u8; 2]] = &[
    b"ak", b"al", b"ar", b"az", b"ca", b"co", b"ct", b"dc", b"de", b"fl", b"ga", b"gu", b"hi", b"ia", b"id", b"il",
    b"in", b"ks", b"ky", b"la", b"ma", b"md", b"me", b"mi", b"mn", b"mo", b"ms", b"mt", b"nc", b"nd", b"ne", b"nh",
    b"nj", b"nm", b"nv", b"ny", b"oh", b"ok", b"or", b"pa", b"pr", b"ri", b"sc", b"sd", b"tn", b"tx", b"ut", b"va",
    b"vi", b"vt", b"wa", b"wi", b"wv", b"wy",
];

/// Bytes of a host name handled by [`Registry::domain`].
const MAX_HOST: usize = 512;

/// SpamAssassin's registry boundaries: which suffixes are registries, from
/// `util_rb_tld`, `util_rb_2tld` and `util_rb_3tld`.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    tlds: Vec<Vec<u8>>,
    two: Vec<Vec<u8>>,
    three: Vec<Vec<u8>>,
}

/// A host name's registered domain, in a stack buffer.
pub struct Domain {
    buf: [u8; MAX_HOST],
    start: usize,
    end: usize,
}

impl Domain {
    /// The domain text.
    pub fn text(&self) -> &[u8] {
        self.buf.get(self.start..self.end).unwrap_or(&[])
    }
}

impl Registry {
    /// The lists from the settings, sorted for lookups.
    pub fn new(settings: &EvalSettings) -> Registry {
        let sorted = |v: &[alloc::string::String]| {
            let mut out: Vec<Vec<u8>> = v.iter().map(|s| s.as_bytes().to_ascii_lowercase()).collect();
            out.sort();
            out.dedup();
            out
        };
        Registry {
            tlds: sorted(&settings.util_rb_tld),
            two: sorted(&settings.util_rb_2tld),
            three: sorted(&settings.util_rb_3tld),
        }
    }

    fn has(list: &[Vec<u8>], name: &[u8]) -> bool {
        list.binary_search_by(|e| e.as_slice().cmp(name)).is_ok()
    }

    /// `is_domain_valid`: no white space, a dot, a known top-level domain.
    pub fn is_domain_valid(&self, dom: &[u8]) -> bool {
        if dom.iter().any(|&b| super::re::is_space(b)) {
            return false;
        }
        let Some(dot) = dom.iter().rposition(|&b| b == b'.') else {
            return false;
        };
        self.is_tld(dom.get(dot + 1..).unwrap_or(&[]))
    }

    /// Whether `tld` (any case) is in `util_rb_tld`.
    pub fn is_tld(&self, tld: &[u8]) -> bool {
        if tld.is_empty() || tld.len() > 63 {
            return false;
        }
        let mut lower = [0u8; 63];
        for (slot, b) in lower.iter_mut().zip(tld) {
            *slot = b.to_ascii_lowercase();
        }
        Registry::has(&self.tlds, lower.get(..tld.len()).unwrap_or(&[]))
    }

    /// `trim_domain` (the domain half of `split_domain`): `www.foo.co.uk` -> `foo.co.uk`.
    pub fn domain(&self, host: &[u8]) -> Domain {
        let mut d = Domain { buf: [0; MAX_HOST], start: 0, end: 0 };
        // lowercase, squeeze dots, trim dots at both ends
        let mut n = 0;
        let mut prev_dot = true;
        for &b in host.iter().take(MAX_HOST) {
            if b == b'.' && prev_dot {
                continue;
            }
            prev_dot = b == b'.';
            if let Some(slot) = d.buf.get_mut(n) {
                *slot = b.to_ascii_lowercase();
                n += 1;
            }
        }
        while n > 0 && d.buf.get(n - 1) == Some(&b'.') {
            n -= 1;
        }
        d.end = n;
        let text = d.buf.get(..n).unwrap_or(&[]);
        if text.is_empty() {
            return d;
        }
        // Label starts, left to right.
        let mut starts = [0u16; 128];
        let mut labels = 0;
        for (i, &b) in text.iter().enumerate() {
            if (i == 0 || text.get(i - 1) == Some(&b'.')) && labels < starts.len() {
                if let Some(slot) = starts.get_mut(labels) {
                    *slot = u16::try_from(i).unwrap_or(u16::MAX);
                }
                labels += 1;
            }
            let _ = b;
        }
        let label = |k: usize| -> &[u8] {
            let a = if k < labels { starts.get(k).map_or(n, |&s| usize::from(s)) } else { n };
            let b = if k + 1 < labels { starts.get(k + 1).map_or(n, |&s| usize::from(s).saturating_sub(1)) } else { n };
            text.get(a..b).unwrap_or(&[])
        };
        let suffix = |k: usize| -> &[u8] {
            let a = if k < labels { starts.get(k).map_or(n, |&s| usize::from(s)) } else { n };
            text.get(a..).unwrap_or(&[])
        };
        let state = |s: &[u8]| US_STATES.iter().any(|st| st.as_slice() == s);
        let mut first = 0;
        while labels - first > 1 {
            let left = labels - first;
            let stop = match left {
                2 => Registry::has(&self.two, suffix(first)),
                3 => {
                    if label(first + 2) == b"us" {
                        state(label(first + 1))
                    } else {
                        Registry::has(&self.three, suffix(first))
                    }
                }
                4 => {
                    let (a, b, c, dd) = (label(first), label(first + 1), label(first + 2), label(first + 3));
                    dd == b"us" && ((a == b"pvt" && b == b"k12") || a == b"ci" || a == b"co") && state(c)
                }
                _ => false,
            };
            if stop {
                break;
            }
            first += 1;
        }
        // The last label taken off goes back on.
        let keep = first.saturating_sub(1);
        d.start = if first > 0 { starts.get(keep).map_or(0, |&s| usize::from(s)) } else { 0 };
        d
    }
}

/// The relays `*_from_rcvd` and `check_mailfrom_matches_rcvd` look at: the first
/// untrusted one, or every trusted one when none is untrusted.
fn deciding_relays(relays: &Relays) -> impl Iterator<Item = RelayView<'_>> + '_ {
    let first_untrusted = relays.untrusted().next();
    let use_trusted = first_untrusted.is_none();
    first_untrusted.into_iter().chain(relays.trusted().filter(move |_| use_trusted))
}

/// `check_mailfrom_matches_rcvd` for `sender` (the envelope sender's first address).
pub fn addr_matches_rcvd(registry: &Registry, relays: &Relays, sender: &[u8]) -> bool {
    // / \@ ( [^\@]+ \. [^\@]+ ) \z/x: the text after the last @, with a dot.
    let Some(at) = sender.iter().rposition(|&b| b == b'@') else {
        return false;
    };
    let dom = sender.get(at + 1..).unwrap_or(&[]);
    let dot_ok = dom.iter().position(|&b| b == b'.').is_some_and(|p| p > 0) && dom.last().is_some_and(|&b| b != b'.');
    if dom.is_empty() || !dot_ok {
        return false;
    }
    let want = registry.domain(dom);
    deciding_relays(relays).any(|r| !r.rdns.is_empty() && registry.domain(r.rdns).text() == want.text())
}

/// `_check_welcomelist_rcvd`: 1 when `addr` is listed and came through its relay,
/// -1 when listed but not (possible forgery), 0 when not listed.
pub fn welcomelist_rcvd(entries: &[RcvdEntry], allows_relays: Option<&AddrList>, relays: &Relays, addr: &[u8]) -> i32 {
    if relays.num_trusted() + relays.num_untrusted() == 0 {
        return 0;
    }
    let mut found_forged = 0;
    for e in entries.iter().filter(|e| glob_match(e.glob.as_bytes(), addr, false)) {
        if deciding_relays(relays).any(|r| relay_matches(&e.relay, &r)) {
            return 1;
        }
        found_forged = -1;
    }
    if found_forged != 0 && in_list(allows_relays, addr) {
        found_forged = 0;
    }
    found_forged
}

/// Whether a relay matches a `*_from_rcvd` relay spec: `[ip]`, `[ip/len]`,
/// `[a.b.c]` (classful prefix) or an rDNS domain.
fn relay_matches(spec: &str, relay: &RelayView<'_>) -> bool {
    if let Some(inner) = spec.strip_prefix('[') {
        let (ip_part, len) = match inner.split_once(']') {
            Some((ip, rest)) => (ip, rest.strip_prefix('/')),
            None => return false,
        };
        if relay.ip.is_empty() {
            return false;
        }
        let (ip_part, len) = match ip_part.split_once('/') {
            Some((ip, l)) => (ip, Some(l)),
            None => (ip_part, len),
        };
        let dotted = ip_part.bytes().all(|b| b.is_ascii_digit() || b == b'.');
        if len.is_none() && dotted {
            if ip_part.split('.').count() == 4 {
                return relay.ip == ip_part.as_bytes();
            }
            // A classful subnet: the relay's address starts with it and a dot.
            let prefix = ip_part.trim_end_matches('.');
            return relay.ip.starts_with(prefix.as_bytes()) && relay.ip.get(prefix.len()) == Some(&b'.');
        }
        let Some(mut range) = crate::rules::NetRange::parse(ip_part) else {
            return false;
        };
        if let Some(l) = len {
            let Ok(l) = l.parse::<u8>() else { return false };
            let v4 = range.addr.get(..12) == Some(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff][..]) && dotted;
            range.prefix = if v4 { 96u8.saturating_add(l.min(32)) } else { l.min(128) };
        }
        return super::relays::parse_ip(relay.ip).is_some_and(|(addr, _)| range.covers(&addr));
    }
    // (?:^|\.)\Q$domain\E$ against the rdns, ignoring case
    let rdns = relay.rdns;
    let dom = spec.as_bytes();
    rdns.len() >= dom.len()
        && rdns.get(rdns.len() - dom.len()..).is_some_and(|tail| tail.eq_ignore_ascii_case(dom))
        && (rdns.len() == dom.len() || rdns.get(rdns.len() - dom.len() - 1) == Some(&b'.'))
}

/// Finds list `name` of the settings' address lists.
pub fn list<'s>(lists: &'s [AddrList], name: &str) -> Option<&'s AddrList> {
    lists.iter().find(|l| l.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    #[test]
    fn globs_table() {
        let cases: &[(&str, &str, bool, bool)] = &[
            ("*@paypal.com", "service@PayPal.com", false, true),
            ("*@paypal.com", "x@paypal.com.evil", false, false),
            ("*@*.paypal.com", "a@b.paypal.com", false, true),
            ("f?o@x.org", "foo@x.org", false, true),
            ("f?o@x.org", "fo@x.org", false, false),
            ("friend@somewhere.com", "friend@somewhere.com", false, true),
            ("*.mail.ru", "a.mail.ru", true, true),
            ("*.mail.ru", "a.b.mail.ru", true, false),
            ("a(b@c", "a_b@c", false, true),
            ("**", "", false, true),
        ];
        for (glob, text, dot, want) in cases {
            assert_eq!(glob_match(glob.as_bytes(), text.as_bytes(), *dot), *want, "{glob} {text}");
        }
    }

    #[test]
    fn glob_shortcut_agrees_with_the_walk_table() {
        // Every glob against every text, either star rule: the check of the literal
        // tail first changes no answer.
        let globs = [
            "*@paypal.com", "*@*.icu", "*.mail.ru", "*", "*a(b", "*@", "*x\\y", "*@*.gov", "a*b", "*?.com", "f?o@x.org",
            "friend@somewhere.com", "a(b@c", "**", "*@*.gov?", "",
        ];
        let texts = [
            "", "service@PayPal.com", "x@paypal.com.evil", "a.b.mail.ru", "b.mail.ru", "line\n@paypal.com", "a_b", "A_B",
            "@", "x_y", "agency@dept.gov", "ab", "a.com", "\0", "x@PAYPAL.COM", "me@shop.ICU", "foo@x.org", "a_b@c",
            "me@x.gov1", "friend@somewhere.com",
        ];
        let mut matched = 0;
        for glob in globs {
            for text in texts {
                for dot in [false, true] {
                    let (g, t) = (glob.as_bytes(), text.as_bytes());
                    assert_eq!(glob_match(g, t, dot), glob_walk(g, t, dot), "{glob:?} {text:?} {dot}");
                    matched += usize::from(glob_walk(g, t, dot));
                }
            }
        }
        assert!(matched > 20, "{matched}");
    }

    #[test]
    fn registry_domains_table() {
        let settings = EvalSettings {
            util_rb_tld: ["com", "uk", "us", "net"].iter().map(|s| String::from(*s)).collect(),
            util_rb_2tld: ["co.uk"].iter().map(|s| String::from(*s)).collect(),
            util_rb_3tld: ["act.edu.au"].iter().map(|s| String::from(*s)).collect(),
            ..EvalSettings::default()
        };
        let reg = Registry::new(&settings);
        let cases: &[(&str, &str)] = &[
            ("www.foo.com", "foo.com"),
            ("foo.com", "foo.com"),
            ("WWW.Foo.Co.UK", "foo.co.uk"),
            ("a.b.ci.ny.us", "b.ci.ny.us"),
            ("x.state.ny.us", "x.state.ny.us"),
            ("..a..b.com.", "b.com"),
            ("com", "com"),
            ("", ""),
        ];
        for (host, want) in cases {
            assert_eq!(reg.domain(host.as_bytes()).text(), want.as_bytes(), "{host}");
        }
        assert!(reg.is_domain_valid(b"foo.COM"));
        assert!(!reg.is_domain_valid(b"foo.invalid"));
        assert!(!reg.is_domain_valid(b"foo com"));
    }

    #[test]
    fn addr_sets_dedupe_and_squeeze() {
        let mut set = AddrSet::default();
        set.add(b"a..b@c", true, false);
        set.add(b"a.b@c", true, false);
        set.add(b"", true, false);
        set.add(b"A@C", false, true);
        assert_eq!(set.iter().collect::<Vec<_>>(), [&b"a.b@c"[..], b"a@c"]);
    }
}
