//! Logging: one concise line per event to syslog, standard error or a file, chosen by
//! spamd's `-s` value.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where log lines go, as spamd reads its `-s` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Standard error, each line `siftd[PID]: TEXT` (a supervisor such as journald adds the time).
    Stderr,
    /// Nowhere (`-s null`).
    Null,
    /// An appended file, each line `TIME siftd[PID]: TEXT` with the time in UTC.
    File(PathBuf),
    /// syslog(3) with this facility, ident `siftd`, pid in each line.
    Syslog(libc::c_int),
}

/// The log file `-s file` means, as spamd's `spamd.log`: in the working directory.
pub const DEFAULT_FILE: &str = "siftd.log";

/// The syslog facilities `-s` accepts, by name.
const FACILITIES: [(&str, libc::c_int); 19] = [
    ("mail", libc::LOG_MAIL),
    ("daemon", libc::LOG_DAEMON),
    ("user", libc::LOG_USER),
    ("local0", libc::LOG_LOCAL0),
    ("local1", libc::LOG_LOCAL1),
    ("local2", libc::LOG_LOCAL2),
    ("local3", libc::LOG_LOCAL3),
    ("local4", libc::LOG_LOCAL4),
    ("local5", libc::LOG_LOCAL5),
    ("local6", libc::LOG_LOCAL6),
    ("local7", libc::LOG_LOCAL7),
    ("auth", libc::LOG_AUTH),
    ("authpriv", libc::LOG_AUTHPRIV),
    ("cron", libc::LOG_CRON),
    ("ftp", libc::LOG_FTP),
    ("lpr", libc::LOG_LPR),
    ("news", libc::LOG_NEWS),
    ("syslog", libc::LOG_SYSLOG),
    ("uucp", libc::LOG_UUCP),
];

impl Destination {
    /// Reads spamd's `-s` value: `stderr`, `null`, `file` ([`DEFAULT_FILE`]), a facility
    /// name, or, when it has any character outside a-z and 0-9, a file path. Empty means `mail`.
    pub fn parse(spec: &str) -> Result<Destination, LogError> {
        if spec.bytes().any(|b| !(b.is_ascii_lowercase() || b.is_ascii_digit())) {
            return Ok(Destination::File(PathBuf::from(spec)));
        }
        Ok(match spec {
            "" => Destination::Syslog(libc::LOG_MAIL),
            "stderr" => Destination::Stderr,
            "null" => Destination::Null,
            "file" => Destination::File(PathBuf::from(DEFAULT_FILE)),
            name => match FACILITIES.iter().find(|(n, _)| *n == name) {
                Some((_, f)) => Destination::Syslog(*f),
                None => {
                    let known: Vec<&str> = FACILITIES.iter().map(|(n, _)| *n).collect();
                    return Err(LogError(format!(
                        "-s {name}: unknown syslog facility (use one of {}, or stderr, null, file, or a path)",
                        known.join(", ")
                    )));
                }
            },
        })
    }
}

enum Sink {
    Stderr,
    Null,
    File { path: PathBuf, file: Mutex<File> },
    Syslog,
}

/// The daemon's logger.
pub struct Log {
    sink: Sink,
}

/// Why a `--syslog` value was refused or its file cannot be opened.
#[derive(Debug)]
pub struct LogError(String);

impl std::fmt::Display for LogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn open_append(path: &Path) -> Result<File, LogError> {
    OpenOptions::new().create(true).append(true).open(path).map_err(|e| LogError(format!("log file {}: {e}", path.display())))
}

/// This process's pid as log lines show it; 0 until [`set_pid`] (then asked of the kernel).
static PID: AtomicU32 = AtomicU32::new(0);

/// Tells the log this process's pid, so a line costs no `getpid` call. Call after each fork.
pub fn set_pid(pid: u32) {
    PID.store(pid, Ordering::Relaxed);
}

fn pid() -> u32 {
    match PID.load(Ordering::Relaxed) {
        0 => crate::sys::getpid() as u32,
        p => p,
    }
}

impl Log {
    /// From spamd's `-s` value (see [`Destination::parse`]).
    pub fn open(spec: &str) -> Result<Log, LogError> {
        let sink = match Destination::parse(spec)? {
            Destination::Stderr => Sink::Stderr,
            Destination::Null => Sink::Null,
            Destination::File(path) => {
                let file = Mutex::new(open_append(&path)?);
                Sink::File { path, file }
            }
            Destination::Syslog(facility) => {
                crate::sys::open_syslog(facility);
                Sink::Syslog
            }
        };
        Ok(Log { sink })
    }

    /// Opens a log file again, for rotation (spamd does it on SIGHUP); a no-op for
    /// other destinations. On failure the old file stays in use.
    pub fn reopen(&self) -> Result<(), LogError> {
        if let Sink::File { path, file } = &self.sink {
            let fresh = open_append(path)?;
            if let Ok(mut f) = file.lock() {
                *f = fresh;
            }
        }
        Ok(())
    }

    fn line(&self, priority: libc::c_int, text: &str) {
        let text = one_line(text);
        match &self.sink {
            Sink::Stderr => {
                // One write per line: stderr is unbuffered.
                let line = format!("siftd[{}]: {text}\n", pid());
                let _ = std::io::stderr().write_all(line.as_bytes());
            }
            Sink::Null => {}
            Sink::File { file, .. } => {
                let line = format!("{} siftd[{}]: {text}\n", utc_timestamp(SystemTime::now()), pid());
                if let Ok(mut f) = file.lock() {
                    // One write per line: O_APPEND keeps lines of several processes whole.
                    let _ = f.write_all(line.as_bytes());
                }
            }
            Sink::Syslog => {
                if let Ok(c) = CString::new(text.as_bytes()) {
                    crate::sys::syslog(priority, &c);
                }
            }
        }
    }

