//! URIs as SpamAssassin's `PerMsgStatus::get_uri_list` finds them: parsed from the
//! rendered body text with its Thunderbird-like expression, taken from HTML
//! attributes, then cleaned (`Util::uri_list_canonicalize`) into the set `uri`
//! rules see.
//!
//! Not done: internationalised host names (no IDNA), configured
//! `redirector_pattern`s (only the generic `http://` redirector is followed).

use alloc::vec::Vec;

use super::decode::is_perl_space;
use super::html::MAX_URI;
use super::tlds::TLDS;

/// Most URI variants made from one found URI.
const MAX_VARIANTS: usize = 48;
/// Most redirector hops followed from one found URI.
const MAX_SOURCES: usize = 8;

/// An open-addressed table of (start, length + 1, epoch) entries; an entry is in
/// use only when its epoch is the table's, so emptying it is one increment. It starts
/// small and doubles as items come, up to the size `max` items need: a worker whose
/// mail has few URIs keeps a few KiB, not the table for the most.
#[derive(Debug, Default)]
pub(crate) struct SlotTable {
    slots: Vec<(u32, u32, u32)>,
    epoch: u32,
    /// The size the table may grow to.
    limit: usize,
}

/// Slots a table starts with.
const FIRST_SLOTS: usize = 64;

impl SlotTable {
    /// A table for up to `max` items.
    pub fn with_items(max: usize) -> SlotTable {
        SlotTable { slots: Vec::new(), epoch: 0, limit: Self::size_for(max) }
    }

    fn size_for(max: usize) -> usize {
        max.saturating_mul(2).next_power_of_two().max(16)
    }

    /// Reserved capacity.
    pub fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Empties the table, for up to `max` items.
    pub fn reset(&mut self, max: usize) {
        self.limit = Self::size_for(max);
        self.epoch = self.epoch.wrapping_add(1);
        if self.slots.is_empty() || self.slots.len() > self.limit || self.epoch == 0 {
            self.slots.clear();
            self.slots.resize(FIRST_SLOTS.min(self.limit), (0, 0, 0));
            self.epoch = 1;
        }
    }

    /// Doubles the table, within its limit, when one more item would fill it past
    /// half; the entries in use move, found by their text in `arena`.
    fn make_room(&mut self, count: usize, arena: &[u8]) {
        let len = self.slots.len();
        if count.saturating_add(1).saturating_mul(2) <= len || len.saturating_mul(2) > self.limit {
            return;
        }
        let old = core::mem::replace(&mut self.slots, alloc::vec![(0, 0, 0); len * 2]);
        let mask = len * 2 - 1;
        for (start, len1, e) in old {
            if e != self.epoch {
                continue;
            }
            let item = arena.get(start as usize..(start as usize + len1 as usize).saturating_sub(1)).unwrap_or(&[]);
            let mut i = (hash(item) as usize) & mask;
            while self.slots.get(i).is_some_and(|&(_, _, e)| e == self.epoch) {
                i = (i + 1) & mask;
            }
            if let Some(slot) = self.slots.get_mut(i) {
                *slot = (start, len1, e);
            }
        }
    }
}

/// The message's URI set: one URI per line, without repeats, at most `max`.
pub(crate) struct UriSet<'s> {
    pub out: &'s mut Vec<u8>,
    /// Where each line of `out` is, by hash.
    pub slots: &'s mut SlotTable,
    pub count: usize,
    pub max: usize,
    pub overflow: bool,
}

/// A hash of `s` for the slot tables, eight bytes a step (only the table layout
/// depends on it, never what the sets hold or their order).
fn hash(s: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let mut h = (s.len() as u64).wrapping_mul(K);
    let mut words = s.chunks_exact(8);
    for w in words.by_ref() {
        h = mix(h, w.try_into().map_or(0, u64::from_le_bytes));
    }
    let mut tail = [0u8; 8];
    let rest = words.remainder();
    if let Some(t) = tail.get_mut(..rest.len()) {
        t.copy_from_slice(rest);
    }
    h = mix(h, u64::from_le_bytes(tail));
    // Fold the high bits down: the table index takes the low ones.
    h ^ (h >> 29) ^ (h >> 47)
}

/// What happened to an item offered to a [`ByteSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offer {
    Added,
    Present,
    Full,
}

/// A set of byte strings kept in an arena (separated by `sep`) with an
/// open-addressed table of (start, length + 1).
pub(crate) struct ByteSet<'s> {
    pub arena: &'s mut Vec<u8>,
    pub slots: &'s mut SlotTable,
    pub count: usize,
    pub max: usize,
    pub sep: Option<u8>,
}

impl ByteSet<'_> {
    /// Adds `item` unless present or full.
    pub fn offer(&mut self, item: &[u8]) -> Offer {
        self.slots.make_room(self.count, self.arena);
        let epoch = self.slots.epoch;
        let table = &mut self.slots.slots;
        if table.is_empty() {
            return Offer::Full;
        }
        let mask = table.len() - 1;
        let mut i = (hash(item) as usize) & mask;
        loop {
            let Some(&(start, len1, e)) = table.get(i) else { return Offer::Full };
            if e != epoch {
                break;
            }
            let (s, e) = (start as usize, start as usize + len1 as usize - 1);
            if self.arena.get(s..e) == Some(item) {
                return Offer::Present;
            }
            i = (i + 1) & mask;
        }
        if self.count >= self.max {
            return Offer::Full;
        }
        if let (Some(sep), true) = (self.sep, self.count > 0) {
            self.arena.push(sep);
        }
        let start = self.arena.len();
        self.arena.extend_from_slice(item);
        let (Ok(s), Ok(l)) = (u32::try_from(start), u32::try_from(item.len() + 1)) else { return Offer::Full };
        if let Some(slot) = table.get_mut(i) {
            *slot = (s, l, epoch);
        }
        self.count += 1;
        Offer::Added
    }
}

impl UriSet<'_> {
    fn insert(&mut self, uri: &[u8]) {
        let uri = uri.get(..uri.len().min(MAX_URI)).unwrap_or(&[]);
        let mut set = ByteSet { arena: self.out, slots: self.slots, count: self.count, max: self.max, sep: Some(b'\n') };
        let offer = set.offer(uri);
        self.count = set.count;
        if offer == Offer::Full {
            self.overflow = true;
        }
    }
}

/// Scratch for cleaning one URI: variant strings and their ranges.
pub(crate) struct Work<'s> {
    pub text: &'s mut Vec<u8>,
    pub cur: &'s mut Vec<u8>,
    pub tmp: &'s mut Vec<u8>,
    pub vars: Variants,
}

impl<'s> Work<'s> {
    /// Scratch over three buffers.
    pub fn new(text: &'s mut Vec<u8>, cur: &'s mut Vec<u8>, tmp: &'s mut Vec<u8>) -> Self {
        Work { text, cur, tmp, vars: Variants { list: [Variant::default(); MAX_VARIANTS], len: 0, sources: 0 } }
    }
}

/// A variant: its range in `Work::text` and whether it is still to be cleaned.
#[derive(Clone, Copy, Default)]
struct Variant {
    start: usize,
    end: usize,
    source: bool,
}

/// The variants of one URI, in a fixed array.
pub(crate) struct Variants {
    list: [Variant; MAX_VARIANTS],
    len: usize,
    sources: usize,
}

