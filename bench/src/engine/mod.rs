//! The conversation engine's scenarios on PostgreSQL + Redis, with the bench's receiver as Twilio: accepting a
//! send against `GET /v1/api-keys/current` on the same server just before, twice (first on an API-only
//! replica that runs no jobs, then on one `serve` that also delivers what it accepts), the storage floors of
//! the call and of a send beside the first (`floor`), the send pipeline's capacity and its latency at half
//! of it (`pipeline`), signed inbound sms (`inbound`) and signed WhatsApp batches (`meta_inbound`). The account has
//! one sms channel and, for the sends, many contacts: sends spread over them, so no two in flight touch the
//! same conversation.

mod broadcast;
mod broadcast_drill;
mod fairness;
mod floor;
mod inbound;
mod meta_inbound;
mod model_replies;
mod pipeline;
mod replicas;
mod replies;
mod reply_drill;
mod send_drill;

use std::{collections::BTreeMap, net::SocketAddr, sync::Arc, time::Duration};

use bytes::Bytes;
use frontdesk_api::v1::{
    ConnectChannelRequest, CreateAgentRequest, CreateContactRequest, agents_client::AgentsClient,
    channels_client::ChannelsClient, contacts_client::ContactsClient,
};
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, Statement};
use tonic::{Request, metadata::MetadataValue, transport::Channel};

use crate::{
    load::{self, HttpRequest, Requests, Shape},
    process::ServerProcess,
    scenarios::{Measured, Setup, bench_account, measure},
};

pub const BASELINE: &str = "engine: GET /v1/api-keys/current, same serve (the send's baseline)";
pub const SEND: &str = "engine: POST /v1/contacts/{id}/send-message, 1,000 contacts, sms to the Twilio receiver";
pub const BASELINE_API_ONLY: &str = "engine: GET /v1/api-keys/current, API-only replica (FRONTDESK_JOB_CONCURRENCY=0)";
pub const SEND_API_ONLY: &str =
    "engine: POST /v1/contacts/{id}/send-message, API-only replica (deliveries run after, on a worker replica)";
pub use broadcast::{
    BASELINE as BROADCAST_BASELINE, BESIDE as BESIDE_BROADCAST, BESIDE_REPLIES as BROADCAST_REPLIES, EXPANSION,
    RATE as BROADCAST_RATE,
};
pub use broadcast_drill::run as broadcast_drill;
pub use fairness::{QUIET_ALONE, QUIET_BESIDE_BACKLOG};
pub use floor::{CALL_FLOOR, SEND_FLOOR};
pub use inbound::{INBOUND, Stored};
pub use meta_inbound::{META_INBOUND, META_PACED, META_REFUSED, PER_POST};
pub use model_replies::{MODEL_BURST, MODEL_LATENCY, Waiting};
pub use pipeline::{PIPELINE, PIPELINE_HALF, TWILIO_LIMIT};
pub use replicas::{ReplicasArgs, run as replicas};
pub use replies::{DecisionsByPhase, REPLY_LATENCY, REPLY_RATE};
pub use reply_drill::run as reply_drill;
pub use send_drill::run as send_drill;

/// The channel's Twilio account and sending number.
const ACCOUNT_SID: &str = "AC0123456789abcdef0123456789abcdef";
const AUTH_TOKEN: &str = "bench0auth0token000000000000000a";
const FROM_NUMBER: &str = "+15005550006";
/// What every send of the accept's scenarios says.
const SEND_TEXT: &str = "Your order #4821 has shipped and arrives on Thursday.";
/// What `FRONTDESK_PUBLIC_URL` says: the base Twilio signs hook URLs with.
const PUBLIC_URL: &str = "https://frontdesk.bench.example";

/// The `Authorization` the service sends Twilio for the channel's account.
fn basic_auth() -> String {
    use base64::Engine as _;
    let credentials = format!("{ACCOUNT_SID}:{AUTH_TOKEN}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(credentials)
    )
}

/// The engine's figures, the inbound storage check and the AI decisions' timing when those scenarios ran.
pub struct Figures {
    pub measured: Vec<Measured>,
    pub stored: Option<Stored>,
    /// The same for the WhatsApp batches.
    pub meta_stored: Option<Stored>,
    pub decisions: Option<DecisionsByPhase>,
    /// The memory of model-written replies waiting on the model, when that scenario ran.
    pub waiting: Option<Waiting>,
}

/// The account, its sms channel and contacts, on a running `serve`.
struct Engine {
    http: SocketAddr,
    grpc: SocketAddr,
    key: String,
    channel_id: String,
    contact_ids: Vec<String>,
    db: DatabaseConnection,
}

