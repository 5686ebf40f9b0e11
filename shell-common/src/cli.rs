//! The command line, with spamd's option names where spamd has the option.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::load::RuleSources;

/// siftd: a small, fast drop-in for SpamAssassin's spamd.
#[derive(Debug, Parser)]
#[command(name = "siftd", version, about = "siftd: a small, fast drop-in for SpamAssassin's spamd")]
pub struct Options {
    /// Rules directory or file, in place of the embedded default rules (spamd's -C). Repeatable.
    #[arg(short = 'C', long = "configpath", value_name = "DIR", global = true)]
    pub config_paths: Vec<PathBuf>,

    /// Site configuration directory: its *.pre files are read first, its *.cf files last.
    #[arg(long = "siteconfigpath", value_name = "DIR", global = true)]
    pub site_path: Option<PathBuf>,

    /// Load the rules, print per type how many are defined, compiled and disabled, and why.
    #[arg(long)]
    pub lint: bool,

    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    pub json: bool,

    /// What to do; without a command siftd runs as a daemon.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Daemon options (spamd's names and defaults).
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
    #[arg(short = 'p', long = "port", default_value_t = 783)]
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
    #[arg(short = 'm', long = "max-children", default_value_t = 5)]
    pub max_children: usize,
    /// Fewest children kept.
    #[arg(long = "min-children", default_value_t = 1)]
    pub min_children: usize,
    /// Fewest idle children wanted.
    #[arg(long = "min-spare", default_value_t = 1)]
    pub min_spare: usize,
    /// Most idle children kept.
    #[arg(long = "max-spare", default_value_t = 2)]
    pub max_spare: usize,
    /// Connections a child serves before it is replaced.
    #[arg(long = "max-conn-per-child", default_value_t = 200)]
    pub max_conn_per_child: u32,
    /// Every child accepts on its own (the traditional algorithm, for comparison).
    #[arg(long = "round-robin")]
    pub round_robin: bool,
    /// Seconds a client may take to send its request.
    #[arg(long = "timeout-tcp", default_value_t = 30)]
    pub timeout_tcp: u32,
    /// Seconds a child may spend on one request before it is killed.
    #[arg(long = "timeout-child", default_value_t = 300)]
    pub timeout_child: u32,
    /// Largest message body accepted, in bytes.
    #[arg(long = "max-size", default_value_t = 16 * 1024 * 1024)]
    pub max_size: usize,
    /// Run as this user after binding.
    #[arg(short = 'u', long = "username")]
    pub username: Option<String>,
    /// Run as this group after binding.
    #[arg(short = 'g', long = "groupname")]
    pub groupname: Option<String>,
    /// Detach from the terminal.
    #[arg(short = 'd', long = "daemonize")]
    pub daemonize: bool,
    /// Write the master's pid here.
    #[arg(short = 'r', long = "pidfile", value_name = "PATH")]
    pub pidfile: Option<std::path::PathBuf>,
    /// Logging: a syslog facility (default mail), `stderr`, or a file path.
    #[arg(short = 's', long = "syslog", value_name = "FACILITY|stderr|PATH", default_value = "mail")]
    pub syslog: String,
    /// FreeBSD only: the kernel holds each TCP connection until its first data arrives
    /// (accept_filter(9) "dataready", needs accf_data loaded). Logged and ignored elsewhere.
    #[arg(long = "accept-filter", value_name = "NAME", value_parser = ["dataready"])]
    pub accept_filter: Option<String>,
    /// Rewrite a Prometheus text file with the statistics every few seconds.
    #[arg(long = "stats-file", value_name = "PATH")]
    pub stats_file: Option<std::path::PathBuf>,
    /// Accepted for spamd compatibility: sift always uses local tests only.
    #[arg(short = 'L', long = "local")]
    pub local: bool,
    /// Accepted for spamd compatibility: sift reads no per-user configuration.
    #[arg(short = 'x', long = "nouser-config")]
    pub nouser_config: bool,
    /// Accepted for spamd compatibility (learning is not supported yet).
    #[arg(short = 'l', long = "allow-tell")]
    pub allow_tell: bool,
    /// Accepted for spamd compatibility.
    #[arg(short = 'c', long = "create-prefs")]
    pub create_prefs: bool,
    /// Accepted for spamd compatibility.
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
