//! A broadcast. `audience`, `template` (a WhatsApp template, `""` for none) and `expansion` (where the
//! expansion of the audience stands) are JSON; the counts are kept by the database (see the migration
//! that made them) and folded into these columns.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "broadcasts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: crate::resource_id::BroadcastId,
    pub account_id: crate::tenant::AccountId,
    pub name: String,
    pub agent_id: crate::resource_id::AgentId,
    pub channel: String,
    pub audience: String,
    pub opener: String,
    pub send_at: Option<DateTimeUtc>,
    pub status: BroadcastStatus,
    pub template: String,
    /// Why a `failed` broadcast stopped.
    pub error: String,
    pub expansion: String,
    pub expanded: bool,
    pub started_at: Option<DateTimeUtc>,
    pub completed_at: Option<DateTimeUtc>,
    pub total: i64,
    pub sent: i64,
    pub delivered: i64,
    pub read: i64,
    pub failed: i64,
    pub replied: i64,
    /// Messages no longer queued.
    pub settled: i64,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

/// Where a broadcast stands: a draft, or scheduled for its `send_at`; sending; then completed, cancelled or
/// failed for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum BroadcastStatus {
    #[sea_orm(string_value = "draft")]
    Draft,
    #[sea_orm(string_value = "scheduled")]
    Scheduled,
    #[sea_orm(string_value = "sending")]
    Sending,
    #[sea_orm(string_value = "completed")]
    Completed,
    #[sea_orm(string_value = "cancelled")]
    Cancelled,
    #[sea_orm(string_value = "failed")]
    Failed,
}

impl BroadcastStatus {
    /// A broadcast whose settings can still change.
    pub const CHANGEABLE: [Self; 2] = [Self::Draft, Self::Scheduled];
    /// A broadcast that still needs its agent and can still be cancelled.
    pub const UNFINISHED: [Self; 3] = [Self::Draft, Self::Scheduled, Self::Sending];
    /// A broadcast on its way out, which a failure stops.
    pub const GOING: [Self; 2] = [Self::Scheduled, Self::Sending];
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
