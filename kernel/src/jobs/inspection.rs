//! What operators see of the queue: its figures (in all and per kind and class), the jobs (failed and
//! cancelled ones with their last error), a retry of a failed or cancelled job, and cancels.

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    Statement,
};

use super::Class;
use crate::{
    store::entities::jobs::{self, JobStatus},
    timestamps,
};

/// A job as the admin API shows it; `lease_now_ms` (the clock leases are kept on, `Clock::lease_now`) tells
/// a running job (claimed, lease not over) from a waiting one.
pub fn job_message(job: &jobs::Model, lease_now_ms: i64) -> frontdesk_api::admin::v1::Job {
    let status = match (job.status.as_str(), job.claim_token) {
        ("pending", Some(_)) if job.run_at_ms > lease_now_ms => "running",
        (status, _) => status,
    };
    frontdesk_api::admin::v1::Job {
        id: job.id.clone(),
        account_id: job.account_id.to_string(),
        kind: job.kind.clone(),
        status: status.to_owned(),
        attempts: job.attempts,
        max_attempts: job.max_attempts,
        run_at: DateTime::from_timestamp_millis(job.run_at_ms).map(timestamps::to_proto),
        last_error: job.last_error.clone().unwrap_or_default(),
        created_at: Some(timestamps::to_proto(job.created_at)),
        updated_at: Some(timestamps::to_proto(job.updated_at)),
        lane: job.lane.clone(),
        group: job.group_key.clone().unwrap_or_default(),
        key: job.unique_key.clone().unwrap_or_default(),
        class: Class::from_code(job.class).label().to_owned(),
        runs_again: job.rerun_at_ms.is_some(),
    }
}

/// The queue's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Waiting or running.
    pub pending: i64,
    /// Due now (not running: a running job's time is its lease's end).
    pub due: i64,
    pub failed: i64,
    pub cancelled: i64,
    /// Seconds the oldest due job has waited past its time.
    pub oldest_due_age_seconds: f64,
}

impl Stats {
    fn add(&mut self, other: &Stats) {
        self.pending += other.pending;
        self.due += other.due;
        self.failed += other.failed;
        self.cancelled += other.cancelled;
        self.oldest_due_age_seconds = self.oldest_due_age_seconds.max(other.oldest_due_age_seconds);
    }
}

/// The figures of one kind and class.
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    pub kind: String,
    pub class: Class,
    pub stats: Stats,
}

/// Which jobs the figures count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// Every job kept (failed and cancelled ones for the retention's 30 days): the admin's view.
    All,
    /// Pending jobs only, from the pending jobs' index, without reading ended jobs (`failed` and
    /// `cancelled` read zero): the gauges, which count ended jobs as they end instead.
    Pending,
}

/// The figures per kind and class, with one statement. A job is due when its time has passed: running
/// jobs are not, as their time is their lease's end.
pub async fn figures(db: &DatabaseConnection, now_ms: i64, counted: Counted) -> Result<Vec<Figures>, DbErr> {
    // Pending only: every column the statement reads is in the pending jobs' index.
    let (pending, ended, only_pending) = match counted {
        Counted::All => (
            "status = 'pending'",
            "COUNT(CASE WHEN status = 'failed' THEN 1 END), COUNT(CASE WHEN status = 'cancelled' THEN 1 END)",
            "",
        ),
        Counted::Pending => (
            "TRUE",
            "CAST(0 AS BIGINT), CAST(0 AS BIGINT)",
            " WHERE status = 'pending'",
        ),
    };
    let sql = format!(
        "SELECT kind, class, COUNT(CASE WHEN {pending} THEN 1 END), \
         COUNT(CASE WHEN {pending} AND run_at_ms <= $1 THEN 1 END), {ended}, \
         MIN(CASE WHEN {pending} AND run_at_ms <= $1 THEN run_at_ms END) \
         FROM jobs{only_pending} GROUP BY kind, class"
    );
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            sql,
            [now_ms.into()],
        ))
        .await?;
    rows.iter()
        .map(|row| {
            let oldest: Option<i64> = row.try_get_by_index(6)?;
            let count = |at: usize| row.try_get_by_index::<i64>(at);
            Ok(Figures {
                kind: row.try_get_by_index(0)?,
                class: Class::from_code(row.try_get_by_index(1)?),
                stats: Stats {
                    pending: count(2)?,
                    due: count(3)?,
                    failed: count(4)?,
                    cancelled: count(5)?,
                    oldest_due_age_seconds: oldest.map_or(0.0, |at| (now_ms - at).max(0) as f64 / 1000.0),
                },
            })
        })
        .collect()
}

