//! The jobs table on the engine: claimed rows become `Job`s for their kind's handler, whose outcome is
//! recorded with its effect (`complete`); beside the engine, the queue's gauges and the retention of
//! failed and cancelled jobs.

use std::{collections::HashSet, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{DatabaseConnection, DbErr, QueryResult};
use tokio::task::JoinHandle;

use super::{
    Abandoned, Class, Handler, Handlers, Job, Outcome, Wake, cancel,
    complete::{Finished, record},
    engine::{Engine, EngineConfig, RunFailure, Work, sleep_or_stop},
    fair::Caps,
    inspection,
    queue::{QueueKey, Table},
    recurring::Turn,
    retention::Retention,
    running::Lease,
};
use crate::{clock::Clock, jobs::JobConfig, shutdown::Shutdown, store::leader::Leader};

/// The jobs table as the engine sees it.
pub static JOBS: Table = Table {
    name: "jobs",
    due: "run_at_ms",
    class: Some("class"),
    lane: "lane",
    kind: Some("kind"),
    returning: "payload, attempts, max_attempts, unfinished_runs, group_key, trace_parent",
    unfinished_runs: Some("unfinished_runs"),
};

/// How long running jobs may take to finish once shutdown began.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How often the queue gauges are refreshed.
const GAUGE_INTERVAL: Duration = Duration::from_secs(5);
/// Wait before running again a job whose handler panicked or overran its deadline (a try spent).
const FAILURE_BACKOFF: Duration = Duration::from_secs(30);

pub struct JobEngine {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    config: JobConfig,
    handlers: Handlers,
    wake: Wake,
    /// Whether this replica does the queue's housekeeping (gauges, retention).
    leader: Leader,
}

impl JobEngine {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        config: JobConfig,
        handlers: Handlers,
        wake: Wake,
        leader: Leader,
    ) -> Self {
        Self {
            db,
            clock,
            config,
            handlers,
            wake,
            leader,
        }
    }

    /// Starts the workers (its own retention job among the kinds they run) and the gauges; the handle resolves once shutdown began and the
    /// running jobs were recorded, or stopped and released for the next worker.
    pub fn spawn(self, shutdown: Shutdown) -> anyhow::Result<JoinHandle<()>> {
        tokio::spawn(gauge_loop(
            self.db.clone(),
            self.clock.clone(),
            self.leader.clone(),
            shutdown.clone(),
        ));
        if self.config.concurrency == 0 {
            // An API-only replica: it writes jobs, and the replicas with workers run them.
            tracing::info!("FRONTDESK_JOB_CONCURRENCY is 0: this process runs no jobs (another replica must)");
        }
        let config = EngineConfig {
            concurrency: self.config.concurrency,
            caps: Caps {
                lane: self.config.lane_concurrency,
                account: self.config.account_concurrency,
            },
            bulk_slots: self.config.bulk_slots(),
            lease: self.config.lease,
            poll_interval: self.config.poll_interval,
            grace: SHUTDOWN_GRACE,
            // An eighth: sends are short, and a claim for a few waits little.
            claim_when_free: 8,
        };
        let retention = Retention {
            db: self.db.clone(),
            clock: self.clock.clone(),
            retention: self.config.retention,
        };
        Engine {
            db: self.db,
            clock: self.clock.clone(),
            config,
            work: Arc::new(JobWork {
                handlers: self.handlers.with::<Turn<Retention>>(Arc::new(retention)),
                clock: self.clock.clone(),
                max_crashes: self.config.max_crashes,
            }),
            wake: self.wake.notifier(),
            wakeups: self.wake.wakeups(),
        }
        .spawn(shutdown)
    }
}

struct JobWork {
    handlers: Handlers,
    clock: Arc<dyn Clock>,
    /// Runs cut short by a dead worker before a job fails with `crashed`.
    max_crashes: i32,
}

/// A claimed job with its handler.
#[derive(Clone)]
pub struct Runnable {
    job: Job,
    handler: Arc<dyn Handler>,
}

#[async_trait::async_trait]
impl Work for JobWork {
    type Item = Runnable;
    type Done = Finished;

