//! The durable job engine: every piece of work that outlives a request (a send to a provider, and later an AI
//! reply, a knowledge import, a broadcast) is a row in `jobs`, written in the same transaction as the change
//! that caused it, so the work exists exactly when the change committed. Workers in every core process claim
//! due jobs without a coordinator (`FOR UPDATE SKIP LOCKED` on PostgreSQL; SQLite's single writer in
//! process), hold them under a renewed lease, and record each outcome together with the job's own effects in
//! one transaction, fenced by the claim's token: a job whose worker died is taken over when its lease ends,
//! and an outcome from a worker that lost its claim is dropped. Failed runs retry with back-off and jitter;
//! a job that used up its tries is kept, with its last error, for operators (`frontdesk admin jobs`).

pub mod admin;
mod claim;
mod complete;
mod engine;
mod in_flight;

use std::{any::Any, collections::HashMap, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, Statement, Value};
use tokio::sync::Notify;

pub use engine::JobEngine;

/// A job to write, in the caller's transaction.
#[derive(Clone, Debug)]
pub struct NewJob {
    /// The account the work belongs to; "" for housekeeping.
    pub account_id: String,
    pub kind: &'static str,
    /// Jobs of one lane share a concurrency cap (a channel's sends); "" for none.
    pub lane: String,
    pub payload: serde_json::Value,
    /// When it may run first, Unix milliseconds.
    pub run_at_ms: i64,
    /// Runs before it fails for good.
    pub max_attempts: i32,
    /// At most one job holds a key; a second enqueue with it writes nothing.
    pub unique_key: Option<String>,
}

/// Writes `job` on `db` (a transaction, so it commits with the change that caused it). Returns its id, or
/// `None` when its `unique_key` is taken.
pub async fn enqueue(db: &impl ConnectionTrait, job: NewJob, now: DateTime<Utc>) -> Result<Option<String>, DbErr> {
    let id = new_id();
    let written = insert(db, vec![(id.clone(), job)], now).await?;
    Ok((written > 0).then_some(id))
}

/// PostgreSQL: the statement `enqueue_all` runs, for a caller that runs it with other writes
/// (`store::sql::together`).
pub fn insert_statement(jobs: Vec<NewJob>, now: DateTime<Utc>) -> Statement {
    insert_arrays(jobs.into_iter().map(|job| (new_id(), job)).collect(), now)
}

/// Writes several jobs with one statement, as `enqueue` does one (a batch of sends' deliveries).
pub async fn enqueue_all(db: &impl ConnectionTrait, jobs: Vec<NewJob>, now: DateTime<Utc>) -> Result<(), DbErr> {
    if !jobs.is_empty() {
        insert(db, jobs.into_iter().map(|job| (new_id(), job)).collect(), now).await?;
    }
    Ok(())
}

fn new_id() -> String {
    format!("job_{}", crate::ids::base62(16))
}

/// Inserts the jobs, skipping those whose `unique_key` is taken; how many were written.
async fn insert(db: &impl ConnectionTrait, jobs: Vec<(String, NewJob)>, now: DateTime<Utc>) -> Result<u64, DbErr> {
    let backend = db.get_database_backend();
    let statement = match backend {
        DbBackend::Postgres => insert_arrays(jobs, now),
        _ => insert_values(backend, jobs, now),
    };
    Ok(db.execute_raw(statement).await?.rows_affected())
}

/// PostgreSQL: one array per column, so the statement reads the same for any number of jobs and its plan is
/// reused. An absent `unique_key` is sent as `''` and stored as NULL.
fn insert_arrays(jobs: Vec<(String, NewJob)>, now: DateTime<Utc>) -> Statement {
    const SQL: &str = "INSERT INTO jobs (id, account_id, kind, lane, payload, status, attempts, max_attempts, \
        run_at_ms, claim_token, last_error, unique_key, created_at, updated_at) \
        SELECT id, account_id, kind, lane, payload, 'pending', 0, max_attempts, run_at_ms, NULL, NULL, \
        NULLIF(unique_key, ''), $9, $9 \
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int4[], $7::int8[], \
        $8::text[]) AS new(id, account_id, kind, lane, payload, max_attempts, run_at_ms, unique_key) \
        ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING";
    let n = jobs.len();
    let (mut ids, mut accounts, mut kinds, mut lanes, mut payloads, mut unique_keys) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut max_attempts, mut run_at_ms) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for (id, job) in jobs {
        ids.push(id);
        accounts.push(job.account_id);
        kinds.push(job.kind.to_owned());
        lanes.push(job.lane);
        payloads.push(job.payload.to_string());
        max_attempts.push(job.max_attempts.max(1));
        run_at_ms.push(job.run_at_ms);
        unique_keys.push(job.unique_key.unwrap_or_default());
    }
    let values: Vec<Value> = vec![
        ids.into(),
        accounts.into(),
        kinds.into(),
        lanes.into(),
        payloads.into(),
        max_attempts.into(),
        run_at_ms.into(),
        unique_keys.into(),
        now.into(),
    ];
    Statement::from_sql_and_values(DbBackend::Postgres, SQL, values)
}

