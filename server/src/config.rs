//! Run-time configuration. Every knob is a `FRONTDESK_*` (or conventional) environment variable with a
//! documented default, declared once here with clap so `frontdesk --help` and the README table agree.

use std::{net::SocketAddr, time::Duration};

use clap::{Args, ValueEnum};

use crate::{
    env_values::{DurationList, parse_duration, parse_duration_list, parse_positive_duration, parse_weight},
    jobs::JobConfig,
    replies::config::ModelConfig,
    site::prices::PriceTable,
    store::group_commit::Batching,
    webchat::WebChatConfig,
    webhooks::WebhookConfig,
};

/// Settings of the gRPC core: listener, database, counters, admin token and payment provider. Not `Debug`:
/// it holds secrets.
#[derive(Args, Clone)]
pub struct CoreConfig {
    /// gRPC core listener.
    #[arg(long, env = "FRONTDESK_GRPC_ADDR", default_value = "0.0.0.0:50051")]
    pub grpc_addr: SocketAddr,

    /// SQLite file (`sqlite://PATH?mode=rwc`) or PostgreSQL (`postgres://...`) URL.
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://frontdesk.db?mode=rwc")]
    pub database_url: String,

    /// Largest number of pooled database connections (default: four per CPU, at least 8).
    #[arg(long, env = "FRONTDESK_DB_MAX_CONNECTIONS", default_value_t = default_db_connections())]
    pub db_max_connections: u32,

    /// PostgreSQL: connections of the job and webhook engines' own pool (claims, reads of claimed rows,
    /// records, renewals, the fan-out), apart from the requests' pool so requests queued on a row lock never
    /// hold the connections the engines need (default: two per CPU, at least 8). SQLite keeps one pool.
    #[arg(long, env = "FRONTDESK_DB_WORKER_CONNECTIONS", default_value_t = default_worker_connections())]
    pub db_worker_connections: u32,

    /// PostgreSQL: how long a statement waits for a lock another transaction holds (`lock_timeout` of every
    /// pooled session); past it the call answers 503 `unavailable`. `0s`: no limit. Migrations run without it.
    #[arg(long, env = "FRONTDESK_DB_LOCK_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub db_lock_timeout: Duration,

    /// PostgreSQL: the longest a statement may run (`statement_timeout` of every pooled session); past it
    /// the call answers 504 `deadline_exceeded`. `0s`: no limit. Migrations run without it.
    #[arg(long, env = "FRONTDESK_DB_STATEMENT_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub db_statement_timeout: Duration,

    /// Redis shared by every replica (`redis://HOST:6379`): rate-limit counters, channels' send pacing and web
    /// chat's live pushes; unset: all three in process.
    #[arg(long, env = "REDIS_URL")]
    pub redis_url: Option<String>,

    /// Length of the rate-limit window in seconds (limits are requests per window).
    #[arg(long, env = "FRONTDESK_RATE_WINDOW_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub rate_window_secs: u64,

    /// API keys each replica keeps verified in memory (with Redis only; least recently used out first).
    #[arg(long, env = "FRONTDESK_KEY_CACHE_ENTRIES", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub key_cache_entries: u64,

    /// Longest a verified key is kept in memory, in seconds: the bound on trusting it should a change
    /// fail to reach Redis.
    #[arg(long, env = "FRONTDESK_KEY_CACHE_TTL_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub key_cache_ttl_secs: u64,

    /// Bearer token of the admin gRPC service (`FRONTDESK_ADMIN_TOKEN`, environment only); unset: every
    /// admin call is refused.
    #[arg(skip = std::env::var("FRONTDESK_ADMIN_TOKEN").ok())]
    pub admin_token: Option<String>,

    /// Allow loopback, private and link-local targets for webhooks and knowledge imports.
    #[arg(long, env = "FRONTDESK_ALLOW_PRIVATE_URLS", default_value_t = false, action = clap::ArgAction::Set)]
    pub allow_private_urls: bool,

    /// The instant the deprecated campaign calls stop answering (410 `gone` from then on), RFC 3339.
    #[arg(long, env = "FRONTDESK_CAMPAIGNS_SUNSET", default_value = "2026-12-31T23:59:59Z")]
    pub campaigns_sunset: chrono::DateTime<chrono::Utc>,

