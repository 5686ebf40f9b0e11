//! A whole request through read_request with arbitrary read chunking, zlib bodies included.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sift_fuzz::request(data));
