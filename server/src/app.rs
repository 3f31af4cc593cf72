//! Assembles the core from its configuration: database (migrated), payment provider, rate limiter, guard,
//! services, gRPC routes.

use std::{sync::Arc, time::Duration};

use anyhow::Context;
use sea_orm::{DatabaseConnection, DbBackend};
use tokio::sync::Notify;
use tonic::service::Routes;

use crate::{
    access::{
        guard::Guard,
        rate_limit::{RateLimiter, RedisWindows},
        service::ApiKeysService,
        stamps::AccessStamps,
        verified_keys::{CacheBounds, VerifiedKeys},
    },
    accounts::{
        DEFAULT_RATE_LIMIT,
        store::{self as account_store, NewAccount},
    },
    agents::service::AgentsService,
    broadcasts::{self, BroadcastsService},
    campaigns::{CampaignsService, sunset::Sunset},
    channels::{live_feed::Feed, pacing::Pacer, registry::Adapters},
    clock::{Clock, SteerableClock, SystemClock},
    config::{CoreConfig, ImportConfig, PaymentConfig, PaymentProviderKind, RetrievalConfig},
    contacts::service::ContactsService,
    conversations::{
        inbound::Arrivals,
        receipts::{self, LateReceipts},
        service::ConversationsService,
    },
    credit_ledger::CreditsService,
    deals::{pipelines::PipelinesService, service::DealsService},
    events,
    grpc::{self, Services},
    ids,
    integrations::{
        http::{self, AddressRule},
        outbound::{self, OutboundPolicy},
        payments::{LocalProvider, PaymentProvider, RazorpayProvider},
    },
    jobs::{
        self, Handlers, JobEngine, Wake,
        recurring::{self, Turn},
    },
    kb_groups::KbGroupsService,
    knowledge::{
        self,
        embeddings::{self, Embedder},
        import::{
            Import, PageReader,
            fetch::{FetchLimits, Fetcher},
        },
        retrieval::{
            Retrieval,
            vectors::{self, EmbedJob},
        },
        service::KbSourcesService,
    },
    messaging::{
        accept::Sender,
        deliver::{self, Deliver},
        service::MessagesService,
    },
    operator_api::{AdminService, AdminToken},
    plan::Plan,
    provider_callbacks::ChannelHooksService,
    replies::{
        evaluations::{run::Evaluate, service::EvaluationsService},
        follow_up::FollowUp,
        gaps::service::KnowledgeGapsService,
        own_provider::ModelProvidersService,
        provider_choice::Providers,
        reply::AgentReply,
        tools::ToolKit,
    },
    retry::RetrySchedule,
    routing::{channels::ChannelsService, entry_points::EntryPointsService},
    secrets,
    site::{health::HealthService, payments::PaymentsService},
    store,
    store::{leader::Leader, wakeups::Wakeups},
    summaries::service::SummariesService,
    sweeps::Housekeeping,
    tasks::service::TasksService,
    webchat::{
        self, WebChat,
        empty_sessions::EmptySessions,
        live::Live,
        pushes::Pushes,
        service::{ChatSessionsService, WebChatService},
    },
    webhooks::{self, dispatch::Dispatcher, service::WebhooksService},
};

/// Key id the `local` provider hands to the checkout unless `RAZORPAY_KEY_ID` says otherwise.
const LOCAL_KEY_ID: &str = "rzp_test_local";
/// Settings key of the `local` provider's generated key secret.
const LOCAL_SECRET_SETTING: &str = "local_payment_key_secret";

/// The assembled core: its gRPC routes, its database, the webhook and job engines ready to start, and the
/// hub of its web chat sockets (closed when the process stops).
pub struct Core {
    pub routes: Routes,
    pub db: DatabaseConnection,
    pub dispatcher: Dispatcher,
    pub jobs: JobEngine,
    pub live: Live,
}

