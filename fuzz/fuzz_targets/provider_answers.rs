//! Model providers' answers (Anthropic's and OpenAI-compatible), read into a reply and its tool calls.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| frontdesk_ai::fuzzing::provider_answer(data));
