//! What an agent's tools answer, as a reply reads it: an MCP server's tool list and a call's result, and a
//! custom function's answer body (the first byte picks which).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| frontdesk_ai::fuzzing::tool_answer(data));
