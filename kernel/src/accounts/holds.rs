//! Credits held before work that costs the operator money: a model-written reply or follow-up, a recap, an
//! import section's model-written pairs. The price is held in a short transaction of its own before the model
//! is asked (no hold, no call); the work's own transaction then settles it (deletes the hold and writes the
//! ledger entry) or releases it. A hold is keyed by its work, so a run of the work again after a crash takes
//! the same hold instead of a second one, and its settle, made once with the work's result, charges once. A
//! hold whose process died before settling stops counting at `expires_at` and is pruned later.
//!
//! Every hold and every debit takes the account's lock first (`store::lock`; SQLite's write transactions hold
//! the database already), then counts the account's live holds: concurrent holds never promise more than the
//! balance, and a debit never spends what a hold promised to other work.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, Statement, sea_query::OnConflict,
};
use tonic::Code;

use super::store;
use crate::{
    error::{ApiError, ApiResult, Reason},
    store::entities::credit_holds,
    tenant::AccountId,
};

/// What a hold is for (its `purpose`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    Reply,
    FollowUp,
    Summary,
    Import,
    Evaluation,
}

impl Purpose {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reply => "reply",
            Self::FollowUp => "follow_up",
            Self::Summary => "summary",
            Self::Import => "import",
            Self::Evaluation => "evaluation",
        }
    }
}

/// A hold asked for.
pub struct Hold<'a> {
    pub account_id: &'a AccountId,
    /// The work's key: the same work run again takes the same hold.
    pub key: &'a str,
    pub amount_milli: i64,
    pub purpose: Purpose,
    /// How long the hold counts if it is neither settled nor released: past the longest the work can take.
    pub lasts: Duration,
    /// At most this many live holds of `purpose` on the account at once (work that may run only so many
    /// times at once, such as recaps); `None`: no such limit.
    pub at_once: Option<u64>,
}

/// Holds `hold.amount_milli` for the work `hold.key` (or moves the work's existing hold to that amount and
/// a new expiry). 402 `insufficient_credits` when the balance less the other live holds does not cover it;
/// 429 `rate_limited` when `at_once` holds of its purpose are live already.
pub async fn hold(db: &DatabaseConnection, hold: &Hold<'_>, now: DateTime<Utc>) -> ApiResult<()> {
    let txn = crate::store::begin_write(db).await?;
    store::lock(&txn, hold.account_id).await?;
    let balance = store::find_live(&txn, hold.account_id.as_str()).await?.credit_milli;
    if let Some(limit) = hold.at_once {
        let running = live(hold.account_id, now)
            .filter(credit_holds::Column::Purpose.eq(hold.purpose.as_str()))
            .filter(credit_holds::Column::Key.ne(hold.key));
        if sea_orm::PaginatorTrait::count(running, &txn).await? >= limit {
            return Err(ApiError::new(
                Code::ResourceExhausted,
                Reason::RateLimited,
                format!("at most {limit} of these run at once on an account; retry in a few seconds"),
            ));
        }
    }
    if balance - held(&txn, hold.account_id, Some(hold.key), now).await? < hold.amount_milli {
        return Err(ApiError::new(
            Code::FailedPrecondition,
            Reason::InsufficientCredits,
            format!(
                "the credit balance does not cover this work ({} credits)",
                super::credits::to_decimal(hold.amount_milli)
            ),
        ));
    }
    let lasts = chrono::Duration::from_std(hold.lasts).unwrap_or(chrono::Duration::MAX);
    let row = credit_holds::Model {
        key: hold.key.to_owned(),
        account_id: hold.account_id.clone(),
        amount_milli: hold.amount_milli,
        purpose: hold.purpose.as_str().to_owned(),
        expires_at: now.checked_add_signed(lasts).unwrap_or(DateTime::<Utc>::MAX_UTC),
        created_at: now,
    };
    credit_holds::Entity::insert(credit_holds::ActiveModel::from(row))
        .on_conflict(
            OnConflict::column(credit_holds::Column::Key)
                .update_columns([credit_holds::Column::AmountMilli, credit_holds::Column::ExpiresAt])
                .to_owned(),
        )
        .exec_without_returning(&txn)
        .await?;
    txn.commit().await?;
    Ok(())
}

