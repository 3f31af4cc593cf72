//! Account rows: insertion (with the opening ledger entry), reads, updates, soft deletion, and credit
//! changes that keep balance and ledger consistent in one transaction.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr,
    EntityTrait, PaginatorTrait, QueryFilter, Set, Statement,
    sea_query::{Expr, ExprTrait},
};
use tonic::Code;

use crate::error::Reason;
use crate::{
    error::{ApiError, ApiResult},
    plan::Plan,
    store::entities::{accounts, credit_ledger},
    tenant::AccountId,
};

pub struct NewAccount {
    pub name: String,
    pub plan: Plan,
    pub credit_milli: i64,
    pub rate_limit: u32,
    pub parent_account_id: Option<String>,
}

/// Inserts the account and its opening ledger entry in `txn` (the rest of a new account's first state is
/// `onboarding`'s).
pub async fn insert(txn: &DatabaseTransaction, new: NewAccount, now: DateTime<Utc>) -> ApiResult<accounts::Model> {
    if let Some(parent_id) = &new.parent_account_id {
        let parent = find_live(txn, parent_id).await?;
        if parent.parent_account_id.is_some() {
            return Err(ApiError::new(
                Code::FailedPrecondition,
                Reason::InvalidArgument,
                "a sub-account cannot own sub-accounts",
            ));
        }
    }
    let account = accounts::Model {
        id: crate::ids::new_id(crate::ids::Kind::Account),
        name: new.name,
        plan: new.plan.as_str().to_owned(),
        api_access: new.plan.includes_api_access(),
        webhooks_enabled: new.plan.includes_api_access(),
        credit_milli: new.credit_milli,
        rate_limit: i32::try_from(new.rate_limit).unwrap_or(i32::MAX),
        parent_account_id: new.parent_account_id,
        created_at: now,
        updated_at: now,
        deleted_at: None,
    };
    accounts::Entity::insert(accounts::ActiveModel::from(account.clone()).reset_all())
        .exec_without_returning(txn)
        .await?;
    if account.credit_milli > 0 {
        write_ledger(
            txn,
            &AccountId::of_row(&account.id),
            account.credit_milli,
            account.credit_milli,
            "opening balance",
            None,
            now,
        )
        .await?;
    }
    Ok(account)
}

/// The account, unless it does not exist or was deleted (both 404). Takes a string: this is where an id that
/// is not yet a tenant (an operator's, a sub-account a key names) is checked.
pub async fn find_live(db: &impl ConnectionTrait, account_id: &str) -> ApiResult<accounts::Model> {
    accounts::Entity::find_by_id(account_id)
        .filter(accounts::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| ApiError::new(Code::NotFound, Reason::NotFound, "no such account"))
}

pub async fn count(db: &impl ConnectionTrait) -> ApiResult<u64> {
    Ok(accounts::Entity::find().count(db).await?)
}

/// Changes to an account; `None` leaves a field as it is.
#[derive(Default)]
pub struct AccountChanges {
    pub plan: Option<Plan>,
    pub api_access: Option<bool>,
    pub webhooks_enabled: Option<bool>,
    pub rate_limit: Option<u32>,
}