    fn table(&self) -> &'static Table {
        &JOBS
    }

    fn kinds(&self) -> Option<Vec<String>> {
        Some(self.handlers.kinds())
    }

    async fn load(
        &self,
        db: &DatabaseConnection,
        rows: Vec<(QueueKey, QueryResult)>,
        token: i64,
    ) -> Result<Vec<(String, QueueKey, Runnable)>, DbErr> {
        // The key's four columns, then id, payload, attempts, max_attempts, unfinished_runs, group_key,
        // trace_parent.
        let mut items = Vec::with_capacity(rows.len());
        let mut crashed = Vec::new();
        let mut grouped = Vec::new();
        for (key, row) in rows {
            let Some(handler) = self.handlers.get(&key.kind) else {
                continue;
            };
            let id: String = row.try_get_by_index(4)?;
            // This claim counted itself: what is left above it are runs cut short.
            let unfinished: i32 = row.try_get_by_index(8)?;
            if unfinished > self.max_crashes {
                crashed.push(id);
                continue;
            }
            if let Some(group) = row.try_get_by_index::<Option<String>>(9)? {
                grouped.push((id.clone(), key.account.clone(), group));
            }
            let attempts: i32 = row.try_get_by_index(6)?;
            let job = Job {
                id: id.clone(),
                account_id: key.account.clone(),
                kind: key.kind.clone(),
                lane: key.lane.clone(),
                payload: row.try_get_by_index(5)?,
                attempt: attempts + 1,
                max_attempts: row.try_get_by_index(7)?,
                token,
                trace_parent: row.try_get_by_index(10)?,
                class: Class::from_code(key.class),
                // Replaced by the run's own lease when it starts.
                lease: Lease::detached(Duration::ZERO),
            };
            items.push((id, key, Runnable { job, handler }));
        }
        let cancelled = cancel::tombstoned(db, &grouped).await?;
        items.retain(|(id, _, _)| !cancelled.contains(id));
        let ended = [
            (crashed, Abandoned::Crashed),
            (cancelled.into_iter().collect(), Abandoned::Cancelled),
        ];
        if ended.iter().any(|(ids, _)| !ids.is_empty()) {
            cancel::end_claimed(db, &self.handlers, &ended, token, self.clock.now()).await?;
        }
        Ok(items)
    }

    fn deadline(&self, item: &Runnable) -> Duration {
        item.handler.deadline()
    }

    async fn run(&self, item: Runnable, lease: &Lease) -> Finished {
        let job = Job {
            lease: lease.clone(),
            ..item.job
        };
        let outcome = item.handler.run(&job).await;
        tracing::debug!(kind = %job.kind, attempt = job.attempt, "a job run ended");
        Finished { job, outcome }
    }

    /// When traces are exported, `job KIND`, continuing the trace the job was enqueued in.
    fn span(&self, item: &Runnable) -> tracing::Span {
        let job = &item.job;
        let span = crate::trace_span!(
            "job",
            otel.name = %format_args!("job {}", job.kind),
            job_id = %job.id,
            attempt = job.attempt,
            trace_id = tracing::field::Empty,
        );
        crate::telemetry::continue_trace(&span, job.trace_parent.as_deref());
        span
    }

    fn failed(&self, item: Runnable, why: RunFailure) -> Finished {
        Finished {
            job: item.job,
            outcome: Outcome::Retry {
                error: why.to_string(),
                after: FAILURE_BACKOFF,
            },
        }
    }

    fn rests_until(&self, done: &Finished) -> Option<i64> {
        match done.outcome {
            Outcome::Paced { until_ms } => Some(until_ms),
            _ => None,
        }
    }

    fn observe(&self, key: &QueueKey, done: &Finished, took: Duration) {
        let class = Class::from_code(key.class).label();
        metrics::counter!("frontdesk_job_runs_total", "kind" => key.kind.clone(), "class" => class, "outcome" => done.outcome.label())
            .increment(1);
        metrics::histogram!("frontdesk_job_run_duration_seconds", "kind" => key.kind.clone(), "class" => class)
            .record(took.as_secs_f64());
    }

    async fn record(
        &self,
        db: &DatabaseConnection,
        batch: &mut [Finished],
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, DbErr> {
        record(db, batch, now).await
    }
}

/// Refreshes the queue gauges, per kind and class: jobs pending, due, and how late the oldest due job is,
/// read from the pending jobs alone (ended jobs are counted as they end: `frontdesk_jobs_failed_total`).
/// Only the housekeeping leader reads them (the figures are the queue's, not the replica's); a replica that
/// stops leading shows zero, so a dashboard's sum over replicas is the queue's.
async fn gauge_loop(db: DatabaseConnection, clock: Arc<dyn Clock>, leader: Leader, shutdown: Shutdown) {
    // Kinds and classes shown before: those with no jobs left read zero, not their last figures.
    let mut shown: HashSet<(String, Class)> = HashSet::new();
    while !shutdown.is_stopping() {
        let figures = if leader.leads() {
            inspection::figures(&db, clock.now().timestamp_millis(), inspection::Counted::Pending).await
        } else {
            Ok(Vec::new())
        };
        if let Err(err) = &figures {
            tracing::warn!(error = %err, "reading the job queue's figures failed");
        }
        if let Ok(figures) = figures {
            let now_shown: HashSet<(String, Class)> = figures.iter().map(|f| (f.kind.clone(), f.class)).collect();
            let gone = shown.difference(&now_shown).map(|(kind, class)| inspection::Figures {
                kind: kind.clone(),
                class: *class,
                stats: inspection::Stats::default(),
            });
            for f in figures.iter().cloned().chain(gone.collect::<Vec<_>>()) {
                let labels = [("kind", f.kind.clone()), ("class", f.class.label().to_owned())];
                metrics::gauge!("frontdesk_jobs_pending", &labels).set(f.stats.pending as f64);
                metrics::gauge!("frontdesk_jobs_due", &labels).set(f.stats.due as f64);
                metrics::gauge!("frontdesk_jobs_oldest_due_age_seconds", &labels).set(f.stats.oldest_due_age_seconds);
            }
            shown = now_shown;
        }
        sleep_or_stop(GAUGE_INTERVAL, &shutdown).await;
    }
}
