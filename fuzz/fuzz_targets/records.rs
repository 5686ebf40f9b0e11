//! Back-channel bytes: decode and RecordReader with arbitrary chunking agree.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sift_fuzz::records(data));
