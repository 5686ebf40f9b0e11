//! Native versions of SpamAssassin's `eval:` test functions.
//!
//! A rule such as `header MISSING_DATE eval:check_for_missing_header('Date')` names a
//! Perl function. At compile time [`EvalTest::parse`] turns the name and its argument
//! list into a native test, or says why it cannot. At scan time each test runs once
//! per message against the parsed message and writes only into [`EvalScratch`], so a
//! warm scan still allocates nothing.
//!
//! [`header`] holds the tests on headers, addresses and relays, [`body`] those on the
//! body, MIME structure, HTML and URIs; [`relays`] reads the `Received` chain into the
//! relay lists several header tests and pseudo-headers need.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::msg::Message;
use crate::rules::{Config, EvalOn, RuleSet};
use crate::rules::cache::ProgramShelf;

pub mod body;
pub mod dates;
pub mod freemail;
pub mod header;
pub mod re;
pub mod relays;
pub mod wlbl;

/// Why an `eval:` rule cannot run natively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalError {
    /// No native version of this function exists.
    Unknown(String),
    /// The function exists but its arguments are not understood.
    BadArguments {
        /// Function name.
        function: String,
        /// What is wrong with them.
        why: String,
    },
    /// The function cannot give SpamAssassin's answer here: it needs the network, a
    /// learned database or an external service (such rules do not score in score set 0).
    Unavailable {
        /// Function name.
        function: String,
        /// What it needs, starting with "network test" for DNS and online services.
        why: &'static str,
    },
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::Unknown(name) => write!(f, "eval function {name} not implemented"),
            EvalError::BadArguments { function, why } => write!(f, "eval function {function}: {why}"),
            EvalError::Unavailable { function, why } => write!(f, "eval function {function} not run: {why}"),
        }
    }
}

/// One native eval test with its arguments, ready to run.
#[derive(Debug, Clone)]
pub enum EvalTest {
    /// A test on headers, addresses or relays.
    Header(header::HeaderEval),
    /// A test on the body, MIME structure, HTML or URIs.
    Body(body::BodyEval),
}

impl EvalTest {
    /// The native test for `function(args)` declared as an `on` rule, or why there is none.
    pub fn parse(on: EvalOn, function: &str, args: &str, data: &EvalData) -> Result<EvalTest, EvalError> {
        let args = parse_args(args).map_err(|why| EvalError::BadArguments { function: function.into(), why })?;
        if let Some(test) = header::HeaderEval::parse(on, function, &args, &data.header) {
            return test.map(EvalTest::Header);
        }
        if let Some(test) = body::BodyEval::parse(on, function, &args, &data.body) {
            return test.map(EvalTest::Body);
        }
        Err(EvalError::Unknown(function.into()))
    }

    /// Runs the test on one message; returns how many times it hit (0 = no hit).
    pub fn run(&self, cx: &EvalContext<'_, '_>, scratch: &mut TestScratch) -> u32 {
        match self {
            EvalTest::Header(t) => t.run(cx, &mut scratch.header),
            EvalTest::Body(t) => t.run(cx, &mut scratch.body),
        }
    }
}

/// What eval tests read from the rule files (trusted networks, freemail domains, …),
/// prepared once per rule set.
#[derive(Debug, Clone, Default)]
pub struct EvalData {
    /// For the header tests.
    pub header: header::HeaderData,
    /// For the body tests.
    pub body: body::BodyData,
}

impl EvalData {
    /// Prepares what the eval tests need from `config`.
    pub fn new(config: &Config) -> EvalData {
        EvalData::with_programs(config, &mut ProgramShelf::default())
    }

    /// [`EvalData::new`], taking the fixed patterns' programs from `shelf`, which a
    /// compile cache lends: a warm start compiles none of them.
    pub(crate) fn with_programs(config: &Config, shelf: &mut ProgramShelf) -> EvalData {
        EvalData { header: header::HeaderData::with_programs(config, shelf), body: body::BodyData::new(config) }
    }
}

/// What an eval test sees of the message being scanned.
pub struct EvalContext<'m, 'r> {
    /// The parsed message.
    pub message: &'r Message<'m>,
    /// The rule set's eval data.
    pub data: &'r EvalData,
    /// The relays of the `Received` chain, read once per message by [`EvalScratch::prepare`].
    pub relays: &'r relays::Relays,
}

/// Per-worker buffers of the eval tests, reused for every message.
#[derive(Debug, Default)]
pub struct EvalScratch {
    /// The `Received` chain of the current message.
    pub relays: relays::Relays,
    /// The tests' own buffers.
    pub tests: TestScratch,
}

/// Buffers the eval tests write while they run.
#[derive(Debug, Default)]
pub struct TestScratch {
    /// Header tests' buffers.
    pub header: header::HeaderScratch,
    /// Body tests' buffers.
    pub body: body::BodyScratch,
}

impl EvalScratch {
    /// Reads what every test of this message shares (the relays); call once per message.
    pub fn prepare(&mut self, message: &Message<'_>, data: &EvalData) {
        self.relays.read(message, &data.header);
    }
}

/// Bench aid for core/benches/evals.rs, not an API: the eval tests `rules` runs, in
/// order, each with its rule name, and the eval data they read.
#[doc(hidden)]
pub fn compiled_tests(rules: &RuleSet) -> (&EvalData, impl Iterator<Item = (&str, &EvalTest)>) {
    let tests = rules.evals.iter().map(|c| (rules.rule_name(c.rule), &c.test));
    (&rules.eval_data, tests)
}

/// One argument of an eval call, unquoted.
pub type Args = Vec<String>;

/// Splits an eval argument list (`'a', "b", 3, bare`) into its unquoted values.
pub fn parse_args(text: &str) -> Result<Args, String> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (value, after) = match rest.as_bytes().first() {
            Some(&q @ (b'\'' | b'"')) => {
                let body = rest.get(1..).unwrap_or("");
                let end = body.find(char::from(q)).ok_or_else(|| alloc::format!("unterminated quote in ({text})"))?;
                (body.get(..end).unwrap_or(""), body.get(end + 1..).unwrap_or(""))
            }
            _ => {
                let end = rest.find(',').unwrap_or(rest.len());
                (rest.get(..end).unwrap_or("").trim_end(), rest.get(end..).unwrap_or(""))
            }
        };
        out.push(String::from(value));
        rest = after.trim_start();
        match rest.strip_prefix(',') {
            Some(r) => rest = r.trim_start(),
            None if rest.is_empty() => {}
            None => return Err(alloc::format!("expected ',' in ({text})")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_lists_table() {
        let ok: &[(&str, &[&str])] = &[
            ("", &[]),
            ("  ", &[]),
            ("'Date'", &["Date"]),
            ("'a', \"b\" , 3", &["a", "b", "3"]),
            ("'0.00','0.10'", &["0.00", "0.10"]),
            ("bare, 'x,y'", &["bare", "x,y"]),
            ("'ratio', 0, 0.2", &["ratio", "0", "0.2"]),
        ];
        for (text, want) in ok {
            let got = parse_args(text).unwrap_or_default();
            assert_eq!(got, want.iter().map(|s| String::from(*s)).collect::<Vec<_>>(), "{text}");
        }
        for bad in ["'open", "'a' 'b'"] {
            assert!(parse_args(bad).is_err(), "{bad}");
        }
    }
}
