//! PDF documents a knowledge import reads, to their sections. The service extracts documents in a child
//! process with memory and CPU limits, which turns the PDF parser's panics into a failed import
//! (`unreadable`, see the `font-panic.pdf` fixture); so a panic is caught here as the child's exit is (the
//! fuzzer's own panic hook, which aborts, is replaced), and the target looks for what a child could not
//! contain: memory errors, and aborts such as a stack overflow (contained too, by the child dying, but each
//! worth a fixture).
#![no_main]

use std::sync::Once;

use frontdesk_domain::knowledge::import::documents::{Format, sections};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    static QUIET_PANICS: Once = Once::new();
    QUIET_PANICS.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let _ = std::panic::catch_unwind(|| sections(Format::Pdf, data, "Fuzzed"));
});
