//! The `Received` chain read into relays, as SpamAssassin's Received parser
//! (`Message::Metadata::Received`) does, and the pseudo-headers built from them
//! (`X-Spam-Relays-Untrusted`, `-Trusted`, `-Internal`, `-External`, `EnvelopeFrom`,
//! `ALL-TRUSTED`, `ALL-UNTRUSTED`, `ALL-INTERNAL`, `ALL-EXTERNAL`).
//!
//! Each `Received` value is matched against SpamAssassin's MTA formats, in its order,
//! with the bounded matcher of [`super::re`]; the trust boundary comes from
//! `trusted_networks` / `internal_networks` / `msa_networks`, or SpamAssassin's
//! inference when they are unset (a relay is trusted while its IP is private or it
//! authenticated). Addresses from `originating_ip_headers` join the chain as
//! SpamAssassin's synthetic `X-Originating-IP` relays.
//!
//! Limits: at most [`MAX_RELAYS`] relays per message (later, older ones are dropped;
//! the public corpus has at most 15 `Received` lines), each field cut at
//! [`MAX_FIELD`] bytes. All buffers are reused from message to message.

use alloc::vec::Vec;

use super::header::HeaderData;
use super::re::{is_space, never, Patterns, Regex, Search};
use crate::msg::{self, Message};
use crate::rules::{NetList, NetRange};
use crate::rules::cache::ProgramShelf;

/// Relays kept per message; SpamAssassin keeps all of them.
pub const MAX_RELAYS: usize = 20;
/// Bytes kept of one relay field.
pub const MAX_FIELD: usize = 255;
/// Bytes of one `Received` value parsed (SpamAssassin caps header values at 8 KiB).
const MAX_LINE: usize = 8192;
/// Matcher steps the `Received` chain of one message may take (the public corpus
/// takes at most about 11 000); past it the remaining lines count as unparseable.
pub const RELAY_STEPS: u64 = 1_000_000;

/// A range of bytes in one of the relay buffers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Rg(u32, u32);

impl Rg {
    fn get(self, buf: &[u8]) -> &[u8] {
        buf.get(self.0 as usize..self.1 as usize).unwrap_or(&[])
    }

    fn is_empty(self) -> bool {
        self.1 <= self.0
    }
}

/// Fields of a relay, indexes into [`Relay::fields`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
enum F {
    Ip,
    Rdns,
    Helo,
    By,
    Ident,
    Envfrom,
    Id,
    Auth,
}

const FIELDS: usize = 8;

/// One parsed `Received` hop.
#[derive(Debug, Clone, Copy, Default)]
struct Relay {
    fields: [Rg; FIELDS],
    /// SpamAssassin's `envfrom` is defined (possibly empty).
    has_envfrom: bool,
    /// The MTA looked the IP up and found no name.
    no_reverse_dns: bool,
    /// `IP_PRIVATE` matches the IP.
    ip_private: bool,
    trusted: bool,
    internal: bool,
    msa: bool,
}

impl Relay {
    fn field(&self, f: F) -> Rg {
        self.fields.get(f as usize).copied().unwrap_or_default()
    }

    fn set(&mut self, f: F, r: Rg) {
        if let Some(slot) = self.fields.get_mut(f as usize) {
            *slot = r;
        }
    }
}

/// A relay's fields, as the eval tests see them.
#[derive(Debug, Clone, Copy)]
pub struct RelayView<'a> {
    /// `ip`
    pub ip: &'a [u8],
    /// `rdns` (empty when none)
    pub rdns: &'a [u8],
    /// `helo`
    pub helo: &'a [u8],
    /// `by`
    pub by: &'a [u8],
    /// `ident`
    pub ident: &'a [u8],
    /// `envfrom`, `None` when SpamAssassin leaves it undefined
    pub envfrom: Option<&'a [u8]>,
    /// `id`
    pub id: &'a [u8],
    /// `auth`
    pub auth: &'a [u8],
    /// The receiving MTA looked the IP up and found no reverse name.
    pub no_reverse_dns: bool,
    /// The IP is in a private range (`IP_PRIVATE`).
    pub ip_private: bool,
    /// Inside the trust boundary.
    pub trusted: bool,
    /// Inside the internal networks.
    pub internal: bool,
    /// Submitted through an MSA (`msa_networks`).
    pub msa: bool,
}

/// Which pseudo-header a name asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pseudo {
    Untrusted,
    Trusted,
    Internal,
    External,
    EnvelopeFrom,
    AllTrusted,
    AllUntrusted,
    AllInternal,
    AllExternal,
}

fn pseudo_of(name: &[u8]) -> Option<Pseudo> {
    const CASELESS: [(&[u8], Pseudo); 5] = [
        (b"x-spam-relays-untrusted", Pseudo::Untrusted),
        (b"x-spam-relays-trusted", Pseudo::Trusted),
        (b"x-spam-relays-internal", Pseudo::Internal),
        (b"x-spam-relays-external", Pseudo::External),
        (b"envelopefrom", Pseudo::EnvelopeFrom),
    ];
    // SpamAssassin compares these case-insensitively, the ALL-* names exactly.
    const EXACT: [(&[u8], Pseudo); 4] = [
        (b"ALL-TRUSTED", Pseudo::AllTrusted),
        (b"ALL-UNTRUSTED", Pseudo::AllUntrusted),
        (b"ALL-INTERNAL", Pseudo::AllInternal),
        (b"ALL-EXTERNAL", Pseudo::AllExternal),
    ];
    CASELESS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .or_else(|| EXACT.iter().find(|(n, _)| *n == name))
        .map(|&(_, p)| p)
}

/// Whether header rules on `name` read a pseudo-header built here rather than the
/// message's own header (so the message text is no prefilter for them).
pub fn is_pseudo_header(name: &[u8]) -> bool {
    pseudo_of(name).is_some()
}

/// Whether the text of pseudo-header `name` is one [`Relays::write_relay_texts`] writes,
/// so that a prefilter reading those finds its literals.
pub fn is_relay_text(name: &[u8]) -> bool {
    matches!(
        pseudo_of(name),
        Some(Pseudo::Untrusted | Pseudo::Trusted | Pseudo::Internal | Pseudo::External | Pseudo::EnvelopeFrom)
    )
}

/// The relays of one message, trusted and untrusted, and its envelope sender.
#[derive(Debug, Default)]
pub struct Relays {
    relays: Vec<Relay>,
    /// Relay field bytes.
    arena: Vec<u8>,
    /// The `Received` value being parsed and the strings derived from it.
    work: Vec<u8>,
    search: Search,
    /// Relays in the trusted and untrusted lists.
    num_unparseable: u32,
    /// SpamAssassin's `last_trusted_relay_index` and `last_internal_relay_index`.
    last_trusted_index: i32,
    last_internal_index: i32,
    /// `EnvelopeFrom`, when there is one.
    envelope_from: Option<Rg>,
    /// Counts the messages read, so per-message caches can tell them apart.
    generation: u64,
}

/// What parsing one `Received` line gave.
enum Parsed {
    /// A relay, its fields in the work buffer.
    Relay(Fields),
    /// A line SpamAssassin deliberately skips.
    Skip,
    /// A line it cannot parse.
    Unparseable,
}

/// Field ranges into the work buffer while a line is parsed.
#[derive(Debug, Clone, Copy, Default)]
struct Fields {
    f: [Rg; FIELDS],
    has_envfrom: bool,
    looked_up_dns: bool,
}

impl Fields {
    fn set(&mut self, field: F, r: Rg) {
        if let Some(slot) = self.f.get_mut(field as usize) {
            *slot = r;
        }
    }

    fn get(&self, field: F) -> Rg {
        self.f.get(field as usize).copied().unwrap_or_default()
    }
}

/// Line-level state of one message's parse.
struct ChainState {
    allow_mailfetch_markers: bool,
    /// qmail-scanner's envelope sender, waiting for the next (older) relay.
    qmail_scanner_env_from: Option<Rg>,
    /// A fetchmail/getmail marker restarted the chain.
    restart: bool,
}

impl Relays {
    /// Reads the relays of `message`, replacing the previous message's.
    pub fn read(&mut self, message: &Message<'_>, data: &HeaderData) {
        self.generation = self.generation.wrapping_add(1);
        self.relays.clear();
        self.arena.clear();
        self.num_unparseable = 0;
        self.last_trusted_index = -1;
        self.last_internal_index = -1;
        self.envelope_from = None;
        if !data.needs_relays {
            return;
        }
        self.search.allow(RELAY_STEPS);
        let rx = &data.received;
        let trust = &data.trust;
        let mut state = ChainState { allow_mailfetch_markers: true, qmail_scanner_env_from: None, restart: false };
        let (mut in_trusted, mut in_internal, mut found_msa) = (true, true, false);
        let mut scanner_env_arena: Option<Rg> = None;
        let received =
            message.headers_named(b"received").map(|h| (h.decoded, false));
        let synthetic = data.originating_ip_headers.iter().filter_map(|name| {
            let h = message.header(name.as_bytes())?;
            Some((h.decoded, true))
        });
        for (value, is_synthetic) in received.chain(synthetic) {
            // The qmail-scanner note applies to the next header only.
            let qms = scanner_env_arena.take();
            self.work.clear();
            if is_synthetic {
                // SpamAssassin turns `X-Originating-IP: 1.2.3.4` into "from X-Originating-IP: 1.2.3.4".
                if !rx.patterns.ip_search.find_at(value, 0, &mut self.search) {
                    continue;
                }
                let Some(ip) = self.search.text(value, 0) else {
                    continue;
                };
                self.work.extend_from_slice(b"from X-Originating-IP: ");
                self.work.extend_from_slice(ip);
            } else {
                normalize_into(value, &mut self.work);
            }
            state.restart = false;
            // A line parsed when the step allowance runs out is not trusted as parsed.
            let parsed = match self.search.allowance() {
                0 => Parsed::Unparseable,
                _ => rx.parse_line(&mut self.work, &mut self.search, &mut state),
            };
            let parsed = if self.search.allowance() == 0 { Parsed::Unparseable } else { parsed };
            if state.restart && state.allow_mailfetch_markers {
                // A mail fetcher handed the message over: the chain starts again.
                self.relays.clear();
                self.arena.clear();
            }
            if let Some(env) = state.qmail_scanner_env_from.take() {
                // Cleaned as a relay's envfrom; kept only when not empty (Perl truth).
                let v = clean_envfrom(env.get(&self.work));
                let v = v.get(..MAX_FIELD).unwrap_or(v);
                if !v.is_empty() {
                    let start = self.arena.len();
                    self.arena.extend(v.iter().map(|&b| if is_strip_char(b) { b'!' } else { b }));
                    scanner_env_arena = Some(Rg(start as u32, self.arena.len() as u32));
                }
            }
            let fields = match parsed {
                Parsed::Relay(f) => f,
                Parsed::Unparseable | Parsed::Skip => {
                    if matches!(parsed, Parsed::Unparseable) {
                        self.num_unparseable += 1;
                    }
                    if in_trusted {
                        self.last_trusted_index += 1;
                    }
                    if in_internal {
                        self.last_internal_index += 1;
                    }
                    continue;
                }
            };
            if self.relays.len() >= MAX_RELAYS {
                continue;
            }
            let mut relay = self.store(&fields, &rx.patterns);
            if let Some(env) = qms {
                relay.set(F::Envfrom, env);
                relay.has_envfrom = true;
            }
            if in_trusted && !found_msa {
                if !trust.trusted.configured && !trust.internal.configured {
                    // Infer the boundary: private IPs and authenticated hops are trusted.
                    let auth = !relay.field(F::Auth).is_empty();
                    if !relay.ip_private && !auth {
                        in_trusted = false;
                        in_internal = false;
                    }
                } else {
                    let ip = parse_ip(relay.field(F::Ip).get(&self.arena));
                    let auth = !relay.field(F::Auth).is_empty();
                    let trusted_set = if trust.trusted.configured { &trust.trusted } else { &trust.internal };
                    let internal_set = if trust.internal.configured { &trust.internal } else { &trust.trusted };
                    if !auth && !trusted_set.contains(ip) {
                        in_trusted = false;
                        in_internal = false;
                    } else {
                        if in_internal && !auth && !internal_set.contains(ip) {
                            in_internal = false;
                        }
                        if trust.msa.contains(ip) {
                            found_msa = true;
                            relay.msa = true;
                        }
                    }
                }
            }
            relay.internal = in_internal;
            relay.trusted = in_trusted;
            if in_trusted {
                state.allow_mailfetch_markers = true;
                self.last_trusted_index += 1;
            } else {
                state.allow_mailfetch_markers = false;
            }
            if in_internal {
                self.last_internal_index += 1;
            }
            self.relays.push(relay);
        }
        self.envelope_from = self.find_envelope_from(message, data);
    }

