//! The messages to send, read into memory before the load starts.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Names in a corpus folder that are not messages (the public corpus's `cmds`, our manifests).
const NOT_MESSAGES: &[&str] = &["cmds", "README.md", "MANIFEST.tsv"];

/// Every message of a corpus, in path order.
#[derive(Debug, Default)]
pub struct Corpus {
    /// The messages, one per file.
    pub messages: Vec<Message>,
}

/// One message file's content.
#[derive(Debug)]
pub struct Message {
    /// Where it was read from.
    pub path: PathBuf,
    /// The raw bytes, as spamc would send them.
    pub bytes: Vec<u8>,
}

/// Why a corpus could not be read.
#[derive(Debug)]
pub enum CorpusError {
    /// A directory or file could not be read.
    Read(PathBuf, io::Error),
    /// The corpus holds no message.
    Empty(Vec<PathBuf>),
}

impl fmt::Display for CorpusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorpusError::Read(path, e) => write!(f, "cannot read {}: {e}", path.display()),
            CorpusError::Empty(roots) => {
                let names: Vec<String> = roots.iter().map(|p| p.display().to_string()).collect();
                write!(f, "no message files under {}", names.join(", "))
            }
        }
    }
}

impl Corpus {
    /// Reads every message file under `roots` (directories walked, dot-files skipped).
    pub fn load(roots: &[PathBuf]) -> Result<Corpus, CorpusError> {
        let mut paths = Vec::new();
        for root in roots {
            collect(root, &mut paths)?;
        }
        paths.sort();
        paths.dedup();
        let mut messages = Vec::with_capacity(paths.len());
        for path in paths {
            let bytes = fs::read(&path).map_err(|e| CorpusError::Read(path.clone(), e))?;
            messages.push(Message { path, bytes });
        }
        if messages.is_empty() {
            return Err(CorpusError::Empty(roots.to_vec()));
        }
        Ok(Corpus { messages })
    }

    /// Puts the messages in a pseudo-random order fixed by `seed`, so that any stretch of
    /// the load (a short run) sees ham and spam in the corpus's proportions.
    pub fn shuffle(&mut self, seed: u64) {
        let mut state = seed;
        for i in (1..self.messages.len()).rev() {
            let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
            self.messages.swap(i, j);
        }
    }

    /// Total size of the messages in bytes.
    pub fn bytes(&self) -> u64 {
        self.messages.iter().map(|m| m.bytes.len() as u64).sum()
    }
}

/// The splitmix64 generator: small, fast and good enough for an order.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Message files under `root` (itself when it is a file), walked with an explicit stack.
fn collect(root: &Path, out: &mut Vec<PathBuf>) -> Result<(), CorpusError> {
    let meta = fs::metadata(root).map_err(|e| CorpusError::Read(root.to_path_buf(), e))?;
    if meta.is_file() {
        out.push(root.to_path_buf());
        return Ok(());
    }
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = fs::read_dir(&dir).map_err(|e| CorpusError::Read(dir.clone(), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| CorpusError::Read(dir.clone(), e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || NOT_MESSAGES.contains(&name.as_ref()) {
                continue;
            }
            let kind = entry.file_type().map_err(|e| CorpusError::Read(entry.path(), e))?;
            // Symlinked directories are not followed: no loops.
            if kind.is_dir() {
                dirs.push(entry.path());
            } else if kind.is_file() || (kind.is_symlink() && entry.path().is_file()) {
                out.push(entry.path());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sift-bench-corpus-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn walks_folders_in_path_order_and_skips_non_messages() {
        let dir = scratch_dir("walk");
        let files: &[(&str, &[u8])] = &[
            ("spam/00002.b", b"two"),
            ("spam/00001.a", b"one"),
            ("ham/x/deep", b"deep"),
            ("spam/cmds", b"not a message"),
            ("spam/.hidden", b"not a message"),
            ("README.md", b"not a message"),
        ];
        for (name, bytes) in files {
            let path = dir.join(name);
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(&path, bytes).expect("write");
        }
        let corpus = Corpus::load(std::slice::from_ref(&dir)).expect("load");
        let got: Vec<(String, &[u8])> = corpus
            .messages
            .iter()
            .map(|m| (m.path.strip_prefix(&dir).expect("under dir").display().to_string(), m.bytes.as_slice()))
            .collect();
        let want: Vec<(String, &[u8])> = vec![("ham/x/deep".into(), b"deep"), ("spam/00001.a".into(), b"one"), ("spam/00002.b".into(), b"two")];
        assert_eq!(got, want);
        assert_eq!(corpus.bytes(), 10);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn shuffle_is_a_fixed_permutation_per_seed() {
        let make = || Corpus { messages: (0..50u8).map(|i| Message { path: PathBuf::from(i.to_string()), bytes: vec![i] }).collect() };
        let order = |c: &Corpus| c.messages.iter().map(|m| m.bytes.first().copied().unwrap_or(0)).collect::<Vec<u8>>();
        let (mut a, mut b, mut c) = (make(), make(), make());
        a.shuffle(1);
        b.shuffle(1);
        c.shuffle(2);
        assert_eq!(order(&a), order(&b));
        assert_ne!(order(&a), order(&c));
        assert_ne!(order(&a), (0..50).collect::<Vec<u8>>());
        let mut sorted = order(&a);
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<u8>>());
        let mut empty = Corpus::default();
        empty.shuffle(1);
        assert!(empty.messages.is_empty());
    }

    #[test]
    fn single_file_empty_folder_and_missing_path() {
        let dir = scratch_dir("edge");
        let file = dir.join("m");
        fs::write(&file, b"x").expect("write");
        assert_eq!(Corpus::load(std::slice::from_ref(&file)).expect("load").messages.len(), 1);
        let empty = dir.join("empty");
        fs::create_dir_all(&empty).expect("mkdir");
        assert!(matches!(Corpus::load(&[empty]), Err(CorpusError::Empty(_))));
        assert!(matches!(Corpus::load(&[dir.join("missing")]), Err(CorpusError::Read(..))));
        let _ = fs::remove_dir_all(&dir);
    }
}
