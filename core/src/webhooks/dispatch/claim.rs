//! Claims due deliveries for this worker. The claim moves `next_attempt_ms` to the end of a lease and counts
//! the attempt, in one statement (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so replicas claim disjoint rows);
//! a delivery whose worker dies is due again when its lease ends.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Statement};

use super::placeholders;

/// One claimed delivery with everything its attempt needs.
#[derive(Clone, Debug)]
pub struct Claimed {
    pub delivery_id: String,
    pub webhook_id: String,
    /// This attempt's number; the result is written only while the delivery still carries it.
    pub attempt: i32,
    pub url: String,
    pub secret: String,
    pub event_id: String,
    pub event_type: String,
    pub payload: String,
    pub event_at: DateTime<Utc>,
}

pub async fn claim(db: &DatabaseConnection, limit: usize, now_ms: i64, lease_ms: i64) -> Result<Vec<Claimed>, DbErr> {
    let backend = db.get_database_backend();
    let lock = super::skip_locked(backend);
    let sql = format!(
        "UPDATE webhook_deliveries SET next_attempt_ms = $1, attempt_count = attempt_count + 1 WHERE id IN \
         (SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_ms <= $2 \
         ORDER BY next_attempt_ms LIMIT $3{lock}) RETURNING id"
    );
    let claimed = db
        .query_all_raw(Statement::from_sql_and_values(
            backend,
            sql,
            [(now_ms + lease_ms).into(), now_ms.into(), (limit as i64).into()],
        ))
        .await?;
    if claimed.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = claimed
        .iter()
        .map(|row| row.try_get_by_index(0))
        .collect::<Result<_, _>>()?;
    let sql = format!(
        "SELECT d.id, d.webhook_id, d.attempt_count, w.url, w.secret, e.id, e.event_type, e.payload, e.created_at \
         FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id JOIN event_outbox e ON e.id = d.event_id \
         WHERE d.id IN ({})",
        placeholders(1, ids.len())
    );
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            backend,
            sql,
            ids.into_iter().map(Into::into),
        ))
        .await?;
    rows.iter()
        .map(|row| {
            Ok(Claimed {
                delivery_id: row.try_get_by_index(0)?,
                webhook_id: row.try_get_by_index(1)?,
                attempt: row.try_get_by_index(2)?,
                url: row.try_get_by_index(3)?,
                secret: row.try_get_by_index(4)?,
                event_id: row.try_get_by_index(5)?,
                event_type: row.try_get_by_index(6)?,
                payload: row.try_get_by_index(7)?,
                event_at: row.try_get_by_index(8)?,
            })
        })
        .collect()
}
