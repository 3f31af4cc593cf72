//! Claimed deliveries as their attempts need them: each with its subscription's URL and signing secret and
//! its event, read with one statement. Deliveries of a disabled (or deleted) subscription, of an account
//! whose webhooks are off, or whose secret cannot be opened are parked as failed instead of attempted; a
//! re-enable of their subscription can queue them again.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Statement, Value};

use crate::secrets::Sealer;
use crate::store::sql::{in_id_order, one_of_text};

/// One claimed delivery with everything its attempt needs.
#[derive(Clone, Debug)]
pub struct Claimed {
    pub delivery_id: String,
    pub webhook_id: String,
    pub account_id: String,
    /// The claim's token: the result is written only while the delivery still carries it.
    pub token: i64,
    /// This attempt's number (attempts recorded so far, plus one).
    pub attempt: i32,
    pub url: String,
    pub secret: String,
    pub event_id: String,
    pub event_type: String,
    pub payload: String,
    pub event_at: DateTime<Utc>,
}

/// The claimed deliveries with their subscription and event; those whose subscription is disabled (or
/// gone), or whose account no longer sends webhooks, come back apart.
pub async fn read_claimed(
    db: &DatabaseConnection,
    sealer: &Sealer,
    ids: &[String],
    token: i64,
) -> Result<(Vec<Claimed>, Vec<String>), DbErr> {
    let backend = db.get_database_backend();
    // On PostgreSQL one text for any number of ids (an array), so the statement is planned once.
    let (which, values) = one_of_text(backend, "d.id", 1, ids.to_vec());
    let sql = format!(
        "SELECT d.id, d.webhook_id, d.account_id, d.attempt_count, w.url, w.secret, e.id, e.event_type, e.payload, \
         e.created_at, COALESCE(w.status = 'active' AND e.id IS NOT NULL AND a.webhooks_enabled = TRUE \
         AND a.deleted_at IS NULL, FALSE) \
         FROM webhook_deliveries d LEFT JOIN webhooks w ON w.id = d.webhook_id \
         LEFT JOIN event_outbox e ON e.id = d.event_id LEFT JOIN accounts a ON a.id = d.account_id \
         WHERE {which}"
    );
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?;
    let (mut claimed, mut parked) = (Vec::new(), Vec::new());
    for row in &rows {
        let delivery_id: String = row.try_get_by_index(0)?;
        let live: bool = row.try_get_by_index(10)?;
        if !live {
            parked.push(delivery_id);
            continue;
        }
        let webhook_id: String = row.try_get_by_index(1)?;
        let stored: String = row.try_get_by_index(5)?;
        let Some(secret) = crate::webhooks::secret::open(sealer, &webhook_id, &stored) else {
            tracing::error!(
                webhook = webhook_id,
                "a webhook signing secret cannot be opened with this FRONTDESK_SECRET_KEY"
            );
            parked.push(delivery_id);
            continue;
        };
        let attempts: i32 = row.try_get_by_index(3)?;
        claimed.push(Claimed {
            delivery_id,
            webhook_id,
            account_id: row.try_get_by_index(2)?,
            token,
            attempt: attempts + 1,
            url: row.try_get_by_index(4)?,
            secret,
            event_id: row.try_get_by_index(6)?,
            event_type: row.try_get_by_index(7)?,
            payload: row.try_get_by_index(8)?,
            event_at: row.try_get_by_index(9)?,
        });
    }
    Ok((claimed, parked))
}

/// Settles claimed deliveries that must not be sent as failed, so they stop being claimed; a re-enable of
/// their subscription can queue them again.
pub async fn park(db: &DatabaseConnection, ids: &[String], token: i64, now: DateTime<Utc>) -> Result<(), DbErr> {
    let backend = db.get_database_backend();
    let (of_ids, ids) = one_of_text(backend, "id", 3, ids.to_vec());
    let sql = format!(
        "UPDATE webhook_deliveries SET status = 'failed', next_attempt_ms = NULL, claim_token = NULL, \
         settled_at = $1 WHERE {}",
        in_id_order(backend, "webhook_deliveries", &format!("claim_token = $2 AND {of_ids}"))
    );
    let mut values: Vec<Value> = vec![now.into(), token.into()];
    values.extend(ids);
    db.execute_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?;
    Ok(())
}
