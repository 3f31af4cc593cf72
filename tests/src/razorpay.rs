//! A local server speaking Razorpay's Orders API (`POST /v1/orders`, HTTP Basic auth, its JSON answers and
//! error bodies), switchable into failure modes, recording what it was sent.

use std::sync::{Arc, Mutex};

use axum::{Router, extract::State, http::HeaderMap, response::IntoResponse, routing::post};
use base64::Engine;
use serde_json::{Value, json};

pub const TEST_KEY_ID: &str = "rzp_test_kit";
pub const TEST_KEY_SECRET: &str = "test_key_secret_0123456789";

/// How the fake answers the next calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// 200 with an order, as Razorpay answers.
    Ok,
    /// 400 `BAD_REQUEST_ERROR` in Razorpay's error shape.
    BadRequest,
    /// 200 with a body that is not an order.
    Garbage,
    /// Answers only after five seconds.
    Slow,
}

#[derive(Clone)]
pub struct FakeRazorpay {
    pub base_url: String,
    state: Arc<Mutex<Inner>>,
}

struct Inner {
    mode: Mode,
    requests: Vec<Value>,
    issued: u32,
}

impl FakeRazorpay {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(Inner {
            mode: Mode::Ok,
            requests: Vec::new(),
            issued: 0,
        }));
        let app = Router::new()
            .route("/v1/orders", post(create_order))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base_url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { base_url, state }
    }

    pub fn set_mode(&self, mode: Mode) {
        self.state.lock().unwrap().mode = mode;
    }

    /// Bodies of the order requests received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Environment that points the service at this fake.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("FRONTDESK_PAYMENT_PROVIDER", "razorpay".to_owned()),
            ("RAZORPAY_BASE_URL", self.base_url.clone()),
            ("RAZORPAY_KEY_ID", TEST_KEY_ID.to_owned()),
            ("RAZORPAY_KEY_SECRET", TEST_KEY_SECRET.to_owned()),
        ]
    }
}

fn razorpay_error(status: u16, code: &str, description: &str) -> axum::response::Response {
    let body = json!({"error": {"code": code, "description": description, "source": "business",
        "step": "payment_initiation", "reason": "input_validation_failed", "metadata": {}, "field": "amount"}});
    (axum::http::StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

async fn create_order(
    State(state): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: String,
) -> axum::response::Response {
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{TEST_KEY_ID}:{TEST_KEY_SECRET}"))
    );
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
        return razorpay_error(401, "BAD_REQUEST_ERROR", "Authentication failed");
    }
    let Ok(request) = serde_json::from_str::<Value>(&body) else {
        return razorpay_error(400, "BAD_REQUEST_ERROR", "The request body is not valid JSON");
    };
    let (mode, id) = {
        let mut inner = state.lock().unwrap();
        inner.requests.push(request.clone());
        inner.issued += 1;
        (inner.mode, format!("order_FAKE{:010}", inner.issued))
    };
    match mode {
        Mode::Ok => axum::Json(json!({
            "id": id, "entity": "order", "amount": request["amount"], "amount_paid": 0,
            "amount_due": request["amount"], "currency": request["currency"], "receipt": request["receipt"],
            "offer_id": null, "status": "created", "attempts": 0, "notes": request["notes"],
            "created_at": 1_700_000_000,
        }))
        .into_response(),
        Mode::BadRequest => razorpay_error(
            400,
            "BAD_REQUEST_ERROR",
            "Order amount less than minimum amount allowed",
        ),
        Mode::Garbage => (axum::http::StatusCode::OK, "<html>upstream hiccup</html>").into_response(),
        Mode::Slow => {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            axum::Json(json!({"id": id})).into_response()
        }
    }
}
