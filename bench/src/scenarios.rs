//! The scenarios, each against its baseline in the same invocation: the bare axum limit, the health check
//! through the edge, the authenticated call in serve mode, in split mode and directly over gRPC, the
//! create-order write path on PostgreSQL and SQLite, webhook fan-out, and the conversation engine's (in
//! `engine`). Each starts its own server process on a fresh database.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use bytes::Bytes;
use frontdesk_api::admin::v1::{CreateAccountRequest, admin_client::AdminClient};
use rand::Rng;
use sea_orm::{ConnectionTrait, Database};
use tonic::{Request, metadata::MetadataValue, transport::Channel};

use frontdesk_domain::access::{api_key::ApiKey, rate_limit::SLIDING_WINDOW_LUA, stamps};

use crate::{
    load::{self, HttpRequest, Outcome, Shape},
    process::ServerProcess,
    receiver,
};

const ADMIN_TOKEN: &str = "bench-admin-token";

/// Where things are.
#[derive(Clone)]
pub struct Setup {
    pub frontdesk: PathBuf,
    /// A previous build's `frontdesk`, for the figures compared build against build in the same run.
    pub previous: Option<PathBuf>,
    pub bench: PathBuf,
    pub postgres: String,
    pub redis: String,
    pub work_dir: PathBuf,
    /// An OTLP receiver the servers export their spans to (over protobuf on HTTP), when a run reports them.
    pub traces: Option<String>,
    /// Events per second for the fan-out at half capacity, instead of half the capacity just measured.
    pub fan_out_pace: Option<f64>,
}

/// One scenario's figures.
pub struct Measured {
    pub name: &'static str,
    pub outcome: Outcome,
    /// CPU seconds the server process(es) used during the measured run.
    pub server_cpu: f64,
    /// CPU seconds PostgreSQL used meanwhile (0: not measured).
    pub database_cpu: f64,
    /// CPU seconds the whole machine was busy meanwhile, every process counted (0: not measured).
    pub machine_cpu: f64,
    /// The wall time both CPU figures cover (the warm-up included).
    pub busy: Duration,
    /// Peak resident memory of the server process(es), MiB.
    pub server_peak_rss: f64,
}

impl Measured {
    /// A floor's figures: driven from plain clients, with no server process to measure.
    pub(crate) fn floor(name: &'static str, outcome: Outcome) -> Self {
        Self {
            name,
            busy: outcome.elapsed,
            outcome,
            server_cpu: 0.0,
            database_cpu: 0.0,
            machine_cpu: 0.0,
            server_peak_rss: 0.0,
        }
    }
}

/// Facts about the service process itself, and the list query's plan.
pub struct Footprint {
    pub idle_rss: f64,
    pub started_in: Duration,
    /// `EXPLAIN ANALYZE` of the deals list query on the seeded account.
    pub deals_plan: Option<String>,
    /// `EXPLAIN ANALYZE` of the daily summary's message count on the seeded account.
    pub daily_plan: Option<String>,
    /// What the inbound scenario stored, against what it sent.
    pub inbound_stored: Option<crate::engine::Stored>,
    /// The same for the WhatsApp batches.
    pub meta_stored: Option<crate::engine::Stored>,
    /// How the AI replies' decisions were timed, when that scenario ran.
    pub ai_decisions: Option<crate::engine::DecisionsByPhase>,
    /// The memory of model-written replies waiting on the model, when that scenario ran.
    pub model_waiting: Option<crate::engine::Waiting>,
    /// What idle web chat sockets cost, when that scenario ran.
    pub idle_sockets: Option<crate::webchat::IdleSockets>,
    /// The knowledge scenarios' facts (the model's own speed), when they ran.
    pub knowledge: Option<crate::knowledge::Run>,
}

impl Measured {
    /// CPU microseconds of the server(s) and PostgreSQL per request, over the whole run (the warm-up's
    /// requests counted at the recorded rate).
    pub fn cpu_us_per_request(&self) -> f64 {
        let requests = self.outcome.per_second() * self.busy.as_secs_f64();
        (self.server_cpu + self.database_cpu) * 1e6 / requests.max(1.0)
    }

    /// CPU microseconds of the whole machine per request, over the whole run.
    pub fn machine_us_per_request(&self) -> f64 {
        let requests = self.outcome.per_second() * self.busy.as_secs_f64();
        self.machine_cpu * 1e6 / requests.max(1.0)
    }
}