    /// Copies a parsed line's fields into the arena, cleaned as SpamAssassin cleans them.
    fn store(&mut self, fields: &Fields, pats: &IpPatterns) -> Relay {
        let mut relay = Relay::default();
        let work = &self.work;
        for (k, rg) in fields.f.iter().enumerate() {
            let field = match k {
                0 => F::Ip,
                1 => F::Rdns,
                2 => F::Helo,
                3 => F::By,
                4 => F::Ident,
                5 => F::Envfrom,
                6 => F::Id,
                _ => F::Auth,
            };
            if field == F::Envfrom && !fields.has_envfrom {
                continue;
            }
            let mut v = rg.get(work);
            match field {
                F::Rdns => {
                    while let Some(rest) = v.strip_suffix(b".") {
                        v = rest;
                    }
                    if v.eq_ignore_ascii_case(b"unknown") || v.first() == Some(&b'[') {
                        v = &[];
                    }
                }
                F::Ip => v = clean_ip(v),
                F::By => v = v.strip_suffix(b";").unwrap_or(v),
                F::Envfrom => v = clean_envfrom(v),
                _ => {}
            }
            let v = v.get(..MAX_FIELD).unwrap_or(v);
            let start = self.arena.len();
            let strip = !matches!(field, F::Id | F::Auth);
            self.arena.extend(v.iter().map(|&b| if strip && is_strip_char(b) { b'!' } else { b }));
            if let Some(slot) = relay.fields.get_mut(k) {
                *slot = Rg(start as u32, self.arena.len() as u32);
            }
        }
        relay.has_envfrom = fields.has_envfrom;
        relay.no_reverse_dns = relay.field(F::Rdns).is_empty() && fields.looked_up_dns;
        let ip = relay.field(F::Ip).get(&self.arena);
        relay.ip_private = pats.ip_private.is_match(ip, &mut self.search);
        relay
    }

    fn view(&self, r: &Relay) -> RelayView<'_> {
        let f = |x: F| r.field(x).get(&self.arena);
        RelayView {
            ip: f(F::Ip),
            rdns: f(F::Rdns),
            helo: f(F::Helo),
            by: f(F::By),
            ident: f(F::Ident),
            envfrom: r.has_envfrom.then(|| f(F::Envfrom)),
            id: f(F::Id),
            auth: f(F::Auth),
            no_reverse_dns: r.no_reverse_dns,
            ip_private: r.ip_private,
            trusted: r.trusted,
            internal: r.internal,
            msa: r.msa,
        }
    }

    /// All relays, newest first.
    pub fn all(&self) -> impl Iterator<Item = RelayView<'_>> + '_ {
        self.relays.iter().map(|r| self.view(r))
    }

    /// Trusted relays, newest first.
    pub fn trusted(&self) -> impl Iterator<Item = RelayView<'_>> + '_ {
        self.all().filter(|r| r.trusted)
    }

    /// Untrusted relays, newest first.
    pub fn untrusted(&self) -> impl Iterator<Item = RelayView<'_>> + '_ {
        self.all().filter(|r| !r.trusted)
    }

    /// External (not internal) relays, newest first.
    pub fn external(&self) -> impl Iterator<Item = RelayView<'_>> + '_ {
        self.all().filter(|r| !r.internal)
    }

    /// Matcher steps left of this message's [`RELAY_STEPS`].
    pub fn steps_left(&self) -> u64 {
        self.search.allowance()
    }

    /// A number that changes with every message read.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Number of trusted relays.
    pub fn num_trusted(&self) -> usize {
        self.relays.iter().filter(|r| r.trusted).count()
    }

    /// Number of untrusted relays.
    pub fn num_untrusted(&self) -> usize {
        self.relays.iter().filter(|r| !r.trusted).count()
    }

    /// `Received` lines SpamAssassin could not parse.
    pub fn num_unparseable(&self) -> u32 {
        self.num_unparseable
    }

    /// `EnvelopeFrom`: the envelope sender, when the message says.
    pub fn envelope_from(&self) -> Option<&[u8]> {
        self.envelope_from.map(|r| r.get(&self.arena))
    }

    /// Writes the texts of every pseudo-header [`is_relay_text`] names into `out`, each
    /// on a line: a haystack in which the literals of rules on them occur when they
    /// occur in the one such a rule reads.
    pub fn write_relay_texts(&self, out: &mut Vec<u8>) {
        for name in [&b"X-Spam-Relays-Untrusted"[..], b"X-Spam-Relays-Trusted", b"X-Spam-Relays-Internal", b"X-Spam-Relays-External", b"EnvelopeFrom"] {
            self.pseudo_header(name, out);
            out.push(b'\n');
        }
    }

    /// Writes the value of pseudo-header `name` into `out`; `None` when `name` is not a
    /// pseudo-header, `Some(false)` when it is one but has no value for this message.
    /// The `ALL-*` names need the message: they are answered by
    /// [`Relays::pseudo_header_in`] only.
    pub fn pseudo_header(&self, name: &[u8], out: &mut Vec<u8>) -> Option<bool> {
        let which = pseudo_of(name)?;
        let (want_trusted, want_internal) = match which {
            Pseudo::Untrusted => (Some(false), None),
            Pseudo::Trusted => (Some(true), None),
            Pseudo::Internal => (None, Some(true)),
            Pseudo::External => (None, Some(false)),
            Pseudo::EnvelopeFrom => {
                return Some(match self.envelope_from() {
                    Some(v) => {
                        out.extend_from_slice(v);
                        true
                    }
                    None => false,
                });
            }
            _ => return Some(false),
        };
        let mut first = true;
        for r in self.all() {
            if want_trusted.is_some_and(|t| t != r.trusted) || want_internal.is_some_and(|i| i != r.internal) {
                continue;
            }
            if !first {
                out.push(b' ');
            }
            first = false;
            write_relay(&r, out);
        }
        Some(true)
    }

    /// [`Relays::pseudo_header`], with the `ALL-TRUSTED`, `ALL-UNTRUSTED`,
    /// `ALL-INTERNAL` and `ALL-EXTERNAL` header ranges taken from `message`.
    pub fn pseudo_header_in(&self, message: &Message<'_>, name: &[u8], out: &mut Vec<u8>) -> Option<bool> {
        let which = pseudo_of(name)?;
        // SpamAssassin's indexes count every Received line, parsed or not; "+1" takes
        // the boundary line with the trusted side.
        let (start, end) = match which {
            Pseudo::AllTrusted => (None, Some(self.last_trusted_index + 1)),
            Pseudo::AllInternal => (None, Some(self.last_internal_index + 1)),
            Pseudo::AllUntrusted => (Some(self.last_trusted_index + 1), None),
            Pseudo::AllExternal => (Some(self.last_internal_index + 1), None),
            _ => return self.pseudo_header(name, out),
        };
        let mut index: i32 = -1;
        let mut any = false;
        for h in message.headers() {
            if h.name.eq_ignore_ascii_case(b"received") {
                index += 1;
            }
            let take = start.is_none_or(|s| s <= index) && end.is_none_or(|e| index < e);
            let boundary = end.is_some_and(|e| index == e);
            if take || boundary {
                out.extend_from_slice(h.name);
                out.extend_from_slice(b": ");
                out.extend_from_slice(h.decoded);
                out.push(b'\n');
                any = true;
            }
            if boundary {
                break;
            }
        }
        Some(any)
    }

    /// SpamAssassin's `get_envelope_from` without `envelope_sender_header`'s cases
    /// handled by the caller.
    fn find_envelope_from(&mut self, message: &Message<'_>, data: &HeaderData) -> Option<Rg> {
        if let Some(name) = &data.envelope_sender_header {
            let addr = first_addr_of_first(message, name.as_bytes())?;
            return (addr.is_empty() || addr.iter().position(|&b| b == b'@').is_some_and(|p| p > 0))
                .then(|| self.keep(addr));
        }
        let last_hop = self.relays.iter().find(|r| !r.trusted).or_else(|| self.relays.iter().rfind(|r| r.trusted));
        if let Some(hop) = last_hop {
            if hop.has_envfrom {
                let env = hop.field(F::Envfrom);
                let v = env.get(&self.arena);
                if v.is_empty() || v.iter().position(|&b| b == b'@').is_some_and(|p| p > 0) {
                    return Some(env);
                }
            }
        }
        if first_addr_of_first(message, b"X-Sender").is_some_and(|a| a.contains(&b'@'))
            && message
                .headers_named(b"received")
                .any(|h| h.decoded.windows(10).any(|w| w == b"(fetchmail"))
        {
            return None;
        }
        if let Some(addr) = first_addr_of_first(message, b"X-Envelope-From") {
            if received_before(message, b"X-Envelope-From") {
                return None;
            }
            return Some(self.keep(addr));
        }
        for name in [&b"Envelope-Sender"[..], b"Return-Path"] {
            if let Some(addr) = first_addr_of_first(message, name) {
                if !received_before(message, name) {
                    return Some(self.keep(addr));
                }
            }
        }
        None
    }

    fn keep(&mut self, v: &[u8]) -> Rg {
        let v = v.get(..MAX_LINE).unwrap_or(v);
        let start = self.arena.len();
        self.arena.extend_from_slice(v);
        Rg(start as u32, self.arena.len() as u32)
    }
}

/// `Name:first:addr`: the first address of the topmost `name` header.
fn first_addr_of_first<'m>(message: &Message<'m>, name: &[u8]) -> Option<&'m [u8]> {
    let h = message.headers_named(name).next()?;
    msg::addresses(h.raw).find_map(|a| a.address)
}

/// `get('ALL') =~ /^Received:.*?^NAME:/smi`: a Received header comes before a `name` header.
fn received_before(message: &Message<'_>, name: &[u8]) -> bool {
    let mut seen_received = false;
    for h in message.headers() {
        if seen_received && h.name.eq_ignore_ascii_case(name) {
            return true;
        }
        if h.name.eq_ignore_ascii_case(b"received") {
            seen_received = true;
        }
    }
    false
}

/// SpamAssassin's `[\s\000\#\[\]\(\)\<\>\|]`, replaced by `!` in relay fields.
fn is_strip_char(b: u8) -> bool {
    is_space(b) || matches!(b, 0 | b'#' | b'[' | b']' | b'(' | b')' | b'<' | b'>' | b'|')
}

/// `s/\s+/ /g; s/^ //; s/ $//; 1 while s/\s?;$//;` into `out`.
fn normalize_into(value: &[u8], out: &mut Vec<u8>) {
    let value = value.get(..MAX_LINE).unwrap_or(value);
    let mut space = false;
    for &b in value {
        if is_space(b) {
            space = true;
            continue;
        }
        if space && !out.is_empty() {
            out.push(b' ');
        }
        space = false;
        out.push(b);
    }
    while out.last() == Some(&b';') {
        out.pop();
        if out.last() == Some(&b' ') {
            out.pop();
        }
    }
}

