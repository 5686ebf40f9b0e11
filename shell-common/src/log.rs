//! Logging: one concise line per event to stderr, a file, or syslog.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Mutex;

/// Where log lines go.
pub enum Sink {
    /// Standard error.
    Stderr,
    /// An appended file.
    File(Mutex<File>),
    /// syslog(3) with this facility.
    Syslog(libc::c_int),
}

/// The daemon's logger.
pub struct Log {
    sink: Sink,
}

/// Why a `--syslog` value was refused.
#[derive(Debug)]
pub struct LogError(String);

impl std::fmt::Display for LogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn facility(name: &str) -> Option<libc::c_int> {
    Some(match name {
        "mail" => libc::LOG_MAIL,
        "daemon" => libc::LOG_DAEMON,
        "user" => libc::LOG_USER,
        "local0" => libc::LOG_LOCAL0,
        "local1" => libc::LOG_LOCAL1,
        "local2" => libc::LOG_LOCAL2,
        "local3" => libc::LOG_LOCAL3,
        "local4" => libc::LOG_LOCAL4,
        "local5" => libc::LOG_LOCAL5,
        "local6" => libc::LOG_LOCAL6,
        "local7" => libc::LOG_LOCAL7,
        _ => return None,
    })
}

impl Log {
    /// From spamd's `-s` value: a facility name, `stderr`, or a file path.
    pub fn open(spec: &str) -> Result<Log, LogError> {
        let sink = if spec == "stderr" {
            Sink::Stderr
        } else if spec.contains('/') {
            let f = OpenOptions::new().create(true).append(true).open(spec).map_err(|e| LogError(format!("log file {spec}: {e}")))?;
            Sink::File(Mutex::new(f))
        } else {
            let fac = facility(spec).ok_or_else(|| LogError(format!("unknown syslog facility {spec:?}")))?;
            crate::sys::open_syslog(fac);
            Sink::Syslog(fac)
        };
        Ok(Log { sink })
    }

    fn line(&self, priority: libc::c_int, text: &str) {
        match &self.sink {
            // One write per line: children share the file, and O_APPEND keeps whole writes apart.
            Sink::Stderr => {
                let _ = std::io::stderr().write_all(format!("siftd[{}]: {text}\n", crate::sys::getpid()).as_bytes());
            }
            Sink::File(f) => {
                if let Ok(mut f) = f.lock() {
                    let _ = f.write_all(format!("siftd[{}]: {text}\n", crate::sys::getpid()).as_bytes());
                }
            }
            Sink::Syslog(_) => {
                if let Ok(c) = CString::new(text.replace('\0', " ")) {
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
