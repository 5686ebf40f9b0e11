//! The client side of the spamc/spamd protocol 1.5: requests built once per message,
//! responses checked as spamc would check them.

use std::fmt;

/// A spamc command the load generator sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Verdict only (spamc -c): the `Spam:` header.
    Check,
    /// Verdict and the names of the rules that hit (spamc -y).
    Symbols,
    /// Verdict and the report (spamc -R).
    Report,
    /// The rewritten message (spamc's default).
    Process,
    /// Liveness only (spamc -K): no message.
    Ping,
}

impl Command {
    /// The command word on the request line.
    pub fn name(self) -> &'static str {
        match self {
            Command::Check => "CHECK",
            Command::Symbols => "SYMBOLS",
            Command::Report => "REPORT",
            Command::Process => "PROCESS",
            Command::Ping => "PING",
        }
    }

    /// The command named by `word`, in any case.
    pub fn parse(word: &str) -> Option<Command> {
        [Command::Check, Command::Symbols, Command::Report, Command::Process, Command::Ping]
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(word))
    }

    /// Whether the request carries a message.
    pub fn sends_message(self) -> bool {
        self != Command::Ping
    }
}

/// The bytes of one request, head and message together so they go out in one write.
pub fn build_request(command: Command, user: Option<&str>, message: &[u8]) -> Vec<u8> {
    let mut head = format!("{} SPAMC/1.5\r\n", command.name());
    if command.sends_message() {
        head.push_str(&format!("Content-length: {}\r\n", message.len()));
    }
    if let Some(user) = user {
        head.push_str(&format!("User: {user}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = Vec::with_capacity(head.len() + message.len());
    bytes.extend_from_slice(head.as_bytes());
    if command.sends_message() {
        bytes.extend_from_slice(message);
    }
    bytes
}

/// What a well-formed answer said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// The verdict of the `Spam:` header; `None` for PING and for PROCESS without the header.
    pub spam: Option<bool>,
}

/// Why an answer is not what spamc expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyError {
    /// The connection closed without a byte.
    Empty,
    /// The first line is not `SPAMD/1.x CODE TEXT`.
    BadStatusLine(String),
    /// The daemon answered with an error code (not `0 EX_OK`).
    NotOk(String),
    /// PING was not answered with PONG.
    NoPong(String),
    /// A scan command was answered without a `Spam:` header.
    NoSpamHeader,
    /// The `Spam:` header is not `True|False ; SCORE / REQUIRED`.
    BadSpamHeader(String),
    /// The body is not as long as `Content-length` says.
    BodyLength {
        /// Length the header declared.
        declared: usize,
        /// Bytes that came.
        received: usize,
    },
    /// `Content-length` is not a number.
    BadContentLength(String),
}

impl ReplyError {
    /// A short stable name, for counting errors by kind.
    pub fn kind(&self) -> &'static str {
        match self {
            ReplyError::Empty => "empty-reply",
            ReplyError::BadStatusLine(_) => "bad-status-line",
            ReplyError::NotOk(_) => "not-ex-ok",
            ReplyError::NoPong(_) => "no-pong",
            ReplyError::NoSpamHeader => "no-spam-header",
            ReplyError::BadSpamHeader(_) => "bad-spam-header",
            ReplyError::BodyLength { .. } => "body-length",
            ReplyError::BadContentLength(_) => "bad-content-length",
        }
    }
}

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplyError::Empty => f.write_str("connection closed without a reply"),
            ReplyError::BadStatusLine(line) => write!(f, "status line is not SPAMD/1.x: {line:?}"),
            ReplyError::NotOk(line) => write!(f, "daemon answered an error: {line:?}"),
            ReplyError::NoPong(line) => write!(f, "PING answered without PONG: {line:?}"),
            ReplyError::NoSpamHeader => f.write_str("reply without a Spam: header"),
            ReplyError::BadSpamHeader(value) => write!(f, "Spam: header is not 'True|False ; SCORE / REQUIRED': {value:?}"),
            ReplyError::BodyLength { declared, received } => {
                write!(f, "Content-length says {declared} bytes, {received} came")
            }
            ReplyError::BadContentLength(value) => write!(f, "Content-length is not a number: {value:?}"),
        }
    }
}

