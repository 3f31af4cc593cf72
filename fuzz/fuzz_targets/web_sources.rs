//! What a site serves a knowledge import besides its pages: a sitemap (decoded by its content type, its
//! pages listed) and a `robots.txt` (its rules for the bot, asked about a few URLs). The first byte picks
//! which, and for a sitemap its content type.
#![no_main]

use frontdesk_domain::knowledge::import::{MAX_PAGES, decode, robots, sitemap};
use libfuzzer_sys::fuzz_target;

const CONTENT_TYPES: [&str; 4] = [
    "application/xml",
    "text/xml; charset=utf-8",
    "application/xml; charset=iso-8859-1",
    "application/octet-stream",
];
const ASKED: [&str; 3] = ["https://shop.test/", "https://shop.test/help/a?b=c", "https://shop.test/%E2%82%AC/x"];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    if pick % 2 == 0 {
        let text = decode::text(body, CONTENT_TYPES[usize::from(pick / 2) % CONTENT_TYPES.len()]);
        if let Ok(pages) = sitemap::pages(&text, MAX_PAGES) {
            assert!(pages.len() <= MAX_PAGES);
        }
    } else if let Some(rules) = robots::parse(body) {
        for url in ASKED {
            let _ = rules.allowed(url);
        }
    }
});
