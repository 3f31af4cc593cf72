//! The drills (`frontdesk-bench crash-drill`): clients create deals, each a `deal.created` event for one
//! webhook subscription, while the service goes through a fault (`faults`): by default `serve` is killed
//! with SIGKILL several times and restarted at once. Afterwards every acknowledged deal must reach the
//! receiver; the drill reports what was lost, what arrived twice (at-least-once allows it; the rate is the
//! figure to keep low), and what was delayed: a delivery with a failed attempt on record, or delivered only
//! at its second attempt or later, though the receiver never fails, is one a fault of ours charged to the
//! endpoint as a retry step. `--path sends`, `replies` and `broadcast` run the same drill on sends to a
//! channel provider, on customers' questions answered by a model, on a broadcast and on a knowledge import
//! (`engine::send_drill`, `reply_drill`, `broadcast_drill`, `import_drill`). The servers of a drill export
//! their traces to a receiver of the drill's, and each report ends with the slowest kinds of span.

use std::{
    collections::{HashMap, HashSet},
    net::SocketAddr,
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Router, body::Bytes, extract::State, routing::post};
use clap::{Parser, ValueEnum};
use sea_orm::{ConnectionTrait, Database, Statement};
use tonic::{Request, metadata::MetadataValue, transport::Channel};

use frontdesk_tests::otlp::{OtlpReceiver, ReceivedSpan};

use crate::{
    faults::{Fault, Stage},
    process::ServerProcess,
    scenarios::Setup,
};

#[derive(clap::Args)]
pub struct DrillArgs {
    /// What the clients do while `serve` is killed.
    #[arg(long, value_enum, default_value_t = DrillPath::Deals)]
    path: DrillPath,
    /// Run on an SQLite file instead of PostgreSQL + Redis.
    #[arg(long)]
    pub sqlite: bool,
    /// SIGKILLs of `serve`.
    #[arg(long, default_value_t = 3)]
    pub kills: u32,
    /// Seconds over which the kills are spread.
    #[arg(long, default_value_t = 5.0)]
    pub window: f64,
    /// Concurrent clients.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Messages the clients send at least: sends (`--path sends`, default 10,000), questions (`--path
    /// replies`, default 2,000), a broadcast's recipients (`--path broadcast`, default and most 10,000) or an
    /// import's pages (`--path import`, default and most 100).
    #[arg(long)]
    pub sends: Option<u64>,
    /// What the service goes through while the clients work.
    #[arg(long, value_enum, default_value_t = Fault::Kill)]
    pub fault: Fault,
    /// Seconds a Redis, PostgreSQL or provider fault lasts.
    #[arg(long, default_value_t = 10.0)]
    pub outage: f64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
enum DrillPath {
    /// Create deals over gRPC, each delivered to a webhook subscription.
    Deals,
    /// Send 10,000 messages over REST, each delivered to Twilio's Messages API.
    Sends,
    /// Post 2,000 customers' questions as Twilio's inbound webhooks, each answered by a model.
    Replies,
    /// Send a broadcast to 10,000 phone numbers.
    Broadcast,
    /// Import 100 pages of a site into the knowledge base.
    Import,
}

/// Receipt count and last receipt time per key (a deal's id, a send's text), as a receiver records them.
#[derive(Clone, Default)]
pub struct Receipts(Arc<Mutex<HashMap<String, (Instant, u32)>>>);

impl Receipts {
    pub fn record(&self, key: String) {
        let mut received = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let entry = received.entry(key).or_insert((Instant::now(), 0));
        *entry = (Instant::now(), entry.1 + 1);
    }

    /// How many of `keys` were never received.
    pub fn missing(&self, keys: &HashSet<String>) -> usize {
        let received = self.0.lock().unwrap_or_else(|e| e.into_inner());
        keys.iter().filter(|key| !received.contains_key(*key)).count()
    }

    /// How long after `since` the last of `keys` was received; `None` while one is missing.
    pub fn last_receipt_after(&self, keys: &HashSet<String>, since: Instant) -> Option<Duration> {
        let received = self.0.lock().unwrap_or_else(|e| e.into_inner());
        keys.iter().try_fold(Duration::ZERO, |latest, key| {
            let (at, _) = received.get(key)?;
            Some(latest.max(at.saturating_duration_since(since)))
        })
    }