/// SQLite: a multi-row `VALUES`.
fn insert_values(backend: DbBackend, jobs: Vec<(String, NewJob)>, now: DateTime<Utc>) -> Statement {
    const VALUES_PER_JOB: usize = 8;
    let mut rows = Vec::with_capacity(jobs.len());
    let mut values: Vec<Value> = Vec::with_capacity(jobs.len() * VALUES_PER_JOB + 1);
    // `now` is the last placeholder, shared by every row.
    let now_placeholder = jobs.len() * VALUES_PER_JOB + 1;
    for (n, (id, job)) in jobs.into_iter().enumerate() {
        let p = |k: usize| n * VALUES_PER_JOB + k;
        rows.push(format!(
            "(${}, ${}, ${}, ${}, ${}, 'pending', 0, ${}, ${}, NULL, NULL, ${}, ${now_placeholder}, ${now_placeholder})",
            p(1),
            p(2),
            p(3),
            p(4),
            p(5),
            p(6),
            p(7),
            p(8)
        ));
        values.extend([
            id.into(),
            job.account_id.into(),
            job.kind.into(),
            job.lane.into(),
            job.payload.to_string().into(),
            job.max_attempts.max(1).into(),
            job.run_at_ms.into(),
            job.unique_key.into(),
        ]);
    }
    values.push(now.into());
    let sql = format!(
        "INSERT INTO jobs (id, account_id, kind, lane, payload, status, attempts, max_attempts, run_at_ms, \
         claim_token, last_error, unique_key, created_at, updated_at) VALUES {} ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING",
        rows.join(", ")
    );
    Statement::from_sql_and_values(backend, sql, values)
}

/// A claimed job, as its handler sees it.
#[derive(Clone, Debug)]
pub struct Job {
    pub id: String,
    pub account_id: String,
    pub kind: String,
    pub lane: String,
    /// The arguments, JSON.
    pub payload: String,
    /// This run's number: runs recorded so far, plus one.
    pub attempt: i32,
    pub max_attempts: i32,
    /// The claim's token: the outcome is written only while the job still carries it.
    pub token: i64,
}

impl Job {
    /// No try is left after this one.
    pub fn is_last_attempt(&self) -> bool {
        self.attempt >= self.max_attempts
    }
}

/// What a run wants written, in the transaction that records its outcome: the job's effect and its
/// completion commit together, so a crash in between neither loses the effect nor repeats it.
#[async_trait::async_trait]
pub trait Effect: Send + Sync + Any {
    /// Writes `alike`: the effects of this type among the outcomes recorded together (`self` is the first of
    /// them), so a type can write many with one statement. By default each is written alone.
    async fn write_all(
        &self,
        alike: &[&dyn Effect],
        txn: &DatabaseTransaction,
        now: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        for effect in alike {
            effect.write(txn, now).await?;
        }
        Ok(())
    }

    async fn write(&self, txn: &DatabaseTransaction, now: DateTime<Utc>) -> Result<(), DbErr>;

    /// For `write_all`, to see the others as its own type.
    fn as_any(&self) -> &dyn Any;
}

/// How a run ended.
pub enum Outcome {
    /// Finished: the job is deleted and the effect written.
    Done(Option<Box<dyn Effect>>),
    /// Try again after `after`, spending a try; when none is left the job fails with `error` instead.
    Retry { error: String, after: Duration },
    /// Failed for good: the job is kept as `failed` with `error`, and the effect written.
    Fail {
        error: String,
        effect: Option<Box<dyn Effect>>,
    },
    /// Not run now (pacing, a recurring job's next turn): due again at `until_ms`, no try spent.
    Defer { until_ms: i64 },
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Self::Done(_) => "done",
            Self::Retry { .. } => "retry",
            Self::Fail { .. } => "failed",
            Self::Defer { .. } => "deferred",
        }
    }
}

/// The code that runs one kind of job.
#[async_trait::async_trait]
pub trait Handler: Send + Sync {
    async fn run(&self, job: &Job) -> Outcome;
}

/// Handlers by job kind; a process claims only the kinds it has a handler for.
#[derive(Clone, Default)]
pub struct Handlers(HashMap<&'static str, Arc<dyn Handler>>);

impl Handlers {
    pub fn with(mut self, kind: &'static str, handler: Arc<dyn Handler>) -> Self {
        self.0.insert(kind, handler);
        self
    }

    fn get(&self, kind: &str) -> Option<Arc<dyn Handler>> {
        self.0.get(kind).cloned()
    }

    fn kinds(&self) -> Vec<&'static str> {
        let mut kinds: Vec<&'static str> = self.0.keys().copied().collect();
        kinds.sort_unstable();
        kinds
    }
}

/// Wakes this process's workers after a commit that enqueued jobs due now (others find them by polling).
#[derive(Clone, Default)]
pub struct Wake(Arc<Notify>);

impl Wake {
    pub fn notify(&self) {
        self.0.notify_one();
    }

    async fn notified(&self) {
        self.0.notified().await;
    }
}
