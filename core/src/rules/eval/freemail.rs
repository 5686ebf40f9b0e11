//! SpamAssassin's FreeMail plugin: addresses at free mail providers
//! (`freemail_domains`) in From, Reply-To and other headers, and in the body.

use alloc::vec::Vec;

use super::re::{Patterns, Regex, Search};
use super::wlbl::{glob_match, AddrSet, Registry};
use crate::rules::EvalSettings;
use crate::rules::cache::ProgramShelf;

/// `freemail_max_body_emails`: this many different addresses in the body and the
/// body is not used.
const MAX_BODY_EMAILS: usize = 5;
/// `freemail_max_body_freemails`: this many free mail addresses in the body and the
/// body is not used.
const MAX_BODY_FREEMAILS: usize = 3;

/// The plugin's configuration, prepared once per rule set.
#[derive(Debug, Clone)]
pub struct FreemailData {
    domains: Vec<Vec<u8>>,
    globs: Vec<Vec<u8>>,
    welcomelist: Vec<Vec<u8>>,
    /// Addresses never counted (abuse@, info@, bounces, ...).
    default_welcomelist: Regex,
    /// Envelope senders that look like bulk mail (`check_freemail_replyto` skips).
    bulk_envfrom: Regex,
}

/// No domains, and patterns that match nothing: a placeholder, cheap to make.
impl Default for FreemailData {
    fn default() -> Self {
        FreemailData {
            domains: Vec::new(),
            globs: Vec::new(),
            welcomelist: Vec::new(),
            default_welcomelist: super::re::never(),
            bulk_envfrom: super::re::never(),
        }
    }
}

impl FreemailData {
    /// Prepares the domain lists.
    pub fn new(settings: &EvalSettings, pats: &Patterns) -> FreemailData {
        FreemailData::with_programs(settings, pats, &mut ProgramShelf::default())
    }

    /// [`FreemailData::new`], taking compiled programs from `shelf`.
    pub(crate) fn with_programs(settings: &EvalSettings, pats: &Patterns, shelf: &mut ProgramShelf) -> FreemailData {
        let sorted = |v: &[alloc::string::String]| {
            let mut out: Vec<Vec<u8>> = v.iter().map(|s| s.as_bytes().to_ascii_lowercase()).collect();
            out.sort();
            out.dedup();
            out
        };
        FreemailData {
            domains: sorted(&settings.freemail_domains),
            globs: settings.freemail_domain_globs.iter().map(|s| s.as_bytes().to_vec()).collect(),
            welcomelist: sorted(&settings.freemail_welcomelist),
            default_welcomelist: pats.fixed_from(
                concat!(
                    r"^(?:abuse|support|sales|info|helpdesk|contact|kontakt|(?:post|host|domain)master|undisclosed.*",
                    r"|request-[a-f0-9]{16}|bounced?-",
                    r"|[a-f0-9]{8}(?:\.[a-f0-9]{8}|-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12})|.+=.+=.+)\@"
                ),
                true,
                shelf,
            ),
            bulk_envfrom: pats.fixed_from(
                concat!(
                    r"(?:^(?:post|host|domain)master|^double-bounce|^(?:sentto|owner|return|(?:gr)?bounced?)-.+",
                    r"|-(?:request|bounces?|admin|owner)|\b(?:do[._-t]?)?no[._-t]?repl(?:y|ies)|.+=.+)\@"
                ),
                true,
                shelf,
            ),
        }
    }

    /// No `freemail_domains`: SpamAssassin disables the plugin's tests.
    pub fn available(&self) -> bool {
        !self.domains.is_empty() || !self.globs.is_empty()
    }

    /// `_is_freemail` for a lowercased address.
    pub fn is_freemail(&self, email: &[u8], search: &mut Search) -> bool {
        if email.is_empty() {
            return false;
        }
        let has = |list: &[Vec<u8>], v: &[u8]| list.binary_search_by(|e| e.as_slice().cmp(v)).is_ok();
        if has(&self.welcomelist, email) {
            return false;
        }
        let domain = match email.iter().rposition(|&b| b == b'@') {
            Some(p) => email.get(p + 1..).unwrap_or(&[]),
            None => email,
        };
        if has(&self.welcomelist, domain) || self.default_welcomelist.is_match(email, search) {
            return false;
        }
        if has(&self.domains, domain) {
            return true;
        }
        // \@(?:wildcards)$ at any @ of the address
        email.iter().enumerate().filter(|&(_, &b)| b == b'@').any(|(p, _)| {
            let tail = email.get(p + 1..).unwrap_or(&[]);
            let tail = tail.strip_suffix(b"\n").unwrap_or(tail);
            self.globs.iter().any(|g| glob_match(g, tail, true))
        })
    }

