//! `/v1/agents`: AI agents, their bot configuration, FAQs, attached knowledge sources and tools.

pub mod faqs;
pub mod fields;
pub mod search;
pub mod service;
pub mod tier;
pub mod tools;

use sea_orm::ConnectionTrait;

use crate::{
    access::AccountId,
    error::{ApiError, ApiResult},
    store::{self, entities::agents},
};

/// The account's agent, or 404.
pub async fn find(db: &impl ConnectionTrait, account_id: &AccountId, agent_id: &str) -> ApiResult<agents::Model> {
    store::owned::<agents::Entity>(db, agents::Column::AccountId, account_id, agent_id)
        .await?
        .ok_or_else(|| ApiError::not_found("agent"))
}

/// The account's agent named by a request field, or 400 naming that field (it is an argument, not the
/// resource of the path).
pub async fn require(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    agent_id: &str,
    field: &str,
) -> ApiResult<agents::Model> {
    find(db, account_id, agent_id).await.map_err(|error| {
        if error.code == tonic::Code::NotFound {
            ApiError::field(field, format!("no agent `{agent_id}` on this account"))
        } else {
            error
        }
    })
}