/// Runs the engine's scenarios that `wanted` selects (`--only engine` selects them all).
pub async fn run(setup: &Setup, shape: Shape, wanted: impl Fn(&str) -> bool) -> anyhow::Result<Figures> {
    let mut figures = Figures {
        measured: Vec::new(),
        stored: None,
        meta_stored: None,
        decisions: None,
        waiting: None,
    };
    if wanted(MODEL_LATENCY) || wanted(MODEL_BURST) {
        let (measured, waiting) = model_replies::run(setup, shape).await?;
        figures.measured.extend(measured);
        figures.waiting = Some(waiting);
    }
    if wanted(REPLY_LATENCY) || wanted(REPLY_RATE) {
        let (measured, decisions) = replies::run(setup, shape).await?;
        figures.measured.extend(measured);
        figures.decisions = Some(decisions);
    }
    let (send, pipeline, inbound) = (wanted(SEND), wanted(PIPELINE) || wanted(PIPELINE_HALF), wanted(INBOUND));
    let fair = wanted(QUIET_ALONE) || wanted(QUIET_BESIDE_BACKLOG);
    let meta = wanted(META_INBOUND) || wanted(META_REFUSED) || wanted(META_PACED);
    let broadcast = [
        BROADCAST_BASELINE,
        EXPANSION,
        BROADCAST_RATE,
        BESIDE_BROADCAST,
        BROADCAST_REPLIES,
    ]
    .iter()
    .any(|name| wanted(name));
    if !(send || pipeline || inbound || fair || meta || broadcast) {
        return Ok(figures);
    }
    let receiver = ServerProcess::spawn(&setup.bench, &["webhook-receiver"], &BTreeMap::new(), 1)?;
    let receiver_addr = receiver.http.expect("receiver address");
    if pipeline {
        figures.measured.push(pipeline::receiver_limit(&receiver, shape).await?);
    }
    let postgres = setup.postgres_database().await?;
    let mut env = setup.env(&postgres, true);
    env.insert("FRONTDESK_TWILIO_BASE_URL".into(), format!("http://{receiver_addr}"));
    env.insert("FRONTDESK_PUBLIC_URL".into(), PUBLIC_URL.into());
    // The AI replies timed beside a broadcast answer at once.
    env.insert("FRONTDESK_REPLY_DEBOUNCE_MS".into(), "0".into());
    // Accepting alone first, on a replica that runs no jobs (as API replicas beside worker replicas do);
    // then the same on one `serve` that also delivers what it accepts, on the same two cores.
    let mut api_env = env.clone();
    api_env.insert("FRONTDESK_JOB_CONCURRENCY".into(), "0".into());
    let api = ServerProcess::spawn(&setup.frontdesk, &["serve"], &api_env, 2)?;
    let contacts = if shape.smoke() { 20 } else { 1_000 };
    let mut engine = Engine::prepare(&api, &postgres, contacts).await?;
    if send {
        figures
            .measured
            .extend(engine.accepting(&api, BASELINE_API_ONLY, SEND_API_ONLY, shape).await?);
        figures
            .measured
            .extend(floor::run(setup, &engine, &postgres, shape).await?);
    }
    drop(api);
    let serve = ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2)?;
    engine.http = serve.http.expect("http");
    engine.grpc = serve.grpc.expect("grpc");
    if send {
        engine.drained().await?;
        figures
            .measured
            .extend(engine.accepting(&serve, BASELINE, SEND, shape).await?);
        engine.drained().await?;
    }
    if pipeline {
        figures
            .measured
            .extend(pipeline::run(&engine, &serve, receiver_addr, shape).await?);
    }
    if fair {
        engine.drained().await?;
        let quiet = Engine::prepare(&serve, &postgres, 20).await?;
        figures
            .measured
            .extend(fairness::run(&engine, &quiet, &serve, receiver_addr, shape).await?);
        quiet.db.close().await?;
    }
    if inbound {
        engine.drained().await?;
        let (measured, stored) = inbound::run(&engine, &serve, shape).await?;
        figures.measured.push(measured);
        figures.stored = Some(stored);
    }
    if meta {
        engine.drained().await?;
        let (measured, stored) = meta_inbound::run(&engine, &serve, shape).await?;
        figures.measured.extend(measured);
        figures.meta_stored = Some(stored);
    }
    if broadcast {
        engine.drained().await?;
        let quiet = Engine::prepare(&serve, &postgres, 20).await?;
        figures
            .measured
            .extend(broadcast::run(&engine, &quiet, &serve, receiver_addr, &postgres, shape).await?);
        quiet.db.close().await?;
    }
    drop(serve);
    engine.db.close().await?;
    setup.drop_database(&postgres).await?;
    Ok(figures)
}

