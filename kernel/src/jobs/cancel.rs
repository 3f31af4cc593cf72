//! Cancelling jobs by id, by key or by group (a broadcast's sends), in bulk: each chunk of pending jobs is
//! marked `cancelled` with one statement, and each kind's handler settles what its cancelled jobs stood for
//! (a queued message fails with `cancelled`) in the same transaction, until no pending job is left (a chunk
//! cut short by jobs finishing meanwhile does not end it). A group's cancel leaves a tombstone first: a job
//! enqueued into the group afterwards is cancelled when it is claimed, instead of run. A waiting job never
//! runs; a running one makes no effect after the cancel returned (the claim guard finds it cancelled) and
//! is stopped at its worker's next lease renewal, and an outcome it reaches is dropped. Cancelled jobs
//! release their key at once and are kept, like failed ones, until the retention deletes them.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbErr, QueryResult, Statement, Value};

use super::{Abandoned, Class, Handlers, complete::still_held_statement, queue::STILL_PENDING};
use crate::store::sql::{among, one_of_text};

/// Jobs cancelled per transaction.
const CHUNK: u64 = 5_000;

/// Which jobs to cancel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    Id(String),
    /// The pending job holding this `unique_key`.
    Key(String),
    /// Every pending job of the group, and every job enqueued into it later.
    Group(String),
}

/// Cancels the pending jobs `which` selects (only `account`'s, when given); how many.
pub async fn cancel(
    db: &DatabaseConnection,
    handlers: &Handlers,
    which: &Selector,
    account: Option<&str>,
    now: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let backend = db.get_database_backend();
    let (column, value) = match which {
        Selector::Id(id) => ("id", id),
        Selector::Key(key) => ("unique_key", key),
        Selector::Group(group) => ("group_key", group),
    };
    if let Selector::Group(group) = which {
        tombstone(db, group, account.unwrap_or(""), now).await?;
    }
    let mut values: Vec<Value> = vec![now.into(), value.as_str().into()];
    let mut condition = format!("status = 'pending' AND {column} = $2");
    if let Some(account) = account {
        condition.push_str(" AND account_id = $3");
        values.push(account.into());
    }
    // Locked in id order, as every statement that locks jobs (`lease::set_due`, the recorder).
    let lock = match backend {
        sea_orm::DbBackend::Postgres => " FOR UPDATE",
        _ => "",
    };
    let chosen = among(
        backend,
        "id",
        &format!("SELECT id FROM jobs WHERE {condition} ORDER BY id LIMIT {CHUNK}{lock}"),
    );
    let sql = format!(
        "UPDATE jobs SET status = 'cancelled', claim_token = NULL, rerun_at_ms = NULL, last_error = 'cancelled', \
         updated_at = $1 WHERE {chosen} AND status = 'pending' RETURNING kind, payload"
    );
    let mut cancelled = 0;
    loop {
        let txn = crate::store::begin_write(db).await?;
        let rows = txn
            .query_all_raw(Statement::from_sql_and_values(backend, sql.clone(), values.clone()))
            .await?;
        abandon(&txn, handlers, &rows, Abandoned::Cancelled, now).await?;
        txn.commit().await?;
        cancelled += rows.len() as u64;
        if rows.is_empty() {
            break;
        }
    }
    if cancelled > 0 {
        metrics::counter!("frontdesk_jobs_cancelled_total").increment(cancelled);
        tracing::info!(?which, cancelled, "jobs cancelled");
    }
    Ok(cancelled)
}

/// Marks the group cancelled for `account` ("": every account), before its jobs are.
async fn tombstone(db: &DatabaseConnection, group: &str, account: &str, now: DateTime<Utc>) -> Result<(), DbErr> {
    let sql = "INSERT INTO job_group_cancels (group_key, account_id, cancelled_at) VALUES ($1, $2, $3) \
               ON CONFLICT (group_key, account_id) DO NOTHING";
    db.execute_raw(Statement::from_sql_and_values(
        db.get_database_backend(),
        sql,
        [group.into(), account.into(), now.into()],
    ))
    .await?;
    Ok(())
}

/// Of claimed jobs (id, account, group), those whose group was cancelled for their account or for all.
pub(super) async fn tombstoned(
    db: &DatabaseConnection,
    grouped: &[(String, String, String)],
) -> Result<HashSet<String>, DbErr> {
    if grouped.is_empty() {
        return Ok(HashSet::new());
    }
    let backend = db.get_database_backend();
    let groups: HashSet<String> = grouped.iter().map(|(_, _, group)| group.clone()).collect();
    let (which, values) = one_of_text(backend, "group_key", 1, groups.into_iter().collect());
    let sql = format!("SELECT group_key, account_id FROM job_group_cancels WHERE {which}");
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?;
    let mut cancels = HashSet::new();
    for row in rows {
        cancels.insert((row.try_get_by_index::<String>(0)?, row.try_get_by_index::<String>(1)?));
    }
    Ok(grouped
        .iter()
        .filter(|(_, account, group)| {
            cancels.contains(&(group.clone(), String::new())) || cancels.contains(&(group.clone(), account.clone()))
        })
        .map(|(id, _, _)| id.clone())
        .collect())
}

