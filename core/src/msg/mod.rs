//! A view over one message held in a caller's buffer, rendered the way
//! SpamAssassin renders a message for its rules.
//!
//! [`Message::parse`] never fails: malformed input still yields headers, text and
//! URIs (best effort), and anything beyond a fixed capacity is dropped and flagged
//! in [`Overflow`]. All derived text lives in a caller-owned [`MessageBuffers`],
//! reused from message to message, so parsing allocates nothing once warm.
//!
//! INTERFACE CONTRACT (implemented in the submodules):
//! - line endings LF, CRLF and bare CR are all accepted;
//! - header values are unfolded for `decoded` (RFC 2047 words decoded to UTF-8),
//!   kept byte-exact for `raw`; neither includes the trailing line ending;
//! - `body()`: rendered text of the text parts (decoded, HTML turned to text,
//!   paragraphs joined into single lines), the Subject as the first line, lines
//!   separated by `\n`, no trailing `\n`;
//! - `rawbody()`: decoded (base64/QP, charset) but not rendered, lines separated by `\n`;
//! - `uris()`: every URI found in text and HTML attributes, one per line.

/// Capacities that bound the work and memory spent on one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Top-level headers kept; later ones are dropped and flagged.
    pub max_headers: usize,
    /// MIME parts kept (leaves and containers together).
    pub max_parts: usize,
    /// MIME nesting depth followed.
    pub max_depth: usize,
    /// Decoded bytes of one text part that go into `body` (SpamAssassin's `body_part_scan_size`).
    pub body_part_scan_size: usize,
    /// Decoded bytes of one part that go into `rawbody` (SpamAssassin's `rawbody_part_scan_size`).
    pub rawbody_part_scan_size: usize,
    /// URIs kept.
    pub max_uris: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_headers: 1000,
            max_parts: 1000,
            max_depth: 30,
            body_part_scan_size: 50_000,
            rawbody_part_scan_size: 500_000,
            max_uris: 1000,
        }
    }
}

/// Which capacities a message exceeded; the message was still parsed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overflow {
    /// More headers than `max_headers`.
    pub headers: bool,
    /// More MIME parts than `max_parts`.
    pub parts: bool,
    /// Nesting deeper than `max_depth`.
    pub depth: bool,
    /// More URIs than `max_uris`.
    pub uris: bool,
    /// A part was cut at its scan size.
    pub truncated: bool,
}

/// Caller-owned buffers a [`Message`] is parsed into; reuse one per worker.
pub struct MessageBuffers {
    limits: Limits,
}

impl MessageBuffers {
    /// Buffers for messages parsed under `limits`; fixed-capacity indexes are reserved now.
    pub fn new(limits: Limits) -> Self {
        MessageBuffers { limits }
    }

    /// The limits these buffers were made with.
    pub fn limits(&self) -> Limits {
        self.limits
    }
}

/// One header field of a message or MIME part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// Field name as written (case kept).
    pub name: &'a [u8],
    /// Value exactly as in the message after the colon, folding kept, no trailing line end.
    pub raw: &'a [u8],
    /// Value unfolded, RFC 2047 words decoded to UTF-8, leading white space trimmed.
    pub decoded: &'a [u8],
}

/// A parsed message: borrows the raw bytes and the buffers it was parsed into.
pub struct Message<'a> {
    raw: &'a [u8],
    bufs: &'a MessageBuffers,
}

impl<'a> Message<'a> {
    /// Parses `raw` into `bufs`. Never fails; see [`Message::overflow`].
    pub fn parse(raw: &'a [u8], bufs: &'a mut MessageBuffers) -> Message<'a> {
        let _ = &bufs.limits;
        todo!("msg::parse")
    }

    /// The whole message as received (`full` rules).
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The top-level headers in message order.
    pub fn headers(&self) -> impl Iterator<Item = Header<'a>> + 'a {
        let _ = self.bufs;
        core::iter::empty()
    }

    /// The raw top-level header block, without the blank line that ends it.
    pub fn header_block(&self) -> &'a [u8] {
        todo!()
    }

    /// Rendered body text: Subject first, one paragraph per line, `\n` between lines.
    pub fn body(&self) -> &'a [u8] {
        todo!()
    }

    /// Decoded but unrendered body of the text parts, `\n` between lines.
    pub fn rawbody(&self) -> &'a [u8] {
        todo!()
    }

    /// URIs found in the message, one per line.
    pub fn uris(&self) -> &'a [u8] {
        todo!()
    }

    /// Capacities this message exceeded.
    pub fn overflow(&self) -> Overflow {
        todo!()
    }
}

// LEAD STUBS (replaced by the msg implementation on merge)
impl<'a> Message<'a> {
    /// MIME parts.
    pub fn parts(&self) -> impl Iterator<Item = Part<'a>> + 'a {
        core::iter::empty()
    }
}
/// A MIME part.
pub struct Part<'a> {
    _p: &'a [u8],
}
impl<'a> Part<'a> {
    /// Its headers.
    pub fn headers(&self) -> impl Iterator<Item = Header<'a>> + 'a {
        core::iter::empty()
    }
}
/// First address.
pub fn first_address(value: &[u8]) -> &[u8] {
    value
}
/// First display name.
pub fn first_display_name(value: &[u8]) -> &[u8] {
    value
}
