//! sift-core: the engine of sift, a spam-scanning daemon that stands in for
//! SpamAssassin's `spamd` where memory is scarce.
//!
//! The crate is `no_std` + `alloc` and free of `unsafe`, so the same engine runs in
//! a Linux or BSD daemon and on a microcontroller.
//!
//! # Layers
//! - [`msg`]: a view over a message held in a buffer. Headers (folded, repeated,
//!   RFC 2047-decoded), the MIME tree, base64 and quoted-printable decoding, HTML
//!   to text and URI extraction, rendered the way SpamAssassin renders a message
//!   for its `body`, `rawbody`, `full` and `uri` rules. Capacities are fixed;
//!   overflow is flagged, never fatal.
//! - [`rules`]: the SpamAssassin `.cf` language and its compiler. Rules are
//!   compiled once, at load: the literals each rule requires go into one
//!   Aho-Corasick automaton per target, and only the rules whose literals occur are
//!   confirmed with a lazy DFA. Matching is linear in the input; no backtracking
//!   engine ever sees message data.
//! - [`scan`]: runs a compiled [`rules::RuleSet`] over a message with a
//!   caller-owned [`scan::Scratch`], takes `&self`, allocates nothing per message
//!   once the scratch is warm.
//! - [`report`]: the verdict rendered as SpamAssassin renders it.
//!
//! Rules compiled before a daemon forks are shared copy-on-write by its children
//! and never written afterwards: every per-message write goes to the scratch.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(any(test, feature = "std"))]
extern crate std;

pub mod msg;
pub mod prefork;
pub mod proto;
pub mod report;
pub mod rules;
pub mod scan;
pub mod score;