/// The IP cleanups of SpamAssassin's parser: `IPv6:` prefix, brackets, zone id,
/// the `::ffff:` prefix of IPv4-mapped addresses.
fn clean_ip(mut v: &[u8]) -> &[u8] {
    if v.len() >= 5 && v.get(..5).is_some_and(|p| p.eq_ignore_ascii_case(b"ipv6:")) {
        v = v.get(5..).unwrap_or(&[]);
    }
    v = v.strip_prefix(b"[").unwrap_or(v);
    v = v.strip_suffix(b"]").unwrap_or(v);
    if let Some(p) = v.iter().rposition(|&b| b == b'%') {
        if v.get(p + 1..)
            .is_some_and(|z| z.iter().all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-')))
        {
            v = v.get(..p).unwrap_or(v);
        }
    }
    // ^0*:0*:(?:0*:)*ffff:(\d+\.\d+\.\d+\.\d+)$
    if let Some(p) = v.windows(5).position(|w| w.eq_ignore_ascii_case(b"ffff:")) {
        let (head, tail) = (v.get(..p).unwrap_or(&[]), v.get(p + 5..).unwrap_or(&[]));
        let colons = head.iter().filter(|&&b| b == b':').count();
        let head_ok = colons >= 2 && head.last() == Some(&b':') && head.iter().all(|&b| b == b'0' || b == b':');
        let mut parts = 0;
        let tail_ok = !tail.is_empty()
            && tail.split(|&b| b == b'.').all(|part| {
                parts += 1;
                !part.is_empty() && part.iter().all(u8::is_ascii_digit)
            })
            && parts == 4;
        if head_ok && tail_ok {
            return tail;
        }
    }
    v
}

/// `s/^\s*<*//; s/>*\s*$//`
fn clean_envfrom(mut v: &[u8]) -> &[u8] {
    while let Some((&b, rest)) = v.split_first() {
        if is_space(b) {
            v = rest;
        } else {
            break;
        }
    }
    while let Some(rest) = v.strip_prefix(b"<") {
        v = rest;
    }
    while let Some((&b, rest)) = v.split_last() {
        if is_space(b) {
            v = rest;
        } else {
            break;
        }
    }
    while let Some(rest) = v.strip_suffix(b">") {
        v = rest;
    }
    v
}

/// SpamAssassin's relay string: `[ ip=... rdns=... helo=... by=... ident=... envfrom=... intl=0 id=... auth=... msa=0 ]`.
fn write_relay(r: &RelayView<'_>, out: &mut Vec<u8>) {
    let parts: [(&[u8], &[u8]); 6] = [
        (b"[ ip=", r.ip),
        (b" rdns=", r.rdns),
        (b" helo=", r.helo),
        (b" by=", r.by),
        (b" ident=", r.ident),
        (b" envfrom=", r.envfrom.unwrap_or(&[])),
    ];
    for (label, value) in parts {
        out.extend_from_slice(label);
        out.extend_from_slice(value);
    }
    out.extend_from_slice(if r.internal { b" intl=1 id=" } else { b" intl=0 id=" });
    out.extend_from_slice(r.id);
    out.extend_from_slice(b" auth=");
    out.extend_from_slice(r.auth);
    out.extend_from_slice(if r.msa { b" msa=1 ]" } else { b" msa=0 ]" });
}

/// An IP address as 16 bytes (IPv4 mapped into IPv6) and whether it was IPv4.
pub(crate) fn parse_ip(text: &[u8]) -> Option<([u8; 16], bool)> {
    if let Some(v4) = parse_ipv4(text) {
        let mut a = [0u8; 16];
        a[10] = 0xff;
        a[11] = 0xff;
        a[12..].copy_from_slice(&v4);
        return Some((a, true));
    }
    parse_ipv6(text).map(|a| (a, false))
}

fn parse_ipv4(text: &[u8]) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut n = 0;
    for part in text.split(|&b| b == b'.') {
        if part.is_empty() || part.len() > 3 || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let v = part.iter().fold(0u32, |acc, &d| acc * 10 + u32::from(d - b'0'));
        *out.get_mut(n)? = u8::try_from(v).ok()?;
        n += 1;
    }
    (n == 4).then_some(out)
}

fn parse_ipv6(text: &[u8]) -> Option<[u8; 16]> {
    let text = text.strip_prefix(b"[").unwrap_or(text);
    let text = text.strip_suffix(b"]").unwrap_or(text);
    let text = match text.iter().position(|&b| b == b'%') {
        Some(p) => text.get(..p)?,
        None => text,
    };
    if text.is_empty() || !text.contains(&b':') {
        return None;
    }
    let mut head: Vec<u16> = Vec::new();
    let mut tail: Vec<u16> = Vec::new();
    let (left, right, gap) = match text.windows(2).position(|w| w == b"::") {
        Some(p) => (text.get(..p)?, text.get(p + 2..)?, true),
        None => (text, &[][..], false),
    };
    let parse_groups = |s: &[u8], out: &mut Vec<u16>| -> Option<()> {
        if s.is_empty() {
            return Some(());
        }
        let parts: Vec<&[u8]> = s.split(|&b| b == b':').collect();
        let count = parts.len();
        for (k, part) in parts.into_iter().enumerate() {
            if k + 1 == count && part.contains(&b'.') {
                let v4 = parse_ipv4(part)?;
                out.push(u16::from_be_bytes([v4[0], v4[1]]));
                out.push(u16::from_be_bytes([v4[2], v4[3]]));
            } else {
                if part.is_empty() || part.len() > 4 {
                    return None;
                }
                let s = core::str::from_utf8(part).ok()?;
                out.push(u16::from_str_radix(s, 16).ok()?);
            }
        }
        Some(())
    };
    parse_groups(left, &mut head)?;
    parse_groups(right, &mut tail)?;
    let total = head.len() + tail.len();
    if total > 8 || (!gap && total != 8) || (gap && total == 8) {
        return None;
    }
    let mut groups = [0u16; 8];
    for (k, g) in head.iter().enumerate() {
        *groups.get_mut(k)? = *g;
    }
    for (k, g) in tail.iter().enumerate() {
        *groups.get_mut(8 - tail.len() + k)? = *g;
    }
    let mut out = [0u8; 16];
    for (k, g) in groups.iter().enumerate() {
        let [a, b] = g.to_be_bytes();
        *out.get_mut(2 * k)? = a;
        *out.get_mut(2 * k + 1)? = b;
    }
    Some(out)
}

impl NetList {
    /// Whether the address is in the list (first matching entry decides, as
    /// SpamAssassin's sequential search does; an excluded entry means no).
    pub fn contains(&self, ip: Option<([u8; 16], bool)>) -> bool {
        let Some((addr, _)) = ip else { return false };
        for range in self.loopback().iter().chain(self.entries.iter()) {
            if range.covers(&addr) {
                return !range.exclude;
            }
        }
        false
    }

    fn loopback(&self) -> &'static [NetRange] {
        const LOOPBACK: [NetRange; 2] = [
            NetRange { exclude: false, addr: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 0], prefix: 104 },
            NetRange { exclude: false, addr: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], prefix: 128 },
        ];
        if self.loopback {
            &LOOPBACK
        } else {
            &[]
        }
    }
}

impl NetRange {
    /// Whether the 16-byte address (IPv4 mapped) is in the range (`exclude` not consulted).
    pub fn covers(&self, addr: &[u8; 16]) -> bool {
        let bits = usize::from(self.prefix.min(128));
        let full = bits / 8;
        if self.addr.get(..full) != addr.get(..full) {
            return false;
        }
        let rest = bits % 8;
        if rest == 0 {
            return true;
        }
        let mask = 0xffu8 << (8 - rest);
        matches!((self.addr.get(full), addr.get(full)), (Some(a), Some(b)) if a & mask == b & mask)
    }

    /// Parses one `trusted_networks` entry: `[!]addr[/len]`, a partial dotted quad
    /// with a trailing dot (`10.`, `192.168.`), `[ipv6]`.
    pub fn parse(text: &str) -> Option<NetRange> {
        let mut t = text.trim();
        let exclude = match t.strip_prefix('!') {
            Some(rest) => {
                t = rest.trim_start();
                true
            }
            None => false,
        };
        let (addr_text, len) = match t.split_once('/') {
            Some((a, l)) => (a, Some(l.parse::<u8>().ok()?)),
            None => (t, None),
        };
        let addr_text = addr_text.strip_prefix('[').and_then(|a| a.strip_suffix(']')).unwrap_or(addr_text);
        let bytes = addr_text.as_bytes();
        if bytes.first().is_some_and(u8::is_ascii_digit) && !addr_text.contains(':') {
            let parts: Vec<&str> = addr_text.trim_end_matches('.').split('.').collect();
            if parts.is_empty() || parts.len() > 4 || parts.iter().any(|p| p.is_empty() || p.len() > 3) {
                return None;
            }
            let mut a = [0u8; 16];
            a[10] = 0xff;
            a[11] = 0xff;
            for (k, p) in parts.iter().enumerate() {
                *a.get_mut(12 + k)? = p.parse::<u8>().ok()?;
            }
            let implied = u8::try_from(parts.len() * 8).ok()?;
            let len = len.unwrap_or(implied);
            if len > 32 {
                return None;
            }
            return Some(NetRange { exclude, addr: a, prefix: 96 + len });
        }
        let a = parse_ipv6(bytes)?;
        let len = len.unwrap_or(128);
        (len <= 128).then_some(NetRange { exclude, addr: a, prefix: len })
    }
}

/// The compiled `Received` formats and IP patterns, built once per rule set.
#[derive(Debug, Clone)]
pub struct ReceivedParser {
    pats: Vec<Regex>,
    /// The IP-address patterns.
    pub patterns: IpPatterns,
}

/// The IP patterns the relay code and the eval tests share.
#[derive(Debug, Clone)]
pub struct IpPatterns {
    /// Sub-patterns and `IP_PRIVATE`.
    pub family: Patterns,
    /// `IP_PRIVATE` (anchored).
    pub ip_private: Regex,
    /// `IP_ADDRESS`, unanchored.
    pub ip_search: Regex,
}

/// A parser whose patterns match nothing: a placeholder, cheap to make.
impl Default for ReceivedParser {
    fn default() -> Self {
        let family = Patterns::default();
        ReceivedParser { pats: Vec::new(), patterns: IpPatterns { family, ip_private: never(), ip_search: never() } }
    }
}

macro_rules! received_patterns {
    ($( $name:ident = $icase:literal $pat:literal $(if $needle:literal)?; )*) => {
        /// Indexes of [`RECEIVED_PATTERNS`].
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[derive(Debug, Clone, Copy)]
        #[repr(usize)]
        enum P { $($name,)* }
        /// SpamAssassin's Received formats, `(pattern, /i)`, in [`P`] order.
        const RECEIVED_PATTERNS: &[(&str, bool)] = &[ $(($pat, $icase),)* ];
        /// Text each pattern needs (any case when the pattern is `/i`, then written in lower
        /// case; one of several when split by `|`), checked first.
        const NEEDLES: &[&str] = &[ $(received_patterns!(@needle $($needle)?),)* ];
    };
    (@needle) => { "" };
    (@needle $n:literal) => { $n };
}

