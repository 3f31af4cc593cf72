//! A broadcast's counts (`total, sent, delivered, read, failed, replied`) and its completion.
//!
//! The database keeps the counts from every write that moves one of its messages or marks a reply (see the
//! migration that made them): each write appends a row of differences, so receipts of one broadcast
//! arriving together never wait for one another. A read adds the rows not yet folded to the broadcast's
//! columns, so it is exact at any moment; the recurring `broadcast_progress` job folds them in and marks
//! each sending broadcast `completed` (with `broadcast.completed`) once its audience is expanded and none
//! of its sends is pending: every message then left `queued`. The same job fails a sending broadcast whose
//! channel was removed.

use std::{collections::HashMap, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, Statement, Value};

use crate::resource_id::BroadcastId;
use crate::{
    clock::Clock,
    events::{self, EventType},
    jobs::{Handler, Job, Outcome, recurring::Recurring},
    store::{entities::broadcasts, sql::one_of_text},
};

/// Difference rows folded per statement.
const FOLD_BATCH: i64 = 10_000;
/// How often the job runs when it finds nothing more to do: how late a completion may be noticed.
const INTERVAL: Duration = Duration::from_secs(1);

/// The counts of one broadcast.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub total: i64,
    pub sent: i64,
    pub delivered: i64,
    pub read: i64,
    pub failed: i64,
    pub replied: i64,
}

impl Counts {
    fn of_row(m: &broadcasts::Model) -> Self {
        Self {
            total: m.total,
            sent: m.sent,
            delivered: m.delivered,
            read: m.read,
            failed: m.failed,
            replied: m.replied,
        }
    }
}

/// The counts of `rows` as they stand now: their columns plus the differences not yet folded in.
pub async fn of(db: &impl ConnectionTrait, rows: &[&broadcasts::Model]) -> Result<HashMap<BroadcastId, Counts>, DbErr> {
    let mut counts: HashMap<BroadcastId, Counts> = rows.iter().map(|m| (m.id.clone(), Counts::of_row(m))).collect();
    if rows.is_empty() {
        return Ok(counts);
    }
    let backend = db.get_database_backend();
    let (among, values) = one_of_text(
        backend,
        "broadcast_id",
        1,
        rows.iter().map(|m| m.id.to_string()).collect(),
    );
    let sql = format!(
        "SELECT broadcast_id, {sums} FROM broadcast_stat_deltas WHERE {among} GROUP BY broadcast_id",
        sums = ["sent", "delivered", "read", "failed", "replied"]
            .map(|c| format!("CAST(coalesce(sum({c}), 0) AS BIGINT)"))
            .join(", ")
    );
    for row in db
        .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?
    {
        let id: BroadcastId = row.try_get_by_index(0)?;
        if let Some(c) = counts.get_mut(&id) {
            c.sent += row.try_get_by_index::<i64>(1)?;
            c.delivered += row.try_get_by_index::<i64>(2)?;
            c.read += row.try_get_by_index::<i64>(3)?;
            c.failed += row.try_get_by_index::<i64>(4)?;
            c.replied += row.try_get_by_index::<i64>(5)?;
        }
    }
    Ok(counts)
}