impl Setup {
    pub(crate) fn env(&self, database_url: &str, redis: bool) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = [
            ("FRONTDESK_HTTP_ADDR", "127.0.0.1:0"),
            ("FRONTDESK_GRPC_ADDR", "127.0.0.1:0"),
            ("FRONTDESK_LOG_FORMAT", "json"),
            // The listening lines; `frontdesk_core` is where a `--previous` build from before the core was
            // split into its layers logs its gRPC address.
            (
                "RUST_LOG",
                "warn,frontdesk_edge=info,frontdesk_server::grpc=info,frontdesk_core::grpc=info",
            ),
            ("FRONTDESK_ADMIN_TOKEN", ADMIN_TOKEN),
            ("RAZORPAY_KEY_SECRET", "bench-secret"),
            ("FRONTDESK_SECRET_KEY", "YmVuY2gtc2VjcmV0LWtleS0zMi1ieXRlcy1sb25nISE="),
            // No embedding model (its 90 MiB would weigh on every footprint figure); the knowledge
            // scenarios name theirs.
            ("FRONTDESK_EMBEDDING_MODEL", "none"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        env.insert("DATABASE_URL".into(), database_url.to_owned());
        // Service knobs set around the bench (FRONTDESK_DB_MAX_CONNECTIONS=8, ...) reach the servers it starts.
        for (name, value) in std::env::vars() {
            if name.starts_with("FRONTDESK_") && !env.contains_key(&name) {
                env.insert(name, value);
            }
        }
        if redis {
            env.insert("REDIS_URL".into(), self.redis.clone());
        }
        if let Some(endpoint) = &self.traces {
            env.insert("OTEL_EXPORTER_OTLP_ENDPOINT".into(), endpoint.clone());
            env.insert("OTEL_BSP_SCHEDULE_DELAY".into(), "200".into());
        }
        env
    }

    /// The URL of database `name` on the `--postgres` server; that URL's query (e.g. `?host=/var/run/postgresql`
    /// for the Unix socket) stays at the end.
    fn postgres_url(&self, name: &str) -> String {
        match self.postgres.split_once('?') {
            Some((server, query)) => format!("{server}/{name}?{query}"),
            None => format!("{}/{name}", self.postgres),
        }
    }

    pub(crate) async fn postgres_database(&self) -> anyhow::Result<String> {
        let name = format!("fd_bench_{:012x}", rand::rng().random::<u64>() >> 16);
        let admin = Database::connect(self.postgres_url("postgres")).await?;
        admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await?;
        Ok(self.postgres_url(&name))
    }

    /// A fresh database: an SQLite file in the run's directory, or a new database on the `--postgres` server.
    pub(crate) async fn database(&self, sqlite: bool) -> anyhow::Result<String> {
        if sqlite {
            self.sqlite_database()
        } else {
            self.postgres_database().await
        }
    }

    /// Drops the run's database once every process using it has stopped (an SQLite file goes with the run's
    /// directory).
    pub(crate) async fn drop_database(&self, url: &str) -> anyhow::Result<()> {
        if url.starts_with("sqlite:") {
            return Ok(());
        }
        let without_query = url.split('?').next().unwrap_or_default();
        let name = without_query.rsplit('/').next().unwrap_or_default();
        let admin = Database::connect(self.postgres_url("postgres")).await?;
        admin
            .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await?;
        Ok(())
    }

    pub(crate) fn sqlite_database(&self) -> anyhow::Result<String> {
        let dir = self.work_dir.join(format!("sqlite-{:x}", rand::rng().random::<u64>()));
        std::fs::create_dir_all(&dir)?;
        Ok(format!("sqlite://{}?mode=rwc", dir.join("frontdesk.db").display()))
    }

    fn serve(&self, database_url: &str, redis: bool) -> anyhow::Result<ServerProcess> {
        ServerProcess::spawn(&self.frontdesk, &["serve"], &self.env(database_url, redis), 2)
    }
}

/// Runs `drive` against the processes, measuring their CPU and memory around it.
pub(crate) async fn measure<F: Future<Output = anyhow::Result<Outcome>>>(
    name: &'static str,
    processes: &[&ServerProcess],
    drive: F,
) -> anyhow::Result<Measured> {
    let cpu_before: f64 = processes.iter().map(|p| p.cpu_seconds()).sum();
    let database_before = crate::process::database_cpu_seconds();
    let machine_before = crate::process::machine_busy_seconds();
    let started = std::time::Instant::now();
    let outcome = drive.await?;
    let busy = started.elapsed();
    crate::process::progress(&format!("measured {name}"));
    // Folded from +0.0: an empty float sum is -0.0, which the table would print (a floor runs no server).
    let server_cpu = processes
        .iter()
        .map(|p| p.cpu_seconds())
        .fold(0.0, |sum, cpu| sum + cpu)
        - cpu_before;
    let database_cpu = crate::process::database_cpu_seconds() - database_before;
    let machine_cpu = crate::process::machine_busy_seconds() - machine_before;
    let server_peak_rss = processes.iter().map(|p| p.rss_mib().1).fold(0.0, |sum, rss| sum + rss);
    Ok(Measured {
        name,
        outcome,
        server_cpu,
        database_cpu,
        machine_cpu,
        busy,
        server_peak_rss,
    })
}

/// A growth account with a limit high enough never to throttle the run; its key.
pub(crate) async fn bench_account(grpc: std::net::SocketAddr) -> anyhow::Result<String> {
    Ok(funded_account(grpc, "").await?.1)
}

/// The same with an opening credit balance (`""`: none); its id and key.
pub(crate) async fn funded_account(grpc: std::net::SocketAddr, credits: &str) -> anyhow::Result<(String, String)> {
    let channel = Channel::from_shared(format!("http://{grpc}"))?.connect().await?;
    let token: MetadataValue<_> = format!("Bearer {ADMIN_TOKEN}").parse()?;
    let mut admin = AdminClient::with_interceptor(channel, move |mut r: Request<()>| {
        r.metadata_mut().insert("authorization", token.clone());
        Ok(r)
    });
    let created = admin
        .create_account(CreateAccountRequest {
            name: "bench".into(),
            plan: "growth".into(),
            credits: credits.into(),
            rate_limit: 1_000_000,
            ..Default::default()
        })
        .await?
        .into_inner();
    Ok((created.account.map(|a| a.id).unwrap_or_default(), created.api_key))
}

pub(crate) fn get(path: &str, key: Option<&str>) -> HttpRequest {
    HttpRequest {
        method: http::Method::GET,
        path: path.to_owned(),
        headers: key
            .map(|k| vec![("x-api-key".to_owned(), k.to_owned())])
            .unwrap_or_default(),
        body: Bytes::new(),
    }
}

fn create_order() -> HttpRequest {
    HttpRequest {
        method: http::Method::POST,
        path: "/payments/create-order".to_owned(),
        headers: vec![("content-type".to_owned(), "application/json".to_owned())],
        body: Bytes::from_static(br#"{"plan":"growth","currency":"INR","phone":"+919812345678"}"#),
    }
}

/// Every scenario in order (or, after the limit, those whose name contains `only`, or one of its `|`-separated
/// parts), plus the service's own footprint.
pub async fn run_all(setup: &Setup, shape: Shape, only: Option<&str>) -> anyhow::Result<(Vec<Measured>, Footprint)> {
    let wanted = |name: &str| only.is_none_or(|o| o.split('|').any(|part| name.contains(part)));
    let mut results = Vec::new();

    const LIMIT: &str = "limit: bare axum, 60-byte JSON";
    let bare = ServerProcess::spawn(
        &setup.bench,
        &["bare-server", "--redis", &setup.redis],
        &BTreeMap::new(),
        1,
    )?;
    let addr = bare.http.expect("bare server address");
    results.push(measure(LIMIT, &[&bare], load::http(addr, get("/", None), shape)).await?);
    if wanted(AUTH) {
        results.push(measure(CALL_LIMIT, &[&bare], load::http(addr, get("/limited", None), shape)).await?);
    }
    drop(bare);

    // Footprint and start-up on the zero-configuration path: SQLite, no Redis.
    let sqlite = setup.sqlite_database()?;
    let serve_sqlite = setup.serve(&sqlite, false)?;
    let addr = serve_sqlite.http.expect("http");
    let started_in = healthy_after(addr, serve_sqlite.started_in).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_rss = serve_sqlite.rss_mib().0;
    const HEALTH: &str = "GET /healthz through the edge (SQLite)";
    if wanted(HEALTH) {
        results.push(measure(HEALTH, &[&serve_sqlite], load::http(addr, get("/healthz", None), shape)).await?);
    }
    const ORDER_SQLITE: &str = "POST /payments/create-order (SQLite)";
    if wanted(ORDER_SQLITE) {
        results.push(measure(ORDER_SQLITE, &[&serve_sqlite], load::http(addr, create_order(), shape)).await?);
    }
    drop(serve_sqlite);

    let postgres = setup.postgres_database().await?;
    let serve = setup.serve(&postgres, true)?;
    let key = bench_account(serve.grpc.expect("grpc")).await?;
    let addr = serve.http.expect("http");
    let current = get("/v1/api-keys/current", Some(&key));
    if wanted(AUTH) {
        results.push(measure(AUTH, &[&serve], load::http(addr, current.clone(), shape)).await?);
    }
    const ORDER_PG: &str = "POST /payments/create-order (PostgreSQL)";
    if wanted(ORDER_PG) {
        results.push(measure(ORDER_PG, &[&serve], load::http(addr, create_order(), shape)).await?);
    }
    const DEALS: &str = "GET /v1/deals?limit=50, 100,000 deals (PostgreSQL, 32 concurrent)";
    const DEALS_MIDDLE: &str = "GET /v1/deals?limit=50&cursor=(middle deal), 100,000 deals (PostgreSQL, 32 concurrent)";
    let mut deals_plan = None;
    if wanted(DEALS) || wanted(DEALS_MIDDLE) {
        let deals = if shape.smoke() { 2_000 } else { 100_000 };
        let seeded = seed_deals(&postgres, &key, deals).await?;
        deals_plan = Some(seeded.plans);
        let shape = Shape {
            concurrency: shape.concurrency.min(32),
            ..shape
        };
        for (name, path) in [
            (DEALS, "/v1/deals?limit=50".to_owned()),
            (
                DEALS_MIDDLE,
                format!("/v1/deals?limit=50&cursor={}", seeded.middle_cursor),
            ),
        ] {
            if wanted(name) {
                let list = get(&path, Some(&key));
                results.push(measure(name, &[&serve], load::http(addr, list, shape)).await?);
            }
        }
    }
    drop(serve);

    if wanted(FLOOR_NAME) {
        results.push(storage_floor(setup, &postgres, &key, shape).await?);
    }

    const SPLIT: &str = "GET /v1/api-keys/current, split edge -> core";
    const DIRECT: &str = "GetCurrentApiKey, gRPC direct to core";
    if wanted(SPLIT) || wanted(DIRECT) {
        let core = ServerProcess::spawn(&setup.frontdesk, &["core"], &setup.env(&postgres, true), 1)?;
        let core_url = format!("http://{}", core.grpc.expect("grpc"));
        let mut edge_env = setup.env("", false);
        edge_env.insert("FRONTDESK_CORE_URL".into(), core_url.clone());
        let edge = ServerProcess::spawn(&setup.frontdesk, &["edge"], &edge_env, 1)?;
        let addr = edge.http.expect("http");
        results.push(measure(SPLIT, &[&edge, &core], load::http(addr, current, shape)).await?);
        results.push(measure(DIRECT, &[&core], load::grpc_current_key(&core_url, &key, shape)).await?);
    }
    setup.drop_database(&postgres).await?;

    if wanted(FAN_OUT) {
        results.extend(webhook_fan_out(setup, &setup.frontdesk, FAN_OUT, shape).await?);
    }
    if let Some(previous) = &setup.previous
        && wanted(COMPARED)
    {
        results.extend(compared(setup, previous, shape).await?);
    }
    let engine = crate::engine::run(setup, shape, wanted).await?;
    results.extend(engine.measured);
    let webchat = crate::webchat::run(setup, shape, wanted).await?;
    results.extend(webchat.measured);
    let mut knowledge = crate::knowledge::run(setup, shape, wanted).await?;
    results.append(&mut knowledge.measured);
    let mut daily_plan = None;
    if wanted(crate::daily::DAILY) || wanted(crate::daily::DAILY_FLOOR) {
        let daily = crate::daily::run(setup, shape).await?;
        results.extend(daily.measured);
        daily_plan = Some(daily.plan);
    }
    Ok((
        results,
        Footprint {
            idle_rss,
            started_in,
            deals_plan,
            daily_plan,
            inbound_stored: engine.stored,
            meta_stored: engine.meta_stored,
            ai_decisions: engine.decisions,
            model_waiting: engine.waiting,
            idle_sockets: webchat.idle,
            knowledge: Some(knowledge),
        },
    ))
}

const AUTH: &str = "GET /v1/api-keys/current, serve (PostgreSQL + Redis)";
/// The most an authenticated call making one rate-limit round trip can do here (`bare::limited`).
pub const CALL_LIMIT: &str = "call limit: bare axum + the service's rate-limit call (one Redis script round trip)";

pub const FAN_OUT: &str = "webhook fan-out: events x 10 subscriptions, commit to receipt (PostgreSQL + Redis)";
/// The prefix of the figures measured for this build and a previous one (`--previous`), alternately.
pub const COMPARED: &str = "compared:";
pub const FAN_OUT_NOW: &str = "compared: webhook fan-out, this build";
pub const FAN_OUT_BEFORE: &str = "compared: webhook fan-out, previous build";
pub const PIPELINE_NOW: &str = "compared: send pipeline capacity, this build";
pub const PIPELINE_BEFORE: &str = "compared: send pipeline capacity, previous build";

/// The fan-out and the pipeline's capacity with this build and with `previous`, alternately (this, previous,
/// this, previous), so the machine's drift shows as a spread rather than as a difference between builds; a smoke
/// run goes round once.
async fn compared(setup: &Setup, previous: &std::path::Path, shape: Shape) -> anyhow::Result<Vec<Measured>> {
    let mut results = Vec::new();
    let rounds = if shape.smoke() { 1 } else { 2 };
    for _ in 0..rounds {
        for (binary, fan_out, pipeline) in [
            (setup.frontdesk.as_path(), FAN_OUT_NOW, PIPELINE_NOW),
            (previous, FAN_OUT_BEFORE, PIPELINE_BEFORE),
        ] {
            let mut fanned = webhook_fan_out(setup, binary, fan_out, shape).await?;
            results.push(fanned.remove(1));
            results.push(crate::engine::pipeline_capacity(setup, binary, pipeline, shape).await?);
        }
    }
    Ok(results)
}
pub const FAN_OUT_LIMIT: &str = "limit: the same receiver, plain keep-alive POST client";
/// Subscriptions every event goes to.
const SUBSCRIPTIONS: usize = 10;

/// The receiver's limit (driven by a plain client), then the service fanning events out to it: 10,000 deal
/// events (200 in a smoke run), each delivered to 10 subscriptions, timed from the first event's creation to
/// the last receipt, with every delivery's commit-to-receipt latency.
async fn webhook_fan_out(
    setup: &Setup,
    frontdesk: &std::path::Path,
    name: &'static str,
    shape: Shape,
) -> anyhow::Result<Vec<Measured>> {
    let receiver = ServerProcess::spawn(&setup.bench, &["webhook-receiver"], &BTreeMap::new(), 1)?;
    let receiver_addr = receiver.http.expect("receiver address");
    let sample = HttpRequest {
        method: http::Method::POST,
        path: "/limit".to_owned(),
        headers: vec![("content-type".to_owned(), "application/json".to_owned())],
        body: Bytes::from(format!(
            r#"{{"type":"deal.created","timestamp":"2026-11-22T10:15:00.250Z","data":{{"id":"deal_x","padding":"{}"}}}}"#,
            "x".repeat(560)
        )),
    };
    let limit = measure(FAN_OUT_LIMIT, &[&receiver], load::http(receiver_addr, sample, shape)).await?;

    let postgres = setup.postgres_database().await?;
    let mut env = setup.env(&postgres, true);
    env.insert("FRONTDESK_ALLOW_PRIVATE_URLS".into(), "true".into());
    let serve = ServerProcess::spawn(frontdesk, &["serve"], &env, 2)?;
    let grpc = serve.grpc.expect("grpc");
    let api = Api {
        http: serve.http.expect("http"),
        key: bench_account(grpc).await?,
    };
    let channel = Channel::from_shared(format!("http://{grpc}"))?.connect().await?;
    let key: MetadataValue<_> = api.key.parse()?;
    let mut webhooks = frontdesk_api::v1::webhooks_client::WebhooksClient::new(channel.clone());
    for n in 0..SUBSCRIPTIONS {
        let mut request = Request::new(frontdesk_api::v1::CreateWebhookRequest {
            url: format!("http://{receiver_addr}/hook/{n}"),
            events: vec!["deal.created".into()],
            ..Default::default()
        });
        request.metadata_mut().insert("x-api-key", key.clone());
        webhooks.create_webhook(request).await?;
    }
    let events: usize = if shape.smoke() { 200 } else { 10_000 };
    let expected = (events * SUBSCRIPTIONS) as u64;
    let measured = measure(name, &[&serve], async {
        let started_ms = epoch_ms();
        let started = std::time::Instant::now();
        create_deals(channel, key, events).await?;
        eprintln!(
            "fan-out: {events} events committed in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        receiver::receipts(receiver_addr, expected, started_ms).await
    })
    .await?;
    let mut results = vec![limit, measured];
    if name == FAN_OUT {
        let pace = setup.fan_out_pace;
        results.extend(fan_out_capacity(&postgres, &serve, &api, receiver_addr, events, pace, shape).await?);
    }
    drop(serve);
    setup.drop_database(&postgres).await?;
    Ok(results)
}

pub const FAN_OUT_BACKLOG: &str =
    "webhook fan-out, a committed backlog: events x 10 subscriptions, commit to last receipt (the capacity)";
pub const FAN_OUT_HALF: &str = "webhook fan-out at half capacity: deals created over REST, paced, commit to receipt";

/// A serve's REST address and the bench account's key.
struct Api {
    http: std::net::SocketAddr,
    key: String,
}

/// The fan-out's capacity, measured apart from how fast the events are made: `events` copies of a real
/// `deal.created` event committed at once (one statement), timed from the commit to the last of their
/// deliveries; then deals created over REST at half that capacity (a tenth of it in events, 10
/// subscriptions each; or `pace` events per second), each delivery timed from its event's commit to its
/// receipt, and the stages of that time printed.
async fn fan_out_capacity(
    postgres: &str,
    serve: &ServerProcess,
    api: &Api,
    receiver_addr: std::net::SocketAddr,
    events: usize,
    pace: Option<f64>,
    shape: Shape,
) -> anyhow::Result<Vec<Measured>> {
    let expected = (events * SUBSCRIPTIONS) as u64;
    receiver::reset(receiver_addr).await?;
    let db = Database::connect(postgres).await?;
    let backlog = measure(FAN_OUT_BACKLOG, &[serve], async {
        db.execute_unprepared(&format!(
            "INSERT INTO event_outbox (id, account_id, event_type, payload, created_at) \
             SELECT 'evt_backlog' || g, e.account_id, e.event_type, e.payload, now() \
             FROM (SELECT * FROM event_outbox ORDER BY seq LIMIT 1) AS e, generate_series(1, {events}) AS g"
        ))
        .await?;
        let committed_ms = epoch_ms();
        receiver::receipts(receiver_addr, expected, committed_ms).await
    })
    .await?;
    let capacity = backlog.outcome.per_second();
    receiver::reset(receiver_addr).await?;
    let events_per_second = pace.unwrap_or(capacity / 2.0 / SUBSCRIPTIONS as f64).max(1.0);
    let half_started = chrono::Utc::now();
    let half = measure(FAN_OUT_HALF, &[serve], async {
        let paced = Shape {
            warmup: Duration::ZERO,
            ..shape
        };
        let started_ms = epoch_ms();
        let deal = HttpRequest {
            method: http::Method::POST,
            path: "/v1/deals".to_owned(),
            headers: vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("x-api-key".to_owned(), api.key.clone()),
            ],
            body: Bytes::from_static(br#"{"title":"Paced deal","stage":"new"}"#),
        };
        let pace = load::Pace::Open {
            per_second: events_per_second,
        };
        let made = load::http_sends(
            api.http,
            load::Requests::Cycle(std::sync::Arc::from([deal])),
            pace,
            paced,
        )
        .await?;
        anyhow::ensure!(made.error_count() == 0, "deals refused: {:?}", made.errors);
        let made_per_second = made.per_second();
        let mut outcome = receiver::receipts(receiver_addr, made.requests * SUBSCRIPTIONS as u64, started_ms).await?;
        eprintln!(
            "fan-out at half capacity: {capacity:.0} deliveries/s measured, events paced at {events_per_second:.0}/s, \
             made at {made_per_second:.0}/s"
        );
        outcome.elapsed = made.elapsed;
        Ok(outcome)
    })
    .await?;
    eprintln!(
        "fan-out at half capacity, stages: {}",
        delivery_stages(&db, half_started).await?
    );
    Ok(vec![backlog, half])
}

/// Where the deliveries written since `since` spent their time, as the database recorded it: from their
/// event's time to the fan-out that wrote them, from that fan-out's start to their attempt's start, and the
/// attempt itself (p50 / p99 / max, milliseconds).
async fn delivery_stages(
    db: &sea_orm::DatabaseConnection,
    since: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<String> {
    use sea_orm::Statement;
    const SQL: &str = "WITH s AS (SELECT \
          extract(epoch FROM d.created_at - e.created_at)::float8 * 1000 AS fanned, \
          extract(epoch FROM d.delivered_started_at - d.created_at)::float8 * 1000 AS claimed, \
          d.delivered_duration_ms::float8 AS attempted \
        FROM webhook_deliveries d JOIN event_outbox e ON e.id = d.event_id \
        WHERE d.created_at >= $1 AND d.status = 'succeeded') \
        SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY fanned), \
          percentile_cont(0.99) WITHIN GROUP (ORDER BY fanned), max(fanned), \
          percentile_cont(0.5) WITHIN GROUP (ORDER BY claimed), \
          percentile_cont(0.99) WITHIN GROUP (ORDER BY claimed), max(claimed), \
          percentile_cont(0.5) WITHIN GROUP (ORDER BY attempted), \
          percentile_cont(0.99) WITHIN GROUP (ORDER BY attempted), max(attempted)::float8 FROM s";
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            sea_orm::DbBackend::Postgres,
            SQL,
            [since.into()],
        ))
        .await?
        .ok_or_else(|| anyhow::anyhow!("no stages"))?;
    let mut figures = [0.0; 9];
    for (i, figure) in figures.iter_mut().enumerate() {
        *figure = row.try_get_by_index::<Option<f64>>(i)?.unwrap_or(0.0);
    }
    let [f50, f99, fmax, c50, c99, cmax, a50, a99, amax] = figures;
    Ok(format!(
        "event to fan-out {f50:.0}/{f99:.0}/{fmax:.0} ms, fan-out to attempt {c50:.0}/{c99:.0}/{cmax:.0} ms, \
         attempt {a50:.0}/{a99:.0}/{amax:.0} ms (p50/p99/max)"
    ))
}

pub(crate) fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Creates `count` deals over gRPC from 32 concurrent callers (each makes one `deal.created` event).
async fn create_deals(
    channel: Channel,
    key: MetadataValue<tonic::metadata::Ascii>,
    count: usize,
) -> anyhow::Result<()> {
    const CALLERS: usize = 32;
    let mut callers = tokio::task::JoinSet::new();
    for caller in 0..CALLERS {
        let (channel, key) = (channel.clone(), key.clone());
        callers.spawn(async move {
            let mut deals = frontdesk_api::v1::deals_client::DealsClient::new(channel);
            for n in (caller..count).step_by(CALLERS) {
                let mut request = Request::new(frontdesk_api::v1::CreateDealRequest {
                    title: format!("Deal {n}"),
                    stage: "new".into(),
                    ..Default::default()
                });
                request.metadata_mut().insert("x-api-key", key.clone());
                deals.create_deal(request).await?;
            }
            anyhow::Ok(())
        });
    }
    for result in callers.join_all().await {
        result?;
    }
    Ok(())
}

/// The account behind a key, read directly.
async fn account_of(db: &sea_orm::DatabaseConnection, key: &str) -> anyhow::Result<String> {
    use sea_orm::{ConnectionTrait, Statement};
    Ok(db
        .query_one_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            "SELECT account_id FROM api_keys WHERE key_hash = $1",
            [key_hash(key)?.into()],
        ))
        .await?
        .ok_or_else(|| anyhow::anyhow!("bench key not stored"))?
        .try_get_by_index(0)?)
}

