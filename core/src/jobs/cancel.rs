//! Cancelling jobs by id, by key or by group (a broadcast's sends), in bulk: each chunk of pending jobs is
//! marked `cancelled` with one statement, and each kind's handler settles what its cancelled jobs stood for
//! (a queued message fails with `cancelled`) in the same transaction. A waiting job never runs; a running
//! one is stopped at its worker's next lease renewal (within a third of the lease), and an outcome it
//! reaches before that is dropped. Cancelled jobs release their key at once and are kept, like failed
//! ones, until the retention deletes them.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Statement, Value};

use super::Handlers;
use crate::store::sql::among;

/// Jobs cancelled per transaction.
const CHUNK: u64 = 5_000;

/// Which jobs to cancel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    Id(String),
    /// The pending job holding this `unique_key`.
    Key(String),
    /// Every pending job of the group.
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
    let mut values: Vec<Value> = vec![now.into(), value.as_str().into()];
    let mut condition = format!("status = 'pending' AND {column} = $2");
    if let Some(account) = account {
        condition.push_str(" AND account_id = $3");
        values.push(account.into());
    }
    let chosen = among(
        backend,
        "id",
        &format!("SELECT id FROM jobs WHERE {condition} LIMIT {CHUNK}"),
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
        let mut by_kind: Vec<(String, Vec<String>)> = Vec::new();
        for row in &rows {
            let kind: String = row.try_get_by_index(0)?;
            let payload: String = row.try_get_by_index(1)?;
            match by_kind.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, payloads)) => payloads.push(payload),
                None => by_kind.push((kind, vec![payload])),
            }
        }
        for (kind, payloads) in &by_kind {
            if let Some(handler) = handlers.get(kind) {
                handler.cancelled(&txn, payloads, now).await?;
            }
        }
        txn.commit().await?;
        cancelled += rows.len() as u64;
        if (rows.len() as u64) < CHUNK {
            break;
        }
    }
    if cancelled > 0 {
        metrics::counter!("frontdesk_jobs_cancelled_total").increment(cancelled);
        tracing::info!(?which, cancelled, "jobs cancelled");
    }
    Ok(cancelled)
}
