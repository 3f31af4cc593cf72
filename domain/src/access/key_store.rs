//! Stored API keys: issue, look up by hash (one indexed read, joined with the account), rotate, revoke.
//! Callers keep what they read verified in memory (`verified_keys`); changes tell them (`stamps`).

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, QueryFilter,
    Statement,
};

use super::{AccountId, api_key::ApiKey, scopes::Scopes};
use crate::store::{
    column,
    entities::{accounts, api_keys},
};

/// Issues a new key for `account_id` and stores its hash.
pub async fn issue(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    scopes: &Scopes,
    now: DateTime<Utc>,
) -> Result<(ApiKey, api_keys::Model), DbErr> {
    let key = ApiKey::generate();
    let row = api_keys::Model {
        id: crate::ids::new_id(crate::ids::Kind::ApiKey),
        account_id: account_id.clone(),
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

/// The lookup of every platform request: the live key with this hash joined with its live account. Written
/// as SQL rather than built by SeaORM on each call (the builder, column aliasing and by-name decoding were
/// most of the request's CPU in the profile, docs/BENCHMARKS.md); decoded by column index.
macro_rules! find_active_sql {
    ($placeholder:literal) => {
        concat!(
            "SELECT k.id, k.account_id, k.masked, k.scopes, k.created_at, ",
            "a.name, a.plan, a.api_access, a.webhooks_enabled, a.credit_milli, a.rate_limit, a.parent_account_id, ",
            "a.created_at, a.updated_at ",
            "FROM api_keys k JOIN accounts a ON a.id = k.account_id ",
            "WHERE k.revoked_at IS NULL AND a.deleted_at IS NULL AND k.key_hash = ",
            $placeholder
        )
    };
}

/// The live key with this hash and its live account, in one indexed read.
pub async fn find_active(
    db: &impl ConnectionTrait,
    key: &ApiKey,
) -> Result<Option<(api_keys::Model, accounts::Model)>, DbErr> {
    let backend = db.get_database_backend();
    let sql = if backend == DbBackend::Postgres {
        find_active_sql!("$1")
    } else {
        find_active_sql!("?")
    };
    let hash = key.hash();
    let statement = Statement::from_sql_and_values(backend, sql, [hash.clone().into()]);
    let Some(row) = db.query_one_raw(statement).await? else {
        return Ok(None);
    };
    let key_row = api_keys::Model {
        id: column(&row, 0)?,
        account_id: AccountId::of_row(column::<String>(&row, 1)?),
        key_hash: hash,
        masked: column(&row, 2)?,
        scopes: column(&row, 3)?,
        created_at: column(&row, 4)?,
        revoked_at: None,
    };
    let account = accounts::Model {
        id: key_row.account_id.to_string(),
        name: column(&row, 5)?,
        plan: column(&row, 6)?,
        api_access: column(&row, 7)?,
        webhooks_enabled: column(&row, 8)?,
        credit_milli: column(&row, 9)?,
        rate_limit: column(&row, 10)?,
        parent_account_id: column(&row, 11)?,
        created_at: column(&row, 12)?,
        updated_at: column(&row, 13)?,
        deleted_at: None,
    };
    Ok(Some((key_row, account)))
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
    let txn = crate::store::begin_write(db).await?;
    if !revoke(&txn, &current.id, now).await? {
        return Ok(None);
    }
    let account_id = current.account_id.clone();
    let issued = issue(&txn, &account_id, &Scopes::from_stored(&current.scopes), now).await?;
    txn.commit().await?;
    Ok(Some(issued))
}
