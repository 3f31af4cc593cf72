//! What operators see of the queue: its figures, the jobs (failed ones with their last error), and a retry
//! of a failed job.

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    Statement,
};

use crate::{store::entities::jobs, timestamps};

/// A job as the admin API shows it; `now_ms` tells a running job (claimed, lease not over) from a waiting one.
pub fn job_message(job: &jobs::Model, now_ms: i64) -> frontdesk_api::admin::v1::Job {
    let status = match (job.status.as_str(), job.claim_token) {
        ("pending", Some(_)) if job.run_at_ms > now_ms => "running",
        (status, _) => status,
    };
    frontdesk_api::admin::v1::Job {
        id: job.id.clone(),
        account_id: job.account_id.clone(),
        kind: job.kind.clone(),
        status: status.to_owned(),
        attempts: job.attempts,
        max_attempts: job.max_attempts,
        run_at: DateTime::from_timestamp_millis(job.run_at_ms).map(timestamps::to_proto),
        last_error: job.last_error.clone().unwrap_or_default(),
        created_at: Some(timestamps::to_proto(job.created_at)),
        updated_at: Some(timestamps::to_proto(job.updated_at)),
    }
}

/// The queue's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Waiting or running.
    pub pending: i64,
    /// Due now and not running.
    pub due: i64,
    pub failed: i64,
    /// Seconds the oldest due job has waited past its time.
    pub oldest_due_age_seconds: f64,
}

pub async fn stats(db: &DatabaseConnection, now_ms: i64) -> Result<Stats, DbErr> {
    let sql = "SELECT \
        (SELECT COUNT(*) FROM jobs WHERE status = 'pending'), \
        (SELECT COUNT(*) FROM jobs WHERE status = 'pending' AND claim_token IS NULL AND run_at_ms <= $1), \
        (SELECT COUNT(*) FROM jobs WHERE status = 'failed'), \
        (SELECT MIN(run_at_ms) FROM jobs WHERE status = 'pending' AND claim_token IS NULL AND run_at_ms <= $1)";
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            sql,
            [now_ms.into()],
        ))
        .await?;
    let Some(row) = row else {
        return Ok(Stats::default());
    };
    let oldest: Option<i64> = row.try_get_by_index(3)?;
    Ok(Stats {
        pending: row.try_get_by_index(0)?,
        due: row.try_get_by_index(1)?,
        failed: row.try_get_by_index(2)?,
        oldest_due_age_seconds: oldest.map_or(0.0, |at| (now_ms - at).max(0) as f64 / 1000.0),
    })
}

/// Up to `limit` jobs: the failed ones, latest first, when `failed`; else the waiting and running ones by
/// when they run next. `kind` ("" for any) filters.
pub async fn list(db: &DatabaseConnection, failed: bool, kind: &str, limit: u64) -> Result<Vec<jobs::Model>, DbErr> {
    let mut select = jobs::Entity::find().limit(limit);
    if !kind.is_empty() {
        select = select.filter(jobs::Column::Kind.eq(kind));
    }
    select = if failed {
        select
            .filter(jobs::Column::Status.eq("failed"))
            .order_by_desc(jobs::Column::UpdatedAt)
    } else {
        select
            .filter(jobs::Column::Status.eq("pending"))
            .order_by_asc(jobs::Column::RunAtMs)
    };
    select.all(db).await
}

/// Puts a failed job back in the queue, due now, its tries counted from 0. `None` when no failed job has
/// this id.
pub async fn retry(db: &DatabaseConnection, id: &str, now: DateTime<Utc>) -> Result<Option<jobs::Model>, DbErr> {
    let sql = "UPDATE jobs SET status = 'pending', attempts = 0, run_at_ms = $1, claim_token = NULL, \
               updated_at = $2 WHERE id = $3 AND status = 'failed'";
    let values = [now.timestamp_millis().into(), now.into(), id.into()];
    let changed = db
        .execute_raw(Statement::from_sql_and_values(db.get_database_backend(), sql, values))
        .await?;
    if changed.rows_affected() == 0 {
        return Ok(None);
    }
    jobs::Entity::find_by_id(id).one(db).await
}
