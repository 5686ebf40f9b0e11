//! spamc requests: the head parsed line by line exactly as spamd 4.0.1 parses it,
//! body framing, limits, and zlib bodies.
//!
//! spamd's quirks are kept on purpose, so a client sees the same answers:
//! - the command is found anywhere in the request line (`XCHECK SPAMC/1.5` is a
//!   CHECK), and the version is whatever follows `SPAMC/`, read as Perl reads a
//!   number (`abc` is 0);
//! - headers are read only for versions above 1.0 (TELL always, PING and SKIP
//!   from 1.5), at most 255 of them before the blank line;
//! - header names are case-sensitive (`content-length` is ignored), header
//!   lines may end in `\n` but the blank line that ends the head must be `\r\n`;
//! - `Message-class` accepts any value (spamd's test is always true).
//!
//! Where sift differs, it is to bound memory: the head and the body have limits
//! ([`RequestLimits`]), a body is read to exactly `Content-length` bytes (spamd
//! reads whole lines and would report a mismatch when a longer body continues
//! the last line), and a zlib body is `Content-length` compressed bytes (spamd
//! reads to end of input).

use alloc::boxed::Box;
use core::fmt;

use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
use miniz_oxide::inflate::TINFLStatus;

use super::sink::Sink;
use super::{Command, ExitCode};

/// Longest `User` value kept; longer names are cut.
pub const USER_MAX: usize = 128;
/// Longest request bytes echoed back in an error; longer ones are cut.
pub const ECHO_MAX: usize = 200;
/// spamd reads at most this many header lines, the blank line included.
const MAX_HEADER_LINES: u16 = 256;

/// Size limits on a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// Bytes of the request line and headers, blank line included.
    pub max_head: usize,
    /// Bytes of the message (after inflating a zlib body).
    pub max_body: usize,
}

impl Default for RequestLimits {
    /// 8 KiB of head; 512,000 bytes of message, spamc's default `--max-size`.
    fn default() -> Self {
        RequestLimits { max_head: 8 * 1024, max_body: 512_000 }
    }
}

/// The protocol version after `SPAMC/`, as the number Perl reads from it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProtocolVersion(pub f64);

impl ProtocolVersion {
    /// Reads `text` as Perl turns a string into a number: leading space, sign,
    /// digits, fraction, exponent, `inf`/`nan`; anything else ends it; nothing is 0.
    pub fn parse(text: &[u8]) -> ProtocolVersion {
        ProtocolVersion(perl_number(text))
    }

    /// At least `v` (`$version >= v`).
    pub fn at_least(self, v: f64) -> bool {
        self.0 >= v
    }

    /// Above `v` (`$version > v`).
    pub fn above(self, v: f64) -> bool {
        self.0 > v
    }
}

fn is_perl_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn perl_number(text: &[u8]) -> f64 {
    let start = text.iter().position(|&b| !is_perl_space(b)).unwrap_or(text.len());
    let t = text.get(start..).unwrap_or_default();
    let mut i = 0;
    let negative = t.first() == Some(&b'-');
    if matches!(t.first(), Some(b'-' | b'+')) {
        i = 1;
    }
    let word = t.get(i..).unwrap_or_default();
    let starts = |w: &[u8]| word.len() >= w.len() && word.get(..w.len()).is_some_and(|p| p.eq_ignore_ascii_case(w));
    if starts(b"inf") {
        return if negative { f64::NEG_INFINITY } else { f64::INFINITY };
    }
    if starts(b"nan") {
        return f64::NAN;
    }
    let digits = |from: usize| t.get(from..).unwrap_or_default().iter().take_while(|b| b.is_ascii_digit()).count();
    let whole = digits(i);
    let mut end = i + whole;
    let mut frac = 0;
    if t.get(end) == Some(&b'.') {
        frac = digits(end + 1);
        if whole + frac > 0 {
            end += 1 + frac;
        }
    }
    if whole + frac == 0 {
        return 0.0;
    }
    if matches!(t.get(end), Some(b'e' | b'E')) {
        let mut j = end + 1;
        if matches!(t.get(j), Some(b'-' | b'+')) {
            j += 1;
        }
        let exp = digits(j);
        if exp > 0 {
            end = j + exp;
        }
    }
    let number = t.get(..end).and_then(|n| core::str::from_utf8(n).ok()).unwrap_or("0");
    number.parse::<f64>().unwrap_or(0.0)
}

/// The `Message-class` of a TELL request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MessageClass {
    /// Exactly `spam`.
    Spam,
    /// Exactly `ham`.
    Ham,
    /// Anything else (spamd accepts it and learns it as ham).
    Other,
}

/// A parsed request head.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestHead {
    /// The command.
    pub command: Command,
    /// The version after `SPAMC/`.
    pub version: ProtocolVersion,
    /// `Content-length`, when given (and headers were read).
    pub content_length: Option<u64>,
    /// `Compress: zlib`.
    pub compress_zlib: bool,
    /// `User`, cut at [`USER_MAX`] bytes.
    pub user: Option<heapless::Vec<u8, USER_MAX>>,
    /// `Message-class`.
    pub message_class: Option<MessageClass>,
    /// `Set: local`.
    pub set_local: bool,
    /// `Set: remote`.
    pub set_remote: bool,
    /// `Remove: local`.
    pub remove_local: bool,
    /// `Remove: remote`.
    pub remove_remote: bool,
    /// Bytes of the head, blank line included: the body starts here.
    pub head_len: usize,
}

/// How the body of a request is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body is read (PING, SKIP, TELL).
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Everything up to end of input (no `Content-length`, or version 1.0).
    UntilEof,
    /// This many bytes of a zlib stream, to be inflated.
    Zlib(u64),
}

impl RequestHead {
    fn new(command: Command, version: ProtocolVersion) -> Self {
        RequestHead {
            command,
            version,
            content_length: None,
            compress_zlib: false,
            user: None,
            message_class: None,
            set_local: false,
            set_remote: false,
            remove_local: false,
            remove_remote: false,
            head_len: 0,
        }
    }

