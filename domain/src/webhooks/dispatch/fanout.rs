//! Turns outbox events into deliveries: claims a batch of events not yet dispatched, a share from each
//! account with events waiting (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so replicas take disjoint
//! batches), writes one delivery per subscription that wants each event, and marks the events dispatched,
//! all in one transaction: an event is fanned out exactly once, even across a crash. Deliveries to a disabled subscription are parked by the claim that finds them.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, Statement};

use super::placeholders;
use crate::{
    access::AccountId,
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
            rows.push(webhook_deliveries::Model::pending(
                new_delivery_id().into(),
                AccountId::of_row(&event.account_id),
                subscription.id.clone().into(),
                event.id.clone().into(),
                event.event_type.clone(),
                now,
            ));
        }
    }
    let queued = rows.len();
    if txn.get_database_backend() == DbBackend::Postgres {
        insert_postgres(&txn, rows, now).await?;
    } else {
        let mut rows = rows.into_iter().map(webhook_deliveries::ActiveModel::from).peekable();
        while rows.peek().is_some() {
            let chunk: Vec<_> = rows.by_ref().take(INSERT_CHUNK).collect();
            webhook_deliveries::Entity::insert_many(chunk)
                .exec_without_returning(&txn)
                .await?;
        }
    }
    txn.commit().await?;
    Ok(FannedOut {
        events: events.len(),
        deliveries: queued,
    })
}