/// Checks a whole response (everything read until the daemon closed) to `command`.
pub fn verify(command: Command, response: &[u8]) -> Result<Reply, ReplyError> {
    if response.is_empty() {
        return Err(ReplyError::Empty);
    }
    let (head, body) = split_head(response);
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let status = lines.next().unwrap_or("");
    let (code, message) = parse_status(status)?;
    if command == Command::Ping {
        return if code == "0" && message.contains("PONG") { Ok(Reply { spam: None }) } else { Err(ReplyError::NoPong(status.to_string())) };
    }
    if code != "0" || message != "EX_OK" {
        return Err(ReplyError::NotOk(status.to_string()));
    }
    let mut spam = None;
    let mut content_length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        if name.trim().eq_ignore_ascii_case("Spam") {
            spam = Some(parse_spam_header(value)?);
        } else if name.trim().eq_ignore_ascii_case("Content-length") {
            content_length = Some(value.parse::<usize>().map_err(|_| ReplyError::BadContentLength(value.to_string()))?);
        }
    }
    if let Some(declared) = content_length {
        if declared != body.len() {
            return Err(ReplyError::BodyLength { declared, received: body.len() });
        }
    }
    if spam.is_none() && command != Command::Process {
        return Err(ReplyError::NoSpamHeader);
    }
    Ok(Reply { spam })
}

