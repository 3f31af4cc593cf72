//! Queries behind the subscription API, all scoped by account: the ordered list that gives positions,
//! resolution of `{webhook_id}`, deliveries with their attempts, health figures, re-queueing.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, Statement};

use crate::resource_id::DeliveryId;
use crate::{
    access::AccountId,
    paging::{self, Page},
    store::entities::{
        webhook_attempts,
        webhook_deliveries::{self, DeliveryStatus},
        webhooks,
    },
    store::sql::in_id_order,
};

/// The account's subscriptions in creation order: index + 1 is the positional id.
pub async fn list(db: &impl ConnectionTrait, account_id: &AccountId) -> Result<Vec<webhooks::Model>, DbErr> {
    webhooks::Entity::find()
        .filter(webhooks::Column::AccountId.eq(account_id))
        .order_by_asc(webhooks::Column::CreatedAt)
        .order_by_asc(webhooks::Column::Id)
        .all(db)
        .await
}

/// The subscription `reference` names: a 1-based position (all digits) or a name. With its position.
pub async fn find(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    reference: &str,
) -> Result<Option<(usize, webhooks::Model)>, DbErr> {
    Ok(locate(&list(db, account_id).await?, reference))
}

/// `find` within an already read list.
pub fn locate(all: &[webhooks::Model], reference: &str) -> Option<(usize, webhooks::Model)> {
    let index = match reference.parse::<usize>() {
        Ok(position) if reference.bytes().all(|b| b.is_ascii_digit()) => position.checked_sub(1)?,
        _ => all.iter().position(|w| w.name.as_deref() == Some(reference))?,
    };
    all.get(index).map(|w| (index + 1, w.clone()))
}

pub async fn pending_count(db: &impl ConnectionTrait, webhook_id: &str) -> Result<u64, DbErr> {
    webhook_deliveries::Entity::find()
        .filter(webhook_deliveries::Column::WebhookId.eq(webhook_id))
        .filter(webhook_deliveries::Column::Status.eq(webhook_deliveries::DeliveryStatus::Pending))
        .count(db)
        .await
}

/// (attempts, successful attempts) of the subscription since `since`: the attempts that did not deliver
/// are rows of their own; one that delivered is its delivery's, settled when it finished (so after
/// `since`, which the index on the subscription's deliveries by status and settle time bounds).
pub async fn attempts_since(
    db: &impl ConnectionTrait,
    webhook_id: &str,
    since: DateTime<Utc>,
) -> Result<(i64, i64), DbErr> {
    let backend = db.get_database_backend();
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            backend,
            "SELECT (SELECT COUNT(*) FROM webhook_attempts WHERE webhook_id = $1 AND started_at >= $2), \
             (SELECT COUNT(*) FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'succeeded' \
             AND settled_at >= $2 AND delivered_started_at >= $2)",
            [webhook_id.into(), since.into()],
        ))
        .await?;
    let (failed, delivered): (i64, i64) = match row {
        Some(row) => (row.try_get_by_index(0)?, row.try_get_by_index(1)?),
        None => (0, 0),
    };
    Ok((failed + delivered, delivered))
}

/// One page of the subscription's deliveries, newest first, and whether more follow.
pub async fn deliveries(
    db: &impl ConnectionTrait,
    webhook_id: &str,
    status: Option<DeliveryStatus>,
    page: &Page,
) -> Result<(Vec<webhook_deliveries::Model>, bool), DbErr> {
    use webhook_deliveries::Column;
    let mut query = webhook_deliveries::Entity::find().filter(Column::WebhookId.eq(webhook_id));
    if let Some(status) = status {
        query = query.filter(Column::Status.eq(status));
    }
    paging::fetch(db, query, page, Column::CreatedAt, Column::Id).await
}

