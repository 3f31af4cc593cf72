//! One event to one subscription. `next_attempt_ms` (Unix milliseconds, null once settled) is when a worker
//! may next claim it; a claim pushes it to the end of the claim's lease (renewed while the worker holds it),
//! so a delivery whose worker died is claimed again when the lease runs out.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_deliveries")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: crate::resource_id::DeliveryId,
    pub account_id: crate::tenant::AccountId,
    pub webhook_id: crate::resource_id::WebhookId,
    pub event_id: crate::resource_id::EventId,
    pub event_type: String,
    pub status: DeliveryStatus,
    /// Attempts recorded so far (counted again from 0 after a re-enable).
    pub attempt_count: i32,
    pub next_attempt_ms: Option<i64>,
    pub created_at: DateTimeUtc,
    pub delivered_at: Option<DateTimeUtc>,
    /// When it last became `succeeded` or `failed`; null while pending.
    pub settled_at: Option<DateTimeUtc>,
    /// The token of the claim holding the delivery (its attempt runs, or its result is being written).
    pub claim_token: Option<i64>,
    /// The attempt that delivered it (its number, start, HTTP status and duration); its other attempts are
    /// `webhook_attempts` rows.
    pub delivered_attempt: Option<i32>,
    pub delivered_started_at: Option<DateTimeUtc>,
    pub delivered_status_code: Option<i32>,
    pub delivered_duration_ms: Option<i32>,
}

impl Model {
    /// A new delivery of `event` to `webhook`, due now.
    pub fn pending(
        id: crate::resource_id::DeliveryId,
        account_id: crate::tenant::AccountId,
        webhook_id: crate::resource_id::WebhookId,
        event_id: crate::resource_id::EventId,
        event_type: String,
        now: DateTimeUtc,
    ) -> Self {
        Self {
            id,
            account_id,
            webhook_id,
            event_id,
            event_type,
            status: DeliveryStatus::Pending,
            attempt_count: 0,
            next_attempt_ms: Some(now.timestamp_millis()),
            created_at: now,
            delivered_at: None,
            settled_at: None,
            claim_token: None,
            delivered_attempt: None,
            delivered_started_at: None,
            delivered_status_code: None,
            delivered_duration_ms: None,
        }
    }
}

/// Where a delivery stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum DeliveryStatus {
    /// Not delivered yet: waiting for its next attempt, or in one.
    #[sea_orm(string_value = "pending")]
    Pending,
    #[sea_orm(string_value = "succeeded")]
    Succeeded,
    /// Out of attempts, or its subscription was gone.
    #[sea_orm(string_value = "failed")]
    Failed,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
