//! Knowledge sources attached to an agent. A source is imported once (kb-sources) and can feed several
//! agents; attaching is idempotent and detaching leaves the source itself alone.

use chrono::{DateTime, Utc};
use frontdesk_api::v1::{
    AgentKbSource, AgentKbSourceAnswer, AgentKbSourceList, AttachKbSourceRequest, ListAgentKbSourcesRequest,
};
use sea_orm::{
    ActiveEnum, ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, sea_query::OnConflict,
};

use crate::resource_id::{AgentId, SourceId};
use crate::{
    access::AccountId,
    error::{ApiError, ApiResult},
    paging::{self, Page},
    store::{
        self,
        entities::{agent_kb_sources, agents, kb_sources},
    },
    timestamps,
};

/// The account's agent, or 404.
async fn find(db: &impl ConnectionTrait, account_id: &AccountId, agent_id: &str) -> ApiResult<agents::Model> {
    store::owned::<agents::Entity>(db, agents::Column::AccountId, account_id, agent_id)
        .await?
        .ok_or_else(|| ApiError::not_found("agent"))
}

fn message(link: &agent_kb_sources::Model, source: Option<&kb_sources::Model>) -> AgentKbSource {
    AgentKbSource {
        source_id: link.source_id.to_string(),
        agent_id: link.agent_id.to_string(),
        kind: source.map(|s| s.kind.to_value()).unwrap_or_default(),
        status: source.map(|s| s.status.to_value()).unwrap_or_default(),
        attached_at: Some(timestamps::to_proto(link.created_at)),
    }
}

pub async fn list(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    r: ListAgentKbSourcesRequest,
) -> ApiResult<AgentKbSourceList> {
    let page = Page::checked(r.limit, &r.cursor, crate::ids::Kind::AgentSource.prefix())?;
    let agent = find(db, account_id, &r.agent_id).await?;
    let select = agent_kb_sources::Entity::find().filter(agent_kb_sources::Column::AgentId.eq(&agent.id));
    let (links, more) = paging::fetch(
        db,
        select,
        &page,
        agent_kb_sources::Column::CreatedAt,
        agent_kb_sources::Column::Id,
    )
    .await?;
    let sources = kb_sources::Entity::find()
        .filter(kb_sources::Column::AccountId.eq(account_id))
        .filter(kb_sources::Column::Id.is_in(links.iter().map(|l| l.source_id.clone())))
        .all(db)
        .await?;
    let (kb_sources, next_cursor) = paging::render(
        &links,
        more,
        |l| (l.created_at, l.id.as_str()),
        |link| message(link, sources.iter().find(|s| s.id == link.source_id)),
    );
    Ok(AgentKbSourceList {
        success: true,
        next_cursor,
        kb_sources,
    })
}

pub async fn attach(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    r: AttachKbSourceRequest,
    now: DateTime<Utc>,
) -> ApiResult<AgentKbSourceAnswer> {
    if r.source_id.trim().is_empty() {
        return Err(ApiError::field("source_id", "is required"));
    }
    // Under the account lock, as agent deletion: nothing is added to an agent being deleted.
    crate::accounts::store::lock(db, account_id).await?;
    let agent = find(db, account_id, &r.agent_id).await?;
    let source = store::owned::<kb_sources::Entity>(db, kb_sources::Column::AccountId, account_id, &r.source_id)
        .await?
        .ok_or_else(|| ApiError::not_found("knowledge source"))?;
    // Insert unless attached already (also when a concurrent attach of the pair wins), then read the pair.
    let link = agent_kb_sources::Model {
        id: crate::ids::new_id(crate::ids::Kind::AgentSource),
        account_id: account_id.clone(),
        agent_id: agent.id.clone(),
        source_id: source.id.clone(),
        created_at: now,
    };
    let pair = [agent_kb_sources::Column::AgentId, agent_kb_sources::Column::SourceId];
    agent_kb_sources::Entity::insert(agent_kb_sources::ActiveModel::from(link).reset_all())
        .on_conflict(OnConflict::columns(pair).do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    let link = agent_kb_sources::Entity::find()
        .filter(agent_kb_sources::Column::AgentId.eq(&agent.id))
        .filter(agent_kb_sources::Column::SourceId.eq(&source.id))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::internal("knowledge attachment missing after insert"))?;
    Ok(AgentKbSourceAnswer {
        success: true,
        kb_source: Some(message(&link, Some(&source))),
    })
}

pub async fn detach(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    agent: &AgentId,
    source: &SourceId,
) -> ApiResult<()> {
    let agent = find(db, account_id, agent.as_str()).await?;
    let removed = agent_kb_sources::Entity::delete_many()
        .filter(agent_kb_sources::Column::AgentId.eq(&agent.id))
        .filter(agent_kb_sources::Column::SourceId.eq(source))
        .exec(db)
        .await?;
    if removed.rows_affected == 0 {
        return Err(ApiError::not_found("knowledge source attached to this agent"));
    }
    Ok(())
}
