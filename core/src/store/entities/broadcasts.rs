//! A broadcast. `audience` and `stats` are JSON objects.

use sea_orm::entity::prelude::*;

/// Statuses of a broadcast that still needs its agent and can still be cancelled.
pub const UNFINISHED: &[&str] = &["draft", "scheduled", "sending"];

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "broadcasts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub account_id: String,
    pub name: String,
    pub agent_id: String,
    pub channel: String,
    pub audience: String,
    pub opener: String,
    pub send_at: Option<DateTimeUtc>,
    pub status: String,
    pub stats: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