/// Ends jobs a claim (`token`) took instead of running them, each list for its reason: failed when their
/// runs kept crashing, cancelled when their group was; what they stood for is settled in the same
/// transaction.
pub(super) async fn end_claimed(
    db: &DatabaseConnection,
    handlers: &Handlers,
    ended: &[(Vec<String>, Abandoned)],
    token: i64,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let backend = db.get_database_backend();
    let txn = crate::store::begin_write(db).await?;
    // Every row locked first, in id order, as a cancel of the same group locks them: updated in each
    // statement's plan order (the claim token's index gives the table's order), a claim's cancelled jobs
    // and the cancel's chunk waited for each other. SQLite has one writer at a time and no row locks.
    if backend == sea_orm::DbBackend::Postgres {
        let all: Vec<String> = ended.iter().flat_map(|(ids, _)| ids.iter().cloned()).collect();
        txn.query_all_raw(still_held_statement(backend, all)).await?;
    }
    for (ids, why) in ended.iter().filter(|(ids, _)| !ids.is_empty()) {
        let status = match why {
            Abandoned::Cancelled => "cancelled",
            Abandoned::Crashed => "failed",
        };
        let (which, ids) = one_of_text(backend, "id", 5, ids.clone());
        let mut values: Vec<Value> = vec![status.into(), why.code().into(), now.into(), token.into()];
        values.extend(ids);
        let sql = format!(
            "UPDATE jobs SET status = $1, claim_token = NULL, rerun_at_ms = NULL, last_error = $2, \
             unfinished_runs = 0, updated_at = $3 WHERE {which} AND claim_token = $4 AND {STILL_PENDING} \
             RETURNING kind, payload, class"
        );
        let rows = txn
            .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?;
        abandon(&txn, handlers, &rows, *why, now).await?;
        let counter = match why {
            Abandoned::Cancelled => "frontdesk_jobs_cancelled_total",
            Abandoned::Crashed => "frontdesk_jobs_crashed_total",
        };
        metrics::counter!(counter).increment(rows.len() as u64);
        if *why == Abandoned::Crashed {
            for row in &rows {
                let (kind, class): (String, i32) = (row.try_get_by_index(0)?, row.try_get_by_index(2)?);
                metrics::counter!("frontdesk_jobs_failed_total", "kind" => kind, "class" => Class::from_code(class).label())
                    .increment(1);
            }
            tracing::error!(
                jobs = rows.len(),
                "jobs failed: every run of theirs ended with its worker's crash"
            );
        }
    }
    txn.commit().await
}

/// Settles what ended jobs stood for (`rows`: their kind, then payload), each kind by its handler, in
/// the transaction that ended them.
pub(super) async fn abandon(
    txn: &DatabaseTransaction,
    handlers: &Handlers,
    rows: &[QueryResult],
    why: Abandoned,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let mut by_kind: Vec<(String, Vec<String>)> = Vec::new();
    for row in rows {
        let kind: String = row.try_get_by_index(0)?;
        let payload: String = row.try_get_by_index(1)?;
        match by_kind.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, payloads)) => payloads.push(payload),
            None => by_kind.push((kind, vec![payload])),
        }
    }
    for (kind, payloads) in &by_kind {
        if let Some(handler) = handlers.get(kind) {
            handler.abandoned(txn, payloads, why, now).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::{Selector, cancel, end_claimed};
    use crate::{
        jobs::{Abandoned, Handlers},
        store::test_databases::{Kind, TestDb, execute, queued_behind_a_lock},
    };

    /// A group's cancel and the end of a claim's jobs of that group (claimed after the cancel's tombstone),
    /// forced into the interleaving that deadlocks when the two lock rows in different orders: the cancel
    /// queues first for the lowest id (held by the test), then the claim's end queues for it too (one that
    /// locked in its plan's order holds the rest by then); when the test lets go, the cancel goes on up the
    /// ids. The jobs lie in the table in the reverse of id order, beside many others, analysed, so a plan
    /// reads them through an index rather than in id order.
    #[tokio::test]
    async fn a_claims_cancelled_jobs_ended_beside_the_groups_cancel_do_not_deadlock() {
        const TOKEN: i64 = 42;
        let test = TestDb::new(Kind::Postgres, 4).await;
        let db = &test.db;
        let insert = |ids: &str, status: &str, token: &str, group: &str| {
            format!(
                "INSERT INTO jobs (id, account_id, kind, lane, payload, status, attempts, max_attempts, run_at_ms, \
                 claim_token, class, group_key, unfinished_runs, created_at, updated_at) \
                 SELECT id, 'acc_a', 'broadcast_send', 'ch_1', '{{}}', '{status}', 0, 3, 0, {token}, 1, {group}, 0, \
                 now(), now() FROM ({ids}) AS j(id)"
            )
        };
        let others = "SELECT 'job_old_' || g FROM generate_series(1, 20000) AS g";
        execute(db, &insert(others, "succeeded", "NULL", "NULL")).await;
        let claimed = "SELECT 'job_' || lpad(g::text, 3, '0') FROM generate_series(49, 0, -1) AS g";
        execute(db, &insert(claimed, "pending", &TOKEN.to_string(), "'bc_1'")).await;
        execute(db, "ANALYZE jobs").await;
        let cancelling = {
            let db = db.clone();
            async move {
                let which = Selector::Group("bc_1".into());
                cancel(&db, &Handlers::default(), &which, Some("acc_a"), Utc::now()).await
            }
        };
        let ending = {
            let db = db.clone();
            async move {
                let ids: Vec<String> = (0..50).rev().map(|n| format!("job_{n:03}")).collect();
                let ended = [(ids, Abandoned::Cancelled)];
                end_claimed(&db, &Handlers::default(), &ended, TOKEN, Utc::now()).await
            }
        };
        let held = "SELECT id FROM jobs WHERE id = 'job_000' FOR UPDATE";
        let (cancelled, ended) = queued_behind_a_lock(db, held, cancelling, ending).await;
        let cancelled = cancelled.expect("the cancel is not ended as a deadlock's victim");
        ended.expect("the claim's end is not ended as a deadlock's victim");
        assert_eq!(cancelled, 50, "the cancel went first and ended every job");
        test.remove().await;
    }
}