received_patterns! {
    FromStart = true r"^\(?from ";
    WithLocalFor = false r"\bwith local for\b" if "with local for";
    FromBy = true r"^from (\S+) by [^\s;]+ ?;";
    BracketQuad = false r"^\[[\d.]+\]$";
    DateTail = false r"[\s;]+(?:(?:Mon|T(?:ue|hu)|Wed|Fri|S(?:at|un)), )?\d+ (?:J(?:an|u[nl])|Feb|Ma[ry]|A(?:pr|ug)|Sep|Oct|Nov|Dec) \d+ \d+:\d+(?::\d+)? \S+$";
    Id = false r" id <?([^\s<>;]{3,})";
    HeloEq = false r"\bhelo=([-A-Za-z0-9\.\^+_&:=?!@%*\$\\/]+)(?:[^-A-Za-z0-9\.\^+_&:=?!@%*\$\\/]|$)";
    HeloWord = false r"\b(?:HELO|EHLO) ([-A-Za-z0-9\.\^+_&:=?!@%*\$\\/]+)(?:[^-A-Za-z0-9\.\^+_&:=?!@%*\$\\/]|$)" if "LO ";
    By = false r" by (\S+)(?:[^-A-Za-z0-9\;\.]|$)";
    AuthWith = true r" with ((?:ES|L|UTF8S|UTF8L)MTPS?A|ASMTP|HTTP[SU]?)(?: |;|$)" if " with ";
    AuthGmail = false r" by mx\.google\.com with ESMTPS id [a-z0-9]{1,4}sm[0-9]{2,9}[a-z]{3}\.[0-9]{1,3}\.[0-9]{4}\.(?:[0-6][0-9]\.){4}[0-6][0-9]" if "mx.google.com";
    AuthGmailTls = false r"\(version=([^ ]+) cipher=([^\)]+)\)";
    AuthCourier = false r"^from .*?(?:\]\)|\)\]) \(AUTH: (LOGIN|PLAIN|DIGEST-MD5|CRAM-MD5) \S+(?:, .*?)?\) by " if "(AUTH: ";
    AuthSendmail = false r"^from .*?(?:\](?: \([^)]*\))?\)|\)\]) .*?\(.*?authenticated.*?\).*? by";
    AuthGmx = false r"from \S* \((?:HELO|EHLO) (\S*)\) \[((?&IP))\] by (mail\.gmx\.(?:net|com)) \([^\)]+\) with ((?:ESMTP|SMTP))" if "mail.gmx.";
    AuthCriticalPath = false r"\) by .+ \(\d{1,2}\.\d\.\d{3}(?:\.\d{1,3})?\) \(authenticated as .+\) id " if "(authenticated as ";
    AuthPostfix = false r"\) \(Authenticated sender: \S+\) by \S+ \(([^\)]+)\) with " if "(Authenticated sender: ";
    AuthCommunigate = false r"CommuniGate Pro (HTTP|SMTP|XIMSS|IMAP)" if "CommuniGate Pro ";
    AuthExchangeDav = false r" with Microsoft Exchange Server HTTP-DAV\b" if "HTTP-DAV";
    AuthViaHttp = true r" \(via (HTTP.?)\)(?: |;|$)" if "(via http";
    Envfrom = true r"(?:return-path:? |envelope-(?:sender|from)[ =])(\S+)\b" if "return-path|envelope-";
    Squirrel = false r" \((?:SquirrelMail|NaSMail) authenticated user " if "authenticated user ";
    SquirrelIp = false r"((?&IP))\b(?![.-]).{10,80}by (\S+) with HTTP";
    AolWebmail = false r"((?&IP)) by (\S+) \((?&IP)\) with HTTP \(WebMailUI\)" if "with HTTP (WebMailUI)";
    Smtpsvc = false r"^(\S*) \(\[((?&IP))\][^\)]{0,40}\) by (\S+) with Microsoft SMTPSVC";
    SmtpsvcPickup = false r"^mail pickup service by (\S+) with Microsoft SMTPSVC$";
    MsSmtpServer = false r" with (?:Microsoft SMTP Server|mapi id) (?:\([^\)]+\) )?\d+\.\d+\.\d+\.\d+(?:$| )" if " with Microsoft SMTP Server | with mapi id ";
    MsSmtpServerFrom = false r"^(\S+) \(\[?((?&IP))(?:%[A-Z0-9._~-]*)?\]?\) by (\S+) ";
    XMail = false r"^(\S+) \((\[?(?&IP)\]?)(?::\d+)\) by (\S+)(?: \(\S+\))? with \[XMail";
    XMailId = false r" id <(\S+)>";
    XMailFrom = false r" from <(\S+)>";
    Ecelerity = false r"\(ecelerity\b" if "(ecelerity";
    EcelerityHelo = false r"^\(\[((?&IP)):\d+\] helo=(\S+)\) by (\S+) ";
    EcelerityPlain = false r"^\S+ \(\[((?&IP)):\d+\]\) by (\S+) ";
    EximLocal = false r"\bwith local(?:-\S+)? " if "with local";
    EximBracket = false r"^\[((?&IP))\] \((.*?)\) by (\S+) ";
    EximRdns = false r"^(\S+) \(\[((?&IP))\](.*?)\) by (\S+) ";
    EximPlain = false r"^(\S+) \[((?&IP))\](:\d+)? by (\S+) ";
    EximFirst = false r"^(\S+) ";
    EximParen = false r" \((\S+)\) ";
    EximIp = false r" \[((?&IP))(?:\.\d+)?\] ";
    EximBy = false r"by (\S+) ";
    SubHelo = false r"helo=(\S+)";
    SubIdent = false r"ident=(\S*)";
    Postfix1 = false r"^(\S+) \((\S+) \[((?&IP))\]\) by (\S+) ";
    Postfix2 = false r"^(\S+) \((\S+)\[((?&IP))\]\) by (\S+) ";
    Scalix = false r"^(\S+) \( ?((?&IP))\) by (\S+)";
    Domino = false r"^(\S+) \(\[((?&IP))\]\) by (\S+) \(Lotus";
    WithHttp = false r"\bwith HTTP\b" if "with HTTP";
    HttpNumeric = false r"^((?&IP)) \(\[(?&IP)\]\) by (\S+)";
    QmailLdap = false r" by \S+ \(qmail-\S+\) with " if "(qmail-";
    Sendmail = false r"^(\S+) \((\S+) \[((?&IP))\].*\) by (\S+) \(" if ") by ";
    IdentPrefix = false r"^IDENT:([^\@]*)\@";
    AtPrefix = false r"^([^\@]*)\@";
    ExchangeImc = false r"^(\S+) \((\S+) \[((?&IP))\]\) by (\S+) with \S+ \(";
    HeloEqBy = false r"^(\S+) \(\[((?&IP))\] helo=(\S+)\) by (\S+) with ";
    UnknownDomain = false r"^(\S+) \(<unknown\S*>\[((?&IP))\]\) by (\S+) ";
    AttbiRdns = false r"^(\S+) \((\S+\.\S+)\[((?&IP))\]\) by (\S+) ";
    IdentAtIp = false r"^(\S+) \((\S*)\@\[((?&IP))\].*\) by (\S+) \(";
    HotmailBy = false r"by (\S+\.hotmail\.msn\.com) " if ".hotmail.msn.com ";
    LeadingIp = false r"^((?&IP)) ";
    Qpsmtpd = false r"^(\S+) \((?:HELO|EHLO) (\S*)\) \(((?&IP))\) by (\S+) \(qpsmtpd/\S+\) with (?:ESMTP|SMTP)" if "(qpsmtpd/";
    Lmtp = false r"^(\S+) \(LHLO (\S*)\) \(((?&IP))\) by (\S+) with LMTP" if "LHLO ";
    GmxHelo = false r"^(\S+) \((?:HELO|EHLO) (\S*)\) \[((?&IP))\] by (\S+) \([^\)]+\) with (?:ESMTP|SMTP)";
    AolSmtpd = false r"^(\S+) \(\[((?&IP))\]\) by (\S+) via smtpd \(for \S+\) with SMTP\(" if " via smtpd ";
    Qmail = false r"^\S+( \((?:HELO|EHLO) \S*\))? \((\S+\@)?\[?(?&IP)\]?\)( \(envelope-sender <\S+>\))? by \S+( \(.+\))* with (.* )?(SMTP|QMQP)(?! id )" if " with ";
    Qmail1 = false r"^(\S+) \((?:HELO|EHLO) ([^ \(\)]*)\) \((\S*)\@\[?((?&IP))\]?\)( \(envelope-sender <\S+>\))? by (\S+)";
    Qmail2 = false r"^(\S+) \((?:HELO|EHLO) ([^ \(\)]*)\) \(\[?((?&IP))\]?\)( \(envelope-sender <\S+>\))? by (\S+)";
    Qmail3 = false r"^(\S+) \((\S*)\@\[?((?&IP))\]?\)( \(envelope-sender <\S+>\))? by (\S+)";
    Qmail4 = false r"^(\S+) \(\[?((?&IP))\]?\)( \(envelope-sender <\S+>\))? by (\S+)";
    YahooHttp = false r"^\[((?&IP))\] by (\S+) via HTTP$";
    SpaceBracket = false r"^(\S+) \( \[((?&IP))\]\).*? by (\S+) ";
    ParenRdns = false r"^\((\S+) \[((?&IP))\]\) by (\S+) ";
    BracketBy = false r"^\[((?&IP))\] by (\S+) ";
    ParenIpBy = false r"^\(\[?((?&IP))\]?\) by (\S+) ";
    MDaemon1 = false r"^(\S+) \[((?&IP))\] by (\S+) \[(?&IP)\] with ";
    MDaemon2 = false r"^(\S+) \[\(((?&IP))\)\] by (\S+) \((?&IP)\) ";
    SendmailNoRdns = false r"^(\S+) \(\[((?&IP))\]\) by (\S+) \(";
    SendmailLoose = false r"^(\S+) \((\S+) \[((?&IP))\]\).*? by (\S+)\b";
    IpWithPort = false r"^(\S+) \(\[((?&IP))(?:[.:]\d+)?\]\).*? by (\S+) ";
    SendmailAuthBits = false r"^(\S+) \((\S+) \[((?&IP))\]\)(?: \(authenticated bits=\d+\))? by (\S+) \(";
    Fetcher = false r"with (?:POP3|IMAP)" if "with ";
    QmailHelo = false r"^(\S+) \((?:HELO|EHLO) ([^\)]*)\) \((\S*@)?\[?((?&IP))\]?\).* by (\S+) ";
    QmailPlain = false r"^(\S+) \((\S*@)?\[?((?&IP))\]?\).* by (\S+) ";
    HttpFor = false r"^\[((?&IP))\] by (\S+) with http for ";
    Smap = false r"^(\S+)\(((?&IP))\) by (\S+) via smap ";
    SmapHelo = false r"^(\S+)\(((?&IP)), (?:HELO|EHLO) (\S*)\) by (\S+) via smap ";
    PostOffice = false r"^\[((?&IP))\] by (\S+) \(Post";
    ArGoSoft = false r"^\[((?&IP))\] by (\S+) \(ArGoSoft";
    InterScan = false r"^((?&IP)) by (\S+) \((?:SMTPL|InterScan)\b";
    Bsmtp = false r"^\S+ by \S+ with BSMTP";
    RdnsWith = false r"^(\S+) \((\S+) \[((?&IP))\]\) by (\S+) with ";
    YahooIdent = false r"^(\S+) \((?:HELO|EHLO) (\S*)\) \((?:(\S+)\@)?((?&IP)).*?\) by (\S+) with ";
    CommunigateAccount = false r"^\[((?&IP))\] \((?:account \S+ )?(?:HELO|EHLO) (\S*)\) by (\S+) \(";
    CommunigateVerified = false r"^(\S+) \(\[((?&IP))\] verified\) by (\S+) \(";
    CiphertrustParen = false r"^\(\[((?&IP))\]\) by (\S+) with ";
    NonDigitIp = false r"^([^\d]\S+) \(((?&IP))\) by (\S+) ";
    ContentTech = false r"^\S+ \(\S+\) by \S+ \(Content Technologies ";
    TwoBrackets = false r"^(\S+) \(\[((?&IP))\] \[(\S+)\]\) by (\S+) with ";
    IpByWith = false r"^((?&IP)) by (\S+) with ";
    RdnsNoSpace = false r"^(\S+) \((\S+)\[((?&IP))\]\) by (\S+) ";
    FSecure = false r"^\[((?&IP))\]\S+ \((?:HELO|EHLO) (\S*)\) by (\S+) ";
    IpHelo = false r"^((?&IP)) \((?:HELO|EHLO) (\S*)\) by (\S+) ";
    HeloBracketBy = false r"^(\S+) \[((?&IP))\] by (\S+) ";
    Csmap = false r"^(\S+)\(((?&IP))\) by (\S+) ";
    MailGate = false r"^\[((?&IP))\] by (\S+) \(MailGate ";
    Unverified = false r"^(\S+) \(unverified \[((?&IP))\]\) by (\S+) ";
    Proxying = false r"^((?&IP)) \([A-Za-z][^\)]+\) by (\S+) with ";
    BracketSub = false r"^\[((?&IP))\] \(([^\)]+)\) by (\S+) ";
    IdentOptional = false r"^(\S+) \((?:\S+\@)?((?&IP))\) by (\S+) with ";
    Obtuse = false r#"^(\S+)\(((?&IP))\)(?:, claiming to be "(\S+)")? via \S+ by (\S+),"# if " via ";
    YahooLogin = false r"^(\S+) \((\S+)@((?&IP)) with login\) by (\S+\.yahoo\.com) with SMTP" if " with login) ";
    Synthetic = false r"^X-Originating-IP: ((?&IP))$" if "X-Originating-IP: ";
    IgnLocalIdent = false r"^\S+ \([^\s\@]+\@(?&LOCALHOST)\) by \S+ \(";
    IgnLocalEsmtp = false r"^\S+ \S+ by \S+ with local-e?smtp ";
    IgnAvg = false r"^127\.0\.0\.1 \(AVG SMTP \S+ \[\S+\]\)";
    IgnUid = false r"^\S+\@\S+ by \S+ by uid \S+ ";
    IgnAddrBy = false r"^\S+\@\S+ by \S+ ";
    IgnUnknownLocal = false r"^Unknown/Local \(";
    IgnLocalhostPair = false r"^(?&LOCALHOST) \((?:\S+\@)?(?&LOCALHOST)[\)\[]";
    IgnLocalParen = false r"^\S+ \((?:\S+\@)?(?&LOCALHOST)\) ";
    IgnLocalBracket = false r"^\S+ \(\S+\@\S+ \[(?&LOCALHOST)\]\) ";
    IgnAuth = false r"^\(AUTH: \S+\) by \S+ with ";
    IgnUnix = false r"^localhost \(localhost \[\[UNIX: localhost\]\]\) by ";
    IgnAmazon = false r"^\S+\.amazon\.com by \S+\.amazon\.com with ESMTP \(peer crosscheck: " if "amazon.com";
    IgnGroupwise = false r"^[^\.]+ by \S+ with Novell_GroupWise" if "Novell_GroupWise";
    IgnRaptor = false r"^no\.name\.available by \S+ via smtpd \(for ";
    QmailScanner = false r"^\S+ by \S+ \(.{0,100}\) with qmail-scanner" if "qmail-scanner";
    IgnWithLocal = false r"^\S+ by \S+ with local";
    IgnCyrus = false r"^\S+ \(\[unix socket\]\) by \S+ \(Cyrus v[0-9]*?\.[0-9]*?\.[0-9]*?\) with LMTPA" if "[unix socket]";
    IgnNoIp = false r"^\S+ by \S+ (?:with|via|for|\()";
    IgnWithBy = false r"^\S+ (?:(?:with|via|for) \S+|\(unverified\)) by\b";
    IgnSendgrid = false r"^\S+ \(unknown\) by \S+ \(SG\) with \b" if "(SG)";
    IgnOpenSmtpd = false r"^\S+ \(\S+ \[local\]\) by \S+ \(OpenSMTPD\) with \b" if "(OpenSMTPD)";
    IgnLsmtp = false r"\(LSMTP for" if "(LSMTP for";
    IgnMailEnable = false r"^\(\[(?&LOCALHOST)\]\) with MailEnable " if "MailEnable";
    IgnFacebook = false r"^facebook\.com \([^\)]+\) by facebook\.com with Thrift id \S+$" if "facebook.com";
    IgnGmailApi = false r"^\S+ named \S+ by gmailapi\.google\.com with HTTPREST$" if "gmailapi.google.com";
    IgnIdOnly = false r"^\S+ id \S+$";
    IgnJetsend = false r"^\[<.*? \(Jetsend" if "Jetsend";
    GuessHelo = false r"^(\S+)[^-A-Za-z0-9\.]";
    Simta = false r"^(\S+) \((\S+) \[((?&IP))\]\) BY (\S+) (?:\([^\)]+\) WITH SMTP )?ID <?(\S+?)>?(?: FOR <[^>]+>)?$";
    Navgw = false r"^(\S*) \[((?&IP))\]\) by (\S+) \(NAVGW .*?\) with ";
    IgnSubmit = false r"^\S+\@localhost\) by \S+ ";
    IgnJqueue = false r"^[^\s\@]+\@[^)]+\) by \S+\(jqueuemail\) id [^\s;]+";
    AnyBracketIp = false r"\[((?&IP))\]";
}

