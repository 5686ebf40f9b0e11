//! Dense DFAs kept between compiles, with what each pattern requires of a text.
//! Determinizing and parsing are most of what compiling the stock rules costs; a daemon
//! that restarts or reloads with mostly the same patterns takes their DFAs and literals
//! from here instead. Entries are keyed by a hash of the pattern as compiled, so an
//! edited rule simply misses. Reading and writing the bytes is the caller's job.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use regex_automata::dfa::dense;
use regex_automata::nfa::thompson::{self, State, Transition};
use regex_automata::util::look::Look;
use regex_automata::util::prefilter::Prefilter;
use regex_automata::util::primitives::StateID;

use super::backtrack::{Backtrack, Program};
use super::compile::{fast_prefilter, MatchNeeds, MatchRoom, AUTOMATA_REVISION};
use super::jobs::{Job, Spread, Work};
use super::literal::{ExactLiterals, Required, RequiredByte};
use super::repeat::Openings;

/// First bytes of a cache image.
const MAGIC: &[u8; 8] = b"SIFTDFA\0";
/// Layout version of the image; a different one is ignored whole.
const FORMAT: u32 = 16;
/// Entry flag: every match of the pattern starts with one of its required literals.
const STARTS_MATCH: u32 = 1;
/// Entry flag: every match holds a byte above 0x7f.
const NON_ASCII: u32 = 2;
/// Entry flag: no match holds a `\n` (`MatchRoom::one_line`).
const ONE_LINE: u32 = 4;
/// Entry flag: a match may be empty (`MatchRoom::empty`).
const MATCHES_EMPTY: u32 = 8;
/// Entry flags: the bits above this hold how many times the pattern repeats the kept
/// NFA (none: once, the NFA is the pattern's).
const TIMES_SHIFT: u32 = 8;
/// Bytes before the part of an image its checksum covers: magic, format, checksum.
const HEADER: usize = 20;
/// Entries in an image, at most: a bound on what a corrupt header can ask for.
const MAX_ENTRIES: usize = 1 << 20;
/// Literals in one entry's list, at most: the same bound for a list.
const MAX_LIST: usize = 1 << 12;
/// Marks an absent list in an image.
const ABSENT: u32 = u32::MAX;
/// States in one kept NFA, at most.
const MAX_NFA_STATES: usize = 1 << 22;
/// The tag of a match state in an NFA image.
const MATCH_STATE: u8 = 6;
/// Patterns in one kept NFA, at most (a union's members).
const MAX_NFA_PATTERNS: usize = 64;

/// Identifies one pattern as compiled: what it is, how its lines are cut, which
/// compiler built it.
pub(crate) type Key = [u8; 16];

/// What a compile found for one pattern.
struct Entry {
    /// The dense DFA's serialized bytes (native endian); `None`: too big for a dense
    /// DFA, it runs lazily, no need to try again.
    dfa: Option<Stored>,
    /// For a lazy one, its NFA's image (`nfa_image`): rebuilt without parsing.
    nfa: Option<Stored>,
    /// How many times the pattern repeats `nfa`'s (1: `nfa` is the pattern's own).
    times: u32,
    /// When it repeats: the openings of `nfa`'s matches (`Openings::write_image`).
    openings: Option<Stored>,
    required: Option<Required>,
    needs: MatchNeeds,
    /// The literals of [`Cached::exact`].
    exact: Option<Vec<Vec<u8>>>,
    prefix: Option<Vec<Vec<u8>>>,
    /// Its automata rebuilt ahead of the compile by [`DfaCache::prepare`]; the inner
    /// `None`: they no longer rebuild.
    ready: Option<Option<Cached>>,
}

/// Bytes of an entry: in the image read at start (not copied), or added since.
enum Stored {
    Image(core::ops::Range<usize>),
    Owned(Vec<u8>),
}

/// One pattern's cached outcome, rebuilt and ready to scan with.
pub(crate) struct Cached {
    /// `None`: too big for a dense DFA.
    pub(crate) dfa: Option<dense::DFA<Vec<u32>>>,
    /// When there is no dense DFA: the NFA its lazy DFA runs, if it was kept.
    pub(crate) nfa: Option<thompson::NFA>,
    /// How many times the pattern repeats `nfa`'s (1: `nfa` is the pattern's own).
    pub(crate) times: u32,
    /// When it repeats: how `nfa`'s matches open, if the cache kept it.
    pub(crate) openings: Option<Openings>,
    /// Its prefilter literals (see `literal::requirement`).
    pub(crate) required: Option<Required>,
    /// What a text needs to hold one of its matches.
    pub(crate) needs: MatchNeeds,
    /// For a line pattern counting many hits: its literals, when it is only those.
    pub(crate) exact: Option<alloc::boxed::Box<ExactLiterals>>,
    /// The search prefilter over the literals every match starts with.
    pub(crate) prefilter: Option<Prefilter>,
}

/// A backtracking compile kept in the cache.
struct BacktrackEntry {
    /// Its image (`Backtrack::write_image`).
    image: Stored,
    /// Read ahead of the compile by [`DfaCache::prepare`]; the inner `None`: it no longer reads.
    ready: Option<Option<Backtrack>>,
}

/// Rebuilding one entry's automata from the image, as a [`Job`]. Its prefilter is
/// built by a job of its own, shared by the entries with the same needles.
pub(crate) struct EntryWork<'a> {
    image: &'a [u8],
    kept: Kept<'a>,
    required: &'a Option<Required>,
    needs: &'a MatchNeeds,
    exact: &'a Option<Vec<Vec<u8>>>,
    ready: &'a mut Option<Option<Cached>>,
    /// Index of the prefilter's job in the batch.
    prefilter_job: Option<usize>,
}

impl EntryWork<'_> {
    pub(crate) fn run(&mut self) {
        if self.ready.is_none() {
            *self.ready = Some(rebuild_automata(self.image, self.kept, self.required, self.needs, self.exact));
        }
    }
}

/// The automata `entry` keeps, rebuilt; `None` when its DFA no longer deserializes.
fn rebuild(image: &[u8], entry: &Entry) -> Option<Cached> {
    let kept = Kept { dfa: &entry.dfa, nfa: &entry.nfa, times: entry.times, openings: &entry.openings };
    let mut cached = rebuild_automata(image, kept, &entry.required, &entry.needs, &entry.exact)?;
    cached.prefilter = entry.prefix.as_deref().and_then(fast_prefilter);
    Some(cached)
}

