//! An evaluation of an agent: its cases, the results of those run so far, and how it ended.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "evaluations")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub account_id: String,
    pub agent_id: String,
    pub status: String,
    /// The cases as given, JSON.
    pub cases: String,
    /// The results of the cases run so far, in case order, JSON.
    pub results: String,
    pub error: String,
    pub created_at: DateTimeUtc,
    pub completed_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
