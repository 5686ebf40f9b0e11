//! The command line, with spamd's option names where spamd has the option.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::load::RuleSources;

/// siftd: a small, fast drop-in for SpamAssassin's spamd.
#[derive(Debug, Parser)]
#[command(name = "siftd", version, about)]
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