/// The automata an entry keeps, as stored.
#[derive(Clone, Copy)]
struct Kept<'a> {
    dfa: &'a Option<Stored>,
    nfa: &'a Option<Stored>,
    times: u32,
    openings: &'a Option<Stored>,
}

/// An entry's DFA or NFA (with the times the pattern repeats it and their openings)
/// rebuilt, without its prefilter.
fn rebuild_automata(
    image: &[u8],
    kept: Kept<'_>,
    required: &Option<Required>,
    needs: &MatchNeeds,
    exact: &Option<Vec<Vec<u8>>>,
) -> Option<Cached> {
    let dfa = match kept.dfa {
        None => None,
        Some(stored) => Some(dense::DFA::from_bytes(stored.bytes(image)).ok().map(|(dfa, _)| dfa.to_owned())?),
    };
    let nfa = kept.nfa.as_ref().and_then(|stored| nfa_from_image(stored.bytes(image)));
    let openings = kept.openings.as_ref().and_then(|stored| Openings::read_image(stored.bytes(image)));
    Some(Cached {
        dfa,
        nfa,
        times: kept.times,
        openings,
        required: required.clone(),
        needs: needs.clone(),
        exact: exact.clone().and_then(ExactLiterals::from_literals).map(alloc::boxed::Box::new),
        prefilter: None,
    })
}

/// Why a cache image was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheError {
    /// The image does not start with the cache's magic bytes.
    NotACache,
    /// The image was written by another layout version.
    Version(u32),
    /// The image ends inside an entry or its header lies.
    Truncated,
    /// The image's bytes do not add up to its checksum: damaged on disk or in transit.
    Damaged,
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::NotACache => f.write_str("not a sift DFA cache"),
            CacheError::Version(v) => write!(f, "cache layout {v}, this siftd reads {FORMAT}"),
            CacheError::Truncated => f.write_str("cache image truncated or corrupt"),
            CacheError::Damaged => f.write_str("cache image damaged (checksum differs)"),
        }
    }
}

/// The bytes of a cache image, owned by whoever read them: a `Vec`, or a file mapping
/// that a shell keeps in the page cache instead of copying.
pub type ImageBytes = alloc::boxed::Box<dyn AsRef<[u8]> + Send + Sync>;

/// Dense DFAs from earlier compiles, and those the latest compile added.
pub struct DfaCache {
    /// The image the cache was read from; entries point into it.
    image: ImageBytes,
    entries: BTreeMap<Key, Entry>,
    /// Backtracking compiles (`Backtrack::write_image`), keyed by the Perl pattern.
    backtracks: BTreeMap<Key, BacktrackEntry>,
    /// The eval tests' fixed patterns, compiled: lent to the job building the eval data.
    evals: BTreeMap<Key, BacktrackEntry>,
    /// Keys the latest compile asked for: only they are written back.
    used: BTreeMap<Key, ()>,
    hits: usize,
    misses: usize,
}

impl Default for DfaCache {
    fn default() -> DfaCache {
        DfaCache {
            image: alloc::boxed::Box::new(Vec::new()),
            entries: BTreeMap::new(),
            backtracks: BTreeMap::new(),
            evals: BTreeMap::new(),
            used: BTreeMap::new(),
            hits: 0,
            misses: 0,
        }
    }
}

impl Stored {
    fn bytes<'a>(&'a self, image: &'a [u8]) -> &'a [u8] {
        match self {
            Stored::Image(range) => image.get(range.clone()).unwrap_or_default(),
            Stored::Owned(bytes) => bytes,
        }
    }
}

impl DfaCache {
    /// An empty cache: every pattern misses and is remembered.
    pub fn new() -> DfaCache {
        DfaCache::default()
    }

    /// Reads an image written by [`DfaCache::to_bytes`].
    pub fn from_bytes(image: &[u8]) -> Result<DfaCache, CacheError> {
        DfaCache::from_image(alloc::boxed::Box::new(image.to_vec()))
    }

    /// Reads an image written by [`DfaCache::to_bytes`], keeping it: its DFAs are not
    /// copied until a compile takes them (a start reads tens of MiB). DFAs are read in
    /// place, so the image must start 4-aligned (a `Vec` or a page does).
    pub fn from_image(image: ImageBytes) -> Result<DfaCache, CacheError> {
        let mut entries = BTreeMap::new();
        let mut r = Reader { bytes: (*image).as_ref(), pos: 0 };
        if r.take(MAGIC.len())? != MAGIC {
            return Err(CacheError::NotACache);
        }
        let format = r.u32()?;
        if format != FORMAT {
            return Err(CacheError::Version(format));
        }
        let mut sum = [0u8; 8];
        sum.copy_from_slice(r.take(8)?);
        if u64::from_le_bytes(sum) != checksum((*image).as_ref().get(HEADER..).unwrap_or_default()) {
            return Err(CacheError::Damaged);
        }
        let count = r.u32()? as usize;
        if count > MAX_ENTRIES {
            return Err(CacheError::Truncated);
        }
        for _ in 0..count {
            let key = r.key()?;
            let dfa = match r.u32()? {
                0 => None,
                _ => {
                    let len = r.u32()? as usize;
                    r.take(padding(r.pos))?;
                    let start = r.pos;
                    r.take(len)?;
                    Some(Stored::Image(start..r.pos))
                }
            };
            let min_hits = r.u32()?;
            let flags = r.u32()?;
            let starts_match = flags & STARTS_MATCH != 0;
            let required = r.list()?.map(|literals| Required { literals, min_hits, starts_match });
            let byte = match r.list()? {
                Some(bytes) => bytes.into_iter().next().map(RequiredByte::AnyOf),
                None => (flags & NON_ASCII != 0).then_some(RequiredByte::NonAscii),
            };
            let needs = MatchNeeds { byte, room: MatchRoom { len: r.u32()?, one_line: flags & ONE_LINE != 0, empty: flags & MATCHES_EMPTY != 0 } };
            let exact = r.list()?;
            let prefix = r.list()?;
            let nfa = r.optional_bytes()?;
            let openings = r.optional_bytes()?;
            let times = (flags >> TIMES_SHIFT).max(1);
            entries.insert(key, Entry { dfa, nfa, times, openings, required, needs, exact, prefix, ready: None });
        }
        let backtracks = r.programs()?;
        let evals = r.programs()?;
        Ok(DfaCache { image, entries, backtracks, evals, ..DfaCache::default() })
    }

