//! What an import writes as it goes, one transaction per page: the page's outcome, its FAQs, its charge and
//! the source's counters commit together, so a crash resumes at the next page still `pending` and no page is
//! charged twice (a page already recorded by another run is left alone). Then the source's end: `ready` or
//! `failed` with its event.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter,
    sea_query::{Expr, ExprTrait},
};

use super::{extract::Extracted, fetch::PageError};
use crate::error::Reason;
use crate::{
    accounts,
    error::ApiError,
    events::{self, EventType},
    knowledge::sources,
    store::{
        self,
        entities::{
            kb_source_files,
            kb_source_pages::{self, PageStatus},
            kb_sources::{self, SourceStatus},
            source_faqs,
        },
    },
};

/// Import cost: 0.05 credits (50 milli-credits) per started 1,000 characters of extracted text.
const MILLI_PER_THOUSAND_CHARS: i64 = 50;

pub fn cost_milli(characters: usize) -> i64 {
    i64::try_from(characters.div_ceil(1000)).unwrap_or(i64::MAX / MILLI_PER_THOUSAND_CHARS) * MILLI_PER_THOUSAND_CHARS
}

/// What recording a page came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Written (or written already by another run).
    Written,
    /// The balance does not cover the page: nothing written.
    OutOfCredits,
}

/// Records a read page: its FAQs, charged to the account. Errors other than the balance's are the
/// database's.
pub async fn page_read(
    db: &DatabaseConnection,
    source: &kb_sources::Model,
    page: &kb_source_pages::Model,
    extracted: Extracted,
    now: DateTime<Utc>,
) -> Result<Recorded, DbErr> {
    let txn = store::begin_write(db).await?;
    let cost = cost_milli(extracted.characters);
    if !claim(&txn, page, PageStatus::Done, None, extracted.characters, cost, now).await? {
        return Ok(Recorded::Written);
    }
    // The page's hold (when a model wrote its pairs) becomes its charge.
    let reason = format!("knowledge import {}", source.id);
    let account_id = source.account_id.clone();
    let key = super::pairs::hold_key(&page.id);
    match accounts::holds::settle(&txn, &account_id, &key, cost, &reason, None, now).await {
        Ok(()) => {}
        Err(ApiError {
            reason: Reason::InsufficientCredits,
            ..
        }) => return Ok(Recorded::OutOfCredits),
        Err(other) => return Err(DbErr::Custom(other.message)),
    }
    let count = i32::try_from(extracted.sections.len()).unwrap_or(i32::MAX);
    let first_position = page.position.saturating_mul(1000);
    let rows = extracted.sections.into_iter().enumerate().map(|(n, section)| {
        source_faqs::ActiveModel::from(source_faqs::Model {
            id: crate::ids::new_id(crate::ids::Kind::Faq),
            account_id: source.account_id.clone(),
            source_id: source.id.clone(),
            position: first_position.saturating_add(i32::try_from(n).unwrap_or(i32::MAX)),
            question: section.question,
            answer: section.answer,
            created_at: now,
            updated_at: now,
        })
        .reset_all()
    });
    if count > 0 {
        source_faqs::Entity::insert_many(rows)
            .exec_without_returning(&txn)
            .await?;
    }
    advance(&txn, &source.id, count, cost, now).await?;
    txn.commit().await?;
    Ok(Recorded::Written)
}

/// Records a page that could not be read.
pub async fn page_failed(
    db: &DatabaseConnection,
    source_id: &str,
    page: &kb_source_pages::Model,
    error: &PageError,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let txn = store::begin_write(db).await?;
    if claim(&txn, page, PageStatus::Failed, Some(error), 0, 0, now).await? {
        advance(&txn, source_id, 0, 0, now).await?;
    }
    txn.commit().await
}

/// Moves the page from `pending` to `status`; false when another run recorded it first.
async fn claim(
    txn: &impl sea_orm::ConnectionTrait,
    page: &kb_source_pages::Model,
    status: PageStatus,
    error: Option<&PageError>,
    characters: usize,
    cost: i64,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let updated = kb_source_pages::Entity::update_many()
        .col_expr(kb_source_pages::Column::Status, Expr::value(status))
        .col_expr(
            kb_source_pages::Column::ErrorCode,
            Expr::value(error.map(|e| e.reason.to_owned())),
        )
        .col_expr(
            kb_source_pages::Column::ErrorMessage,
            Expr::value(error.map(|e| e.message.clone())),
        )
        .col_expr(
            kb_source_pages::Column::Characters,
            Expr::value(i32::try_from(characters).unwrap_or(i32::MAX)),
        )
        .col_expr(kb_source_pages::Column::CreditsMilli, Expr::value(cost))
        .col_expr(kb_source_pages::Column::UpdatedAt, Expr::value(now))
        .filter(kb_source_pages::Column::Id.eq(&page.id))
        .filter(kb_source_pages::Column::Status.eq(PageStatus::Pending))
        .exec(txn)
        .await?;
    Ok(updated.rows_affected == 1)
}