/// The pipeline's capacity (`pipeline::capacity`) with the `frontdesk` binary given, on its own database,
/// named `name`: the same figure for two builds in one run.
pub async fn pipeline_capacity(
    setup: &Setup,
    frontdesk: &std::path::Path,
    name: &'static str,
    shape: Shape,
) -> anyhow::Result<Measured> {
    let receiver = ServerProcess::spawn(&setup.bench, &["webhook-receiver"], &BTreeMap::new(), 1)?;
    let receiver_addr = receiver.http.expect("receiver address");
    let postgres = setup.postgres_database().await?;
    let mut env = setup.env(&postgres, true);
    env.insert("FRONTDESK_TWILIO_BASE_URL".into(), format!("http://{receiver_addr}"));
    env.insert("FRONTDESK_PUBLIC_URL".into(), PUBLIC_URL.into());
    let serve = ServerProcess::spawn(frontdesk, &["serve"], &env, 2)?;
    let contacts = if shape.smoke() { 20 } else { 1_000 };
    let engine = Engine::prepare(&serve, &postgres, contacts).await?;
    let measured = pipeline::capacity(&engine, &serve, receiver_addr, shape, name).await?;
    drop(serve);
    engine.db.close().await?;
    setup.drop_database(&postgres).await?;
    Ok(measured)
}

/// `message` with the key in its metadata.
fn keyed<T>(key: &MetadataValue<tonic::metadata::Ascii>, message: T) -> Request<T> {
    let mut request = Request::new(message);
    request.metadata_mut().insert("x-api-key", key.clone());
    request
}

impl Engine {
    /// A fresh account on `serve`, its sms channel on the receiver, and `contacts` contacts with distinct phones.
    async fn prepare(serve: &ServerProcess, postgres: &str, contacts: usize) -> anyhow::Result<Self> {
        let grpc = serve.grpc.expect("grpc");
        let key = bench_account(grpc).await?;
        let channel = Channel::from_shared(format!("http://{grpc}"))?.connect().await?;
        let metadata: MetadataValue<_> = key.parse()?;
        let config = [
            ("account_sid", ACCOUNT_SID),
            ("auth_token", AUTH_TOKEN),
            ("from_number", FROM_NUMBER),
            ("max_per_second", "100000"),
        ];
        let connected = ChannelsClient::new(channel.clone())
            .connect_channel(keyed(
                &metadata,
                ConnectChannelRequest {
                    name: "sms".into(),
                    r#type: "sms".into(),
                    config: config.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
                    ..Default::default()
                },
            ))
            .await?
            .into_inner();
        let channel_id = connected.channel.map(|c| c.id).unwrap_or_default();
        anyhow::ensure!(!channel_id.is_empty(), "the sms channel came back without an id");
        Ok(Self {
            http: serve.http.expect("http"),
            grpc,
            key,
            channel_id,
            contact_ids: create_contacts(channel, metadata, contacts).await?,
            db: Database::connect(postgres).await?,
        })
    }

    /// A new agent of the default tier named `name`, over gRPC; its id.
    async fn plain_agent(&self, name: &str) -> anyhow::Result<String> {
        let grpc = Channel::from_shared(format!("http://{}", self.grpc))?.connect().await?;
        let key: MetadataValue<_> = self.key.parse()?;
        let created = AgentsClient::new(grpc)
            .create_agent(keyed(
                &key,
                CreateAgentRequest {
                    name: name.into(),
                    ..Default::default()
                },
            ))
            .await?
            .into_inner();
        Ok(created.agent.map(|a| a.id).unwrap_or_default())
    }

    /// An agent of the model tier that answers the sms channel, on an account with credit for every reply;
    /// its id.
    async fn model_agent(&self) -> anyhow::Result<String> {
        let base = format!("http://{}", self.http);
        let api = crate::knowledge::rest_client();
        let agent: serde_json::Value = api
            .post(format!("{base}/v1/agents"))
            .header("x-api-key", &self.key)
            .json(&serde_json::json!({"name": "Bench desk", "ai_tier": "mini"}))
            .send()
            .await?
            .json()
            .await?;
        let agent = agent["agent"]["id"].as_str().unwrap_or_default().to_owned();
        api.put(format!("{base}/v1/entry-points/channel-defaults"))
            .header("x-api-key", &self.key)
            .json(&serde_json::json!({"channel": "sms", "agent_id": agent}))
            .send()
            .await?
            .error_for_status()?;
        self.db
            .execute_raw(Statement::from_string(
                self.db.get_database_backend(),
                "UPDATE accounts SET credit_milli = 1000000000",
            ))
            .await?;
        Ok(agent)
    }

