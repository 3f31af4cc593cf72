//! A new account's first state: the account with its opening balance, its main pipeline and its first API
//! key (all sections), in one transaction. The operator's admin service and the first-run bootstrap make
//! accounts this way.

use chrono::{DateTime, Utc};
use sea_orm::DatabaseConnection;

use crate::{
    access::{AccountId, api_key::ApiKey, key_store, scopes::Scopes},
    accounts::store::{self as account_store, NewAccount},
    error::ApiResult,
    store::entities::accounts,
};

pub async fn create(
    db: &DatabaseConnection,
    new: NewAccount,
    now: DateTime<Utc>,
) -> ApiResult<(accounts::Model, ApiKey)> {
    let txn = crate::store::begin_write(db).await?;
    let account = account_store::insert(&txn, new, now).await?;
    // The account row just written is the tenant of its first pipeline and key.
    let account_id = AccountId::of_row(&account.id);
    crate::deals::pipelines::create_default(&txn, &account_id, now).await?;
    let (key, _) = key_store::issue(&txn, &account_id, &Scopes::All, now).await?;
    txn.commit().await?;
    Ok((account, key))
}
