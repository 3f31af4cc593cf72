//! A group of like questions an agent could not answer.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "knowledge_gaps")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: crate::resource_id::GapId,
    pub account_id: crate::tenant::AccountId,
    pub agent_id: crate::resource_id::AgentId,
    /// The group's most central question.
    pub question: String,
    /// The mean of its questions' vectors, and its question's vector (f32 little-endian).
    pub centroid: Option<Vec<u8>>,
    pub question_vector: Option<Vec<u8>>,
    /// Questions it has gathered in all.
    pub members: i32,
    /// Its questions' subject terms, JSON.
    pub terms: String,
    pub status: GapStatus,
    pub faq_id: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

/// Where a gap stands: open while questions gather in it, resolved with an FAQ that answers them, or
/// dismissed by a person.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum GapStatus {
    #[sea_orm(string_value = "open")]
    Open,
    #[sea_orm(string_value = "resolved")]
    Resolved,
    #[sea_orm(string_value = "dismissed")]
    Dismissed,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
