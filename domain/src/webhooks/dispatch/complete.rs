//! Writes a batch of attempt results in one transaction: each subscription's health (locked first, in id
//! order, so concurrent batches and disables never deadlock), each delivery's next state (only while the
//! delivery still carries the token of the claim that made the attempt; a success settles it whatever
//! claim holds it), each result so written kept as its attempt's record (a success in the delivery's row,
//! any other outcome as an attempt row), and any disable the results call for.
//! A result whose delivery was claimed again, or deleted with its subscription, leaves no row behind.

use std::{
    collections::{BTreeMap, HashSet},
    time::Duration,
};

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveEnum,
    ActiveValue::{NotSet, Set},
    ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, Statement, Value,
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
        if result.outcome.delivered() {
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
    for health in apply_health(&txn, &changes).await? {
        let change = &changes[health.webhook_id.as_str()];
        if let Some(reason) = disable_reason(change, &health, rules, now) {
            disable_subscription(&txn, &health.webhook_id, reason, now).await?;
            disable.push((health.webhook_id, reason));
        }
    }
    let written = if txn.get_database_backend() == DbBackend::Postgres {
        write_postgres(&txn, results, &settled).await?
    } else {
        write_each_size(&txn, results, &settled).await?
    };
    for (webhook_id, reason) in disable {
        tracing::warn!(webhook = webhook_id, reason, "webhook subscription disabled");
        store::fail_pending(&txn, store::Pending::OfWebhook(&webhook_id), now).await?;
    }
    txn.commit().await?;
    Ok(results
        .iter()
        .filter(|r| !written.contains(r.claimed.delivery_id.as_str()))
        .map(|r| r.claimed.delivery_id.clone())
        .collect())
}

/// A subscription's health after a batch's change.
struct Health {
    webhook_id: String,
    status: WebhookStatus,
    failing_since: Option<DateTime<Utc>>,
}

/// Applies each subscription's health change, its row locked first and in id order (so concurrent batches
/// and disables never deadlock), with the lock the update itself takes (`NO KEY UPDATE`): a plain `FOR
/// UPDATE` also waited for every fan-out holding the subscription (`KEY SHARE`) to commit. On PostgreSQL in
/// one statement for the whole batch, whose text is the same for any batch: a statement per subscription
/// made a batch spanning many subscriptions as many round trips, each holding the locks taken before it.
async fn apply_health(db: &impl ConnectionTrait, changes: &BTreeMap<&str, HealthChange>) -> Result<Vec<Health>, DbErr> {
    let backend = db.get_database_backend();
    let mut rows = Vec::with_capacity(changes.len());
    if backend == DbBackend::Postgres {
        let batch: Vec<serde_json::Value> = changes
            .iter()
            .map(|(webhook_id, change)| {
                serde_json::json!({
                    "id": webhook_id,
                    "reset": change.reset,
                    "failures": change.failures,
                    "first_failure": change.first_failure,
                    "last_success": change.last_success,
                    "last_failure": change.last_failure,
                    "last_error": change.last_error,
                })
            })
            .collect();
        let sql = "WITH c AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS c(id text, reset bool, failures int4, \
             first_failure timestamptz, last_success timestamptz, last_failure timestamptz, last_error text)) \
             UPDATE webhooks AS w SET \
             consecutive_failures = CASE WHEN c.reset THEN c.failures ELSE w.consecutive_failures + c.failures END, \
             failing_since = CASE WHEN c.reset THEN c.first_failure ELSE COALESCE(w.failing_since, c.first_failure) END, \
             last_success_at = COALESCE(c.last_success, w.last_success_at), \
             last_failure_at = COALESCE(c.last_failure, w.last_failure_at), \
             last_error = COALESCE(c.last_error, w.last_error) \
             FROM c WHERE w.id = c.id AND w.id = ANY(ARRAY(SELECT id FROM webhooks WHERE id IN (SELECT id FROM c) \
             ORDER BY id FOR NO KEY UPDATE)) RETURNING w.id, w.status, w.failing_since";
        let values = [serde_json::Value::Array(batch).to_string().into()];
        rows = db
            .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?;
    } else {
        // SQLite has one writer at a time and runs in this process: no lock order to keep, no round trips.
        let sql = "UPDATE webhooks SET \
             consecutive_failures = CASE WHEN $2 THEN $3 ELSE consecutive_failures + $3 END, \
             failing_since = CASE WHEN $2 THEN $4 ELSE COALESCE(failing_since, $4) END, \
             last_success_at = COALESCE($5, last_success_at), \
             last_failure_at = COALESCE($6, last_failure_at), \
             last_error = COALESCE($7, last_error) \
             WHERE id = $1 RETURNING id, status, failing_since";
        for (webhook_id, change) in changes {
            let values: [Value; 7] = [
                (*webhook_id).into(),
                change.reset.into(),
                change.failures.into(),
                change.first_failure.into(),
                change.last_success.into(),
                change.last_failure.into(),
                change.last_error.clone().into(),
            ];
            rows.extend(
                db.query_all_raw(Statement::from_sql_and_values(backend, sql, values))
                    .await?,
            );
        }
    }
    rows.iter()
        .map(|row| {
            Ok(Health {
                webhook_id: row.try_get_by_index(0)?,
                status: row.try_get_by_index(1)?,
                failing_since: row.try_get_by_index(2)?,
            })
        })
        .collect()
}

