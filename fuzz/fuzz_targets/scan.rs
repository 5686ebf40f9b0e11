//! Any bytes as a message: parse, render and scan with the embedded rules.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sift_fuzz::scan(data));