/// The new deliveries in one statement whose text is the same for any batch (one array per column), so its
/// plan is reused.
async fn insert_postgres(
    txn: &impl ConnectionTrait,
    rows: Vec<webhook_deliveries::Model>,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    const SQL: &str = "INSERT INTO webhook_deliveries (id, account_id, webhook_id, event_id, event_type, status, \
        attempt_count, next_attempt_ms, created_at) \
        SELECT id, account_id, webhook_id, event_id, event_type, 'pending', 0, $6, $7 \
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) \
        AS new(id, account_id, webhook_id, event_id, event_type)";
    let n = rows.len();
    let (mut ids, mut accounts, mut webhooks, mut events, mut types) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for row in rows {
        ids.push(row.id);
        accounts.push(row.account_id.to_string());
        webhooks.push(row.webhook_id);
        events.push(row.event_id);
        types.push(row.event_type);
    }
    let values: Vec<sea_orm::Value> = vec![
        ids.into(),
        accounts.into(),
        webhooks.into(),
        events.into(),
        types.into(),
        now.timestamp_millis().into(),
        now.into(),
    ];
    txn.execute_raw(Statement::from_sql_and_values(DbBackend::Postgres, SQL, values))
        .await?;
    Ok(())
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

/// Accounts one fan-out reads at most; past it, the next fan-out starts elsewhere.
const MAX_ACCOUNTS: usize = 256;

/// Claims up to `batch` undispatched events, fairly across accounts: an equal share from each account with
/// events waiting (its oldest first), then what accounts with fewer left unused from those that had more.
/// One account's burst of events cannot hold back another's behind it.
async fn claim_events(db: &impl ConnectionTrait, batch: u64, now: DateTime<Utc>) -> Result<Vec<Event>, DbErr> {
    let batch = usize::try_from(batch).unwrap_or(usize::MAX).max(1);
    let accounts = waiting_accounts(db, MAX_ACCOUNTS.min(batch)).await?;
    if accounts.is_empty() {
        return Ok(Vec::new());
    }
    let share = batch.div_ceil(accounts.len());
    let mut events = take_events(db, &accounts, share, batch, now).await?;
    if events.len() < batch {
        let mut taken: HashMap<&str, usize> = HashMap::new();
        for event in &events {
            *taken.entry(event.account_id.as_str()).or_default() += 1;
        }
        let more: Vec<String> = accounts
            .iter()
            .filter(|a| taken.get(a.as_str()) == Some(&share))
            .cloned()
            .collect();
        if !more.is_empty() {
            let left = batch - events.len();
            events.extend(take_events(db, &more, left, left, now).await?);
        }
    }
    Ok(events)
}

/// Up to `limit` accounts with undispatched events, in id order from a random point round to it (account
/// ids are random, so each account is as likely as any to be read first): one probe of the accounts'
/// index per account.
async fn waiting_accounts(db: &impl ConnectionTrait, limit: usize) -> Result<Vec<String>, DbErr> {
    let start = crate::ids::new_id(crate::ids::Kind::Account);
    let mut accounts = accounts_after(db, &start, limit).await?;
    if accounts.len() < limit {
        for account in accounts_after(db, "", limit - accounts.len()).await? {
            if account.as_str() > start.as_str() || accounts.contains(&account) {
                break;
            }
            accounts.push(account);
        }
    }
    Ok(accounts)
}

/// Up to `limit` accounts with undispatched events whose id is after `after`, in id order.
async fn accounts_after(db: &impl ConnectionTrait, after: &str, limit: usize) -> Result<Vec<String>, DbErr> {
    let backend = db.get_database_backend();
    let next = "SELECT account_id FROM event_outbox WHERE dispatched_at IS NULL AND account_id > $1 \
                ORDER BY account_id LIMIT 1";
    if backend == DbBackend::Postgres {
        // A loose index scan: each step is one probe for the next account.
        let sql = format!(
            "WITH RECURSIVE a AS (({next}) UNION ALL SELECT n.account_id FROM a CROSS JOIN LATERAL \
             (SELECT account_id FROM event_outbox WHERE dispatched_at IS NULL AND account_id > a.account_id \
              ORDER BY account_id LIMIT 1) AS n) SELECT account_id FROM a LIMIT {limit}"
        );
        let rows = db
            .query_all_raw(Statement::from_sql_and_values(backend, sql, [after.into()]))
            .await?;
        return rows.iter().map(|row| row.try_get_by_index(0)).collect();
    }
    // SQLite runs in process: one probe per statement.
    let mut accounts: Vec<String> = Vec::new();
    while accounts.len() < limit {
        let from = accounts.last().map_or(after, String::as_str).to_owned();
        let Some(row) = db
            .query_one_raw(Statement::from_sql_and_values(backend, next, [from.into()]))
            .await?
        else {
            break;
        };
        accounts.push(row.try_get_by_index(0)?);
    }
    Ok(accounts)
}

/// Marks dispatched up to `each` of the oldest undispatched events of each of `accounts`, `most` in all.
async fn take_events(
    db: &impl ConnectionTrait,
    accounts: &[String],
    each: usize,
    most: usize,
    now: DateTime<Utc>,
) -> Result<Vec<Event>, DbErr> {
    let backend = db.get_database_backend();
    let returning = "RETURNING id, account_id, event_type";
    let (each, most) = (each as i64, most as i64);
    let rows = if backend == DbBackend::Postgres {
        let sql = format!(
            "UPDATE event_outbox SET dispatched_at = $1 WHERE seq = ANY(ARRAY(SELECT e.seq \
             FROM unnest($2::text[]) AS a(account_id) CROSS JOIN LATERAL (SELECT seq FROM event_outbox AS o \
             WHERE o.dispatched_at IS NULL AND o.account_id = a.account_id ORDER BY o.seq LIMIT $3 \
             FOR UPDATE SKIP LOCKED) AS e LIMIT $4)) {returning}"
        );
        let values: [sea_orm::Value; 4] = [now.into(), accounts.to_vec().into(), each.into(), most.into()];
        db.query_all_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?
    } else {
        let sql = format!(
            "UPDATE event_outbox SET dispatched_at = $1 WHERE seq IN (SELECT seq FROM event_outbox \
             WHERE dispatched_at IS NULL AND account_id = $2 ORDER BY seq LIMIT $3) {returning}"
        );
        let mut rows = Vec::new();
        for account in accounts {
            let left = most - rows.len() as i64;
            if left <= 0 {
                break;
            }
            let values: [sea_orm::Value; 3] = [now.into(), account.clone().into(), each.min(left).into()];
            rows.extend(
                db.query_all_raw(Statement::from_sql_and_values(backend, sql.clone(), values))
                    .await?,
            );
        }
        rows
    };
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

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::{AccountId, claim_events};
    use crate::{
        events::{EventType, record_all},
        store::test_databases::{Kind, TestDb},
    };

    /// An account's 20,000 events wait; one event of another account, written after them, goes in the
    /// next batch. The outbox was fanned out oldest first, so it waited for all 20,000.
    async fn a_quiet_accounts_event_is_not_held_behind_a_burst(kind: Kind) {
        let test = TestDb::new(kind, 4).await;
        let db = &test.db;
        let burst: Vec<_> = (0..20_000)
            .map(|n| {
                (
                    AccountId::of_row("acc_busy"),
                    EventType::DealCreated,
                    serde_json::json!({ "n": n }),
                )
            })
            .collect();
        for chunk in burst.chunks(2_000) {
            record_all(db, chunk.to_vec(), Utc::now()).await.unwrap();
        }
        let quiet = vec![(
            AccountId::of_row("acc_quiet"),
            EventType::DealCreated,
            serde_json::json!({}),
        )];
        record_all(db, quiet, Utc::now()).await.unwrap();
        let batch = claim_events(db, 500, Utc::now()).await.unwrap();
        assert_eq!(batch.len(), 500, "the batch is full");
        assert!(
            batch.iter().any(|e| e.account_id == "acc_quiet"),
            "the quiet account's event is in the first batch"
        );
        let busy: Vec<_> = batch.iter().filter(|e| e.account_id == "acc_busy").collect();
        assert_eq!(busy.len(), 499, "the busy account takes what the quiet one left");
        test.remove().await;
    }

    #[tokio::test]
    async fn a_quiet_accounts_event_is_not_held_behind_a_burst_postgres() {
        a_quiet_accounts_event_is_not_held_behind_a_burst(Kind::Postgres).await;
    }

    #[tokio::test]
    async fn a_quiet_accounts_event_is_not_held_behind_a_burst_sqlite() {
        a_quiet_accounts_event_is_not_held_behind_a_burst(Kind::Sqlite).await;
    }
}
