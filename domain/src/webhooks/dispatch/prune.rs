//! Retention. A delivery settled (delivered, or failed for good) before the cutoff is deleted with its
//! attempts, and its event with it once no delivery that may still be attempted (any but a succeeded one)
//! refers to the event. Events old enough that no such delivery refers to (no subscriber wanted them, or
//! all of theirs succeeded) are found by a scan that resumes where it stopped, so events still waiting on
//! a delivery are not read again on every pass. A pending delivery is never touched, and neither
//! is its event, which its next attempt still reads; nor is any delivery of a disabled subscription, which a
//! re-enable may queue again, however long it stayed disabled.

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Statement, Value};

use crate::{
    clock::Clock,
    jobs::{
        Handler, Job, Outcome,
        recurring::{self, Recurring},
    },
};

/// Deliveries deleted, and old events scanned, per turn at most.
const BATCH: u64 = 1_000;

/// How often the scan for events without deliveries starts over from the oldest event, to find those it
/// passed while a delivery still referred to them and whose deliveries then went another way (a deleted
/// subscription, two replicas deleting an event's last two deliveries at once).
const SCAN_RESTART: Duration = Duration::from_secs(24 * 3600);

/// Applies the retention a batch a turn. While whole batches are deleted it goes on, pausing between
/// batches as long as the last one took (on SQLite the other writers get the lock half the time);
/// otherwise it waits half the retention, and at least once a minute looks again.
pub struct Retention {
    pub db: DatabaseConnection,
    pub clock: Arc<dyn Clock>,
    pub retention: Duration,
    /// Where this process's scan got to, and when it started (a turn on another replica starts its own).
    scan: Mutex<(ScanMark, Instant)>,
}

impl Recurring for Retention {
    const KIND: &'static str = "webhook_retention";
}

impl Retention {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, retention: Duration) -> Self {
        Self {
            db,
            clock,
            retention,
            scan: Mutex::new((None, Instant::now())),
        }
    }
}

#[async_trait::async_trait]
impl Handler for Retention {
    async fn run(&self, _job: &Job) -> Outcome {
        let now = self.clock.now();
        let idle = (self.retention / 2).min(Duration::from_secs(60));
        let kept = chrono::Duration::from_std(self.retention).unwrap_or(chrono::Duration::MAX);
        // A retention reaching back before 1970 keeps everything.
        let Some(cutoff) = now.checked_sub_signed(kept).filter(|c| *c > DateTime::UNIX_EPOCH) else {
            return recurring::next_turn(now, Ok(false), idle);
        };
        let mut mark = {
            let mut scan = self.scan.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if scan.1.elapsed() > SCAN_RESTART {
                *scan = (None, Instant::now());
            }
            scan.0
        };
        let started = Instant::now();
        let turn = prune(&self.db, cutoff, BATCH, &mut mark).await;
        self.scan.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0 = mark;
        match turn {
            Ok(pruned) => {
                metrics::counter!("frontdesk_webhook_pruned_total", "what" => "deliveries")
                    .increment(pruned.deliveries);
                metrics::counter!("frontdesk_webhook_pruned_total", "what" => "events").increment(pruned.events);
                let wait = if pruned.more { started.elapsed() } else { idle };
                Outcome::Defer {
                    until_ms: now.timestamp_millis() + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX / 4),
                }
            }
            Err(err) => recurring::next_turn(now, Err(err), idle),
        }
    }
}

/// How far the scan for events without deliveries has got: (`created_at`, `seq`) of the last event it read.
/// An event it passed while a delivery still referred to it goes with that delivery; one left behind by a
/// deleted subscription is found when the scan starts over (every `SCAN_RESTART`).
pub type ScanMark = Option<(DateTime<Utc>, i64)>;

/// What one call deleted, and whether it stopped at a batch's end (there may be more).
pub struct Pruned {
    pub deliveries: u64,
    pub events: u64,
    pub more: bool,
}