    /// Rebuilds every entry's automata ahead of a compile (which then only takes them),
    /// as one batch of jobs for `spread`: a caller with threads spreads it over the cores.
    /// Entries with the same prefilter needles share one prefilter.
    pub fn prepare(&mut self, spread: Spread<'_>) {
        let image = (*self.image).as_ref();
        let mut prefilters: Vec<Job<'_>> = Vec::new();
        let mut sets: BTreeMap<&[Vec<u8>], usize> = BTreeMap::new();
        let mut rest: Vec<Job<'_>> = Vec::new();
        for Entry { dfa, nfa, times, openings, required, needs, exact, prefix, ready } in self.entries.values_mut() {
            let prefilter_job = prefix.as_deref().map(|needles| {
                *sets.entry(needles).or_insert_with(|| {
                    prefilters.push(Job(Work::Prefilter { needles, built: None }));
                    prefilters.len() - 1
                })
            });
            let kept = Kept { dfa, nfa, times: *times, openings };
            rest.push(Job(Work::Entry(EntryWork { image, kept, required, needs, exact, ready, prefilter_job })));
        }
        for BacktrackEntry { image: stored, ready } in self.backtracks.values_mut().chain(self.evals.values_mut()) {
            rest.push(Job(Work::Backtrack { image: stored.bytes(image), ready }));
        }
        // The prefilters first: they take longest, and entries name them by index.
        let mut jobs = prefilters;
        jobs.append(&mut rest);
        spread(&mut jobs, &mut || {});
        // A prefilter the batch skipped is built here: an entry never loses its prefilter.
        let built: Vec<Option<Prefilter>> = jobs
            .iter_mut()
            .map(|job| {
                job.run_if_prefilter();
                match &job.0 {
                    Work::Prefilter { built, .. } => built.clone().flatten(),
                    _ => None,
                }
            })
            .collect();
        for job in &mut jobs {
            if let Work::Entry(work) = &mut job.0 {
                if let (Some(i), Some(Some(cached))) = (work.prefilter_job, work.ready.as_mut()) {
                    cached.prefilter = built.get(i).cloned().flatten();
                }
            }
        }
    }

    /// The image of every entry the latest compile used or added, for the next start.
    pub fn to_bytes(&self) -> Vec<u8> {
        let image = (*self.image).as_ref();
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        let kept: Vec<(&Key, &Entry)> = self.entries.iter().filter(|(k, _)| self.used.contains_key(*k)).collect();
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&(kept.len() as u32).to_le_bytes());
        for (key, entry) in kept {
            out.extend_from_slice(key);
            match &entry.dfa {
                None => out.extend_from_slice(&0u32.to_le_bytes()),
                Some(stored) => {
                    let bytes = stored.bytes(image);
                    out.extend_from_slice(&1u32.to_le_bytes());
                    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                    // DFAs are read in place: their words start 4-aligned in the image.
                    out.resize(out.len() + padding(out.len()), 0);
                    out.extend_from_slice(bytes);
                }
            }
            out.extend_from_slice(&entry.required.as_ref().map_or(0, |r| r.min_hits).to_le_bytes());
            let mut flags = if entry.required.as_ref().is_some_and(|r| r.starts_match) { STARTS_MATCH } else { 0 };
            if entry.needs.byte == Some(RequiredByte::NonAscii) {
                flags |= NON_ASCII;
            }
            if entry.needs.room.one_line {
                flags |= ONE_LINE;
            }
            if entry.needs.room.empty {
                flags |= MATCHES_EMPTY;
            }
            if entry.times > 1 {
                flags |= entry.times << TIMES_SHIFT;
            }
            out.extend_from_slice(&flags.to_le_bytes());
            put_list(&mut out, entry.required.as_ref().map(|r| r.literals.as_slice()));
            match &entry.needs.byte {
                Some(RequiredByte::AnyOf(bytes)) => put_list(&mut out, Some(core::slice::from_ref(bytes))),
                _ => put_list(&mut out, None),
            }
            out.extend_from_slice(&entry.needs.room.len.to_le_bytes());
            put_list(&mut out, entry.exact.as_deref());
            put_list(&mut out, entry.prefix.as_deref());
            put_optional_bytes(&mut out, entry.nfa.as_ref().map(|stored| stored.bytes(image)));
            put_optional_bytes(&mut out, entry.openings.as_ref().map(|stored| stored.bytes(image)));
        }
        for programs in [&self.backtracks, &self.evals] {
            let kept: Vec<(&Key, &[u8])> =
                programs.iter().filter(|(k, _)| self.used.contains_key(*k)).map(|(k, e)| (k, e.image.bytes(image))).collect();
            out.extend_from_slice(&(kept.len() as u32).to_le_bytes());
            for (key, image) in kept {
                out.extend_from_slice(key);
                put_bytes(&mut out, image);
            }
        }
        let sum = checksum(out.get(HEADER..).unwrap_or_default());
        if let Some(slot) = out.get_mut(HEADER - 8..HEADER) {
            slot.copy_from_slice(&sum.to_le_bytes());
        }
        out
    }

    /// Patterns the latest compile found here.
    pub fn hits(&self) -> usize {
        self.hits
    }

    /// Patterns the latest compile had to determinize (or try to) and added.
    pub fn misses(&self) -> usize {
        self.misses
    }

    /// Forgets the counts and marks of the previous compile.
    pub(crate) fn start_compile(&mut self) {
        self.used.clear();
        self.hits = 0;
        self.misses = 0;
    }

    /// The cached outcome for `key`, `None` when unknown (or its DFA no longer deserializes).
    pub(crate) fn get(&mut self, key: &Key) -> Option<Cached> {
        let entry = self.entries.get_mut(key)?;
        let found = match entry.ready.take() {
            Some(ready) => ready?,
            None => rebuild((*self.image).as_ref(), entry)?,
        };
        self.used.insert(*key, ());
        self.hits += 1;
        Some(found)
    }

    /// The backtracking compile cached for `key`, `None` when unknown or unreadable.
    pub(crate) fn get_backtrack(&mut self, key: &Key) -> Option<Backtrack> {
        let entry = self.backtracks.get_mut(key)?;
        let found = match entry.ready.take() {
            Some(ready) => ready?,
            None => Backtrack::read_image(entry.image.bytes((*self.image).as_ref()))?,
        };
        self.used.insert(*key, ());
        self.hits += 1;
        Some(found)
    }

    /// Lends the eval tests' programs to the job that builds the eval data while the
    /// rest of the compile goes on; [`DfaCache::return_programs`] takes them back.
    pub(crate) fn lend_programs(&mut self) -> ProgramShelf {
        let image = (*self.image).as_ref();
        let mut entries = core::mem::take(&mut self.evals);
        for entry in entries.values_mut() {
            if entry.ready.is_none() {
                entry.ready = Some(Backtrack::read_image(entry.image.bytes(image)));
            }
        }
        ProgramShelf { lent: true, entries, ..ProgramShelf::default() }
    }

    /// Takes back what [`DfaCache::lend_programs`] lent, with the programs compiled since.
    pub(crate) fn return_programs(&mut self, shelf: ProgramShelf) {
        self.evals = shelf.entries;
        for key in shelf.used {
            self.used.insert(key, ());
        }
        self.hits += shelf.found;
        self.misses += shelf.added;
    }

    /// Leaves `key` out of the next image: an automaton the compile built and then did
    /// not use (a lazy DFA traded for a dense screen), which a start would rebuild for
    /// nothing.
    pub(crate) fn forget(&mut self, key: &Key) {
        self.used.remove(key);
    }

    /// Records the backtracking compile of `key`.
    pub(crate) fn put_backtrack(&mut self, key: Key, compiled: &Backtrack) {
        let mut image = Vec::new();
        compiled.write_image(&mut image);
        self.backtracks.insert(key, BacktrackEntry { image: Stored::Owned(image), ready: None });
        self.used.insert(key, ());
        self.misses += 1;
    }

    /// Records what compiling `key` gave: its dense DFA (`None`: too big), else the
    /// NFA of a lazy DFA with the times the pattern repeats it (1: the pattern's own)
    /// and, when it repeats, how the NFA's matches open; its required literals and its
    /// prefix literals.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn put(
        &mut self,
        key: Key,
        dfa: Option<&dense::DFA<Vec<u32>>>,
        nfa: Option<(&thompson::NFA, u32)>,
        openings: Option<&Openings>,
        required: Option<&Required>,
        needs: &MatchNeeds,
        exact: Option<&ExactLiterals>,
        prefix: Option<&[Vec<u8>]>,
    ) {
        let dfa = dfa.map(|d| {
            let (bytes, padding) = d.to_bytes_native_endian();
            Stored::Owned(bytes.get(padding..).unwrap_or_default().to_vec())
        });
        let entry = Entry {
            dfa,
            nfa: nfa.and_then(|(nfa, _)| nfa_image(nfa)).map(Stored::Owned),
            times: nfa.map_or(1, |(_, times)| times),
            openings: openings.map(|o| {
                let mut image = Vec::with_capacity(Openings::IMAGE_LEN);
                o.write_image(&mut image);
                Stored::Owned(image)
            }),
            required: required.cloned(),
            needs: needs.clone(),
            exact: exact.map(|e| e.literals().to_vec()),
            prefix: prefix.map(<[_]>::to_vec),
            ready: None,
        };
        self.entries.insert(key, entry);
        self.used.insert(key, ());
        self.misses += 1;
    }
}