/// Which of SpamAssassin's three prefixes a line has.
enum Branch {
    /// `from `
    From,
    /// `FROM ` (simta)
    Simta,
    /// `(from `
    ParenFrom,
    /// Other (`From `, ...): only the fall-through applies.
    Other,
}

/// How a line's parse ends.
enum Next {
    /// Enough information: a relay.
    Enough,
    /// SpamAssassin returns 0: skipped.
    Skip,
    /// Keep trying later formats.
    Continue,
}

/// A piece of a derived string: literal bytes or a range of the work buffer.
#[derive(Clone, Copy)]
enum Part {
    Lit(&'static [u8]),
    Of(Rg),
}

/// One line's parse: the work buffer (the normalized line first, then derived
/// strings), the current sub-range being matched, and the captures.
struct LineCx<'a> {
    work: &'a mut Vec<u8>,
    search: &'a mut Search,
    pats: &'a [Regex],
    /// Offset in `work` of the text the last match ran on.
    base: usize,
}

impl LineCx<'_> {
    /// Matches pattern `p` against `work[range]`; captures stay available through [`LineCx::g`].
    fn m(&mut self, p: P, range: Rg) -> bool {
        let Some(re) = self.pats.get(p as usize) else {
            return false;
        };
        let text = range.get(self.work);
        self.base = range.0 as usize;
        if let Some(needles) = NEEDLES.get(p as usize).filter(|n| !n.is_empty()) {
            let icase = RECEIVED_PATTERNS.get(p as usize).is_some_and(|&(_, i)| i);
            if !needles.as_bytes().split(|&b| b == b'|').any(|n| contains(text, n, icase)) {
                return false;
            }
        }
        re.is_match(text, self.search)
    }

    /// Capture group `k` of the last match, as a work-buffer range (empty when unset).
    fn g(&self, k: usize) -> Rg {
        match self.search.group(k) {
            Some((a, b)) => Rg((self.base + a) as u32, (self.base + b) as u32),
            None => Rg(0, 0),
        }
    }

    fn text(&self, r: Rg) -> &[u8] {
        r.get(self.work)
    }

    fn contains(&self, r: Rg, needle: &[u8]) -> bool {
        super::re::find_bytes(r.get(self.work), needle).is_some()
    }

    /// Appends `parts` to the work buffer and returns their range.
    fn push(&mut self, parts: &[Part]) -> Rg {
        let start = self.work.len();
        for p in parts {
            match *p {
                Part::Lit(bytes) => self.work.extend_from_slice(bytes),
                Part::Of(r) => {
                    let end = (r.1 as usize).min(start);
                    if (r.0 as usize) < end {
                        self.work.extend_from_within(r.0 as usize..end);
                    }
                }
            }
        }
        Rg(start as u32, self.work.len() as u32)
    }

    /// Exim's `$sub =~ s/helo=(\S+)// and $helo = $1; $sub =~ s/ident=(\S*)// and $ident = $1;`.
    fn exim_sub(&mut self, sub: Rg, f: &mut Fields) {
        let mut rest = sub;
        if self.m(P::SubHelo, sub) {
            let whole = self.g(0);
            f.set(F::Helo, self.g(1));
            // The text with the helo= match removed.
            let before = Rg(sub.0, whole.0);
            let after = Rg(whole.1, sub.1);
            rest = self.push(&[Part::Of(before), Part::Of(after)]);
        }
        if self.m(P::SubIdent, rest) {
            f.set(F::Ident, self.g(1));
        }
    }
}

/// What must hold before a format's pattern is tried (the rest of SpamAssassin's `if`).
#[derive(Clone, Copy)]
enum Guard {
    Always,
    /// A test on the line's text (`has!` for "contains").
    Text(fn(&[u8]) -> bool),
    /// This pattern matches the line too.
    Pat(P),
    /// This pattern does not match the line.
    NotPat(P),
}

/// The guard "the line contains this text"; a function per text, so each search is
/// compiled for its text (this runs on every line).
macro_rules! has {
    ($text:literal) => {
        Guard::Text(|line| super::re::find_bytes(line, $text).is_some())
    };
}

/// What a matched format says of the receiving MTA's reverse-DNS lookup.
#[derive(Clone, Copy)]
enum Dns {
    Unchanged,
    Looked,
    NotLooked,
}

/// What a matched format does once its groups are taken.
#[derive(Clone, Copy)]
enum Then {
    /// The relay is complete.
    Enough,
    /// The relay is complete, with this field empty.
    EnoughWithout(F),
    /// SpamAssassin skips the line.
    Skip,
    /// The later formats are tried too.
    More,
    /// The relay is complete if an IP is known; else the later formats are tried.
    EnoughWithIp,
    /// A mail fetcher's line: the chain restarts after it.
    Restart,
    /// qmail-scanner's line: skipped, its envelope sender kept for the next relay.
    QmailScanner,
    /// Exim's `helo=` and `ident=` are read from this group.
    EximSub(usize),
    /// The ident is this group without a trailing `@`.
    IdentNoAt(usize),
    /// `rdns` `unknown` means none.
    UnknownRdns,
    /// XMail: the id and envelope sender come from later patterns.
    XMail,
    /// Sendmail: an `IDENT:x@` or `x@` prefix of `rdns` is the ident.
    SendmailIdent,
    /// Hotmail: an IP starting the line is the relay's.
    HotmailIp,
    /// qmail: the groups come from the first of [`QMAIL_FORMATS`] that matches.
    Qmail,
    /// Sendmail's `softdnserr` in place of the `rdns`: no lookup.
    SendmailLoose,
    /// Obtuse Smtpd: a lookup was made unless `rdns` is `UNKNOWN`.
    Obtuse,
}

/// One of SpamAssassin's Received formats: when `guard` holds and `pat` matches, the
/// groups in `take` fill their fields, then `then` says what follows.
struct Format {
    guard: Guard,
    pat: P,
    dns: Dns,
    take: &'static [(F, usize)],
    then: Then,
}

impl Format {
    const fn new(pat: P, take: &'static [(F, usize)]) -> Format {
        Format { guard: Guard::Always, pat, dns: Dns::Unchanged, take, then: Then::Enough }
    }

    const fn when(self, guard: Guard) -> Format {
        Format { guard, ..self }
    }

    const fn looked(self) -> Format {
        Format { dns: Dns::Looked, ..self }
    }

    const fn then(self, then: Then) -> Format {
        Format { then, ..self }
    }

    const fn skip(pat: P) -> Format {
        Format::new(pat, &[]).then(Then::Skip)
    }
}

/// The groups most formats take.
const HELO_IP_BY: &[(F, usize)] = &[(F::Helo, 1), (F::Ip, 2), (F::By, 3)];
const IP_BY: &[(F, usize)] = &[(F::Ip, 1), (F::By, 2)];
const HELO_RDNS_IP_BY: &[(F, usize)] = &[(F::Helo, 1), (F::Rdns, 2), (F::Ip, 3), (F::By, 4)];
const RDNS_HELO_IP_BY: &[(F, usize)] = &[(F::Rdns, 1), (F::Helo, 2), (F::Ip, 3), (F::By, 4)];

/// The formats after `from ` tried first.
const EARLY_FORMATS: &[Format] = &[
    Format::new(P::SquirrelIp, IP_BY).when(Guard::Pat(P::Squirrel)),
    Format::new(P::AolWebmail, IP_BY).when(has!(b"aol.com")),
];

/// SpamAssassin's per-MTA branches, tried next: only the first whose guard holds is tried.
const MTA_FORMATS: &[(Guard, &[Format])] = {
    use F::*;
    &[
        (has!(b" SMTPSVC"), &[Format::new(P::Smtpsvc, HELO_IP_BY), Format::skip(P::SmtpsvcPickup)]),
        (Guard::Pat(P::MsSmtpServer), &[Format::new(P::MsSmtpServerFrom, HELO_IP_BY).then(Then::EnoughWithout(Id))]),
        (has!(b"[XMail "), &[Format::new(P::XMail, HELO_IP_BY).then(Then::XMail)]),
        (
            Guard::Pat(P::Ecelerity),
            &[Format::new(P::EcelerityHelo, &[(Ip, 1), (Helo, 2), (By, 3)]), Format::new(P::EcelerityPlain, IP_BY)],
        ),
        (
            has!(b"Exim"),
            &[
                Format::skip(P::EximLocal),
                Format::new(P::EximBracket, &[(Ip, 1), (By, 3)]).then(Then::EximSub(2)),
                Format::new(P::EximRdns, &[(Rdns, 1), (Ip, 2), (By, 4), (Helo, 1)]).then(Then::EximSub(3)),
                Format::new(P::EximPlain, &[(Rdns, 1), (Ip, 2), (Helo, 1), (By, 4)]),
                Format::new(P::EximFirst, &[(Rdns, 1)]).then(Then::More),
                Format::new(P::EximParen, &[(Helo, 1)]).then(Then::More),
                Format::new(P::EximIp, &[(Ip, 1)]).then(Then::More),
                Format::new(P::EximBy, &[(By, 1)]).then(Then::EnoughWithIp),
            ],
        ),
        (
            has!(b" (Postfix) with"),
            &[
                Format::new(P::Postfix1, HELO_RDNS_IP_BY).looked().then(Then::UnknownRdns),
                Format::new(P::Postfix2, HELO_RDNS_IP_BY).looked().then(Then::UnknownRdns),
            ],
        ),
        (has!(b"(Scalix SMTP Relay"), &[Format::new(P::Scalix, HELO_IP_BY)]),
        (has!(b" (Lotus Domino "), &[Format { dns: Dns::NotLooked, ..Format::new(P::Domino, HELO_IP_BY) }]),
    ]
};