/// Settles the work `key` in its own transaction: its hold goes and `amount_milli` is debited with the
/// ledger entry (`store::adjust_credits_in`). The hold's amount is what was promised; the debit is what the
/// work came to (at most that).
pub async fn settle(
    txn: &impl ConnectionTrait,
    account_id: &AccountId,
    key: &str,
    amount_milli: i64,
    reason: &str,
    conversation_id: Option<&str>,
    now: DateTime<Utc>,
) -> ApiResult<()> {
    release(txn, key).await?;
    if amount_milli > 0 {
        store::adjust_credits_in(txn, account_id, -amount_milli, reason, conversation_id, now).await?;
    }
    Ok(())
}

/// Releases the work's hold (nothing charged); nothing happens when it has none.
pub async fn release(db: &impl ConnectionTrait, key: &str) -> Result<(), DbErr> {
    credit_holds::Entity::delete_many()
        .filter(credit_holds::Column::Key.eq(key))
        .exec(db)
        .await?;
    Ok(())
}

/// Releases the work's hold outside any transaction, logging a failure (the hold then expires).
pub async fn release_or_log(db: &DatabaseConnection, key: &str) {
    if let Err(err) = release(db, key).await {
        tracing::warn!(error = %err, "a credit hold could not be released; it expires by itself");
    }
}

/// The account's live holds.
fn live(account_id: &AccountId, now: DateTime<Utc>) -> sea_orm::Select<credit_holds::Entity> {
    credit_holds::Entity::find()
        .filter(credit_holds::Column::AccountId.eq(account_id))
        .filter(credit_holds::Column::ExpiresAt.gt(now))
}

/// What the account's live holds promise, but the one of `except`.
pub async fn held(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    except: Option<&str>,
    now: DateTime<Utc>,
) -> Result<i64, DbErr> {
    let backend = db.get_database_backend();
    let sql = "SELECT CAST(COALESCE(SUM(amount_milli), 0) AS BIGINT) AS held FROM credit_holds \
               WHERE account_id = $1 AND expires_at > $2 AND key <> $3";
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            backend,
            sql,
            [
                account_id.as_str().into(),
                now.into(),
                except.unwrap_or_default().into(),
            ],
        ))
        .await?;
    Ok(match row {
        Some(row) => row.try_get::<i64>("", "held")?,
        None => 0,
    })
}