impl Variants {
    fn push(&mut self, text: &mut Vec<u8>, bytes_from: usize, source: bool) {
        // The bytes were appended to `text` from `bytes_from`.
        if self.len >= MAX_VARIANTS || (source && self.sources >= MAX_SOURCES) {
            text.truncate(bytes_from);
            return;
        }
        if let Some(v) = self.list.get_mut(self.len) {
            *v = Variant { start: bytes_from, end: text.len(), source };
        }
        self.len += 1;
        if source {
            self.sources += 1;
        }
    }
}

/// Makes `dst` a copy of `src` (buffers keep their roles, so their capacities settle).
fn replace(dst: &mut Vec<u8>, src: &[u8]) {
    dst.clear();
    dst.extend_from_slice(src);
}

fn starts_with_ci(s: &[u8], p: &[u8]) -> bool {
    s.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    super::decode::find_short(hay, needle)
}

/// Cleans `uri` into its variants and adds them to `set`. With `need_domain`
/// (URIs parsed from text), nothing is added unless a variant has a valid domain.
/// `chars` says the URI is text Perl holds as characters (from HTML), where escapes
/// are made per character rather than per byte.
pub(crate) fn add_uri(uri: &[u8], need_domain: bool, chars: bool, set: &mut UriSet<'_>, work: &mut Work<'_>) {
    let text = &mut *work.text;
    text.clear();
    let vars = &mut work.vars;
    vars.len = 0;
    vars.sources = 0;
    push_source(text, vars, uri);
    let mut i = 0;
    while i < vars.len {
        let Some(v) = vars.list.get(i).copied() else { break };
        i += 1;
        if !v.source {
            continue;
        }
        work.cur.clear();
        work.cur.extend_from_slice(text.get(v.start..v.end).unwrap_or(&[]));
        clean_one(work.cur, (v.start, v.end), text, vars, work.tmp, chars);
    }
    if need_domain {
        let any = vars
            .list
            .get(..vars.len)
            .unwrap_or(&[])
            .iter()
            .any(|v| uri_domain(text.get(v.start..v.end).unwrap_or(&[]), work.tmp));
        if !any {
            return;
        }
    }
    for v in vars.list.get(..vars.len).unwrap_or(&[]) {
        set.insert(text.get(v.start..v.end).unwrap_or(&[]));
    }
}

/// Adds a URI to be cleaned: line breaks and CRs removed, white space trimmed.
fn push_source(text: &mut Vec<u8>, vars: &mut Variants, uri: &[u8]) {
    let from = text.len();
    text.extend(uri.iter().copied().filter(|&b| b != b'\n' && b != b'\r'));
    let lead = text.get(from..).unwrap_or(&[]).iter().take_while(|&&b| is_perl_space(b)).count();
    if lead > 0 {
        text.drain(from..from + lead);
    }
    while text.len() > from && text.last().copied().is_some_and(is_perl_space) {
        text.pop();
    }
    vars.push(text, from, true);
}

fn push_variant(text: &mut Vec<u8>, vars: &mut Variants, parts: &[&[u8]]) {
    let from = text.len();
    for p in parts {
        text.extend_from_slice(p);
    }
    vars.push(text, from, false);
}

/// One round of `uri_list_canonicalize` on `cur`.
fn clean_one(cur: &mut Vec<u8>, source: (usize, usize), text: &mut Vec<u8>, vars: &mut Variants, tmp: &mut Vec<u8>, chars: bool) {
    let u = cur.as_slice();
    if u.len() <= 1 || matches!(u.first(), Some(b'#' | b'?' | b'&')) || (u.first() == Some(&b'/') && u.get(1) != Some(&b'/')) {
        return;
    }
    let first_colon = memchr::memchr(b':', u);
    let first_at = memchr::memchr(b'@', u);
    let mail = starts_with_ci(u, b"mailto:") || matches!((first_at, first_colon), (Some(a), c) if c.is_none_or(|c| a < c));
    if mail {
        clean_mail(u, text, vars);
        return;
    }
    // Back slashes are slashes; `http:x` gets its `//`.
    for b in cur.iter_mut() {
        if *b == b'\\' {
            *b = b'/';
        }
    }
    let proto_len = if starts_with_ci(cur, b"https:") {
        6
    } else if starts_with_ci(cur, b"http:") {
        5
    } else {
        0
    };
    tmp.clear();
    if proto_len > 0 {
        let slashes = cur.get(proto_len..).unwrap_or(&[]).iter().take(2).take_while(|&&b| b == b'/').count();
        tmp.extend_from_slice(cur.get(..proto_len).unwrap_or(&[]));
        tmp.extend_from_slice(b"//");
        tmp.extend_from_slice(cur.get(proto_len + slashes..).unwrap_or(&[]));
    } else {
        tmp.extend_from_slice(cur);
    }
    replace(cur, tmp);
    if has_pct_escape(cur) {
        tmp.clear();
        url_decode(cur, tmp, chars);
        replace(cur, tmp);
    }
    let scheme_len = cur.iter().take_while(|&&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_').count();
    if scheme_len == 0 || cur.get(scheme_len) != Some(&b':') {
        tmp.clear();
        tmp.extend_from_slice(if cur.starts_with(b"ftp.") { b"ftp://" } else { b"http://" });
        tmp.extend_from_slice(cur);
        replace(cur, tmp);
    }
    // `http://host?x` gets a `/` before `?` or `#`.
    if starts_with_ci(cur, b"http://") || starts_with_ci(cur, b"https://") {
        let after = if starts_with_ci(cur, b"https://") { 8 } else { 7 };
        let host = cur.get(after..).unwrap_or(&[]).iter().take_while(|&&b| !matches!(b, b'/' | b'?' | b'#')).count();
        if host > 0 && matches!(cur.get(after + host), Some(b'?' | b'#')) {
            cur.insert(after + host, b'/');
        }
    }
    decode_char_refs(cur, tmp);
    if text.get(source.0..source.1) != Some(cur.as_slice()) {
        push_variant(text, vars, &[cur]);
    }
    web_variants(cur, text, vars);
}

/// The mail branch of `uri_list_canonicalize`.
fn clean_mail(u: &[u8], text: &mut Vec<u8>, vars: &mut Variants) {
    let at = memchr::memchr(b'@', u);
    if let Some(at) = at.filter(|&a| a > 0) {
        let after = u.get(at + 1..).unwrap_or(&[]);
        if let Some(q) = memchr::memchr(b'?', after).filter(|&q| q > 0) {
            push_variant(text, vars, &[u.get(..at + 1 + q).unwrap_or(&[])]);
        }
        if let Some(k) = memchr::memchr2(b'?', b'&', after).filter(|&k| k > 0) {
            if after.get(k) == Some(&b'&') {
                push_variant(text, vars, &[u.get(..at + 1 + k).unwrap_or(&[])]);
            }
        }
    }
    if find(u, b"%20").is_some() {
        let mut s = u.strip_prefix(b"mailto:").unwrap_or(u);
        while let Some(r) = s.strip_prefix(b"%20") {
            s = r;
        }
        if let Some(at) = memchr::memchr(b'@', s).filter(|&a| a > 0) {
            let host = s.get(at + 1..).unwrap_or(&[]).iter().take_while(|&&b| !matches!(b, b'?' | b'&' | b'%')).count();
            if host > 0 {
                push_variant(text, vars, &[b"mailto:", s.get(..at + 1 + host).unwrap_or(&[])]);
            }
        }
    }
    // `mailto:"Name" <user@host>`.
    let head = u.iter().take_while(|&&b| b != b'?' && b != b'&').count();
    if let Some(lt) = memchr::memchr(b'<', u.get(..head).unwrap_or(&[])) {
        let inner = u.get(lt + 1..).unwrap_or(&[]);
        if let Some(gt) = memchr::memchr(b'>', inner) {
            let addr = inner.get(..gt).unwrap_or(&[]);
            let at = addr.iter().take_while(|&&b| b != b'@').count();
            if at > 0 && addr.get(at) == Some(&b'@') && addr.len() > at + 1 {
                push_variant(text, vars, &[b"mailto:", addr]);
            }
        }
    }
}

fn has_pct_escape(s: &[u8]) -> bool {
    s.windows(3).any(|w| matches!(w, [b'%', a, b] if a.is_ascii_hexdigit() && b.is_ascii_hexdigit()))
}

fn hexval(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        b'A'..=b'F' => b - b'A' + 10,
        _ => 0,
    }
}

