//! One page of a knowledge source's import: its URL, whether it is read yet, and what reading it cost or
//! why it failed.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "kb_source_pages")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub source_id: crate::resource_id::SourceId,
    /// Order of reading.
    pub position: i32,
    pub url: String,
    pub status: PageStatus,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// Characters of extracted text (what was charged for).
    pub characters: i32,
    pub credits_milli: i64,
    pub updated_at: DateTimeUtc,
}

/// Whether a page is read yet: pending, then done or failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum PageStatus {
    #[sea_orm(string_value = "pending")]
    Pending,
    #[sea_orm(string_value = "done")]
    Done,
    #[sea_orm(string_value = "failed")]
    Failed,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