/// Compiled backtracking programs of the eval tests, lent by a cache to the job building
/// the eval data: it runs beside the rule loop, which holds the cache. The default shelf,
/// with no cache behind it, only compiles.
#[derive(Default)]
pub(crate) struct ProgramShelf {
    /// Lent by a cache: programs are looked up and new ones kept.
    lent: bool,
    entries: BTreeMap<Key, BacktrackEntry>,
    used: Vec<Key>,
    found: usize,
    added: usize,
}

impl ProgramShelf {
    /// The program of eval pattern `pattern` (`icase`: Perl's `/i`): from the shelf, or
    /// `compile`d and shelved for the next start.
    pub(crate) fn program<E>(&mut self, pattern: &str, icase: bool, compile: impl FnOnce() -> Result<Program, E>) -> Result<Program, E> {
        if !self.lent {
            return compile();
        }
        let key = key(&[
            b"eval",
            pattern.as_bytes(),
            &[u8::from(icase)],
            &AUTOMATA_REVISION.to_le_bytes(),
            env!("CARGO_PKG_VERSION").as_bytes(),
        ]);
        self.used.push(key);
        if let Some(entry) = self.entries.get_mut(&key) {
            match entry.ready.take() {
                Some(Some(found)) => {
                    self.found += 1;
                    return Ok(found.program);
                }
                // Taken by an earlier request for the same pattern (the eval tests ask
                // for two twice): compiled again, its image stays as it was.
                None => {
                    self.found += 1;
                    return compile();
                }
                // Unreadable: compiled and shelved anew below.
                Some(None) => {}
            }
        }
        let compiled = Backtrack { relaxed: String::new(), program: compile()? };
        let mut image = Vec::new();
        compiled.write_image(&mut image);
        self.entries.insert(key, BacktrackEntry { image: Stored::Owned(image), ready: None });
        self.added += 1;
        Ok(compiled.program)
    }
}

