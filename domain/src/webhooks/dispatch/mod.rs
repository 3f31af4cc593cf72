//! Webhook delivery, run by every core process (several replicas share the work through the database): a
//! fan-out loop turns outbox events into delivery rows, and the job engine (`crate::jobs::engine`) runs
//! them like any other durable work, fairly across accounts and their subscriptions (a subscription is a
//! delivery's lane): claims, leases, fencing, stopping a run whose claim was lost, and batched recording.
//! What is the deliveries' own is here: the attempt over HTTP, the results' rules (retries, health,
//! disables), the retention, and the gauges. Nothing lives only in memory: a delivery is a row from the
//! moment its event commits, and one whose process died is claimed again, as the same attempt, when its
//! lease ends.

mod attempt;
mod claimed;
mod complete;
mod fanout;
pub mod prune;
mod work;

use std::{sync::Arc, time::Duration};

use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use tokio::{sync::Notify, task::JoinHandle};

pub use self::attempt::body;
use self::{complete::Rules, work::DeliveryWork};
use crate::{
    clock::Clock,
    events,
    integrations::outbound::OutboundPolicy,
    jobs::{
        Caps,
        engine::{Engine, EngineConfig, sleep_or_stop},
    },
    retry::RetrySchedule,
    secrets::Sealer,
    shutdown::Shutdown,
    store::sql::{picked, placeholders},
    store::{leader::Leader, wakeups::Topic},
    webhooks::WebhookConfig,
};

/// Events fanned out per transaction.
const FAN_OUT_BATCH: u64 = 500;
/// How often the queue gauges are refreshed.
const GAUGE_INTERVAL: Duration = Duration::from_secs(5);
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
    /// Whether this replica does the housekeeping (retention, gauges).
    leader: Leader,
}

/// How the dispatcher is woken, and whether it leads the housekeeping.
pub struct Signals {
    /// Rung when deliveries due now were written.
    pub wake: Arc<Notify>,
    /// Signalled when events were committed, for the fan-out.
    pub committed: events::Committed,
    pub leader: Leader,
}

impl Dispatcher {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        config: WebhookConfig,
        policy: OutboundPolicy,
        sealer: Sealer,
        signals: Signals,
    ) -> Self {
        Self {
            db,
            clock,
            config,
            policy,
            sealer,
            wake: signals.wake,
            committed: signals.committed,
            leader: signals.leader,
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
            self.config.lease >= crate::jobs::engine::MIN_LEASE,
            "FRONTDESK_WEBHOOK_LEASE must be at least {:?}",
            crate::jobs::engine::MIN_LEASE
        );
        let client = self.policy.client(self.config.timeout)?;
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
        let wakeups = self.committed.wakeups().clone();
        wakeups.forward(Topic::Deliveries, self.wake.clone());
        tokio::spawn(gauge_loop(self.db.clone(), self.leader.clone(), shutdown.clone()));
        // An attempt ends within its timeout; the deadline and the shutdown grace leave room to record it.
        let settle = self.config.timeout + Duration::from_secs(5);
        let endpoint = self.config.endpoint_concurrency.min(self.config.concurrency).max(1);
        let config = EngineConfig {
            concurrency: self.config.concurrency,
            caps: Caps {
                lane: endpoint,
                // An account's subscriptions together may hold half the slots (at least one endpoint's share).
                account: (self.config.concurrency / 2).max(endpoint),
            },
            bulk_slots: self.config.concurrency,
            lease: self.config.lease,
            poll_interval: self.config.poll_interval,
            grace: settle,
            // A quarter: a claim of deliveries also reads their subscriptions and events.
            claim_when_free: 4,
        };
        Engine {
            db: self.db,
            clock: self.clock.clone(),
            config,
            work: Arc::new(DeliveryWork {
                clock: self.clock,
                client,
                policy: self.policy,
                sealer: self.sealer,
                rules,
                deadline: settle,
            }),
            wake: self.wake,
            wakeups,
        }
        .spawn(shutdown)
    }
}

async fn fan_out_loop(
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    poll: Duration,
    wake: Arc<Notify>,
    committed: events::Committed,
    shutdown: Shutdown,
) {
    let wakeups = committed.wakeups().clone();
    while !shutdown.is_stopping() {
        match fanout::fan_out(&db, FAN_OUT_BATCH, clock.now()).await {
            // Events are written by many transactions that do not signal: an idle fan-out looks every poll,
            // with one read of an index, and claims only once something waits.
            Ok(done) if done.events == 0 => loop {
                tokio::select! {
                    () = committed.wait() => break,
                    () = sleep_or_stop(poll, &shutdown) => {},
                }
                if shutdown.is_stopping() || fanout::any_waiting(&db).await.unwrap_or(true) {
                    break;
                }
            },
            Ok(done) => {
                if done.deliveries > 0 {
                    wake.notify_one();
                    wakeups.publish(Topic::Deliveries);
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "webhook fan-out failed; retrying");
                sleep_or_stop(ERROR_BACKOFF, &shutdown).await;
            }
        }
    }
}

/// Refreshes the queue gauges on the housekeeping leader: deliveries waiting, and events not yet fanned
/// out; a replica that does not lead shows zero, so a dashboard's sum over replicas is the queue's.
async fn gauge_loop(db: DatabaseConnection, leader: Leader, shutdown: Shutdown) {
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
            if !leader.leads() {
                metrics::gauge!(gauge).set(0.0);
                continue;
            }
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
