//! The delivery engine, run by every core process (several replicas share the work through the database):
//! a fan-out loop turns outbox events into deliveries; a claim loop keeps up to `concurrency` deliveries in
//! hand, fairly across accounts and endpoints; a recorder writes their results in batches, and a slot is
//! free again only once its result is committed, so a slow database slows claiming instead of piling up
//! results. Nothing lives only in memory: a delivery is a row from the moment its event commits; its claim's
//! lease is renewed while it is in hand, and one whose process died is claimed again, as the same attempt,
//! when its lease ends.

mod attempt;
mod claim;
mod complete;
mod fanout;
mod in_flight;
mod prune;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use tokio::{
    sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc},
    task::JoinHandle,
};

pub use self::attempt::body;
use self::{
    attempt::AttemptResult,
    complete::{Rules, record},
    in_flight::{Caps, InFlight},
};
use crate::{
    clock::Clock, config::WebhookConfig, events, integrations::outbound::OutboundPolicy, secrets::Sealer,
    shutdown::Shutdown,
};
use crate::{
    retry::RetrySchedule,
    store::{
        leases::{self, Queue},
        sql::{picked, placeholders},
    },
};

/// A result on its way to the recorder, with the slot it holds until it is committed.
type Finished = (AttemptResult, OwnedSemaphorePermit);

/// The deliveries' work queue, for leases.
const DELIVERIES: Queue = Queue {
    table: "webhook_deliveries",
    due_column: "next_attempt_ms",
};
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

pub struct Dispatcher {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    config: WebhookConfig,
    policy: OutboundPolicy,
    sealer: Sealer,
    wake: Arc<Notify>,
    /// Signalled when this process committed events, for the fan-out.
    committed: events::Committed,
    in_flight: Arc<InFlight>,
}

impl Dispatcher {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        config: WebhookConfig,
        policy: OutboundPolicy,
        sealer: Sealer,
        wake: Arc<Notify>,
        committed: events::Committed,
    ) -> Self {
        let caps = Caps::new(config.concurrency, config.endpoint_concurrency);
        Self {
            db,
            clock,
            config,
            policy,
            in_flight: Arc::new(InFlight::new(caps, wake.clone())),
            sealer,
            wake,
            committed,
        }
    }

    /// Starts the loops; the handle resolves once shutdown began and the attempts in flight were recorded
    /// (or, past the timeout, released for the next worker).
    pub fn spawn(self, shutdown: Shutdown) -> anyhow::Result<JoinHandle<()>> {
        // A result recorded after its delivery was deleted would leave an attempt row behind.
        anyhow::ensure!(
            self.config.retention > self.config.lease,
            "FRONTDESK_WEBHOOK_RETENTION must be longer than FRONTDESK_WEBHOOK_LEASE"
        );
        anyhow::ensure!(
            self.config.lease >= MIN_LEASE,
            "FRONTDESK_WEBHOOK_LEASE must be at least {MIN_LEASE:?}"
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
            self.committed.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(gauge_loop(self.db.clone(), shutdown.clone()));
        tokio::spawn(prune_loop(
            self.db.clone(),
            self.clock.clone(),
            self.config.retention,
            shutdown.clone(),
        ));
        let renewer = tokio::spawn(renew_loop(
            self.db.clone(),
            self.clock.clone(),
            self.in_flight.clone(),
            self.config.lease,
        ));
        let recorder = tokio::spawn(record_loop(self.db.clone(), rules, self.in_flight.clone(), recorded));
        let claimer = tokio::spawn(claim_loop(self, client, results, shutdown));
        Ok(tokio::spawn(async move {
            let _ = claimer.await;
            let _ = recorder.await;
            renewer.abort();
        }))
    }
}

/// The shortest lease: renewals (every third of it) must fit a database round trip with room to spare.
const MIN_LEASE: Duration = Duration::from_secs(1);

