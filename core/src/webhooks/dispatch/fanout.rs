//! Turns outbox events into deliveries: claims a batch of events not yet dispatched (`FOR UPDATE SKIP
//! LOCKED` on PostgreSQL, so replicas take disjoint batches), writes one delivery per subscription that wants
//! each event, and marks the events dispatched, all in one transaction: an event is fanned out exactly once,
//! even across a crash. Deliveries to a disabled subscription are parked by the claim that finds them.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, Statement};

use super::placeholders;
use crate::{
    store::entities::webhook_deliveries,
    webhooks::{service::new_delivery_id, subscription},
};

/// Rows per INSERT statement (well under PostgreSQL's 65,535 parameters).
const INSERT_CHUNK: usize = 1_000;

struct Event {
    id: String,
    account_id: String,
    event_type: String,
}

struct Subscription {
    id: String,
    account_id: String,
    events: Vec<String>,
}

/// What one fan-out transaction did.
pub struct FannedOut {
    pub events: usize,
    pub deliveries: usize,
}

/// Fans out up to `batch` events.
pub async fn fan_out(db: &DatabaseConnection, batch: u64, now: DateTime<Utc>) -> Result<FannedOut, DbErr> {
    let txn = crate::store::begin_write(db).await?;
    let events = claim_events(&txn, batch, now).await?;
    if events.is_empty() {
        txn.commit().await?;
        return Ok(FannedOut {
            events: 0,
            deliveries: 0,
        });
    }
    let mut accounts: Vec<&str> = events.iter().map(|e| e.account_id.as_str()).collect();
    accounts.sort_unstable();
    accounts.dedup();
    let mut by_account: HashMap<String, Vec<Subscription>> = HashMap::new();
    for subscription in subscriptions(&txn, &accounts).await? {
        by_account
            .entry(subscription.account_id.clone())
            .or_default()
            .push(subscription);
    }
    let mut rows = Vec::new();
    for event in &events {
        for subscription in by_account.get(&event.account_id).into_iter().flatten() {
            if !subscription::wants(&subscription.events, &event.event_type) {
                continue;
            }
            rows.push(webhook_deliveries::ActiveModel::from(webhook_deliveries::Model {
                id: new_delivery_id(),
                account_id: event.account_id.clone(),
                webhook_id: subscription.id.clone(),
                event_id: event.id.clone(),
                event_type: event.event_type.clone(),
                status: webhook_deliveries::DeliveryStatus::Pending,
                attempt_count: 0,
                next_attempt_ms: Some(now.timestamp_millis()),
                created_at: now,
                delivered_at: None,
                settled_at: None,
                claim_token: None,
            }));
        }
    }
    let queued = rows.len();
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let chunk: Vec<_> = rows.by_ref().take(INSERT_CHUNK).collect();
        webhook_deliveries::Entity::insert_many(chunk)
            .exec_without_returning(&txn)
            .await?;
    }
    txn.commit().await?;
    Ok(FannedOut {
        events: events.len(),
        deliveries: queued,
    })
}

/// Whether any event waits to be fanned out: one read of the undispatched events' index, outside a
/// transaction, for an idle fan-out to look cheaply.
pub async fn any_waiting(db: &DatabaseConnection) -> Result<bool, DbErr> {
    let sql = "SELECT seq FROM event_outbox WHERE dispatched_at IS NULL LIMIT 1";
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await?;
    Ok(row.is_some())
}

async fn claim_events(db: &impl ConnectionTrait, batch: u64, now: DateTime<Utc>) -> Result<Vec<Event>, DbErr> {
    let backend = db.get_database_backend();
    let undispatched = super::picked(
        backend,
        "seq",
        "SELECT seq FROM event_outbox WHERE dispatched_at IS NULL ORDER BY seq LIMIT $2",
    );
    let sql =
        format!("UPDATE event_outbox SET dispatched_at = $1 WHERE {undispatched} RETURNING id, account_id, event_type");
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            backend,
            sql,
            [now.into(), (batch as i64).into()],
        ))
        .await?;
    rows.iter()
        .map(|row| {
            Ok(Event {
                id: row.try_get_by_index(0)?,
                account_id: row.try_get_by_index(1)?,
                event_type: row.try_get_by_index(2)?,
            })
        })
        .collect()
}

/// The subscriptions of these accounts, where the account has webhooks enabled, whatever their status: a
/// delivery is made pending either way, and the claim parks it if its subscription is disabled by then (so
/// a disable or re-enable racing this transaction cannot strand a delivery). On PostgreSQL the rows are
/// key-share-locked, in id order, so a concurrent delete waits for this transaction (and then deletes the
/// deliveries it made), while the result recorder's health updates do not.
async fn subscriptions(db: &impl ConnectionTrait, accounts: &[&str]) -> Result<Vec<Subscription>, DbErr> {
    let backend = db.get_database_backend();
    let lock = if backend == DbBackend::Postgres {
        " FOR KEY SHARE OF w"
    } else {
        ""
    };
    let sql = format!(
        "SELECT w.id, w.account_id, w.events FROM webhooks w JOIN accounts a ON a.id = w.account_id \
         WHERE a.webhooks_enabled = TRUE AND w.account_id IN ({}) ORDER BY w.id{lock}",
        placeholders(1, accounts.len())
    );
    let values = accounts.iter().map(|a| (*a).into());
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?;
    rows.iter()
        .map(|row| {
            let events: String = row.try_get_by_index(2)?;
            Ok(Subscription {
                id: row.try_get_by_index(0)?,
                account_id: row.try_get_by_index(1)?,
                events: subscription::parse_events(&events),
            })
        })
        .collect()
}
