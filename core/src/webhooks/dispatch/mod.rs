//! The delivery engine, run by every core process (several replicas share the work through the database):
//! a fan-out loop turns outbox events into deliveries; a claim loop keeps up to `concurrency` attempts in
//! flight; a recorder writes their results in batches. Nothing lives only in memory: a delivery is a row
//! from the moment its event commits, and one whose process dies is claimed again when its lease ends.

mod attempt;
mod claim;
mod complete;
mod fanout;
mod prune;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use tokio::{
    sync::{Notify, Semaphore, mpsc},
    task::JoinHandle,
};

pub use self::attempt::body;
use self::{
    attempt::AttemptResult,
    complete::{Rules, record},
};
use super::schedule::RetrySchedule;
use crate::{clock::Clock, config::WebhookConfig, integrations::outbound::OutboundPolicy, shutdown::Shutdown};

/// Events fanned out per transaction.
const FAN_OUT_BATCH: u64 = 500;
/// Results written per transaction at most.
const RECORD_BATCH: usize = 1_000;
/// How often the queue gauges are refreshed.
const GAUGE_INTERVAL: Duration = Duration::from_secs(5);
/// Deliveries, and events, deleted per retention transaction at most.
const PRUNE_BATCH: u64 = 1_000;
/// How often the scan for events without deliveries starts over from the oldest event, to find those it
/// passed while a delivery still referred to them and whose deliveries then went another way (a deleted
/// subscription, two replicas deleting an event's last two deliveries at once).
const SCAN_RESTART: Duration = Duration::from_secs(24 * 3600);
/// Wait before retrying after a database error.
const ERROR_BACKOFF: Duration = Duration::from_secs(1);

/// `$first, $first+1, ...` (`count` of them): numbered placeholders, which both SQLite and PostgreSQL read.
fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The suffix that makes a subquery's row selection skip rows another transaction holds: replicas then take
/// disjoint work instead of queueing behind each other. SQLite has one writer at a time and no row locks.
fn skip_locked(backend: DbBackend) -> &'static str {
    match backend {
        DbBackend::Postgres => " FOR UPDATE SKIP LOCKED",
        _ => "",
    }
}

pub struct Dispatcher {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    config: WebhookConfig,
    policy: OutboundPolicy,
    wake: Arc<Notify>,
}

