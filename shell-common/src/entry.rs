//! The `siftd` program as every shell runs it: `--lint`, `scan` or the daemon. A shell's
//! `main` only supplies its [`Platform`].

use std::process::ExitCode;

use clap::Parser;
use sift_core::rules::{Config, RuleSet};

use crate::cli::{Command, Options};
use crate::daemon::{self, Platform};
use crate::load::{load_config, load_rules_with, RuleSources};
use crate::{exit, lint, scan};

/// Parses the command line and runs what it asks for; returns the process exit status.
pub fn main(platform: &dyn Platform) -> ExitCode {
    let code = run(Options::parse(), platform);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Loads the rules and checks what compiles, without building dense DFAs (see [`RuleSet::check`]).
fn check(sources: &RuleSources) -> Result<(Config, RuleSet), i32> {
    let config = load_config(sources).map_err(|e| {
        eprintln!("siftd: {e}");
        exit::CONFIG
    })?;
    let rules = RuleSet::check(&config).map_err(|e| {
        eprintln!("siftd: {e}");
        exit::CONFIG
    })?;
    Ok((config, rules))
}

/// The rules `scan` runs: through `--compile-cache` when given, as the daemon loads
/// them, so a script scanning file after file does not compile the rules each time.
fn scan_rules(sources: &RuleSources, cache: Option<&std::path::Path>) -> Result<RuleSet, i32> {
    let (rules, report) = load_rules_with(sources, cache).map_err(|e| {
        eprintln!("siftd: {e}");
        exit::CONFIG
    })?;
    if let Some(problem) = report.and_then(|r| r.problem) {
        eprintln!("siftd: compile cache: {problem}");
    }
    Ok(rules)
}

fn run(options: Options, platform: &dyn Platform) -> i32 {
    let sources = options.rule_sources();
    if options.lint {
        return match check(&sources) {
            Ok((config, rules)) => {
                let report = if options.json { lint::json(&config, &rules) } else { lint::text(&config, &rules) };
                print!("{report}");
                0
            }
            Err(code) => code,
        };
    }
    match &options.command {
        Some(Command::Scan { files }) => match scan_rules(&sources, options.daemon.compile_cache.as_deref()) {
            Ok(rules) => {
                let format = if options.json { scan::Format::Json } else { scan::Format::Text };
                let code = scan::run(&rules, files, format);
                // The process ends here: freeing the stock rules' automata piece by piece
                // would be 6% of a one-message scan's CPU, for nothing.
                std::mem::forget(rules);
                code
            }
            Err(code) => code,
        },
        None => daemon::run(&options, platform),
    }
}
