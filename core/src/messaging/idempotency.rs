//! Idempotency keys of sends, per account, kept 24 hours: a repeat of the same request under a key answers
//! the first answer and sends nothing; another request under the key is 409 `idempotency_conflict`.

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, sea_query::OnConflict};
use tonic::Code;

use crate::{error::ApiError, store::entities::idempotency_keys};

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
    account_id: &str,
    key: &str,
    fingerprint: &str,
    now: DateTime<Utc>,
) -> Result<Option<Answered>, ApiError> {
    let row = idempotency_keys::Entity::find_by_id((account_id.to_owned(), key.to_owned()))
        .filter(idempotency_keys::Column::CreatedAt.gt(now - KEPT))
        .one(db)
        .await?;
    match row {
        None => Ok(None),
        Some(row) if row.fingerprint == fingerprint => Ok(Some(Answered {
            message_id: row.message_id,
            contact_id: row.contact_id,
        })),
        Some(_) => Err(ApiError::new(
            Code::AlreadyExists,
            "idempotency_conflict",
            "this idempotency key was used with a different request in the last 24 hours",
        )),
    }
}

/// Remembers the answer under `key`, replacing an expired one. `false` when a live row holds the key already
/// (a concurrent request with the same key committed first).
pub async fn remember(
    db: &impl ConnectionTrait,
    account_id: &str,
    key: &str,
    fingerprint: &str,
    answered: &Answered,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    idempotency_keys::Entity::delete_many()
        .filter(idempotency_keys::Column::AccountId.eq(account_id))
        .filter(idempotency_keys::Column::Key.eq(key))
        .filter(idempotency_keys::Column::CreatedAt.lte(now - KEPT))
        .exec(db)
        .await?;
    let row = idempotency_keys::Model {
        account_id: account_id.to_owned(),
        key: key.to_owned(),
        fingerprint: fingerprint.to_owned(),
        message_id: answered.message_id.clone(),
        contact_id: answered.contact_id.clone(),
        created_at: now,
    };
    let written = idempotency_keys::Entity::insert(idempotency_keys::ActiveModel::from(row))
        .on_conflict(OnConflict::new().do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    Ok(written > 0)
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