/// SpamAssassin's `url_encode` in scalar context: printable `%XX` escapes decoded
/// (not `%20`, `%7F`), and control, 8-bit, `"`, `%`, `<`, `>` outside escapes encoded.
/// With `chars`, a UTF-8 character up to U+00FF is one escape and wider ones stay.
pub(crate) fn url_decode(s: &[u8], out: &mut Vec<u8>, chars: bool) {
    let mut i = 0;
    while let Some(&b) = s.get(i) {
        if b == b'%' {
            if let (Some(&h), Some(&l)) = (s.get(i + 1), s.get(i + 2)) {
                if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() {
                    let keep = matches!(h, b'0' | b'1' | b'8' | b'9' | b'a'..=b'f' | b'A'..=b'F')
                        || (h == b'2' && l == b'0')
                        || (h == b'7' && (l == b'f' || l == b'F'));
                    if keep {
                        out.extend_from_slice(&[b'%', h, l]);
                    } else {
                        out.push(hexval(h) << 4 | hexval(l));
                    }
                    i += 3;
                    continue;
                }
            }
        }
        const HEX: &[u8; 16] = b"0123456789abcdef";
        if chars && b >= 0x80 {
            let len = match b {
                0xc2..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf4 => 4,
                _ => 1,
            };
            let seq = s.get(i..i + len).unwrap_or(&[]);
            if len > 1 && core::str::from_utf8(seq).is_ok() {
                if len == 2 && b <= 0xc3 {
                    let cp = ((b & 0x03) << 6) | (seq.get(1).copied().unwrap_or(0) & 0x3f);
                    out.extend_from_slice(&[b'%', HEX[usize::from(cp >> 4)], HEX[usize::from(cp & 15)]]);
                } else {
                    out.extend_from_slice(seq);
                }
                i += len;
                continue;
            }
        }
        if b <= 0x20 || b >= 0x7f || matches!(b, b'"' | b'%' | b'<' | b'>') {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            out.push(b);
        }
        i += 1;
    }
}

/// `&#NN;` and `&#xHH;` of printable ASCII decoded; Unicode full stops become `.`.
fn decode_char_refs(cur: &mut Vec<u8>, tmp: &mut Vec<u8>) {
    if find(cur, b"&#").is_none() {
        return;
    }
    // Three passes, as the three substitutions run one after the other.
    for pass in 0..3 {
        tmp.clear();
        let mut i = 0;
        while let Some(&b) = cur.get(i) {
            if b == b'&' && cur.get(i + 1) == Some(&b'#') {
                if let Some((ch, used)) = char_ref(cur.get(i..).unwrap_or(&[]), pass) {
                    tmp.push(ch);
                    i += used;
                    continue;
                }
            }
            tmp.push(b);
            i += 1;
        }
        replace(cur, tmp);
    }
}

fn char_ref(s: &[u8], pass: u8) -> Option<(u8, usize)> {
    let body = s.get(2..)?;
    match pass {
        0 => {
            let zeros = body.iter().take_while(|&&b| b == b'0').count();
            let digits = body.get(zeros..)?.iter().take_while(|b| b.is_ascii_digit()).count();
            // `0*(3[3-9]|[4-9]\d|1[01]\d|12[0-6]);` — try the longest number that fits.
            for len in (2..=digits.min(3)).rev() {
                let num = body.get(zeros..zeros + len)?;
                let v = num.iter().fold(0u32, |a, &d| a * 10 + u32::from(d - b'0'));
                let first_ok = if len == 2 { num.first() != Some(&b'0') && v >= 33 } else { (100..=126).contains(&v) };
                if first_ok && v <= 126 && body.get(zeros + len) == Some(&b';') {
                    return Some((v as u8, 2 + zeros + len + 1));
                }
            }
            None
        }
        1 => {
            let hex = body.strip_prefix(b"x")?;
            let zeros = hex.iter().take_while(|&&b| b == b'0').count();
            let (h, l) = (*hex.get(zeros)?, *hex.get(zeros + 1)?);
            let v = hexval(h) << 4 | hexval(l);
            let ok = h.is_ascii_hexdigit() && l.is_ascii_hexdigit() && (0x21..=0x7e).contains(&v) && (b'2'..=b'7').contains(&h);
            (ok && hex.get(zeros + 2) == Some(&b';')).then_some((v, 3 + zeros + 3))
        }
        _ => {
            for name in [&b"x2e"[..], b"12290", b"x3002", b"65294", b"xff0e", b"65377", b"xff61"] {
                if starts_with_ci(body, name) && body.get(name.len()) == Some(&b';') {
                    return Some((b'.', 2 + name.len() + 1));
                }
            }
            None
        }
    }
}