/// A 128-bit key from `parts`: two multiply-xorshift hashes with different constants,
/// fed eight bytes at a time (a start hashes megabytes of pattern text), each part
/// length-prefixed so their boundaries count.
pub(crate) fn key(parts: &[&[u8]]) -> Key {
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    let mut feed = |word: u64| {
        a = (a ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        a ^= a >> 32;
        b = (b ^ word.rotate_left(23)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        b ^= b >> 29;
    };
    for part in parts {
        feed(part.len() as u64);
        let mut words = part.chunks_exact(8);
        for w in &mut words {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            feed(u64::from_le_bytes(word));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word.get_mut(..rest.len()).unwrap_or_default().copy_from_slice(rest);
            feed(u64::from_le_bytes(word));
        }
    }
    let finish = |mut h: u64, k: u64| {
        h ^= h >> 33;
        h = h.wrapping_mul(k);
        h ^ (h >> 31)
    };
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&finish(a, 0xff51_afd7_ed55_8ccd).to_le_bytes());
    out[8..].copy_from_slice(&finish(b, 0xc4ce_b9fe_1a85_ec53).to_le_bytes());
    out
}

/// An NFA's states as bytes, for [`nfa_from_image`]: one pattern or a union's few, no
/// capture states (the lazy DFAs never need them); `None` for any other NFA.
fn nfa_image(nfa: &thompson::NFA) -> Option<Vec<u8>> {
    if nfa.is_utf8() || nfa.is_reverse() {
        return None;
    }
    let starts: Vec<StateID> = nfa.patterns().map(|p| nfa.start_pattern(p)).collect::<Option<_>>()?;
    states_image(nfa.states(), nfa.start_anchored(), nfa.start_unanchored(), &starts)
}

/// The image [`nfa_image`] makes of an NFA of `states`, its two starts and each
/// pattern's start: also how [`super::nfa`] rebuilds the NFAs it changes.
pub(super) fn states_image(states: &[State], anchored: StateID, unanchored: StateID, pattern_starts: &[StateID]) -> Option<Vec<u8>> {
    if !(1..=MAX_NFA_PATTERNS).contains(&pattern_starts.len()) {
        return None;
    }
    let mut out = Vec::with_capacity(states.len() * 8);
    let id = |s: StateID| s.as_u32().to_le_bytes();
    for word in [states.len() as u32, anchored.as_u32(), unanchored.as_u32(), pattern_starts.len() as u32] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    for &start in pattern_starts {
        out.extend_from_slice(&id(start));
    }
    for state in states {
        match state {
            State::ByteRange { trans } => {
                out.push(0);
                out.extend_from_slice(&[trans.start, trans.end]);
                out.extend_from_slice(&id(trans.next));
            }
            State::Sparse(sparse) => {
                out.push(1);
                out.extend_from_slice(&(sparse.transitions.len() as u32).to_le_bytes());
                for t in sparse.transitions.iter() {
                    out.extend_from_slice(&[t.start, t.end]);
                    out.extend_from_slice(&id(t.next));
                }
            }
            State::Look { look, next } => {
                out.push(2);
                out.extend_from_slice(&look.as_repr().to_le_bytes());
                out.extend_from_slice(&id(*next));
            }
            State::Union { alternates } => {
                out.push(3);
                out.extend_from_slice(&(alternates.len() as u32).to_le_bytes());
                for a in alternates.iter() {
                    out.extend_from_slice(&id(*a));
                }
            }
            State::BinaryUnion { alt1, alt2 } => {
                out.push(4);
                out.extend_from_slice(&id(*alt1));
                out.extend_from_slice(&id(*alt2));
            }
            State::Fail => out.push(5),
            State::Match { .. } => out.push(MATCH_STATE),
            State::Dense(_) | State::Capture { .. } => return None,
        }
    }
    Some(out)
}

/// The NFA an image of [`nfa_image`] describes, rebuilt state for state; `None` when
/// the image is not one (every state id is checked before the builder sees it). A
/// pattern's states end with its match state, so each match closes its pattern and
/// opens the next.
pub(super) fn nfa_from_image(image: &[u8]) -> Option<thompson::NFA> {
    let mut r = Reader { bytes: image, pos: 0 };
    let count = r.u32().ok()? as usize;
    if count == 0 || count > MAX_NFA_STATES {
        return None;
    }
    let (anchored, unanchored) = (read_id(&mut r, count)?, read_id(&mut r, count)?);
    let patterns = read_many(&mut r, 1..=MAX_NFA_PATTERNS, |r| read_id(r, count))?;
    let mut b = thompson::Builder::new();
    b.set_utf8(false);
    b.start_pattern().ok()?;
    let mut open = patterns.iter();
    let mut start = open.next().copied();
    for _ in 0..count {
        let is_match = r.bytes.get(r.pos) == Some(&MATCH_STATE);
        if is_match && start.is_none() {
            return None; // more match states than patterns
        }
        read_state(&mut r, count, &mut b)?;
        if let (true, Some(id)) = (is_match, start) {
            b.finish_pattern(id).ok()?;
            start = open.next().copied();
            if start.is_some() {
                b.start_pattern().ok()?;
            }
        }
    }
    if r.pos != image.len() || start.is_some() {
        return None;
    }
    let nfa = b.build(anchored, unanchored).ok()?;
    (nfa.states().len() == count).then_some(nfa)
}

/// A state id of an NFA image: below `count`, the NFA's number of states.
fn read_id(r: &mut Reader<'_>, count: usize) -> Option<StateID> {
    let v = r.u32().ok()? as usize;
    if v < count {
        StateID::new(v).ok()
    } else {
        None
    }
}

/// A count-prefixed list of an NFA image, its length within `allowed`.
fn read_many<T>(
    r: &mut Reader<'_>,
    allowed: core::ops::RangeInclusive<usize>,
    mut item: impl FnMut(&mut Reader<'_>) -> Option<T>,
) -> Option<Vec<T>> {
    let n = r.u32().ok()? as usize;
    if !allowed.contains(&n) {
        return None;
    }
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        items.push(item(r)?);
    }
    Some(items)
}

/// A byte-range transition of an NFA image.
fn read_transition(r: &mut Reader<'_>, count: usize) -> Option<Transition> {
    let range = r.take(2).ok()?;
    let (start, end) = (*range.first()?, *range.get(1)?);
    if start > end {
        return None;
    }
    Some(Transition { start, end, next: read_id(r, count)? })
}

/// Reads one state of an NFA image and adds it to `b`.
fn read_state(r: &mut Reader<'_>, count: usize, b: &mut thompson::Builder) -> Option<StateID> {
    let tag = *r.take(1).ok()?.first()?;
    let added = match tag {
        0 => b.add_range(read_transition(r, count)?),
        1 => {
            let transitions = read_many(r, 2..=256, |r| read_transition(r, count))?;
            // Ranges in order and apart, as the NFA's searches assume.
            if transitions.windows(2).any(|w| w.first().map(|a| a.end) >= w.get(1).map(|b| b.start)) {
                return None;
            }
            b.add_sparse(transitions)
        }
        2 => {
            let look = Look::from_repr(r.u32().ok()?)?;
            b.add_look(read_id(r, count)?, look)
        }
        3 => b.add_union(read_many(r, 3..=count, |r| read_id(r, count))?),
        4 => {
            let (alt1, alt2) = (read_id(r, count)?, read_id(r, count)?);
            b.add_union(alloc::vec![alt1, alt2])
        }
        5 => b.add_fail(),
        MATCH_STATE => b.add_match(),
        _ => return None,
    };
    added.ok()
}

/// A 64-bit checksum of `bytes`, eight at a time: a damaged image is refused (and
/// rebuilt) instead of handing damaged automata to the scan.
fn checksum(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h: u64 = bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(word)).wrapping_mul(K);
        h ^= h >> 29;
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(K);
        h ^= h >> 29;
    }
    h
}