async fn fan_out_loop(
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    poll: Duration,
    wake: Arc<Notify>,
    committed: events::Committed,
    shutdown: Shutdown,
) {
    while !shutdown.is_stopping() {
        match fanout::fan_out(&db, FAN_OUT_BATCH, clock.now()).await {
            Ok(done) if done.events == 0 => {
                tokio::select! {
                    () = committed.wait() => {},
                    () = sleep_or_stop(poll, &shutdown) => {},
                }
            }
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
    results: mpsc::UnboundedSender<Finished>,
    shutdown: Shutdown,
) {
    let capacity = dispatcher.config.concurrency as usize;
    let slots = Arc::new(Semaphore::new(capacity));
    let lease_ms = i64::try_from(dispatcher.config.lease.as_millis()).unwrap_or(i64::MAX / 2);
    // Claims are worth batching (two statements each, more when some must be released or parked): wait
    // until a quarter of the slots are free.
    let batch = (capacity / 4).max(1) as u32;
    while !shutdown.is_stopping() {
        match slots.acquire_many(batch).await {
            Ok(ready) => drop(ready),
            Err(_) => break,
        }
        // Only this loop takes slots, so at least `batch` stay free until it does.
        let free = slots.available_permits();
        let claim = match claim::claim(
            &dispatcher.db,
            &dispatcher.sealer,
            &dispatcher.in_flight,
            free,
            dispatcher.clock.now().timestamp_millis(),
            lease_ms,
        )
        .await
        {
            Ok(claim) => claim,
            Err(err) => {
                tracing::warn!(error = %err, "webhook claim failed; retrying");
                sleep_or_stop(ERROR_BACKOFF, &shutdown).await;
                continue;
            }
        };
        if claim.parked > 0 {
            metrics::counter!("frontdesk_webhook_parked_total").increment(claim.parked);
        }
        let Ok(mut permits) = slots.clone().acquire_many_owned(claim.claimed.len() as u32).await else {
            break;
        };
        for delivery in claim.claimed {
            let Some(permit) = permits.split(1) else {
                break;
            };
            dispatcher.in_flight.started(&delivery);
            let (client, results, policy) = (client.clone(), results.clone(), dispatcher.policy);
            let in_flight = dispatcher.in_flight.clone();
            tokio::spawn(async move {
                let result = attempt::attempt(&client, policy, delivery).await;
                in_flight.answered(&result.claimed);
                metrics::counter!("frontdesk_webhook_attempts_total", "outcome" => result.outcome.label()).increment(1);
                metrics::histogram!("frontdesk_webhook_attempt_duration_seconds").record(result.duration.as_secs_f64());
                if matches!(result.outcome, attempt::Outcome::Delivered { .. }) {
                    let latency = (result.finished_at - result.claimed.event_at)
                        .to_std()
                        .unwrap_or_default();
                    metrics::histogram!("frontdesk_webhook_delivery_latency_seconds").record(latency.as_secs_f64());
                }
                // The slot travels with the result: it is free once the result is committed.
                let _ = results.send((result, permit));
            });
        }
        if claim.idle {
            tokio::select! {
                () = dispatcher.wake.notified() => {},
                () = sleep_or_stop(dispatcher.config.poll_interval, &shutdown) => {},
            }
        }
    }
    // Let the attempts in flight finish (each ends within the timeout) and their results be committed.
    let finished = tokio::time::timeout(
        dispatcher.config.timeout + Duration::from_secs(5),
        slots.acquire_many(capacity as u32),
    )
    .await;
    if finished.is_err() {
        let tokens = dispatcher.in_flight.tokens();
        let now_ms = dispatcher.clock.now().timestamp_millis();
        match leases::release(&dispatcher.db, DELIVERIES, &tokens, now_ms).await {
            Ok(()) => tracing::info!(claims = tokens.len(), "released unfinished webhook deliveries"),
            Err(err) => {
                tracing::warn!(error = %err, "releasing unfinished webhook deliveries failed; their leases will end")
            }
        }
    }
}

async fn record_loop(
    db: DatabaseConnection,
    rules: Rules,
    in_flight: Arc<InFlight>,
    mut recorded: mpsc::UnboundedReceiver<Finished>,
) {
    while let Some(first) = recorded.recv().await {
        let mut batch = vec![first];
        while batch.len() < RECORD_BATCH {
            match recorded.try_recv() {
                Ok(finished) => batch.push(finished),
                Err(_) => break,
            }
        }
        let (mut results, permits): (Vec<AttemptResult>, Vec<OwnedSemaphorePermit>) = batch.into_iter().unzip();
        // A batch that cannot be written is attempted again once its leases, no longer renewed, end: at
        // least once, not lost.
        for attempt in 1..=3 {
            match record(&db, &rules, &mut results, Utc::now()).await {
                Ok(()) => break,
                Err(err) => {
                    tracing::warn!(error = %err, attempt, "recording webhook attempts failed");
                    tokio::time::sleep(ERROR_BACKOFF).await;
                }
            }
        }
        for result in &results {
            in_flight.recorded(result.claimed.token);
        }
        drop(permits);
    }
}

/// Renews the leases of the claims in hand every third of the lease; runs until aborted, once the claim
/// loop and the recorder are done.
async fn renew_loop(db: DatabaseConnection, clock: Arc<dyn Clock>, in_flight: Arc<InFlight>, lease: Duration) {
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX / 2);
    loop {
        let tokens = in_flight.tokens();
        if !tokens.is_empty()
            && let Err(err) = leases::renew(&db, DELIVERIES, &tokens, clock.now().timestamp_millis() + lease_ms).await
        {
            tracing::warn!(error = %err, "renewing webhook delivery leases failed");
        }
        tokio::time::sleep(lease / 3).await;
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
