//! The worker loops every core process runs: a claim loop that keeps up to `concurrency` jobs running,
//! lanes under their caps; a recorder that writes outcomes in batches (a slot is free again only once its
//! outcome is committed, so a slow database slows claiming instead of piling up outcomes); a lease renewer;
//! and the queue gauges. At shutdown the claim loop stops, running jobs get `SHUTDOWN_GRACE` to finish and be
//! recorded, and the claims still held are released for the next worker.

use std::{panic::AssertUnwindSafe, sync::Arc, time::Duration};

use futures_util::FutureExt;

use sea_orm::DatabaseConnection;
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore, mpsc},
    task::JoinHandle,
};

use super::{
    Handler, Handlers, Job, Outcome, Wake, admin,
    claim::claim,
    complete::{Finished, record},
    in_flight::InFlight,
};
use crate::{
    clock::Clock,
    config::JobConfig,
    shutdown::Shutdown,
    store::leases::{self, Queue},
};

/// The jobs' work queue, for leases.
const JOBS: Queue = Queue {
    table: "jobs",
    due_column: "run_at_ms",
};
/// Outcomes written per transaction at most.
const RECORD_BATCH: usize = 500;
/// How long running jobs may take to finish once shutdown began.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How often the queue gauges are refreshed.
const GAUGE_INTERVAL: Duration = Duration::from_secs(5);
/// Wait before retrying after a database error.
const ERROR_BACKOFF: Duration = Duration::from_secs(1);
/// Wait before running again a job whose handler panicked (a try spent, as for an error).
const PANIC_BACKOFF: Duration = Duration::from_secs(30);
/// The shortest lease: renewals (every third of it) must fit a database round trip with room to spare.
const MIN_LEASE: Duration = Duration::from_secs(1);

pub struct JobEngine {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    config: JobConfig,
    handlers: Handlers,
    wake: Wake,
    in_flight: Arc<InFlight>,
}

impl JobEngine {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        config: JobConfig,
        handlers: Handlers,
        wake: Wake,
    ) -> Self {
        let in_flight = Arc::new(InFlight::new(config.lane_concurrency, wake.clone()));
        Self {
            db,
            clock,
            config,
            handlers,
            wake,
            in_flight,
        }
    }

    /// Starts the loops; the handle resolves once shutdown began and the running jobs were recorded (or,
    /// past the grace, released for the next worker).
    pub fn spawn(self, shutdown: Shutdown) -> anyhow::Result<JoinHandle<()>> {
        anyhow::ensure!(
            self.config.lease >= MIN_LEASE,
            "FRONTDESK_JOB_LEASE must be at least {MIN_LEASE:?}"
        );
        tokio::spawn(gauge_loop(self.db.clone(), self.clock.clone(), shutdown.clone()));
        if self.config.concurrency == 0 {
            // An API-only replica: it writes jobs, and the replicas with workers run them.
            tracing::info!("FRONTDESK_JOB_CONCURRENCY is 0: this process runs no jobs (another replica must)");
            return Ok(tokio::spawn(async {}));
        }
        let (outcomes, recorded) = mpsc::unbounded_channel();
        let renewer = tokio::spawn(renew_loop(
            self.db.clone(),
            self.clock.clone(),
            self.in_flight.clone(),
            self.config.lease,
        ));
        let recorder = tokio::spawn(record_loop(
            self.db.clone(),
            self.clock.clone(),
            self.in_flight.clone(),
            recorded,
        ));
        let claimer = tokio::spawn(claim_loop(self, outcomes, shutdown));
        Ok(tokio::spawn(async move {
            let _ = claimer.await;
            // Every outcome is committed by now, or its claim was released past the grace (a recorder still
            // writing then finds it no longer held). A run that outlasts the grace (a provider that hangs)
            // keeps the recorder's channel open: waiting for it would hold the exit until its own timeout.
            recorder.abort();
            renewer.abort();
        }))
    }
}

type Recorded = (Finished, OwnedSemaphorePermit);

/// Runs `job`. A handler that panics (a bug) spends a try as an error would, so the job ends `failed` with the
/// panic's message once its tries are used up, instead of its claim and lane slot staying held until restart.
async fn run_caught(handler: &dyn Handler, job: &Job) -> Outcome {
    match AssertUnwindSafe(handler.run(job)).catch_unwind().await {
        Ok(outcome) => outcome,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("no message");
            // The panic hook has printed the message already; the job keeps it as its error.
            tracing::error!(
                job = job.id,
                kind = job.kind,
                "job handler panicked; the run spends a try"
            );
            Outcome::Retry {
                error: format!("the handler panicked: {message}"),
                after: PANIC_BACKOFF,
            }
        }
    }
}

