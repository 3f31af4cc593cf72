//! What a campaign made through the deprecated facade is: its id is its agent's (Incoming, Combined) or its broadcast's (Outgoing).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "campaigns")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub account_id: crate::tenant::AccountId,
    #[sea_orm(column_name = "type")]
    pub kind: CampaignType,
    pub agent_id: crate::resource_id::AgentId,
    /// The facade made the agent for this campaign (an Outgoing one's agent then reads as part of it).
    pub owns_agent: bool,
    pub broadcast_id: Option<crate::resource_id::BroadcastId>,
    pub created_at: DateTimeUtc,
}

/// What a campaign does: answer (Incoming), send (Outgoing), or both (Combined). The words are the
/// deprecated API's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum CampaignType {
    #[sea_orm(string_value = "Incoming")]
    Incoming,
    #[sea_orm(string_value = "Outgoing")]
    Outgoing,
    #[sea_orm(string_value = "Combined")]
    Combined,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