impl Dispatcher {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        config: WebhookConfig,
        policy: OutboundPolicy,
        wake: Arc<Notify>,
    ) -> Self {
        Self {
            db,
            clock,
            config,
            policy,
            wake,
        }
    }

    /// Starts the loops; the handle resolves once shutdown began and the attempts in flight were recorded.
    pub fn spawn(self, shutdown: Shutdown) -> anyhow::Result<JoinHandle<()>> {
        anyhow::ensure!(
            self.config.lease > self.config.timeout,
            "FRONTDESK_WEBHOOK_LEASE must be longer than FRONTDESK_WEBHOOK_TIMEOUT"
        );
        // A result recorded after its delivery was deleted would leave an attempt row behind.
        anyhow::ensure!(
            self.config.retention > self.config.lease,
            "FRONTDESK_WEBHOOK_RETENTION must be longer than FRONTDESK_WEBHOOK_LEASE"
        );
        let client = self.policy.client(self.config.timeout)?;
        let (results, recorded) = mpsc::unbounded_channel();
        let rules = Rules {
            schedule: RetrySchedule::new(self.config.retry_schedule.0.clone()),
            disable_after: self.config.disable_after,
        };
        tokio::spawn(fan_out_loop(
            self.db.clone(),
            self.clock.clone(),
            self.config.poll_interval,
            self.wake.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(gauge_loop(self.db.clone(), shutdown.clone()));
        tokio::spawn(prune_loop(
            self.db.clone(),
            self.clock.clone(),
            self.config.retention,
            shutdown.clone(),
        ));
        let recorder = tokio::spawn(record_loop(self.db.clone(), rules, recorded));
        let claimer = tokio::spawn(claim_loop(self, client, results, shutdown));
        Ok(tokio::spawn(async move {
            let _ = claimer.await;
            let _ = recorder.await;
        }))
    }
}

async fn fan_out_loop(
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    poll: Duration,
    wake: Arc<Notify>,
    shutdown: Shutdown,
) {
    while !shutdown.is_stopping() {
        match fanout::fan_out(&db, FAN_OUT_BATCH, clock.now()).await {
            Ok(done) if done.events == 0 => sleep_or_stop(poll, &shutdown).await,
            Ok(done) => {
                if done.deliveries > 0 {
                    wake.notify_one();
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "webhook fan-out failed; retrying");
                sleep_or_stop(ERROR_BACKOFF, &shutdown).await;
            }
        }
    }
}

async fn claim_loop(
    dispatcher: Dispatcher,
    client: reqwest::Client,
    results: mpsc::UnboundedSender<AttemptResult>,
    shutdown: Shutdown,
) {
    let capacity = dispatcher.config.concurrency as usize;
    let slots = Arc::new(Semaphore::new(capacity));
    let lease_ms = i64::try_from(dispatcher.config.lease.as_millis()).unwrap_or(i64::MAX / 2);
    // Claims are worth batching (two statements each): wait until a quarter of the slots are free.
    let batch = (capacity / 4).max(1) as u32;
    while !shutdown.is_stopping() {
        match slots.acquire_many(batch).await {
            Ok(ready) => drop(ready),
            Err(_) => break,
        }
        // Only this loop takes slots, so at least `batch` stay free until it does.
        let free = slots.available_permits();
        let claimed = match claim::claim(
            &dispatcher.db,
            free,
            dispatcher.clock.now().timestamp_millis(),
            lease_ms,
        )
        .await
        {
            Ok(claimed) => claimed,
            Err(err) => {
                tracing::warn!(error = %err, "webhook claim failed; retrying");
                sleep_or_stop(ERROR_BACKOFF, &shutdown).await;
                continue;
            }
        };
        let idle = claimed.len() < free;
        let Ok(mut permits) = slots.clone().acquire_many_owned(claimed.len() as u32).await else {
            break;
        };
        for delivery in claimed {
            let Some(permit) = permits.split(1) else {
                break;
            };
            let (client, results, policy) = (client.clone(), results.clone(), dispatcher.policy);
            tokio::spawn(async move {
                let result = attempt::attempt(&client, policy, delivery).await;
                metrics::counter!("frontdesk_webhook_attempts_total", "outcome" => result.outcome.label()).increment(1);
                metrics::histogram!("frontdesk_webhook_attempt_duration_seconds").record(result.duration.as_secs_f64());
                if matches!(result.outcome, attempt::Outcome::Delivered { .. }) {
                    let latency = (result.finished_at - result.claimed.event_at)
                        .to_std()
                        .unwrap_or_default();
                    metrics::histogram!("frontdesk_webhook_delivery_latency_seconds").record(latency.as_secs_f64());
                }
                let _ = results.send(result);
                drop(permit);
            });
        }
        if idle {
            tokio::select! {
                () = dispatcher.wake.notified() => {},
                () = sleep_or_stop(dispatcher.config.poll_interval, &shutdown) => {},
            }
        }
    }
    // Let the attempts in flight finish (each ends within the timeout) so their results are recorded.
    let _ = tokio::time::timeout(
        dispatcher.config.timeout + Duration::from_secs(1),
        slots.acquire_many(capacity as u32),
    )
    .await;
}

async fn record_loop(db: DatabaseConnection, rules: Rules, mut recorded: mpsc::UnboundedReceiver<AttemptResult>) {
    while let Some(first) = recorded.recv().await {
        let mut batch = vec![first];
        while batch.len() < RECORD_BATCH {
            match recorded.try_recv() {
                Ok(result) => batch.push(result),
                Err(_) => break,
            }
        }
        // A batch that cannot be written is attempted again after its leases end: at least once, not lost.
        for attempt in 1..=3 {
            match record(&db, &rules, batch.clone(), Utc::now()).await {
                Ok(()) => break,
                Err(err) => {
                    tracing::warn!(error = %err, attempt, "recording webhook attempts failed");
                    tokio::time::sleep(ERROR_BACKOFF).await;
                }
            }
        }
    }
}

/// Applies the retention. While whole batches are deleted it goes on, pausing between batches as long as
/// the last one took (on SQLite the other writers get the lock half the time); otherwise it waits half the
/// retention, and at least once a minute looks again.
async fn prune_loop(db: DatabaseConnection, clock: Arc<dyn Clock>, retention: Duration, shutdown: Shutdown) {
    let idle = (retention / 2).min(Duration::from_secs(60));
    let retention = chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX);
    let (mut mark, mut scan_started) = (None, Instant::now());
    while !shutdown.is_stopping() {
        // A retention reaching back before 1970 keeps everything.
        let cutoff = clock
            .now()
            .checked_sub_signed(retention)
            .filter(|c| *c > DateTime::UNIX_EPOCH);
        let Some(cutoff) = cutoff else {
            sleep_or_stop(idle, &shutdown).await;
            continue;
        };
        if scan_started.elapsed() > SCAN_RESTART {
            (mark, scan_started) = (None, Instant::now());
        }
        let started = Instant::now();
        match prune::prune(&db, cutoff, PRUNE_BATCH, &mut mark).await {
            Ok(pruned) => {
                metrics::counter!("frontdesk_webhook_pruned_total", "what" => "deliveries")
                    .increment(pruned.deliveries);
                metrics::counter!("frontdesk_webhook_pruned_total", "what" => "events").increment(pruned.events);
                sleep_or_stop(if pruned.more { started.elapsed() } else { idle }, &shutdown).await;
            }
            Err(err) => {
                tracing::warn!(error = %err, "webhook retention failed; retrying");
                sleep_or_stop(ERROR_BACKOFF.max(idle), &shutdown).await;
            }
        }
    }
}

/// Refreshes the queue gauges: deliveries waiting, and events not yet fanned out.
async fn gauge_loop(db: DatabaseConnection, shutdown: Shutdown) {
    while !shutdown.is_stopping() {
        for (gauge, sql) in [
            (
                "frontdesk_webhook_pending_deliveries",
                "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'",
            ),
            (
                "frontdesk_webhook_outbox_backlog",
                "SELECT COUNT(*) FROM event_outbox WHERE dispatched_at IS NULL",
            ),
        ] {
            let statement = Statement::from_string(db.get_database_backend(), sql);
            if let Ok(Some(row)) = db.query_one_raw(statement).await
                && let Ok(count) = row.try_get_by_index::<i64>(0)
            {
                metrics::gauge!(gauge).set(count as f64);
            }
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
