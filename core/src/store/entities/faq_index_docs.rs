//! One FAQ as the lexical index saw it in one analysis language: the version indexed and its field lengths
//! in terms. Owned by an agent (its own FAQ) or a knowledge source (a source FAQ).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "faq_index_docs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub faq_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub language: String,
    pub account_id: String,
    pub agent_id: Option<String>,
    pub source_id: Option<String>,
    /// The FAQ's `updated_at` when it was indexed: another value means the FAQ changed since.
    pub faq_updated_at: DateTimeUtc,
    pub question_len: i32,
    pub answer_len: i32,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
