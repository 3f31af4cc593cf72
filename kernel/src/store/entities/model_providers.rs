//! An account's own model provider: which protocol, its API key (sealed with the account id as context),
//! the base URL and the model ("" for the server's defaults).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "model_providers")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub account_id: crate::tenant::AccountId,
    pub provider: String,
    pub sealed_key: String,
    pub base_url: String,
    pub model: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
