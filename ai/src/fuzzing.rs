//! Entry points for the fuzz targets (`fuzz/`, built with `--cfg fuzzing`): a model provider's answer as
//! the reply engine reads it, the tool calls' arguments included.

use crate::replies::{
    chat::{ChatAnswer, anthropic, openai},
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
