//! Documents and pages a knowledge import reads: HTML, plain text, Markdown, CSV and DOCX (the first byte
//! picks the format; PDF has its own target), each to its sections as an import does.
#![no_main]

use frontdesk_domain::knowledge::import::documents::{Format, sections};
use libfuzzer_sys::fuzz_target;

const FORMATS: [Format; 5] = [Format::Html, Format::Text, Format::Markdown, Format::Csv, Format::Docx];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, document)) = data.split_first() else {
        return;
    };
    let _ = sections(FORMATS[usize::from(pick) % FORMATS.len()], document, "Fuzzed");
});