/// The attempts of these deliveries, oldest first, by delivery id.
pub async fn attempts_of(
    db: &impl ConnectionTrait,
    delivery_ids: &[DeliveryId],
) -> Result<HashMap<DeliveryId, Vec<webhook_attempts::Model>>, DbErr> {
    let mut by_delivery: HashMap<DeliveryId, Vec<webhook_attempts::Model>> = HashMap::new();
    if delivery_ids.is_empty() {
        return Ok(by_delivery);
    }
    let rows = webhook_attempts::Entity::find()
        .filter(webhook_attempts::Column::DeliveryId.is_in(delivery_ids.iter().cloned()))
        .order_by_asc(webhook_attempts::Column::Seq)
        .all(db)
        .await?;
    for row in rows {
        by_delivery.entry(row.delivery_id.clone()).or_default().push(row);
    }
    Ok(by_delivery)
}

/// Whose pending deliveries stop.
#[derive(Clone, Copy)]
pub enum Pending<'a> {
    /// A subscription's: it was disabled.
    OfWebhook(&'a str),
    /// An account's: its webhooks were turned off or it was deleted.
    OfAccount(&'a AccountId),
}

/// Marks every pending delivery of `whose` failed, so none is attempted (an attempt already claimed is
/// refused by the claim guard, which finds its row no longer pending) and re-enable can queue them again.
/// One whose attempt is running keeps its lease's end, so a re-enable does not send it again while that
/// attempt may still succeed.
pub async fn fail_pending(db: &impl ConnectionTrait, whose: Pending<'_>, now: DateTime<Utc>) -> Result<u64, DbErr> {
    let (column, id) = match whose {
        Pending::OfWebhook(id) => ("webhook_id", id),
        Pending::OfAccount(id) => ("account_id", id.as_str()),
    };
    let backend = db.get_database_backend();
    let which = in_id_order(
        backend,
        "webhook_deliveries",
        &format!("{column} = $1 AND status = 'pending'"),
    );
    let result = db
        .execute_raw(Statement::from_sql_and_values(
            backend,
            format!(
                "UPDATE webhook_deliveries SET status = 'failed', settled_at = $2, \
                 next_attempt_ms = CASE WHEN claim_token IS NULL THEN NULL ELSE next_attempt_ms END \
                 WHERE {which}"
            ),
            [id.into(), now.into()],
        ))
        .await?;
    Ok(result.rows_affected())
}

/// Queues again, with a fresh retry schedule, every delivery of the subscription that failed at or after
/// `since`: due now, or when the lease of an attempt still running ends.
pub async fn requeue_failed(
    db: &impl ConnectionTrait,
    webhook_id: &str,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let backend = db.get_database_backend();
    let which = in_id_order(
        backend,
        "webhook_deliveries",
        "webhook_id = $1 AND status = 'failed' AND settled_at >= $2",
    );
    let result = db
        .execute_raw(Statement::from_sql_and_values(
            backend,
            format!(
                "UPDATE webhook_deliveries SET status = 'pending', attempt_count = 0, settled_at = NULL, \
                 next_attempt_ms = CASE WHEN claim_token IS NOT NULL AND next_attempt_ms > $3 \
                 THEN next_attempt_ms ELSE $3 END WHERE {which}"
            ),
            [webhook_id.into(), since.into(), now.timestamp_millis().into()],
        ))
        .await?;
    Ok(result.rows_affected())
}

/// Deletes the subscription with its deliveries and their attempts, in the engine's lock order: the
/// subscription row, then deliveries, then attempts (the retention deletes deliveries before their attempts
/// too, so the two cannot deadlock).
pub async fn delete(db: &impl ConnectionTrait, webhook_id: &str) -> Result<(), DbErr> {
    webhooks::Entity::delete_by_id(webhook_id).exec(db).await?;
    let backend = db.get_database_backend();
    let which = in_id_order(backend, "webhook_deliveries", "webhook_id = $1");
    db.execute_raw(Statement::from_sql_and_values(
        backend,
        format!("DELETE FROM webhook_deliveries WHERE {which}"),
        [webhook_id.into()],
    ))
    .await?;
    webhook_attempts::Entity::delete_many()
        .filter(webhook_attempts::Column::WebhookId.eq(webhook_id))
        .exec(db)
        .await?;
    Ok(())
}