    /// Key that encrypts stored provider credentials and tool headers: base64 of 32 bytes
    /// (`openssl rand -base64 32`; `FRONTDESK_SECRET_KEY`, environment only). Unset: generated once and kept
    /// beside the SQLite file (`<file>.key`); required with PostgreSQL.
    #[arg(skip = std::env::var("FRONTDESK_SECRET_KEY").ok())]
    pub secret_key: Option<String>,

    /// Let the admin `SetTestClock` call move the service's clock (for tests of time-bound behaviour such as
    /// the campaigns sunset). Never in production.
    #[arg(long, env = "FRONTDESK_TEST_CLOCK", default_value_t = false, action = clap::ArgAction::Set)]
    pub test_clock: bool,

    #[command(flatten)]
    pub payments: PaymentConfig,

    #[command(flatten)]
    pub webhooks: WebhookConfig,

    #[command(flatten)]
    pub conversations: ConversationConfig,

    #[command(flatten)]
    pub jobs: JobConfig,

    #[command(flatten)]
    pub imports: ImportConfig,

    #[command(flatten)]
    pub retrieval: RetrievalConfig,

    #[command(flatten)]
    pub uploads: UploadConfig,

    #[command(flatten)]
    pub webchat: WebChatConfig,

    #[command(flatten)]
    pub models: ModelConfig,
}

/// Knowledge imports: how pages are fetched.
#[derive(clap::Args, Clone, Debug)]
pub struct ImportConfig {
    /// The longest one page (connection, redirects and body) may take before it is listed with `timeout`.
    #[arg(long, env = "FRONTDESK_IMPORT_TIMEOUT", default_value = "20s", value_parser = parse_duration)]
    pub import_timeout: Duration,

    /// Pages of one host fetched at once by one core process, whatever the number of imports.
    #[arg(long, env = "FRONTDESK_IMPORT_HOST_CONCURRENCY", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub import_host_concurrency: u32,
}

/// Retrieval over an agent's knowledge: the sentence-embedding model and the fusion of its score with the
/// lexical one.
#[derive(clap::Args, Clone, Debug)]
pub struct RetrievalConfig {
    /// A sentence-transformers model folder (`model.safetensors`, `config.json`, `tokenizer.json`,
    /// `1_Pooling/config.json`) run in process on the CPU for semantic retrieval; `none`: lexical only.
    /// Unset: `models/all-MiniLM-L6-v2` beside the SQLite file or in the working directory, when there
    /// (`scripts/fetch-model` installs it), else lexical only.
    #[arg(long, env = "FRONTDESK_EMBEDDING_MODEL")]
    pub embedding_model: Option<String>,

    /// Weight of the meaning (embedding cosine) in a search's fused score; the words (normalised BM25)
    /// weigh the rest. 0: words only.
    #[arg(long, env = "FRONTDESK_RETRIEVAL_DENSE_WEIGHT", default_value_t = crate::knowledge::retrieval::DENSE_WEIGHT, value_parser = parse_weight)]
    pub dense_weight: f64,
}

/// Uploaded documents (knowledge imports); read by the edge (which refuses a larger file while it streams
/// in) and the core (which refuses it from a direct gRPC caller, and sizes its gRPC message limit by it).
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct UploadConfig {
    /// Largest document `POST /v1/kb-sources/file` takes, in megabytes (MiB); a larger one is refused with
    /// 413 `payload_too_large`.
    #[arg(long = "max-upload-mb", env = "FRONTDESK_MAX_UPLOAD_MB", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_upload_mb: u32,
}

impl UploadConfig {
    pub fn max_bytes(&self) -> usize {
        self.max_upload_mb as usize * 1024 * 1024
    }
}

/// Conversations and the channels that carry them.
#[derive(Args, Clone, Debug)]
pub struct ConversationConfig {
    /// The address providers and browsers reach this service at: channel callback URLs
    /// (`{FRONTDESK_PUBLIC_URL}/hooks/...`) are built from it, and Twilio's signatures are checked against it.
    #[arg(long, env = "FRONTDESK_PUBLIC_URL", default_value = "http://localhost:8080")]
    pub public_url: String,

    /// Base URL of Twilio's REST API (the Messages API lives under it).
    #[arg(long, env = "FRONTDESK_TWILIO_BASE_URL", default_value = "https://api.twilio.com")]
    pub twilio_base_url: String,

    /// Base URL of Meta's Graph API (WhatsApp Cloud, Messenger and Instagram sends).
    #[arg(long, env = "FRONTDESK_GRAPH_BASE_URL", default_value = "https://graph.facebook.com")]
    pub graph_base_url: String,

