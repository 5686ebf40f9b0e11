//! Arbitrary rule text (up to 4 KiB): parse, compile, scan a small message.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sift_fuzz::rules(data));