/// The formats after `from ` tried last, in SpamAssassin's order.
const FORMATS: &[Format] = {
    use F::*;
    &[
        Format::new(P::HttpNumeric, IP_BY).when(Guard::Pat(P::WithHttp)),
        Format::new(P::Sendmail, HELO_RDNS_IP_BY).when(Guard::NotPat(P::QmailLdap)).looked().then(Then::SendmailIdent),
        Format::new(P::ExchangeImc, &[(Rdns, 2), (Ip, 3), (Helo, 1), (By, 4)]).looked(),
        Format::new(P::HeloEqBy, &[(Rdns, 1), (Ip, 2), (Helo, 3), (By, 4)]),
        Format::new(P::UnknownDomain, HELO_IP_BY),
        Format::new(P::AttbiRdns, HELO_RDNS_IP_BY).looked(),
        Format::new(P::IdentAtIp, &[(Helo, 1), (Ip, 3), (By, 4), (Ident, 2)]).looked(),
        Format::new(P::HotmailBy, &[(By, 1)]).then(Then::HotmailIp),
        Format::new(P::Qpsmtpd, RDNS_HELO_IP_BY),
        Format::new(P::Lmtp, RDNS_HELO_IP_BY),
        Format::new(P::GmxHelo, RDNS_HELO_IP_BY),
        Format::new(P::AolSmtpd, HELO_IP_BY),
        Format::new(P::Qmail, &[]).then(Then::Qmail),
        Format::new(P::YahooHttp, IP_BY).when(Guard::Text(|line| line.ends_with(b" via HTTP"))),
        Format::new(P::SpaceBracket, &[(Ip, 2), (By, 3)]),
        Format::new(P::ParenRdns, HELO_IP_BY),
        Format::new(P::BracketBy, IP_BY),
        Format::new(P::ParenIpBy, IP_BY),
        Format::new(P::MDaemon1, HELO_IP_BY).looked(),
        Format::new(P::MDaemon2, HELO_IP_BY),
        Format::new(P::SendmailNoRdns, HELO_IP_BY).looked(),
        Format::new(P::SendmailLoose, &[(Helo, 1), (Ip, 3), (By, 4)]).then(Then::SendmailLoose),
        Format::new(P::IpWithPort, HELO_IP_BY).looked(),
        Format::new(P::SendmailAuthBits, HELO_RDNS_IP_BY).looked(),
        Format::new(P::Fetcher, &[]).then(Then::Restart),
        Format::new(P::QmailHelo, &[(Rdns, 1), (Helo, 2), (Ip, 4), (By, 5)]).looked().then(Then::IdentNoAt(3)),
        Format::new(P::QmailPlain, &[(Rdns, 1), (Helo, 1), (Ip, 3), (By, 4)]).looked().then(Then::IdentNoAt(2)),
        Format::new(P::HttpFor, IP_BY).when(has!(b" with http for ")),
        Format::new(P::Smap, &[(Rdns, 1), (Ip, 2), (By, 3)]).when(has!(b" via smap ")).looked(),
        Format::new(P::SmapHelo, &[(Rdns, 1), (Ip, 2), (Helo, 3), (By, 4)]).looked(),
        Format::new(P::PostOffice, IP_BY).when(has!(b" (Post")),
        Format::new(P::ArGoSoft, IP_BY).when(has!(b" (ArGoSoft")),
        Format::new(P::InterScan, IP_BY),
        Format::skip(P::Bsmtp).when(has!(b" with BSMTP")),
        Format::new(P::RdnsWith, HELO_RDNS_IP_BY).looked(),
        // Group 3 (the ident) is optional; unset, it leaves the ident empty.
        Format::new(P::YahooIdent, &[(Rdns, 1), (Helo, 2), (Ip, 4), (By, 5), (Ident, 3)]).looked(),
        Format::new(P::CommunigateAccount, &[(Ip, 1), (Helo, 2), (By, 3)]),
        Format::new(P::CommunigateVerified, &[(Rdns, 1), (Helo, 1), (Ip, 2), (By, 3)])
            .when(has!(b" (CommuniGate Pro"))
            .looked(),
        Format::new(P::CiphertrustParen, IP_BY),
        Format::new(P::NonDigitIp, HELO_IP_BY),
        Format::skip(P::ContentTech),
        Format::new(P::TwoBrackets, &[(Helo, 1), (Ip, 2), (By, 4)]),
        Format::new(P::IpByWith, IP_BY),
        Format::new(P::RdnsNoSpace, HELO_RDNS_IP_BY).looked(),
        Format::new(P::FSecure, &[(Ip, 1), (Helo, 2), (By, 3)]),
        Format::new(P::IpHelo, &[(Ip, 1), (Helo, 2), (By, 3)]),
        Format::new(P::HeloBracketBy, HELO_IP_BY),
        Format::new(P::Csmap, &[(Rdns, 1), (Ip, 2), (By, 3)]),
        Format::new(P::MailGate, IP_BY),
        Format::new(P::Unverified, HELO_IP_BY),
        Format::new(P::Proxying, IP_BY),
        Format::new(P::BracketSub, &[(Ip, 1), (By, 3)]).then(Then::EximSub(2)),
        Format::new(P::IdentOptional, &[(Rdns, 1), (Ip, 2), (By, 3)]),
        Format::new(P::Obtuse, &[(Rdns, 1), (Ip, 2), (Helo, 3), (By, 4)]).then(Then::Obtuse),
        Format::new(P::YahooLogin, &[(Helo, 1), (Ip, 3), (By, 4)]),
        Format::new(P::Synthetic, &[(Ip, 1)]).then(Then::EnoughWithout(By)),
        // Lines SpamAssassin ignores.
        Format::skip(P::IgnLocalIdent),
        Format::skip(P::IgnLocalEsmtp),
        Format::skip(P::IgnAvg),
        Format::skip(P::IgnUid),
        Format::skip(P::IgnAddrBy),
        Format::skip(P::IgnUnknownLocal),
        Format::skip(P::IgnLocalhostPair),
        Format::skip(P::IgnLocalParen),
        Format::skip(P::IgnLocalBracket),
        Format::skip(P::IgnAuth),
        Format::skip(P::IgnUnix),
        Format::skip(P::IgnAmazon),
        Format::skip(P::IgnGroupwise),
        Format::skip(P::IgnRaptor),
        Format::new(P::QmailScanner, &[]).then(Then::QmailScanner),
        Format::skip(P::IgnWithLocal),
        Format::skip(P::IgnCyrus),
        Format::skip(P::IgnNoIp),
        Format::skip(P::IgnWithBy),
        Format::skip(P::IgnSendgrid),
        Format::skip(P::IgnOpenSmtpd),
        Format::skip(P::IgnLsmtp),
        Format::skip(P::IgnMailEnable),
        Format::skip(P::IgnFacebook),
        Format::skip(P::IgnGmailApi),
        Format::skip(P::IgnIdOnly),
        Format::skip(P::IgnJetsend),
    ]
};

/// qmail's sub-formats, the first that matches giving the groups.
const QMAIL_FORMATS: &[Format] = {
    use F::*;
    &[
        Format::new(P::Qmail1, &[(Rdns, 1), (Helo, 2), (Ident, 3), (Ip, 4), (By, 6)]),
        Format::new(P::Qmail2, &[(Rdns, 1), (Helo, 2), (Ip, 3), (By, 5)]),
        Format::new(P::Qmail3, &[(Helo, 1), (Rdns, 1), (Ident, 2), (Ip, 3), (By, 5)]),
        Format::new(P::Qmail4, &[(Helo, 1), (Rdns, 1), (Ip, 2), (By, 4)]),
    ]
};

impl LineCx<'_> {
    #[inline]
    fn holds(&mut self, guard: Guard, r: Rg) -> bool {
        match guard {
            Guard::Always => true,
            Guard::Text(test) => test(self.text(r)),
            Guard::Pat(p) => self.m(p, r),
            Guard::NotPat(p) => !self.m(p, r),
        }
    }

    /// The formats after `from ` (SpamAssassin's main branch).
    fn after_from(&mut self, r: Rg, f: &mut Fields, state: &mut ChainState) -> Next {
        if self.m(P::Envfrom, r) {
            f.set(F::Envfrom, self.g(1));
            f.has_envfrom = true;
        }
        if let Some(next) = self.first_format(EARLY_FORMATS, r, f, state) {
            return next;
        }
        if let Some((_, formats)) = MTA_FORMATS.iter().find(|(guard, _)| self.holds(*guard, r)) {
            if let Some(next) = self.first_format(formats, r, f, state) {
                return next;
            }
        }
        if let Some(next) = self.first_format(FORMATS, r, f, state) {
            return next;
        }
        if f.get(F::Helo).is_empty() && self.m(P::GuessHelo, r) {
            f.set(F::Helo, self.g(1));
        }
        Next::Continue
    }

    /// Tries `formats` in order on `r`: how the parse ends, or `None` to go on.
    fn first_format(&mut self, formats: &[Format], r: Rg, f: &mut Fields, state: &mut ChainState) -> Option<Next> {
        for format in formats {
            if !self.holds(format.guard, r) || !self.m(format.pat, r) {
                continue;
            }
            match format.dns {
                Dns::Unchanged => {}
                Dns::Looked => f.looked_up_dns = true,
                Dns::NotLooked => f.looked_up_dns = false,
            }
            for &(field, group) in format.take {
                f.set(field, self.g(group));
            }
            match format.then {
                Then::Enough => {}
                Then::EnoughWithout(field) => f.set(field, Rg(0, 0)),
                Then::Skip => return Some(Next::Skip),
                Then::More => continue,
                Then::EnoughWithIp if f.get(F::Ip).is_empty() => continue,
                Then::EnoughWithIp => {}
                Then::Restart => {
                    state.restart = true;
                    return Some(Next::Skip);
                }
                Then::QmailScanner => {
                    // The envelope sender this note carries belongs to the next relay
                    // (cleaned when it is stored).
                    let env = f.get(F::Envfrom);
                    state.qmail_scanner_env_from = f.has_envfrom.then_some(env);
                    return Some(Next::Skip);
                }
                Then::EximSub(group) => {
                    let sub = self.g(group);
                    self.exim_sub(sub, f);
                }
                Then::IdentNoAt(group) => {
                    let ident = self.g(group);
                    f.set(F::Ident, strip_at(self.text(ident), ident));
                }
                Then::UnknownRdns => {
                    if self.text(f.get(F::Rdns)) == b"unknown" {
                        f.set(F::Rdns, Rg(0, 0));
                    }
                }
                Then::XMail => {
                    if self.m(P::XMailId, r) {
                        f.set(F::Id, self.g(1));
                    }
                    if self.m(P::XMailFrom, r) {
                        f.set(F::Envfrom, self.g(1));
                        f.has_envfrom = true;
                    }
                }
                Then::SendmailIdent => {
                    for p in [P::IdentPrefix, P::AtPrefix] {
                        let rdns = f.get(F::Rdns);
                        if self.m(p, rdns) {
                            let (whole, ident) = (self.g(0), self.g(1));
                            f.set(F::Ident, ident);
                            f.set(F::Rdns, Rg(whole.1, rdns.1));
                        }
                    }
                }
                Then::HotmailIp => {
                    if self.m(P::LeadingIp, r) {
                        f.set(F::Ip, self.g(1));
                    }
                }
                Then::Qmail => {
                    // QMAIL_FORMATS end the parse, so this goes one level deep.
                    self.first_format(QMAIL_FORMATS, r, f, state);
                    if self.text(f.get(F::Rdns)) != b"unknown" {
                        f.looked_up_dns = true;
                    } else {
                        f.set(F::Rdns, Rg(0, 0));
                    }
                }
                Then::SendmailLoose => {
                    let rdns = self.g(2);
                    if self.text(rdns) == b"softdnserr" {
                        f.looked_up_dns = false;
                    } else {
                        f.looked_up_dns = true;
                        f.set(F::Rdns, rdns);
                    }
                }
                Then::Obtuse => {
                    if self.text(self.g(1)) != b"UNKNOWN" {
                        f.looked_up_dns = true;
                    }
                }
            }
            return Some(Next::Enough);
        }
        None
    }
}

impl ReceivedParser {
    /// Compiles SpamAssassin's Received formats.
    pub fn new() -> ReceivedParser {
        let mut shelf = ProgramShelf::default();
        ReceivedParser::with(Patterns::with_programs(&mut shelf), &mut shelf)
    }

    /// [`ReceivedParser::new`] with the IP-address family already compiled, taking
    /// compiled programs from `shelf`.
    pub(crate) fn with(family: Patterns, shelf: &mut ProgramShelf) -> ReceivedParser {
        let pats = RECEIVED_PATTERNS.iter().map(|(p, icase)| family.fixed_from(p, *icase, shelf)).collect();
        let ip_private = family.ip_private.clone();
        let ip_search = family.fixed_from("(?&IP)", false, shelf);
        ReceivedParser { pats, patterns: IpPatterns { family, ip_private, ip_search } }
    }

    /// Patterns that failed to compile (must be none; checked by the tests).
    #[cfg(test)]
    fn broken() -> Vec<(&'static str, alloc::string::String)> {
        let family = Patterns::new();
        RECEIVED_PATTERNS
            .iter()
            .filter_map(|(p, icase)| family.compile(p, *icase).err().map(|e| (*p, alloc::format!("{e}"))))
            .collect()
    }

