//! What every siftd shell shares: the command line, loading rules from files, and
//! the `scan` and `--lint` commands. Per-OS code (processes, sockets, sandboxes)
//! stays in the shells.
#![deny(unsafe_code)]

pub mod access;
pub mod cli;
pub mod daemon;
pub mod entry;
pub mod events;
pub mod json;
pub mod lint;
pub mod listen;
pub mod log;
pub mod load;
pub mod scan;
pub mod sys;

/// Exit codes of sysexits.h, as spamd uses them.
pub mod exit {
    /// Command line usage error.
    pub const USAGE: i32 = 64;
    /// Input data was incorrect.
    pub const DATAERR: i32 = 65;
    /// An input file did not exist or was unreadable.
    pub const NOINPUT: i32 = 66;
    /// Internal software error.
    pub const SOFTWARE: i32 = 70;
    /// An I/O error.
    pub const IOERR: i32 = 74;
    /// An output file cannot be created.
    pub const CANTCREAT: i32 = 73;
    /// Remote error in protocol.
    pub const PROTOCOL: i32 = 76;
    /// Configuration error.
    pub const CONFIG: i32 = 78;
}
