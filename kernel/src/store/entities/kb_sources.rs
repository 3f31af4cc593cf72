//! A knowledge source (an imported web page, document or crawl) and the progress of its import.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "kb_sources")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: crate::resource_id::SourceId,
    pub account_id: crate::tenant::AccountId,
    pub kind: SourceKind,
    pub status: SourceStatus,
    pub pages_total: i32,
    pub pages_done: i32,
    pub sections: i32,
    pub faqs_created: i32,
    pub credits_used_milli: i64,
    pub error: Option<String>,
    /// The page of a single-URL import, or the sitemap of a bulk import read from one.
    pub origin_url: Option<String>,
    /// The uploaded document's file name (kind `file`).
    pub file_name: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

/// What is imported: the pages a sitemap lists (or a list of URLs), one web page, or an uploaded document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum SourceKind {
    #[sea_orm(string_value = "bulk")]
    Bulk,
    #[sea_orm(string_value = "url")]
    Url,
    #[sea_orm(string_value = "file")]
    File,
}

/// Where an import stands: queued until its first page is read, processing while pages are, then ready
/// or failed for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum SourceStatus {
    #[sea_orm(string_value = "queued")]
    Queued,
    #[sea_orm(string_value = "processing")]
    Processing,
    #[sea_orm(string_value = "ready")]
    Ready,
    #[sea_orm(string_value = "failed")]
    Failed,
}

impl SourceStatus {
    /// Queued or processing: the import still runs.
    pub const UNFINISHED: [Self; 2] = [Self::Queued, Self::Processing];
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
