//! Any bytes as a message: parse and render body, rawbody, uris, headers and parts.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sift_fuzz::message(data));