pub async fn update(
    db: &impl ConnectionTrait,
    account_id: &str,
    changes: AccountChanges,
    now: DateTime<Utc>,
) -> ApiResult<accounts::Model> {
    let account = find_live(db, account_id).await?;
    let mut active: accounts::ActiveModel = account.into();
    if let Some(plan) = changes.plan {
        active.plan = Set(plan.as_str().to_owned());
    }
    if let Some(api_access) = changes.api_access {
        active.api_access = Set(api_access);
    }
    if let Some(webhooks_enabled) = changes.webhooks_enabled {
        active.webhooks_enabled = Set(webhooks_enabled);
    }
    if let Some(rate_limit) = changes.rate_limit {
        active.rate_limit = Set(i32::try_from(rate_limit).unwrap_or(i32::MAX));
    }
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// Marks the account deleted; its keys stop working at once.
pub async fn delete(db: &impl ConnectionTrait, account_id: &str, now: DateTime<Utc>) -> ApiResult<accounts::Model> {
    let account = find_live(db, account_id).await?;
    let mut active: accounts::ActiveModel = account.into();
    active.deleted_at = Set(Some(now));
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// Adds `delta_milli` (negative to debit) and writes the ledger entry; a debit past zero is refused.
/// Returns the new balance and the ledger entry id.
pub async fn adjust_credits(
    db: &DatabaseConnection,
    account_id: &AccountId,
    delta_milli: i64,
    reason: &str,
    now: DateTime<Utc>,
) -> ApiResult<(i64, String)> {
    let txn = crate::store::begin_write(db).await?;
    let adjusted = adjust_credits_in(&txn, account_id, delta_milli, reason, None, now).await?;
    txn.commit().await?;
    Ok(adjusted)
}

/// How the ledger reasons of the service's own charges begin: an AI reply's (`ai_reply: faq ...`), a
/// summary's, a knowledge import's. Any other entry is an operator's grant or debit.
pub const CHARGE_REASONS: [&str; 3] = ["ai_reply: ", "summary", "knowledge import "];

/// `adjust_credits` in the caller's transaction, so a charge commits with the work it pays for; the ledger
/// entry names `conversation_id` when the charge was for one. A debit leaves what live holds promise to
/// other work (`holds`): it takes the account's lock first, so no hold is made between its count and its
/// update.
pub async fn adjust_credits_in(
    txn: &impl ConnectionTrait,
    account_id: &AccountId,
    delta_milli: i64,
    reason: &str,
    conversation_id: Option<&str>,
    now: DateTime<Utc>,
) -> ApiResult<(i64, String)> {
    let floor = if delta_milli < 0 {
        lock(txn, account_id).await?;
        super::holds::held(txn, account_id, None, now).await?
    } else {
        0
    };
    let new_balance = Expr::col(accounts::Column::CreditMilli).add(delta_milli);
    let updated = accounts::Entity::update_many()
        .col_expr(accounts::Column::CreditMilli, new_balance.clone())
        .col_expr(accounts::Column::UpdatedAt, Expr::value(now))
        .filter(accounts::Column::Id.eq(account_id))
        .filter(accounts::Column::DeletedAt.is_null())
        .filter(new_balance.gte(floor))
        .exec(txn)
        .await?;
    if updated.rows_affected == 0 {
        find_live(txn, account_id.as_str()).await?;
        return Err(ApiError::new(
            Code::FailedPrecondition,
            Reason::InsufficientCredits,
            "the credit balance does not cover this debit",
        ));
    }
    let balance = find_live(txn, account_id.as_str()).await?.credit_milli;
    let entry = write_ledger(txn, account_id, delta_milli, balance, reason, conversation_id, now).await?;
    Ok((balance, entry))
}

async fn write_ledger(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    delta_milli: i64,
    balance_after_milli: i64,
    reason: &str,
    conversation_id: Option<&str>,
    now: DateTime<Utc>,
) -> ApiResult<String> {
    let id = crate::ids::new_id(crate::ids::Kind::LedgerEntry);
    credit_ledger::Entity::insert(credit_ledger::ActiveModel {
        id: Set(id.clone()),
        account_id: Set(account_id.clone()),
        delta_milli: Set(delta_milli),
        balance_after_milli: Set(balance_after_milli),
        reason: Set(reason.to_owned()),
        created_at: Set(now),
        conversation_id: Set(conversation_id.map(Into::into)),
    })
    .exec_without_returning(db)
    .await?;
    Ok(id)
}

/// Serialises changes to an account's deals, stages, pipelines and webhook subscriptions: one lock per
/// account, taken as the transaction's first statement. PostgreSQL: `SELECT ... FOR UPDATE` of the account's
/// row (finer row locks deadlocked, since shifting positions locks other deals' rows). SQLite: nothing more to
/// take, as every write transaction began IMMEDIATE (`store::begin_write`) and so holds the database's one
/// write lock already.
pub async fn lock(db: &impl ConnectionTrait, account_id: &AccountId) -> Result<(), DbErr> {
    let backend = db.get_database_backend();
    if backend != DbBackend::Postgres {
        return Ok(());
    }
    let sql = "SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE";
    db.execute_raw(Statement::from_sql_and_values(backend, sql, [account_id.into()]))
        .await?;
    Ok(())
}
