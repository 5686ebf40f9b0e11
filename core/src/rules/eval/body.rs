//! Eval tests on the body, MIME structure, HTML and URIs (SpamAssassin's BodyEval,
//! MIMEEval, HTMLEval and kin).

use super::{Args, EvalContext, EvalError};
use crate::rules::{Config, EvalOn};

/// A native body eval test.
#[derive(Debug, Clone)]
pub enum BodyEval {}

impl BodyEval {
    /// The test for `function(args)`; `None` when the function is not a body test.
    pub fn parse(on: EvalOn, function: &str, args: &Args, data: &BodyData) -> Option<Result<BodyEval, EvalError>> {
        let _ = (on, function, args, data);
        None
    }

    /// Hits of this test on the message in `cx`.
    pub fn run(&self, cx: &EvalContext<'_, '_>, scratch: &mut BodyScratch) -> u32 {
        let _ = (cx, scratch);
        match *self {}
    }
}

/// What body tests read from the rule files.
#[derive(Debug, Clone, Default)]
pub struct BodyData {}

impl BodyData {
    /// Prepares body-test data from `config`.
    pub fn new(config: &Config) -> BodyData {
        let _ = config;
        BodyData {}
    }
}

/// Body tests' per-worker buffers.
#[derive(Debug, Default)]
pub struct BodyScratch {}
