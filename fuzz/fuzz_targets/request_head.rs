//! A spamd request head: one-shot and incremental parsers.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sift_fuzz::request_head(data));