/// The `http(s)://` part of `uri_list_canonicalize`: ports, user parts, host
/// clean-ups, numeric hosts, the generic redirector and `http://foo` → `www.foo.com`.
fn web_variants(cur: &[u8], text: &mut Vec<u8>, vars: &mut Variants) {
    let proto_len = if starts_with_ci(cur, b"https://") {
        8
    } else if starts_with_ci(cur, b"http://") {
        7
    } else {
        return;
    };
    let proto = cur.get(..proto_len).unwrap_or(&[]);
    let is_http = proto == b"http://";
    let after = cur.get(proto_len..).unwrap_or(&[]);
    // `([^\@/?#]*\@)?` then `([^/?#:]+)`.
    let auth_len = {
        let run = after.iter().take_while(|&&b| !matches!(b, b'@' | b'/' | b'?' | b'#')).count();
        if after.get(run) == Some(&b'@') {
            run + 1
        } else {
            0
        }
    };
    let host_all = after.get(auth_len..).unwrap_or(&[]);
    let host_len = host_all.iter().take_while(|&&b| !matches!(b, b'/' | b'?' | b'#' | b':')).count();
    if host_len == 0 {
        return;
    }
    let host0 = host_all.get(..host_len).unwrap_or(&[]);
    let rest = host_all.get(host_len..).unwrap_or(&[]);
    let port: &[u8] = if rest.first() == Some(&b':') {
        let d = rest.get(1..).unwrap_or(&[]).iter().take_while(|b| b.is_ascii_digit()).count();
        rest.get(1..1 + d).unwrap_or(&[])
    } else {
        &[]
    };
    let default_port = port.is_empty();
    let port_is_80 = if default_port { is_http } else { port == b"80" };
    if !default_port {
        let (strip, num) = if is_http { (&b":80"[..], 3) } else { (&b":443"[..], 4) };
        if rest.starts_with(strip) && !rest.get(num).copied().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
            push_variant(text, vars, &[proto, host0, rest.get(num..).unwrap_or(&[])]);
        }
    }
    // Control characters and spaces dropped from the host.
    let mut host_buf = [0u8; 256];
    let mut host: &[u8] = host0;
    if host0.iter().any(|&b| b <= 0x20) && host0.len() <= host_buf.len() {
        let mut n = 0;
        for &b in host0.iter().filter(|&&b| b > 0x20) {
            if let Some(slot) = host_buf.get_mut(n) {
                *slot = b;
            }
            n += 1;
        }
        host = host_buf.get(..n).unwrap_or(&[]);
        push_variant(text, vars, &[proto, host, rest]);
    }
    // The generic redirector: an `http(s):` URL inside the rest.
    if let Some(target) = redirect_target(rest) {
        let from = text.len();
        text.extend_from_slice(target);
        vars.push(text, from, true);
    }
    if let Some(first) = memchr::memchr(b'@', host) {
        // `s/^[^\@]+\@//` — only if something precedes the first `@`.
        if first > 0 {
            host = host.get(first + 1..).unwrap_or(&[]);
            push_variant(text, vars, &[proto, host, rest]);
        }
    }
    let trimmed = host.len() - host.iter().rev().take_while(|b| !b.is_ascii_alphanumeric()).count();
    if trimmed < host.len() {
        host = host.get(..trimmed).unwrap_or(&[]);
        push_variant(text, vars, &[proto, host, rest]);
    }
    let mut ip = [0u8; 64];
    if let Some(n) = dotted_numeric_host(host, &mut ip) {
        push_variant(text, vars, &[proto, ip.get(..n).unwrap_or(&[]), rest]);
    } else if let Some(v) = single_number_host(host) {
        let n = format_ipv4(v, &mut ip);
        push_variant(text, vars, &[proto, ip.get(..n).unwrap_or(&[]), rest]);
    } else if is_http && auth_len == 0 && port_is_80 && !host0.eq_ignore_ascii_case(b"localhost") {
        let name = if starts_with_ci(host0, b"www.") { host0.get(4..).unwrap_or(&[]) } else { host0 };
        if !name.is_empty() && name.len() <= 256 && !name.contains(&b'.') && !is_domain_valid(host0) {
            let mut lower = [0u8; 256];
            for (slot, b) in lower.iter_mut().zip(name) {
                *slot = b.to_ascii_lowercase();
            }
            push_variant(text, vars, &[proto, b"www.", lower.get(..name.len()).unwrap_or(&[]), b".com", rest]);
        }
    }
}

/// `(https?:/{0,2}[^&#]+)` in `rest`, if it has a dot.
fn redirect_target(rest: &[u8]) -> Option<&[u8]> {
    let mut from = 0;
    while let Some(k) = rest.get(from..).and_then(|r| memchr::memchr2(b'h', b'H', r)) {
        let at = from + k;
        let s = rest.get(at..).unwrap_or(&[]);
        let scheme = if starts_with_ci(s, b"https:") {
            6
        } else if starts_with_ci(s, b"http:") {
            5
        } else {
            from = at + 1;
            continue;
        };
        let slashes = s.get(scheme..).unwrap_or(&[]).iter().take(2).take_while(|&&b| b == b'/').count();
        let body = s.get(scheme + slashes..).unwrap_or(&[]).iter().take_while(|&&b| b != b'&' && b != b'#').count();
        if body == 0 {
            from = at + 1;
            continue;
        }
        let m = s.get(..scheme + slashes + body).unwrap_or(&[]);
        return m.contains(&b'.').then_some(m);
    }
    None
}

/// A host written as four numbers (decimal, octal or hex) made dotted decimal,
/// the way SpamAssassin rewrites each part.
fn dotted_numeric_host(host: &[u8], out: &mut [u8; 64]) -> Option<usize> {
    let mut parts = host.split(|&b| b == b'.');
    let mut n = 0;
    let mut count = 0;
    let mut write = |s: &[u8], n: &mut usize| {
        for &b in s {
            if let Some(slot) = out.get_mut(*n) {
                *slot = b;
            }
            *n += 1;
        }
    };
    for _ in 0..4 {
        let part = parts.next()?;
        let is_hex = part.len() > 2 && starts_with_ci(part, b"0x") && part.get(2..)?.iter().all(u8::is_ascii_hexdigit);
        let is_dec = !part.is_empty() && part.iter().all(u8::is_ascii_digit);
        if !is_hex && !is_dec {
            return None;
        }
        let mut digits = [0u8; 20];
        let text: &[u8] = if is_hex {
            let v = part.get(2..)?.iter().try_fold(0u64, |a, &d| a.checked_mul(16).map(|x| x + u64::from(hexval(d))))?;
            let len = format_u64(v, &mut digits);
            digits.get(..len)?
        } else {
            part
        };
        // `s/^0+([1-3][0-7]{0,2}|[4-7][0-7]?)\b/oct/` then `s/^0+//`.
        let zeros = text.iter().take_while(|&&b| b == b'0').count();
        let after = text.get(zeros..)?;
        let oct_len = match after.first() {
            Some(b'1'..=b'3') => 1 + after.get(1..)?.iter().take(2).take_while(|b| (b'0'..=b'7').contains(b)).count(),
            Some(b'4'..=b'7') => 1 + after.get(1..)?.iter().take(1).take_while(|b| (b'0'..=b'7').contains(b)).count(),
            _ => 0,
        };
        let mut tmp = [0u8; 20];
        let final_text: &[u8] = if zeros > 0 && oct_len > 0 && oct_len == after.len() {
            let v = after.iter().fold(0u64, |a, &d| a * 8 + u64::from(d - b'0'));
            let len = format_u64(v, &mut tmp);
            tmp.get(..len)?
        } else {
            after
        };
        if count > 0 {
            write(b".", &mut n);
        }
        write(final_text, &mut n);
        count += 1;
    }
    if parts.next().is_some() || n > out.len() {
        return None;
    }
    Some(n)
}

/// A host that is one number: `0x…` (last eight hex digits) or decimal.
fn single_number_host(host: &[u8]) -> Option<u32> {
    if host.len() > 2 && starts_with_ci(host, b"0x") && host.get(2..)?.iter().all(u8::is_ascii_hexdigit) {
        let hex = host.get(2..)?;
        let tail = hex.get(hex.len().saturating_sub(8)..)?;
        return Some(tail.iter().fold(0u32, |a, &d| (a << 4) | u32::from(hexval(d))));
    }
    if !host.is_empty() && host.iter().all(u8::is_ascii_digit) {
        return Some(host.iter().fold(0u32, |a, &d| a.wrapping_mul(10).wrapping_add(u32::from(d - b'0'))));
    }
    None
}