/// Connects and migrates the database, then builds every service into one set of gRPC routes.
pub async fn build_core(config: &CoreConfig) -> anyhow::Result<Core> {
    let limits = store::SessionLimits {
        lock_timeout: config.db_lock_timeout,
        statement_timeout: config.db_statement_timeout,
    };
    let db = store::connect(&config.database_url, config.db_max_connections, limits).await?;
    store::migrate_unbounded(&db, &config.database_url).await?;
    store::warn_without_autovacuum(&db).await?;
    let engines_db = engines_pool(config, &db, limits).await?;
    let provider = payment_provider(&config.payments, &db).await?;
    let steerable = Arc::new(SteerableClock::default());
    let test_clock = config.test_clock.then(|| steerable.clone());
    let clock: Arc<dyn Clock> = steerable;
    let redis = config
        .redis_url
        .as_deref()
        .map(RedisWindows::new)
        .transpose()
        .context("REDIS_URL")?;
    let window = Duration::from_secs(config.rate_window_secs);
    let limiter = RateLimiter::new(redis, window);
    let stamps = config
        .redis_url
        .as_deref()
        .map(AccessStamps::new)
        .transpose()
        .context("REDIS_URL")?;
    let verified_keys = Arc::new(VerifiedKeys::new(
        stamps.map(Arc::new),
        CacheBounds {
            entries: usize::try_from(config.key_cache_entries).unwrap_or(usize::MAX),
            ttl: Duration::from_secs(config.key_cache_ttl_secs),
        },
    ));
    let policy = OutboundPolicy {
        allow_private: config.allow_private_urls,
    };
    let wake = Arc::new(Notify::new());
    let sealer = secrets::sealer(config.secret_key.as_deref(), &config.database_url)?;
    let sealed = webhooks::secret::seal_plaintext(&db, &sealer)
        .await
        .context("sealing webhook signing secrets")?;
    if sealed > 0 {
        tracing::info!(sealed, "webhook signing secrets stored in plaintext are now sealed");
    }
    let wakeups = Wakeups::start(&db, &config.database_url, config.jobs.idle_poll);
    let leader = Leader::start(&db, &config.database_url);
    let wake_jobs = Wake::across(wakeups.clone());
    let conversations = &config.conversations;
    let live = match config.redis_url.as_deref() {
        Some(url) => Live::with_redis(url).context("REDIS_URL")?,
        None => Live::in_process(),
    };
    let feed: Feed = Arc::new(Pushes::new(db.clone(), live.clone()));
    let adapters = Arc::new(Adapters::new(
        sealer.clone(),
        &conversations.twilio_base_url,
        conversations.graph_api(),
        http::client(conversations.provider_timeout)?,
        Arc::new(webchat::adapter::WebChatAdapter::new(live.clone())),
    ));
    let committed = events::Committed::across(wakeups);
    let arrivals = Arrivals::start(
        db.clone(),
        clock.clone(),
        conversations.message_batching(),
        committed.clone(),
        conversations.reply_policy(),
        wake_jobs.clone(),
    );
    let webchat = Arc::new(WebChat::new(
        db.clone(),
        clock.clone(),
        live.clone(),
        arrivals.clone(),
        sealer.clone(),
        webchat::Setup {
            webchat: &config.webchat,
            public_url: &config.conversations.public_url,
            redis_url: config.redis_url.as_deref(),
        },
    )?);
    let send_schedule = conversations.send_retry_schedule.0.clone();
    let pacer = match config.redis_url.as_deref() {
        Some(url) => Pacer::shared(url).context("REDIS_URL")?,
        None => Pacer::local(),
    };
    let sender = Sender::start(
        db.clone(),
        clock.clone(),
        wake_jobs.clone(),
        conversations.send_attempts(),
        conversations.message_batching(),
    );
    let deliver = Arc::new(Deliver::new(
        db.clone(),
        clock.clone(),
        adapters.clone(),
        pacer,
        RetrySchedule::new(send_schedule.clone()),
        &conversations.public_url,
        conversations.provider_timeout,
    ));
    let handlers = Handlers::default()
        .with::<deliver::DeliverArgs>(deliver)
        .with::<broadcasts::sending::StartArgs>(Arc::new(broadcasts::sending::Start {
            db: db.clone(),
            clock: clock.clone(),
            wake: wake_jobs.clone(),
            send_attempts: conversations.send_attempts(),
        }))
        .with::<Turn<broadcasts::stats::Progress>>(Arc::new(broadcasts::stats::Progress {
            db: db.clone(),
            clock: clock.clone(),
        }))
        .with::<crate::channels::signals::SignalJob>(Arc::new(crate::messaging::signals::Signals {
            db: db.clone(),
            adapters: adapters.clone(),
            schedule: RetrySchedule::new(send_schedule),
        }))
        .with::<Turn<Housekeeping>>(Arc::new(Housekeeping::new(
            db.clone(),
            clock.clone(),
            conversations.idle_hours,
        )))
        .with::<Turn<EmptySessions>>(Arc::new(EmptySessions::new(
            db.clone(),
            clock.clone(),
            config.webchat.empty_session_ttl,
        )?))
        .with::<receipts::LateReport>(Arc::new(LateReceipts {
            db: db.clone(),
            clock: clock.clone(),
        }));
    let fetcher = Arc::new(knowledge_fetcher(policy, &config.imports)?);
    let retrieval = Arc::new(Retrieval::new(
        embedder(&config.retrieval, &config.database_url)?,
        config.retrieval.dense_weight,
        clock.clone(),
        wake_jobs.clone(),
    ));
    let embedder = retrieval.embedder().cloned();
    let providers = Arc::new(Providers::new(
        db.clone(),
        sealer.clone(),
        config.models.clone(),
        &policy,
    )?);
    let handlers = handlers
        .with::<knowledge::import::ImportArgs>(Arc::new(Import::new(
            db.clone(),
            clock.clone(),
            fetcher.clone(),
            embedder.clone(),
            providers.clone(),
        )))
        .with::<vectors::EmbedArgs>(Arc::new(EmbedJob {
            db: db.clone(),
            embedder,
        }))
        .with::<crate::conversations::replies::ReplyArgs>(Arc::new(AgentReply {
            db: db.clone(),
            clock: clock.clone(),
            retrieval: retrieval.clone(),
            providers: providers.clone(),
            tools: Arc::new(ToolKit::new(db.clone(), clock.clone(), sealer.clone(), policy)?),
            wake: wake_jobs.clone(),
            send_attempts: conversations.send_attempts(),
        }))
        .with::<crate::replies::evaluations::run::EvaluationArgs>(Arc::new(Evaluate {
            db: db.clone(),
            clock: clock.clone(),
            retrieval: retrieval.clone(),
            providers: providers.clone(),
        }))
        .with::<crate::replies::follow_up::FollowUpArgs>(Arc::new(FollowUp {
            db: db.clone(),
            clock: clock.clone(),
            providers: providers.clone(),
            wake: wake_jobs.clone(),
            send_attempts: conversations.send_attempts(),
        }))
        .with::<Turn<webhooks::dispatch::prune::Retention>>(Arc::new(webhooks::dispatch::prune::Retention::new(
            db.clone(),
            clock.clone(),
            config.webhooks.retention,
        )));
    tokio::spawn(ensure_recurring(db.clone(), clock.clone()));
    let services = Services {
        health: HealthService::new(db.clone()),
        payments: PaymentsService::new(
            db.clone(),
            provider,
            config.payments.prices.clone(),
            clock.clone(),
            config.payments.timeout(),
        ),
        api_keys: ApiKeysService::new(
            db.clone(),
            clock.clone(),
            verified_keys.clone(),
            limiter.window_seconds(),
        ),
        credits: CreditsService::new(db.clone()),
        model_providers: ModelProvidersService::new(db.clone(), clock.clone(), sealer.clone(), policy),
        deals: DealsService::new(db.clone(), clock.clone()),
        summaries: SummariesService::new(db.clone(), clock.clone(), providers),
        evaluations: EvaluationsService::new(db.clone(), clock.clone(), wake_jobs.clone()),
        knowledge_gaps: KnowledgeGapsService::new(db.clone(), clock.clone()),
        tasks: TasksService::new(db.clone(), clock.clone()),
        pipelines: PipelinesService::new(db.clone(), clock.clone()),
        webhooks: WebhooksService::new(db.clone(), clock.clone(), policy, sealer.clone(), wake.clone()),
        agents: AgentsService::new(
            db.clone(),
            clock.clone(),
            sealer.clone(),
            policy,
            retrieval,
            config.models.tiers(),
        ),
        channels: ChannelsService::new(
            db.clone(),
            clock.clone(),
            sealer.clone(),
            &config.conversations.public_url,
            feed.clone(),
        ),
        entry_points: EntryPointsService::new(db.clone(), clock.clone()),
        kb_groups: KbGroupsService::new(db.clone(), clock.clone()),
        kb_sources: KbSourcesService::new(
            db.clone(),
            clock.clone(),
            policy,
            wake_jobs.clone(),
            PageReader { fetcher },
            config.uploads.max_bytes(),
        ),
        broadcasts: BroadcastsService::new(db.clone(), clock.clone(), handlers.clone(), wake_jobs.clone()),
        campaigns: CampaignsService::new(db.clone(), clock.clone()),
        contacts: ContactsService::new(db.clone(), clock.clone(), feed.clone()),
        messages: MessagesService::new(db.clone(), clock.clone(), sender, feed.clone()),
        conversations: ConversationsService::new(db.clone(), clock.clone(), feed),
        hooks: ChannelHooksService::new(
            db.clone(),
            clock.clone(),
            adapters,
            &conversations.public_url,
            wake_jobs.clone(),
            arrivals,
        ),
        webchat: WebChatService::new(webchat.clone()),
        chat_sessions: ChatSessionsService::new(webchat),
        admin: AdminService::new(
            db.clone(),
            clock.clone(),
            test_clock,
            handlers.clone(),
            verified_keys.clone(),
        ),
        admin_token: AdminToken::new(config.admin_token.clone()),
        guard: Arc::new(Guard::new(db.clone(), limiter, verified_keys)?),
        sunset: Arc::new(Sunset::new(config.campaigns_sunset, clock.clone())),
    };
    Ok(Core {
        routes: grpc::routes(services).await?,
        dispatcher: Dispatcher::new(
            engines_db.clone(),
            clock.clone(),
            config.webhooks.clone(),
            policy,
            sealer,
            webhooks::dispatch::Signals {
                wake,
                committed,
                leader: leader.clone(),
            },
        ),
        jobs: JobEngine::new(engines_db, clock, config.jobs.clone(), handlers, wake_jobs, leader),
        db,
        live,
    })
}

