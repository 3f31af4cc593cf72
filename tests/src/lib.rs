//! Test kit for black-box tests: the real `frontdesk` binary on ephemeral ports, a fresh database per test
//! (an SQLite file in a temporary directory, or a new PostgreSQL database), and local servers that speak
//! outside services' wire protocols.

pub mod admin;
pub mod binary;
pub mod blackhole;
pub mod browser;
pub mod db;
pub mod knowledge;
pub mod mcp_server;
pub mod meta;
pub mod model_server;
pub mod otlp;
pub mod platform;
pub mod postgres_server;
pub mod process;
pub mod raw_post;
pub mod razorpay;
pub mod redis_server;
pub mod secrets;
pub mod server;
pub mod sms;
pub mod tcp_proxy;
pub mod tls;
pub mod twilio;
pub mod webchat;
pub mod webhook_receiver;

pub use db::Db;
pub use server::Server;

/// Runs one async test body once on SQLite and once on PostgreSQL, as two named tests.
#[macro_export]
macro_rules! on_both_databases {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let db = $crate::Db::sqlite();
                ($body)(db).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let db = $crate::Db::postgres().await;
                ($body)(db).await;
            }
        }
    };
}

/// An HTTP answer, body parsed as JSON (`Null` when it is not JSON).
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: serde_json::Value,
}

impl Answer {
    /// The error `code` of an error body.
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or_default()
    }

    /// The field names of an error body's `fields`.
    pub fn fields(&self) -> Vec<String> {
        self.body["error"]["fields"]
            .as_array()
            .map(|f| {
                f.iter()
                    .filter_map(|v| v["field"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Sends `method url` with a raw body (none when `None`).
pub async fn call(method: &str, url: &str, body: Option<&str>) -> Answer {
    call_with(method, url, &[], body).await
}

/// Sends `method url` with extra headers and a raw body (none when `None`).
pub async fn call_with(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&str>) -> Answer {
    let client = http_client();
    let mut request = client.request(method.parse().expect("method"), url);
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("x-api-key") || name.eq_ignore_ascii_case("authorization") {
            secrets::remember(value.trim_start_matches("Bearer "));
        }
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        if let Ok(json) = serde_json::from_str(body) {
            secrets::remember_in(&json);
        }
        request = request.header("content-type", "application/json").body(body.to_owned());
    }
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
    secrets::remember_in(&body);
    Answer { status, headers, body }
}

/// The checkout signature by the standard formula: lowercase hex HMAC-SHA256(secret, order|payment).
pub fn checkout_signature(secret: &str, order_id: &str, payment_id: &str) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(format!("{order_id}|{payment_id}").as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// An HTTP client (the workspace builds rustls with the ring provider only, installed here).
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// Runs the futures concurrently on the test runtime; their outputs in order.
pub async fn join_all<F: std::future::Future + Send + 'static>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut outputs = Vec::new();
    for handle in handles {
        outputs.push(handle.await.expect("task"));
    }
    outputs
}

/// The fields a gRPC error's `google.rpc.BadRequest` names, in order (none without one).
pub fn violated_fields(status: &tonic::Status) -> Vec<String> {
    use tonic_types::StatusExt;
    status
        .get_error_details()
        .bad_request()
        .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
        .unwrap_or_default()
}