/// Why an active subscription must be disabled after this batch: its endpoint said it is gone, or it has
/// failed for longer than the rules allow.
fn disable_reason(change: &HealthChange, health: &Health, rules: &Rules, now: DateTime<Utc>) -> Option<&'static str> {
    if health.status != WebhookStatus::Active {
        return None;
    }
    let failing_too_long = health
        .failing_since
        .is_some_and(|since| (now - since).to_std().unwrap_or_default() >= rules.disable_after);
    if change.gone {
        Some("gone")
    } else if failing_too_long {
        Some("failing")
    } else {
        None
    }
}

async fn disable_subscription(
    db: &impl ConnectionTrait,
    webhook_id: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    db.execute_raw(Statement::from_sql_and_values(
        db.get_database_backend(),
        "UPDATE webhooks SET status = 'disabled', disabled_reason = $2, disabled_at = $3, updated_at = $3 \
         WHERE id = $1",
        [webhook_id.into(), reason.into(), now.into()],
    ))
    .await?;
    Ok(())
}

/// Writes each delivery's next state and, for those written, their attempts' records, in one statement whose text
/// is the same for any batch (the batch is one JSON parameter, nulls included), so its plan is reused: with
/// a text per batch size, most batches were parsed and planned again. The deliveries are locked in id order
/// first (`in_id_order`: the join alone locked them in the batch's order, and met lease renewals). The ids
/// written.
async fn write_postgres(
    txn: &impl ConnectionTrait,
    results: &[AttemptResult],
    settled: &[Settled],
) -> Result<HashSet<String>, DbErr> {
    const SQL: &str = "WITH v AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(position int4, id text, \
        token int8, status text, next_ms int8, delivered_at timestamptz, settled_at timestamptz, webhook_id text, \
        attempt int4, started_at timestamptz, status_code int4, duration_ms int4, error text, \
        next_attempt_at timestamptz, succeeded bool)), \
        written AS (UPDATE webhook_deliveries AS d SET \
        status = CASE WHEN d.status = 'pending' OR v.status = 'succeeded' THEN v.status ELSE d.status END, \
        next_attempt_ms = CASE WHEN d.status = 'pending' OR v.status = 'succeeded' THEN v.next_ms END, \
        delivered_at = CASE WHEN d.status = 'pending' OR v.status = 'succeeded' THEN v.delivered_at \
          ELSE d.delivered_at END, \
        settled_at = CASE WHEN d.status = 'pending' OR v.status = 'succeeded' THEN v.settled_at \
          ELSE d.settled_at END, \
        attempt_count = d.attempt_count + 1, claim_token = NULL, \
        delivered_attempt = CASE WHEN v.succeeded THEN v.attempt END, \
        delivered_started_at = CASE WHEN v.succeeded THEN v.started_at END, \
        delivered_status_code = CASE WHEN v.succeeded THEN v.status_code END, \
        delivered_duration_ms = CASE WHEN v.succeeded THEN v.duration_ms END \
        FROM v WHERE d.id = v.id AND (d.claim_token = v.token OR (v.status = 'succeeded' AND d.status = 'pending')) \
        AND d.id = ANY(ARRAY(SELECT id FROM webhook_deliveries WHERE id IN (SELECT id FROM v) ORDER BY id FOR UPDATE)) \
        RETURNING d.id), \
        attempts AS (INSERT INTO webhook_attempts (delivery_id, webhook_id, attempt, started_at, status_code, \
        duration_ms, error, next_attempt_at) \
        SELECT v.id, v.webhook_id, v.attempt, v.started_at, v.status_code, v.duration_ms, v.error, \
        v.next_attempt_at FROM v JOIN written USING (id) WHERE NOT v.succeeded ORDER BY v.position) \
        SELECT id FROM written";
    let batch: Vec<serde_json::Value> = results
        .iter()
        .zip(settled)
        .enumerate()
        .map(|(position, (result, state))| {
            serde_json::json!({
                "position": position,
                "id": result.claimed.delivery_id,
                "token": result.claimed.token,
                "status": state.status.to_value(),
                "next_ms": state.next_attempt_at.map(|t| t.timestamp_millis()),
                "delivered_at": state.delivered_at,
                "settled_at": (state.status != DeliveryStatus::Pending).then_some(result.finished_at),
                "webhook_id": result.claimed.webhook_id,
                "attempt": result.claimed.attempt,
                "started_at": result.started_at,
                "status_code": result.outcome.status_code(),
                "duration_ms": attempt_ms(result),
                "error": result.outcome.error(),
                "next_attempt_at": state.next_attempt_at,
                "succeeded": result.outcome.delivered(),
            })
        })
        .collect();
    let rows = txn
        .query_all_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            SQL,
            [serde_json::Value::Array(batch).to_string().into()],
        ))
        .await?;
    rows.iter().map(|row| row.try_get_by_index(0)).collect()
}