/// The seeded deals: the plans of the list's first page and of a page from the middle, and that page's cursor.
struct SeededDeals {
    plans: String,
    middle_cursor: String,
}

/// Gives the key's account `count` deals spread over the main pipeline's stages (dense positions, one
/// second apart), then explains the service's own list statement for the first page and the middle one.
async fn seed_deals(postgres: &str, key: &str, count: u32) -> anyhow::Result<SeededDeals> {
    use frontdesk_domain::deals::store::{Filters, list_statement};
    use frontdesk_kernel::paging::{Cursor, Page};
    use sea_orm::Statement;
    let db = Database::connect(postgres).await?;
    let account_id = account_of(&db, key).await?;
    let backend = db.get_database_backend();
    db.execute_raw(Statement::from_sql_and_values(
        backend,
        "INSERT INTO deals (id, account_id, title, description, company, stage, pipeline_id, value, probability, \
         priority, status, source, position, contact_id, assigned_to, tags, close_date, created_at, updated_at, \
         stage_entered_at) \
         SELECT 'deal_' || lpad(g::text, 16, '0'), $1, 'Deal ' || g, '', 'Company ' || (g % 1000), \
         (ARRAY['new','qualified','proposal','negotiation','won','lost'])[1 + g % 6], 'default', g % 10000, \
         g % 101, (ARRAY['low','medium','high','urgent'])[1 + g % 4], 'open', 'api', g / 6, '', '', '[\"bench\"]', \
         NULL, now() - make_interval(secs => g), now(), now() \
         FROM generate_series(1, $2) AS g",
        [account_id.clone().into(), i64::from(count).into()],
    ))
    .await?;
    db.execute_unprepared("ANALYZE deals").await?;
    let middle = db
        .query_one_raw(Statement::from_sql_and_values(
            backend,
            "SELECT created_at, id FROM deals WHERE account_id = $1 ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT 1",
            [account_id.clone().into(), i64::from(count / 2).into()],
        ))
        .await?
        .ok_or_else(|| anyhow::anyhow!("no middle deal"))?;
    let middle = Cursor {
        created_at: middle.try_get_by_index(0)?,
        id: middle.try_get_by_index(1)?,
    };
    let mut plans = String::new();
    for (title, after) in [("first page", None), ("page from the middle", Some(middle.clone()))] {
        let page = Page { limit: 50, after };
        let list = list_statement(backend, &account_id, &Filters::default(), &page);
        let explain = Statement::from_sql_and_values(
            backend,
            format!("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {}", list.sql),
            list.values.map(|v| v.0).unwrap_or_default(),
        );
        plans.push_str(&format!("{title}: {}\n", list.sql));
        for row in db.query_all_raw(explain).await? {
            plans.push_str(&row.try_get_by_index::<String>(0)?);
            plans.push('\n');
        }
    }
    Ok(SeededDeals {
        plans,
        middle_cursor: middle.encode(),
    })
}