/// Bytes that bring `pos` to a multiple of 4.
fn padding(pos: usize) -> usize {
    (4 - pos % 4) % 4
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Present bytes as 1 and `put_bytes`, absent ones as 0 (read by `Reader::optional_bytes`).
fn put_optional_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => out.extend_from_slice(&0u32.to_le_bytes()),
        Some(bytes) => {
            out.extend_from_slice(&1u32.to_le_bytes());
            put_bytes(out, bytes);
        }
    }
}

fn put_list(out: &mut Vec<u8>, list: Option<&[Vec<u8>]>) {
    match list {
        None => out.extend_from_slice(&ABSENT.to_le_bytes()),
        Some(items) => {
            out.extend_from_slice(&(items.len() as u32).to_le_bytes());
            for item in items {
                put_bytes(out, item);
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CacheError> {
        let end = self.pos.checked_add(n).ok_or(CacheError::Truncated)?;
        let slice = self.bytes.get(self.pos..end).ok_or(CacheError::Truncated)?;
        self.pos = end;
        Ok(slice)
    }

    /// Bytes written by `put_bytes`, left in the image.
    fn stored_bytes(&mut self) -> Result<Stored, CacheError> {
        let len = self.u32()? as usize;
        let start = self.pos;
        self.take(len)?;
        Ok(Stored::Image(start..self.pos))
    }

    /// Bytes `put_optional_bytes` wrote.
    fn optional_bytes(&mut self) -> Result<Option<Stored>, CacheError> {
        match self.u32()? {
            0 => Ok(None),
            _ => self.stored_bytes().map(Some),
        }
    }

    /// A list written by `put_list`.
    fn list(&mut self) -> Result<Option<Vec<Vec<u8>>>, CacheError> {
        let count = self.u32()?;
        if count == ABSENT {
            return Ok(None);
        }
        if count as usize > MAX_LIST {
            return Err(CacheError::Truncated);
        }
        let mut items = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let len = self.u32()? as usize;
            items.push(self.take(len)?.to_vec());
        }
        Ok(Some(items))
    }

    fn key(&mut self) -> Result<Key, CacheError> {
        let mut key: Key = [0; 16];
        key.copy_from_slice(self.take(16)?);
        Ok(key)
    }

    /// A section of backtracking programs: count, then key and image of each.
    fn programs(&mut self) -> Result<BTreeMap<Key, BacktrackEntry>, CacheError> {
        let count = self.u32()? as usize;
        if count > MAX_ENTRIES {
            return Err(CacheError::Truncated);
        }
        let mut programs = BTreeMap::new();
        for _ in 0..count {
            let key = self.key()?;
            programs.insert(key, BacktrackEntry { image: self.stored_bytes()?, ready: None });
        }
        Ok(programs)
    }

    fn u32(&mut self) -> Result<u32, CacheError> {
        let mut word = [0u8; 4];
        word.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(word))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_table() {
        let mut good = DfaCache::new();
        let required = Some(Required { literals: alloc::vec![b"name".to_vec(), b"city".to_vec()], min_hits: 3, starts_match: true });
        let x = [b"x".to_vec()];
        let part = regex_automata::hybrid::dfa::DFA::new("ab+c").expect("builds");
        let opens = Openings::of(&part).expect("openings");
        let (long, short) = (MatchRoom { len: 998, one_line: true, empty: false }, MatchRoom { len: 3, one_line: false, empty: true });
        let needs = |byte: Option<RequiredByte>, room| MatchNeeds { byte, room };
        let bang = needs(Some(RequiredByte::AnyOf(alloc::vec![b'!', b'?'])), long);
        let non_ascii = needs(Some(RequiredByte::NonAscii), MatchRoom::default());
        let e_like = ExactLiterals::from_literals(alloc::vec![b"e".to_vec(), b"\xd0\xb5".to_vec()]).expect("exact");
        good.put(key(&[b"a"]), None, Some((&nfa("ab+c"), 1)), None, required.as_ref(), &needs(None, short), None, Some(&x));
        good.put(key(&[b"r"]), None, Some((&nfa("ab+c"), 5)), Some(&opens), None, &needs(None, long), None, None);
        good.put(key(&[b"b"]), None, None, None, None, &bang, Some(&e_like), None);
        good.put(key(&[b"n"]), None, None, None, None, &non_ascii, None, None);
        let backtrack = crate::rules::perl::backtrack(r"/(\w)x\1/").expect("compiles");
        good.put_backtrack(key(&[b"p"]), &backtrack);
        let mut shelf = good.lend_programs();
        let eval = |pattern: &str| crate::rules::backtrack::compile_captures(pattern);
        let first = shelf.program("a(b)c", true, || eval("(?i)a(b)c")).expect("compiles");
        good.return_programs(shelf);
        let image = good.to_bytes();
        // An entry whose literal list claims more items than any list may hold.
        let mut huge = b"SIFTDFA\0\x10\0\0\0".to_vec();
        let mut body = alloc::vec![1, 0, 0, 0];
        body.extend_from_slice(&[0; 16]);
        body.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0xff, 0, 0]);
        huge.extend_from_slice(&checksum(&body).to_le_bytes());
        huge.extend_from_slice(&body);
        // One byte changed anywhere after the header.
        let mut flipped = image.clone();
        if let Some(b) = flipped.last_mut() {
            *b ^= 1;
        }
        let cases: &[(&[u8], Result<usize, CacheError>)] = &[
            (&image, Ok(4)),
            (b"", Err(CacheError::Truncated)),
            (b"NOTADFA\0\x0a\0\0\0\0\0\0\0", Err(CacheError::NotACache)),
            (b"SIFTDFA\0\x0a\0\0\0\0\0\0\0", Err(CacheError::Version(10))),
            (b"SIFTDFA\0\x10\0\0\0\x05\0\0\0", Err(CacheError::Truncated)),
            (&image[..image.len() - 1], Err(CacheError::Damaged)),
            (&flipped, Err(CacheError::Damaged)),
            (&huge, Err(CacheError::Truncated)),
        ];
        for (bytes, want) in cases {
            let got = DfaCache::from_bytes(bytes).map(|c| c.entries.len());
            assert_eq!(&got, want, "{bytes:?}");
        }
        // What was put reads back, rebuilt on demand or ahead by `prepare`.
        for prepared in [false, true] {
            let mut read = DfaCache::from_bytes(&image).expect("own image reads back");
            if prepared {
                read.prepare(&|jobs: &mut [Job<'_>], _: &mut dyn FnMut()| jobs.iter_mut().rev().for_each(Job::run));
                assert!(read.entries.values().all(|e| e.ready.is_some()));
            }
            let a = read.get(&key(&[b"a"])).expect("entry a");
            let a_states = a.nfa.map(|n| n.states().to_vec());
            assert_eq!((a.dfa.is_none(), a.required, a.needs.byte, a.prefilter.is_some()), (true, required.clone(), None, true));
            assert!(a_states.as_deref() == Some(nfa("ab+c").states()));
            assert_eq!((a.times, a.openings, a.needs.room, a.exact), (1, None, short, None));
            // A repeat's part comes back with its times and openings.
            let r = read.get(&key(&[b"r"])).expect("entry r");
            assert_eq!(r.openings.as_ref(), Some(&opens));
            assert_eq!((r.times, r.nfa.map(|n| n.states().to_vec()).as_deref() == Some(nfa("ab+c").states())), (5, true));
            assert_eq!(r.needs.room, long);
            let b = read.get(&key(&[b"b"])).expect("entry b");
            assert_eq!((b.dfa.is_none(), b.nfa.is_none(), b.required, b.prefilter.is_none()), (true, true, None, true));
            assert_eq!((b.needs, b.exact), (bang.clone(), Some(alloc::boxed::Box::new(e_like.clone()))));
            assert_eq!(read.get(&key(&[b"n"])).map(|n| n.needs), Some(non_ascii.clone()));
            assert!(read.get(&key(&[b"c"])).is_none());
            // The eval program is lent and found, not compiled again; another is compiled.
            let mut shelf = read.lend_programs();
            let found = shelf.program("a(b)c", true, || -> Result<_, ()> { panic!("compiled again") }).expect("shelved");
            assert_eq!(alloc::format!("{found:?}"), alloc::format!("{first:?}"));
            // Asked for again once taken: compiled again, not shelved anew.
            let again = shelf.program("a(b)c", true, || eval("(?i)a(b)c")).expect("compiles");
            assert_eq!(alloc::format!("{again:?}"), alloc::format!("{first:?}"));
            assert!(shelf.program("a(b)c", false, || eval("a(b)c")).is_ok());
            read.return_programs(shelf);
            assert_eq!((read.hits(), read.misses()), (6, 1));
            // Taken programs keep their images: the next start finds both.
            let mut next = DfaCache::from_bytes(&read.to_bytes()).expect("rewritten image reads back");
            let mut shelf = next.lend_programs();
            for icase in [true, false] {
                assert!(shelf.program("a(b)c", icase, || -> Result<_, ()> { panic!("compiled again") }).is_ok());
            }
        }
        let mut read = DfaCache::from_bytes(&image).expect("own image reads back");
        let p = read.get_backtrack(&key(&[b"p"])).expect("backtrack p");
        assert_eq!(p.relaxed, backtrack.relaxed);
        assert!(read.get_backtrack(&key(&[b"a"])).is_none());
    }

    #[test]
    fn prepare_shares_prefilters_table() {
        let h = [b"h".to_vec()];
        let x = [b"x".to_vec()];
        // (entry, its prefix needles): a and b share theirs.
        type Row<'a> = (&'a [u8], Option<&'a [Vec<u8>]>);
        let entries: &[Row<'_>] = &[(b"a", Some(&h)), (b"b", Some(&h)), (b"c", Some(&x)), (b"d", None)];
        let mut written = DfaCache::new();
        for (name, needles) in entries {
            written.put(key(&[name]), None, Some((&nfa("ab+c"), 1)), None, None, &MatchNeeds::default(), None, *needles);
        }
        let mut read = DfaCache::from_bytes(&written.to_bytes()).expect("own image reads back");
        let seen = core::cell::RefCell::new((0, 0));
        read.prepare(&|jobs: &mut [Job<'_>], alongside: &mut dyn FnMut()| {
            alongside();
            for job in jobs.iter_mut() {
                let mut seen = seen.borrow_mut();
                match job.0 {
                    Work::Prefilter { .. } => seen.0 += 1,
                    _ => seen.1 += 1,
                }
                job.run();
            }
        });
        assert_eq!(seen.into_inner(), (2, entries.len()));
        // A batch that skips the prefilter jobs still leaves every entry its prefilter.
        let mut skipping = DfaCache::from_bytes(&written.to_bytes()).expect("own image reads back");
        skipping.prepare(&|jobs: &mut [Job<'_>], alongside: &mut dyn FnMut()| {
            alongside();
            jobs.iter_mut().filter(|job| !matches!(job.0, Work::Prefilter { .. })).for_each(Job::run);
        });
        for read in [&mut read, &mut skipping] {
            for (name, needles) in entries {
                let got = read.get(&key(&[name])).expect("entry");
                assert_eq!((got.prefilter.is_some(), got.nfa.is_some()), (needles.is_some(), true), "{name:?}");
            }
        }
    }

    fn nfa(pattern: &str) -> thompson::NFA {
        thompson::Compiler::new()
            .syntax(regex_automata::util::syntax::Config::new().unicode(false).utf8(false))
            .configure(thompson::Config::new().utf8(false).shrink(false).which_captures(thompson::WhichCaptures::None))
            .build(pattern)
            .expect("test pattern compiles")
    }

    fn nfa_many(patterns: &[&str]) -> thompson::NFA {
        thompson::Compiler::new()
            .syntax(regex_automata::util::syntax::Config::new().unicode(false).utf8(false))
            .configure(thompson::Config::new().utf8(false).shrink(false).which_captures(thompson::WhichCaptures::None))
            .build_many(patterns)
            .expect("test patterns compile")
    }

    #[test]
    fn union_nfa_images_table() {
        // A union's NFA comes back state for state, each pattern with its own start
        // and its own matches.
        let cases: &[(&[&str], &str, &[usize])] = &[
            (&["abc", "x+y", "(?i)foo"], "zFOO abc", &[0, 2]),
            (&["abc", "x+y", "(?i)foo"], "xxy", &[1]),
            (&["abc", "x+y", "(?i)foo"], "ab", &[]),
            (&["a", "b"], "b", &[1]),
            (&["(?m)^q$", "q"], "aq\nq", &[0, 1]),
        ];
        for (patterns, hay, want) in cases {
            let original = nfa_many(patterns);
            let rebuilt = nfa_from_image(&nfa_image(&original).expect("image")).expect("rebuilt");
            assert!(original.states() == rebuilt.states(), "{patterns:?}");
            assert_eq!(rebuilt.pattern_len(), patterns.len(), "{patterns:?}");
            for p in original.patterns() {
                assert_eq!(rebuilt.start_pattern(p), original.start_pattern(p), "{patterns:?}");
            }
            let dfa = regex_automata::hybrid::dfa::Builder::new()
                .configure(regex_automata::hybrid::dfa::Config::new().match_kind(regex_automata::MatchKind::All).starts_for_each_pattern(true))
                .build_from_nfa(rebuilt)
                .expect("lazy dfa");
            let mut cache = dfa.create_cache();
            let mut got = Vec::new();
            for (i, _) in patterns.iter().enumerate() {
                let input = regex_automata::Input::new(hay).anchored(regex_automata::Anchored::Pattern(regex_automata::PatternID::must(i)));
                let mut found = false;
                for start in 0..hay.len() {
                    found |= dfa.try_search_fwd(&mut cache, &input.clone().range(start..)).expect("search").is_some();
                }
                if found {
                    got.push(i);
                }
            }
            assert_eq!(&got, want, "{patterns:?} in {hay:?}");
        }
    }

    #[test]
    fn nfa_images_table() {
        // Each NFA comes back state for state, and matches as before.
        let cases: &[(&str, &str, bool)] = &[
            ("abc", "xxabcxx", true),
            ("(?i)a[bc]+d", "zzABCBD", true),
            (r"(?m)^foo\b|bar$|x{2,5}y", "q\nfoo z", true),
            ("(?:alpha|beta|gamma|delta)s?", "gamm", false),
            (r"[\x00-\xff]{3}\z", "ab", false),
        ];
        for (pattern, hay, matches) in cases {
            let original = nfa(pattern);
            let image = nfa_image(&original).expect("image");
            let rebuilt = nfa_from_image(&image).expect("rebuilt");
            assert!(original.states() == rebuilt.states(), "{pattern}");
            assert_eq!(
                (rebuilt.start_anchored(), rebuilt.start_unanchored()),
                (original.start_anchored(), original.start_unanchored()),
                "{pattern}"
            );
            let dfa = regex_automata::hybrid::dfa::Builder::new().build_from_nfa(rebuilt).expect("lazy dfa");
            let mut cache = dfa.create_cache();
            let found = dfa.try_search_fwd(&mut cache, &regex_automata::Input::new(hay)).expect("search");
            assert_eq!(found.is_some(), *matches, "{pattern} in {hay}");
        }
        // Damaged images are refused, never built.
        let image = nfa_image(&nfa("(?:alpha|beta|gamma)s?")).expect("image");
        let mut bad_id = image.clone();
        bad_id[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut bad_tag = image.clone();
        bad_tag[20] = 9;
        // A union's image claiming a pattern fewer or more than its match states.
        let union = nfa_image(&nfa_many(&["abc", "x+y"])).expect("image");
        let with_patterns = |n: u32, starts: &[u32]| {
            let mut v = union[..12].to_vec();
            v.extend_from_slice(&n.to_le_bytes());
            for s in starts {
                v.extend_from_slice(&s.to_le_bytes());
            }
            v.extend_from_slice(&union[24..]);
            v
        };
        let (start_0, start_1) = (u32::from_le_bytes(union[16..20].try_into().expect("4")), u32::from_le_bytes(union[20..24].try_into().expect("4")));
        assert!(nfa_from_image(&with_patterns(2, &[start_0, start_1])).is_some(), "the image as written reads");
        let one_pattern = with_patterns(1, &[start_0]);
        let three_patterns = with_patterns(3, &[start_0, start_1, start_1]);
        // A hand-made two-state NFA: a sparse state (ranges as given) then a match.
        let sparse = |first: u8, second: u8| {
            let mut v = Vec::new();
            for word in [2u32, 0, 0, 1, 0] {
                v.extend_from_slice(&word.to_le_bytes());
            }
            v.push(1);
            v.extend_from_slice(&2u32.to_le_bytes());
            for byte in [first, second] {
                v.extend_from_slice(&[byte, byte]);
                v.extend_from_slice(&1u32.to_le_bytes());
            }
            v.push(6);
            v
        };
        assert!(nfa_from_image(&sparse(b'a', b'b')).is_some(), "ranges in order are kept");
        let unordered = sparse(b'b', b'a');
        let damaged: &[(&str, &[u8])] = &[
            ("sparse ranges out of order", &unordered),
            ("empty", &[]),
            ("truncated", &image[..image.len() - 1]),
            ("trailing byte", &[image.as_slice(), &[0]].concat()),
            ("start id out of range", &bad_id),
            ("unknown state tag", &bad_tag),
            ("no states", &[0; 16]),
            ("more match states than patterns", &one_pattern),
            ("fewer match states than patterns", &three_patterns),
        ];
        for (what, bytes) in damaged {
            assert!(nfa_from_image(bytes).is_none(), "{what}");
        }
        // Capture states are not kept: such an NFA has no image.
        let with_captures = thompson::NFA::new("(a)b").expect("nfa");
        assert!(nfa_image(&with_captures).is_none());
    }

    /// Two keys' parts and whether the keys are equal.
    type KeyCase<'a> = (&'a [&'a [u8]], &'a [&'a [u8]], bool);

    #[test]
    fn keys_table() {
        let cases: &[KeyCase] = &[
            (&[b"abc"], &[b"abc"], true),
            (&[b"abc"], &[b"abd"], false),
            (&[b"ab", b"c"], &[b"a", b"bc"], false),
            (&[b"x", b""], &[b"x"], false),
            // Eight bytes at a time: a short last word, padding, and part boundaries
            // on and off word boundaries still count.
            (&[b"ab"], &[b"ab\0"], false),
            (&[b"abcdefgh"], &[b"abcdefgh", b""], false),
            (&[b"abcdefg", b"h"], &[b"abcdefgh"], false),
            (&[b"abcdefghi"], &[b"abcdefgh", b"i"], false),
            (&[&[7; 40]], &[&[7; 39]], false),
            (&[&[7; 40]], &[&[7; 32], &[7; 8]], false),
            (&[&[7; 40]], &[&[7; 40]], true),
            (&[], &[b""], false),
        ];
        for (a, b, same) in cases {
            assert_eq!(key(a) == key(b), *same, "{a:?} {b:?}");
        }
    }
}
