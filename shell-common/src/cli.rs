//! The command line, with spamd's option names where spamd has the option.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::load::RuleSources;

/// What `siftd --help` and the man page say siftd is.
const LONG_ABOUT: &str = "siftd reads SpamAssassin's rule language and answers spamc the way spamd does (protocol 1.5: \
CHECK, SYMBOLS, REPORT, REPORT_IFSPAM, PROCESS, HEADERS, PING, SKIP). Without a command it is the \
daemon: the master binds the listeners (or takes those systemd passes), compiles the rules once and \
hands each connection to the lowest-pid idle child of a prefork pool. `siftd scan FILE...` scans \
message files without a daemon; `siftd --lint` loads the rules and reports what was compiled or \
disabled, and why.";

/// siftd: a small, fast drop-in for SpamAssassin's spamd.
#[derive(Debug, Parser)]
#[command(name = "siftd", version, about = "spam filter daemon: a small, fast drop-in for SpamAssassin's spamd", long_about = LONG_ABOUT)]
pub struct Options {
    /// Rules directory or file, in place of the embedded default rules (spamd's -C). Repeatable.
    #[arg(short = 'C', long = "configpath", value_name = "DIR", global = true)]
    pub config_paths: Vec<PathBuf>,

    /// Site configuration directory: its *.pre files are read first, its *.cf files last.
    #[arg(long = "siteconfigpath", value_name = "DIR", global = true)]
    pub site_path: Option<PathBuf>,

    /// Load the rules, print per type how many are defined, compiled, disabled and not run, and why.
    #[arg(long)]
    pub lint: bool,

    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    pub json: bool,

    /// What to do; without a command siftd runs as a daemon.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Daemon options (spamd's names and, but for `--max-conn-per-child`, its defaults).
    #[command(flatten)]
    pub daemon: DaemonOptions,
}