    /// How the body is framed, or spamd's error for `Compress` without `Content-length`.
    pub fn body_framing(&self) -> Result<BodyFraming, RequestError> {
        if !self.command.scans() {
            return Ok(BodyFraming::None);
        }
        match (self.compress_zlib, self.content_length) {
            (true, None) => Err(RequestError::CompressNeedsContentLength),
            (true, Some(n)) => Ok(BodyFraming::Zlib(n)),
            (false, Some(n)) => Ok(BodyFraming::Length(n)),
            (false, None) => Ok(BodyFraming::UntilEof),
        }
    }

    /// Refuses a declared body longer than `limits.max_body` before any of it is read.
    pub fn check_limits(&self, limits: &RequestLimits) -> Result<(), RequestError> {
        match self.body_framing()? {
            BodyFraming::Length(n) | BodyFraming::Zlib(n) if n > limits.max_body as u64 => {
                Err(RequestError::BodyTooLarge { length: Some(n), limit: limits.max_body })
            }
            _ => Ok(()),
        }
    }

    fn reads_headers(&self) -> bool {
        match self.command {
            Command::Tell => true,
            Command::Ping | Command::Skip => self.version.at_least(1.5),
            _ => self.version.above(1.0),
        }
    }
}

/// Request bytes echoed in an error, cut at [`ECHO_MAX`] (boxed: errors stay small).
pub type Echo = Box<[u8]>;

fn echo(bytes: &[u8]) -> Echo {
    Box::from(bytes.get(..ECHO_MAX.min(bytes.len())).unwrap_or_default())
}

/// Why a request was refused, with spamd's code and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// The client sent nothing.
    ClosedBeforeHeaders,
    /// The request line names no known command (echoed back).
    UnknownCommand(Echo),
    /// Input ended before the blank line.
    EofDuringHeaders,
    /// A header line without a colon.
    HeaderNotNameValue,
    /// 256 header lines without a blank one.
    TooManyHeaders,
    /// `Content-length` is not all digits.
    ContentLengthNotNumeric,
    /// `User` contains a control character.
    UserControlChars,
    /// `Compress` names something other than zlib (echoed back).
    CompressionNotSupported(Echo),
    /// Input ended before `Content-length` bytes.
    ContentLengthMismatch {
        /// `Content-length`.
        expected: u64,
        /// Bytes received.
        got: u64,
    },
    /// `Compress` without `Content-length`.
    CompressNeedsContentLength,
    /// The zlib stream is corrupt or incomplete.
    Zlib,
    /// TELL: sift does not learn; spamd's answer when `--allow-tell` is off.
    TellDisabled,
    /// The head is longer than the limit (sift's limit; spamd has none).
    HeadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The message is longer than the limit (sift's limit; spamd has none).
    BodyTooLarge {
        /// Declared length, when known.
        length: Option<u64>,
        /// The limit in bytes.
        limit: usize,
    },
    /// The client was too slow sending the request.
    ReadTimeout {
        /// The timeout in seconds.
        seconds: u32,
    },
    /// The scan took too long.
    ScanTimeout {
        /// The timeout in seconds.
        seconds: u32,
        /// The command being served.
        command: Command,
    },
}

impl RequestError {
    /// The sysexits code spamd answers with.
    pub fn code(&self) -> ExitCode {
        match self {
            RequestError::CompressNeedsContentLength | RequestError::Zlib | RequestError::TellDisabled => {
                ExitCode::Unavailable
            }
            RequestError::BodyTooLarge { .. } => ExitCode::DataErr,
            RequestError::ReadTimeout { .. } | RequestError::ScanTimeout { .. } => ExitCode::Timeout,
            _ => ExitCode::Protocol,
        }
    }

    /// Writes the text after the code; `raw` keeps echoed bytes as sent (for the wire).
    fn write_text(&self, out: &mut dyn Sink, raw: bool) {
        let bad = |out: &mut dyn Sink, what: &str| {
            out.put(b"Bad header line: ");
            out.put(what.as_bytes());
        };
        let put_echo = |out: &mut dyn Sink, e: &Echo| {
            if raw {
                out.put(e);
            } else {
                for chunk in e.utf8_chunks() {
                    out.put(chunk.valid().as_bytes());
                    if !chunk.invalid().is_empty() {
                        out.put("\u{FFFD}".as_bytes());
                    }
                }
            }
        };
        match self {
            RequestError::ClosedBeforeHeaders => bad(out, "(closed before headers)"),
            RequestError::UnknownCommand(line) => {
                out.put(b"Bad header line: ");
                put_echo(out, line);
            }
            RequestError::EofDuringHeaders => bad(out, "(EOF during headers)"),
            RequestError::HeaderNotNameValue => bad(out, "(header not in 'Name: value' format)"),
            RequestError::TooManyHeaders => bad(out, "(too many headers)"),
            RequestError::ContentLengthNotNumeric => bad(out, "(Content-Length contains non-numeric bytes)"),
            RequestError::UserControlChars => bad(out, "(User header contains control chars)"),
            RequestError::CompressionNotSupported(value) => {
                out.put(b"Bad header line: (compression type not supported: ");
                put_echo(out, value);
                out.put(b")");
            }
            RequestError::ContentLengthMismatch { expected, got } => super::sink::put_fmt(
                out,
                format_args!("Bad header line: (Content-Length mismatch: Expected {expected} bytes, got {got} bytes)"),
            ),
            RequestError::CompressNeedsContentLength => {
                out.put(b"Service Unavailable: Compress requires Content-length header")
            }
            // spamd's text ends in the newline of Perl's `die` message.
            RequestError::Zlib => out.put(if raw {
                b"Service Unavailable: zlib: failed to find end of zlib stream\n"
            } else {
                b"Service Unavailable: zlib: failed to find end of zlib stream"
            }),
            RequestError::TellDisabled => {
                out.put(b"Service Unavailable: TELL commands are not enabled, set the --allow-tell switch.")
            }
            RequestError::HeadTooLarge { limit } => {
                super::sink::put_fmt(out, format_args!("Bad header line: (request head longer than {limit} bytes)"))
            }
            RequestError::BodyTooLarge { length: Some(n), limit } => super::sink::put_fmt(
                out,
                format_args!("Message too big: Content-length {n} exceeds the limit of {limit} bytes"),
            ),
            RequestError::BodyTooLarge { length: None, limit } => {
                super::sink::put_fmt(out, format_args!("Message too big: more than {limit} bytes"))
            }
            RequestError::ReadTimeout { seconds } => super::sink::put_fmt(
                out,
                format_args!("Timeout: ({seconds} second socket timeout reading input from client)"),
            ),
            RequestError::ScanTimeout { seconds, command } => super::sink::put_fmt(
                out,
                format_args!("Timeout: ({seconds} second timeout while trying to {command})"),
            ),
        }
    }

