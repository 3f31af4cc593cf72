//! One term of an indexed FAQ (a posting): how often it occurs in the question and in the answer, with the
//! FAQ's field lengths and owner repeated so that a search reads its postings without a join.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "faq_index_terms")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub faq_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub language: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub term: String,
    pub agent_id: Option<String>,
    pub source_id: Option<String>,
    pub question_tf: i32,
    pub answer_tf: i32,
    pub question_len: i32,
    pub answer_len: i32,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
