//! An AI agent's configuration. `rules` is a JSON array of strings; `booking` and `follow_ups` are JSON objects.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "agents")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: crate::resource_id::AgentId,
    pub account_id: crate::tenant::AccountId,
    pub name: String,
    pub instructions: String,
    pub rules: String,
    pub goal: String,
    pub personality: String,
    pub language: String,
    pub ai_tier: AiTier,
    pub anthropic_model: String,
    pub booking: String,
    pub follow_ups: String,
    pub status: AgentStatus,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

/// What an agent's replies cost and which models it may name on the server's key (`agents::tier`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum AiTier {
    #[sea_orm(string_value = "mini")]
    Mini,
    #[sea_orm(string_value = "pro")]
    Pro,
    #[sea_orm(string_value = "max")]
    Max,
}

/// Whether an agent answers: a paused one keeps its settings and answers nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum AgentStatus {
    #[sea_orm(string_value = "active")]
    Active,
    #[sea_orm(string_value = "paused")]
    Paused,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
