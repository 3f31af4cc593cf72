//! Anthropic's Messages API: `POST {base}/v1/messages` with `x-api-key` and `anthropic-version: 2023-06-01`;
//! tools as `{name, description, input_schema}`, calls as `tool_use` content blocks answered by
//! `tool_result` blocks in the next user message.

use http::{HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ChatAnswer, ChatError, ChatMessage, ChatModel, ChatRequest, ToolCall, http::post};

pub const VERSION: &str = "2023-06-01";

pub struct Anthropic {
    pub client: reqwest::Client,
    /// Without the `/v1/messages` path: `https://api.anthropic.com`.
    pub base_url: String,
    pub api_key: String,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    messages: Vec<Message<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

#[derive(Deserialize)]
pub(crate) struct Response {
    content: Vec<AnswerBlock>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum AnswerBlock {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// Thinking and any block a later version adds: not part of the reply.
    #[serde(other)]
    Other,
}

fn message(message: &ChatMessage) -> Message<'_> {
    match message {
        ChatMessage::User(text) => Message {
            role: "user",
            content: vec![Block::Text { text }],
        },
        ChatMessage::Assistant { text, calls } => {
            let text = (!text.is_empty()).then_some(Block::Text { text });
            let uses = calls.iter().map(|call| Block::ToolUse {
                id: &call.id,
                name: &call.name,
                // The model's own arguments; ones that were not JSON are sent back as no arguments (the tool's
                // error result says what was wrong).
                input: serde_json::from_str::<Value>(&call.arguments)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| Value::Object(Default::default())),
            });
            Message {
                role: "assistant",
                content: text.into_iter().chain(uses).collect(),
            }
        }
        ChatMessage::ToolResults(results) => Message {
            role: "user",
            content: results
                .iter()
                .map(|r| Block::ToolResult {
                    tool_use_id: &r.call_id,
                    content: &r.content,
                    is_error: r.is_error,
                })
                .collect(),
        },
    }
}

#[async_trait::async_trait]
impl ChatModel for Anthropic {
    fn protocol(&self) -> &'static str {
        "anthropic"
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatAnswer, ChatError> {
        let body = Request {
            model: &request.model,
            max_tokens: request.max_tokens,
            system: &request.system,
            messages: request.messages.iter().map(message).collect(),
            tools: request
                .tools
                .iter()
                .map(|t| Tool {
                    name: &t.name,
                    description: &t.description,
                    input_schema: &t.parameters,
                })
                .collect(),
        };
        let mut headers = HeaderMap::new();
        let mut key = HeaderValue::from_str(&self.api_key)
            .map_err(|_| ChatError::Permanent("the API key is not a header value".into()))?;
        key.set_sensitive(true);
        headers.insert("x-api-key", key);
        headers.insert("anthropic-version", HeaderValue::from_static(VERSION));
        let url = format!("{}/v1/messages", self.base_url.trim_end_matches('/'));
        let response: Response = post(&self.client, &url, headers, &body).await?;
        Ok(response.into_answer())
    }
}

impl Response {
    /// The reply's text and tool calls; other blocks (thinking, ...) are not part of it.
    pub(crate) fn into_answer(self) -> ChatAnswer {
        let mut answer = ChatAnswer::default();
        for block in self.content {
            match block {
                AnswerBlock::Text { text } => answer.text.push_str(&text),
                AnswerBlock::ToolUse { id, name, input } => answer.calls.push(ToolCall {
                    id,
                    name,
                    arguments: input.to_string(),
                }),
                AnswerBlock::Other => {}
            }
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replies::chat::ToolResult;

    #[test]
    fn messages_are_the_documented_blocks() {
        let call = ToolCall {
            id: "toolu_1".into(),
            name: "get_weather".into(),
            arguments: r#"{"city":"Pune"}"#.into(),
        };
        let assistant = ChatMessage::Assistant {
            text: "Let me check.".into(),
            calls: vec![call],
        };
        assert_eq!(
            serde_json::to_value(message(&assistant)).unwrap(),
            serde_json::json!({"role": "assistant", "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Pune"}}
            ]})
        );
        let results = ChatMessage::ToolResults(vec![ToolResult {
            call_id: "toolu_1".into(),
            content: "no such city".into(),
            is_error: true,
        }]);
        assert_eq!(
            serde_json::to_value(message(&results)).unwrap(),
            serde_json::json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "no such city", "is_error": true}
            ]})
        );
    }

    #[test]
    fn an_answer_reads_text_and_tool_use_and_skips_the_rest() {
        let response: Response = serde_json::from_value(serde_json::json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [
                {"type": "thinking", "thinking": "...", "signature": "x"},
                {"type": "text", "text": "Booking it."},
                {"type": "tool_use", "id": "toolu_2", "name": "book_appointment", "input": {"start_time": "2026-12-01T10:00:00Z"}}
            ],
            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}
        }))
        .unwrap();
        assert_eq!(response.content.len(), 3);
        assert!(matches!(response.content[0], AnswerBlock::Other));
    }
}
