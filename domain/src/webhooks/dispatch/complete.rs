//! Writes a batch of attempt results in one transaction: each subscription's health (locked first, in id
//! order, so concurrent batches and disables never deadlock), each delivery's next state (only while the
//! delivery still carries the token of the claim that made the attempt; a success settles it whatever
//! claim holds it), an attempt row for each result so written, and any disable the results call for.
//! A result whose delivery was claimed again, or deleted with its subscription, leaves no row behind.

use std::{
    collections::{BTreeMap, HashSet},
    time::Duration,
};

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::{NotSet, Set},
    ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, Statement, Value,
};

use super::attempt::{AttemptResult, Outcome};
use crate::{
    retry::RetrySchedule,
    store::entities::{webhook_attempts, webhook_deliveries::DeliveryStatus, webhooks::WebhookStatus},
    webhooks::store,
};

/// Rows per batched UPDATE or INSERT.
const CHUNK: usize = 500;

/// The rules that turn results into states.
#[derive(Clone, Debug)]
pub struct Rules {
    pub schedule: RetrySchedule,
    pub disable_after: Duration,
}

/// A delivery's state after one attempt.
struct Settled {
    status: DeliveryStatus,
    next_attempt_at: Option<DateTime<Utc>>,
    delivered_at: Option<DateTime<Utc>>,
}

fn settle(rules: &Rules, result: &AttemptResult) -> Settled {
    let retry = |retry_after: Option<Duration>| match rules.schedule.wait_after(result.claimed.attempt, retry_after) {
        Some(wait) => Settled {
            status: DeliveryStatus::Pending,
            next_attempt_at: Some(result.finished_at + wait),
            delivered_at: None,
        },
        None => Settled {
            status: DeliveryStatus::Failed,
            next_attempt_at: None,
            delivered_at: None,
        },
    };
    match &result.outcome {
        Outcome::Delivered { .. } => Settled {
            status: DeliveryStatus::Succeeded,
            next_attempt_at: None,
            delivered_at: Some(result.finished_at),
        },
        Outcome::Gone => Settled {
            status: DeliveryStatus::Failed,
            next_attempt_at: None,
            delivered_at: None,
        },
        Outcome::Rejected { retry_after, .. } => retry(*retry_after),
        Outcome::Failed { .. } => retry(None),
    }
}

/// What a batch says about one subscription, in the order its attempts finished. A 410 anywhere in the batch
/// disables the subscription, even when a later attempt succeeded: the endpoint said it is gone.
#[derive(Default)]
struct HealthChange {
    /// A success in this batch: the streak restarts from the failures after it.
    reset: bool,
    failures: i32,
    first_failure: Option<DateTime<Utc>>,
    last_success: Option<DateTime<Utc>>,
    last_failure: Option<DateTime<Utc>>,
    last_error: Option<String>,
    gone: bool,
}

impl HealthChange {
    fn add(&mut self, result: &AttemptResult) {
        let at = result.finished_at;
        if matches!(result.outcome, Outcome::Delivered { .. }) {
            self.reset = true;
            self.failures = 0;
            self.first_failure = None;
            self.last_success = Some(at);
        } else {
            self.failures += 1;
            self.first_failure.get_or_insert(at);
            self.last_failure = Some(at);
            self.last_error = result.outcome.error();
            self.gone |= result.outcome == Outcome::Gone;
        }
    }
}

