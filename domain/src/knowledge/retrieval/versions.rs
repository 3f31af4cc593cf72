//! Whether a scope's in-memory index is current, with one narrow read. Database triggers move an owner's
//! version (`knowledge_versions`) on every insert, update and delete of its FAQs and of their vectors
//! (migration m20261124_000021), whoever writes and on whichever replica; a scope's key is its language,
//! its attached sources, their versions and the agent's, and the embedding model. Read before the FAQs
//! are, a key can only be older than what was read with it, so a change made meanwhile is seen by the
//! next search, never lost.

use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use super::scope::Scope;
use crate::store::entities::knowledge_versions;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    pub language: String,
    /// (owner, version), sorted; an owner that never changed has none.
    pub versions: Vec<(String, i64)>,
    pub sources: Vec<String>,
    pub model: Option<String>,
}

pub fn agent_owner(agent_id: &str) -> String {
    format!("a:{agent_id}")
}

pub fn source_owner(source_id: &str) -> String {
    format!("s:{source_id}")
}

pub async fn key(db: &impl ConnectionTrait, scope: &Scope, model: Option<&str>) -> Result<Key, DbErr> {
    let owners: Vec<String> = std::iter::once(agent_owner(&scope.agent_id))
        .chain(scope.source_ids.iter().map(|s| source_owner(s)))
        .collect();
    let mut versions: Vec<(String, i64)> = knowledge_versions::Entity::find()
        .filter(knowledge_versions::Column::Owner.is_in(owners))
        .all(db)
        .await?
        .into_iter()
        .map(|v| (v.owner, v.version))
        .collect();
    versions.sort();
    let mut sources = scope.source_ids.clone();
    sources.sort();
    Ok(Key {
        language: scope.analyzer.language().to_owned(),
        versions,
        sources,
        model: model.map(str::to_owned),
    })
}
