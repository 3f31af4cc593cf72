//! Leases of claimed work-queue rows (webhook deliveries, jobs). A claim stamps its rows with a token and
//! moves their due time to the end of a lease; while the work runs and until its result is committed the
//! lease is renewed, so a lease can be short (work whose worker died runs again soon) without slow work
//! letting another worker claim it. At shutdown the claims still held are released, due at once.

use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Statement, Value};

use super::sql::placeholders;

/// Tokens per statement.
const CHUNK: usize = 500;

/// A work-queue table: rows with `status`, `claim_token` and a due-time column in Unix milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct Queue {
    pub table: &'static str,
    pub due_column: &'static str,
}

/// Moves the end of the lease of every pending row claimed with one of `tokens` to `until_ms`.
pub async fn renew(db: &DatabaseConnection, queue: Queue, tokens: &[i64], until_ms: i64) -> Result<(), DbErr> {
    set_due(db, queue, tokens, until_ms, false).await
}

/// Gives up the claims of `tokens`: their rows are due at `now_ms`, with no try spent.
pub async fn release(db: &DatabaseConnection, queue: Queue, tokens: &[i64], now_ms: i64) -> Result<(), DbErr> {
    set_due(db, queue, tokens, now_ms, true).await
}

async fn set_due(
    db: &DatabaseConnection,
    queue: Queue,
    tokens: &[i64],
    at_ms: i64,
    release: bool,
) -> Result<(), DbErr> {
    let clear = if release { ", claim_token = NULL" } else { "" };
    let Queue { table, due_column } = queue;
    for chunk in tokens.chunks(CHUNK) {
        // Only pending rows: one settled (or parked) while its work runs keeps no due time.
        let sql = format!(
            "UPDATE {table} SET {due_column} = $1{clear} WHERE status = 'pending' AND claim_token IN ({})",
            placeholders(2, chunk.len())
        );
        let mut values: Vec<Value> = vec![at_ms.into()];
        values.extend(chunk.iter().map(|t| Value::from(*t)));
        db.execute_raw(Statement::from_sql_and_values(db.get_database_backend(), sql, values))
            .await?;
    }
    Ok(())
}
