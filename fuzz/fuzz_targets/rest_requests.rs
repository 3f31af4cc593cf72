//! REST requests to every published operation (the first byte picks it): query string and JSON body as the
//! edge transcodes them into the operation's request message.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| frontdesk_edge::fuzzing::request(data));
