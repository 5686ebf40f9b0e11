//! The transfer and header decoders through a MIME wrapper, and the address parsers.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sift_fuzz::mime_decode(data));
