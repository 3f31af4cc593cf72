//! The durable job engine: every piece of work that outlives a request (a send to a provider, an AI reply,
//! a knowledge import, a broadcast send, a webhook delivery) is a row, written in the same transaction as the
//! change that caused it, so the work exists exactly when the change committed. Workers in every core
//! process claim due rows without a coordinator, fairly across accounts and their lanes and interactive work
//! before bulk work (`fair`, `claim`), hold them under a renewed lease, stop a run whose claim was lost, and
//! record each outcome together with the job's own effects in one transaction, fenced by the claim's token.
//! Failed runs retry with back-off and jitter; a job that used up its tries is kept, with its last error, for
//! operators (`frontdesk admin jobs`) until the retention deletes it. Jobs can be keyed (one pending job per
//! key: kept, or rescheduled and run again), grouped and cancelled by key or group, and deduplicated for a
//! window that outlives them. `docs/jobs.md` describes the design.

pub mod cancel;
mod claim;
mod complete;
mod config;
pub mod engine;
mod enqueue;
mod fair;
pub mod guard;
pub mod inspection;
pub mod lease;
pub mod queue;
mod ready;
pub mod recurring;
pub mod retention;
mod runner;
mod running;
#[cfg(test)]
mod tests;

use std::{any::Any, collections::HashMap, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{DatabaseTransaction, DbErr};
use tokio::sync::Notify;

use crate::{
    store::wakeups::{Topic, Wakeups},
    tenant::AccountId,
};

pub use config::JobConfig;
pub use enqueue::{Enqueued, enqueue, enqueue_all, insert_statement};
pub use fair::Caps;
pub use runner::JobEngine;
pub use running::Lease;

/// Which pool a job runs in: interactive work is claimed before bulk work, and bulk work holds at most its
/// share of a process's slots, so a broadcast or an import never queues a reply or a single send.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Class {
    /// AI replies, single sends, receipts, webhook deliveries.
    #[default]
    Interactive,
    /// Broadcast sends, imports, embeddings, housekeeping.
    Bulk,
}

impl Class {
    pub fn code(self) -> i32 {
        match self {
            Self::Interactive => fair::INTERACTIVE,
            Self::Bulk => fair::BULK,
        }
    }

    pub fn from_code(code: i32) -> Self {
        if code == fair::BULK {
            Self::Bulk
        } else {
            Self::Interactive
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Interactive => "interactive",
            Self::Bulk => "bulk",
        }
    }
}

/// What an enqueue does when a pending job already holds its `unique_key`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnConflict {
    /// Nothing: the job already there stays as it is.
    #[default]
    Keep,
    /// Enqueue-or-reschedule: a job not yet claimed gets the new `run_at_ms` and payload (a debounce pushes
    /// it back); a running one is marked to run once more after this run, at the new `run_at_ms`, so work
    /// that arrived while it ran is never left undone. The run again keeps the job's payload: handlers of
    /// keyed jobs read the state they act on from the database.
    Reschedule,
}

/// A key that stays taken until a time, after its job is gone: a second enqueue with it before then writes
/// nothing ("once per account per day").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dedup {
    pub key: String,
    /// Unix milliseconds.
    pub until_ms: i64,
}

/// A job to write, in the caller's transaction.
#[derive(Clone, Debug, Default)]
pub struct NewJob {
    /// The account the work belongs to; "" for housekeeping.
    pub account_id: String,
    pub kind: &'static str,
    pub class: Class,
    /// Jobs of one lane share a concurrency cap (a channel's sends); "" for the account's jobs without one.
    pub lane: String,
    pub payload: serde_json::Value,
    /// When it may run first, Unix milliseconds (any future time).
    pub run_at_ms: i64,
    /// Runs before it fails for good.
    pub max_attempts: i32,
    /// At most one pending job holds a key; `on_conflict` says what a second enqueue does.
    pub unique_key: Option<String>,
    pub on_conflict: OnConflict,
    /// Cancelled together (a broadcast's id).
    pub group: Option<String>,
    pub dedup: Option<Dedup>,
    /// The trace its run continues (`telemetry::traceparent`): by default the enqueuer's current one.
    pub trace_parent: Option<String>,
}

/// A job's arguments, typed: the kind they belong to and the options every job of the kind is written
/// with. `NewJob::new` writes them as the job's JSON payload, `Handlers::with` registers the kind's handler
/// by this type, and the handler reads them back with `Job::args`.
pub trait JobArgs: serde::Serialize + serde::de::DeserializeOwned {
    const KIND: &'static str;
    /// The pool its jobs run in.
    const CLASS: Class = Class::Interactive;
    /// Runs before a job fails for good.
    const MAX_ATTEMPTS: i32 = 5;
}

impl NewJob {
    /// A job of `A::KIND` for `account_id` carrying `args`, with the kind's class and tries, due now
    /// (`run_at_ms` 0: the past); the other fields at their defaults.
    pub fn new<A: JobArgs>(account_id: &AccountId, args: &A) -> Self {
        Self::of_account(account_id.as_str().to_owned(), args)
    }

