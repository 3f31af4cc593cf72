//! `multipart/form-data` uploads (the Content-Type's parameters, then the body) as the edge reads them.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| frontdesk_edge::fuzzing::upload(data));
