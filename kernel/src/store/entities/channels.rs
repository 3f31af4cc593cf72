//! A connected channel. `config` holds the provider credentials, sealed; `configured_keys` is a JSON array of their names.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "channels")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub account_id: String,
    pub name: String,
    #[sea_orm(column_name = "type")]
    pub kind: String,
    pub provider: String,
    pub config: String,
    pub configured_keys: String,
    /// What the business types into Meta's console to verify the callback URL; "" for other providers.
    pub verify_token: String,
    /// The public key a web chat widget names its channel by (`wk_` + 24 base62); `None` for other channels.
    pub widget_key: Option<String>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
