//! Leases of the claims this process holds. While an attempt runs and until its result is committed, its
//! lease is renewed, so a lease can be short (a delivery whose worker died runs again soon) without a slow
//! endpoint or a slow commit letting another worker claim a delivery still in hand. At shutdown the claims
//! still held are released, due at once, for the next worker.

use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Statement, Value};

use super::placeholders;

/// Tokens per statement.
const CHUNK: usize = 500;

/// Moves the end of the lease of every delivery claimed with one of `tokens` to `until_ms`.
pub async fn renew(db: &DatabaseConnection, tokens: &[i64], until_ms: i64) -> Result<(), DbErr> {
    set_due(db, tokens, until_ms, false).await
}

/// Gives up the claims of `tokens`: their deliveries are due at `now_ms`, as the same attempt.
pub async fn release(db: &DatabaseConnection, tokens: &[i64], now_ms: i64) -> Result<(), DbErr> {
    set_due(db, tokens, now_ms, true).await
}

async fn set_due(db: &DatabaseConnection, tokens: &[i64], at_ms: i64, release: bool) -> Result<(), DbErr> {
    let clear = if release { ", claim_token = NULL" } else { "" };
    for chunk in tokens.chunks(CHUNK) {
        // Only pending deliveries: one parked while its attempt runs keeps no due time.
        let sql = format!(
            "UPDATE webhook_deliveries SET next_attempt_ms = $1{clear} \
             WHERE status = 'pending' AND claim_token IN ({})",
            placeholders(2, chunk.len())
        );
        let mut values: Vec<Value> = vec![at_ms.into()];
        values.extend(chunk.iter().map(|t| Value::from(*t)));
        db.execute_raw(Statement::from_sql_and_values(db.get_database_backend(), sql, values))
            .await?;
    }
    Ok(())
}
