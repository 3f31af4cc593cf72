//! What one agent's search reads: the agent's own FAQs and those of the knowledge sources attached to it,
//! analysed in the agent's language. Applied knowledge groups are among the agent's own FAQs (applying a
//! group copies its FAQs to the agent, `group_id` set).

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};

use super::{analyzer::Analyzer, question_words::QuestionWords};
use crate::{
    access::AccountId,
    store::entities::{agent_kb_sources, agents},
};

pub struct Scope {
    pub account_id: AccountId,
    pub agent_id: String,
    pub source_ids: Vec<String>,
    pub analyzer: Analyzer,
    pub words: QuestionWords,
}

/// Who a FAQ belongs to, and so which table holds it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    Agent(String),
    Source(String),
}

impl Owner {
    /// The owner columns of a row about the FAQ (exactly one is set).
    pub fn columns(&self) -> (Option<String>, Option<String>) {
        match self {
            Self::Agent(agent) => (Some(agent.clone()), None),
            Self::Source(source) => (None, Some(source.clone())),
        }
    }
}

impl Scope {
    /// The scope of a (found, so the account's own) agent.
    pub async fn of(db: &impl ConnectionTrait, agent: &agents::Model) -> Result<Self, sea_orm::DbErr> {
        let source_ids = agent_kb_sources::Entity::find()
            .select_only()
            .column(agent_kb_sources::Column::SourceId)
            .filter(agent_kb_sources::Column::AccountId.eq(&agent.account_id))
            .filter(agent_kb_sources::Column::AgentId.eq(&agent.id))
            .into_tuple::<String>()
            .all(db)
            .await?;
        let analyzer = Analyzer::for_language(&agent.language);
        Ok(Self {
            account_id: agent.account_id.clone(),
            agent_id: agent.id.to_string(),
            source_ids,
            words: QuestionWords::for_analyzer(&analyzer),
            analyzer,
        })
    }
}
