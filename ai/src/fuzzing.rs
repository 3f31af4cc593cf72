//! Entry points for the fuzz targets (`fuzz/`, built with `--cfg fuzzing`): a model provider's answer as
//! the reply engine reads it, the tool calls' arguments included; and the answers of the agents' tools (an
//! MCP server's tool list and call result, a custom function's body) as a reply reads them.

use crate::replies::{
    chat::{ChatAnswer, anthropic, openai},
    provider::ToolOutcome,
    tools,
};

/// An answer body of the provider the first byte picks (Anthropic's Messages API, or OpenAI's chat
/// completions), read into the reply and its tool calls, each call's arguments read as the tools read them.
pub fn provider_answer(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let answer: Option<ChatAnswer> = if pick % 2 == 0 {
        serde_json::from_slice::<anthropic::Response>(body)
            .ok()
            .map(anthropic::Response::into_answer)
    } else {
        serde_json::from_slice::<openai::Response>(body)
            .ok()
            .and_then(|response| response.into_answer().ok())
    };
    for call in answer.iter().flat_map(|answer| &answer.calls) {
        let _ = tools::arguments(&call.arguments);
    }
}

/// A tool's answer, the first byte picking whose: an MCP server's `tools/list` result (kept within the
/// bounds an agent takes), an MCP `tools/call` result (cut to what the model reads), or a custom function's
/// answer body (cut at a character boundary within its cap).
pub fn tool_answer(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    match pick % 3 {
        0 => {
            if let Ok(listed) = serde_json::from_slice::<rmcp::model::ListToolsResult>(body) {
                let allowed = if listed.tools.len() % 2 == 0 {
                    Vec::new()
                } else {
                    listed.tools.iter().step_by(2).map(|t| t.name.to_string()).collect()
                };
                let (specs, _) = tools::mcp::specs(listed.tools, &allowed, "fuzzed");
                let bytes: usize = specs.iter().map(|spec| spec.size()).sum();
                assert!(specs.len() <= tools::mcp::MAX_TOOLS && bytes <= tools::mcp::MAX_SCHEMA_BYTES);
            }
        }
        1 => {
            if let Ok(result) = serde_json::from_slice::<rmcp::model::CallToolResult>(body) {
                match tools::mcp::outcome(result, 1024) {
                    ToolOutcome::Answer(text) | ToolOutcome::Error(text) => assert!(text.len() <= 1024),
                    ToolOutcome::Handoff(_) => unreachable!("an MCP result never hands off"),
                }
            }
        }
        _ => {
            let cap = tools::functions::ANSWER_BYTES;
            let text = tools::functions::capped_text(body.to_vec(), cap);
            assert!(text.len() <= cap && body.starts_with(text.as_bytes()));
        }
    }
}
