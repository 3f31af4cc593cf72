//! An uploaded document waiting for its import: kept until the import ends (then deleted with the source's
//! end, in the same transaction), and deleted with its source (foreign key, ON DELETE CASCADE).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "kb_source_files")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub source_id: crate::resource_id::SourceId,
    pub file_name: String,
    pub content_type: String,
    /// `html`, `text`, `markdown`, `pdf`, `docx` or `csv`.
    pub format: String,
    pub data: Vec<u8>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
