//! `/v1/agents`: AI agents, their bot configuration, FAQs, attached knowledge sources and tools.

pub mod faqs;
pub mod fields;
pub mod knowledge;
pub mod service;
pub mod tools;

use sea_orm::ConnectionTrait;

use crate::{
    error::{ApiError, ApiResult},
    store::{self, entities::agents},
};

/// The account's agent, or 404.
pub async fn find(db: &impl ConnectionTrait, account_id: &str, agent_id: &str) -> ApiResult<agents::Model> {
    store::owned::<agents::Entity>(db, agents::Column::AccountId, account_id, agent_id)
        .await?
        .ok_or_else(|| ApiError::not_found("agent"))
}