async fn claim_loop(engine: JobEngine, outcomes: mpsc::UnboundedSender<Recorded>, shutdown: Shutdown) {
    let capacity = engine.config.concurrency as usize;
    let slots = Arc::new(Semaphore::new(capacity));
    let lease_ms = i64::try_from(engine.config.lease.as_millis()).unwrap_or(i64::MAX / 2);
    let kinds = engine.handlers.kinds();
    // Claims are worth batching: wait until an eighth of the slots are free.
    let batch = (capacity / 8).max(1) as u32;
    while !shutdown.is_stopping() && !kinds.is_empty() {
        tokio::select! {
            ready = slots.acquire_many(batch) => match ready {
                Ok(ready) => drop(ready),
                Err(_) => break,
            },
            () = shutdown.clone().wait() => break,
        }
        // Only this loop takes slots, so at least `batch` stay free until it does.
        let free = slots.available_permits();
        let now_ms = engine.clock.now().timestamp_millis();
        let claimed = match claim(&engine.db, &engine.in_flight, &kinds, free, now_ms, lease_ms).await {
            Ok(claimed) => claimed,
            Err(err) => {
                tracing::warn!(error = %err, "job claim failed; retrying");
                sleep_or_stop(ERROR_BACKOFF, &shutdown).await;
                continue;
            }
        };
        let Ok(mut permits) = slots.clone().acquire_many_owned(claimed.jobs.len() as u32).await else {
            break;
        };
        for job in claimed.jobs {
            let Some(permit) = permits.split(1) else {
                break;
            };
            let Some(handler) = engine.handlers.get(&job.kind) else {
                continue;
            };
            engine.in_flight.started(&job);
            let (in_flight, outcomes, clock) = (engine.in_flight.clone(), outcomes.clone(), engine.clock.clone());
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let outcome = run_caught(handler.as_ref(), &job).await;
                if let Outcome::Defer { until_ms } = &outcome {
                    in_flight.rest(&job.lane, *until_ms, clock.now().timestamp_millis());
                }
                in_flight.ran(&job);
                metrics::counter!("frontdesk_job_runs_total", "kind" => job.kind.clone(), "outcome" => outcome.label())
                    .increment(1);
                metrics::histogram!("frontdesk_job_run_duration_seconds", "kind" => job.kind.clone())
                    .record(started.elapsed().as_secs_f64());
                // The slot travels with the outcome: it is free once the outcome is committed.
                let _ = outcomes.send((Finished { job, outcome }, permit));
            });
        }
        if claimed.idle {
            tokio::select! {
                () = engine.wake.notified() => {},
                () = sleep_or_stop(engine.config.poll_interval, &shutdown) => {},
            }
        }
    }
    // Let the running jobs finish and their outcomes be committed; then release what is still held.
    let finished = tokio::time::timeout(SHUTDOWN_GRACE, slots.acquire_many(capacity as u32)).await;
    if finished.is_err() {
        let tokens = engine.in_flight.tokens();
        match leases::release(&engine.db, JOBS, &tokens, engine.clock.now().timestamp_millis()).await {
            Ok(()) => tracing::info!(claims = tokens.len(), "released unfinished jobs"),
            Err(err) => tracing::warn!(error = %err, "releasing unfinished jobs failed; their leases will end"),
        }
    }
}

async fn record_loop(
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    in_flight: Arc<InFlight>,
    mut recorded: mpsc::UnboundedReceiver<Recorded>,
) {
    while let Some(first) = recorded.recv().await {
        let mut batch = vec![first];
        while batch.len() < RECORD_BATCH {
            match recorded.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let (finished, permits): (Vec<Finished>, Vec<OwnedSemaphorePermit>) = batch.into_iter().unzip();
        write_outcomes(&db, clock.as_ref(), &finished).await;
        for done in &finished {
            in_flight.recorded(done.job.token);
        }
        drop(permits);
    }
}

/// Writes a batch of outcomes; a batch that keeps failing is written one job at a time, so one job whose
/// effect cannot be written does not hold back the others. An outcome that cannot be written at all is run
/// again once its lease, no longer renewed, ends: at least once, never lost.
async fn write_outcomes(db: &DatabaseConnection, clock: &dyn Clock, finished: &[Finished]) {
    for attempt in 1..=3 {
        match record(db, finished, clock.now()).await {
            Ok(()) => return,
            Err(err) => {
                tracing::warn!(error = %err, attempt, jobs = finished.len(), "recording job outcomes failed");
                tokio::time::sleep(ERROR_BACKOFF).await;
            }
        }
    }
    if finished.len() > 1 {
        for one in finished.chunks(1) {
            if let Err(err) = record(db, one, clock.now()).await {
                tracing::warn!(error = %err, job = one[0].job.id, "recording a job outcome failed; it will run again");
            }
        }
    }
}

/// Renews the leases of the claims in hand every third of the lease; runs until aborted, once the claim
/// loop and the recorder are done.
async fn renew_loop(db: DatabaseConnection, clock: Arc<dyn Clock>, in_flight: Arc<InFlight>, lease: Duration) {
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX / 2);
    loop {
        let tokens = in_flight.tokens();
        if !tokens.is_empty()
            && let Err(err) = leases::renew(&db, JOBS, &tokens, clock.now().timestamp_millis() + lease_ms).await
        {
            tracing::warn!(error = %err, "renewing job leases failed");
        }
        tokio::time::sleep(lease / 3).await;
    }
}