/// Writes the batch; the deliveries whose results were dropped (claimed again meanwhile, or deleted).
pub async fn record(
    db: &DatabaseConnection,
    rules: &Rules,
    results: &mut [AttemptResult],
    now: DateTime<Utc>,
) -> Result<Vec<String>, DbErr> {
    results.sort_by_key(|r| r.finished_at);
    let results = &*results;
    let mut changes: BTreeMap<&str, HealthChange> = BTreeMap::new();
    for result in results {
        changes
            .entry(result.claimed.webhook_id.as_str())
            .or_default()
            .add(result);
    }
    let settled: Vec<Settled> = results.iter().map(|r| settle(rules, r)).collect();
    let txn = crate::store::begin_write(db).await?;
    let mut disable = Vec::new();
    for (webhook_id, change) in &changes {
        if let Some(reason) = update_health(&txn, webhook_id, change, rules, now).await? {
            disable.push((*webhook_id, reason));
        }
    }
    let mut written = HashSet::new();
    for (chunk, states) in results.chunks(CHUNK).zip(settled.chunks(CHUNK)) {
        written.extend(update_deliveries(&txn, chunk, states).await?);
    }
    let attempts: Vec<webhook_attempts::ActiveModel> = results
        .iter()
        .zip(&settled)
        .filter(|(r, _)| written.contains(r.claimed.delivery_id.as_str()))
        .map(|(r, s)| webhook_attempts::ActiveModel {
            seq: NotSet,
            delivery_id: Set(r.claimed.delivery_id.clone()),
            webhook_id: Set(r.claimed.webhook_id.clone()),
            attempt: Set(r.claimed.attempt),
            started_at: Set(r.started_at),
            status_code: Set(r.outcome.status_code()),
            duration_ms: Set(i32::try_from(r.duration.as_millis()).unwrap_or(i32::MAX)),
            error: Set(r.outcome.error()),
            next_attempt_at: Set(s.next_attempt_at),
            succeeded: Set(matches!(r.outcome, Outcome::Delivered { .. })),
        })
        .collect();
    let mut attempts = attempts.into_iter().peekable();
    while attempts.peek().is_some() {
        let chunk: Vec<_> = attempts.by_ref().take(CHUNK).collect();
        webhook_attempts::Entity::insert_many(chunk)
            .exec_without_returning(&txn)
            .await?;
    }
    for (webhook_id, reason) in disable {
        tracing::warn!(webhook = webhook_id, reason, "webhook subscription disabled");
        store::fail_pending(&txn, store::Pending::OfWebhook(webhook_id), now).await?;
    }
    txn.commit().await?;
    Ok(results
        .iter()
        .filter(|r| !written.contains(r.claimed.delivery_id.as_str()))
        .map(|r| r.claimed.delivery_id.clone())
        .collect())
}

/// Applies the batch's health change; returns the disable reason when the subscription must be disabled
/// now (it is, in the same statement's transaction).
async fn update_health(
    db: &impl ConnectionTrait,
    webhook_id: &str,
    change: &HealthChange,
    rules: &Rules,
    now: DateTime<Utc>,
) -> Result<Option<&'static str>, DbErr> {
    let backend = db.get_database_backend();
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            backend,
            "UPDATE webhooks SET \
             consecutive_failures = CASE WHEN $2 THEN $3 ELSE consecutive_failures + $3 END, \
             failing_since = CASE WHEN $2 THEN $4 ELSE COALESCE(failing_since, $4) END, \
             last_success_at = COALESCE($5, last_success_at), \
             last_failure_at = COALESCE($6, last_failure_at), \
             last_error = COALESCE($7, last_error) \
             WHERE id = $1 RETURNING status, failing_since",
            [
                webhook_id.into(),
                change.reset.into(),
                change.failures.into(),
                change.first_failure.into(),
                change.last_success.into(),
                change.last_failure.into(),
                change.last_error.clone().into(),
            ],
        ))
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let status: WebhookStatus = row.try_get_by_index(0)?;
    let failing_since: Option<DateTime<Utc>> = row.try_get_by_index(1)?;
    if status != WebhookStatus::Active {
        return Ok(None);
    }
    let failing_too_long =
        failing_since.is_some_and(|since| (now - since).to_std().unwrap_or_default() >= rules.disable_after);
    let reason = if change.gone {
        "gone"
    } else if failing_too_long {
        "failing"
    } else {
        return Ok(None);
    };
    db.execute_raw(Statement::from_sql_and_values(
        backend,
        "UPDATE webhooks SET status = 'disabled', disabled_reason = $2, disabled_at = $3, updated_at = $3 \
         WHERE id = $1",
        [webhook_id.into(), reason.into(), now.into()],
    ))
    .await?;
    Ok(Some(reason))
}

