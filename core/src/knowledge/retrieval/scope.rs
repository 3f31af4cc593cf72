//! What one agent's search reads: the agent's own FAQs and those of the knowledge sources attached to it,
//! analysed in the agent's language. Applied knowledge groups are among the agent's own FAQs (applying a
//! group copies its FAQs to the agent, `group_id` set).

use sea_orm::{ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};

use super::analyzer::Analyzer;
use crate::store::entities::{agent_kb_sources, agents};

pub struct Scope {
    pub account_id: String,
    pub agent_id: String,
    pub source_ids: Vec<String>,
    pub analyzer: Analyzer,
}

/// Who an indexed FAQ belongs to, and so which table holds it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    Agent(String),
    Source(String),
}

impl Owner {
    /// From an index row's owner columns (exactly one is set).
    pub fn of(agent_id: Option<String>, source_id: Option<String>) -> Option<Self> {
        match (agent_id, source_id) {
            (Some(agent), None) => Some(Self::Agent(agent)),
            (None, Some(source)) => Some(Self::Source(source)),
            _ => None,
        }
    }

    /// The owner columns of an index row.
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
        Ok(Self {
            account_id: agent.account_id.clone(),
            agent_id: agent.id.clone(),
            source_ids,
            analyzer: Analyzer::for_language(&agent.language),
        })
    }

    /// Index rows (of a table with these owner columns) of this scope's FAQs, in its language.
    pub fn rows<C: ColumnTrait>(&self, language: C, agent_id: C, source_id: C) -> Condition {
        Condition::all().add(language.eq(self.analyzer.language())).add(
            Condition::any()
                .add(agent_id.eq(&self.agent_id))
                .add(source_id.is_in(self.source_ids.iter().cloned())),
        )
    }
}