/// Refreshes the queue gauges: jobs waiting, due, failed, and how late the oldest due job is.
async fn gauge_loop(db: DatabaseConnection, clock: Arc<dyn Clock>, shutdown: Shutdown) {
    while !shutdown.is_stopping() {
        if let Ok(stats) = admin::stats(&db, clock.now().timestamp_millis()).await {
            metrics::gauge!("frontdesk_jobs_pending").set(stats.pending as f64);
            metrics::gauge!("frontdesk_jobs_due").set(stats.due as f64);
            metrics::gauge!("frontdesk_jobs_failed").set(stats.failed as f64);
            metrics::gauge!("frontdesk_jobs_oldest_due_age_seconds").set(stats.oldest_due_age_seconds);
        }
        sleep_or_stop(GAUGE_INTERVAL, &shutdown).await;
    }
}

async fn sleep_or_stop(duration: Duration, shutdown: &Shutdown) {
    tokio::select! {
        () = tokio::time::sleep(duration) => {},
        () = shutdown.clone().wait() => {},
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::{clock::SystemClock, jobs::NewJob, store};

    struct Panics;

    #[async_trait::async_trait]
    impl Handler for Panics {
        async fn run(&self, job: &Job) -> Outcome {
            panic!("cannot handle {}", job.payload)
        }
    }

    struct Succeeds;

    #[async_trait::async_trait]
    impl Handler for Succeeds {
        async fn run(&self, _job: &Job) -> Outcome {
            Outcome::Done(None)
        }
    }

    fn job(kind: &'static str, run_at_ms: i64) -> NewJob {
        NewJob {
            account_id: "acc".into(),
            kind,
            lane: "one-lane".into(),
            payload: serde_json::json!({"n": run_at_ms}),
            run_at_ms,
            max_attempts: 1,
            unique_key: None,
        }
    }

    /// With one slot in the lane, a panic that kept its slot (or its claim) would stop the lane's next job.
    #[tokio::test]
    async fn a_panicking_handler_fails_its_job_with_the_message_and_its_lane_runs_on() {
        let (db, dir) = store::test_databases::sqlite_file(4).await;
        store::migrate(&db).await.unwrap();
        let now = Utc::now();
        let due = now.timestamp_millis() - 1_000;
        let jobs = vec![job("panics", due), job("panics", due + 1), job("succeeds", due + 2)];
        crate::jobs::enqueue_all(&db, jobs, now).await.unwrap();
        let config = JobConfig {
            concurrency: 4,
            lane_concurrency: 1,
            lease: Duration::from_secs(1),
            poll_interval: Duration::from_millis(20),
        };
        let handlers = Handlers::default()
            .with("panics", Arc::new(Panics))
            .with("succeeds", Arc::new(Succeeds));
        let (stop, shutdown) = Shutdown::by_hand();
        let engine = JobEngine::new(db.clone(), Arc::new(SystemClock), config, handlers, Wake::default());
        let stopped = engine.spawn(shutdown).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let failed = admin::list(&db, true, "", 10).await.unwrap();
            let waiting = admin::list(&db, false, "", 10).await.unwrap();
            if failed.len() == 2 && waiting.is_empty() {
                for job in failed {
                    assert_eq!(job.kind, "panics");
                    let error = job.last_error.unwrap_or_default();
                    assert!(error.starts_with("the handler panicked: cannot handle {"), "{error}");
                }
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "failed {failed:?}, waiting {waiting:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(15), stopped)
            .await
            .unwrap()
            .unwrap();
        std::fs::remove_dir_all(dir).ok();
    }
}