/// One UPDATE for a chunk of deliveries, joined with a VALUES list (`columnN` names work on both databases);
/// returns the ids it wrote. A delivery parked while its attempt ran (its subscription was disabled) stays
/// parked unless the attempt succeeded.
async fn update_deliveries(
    db: &impl ConnectionTrait,
    results: &[AttemptResult],
    states: &[Settled],
) -> Result<Vec<String>, DbErr> {
    if results.is_empty() {
        return Ok(Vec::new());
    }
    const COLUMNS: usize = 6;
    let rows: Vec<String> = (0..results.len())
        .map(|i| format!("({})", super::placeholders(i * COLUMNS + 1, COLUMNS)))
        .collect();
    let applies = "(webhook_deliveries.status = 'pending' OR v.column3 = 'succeeded')";
    let sql = format!(
        "UPDATE webhook_deliveries SET \
         status = CASE WHEN {applies} THEN v.column3 ELSE webhook_deliveries.status END, \
         next_attempt_ms = CASE WHEN {applies} THEN v.column4 ELSE NULL END, \
         delivered_at = CASE WHEN {applies} THEN v.column5 ELSE webhook_deliveries.delivered_at END, \
         settled_at = CASE WHEN {applies} THEN v.column6 ELSE webhook_deliveries.settled_at END, \
         attempt_count = webhook_deliveries.attempt_count + 1, claim_token = NULL \
         FROM (VALUES {}) AS v WHERE webhook_deliveries.id = v.column1 \
         AND (webhook_deliveries.claim_token = v.column2 \
         OR (v.column3 = 'succeeded' AND webhook_deliveries.status = 'pending')) \
         RETURNING id",
        rows.join(", ")
    );
    let mut values: Vec<Value> = Vec::with_capacity(results.len() * COLUMNS);
    for (result, state) in results.iter().zip(states) {
        values.push(result.claimed.delivery_id.clone().into());
        values.push(result.claimed.token.into());
        values.push(state.status.into());
        values.push(state.next_attempt_at.map(|t| t.timestamp_millis()).into());
        values.push(state.delivered_at.into());
        values.push(
            (state.status != DeliveryStatus::Pending)
                .then_some(result.finished_at)
                .into(),
        );
    }
    let written = db
        .query_all_raw(Statement::from_sql_and_values(db.get_database_backend(), sql, values))
        .await?;
    written.iter().map(|row| row.try_get_by_index(0)).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::Utc;

    use super::HealthChange;
    use crate::webhooks::dispatch::{
        attempt::{AttemptResult, Outcome},
        claimed::Claimed,
    };

    fn result(outcome: Outcome) -> AttemptResult {
        let now = Utc::now();
        AttemptResult {
            claimed: Claimed {
                delivery_id: "dlv_1".into(),
                webhook_id: "wh_1".into(),
                account_id: "acc_1".into(),
                token: 1,
                attempt: 1,
                url: "http://127.0.0.1/".into(),
                secret: "whsec_AAAA".into(),
                event_id: "evt_1".into(),
                event_type: "deal.created".into(),
                payload: "{}".into(),
                event_at: now,
            },
            started_at: now,
            finished_at: now,
            duration: Duration::ZERO,
            outcome,
        }
    }

    #[test]
    fn a_gone_answer_is_kept_through_a_later_success_in_the_batch() {
        let mut change = HealthChange::default();
        change.add(&result(Outcome::Gone));
        change.add(&result(Outcome::Delivered { status: 200 }));
        assert!(change.gone, "the 410 still disables the subscription");
        assert!(change.reset && change.failures == 0);
    }
}
