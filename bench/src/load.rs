//! The load generator: a fixed number of workers, each issuing one request at a time for a fixed duration
//! (HTTP/1.1 on a keep-alive connection of its own, or gRPC over a few shared HTTP/2 connections), every
//! latency recorded in an HDR histogram. HTTP workers send one request again and again, a list cycled
//! through, or requests made per send; closed-loop (the next as soon as the last is answered) or paced
//! open-loop (send `n` is due at `n / rate`, its latency counted from then however late it goes out).

use std::{
    borrow::Cow,
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use bytes::Bytes;
use frontdesk_api::v1::{GetCurrentApiKeyRequest, api_keys_client::ApiKeysClient};
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tonic::{metadata::MetadataValue, transport::Channel};

/// How long, how many at once, and how long to warm up unrecorded first.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub concurrency: usize,
    pub duration: Duration,
    pub warmup: Duration,
}

impl Shape {
    /// A smoke run (`--smoke`, concurrency 2): each scenario on a small fraction of its data, to check the
    /// harness rather than measure.
    pub fn smoke(&self) -> bool {
        self.concurrency <= 2
    }
}

/// The time a run lasts: requests start until `deadline`; those started after warm-up are recorded.
#[derive(Clone, Copy)]
struct Window {
    record_from: Instant,
    deadline: Instant,
}

impl Window {
    fn starting_now(shape: Shape) -> Self {
        let record_from = Instant::now() + shape.warmup;
        Self {
            record_from,
            deadline: record_from + shape.duration,
        }
    }

    /// The start of the next request, or `None` once the run is over.
    fn next(&self) -> Option<Instant> {
        let now = Instant::now();
        (now < self.deadline).then_some(now)
    }

    fn records(&self, started: Instant) -> bool {
        started >= self.record_from
    }
}

/// One HTTP request.
#[derive(Clone, Debug)]
pub struct HttpRequest {
    pub method: http::Method,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

/// One send of a run: its number (0, 1, 2, ... across all workers) and the wall-clock time it is due.
#[derive(Clone, Copy, Debug)]
pub struct Turn {
    pub number: u64,
    pub due: SystemTime,
}

/// What the workers send.
#[derive(Clone)]
pub enum Requests {
    /// Send `n` sends entry `n % len`: one request again and again, or a list cycled through.
    Cycle(Arc<[HttpRequest]>),
    /// Each send's request made for its turn; `None` ends the run (a run of a fixed count).
    Each(Arc<dyn Fn(Turn) -> Option<HttpRequest> + Send + Sync>),
}

impl Requests {
    pub fn each(make: impl Fn(Turn) -> Option<HttpRequest> + Send + Sync + 'static) -> Self {
        Self::Each(Arc::new(make))
    }

    fn get(&self, turn: Turn) -> Option<Cow<'_, HttpRequest>> {
        match self {
            Self::Cycle(list) => list
                .get((turn.number % list.len().max(1) as u64) as usize)
                .map(Cow::Borrowed),
            Self::Each(make) => make(turn).map(Cow::Owned),
        }
    }
}

/// When each send goes.
#[derive(Clone, Copy, Debug)]
pub enum Pace {
    /// A worker sends its next request as soon as its last is answered.
    Closed,
    /// Send `n` is due `n / per_second` after the start, whichever worker is free first takes it.
    Open { per_second: f64 },
}

/// The sends of one HTTP run, shared by its workers: which is next, and when it is due.
struct Schedule {
    window: Window,
    pace: Pace,
    /// `window`'s start, on both clocks.
    start: (Instant, SystemTime),
    taken: AtomicU64,
}

impl Schedule {
    fn new(shape: Shape, pace: Pace) -> Self {
        let start = (Instant::now(), SystemTime::now());
        Self {
            window: Window::starting_now(shape),
            pace,
            start,
            taken: AtomicU64::new(0),
        }
    }

    /// The next send and its due instant, or `None` once the run is over.
    fn next(&self) -> Option<(Turn, Instant)> {
        let number = self.taken.fetch_add(1, Ordering::Relaxed);
        let due = match self.pace {
            Pace::Closed => Instant::now(),
            Pace::Open { per_second } => self.start.0 + Duration::from_secs_f64(number as f64 / per_second),
        };
        let turn = Turn {
            number,
            due: self.start.1 + (due - self.start.0),
        };
        (due < self.window.deadline).then_some((turn, due))
    }
}

/// What a run measured.
pub struct Outcome {
    pub requests: u64,
    pub elapsed: Duration,
    pub latency_us: Histogram<u64>,
    /// Non-success answers and failures, by status (`"503"`, `"grpc Unavailable"`, `"io"`).
    pub errors: BTreeMap<String, u64>,
}

impl Outcome {
    pub(crate) fn new() -> Self {
        Self {
            requests: 0,
            elapsed: Duration::ZERO,
            latency_us: Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds"),
            errors: BTreeMap::new(),
        }
    }

    fn merge(&mut self, other: Outcome) {
        self.requests += other.requests;
        self.latency_us.add(&other.latency_us).expect("same bounds");
        for (status, n) in other.errors {
            *self.errors.entry(status).or_default() += n;
        }
    }

    fn record(&mut self, window: &Window, started: Instant, error: Option<String>) {
        if !window.records(started) {
            return;
        }
        self.requests += 1;
        let _ = self.latency_us.record(started.elapsed().as_micros().max(1) as u64);
        if let Some(error) = error {
            *self.errors.entry(error).or_default() += 1;
        }
    }