/// The job and webhook engines' pool. On PostgreSQL a pool of its own: requests waiting on a row lock (a
/// busy account's writes queue on its row) can hold every connection of theirs, and the engines' claims
/// and records would wait behind them. SQLite has one writer whatever the pool, so it keeps one pool.
async fn engines_pool(
    config: &CoreConfig,
    db: &DatabaseConnection,
    limits: store::SessionLimits,
) -> anyhow::Result<DatabaseConnection> {
    match db.get_database_backend() {
        DbBackend::Sqlite => Ok(db.clone()),
        _ => store::connect(&config.database_url, config.db_worker_connections, limits).await,
    }
}

/// The sentence-embedding model of semantic retrieval, its folder checked at start-up and its weights read
/// on first use; `None` (lexical retrieval only, and the log says so) without a model folder. A folder named
/// but unreadable stops the start.
/// Makes sure the recurring jobs exist, once each whichever replica starts first. In the background: the
/// enqueue of a job whose row another replica holds locked (one paused in the middle of a claim) waits for
/// that lock, which must never keep this replica from starting; a failed enqueue is tried again.
async fn ensure_recurring(db: DatabaseConnection, clock: Arc<dyn Clock>) {
    let now = clock.now();
    for job in [
        recurring::job::<jobs::retention::Retention>(now),
        recurring::job::<webhooks::dispatch::prune::Retention>(now),
        recurring::job::<Housekeeping>(now),
        recurring::job::<EmptySessions>(now),
        recurring::job::<broadcasts::stats::Progress>(now),
    ] {
        // The project's retry rule, its last wait repeated once the schedule is used up: never given up.
        let schedule = RetrySchedule::new([1, 2, 4, 8, 16, 32, 60].map(Duration::from_secs).to_vec());
        let mut attempt = 0;
        while let Err(err) = jobs::enqueue(&db, job.clone(), clock.now()).await {
            tracing::warn!(kind = %job.kind, error = %err, "a recurring job could not be put in place; trying again");
            attempt += 1;
            let wait = schedule.wait_after(attempt, None).unwrap_or(Duration::from_secs(60));
            tokio::time::sleep(wait).await;
        }
    }
}