    /// What was received of `acknowledged`, and beside it, by now.
    pub fn tally(&self, acknowledged: &HashSet<String>, fault_ended: Instant) -> Tally {
        let received = self.0.lock().unwrap_or_else(|e| e.into_inner());
        Tally {
            lost: acknowledged.iter().filter(|key| !received.contains_key(*key)).count(),
            twice: received.values().filter(|(_, n)| *n > 1).count(),
            unacknowledged: received.keys().filter(|key| !acknowledged.contains(*key)).count(),
            last_after_fault: received
                .values()
                .map(|(at, _)| at.saturating_duration_since(fault_ended))
                .max()
                .unwrap_or_default(),
        }
    }
}

/// A drill's receipts against what the service acknowledged.
pub struct Tally {
    /// Acknowledged, never received.
    pub lost: usize,
    /// Received twice or more.
    pub twice: usize,
    /// Received, though the request that made it was never answered (its process was killed first).
    pub unacknowledged: usize,
    /// The last receipt, after the fault ended.
    pub last_after_fault: Duration,
}

async fn hook(State(received): State<Receipts>, body: Bytes) {
    let id = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["data"]["id"].as_str().map(str::to_owned))
        .unwrap_or_default();
    received.record(id);
}

async fn start_receiver() -> anyhow::Result<(SocketAddr, Receipts)> {
    let received = Receipts::default();
    let app = Router::new().route("/hook", post(hook)).with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((addr, received))
}

/// What one deals client saw: the ids whose creation was answered, and its failed calls.
#[derive(Default)]
struct ClientOutcome {
    acknowledged: Vec<String>,
    /// Failed calls by code; a status that did not come from the server (its connection failed) is marked.
    failures: HashMap<String, u64>,
    /// Answers of the server that are its own fault (gRPC's 500s: INTERNAL, UNKNOWN, DATA_LOSS,
    /// UNIMPLEMENTED), as against UNAVAILABLE (503) or a connection cut by a kill.
    server_errors: u64,
}

impl ClientOutcome {
    fn failed(&mut self, status: &tonic::Status) {
        // A status made by the client from a transport error carries that error as its source; one the
        // server answered carries none.
        let from_server = std::error::Error::source(status).is_none();
        let code = status.code();
        let label = if from_server {
            format!("{code:?}")
        } else {
            format!("{code:?} (connection)")
        };
        *self.failures.entry(label).or_default() += 1;
        if from_server
            && matches!(
                code,
                tonic::Code::Internal | tonic::Code::Unknown | tonic::Code::DataLoss | tonic::Code::Unimplemented
            )
        {
            self.server_errors += 1;
        }
    }
}

