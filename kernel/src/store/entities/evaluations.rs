//! An evaluation of an agent: its cases, the results of those run so far, and how it ended.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "evaluations")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub account_id: crate::tenant::AccountId,
    pub agent_id: crate::resource_id::AgentId,
    pub status: EvaluationStatus,
    /// The cases as given, JSON.
    pub cases: String,
    /// The results of the cases run so far, in case order, JSON.
    pub results: String,
    pub error: String,
    pub created_at: DateTimeUtc,
    pub completed_at: Option<DateTimeUtc>,
}

/// Where an evaluation stands: queued, running its cases, then completed or failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum EvaluationStatus {
    #[sea_orm(string_value = "queued")]
    Queued,
    #[sea_orm(string_value = "running")]
    Running,
    #[sea_orm(string_value = "completed")]
    Completed,
    #[sea_orm(string_value = "failed")]
    Failed,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
