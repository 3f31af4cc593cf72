//! Writing jobs, in the caller's transaction: one statement for any number of jobs (an array per column on
//! PostgreSQL, so its plan is reused; a multi-row `VALUES` on SQLite). A job's `unique_key` binds while it is
//! pending; what a second enqueue with a taken key does is its `OnConflict`. A `Dedup` key is taken first,
//! in the same transaction, and holds until its time whether or not the job still exists.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement, Value};

use super::{NewJob, OnConflict};

/// What an enqueue did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Enqueued {
    /// A new job, with this id.
    Written(String),
    /// A pending job already held the key: it was rescheduled, or marked to run again (`Reschedule`).
    Rescheduled(String),
    /// Nothing was written: the key's job stays as it is (`Keep`), or the dedup key is taken.
    Skipped,
}

impl Enqueued {
    /// The id of the job that will run for this enqueue, unless it was skipped.
    pub fn id(&self) -> Option<&str> {
        match self {
            Self::Written(id) | Self::Rescheduled(id) => Some(id),
            Self::Skipped => None,
        }
    }
}

/// Writes `job` on `db` (a transaction, so it commits with the change that caused it).
pub async fn enqueue(db: &impl ConnectionTrait, job: NewJob, now: DateTime<Utc>) -> Result<Enqueued, DbErr> {
    if let Some(dedup) = &job.dedup
        && !take_dedup(db, &dedup.key, dedup.until_ms, now.timestamp_millis()).await?
    {
        return Ok(Enqueued::Skipped);
    }
    let id = new_id();
    let mode = job.on_conflict;
    let rows = db
        .query_all_raw(statement(db.get_database_backend(), mode, vec![(id.clone(), job)], now))
        .await?;
    let Some(row) = rows.first() else {
        return Ok(Enqueued::Skipped);
    };
    let written: String = row.try_get_by_index(0)?;
    Ok(if written == id {
        Enqueued::Written(id)
    } else {
        Enqueued::Rescheduled(written)
    })
}

/// PostgreSQL: the statement `enqueue_all` runs for jobs without keys or dedup, for a caller that runs it
/// with other writes (`store::sql::together`).
pub fn insert_statement(jobs: Vec<NewJob>, now: DateTime<Utc>) -> Statement {
    statement(
        DbBackend::Postgres,
        OnConflict::Keep,
        jobs.into_iter().map(|job| (new_id(), job)).collect(),
        now,
    )
}

/// Writes several jobs, one statement per conflict mode (a batch of sends' deliveries is one).
pub async fn enqueue_all(db: &impl ConnectionTrait, jobs: Vec<NewJob>, now: DateTime<Utc>) -> Result<(), DbErr> {
    let mut by_mode: Vec<(OnConflict, Vec<(String, NewJob)>)> = Vec::new();
    for job in jobs {
        if let Some(dedup) = &job.dedup
            && !take_dedup(db, &dedup.key, dedup.until_ms, now.timestamp_millis()).await?
        {
            continue;
        }
        let mode = job.on_conflict;
        let at = match by_mode.iter().position(|(m, _)| *m == mode) {
            Some(at) => at,
            None => {
                by_mode.push((mode, Vec::new()));
                by_mode.len() - 1
            }
        };
        let batch = &mut by_mode[at].1;
        // One statement may not touch a row twice: of jobs sharing a key, the last one is written.
        if let Some(key) = &job.unique_key {
            batch.retain(|(_, other)| other.unique_key.as_ref() != Some(key));
        }
        batch.push((new_id(), job));
    }
    let backend = db.get_database_backend();
    for (mode, mut batch) in by_mode {
        if batch.is_empty() {
            continue;
        }
        if backend == DbBackend::Postgres {
            lock_taken_keys(db, mode, &mut batch).await?;
        }
        db.execute_raw(statement(backend, mode, batch, now)).await?;
    }
    Ok(())
}

/// PostgreSQL: a batch's jobs are written in key order, and with `Reschedule` the pending jobs already holding
/// their keys are locked first, in id order, as every statement that locks jobs locks them (`lease`, the
/// recorder, a cancel). In the batch's own order (an inbound batch's reply jobs, one per conversation) a
/// batch and a lease renewal or recording of the same running jobs waited for each other in a circle.
async fn lock_taken_keys(
    db: &impl ConnectionTrait,
    mode: OnConflict,
    batch: &mut [(String, NewJob)],
) -> Result<(), DbErr> {
    batch.sort_by(|(_, a), (_, b)| a.unique_key.cmp(&b.unique_key));
    let keys: Vec<String> = batch.iter().filter_map(|(_, job)| job.unique_key.clone()).collect();
    if mode != OnConflict::Reschedule || keys.len() < 2 {
        return Ok(());
    }
    let sql = "SELECT id FROM jobs WHERE unique_key IS NOT NULL AND unique_key = ANY($1) AND status = 'pending' \
               ORDER BY id FOR UPDATE";
    db.execute_raw(Statement::from_sql_and_values(DbBackend::Postgres, sql, [keys.into()]))
        .await?;
    Ok(())
}