fn embedder(config: &RetrievalConfig, database_url: &str) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    let Some(folder) = embeddings::model_folder(config.embedding_model.as_deref(), database_url) else {
        tracing::info!(
            "no embedding model (FRONTDESK_EMBEDDING_MODEL, or models/all-MiniLM-L6-v2 from scripts/fetch-model): retrieval is lexical only"
        );
        return Ok(None);
    };
    let folder = embeddings::ModelFolder::read(&folder)
        .with_context(|| format!("checking the embedding model {}", folder.display()))?;
    tracing::info!(
        model = %folder.path().display(),
        dimension = folder.dimension(),
        "semantic retrieval: embedding model found; its weights are read on first use"
    );
    Ok(Some(Arc::new(embeddings::LazyModel::new(folder))))
}

/// The guarded fetcher of knowledge imports: the outbound policy's address rule, and the page limits of
/// docs/knowledge.md (5 MiB, 5 redirects).
fn knowledge_fetcher(policy: OutboundPolicy, config: &ImportConfig) -> anyhow::Result<Fetcher> {
    let rule: AddressRule = Arc::new(move |ip| policy.allow_private || outbound::is_public(ip));
    let limits = FetchLimits {
        timeout: config.import_timeout,
        max_bytes: 5 * 1024 * 1024,
        max_redirects: 5,
        per_host: config.import_host_concurrency as usize,
    };
    Fetcher::new(rule, limits)
}

