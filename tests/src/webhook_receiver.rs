//! A local webhook endpoint: records every delivery (headers, body, arrival time), answers with a scripted
//! sequence of statuses, and can go down and come back on the same port.

use std::{
    collections::{HashMap, VecDeque},
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Router, body::Bytes, extract::State, http::HeaderMap, http::StatusCode, routing::post};
use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use tokio::{sync::oneshot, task::JoinHandle};

#[derive(Clone, Debug)]
pub struct Delivery {
    pub headers: HashMap<String, String>,
    pub body: String,
    pub json: serde_json::Value,
    pub received_at: chrono::DateTime<chrono::Utc>,
    /// The status this receiver answered with.
    pub answered: u16,
}

impl Delivery {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or_default()
    }

    /// Verifies the Standard Webhooks signature with `secret` (`whsec_...`).
    pub fn verifies(&self, secret: &str) -> bool {
        let key = STANDARD
            .decode(secret.trim_start_matches("whsec_"))
            .expect("secret is base64");
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).expect("any key length");
        let signed = format!(
            "{}.{}.{}",
            self.header("webhook-id"),
            self.header("webhook-timestamp"),
            self.body
        );
        mac.update(signed.as_bytes());
        let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
        self.header("webhook-signature").split(' ').any(|s| s == expected)
    }
}

#[derive(Default)]
struct Script {
    /// Statuses for the next answers, in order, each with its own wait (else `delay`); then `default`.
    next: VecDeque<(u16, Option<Duration>)>,
    default: u16,
    delay: Duration,
}

#[derive(Default)]
struct Shared {
    deliveries: Mutex<Vec<Delivery>>,
    script: Mutex<Script>,
    /// Requests that reached the handler, answered or not.
    arrived: AtomicUsize,
}

pub struct Receiver {
    shared: Arc<Shared>,
    addr: SocketAddr,
    running: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
    /// `http://127.0.0.1:PORT/hook`.
    pub url: String,
}

impl Receiver {
    /// Listens on an ephemeral port, answering 200.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        shared.script.lock().unwrap().default = 200;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let mut receiver = Self {
            shared,
            addr,
            running: None,
            url: format!("http://{addr}/hook"),
        };
        receiver.serve(listener);
        receiver
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let app = Router::new()
            .route("/hook", post(record))
            .with_state(self.shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        self.running = Some((stop, task));
    }

    /// Stops listening: connections are refused until `up`.
    pub async fn down(&mut self) {
        if let Some((stop, task)) = self.running.take() {
            let _ = stop.send(());
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }

    /// Listens again on the same port.
    pub async fn up(&mut self) {
        let listener = tokio::net::TcpListener::bind(self.addr).await.expect("rebind");
        self.serve(listener);
    }

    /// Answers with `status` from now on.
    pub fn answer(&self, status: u16) {
        let mut script = self.shared.script.lock().unwrap();
        script.next.clear();
        script.default = status;
    }

    /// Answers the next requests with `statuses` in order, then as before.
    pub fn then(&self, statuses: &[u16]) {
        self.shared
            .script
            .lock()
            .unwrap()
            .next
            .extend(statuses.iter().map(|s| (*s, None)));
    }

    /// Answers the next request with `status` after waiting `delay`.
    pub fn then_after(&self, delay: Duration, status: u16) {
        self.shared.script.lock().unwrap().next.push_back((status, Some(delay)));
    }

    /// Requests that have reached the endpoint so far, including those not answered yet.
    pub fn arrived(&self) -> usize {
        self.shared.arrived.load(Ordering::SeqCst)
    }

    /// Waits this long before each answer.
    pub fn delay(&self, delay: Duration) {
        self.shared.script.lock().unwrap().delay = delay;
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.shared.deliveries.lock().unwrap().clone()
    }

    /// Waits until `done` holds for the deliveries so far (or panics after `within`).
    pub async fn wait_until(&self, within: Duration, done: impl Fn(&[Delivery]) -> bool) -> Vec<Delivery> {
        let started = Instant::now();
        loop {
            let deliveries = self.deliveries();
            if done(&deliveries) {
                return deliveries;
            }
            assert!(
                started.elapsed() < within,
                "receiver: condition not met within {within:?}; {} deliveries so far",
                deliveries.len()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Waits for at least `count` deliveries.
    pub async fn wait_for(&self, count: usize, within: Duration) -> Vec<Delivery> {
        self.wait_until(within, |d| d.len() >= count).await
    }
}

async fn record(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    shared.arrived.fetch_add(1, Ordering::SeqCst);
    let (status, delay) = {
        let mut script = shared.script.lock().unwrap();
        let (status, delay) = script.next.pop_front().unwrap_or((script.default, None));
        (status, delay.unwrap_or(script.delay))
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let body = String::from_utf8_lossy(&body).into_owned();
    shared.deliveries.lock().unwrap().push(Delivery {
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or_default().to_owned()))
            .collect(),
        json: serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
        body,
        received_at: chrono::Utc::now(),
        answered: status,
    });
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}