/// Deletes at most `batch` settled deliveries (with their attempts and newly unreferenced events) and
/// scans at most `batch` old events, in one transaction, oldest first; moves `mark` along the scan.
pub async fn prune(
    db: &DatabaseConnection,
    cutoff: DateTime<Utc>,
    batch: u64,
    mark: &mut ScanMark,
) -> Result<Pruned, DbErr> {
    let txn = crate::store::begin_write(db).await?;
    let backend = txn.get_database_backend();
    // On PostgreSQL rows another transaction holds (a replica's retention, a re-enable requeueing a failed
    // delivery) are skipped; the subquery's condition is checked again on each row it locks.
    let settled = super::picked(
        backend,
        "id",
        &format!(
            "SELECT id FROM webhook_deliveries WHERE status <> 'pending' AND settled_at < $1 \
             AND webhook_id NOT IN (SELECT id FROM webhooks WHERE status = 'disabled') \
             ORDER BY settled_at LIMIT {batch}"
        ),
    );
    let deleted = txn
        .query_all_raw(Statement::from_sql_and_values(
            backend,
            format!("DELETE FROM webhook_deliveries WHERE {settled} RETURNING id, event_id"),
            [cutoff.into()],
        ))
        .await?;
    // An event's deliveries to several subscriptions often settle together: each event is named once.
    let (mut deliveries, mut events) = (Vec::new(), BTreeSet::new());
    for row in &deleted {
        deliveries.push(Value::from(row.try_get_by_index::<String>(0)?));
        events.insert(row.try_get_by_index::<String>(1)?);
    }
    let deliveries_deleted = deliveries.len() as u64;
    if !deliveries.is_empty() {
        let sql = format!(
            "DELETE FROM webhook_attempts WHERE delivery_id IN ({})",
            super::placeholders(1, deliveries.len())
        );
        txn.execute_raw(Statement::from_sql_and_values(backend, sql, deliveries))
            .await?;
    }
    let mut events_deleted = 0;
    if !events.is_empty() {
        let sql = format!(
            "DELETE FROM event_outbox WHERE id IN ({}) AND {UNREFERENCED}",
            super::placeholders(1, events.len())
        );
        events_deleted += txn
            .execute_raw(Statement::from_sql_and_values(
                backend,
                sql,
                events.into_iter().map(Value::from),
            ))
            .await?
            .rows_affected();
    }
    let (never_delivered, scanned) = delete_events_never_delivered(&txn, cutoff, batch, mark).await?;
    txn.commit().await?;
    Ok(Pruned {
        deliveries: deliveries_deleted,
        events: events_deleted + never_delivered,
        more: deliveries_deleted == batch || scanned == batch,
    })
}

/// No delivery refers to the `event_outbox` row.
const UNREFERENCED: &str =
    "NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = event_outbox.id AND d.status <> 'succeeded')";

/// Reads up to `batch` dispatched events older than the cutoff after `mark` and deletes those no delivery
/// refers to; returns (deleted, read).
async fn delete_events_never_delivered(
    db: &impl ConnectionTrait,
    cutoff: DateTime<Utc>,
    batch: u64,
    mark: &mut ScanMark,
) -> Result<(u64, u64), DbErr> {
    let backend = db.get_database_backend();
    let (after, values): (&str, Vec<Value>) = match *mark {
        Some((created_at, seq)) => (
            "AND (created_at, seq) > ($2, $3)",
            vec![cutoff.into(), created_at.into(), seq.into()],
        ),
        None => ("", vec![cutoff.into()]),
    };
    let scanned = db
        .query_all_raw(Statement::from_sql_and_values(
            backend,
            format!(
                "SELECT seq, created_at FROM event_outbox WHERE dispatched_at IS NOT NULL AND created_at < $1 \
                 {after} ORDER BY created_at, seq LIMIT {batch}"
            ),
            values,
        ))
        .await?;
    let Some(last) = scanned.last() else {
        return Ok((0, 0));
    };
    *mark = Some((last.try_get_by_index(1)?, last.try_get_by_index(0)?));
    let seqs = scanned
        .iter()
        .map(|row| row.try_get_by_index::<i64>(0).map(Value::from))
        .collect::<Result<Vec<_>, _>>()?;
    let sql = format!(
        "DELETE FROM event_outbox WHERE seq IN ({}) AND {UNREFERENCED}",
        super::placeholders(1, seqs.len())
    );
    let deleted = db
        .execute_raw(Statement::from_sql_and_values(backend, sql, seqs))
        .await?
        .rows_affected();
    Ok((deleted, scanned.len() as u64))
}
