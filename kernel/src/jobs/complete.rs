//! Records the outcomes of finished runs, a batch per transaction: for each job still held by the claim that
//! ran it, its effect is written and the job deleted (done), rescheduled (retry, deferred) or kept as failed,
//! all in one commit. A job marked to run again (an enqueue-or-reschedule found it running) is due again at
//! the mark's time, as a fresh run, instead of being deleted or failed. A job whose claim was lost meanwhile
//! (its lease ended and another worker took it, or it was cancelled) is left alone, effect and all: the
//! other worker's run decides, and its id is returned as dropped.

use std::{any::TypeId, collections::HashMap, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, Statement, Value};

use super::{Effect, Job, Outcome, queue::STILL_CLAIMED};
use crate::store::sql::one_of_text;

/// A run that ended, on its way to the recorder.
pub struct Finished {
    pub job: Job,
    pub outcome: Outcome,
}

/// Writes the outcomes of `batch` in one transaction; the ids of those dropped (their claim was lost).
pub async fn record(db: &DatabaseConnection, batch: &[Finished], now: DateTime<Utc>) -> Result<Vec<String>, DbErr> {
    let txn = crate::store::begin_write(db).await?;
    let held = still_held(&txn, batch).await?;
    let mut done = Vec::new();
    let mut dropped = Vec::new();
    let mut effects: Vec<&dyn Effect> = Vec::new();
    for finished in batch {
        let job = &finished.job;
        let Some(rerun_at_ms) = held.get(&(job.id.clone(), job.token)) else {
            dropped.push(job.id.clone());
            continue;
        };
        // A run-again mark takes effect when this run ends the job (done, failed, or out of tries).
        let ends = match &finished.outcome {
            Outcome::Done(_) | Outcome::Fail { .. } => true,
            Outcome::Retry { .. } => job.is_last_attempt(),
            Outcome::Defer { .. } | Outcome::Paced { .. } => false,
        };
        match (&finished.outcome, rerun_at_ms.filter(|_| ends)) {
            (outcome, Some(rerun_at_ms)) => {
                if let Outcome::Done(effect) | Outcome::Fail { effect, .. } = outcome {
                    effects.extend(effect.as_deref());
                }
                if let Outcome::Fail { error, .. } | Outcome::Retry { error, .. } = outcome {
                    tracing::warn!(
                        job = job.id,
                        kind = job.kind,
                        error,
                        "job failed; it runs again as it was marked to"
                    );
                }
                let sql = "UPDATE jobs SET attempts = 0, run_at_ms = $1, claim_token = NULL, rerun_at_ms = NULL, \
                           unfinished_runs = 0, updated_at = $2 WHERE id = $3";
                execute(&txn, sql, vec![rerun_at_ms.into(), now.into(), job.id.as_str().into()]).await?;
            }
            (Outcome::Done(effect), None) => {
                effects.extend(effect.as_deref());
                done.push(job.id.as_str());
            }
            (Outcome::Fail { error, effect }, None) => {
                effects.extend(effect.as_deref());
                fail(&txn, job, error, now).await?;
            }
            (Outcome::Retry { error, .. }, None) if job.is_last_attempt() => fail(&txn, job, error, now).await?,
            (Outcome::Retry { error, after }, _) => {
                let run_at = now.timestamp_millis() + millis(*after);
                let sql = "UPDATE jobs SET attempts = attempts + 1, run_at_ms = $1, claim_token = NULL, \
                           unfinished_runs = 0, last_error = $2, updated_at = $3 WHERE id = $4";
                execute(
                    &txn,
                    sql,
                    vec![run_at.into(), error.as_str().into(), now.into(), job.id.as_str().into()],
                )
                .await?;
            }
            (Outcome::Defer { until_ms } | Outcome::Paced { until_ms }, _) => {
                let sql = "UPDATE jobs SET run_at_ms = $1, claim_token = NULL, unfinished_runs = 0, updated_at = $2 \
                           WHERE id = $3";
                execute(&txn, sql, vec![(*until_ms).into(), now.into(), job.id.as_str().into()]).await?;
            }
        }
    }
    write_effects(&txn, &effects, now).await?;
    if !done.is_empty() {
        let ids = done.into_iter().map(str::to_owned).collect();
        let (which, values) = one_of_text(txn.get_database_backend(), "id", 1, ids);
        execute(&txn, &format!("DELETE FROM jobs WHERE {which}"), values).await?;
    }
    txn.commit().await?;
    Ok(dropped)
}

/// Writes the effects, each type's together, types in the order they first appear.
async fn write_effects(txn: &DatabaseTransaction, effects: &[&dyn Effect], now: DateTime<Utc>) -> Result<(), DbErr> {
    let mut types: Vec<TypeId> = Vec::new();
    for effect in effects {
        let id = effect.as_any().type_id();
        if !types.contains(&id) {
            types.push(id);
        }
    }
    for id in types {
        let alike: Vec<&dyn Effect> = effects.iter().copied().filter(|e| e.as_any().type_id() == id).collect();
        alike[0].write_all(&alike, txn, now).await?;
    }
    Ok(())
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 4)
}

async fn fail(txn: &DatabaseTransaction, job: &Job, error: &str, now: DateTime<Utc>) -> Result<(), DbErr> {
    tracing::warn!(
        job = job.id,
        kind = job.kind,
        attempts = job.attempt,
        error,
        "job failed for good"
    );
    metrics::counter!("frontdesk_jobs_failed_total", "kind" => job.kind.clone(), "class" => job.class.label())
        .increment(1);
    let sql = "UPDATE jobs SET status = 'failed', attempts = attempts + 1, claim_token = NULL, last_error = $1, \
               rerun_at_ms = NULL, unfinished_runs = 0, updated_at = $2 WHERE id = $3";
    execute(txn, sql, vec![error.into(), now.into(), job.id.as_str().into()]).await
}

/// The read of `still_held`, by primary key only (`STILL_CLAIMED`).
pub(super) fn still_held_statement(backend: DbBackend, ids: Vec<String>) -> Statement {
    let lock = match backend {
        // In id order, as every statement that locks jobs (`lease::set_due`, a cancel).
        DbBackend::Postgres => " ORDER BY id FOR UPDATE",
        _ => "",
    };
    let (which, values) = one_of_text(backend, "id", 1, ids);
    let sql = format!("SELECT id, claim_token, rerun_at_ms FROM jobs WHERE {which} AND {STILL_CLAIMED}{lock}");
    Statement::from_sql_and_values(backend, sql, values)
}

/// The (id, token) pairs of the batch that still carry their claim, with their run-again marks, locked until
/// the commit on PostgreSQL so no other worker's release or claim, and no enqueue's mark, slips in between.
async fn still_held(
    txn: &DatabaseTransaction,
    batch: &[Finished],
) -> Result<HashMap<(String, i64), Option<i64>>, DbErr> {
    let ids = batch.iter().map(|f| f.job.id.clone()).collect();
    let rows = txn
        .query_all_raw(still_held_statement(txn.get_database_backend(), ids))
        .await?;
    rows.iter()
        .map(|row| {
            Ok((
                (row.try_get_by_index(0)?, row.try_get_by_index(1)?),
                row.try_get_by_index(2)?,
            ))
        })
        .collect()
}

async fn execute(txn: &DatabaseTransaction, sql: &str, values: Vec<Value>) -> Result<(), DbErr> {
    txn.execute_raw(Statement::from_sql_and_values(txn.get_database_backend(), sql, values))
        .await?;
    Ok(())
}
