//! A subscription checkout order. `status` is `created` until a verified payment makes it `paid`.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "orders")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub provider: String,
    pub plan: String,
    pub currency: String,
    pub amount: i64,
    pub phone: String,
    pub name: String,
    pub email: String,
    pub business_name: String,
    pub status: String,
    pub payment_id: Option<String>,
    pub created_at: DateTimeUtc,
    pub paid_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

pub const STATUS_CREATED: &str = "created";
pub const STATUS_PAID: &str = "paid";
