//! A webhook subscription with its delivery health. `events` is a JSON array of event types (`*` for all);
//! `secret` is the `whsec_...` signing secret. The failure fields are kept here, in the database, so the
//! disable rules hold across restarts and replicas.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhooks")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: crate::resource_id::WebhookId,
    pub account_id: crate::tenant::AccountId,
    pub name: Option<String>,
    pub url: String,
    pub description: String,
    pub events: String,
    pub secret: String,
    pub status: WebhookStatus,
    pub disabled_reason: Option<String>,
    pub disabled_at: Option<DateTimeUtc>,
    pub consecutive_failures: i32,
    pub failing_since: Option<DateTimeUtc>,
    pub last_success_at: Option<DateTimeUtc>,
    pub last_failure_at: Option<DateTimeUtc>,
    pub last_error: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

/// Whether a subscription gets deliveries: a disabled one (by hand, or after failing too long) keeps what
/// was parked for it until it is enabled again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum WebhookStatus {
    #[sea_orm(string_value = "active")]
    Active,
    #[sea_orm(string_value = "disabled")]
    Disabled,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