    /// The Graph API version every Meta call names (`{base}/{version}/...`).
    #[arg(long, env = "FRONTDESK_GRAPH_API_VERSION", default_value = "v21.0", value_parser = parse_graph_version)]
    pub graph_api_version: String,

    /// A conversation with no message for this many hours closes by itself; the next message opens a new one.
    #[arg(long, env = "FRONTDESK_CONVERSATION_IDLE_HOURS", default_value_t = 24, value_parser = clap::value_parser!(u32).range(1..=8760))]
    pub idle_hours: u32,

    /// Time limit of one call to a channel provider (a send); past it the send is retried.
    #[arg(long = "provider-timeout", env = "FRONTDESK_PROVIDER_TIMEOUT", default_value = "10s", value_parser = parse_positive_duration)]
    pub provider_timeout: Duration,

    /// Waits before each retry of a send the provider could not take (429, 5xx, timeout, no connection),
    /// each +-20%; after the last the message fails with `provider_unavailable`.
    #[arg(
        long = "send-retry-schedule",
        env = "FRONTDESK_SEND_RETRY_SCHEDULE",
        default_value = "1s,5s,30s,2m,10m",
        value_parser = parse_duration_list
    )]
    pub send_retry_schedule: DurationList,

    /// Writer tasks that store accepted sends, each writing one batch (one transaction) at a time.
    #[arg(long = "message-writers", env = "FRONTDESK_MESSAGE_WRITERS", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub message_writers: u32,

    /// The most sends one write transaction takes: those that arrived while the writers were busy share it
    /// (group commit); 1 writes each send alone.
    #[arg(long = "message-batch", env = "FRONTDESK_MESSAGE_BATCH", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub message_batch: u32,

    /// How long an AI reply waits for more messages from the contact: messages within this of each other
    /// share one reply.
    #[arg(long = "reply-debounce-ms", env = "FRONTDESK_REPLY_DEBOUNCE_MS", default_value_t = 1500, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub reply_debounce_ms: u64,
}

/// A Graph API version: `v` and a number (`v21.0`), so that it is a plain path segment.
fn parse_graph_version(raw: &str) -> Result<String, String> {
    let number = raw.strip_prefix('v').unwrap_or_default();
    let well_formed = !number.is_empty()
        && number
            .split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()));
    if well_formed {
        Ok(raw.to_owned())
    } else {
        Err(format!("`{raw}` is not a Graph API version such as v21.0"))
    }
}

impl ConversationConfig {
    pub fn graph_api(&self) -> crate::channels::meta::GraphApi {
        crate::channels::meta::GraphApi {
            base_url: self.graph_base_url.trim_end_matches('/').to_owned(),
            version: self.graph_api_version.clone(),
        }
    }

    pub fn reply_policy(&self) -> crate::conversations::replies::ReplyPolicy {
        crate::conversations::replies::ReplyPolicy {
            debounce: Duration::from_millis(self.reply_debounce_ms),
        }
    }

    /// The tries a delivery gets: the first, and one per wait of the retry schedule.
    pub fn send_attempts(&self) -> i32 {
        i32::try_from(self.send_retry_schedule.0.len()).map_or(i32::MAX, |waits| waits.saturating_add(1))
    }

    pub fn message_batching(&self) -> Batching {
        Batching {
            writers: self.message_writers as usize,
            max_batch: self.message_batch as usize,
        }
    }
}

/// Four connections per CPU, at least 8. On the two-core bench machine with PostgreSQL beside the service,
/// 16 connections let PostgreSQL's processes contend for the CPUs in no particular order and stretched
/// the deals list's p99 by half; 5 (the PostgreSQL wiki's twice the cores plus one) cut a quarter off
/// committing writes, which wait on the disk with their connection held. 8 kept the writes and most of the
/// tail (docs/benchmarks/api-and-keys.md, "Deals list, second pass"). On SQLite, where the engines share this pool,
/// at least 8 also leaves connections to requests while the webhook dispatcher's loops hold theirs.
fn default_db_connections() -> u32 {
    connections_per_cpu(4)
}

fn default_worker_connections() -> u32 {
    connections_per_cpu(2)
}

/// `per_cpu` connections for each CPU, at least 8.
fn connections_per_cpu(per_cpu: usize) -> u32 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    u32::try_from(per_cpu * cpus).unwrap_or(u32::MAX).max(8)
}

