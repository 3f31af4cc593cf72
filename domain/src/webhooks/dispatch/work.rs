//! Webhook deliveries on the job engine: the `webhook_deliveries` table, whose lane is the subscription;
//! a claimed delivery is read with its subscription and event (or parked), attempted over HTTP, and its
//! result written by the results' rules (`complete`).

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{DatabaseConnection, DbErr, QueryResult};

use super::{
    attempt::{self, AttemptResult, Outcome},
    claimed::{Claimed, park, read_claimed},
    complete::{Rules, record},
};
use crate::{
    clock::Clock,
    integrations::outbound::OutboundPolicy,
    jobs::{
        Lease,
        engine::{RunFailure, Work},
        queue::{QueueKey, Table},
    },
    secrets::Sealer,
};

/// The deliveries' table as the engine sees it: one queue per account and subscription.
pub static DELIVERIES: Table = Table {
    name: "webhook_deliveries",
    due: "next_attempt_ms",
    class: None,
    lane: "webhook_id",
    kind: None,
    returning: "event_id",
    unfinished_runs: None,
};

pub struct DeliveryWork {
    /// The time of attempts, of their results and of parked deliveries.
    pub clock: Arc<dyn Clock>,
    pub client: reqwest::Client,
    pub policy: OutboundPolicy,
    pub sealer: Sealer,
    pub rules: Rules,
    /// The attempt's timeout, and room to record it.
    pub deadline: Duration,
}

#[async_trait::async_trait]
impl Work for DeliveryWork {
    type Item = Claimed;
    type Done = AttemptResult;

    fn table(&self) -> &'static Table {
        &DELIVERIES
    }

    fn kinds(&self) -> Option<Vec<String>> {
        None
    }

    async fn load(
        &self,
        db: &DatabaseConnection,
        rows: Vec<(QueueKey, QueryResult)>,
        token: i64,
    ) -> Result<Vec<(String, QueueKey, Claimed)>, DbErr> {
        // The key's two columns, then id.
        let mut keys = std::collections::HashMap::with_capacity(rows.len());
        for (key, row) in rows {
            keys.insert(row.try_get_by_index::<String>(2)?, key);
        }
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = keys.keys().cloned().collect();
        let (claimed, parked) = read_claimed(db, &self.sealer, &ids, token).await?;
        if !parked.is_empty() {
            metrics::counter!("frontdesk_webhook_parked_total").increment(parked.len() as u64);
            park(db, &parked, token, self.clock.now()).await?;
        }
        Ok(claimed
            .into_iter()
            .filter_map(|c| {
                let key = keys.remove(&c.delivery_id)?;
                Some((c.delivery_id.clone(), key, c))
            })
            .collect())
    }

    fn deadline(&self, _item: &Claimed) -> Duration {
        self.deadline
    }

    async fn run(&self, item: Claimed, _lease: &Lease) -> AttemptResult {
        crate::jobs::guard::before_effect().await;
        attempt::attempt(&self.client, self.policy, item, self.clock.now()).await
    }

    fn failed(&self, item: Claimed, why: RunFailure) -> AttemptResult {
        let now = self.clock.now();
        AttemptResult {
            claimed: item,
            started_at: now,
            finished_at: now,
            duration: Duration::ZERO,
            outcome: Outcome::Failed {
                timeout: matches!(why, RunFailure::Overran(_)),
                error: why.to_string(),
            },
        }
    }

    fn observe(&self, _key: &QueueKey, result: &AttemptResult, _took: Duration) {
        metrics::counter!("frontdesk_webhook_attempts_total", "outcome" => result.outcome.label()).increment(1);
        metrics::histogram!("frontdesk_webhook_attempt_duration_seconds").record(result.duration.as_secs_f64());
        if result.outcome.delivered() {
            let latency = (result.finished_at - result.claimed.event_at)
                .to_std()
                .unwrap_or_default();
            metrics::histogram!("frontdesk_webhook_delivery_latency_seconds").record(latency.as_secs_f64());
        }
    }

    async fn record(
        &self,
        db: &DatabaseConnection,
        batch: &mut [AttemptResult],
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, DbErr> {
        record(db, &self.rules, batch, now).await
    }
}