/// The figures of the whole queue.
pub async fn stats(db: &DatabaseConnection, now_ms: i64) -> Result<Stats, DbErr> {
    let mut all = Stats::default();
    for f in figures(db, now_ms, Counted::All).await? {
        all.add(&f.stats);
    }
    Ok(all)
}

/// Which jobs a list shows.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Pending (waiting and running, by when they run next), failed or cancelled (latest first).
    pub status: JobStatus,
    pub kind: String,
    pub account_id: String,
    pub lane: String,
    pub group: String,
}

/// Up to `limit` jobs the filter selects ("" fields select any).
pub async fn list(db: &DatabaseConnection, filter: &Filter, limit: u64) -> Result<Vec<jobs::Model>, DbErr> {
    let mut select = jobs::Entity::find().limit(limit);
    for (column, value) in [
        (jobs::Column::Kind, &filter.kind),
        (jobs::Column::AccountId, &filter.account_id),
        (jobs::Column::Lane, &filter.lane),
        (jobs::Column::GroupKey, &filter.group),
    ] {
        if !value.is_empty() {
            select = select.filter(column.eq(value.as_str()));
        }
    }
    select = match filter.status {
        JobStatus::Pending => select
            .filter(jobs::Column::Status.eq(JobStatus::Pending))
            .order_by_asc(jobs::Column::RunAtMs),
        settled => select
            .filter(jobs::Column::Status.eq(settled))
            .order_by_desc(jobs::Column::UpdatedAt),
    };
    select.all(db).await
}

/// Puts a failed or cancelled job back in the queue, due now, its tries counted from 0. `None` when no such
/// job has this id, or a pending job holds its key now.
pub async fn retry(db: &DatabaseConnection, id: &str, now: DateTime<Utc>) -> Result<Option<jobs::Model>, DbErr> {
    let sql = "UPDATE jobs SET status = 'pending', attempts = 0, run_at_ms = $1, claim_token = NULL, \
               updated_at = $2 WHERE id = $3 AND status IN ('failed', 'cancelled') \
               AND (unique_key IS NULL OR NOT EXISTS \
               (SELECT 1 FROM jobs AS other WHERE other.unique_key = jobs.unique_key AND other.status = 'pending'))";
    let values = [now.timestamp_millis().into(), now.into(), id.into()];
    let changed = db
        .execute_raw(Statement::from_sql_and_values(db.get_database_backend(), sql, values))
        .await?;
    if changed.rows_affected() == 0 {
        return Ok(None);
    }
    jobs::Entity::find_by_id(id).one(db).await
}

/// What the service has to do now, with one statement: jobs and webhook deliveries due (waiting past their
/// time on `now_ms`, the service's clock, or held by a lease that ran out on `lease_now_ms`, the clock leases
/// are kept on) and running, and events not yet fanned out.
pub async fn backlog(
    db: &DatabaseConnection,
    now_ms: i64,
    lease_now_ms: i64,
) -> Result<frontdesk_api::admin::v1::Backlog, DbErr> {
    let due = |column: &str| {
        format!("status = 'pending' AND CASE WHEN claim_token IS NULL THEN {column} <= $1 ELSE {column} <= $2 END")
    };
    let sql = format!(
        "SELECT \
        (SELECT COUNT(*) FROM jobs WHERE {jobs_due}), \
        (SELECT COUNT(*) FROM jobs WHERE status = 'pending' AND claim_token IS NOT NULL AND run_at_ms > $2), \
        (SELECT COUNT(*) FROM webhook_deliveries WHERE {deliveries_due}), \
        (SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending' AND claim_token IS NOT NULL \
         AND next_attempt_ms > $2), \
        (SELECT COUNT(*) FROM event_outbox WHERE dispatched_at IS NULL)",
        jobs_due = due("run_at_ms"),
        deliveries_due = due("next_attempt_ms"),
    );
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            sql,
            [now_ms.into(), lease_now_ms.into()],
        ))
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("backlog".into()))?;
    let count = |at: usize| row.try_get_by_index::<i64>(at);
    Ok(frontdesk_api::admin::v1::Backlog {
        jobs_due: count(0)?,
        jobs_running: count(1)?,
        deliveries_due: count(2)?,
        deliveries_running: count(3)?,
        events_undispatched: count(4)?,
    })
}
