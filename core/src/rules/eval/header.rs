//! Eval tests on headers, addresses and relays (SpamAssassin's HeaderEval, RelayEval,
//! FreeMail and kin).

use super::{Args, EvalContext, EvalError};
use crate::rules::{Config, EvalOn};

/// A native header eval test.
#[derive(Debug, Clone)]
pub enum HeaderEval {}

impl HeaderEval {
    /// The test for `function(args)`; `None` when the function is not a header test.
    pub fn parse(on: EvalOn, function: &str, args: &Args, data: &HeaderData) -> Option<Result<HeaderEval, EvalError>> {
        let _ = (on, function, args, data);
        None
    }

    /// Hits of this test on the message in `cx`.
    pub fn run(&self, cx: &EvalContext<'_, '_>, scratch: &mut HeaderScratch) -> u32 {
        let _ = (cx, scratch);
        match *self {}
    }
}

/// What header tests read from the rule files.
#[derive(Debug, Clone, Default)]
pub struct HeaderData {}

impl HeaderData {
    /// Prepares header-test data from `config`.
    pub fn new(config: &Config) -> HeaderData {
        let _ = config;
        HeaderData {}
    }
}

/// Header tests' per-worker buffers.
#[derive(Debug, Default)]
pub struct HeaderScratch {}
