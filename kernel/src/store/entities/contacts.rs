//! A customer of an account. `phone` and `email` are unique on the account when set (null when not);
//! `tags` is a JSON array and `attributes` a JSON object of strings.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "contacts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: crate::resource_id::ContactId,
    pub account_id: crate::tenant::AccountId,
    pub name: String,
    pub phone: Option<String>,
    pub email: Option<String>,
    pub tags: String,
    pub attributes: String,
    pub opted_out: bool,
    pub recap: String,
    pub recap_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
