//! Knowledge sources as the API shows them, and their creation: the source row, one row per page to read,
//! the attachment to an agent and the import job, in one transaction.

use chrono::{DateTime, Utc};
use frontdesk_api::v1::{AttachKbSourceRequest, KbSource, PageError};
use sea_orm::{
    ActiveEnum, ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseTransaction, DbErr, EntityTrait, QueryFilter,
    QueryOrder,
};

use super::import::{self, documents::Format};
use crate::{
    access::AccountId,
    error::{ApiError, ApiResult},
    store::{
        self,
        entities::{kb_source_files, kb_source_pages, kb_sources},
    },
    timestamps,
};

/// An uploaded document, checked.
pub struct NewFile {
    pub file_name: String,
    pub content_type: String,
    pub format: Format,
    pub data: Vec<u8>,
}

/// What an import request asked for, checked.
pub struct NewSource {
    /// `url`, `bulk` or `file`.
    pub kind: kb_sources::SourceKind,
    /// The page of a single-URL import, or the sitemap to read the pages from.
    pub origin_url: Option<String>,
    /// The pages, when known now (empty for a sitemap, which the job reads).
    pub pages: Vec<String>,
    /// An agent to attach the source to ("" for none).
    pub agent_id: String,
    /// The document of a `file` import (its one page is the document).
    pub file: Option<NewFile>,
}

pub async fn find(db: &impl ConnectionTrait, account_id: &AccountId, id: &str) -> ApiResult<kb_sources::Model> {
    store::owned::<kb_sources::Entity>(db, kb_sources::Column::AccountId, account_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("knowledge source"))
}

/// Writes the source, its pages (or its document), its attachment and its job; the source's id.
pub async fn create(
    txn: &DatabaseTransaction,
    account_id: &AccountId,
    new: NewSource,
    now: DateTime<Utc>,
) -> ApiResult<String> {
    let id = crate::ids::new_id(crate::ids::Kind::KnowledgeSource);
    let source = kb_sources::Model {
        id: id.clone().into(),
        account_id: account_id.clone(),
        kind: new.kind,
        status: kb_sources::SourceStatus::Queued,
        pages_total: i32::try_from(new.pages.len()).unwrap_or(i32::MAX),
        pages_done: 0,
        sections: 0,
        faqs_created: 0,
        credits_used_milli: 0,
        error: None,
        origin_url: new.origin_url,
        file_name: new.file.as_ref().map(|f| f.file_name.clone()),
        created_at: now,
        updated_at: now,
    };
    kb_sources::Entity::insert(kb_sources::ActiveModel::from(source).reset_all())
        .exec_without_returning(txn)
        .await?;
    add_pages(txn, &id, &new.pages, now).await?;
    if let Some(file) = new.file {
        let row = kb_source_files::Model {
            source_id: id.clone().into(),
            file_name: file.file_name,
            content_type: file.content_type,
            format: file.format.as_str().to_owned(),
            data: file.data,
            created_at: now,
        };
        kb_source_files::Entity::insert(kb_source_files::ActiveModel::from(row).reset_all())
            .exec_without_returning(txn)
            .await?;
    }
    if !new.agent_id.is_empty() {
        let attach = AttachKbSourceRequest {
            agent_id: new.agent_id,
            source_id: id.clone(),
        };
        super::attachments::attach(txn, account_id, attach, now).await?;
    }
    crate::jobs::enqueue(txn, import::job(account_id, &id, now), now).await?;
    Ok(id)
}

/// The pages to read, in order.
pub async fn add_pages(
    db: &impl ConnectionTrait,
    source_id: &str,
    urls: &[String],
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    if urls.is_empty() {
        return Ok(());
    }
    let rows = urls.iter().enumerate().map(|(position, url)| {
        kb_source_pages::ActiveModel::from(kb_source_pages::Model {
            id: crate::ids::new_id(crate::ids::Kind::KnowledgePage),
            source_id: source_id.into(),
            position: i32::try_from(position).unwrap_or(i32::MAX),
            url: url.clone(),
            status: kb_source_pages::PageStatus::Pending,
            error_code: None,
            error_message: None,
            characters: 0,
            credits_milli: 0,
            updated_at: now,
        })
        .reset_all()
    });
    kb_source_pages::Entity::insert_many(rows)
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// The failed pages of `sources`, in page order.
pub async fn page_errors(
    db: &impl ConnectionTrait,
    source_ids: Vec<String>,
) -> Result<Vec<kb_source_pages::Model>, DbErr> {
    kb_source_pages::Entity::find()
        .filter(kb_source_pages::Column::SourceId.is_in(source_ids))
        .filter(kb_source_pages::Column::Status.eq(kb_source_pages::PageStatus::Failed))
        .order_by_asc(kb_source_pages::Column::Position)
        .all(db)
        .await
}

/// The source as the API shows it, with the errors of its failed pages (`failed`: any pages; those of
/// other sources are skipped).
pub fn message(m: &kb_sources::Model, failed: &[kb_source_pages::Model]) -> KbSource {
    KbSource {
        source_id: m.id.to_string(),
        kind: m.kind.to_value(),
        status: m.status.to_value(),
        pages_total: m.pages_total,
        pages_done: m.pages_done,
        sections: m.sections,
        faqs_created: m.faqs_created,
        credits_used: m.credits_used_milli as f64 / 1000.0,
        error: m.error.clone(),
        errors: failed
            .iter()
            .filter(|p| p.source_id == m.id)
            .map(|p| PageError {
                url: p.url.clone(),
                reason: p.error_code.clone().unwrap_or_default(),
                message: p.error_message.clone().unwrap_or_default(),
            })
            .collect(),
        url: m.origin_url.clone(),
        file_name: m.file_name.clone(),
        created_at: Some(timestamps::to_proto(m.created_at)),
        updated_at: Some(timestamps::to_proto(m.updated_at)),
    }
}

/// The source read alone, with its errors.
pub async fn render(db: &impl ConnectionTrait, m: &kb_sources::Model) -> Result<KbSource, DbErr> {
    Ok(message(m, &page_errors(db, vec![m.id.to_string()]).await?))
}
