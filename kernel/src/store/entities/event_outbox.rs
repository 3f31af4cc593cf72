//! An event waiting to be delivered, written in the same transaction as the change that caused it. `seq`
//! orders events as they were written (two events of one transaction share `created_at`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "event_outbox")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub seq: i64,
    #[sea_orm(unique)]
    pub id: crate::resource_id::EventId,
    pub account_id: crate::tenant::AccountId,
    pub event_type: String,
    /// The event's `data`, as JSON.
    pub payload: String,
    pub created_at: DateTimeUtc,
    /// When the event was fanned out to deliveries; null while it waits.
    pub dispatched_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
