//! Eval tests on headers, addresses and relays (SpamAssassin's HeaderEval, RelayEval,
//! FreeMail and kin).

use alloc::string::String;
use alloc::vec::Vec;

use super::relays::ReceivedParser;
use super::{Args, EvalContext, EvalError};
use crate::rules::{Config, EvalOn, NetList};

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
pub struct HeaderData {
    /// The compiled Received formats and IP patterns.
    pub received: ReceivedParser,
    /// Where the trust boundary lies.
    pub trust: Trust,
    /// `originating_ip_headers`.
    pub originating_ip_headers: Vec<String>,
    /// `envelope_sender_header`.
    pub envelope_sender_header: Option<String>,
}

/// `trusted_networks`, `internal_networks` and `msa_networks`.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    /// `trusted_networks`.
    pub trusted: NetList,
    /// `internal_networks`.
    pub internal: NetList,
    /// `msa_networks`.
    pub msa: NetList,
}

impl HeaderData {
    /// Prepares header-test data from `config`.
    pub fn new(config: &Config) -> HeaderData {
        let ev = &config.eval;
        HeaderData {
            received: ReceivedParser::new(),
            trust: Trust {
                trusted: ev.trusted_networks.clone(),
                internal: ev.internal_networks.clone(),
                msa: ev.msa_networks.clone(),
            },
            originating_ip_headers: ev.originating_ip_headers.clone(),
            envelope_sender_header: ev.envelope_sender_header.clone(),
        }
    }
}

/// Header tests' per-worker buffers.
#[derive(Debug, Default)]
pub struct HeaderScratch {}