async fn advance(
    txn: &impl sea_orm::ConnectionTrait,
    source_id: &str,
    faqs: i32,
    cost: i64,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let plus = |column: kb_sources::Column, n: i64| Expr::col(column).add(n);
    kb_sources::Entity::update_many()
        .col_expr(kb_sources::Column::PagesDone, plus(kb_sources::Column::PagesDone, 1))
        .col_expr(
            kb_sources::Column::Sections,
            plus(kb_sources::Column::Sections, faqs.into()),
        )
        .col_expr(
            kb_sources::Column::FaqsCreated,
            plus(kb_sources::Column::FaqsCreated, faqs.into()),
        )
        .col_expr(
            kb_sources::Column::CreditsUsedMilli,
            plus(kb_sources::Column::CreditsUsedMilli, cost),
        )
        .col_expr(kb_sources::Column::UpdatedAt, Expr::value(now))
        .filter(kb_sources::Column::Id.eq(source_id))
        .exec(txn)
        .await?;
    Ok(())
}

/// Fails every page still pending with `error` (the balance ran out).
pub async fn fail_pending(
    db: &DatabaseConnection,
    source_id: &str,
    error: &PageError,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let txn = store::begin_write(db).await?;
    let failed = kb_source_pages::Entity::update_many()
        .col_expr(kb_source_pages::Column::Status, Expr::value(PageStatus::Failed))
        .col_expr(kb_source_pages::Column::ErrorCode, Expr::value(error.reason))
        .col_expr(
            kb_source_pages::Column::ErrorMessage,
            Expr::value(error.message.clone()),
        )
        .col_expr(kb_source_pages::Column::UpdatedAt, Expr::value(now))
        .filter(kb_source_pages::Column::SourceId.eq(source_id))
        .filter(kb_source_pages::Column::Status.eq(PageStatus::Pending))
        .exec(&txn)
        .await?;
    kb_sources::Entity::update_many()
        .col_expr(
            kb_sources::Column::PagesDone,
            Expr::col(kb_sources::Column::PagesDone).add(i64::try_from(failed.rows_affected).unwrap_or(0)),
        )
        .col_expr(kb_sources::Column::UpdatedAt, Expr::value(now))
        .filter(kb_sources::Column::Id.eq(source_id))
        .exec(&txn)
        .await?;
    txn.commit().await
}

/// Moves a `queued` source to `processing`, with its page count once known.
pub async fn started(
    db: &DatabaseConnection,
    source_id: &str,
    pages_total: i32,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    kb_sources::Entity::update_many()
        .col_expr(kb_sources::Column::Status, Expr::value(SourceStatus::Processing))
        .col_expr(kb_sources::Column::PagesTotal, Expr::value(pages_total))
        .col_expr(kb_sources::Column::UpdatedAt, Expr::value(now))
        .filter(kb_sources::Column::Id.eq(source_id))
        .filter(kb_sources::Column::Status.is_in(SourceStatus::UNFINISHED))
        .exec(db)
        .await?;
    Ok(())
}

/// Ends the source: `ready`, or `failed` with `error`, and its event, once. An uploaded document is deleted
/// with its import's end: its FAQs are what is kept of it.
pub async fn finished(
    db: &DatabaseConnection,
    source_id: &str,
    error: Option<String>,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let txn = store::begin_write(db).await?;
    let (status, event) = match error {
        None => (SourceStatus::Ready, EventType::KbSourceReady),
        Some(_) => (SourceStatus::Failed, EventType::KbSourceFailed),
    };
    let ended = kb_sources::Entity::update_many()
        .col_expr(kb_sources::Column::Status, Expr::value(status))
        .col_expr(kb_sources::Column::Error, Expr::value(error))
        .col_expr(kb_sources::Column::UpdatedAt, Expr::value(now))
        .filter(kb_sources::Column::Id.eq(source_id))
        .filter(kb_sources::Column::Status.is_in(SourceStatus::UNFINISHED))
        .exec(&txn)
        .await?;
    kb_source_files::Entity::delete_by_id(source_id).exec(&txn).await?;
    if ended.rows_affected == 1
        && let Some(source) = kb_sources::Entity::find_by_id(source_id).one(&txn).await?
    {
        let data = events::payload(&sources::render(&txn, &source).await?, "frontdesk.v1.KbSource");
        events::record(&txn, &source.account_id, event, data, now).await?;
    }
    txn.commit().await
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_started_thousand_characters_costs_a_twentieth() {
        assert_eq!(super::cost_milli(0), 0);
        assert_eq!(super::cost_milli(1), 50);
        assert_eq!(super::cost_milli(1000), 50);
        assert_eq!(super::cost_milli(1001), 100);
        assert_eq!(super::cost_milli(4500), 250);
    }
}
