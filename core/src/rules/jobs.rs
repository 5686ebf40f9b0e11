//! Loading work any thread may run. Reading a compile cache and compiling hand their
//! independent pieces (rebuilding cached automata, building prefilter tables and the
//! eval tests' patterns) to the caller in batches: a caller with threads spreads each
//! batch over its cores, one without runs it in place ([`run_here`]). Core itself never
//! starts a thread.

use alloc::boxed::Box;
use alloc::vec::Vec;

use regex_automata::util::prefilter::Prefilter;

use super::backtrack::Backtrack;
use super::cache::{EntryWork, ProgramShelf};
use super::compile::{fast_prefilter, CompileError, LiteralTable, Matcher};
use super::eval::EvalData;
use super::literal::LiteralAutomaton;
use super::narrow::TablePart;
use super::unions::{self, Group, UnionPlan};
use super::Config;

/// One piece of loading work. Running it fills in its result; the cache or compile that
/// made it takes the result once the whole batch has run.
pub struct Job<'a>(pub(super) Work<'a>);

/// The kinds of work, each with the slot its result goes to.
pub(super) enum Work<'a> {
    /// A cache entry's dense DFA or NFA, rebuilt from the image.
    Entry(EntryWork<'a>),
    /// A search prefilter over these needles (several cache entries may share it); the
    /// inner `None`: no fast one.
    Prefilter { needles: &'a [Vec<u8>], built: Option<Option<Prefilter>> },
    /// A backtracking program read from its image into its cache entry; the inner
    /// `None`: it no longer reads.
    Backtrack { image: &'a [u8], ready: &'a mut Option<Option<Backtrack>> },
    /// The unions of one kind of a target's unfiltered patterns, from their regexes.
    Unions { plan: &'a UnionPlan, built: Option<Vec<Group>> },
    /// A target's Aho-Corasick prefilter.
    Table { table: &'a LiteralTable, built: Option<Result<Option<LiteralAutomaton>, CompileError>> },
    /// Dense DFAs to make narrow ([`super::narrow::NarrowDfa`]) where they fit, their
    /// tables into `part`.
    Narrow { matchers: Vec<&'a mut Matcher>, part: TablePart },
    /// What the eval tests need from the configuration; their fixed patterns' programs
    /// come from `shelf` when a compile cache lent it.
    Evals { config: &'a Config, shelf: ProgramShelf, built: Option<Box<EvalData>> },
}

impl Job<'_> {
    /// Does this piece of work; running it again does nothing.
    pub fn run(&mut self) {
        match &mut self.0 {
            Work::Entry(work) => work.run(),
            Work::Prefilter { needles, built } => {
                if built.is_none() {
                    *built = Some(fast_prefilter(needles));
                }
            }
            Work::Backtrack { image, ready } => {
                if ready.is_none() {
                    **ready = Some(Backtrack::read_image(image));
                }
            }
            Work::Unions { plan, built } => {
                if built.is_none() {
                    *built = Some(unions::group(plan));
                }
            }
            Work::Table { table, built } => {
                if built.is_none() {
                    *built = Some(table.automaton());
                }
            }
            Work::Narrow { matchers, part } => {
                for matcher in matchers.iter_mut() {
                    matcher.narrow(part);
                }
            }
            Work::Evals { config, shelf, built } => {
                if built.is_none() {
                    *built = Some(Box::new(EvalData::with_programs(config, shelf)));
                }
            }
        }
    }

    /// Runs this job when it builds a prefilter (which entries wait for).
    pub(super) fn run_if_prefilter(&mut self) {
        if matches!(self.0, Work::Prefilter { .. }) {
            self.run();
        }
    }

    /// The eval data this job built (built here if the batch skipped it), and the shelf
    /// of programs it read and added to.
    pub(super) fn into_evals(mut self) -> (EvalData, ProgramShelf) {
        self.run();
        match self.0 {
            Work::Evals { built: Some(data), shelf, .. } => (*data, shelf),
            _ => (EvalData::default(), ProgramShelf::default()),
        }
    }

    /// The unions this job grouped (grouped here if the batch skipped it).
    pub(super) fn into_unions(mut self) -> Vec<Group> {
        self.run();
        match self.0 {
            Work::Unions { built: Some(grouped), .. } => grouped,
            _ => Vec::new(),
        }
    }

    /// The prefilter table this job built (built here if the batch skipped it).
    pub(super) fn into_table(mut self) -> Result<Option<LiteralAutomaton>, CompileError> {
        self.run();
        match self.0 {
            Work::Table { built: Some(table), .. } => table,
            _ => Ok(None),
        }
    }
}

/// How a caller runs a batch of jobs together with `alongside`, work of the loading
/// thread itself that may borrow what the jobs do not: when it returns, every job has
/// run and so has `alongside`. A batch comes with its longest jobs first, so taking them
/// in order balances the threads.
pub type Spread<'s> = &'s dyn Fn(&mut [Job<'_>], &mut dyn FnMut());

/// Runs `alongside`, then the jobs one after another, all on this thread.
pub fn run_here(jobs: &mut [Job<'_>], alongside: &mut dyn FnMut()) {
    alongside();
    jobs.iter_mut().for_each(Job::run);
}