/// Creates deals against whichever `serve` is up until `stop`.
async fn client(
    core: Arc<RwLock<Option<SocketAddr>>>,
    key: MetadataValue<tonic::metadata::Ascii>,
    stop: Arc<AtomicBool>,
) -> ClientOutcome {
    let mut outcome = ClientOutcome::default();
    let mut connected: Option<(SocketAddr, Channel)> = None;
    while !stop.load(Ordering::Relaxed) {
        let Some(addr) = *core.read().unwrap_or_else(|e| e.into_inner()) else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if connected.as_ref().is_none_or(|(a, _)| *a != addr) {
            match Channel::from_shared(format!("http://{addr}")).map(|e| e.connect_timeout(Duration::from_secs(1))) {
                Ok(endpoint) => match endpoint.connect().await {
                    Ok(channel) => connected = Some((addr, channel)),
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                },
                Err(_) => return outcome,
            }
        }
        let Some((_, channel)) = &connected else { continue };
        let mut deals = frontdesk_api::v1::deals_client::DealsClient::new(channel.clone());
        let mut request = Request::new(frontdesk_api::v1::CreateDealRequest {
            title: "Crash drill".into(),
            stage: "new".into(),
            ..Default::default()
        });
        request.set_timeout(Duration::from_secs(5));
        request.metadata_mut().insert("x-api-key", key.clone());
        match deals.create_deal(request).await {
            Ok(answer) => outcome.acknowledged.extend(answer.into_inner().deal.map(|d| d.id)),
            Err(status) => {
                outcome.failed(&status);
                connected = None;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    outcome
}

pub async fn crash_drill(setup: &Setup, args: DrillArgs) -> anyhow::Result<()> {
    check(&args)?;
    // Every server of the drill exports its spans here; the report ends with the slowest kinds.
    let traces = OtlpReceiver::start("http/protobuf").await;
    let setup = Setup {
        traces: Some(traces.endpoint.clone()),
        ..setup.clone()
    };
    let stage = Stage::start(&setup, args.sqlite).await?;
    let ran = match args.path {
        DrillPath::Deals => deals(stage, args).await,
        DrillPath::Sends => crate::engine::send_drill(stage, &args).await,
        DrillPath::Broadcast => crate::engine::broadcast_drill(stage, &args).await,
        DrillPath::Replies => crate::engine::reply_drill(stage, &args).await,
        DrillPath::Import => crate::import_drill::run(stage, &args).await,
    };
    slowest_spans(&traces.spans());
    ran
}

/// The full drill (`frontdesk-bench drills`): every path through every fault it can have, on PostgreSQL and
/// Redis and on SQLite, one after another with the defaults of `crash-drill`. A failed drill does not stop
/// the rest; the run ends with one row per drill (the command that runs it alone, its result, its time) and
/// fails if any drill did.
pub async fn every_drill(setup: &Setup) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for (command, args) in every_combination()? {
        println!("\n## frontdesk-bench {command}\n");
        let started = Instant::now();
        let outcome = crash_drill(setup, args).await;
        rows.push((command, outcome, started.elapsed()));
    }
    println!("\nthe full drill, {} drills:", rows.len());
    println!("| drill | result | seconds |\n|---|---|---:|");
    for (command, outcome, took) in &rows {
        let result = match outcome {
            Ok(()) => "passed".to_owned(),
            Err(err) => format!("**failed**: {err:#}"),
        };
        println!("| `{command}` | {result} | {:.0} |", took.as_secs_f64());
    }
    let failed = rows.iter().filter(|(_, outcome, _)| outcome.is_err()).count();
    anyhow::ensure!(failed == 0, "{failed} of {} drills failed", rows.len());
    Ok(())
}

/// Every drill `check` allows, each as its `crash-drill` command line and the arguments parsed from it (so
/// each runs with the defaults it has when run alone).
fn every_combination() -> anyhow::Result<Vec<(String, DrillArgs)>> {
    #[derive(clap::Parser)]
    struct OneDrill {
        #[command(flatten)]
        args: DrillArgs,
    }
    fn name(value: impl ValueEnum) -> String {
        value
            .to_possible_value()
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default()
    }
    let mut drills = Vec::new();
    for sqlite in [false, true] {
        for &path in DrillPath::value_variants() {
            for &fault in Fault::value_variants() {
                let mut words = vec!["--path".to_owned(), name(path), "--fault".to_owned(), name(fault)];
                if sqlite {
                    words.push("--sqlite".to_owned());
                }
                let command = format!("crash-drill {}", words.join(" "));
                let OneDrill { args } = OneDrill::try_parse_from(command.split(' '))?;
                if check(&args).is_ok() {
                    drills.push((command, args));
                }
            }
        }
    }
    Ok(drills)
}

/// The kinds of span (by name) with the slowest single span, each with its count and percentiles.
fn slowest_spans(spans: &[ReceivedSpan]) {
    const SHOWN: usize = 8;
    let mut by_name: HashMap<&str, Vec<Duration>> = HashMap::new();
    for span in spans {
        by_name.entry(&span.name).or_default().push(span.duration);
    }
    let mut kinds: Vec<(&str, Vec<Duration>)> = by_name.into_iter().collect();
    for (_, durations) in &mut kinds {
        durations.sort_unstable();
    }
    kinds.sort_by_key(|(_, durations)| std::cmp::Reverse(durations.last().copied()));
    println!("\nslowest spans ({} exported over OTLP):", spans.len());
    println!("| span | count | p50 ms | p99 ms | slowest ms |\n|---|---|---|---|---|");
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for (name, durations) in kinds.iter().take(SHOWN) {
        let at = |q: f64| durations[((durations.len() - 1) as f64 * q).round() as usize];
        println!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} |",
            durations.len(),
            ms(at(0.5)),
            ms(at(0.99)),
            ms(at(1.0))
        );
    }
}

