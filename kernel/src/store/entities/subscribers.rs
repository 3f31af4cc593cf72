//! A paying subscriber, keyed by phone; `status` becomes `active` when a payment for it is verified.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "subscribers")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub phone: String,
    pub name: String,
    pub email: String,
    pub business_name: String,
    pub plan: String,
    pub status: String,
    pub last_order_id: String,
    pub activated_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

pub const STATUS_ACTIVE: &str = "active";