/// Forgets holds that expired (their work died without settling), at most `limit` at a time.
pub async fn prune(db: &impl ConnectionTrait, now: DateTime<Utc>, limit: u64) -> Result<u64, DbErr> {
    let sql = format!(
        "DELETE FROM credit_holds WHERE key IN (SELECT key FROM credit_holds WHERE expires_at <= $1 LIMIT {limit})"
    );
    let done = db
        .execute_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            sql,
            [now.into()],
        ))
        .await?;
    Ok(done.rows_affected())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        accounts::store::{NewAccount, insert},
        plan::Plan,
        store::test_databases::{Kind, TestDb},
    };

    async fn account(db: &DatabaseConnection, credits: i64) -> AccountId {
        let txn = crate::store::begin_write(db).await.unwrap();
        let new = NewAccount {
            name: "holds".into(),
            plan: Plan::Growth,
            credit_milli: credits,
            rate_limit: 60,
            parent_account_id: None,
        };
        let row = insert(&txn, new, chrono::Utc::now()).await.unwrap();
        txn.commit().await.unwrap();
        AccountId::of_row(&row.id)
    }

    fn asked<'a>(account_id: &'a AccountId, key: &'a str, amount_milli: i64) -> Hold<'a> {
        Hold {
            account_id,
            key,
            amount_milli,
            purpose: Purpose::Reply,
            lasts: Duration::from_secs(60),
            at_once: None,
        }
    }

    /// Twenty holds of one credit at once against five: five are made, and a debit cannot take what they
    /// promise.
    async fn concurrent_holds_never_promise_more_than_the_balance(kind: Kind) {
        let test = TestDb::new(kind, 8).await;
        let db = test.db.clone();
        let account_id = account(&db, 5_000).await;
        let now = chrono::Utc::now();
        let tries = (0..20).map(|n| {
            let (db, account_id) = (db.clone(), account_id.clone());
            tokio::spawn(async move {
                let key = format!("reply:cv_{n}:0");
                hold(&db, &asked(&account_id, &key, 1_000), now).await
            })
        });
        let results = futures_util::future::join_all(tries).await;
        let made = results.iter().filter(|r| matches!(r, Ok(Ok(())))).count();
        assert_eq!(made, 5, "{results:?}");
        for refused in results.iter().filter_map(|r| r.as_ref().unwrap().as_ref().err()) {
            assert_eq!(refused.reason, Reason::InsufficientCredits, "{refused:?}");
        }
        assert_eq!(held(&db, &account_id, None, now).await.unwrap(), 5_000);
        let txn = crate::store::begin_write(&db).await.unwrap();
        let debit = store::adjust_credits_in(&txn, &account_id, -1, "operator", None, now).await;
        assert_eq!(
            debit.unwrap_err().reason,
            Reason::InsufficientCredits,
            "the holds' credits are promised"
        );
        drop(txn);
        test.remove().await;
    }

    /// A hold taken again by the same work is one hold; settled, it is charged once and gone; an expired one
    /// stops counting and is pruned.
    async fn a_hold_is_one_per_work_charged_once_and_expires(kind: Kind) {
        let test = TestDb::new(kind, 4).await;
        let db = test.db.clone();
        let account_id = account(&db, 2_000).await;
        let now = chrono::Utc::now();
        hold(&db, &asked(&account_id, "reply:cv_1:3", 1_000), now)
            .await
            .unwrap();
        hold(&db, &asked(&account_id, "reply:cv_1:3", 1_000), now)
            .await
            .unwrap();
        assert_eq!(
            held(&db, &account_id, None, now).await.unwrap(),
            1_000,
            "one hold for one work"
        );
        let txn = crate::store::begin_write(&db).await.unwrap();
        settle(&txn, &account_id, "reply:cv_1:3", 1_000, "ai_reply: model", None, now)
            .await
            .unwrap();
        txn.commit().await.unwrap();
        let balance = store::find_live(&db, account_id.as_str()).await.unwrap().credit_milli;
        assert_eq!((balance, held(&db, &account_id, None, now).await.unwrap()), (1_000, 0));

        hold(&db, &asked(&account_id, "reply:cv_2:0", 1_000), now)
            .await
            .unwrap();
        let later = now + chrono::Duration::seconds(61);
        assert_eq!(held(&db, &account_id, None, later).await.unwrap(), 0, "expired");
        hold(&db, &asked(&account_id, "reply:cv_3:0", 1_000), later)
            .await
            .unwrap();
        assert_eq!(prune(&db, later + chrono::Duration::seconds(61), 100).await.unwrap(), 2);
        test.remove().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_holds_sqlite() {
        concurrent_holds_never_promise_more_than_the_balance(Kind::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_holds_postgres() {
        concurrent_holds_never_promise_more_than_the_balance(Kind::Postgres).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_hold_per_work_sqlite() {
        a_hold_is_one_per_work_charged_once_and_expires(Kind::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_hold_per_work_postgres() {
        a_hold_is_one_per_work_charged_once_and_expires(Kind::Postgres).await;
    }
}