/// The storage floor of the authenticated call: what Redis on this machine allows when the service adds
/// nothing. A call whose key is verified in memory makes this one round trip and no database read.
async fn storage_floor(setup: &Setup, postgres: &str, key: &str, shape: Shape) -> anyhow::Result<Measured> {
    let floor = FloorStores::connect(setup, postgres, key).await?;
    let outcome = floor.drive(shape, || async { Ok(()) }).await?;
    Ok(Measured::floor(FLOOR_NAME, outcome))
}

const FLOOR_NAME: &str = "floor: the rate-limit script with the key's access stamp, no HTTP";

/// What a storage floor drives, from plain clients: the service's database and Redis, and the bench key's
/// account with its access stamp as the service's cache holds it.
pub(crate) struct FloorStores {
    pub db: sea_orm::DatabaseConnection,
    redis: redis::aio::ConnectionManager,
    pub account_id: String,
    stamp: (String, String),
}

impl FloorStores {
    pub async fn connect(setup: &Setup, postgres: &str, key: &str) -> anyhow::Result<Self> {
        use sea_orm::ConnectOptions;
        let mut options = ConnectOptions::new(postgres.to_owned());
        options.max_connections(16).sqlx_logging(false);
        let db = Database::connect(options).await?;
        let account_id = account_of(&db, key).await?;
        let mut redis = redis::aio::ConnectionManager::new(redis::Client::open(setup.redis.as_str())?).await?;
        let stamp_key = stamps::key(&account_id);
        let stamp: Option<String> = redis::cmd("GET").arg(&stamp_key).query_async(&mut redis).await?;
        Ok(Self {
            account_id,
            redis,
            stamp: (stamp_key, stamp.unwrap_or_default()),
            db,
        })
    }

