//! siftd for Linux: everything shared lives in siftd-common; this shell adds the
//! Linux-only pieces (parent-death signal).
#![deny(unsafe_code)]

mod sys;

use std::process::ExitCode;

use clap::Parser;
use siftd_common::cli::{Command, Options};
use siftd_common::daemon::{self, Platform};
use siftd_common::load::{load_config, RuleSources};
use siftd_common::{exit, lint, scan};
use sift_core::rules::RuleSet;

/// Linux's per-child setup.
struct Linux;

impl Platform for Linux {
    fn child_setup(&self, master: libc::pid_t) -> std::io::Result<()> {
        sys::die_with_parent(master)
    }
}

fn compile(sources: &RuleSources) -> Result<(sift_core::rules::Config, RuleSet), i32> {
    let config = load_config(sources).map_err(|e| {
        eprintln!("siftd: {e}");
        exit::CONFIG
    })?;
    let rules = RuleSet::compile(&config).map_err(|e| {
        eprintln!("siftd: {e}");
        exit::CONFIG
    })?;
    Ok((config, rules))
}

fn run(options: Options) -> i32 {
    let sources = options.rule_sources();
    if options.lint {
        return match compile(&sources) {
            Ok((config, rules)) => {
                let report = if options.json { lint::json(&config, &rules) } else { lint::text(&config, &rules) };
                print!("{report}");
                0
            }
            Err(code) => code,
        };
    }
    match &options.command {
        Some(Command::Scan { files }) => match compile(&sources) {
            Ok((_, rules)) => {
                let format = if options.json { scan::Format::Json } else { scan::Format::Text };
                scan::run(&rules, files, format)
            }
            Err(code) => code,
        },
        None => daemon::run(&options, &Linux),
    }
}

fn main() -> ExitCode {
    let code = run(Options::parse());
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
