//! A chat model on loopback speaking Anthropic's Messages API (`POST /v1/messages`) and OpenAI's Chat
//! Completions (`POST /v1/chat/completions`): it records every request (headers and JSON body) and answers
//! as the test's script says, in the protocol's documented shapes: text, tool calls, an error status with
//! `retry-after`, a wait before answering, or no answer at all.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Json, Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Anthropic,
    OpenAi,
}

/// One request the fake received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub protocol: Protocol,
    /// Header names lower-cased.
    pub headers: HashMap<String, String>,
    pub body: Value,
}

impl Recorded {
    /// The text of the latest user message (Anthropic: its text blocks; OpenAI: the last `user` message).
    pub fn last_user_text(&self) -> String {
        let messages = self.body["messages"].as_array().cloned().unwrap_or_default();
        for message in messages.iter().rev() {
            if message["role"] != "user" {
                continue;
            }
            match &message["content"] {
                Value::String(text) => return text.clone(),
                Value::Array(blocks) => {
                    let text: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
                    if !text.is_empty() {
                        return text.join("\n");
                    }
                }
                _ => {}
            }
        }
        String::new()
    }

    /// The tool results sent back so far, in order: (call id, content, is_error). OpenAI's have no error
    /// flag; theirs is read from the `error: ` prefix the service writes.
    pub fn tool_results(&self) -> Vec<(String, String, bool)> {
        let messages = self.body["messages"].as_array().cloned().unwrap_or_default();
        let mut out = Vec::new();
        for message in &messages {
            match self.protocol {
                Protocol::Anthropic => {
                    for block in message["content"].as_array().into_iter().flatten() {
                        if block["type"] == "tool_result" {
                            out.push((
                                block["tool_use_id"].as_str().unwrap_or_default().to_owned(),
                                block["content"].as_str().unwrap_or_default().to_owned(),
                                block["is_error"].as_bool().unwrap_or(false),
                            ));
                        }
                    }
                }
                Protocol::OpenAi => {
                    if message["role"] == "tool" {
                        let content = message["content"].as_str().unwrap_or_default();
                        out.push((
                            message["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                            content.to_owned(),
                            content.starts_with("error: "),
                        ));
                    }
                }
            }
        }
        out
    }

    /// The names of the tools offered.
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().or_else(|| t["function"]["name"].as_str()))
            .map(str::to_owned)
            .collect()
    }

    /// The instructions: Anthropic's `system`, OpenAI's first `system` message.
    pub fn system(&self) -> String {
        match self.protocol {
            Protocol::Anthropic => self.body["system"].as_str().unwrap_or_default().to_owned(),
            Protocol::OpenAi => self.body["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        }
    }
}

/// What the fake answers a request.
#[derive(Clone, Debug)]
pub enum Reply {
    Text(String),
    /// Tool calls: (id, name, arguments as JSON text, which may be invalid).
    Calls(Vec<(String, String, String)>),
    /// An error status with an optional `retry-after` (seconds).
    Status(u16, Option<u64>),
    /// A body that is no protocol at all.
    Garbage,
    /// Never answers.
    Hang,
}

impl Reply {
    pub fn text(text: &str) -> Self {
        Self::Text(text.to_owned())
    }

    pub fn call(id: &str, name: &str, arguments: Value) -> Self {
        Self::Calls(vec![(id.to_owned(), name.to_owned(), arguments.to_string())])
    }
}

type Script = dyn Fn(&Recorded) -> (Reply, Duration) + Send + Sync;

struct Shared {
    script: Mutex<Arc<Script>>,
    requests: Mutex<Vec<Recorded>>,
}

#[derive(Clone)]
pub struct FakeModel {
    /// `http://127.0.0.1:PORT`: Anthropic's base URL; OpenAI's is `{base}/v1`.
    pub base_url: String,
    shared: Arc<Shared>,
}

impl FakeModel {
    /// Answers "Hello from the model." at once until scripted otherwise.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared {
            script: Mutex::new(Arc::new(|_: &Recorded| {
                (Reply::text("Hello from the model."), Duration::ZERO)
            })),
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/messages", post(anthropic))
            .route("/v1/chat/completions", post(openai))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base_url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { base_url, shared }
    }

    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base_url)
    }

    /// From now on, each request is answered by `script` (the answer and how long to wait before it).
    pub fn script(&self, script: impl Fn(&Recorded) -> (Reply, Duration) + Send + Sync + 'static) {
        *self.shared.script.lock().unwrap() = Arc::new(script);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }
}

async fn anthropic(State(shared): State<Arc<Shared>>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    answer(shared, Protocol::Anthropic, headers, body).await
}

async fn openai(State(shared): State<Arc<Shared>>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    answer(shared, Protocol::OpenAi, headers, body).await
}

async fn answer(shared: Arc<Shared>, protocol: Protocol, headers: HeaderMap, body: Value) -> Response {
    let recorded = Recorded {
        protocol,
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or_default().to_owned()))
            .collect(),
        body,
    };
    let script = shared.script.lock().unwrap().clone();
    let (reply, wait) = script(&recorded);
    shared.requests.lock().unwrap().push(recorded.clone());
    tokio::time::sleep(wait).await;
    let model = recorded.body["model"].clone();
    match (reply, protocol) {
        (Reply::Hang, _) => std::future::pending().await,
        (Reply::Garbage, _) => (StatusCode::OK, "<html>not a model</html>").into_response(),
        (Reply::Status(status, retry_after), _) => {
            let status = StatusCode::from_u16(status).unwrap();
            let body =
                json!({"type": "error", "error": {"type": "api_error", "message": format!("scripted {status}")}});
            let mut response = (status, Json(body)).into_response();
            if let Some(seconds) = retry_after {
                response
                    .headers_mut()
                    .insert("retry-after", seconds.to_string().parse().unwrap());
            }
            response
        }
        (Reply::Text(text), Protocol::Anthropic) => Json(json!({
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 5}
        }))
        .into_response(),
        (Reply::Calls(calls), Protocol::Anthropic) => {
            let content: Vec<Value> = calls
                .iter()
                .map(|(id, name, arguments)| {
                    let input: Value = serde_json::from_str(arguments).unwrap_or(json!({}));
                    json!({"type": "tool_use", "id": id, "name": name, "input": input})
                })
                .collect();
            Json(json!({
                "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": content,
                "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 5}
            }))
            .into_response()
        }
        (Reply::Text(text), Protocol::OpenAi) => Json(json!({
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        }))
        .into_response(),
        (Reply::Calls(calls), Protocol::OpenAi) => {
            let tool_calls: Vec<Value> = calls
                .iter()
                .map(|(id, name, arguments)| {
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
                })
                .collect();
            Json(json!({
                "id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": model,
                "choices": [{"index": 0, "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "content": null, "tool_calls": tool_calls}}]
            }))
            .into_response()
        }
    }
}
