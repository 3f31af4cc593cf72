//! Remote chat models on their wire protocols: Anthropic's Messages API (`anthropic`) and OpenAI's Chat
//! Completions (`openai`, which vLLM, Ollama and llama.cpp speak too). A `ChatModel` takes one request in
//! the protocol-neutral shape below and gives one answer: text, tool calls, or both. What a reply asks of
//! it (the prompt, the tool rounds, the retries) is `remote`'s; this room only speaks the wire.
//!
//! The wire is typed serde structs of our own rather than a client crate: each API is one POST whose
//! fields we use are few and stable, the crates that exist cover one vendor each (and pull in streaming,
//! their own HTTP stacks and features we do not use), and ours keep one HTTP client, one retry rule and
//! one error mapping for both.

pub mod anthropic;
mod http;
pub mod openai;

use std::time::Duration;

use serde_json::Value;

/// One request to a chat model.
#[derive(Clone, Debug, Default)]
pub struct ChatRequest {
    pub model: String,
    /// The instructions (Anthropic's `system`, OpenAI's first `system` message).
    pub system: String,
    /// The conversation, oldest first, starting with a user message.
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    /// The most tokens the answer may have.
    pub max_tokens: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ChatMessage {
    User(String),
    /// What the model said before: text, the tools it called, or both.
    Assistant {
        text: String,
        calls: Vec<ToolCall>,
    },
    /// The answers to the tool calls of the assistant message before.
    ToolResults(Vec<ToolResult>),
}

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// `^[A-Za-z][A-Za-z0-9_-]{0,63}$`.
    pub name: String,
    pub description: String,
    /// JSON Schema of its arguments (an object schema).
    pub parameters: Value,
}

impl ToolSpec {
    /// Characters of its declaration as a request carries it (name, description, schema as JSON).
    pub fn size(&self) -> usize {
        self.name.len() + self.description.len() + self.parameters.to_string().len()
    }
}

/// A call the model asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The provider's id, echoed with the result.
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them: JSON text, which may be invalid (the tool answers that as an
    /// error to the model).
    pub arguments: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ToolResult {
    pub call_id: String,
    pub content: String,
    pub is_error: bool,
}

/// What the model answered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatAnswer {
    pub text: String,
    pub calls: Vec<ToolCall>,
}

/// Why a call gave no answer.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatError {
    /// Worth another try: a 429, a 5xx, a time-out, no connection, an overloaded answer. `retry_after` is
    /// the provider's own wait when it named one.
    Transient {
        message: String,
        retry_after: Option<Duration>,
    },
    /// Another try gets the same answer: a refused key (401/403), a request the provider rejects, an answer
    /// that is not the protocol.
    Permanent(String),
}

impl ChatError {
    pub fn message(&self) -> &str {
        match self {
            Self::Transient { message, .. } | Self::Permanent(message) => message,
        }
    }
}

/// A chat model on its wire protocol. Holds no database connection: a call is only network.
#[async_trait::async_trait]
pub trait ChatModel: Send + Sync {
    /// `anthropic` or `openai`.
    fn protocol(&self) -> &'static str;

    async fn complete(&self, request: &ChatRequest) -> Result<ChatAnswer, ChatError>;
}