    /// `new` for any account column: "" for the service's own jobs (`recurring`).
    fn of_account<A: JobArgs>(account_id: String, args: &A) -> Self {
        Self {
            account_id,
            kind: A::KIND,
            class: A::CLASS,
            max_attempts: A::MAX_ATTEMPTS,
            payload: serde_json::to_value(args).unwrap_or_default(),
            trace_parent: crate::telemetry::traceparent(),
            ..Self::default()
        }
    }
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
    /// The trace the run continues, the enqueuer's.
    pub trace_parent: Option<String>,
    pub class: Class,
    /// Whether this worker still holds the job, and the signal to wind down. A run about to make a side
    /// effect outside the database (a provider call) goes through `guard::before_effect` first.
    pub lease: Lease,
}

impl Job {
    /// The job's arguments. A payload of another shape fails the job for good: no run could read it.
    pub fn args<A: JobArgs>(&self) -> Result<A, Outcome> {
        serde_json::from_str(&self.payload).map_err(|err| Outcome::Fail {
            error: format!("unreadable payload: {err}"),
            effect: None,
        })
    }

    /// The account the job was enqueued for (`NewJob::new` took it as a tenant).
    pub fn account(&self) -> AccountId {
        AccountId::of_row(&self.account_id)
    }

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
    /// Not run now (a recurring job's next turn, a time it waits for): due again at `until_ms`, no try
    /// spent. The job alone is rescheduled.
    Defer { until_ms: i64 },
    /// Deferred like `Defer`, and the job's queue (its kind on its lane) rests in this process until then:
    /// a paced channel whose next slot is far, whose other sends would only be deferred as well.
    Paced { until_ms: i64 },
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Self::Done(_) => "done",
            Self::Retry { .. } => "retry",
            Self::Fail { .. } => "failed",
            Self::Defer { .. } | Self::Paced { .. } => "deferred",
        }
    }
}

/// How long a run may take unless its handler says otherwise.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);

/// The code that runs one kind of job.
#[async_trait::async_trait]
pub trait Handler: Send + Sync {
    async fn run(&self, job: &Job) -> Outcome;

    /// How long a run may take: past it the run is stopped and retried (a try spent).
    fn deadline(&self) -> Duration {
        DEFAULT_DEADLINE
    }

    /// Jobs of this kind ended without running to an outcome (`payloads`, in the transaction that ended
    /// them): cancelled, or failed because their runs kept dying with their worker. Settles what they stood
    /// for, such as a queued message.
    async fn abandoned(
        &self,
        _txn: &DatabaseTransaction,
        _payloads: &[String],
        _why: Abandoned,
        _now: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        Ok(())
    }
}

/// Why jobs ended without an outcome of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abandoned {
    /// By id, key or group (`cancel`).
    Cancelled,
    /// Their runs were cut short by a dead worker more times than allowed (`FRONTDESK_JOB_MAX_CRASHES`).
    Crashed,
}

impl Abandoned {
    /// The job's `last_error`, and the error code of what it stood for.
    pub fn code(self) -> &'static str {
        match self {
            Self::Cancelled => "cancelled",
            Self::Crashed => "crashed",
        }
    }
}

/// Handlers by job kind; a process claims only the kinds it has a handler for.
#[derive(Clone, Default)]
pub struct Handlers(HashMap<&'static str, Arc<dyn Handler>>);

impl Handlers {
    /// Registers the handler of the jobs whose arguments are `A`.
    pub fn with<A: JobArgs>(mut self, handler: Arc<dyn Handler>) -> Self {
        self.0.insert(A::KIND, handler);
        self
    }

    fn get(&self, kind: &str) -> Option<Arc<dyn Handler>> {
        self.0.get(kind).cloned()
    }

    fn kinds(&self) -> Vec<String> {
        self.0.keys().map(|kind| (*kind).to_owned()).collect()
    }
}

/// Wakes the workers after a commit that enqueued jobs due now: this process's at once, and on PostgreSQL
/// every replica's (`Wakeups`); without wake-ups the others find the jobs by polling.
#[derive(Clone, Default)]
pub struct Wake {
    local: Arc<Notify>,
    across: Wakeups,
}

impl Wake {
    /// A wake that also reaches, and is reached by, the other replicas.
    pub fn across(wakeups: Wakeups) -> Self {
        let local = Arc::new(Notify::new());
        wakeups.forward(Topic::Jobs, local.clone());
        Self { local, across: wakeups }
    }

    pub fn notify(&self) {
        self.local.notify_one();
        self.across.publish(Topic::Jobs);
    }

    fn notifier(&self) -> Arc<Notify> {
        self.local.clone()
    }

    fn wakeups(&self) -> Wakeups {
        self.across.clone()
    }
}