/// Refuses a fault the drill's path or store cannot have, before anything is started.
fn check(args: &DrillArgs) -> anyhow::Result<()> {
    let (fault, path) = (args.fault, args.path);
    anyhow::ensure!(
        !args.sqlite || matches!(fault, Fault::Kill | Fault::Provider | Fault::Model),
        "a Redis or PostgreSQL fault needs PostgreSQL and Redis (drop --sqlite)"
    );
    anyhow::ensure!(
        fault != Fault::Provider || matches!(path, DrillPath::Sends),
        "only the sends drill has a channel provider to fail"
    );
    anyhow::ensure!(
        fault != Fault::Model || matches!(path, DrillPath::Replies),
        "only the replies drill has a model provider to fail"
    );
    Ok(())
}

async fn deals(mut stage: Stage, args: DrillArgs) -> anyhow::Result<()> {
    let setup = &stage.setup.clone();
    let database = setup.database(args.sqlite).await?;
    let mut env = setup.env(&database, !args.sqlite);
    env.insert("FRONTDESK_ALLOW_PRIVATE_URLS".into(), "true".into());
    let spawn = || ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2);
    let (receiver, received) = start_receiver().await?;

    let serve = spawn()?;
    let grpc = serve.grpc.expect("grpc address");
    let key: MetadataValue<_> = crate::scenarios::bench_account(grpc).await?.parse()?;
    let mut webhooks = frontdesk_api::v1::webhooks_client::WebhooksClient::new(
        Channel::from_shared(format!("http://{grpc}"))?.connect().await?,
    );
    let mut request = Request::new(frontdesk_api::v1::CreateWebhookRequest {
        url: format!("http://{receiver}/hook"),
        events: vec!["deal.created".into()],
        ..Default::default()
    });
    request.metadata_mut().insert("x-api-key", key.clone());
    webhooks.create_webhook(request).await?;

    let core = Arc::new(RwLock::new(Some(grpc)));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..args.clients)
        .map(|_| tokio::spawn(client(core.clone(), key.clone(), stop.clone())))
        .collect();
    let (serve, (_, fault_ended)) = stage.disrupt(serve, spawn, &core, |s| s.grpc, &args).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let mut acknowledged = HashSet::new();
    let mut failures: HashMap<String, u64> = HashMap::new();
    let mut server_errors = 0;
    for client in clients {
        let outcome = client.await?;
        acknowledged.extend(outcome.acknowledged);
        for (code, n) in outcome.failures {
            *failures.entry(code).or_default() += n;
        }
        server_errors += outcome.server_errors;
    }

    let started = Instant::now();
    loop {
        if received.missing(&acknowledged) == 0 || started.elapsed() > Duration::from_secs(180) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Deliveries whose results a kill lost are sent again once their leases end: wait until every one
    // has settled, so their duplicates are counted too.
    let db = Database::connect(&database).await?;
    const UNSETTLED: &str = "SELECT COUNT(*) FROM webhook_deliveries WHERE status <> 'succeeded'";
    while scalar(&db, UNSETTLED).await? > 0 && started.elapsed() < Duration::from_secs(180) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let Tally {
        lost,
        twice: duplicates,
        unacknowledged,
        last_after_fault: drained_after,
    } = received.tally(&acknowledged, fault_ended);
    let delayed = scalar(
        &db,
        // An attempt row is an attempt that did not deliver (the one that did is kept in its delivery's row).
        "SELECT COUNT(DISTINCT delivery_id) FROM webhook_attempts",
    )
    .await?;
    let unsettled = scalar(
        &db,
        "SELECT COUNT(*) FROM webhook_deliveries WHERE status <> 'succeeded'",
    )
    .await?;
    tear_down(setup, &database, [db], serve).await?;

    let store = store(args.sqlite);
    let rate = |n: usize| 100.0 * n as f64 / acknowledged.len().max(1) as f64;
    println!(
        "drill, deals ({store}): {}, {} clients",
        args.fault.describe(args.kills, args.window, args.outage),
        args.clients
    );
    println!("| figure | value |\n|---|---|");
    println!("| deals acknowledged | {} |", acknowledged.len());
    println!("| lost (acknowledged, never delivered) | {lost} |");
    println!("| delayed (a retry step spent: a failed attempt, or success only at attempt 2+) | {delayed} |");
    println!("| delivered twice or more | {duplicates} ({:.2}%) |", rate(duplicates));
    println!("| delivered, creation not acknowledged (killed before the answer) | {unacknowledged} |");
    println!("| deliveries not succeeded at the end | {unsettled} |");
    println!(
        "| last receipt after the fault ended | {:.2} s |",
        drained_after.as_secs_f64()
    );
    let mut failures: Vec<_> = failures.into_iter().collect();
    failures.sort();
    println!("| failed calls by code | {failures:?} |");
    println!("| answers of a server error other than UNAVAILABLE (gRPC's 5xx other than 503) | {server_errors} |");
    anyhow::ensure!(lost == 0, "{lost} acknowledged deals were never delivered");
    anyhow::ensure!(
        server_errors == 0,
        "{server_errors} answers of a server error other than UNAVAILABLE"
    );
    Ok(())
}