    pub(crate) fn write_line(&self, out: &mut dyn Sink) {
        super::sink::put_fmt(out, format_args!("SPAMD/1.0 {} ", self.code().code()));
        self.write_text(out, true);
        out.put(b"\r\n");
    }

    /// Writes spamd's one-line answer for this error: `SPAMD/1.0 76 Bad header line: …\r\n`.
    pub fn write_response<W: embedded_io::Write>(&self, out: &mut W) -> Result<(), W::Error> {
        let mut sink = super::sink::IoSink::new(out);
        self.write_line(&mut sink);
        sink.finish()
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Text(heapless::Vec<u8, 512>);
        impl Sink for Text {
            fn put(&mut self, bytes: &[u8]) {
                for &b in bytes {
                    let _ = self.0.push(b);
                }
            }
        }
        let mut text = Text(heapless::Vec::new());
        self.write_text(&mut text, false);
        for chunk in text.0.utf8_chunks() {
            f.write_str(chunk.valid())?;
        }
        Ok(())
    }
}

/// What [`HeadParser::parse`] has found so far.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// The head is not complete: read more.
    NeedMore,
    /// The head is complete; the body starts at `head_len`.
    Done(RequestHead),
}

/// Parses a request head from a buffer that grows as bytes arrive.
///
/// Call [`parse`](HeadParser::parse) with everything received so far each time
/// more arrives; lines already parsed are not read again.
#[derive(Debug, Clone)]
pub struct HeadParser {
    max_head: usize,
    pos: usize,
    head: Option<RequestHead>,
    lines: u16,
}

impl HeadParser {
    /// A parser that refuses heads longer than `max_head` bytes.
    pub fn new(max_head: usize) -> Self {
        HeadParser { max_head, pos: 0, head: None, lines: 0 }
    }

    /// Parses more of `buf` (all bytes received so far); `eof` when no more will come.
    pub fn parse(&mut self, buf: &[u8], eof: bool) -> Result<Progress, RequestError> {
        loop {
            let rest = buf.get(self.pos..).unwrap_or_default();
            let line = match memchr::memchr(b'\n', rest) {
                Some(i) => rest.get(..=i).unwrap_or(rest),
                None if eof && !rest.is_empty() => rest,
                None if eof => {
                    return Err(if self.head.is_none() {
                        RequestError::ClosedBeforeHeaders
                    } else {
                        RequestError::EofDuringHeaders
                    });
                }
                None => {
                    if buf.len() > self.max_head {
                        return Err(RequestError::HeadTooLarge { limit: self.max_head });
                    }
                    return Ok(Progress::NeedMore);
                }
            };
            let end = self.pos.saturating_add(line.len());
            if end > self.max_head {
                return Err(RequestError::HeadTooLarge { limit: self.max_head });
            }
            self.pos = end;
            let done = match &mut self.head {
                None => {
                    let head = request_line(line)?;
                    let reads_headers = head.reads_headers();
                    self.head = Some(head);
                    !reads_headers
                }
                Some(head) => {
                    let done = header_line(head, line)?;
                    if !done {
                        self.lines += 1;
                        if self.lines >= MAX_HEADER_LINES {
                            return Err(RequestError::TooManyHeaders);
                        }
                    }
                    done
                }
            };
            if done {
                if let Some(mut head) = self.head.take() {
                    head.head_len = self.pos;
                    return Ok(Progress::Done(head));
                }
            }
        }
    }
}

/// Parses a complete request head from `bytes` (all there is: a missing blank
/// line is an error). Returns the head; the body starts at `head.head_len`.
/// Never panics, whatever the bytes: the fuzzing entry point.
pub fn parse_request_head(bytes: &[u8]) -> Result<RequestHead, RequestError> {
    match HeadParser::new(usize::MAX).parse(bytes, true)? {
        Progress::Done(head) => Ok(head),
        Progress::NeedMore => Err(RequestError::EofDuringHeaders),
    }
}

/// The three command groups spamd tries, in its order.
const COMMAND_GROUPS: [&[(&[u8], Command)]; 3] = [
    &[
        (b"PROCESS", Command::Process),
        (b"CHECK", Command::Check),
        (b"SYMBOLS", Command::Symbols),
        (b"REPORT", Command::Report),
        (b"HEADERS", Command::Headers),
        (b"REPORT_IFSPAM", Command::ReportIfSpam),
    ],
    &[(b"TELL", Command::Tell)],
    &[(b"SKIP", Command::Skip), (b"PING", Command::Ping)],
];

fn request_line(line: &[u8]) -> Result<RequestHead, RequestError> {
    let line = line
        .strip_suffix(b"\r\n")
        .or_else(|| line.strip_suffix(b"\n"))
        .unwrap_or(line);
    for group in COMMAND_GROUPS {
        for start in 0..line.len() {
            let at = line.get(start..).unwrap_or_default();
            for &(word, command) in group {
                if let Some(rest) = at.strip_prefix(word).and_then(|r| r.strip_prefix(b" SPAMC/")) {
                    return Ok(RequestHead::new(command, ProtocolVersion::parse(rest)));
                }
            }
        }
    }
    Err(RequestError::UnknownCommand(echo(line)))
}

