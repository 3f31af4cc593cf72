//! A routing rule: conversations on `channel` that match go to `agent_id`. `keywords` is a JSON array.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "entry_points")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub account_id: crate::tenant::AccountId,
    pub agent_id: crate::resource_id::AgentId,
    pub channel: String,
    pub keywords: String,
    #[sea_orm(column_name = "ref")]
    pub referral: String,
    pub url_prefix: String,
    pub priority: i32,
    pub enabled: bool,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