/// Folds up to [`FOLD_BATCH`] difference rows into their broadcasts; how many.
async fn fold(db: &DatabaseConnection) -> Result<i64, DbErr> {
    let columns = ["sent", "delivered", "read", "failed", "replied", "settled"];
    let backend = db.get_database_backend();
    if backend == DbBackend::Postgres {
        // One statement, so what it deletes is exactly what it adds (a row committed meanwhile waits for
        // the next fold, whatever its id).
        let sql = format!(
            "WITH gone AS (DELETE FROM broadcast_stat_deltas WHERE id IN \
               (SELECT id FROM broadcast_stat_deltas ORDER BY id LIMIT {FOLD_BATCH}) RETURNING *), \
             sums AS (SELECT broadcast_id, {sums} FROM gone GROUP BY broadcast_id), \
             folded AS (UPDATE broadcasts AS b SET {adds} FROM sums WHERE b.id = sums.broadcast_id RETURNING 1) \
             SELECT count(*) FROM gone",
            sums = columns.map(|c| format!("sum({c}) AS {c}")).join(", "),
            adds = columns.map(|c| format!("{c} = b.{c} + sums.{c}")).join(", "),
        );
        let row = db.query_one_raw(Statement::from_string(backend, sql)).await?;
        return row.map_or(Ok(0), |row| row.try_get_by_index(0));
    }
    // SQLite writes one transaction at a time: what is read under the write lock stays as read.
    let txn = crate::store::begin_write(db).await?;
    let last: Option<i64> = match txn
        .query_one_raw(Statement::from_string(
            backend,
            format!("SELECT max(id) FROM (SELECT id FROM broadcast_stat_deltas ORDER BY id LIMIT {FOLD_BATCH})"),
        ))
        .await?
    {
        Some(row) => row.try_get_by_index(0)?,
        None => None,
    };
    let Some(last) = last else {
        txn.commit().await?;
        return Ok(0);
    };
    let adds = columns
        .map(|c| {
            format!(
                "{c} = {c} + (SELECT coalesce(sum(d.{c}), 0) FROM broadcast_stat_deltas AS d \
                 WHERE d.broadcast_id = broadcasts.id AND d.id <= $1)"
            )
        })
        .join(", ");
    let values: Vec<Value> = vec![last.into()];
    txn.execute_raw(Statement::from_sql_and_values(
        backend,
        format!(
            "UPDATE broadcasts SET {adds} WHERE id IN (SELECT broadcast_id FROM broadcast_stat_deltas WHERE id <= $1)"
        ),
        values.clone(),
    ))
    .await?;
    let folded = txn
        .execute_raw(Statement::from_sql_and_values(
            backend,
            "DELETE FROM broadcast_stat_deltas WHERE id <= $1",
            values,
        ))
        .await?
        .rows_affected();
    txn.commit().await?;
    Ok(folded as i64)
}

/// Marks `completed` each sending broadcast whose audience is expanded and none of whose sends is pending
/// (they are the jobs of its group), with `broadcast.completed`; how many.
async fn complete(db: &DatabaseConnection, now: DateTime<Utc>) -> Result<usize, DbErr> {
    let backend = db.get_database_backend();
    let txn = crate::store::begin_write(db).await?;
    let values: Vec<Value> = vec![now.into()];
    let done = broadcasts::Entity::find()
        .from_raw_sql(Statement::from_sql_and_values(
            backend,
            "UPDATE broadcasts SET status = 'completed', completed_at = $1, updated_at = $1 \
             WHERE status = 'sending' AND expanded AND NOT EXISTS \
             (SELECT 1 FROM jobs WHERE group_key = broadcasts.id AND status = 'pending') RETURNING *",
            values,
        ))
        .all(&txn)
        .await?;
    let counts = of(&txn, &done.iter().collect::<Vec<_>>()).await?;
    for broadcast in &done {
        let c = counts.get(&broadcast.id).copied().unwrap_or_default();
        events::record(
            &txn,
            &broadcast.account_id,
            EventType::BroadcastCompleted,
            super::event_data(broadcast, c),
            now,
        )
        .await?;
    }
    txn.commit().await?;
    Ok(done.len())
}

/// Folds the counts and completes the broadcasts that are done.
pub struct Progress {
    pub db: DatabaseConnection,
    pub clock: Arc<dyn Clock>,
}

impl Recurring for Progress {
    const KIND: &'static str = "broadcast_progress";
}

#[async_trait::async_trait]
impl Handler for Progress {
    async fn run(&self, _job: &Job) -> Outcome {
        let now = self.clock.now();
        let work = async {
            let folded = fold(&self.db).await?;
            super::sending::fail_stranded(&self.db, now).await?;
            complete(&self.db, now).await?;
            Ok::<_, DbErr>(folded == FOLD_BATCH)
        };
        crate::jobs::recurring::next_turn(now, work.await, INTERVAL)
    }
}
