//! Event sequences from a fake shell with hostile children; the policy's invariants hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sift_fuzz::prefork(data));