fn new_id() -> String {
    crate::ids::new_id(crate::ids::Kind::Job)
}

/// Takes the dedup key until `until_ms`, unless it is held past `now_ms`; whether it was taken.
async fn take_dedup(db: &impl ConnectionTrait, key: &str, until_ms: i64, now_ms: i64) -> Result<bool, DbErr> {
    let sql = "INSERT INTO job_dedup (key, until_ms) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE \
               SET until_ms = excluded.until_ms WHERE job_dedup.until_ms <= $3 RETURNING key";
    let taken = db
        .query_one_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            sql,
            [key.into(), until_ms.into(), now_ms.into()],
        ))
        .await?;
    Ok(taken.is_some())
}

/// What a taken key does, as the statement's conflict clause (the target names the partial unique index).
fn on_conflict(mode: OnConflict) -> &'static str {
    match mode {
        OnConflict::Keep => {
            " ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND status = 'pending' DO NOTHING RETURNING id"
        }
        // A claimed job keeps its lease (its due time) and payload, and is marked to run again.
        OnConflict::Reschedule => {
            " ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND status = 'pending' DO UPDATE SET \
             run_at_ms = CASE WHEN jobs.claim_token IS NULL THEN excluded.run_at_ms ELSE jobs.run_at_ms END, \
             payload = CASE WHEN jobs.claim_token IS NULL THEN excluded.payload ELSE jobs.payload END, \
             rerun_at_ms = CASE WHEN jobs.claim_token IS NULL THEN NULL ELSE excluded.run_at_ms END, \
             updated_at = excluded.updated_at RETURNING id"
        }
    }
}

const COLUMNS: &str = "INSERT INTO jobs (id, account_id, kind, class, lane, payload, status, attempts, max_attempts, \
    run_at_ms, claim_token, last_error, unique_key, group_key, trace_parent, created_at, updated_at)";

fn statement(backend: DbBackend, mode: OnConflict, jobs: Vec<(String, NewJob)>, now: DateTime<Utc>) -> Statement {
    match backend {
        DbBackend::Postgres => insert_arrays(mode, jobs, now),
        _ => insert_values(backend, mode, jobs, now),
    }
}