/// The end of a drill's run: its connections closed, `serve` stopped (SIGKILL) once its last spans are
/// exported, and its database dropped.
pub async fn tear_down(
    setup: &Setup,
    database: &str,
    connections: impl IntoIterator<Item = sea_orm::DatabaseConnection>,
    serve: ServerProcess,
) -> anyhow::Result<()> {
    for db in connections {
        db.close().await?;
    }
    // Spans are exported every 200 ms (`Setup::env`): the last ones reach the receiver before the kill.
    tokio::time::sleep(Duration::from_millis(600)).await;
    drop(serve);
    setup.drop_database(database).await
}

/// What a drill's report calls its store.
pub fn store(sqlite: bool) -> &'static str {
    if sqlite { "SQLite" } else { "PostgreSQL + Redis" }
}

pub async fn scalar(db: &sea_orm::DatabaseConnection, sql: &str) -> anyhow::Result<i64> {
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await?
        .ok_or_else(|| anyhow::anyhow!("no row"))?;
    Ok(row.try_get_by_index(0)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full drill runs each path through each fault it can have, and SIGKILLs of every path on both
    /// stores.
    #[test]
    fn the_full_drill_has_every_path_through_every_fault_it_can_have() {
        let drills = every_combination().unwrap();
        let has = |path: DrillPath, fault: Fault, sqlite: bool| {
            drills
                .iter()
                .any(|(_, a)| a.path == path && a.fault == fault && a.sqlite == sqlite)
        };
        for &path in DrillPath::value_variants() {
            for fault in [Fault::Kill, Fault::RedisDown, Fault::RedisPause, Fault::PostgresRestart] {
                assert!(has(path, fault, false), "{path:?} {}", fault.describe(1, 1.0, 1.0));
            }
            assert!(has(path, Fault::Kill, true), "{path:?} on SQLite");
        }
        for sqlite in [false, true] {
            assert!(has(DrillPath::Sends, Fault::Provider, sqlite));
            assert!(has(DrillPath::Replies, Fault::Model, sqlite));
        }
        assert_eq!(
            drills.len(),
            5 * 4 + 2 + 5 + 2,
            "{:?}",
            drills.iter().map(|(c, _)| c).collect::<Vec<_>>()
        );
        for (command, args) in &drills {
            assert!(check(args).is_ok(), "{command}");
            assert_eq!(args.kills, 3, "{command}: the defaults of crash-drill");
            assert_eq!(args.outage, 10.0, "{command}");
        }
    }
}
