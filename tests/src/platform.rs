//! A platform API client for one account (REST with its key; gRPC requests carrying it) and the assertions
//! the black-box suites share.

use serde_json::{Value, json};
use tonic::metadata::MetadataValue;

use crate::{Answer, Server, admin, call_with};

/// An account on `server` with a high rate limit, and calls made with its key.
pub struct Platform<'a> {
    pub server: &'a Server,
    pub account_id: String,
    pub key: String,
}

impl Platform<'_> {
    pub async fn new(server: &Server) -> Platform<'_> {
        let (account_id, key) = admin::account(server, "growth", 10_000).await;
        Platform {
            server,
            account_id,
            key,
        }
    }

    /// Calls as an account made earlier on `server` (kept across a restart of the process, or used on another
    /// replica).
    pub fn of<'a>(server: &'a Server, account_id: &str, key: &str) -> Platform<'a> {
        Platform {
            server,
            account_id: account_id.to_owned(),
            key: key.to_owned(),
        }
    }

    pub async fn send(&self, method: &str, path: &str, body: Option<Value>) -> Answer {
        let body = body.map(|b| b.to_string());
        call_with(
            method,
            &self.server.url(path),
            &[("x-api-key", &self.key)],
            body.as_deref(),
        )
        .await
    }

    /// `method path` that must answer 200 with `"success": true`; the body.
    pub async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let answer = self.send(method, path, body).await;
        assert_eq!(answer.status, 200, "{method} {path}: {}", answer.body);
        assert_eq!(answer.body["success"], true, "{method} {path}: {}", answer.body);
        answer.body
    }

    /// The account's credit balance.
    pub async fn balance(&self) -> f64 {
        self.ok("GET", "/v1/credits", None).await["credits"]["balance"]
            .as_f64()
            .expect("a balance")
    }

    /// `GET path` that must answer 200 with `"success": true`; the body.
    pub async fn get(&self, path: &str) -> Value {
        self.ok("GET", path, None).await
    }

    /// A new agent with only a name; its id.
    /// The only conversation of the contact with this phone, with its messages.
    pub async fn conversation_with(&self, phone: &str) -> Value {
        let contacts = self
            .ok("GET", &format!("/v1/contacts?q={}", phone.replace('+', "%2B")), None)
            .await;
        let contact = contacts["contacts"][0]["id"].as_str().expect("the contact").to_owned();
        let list = self
            .ok("GET", &format!("/v1/conversations?contact_id={contact}"), None)
            .await;
        let id = list["conversations"][0]["id"].as_str().expect("a conversation");
        self.ok("GET", &format!("/v1/conversations/{id}"), None).await
    }

    pub async fn agent(&self, name: &str) -> String {
        self.ok("POST", "/v1/agents", Some(json!({"name": name}))).await["agent"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// A web chat channel (no credentials needed).
    pub async fn webchat(&self, name: &str) {
        self.ok("POST", "/v1/channels", Some(json!({"name": name, "type": "webchat"})))
            .await;
    }

    /// The `id` field of every item under `key` in the list at `path`.
    pub async fn ids(&self, path: &str, key: &str, id: &str) -> Vec<String> {
        self.ok("GET", path, None).await[key]
            .as_array()
            .unwrap_or_else(|| panic!("{path}: no {key}"))
            .iter()
            .map(|item| item[id].as_str().unwrap().to_owned())
            .collect()
    }

    /// A gRPC request carrying this account's key.
    pub fn grpc<T>(&self, message: T) -> tonic::Request<T> {
        authed(&self.key, message)
    }

    /// Polls `GET path` until `done` holds for its body (30 s at most); that body.
    pub async fn poll(&self, path: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let body = self.get(path).await;
            if done(&body) {
                return body;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{path} never reached the state: {body}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// A webhook subscription of `url` to `events`; its signing secret.
    pub async fn subscribe(&self, url: &str, events: &[&str]) -> String {
        let body = json!({"name": "hooks", "url": url, "events": events});
        self.ok("POST", "/v1/webhooks", Some(body)).await["secret"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// A new deal in stage `new`; its id.
    pub async fn deal(&self, title: &str) -> String {
        let body = json!({"title": title, "stage": "new"});
        self.ok("POST", "/v1/deals", Some(body)).await["deal"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// A new FAQ of the agent; its id.
    pub async fn faq(&self, agent: &str, question: &str, answer: &str) -> String {
        let body = json!({"question": question, "answer": answer});
        self.ok("POST", &format!("/v1/agents/{agent}/faqs"), Some(body)).await["faq"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The first `limit` results of the agent's search for `query`, best first.
    pub async fn search(&self, agent: &str, query: &str, limit: i32) -> Vec<Value> {
        let body = json!({"query": query, "limit": limit});
        let answer = self.ok("POST", &format!("/v1/agents/{agent}/search"), Some(body)).await;
        answer["results"].as_array().expect("results").clone()
    }
}

/// A gRPC request carrying `key`.
pub fn authed<T>(key: &str, message: T) -> tonic::Request<T> {
    let key: MetadataValue<_> = key.parse().unwrap();
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert("x-api-key", key);
    request
}

/// A 400 `invalid_argument` naming `field`.
pub fn assert_invalid(answer: &Answer, field: &str, case: &str) {
    assert_invalid_where(answer, |f| f == field, &format!("{case}: expected field {field}"));
}

/// A 400 `invalid_argument` naming a field `wanted` accepts; `expected` says which, for the failure.
fn assert_invalid_where(answer: &Answer, wanted: impl Fn(&str) -> bool, expected: &str) {
    assert_eq!(
        (answer.status, answer.code()),
        (400, "invalid_argument"),
        "{expected}: {}",
        answer.body
    );
    assert!(answer.fields().iter().any(|f| wanted(f)), "{expected}: {}", answer.body);
}

pub fn assert_not_found(answer: &Answer, case: &str) {
    assert_eq!(
        (answer.status, answer.code()),
        (404, "not_found"),
        "{case}: {}",
        answer.body
    );
}

pub fn assert_insufficient_scope(answer: &Answer, case: &str) {
    assert_eq!(
        (answer.status, answer.code()),
        (403, "insufficient_scope"),
        "{case}: {}",
        answer.body
    );
}

/// `prefix` + 16 base62 characters.
pub fn assert_id(id: &Value, prefix: &str) {
    let id = id.as_str().unwrap_or_else(|| panic!("an id, not {id}"));
    let rest = id
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("{id} starts with {prefix}"));
    assert!(
        rest.len() == 16 && rest.chars().all(|c| c.is_ascii_alphanumeric()),
        "{id}: {prefix} + 16 base62 characters"
    );
}

/// RFC 3339 UTC with `Z`.
pub fn assert_timestamp(value: &Value, what: &str) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("{what}: a timestamp, not {value}"));
    assert!(text.ends_with('Z'), "{what}: RFC 3339 UTC with Z: {text}");
    chrono::DateTime::parse_from_rfc3339(text).unwrap_or_else(|e| panic!("{what}: {text}: {e}"));
}

/// An agency account and one sub-account under it.
pub async fn agency_and_child(server: &Server) -> (Platform<'_>, Platform<'_>) {
    let (agency_id, agency_key) = admin::account(server, "scale", 10_000).await;
    let (child_id, child_key) = admin::account_under(server, "growth", 10_000, &agency_id).await;
    (
        Platform {
            server,
            account_id: agency_id,
            key: agency_key,
        },
        Platform {
            server,
            account_id: child_id,
            key: child_key,
        },
    )
}

/// A 400 `invalid_argument` naming a field under `prefix` (`booking`, `follow_ups.delay_minutes`, ...).
pub fn assert_invalid_under(answer: &Answer, prefix: &str, case: &str) {
    assert_invalid_where(
        answer,
        |f| f.starts_with(prefix),
        &format!("{case}: expected a field under {prefix}"),
    );
}

/// A JSON object as a `google.protobuf.Struct`.
pub fn to_struct(value: Value) -> prost_types::Struct {
    match to_prost(value).kind {
        Some(prost_types::value::Kind::StructValue(fields)) => fields,
        other => panic!("not an object: {other:?}"),
    }
}

/// A JSON value as a `google.protobuf.Value`.
pub fn to_prost(value: Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap()),
        Value::String(s) => Kind::StringValue(s),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.into_iter().map(to_prost).collect(),
        }),
        Value::Object(fields) => Kind::StructValue(prost_types::Struct {
            fields: fields.into_iter().map(|(k, v)| (k, to_prost(v))).collect(),
        }),
    };
    prost_types::Value { kind: Some(kind) }
}