/// Options of the daemon, named and defaulted as spamd's.
#[derive(Debug, Clone, clap::Args)]
pub struct DaemonOptions {
    /// Listen on ADDR[:PORT], [IPv6]:PORT, `*` (all) or an absolute path (UNIX socket). Repeatable.
    #[arg(short = 'i', long = "listen", value_name = "ADDR[:PORT]|PATH", num_args = 0..=1, default_missing_value = "*")]
    pub listen: Vec<String>,
    /// Port for --listen entries without one.
    #[arg(short = 'p', long = "port", value_name = "PORT", default_value_t = 783)]
    pub port: u16,
    /// Listen on this UNIX socket path too.
    #[arg(long = "socketpath", value_name = "PATH")]
    pub socket_path: Option<std::path::PathBuf>,
    /// Owner of UNIX socket files.
    #[arg(long = "socketowner", value_name = "USER")]
    pub socket_owner: Option<String>,
    /// Group of UNIX socket files.
    #[arg(long = "socketgroup", value_name = "GROUP")]
    pub socket_group: Option<String>,
    /// Mode of UNIX socket files, octal.
    #[arg(long = "socketmode", value_name = "MODE")]
    pub socket_mode: Option<String>,
    /// Use IPv4 only.
    #[arg(short = '4', long = "ipv4-only", visible_alias = "ipv4")]
    pub ipv4_only: bool,
    /// Use IPv6 only.
    #[arg(short = '6')]
    pub ipv6_only: bool,
    /// Client addresses allowed to connect: ADDR, ADDR/BITS or spamd prefixes, comma-separated. Default: localhost.
    #[arg(short = 'A', long = "allowed-ips", value_name = "LIST")]
    pub allowed_ips: Vec<String>,
    /// Most children at once.
    #[arg(short = 'm', long = "max-children", value_name = "NUM", default_value_t = 5)]
    pub max_children: usize,
    /// Fewest children kept.
    #[arg(long = "min-children", value_name = "NUM", default_value_t = 1)]
    pub min_children: usize,
    /// Fewest idle children wanted.
    #[arg(long = "min-spare", value_name = "NUM", default_value_t = 1)]
    pub min_spare: usize,
    /// Most idle children kept.
    #[arg(long = "max-spare", value_name = "NUM", default_value_t = 2)]
    pub max_spare: usize,
    /// Connections a child serves before it is replaced. Default: no limit (spamd's 200 guards against Perl's leaks; a siftd child's memory is bounded, and a new child builds its DFA caches again).
    #[arg(long = "max-conn-per-child", value_name = "NUM")]
    pub max_conn_per_child: Option<u32>,
    /// Every child accepts on its own (the traditional algorithm, for comparison).
    #[arg(long = "round-robin")]
    pub round_robin: bool,
    /// Most children serving at once; more connections wait for one to finish (a child serving one for over 100 ms stops counting). Default: the CPUs siftd may run on; 0: no cap. Not with --round-robin, whose children accept on their own.
    #[arg(long = "max-busy", value_name = "NUM")]
    pub max_busy: Option<usize>,
    /// Seconds a client may take to send its request.
    #[arg(long = "timeout-tcp", value_name = "SECS", default_value_t = 30)]
    pub timeout_tcp: u32,
    /// Seconds a child may spend on one request before it is killed.
    #[arg(long = "timeout-child", value_name = "SECS", default_value_t = 300)]
    pub timeout_child: u32,
    /// Largest message body accepted, in bytes.
    #[arg(long = "max-size", value_name = "BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_size: usize,
    /// Run as this user after binding.
    #[arg(short = 'u', long = "username", value_name = "USER")]
    pub username: Option<String>,
    /// Accepted for spamd compatibility: the group is the --username user's primary group.
    #[arg(short = 'g', long = "groupname", value_name = "GROUP")]
    pub groupname: Option<String>,
    /// Detach from the terminal.
    #[arg(short = 'd', long = "daemonize")]
    pub daemonize: bool,
    /// Write the master's pid here.
    #[arg(short = 'r', long = "pidfile", value_name = "PATH")]
    pub pidfile: Option<std::path::PathBuf>,
    /// Logging: a syslog facility (mail, local0..local7, daemon, user, ...), `stderr`, `null`, or a file path.
    #[arg(short = 's', long = "syslog", value_name = "FACILITY|stderr|null|PATH", default_value = "mail")]
    pub syslog: String,
    /// FreeBSD only: the kernel holds each TCP connection until its first data arrives
    /// (accept_filter(9) "dataready", needs accf_data loaded). Logged and ignored elsewhere.
    #[arg(long = "accept-filter", value_name = "NAME", value_parser = ["dataready"])]
    pub accept_filter: Option<String>,
    /// Most memory, in MiB, a child keeps in its lazy DFA caches between messages (the
    /// rules too big for a dense DFA fill them as mail arrives): when they pass it, the
    /// least recently used are emptied. Lower saves memory and costs speed; 0 keeps
    /// none, a child's least memory, at several times the CPU on the stock rules.
    #[arg(long = "lazy-cache-mib", value_name = "MIB", default_value_t = 24)]
    pub lazy_cache_mib: usize,
    /// Keep the compiled automata (dense DFAs, the NFAs of the lazy ones, the programs
    /// of backtracking patterns, each pattern's prefilter literals) in this file and
    /// reuse them at the next start, SIGHUP or `scan`: a restart with unchanged rules
    /// skips most of the compile, and rebuilds the rest on every core. Created if missing.
    #[arg(long = "compile-cache", value_name = "PATH")]
    pub compile_cache: Option<std::path::PathBuf>,
    /// Rewrite a Prometheus text file with the statistics every few seconds.
    #[arg(long = "stats-file", value_name = "PATH")]
    pub stats_file: Option<std::path::PathBuf>,
    /// Accepted for spamd compatibility: sift always uses local tests only.
    #[arg(short = 'L', long = "local")]
    pub local: bool,
    /// Accepted for spamd compatibility: sift reads no per-user configuration.
    #[arg(short = 'x', long = "nouser-config")]
    pub nouser_config: bool,
    /// Accepted for spamd compatibility: learning is not supported yet, TELL is refused.
    #[arg(short = 'l', long = "allow-tell")]
    pub allow_tell: bool,
    /// Accepted for spamd compatibility and ignored (no per-user preferences).
    #[arg(short = 'c', long = "create-prefs")]
    pub create_prefs: bool,
    /// Accepted for spamd compatibility and ignored: syslog(3) picks the socket.
    #[arg(long = "syslog-socket", value_name = "TYPE")]
    pub syslog_socket: Option<String>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Scan message files (`-` reads standard input) and print each verdict.
    /// Exit status: 0 all ham, 1 any spam, 64 or more on error.
    Scan {
        /// Message files, one message each.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
}

impl Options {
    /// Where the rules come from.
    pub fn rule_sources(&self) -> RuleSources {
        RuleSources { config_paths: self.config_paths.clone(), site_path: self.site_path.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Sections the clap definitions cannot carry, in roff.
    const MAN_EXTRA: &str = r#".SH "SOCKET ACTIVATION"
When systemd starts siftd from a socket unit (\fBLISTEN_PID\fR is siftd's pid and \fBLISTEN_FDS\fR=\fIn\fR),
siftd serves the passed listening sockets, fds 3 to 3+\fIn\fR\-1, TCP or UNIX, and binds nothing itself:
\fB\-i\fR, \fB\-p\fR, \fB\-\-socketpath\fR and the \fB\-\-socket\fR* options are ignored then.
\fBLISTEN_FDNAMES\fR only names the sockets in the log. The variables are removed before any child starts.
Without them siftd binds what the options say, so the same service runs with or without the socket unit.
.SH SIGNALS
.TP
.B SIGHUP
Compile the rules again. On success, children are retired gracefully and new ones serve the new rules;
on failure the reason is logged and the old rules keep serving.
.TP
.B SIGTERM\fR, \fBSIGINT
Stop accepting, let the children finish the requests in progress, exit.
.TP
.B SIGUSR1
Log the statistics.
.SH LOGGING
One line per scanned message at level info, in spamd's style:
.RS
.nf
result: Y 1002 \- GTUBE,NO_RECEIVED scantime=0.001,size=871,user=joe
.fi
.RE
Errors are logged at level err, always with their reason.
\fB\-s\fR takes what spamd's does: a syslog facility (mail, daemon, user, local0 to local7, auth, authpriv,
cron, ftp, lpr, news, syslog, uucp), \fBstderr\fR, \fBnull\fR (no logging), \fBfile\fR (siftd.log in the
working directory) or, when the value has any character outside a\-z and 0\-9, a file path. File lines
start with the time in UTC.
.SH "EXIT STATUS"
.TP
.B 0
The daemon stopped on a signal; \fBscan\fR: every message is ham; \fB\-\-lint\fR: the rules loaded.
.TP
.B 1
\fBscan\fR: at least one message is spam.
.TP
.B 2
The command line cannot be parsed.
.TP
.B 64
An option value is refused (syslog facility, \fB\-\-allowed\-ips\fR, prefork limits).
.TP
.B 66
\fBscan\fR: a message file cannot be read.
.TP
.B 70
A process cannot be forked.
.TP
.B 73
The pid file cannot be written.
.TP
.B 78
The rules cannot be loaded, a listener cannot be bound, or \fB\-u\fR cannot be applied.
.SH FILES
.TP
.I /etc/default/siftd
Debian: \fBOPTIONS\fR for the systemd service.
.TP
.I /usr/lib/systemd/system/siftd.service\fR, \fI/usr/lib/systemd/system/siftd.socket
The service, which works with and without the socket unit.
.SH EXAMPLES
Serve on localhost port 783 with SpamAssassin's installed rules, logging to mail.log:
.RS
.nf
siftd \-C /usr/share/spamassassin \-\-siteconfigpath /etc/spamassassin
.fi
.RE
Check a message with the client:
.RS
.nf
spamc \-c < message.eml
.fi
.RE
.SH "SEE ALSO"
.BR spamc (1),
.BR spamd (1p),
.BR systemd.socket (5)
"#;

    /// `text` as a roff text line: backslashes and hyphens escaped, no leading control character.
    fn roff_text(text: &str) -> String {
        let escaped = text.replace('\\', "\\e").replace('-', "\\-");
        if escaped.starts_with(['.', '\'']) {
            format!("\\&{escaped}")
        } else {
            escaped
        }
    }

    /// The man page from the clap definitions plus [`MAN_EXTRA`], as `dist/man/siftd.8` holds it.
    fn man_page() -> Vec<u8> {
        let man = clap_mangen::Man::new(Options::command()).section("8").manual("System Manager's Manual");
        let mut out = Vec::new();
        type Render = fn(&clap_mangen::Man, &mut dyn std::io::Write) -> std::io::Result<()>;
        let parts: [Render; 5] = [
            clap_mangen::Man::render_title,
            clap_mangen::Man::render_name_section,
            clap_mangen::Man::render_synopsis_section,
            clap_mangen::Man::render_description_section,
            clap_mangen::Man::render_options_section,
        ];
        for part in parts {
            part(&man, &mut out).expect("rendering to a Vec cannot fail");
        }
        // The commands in this page: clap_mangen would point to a page per command.
        out.extend_from_slice(b".SH COMMANDS\n");
        for sub in Options::command().get_subcommands() {
            let args: Vec<String> = sub.get_positionals().map(|a| format!("{}...", a.get_value_names().and_then(|v| v.first()).map_or("ARG", |v| v.as_str()))).collect();
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            out.extend_from_slice(format!(".TP\n.B {} {}\n{}\n", sub.get_name(), args.join(" "), roff_text(&about)).as_bytes());
        }
        out.extend_from_slice(MAN_EXTRA.as_bytes());
        man.render_version_section(&mut out).expect("rendering to a Vec cannot fail");
        out
    }

    #[test]
    fn man_page_matches_the_command_line() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../dist/man/siftd.8");
        let want = man_page();
        if std::env::var_os("SIFTD_BLESS").is_some_and(|v| v == "1") {
            std::fs::write(&path, &want).expect("write dist/man/siftd.8");
            return;
        }
        let have = std::fs::read(&path).unwrap_or_default();
        assert!(
            have == want,
            "dist/man/siftd.8 is out of date with the clap definitions in shell-common/src/cli.rs; \
             rewrite it with: SIFTD_BLESS=1 cargo test -p siftd-common --lib man_page"
        );
    }

    #[test]
    fn spamd_option_names_parse() {
        let cases: &[&[&str]] = &[
            &["siftd", "-i", "127.0.0.1:783", "-p", "783", "-A", "127.0.0.1,::1", "-m", "5", "-s", "local3"],
            &["siftd", "--listen=/run/siftd.sock", "--socketowner=mail", "--socketgroup=mail", "--socketmode=0660"],
            &["siftd", "-d", "-r", "/run/siftd.pid", "-u", "siftd", "-g", "siftd", "-x", "-L", "-c", "-l"],
            &["siftd", "--min-children=2", "--min-spare=1", "--max-spare=3", "--max-conn-per-child=100", "--round-robin"],
            &["siftd", "--max-busy=0"],
            &["siftd", "--max-busy", "4", "-m", "8"],
            &["siftd", "--timeout-tcp=10", "--timeout-child=60", "--syslog-socket=unix", "--ipv4"],
        ];
        for args in cases {
            assert!(Options::try_parse_from(*args).is_ok(), "{args:?}");
        }
        let refused: &[&[&str]] = &[&["siftd", "--helper-home-dir"], &["siftd", "--ssl"], &["siftd", "-p", "99999"]];
        for args in refused {
            assert!(Options::try_parse_from(*args).is_err(), "{args:?}");
        }
    }
}