    pub fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// Drives `request` at `addr` over HTTP/1.1 keep-alive, one connection per worker.
pub async fn http(addr: SocketAddr, request: HttpRequest, shape: Shape) -> anyhow::Result<Outcome> {
    http_sends(addr, Requests::Cycle(Arc::from([request])), Pace::Closed, shape).await
}

/// Drives `requests` at `addr` over HTTP/1.1 keep-alive, one connection per worker, at `pace`. A run of
/// `Requests::Each` that ends early still reports `shape.duration` as its elapsed time.
pub async fn http_sends(addr: SocketAddr, requests: Requests, pace: Pace, shape: Shape) -> anyhow::Result<Outcome> {
    let schedule = Arc::new(Schedule::new(shape, pace));
    let mut workers = Vec::new();
    for _ in 0..shape.concurrency {
        workers.push(tokio::spawn(http_worker(addr, requests.clone(), schedule.clone())));
    }
    collect(workers, shape).await
}

async fn http_worker(addr: SocketAddr, requests: Requests, schedule: Arc<Schedule>) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome::new();
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let host = addr.to_string();
    let window = schedule.window;
    while let Some((turn, started)) = schedule.next() {
        if matches!(schedule.pace, Pace::Open { .. }) {
            tokio::time::sleep_until(started.into()).await;
        }
        let Some(request) = requests.get(turn) else {
            break;
        };
        let mut builder = http::Request::builder()
            .method(request.method.clone())
            .uri(&request.path)
            .header(http::header::HOST, &host);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let sent = sender
            .send_request(builder.body(Full::new(request.body.clone()))?)
            .await;
        let error = match sent {
            Ok(response) => {
                let status = response.status();
                response.into_body().collect().await?;
                (!status.is_success()).then(|| status.as_u16().to_string())
            }
            Err(err) => {
                outcome.record(&window, started, Some("io".to_owned()));
                return Err(err.into());
            }
        };
        outcome.record(&window, started, error);
    }
    Ok(outcome)
}

/// Drives `GetCurrentApiKey` with `key` at the gRPC `url`, workers sharing a few HTTP/2 connections.
pub async fn grpc_current_key(url: &str, key: &str, shape: Shape) -> anyhow::Result<Outcome> {
    let connections = shape.concurrency.clamp(1, 4);
    let mut channels = Vec::new();
    for _ in 0..connections {
        channels.push(
            Channel::from_shared(url.to_owned())?
                .tcp_nodelay(true)
                .connect()
                .await?,
        );
    }
    let key: MetadataValue<_> = key.parse()?;
    let window = Window::starting_now(shape);
    let mut workers = Vec::new();
    for worker in 0..shape.concurrency {
        let mut client = ApiKeysClient::new(channels[worker % connections].clone());
        let key = key.clone();
        workers.push(tokio::spawn(async move {
            let mut outcome = Outcome::new();
            while let Some(started) = window.next() {
                let mut request = tonic::Request::new(GetCurrentApiKeyRequest {});
                request.metadata_mut().insert("x-api-key", key.clone());
                let error = client
                    .get_current_api_key(request)
                    .await
                    .err()
                    .map(|status| format!("grpc {:?}", status.code()));
                outcome.record(&window, started, error);
            }
            Ok(outcome)
        }));
    }
    collect(workers, shape).await
}

/// Drives the storage work of one authenticated request with nothing else: the rate-limit script on Redis
/// with the key's access stamp, as the guard runs it for a key verified in memory, from each worker; then
/// `then`, the rest of the request's storage work (nothing, for the call; the accept's rows, for a send). The
/// script counts the calls under `counter` (an account id's place).
pub async fn storage_floor<T, Fut>(
    redis: redis::aio::ConnectionManager,
    script: &'static str,
    stamp: (String, String),
    counter: String,
    shape: Shape,
    then: T,
) -> anyhow::Result<Outcome>
where
    T: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send,
{
    let window = Window::starting_now(shape);
    let script = redis::Script::new(script);
    let mut workers = Vec::new();
    for _ in 0..shape.concurrency {
        let (mut redis, script, stamp, counter, then) = (
            redis.clone(),
            script.clone(),
            stamp.clone(),
            counter.clone(),
            then.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut outcome = Outcome::new();
            while let Some(started) = window.next() {
                let allowed: (i64, i64, i64, i64) = script
                    .arg(&counter)
                    .arg(1_000_000_000)
                    .arg(60)
                    .arg(60)
                    .arg(1)
                    .arg(&stamp.0)
                    .arg(&stamp.1)
                    .invoke_async(&mut redis)
                    .await?;
                let error = match allowed.0 {
                    1 => then().await.err(),
                    -1 => Some("stale access stamp".to_owned()),
                    _ => Some("throttled".to_owned()),
                };
                outcome.record(&window, started, error);
            }
            Ok(outcome)
        }));
    }
    collect(workers, shape).await
}

async fn collect(
    workers: Vec<tokio::task::JoinHandle<anyhow::Result<Outcome>>>,
    shape: Shape,
) -> anyhow::Result<Outcome> {
    let mut total = Outcome::new();
    for worker in workers {
        total.merge(worker.await??);
    }
    total.elapsed = shape.duration;
    Ok(total)
}
