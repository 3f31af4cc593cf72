//! A custom function tool of an agent. `headers` is sealed JSON (see `secrets`); `parameters` a JSON Schema.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "custom_functions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub account_id: crate::tenant::AccountId,
    pub agent_id: crate::resource_id::AgentId,
    pub name: String,
    pub description: String,
    pub url: String,
    pub method: String,
    pub headers: String,
    pub parameters: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