/// On a brand-new embedded database, creates a first account so a new user can call the API at once, and
/// prints its key on standard output (never to the logs). Returns whether it did.
pub async fn bootstrap_first_account(db: &DatabaseConnection, database_url: &str) -> anyhow::Result<bool> {
    if !database_url.starts_with("sqlite:") || account_store::count(db).await? > 0 {
        return Ok(false);
    }
    let new = NewAccount {
        name: "Default account".to_owned(),
        plan: Plan::Growth,
        credit_milli: 0,
        rate_limit: DEFAULT_RATE_LIMIT,
        parent_account_id: None,
    };
    let (account, key) = crate::onboarding::create(db, new, SystemClock.now()).await?;
    tracing::info!(
        account_id = account.id,
        "first account created; its API key is printed on standard output"
    );
    println!(
        "\nFront Desk: created the first account {} (plan growth).\nIts API key, shown only this once:\n\n    {}\n\n\
         Try: curl -H 'X-API-Key: {}' http://localhost:8080/v1/api-keys/current\n",
        account.id,
        key.reveal(),
        key.reveal()
    );
    Ok(true)
}

async fn payment_provider(config: &PaymentConfig, db: &DatabaseConnection) -> anyhow::Result<Arc<dyn PaymentProvider>> {
    let key_id = config.key_id.clone().filter(|k| !k.is_empty());
    let key_secret = config.key_secret.clone().filter(|k| !k.is_empty());
    Ok(match config.provider {
        PaymentProviderKind::Local => {
            let key_secret = match key_secret {
                Some(secret) => secret,
                None => store::settings::get_or_create(db, LOCAL_SECRET_SETTING, || ids::base62(24)).await?,
            };
            Arc::new(LocalProvider::new(
                key_id.unwrap_or_else(|| LOCAL_KEY_ID.to_owned()),
                key_secret,
            ))
        }
        PaymentProviderKind::Razorpay => Arc::new(RazorpayProvider::new(
            http::client(config.timeout())?,
            &config.razorpay_base_url,
            key_id.context("FRONTDESK_PAYMENT_PROVIDER=razorpay needs RAZORPAY_KEY_ID")?,
            key_secret.context("FRONTDESK_PAYMENT_PROVIDER=razorpay needs RAZORPAY_KEY_SECRET")?,
        )),
    })
}
