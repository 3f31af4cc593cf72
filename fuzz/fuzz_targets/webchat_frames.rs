//! A web chat visitor's socket frames, as the service reads each one.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = frontdesk_domain::webchat::frames::read(data);
});
