//! A FAQ's sentence-embedding vector under one model, and the FAQ version it was made from. Owned, like
//! the FAQ, by an agent (its own FAQ) or a knowledge source (a source FAQ).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "faq_vectors")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub faq_id: crate::resource_id::FaqId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub model: String,
    pub account_id: crate::tenant::AccountId,
    pub agent_id: Option<crate::resource_id::AgentId>,
    pub source_id: Option<crate::resource_id::SourceId>,
    /// The FAQ's `updated_at` when it was embedded: another value means the FAQ changed since.
    pub faq_updated_at: DateTimeUtc,
    /// Little-endian `f32` components.
    pub vector: Vec<u8>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
