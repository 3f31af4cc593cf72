//! The retention of settled jobs: failed and cancelled jobs are kept for operators for
//! `FRONTDESK_JOB_RETENTION` after they settled, then deleted, as are the tombstones of groups cancelled
//! as long ago, and dedup keys past their time are forgotten. Settled jobs hold no key (a key binds only
//! pending jobs), so deleting them frees nothing an enqueue waits for.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Statement};

use super::{
    Handler, Job, Outcome,
    recurring::{self, Recurring},
};
use crate::clock::Clock;

/// Rows deleted per statement at most.
const BATCH: u64 = 1_000;

/// Deletes what the retention no longer keeps, a batch a turn: at once again after a full batch, else
/// after a minute (or half the retention, when shorter).
pub struct Retention {
    pub db: DatabaseConnection,
    pub clock: Arc<dyn Clock>,
    pub retention: Duration,
}

impl Recurring for Retention {
    const KIND: &'static str = "job_retention";
}

#[async_trait::async_trait]
impl Handler for Retention {
    async fn run(&self, _job: &Job) -> Outcome {
        let now = self.clock.now();
        let kept = chrono::Duration::from_std(self.retention).unwrap_or(chrono::Duration::MAX);
        // A retention reaching back before 1970 keeps every settled job.
        let cutoff = now.checked_sub_signed(kept).filter(|c| *c > DateTime::UNIX_EPOCH);
        let turn = prune(&self.db, cutoff, now.timestamp_millis()).await.map(|deleted| {
            metrics::counter!("frontdesk_jobs_pruned_total").increment(deleted);
            deleted >= BATCH
        });
        recurring::next_turn(now, turn, (self.retention / 2).min(Duration::from_secs(60)))
    }
}

/// Deletes a batch of jobs settled before `cutoff` and of dedup keys past `now_ms`; the larger count.
pub async fn prune(db: &DatabaseConnection, cutoff: Option<DateTime<Utc>>, now_ms: i64) -> Result<u64, DbErr> {
    let backend = db.get_database_backend();
    let mut jobs = 0;
    if let Some(cutoff) = cutoff {
        let sql = format!(
            "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE status <> 'pending' AND updated_at < $1 \
             ORDER BY updated_at LIMIT {BATCH})"
        );
        jobs = db
            .execute_raw(Statement::from_sql_and_values(backend, sql, [cutoff.into()]))
            .await?
            .rows_affected();
        let sql = format!(
            "DELETE FROM job_group_cancels WHERE group_key IN (SELECT group_key FROM job_group_cancels \
             WHERE cancelled_at < $1 LIMIT {BATCH})"
        );
        jobs += db
            .execute_raw(Statement::from_sql_and_values(backend, sql, [cutoff.into()]))
            .await?
            .rows_affected();
    }
    let sql =
        format!("DELETE FROM job_dedup WHERE key IN (SELECT key FROM job_dedup WHERE until_ms <= $1 LIMIT {BATCH})");
    let keys = db
        .execute_raw(Statement::from_sql_and_values(backend, sql, [now_ms.into()]))
        .await?
        .rows_affected();
    Ok(jobs.max(keys))
}
