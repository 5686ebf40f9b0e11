//! Dense DFAs kept between compiles. Determinizing is most of what compiling the stock
//! rules costs; a daemon that restarts or reloads with mostly the same patterns takes
//! their DFAs from here instead. Entries are keyed by a hash of the pattern as compiled,
//! so an edited rule simply misses. Reading and writing the bytes is the caller's job.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt;

use regex_automata::dfa::dense;

/// First bytes of a cache image.
const MAGIC: &[u8; 8] = b"SIFTDFA\0";
/// Layout version of the image; a different one is ignored whole.
const FORMAT: u32 = 1;
/// Entries in an image, at most: a bound on what a corrupt header can ask for.
const MAX_ENTRIES: usize = 1 << 20;

/// Identifies one pattern as compiled: what it is, how its lines are cut, which
/// compiler built it.
pub(crate) type Key = [u8; 16];

/// What a compile found for one pattern.
enum Entry {
    /// The dense DFA's serialized bytes (native endian).
    Dense(Vec<u8>),
    /// Too big for a dense DFA: it runs lazily, no need to try again.
    TooBig,
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
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::NotACache => f.write_str("not a sift DFA cache"),
            CacheError::Version(v) => write!(f, "cache layout {v}, this siftd reads {FORMAT}"),
            CacheError::Truncated => f.write_str("cache image truncated or corrupt"),
        }
    }
}

/// Dense DFAs from earlier compiles, and those the latest compile added.
#[derive(Default)]
pub struct DfaCache {
    entries: BTreeMap<Key, Entry>,
    /// Keys the latest compile asked for: only they are written back.
    used: BTreeMap<Key, ()>,
    hits: usize,
    misses: usize,
}

impl DfaCache {
    /// An empty cache: every pattern misses and is remembered.
    pub fn new() -> DfaCache {
        DfaCache::default()
    }

    /// Reads an image written by [`DfaCache::to_bytes`].
    pub fn from_bytes(image: &[u8]) -> Result<DfaCache, CacheError> {
        let mut r = Reader { bytes: image, pos: 0 };
        if r.take(MAGIC.len())? != MAGIC {
            return Err(CacheError::NotACache);
        }
        let format = r.u32()?;
        if format != FORMAT {
            return Err(CacheError::Version(format));
        }
        let count = r.u32()? as usize;
        if count > MAX_ENTRIES {
            return Err(CacheError::Truncated);
        }
        let mut cache = DfaCache::new();
        for _ in 0..count {
            let mut key: Key = [0; 16];
            key.copy_from_slice(r.take(16)?);
            let entry = match r.u32()? {
                0 => Entry::TooBig,
                _ => {
                    let len = r.u32()? as usize;
                    Entry::Dense(r.take(len)?.to_vec())
                }
            };
            cache.entries.insert(key, entry);
        }
        Ok(cache)
    }

    /// The image of every entry the latest compile used or added, for the next start.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        let kept: Vec<(&Key, &Entry)> = self.entries.iter().filter(|(k, _)| self.used.contains_key(*k)).collect();
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&(kept.len() as u32).to_le_bytes());
        for (key, entry) in kept {
            out.extend_from_slice(key);
            match entry {
                Entry::TooBig => out.extend_from_slice(&0u32.to_le_bytes()),
                Entry::Dense(bytes) => {
                    out.extend_from_slice(&1u32.to_le_bytes());
                    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                    out.extend_from_slice(bytes);
                }
            }
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

    /// The cached outcome for `key`: `Some(Some(dfa))` dense, `Some(None)` too big,
    /// `None` unknown (or an entry that no longer deserializes).
    pub(crate) fn get(&mut self, key: &Key) -> Option<Option<dense::DFA<Vec<u32>>>> {
        let found = match self.entries.get(key)? {
            Entry::TooBig => Some(None),
            Entry::Dense(bytes) => dense::DFA::from_bytes(bytes).ok().map(|(dfa, _)| Some(dfa.to_owned())),
        };
        if found.is_some() {
            self.used.insert(*key, ());
            self.hits += 1;
        }
        found
    }

    /// Records what determinizing `key` gave.
    pub(crate) fn put(&mut self, key: Key, dfa: Option<&dense::DFA<Vec<u32>>>) {
        let entry = match dfa {
            Some(d) => {
                let (bytes, padding) = d.to_bytes_native_endian();
                Entry::Dense(bytes.get(padding..).unwrap_or_default().to_vec())
            }
            None => Entry::TooBig,
        };
        self.entries.insert(key, entry);
        self.used.insert(key, ());
        self.misses += 1;
    }
}

/// A 128-bit key from `parts`: two FNV-1a hashes with different seeds, each part
/// length-prefixed so their boundaries count.
pub(crate) fn key(parts: &[&[u8]]) -> Key {
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    let mut feed = |byte: u8| {
        a = (a ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        b = (b ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(5);
    };
    for part in parts {
        for byte in (part.len() as u64).to_le_bytes() {
            feed(byte);
        }
        for &byte in *part {
            feed(byte);
        }
    }
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&a.to_le_bytes());
    out[8..].copy_from_slice(&b.to_le_bytes());
    out
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
        good.put(key(&[b"a"]), None);
        let image = good.to_bytes();
        let cases: &[(&[u8], Result<usize, CacheError>)] = &[
            (&image, Ok(1)),
            (b"", Err(CacheError::Truncated)),
            (b"NOTADFA\0\x01\0\0\0\0\0\0\0", Err(CacheError::NotACache)),
            (b"SIFTDFA\0\x02\0\0\0\0\0\0\0", Err(CacheError::Version(2))),
            (b"SIFTDFA\0\x01\0\0\0\x05\0\0\0", Err(CacheError::Truncated)),
            (&image[..image.len() - 1], Err(CacheError::Truncated)),
        ];
        for (bytes, want) in cases {
            let got = DfaCache::from_bytes(bytes).map(|c| c.entries.len());
            assert_eq!(&got, want, "{bytes:?}");
        }
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
        ];
        for (a, b, same) in cases {
            assert_eq!(key(a) == key(b), *same, "{a:?} {b:?}");
        }
    }
}
