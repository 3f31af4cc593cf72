//! Stored API keys: issue, look up by hash (one indexed read, joined with the account), rotate, revoke.
//! Nothing is cached, so a rotation or revocation holds on every replica the moment it commits.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter,
    TransactionTrait,
};

use super::{api_key::ApiKey, scopes::Scopes};
use crate::store::entities::{accounts, api_keys};

/// Issues a new key for `account_id` and stores its hash.
pub async fn issue(
    db: &impl ConnectionTrait,
    account_id: &str,
    scopes: &Scopes,
    now: DateTime<Utc>,
) -> Result<(ApiKey, api_keys::Model), DbErr> {
    let key = ApiKey::generate();
    let row = api_keys::Model {
        id: format!("key_{}", crate::ids::base62(16)),
        account_id: account_id.to_owned(),
        key_hash: key.hash(),
        masked: key.masked(),
        scopes: scopes.to_stored(),
        created_at: now,
        revoked_at: None,
    };
    api_keys::Entity::insert(api_keys::ActiveModel::from(row.clone()).reset_all())
        .exec_without_returning(db)
        .await?;
    Ok((key, row))
}

/// The live key with this hash and its live account, in one indexed read.
pub async fn find_active(
    db: &impl ConnectionTrait,
    key: &ApiKey,
) -> Result<Option<(api_keys::Model, accounts::Model)>, DbErr> {
    let found = api_keys::Entity::find()
        .filter(api_keys::Column::KeyHash.eq(key.hash()))
        .filter(api_keys::Column::RevokedAt.is_null())
        .find_also_related(accounts::Entity)
        .filter(accounts::Column::DeletedAt.is_null())
        .one(db)
        .await?;
    Ok(found.and_then(|(key, account)| account.map(|account| (key, account))))
}

/// Revokes `key_id` if it is still live; false when another call revoked or rotated it first.
pub async fn revoke(db: &impl ConnectionTrait, key_id: &str, now: DateTime<Utc>) -> Result<bool, DbErr> {
    let result = api_keys::Entity::update_many()
        .col_expr(api_keys::Column::RevokedAt, now.into())
        .filter(api_keys::Column::Id.eq(key_id))
        .filter(api_keys::Column::RevokedAt.is_null())
        .exec(db)
        .await?;
    Ok(result.rows_affected == 1)
}

/// Replaces a live key by a new one with the same scopes, atomically; `None` when the key was no longer live.
pub async fn rotate(
    db: &DatabaseConnection,
    current: &api_keys::Model,
    now: DateTime<Utc>,
) -> Result<Option<(ApiKey, api_keys::Model)>, DbErr> {
    let txn = db.begin().await?;
    if !revoke(&txn, &current.id, now).await? {
        return Ok(None);
    }
    let issued = issue(&txn, &current.account_id, &Scopes::from_stored(&current.scopes), now).await?;
    txn.commit().await?;
    Ok(Some(issued))
}