    /// An informational line.
    pub fn info(&self, text: &str) {
        self.line(libc::LOG_INFO, text);
    }

    /// An error, always with its reason.
    pub fn error(&self, text: &str) {
        self.line(libc::LOG_ERR, text);
    }
}

/// `text` with control characters (newlines, NUL, escapes) written as `\xNN`, so a value
/// taken from a request cannot end the line or forge another.
fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.push_str(&format!("\\x{:02X}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `time` as ISO 8601 in UTC with milliseconds: `2023-11-14T22:13:20.000Z`.
fn utc_timestamp(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (year, month, day) = civil_date(secs / 86_400);
    let of_day = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        since.subsec_millis()
    )
}

/// Year, month and day of the `days`-th day after 1970-01-01 (proleptic Gregorian).
fn civil_date(days: u64) -> (u64, u64, u64) {
    // Count from 0000-03-01 so the leap day ends each 4-, 100- and 400-year cycle.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn destinations_read_as_spamd_reads_them() {
        let file = |p: &str| Ok(Destination::File(PathBuf::from(p)));
        let cases: &[(&str, Result<Destination, ()>)] = &[
            ("", Ok(Destination::Syslog(libc::LOG_MAIL))),
            ("mail", Ok(Destination::Syslog(libc::LOG_MAIL))),
            ("local0", Ok(Destination::Syslog(libc::LOG_LOCAL0))),
            ("local7", Ok(Destination::Syslog(libc::LOG_LOCAL7))),
            ("daemon", Ok(Destination::Syslog(libc::LOG_DAEMON))),
            ("user", Ok(Destination::Syslog(libc::LOG_USER))),
            ("authpriv", Ok(Destination::Syslog(libc::LOG_AUTHPRIV))),
            ("stderr", Ok(Destination::Stderr)),
            ("null", Ok(Destination::Null)),
            ("file", file(DEFAULT_FILE)),
            ("/var/log/siftd.log", file("/var/log/siftd.log")),
            ("./mail", file("./mail")),
            ("siftd.log", file("siftd.log")),
            ("Mail", file("Mail")), // spamd: anything outside a-z0-9 is a file name
            ("local8", Err(())),
            ("kern", Err(())),
            ("mial", Err(())),
        ];
        for (spec, want) in cases {
            assert_eq!(Destination::parse(spec).map_err(drop), *want, "-s {spec:?}");
        }
        let why = Destination::parse("mial").unwrap_err().to_string();
        assert!(why.contains("mial") && why.contains("local0"), "{why}");
    }

    #[test]
    fn control_characters_cannot_break_a_line() {
        let cases = [
            ("result: . 1 - none", "result: . 1 - none"),
            ("user=a\nsiftd[1]: forged", "user=a\\x0Asiftd[1]: forged"),
            ("a\r\0b\x1b", "a\\x0D\\x00b\\x1B"),
            ("tab\there", "tab\\x09here"),
            ("ünïcode stays", "ünïcode stays"),
        ];
        for (text, want) in cases {
            assert_eq!(one_line(text), want, "{text:?}");
        }
    }

    #[test]
    fn utc_timestamps() {
        let cases = [
            (0, 0, "1970-01-01T00:00:00.000Z"),
            (951_782_400, 5, "2000-02-29T00:00:00.005Z"),
            (951_868_799, 999, "2000-02-29T23:59:59.999Z"),
            (1_700_000_000, 120, "2023-11-14T22:13:20.120Z"),
            (1_709_251_199, 0, "2024-02-29T23:59:59.000Z"),
            (4_102_444_800, 0, "2100-01-01T00:00:00.000Z"),
            (4_107_542_400, 0, "2100-03-01T00:00:00.000Z"),
        ];
        for (secs, ms, want) in cases {
            let t = UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(ms);
            assert_eq!(utc_timestamp(t), want, "{secs}");
        }
    }

    #[test]
    fn a_file_log_appends_timestamped_lines_and_reopens_after_rotation() {
        let dir = std::env::temp_dir().join(format!("sift-log-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("siftd.log");
        let _ = std::fs::remove_file(&path);
        let log = Log::open(path.to_str().unwrap()).unwrap();
        log.info("first");
        log.error("second:\nnot a line of its own");
        let rotated = dir.join("siftd.log.1");
        std::fs::rename(&path, &rotated).unwrap();
        log.info("still to the rotated file");
        log.reopen().unwrap();
        log.info("to the new file");
        let old = std::fs::read_to_string(&rotated).unwrap();
        let new = std::fs::read_to_string(&path).unwrap();
        let pid = std::process::id();
        let old_lines: Vec<&str> = old.lines().collect();
        assert_eq!(old_lines.len(), 3, "{old}");
        for (line, text) in old_lines.iter().zip(["first", "second:\\x0Anot a line of its own", "still to the rotated file"]) {
            let (time, rest) = line.split_once(' ').unwrap();
            assert!(time.len() == 24 && time.ends_with('Z') && time.as_bytes()[10] == b'T', "{line}");
            assert_eq!(rest, format!("siftd[{pid}]: {text}"));
        }
        assert!(new.ends_with(&format!("siftd[{pid}]: to the new file\n")) && new.lines().count() == 1, "{new}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