    /// The rate-limit script per request, as a cached key's call runs it, then `then` (`load::storage_floor`).
    /// It counts under a name of its own beside the account's: a floor makes more calls in its seconds than the
    /// account's limit allows in a window, and the service's calls measured after it would be throttled.
    pub async fn drive<T, Fut>(&self, shape: Shape, then: T) -> anyhow::Result<load::Outcome>
    where
        T: Fn() -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Result<(), String>> + Send,
    {
        load::storage_floor(
            self.redis.clone(),
            SLIDING_WINDOW_LUA,
            self.stamp.clone(),
            format!("{}:floor", self.account_id),
            shape,
            then,
        )
        .await
    }
}

/// The stored form of a key: the service's own hash.
fn key_hash(key: &str) -> anyhow::Result<String> {
    Ok(ApiKey::parse(key)
        .ok_or_else(|| anyhow::anyhow!("malformed bench key"))?
        .hash())
}

/// Time from spawn until `/healthz` answers 200.
async fn healthy_after(addr: std::net::SocketAddr, listening_after: Duration) -> anyhow::Result<Duration> {
    let started = std::time::Instant::now();
    let shape = Shape {
        concurrency: 1,
        duration: Duration::from_millis(1),
        warmup: Duration::ZERO,
    };
    loop {
        let probe = load::http(addr, get("/healthz", None), shape).await;
        if probe.is_ok_and(|o| o.error_count() == 0) {
            return Ok(listening_after + started.elapsed());
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(10), "never healthy");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Appends a row of `columns` placeholders, numbered after `bound` values, to a multi-row INSERT.
pub(crate) fn push_row(sql: &mut String, bound: usize, columns: usize) {
    if bound > 0 {
        sql.push(',');
    }
    let placeholders: Vec<String> = (1..=columns).map(|c| format!("${}", bound + c)).collect();
    sql.push_str(&format!("({})", placeholders.join(", ")));
}
