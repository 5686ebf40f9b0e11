//! Translation of Perl regular expressions, as written in SpamAssassin rules, into
//! the syntax of regex-automata (byte mode, ASCII classes).

use alloc::string::String;

/// Why a Perl regex has no translation into a linear-time automaton.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsupported {
    /// Not a `/re/flags` or `m{re}flags` literal.
    Delimiters,
    /// `(?=`, `(?!`, `(?<=`, `(?<!`.
    Lookaround,
    /// `\1`, `\k<name>`.
    Backreference,
    /// `(?>...)`.
    AtomicGroup,
    /// `a++`, `a*+`.
    Possessive,
    /// Another construct, named.
    Construct(String),
}

impl core::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Unsupported::Delimiters => f.write_str("not a /regex/ literal"),
            Unsupported::Lookaround => f.write_str("lookaround assertion"),
            Unsupported::Backreference => f.write_str("backreference"),
            Unsupported::AtomicGroup => f.write_str("atomic group"),
            Unsupported::Possessive => f.write_str("possessive quantifier"),
            Unsupported::Construct(what) => write!(f, "unsupported construct: {what}"),
        }
    }
}

/// Translates a Perl regex literal (`/re/imsx`, `m{re}i`, `m!re!`) to regex-automata syntax.
pub fn translate(perl: &str) -> Result<String, Unsupported> {
    let _ = perl;
    todo!("perl::translate")
}