/// PostgreSQL: one array per column, so the statement reads the same for any number of jobs and its plan is
/// reused. An absent `unique_key` or group is sent as `''` and stored as NULL.
fn insert_arrays(mode: OnConflict, jobs: Vec<(String, NewJob)>, now: DateTime<Utc>) -> Statement {
    let sql = format!(
        "{COLUMNS} SELECT id, account_id, kind, class, lane, payload, 'pending', 0, max_attempts, run_at_ms, NULL, \
         NULL, NULLIF(unique_key, ''), NULLIF(group_key, ''), NULLIF(trace_parent, ''), $12, $12 \
         FROM unnest($1::text[], $2::text[], $3::text[], $4::int4[], $5::text[], $6::text[], $7::int4[], \
         $8::int8[], $9::text[], $10::text[], $11::text[]) \
         AS new(id, account_id, kind, class, lane, payload, max_attempts, run_at_ms, unique_key, group_key, \
         trace_parent){}",
        on_conflict(mode)
    );
    let n = jobs.len();
    let mut text: [Vec<String>; 8] = std::array::from_fn(|_| Vec::with_capacity(n));
    let (mut classes, mut max_attempts, mut run_at_ms) =
        (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    for (id, job) in jobs {
        let [ids, accounts, kinds, lanes, payloads, keys, groups, traces] = &mut text;
        ids.push(id);
        accounts.push(job.account_id);
        kinds.push(job.kind.to_owned());
        lanes.push(job.lane);
        payloads.push(job.payload.to_string());
        keys.push(job.unique_key.unwrap_or_default());
        groups.push(job.group.unwrap_or_default());
        traces.push(job.trace_parent.unwrap_or_default());
        classes.push(job.class.code());
        max_attempts.push(job.max_attempts.max(1));
        run_at_ms.push(job.run_at_ms);
    }
    let [ids, accounts, kinds, lanes, payloads, keys, groups, traces] = text;
    let values: Vec<Value> = vec![
        ids.into(),
        accounts.into(),
        kinds.into(),
        classes.into(),
        lanes.into(),
        payloads.into(),
        max_attempts.into(),
        run_at_ms.into(),
        keys.into(),
        groups.into(),
        traces.into(),
        now.into(),
    ];
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// SQLite: a multi-row `VALUES`.
fn insert_values(backend: DbBackend, mode: OnConflict, jobs: Vec<(String, NewJob)>, now: DateTime<Utc>) -> Statement {
    const VALUES_PER_JOB: usize = 11;
    let mut rows = Vec::with_capacity(jobs.len());
    let mut values: Vec<Value> = Vec::with_capacity(jobs.len() * VALUES_PER_JOB + 1);
    // `now` is the last placeholder, shared by every row.
    let now_placeholder = jobs.len() * VALUES_PER_JOB + 1;
    for (n, (id, job)) in jobs.into_iter().enumerate() {
        let p = |k: usize| format!("${}", n * VALUES_PER_JOB + k);
        rows.push(format!(
            "({}, {}, {}, {}, {}, {}, 'pending', 0, {}, {}, NULL, NULL, {}, {}, {}, ${now_placeholder}, ${now_placeholder})",
            p(1),
            p(2),
            p(3),
            p(4),
            p(5),
            p(6),
            p(7),
            p(8),
            p(9),
            p(10),
            p(11)
        ));
        values.extend([
            id.into(),
            job.account_id.into(),
            job.kind.into(),
            job.class.code().into(),
            job.lane.into(),
            job.payload.to_string().into(),
            job.max_attempts.max(1).into(),
            job.run_at_ms.into(),
            job.unique_key.into(),
            job.group.into(),
            job.trace_parent.into(),
        ]);
    }
    values.push(now.into());
    let sql = format!("{COLUMNS} VALUES {}{}", rows.join(", "), on_conflict(mode));
    Statement::from_sql_and_values(backend, sql, values)
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use sea_orm::{ConnectionTrait, DbBackend, Statement, TransactionTrait};

    use super::enqueue_all;
    use crate::{
        jobs::{NewJob, OnConflict, lease, runner::JOBS},
        store::test_databases::{Kind, TestDb, execute, queued_behind_a_lock},
    };

    /// A lease renewal of two running jobs and an enqueue that marks both to run again (two reply jobs of
    /// an inbound batch), forced into the interleaving that deadlocks when the two lock rows in different
    /// orders: the renewal queues first for the lower id (held by the test), then the enqueue queues for it
    /// too (one that locked in its batch's order holds the other job by then); when the test lets go, the
    /// renewal goes on up the ids. The batch's order is the reverse of the jobs' ids.
    #[tokio::test]
    async fn an_enqueue_rescheduling_running_jobs_beside_their_renewal_does_not_deadlock() {
        const TOKEN: i64 = 42;
        let test = TestDb::new(Kind::Postgres, 4).await;
        let db = &test.db;
        let running = |id: &str, key: &str| {
            format!(
                "('{id}', 'acc_a', 'reply', '', '{{}}', 'pending', 0, 3, 9000000000000, {TOKEN}, '{key}', 0, 1, now(), now())"
            )
        };
        let insert = format!(
            "INSERT INTO jobs (id, account_id, kind, lane, payload, status, attempts, max_attempts, run_at_ms, \
             claim_token, unique_key, class, unfinished_runs, created_at, updated_at) VALUES {}, {}",
            running("job_1", "reply:b"),
            running("job_2", "reply:a")
        );
        execute(db, &insert).await;
        let renewal = {
            let db = db.clone();
            async move { lease::renew(&db, &JOBS, &[TOKEN], 5_000).await }
        };
        let enqueue = {
            let db = db.clone();
            async move {
                let jobs: Vec<NewJob> = ["reply:a", "reply:b"]
                    .into_iter()
                    .map(|key| NewJob {
                        account_id: "acc_a".into(),
                        kind: "reply",
                        unique_key: Some(key.into()),
                        on_conflict: OnConflict::Reschedule,
                        run_at_ms: Utc::now().timestamp_millis(),
                        ..NewJob::default()
                    })
                    .collect();
                #[allow(clippy::disallowed_methods)] // the caller's transaction an enqueue runs in
                let txn = db.begin().await?;
                enqueue_all(&txn, jobs, Utc::now()).await?;
                txn.commit().await
            }
        };
        let held = "SELECT id FROM jobs WHERE id = 'job_1' FOR UPDATE";
        let (renewed, enqueued) = queued_behind_a_lock(db, held, renewal, enqueue).await;
        let renewed = renewed.expect("the renewal is not ended as a deadlock's victim");
        enqueued.expect("the enqueue is not ended as a deadlock's victim");
        assert_eq!(renewed.len(), 2, "the renewal went first and held both jobs");
        let marked = "SELECT COUNT(*) FROM jobs WHERE rerun_at_ms IS NOT NULL";
        let row = db
            .query_one_raw(Statement::from_string(DbBackend::Postgres, marked))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            row.try_get_by_index::<i64>(0).unwrap(),
            2,
            "both running jobs are marked to run again"
        );
        test.remove().await;
    }
}