    /// SpamAssassin's `parse_received_line` on the normalized line in `work`.
    fn parse_line(&self, work: &mut Vec<u8>, search: &mut Search, state: &mut ChainState) -> Parsed {
        let mut cx = LineCx { work, search, pats: &self.pats, base: 0 };
        let mut f = Fields::default();
        let mut line = Rg(0, cx.work.len() as u32);
        if !cx.m(P::FromStart, line) || cx.m(P::WithLocalFor, line) {
            return Parsed::Skip;
        }
        if cx.m(P::FromBy, line) {
            let host = cx.g(1);
            if !cx.m(P::BracketQuad, host) {
                return Parsed::Skip;
            }
        }
        // The date at the end is its last six tokens at most: the search starts at the
        // seventh space from the end, and the match is widened over the [\s;] run it
        // starts in, which is where SpamAssassin's leftmost match starts.
        let text = line.get(cx.work);
        let window = text.iter().enumerate().rev().filter(|&(_, &b)| b == b' ').nth(6).map_or(0, |(i, _)| i);
        if let Some(re) = self.pats.get(P::DateTail as usize) {
            if re.find_at(text, window, cx.search) {
                let mut start = cx.search.group(0).map_or(text.len(), |(a, _)| a);
                while start > 0 && text.get(start - 1).is_some_and(|&b| is_space(b) || b == b';') {
                    start -= 1;
                }
                line.1 = line.0 + start as u32;
            }
        }
        // s/\)by /) by /
        if let Some(p) = memchr::memmem::find(line.get(cx.work), b")by ") {
            let at = line.0 as usize + p + 1;
            if at <= cx.work.len() {
                cx.work.insert(at, b' ');
                line.1 += 1;
            }
        }
        if cx.m(P::Id, line) {
            f.set(F::Id, cx.g(1));
        }
        if cx.m(P::HeloEq, line) || cx.m(P::HeloWord, line) {
            f.set(F::Helo, cx.g(1));
        }
        if cx.m(P::By, line) {
            f.set(F::By, cx.g(1));
        }
        self.auth(&mut cx, line, &mut f);

        let text = line.get(cx.work);
        let (prefix, branch) = if text.starts_with(b"from ") {
            (5, Branch::From)
        } else if text.starts_with(b"FROM ") {
            (5, Branch::Simta)
        } else if text.starts_with(b"(from ") {
            (6, Branch::ParenFrom)
        } else {
            (0, Branch::Other)
        };
        let rest = Rg(line.0 + prefix, line.1);
        let next = match branch {
            Branch::From => cx.after_from(rest, &mut f, state),
            Branch::Simta if cx.m(P::Simta, rest) => {
                f.looked_up_dns = true;
                f.set(F::Helo, cx.g(1));
                let rdns = cx.g(2);
                f.set(F::Rdns, if cx.text(rdns) == b"unverified" { Rg(0, 0) } else { rdns });
                f.set(F::Ip, cx.g(3));
                f.set(F::By, cx.g(4));
                f.set(F::Id, cx.g(5));
                Next::Enough
            }
            Branch::ParenFrom if cx.m(P::Navgw, rest) => {
                f.set(F::Helo, cx.g(1));
                f.set(F::Ip, cx.g(2));
                f.set(F::By, cx.g(3));
                Next::Enough
            }
            Branch::ParenFrom if cx.m(P::IgnSubmit, rest) || cx.m(P::IgnJqueue, rest) => Next::Skip,
            _ => Next::Continue,
        };
        match next {
            Next::Enough => Parsed::Relay(f),
            Next::Skip => Parsed::Skip,
            Next::Continue => {
                if f.get(F::Ip).is_empty() && cx.m(P::AnyBracketIp, rest) {
                    f.set(F::Ip, cx.g(1));
                }
                if !f.get(F::Ip).is_empty() && !f.get(F::By).is_empty() {
                    Parsed::Relay(f)
                } else {
                    Parsed::Unparseable
                }
            }
        }
    }

    /// The authentication markers SpamAssassin recognizes.
    fn auth(&self, cx: &mut LineCx<'_>, line: Rg, f: &mut Fields) {
        let has_by = cx.contains(line, b" by ");
        let auth = if has_by && cx.m(P::AuthWith, line) {
            cx.g(1)
        } else if cx.m(P::AuthGmail, line) && cx.m(P::AuthGmailTls, line) {
            let (a, b) = (cx.g(1), cx.g(2));
            cx.push(&[Part::Lit(b"GMail - transport="), Part::Of(a), Part::Lit(b" cipher="), Part::Of(b)])
        } else if cx.m(P::AuthCourier, line) {
            cx.g(1)
        } else if cx.contains(line, b"authenticated") && cx.m(P::AuthSendmail, line) {
            cx.push(&[Part::Lit(b"Sendmail")])
        } else if cx.m(P::AuthGmx, line) {
            let (by, proto) = (cx.g(3), cx.g(4));
            cx.push(&[Part::Lit(b"GMX ("), Part::Of(proto), Part::Lit(b" / "), Part::Of(by), Part::Lit(b")")])
        } else if cx.contains(line, b" (authenticated as ") && cx.m(P::AuthCriticalPath, line) {
            cx.push(&[Part::Lit(b"CriticalPath")])
        } else if cx.m(P::AuthPostfix, line) {
            let name = cx.g(1);
            if cx.text(name) == b"Postfix" {
                name
            } else {
                cx.push(&[Part::Lit(b"Postfix ("), Part::Of(name), Part::Lit(b")")])
            }
        } else if cx.m(P::AuthCommunigate, line) && cx.contains(line, b" (account ") {
            cx.push(&[Part::Lit(b"Communigate")])
        } else if cx.m(P::AuthExchangeDav, line) {
            cx.push(&[Part::Lit(b"HTTP-DAV")])
        } else if has_by && cx.m(P::AuthViaHttp, line) {
            cx.g(1)
        } else {
            return;
        };
        f.set(F::Auth, auth);
    }
}

/// Whether `hay` contains `needle` (ignoring ASCII case when `icase`; `needle` is then lower case).
fn contains(hay: &[u8], needle: &[u8], icase: bool) -> bool {
    if icase {
        super::re::find_bytes_icase(hay, needle).is_some()
    } else {
        super::re::find_bytes(hay, needle).is_some()
    }
}

/// `$ident =~ s/\@$//` on a capture.
fn strip_at(text: &[u8], r: Rg) -> Rg {
    if text.last() == Some(&b'@') {
        Rg(r.0, r.1.saturating_sub(1))
    } else {
        r
    }
}