fn format_u64(mut v: u64, out: &mut [u8; 20]) -> usize {
    let mut tmp = [0u8; 20];
    let mut n = 0;
    loop {
        if let Some(slot) = tmp.get_mut(n) {
            *slot = b'0' + (v % 10) as u8;
        }
        n += 1;
        v /= 10;
        if v == 0 || n >= 20 {
            break;
        }
    }
    for i in 0..n {
        if let (Some(o), Some(&t)) = (out.get_mut(i), tmp.get(n - 1 - i)) {
            *o = t;
        }
    }
    n
}

fn format_ipv4(v: u32, out: &mut [u8; 64]) -> usize {
    let mut n = 0;
    for (i, octet) in v.to_be_bytes().iter().enumerate() {
        if i > 0 {
            if let Some(slot) = out.get_mut(n) {
                *slot = b'.';
            }
            n += 1;
        }
        let mut d = [0u8; 20];
        let len = format_u64(u64::from(*octet), &mut d);
        for &b in d.get(..len).unwrap_or(&[]) {
            if let Some(slot) = out.get_mut(n) {
                *slot = b;
            }
            n += 1;
        }
    }
    n
}

/// A name of up to 16 bytes packed big-endian into a `u128` (zero padded), so
/// that packed names sort as the names do.
const fn pack(s: &[u8]) -> u128 {
    let mut v = 0u128;
    let mut i = 0;
    while i < 16 {
        v <<= 8;
        if i < s.len() {
            v |= s[i] as u128;
        }
        i += 1;
    }
    v
}

const SHORT_TLDS: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < TLDS.len() {
        if TLDS[i].len() <= 16 {
            n += 1;
        }
        i += 1;
    }
    n
};

/// The TLDs of up to 16 bytes, packed, in order.
static PACKED_TLDS: [u128; SHORT_TLDS] = {
    let mut out = [0u128; SHORT_TLDS];
    let mut i = 0;
    let mut j = 0;
    while i < TLDS.len() {
        if TLDS[i].len() <= 16 {
            out[j] = pack(TLDS[i]);
            j += 1;
        }
        i += 1;
    }
    out
};

/// Whether `tld` (any case) is a top-level domain SpamAssassin knows.
pub(crate) fn is_tld(tld: &[u8]) -> bool {
    if tld.is_empty() || tld.len() > 63 {
        return false;
    }
    if tld.len() <= 16 {
        let mut v = 0u128;
        for i in 0..16 {
            v <<= 8;
            if let Some(b) = tld.get(i) {
                v |= u128::from(b.to_ascii_lowercase());
            }
        }
        return PACKED_TLDS.binary_search(&v).is_ok();
    }
    let mut buf = [0u8; 63];
    for (slot, b) in buf.iter_mut().zip(tld) {
        *slot = b.to_ascii_lowercase();
    }
    let lower = buf.get(..tld.len()).unwrap_or(&[]);
    TLDS.binary_search(&lower).is_ok()
}

/// `RegistryBoundaries::is_domain_valid`: a dot, no white space, a known TLD.
pub(crate) fn is_domain_valid(dom: &[u8]) -> bool {
    if dom.iter().any(|&b| is_perl_space(b)) {
        return false;
    }
    match memchr::memrchr(b'.', dom) {
        Some(k) => is_tld(dom.get(k + 1..).unwrap_or(&[])),
        None => false,
    }
}

/// `Util::is_fqdn_valid` for an ASCII host.
pub(crate) fn is_fqdn_valid(host: &[u8]) -> bool {
    let mut h = host;
    while let [rest @ .., b'.'] = h {
        h = rest;
    }
    if h.len() > 253 {
        return false;
    }
    let labels = h.split(|&b| b == b'.').count();
    if labels < 2 {
        return false;
    }
    for (i, label) in h.split(|&b| b == b'.').enumerate() {
        if label.is_empty() || label.len() > 63 {
            return false;
        }
        let ok = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
        if !label.iter().all(|b| ok(b) || *b == b'-') || !label.first().is_some_and(ok) || !label.last().is_some_and(ok) {
            return false;
        }
        if labels - i <= 2 && label.contains(&b'_') {
            return false;
        }
    }
    true
}

fn is_ipv4(h: &[u8]) -> bool {
    let mut n = 0;
    for part in h.split(|&b| b == b'.') {
        n += 1;
        let ok = !part.is_empty()
            && part.len() <= 3
            && part.iter().all(u8::is_ascii_digit)
            && (part.len() == 1 || part.first() != Some(&b'0'))
            && part.iter().fold(0u32, |a, &d| a * 10 + u32::from(d - b'0')) <= 255;
        if !ok {
            return false;
        }
    }
    n == 4
}

fn is_ipv6(h: &[u8]) -> bool {
    h.iter().filter(|&&b| b == b':').count() >= 2 && h.iter().all(|b| b.is_ascii_hexdigit() || *b == b':' || *b == b'.')
}

/// Whether `RegistryBoundaries::uri_to_domain` finds a domain in a cleaned URI.
fn uri_domain(uri: &[u8], tmp: &mut Vec<u8>) -> bool {
    tmp.clear();
    tmp.extend(uri.iter().map(u8::to_ascii_lowercase));
    let u = tmp.as_slice();
    if u.starts_with(b"javascript:") || u.starts_with(b"cid:") || u.starts_with(b"file:") {
        return false;
    }
    let host: &[u8] = if let Some(m) = u.strip_prefix(b"mailto:") {
        let m = m.get(..memchr::memchr(b'?', m).unwrap_or(m.len())).unwrap_or(&[]);
        let ats = m.iter().filter(|&&b| b == b'@').count();
        if ats != 1 {
            return false;
        }
        m.get(memchr::memrchr(b'@', m).map_or(0, |k| k + 1)..).unwrap_or(&[])
    } else {
        let scheme = u.iter().take_while(|b| b.is_ascii_lowercase()).count();
        let mut s = u;
        if scheme > 0 && u.get(scheme) == Some(&b':') {
            let slashes = u.get(scheme + 1..).unwrap_or(&[]).iter().take(2).take_while(|&&b| b == b'/').count();
            s = u.get(scheme + 1 + slashes..).unwrap_or(&[]);
        }
        let s = s.get(..s.iter().position(|&b| matches!(b, b'/' | b'?' | b'#')).unwrap_or(s.len())).unwrap_or(&[]);
        let s = s.get(memchr::memrchr(b'@', s).map_or(0, |k| k + 1)..).unwrap_or(&[]);
        // `:\d*$`
        let digits = s.iter().rev().take_while(|b| b.is_ascii_digit()).count();
        match s.len().checked_sub(digits + 1) {
            Some(c) if s.get(c) == Some(&b':') => s.get(..c).unwrap_or(&[]),
            _ => s,
        }
    };
    let encoded_printable = host.windows(3).any(|w| match w {
        [b'%', h, l] => matches!((h, l), (b'2', b'1'..=b'9' | b'a'..=b'f') | (b'3'..=b'6', b'0'..=b'9' | b'a'..=b'f') | (b'7', b'0'..=b'9' | b'a'..=b'e')),
        _ => false,
    });
    if encoded_printable {
        return false;
    }
    is_ipv4(host) || is_ipv6(host) || (is_fqdn_valid(host) && is_domain_valid(host))
}

// ---------------------------------------------------------------------------
// Text scanning: SpamAssassin's `_tbirdurire`, emulated without backtracking.

