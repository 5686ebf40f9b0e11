//! Benchmark tools for sift.
//!
//! `spamc-load` drives a spamd-compatible daemon (siftd, spamd, rspamd's normal worker) the
//! way many spamc processes would, without a process per message: worker threads that each
//! open one connection per request, send a prepared SPAMC/1.5 request, read the answer to
//! EOF and check it as spamc would. It reports messages/s, MB/s, latency percentiles and
//! errors by kind, for people and as one JSON line for `bench/run`.

pub mod corpus;
pub mod load;
pub mod protocol;
pub mod stats;
pub mod target;
