//! The spamc/spamd protocol (up to 1.5) and SpamAssassin's message rewriting.
//!
//! - [`request`]: the request head (`CHECK SPAMC/1.5`, `Content-length`, `User`,
//!   `Compress: zlib`, …) parsed exactly as spamd 4.0.1 parses it, incrementally
//!   or in one go, and a helper that reads a whole request from an
//!   [`embedded_io::Read`] into a caller's buffer, inflating zlib bodies.
//! - [`response`]: what spamd writes back for each command, byte for byte.
//! - [`rewrite`]: the message SpamAssassin hands back for `PROCESS` and
//!   `HEADERS`: `X-Spam-*` headers, `rewrite_header`, `report_safe` 0/1/2 and the
//!   report templates with their `_TAGS_`.
//!
//! Errors carry spamd's sysexits code and text; [`RequestError::write_response`]
//! writes them as spamd does (`SPAMD/1.0 76 Bad header line: …`). Nothing here
//! panics on input and nothing allocates per message beyond caller-owned buffers
//! that are reused from message to message.
//!
//! A worker serves one connection like this:
//! 1. [`read_request`] (or [`HeadParser`] fed from its own buffer, then the body
//!    as [`RequestHead::body_framing`] says); on error, answer with
//!    [`RequestError::write_response`] and close;
//! 2. if [`Command::scans`], scan `request.body`;
//! 3. [`respond`] with the head, the message and the verdict (any
//!    [`VerdictView`](crate::report::VerdictView)), the [`RewriteSettings`] built
//!    once from the rule set, an [`Environment`] and the worker's [`RewriteScratch`].

use core::fmt;

pub mod request;
pub mod response;
pub mod rewrite;
mod sink;

pub use request::{
    parse_request_head, read_request, BodyFraming, HeadParser, Inflater, MessageClass, Progress, ProtocolVersion,
    ReadError, Request, RequestError, RequestHead, RequestLimits,
};
pub use response::{respond, write_pong, write_scan_response};
pub use rewrite::{Environment, RewriteScratch, RewriteSettings};
pub use sink::{Counter, VecWriter};

/// A spamc command: the first word of a request line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Command {
    /// `CHECK`: the `Spam:` line only.
    Check,
    /// `SYMBOLS`: the `Spam:` line and the names of the rules that hit.
    Symbols,
    /// `REPORT`: the `Spam:` line and the report.
    Report,
    /// `REPORT_IFSPAM`: as `REPORT`, the report only for spam.
    ReportIfSpam,
    /// `PROCESS`: the rewritten message.
    Process,
    /// `HEADERS`: the rewritten message's headers.
    Headers,
    /// `PING`: `PONG`, no scan.
    Ping,
    /// `SKIP`: no scan, no answer.
    Skip,
    /// `TELL`: learning and reporting (refused: sift does not learn).
    Tell,
}

impl Command {
    /// The command word as spamc sends it.
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Check => "CHECK",
            Command::Symbols => "SYMBOLS",
            Command::Report => "REPORT",
            Command::ReportIfSpam => "REPORT_IFSPAM",
            Command::Process => "PROCESS",
            Command::Headers => "HEADERS",
            Command::Ping => "PING",
            Command::Skip => "SKIP",
            Command::Tell => "TELL",
        }
    }

    /// Whether the command scans a message (and so reads a body).
    pub fn scans(self) -> bool {
        matches!(
            self,
            Command::Check
                | Command::Symbols
                | Command::Report
                | Command::ReportIfSpam
                | Command::Process
                | Command::Headers
        )
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The sysexits.h codes spamd puts in its response line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ExitCode {
    /// 0: no problems.
    Ok,
    /// 64: command line usage error.
    Usage,
    /// 65: data format error.
    DataErr,
    /// 66: cannot open input.
    NoInput,
    /// 67: addressee unknown.
    NoUser,
    /// 68: host name unknown.
    NoHost,
    /// 69: service unavailable.
    Unavailable,
    /// 70: internal software error.
    Software,
    /// 71: system error.
    OsErr,
    /// 72: critical OS file missing.
    OsFile,
    /// 73: can't create output file.
    CantCreat,
    /// 74: input/output error.
    IoErr,
    /// 75: temporary failure; the client may retry.
    TempFail,
    /// 76: remote error in protocol.
    Protocol,
    /// 77: permission denied.
    NoPerm,
    /// 78: configuration error.
    Config,
    /// 79: read timeout.
    Timeout,
}

impl ExitCode {
    /// The numeric code.
    pub fn code(self) -> u8 {
        match self {
            ExitCode::Ok => 0,
            ExitCode::Usage => 64,
            ExitCode::DataErr => 65,
            ExitCode::NoInput => 66,
            ExitCode::NoUser => 67,
            ExitCode::NoHost => 68,
            ExitCode::Unavailable => 69,
            ExitCode::Software => 70,
            ExitCode::OsErr => 71,
            ExitCode::OsFile => 72,
            ExitCode::CantCreat => 73,
            ExitCode::IoErr => 74,
            ExitCode::TempFail => 75,
            ExitCode::Protocol => 76,
            ExitCode::NoPerm => 77,
            ExitCode::Config => 78,
            ExitCode::Timeout => 79,
        }
    }

    /// The symbolic name, as spamd writes it after `0` (`EX_OK`).
    pub fn name(self) -> &'static str {
        match self {
            ExitCode::Ok => "EX_OK",
            ExitCode::Usage => "EX_USAGE",
            ExitCode::DataErr => "EX_DATAERR",
            ExitCode::NoInput => "EX_NOINPUT",
            ExitCode::NoUser => "EX_NOUSER",
            ExitCode::NoHost => "EX_NOHOST",
            ExitCode::Unavailable => "EX_UNAVAILABLE",
            ExitCode::Software => "EX_SOFTWARE",
            ExitCode::OsErr => "EX_OSERR",
            ExitCode::OsFile => "EX_OSFILE",
            ExitCode::CantCreat => "EX_CANTCREAT",
            ExitCode::IoErr => "EX_IOERR",
            ExitCode::TempFail => "EX_TEMPFAIL",
            ExitCode::Protocol => "EX_PROTOCOL",
            ExitCode::NoPerm => "EX_NOPERM",
            ExitCode::Config => "EX_CONFIG",
            ExitCode::Timeout => "EX_TIMEOUT",
        }
    }
}

impl fmt::Display for ExitCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code(), self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_table() {
        let cases = [
            (ExitCode::Ok, 0, "EX_OK"),
            (ExitCode::Usage, 64, "EX_USAGE"),
            (ExitCode::DataErr, 65, "EX_DATAERR"),
            (ExitCode::NoInput, 66, "EX_NOINPUT"),
            (ExitCode::Unavailable, 69, "EX_UNAVAILABLE"),
            (ExitCode::TempFail, 75, "EX_TEMPFAIL"),
            (ExitCode::Protocol, 76, "EX_PROTOCOL"),
            (ExitCode::Timeout, 79, "EX_TIMEOUT"),
        ];
        for (code, n, name) in cases {
            assert_eq!(code.code(), n);
            assert_eq!(code.name(), name);
        }
    }

    #[test]
    fn commands_that_scan() {
        let scanning = [Command::Check, Command::Symbols, Command::Report, Command::ReportIfSpam, Command::Process, Command::Headers];
        for c in scanning {
            assert!(c.scans(), "{c}");
        }
        for c in [Command::Ping, Command::Skip, Command::Tell] {
            assert!(!c.scans(), "{c}");
        }
    }
}