/// Byte classes for the text scanner.
const END: u8 = 1; // tbirdenddelim: `><"\`}]{[|`, white space, ESC, 0xA0
const EMAIL: u8 = 2; // tbirdenddelimemail: the above, `,(\'` and every 8-bit byte
const START: u8 = 4; // tbirdstartdelim
const SC: u8 = 8; // scstartdelim: punctuation that may precede a schemeless host
const WORD: u8 = 16; // \w
const HOST: u8 = 32; // [a-z0-9._-]
const AT: u8 = 64; // @
const SPACE: u8 = 128; // Perl's \s

static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let space = matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
        let end = space || matches!(b, b'>' | b'<' | b'"' | b'`' | b'}' | b']' | b'{' | b'[' | b'|' | 0x1b | 0xa0);
        let email = end || matches!(b, b',' | b'(' | b'\'') || b >= 0x80;
        let start = space || matches!(b, b'>' | b'<' | b'"' | b'\'' | b'`' | b',' | b'{' | b'[' | b'(' | b'|' | 0x1b | 0xa0);
        let sc = space
            || matches!(
                b,
                b'!' | b'"' | b'#' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b'/' | b':' | b';' | b'<'
                    | b'=' | b'>' | b'?' | b'@' | b'[' | b'\\' | b']' | b'^' | b'`' | b'{' | b'|' | b'}' | b'~' | 0x1b
                    | 0xa0
            );
        let word = b.is_ascii_alphanumeric() || b == b'_';
        let host = b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
        t[i] = flag(end, END)
            | flag(email, EMAIL)
            | flag(start, START)
            | flag(sc, SC)
            | flag(word, WORD)
            | flag(host, HOST)
            | flag(b == b'@', AT)
            | flag(space, SPACE);
        i += 1;
    }
    t
};

/// `bit` if `on`, else 0.
const fn flag(on: bool, bit: u8) -> u8 {
    if on {
        bit
    } else {
        0
    }
}

fn has(b: u8, mask: u8) -> bool {
    CLASS[b as usize] & mask != 0
}

/// The first position at or after a point where a byte class holds, cached so
/// that increasing queries cost linear time overall.
struct NextPos {
    from: usize,
    at: usize,
    mask: u8,
}

impl NextPos {
    fn new(mask: u8) -> Self {
        NextPos { from: usize::MAX, at: 0, mask }
    }

    fn get(&mut self, s: &[u8], x: usize) -> usize {
        if self.from != usize::MAX && x >= self.from && x <= self.at {
            return self.at;
        }
        let mask = self.mask;
        let at = x + s.get(x..).unwrap_or(&[]).iter().position(|&b| has(b, mask)).unwrap_or(s.len().saturating_sub(x));
        self.from = x;
        self.at = at;
        at
    }
}

/// Finds raw URIs in one line of rendered text.
pub(crate) struct TextScanner {
    end: NextPos,
    email: NextPos,
    email_or_at: NextPos,
}

/// The kind of a raw URI match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RawKind {
    Scheme,
    Mail,
    Schemeless,
}

impl TextScanner {
    pub fn new() -> Self {
        TextScanner { end: NextPos::new(END), email: NextPos::new(EMAIL), email_or_at: NextPos::new(EMAIL | AT) }
    }

    /// Calls `found` for each raw URI in `line`, leftmost first, not overlapping.
    ///
    /// Every match holds a `.`, `:` or `@` and no white space, so only the
    /// white-space separated words holding one of those are examined.
    pub fn scan(&mut self, line: &[u8], mut found: impl FnMut(&[u8], RawKind)) {
        *self = TextScanner::new();
        let mut done = 0;
        while let Some(k) = line.get(done..).and_then(|l| memchr::memchr3(b'.', b':', b'@', l)) {
            let anchor = done + k;
            let mut ts = anchor;
            while ts > done && !line.get(ts - 1).copied().is_some_and(|b| has(b, SPACE)) {
                ts -= 1;
            }
            let te = anchor + line.get(anchor..).unwrap_or(&[]).iter().position(|&b| has(b, SPACE)).unwrap_or(line.len() - anchor);
            let mut p = ts;
            while p < te {
                let c = line.get(p).copied().unwrap_or(0);
                let prev = if p == 0 { None } else { line.get(p - 1).copied() };
                let boundary = prev.is_some_and(|b| has(b, WORD)) != has(c, WORD)
                    || prev.is_some_and(|b| has(b, START))
                    || (p >= 3 && line.get(p - 3) == Some(&0x1b) && line.get(p - 2) == Some(&b'('));
                if boundary {
                    if let Some((e, kind)) = self.try_at(line, p) {
                        found(line.get(p..e).unwrap_or(&[]), kind);
                        p = e.max(p + 1);
                        continue;
                    }
                }
                p += 1;
            }
            done = te.max(anchor + 1);
        }
    }

    fn try_at(&mut self, s: &[u8], p: usize) -> Option<(usize, RawKind)> {
        let rest = s.get(p..)?;
        // Known scheme or www./ftp. prefix.
        let prefix = if starts_with_ci(rest, b"http://") {
            7
        } else if starts_with_ci(rest, b"https://") {
            8
        } else if starts_with_ci(rest, b"ftp://") {
            6
        } else if starts_with_ci(rest, b"ftp.") {
            4
        } else if starts_with_ci(rest, b"www") {
            let d = rest.get(3..)?.iter().take(2).take_while(|b| b.is_ascii_digit()).count();
            if rest.get(3 + d) == Some(&b'.') {
                4 + d
            } else {
                0
            }
        } else {
            0
        };
        if prefix > 0 {
            let x = p + prefix;
            let run = self.end.get(s, x) - x;
            if (1..=2048).contains(&run) {
                return Some((x + run, RawKind::Scheme));
            }
        }
        // mailto: or local@domain.
        if starts_with_ci(rest, b"mailto:") {
            let x = p + 7;
            let run = self.email.get(s, x) - x;
            if (1..=2048).contains(&run) {
                return Some((x + run, RawKind::Mail));
            }
        }
        let q = self.email_or_at.get(s, p);
        if s.get(q) == Some(&b'@') && (1..=251).contains(&(q - p)) {
            let x = q + 1;
            let run = self.email.get(s, x) - x;
            if (1..=251).contains(&run) {
                return Some((x + run, RawKind::Mail));
            }
        }
        // Schemeless host with a known TLD.
        let sc_ok = p == 0 || s.get(p - 1).copied().is_some_and(|b| has(b, SC));
        if sc_ok && rest.first().is_some_and(u8::is_ascii_alphanumeric) {
            return self.schemeless(s, p).map(|e| (e, RawKind::Schemeless));
        }
        None
    }