/// Which payment provider creates orders, and its credentials. Not `Debug`: it holds the key secret.
#[derive(Args, Clone)]
pub struct PaymentConfig {
    /// `local` (orders created here; the embedded default) or `razorpay` (Razorpay Orders API).
    #[arg(
        long = "payment-provider",
        env = "FRONTDESK_PAYMENT_PROVIDER",
        default_value = "local"
    )]
    pub provider: PaymentProviderKind,

    /// Checkout key id. Default for `local`: `rzp_test_local`; required for `razorpay`.
    #[arg(long = "razorpay-key-id", env = "RAZORPAY_KEY_ID")]
    pub key_id: Option<String>,

    /// Checkout key secret (HMAC key of payment signatures), from the environment only so it never shows in
    /// the process list. Default for `local`: generated once and kept in the database; required for `razorpay`.
    #[arg(skip = std::env::var("RAZORPAY_KEY_SECRET").ok())]
    pub key_secret: Option<String>,

    /// Base URL of the Razorpay Orders API.
    #[arg(
        long = "razorpay-base-url",
        env = "RAZORPAY_BASE_URL",
        default_value = "https://api.razorpay.com"
    )]
    pub razorpay_base_url: String,

    /// Time limit of one call to the payment provider, in milliseconds.
    #[arg(
        long = "payment-timeout-ms",
        env = "FRONTDESK_PAYMENT_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub timeout_ms: u64,

    /// Price overrides, `plan.CURRENCY=amount` pairs in the smallest currency unit, comma separated
    /// (e.g. `growth.INR=699900,launch.USD=2900`); unlisted prices keep their defaults.
    #[arg(long = "prices", env = "FRONTDESK_PRICES", default_value = "", value_parser = PriceTable::parse_overrides)]
    pub prices: PriceTable,
}

impl PaymentConfig {
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_defaults_to_four_connections_per_cpu_and_never_below_eight() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        assert_eq!(default_db_connections(), (4 * cpus).max(8));
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("3d"), Ok(Duration::from_secs(3 * 86_400)));
        assert!(parse_duration("5").is_err() && parse_duration("m5").is_err() && parse_duration("5y").is_err());
        assert_eq!(
            parse_duration_list("5s, 5m"),
            Ok(DurationList(vec![Duration::from_secs(5), Duration::from_secs(300)]))
        );
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaymentProviderKind {
    Local,
    Razorpay,
}

/// Settings of the REST edge.
#[derive(Args, Clone, Debug)]
pub struct EdgeListenConfig {
    /// REST edge listener.
    #[arg(long, env = "FRONTDESK_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    pub http_addr: SocketAddr,

    /// Time limit of one REST call to the core (its gRPC deadline); past it the answer is 504
    /// `deadline_exceeded`.
    #[arg(long, env = "FRONTDESK_REQUEST_TIMEOUT", default_value = "30s", value_parser = parse_positive_duration)]
    pub request_timeout: Duration,

    /// Time a client has to send a request's headers (and an idle keep-alive connection to start its next
    /// request); past it the connection is closed.
    #[arg(long, env = "FRONTDESK_HTTP_HEADER_TIMEOUT", default_value = "10s", value_parser = parse_positive_duration)]
    pub header_timeout: Duration,

    /// Reverse proxies of your own in front of the edge (a load balancer: 1). The client's address, which
    /// per-address limits count (new web chat sessions), is then the one the outermost proxy wrote into
    /// `X-Forwarded-For`; with 0 it is the connection's peer and the header is ignored.
    #[arg(long, env = "FRONTDESK_TRUSTED_PROXY_HOPS", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=8))]
    pub trusted_proxy_hops: u32,

    /// Time a client has to send a whole request body (an upload included) once its headers came; past
    /// it the answer is 408 `request_timeout`.
    #[arg(long, env = "FRONTDESK_BODY_READ_TIMEOUT", default_value = "60s", value_parser = parse_positive_duration)]
    pub body_read_timeout: Duration,

    /// Request bodies (uploads included) this edge process holds in memory at once, in MiB; a request whose
    /// body would pass it is answered 503 `unavailable` with `Retry-After`.
    #[arg(long, env = "FRONTDESK_BODY_MEMORY_MB", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub body_memory_mb: u32,

    /// Time the edge waits for a web chat visitor's connection to take one frame; past it the socket is
    /// dropped (the widget reconnects and replays).
    #[arg(long, env = "FRONTDESK_WEBCHAT_SEND_TIMEOUT", default_value = "10s", value_parser = parse_positive_duration)]
    pub webchat_send_timeout: Duration,
}