/// A value matching Perl's `/^(CLASS*)$/`: all bytes in the class, but a final `\n` is allowed.
fn all_before_final_newline(value: &[u8], ok: impl Fn(u8) -> bool) -> Option<&[u8]> {
    let body = value.strip_suffix(b"\n").unwrap_or(value);
    body.iter().all(|&b| ok(b)).then_some(body)
}

fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

/// Applies one header line; returns true at the blank line that ends the head.
fn header_line(head: &mut RequestHead, line: &[u8]) -> Result<bool, RequestError> {
    let line = line.strip_suffix(b"\r\n").unwrap_or(line);
    if line.is_empty() {
        return Ok(true);
    }
    let colon = memchr::memchr(b':', line).ok_or(RequestError::HeaderNotNameValue)?;
    let name = line.get(..colon).unwrap_or_default();
    let after = line.get(colon + 1..).unwrap_or_default();
    let skip = after.iter().take_while(|&&b| is_perl_space(b)).count();
    let value = after.get(skip..).unwrap_or_default();
    match name {
        b"Content-length" => {
            let digits = all_before_final_newline(value, |b| b.is_ascii_digit())
                .ok_or(RequestError::ContentLengthNotNumeric)?;
            let n = digits
                .iter()
                .try_fold(0u64, |n, &d| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))
                .unwrap_or(u64::MAX);
            head.content_length = Some(n);
        }
        b"User" => {
            let user = all_before_final_newline(value, |b| b >= 0x20).ok_or(RequestError::UserControlChars)?;
            let mut kept = heapless::Vec::new();
            let _ = kept.extend_from_slice(user.get(..USER_MAX.min(user.len())).unwrap_or_default());
            head.user = Some(kept);
        }
        b"Message-class" => {
            head.message_class = Some(match value {
                b"spam" => MessageClass::Spam,
                b"ham" => MessageClass::Ham,
                _ => MessageClass::Other,
            });
        }
        b"Set" => {
            head.set_local = contains_ignore_case(value, b"local");
            head.set_remote = contains_ignore_case(value, b"remote");
        }
        b"Remove" => {
            head.remove_local = contains_ignore_case(value, b"local");
            head.remove_remote = contains_ignore_case(value, b"remote");
        }
        b"Compress" => {
            if !contains_ignore_case(value, b"zlib") {
                return Err(RequestError::CompressionNotSupported(echo(value)));
            }
            head.compress_zlib = true;
        }
        _ => {}
    }
    Ok(false)
}

/// Why inflating a zlib body failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InflateError {
    /// Not a complete, valid zlib stream.
    Corrupt,
    /// The inflated data does not fit the output.
    TooLarge,
}

impl fmt::Display for InflateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InflateError::Corrupt => "corrupt or incomplete zlib stream",
            InflateError::TooLarge => "inflated data exceeds the limit",
        })
    }
}

/// A zlib inflater whose state (about 11 KiB) is allocated once and reused.
pub struct Inflater {
    state: Box<DecompressorOxide>,
}

impl Default for Inflater {
    fn default() -> Self {
        Self::new()
    }
}

impl Inflater {
    /// A fresh inflater.
    pub fn new() -> Self {
        Inflater { state: Box::default() }
    }

    /// Inflates the zlib stream `input` into `output`; returns the inflated length.
    /// Bytes after the end of the stream are ignored, as zlib does.
    pub fn inflate(&mut self, input: &[u8], output: &mut [u8]) -> Result<usize, InflateError> {
        self.state.init();
        let flags = inflate_flags::TINFL_FLAG_PARSE_ZLIB_HEADER | inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
        let (status, _, written) = decompress(&mut self.state, input, output, 0, flags);
        match status {
            TINFLStatus::Done => Ok(written),
            TINFLStatus::HasMoreOutput => Err(InflateError::TooLarge),
            _ => Err(InflateError::Corrupt),
        }
    }
}

/// A whole request read by [`read_request`].
#[derive(Debug)]
pub struct Request<'b> {
    /// The head.
    pub head: RequestHead,
    /// The message (inflated if it came compressed); empty for PING, SKIP and TELL.
    pub body: &'b [u8],
}

/// Why [`read_request`] failed.
#[derive(Debug)]
pub enum ReadError<E> {
    /// Reading failed.
    Io(E),
    /// The request is refused; answer with [`RequestError::write_response`].
    Request(RequestError),
}

impl<E> From<RequestError> for ReadError<E> {
    fn from(e: RequestError) -> Self {
        ReadError::Request(e)
    }
}

impl<E: fmt::Debug> fmt::Display for ReadError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "read error: {e:?}"),
            ReadError::Request(e) => write!(f, "{e}"),
        }
    }
}