    /// The authenticated call (`baseline`), then sends spread over the contacts (`sends`), on `serve`.
    async fn accepting(
        &self,
        serve: &ServerProcess,
        baseline: &'static str,
        sends: &'static str,
        shape: Shape,
    ) -> anyhow::Result<[Measured; 2]> {
        let current = crate::scenarios::get("/v1/api-keys/current", Some(&self.key));
        let called = measure(baseline, &[serve], load::http(self.http, current, shape)).await?;
        let requests: Vec<HttpRequest> = self.contact_ids.iter().map(|id| self.send(id, SEND_TEXT)).collect();
        let load = load::http_sends(self.http, Requests::Cycle(requests.into()), load::Pace::Closed, shape);
        Ok([called, measure(sends, &[serve], load).await?])
    }

    /// `POST /v1/contacts/{contact_id}/send-message` with `text`.
    fn send(&self, contact_id: &str, text: &str) -> HttpRequest {
        HttpRequest {
            method: http::Method::POST,
            path: format!("/v1/contacts/{contact_id}/send-message"),
            headers: vec![
                ("x-api-key".to_owned(), self.key.clone()),
                ("content-type".to_owned(), "application/json".to_owned()),
            ],
            body: Bytes::from(serde_json::json!({ "text": text }).to_string()),
        }
    }

    /// A number read with `sql` (one row, one `bigint` column).
    async fn count(&self, sql: &str, values: Vec<sea_orm::Value>) -> anyhow::Result<i64> {
        let statement = Statement::from_sql_and_values(self.db.get_database_backend(), sql, values);
        let row = self.db.query_one_raw(statement).await?;
        Ok(row.map(|r| r.try_get_by_index::<i64>(0)).transpose()?.unwrap_or(0))
    }

    /// Waits until no delivery job is pending (every send delivered or failed) and every event is dispatched,
    /// so the next scenario starts on a quiet queue; fails when a delivery failed.
    async fn drained(&self) -> anyhow::Result<()> {
        // The sends, then their events: the webhook dispatcher works off the outbox after the deliveries,
        // and a backlog left there would run into the next scenario's measurement.
        for (sql, what) in [
            (
                "SELECT count(*) FROM jobs WHERE kind = 'deliver_message' AND status = 'pending'",
                "the send queue",
            ),
            (
                "SELECT count(*) FROM event_outbox WHERE dispatched_at IS NULL",
                "the event outbox",
            ),
        ] {
            let started = std::time::Instant::now();
            while self.count(sql, vec![]).await? > 0 {
                anyhow::ensure!(started.elapsed() < Duration::from_secs(600), "{what} never drained");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        // A production server's autovacuum keeps the queue tables (jobs, the outbox, touched conversations)
        // small; this machine's PostgreSQL runs with autovacuum off, so the bench vacuums between scenarios
        // rather than carry one scenario's dead rows into the next one's measurement.
        self.db.execute_unprepared("VACUUM ANALYZE").await?;
        let failed = self
            .count(
                "SELECT count(*) FROM jobs WHERE kind = 'deliver_message' AND status = 'failed'",
                vec![],
            )
            .await?;
        anyhow::ensure!(failed == 0, "{failed} deliveries failed");
        Ok(())
    }
}

/// Creates `count` contacts (phones `+1555000nnnn`) from 16 concurrent callers; their ids, in order.
async fn create_contacts(
    channel: Channel,
    key: MetadataValue<tonic::metadata::Ascii>,
    count: usize,
) -> anyhow::Result<Vec<String>> {
    const CALLERS: usize = 16;
    let ids = Arc::new(std::sync::Mutex::new(vec![String::new(); count]));
    let mut callers = tokio::task::JoinSet::new();
    for caller in 0..CALLERS {
        let (channel, key, ids) = (channel.clone(), key.clone(), ids.clone());
        callers.spawn(async move {
            let mut contacts = ContactsClient::new(channel);
            for n in (caller..count).step_by(CALLERS) {
                let request = CreateContactRequest {
                    name: format!("Customer {n}"),
                    phone: format!("+1555{n:07}"),
                    ..Default::default()
                };
                let created = contacts.create_contact(keyed(&key, request)).await?.into_inner();
                let id = created.contact.map(|c| c.id).unwrap_or_default();
                ids.lock().unwrap_or_else(|e| e.into_inner())[n] = id;
            }
            anyhow::Ok(())
        });
    }
    for result in callers.join_all().await {
        result?;
    }
    let ids = std::mem::take(&mut *ids.lock().unwrap_or_else(|e| e.into_inner()));
    anyhow::ensure!(ids.iter().all(|id| !id.is_empty()), "a contact came back without an id");
    Ok(ids)
}