    fn schemeless(&mut self, s: &[u8], p: usize) -> Option<usize> {
        let run = s.get(p..)?.iter().take_while(|&&b| has(b, HOST)).count();
        memchr::memchr(b'.', s.get(p..p + run)?)?;
        let max_dot = p + run.min(253).saturating_sub(1);
        let mut d = max_dot;
        while d > p {
            if s.get(d) == Some(&b'.') {
                let label = s.get(d + 1..)?.iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'-').count();
                let t_end = d + 1 + label;
                let dot_alnum = s.get(t_end) == Some(&b'.') && s.get(t_end + 1).is_some_and(u8::is_ascii_alphanumeric);
                if label > 0 && !dot_alnum && is_tld(s.get(d + 1..t_end)?) {
                    if let Some(e) = self.after_host(s, t_end) {
                        return Some(e);
                    }
                }
            }
            d -= 1;
        }
        None
    }

    /// `\.?(?::\d{1,5})?(?:/[^delim]{1,2048})?` then a delimiter or the end.
    fn after_host(&mut self, s: &[u8], t: usize) -> Option<usize> {
        let ends = |i: usize| i >= s.len() || s.get(i).copied().is_some_and(|b| has(b, END));
        for dot in [true, false] {
            let j = if dot {
                if s.get(t) != Some(&b'.') {
                    continue;
                }
                t + 1
            } else {
                t
            };
            for port in [true, false] {
                let k = if port {
                    if s.get(j) != Some(&b':') {
                        continue;
                    }
                    let digits = s.get(j + 1..)?.iter().take(6).take_while(|b| b.is_ascii_digit()).count();
                    if !(1..=5).contains(&digits) {
                        continue;
                    }
                    j + 1 + digits
                } else {
                    j
                };
                if s.get(k) == Some(&b'/') {
                    let run = self.end.get(s, k + 1) - (k + 1);
                    if (1..=2048).contains(&run) {
                        return Some(k + 1 + run);
                    }
                }
                if ends(k) {
                    return Some(k);
                }
            }
        }
        None
    }
}