/// The head (status line and headers) and the body after the first empty line.
fn split_head(response: &[u8]) -> (&[u8], &[u8]) {
    let crlf = find(response, b"\r\n\r\n").map(|at| (at, at + 4));
    let lf = find(response, b"\n\n").map(|at| (at, at + 2));
    let end = match (crlf, lf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    };
    match end {
        Some((head_end, body_start)) => (response.get(..head_end).unwrap_or(response), response.get(body_start..).unwrap_or(&[])),
        None => (response, &[]),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `SPAMD/1.x CODE MESSAGE` into (code, message).
fn parse_status(line: &str) -> Result<(&str, &str), ReplyError> {
    let bad = || ReplyError::BadStatusLine(line.to_string());
    let mut words = line.splitn(3, ' ');
    let version = words.next().ok_or_else(bad)?;
    let code = words.next().ok_or_else(bad)?;
    let message = words.next().unwrap_or("").trim();
    let ok_version = version.strip_prefix("SPAMD/1.").is_some_and(|minor| !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit()));
    if !ok_version || code.is_empty() || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    Ok((code, message))
}

/// `True ; 3.4 / 5.0` (also `Yes`/`No`) into the verdict.
fn parse_spam_header(value: &str) -> Result<bool, ReplyError> {
    let bad = || ReplyError::BadSpamHeader(value.to_string());
    let (verdict, scores) = value.split_once(';').ok_or_else(bad)?;
    let (score, required) = scores.split_once('/').ok_or_else(bad)?;
    if score.trim().parse::<f64>().is_err() || required.trim().parse::<f64>().is_err() {
        return Err(bad());
    }
    match verdict.trim() {
        v if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("yes") => Ok(true),
        v if v.eq_ignore_ascii_case("false") || v.eq_ignore_ascii_case("no") => Ok(false),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        // (command, user, message, request)
        type Case = (Command, Option<&'static str>, &'static [u8], &'static [u8]);
        let cases: &[Case] = &[
            (Command::Check, None, b"Subject: x\r\n\r\nhi\r\n", b"CHECK SPAMC/1.5\r\nContent-length: 18\r\n\r\nSubject: x\r\n\r\nhi\r\n"),
            (Command::Symbols, Some("bench"), b"x", b"SYMBOLS SPAMC/1.5\r\nContent-length: 1\r\nUser: bench\r\n\r\nx"),
            (Command::Process, None, b"", b"PROCESS SPAMC/1.5\r\nContent-length: 0\r\n\r\n"),
            (Command::Ping, None, b"ignored", b"PING SPAMC/1.5\r\n\r\n"),
        ];
        for (command, user, message, want) in cases {
            assert_eq!(build_request(*command, *user, message), *want, "{command:?}");
        }
    }

    #[test]
    fn command_names() {
        for (word, want) in [("check", Some(Command::Check)), ("SYMBOLS", Some(Command::Symbols)), ("Report", Some(Command::Report)), ("process", Some(Command::Process)), ("ping", Some(Command::Ping)), ("TELL", None), ("", None)] {
            assert_eq!(Command::parse(word), want, "{word}");
        }
    }

    #[test]
    fn replies() {
        type Case = (Command, &'static [u8], Result<Option<bool>, &'static str>);
        let cases: &[Case] = &[
            (Command::Check, b"SPAMD/1.1 0 EX_OK\r\nSpam: True ; 1000.0 / 5.0\r\n\r\n", Ok(Some(true))),
            (Command::Check, b"SPAMD/1.1 0 EX_OK\r\nSpam: False ; -0.1 / 5.0\r\n\r\n", Ok(Some(false))),
            (Command::Check, b"SPAMD/1.5 0 EX_OK\nSpam: Yes ; 7 / 5\n\n", Ok(Some(true))),
            (Command::Check, b"SPAMD/1.1 0 EX_OK\r\n\r\n", Err("no-spam-header")),
            (Command::Check, b"SPAMD/1.1 0 EX_OK\r\nSpam: maybe\r\n\r\n", Err("bad-spam-header")),
            (Command::Check, b"SPAMD/1.1 0 EX_OK\r\nSpam: Perhaps ; 1 / 5\r\n\r\n", Err("bad-spam-header")),
            (Command::Check, b"SPAMD/1.1 0 EX_OK\r\nSpam: True ; x / 5\r\n\r\n", Err("bad-spam-header")),
            (Command::Check, b"SPAMD/1.0 76 Bad header line: (Content-Length contains non-numeric bytes)\r\n", Err("not-ex-ok")),
            (Command::Check, b"SPAMD/1.1 0 EX_TEMPFAIL\r\n\r\n", Err("not-ex-ok")),
            (Command::Check, b"HTTP/1.1 200 OK\r\n\r\n", Err("bad-status-line")),
            (Command::Check, b"SPAMD/1.x 0 EX_OK\r\n\r\n", Err("bad-status-line")),
            (Command::Check, b"SPAMD/1.1\r\n", Err("bad-status-line")),
            (Command::Check, b"", Err("empty-reply")),
            (Command::Symbols, b"SPAMD/1.1 0 EX_OK\r\nContent-length: 9\r\nSpam: True ; 6.0 / 5.0\r\n\r\nA,B,GTUBE", Ok(Some(true))),
            (Command::Symbols, b"SPAMD/1.1 0 EX_OK\r\nContent-length: 10\r\nSpam: True ; 6.0 / 5.0\r\n\r\nA,B,GTUBE", Err("body-length")),
            (Command::Symbols, b"SPAMD/1.1 0 EX_OK\r\nContent-length: ten\r\nSpam: True ; 6.0 / 5.0\r\n\r\n", Err("bad-content-length")),
            (Command::Report, b"SPAMD/1.1 0 EX_OK\r\nContent-length: 3\r\nSpam: False ; 0.0 / 5.0\r\n\r\nabc", Ok(Some(false))),
            (Command::Process, b"SPAMD/1.1 0 EX_OK\r\nContent-length: 4\r\n\r\nmail", Ok(None)),
            (Command::Process, b"SPAMD/1.1 0 EX_OK\r\nContent-length: 4\r\nSpam: True ; 9 / 5\r\n\r\nmail", Ok(Some(true))),
            (Command::Process, b"SPAMD/1.1 0 EX_OK\r\nContent-length: 5\r\n\r\nmail", Err("body-length")),
            (Command::Ping, b"SPAMD/1.5 0 PONG\r\n", Ok(None)),
            (Command::Ping, b"SPAMD/1.5 0 EX_OK\r\n", Err("no-pong")),
            (Command::Ping, b"RSPAMD/1.3 0 PONG\r\n", Err("bad-status-line")),
        ];
        for (command, response, want) in cases {
            let got = verify(*command, response).map(|r| r.spam).map_err(|e| e.kind());
            assert_eq!(got, *want, "{command:?} {:?}", String::from_utf8_lossy(response));
        }
    }

    #[test]
    fn errors_display_their_detail() {
        let e = verify(Command::Check, b"SPAMD/1.1 0 EX_OK\r\nSpam: ?\r\n\r\n").err();
        assert_eq!(e.map(|e| e.to_string()), Some("Spam: header is not 'True|False ; SCORE / REQUIRED': \"?\"".to_string()));
    }
}
