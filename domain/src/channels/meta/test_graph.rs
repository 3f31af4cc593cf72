//! A local server that speaks enough of the Graph API for the adapters' tests: it records each call's
//! path, authorization and JSON body, and answers with the queued answers in turn (then the last again).

use std::sync::{Arc, Mutex};

use axum::{Router, body::Bytes, extract::State, http::HeaderMap, routing::post};
use http::StatusCode;
use serde_json::Value;

use super::graph::GraphApi;

#[derive(Clone, Debug)]
pub struct Call {
    pub path: String,
    pub authorization: String,
    pub body: Value,
}

#[derive(Clone, Default)]
pub struct TestGraph {
    calls: Arc<Mutex<Vec<Call>>>,
    answers: Arc<Mutex<Vec<(u16, String)>>>,
}

impl TestGraph {
    /// Starts the server; `answers` are given in turn, the last one repeated.
    pub async fn start(answers: &[(u16, &str)]) -> (Self, GraphApi) {
        let graph = Self {
            calls: Arc::default(),
            answers: Arc::new(Mutex::new(
                answers.iter().rev().map(|(s, b)| (*s, (*b).to_owned())).collect(),
            )),
        };
        let app = Router::new().route("/{*path}", post(answer)).with_state(graph.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let api = GraphApi {
            base_url,
            version: "v21.0".to_owned(),
        };
        (graph, api)
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

async fn answer(
    State(graph): State<TestGraph>,
    uri: http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    graph.calls.lock().unwrap().push(Call {
        path: uri.path().to_owned(),
        authorization: headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let mut answers = graph.answers.lock().unwrap();
    let (status, body) = if answers.len() > 1 {
        answers.pop().unwrap()
    } else {
        answers.last().cloned().unwrap_or((200, "{}".to_owned()))
    };
    (StatusCode::from_u16(status).unwrap(), body)
}

/// A request carrying `body` as Meta would post it (unsigned: parsing does not check signatures).
pub fn posted(body: &str) -> crate::channels::RawRequest {
    crate::channels::RawRequest {
        method: "POST".to_owned(),
        public_url: "https://frontdesk.example/hooks/meta/ch_1".to_owned(),
        path_suffix: String::new(),
        headers: Vec::new(),
        body: body.to_owned().into(),
    }
}

pub fn config(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

pub fn http() -> reqwest::Client {
    crate::integrations::http::client(std::time::Duration::from_secs(5)).unwrap()
}