/// SQLite: the deliveries' states (a success's attempt with them) by chunk, then the rows of the other
/// attempts written.
async fn write_each_size(
    txn: &impl ConnectionTrait,
    results: &[AttemptResult],
    settled: &[Settled],
) -> Result<HashSet<String>, DbErr> {
    let mut written = HashSet::new();
    for (chunk, states) in results.chunks(CHUNK).zip(settled.chunks(CHUNK)) {
        written.extend(update_deliveries(txn, chunk, states).await?);
    }
    let attempts: Vec<webhook_attempts::ActiveModel> = results
        .iter()
        .zip(settled)
        .filter(|(r, _)| !r.outcome.delivered() && written.contains(r.claimed.delivery_id.as_str()))
        .map(|(r, s)| webhook_attempts::ActiveModel {
            seq: NotSet,
            delivery_id: Set(r.claimed.delivery_id.clone().into()),
            webhook_id: Set(r.claimed.webhook_id.clone().into()),
            attempt: Set(r.claimed.attempt),
            started_at: Set(r.started_at),
            status_code: Set(r.outcome.status_code()),
            duration_ms: Set(attempt_ms(r)),
            error: Set(r.outcome.error()),
            next_attempt_at: Set(s.next_attempt_at),
        })
        .collect();
    let mut attempts = attempts.into_iter().peekable();
    while attempts.peek().is_some() {
        let chunk: Vec<_> = attempts.by_ref().take(CHUNK).collect();
        webhook_attempts::Entity::insert_many(chunk)
            .exec_without_returning(txn)
            .await?;
    }
    Ok(written)
}

fn attempt_ms(result: &AttemptResult) -> i32 {
    i32::try_from(result.duration.as_millis()).unwrap_or(i32::MAX)
}