    /// Whether an envelope sender looks like bulk mail.
    pub fn bulk_envelope_sender(&self, envfrom: &[u8], search: &mut Search) -> bool {
        self.bulk_envfrom.is_match(envfrom, search)
    }
}

/// Bytes allowed in the local part of SpamAssassin's e-mail pattern.
fn is_local(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+/=?^_`{|}~-".contains(&b)
}

fn is_label(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// The e-mail address SpamAssassin's FreeMail pattern finds starting at `i`, as its end.
fn email_at(text: &[u8], i: usize, registry: &Registry) -> Option<usize> {
    if !text.get(i).copied().is_some_and(is_local)
        || i.checked_sub(1).and_then(|p| text.get(p)).copied().is_some_and(is_local)
    {
        return None;
    }
    // Local part: a run of local bytes and single inner dots, then @ within 64 bytes.
    let mut j = i;
    while text.get(j).copied().is_some_and(|b| is_local(b) || b == b'.') {
        j += 1;
    }
    let local = text.get(i..j)?;
    if text.get(j) != Some(&b'@') || j - i > 64 || local.last() == Some(&b'.') || local.windows(2).any(|w| w == b"..") {
        return None;
    }
    // Domain: 1 to 4 labels then a known top-level domain ending there.
    let start = j + 1;
    let mut end = start;
    while text.get(end).copied().is_some_and(|b| is_label(b) || b == b'.') {
        end += 1;
    }
    let domain = text.get(start..end)?;
    let mut labels = [(0usize, 0usize); 6];
    let mut count = 0;
    let mut k = 0;
    for part in domain.split(|&b| b == b'.') {
        if let Some(slot) = labels.get_mut(count) {
            *slot = (start + k, start + k + part.len());
            count += 1;
        } else {
            break;
        }
        k += part.len() + 1;
    }
    // 1 to 4 labels, then the top-level domain, which must end the name.
    for n in (2..=count.min(5)).rev() {
        let (ta, tb) = *labels.get(n - 1)?;
        let tld = text.get(ta..tb)?;
        let label_ok = |&(a, b): &(usize, usize)| {
            let l = text.get(a..b).unwrap_or(&[]);
            !l.is_empty()
                && l.len() <= 61
                && l.first().is_some_and(u8::is_ascii_alphanumeric)
                && l.last().is_some_and(u8::is_ascii_alphanumeric)
        };
        if !labels.get(..n - 1)?.iter().all(label_ok) || tld.is_empty() {
            continue;
        }
        let after = text.get(tb).copied();
        let continues = after.is_some_and(is_label)
            || (after == Some(b'.') && text.get(tb + 1).copied().is_some_and(|b| b.is_ascii_alphanumeric()));
        let ends = !continues;
        if ends && registry.is_tld(tld) {
            return Some(tb);
        }
    }
    None
}

/// `_parse_body`: the free mail addresses of the body, or `None` when the body has
/// too many addresses (or free mail addresses) to be used.
pub fn body_freemails(
    data: &FreemailData,
    registry: &Registry,
    body: &[u8],
    uris: &[u8],
    emails: &mut AddrSet,
    out: &mut AddrSet,
    search: &mut Search,
) -> bool {
    emails.clear();
    out.clear();
    // The body is one text: SpamAssassin's `\s` crosses line ends inside its chunks.
    // `out` collects every address seen in the text, quoted or not, for the mailto
    // links below.
    let text = body;
    let mut i = 0;
    // Positions below `checked` need no skip check (see `Marks::skip_to`).
    let mut checked = 0;
    let mut marks = Marks { at: memchr::memchr(b'@', text), pct: super::re::find_bytes(text, b"%40") };
    while i < text.len() && emails.len() < 40 {
        if i >= checked {
            match marks.skip_to(text, i) {
                Some((next, until)) => (i, checked) = (next, until),
                None => break,
            }
        }
        // URLs with an @ in them are not addresses.
        if let Some(len) = url_with_at(text, i) {
            i += len;
            continue;
        }
        match email_at(text, i, registry) {
            Some(end) => {
                let addr = text.get(i..end).unwrap_or(&[]);
                out.add(addr, false, true);
                // `<addr>` and `addr Word:` (quoted header lines) are not counted.
                if !follows_quote(text, end) || preceded_by_mailto(text, i) {
                    emails.add(addr, false, true);
                }
                i = end;
            }
            None => i += 1,
        }
    }
    // mailto: links count unless the address is also in the text (SpamAssassin then
    // marks the link as parsed from text and skips it).
    for uri in uris.split(|&b| b == b'\n') {
        let Some(rest) = uri.get(..7).filter(|p| p.eq_ignore_ascii_case(b"mailto:")).and_then(|_| uri.get(7..)) else {
            continue;
        };
        if let Some(end) = email_at(rest, 0, registry) {
            let addr = rest.get(..end).unwrap_or(&[]);
            if !out.iter().any(|seen| seen.eq_ignore_ascii_case(addr)) {
                emails.add(addr, false, true);
            }
        }
    }
    out.clear();
    if emails.len() >= MAX_BODY_EMAILS {
        return false;
    }
    let mut freemails = 0;
    for e in emails.iter() {
        if data.is_freemail(e, search) {
            freemails += 1;
            if freemails >= MAX_BODY_FREEMAILS {
                out.clear();
                return false;
            }
            out.add(e, false, false);
        }
    }
    true
}

/// The next `@` and `%40` of a text, found again only once passed.
struct Marks {
    at: Option<usize>,
    pct: Option<usize>,
}

impl Marks {
    /// Where an address or a URL with an `@` can start, from `i`: both need an `@` (a
    /// URL also `%40`) after their start with no white space in between, so every
    /// position up to the last white space before the next such mark is skipped.
    /// Returns the next position worth trying and the mark's position plus one (until
    /// then nothing more can be skipped), or `None` when no mark follows.
    fn skip_to(&mut self, text: &[u8], i: usize) -> Option<(usize, usize)> {
        let rest = text.get(i..)?;
        if self.at.is_some_and(|a| a < i) {
            self.at = memchr::memchr(b'@', rest).map(|k| i + k);
        }
        if self.pct.is_some_and(|p| p < i) {
            self.pct = super::re::find_bytes(rest, b"%40").map(|k| i + k);
        }
        let mark = match (self.at, self.pct) {
            (Some(a), Some(p)) => a.min(p),
            (Some(k), None) | (None, Some(k)) => k,
            (None, None) => return None,
        };
        let next = text.get(i..mark)?.iter().rposition(|&b| super::re::is_space(b)).map_or(i, |k| i + k + 1);
        Some((next, mark + 1))
    }
}

/// `<?https?://\S{0,255}(?:\@|%40)\S{0,255}` at `i`: its length.
fn url_with_at(line: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    if line.get(j) == Some(&b'<') {
        j += 1;
    }
    let rest = line.get(j..)?;
    let scheme = if rest.len() >= 7 && rest.get(..7).is_some_and(|p| p.eq_ignore_ascii_case(b"http://")) {
        7
    } else if rest.len() >= 8 && rest.get(..8).is_some_and(|p| p.eq_ignore_ascii_case(b"https://")) {
        8
    } else {
        return None;
    };
    let body_start = j + scheme;
    let token = line.get(body_start..)?.iter().take_while(|&&b| !super::re::is_space(b)).count();
    let window = line.get(body_start..body_start + token.min(255 + 3))?;
    let at = window
        .iter()
        .rposition(|&b| b == b'@')
        .map(|p| (p, 1))
        .or_else(|| window.windows(3).rposition(|w| w.eq_ignore_ascii_case(b"%40")).map(|p| (p, 3)))?;
    let after = (token - (at.0 + at.1)).min(255);
    Some(body_start - i + at.0 + at.1 + after)
}

/// `(?:>|\s{1,10}(?!fax|facsi|tel|phone|e?-?mail)[a-z]{2,11}:)` after an address.
fn follows_quote(line: &[u8], end: usize) -> bool {
    if line.get(end) == Some(&b'>') {
        return true;
    }
    let spaces = line.get(end..).map_or(0, |r| r.iter().take(10).take_while(|&&b| super::re::is_space(b)).count());
    if spaces == 0 {
        return false;
    }
    // \s{1,10} may give back spaces, but a word cannot start on one: only the full run counts.
    let w = end + spaces;
    let word = line.get(w..).map_or(0, |r| r.iter().take_while(|b| b.is_ascii_alphabetic()).count());
    if !(2..=11).contains(&word) || line.get(w + word) != Some(&b':') {
        return false;
    }
    let lower = |k: usize| line.get(w + k).map(u8::to_ascii_lowercase);
    let starts = |p: &[u8]| p.iter().enumerate().all(|(k, &c)| lower(k) == Some(c));
    let forbidden = [&b"fax"[..], b"facsi", b"tel", b"phone", b"email", b"e-mail", b"mail", b"-mail"];
    !forbidden.iter().any(|p| starts(p))
}

fn preceded_by_mailto(line: &[u8], i: usize) -> bool {
    i >= 7 && line.get(i - 7..i).is_some_and(|p| p.eq_ignore_ascii_case(b"mailto:"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    fn settings() -> EvalSettings {
        EvalSettings {
            freemail_domains: ["yahoo.com", "hotmail.com", "gmail.com"].iter().map(|s| String::from(*s)).collect(),
            freemail_domain_globs: ["*.mail.ru"].iter().map(|s| String::from(*s)).collect(),
            freemail_welcomelist: ["friend@gmail.com"].iter().map(|s| String::from(*s)).collect(),
            util_rb_tld: ["com", "ru", "org"].iter().map(|s| String::from(*s)).collect(),
            ..EvalSettings::default()
        }
    }

    #[test]
    fn freemail_addresses_table() {
        let data = FreemailData::new(&settings(), &Patterns::new());
        let mut s = Search::default();
        let cases: &[(&str, bool)] = &[
            ("joe@yahoo.com", true),
            ("joe@mail.yahoo.com", false),
            ("friend@gmail.com", false),
            ("info@hotmail.com", false),
            ("a=b=c@gmail.com", false),
            ("x@inbox.mail.ru", true),
            ("x@a.b.mail.ru", false),
            ("", false),
        ];
        for (addr, want) in cases {
            assert_eq!(data.is_freemail(addr.as_bytes(), &mut s), *want, "{addr}");
        }
        assert!(data.bulk_envelope_sender(b"owner-list@x.org", &mut s));
        assert!(data.bulk_envelope_sender(b"donotreply@x.org", &mut s));
        // [._-t] is a range from _ to t: no hyphen, as in SpamAssassin.
        assert!(!data.bulk_envelope_sender(b"do-not-reply@x.org", &mut s));
        assert!(!data.bulk_envelope_sender(b"joe@x.org", &mut s));
    }

    #[test]
    fn body_emails_table() {
        let st = settings();
        let data = FreemailData::new(&st, &Patterns::new());
        let reg = Registry::new(&st);
        let mut s = Search::default();
        let (mut all, mut out) = (AddrSet::default(), AddrSet::default());
        let cases: &[(&str, Option<&[&str]>)] = &[
            ("write to Joe@Yahoo.com today", Some(&["joe@yahoo.com"])),
            ("see http://x.org/a@yahoo.com and <me@gmail.com> or you@hotmail.com Subject: hi", Some(&[])),
            ("a@yahoo.com b@gmail.com c@hotmail.com", None),
            ("1@x.org 2@x.org 3@x.org 4@x.org 5@x.org", None),
            ("bad@yahoo.comx, ok@gmail.com.", Some(&["ok@gmail.com"])),
            // Skipping to the white space before the next @ or %40 loses nothing.
            ("no address here at all", Some(&[])),
            ("a @ b, then http://q.org/x%40y\tjoe@gmail.com", Some(&["joe@gmail.com"])),
            ("see http://x.org/a%40b.org joe@yahoo.com", Some(&["joe@yahoo.com"])),
            ("<http://x.org/%40>me@gmail.com", Some(&[])),
            ("first line\nsecond\tone you@hotmail.com", Some(&["you@hotmail.com"])),
            ("%40%40 @@ x.y@yahoo.com@", Some(&["x.y@yahoo.com"])),
            ("trailing marks only @", Some(&[])),
        ];
        for (body, want) in cases {
            let ok = body_freemails(&data, &reg, body.as_bytes(), b"", &mut all, &mut out, &mut s);
            let got: Vec<String> = out.iter().map(|e| String::from_utf8_lossy(e).into_owned()).collect();
            match want {
                None => assert!(!ok, "{body}"),
                Some(w) => {
                    assert!(ok, "{body}");
                    assert_eq!(got, w.iter().map(|x| String::from(*x)).collect::<Vec<_>>(), "{body}");
                }
            }
        }
    }
}