/// Names of the pseudo-headers, for lint and documentation.
pub const PSEUDO_HEADERS: [&str; 9] = [
    "X-Spam-Relays-Untrusted",
    "X-Spam-Relays-Trusted",
    "X-Spam-Relays-Internal",
    "X-Spam-Relays-External",
    "EnvelopeFrom",
    "ALL-TRUSTED",
    "ALL-UNTRUSTED",
    "ALL-INTERNAL",
    "ALL-EXTERNAL",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{Limits, MessageBuffers};
    use crate::rules::cf::{NoIncludes, Parser};
    use alloc::string::String;

    /// Header data as the stock `10_default_prefs.cf` sets it up.
    fn data() -> HeaderData {
        let mut parser = Parser::new();
        let cf = b"originating_ip_headers X-Yahoo-Post-IP X-Originating-IP X-Apparently-From\noriginating_ip_headers X-SenderIP X-AOL-IP\n";
        assert!(parser.parse_file("prefs.cf", cf, &mut NoIncludes).is_ok());
        HeaderData { needs_relays: true, ..HeaderData::new(&parser.finish()) }
    }

    #[test]
    fn relays_are_read_only_when_rules_need_them() {
        let needs = |cf: &[u8]| {
            let mut parser = Parser::new();
            assert!(parser.parse_file("x.cf", cf, &mut NoIncludes).is_ok());
            HeaderData::new(&parser.finish()).needs_relays
        };
        assert!(!needs(b"header A Subject =~ /x/\nheader B eval:check_rbl('x', 'y.')\n"));
        assert!(needs(b"header A X-Spam-Relays-External =~ /rdns= /\n"));
        assert!(needs(b"header A eval:check_all_trusted()\n"));
        assert!(needs(b"header A EnvelopeFrom =~ /x/\n"));
    }

    /// Builds the message SpamAssassin was given: `Received:` lines (split on ` || `),
    /// then extra headers (after ` ## `, split on ` | `), then `From:`.
    fn message_text(spec: &str) -> Vec<u8> {
        let (rcvd, extra) = spec.split_once(" ## ").unwrap_or((spec, ""));
        let mut text = Vec::new();
        for r in rcvd.split(" || ") {
            text.extend_from_slice(b"Received: ");
            text.extend_from_slice(r.as_bytes());
            text.push(b'\n');
        }
        for h in extra.split(" | ").filter(|h| !h.is_empty()) {
            text.extend_from_slice(h.as_bytes());
            text.push(b'\n');
        }
        text.extend_from_slice(b"From: a@b.c\n\nx\n");
        text
    }

    #[test]
    fn received_formats_compile() {
        assert_eq!(ReceivedParser::broken(), Vec::new());
        // Splicing the parsed IP sub-patterns gives the very program inlining their text did.
        let family = Patterns::new();
        for (p, icase) in RECEIVED_PATTERNS {
            let spliced = alloc::format!("{:?}", family.compile(p, *icase));
            assert_eq!(spliced, super::super::re::inlined_program(p, *icase), "{p}");
        }
    }

    #[test]
    fn relays_like_spamassassin_table() {
        // (Received lines ## other headers, X-Spam-Relays-Untrusted, -Trusted,
        // EnvelopeFrom, unparseable count), as SpamAssassin 4.0.1 gives them.
        let cases: &[(&str, &str, &str, &str, u32)] = &[
            ("from mail.example.com (mail.example.com [192.0.2.1]) by mx.example.net (8.12.5/8.12.5) with ESMTP id g7MBYrZ04811 for <a@example.net>; Thu, 22 Aug 2002 12:34:53 +0100", "[ ip=192.0.2.1 rdns=mail.example.com helo=mail.example.com by=mx.example.net ident= envfrom= intl=0 id=g7MBYrZ04811 auth= msa=0 ]", "", "UNDEF", 0),
            ("from unknown (HELO x.y) (1.2.3.4) by mail.z.com with SMTP; 1 Jan 2003 00:00:00 -0000", "[ ip=1.2.3.4 rdns= helo=x.y by=mail.z.com ident= envfrom= intl=0 id= auth= msa=0 ]", "", "UNDEF", 0),
            ("from [10.0.0.1] (helo=laptop) by relay.example.org with esmtpa (Exim 4.50) id 1ABC-000123-XY; Mon, 1 Jan 2007 00:00:00 +0000 || from outside.example.com ([203.0.113.5] helo=outside) by relay.example.org with esmtp (Exim 4.50) id 1ABD; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=203.0.113.5 rdns=outside.example.com helo=outside by=relay.example.org ident= envfrom= intl=0 id=1ABD auth= msa=0 ]", "[ ip=10.0.0.1 rdns= helo=laptop by=relay.example.org ident= envfrom= intl=1 id=1ABC-000123-XY auth=esmtpa msa=0 ]", "UNDEF", 0),
            ("from localhost (localhost [127.0.0.1]) by cabbage.jmason.org (Postfix) with ESMTP id A96E18BD97 for <jm@localhost>; Thu, 13 Mar 2003 15:23:15 -0500 (EST) || from mail.ssccbelen.edu.pe ([216.244.149.154]) by yzordderrex with esmtp (Exim 3.35 #1 (Debian)) id 18tqiz-000702-00 for <jm@example.com>; Fri, 14 Mar 2003 15:03:57 +0000", "[ ip=216.244.149.154 rdns=mail.ssccbelen.edu.pe helo=mail.ssccbelen.edu.pe by=yzordderrex ident= envfrom= intl=0 id=18tqiz-000702-00 auth= msa=0 ]", "[ ip=127.0.0.1 rdns=localhost helo=localhost by=cabbage.jmason.org ident= envfrom= intl=1 id=A96E18BD97 auth= msa=0 ]", "UNDEF", 0),
            ("from hotmail.com (f135.law8.hotmail.com [216.33.241.135]) by mx.x.com; Thu, 1 Jan 2004 00:00:00 +0000", "[ ip=216.33.241.135 rdns=f135.law8.hotmail.com helo=hotmail.com by=mx.x.com ident= envfrom= intl=0 id= auth= msa=0 ]", "", "UNDEF", 0),
            ("from cabbage.jmason.org [127.0.0.1] by localhost with IMAP (fetchmail-5.9.0) for jm@localhost (single-drop); Thu, 13 Mar 2003 20:39:56 -0800 (PST) || from x.org (x.org [198.51.100.7]) by mail.y.org (8.11.6/8.11.6) with SMTP id h2F0c2x31856; Sat, 15 Mar 2003 00:38:03 GMT", "[ ip=198.51.100.7 rdns=x.org helo=x.org by=mail.y.org ident= envfrom= intl=0 id=h2F0c2x31856 auth= msa=0 ]", "", "UNDEF", 0),
            ("from 213.123.174.21 by lw11fd.law11.hotmail.msn.com with HTTP; Wed, 24 Jul 2002 16:36:44 GMT ## X-Originating-IP: [213.123.174.21] | Return-Path: <foo@bar.com>", "[ ip=213.123.174.21 rdns= helo= by= ident= envfrom= intl=0 id= auth= msa=0 ]", "[ ip=213.123.174.21 rdns= helo= by=lw11fd.law11.hotmail.msn.com ident= envfrom= intl=1 id= auth=HTTP msa=0 ]", "UNDEF", 0),
            ("garbage line here ## Envelope-Sender: x@y.z", "", "", "UNDEF", 0),
            ("from a.b.c (HELO a.b.c) (ident@[1.2.3.4]) (envelope-sender <bounce@b.c>) by q.r.s (qmail-ldap-1.03) with SMTP for <x@y.z>; 12 Feb 2003 18:23:19 -0000", "[ ip=1.2.3.4 rdns=a.b.c helo=a.b.c by=q.r.s ident=ident envfrom=bounce@b.c intl=0 id= auth= msa=0 ]", "", "bounce@b.c", 0),
            ("from e (e.f [198.51.100.3]) by g.h (8.12/8.12) with ESMTP id k; Mon, 1 Jan 2007 00:00:00 +0000 (envelope-from <env@f.g>)", "[ ip=198.51.100.3 rdns=e.f helo=e by=g.h ident= envfrom=env@f.g intl=0 id= auth= msa=0 ]", "", "env@f.g", 0),
            ("from mx.google.com (mx.google.com [2001:db8::1]) by mail.q.net (Postfix) with ESMTPS id 123ABC for <a@q.net>; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=2001:db8::1 rdns=mx.google.com helo=mx.google.com by=mail.q.net ident= envfrom= intl=0 id=123ABC auth= msa=0 ]", "", "UNDEF", 0),
            // One line per MTA format and follow-up step.
            ("from mail.example.com ([192.0.2.40]:1234) by mx.example.com with [XMail 1.22 ESMTP Server] id <S1> for <a@b.c> from <x@y.z>; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.40 rdns= helo=mail.example.com by=mx.example.com ident= envfrom=x@y.z intl=0 id=S1 auth= msa=0 ]", "", "x@y.z", 0),
            ("from ([192.0.2.41:3456] helo=mail.example.com) by mx.example.com (ecelerity 2.2.2.41 r(31179/31189)) with ESMTP id 1A/2B; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.41 rdns= helo=mail.example.com by=mx.example.com ident= envfrom= intl=0 id=1A/2B auth= msa=0 ]", "", "UNDEF", 0),
            ("from mail.example.com ([192.0.2.42:3456]) by mx.example.com (ecelerity 2.2.2.41 r(31179/31189)) with ESMTP id 1A/2B; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.42 rdns= helo= by=mx.example.com ident= envfrom= intl=0 id=1A/2B auth= msa=0 ]", "", "UNDEF", 0),
            ("from mail.example.com (192.0.2.43) by mx.example.com (10.0.0.1) with mapi id 14.01.0339.000; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.43 rdns= helo=mail.example.com by=mx.example.com ident= envfrom= intl=0 id= auth= msa=0 ]", "", "UNDEF", 0),
            ("from mail pickup service by hotmail.com with Microsoft SMTPSVC; Tue, 16 Mar 2004 18:12:31 -0800 || from mail.example.com ([192.0.2.44]) by mx.example.com with Microsoft SMTPSVC(6.0.3790.0); Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.44 rdns= helo=mail.example.com by=mx.example.com ident= envfrom= intl=0 id= auth= msa=0 ]", "", "UNDEF", 0),
            ("from host.example.com ([192.0.2.45]) by mx.example.com (Lotus Domino Release 5.0.8) with ESMTP id 2007010100; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.45 rdns= helo=host.example.com by=mx.example.com ident= envfrom= intl=0 id=2007010100 auth= msa=0 ]", "", "UNDEF", 0),
            ("from host ( 192.0.2.46) by mx (Scalix SMTP Relay 10.0.1.3) via ESMTP; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.46 rdns= helo=host by=mx ident= envfrom= intl=0 id= auth= msa=0 ]", "", "UNDEF", 0),
            ("from helo.example.com (unknown[192.0.2.18]) by mx.example.com (Postfix) with ESMTP id ABC; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.18 rdns= helo=helo.example.com by=mx.example.com ident= envfrom= intl=0 id=ABC auth= msa=0 ]", "", "UNDEF", 0),
            ("from helo.example.com (IDENT:joe@rdns.example.com [192.0.2.25]) by mx.example.com (8.12/8.12) with ESMTP id x1; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.25 rdns=rdns.example.com helo=helo.example.com by=mx.example.com ident=joe envfrom= intl=0 id= auth= msa=0 ]", "", "UNDEF", 0),
            ("from helo.example.com (softdnserr [192.0.2.34]) by mx.example.com id 123; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.34 rdns= helo=helo.example.com by=mx.example.com ident= envfrom= intl=0 id=123 auth= msa=0 ]", "", "UNDEF", 0),
            ("from UNKNOWN(192.0.2.35), claiming to be \"helo.example.com\" via SMTP by mx.example.com, id smtpdAAA; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.35 rdns= helo=helo.example.com by=mx.example.com ident= envfrom= intl=0 id=smtpdAAA auth= msa=0 ]", "", "UNDEF", 0),
            ("from rdns.example.com (HELO helo.example.com) (joe@192.0.2.47) by mx.example.com with QSMTP; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.47 rdns=rdns.example.com helo=helo.example.com by=mx.example.com ident=joe envfrom= intl=0 id= auth= msa=0 ]", "", "UNDEF", 0),
            ("from [192.0.2.48] (helo=laptop ident=bob) by relay.example.org with esmtp id 1ABC; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.48 rdns= helo=laptop by=relay.example.org ident=bob envfrom= intl=0 id=1ABC auth= msa=0 ]", "", "UNDEF", 0),
            ("from mail.example.com (foo) [192.0.2.50] by mx.example.com with smtp (Exim 3.35 #1) id 1ABC; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.50 rdns=mail.example.com helo=foo by=mx.example.com ident= envfrom= intl=0 id=1ABC auth= msa=0 ]", "", "UNDEF", 0),
            ("from 192.0.2.51 by blazing.example.org (envelope-from <bounce@example.com>, uid 502) with qmail-scanner-1.24 (clamdscan: 0.80/594.); 06 Feb 2005 21:11:38 -0000 || from mail.example.com (mail.example.com [192.0.2.52]) by blazing.example.org (8.12/8.12) with ESMTP id x2; Sun, 06 Feb 2005 21:11:37 -0000", "[ ip=192.0.2.52 rdns=mail.example.com helo=mail.example.com by=blazing.example.org ident= envfrom=bounce@example.com intl=0 id= auth= msa=0 ]", "", "bounce@example.com", 0),
            ("from web.aol.com ([205.188.1.1]) by rly.aol.com via smtpd (for mx.example.com) with SMTP(x); Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=205.188.1.1 rdns= helo=web.aol.com by=rly.aol.com ident= envfrom= intl=0 id= auth= msa=0 ]", "", "UNDEF", 0),
            ("from host.example.com [(192.0.2.13)] by mx.example.com (192.0.2.14) id 5; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.13 rdns= helo=host.example.com by=mx.example.com ident= envfrom= intl=0 id= auth= msa=0 ]", "", "UNDEF", 0),
            ("from helo (rdns[192.0.2.33]) by mx.example.com id 5; Mon, 1 Jan 2007 00:00:00 +0000", "[ ip=192.0.2.33 rdns=rdns helo=helo by=mx.example.com ident= envfrom= intl=0 id= auth= msa=0 ]", "", "UNDEF", 0),
        ];
        let data = data();
        let mut bufs = MessageBuffers::new(Limits::default());
        let mut relays = Relays::default();
        let mut out = Vec::new();
        for &(spec, untrusted, trusted, envfrom, unparseable) in cases {
            let text = message_text(spec);
            let message = Message::parse(&text, &mut bufs);
            relays.read(&message, &data);
            for (name, want) in [("X-Spam-Relays-Untrusted", untrusted), ("X-Spam-Relays-Trusted", trusted)] {
                out.clear();
                assert_eq!(relays.pseudo_header(name.as_bytes(), &mut out), Some(true));
                assert_eq!(String::from_utf8_lossy(&out), want, "{name} of {spec}");
            }
            out.clear();
            let got = relays.pseudo_header(b"EnvelopeFrom", &mut out);
            let want_env = (envfrom != "UNDEF").then_some(envfrom);
            assert_eq!(got == Some(true), want_env.is_some(), "{spec}");
            if let Some(w) = want_env {
                assert_eq!(String::from_utf8_lossy(&out), w, "{spec}");
            }
            assert_eq!(relays.num_unparseable(), unparseable, "{spec}");
        }
    }

    #[test]
    fn trusted_networks_move_the_boundary() {
        let mut parser = Parser::new();
        // As without Net::Patricia, the first entry that covers an address decides.
        let cf = b"trusted_networks !203.0.113.9 203.0.113/24\ninternal_networks 203.0.113.5\n";
        assert!(parser.parse_file("local.cf", cf, &mut NoIncludes).is_ok());
        let data = HeaderData { needs_relays: true, ..HeaderData::new(&parser.finish()) };
        let spec = "from a (a [203.0.113.5]) by b (8.1/8.1) id 1; Mon, 1 Jan 2007 00:00:00 +0000 || \
                    from c (c [203.0.113.7]) by a (8.1/8.1) id 2; Mon, 1 Jan 2007 00:00:00 +0000 || \
                    from d (d [203.0.113.9]) by c (8.1/8.1) id 3; Mon, 1 Jan 2007 00:00:00 +0000";
        let text = message_text(spec);
        let mut bufs = MessageBuffers::new(Limits::default());
        let message = Message::parse(&text, &mut bufs);
        let mut relays = Relays::default();
        relays.read(&message, &data);
        let flags: Vec<(bool, bool)> = relays.all().map(|r| (r.trusted, r.internal)).collect();
        assert_eq!(flags, [(true, true), (true, false), (false, false)]);
        assert_eq!(relays.num_trusted(), 2);
    }

    #[test]
    fn net_ranges_parse() {
        let v4 = |a: u8, b: u8, c: u8, d: u8| {
            let mut x = [0u8; 16];
            x[10] = 0xff;
            x[11] = 0xff;
            x[12] = a;
            x[13] = b;
            x[14] = c;
            x[15] = d;
            x
        };
        assert_eq!(NetRange::parse("10."), Some(NetRange { exclude: false, addr: v4(10, 0, 0, 0), prefix: 104 }));
        assert_eq!(
            NetRange::parse("!192.168.1.2/31"),
            Some(NetRange { exclude: true, addr: v4(192, 168, 1, 2), prefix: 127 })
        );
        assert!(NetRange::parse("[2001:db8::]/32").is_some_and(|r| r.prefix == 32 && r.addr[0] == 0x20));
        assert_eq!(NetRange::parse("300.1.1.1"), None);
        assert_eq!(NetRange::parse("1.2.3.4/33"), None);
    }

    #[test]
    fn hostile_chains_stop_at_the_step_allowance() {
        let data = data();
        let mut hostile = Vec::new();
        let line: Vec<u8> = core::iter::repeat_n(&b"x]) (authenticated ("[..], 400).flatten().copied().collect();
        for _ in 0..100 {
            hostile.extend_from_slice(b"Received: from ");
            hostile.extend_from_slice(&line);
            hostile.push(b'\n');
        }
        hostile.extend_from_slice(b"From: a@b.c\n\nx\n");
        let mut bufs = MessageBuffers::new(Limits::default());
        let mut relays = Relays::default();
        let message = Message::parse(&hostile, &mut bufs);
        relays.read(&message, &data);
        assert_eq!(relays.steps_left(), 0, "the hostile chain spends the whole allowance");
        assert_eq!(relays.num_unparseable(), 100);
        // The next message gets a fresh allowance.
        let text = message_text("from a (a [192.0.2.1]) by b (8.1/8.1) id 1; Mon, 1 Jan 2007 00:00:00 +0000");
        let message = Message::parse(&text, &mut bufs);
        relays.read(&message, &data);
        assert_eq!(relays.num_untrusted(), 1);
        assert!(relays.steps_left() > RELAY_STEPS / 2);
    }

    #[test]
    fn ip_cleanup() {
        assert_eq!(clean_ip(b"IPv6:::ffff:1.2.3.4"), b"1.2.3.4");
        assert_eq!(clean_ip(b"[fe80::1%eth0]"), b"fe80::1");
        assert_eq!(clean_ip(b"[192.0.2.1]"), b"192.0.2.1");
        assert_eq!(parse_ip(b"::1").map(|(a, v4)| (a[15], v4)), Some((1, false)));
        assert_eq!(parse_ip(b"1.2.3"), None);
    }
}