/// SQLite: one UPDATE for a chunk of deliveries, joined with a VALUES list (`columnN` names its columns);
/// returns the ids it wrote. A delivery parked while its attempt ran (its subscription was disabled) stays
/// parked unless the attempt succeeded; a success's attempt is kept in the row.
async fn update_deliveries(
    db: &impl ConnectionTrait,
    results: &[AttemptResult],
    states: &[Settled],
) -> Result<Vec<String>, DbErr> {
    if results.is_empty() {
        return Ok(Vec::new());
    }
    const COLUMNS: usize = 10;
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
         attempt_count = webhook_deliveries.attempt_count + 1, claim_token = NULL, \
         delivered_attempt = v.column7, delivered_started_at = v.column8, delivered_status_code = v.column9, \
         delivered_duration_ms = v.column10 \
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
        let delivered = result.outcome.delivered();
        values.push(delivered.then_some(result.claimed.attempt).into());
        values.push(delivered.then_some(result.started_at).into());
        values.push(result.outcome.status_code().filter(|_| delivered).into());
        values.push(delivered.then(|| attempt_ms(result)).into());
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
    use sea_orm::{ConnectionTrait, EntityTrait, Statement, TransactionTrait};

    use super::{HealthChange, Rules, record};
    use crate::{
        retry::RetrySchedule,
        store::{
            entities::{
                webhook_attempts,
                webhook_deliveries::{self, DeliveryStatus},
            },
            test_databases::{self, Kind, TestDb, execute, queued_behind_a_lock},
        },
        webhooks::dispatch::{
            attempt::{AttemptResult, Outcome},
            claimed::Claimed,
            work::DELIVERIES,
        },
        webhooks::store,
    };

    fn result(outcome: Outcome) -> AttemptResult {
        result_of("dlv_1", 1, outcome)
    }

    fn result_of(delivery_id: &str, token: i64, outcome: Outcome) -> AttemptResult {
        let now = Utc::now();
        AttemptResult {
            claimed: Claimed {
                delivery_id: delivery_id.into(),
                webhook_id: "wh_1".into(),
                account_id: "acc_1".into(),
                token,
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

    /// One retry a minute later; a subscription disabled after an hour of failures.
    fn rules() -> Rules {
        Rules {
            schedule: RetrySchedule::new(vec![Duration::from_secs(60)]),
            disable_after: Duration::from_secs(3600),
        }
    }

    /// A pending delivery of subscription `wh_1`, held by the claim `token`.
    async fn claimed_delivery(db: &impl ConnectionTrait, id: &str, token: i64) {
        db.execute_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            "INSERT INTO webhook_deliveries (id, account_id, webhook_id, event_id, event_type, status, \
             attempt_count, next_attempt_ms, created_at, claim_token) VALUES ($1, 'acc_1', 'wh_1', 'evt_1', \
             'deal.created', 'pending', 0, 9000000000000, $2, $3)",
            [id.into(), Utc::now().into(), token.into()],
        ))
        .await
        .unwrap();
    }

    /// A renewal of a claim's leases and the recording of the same deliveries' results, forced into the
    /// interleaving that deadlocks when the two lock rows in different orders: the renewal queues first for
    /// the lowest id (held by the test), then the recorder queues for it too (a recorder that locked in its
    /// batch's order holds the rest of the batch by then); when the test lets go, the renewal goes on up the
    /// ids. The results come in the reverse of id order, and the rows lie in the table in that order too, so
    /// neither the batch's order nor a scan gives id order.
    #[tokio::test]
    async fn results_recorded_during_a_renewal_of_their_leases_do_not_deadlock() {
        const TOKEN: i64 = 42;
        let test = TestDb::new(Kind::Postgres, 4).await;
        let db = &test.db;
        // A table of many settled deliveries, analysed, so a batch's rows are found one by one through the
        // primary key in the batch's order, as in a running service.
        execute(
            db,
            "INSERT INTO webhook_deliveries (id, account_id, webhook_id, event_id, event_type, status, \
             attempt_count, created_at, settled_at) SELECT 'dlv_old_' || g, 'acc_1', 'wh_1', 'evt_1', \
             'deal.created', 'succeeded', 1, now(), now() FROM generate_series(1, 20000) AS g",
        )
        .await;
        let ids: Vec<String> = (0..50).map(|n| format!("dlv_{n:03}")).collect();
        for id in ids.iter().rev() {
            claimed_delivery(db, id, TOKEN).await;
        }
        execute(db, "ANALYZE webhook_deliveries").await;
        let renewal = {
            let db = db.clone();
            async move { crate::jobs::lease::renew(&db, &DELIVERIES, &[TOKEN], 5_000).await }
        };
        let recording = {
            let db = db.clone();
            let ids = ids.clone();
            async move {
                let rules = rules();
                let started = Utc::now();
                let mut results: Vec<AttemptResult> = ids
                    .iter()
                    .rev()
                    .enumerate()
                    .map(|(n, id)| {
                        let mut result = result_of(id, TOKEN, Outcome::Delivered { status: 200 });
                        result.finished_at = started + chrono::Duration::milliseconds(n as i64);
                        result
                    })
                    .collect();
                record(&db, &rules, &mut results, Utc::now()).await
            }
        };
        let held = "SELECT id FROM webhook_deliveries WHERE id = 'dlv_000' FOR UPDATE";
        let (renewed, dropped) = queued_behind_a_lock(db, held, renewal, recording).await;
        let renewed = renewed.expect("the renewal is not ended as a deadlock's victim");
        let dropped = dropped.expect("the results are not ended as a deadlock's victim");
        assert!(dropped.is_empty(), "every result written: {dropped:?}");
        assert_eq!(
            renewed.len(),
            ids.len(),
            "the renewal went first and held every delivery"
        );
        test.remove().await;
    }

    /// A batch of a success and a refusal: the success settles its delivery with its attempt in the row and
    /// no attempt row; the refusal is an attempt row; the subscription's health counts both.
    async fn a_delivered_attempt_is_kept_in_its_row(kind: Kind) {
        const TOKEN: i64 = 7;
        let test = TestDb::new(kind, 2).await;
        let db = &test.db;
        let now = Utc::now();
        for id in ["dlv_ok", "dlv_refused"] {
            claimed_delivery(db, id, TOKEN).await;
        }
        let rules = rules();
        let mut ok = result_of("dlv_ok", TOKEN, Outcome::Delivered { status: 204 });
        ok.duration = Duration::from_millis(12);
        let refused = result_of(
            "dlv_refused",
            TOKEN,
            Outcome::Rejected {
                status: 500,
                retry_after: None,
            },
        );
        let started = ok.started_at;
        let dropped = record(db, &rules, &mut [ok, refused], now).await.unwrap();
        assert!(dropped.is_empty(), "{dropped:?}");

        let rows = webhook_deliveries::Entity::find().all(db).await.unwrap();
        let delivered = rows.iter().find(|d| &*d.id == "dlv_ok").unwrap();
        assert_eq!(delivered.status, DeliveryStatus::Succeeded);
        assert_eq!(
            (
                delivered.delivered_attempt,
                delivered.delivered_status_code,
                delivered.delivered_duration_ms,
            ),
            (Some(1), Some(204), Some(12))
        );
        assert_eq!(
            delivered.delivered_started_at.map(|t| t.timestamp_millis()),
            Some(started.timestamp_millis())
        );
        let retried = rows.iter().find(|d| &*d.id == "dlv_refused").unwrap();
        assert_eq!(retried.status, DeliveryStatus::Pending);
        assert_eq!(retried.delivered_attempt, None);

        let attempts = webhook_attempts::Entity::find().all(db).await.unwrap();
        let of: Vec<(&str, Option<i32>)> = attempts
            .iter()
            .map(|a| (a.delivery_id.as_ref(), a.status_code))
            .collect();
        assert_eq!(
            of,
            [("dlv_refused", Some(500))],
            "no row for the attempt that delivered"
        );
        let since = now - chrono::Duration::hours(1);
        assert_eq!(
            store::attempts_since(db, "wh_1", since).await.unwrap(),
            (2, 1),
            "two attempts, one delivered"
        );
        test.remove().await;
    }

    /// Attempts recorded before delivered attempts were kept in their rows: the migration moves each
    /// delivered one into its delivery and leaves the others as rows.
    async fn the_migration_moves_delivered_attempts_into_their_rows(kind: Kind) {
        let test = TestDb::unmigrated(kind, 1).await;
        let db = &test.db;
        test_databases::migrate_before(db, "m20261211_000230_delivered_in_row").await;
        let started = Utc::now() - chrono::Duration::minutes(5);
        let backend = db.get_database_backend();
        db.execute_raw(Statement::from_sql_and_values(
            backend,
            "INSERT INTO webhook_deliveries (id, account_id, webhook_id, event_id, event_type, status, \
             attempt_count, created_at, delivered_at, settled_at) VALUES ('dlv_1', 'acc_1', 'wh_1', 'evt_1', \
             'deal.created', 'succeeded', 2, $1, $1, $1)",
            [started.into()],
        ))
        .await
        .unwrap();
        for (attempt, status_code, succeeded) in [(1, 503, false), (2, 200, true)] {
            db.execute_raw(Statement::from_sql_and_values(
                backend,
                "INSERT INTO webhook_attempts (delivery_id, webhook_id, attempt, started_at, status_code, \
                 duration_ms, succeeded) VALUES ('dlv_1', 'wh_1', $1, $2, $3, 40, $4)",
                [attempt.into(), started.into(), status_code.into(), succeeded.into()],
            ))
            .await
            .unwrap();
        }
        crate::store::migrate(db).await.unwrap();
        let delivery = webhook_deliveries::Entity::find().one(db).await.unwrap().unwrap();
        assert_eq!(
            (
                delivery.delivered_attempt,
                delivery.delivered_status_code,
                delivery.delivered_duration_ms
            ),
            (Some(2), Some(200), Some(40))
        );
        assert_eq!(
            delivery.delivered_started_at.map(|t| t.timestamp_millis()),
            Some(started.timestamp_millis())
        );
        let attempts = webhook_attempts::Entity::find().all(db).await.unwrap();
        assert_eq!(
            attempts.iter().map(|a| (a.attempt, a.status_code)).collect::<Vec<_>>(),
            [(1, Some(503))]
        );
        test.remove().await;
    }

    /// The fan-out holds its subscriptions with a key-share lock until it commits (a subscription cannot be
    /// deleted under it); writing results locks the same rows for their health, which must not wait for
    /// that: the recorder is one per process, and every slot of its batch waits with it.
    #[tokio::test]
    async fn results_are_written_while_a_fan_out_holds_their_subscription() {
        const TOKEN: i64 = 9;
        let test = TestDb::new(Kind::Postgres, 4).await;
        let db = &test.db;
        execute(
            db,
            "INSERT INTO webhooks (id, account_id, url, description, events, secret, status, \
             consecutive_failures, created_at, updated_at) VALUES ('wh_1', 'acc_1', 'http://127.0.0.1/', '', '*', \
             'whsec_AAAA', 'active', 0, now(), now())",
        )
        .await;
        claimed_delivery(db, "dlv_1", TOKEN).await;
        #[allow(clippy::disallowed_methods)] // the fan-out's lock, held by the test
        let fan_out = db.begin().await.unwrap();
        execute(
            &fan_out,
            "SELECT w.id FROM webhooks w WHERE w.id = 'wh_1' FOR KEY SHARE OF w",
        )
        .await;
        let rules = rules();
        let mut results = [result_of("dlv_1", TOKEN, Outcome::Delivered { status: 200 })];
        let recorded = tokio::time::timeout(Duration::from_secs(5), record(db, &rules, &mut results, Utc::now())).await;
        fan_out.rollback().await.unwrap();
        let dropped = recorded
            .expect("the results are written without waiting for the fan-out")
            .unwrap();
        assert!(dropped.is_empty(), "{dropped:?}");
        test.remove().await;
    }

    frontdesk_kernel::on_both_kinds!(
        a_delivered_attempt_is_kept_in_its_row,
        the_migration_moves_delivered_attempts_into_their_rows,
    );
}
