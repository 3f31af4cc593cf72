//! OpenAI's Chat Completions: `POST {base}/chat/completions` with `Authorization: Bearer` (left out when no key
//! is set: a local Ollama or llama.cpp wants none); tools as `{type: function, function: {name, description,
//! parameters}}`, calls as the assistant message's `tool_calls` (arguments as JSON text) answered by `tool`
//! messages. The answer's length is `max_completion_tokens` on OpenAI's own API (its newer models refuse the
//! older field) and `max_tokens` elsewhere (the servers people run themselves, vLLM, Ollama, llama.cpp, read it).

use http::{HeaderMap, HeaderValue, header};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ChatAnswer, ChatError, ChatMessage, ChatModel, ChatRequest, ToolCall, http::post};

pub struct OpenAi {
    pub client: reqwest::Client,
    /// Up to the API version: `https://api.openai.com/v1`, `http://localhost:11434/v1`.
    pub base_url: String,
    pub api_key: String,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum Message<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<CallOut<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: String,
    },
}

#[derive(Serialize)]
struct Tool<'a> {
    r#type: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[derive(Serialize)]
struct CallOut<'a> {
    id: &'a str,
    r#type: &'static str,
    function: FunctionCall<'a>,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Deserialize)]
pub(crate) struct Response {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: AnswerMessage,
}

#[derive(Deserialize)]
struct AnswerMessage {
    #[serde(default)]
    content: Option<String>,
    /// Missing, `null` (some servers) or a list.
    #[serde(default)]
    tool_calls: Option<Vec<CallIn>>,
}

#[derive(Deserialize)]
struct CallIn {
    id: String,
    function: FunctionIn,
}

#[derive(Deserialize)]
struct FunctionIn {
    name: String,
    /// JSON text; some servers send an object instead.
    arguments: Value,
}

fn messages(request: &ChatRequest) -> Vec<Message<'_>> {
    let system = (!request.system.is_empty()).then_some(Message::System {
        content: &request.system,
    });
    let rest = request.messages.iter().flat_map(|m| -> Vec<Message<'_>> {
        match m {
            ChatMessage::User(text) => vec![Message::User { content: text }],
            ChatMessage::Assistant { text, calls } => vec![Message::Assistant {
                content: (!text.is_empty()).then_some(text.as_str()),
                tool_calls: calls
                    .iter()
                    .map(|c| CallOut {
                        id: &c.id,
                        r#type: "function",
                        function: FunctionCall {
                            name: &c.name,
                            arguments: &c.arguments,
                        },
                    })
                    .collect(),
            }],
            // The protocol has no error flag: an error says so in its text.
            ChatMessage::ToolResults(results) => results
                .iter()
                .map(|r| Message::Tool {
                    tool_call_id: &r.call_id,
                    content: if r.is_error {
                        format!("error: {}", r.content)
                    } else {
                        r.content.clone()
                    },
                })
                .collect(),
        }
    });
    system.into_iter().chain(rest).collect()
}

impl OpenAi {
    /// OpenAI's own API rather than a server that speaks its protocol.
    fn is_openai(&self) -> bool {
        reqwest::Url::parse(&self.base_url).is_ok_and(|u| u.host_str() == Some("api.openai.com"))
    }
}

#[async_trait::async_trait]
impl ChatModel for OpenAi {
    fn protocol(&self) -> &'static str {
        "openai"
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatAnswer, ChatError> {
        let body = Request {
            model: &request.model,
            messages: messages(request),
            tools: request
                .tools
                .iter()
                .map(|t| Tool {
                    r#type: "function",
                    function: Function {
                        name: &t.name,
                        description: &t.description,
                        parameters: &t.parameters,
                    },
                })
                .collect(),
            // OpenAI's newer models refuse `max_tokens`; the servers people run themselves read only it.
            max_tokens: (!self.is_openai()).then_some(request.max_tokens),
            max_completion_tokens: self.is_openai().then_some(request.max_tokens),
        };
        let mut headers = HeaderMap::new();
        if !self.api_key.is_empty() {
            let mut bearer = HeaderValue::from_str(&format!("Bearer {}", self.api_key))
                .map_err(|_| ChatError::Permanent("the API key is not a header value".into()))?;
            bearer.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, bearer);
        }
        let url = format!("{}/chat/completions", self.base_url.trim_end_matches('/'));
        let response: Response = post(&self.client, &url, headers, &body).await?;
        response.into_answer()
    }
}

impl Response {
    /// The first choice's text and tool calls.
    pub(crate) fn into_answer(self) -> Result<ChatAnswer, ChatError> {
        let Some(choice) = self.choices.into_iter().next() else {
            return Err(ChatError::Permanent("the answer has no choices".into()));
        };
        Ok(ChatAnswer {
            text: choice.message.content.unwrap_or_default(),
            calls: choice
                .message
                .tool_calls
                .into_iter()
                .flatten()
                .map(|c| ToolCall {
                    id: c.id,
                    name: c.function.name,
                    arguments: match c.function.arguments {
                        Value::String(text) => text,
                        other => other.to_string(),
                    },
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replies::chat::ToolResult;

    #[test]
    fn messages_are_the_documented_shapes() {
        let request = ChatRequest {
            system: "Be brief.".into(),
            messages: vec![
                ChatMessage::User("Weather in Pune?".into()),
                ChatMessage::Assistant {
                    text: String::new(),
                    calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "get_weather".into(),
                        arguments: "{\"city\":\"Pune\"}".into(),
                    }],
                },
                ChatMessage::ToolResults(vec![ToolResult {
                    call_id: "call_1".into(),
                    content: "timed out".into(),
                    is_error: true,
                }]),
            ],
            ..ChatRequest::default()
        };
        assert_eq!(
            serde_json::to_value(messages(&request)).unwrap(),
            serde_json::json!([
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Pune?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Pune\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "error: timed out"}
            ])
        );
    }

    #[test]
    fn an_answer_reads_content_and_tool_calls() {
        let response: Response = serde_json::from_value(serde_json::json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "create_task", "arguments": "{\"title\":\"Call back\"}"}}]
            }}]
        }))
        .unwrap();
        let message = &response.choices[0].message;
        assert_eq!(message.content, None);
        assert_eq!(message.tool_calls.as_ref().unwrap()[0].function.name, "create_task");
        let null: AnswerMessage =
            serde_json::from_value(serde_json::json!({"content": "Hi", "tool_calls": null})).unwrap();
        assert!(null.tool_calls.is_none());
    }
}
