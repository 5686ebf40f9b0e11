//! Loading rule files from disk in SpamAssassin's order and compiling them.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use sift_core::rules::cf::{self, Includer, Parser};
use sift_core::rules::cache::DfaCache;
use sift_core::rules::jobs::Job;
use sift_core::rules::{CompileError, Config, RuleSet, DEFAULT_RULES};

/// Where rules come from: SpamAssassin's "default rules dir" and "site rules dir".
#[derive(Debug, Clone, Default)]
pub struct RuleSources {
    /// `-C DIR`: replaces the embedded default rules.
    pub config_paths: Vec<PathBuf>,
    /// `--siteconfigpath DIR`: read after the default rules (`*.pre` first of all).
    pub site_path: Option<PathBuf>,
}

/// Why rules could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// A rules directory or file does not exist or cannot be listed.
    Missing(PathBuf, std::io::Error),
    /// A rule file could not be read.
    Read(PathBuf, std::io::Error),
    /// A rule file could not be parsed.
    Parse(cf::ParseError),
    /// The rule set could not be compiled.
    Compile(CompileError),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Missing(p, e) => write!(f, "rules directory {}: {e}", p.display()),
            LoadError::Read(p, e) => write!(f, "rule file {}: {e}", p.display()),
            LoadError::Parse(e) => write!(f, "rule file {e}"),
            LoadError::Compile(e) => write!(f, "compiling rules: {e}"),
        }
    }
}

impl std::error::Error for LoadError {}

/// Resolves `include` paths against the including file's directory.
struct FileIncluder;

impl Includer for FileIncluder {
    fn read(&mut self, from: &str, path: &str) -> Result<Vec<u8>, String> {
        let base = Path::new(from).parent().unwrap_or_else(|| Path::new("."));
        let full = base.join(path);
        fs::read(&full).map_err(|e| format!("include {}: {e}", full.display()))
    }
}

/// Files of `dir` ending in `.ext`, in name order; a plain file stands for itself.
fn files_with_ext(dir: &Path, ext: &str) -> Result<Vec<PathBuf>, LoadError> {
    let meta = fs::metadata(dir).map_err(|e| LoadError::Missing(dir.to_path_buf(), e))?;
    if meta.is_file() {
        return Ok(if dir.extension().is_some_and(|e| e == ext) { vec![dir.to_path_buf()] } else { Vec::new() });
    }
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| LoadError::Missing(dir.to_path_buf(), e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == ext) && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

fn parse_files(parser: &mut Parser, files: &[PathBuf]) -> Result<(), LoadError> {
    for path in files {
        let text = fs::read(path).map_err(|e| LoadError::Read(path.clone(), e))?;
        let name = path.to_string_lossy();
        parser.parse_file(&name, &text, &mut FileIncluder).map_err(LoadError::Parse)?;
    }
    Ok(())
}

/// Reads the rule files as SpamAssassin does: site `*.pre`, default `*.pre`, default
/// `*.cf` (the embedded rules when no `-C` is given), then site `*.cf`.
pub fn load_config(sources: &RuleSources) -> Result<Config, LoadError> {
    let mut parser = Parser::new();
    if let Some(site) = &sources.site_path {
        parse_files(&mut parser, &files_with_ext(site, "pre")?)?;
    }
    for dir in &sources.config_paths {
        parse_files(&mut parser, &files_with_ext(dir, "pre")?)?;
    }
    if sources.config_paths.is_empty() {
        parser.parse_file("(embedded default rules)", DEFAULT_RULES.as_bytes(), &mut cf::NoIncludes).map_err(LoadError::Parse)?;
    }
    for dir in &sources.config_paths {
        parse_files(&mut parser, &files_with_ext(dir, "cf")?)?;
    }
    if let Some(site) = &sources.site_path {
        parse_files(&mut parser, &files_with_ext(site, "cf")?)?;
    }
    Ok(parser.finish())
}

/// Loads and compiles the rules named by `sources`.
pub fn load_rules(sources: &RuleSources) -> Result<RuleSet, LoadError> {
    let config = load_config(sources)?;
    RuleSet::compile(&config).map_err(LoadError::Compile)
}

/// Loads and compiles the rules, through the cache file at `cache_path` when there is
/// one ([`load_rules_cached`]); the report says how the cache served.
pub fn load_rules_with(sources: &RuleSources, cache_path: Option<&Path>) -> Result<(RuleSet, Option<CacheReport>), LoadError> {
    match cache_path {
        Some(path) => load_rules_cached(sources, path).map(|(rules, report)| (rules, Some(report))),
        None => load_rules(sources).map(|rules| (rules, None)),
    }
}

/// How a compile used its DFA cache file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheReport {
    /// Dense DFAs taken from the file.
    pub reused: usize,
    /// Patterns determinized (or found too big) and added.
    pub built: usize,
    /// Why the file was not read or not written back; the compile went on without it.
    pub problem: Option<String>,
}

/// Threads a batch of loading jobs runs on at most: past four, a start gains little.
const MAX_THREADS: usize = 4;