/// Reads one request from `reader` into `buf`: the head, then the body as the
/// head frames it (inflated with `inflater` for `Compress: zlib`).
///
/// The body is refused as soon as it is known to exceed `limits.max_body` or
/// the room in `buf`, without reading it. TELL, PING and SKIP return after the head.
pub fn read_request<'b, R: embedded_io::Read>(
    reader: &mut R,
    buf: &'b mut [u8],
    limits: &RequestLimits,
    inflater: &mut Inflater,
) -> Result<Request<'b>, ReadError<R::Error>> {
    let mut parser = HeadParser::new(limits.max_head);
    let mut filled = 0usize;
    let mut eof = false;
    let head = loop {
        let progress = parser.parse(buf.get(..filled).unwrap_or_default(), eof)?;
        match progress {
            Progress::Done(head) => break head,
            Progress::NeedMore => {
                let Some(space) = buf.get_mut(filled..).filter(|s| !s.is_empty()) else {
                    return Err(RequestError::HeadTooLarge { limit: limits.max_head.min(buf.len()) }.into());
                };
                let n = reader.read(space).map_err(ReadError::Io)?;
                if n == 0 {
                    eof = true;
                }
                filled += n;
            }
        }
    };
    head.check_limits(limits)?;
    let start = head.head_len;
    let room = buf.len().saturating_sub(start);
    let limit = limits.max_body.min(room);
    let body_len = match head.body_framing()? {
        BodyFraming::None => 0,
        BodyFraming::Length(n) => {
            let want = usize::try_from(n).ok().filter(|&n| n <= limit);
            let Some(want) = want else {
                return Err(RequestError::BodyTooLarge { length: Some(n), limit }.into());
            };
            let got = fill(reader, buf, &mut filled, start + want, eof)?;
            if got < start + want {
                let got = (got - start) as u64;
                return Err(RequestError::ContentLengthMismatch { expected: n, got }.into());
            }
            want
        }
        BodyFraming::UntilEof => {
            let end = fill(reader, buf, &mut filled, start + limit, eof)?;
            if filled > start + limit || (end >= start + limit && !at_eof(reader, eof)?) {
                return Err(RequestError::BodyTooLarge { length: None, limit }.into());
            }
            end - start
        }
        BodyFraming::Zlib(n) => {
            let want = usize::try_from(n).ok().filter(|&n| n <= room);
            let Some(want) = want else {
                return Err(RequestError::BodyTooLarge { length: Some(n), limit }.into());
            };
            let got = fill(reader, buf, &mut filled, start + want, eof)? - start;
            // Move the compressed bytes to the end of the buffer and inflate to the front.
            let tail = buf.len() - got;
            buf.copy_within(start..start + got, tail);
            let (front, back) = buf.split_at_mut(tail);
            let out_end = start + limits.max_body.min(tail.saturating_sub(start));
            let output = front.get_mut(start..out_end).unwrap_or_default();
            match inflater.inflate(back, output) {
                Ok(n) => n,
                Err(InflateError::Corrupt) => return Err(RequestError::Zlib.into()),
                Err(InflateError::TooLarge) => {
                    return Err(RequestError::BodyTooLarge { length: None, limit: out_end - start }.into())
                }
            }
        }
    };
    let body = buf.get(start..start + body_len).unwrap_or_default();
    Ok(Request { head, body })
}

/// Reads until `buf[..want]` is filled or input ends; returns how far it is filled
/// (at most `want`: bytes beyond a body are ignored).
fn fill<R: embedded_io::Read>(
    reader: &mut R,
    buf: &mut [u8],
    filled: &mut usize,
    want: usize,
    eof: bool,
) -> Result<usize, ReadError<R::Error>> {
    let want = want.min(buf.len());
    if !eof {
        while *filled < want {
            let Some(space) = buf.get_mut(*filled..want) else { break };
            let n = reader.read(space).map_err(ReadError::Io)?;
            if n == 0 {
                break;
            }
            *filled += n;
        }
    }
    Ok((*filled).min(want))
}

