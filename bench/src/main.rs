//! `spamc-load`: a spamc-protocol load generator. See the crate documentation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use sift_bench::corpus::Corpus;
use sift_bench::load::{self, Plan, Stop};
use sift_bench::protocol::Command;
use sift_bench::target::Target;

/// Exit status when the run went through but some requests failed.
const EXIT_REQUEST_ERRORS: u8 = 1;
/// Exit status for a bad command line, target or corpus.
const EXIT_USAGE: u8 = 2;

/// Sends a corpus to a spamd-compatible daemon from worker threads and reports
/// messages/s, MB/s, latency p50/p99/max and errors; the last line of output is JSON.
#[derive(Debug, Parser)]
#[command(name = "spamc-load", version)]
struct Options {
    /// The daemon: HOST:PORT, or a UNIX socket path.
    #[arg(short = 't', long, default_value = "127.0.0.1:783")]
    target: String,
    /// Message files or directories (walked; dot-files and `cmds` skipped). Repeatable.
    #[arg(long, required = true, value_name = "DIR")]
    corpus: Vec<PathBuf>,
    /// Requests in flight at once (one worker thread each).
    #[arg(short = 'c', long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=4096))]
    concurrency: u16,
    /// Seconds to run (after the warm-up).
    #[arg(short = 'd', long, default_value_t = 10.0, conflicts_with = "count")]
    duration: f64,
    /// Stop after this many measured requests instead of after a duration.
    #[arg(short = 'n', long)]
    count: Option<u64>,
    /// Seconds of unmeasured load first.
    #[arg(short = 'w', long, default_value_t = 0.0)]
    warmup: f64,
    /// CHECK, SYMBOLS, REPORT, PROCESS or PING.
    #[arg(long, default_value = "CHECK", value_parser = parse_command)]
    command: Command,
    /// Send the messages in path order instead of a fixed shuffled order.
    #[arg(long)]
    sorted: bool,
    /// Seed of the shuffled order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Send `User: NAME` with each request.
    #[arg(short = 'u', long)]
    user: Option<String>,
    /// Seconds allowed for connect and for each read and write.
    #[arg(long, default_value_t = 60.0)]
    timeout: f64,
    /// Print only the JSON line.
    #[arg(long)]
    json: bool,
}

fn parse_command(word: &str) -> Result<Command, String> {
    Command::parse(word).ok_or_else(|| format!("unknown command {word:?} (CHECK, SYMBOLS, REPORT, PROCESS, PING)"))
}

fn seconds(value: f64, what: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value).map_err(|_| format!("{what} must be a non-negative number of seconds, not {value}"))
}

fn main() -> ExitCode {
    let options = Options::parse();
    match run(&options) {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("spamc-load: {message}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn run(options: &Options) -> Result<u8, String> {
    let target = Target::parse(&options.target).map_err(|e| e.to_string())?;
    let stop = match options.count {
        Some(n) => Stop::Count(n),
        None => Stop::After(seconds(options.duration, "--duration")?),
    };
    let plan = Plan {
        target,
        command: options.command,
        concurrency: usize::from(options.concurrency),
        stop,
        warmup: seconds(options.warmup, "--warmup")?,
        timeout: seconds(options.timeout, "--timeout")?,
    };
    let mut corpus = Corpus::load(&options.corpus).map_err(|e| e.to_string())?;
    if !options.sorted {
        corpus.shuffle(options.seed);
    }
    if !options.json {
        println!("corpus: {} messages, {:.1} MB", corpus.messages.len(), corpus.bytes() as f64 / 1e6);
    }
    let requests = load::prepare(&corpus, plan.command, options.user.as_deref());
    drop(corpus);
    let summary = load::run(&plan, &requests);
    if !options.json {
        print!("{}", summary.human());
    }
    println!("{}", summary.json());
    Ok(if summary.error_total() > 0 { EXIT_REQUEST_ERRORS } else { 0 })
}
