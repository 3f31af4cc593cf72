//! Idempotency keys of sends, per account, kept 24 hours: a repeat of the same request under a key answers
//! the first answer and sends nothing; another request under the key is 409 `idempotency_conflict`.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, Statement};
use tonic::Code;

use crate::error::Reason;
use crate::{
    access::AccountId,
    error::ApiError,
    store::{entities::idempotency_keys, sql::placeholders},
};

/// How long a key is remembered.
pub const KEPT: chrono::Duration = chrono::Duration::hours(24);

/// The first answer under a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answered {
    pub message_id: String,
    pub contact_id: String,
}

/// The answer given under `key` within the last 24 hours, if the request matches it; 409 if another request
/// used the key.
pub async fn earlier(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    key: &str,
    fingerprint: &str,
    now: DateTime<Utc>,
) -> Result<Option<Answered>, ApiError> {
    let row = idempotency_keys::Entity::find_by_id((account_id.clone(), key.to_owned()))
        .filter(idempotency_keys::Column::CreatedAt.gt(now - KEPT))
        .one(db)
        .await?;
    row.map(|row| answer(&row, fingerprint)).transpose()
}

/// The live rows (last 24 hours) under these `(account, key)` pairs, in one statement.
pub async fn live(
    db: &impl ConnectionTrait,
    keys: &[(&str, &str)],
    now: DateTime<Utc>,
) -> Result<HashMap<(String, String), idempotency_keys::Model>, DbErr> {
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = idempotency_keys::Entity::find()
        .filter(idempotency_keys::Column::AccountId.is_in(keys.iter().map(|(account, _)| *account)))
        .filter(idempotency_keys::Column::Key.is_in(keys.iter().map(|(_, key)| *key)))
        .filter(idempotency_keys::Column::CreatedAt.gt(now - KEPT))
        .all(db)
        .await?;
    // The two lists cross: keep the pairs asked for.
    Ok(rows
        .into_iter()
        .map(|row| ((row.account_id.to_string(), row.key.clone()), row))
        .filter(|(pair, _)| keys.iter().any(|(account, key)| pair.0 == *account && pair.1 == *key))
        .collect())
}

/// What a live row answers a request with this `fingerprint`: the first answer, or 409 for another request.
pub fn answer(row: &idempotency_keys::Model, fingerprint: &str) -> Result<Answered, ApiError> {
    if row.fingerprint == fingerprint {
        Ok(Answered {
            message_id: row.message_id.to_string(),
            contact_id: row.contact_id.to_string(),
        })
    } else {
        Err(ApiError::new(
            Code::AlreadyExists,
            Reason::IdempotencyConflict,
            "this idempotency key was used with a different request in the last 24 hours",
        ))
    }
}

/// Remembers answers under their keys (each `(account, key)` at most once), replacing expired rows, with one
/// statement. Returns the pairs written: a pair missing from it was held by a live row already (a concurrent
/// request with the same key committed first).
pub async fn remember_all(
    db: &impl ConnectionTrait,
    rows: &[idempotency_keys::Model],
    now: DateTime<Utc>,
) -> Result<HashSet<(String, String)>, DbErr> {
    const VALUES_PER_ROW: usize = 5;
    if rows.is_empty() {
        return Ok(HashSet::new());
    }
    // The last two placeholders, shared by every row: the time written and the end of the expired ones.
    let (created, expired) = (rows.len() * VALUES_PER_ROW + 1, rows.len() * VALUES_PER_ROW + 2);
    let mut tuples = Vec::with_capacity(rows.len());
    let mut values: Vec<sea_orm::Value> = Vec::with_capacity(rows.len() * VALUES_PER_ROW + 2);
    for (n, row) in rows.iter().enumerate() {
        tuples.push(format!(
            "({}, ${created})",
            placeholders(n * VALUES_PER_ROW + 1, VALUES_PER_ROW)
        ));
        values.extend([
            row.account_id.clone().into(),
            row.key.clone().into(),
            row.fingerprint.clone().into(),
            row.message_id.clone().into(),
            row.contact_id.clone().into(),
        ]);
    }
    values.push(now.into());
    values.push((now - KEPT).into());
    let sql = format!(
        "INSERT INTO idempotency_keys (account_id, key, fingerprint, message_id, contact_id, created_at) \
         VALUES {} \
         ON CONFLICT (account_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, \
         message_id = excluded.message_id, contact_id = excluded.contact_id, created_at = excluded.created_at \
         WHERE idempotency_keys.created_at <= ${expired} RETURNING account_id, key",
        tuples.join(", ")
    );
    let written = db
        .query_all_raw(Statement::from_sql_and_values(db.get_database_backend(), sql, values))
        .await?;
    written
        .iter()
        .map(|row| Ok((row.try_get_by_index(0)?, row.try_get_by_index(1)?)))
        .collect()
}

/// Forgets keys older than 24 hours, at most `limit` of them; returns how many.
pub async fn prune(db: &impl ConnectionTrait, now: DateTime<Utc>, limit: u64) -> Result<u64, DbErr> {
    let sql = format!(
        "DELETE FROM idempotency_keys WHERE (account_id, key) IN \
         (SELECT account_id, key FROM idempotency_keys WHERE created_at <= $1 LIMIT {limit})"
    );
    let done = db
        .execute_raw(sea_orm::Statement::from_sql_and_values(
            db.get_database_backend(),
            sql,
            [(now - KEPT).into()],
        ))
        .await?;
    Ok(done.rows_affected())
}