/// Turns a raw URI from text into the URI SpamAssassin cleans, in `out`; false
/// if SpamAssassin skips it.
pub(crate) fn text_uri(raw: &[u8], kind: RawKind, out: &mut Vec<u8>, tmp: &mut Vec<u8>) -> bool {
    // `s/(^[^(]*)\).*$/$1/`: a `)` with no `(` before it ends the URI.
    let mut r = raw;
    if let Some(k) = r.iter().position(|&b| b == b'(' || b == b')') {
        if r.get(k) == Some(&b')') {
            r = r.get(..k).unwrap_or(&[]);
        }
    }
    while let [head @ .., last] = r {
        if matches!(last, b'-' | b'~' | b'!' | b'@' | b'#' | b'^' | b'&' | b'*' | b'(' | b')' | b'_' | b'+' | b'=' | b':' | b';' | b'\'' | b'?' | b',' | b'.') {
            r = head;
        } else {
            break;
        }
    }
    if kind == RawKind::Mail && !r.contains(&b'@') {
        return false;
    }
    if starts_with_ci(r, b"cid:") || starts_with_ci(r, b"mid:") {
        return false;
    }
    // `^\w+:/{0,2}$`
    let w = r.iter().take_while(|&&b| has(b, WORD)).count();
    if w > 0 && r.get(w) == Some(&b':') && r.get(w + 1..).unwrap_or(&[]).iter().all(|&b| b == b'/') && r.len() - w - 1 <= 2 {
        return false;
    }
    if r.is_empty() {
        return false;
    }
    out.clear();
    let schemed = [&b"http:"[..], b"https:", b"ftp:", b"mailto:"].iter().any(|p| starts_with_ci(r, p));
    if !schemed {
        let www = starts_with_ci(r, b"www") && {
            let d = r.get(3..).unwrap_or(&[]).iter().take(2).take_while(|b| b.is_ascii_digit()).count();
            r.get(3 + d) == Some(&b'.')
        };
        let slash_before_at = memchr::memchr(b'/', r).is_some_and(|s| r.get(s + 2..).is_some_and(|t| t.contains(&b'@')));
        if starts_with_ci(r, b"ftp.") {
            out.extend_from_slice(b"ftp://");
            out.extend_from_slice(r);
        } else if www || slash_before_at {
            out.extend_from_slice(b"http://");
            out.extend_from_slice(r);
        } else if let Some(at) = memchr::memchr(b'@', r) {
            // `\@.+?\.`: a dot at least two places after the `@`.
            if !r.get(at + 2..).is_some_and(|t| t.contains(&b'.')) || find(r, b"&nbsp;").is_some() {
                return false;
            }
            let mut m = r;
            for p in [&b"skype"[..], b"e-mail", b"email", b"-mail", b"mail"] {
                if starts_with_ci(m, p) && m.get(p.len()) == Some(&b':') {
                    m = m.get(p.len()..).unwrap_or(&[]);
                    break;
                }
            }
            while let Some(rest) = m.strip_prefix(b":") {
                m = rest;
            }
            out.extend_from_slice(b"mailto:");
            out.extend_from_slice(m);
        } else {
            if !r.contains(&b'.') {
                return false;
            }
            out.extend_from_slice(b"http://");
            out.extend_from_slice(r);
        }
    } else {
        out.extend_from_slice(r);
    }
    if starts_with_ci(out, b"mailto:") {
        if has_pct_escape(out) {
            tmp.clear();
            url_decode(out, tmp, false);
            replace(out, tmp);
        }
        let Some(at) = memchr::memchr(b'@', out) else { return false };
        let after = out.get(at + 1..).unwrap_or(&[]);
        let mut host = after.get(..after.iter().position(|&b| matches!(b, b'?' | b'&' | b'>')).unwrap_or(after.len())).unwrap_or(&[]);
        while let Some(h) = host.strip_suffix(b"%20") {
            host = h;
        }
        if !is_domain_valid(host) {
            return false;
        }
    }
    true
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::vec;

    fn found(line: &[u8]) -> Vec<(String, RawKind)> {
        let mut v = Vec::new();
        TextScanner::new().scan(line, |u, k| v.push((String::from_utf8_lossy(u).into_owned(), k)));
        v
    }

    #[test]
    fn scan_table() {
        use RawKind::*;
        let cases: &[(&[u8], &[(&str, RawKind)])] = &[
            (b"visit http://foo.com/x. now", &[("http://foo.com/x.", Scheme)]),
            (b"www.bar.org, and", &[("www.bar.org,", Scheme)]),
            (b"see baz.net/path ok", &[("baz.net/path", Schemeless)]),
            (b"visit baz.net, now", &[]),
            (b"see (foo.com) and bar.com! x", &[]),
            (b"qux.org.", &[("qux.org.", Schemeless)]),
            (b"mail joe@example.com today", &[("joe@example.com", Mail)]),
            (b"mailto:joe@mail.com?subject=hi", &[("mailto:joe@mail.com?subject=hi", Mail)]),
            (b"<http://angle.com/path>", &[("http://angle.com/path", Scheme)]),
            (b"foo.com:8080/x", &[("foo.com:8080/x", Schemeless)]),
            (b"example.com:abc", &[]),
            (b"foo.com.evil", &[]),
            (b"10.0.0.1/path", &[]),
            (b"file.txt and index.html", &[]),
            (b"xhttp://foo.com", &[("foo.com", Schemeless)]),
        ];
        for (line, want) in cases {
            let got = found(line);
            let want: Vec<(String, RawKind)> = want.iter().map(|(s, k)| (String::from(*s), *k)).collect();
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(line));
        }
    }

    fn cleaned(uri: &[u8], need_domain: bool) -> Vec<String> {
        let (mut out, mut slots, mut a, mut b, mut c) = (Vec::new(), SlotTable::with_items(100), Vec::new(), Vec::new(), Vec::new());
        slots.reset(100);
        let mut set = UriSet { out: &mut out, slots: &mut slots, count: 0, max: 100, overflow: false };
        let mut work = Work::new(&mut a, &mut b, &mut c);
        add_uri(uri, need_domain, false, &mut set, &mut work);
        let mut v: Vec<String> = if out.is_empty() { Vec::new() } else { out.split(|&b| b == b'\n').map(|l| String::from_utf8_lossy(l).into_owned()).collect() };
        v.sort();
        v
    }

    #[test]
    fn byte_set_growth_table() {
        // (max items, items offered, slots the table ends with): it starts small, doubles
        // as items come, stops at twice the most it may hold; every item stays findable.
        let cases: &[(usize, usize, usize)] = &[(1000, 10, 64), (1000, 32, 128), (1000, 600, 2048), (1000, 1500, 2048), (20, 100, 64)];
        for &(max, offered, slots_after) in cases {
            let (mut arena, mut slots) = (Vec::new(), SlotTable::with_items(max));
            // Two messages: the second, after a reset, sees none of the first's items.
            for round in 0..2 {
                slots.reset(max);
                arena.clear();
                let mut set = ByteSet { arena: &mut arena, slots: &mut slots, count: 0, max, sep: None };
                let item = |i: usize| alloc::format!("r{round}-item-{i}").into_bytes();
                for i in 0..offered {
                    let want = if i < max { Offer::Added } else { Offer::Full };
                    assert_eq!(set.offer(&item(i)), want, "{max}/{offered}: item {i}");
                }
                for i in 0..offered.min(max) {
                    assert_eq!(set.offer(&item(i)), Offer::Present, "{max}/{offered}: item {i} again");
                }
                assert_eq!(set.count, offered.min(max));
                if round == 1 {
                    let old = alloc::format!("r0-item-{}", offered.min(max) - 1).into_bytes();
                    let want = if offered < max { Offer::Added } else { Offer::Full };
                    assert_eq!(set.offer(&old), want, "{max}/{offered}: the last message's item is gone");
                }
            }
            assert_eq!(slots.slots.len(), slots_after, "{max}/{offered}");
        }
    }

    #[test]
    fn canonical_table() {
        let cases: &[(&[u8], bool, &[&str])] = &[
            (b"http://foo.com/x", true, &["http://foo.com/x"]),
            (b"http://a", true, &["http://a", "http://www.a.com"]),
            (b"http://%77ww.enc.com/%41", true, &["http://%77ww.enc.com/%41", "http://www.enc.com/A"]),
            (
                b"https://x.com/r?u=http://evil.com/p&x=1",
                true,
                &["http://evil.com/p", "https://x.com/r?u=http://evil.com/p&x=1"],
            ),
            (b"mailto:joe@mail.com?subject=hi", true, &["mailto:joe@mail.com", "mailto:joe@mail.com?subject=hi"]),
            (b"http://foo.bar?x=1", false, &["http://foo.bar/?x=1", "http://foo.bar?x=1"]),
            (b"http:www.x.com", false, &["http://www.x.com", "http:www.x.com"]),
            (b"http://1113343453/", false, &["http://1113343453/", "http://66.92.69.221/"]),
            (b"http://0x7f000001/", false, &["http://0x7f000001/", "http://127.0.0.1/"]),
            (b"http://www.example.com:80/x", false, &["http://www.example.com/x", "http://www.example.com:80/x"]),
            (b"http://example.com./", false, &["http://example.com./", "http://example.com/"]),
            (b"#frag", false, &["#frag"]),
            (b"http://nodomain.invalidtld/", true, &[]),
            // Expected values below come from SpamAssassin 4.0.1's uri_list_canonicalize.
            (
                b"http://&#119;ww.x.com/",
                false,
                &["http://&#119;ww.x.com/", "http://&/#119;ww.x.com/", "http:///#119;ww.x.com/", "http://www.&.com/#119;ww.x.com/"],
            ),
            (b"http://x.com/&#119;", false, &["http://x.com/&#119;", "http://x.com/w"]),
            (b"HTTP://A", false, &["HTTP://A"]),
            (b"http://0.0.0.010/", false, &["http://...8/", "http://0.0.0.010/"]),
            (b"http://user@host.com:80/", false, &["http://host.com/", "http://user@host.com:80/"]),
            (b"http://foo@bar@baz.com/", false, &["http://baz.com/", "http://foo@bar@baz.com/"]),
            (b"http://h%41st.com/", false, &["http://h%41st.com/", "http://hAst.com/"]),
            (b"mailto:\"Joe%20Bloggs\"%20<joe@x.com>", false, &["mailto:\"Joe%20Bloggs\"%20<joe@x.com>", "mailto:joe@x.com"]),
            (b"www.x.com?q", false, &["http://www.x.com/?q", "www.x.com?q"]),
            (b"ftp.x.org", false, &["ftp.x.org", "ftp://ftp.x.org"]),
            (b"http://x.com:443/", false, &["http://x.com:443/"]),
            (b"https://x.com:443/a", false, &["https://x.com/a", "https://x.com:443/a"]),
        ];
        for (uri, need, want) in cases {
            assert_eq!(cleaned(uri, *need), want.iter().map(|s| String::from(*s)).collect::<Vec<_>>(), "{:?}", String::from_utf8_lossy(uri));
        }
    }

    #[test]
    fn text_uri_table() {
        let cases: &[(&[u8], RawKind, Option<&str>)] = &[
            (b"www.bar.org,", RawKind::Scheme, Some("http://www.bar.org")),
            (b"baz.net/path", RawKind::Schemeless, Some("http://baz.net/path")),
            (b"joe@example.com", RawKind::Mail, Some("mailto:joe@example.com")),
            (b"foo@bar", RawKind::Mail, None),
            (b"http://paren.com/a)b", RawKind::Scheme, Some("http://paren.com/a")),
            (b"http://", RawKind::Scheme, None),
            (b"ftp.gnu.org/pub", RawKind::Scheme, Some("ftp://ftp.gnu.org/pub")),
            (b"email:joe@x.org", RawKind::Mail, Some("mailto:joe@x.org")),
            (b"joe@x.invalidtld", RawKind::Mail, None),
        ];
        for (raw, kind, want) in cases {
            let (mut out, mut tmp) = (Vec::new(), Vec::new());
            let ok = text_uri(raw, *kind, &mut out, &mut tmp);
            assert_eq!(ok.then(|| String::from_utf8_lossy(&out).into_owned()), want.map(String::from), "{:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn domain_checks() {
        assert!(is_fqdn_valid(b"a.example.com"));
        assert!(is_fqdn_valid(b"a_b.example.com"));
        assert!(!is_fqdn_valid(b"example_x.com"));
        assert!(!is_fqdn_valid(b"com"));
        assert!(!is_fqdn_valid(b"-a.com"));
        assert!(is_domain_valid(b"x.COM"));
        assert!(!is_domain_valid(b"x.nope"));
        assert!(is_ipv4(b"10.0.0.1"));
        assert!(!is_ipv4(b"10.0.0.256"));
        let mut t = vec![];
        assert!(uri_domain(b"http://user@1.2.3.4:80/x", &mut t));
        assert!(!uri_domain(b"javascript:foo.com", &mut t));
        assert!(uri_domain(b"mailto:a@b.org?x", &mut t));
    }
}