/// Loads and compiles the rules as [`load_rules`] does, taking dense DFAs from the
/// cache file at `cache_path` and writing it back (atomically) when the compile added
/// some. A missing, unreadable or stale file only costs time: it is reported, not fatal.
/// The file is read, and its automata rebuilt on every core, while the rule files parse.
pub fn load_rules_cached(sources: &RuleSources, cache_path: &Path) -> Result<(RuleSet, CacheReport), LoadError> {
    let (config, read) = std::thread::scope(|s| {
        let reading = s.spawn(|| read_cache(cache_path));
        let config = load_config(sources);
        let read = reading.join().unwrap_or_else(|_| (DfaCache::new(), Some(format!("{}: reading it failed", cache_path.display()))));
        (config, read)
    });
    let config = config?;
    let (mut cache, mut problem) = read;
    let rules = RuleSet::compile_cached(&config, &mut cache, &run_on_all_cores).map_err(LoadError::Compile)?;
    if cache.misses() > 0 {
        let tmp = cache_path.with_extension("tmp");
        if let Err(e) = fs::write(&tmp, cache.to_bytes()).and_then(|_| fs::rename(&tmp, cache_path)) {
            let _ = fs::remove_file(&tmp);
            problem = Some(format!("writing {}: {e}", cache_path.display()));
        }
    }
    Ok((rules, CacheReport { reused: cache.hits(), built: cache.misses(), problem }))
}

/// The cache file at `path` with its automata rebuilt, or an empty cache and why.
fn read_cache(path: &Path) -> (DfaCache, Option<String>) {
    let image = match fs::File::open(path).and_then(|file| crate::sys::map_file(&file)) {
        Ok(image) => image,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (DfaCache::new(), None),
        Err(e) => return (DfaCache::new(), Some(format!("{}: {e}", path.display()))),
    };
    match DfaCache::from_image(Box::new(image)) {
        Ok(mut cache) => {
            // The loading thread is parsing the rule files meanwhile, and joins in no
            // batch: one thread more than the cores keeps them busy once it is done.
            cache.prepare(&|jobs, alongside| run_on_threads(cores() + 1, jobs, alongside));
            (cache, None)
        }
        Err(e) => (DfaCache::new(), Some(format!("{}: {e}; rebuilding it", path.display()))),
    }
}

/// Runs `jobs` spread over the cores this process may use, and `alongside` on this
/// thread: each thread takes the next job not yet taken (this one once `alongside` is
/// done), so long jobs, first in a batch, balance.
pub fn run_on_all_cores(jobs: &mut [Job<'_>], alongside: &mut dyn FnMut()) {
    run_on_threads(cores(), jobs, alongside);
}

/// The cores a batch of jobs may use, at most [`MAX_THREADS`].
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, MAX_THREADS)
}

/// [`run_on_all_cores`] on `threads` threads, this one included.
fn run_on_threads(threads: usize, jobs: &mut [Job<'_>], alongside: &mut dyn FnMut()) {
    let helpers = threads.saturating_sub(1).min(jobs.len());
    if helpers == 0 {
        alongside();
        jobs.iter_mut().for_each(Job::run);
        return;
    }
    let queue: Vec<Mutex<&mut Job<'_>>> = jobs.iter_mut().map(Mutex::new).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        while let Some(job) = queue.get(next.fetch_add(1, Ordering::Relaxed)) {
            // Each job is taken by one thread only, so the lock is never contended.
            if let Ok(mut job) = job.lock() {
                job.run();
            }
        }
    };
    std::thread::scope(|s| {
        for _ in 0..helpers {
            s.spawn(work);
        }
        alongside();
        work();
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_core::scan::Scratch;

    #[test]
    fn run_on_all_cores_table() {
        // A cold and a warm compile through the threads scan as the plain compile does,
        // and the warm one takes every automaton from the cache.
        let rules = "body B /click here/\nbody L /foo(?=bar)/\nrawbody R /, foobar/\nuri U /example\\.com/\n\
                     header H Subject =~ /viagra/i\nheader T eval:check_for_missing_to_header()\nmeta M B && H\n";
        let config = cf::parse_str("t.cf", rules).expect("parse");
        let plain = RuleSet::compile(&config).expect("compile");
        let mut cache = DfaCache::new();
        let cold = RuleSet::compile_cached(&config, &mut cache, &run_on_all_cores).expect("cold compile");
        // Every lookup of the cold compile, found or added, is found by the warm one.
        let built = cache.hits() + cache.misses();
        let mut cache = DfaCache::from_bytes(&cache.to_bytes()).expect("own image reads back");
        cache.prepare(&run_on_all_cores);
        let warm = RuleSet::compile_cached(&config, &mut cache, &run_on_all_cores).expect("warm compile");
        assert_eq!((cache.hits(), cache.misses()), (built, 0));
        let cases: &[(&str, &[&str])] = &[
            ("Subject: cheap viagra\r\n\r\nclick here, foobar\r\n", &["B", "H", "L", "M", "R", "T"]),
            ("To: a@b.example\r\nSubject: hello\r\n\r\nsee http://example.com/\r\n", &["U"]),
        ];
        for (message, want) in cases {
            for set in [&plain, &cold, &warm] {
                let mut scratch = Scratch::new(set);
                let got: Vec<&str> = set.scan(message.as_bytes(), &mut scratch).hits().map(|h| h.name).collect();
                assert_eq!(&got, want, "{message}");
            }
        }
    }
}
