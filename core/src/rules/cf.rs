//! Parser for the SpamAssassin `.cf` rule language into a [`Config`].

use alloc::string::String;
use alloc::vec::Vec;

use super::Config;

/// Reads files named by `include` directives (paths as written, relative to the
/// including file's directory: the implementor resolves them).
pub trait Includer {
    /// Contents of `path`, as seen from the file `from`.
    fn read(&mut self, from: &str, path: &str) -> Result<Vec<u8>, String>;
}

/// An [`Includer`] for rule text with no file system: every include fails.
pub struct NoIncludes;

impl Includer for NoIncludes {
    fn read(&mut self, _from: &str, path: &str) -> Result<Vec<u8>, String> {
        Err(alloc::format!("include {path}: no file system"))
    }
}

/// Why a rule file could not be read at all (everything else becomes a lint note).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// An included file could not be read.
    Include {
        /// The including file.
        file: String,
        /// The line of the include directive.
        line: u32,
        /// The reason.
        reason: String,
    },
}

impl core::fmt::Display for ParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ParseError::Include { file, line, reason } => write!(f, "{file}:{line}: {reason}"),
        }
    }
}

/// Accumulates rule files, in the order SpamAssassin reads them, into one [`Config`].
pub struct Parser {
    config: Config,
}

impl Default for Parser {
    fn default() -> Self {
        Self::new()
    }
}

impl Parser {
    /// A parser with SpamAssassin's defaults (required_score 5.0, report_safe 1).
    pub fn new() -> Self {
        Parser { config: Config::default() }
    }

    /// Parses one file's text; `name` is used in lint notes and to resolve includes.
    pub fn parse_file(&mut self, name: &str, text: &[u8], includer: &mut dyn Includer) -> Result<(), ParseError> {
        let _ = (name, text, includer);
        todo!("cf::Parser::parse_file")
    }

    /// The accumulated configuration.
    pub fn finish(self) -> Config {
        self.config
    }
}

/// Parses rule text that has no includes, such as [`super::DEFAULT_RULES`].
pub fn parse_str(name: &str, text: &str) -> Result<Config, ParseError> {
    let mut p = Parser::new();
    p.parse_file(name, text.as_bytes(), &mut NoIncludes)?;
    Ok(p.finish())
}
