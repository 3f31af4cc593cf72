//! One HTTP attempt of a delivery that did not deliver it, as it ended (the attempt that delivered is kept
//! in the delivery's row).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_attempts")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub seq: i64,
    pub delivery_id: crate::resource_id::DeliveryId,
    pub webhook_id: crate::resource_id::WebhookId,
    pub attempt: i32,
    pub started_at: DateTimeUtc,
    pub status_code: Option<i32>,
    pub duration_ms: i32,
    pub error: Option<String>,
    pub next_attempt_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