/// Whether input has ended (reads one probe byte).
fn at_eof<R: embedded_io::Read>(reader: &mut R, eof: bool) -> Result<bool, ReadError<R::Error>> {
    if eof {
        return Ok(true);
    }
    let mut probe = [0u8; 1];
    Ok(reader.read(&mut probe).map_err(ReadError::Io)? == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;
    use alloc::vec::Vec;

    fn head(bytes: &[u8]) -> RequestHead {
        parse_request_head(bytes).unwrap_or_else(|e| panic!("{:?}: {e}", bytes.escape_ascii().to_string()))
    }

    /// Every refused head, with the exact response the real spamd 4.0.1 gave
    /// (captured on loopback, see tests/data/proto/README.md).
    #[test]
    fn refused_heads_answer_as_spamd() {
        let cases: &[(&str, &[u8], &[u8])] = &[
            ("empty", b"", b"SPAMD/1.0 76 Bad header line: (closed before headers)\r\n"),
            ("missing version", b"CHECK\r\n\r\n", b"SPAMD/1.0 76 Bad header line: CHECK\r\n"),
            ("unknown command", b"FOO SPAMC/1.5\r\n\r\n", b"SPAMD/1.0 76 Bad header line: FOO SPAMC/1.5\r\n"),
            ("lowercase command", b"check SPAMC/1.5\r\n\r\n", b"SPAMD/1.0 76 Bad header line: check SPAMC/1.5\r\n"),
            ("PING 1.5 without blank line", b"PING SPAMC/1.5\r\n", b"SPAMD/1.0 76 Bad header line: (EOF during headers)\r\n"),
            (
                "non-numeric length",
                b"CHECK SPAMC/1.5\r\nContent-length: 12a\r\n\r\n",
                b"SPAMD/1.0 76 Bad header line: (Content-Length contains non-numeric bytes)\r\n",
            ),
            (
                "negative length",
                b"CHECK SPAMC/1.5\r\nContent-length: -1\r\n\r\n",
                b"SPAMD/1.0 76 Bad header line: (Content-Length contains non-numeric bytes)\r\n",
            ),
            (
                "length with trailing space",
                b"CHECK SPAMC/1.5\r\nContent-length: 15 \r\n\r\n",
                b"SPAMD/1.0 76 Bad header line: (Content-Length contains non-numeric bytes)\r\n",
            ),
            (
                "header without colon",
                b"CHECK SPAMC/1.5\r\nContent-length 5\r\n\r\n",
                b"SPAMD/1.0 76 Bad header line: (header not in 'Name: value' format)\r\n",
            ),
            (
                "LF-only head",
                b"CHECK SPAMC/1.5\nContent-length: 5\n\nabcde",
                b"SPAMD/1.0 76 Bad header line: (header not in 'Name: value' format)\r\n",
            ),
            (
                "EOF in headers",
                b"CHECK SPAMC/1.5\r\nContent-length: 5\r\n",
                b"SPAMD/1.0 76 Bad header line: (EOF during headers)\r\n",
            ),
            (
                "control char in User",
                b"CHECK SPAMC/1.5\r\nUser: bo\x01b\r\nContent-length: 15\r\n\r\n",
                b"SPAMD/1.0 76 Bad header line: (User header contains control chars)\r\n",
            ),
            (
                "gzip",
                b"CHECK SPAMC/1.5\r\nCompress: gzip\r\nContent-length: 15\r\n\r\n",
                b"SPAMD/1.0 76 Bad header line: (compression type not supported: gzip)\r\n",
            ),
            (
                "PING with bad header",
                b"PING SPAMC/1.5\r\nfoo\r\n\r\n",
                b"SPAMD/1.0 76 Bad header line: (header not in 'Name: value' format)\r\n",
            ),
            (
                "TELL with bad header",
                b"TELL SPAMC/1.5\r\nfoo\r\n\r\n",
                b"SPAMD/1.0 76 Bad header line: (header not in 'Name: value' format)\r\n",
            ),
        ];
        for (name, request, want) in cases {
            let err = parse_request_head(request).expect_err(name);
            let mut out = Vec::new();
            err.write_response(&mut super::super::VecWriter(&mut out)).unwrap();
            assert_eq!(out.escape_ascii().to_string(), want.escape_ascii().to_string(), "{name}");
        }
    }

    #[test]
    fn header_count_limit_matches_spamd() {
        // spamd 4.0.1: 254 extra headers + Content-length pass, 255 + Content-length fail.
        let mut ok = b"CHECK SPAMC/1.5\r\n".to_vec();
        ok.extend(b"X: y\r\n".repeat(254));
        ok.extend(b"Content-length: 15\r\n\r\n");
        assert_eq!(head(&ok).content_length, Some(15));
        let mut bad = b"CHECK SPAMC/1.5\r\n".to_vec();
        bad.extend(b"X: y\r\n".repeat(255));
        bad.extend(b"Content-length: 15\r\n\r\n");
        assert_eq!(parse_request_head(&bad), Err(RequestError::TooManyHeaders));
    }

    #[test]
    fn accepted_heads_table() {
        /// (request, command, version, content_length, compress, head_len)
        type Case = (&'static [u8], Command, f64, Option<u64>, bool, usize);
        let cases: &[Case] = &[
            (b"CHECK SPAMC/1.5\r\nContent-length: 15\r\n\r\nbody", Command::Check, 1.5, Some(15), false, 39),
            (b"SYMBOLS SPAMC/1.5\r\nContent-length: 0\r\n\r\n", Command::Symbols, 1.5, Some(0), false, 40),
            (b"REPORT SPAMC/1.5\r\n\r\n", Command::Report, 1.5, None, false, 20),
            (b"REPORT_IFSPAM SPAMC/1.5\r\n\r\n", Command::ReportIfSpam, 1.5, None, false, 27),
            (b"PROCESS SPAMC/1.5\r\nCompress: zlib\r\nContent-length: 9\r\n\r\n", Command::Process, 1.5, Some(9), true, 56),
            (b"HEADERS SPAMC/1.4\r\nContent-length: 1\r\n\r\n", Command::Headers, 1.4, Some(1), false, 40),
            // spamd finds the command anywhere in the line.
            (b"XCHECK SPAMC/1.5\r\n\r\n", Command::Check, 1.5, None, false, 20),
            // Header lines may end in LF; only the blank line must be CRLF.
            (b"CHECK SPAMC/1.5\nContent-length: 5\n\r\nabcde", Command::Check, 1.5, Some(5), false, 36),
            // Lowercase header names are not spamd's: ignored.
            (b"CHECK SPAMC/1.5\r\ncontent-length: 16\r\n\r\n", Command::Check, 1.5, None, false, 39),
            (b"CHECK SPAMC/1.5\r\nContent-length : 16\r\n\r\n", Command::Check, 1.5, None, false, 40),
            (b"CHECK SPAMC/1.5\r\nContent-length:\t16\r\n\r\n", Command::Check, 1.5, Some(16), false, 39),
            (b"CHECK SPAMC/1.5\r\nContent-length:16\r\n\r\n", Command::Check, 1.5, Some(16), false, 38),
            (b"CHECK SPAMC/1.5\r\nContent-length: \r\n\r\n", Command::Check, 1.5, Some(0), false, 37),
            (b"CHECK SPAMC/1.5\r\n: x\r\n\r\n", Command::Check, 1.5, None, false, 24),
            (b"CHECK SPAMC/1.5 foo\r\nContent-length: 3\r\n\r\n", Command::Check, 1.5, Some(3), false, 42),
            // Version 1.0 (or no number at all): no headers; the body runs to EOF.
            (b"CHECK SPAMC/1.0\r\nSubject: x\n\nhi\n", Command::Check, 1.0, None, false, 17),
            (b"CHECK SPAMC/abc\r\nSubject: x\n\nhi\n", Command::Check, 0.0, None, false, 17),
            // A bare CR does not end the request line.
            (b"CHECK SPAMC/1.5\rContent-length: 15\r\n\r\n", Command::Check, 1.5, None, false, 38),
            (b"PING SPAMC/1.5\r\n\r\n", Command::Ping, 1.5, None, false, 18),
            (b"PING SPAMC/1.2\r\n", Command::Ping, 1.2, None, false, 16),
            (b"SKIP SPAMC/1.5\r\n\r\n", Command::Skip, 1.5, None, false, 18),
            (b"TELL SPAMC/1.5\r\nMessage-class: spam\r\nSet: local\r\n\r\n", Command::Tell, 1.5, None, false, 51),
        ];
        for (request, command, version, length, compress, head_len) in cases {
            let h = head(request);
            let label = request.escape_ascii().to_string();
            assert_eq!(h.command, *command, "{label}");
            assert_eq!(h.version.0, *version, "{label}");
            assert_eq!(h.content_length, *length, "{label}");
            assert_eq!(h.compress_zlib, *compress, "{label}");
            assert_eq!(h.head_len, *head_len, "{label}");
        }
    }

    #[test]
    fn user_class_set_remove() {
        let h = head(b"TELL SPAMC/1.5\r\nUser: bob \xe9\r\nMessage-class: Spam\r\nSet: Local, REMOTE\r\nRemove: remote\r\n\r\n");
        assert_eq!(h.user.as_deref(), Some(&b"bob \xe9"[..]));
        assert_eq!(h.message_class, Some(MessageClass::Other));
        assert!(h.set_local && h.set_remote && !h.remove_local && h.remove_remote);
        let h = head(b"TELL SPAMC/1.5\r\nMessage-class: ham\r\nSet: local\r\nSet: remote\r\n\r\n");
        assert_eq!(h.message_class, Some(MessageClass::Ham));
        assert!(!h.set_local && h.set_remote);
        let long = [b'u'; 300];
        let mut req = b"CHECK SPAMC/1.5\r\nUser: ".to_vec();
        req.extend_from_slice(&long);
        req.extend_from_slice(b"\r\n\r\n");
        assert_eq!(head(&req).user.map(|u| u.len()), Some(USER_MAX));
    }

    #[test]
    fn perl_numbers_table() {
        let cases: &[(&[u8], f64)] = &[
            (b"1.5", 1.5),
            (b" 1.5", 1.5),
            (b"1.5 extra", 1.5),
            (b"1.5\rContent-length: 15", 1.5),
            (b"1.", 1.0),
            (b".5", 0.5),
            (b"abc", 0.0),
            (b"", 0.0),
            (b".", 0.0),
            (b"-1", -1.0),
            (b"+2", 2.0),
            (b"1e1", 10.0),
            (b"1e", 1.0),
            (b"1.2.3", 1.2),
            (b"Inf", f64::INFINITY),
        ];
        for (text, want) in cases {
            assert_eq!(perl_number(text), *want, "{:?}", text.escape_ascii().to_string());
        }
        assert!(perl_number(b"nan").is_nan());
    }

    #[test]
    fn incremental_parse_byte_by_byte() {
        let request = b"PROCESS SPAMC/1.5\r\nUser: bob\r\nContent-length: 5\r\n\r\nhello";
        let mut parser = HeadParser::new(1024);
        let mut got = None;
        for n in 0..=request.len() {
            match parser.parse(&request[..n], false) {
                Ok(Progress::NeedMore) => {}
                Ok(Progress::Done(h)) => {
                    got = Some((n, h));
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        let (n, h) = got.expect("head completes");
        assert_eq!(n, 51);
        assert_eq!(h.head_len, 51);
        assert_eq!(h.content_length, Some(5));
        assert_eq!(h.user.as_deref(), Some(&b"bob"[..]));
    }

    #[test]
    fn head_limit() {
        let mut parser = HeadParser::new(20);
        assert_eq!(parser.parse(b"CHECK SPAMC/1.5\r\nContent-", false), Err(RequestError::HeadTooLarge { limit: 20 }));
        let mut parser = HeadParser::new(20);
        assert_eq!(parser.parse(b"CHECK SPAMC/1.5\r\nX", false), Ok(Progress::NeedMore));
        assert_eq!(parse_request_head(b"CHECK SPAMC/1.5\r\n\r\n").map(|h| h.head_len), Ok(19));
    }

    #[test]
    fn body_framing_table() {
        let cases: &[(&[u8], Result<BodyFraming, RequestError>)] = &[
            (b"CHECK SPAMC/1.5\r\nContent-length: 5\r\n\r\n", Ok(BodyFraming::Length(5))),
            (b"CHECK SPAMC/1.5\r\n\r\n", Ok(BodyFraming::UntilEof)),
            (b"CHECK SPAMC/1.0\r\n", Ok(BodyFraming::UntilEof)),
            (b"CHECK SPAMC/1.5\r\nCompress: zlib\r\nContent-length: 5\r\n\r\n", Ok(BodyFraming::Zlib(5))),
            (b"CHECK SPAMC/1.5\r\nCompress: zlib\r\n\r\n", Err(RequestError::CompressNeedsContentLength)),
            (b"PING SPAMC/1.5\r\n\r\n", Ok(BodyFraming::None)),
            (b"TELL SPAMC/1.5\r\nContent-length: 5\r\n\r\n", Ok(BodyFraming::None)),
        ];
        for (request, want) in cases {
            assert_eq!(head(request).body_framing(), *want, "{}", request.escape_ascii());
        }
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        // A stored (uncompressed) zlib stream: header, one final stored block, Adler-32.
        let mut out = vec![0x78, 0x01, 0x01];
        let len = data.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(data);
        let (mut a, mut b) = (1u32, 0u32);
        for &d in data {
            a = (a + u32::from(d)) % 65521;
            b = (b + a) % 65521;
        }
        out.extend_from_slice(&((b << 16) | a).to_be_bytes());
        out
    }

    fn read_all(request: &[u8], buf_len: usize, limits: RequestLimits) -> Result<(RequestHead, Vec<u8>), RequestError> {
        let mut buf = vec![0u8; buf_len];
        let mut reader = request;
        let mut inflater = Inflater::new();
        match read_request(&mut reader, &mut buf, &limits, &mut inflater) {
            Ok(r) => Ok((r.head, r.body.to_vec())),
            Err(ReadError::Request(e)) => Err(e),
            Err(ReadError::Io(e)) => match e {},
        }
    }

    #[test]
    fn read_request_table() {
        let msg = b"Subject: x\n\nhi\n";
        let mut zlib_req = b"CHECK SPAMC/1.5\r\nCompress: zlib\r\nContent-length: 26\r\n\r\n".to_vec();
        zlib_req.extend(zlib(msg));
        let mut zlib_bad = b"CHECK SPAMC/1.5\r\nCompress: zlib\r\nContent-length: 15\r\n\r\n".to_vec();
        zlib_bad.extend(msg);
        let mut zlib_short = b"CHECK SPAMC/1.5\r\nCompress: zlib\r\nContent-length: 40\r\n\r\n".to_vec();
        zlib_short.extend(&zlib(msg)[..20]);
        let limits = RequestLimits { max_head: 256, max_body: 64 };
        type Case<'a> = (&'a str, &'a [u8], usize, Result<&'a [u8], RequestError>);
        let cases: &[Case<'_>] = &[
            ("exact", b"CHECK SPAMC/1.5\r\nContent-length: 15\r\n\r\nSubject: x\n\nhi\n", 256, Ok(msg)),
            ("surplus ignored", b"CHECK SPAMC/1.5\r\nContent-length: 12\r\n\r\nSubject: x\n\nhi\n", 256, Ok(b"Subject: x\n\n")),
            (
                "short body",
                b"CHECK SPAMC/1.5\r\nContent-length: 50\r\n\r\nSubject: x\n\nhi\n",
                256,
                Err(RequestError::ContentLengthMismatch { expected: 50, got: 15 }),
            ),
            ("until EOF", b"CHECK SPAMC/1.0\r\nSubject: x\n\nhi\n", 256, Ok(msg)),
            ("empty", b"PROCESS SPAMC/1.5\r\nContent-length: 0\r\n\r\n", 256, Ok(b"")),
            ("ping", b"PING SPAMC/1.5\r\n\r\n", 256, Ok(b"")),
            ("tell returns after head", b"TELL SPAMC/1.5\r\nContent-length: 15\r\n\r\nSubject: x\n\nhi\n", 256, Ok(b"")),
            (
                "declared too big",
                b"CHECK SPAMC/1.5\r\nContent-length: 65\r\n\r\n",
                256,
                Err(RequestError::BodyTooLarge { length: Some(65), limit: 64 }),
            ),
            (
                "huge length",
                b"CHECK SPAMC/1.5\r\nContent-length: 99999999999999999999999\r\n\r\n",
                256,
                Err(RequestError::BodyTooLarge { length: Some(u64::MAX), limit: 64 }),
            ),
            (
                "no room in buffer",
                b"CHECK SPAMC/1.5\r\nContent-length: 15\r\n\r\nSubject: x\n\nhi\n",
                45,
                Err(RequestError::BodyTooLarge { length: Some(15), limit: 6 }),
            ),
            (
                "compress without length",
                b"CHECK SPAMC/1.5\r\nCompress: zlib\r\n\r\nxx",
                256,
                Err(RequestError::CompressNeedsContentLength),
            ),
            ("zlib", &zlib_req, 256, Ok(msg)),
            ("zlib garbage", &zlib_bad, 256, Err(RequestError::Zlib)),
            ("zlib truncated", &zlib_short, 256, Err(RequestError::Zlib)),
            ("closed", b"", 256, Err(RequestError::ClosedBeforeHeaders)),
        ];
        for (name, request, buf_len, want) in cases {
            let got = read_all(request, *buf_len, limits).map(|(_, body)| body);
            assert_eq!(got.as_deref(), want.as_ref().map(|b| *b), "{name}");
        }
    }

    #[test]
    fn until_eof_over_limit_is_refused_without_reading_all() {
        let mut request = b"CHECK SPAMC/1.0\r\n".to_vec();
        request.extend([b'x'; 1000]);
        let limits = RequestLimits { max_head: 64, max_body: 100 };
        for buf_len in [100 + 17, 200, 4096] {
            let mut buf = vec![0u8; buf_len];
            let mut reader = &request[..];
            let err = read_request(&mut reader, &mut buf, &limits, &mut Inflater::new()).map(|_| ());
            let limit = 100.min(buf_len - 17);
            assert!(
                matches!(err, Err(ReadError::Request(RequestError::BodyTooLarge { length: None, limit: l })) if l == limit),
                "{buf_len}: {err:?}"
            );
            // It read no more than the buffer plus one probe byte.
            assert!(request.len() - reader.len() <= buf_len + 1, "{buf_len}: read {}", request.len() - reader.len());
        }
    }

    #[test]
    fn zlib_over_limit() {
        let msg = [b'a'; 200];
        // zlib.compress(b"a" * 200) from Python.
        let z = [0x78, 0x9c, 0x4b, 0x4c, 0x1c, 0x1e, 0x00, 0x00, 0xc2, 0x7f, 0x4b, 0xc9];
        let mut request = alloc::format!("CHECK SPAMC/1.5\r\nCompress: zlib\r\nContent-length: {}\r\n\r\n", z.len()).into_bytes();
        request.extend(&z);
        let limits = RequestLimits { max_head: 256, max_body: 100 };
        assert_eq!(
            read_all(&request, 1024, limits).map(|_| ()),
            Err(RequestError::BodyTooLarge { length: None, limit: 100 })
        );
        let limits = RequestLimits { max_head: 256, max_body: 1000 };
        assert_eq!(read_all(&request, 1024, limits).map(|(_, b)| b), Ok(msg.to_vec()));
    }

    #[test]
    fn error_display_and_codes() {
        let cases: &[(RequestError, u8, &str)] = &[
            (RequestError::Zlib, 69, "Service Unavailable: zlib: failed to find end of zlib stream"),
            (
                RequestError::TellDisabled,
                69,
                "Service Unavailable: TELL commands are not enabled, set the --allow-tell switch.",
            ),
            (RequestError::UnknownCommand(echo(b"F\xffO")), 76, "Bad header line: F\u{FFFD}O"),
            (
                RequestError::BodyTooLarge { length: Some(9), limit: 5 },
                65,
                "Message too big: Content-length 9 exceeds the limit of 5 bytes",
            ),
            (
                RequestError::ReadTimeout { seconds: 30 },
                79,
                "Timeout: (30 second socket timeout reading input from client)",
            ),
            (
                RequestError::ScanTimeout { seconds: 300, command: Command::Check },
                79,
                "Timeout: (300 second timeout while trying to CHECK)",
            ),
        ];
        for (err, code, text) in cases {
            assert_eq!(err.code().code(), *code);
            assert_eq!(err.to_string(), *text);
        }
        let mut out = Vec::new();
        RequestError::Zlib.write_response(&mut super::super::VecWriter(&mut out)).unwrap();
        assert_eq!(out, b"SPAMD/1.0 69 Service Unavailable: zlib: failed to find end of zlib stream\n\r\n");
    }

    #[test]
    fn never_panics_on_prefixes_and_junk() {
        let samples: &[&[u8]] = &[
            b"PROCESS SPAMC/1.5\r\nUser: a\r\nCompress: zlib\r\nContent-length: 10\r\nMessage-class: spam\r\n\r\n",
            b"\xff\xfe\x00\r\n:\r\n\n\n\r\r",
            b"TELL SPAMC/9e9999\r\nSet:\r\nRemove:\n\r\n",
        ];
        for s in samples {
            for n in 0..=s.len() {
                let _ = parse_request_head(&s[..n]);
            }
        }
    }
}
