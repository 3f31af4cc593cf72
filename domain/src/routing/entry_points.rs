//! Entry points (routing rules), channel defaults and the resolve call that applies them.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use frontdesk_api::v1::{
    ChannelDefault, ChannelDefaultAnswer, ChannelDefaultList, CreateEntryPointRequest, DeleteEntryPointRequest,
    Deleted, EntryPoint, EntryPointAnswer, EntryPointList, EntryPointMatch, GetEntryPointRequest,
    ListChannelDefaultsRequest, ListEntryPointsRequest, Resolution, ResolveRequest, SetChannelDefaultRequest,
    UpdateEntryPointRequest, entry_points_server::EntryPoints,
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, IntoActiveModel, QueryFilter,
    QueryOrder, sea_query::OnConflict,
};
use tonic::{Request, Response, Status};

use super::{
    channels::{connected, require_connected},
    resolver::{self, Inbound, Route, Rule},
};
use crate::{
    access::AccountId,
    accounts,
    agents::{self},
    clock::Clock,
    error::{ApiError, ApiResult},
    paging::{self, Page},
    platform_calls::{account_of, apply_mask, deleted},
    store::{
        self,
        entities::{agents as agent_rows, channel_defaults, entry_points},
        from_json_text, to_json_text,
    },
    timestamps,
    validate::Violations,
};

const MAX_PRIORITY: i32 = 1_000;

#[derive(Clone)]
pub struct EntryPointsService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
}

impl EntryPointsService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>) -> Self {
        Self { db, clock }
    }
}

fn message(m: &entry_points::Model) -> EntryPoint {
    EntryPoint {
        id: m.id.clone(),
        agent_id: m.agent_id.to_string(),
        channel: m.channel.clone(),
        r#match: Some(EntryPointMatch {
            keywords: from_json_text(&m.keywords),
            r#ref: m.referral.clone(),
            url_prefix: m.url_prefix.clone(),
        }),
        priority: m.priority,
        enabled: m.enabled,
        created_at: Some(timestamps::to_proto(m.created_at)),
        updated_at: Some(timestamps::to_proto(m.updated_at)),
    }
}

fn answer(m: &entry_points::Model) -> Response<EntryPointAnswer> {
    Response::new(EntryPointAnswer {
        success: true,
        entry_point: Some(message(m)),
    })
}

fn default_message(m: &channel_defaults::Model) -> ChannelDefault {
    ChannelDefault {
        channel: m.channel.clone(),
        agent_id: m.agent_id.to_string(),
        updated_at: Some(timestamps::to_proto(m.updated_at)),
    }
}

fn check_match(v: &mut Violations, m: &EntryPointMatch) {
    v.list("match.keywords", &m.keywords, 50, 100);
    v.text("match.ref", &m.r#ref, false, 200);
    v.text("match.url_prefix", &m.url_prefix, false, 2_000);
}

fn check_priority(v: &mut Violations, priority: i32) {
    v.check(
        (-MAX_PRIORITY..=MAX_PRIORITY).contains(&priority),
        "priority",
        format!("must be between -{MAX_PRIORITY} and {MAX_PRIORITY}"),
    );
}

async fn find(db: &impl ConnectionTrait, account_id: &AccountId, id: &str) -> ApiResult<entry_points::Model> {
    store::owned::<entry_points::Entity>(db, entry_points::Column::AccountId, account_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("entry point"))
}

/// Makes `agent_id` the default of `channel` (both checked). Shared with the campaigns facade.
pub async fn set_default(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    channel: &str,
    agent_id: &str,
    now: DateTime<Utc>,
) -> ApiResult<channel_defaults::Model> {
    // Under the account lock, as agent deletion and channel disconnection: no default outlives either.
    accounts::store::lock(db, account_id).await?;
    require_connected(db, account_id, channel, "channel").await?;
    agents::require(db, account_id, agent_id, "agent_id").await?;
    let row = channel_defaults::Model {
        id: crate::ids::new_id(crate::ids::Kind::ChannelDefault),
        account_id: account_id.clone(),
        channel: channel.to_owned(),
        agent_id: agent_id.into(),
        created_at: now,
        updated_at: now,
    };
    channel_defaults::Entity::insert(channel_defaults::ActiveModel::from(row).reset_all())
        .on_conflict(
            OnConflict::columns([channel_defaults::Column::AccountId, channel_defaults::Column::Channel])
                .update_columns([channel_defaults::Column::AgentId, channel_defaults::Column::UpdatedAt])
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    default_of(db, account_id, channel)
        .await?
        .ok_or_else(|| ApiError::internal("channel default missing after upsert"))
}

/// The channel's default row.
pub async fn default_of(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    channel: &str,
) -> ApiResult<Option<channel_defaults::Model>> {
    Ok(channel_defaults::Entity::find()
        .filter(channel_defaults::Column::AccountId.eq(account_id))
        .filter(channel_defaults::Column::Channel.eq(channel))
        .one(db)
        .await?)
}

/// Which agent answers a conversation on `channel`: rules and default of agents that are active.
pub async fn route(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    channel: &str,
    inbound: &Inbound<'_>,
) -> ApiResult<Route> {
    let rows = entry_points::Entity::find()
        .filter(entry_points::Column::AccountId.eq(account_id))
        .filter(entry_points::Column::Channel.eq(channel))
        .filter(entry_points::Column::Enabled.eq(true))
        .all(db)
        .await?;
    let default = default_of(db, account_id, channel).await?;
    let agent_ids = rows
        .iter()
        .map(|r| r.agent_id.clone())
        .chain(default.iter().map(|d| d.agent_id.clone()));
    let active: Vec<crate::resource_id::AgentId> = agent_rows::Entity::find()
        .filter(agent_rows::Column::AccountId.eq(account_id))
        .filter(agent_rows::Column::Id.is_in(agent_ids))
        .filter(agent_rows::Column::Status.eq(agent_rows::AgentStatus::Active))
        .all(db)
        .await?
        .into_iter()
        .map(|a| a.id)
        .collect();
    let rules: Vec<Rule> = rows
        .into_iter()
        .filter(|r| active.contains(&r.agent_id))
        .map(|r| Rule {
            keywords: from_json_text(&r.keywords),
            id: r.id,
            agent_id: r.agent_id.into(),
            referral: r.referral,
            url_prefix: r.url_prefix,
            priority: r.priority,
            enabled: r.enabled,
            created_at: r.created_at,
        })
        .collect();
    let default_agent = default.map(|d| d.agent_id).filter(|a| active.contains(a));
    Ok(resolver::resolve(&rules, default_agent.as_deref(), inbound))
}

impl EntryPointsService {
    async fn create(&self, account_id: &AccountId, r: CreateEntryPointRequest) -> ApiResult<entry_points::Model> {
        let matching = r.r#match.unwrap_or_default();
        let mut v = Violations::new();
        check_match(&mut v, &matching);
        check_priority(&mut v, r.priority);
        v.finish()?;
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        accounts::store::lock(&txn, account_id).await?;
        require_connected(&txn, account_id, &r.channel, "channel").await?;
        let agent = agents::find(&txn, account_id, &r.agent_id).await?;
        let row = entry_points::Model {
            id: crate::ids::new_id(crate::ids::Kind::EntryPoint),
            account_id: account_id.clone(),
            agent_id: agent.id,
            channel: r.channel,
            keywords: to_json_text(&trimmed(matching.keywords)),
            referral: matching.r#ref,
            url_prefix: matching.url_prefix,
            priority: r.priority,
            enabled: r.enabled.unwrap_or(true),
            created_at: now,
            updated_at: now,
        };
        entry_points::Entity::insert(entry_points::ActiveModel::from(row.clone()).reset_all())
            .exec_without_returning(&txn)
            .await?;
        txn.commit().await?;
        Ok(row)
    }

    /// Checks the fields the mask names, then (under the account lock) that the agent and channel exist and
    /// the rule does, and writes it.
    async fn update(&self, account_id: &AccountId, r: UpdateEntryPointRequest) -> ApiResult<entry_points::Model> {
        let (mut agent, mut channel, mut matching, mut priority, mut enabled) = (None, None, None, None, None);
        apply_mask(r.update_mask.as_ref(), "an entry point", |path| {
            match path {
                "agent_id" => agent = Some(r.agent_id.clone()),
                "channel" => channel = Some(r.channel.clone()),
                "match" => matching = Some(r.r#match.clone().unwrap_or_default()),
                "priority" => priority = Some(r.priority),
                "enabled" => enabled = Some(r.enabled),
                "entry_point_id" => {}
                _ => return false,
            }
            true
        })?;
        let mut v = Violations::new();
        if let Some(matching) = &matching {
            check_match(&mut v, matching);
        }
        if let Some(priority) = priority {
            check_priority(&mut v, priority);
        }
        v.finish()?;
        let txn = crate::store::begin_write(&self.db).await?;
        accounts::store::lock(&txn, account_id).await?;
        if let Some(agent) = &agent {
            agents::require(&txn, account_id, agent, "agent_id").await?;
        }
        if let Some(channel) = &channel {
            require_connected(&txn, account_id, channel, "channel").await?;
        }
        let mut row = find(&txn, account_id, &r.entry_point_id).await?;
        if let Some(agent) = agent {
            row.agent_id = agent.into();
        }
        if let Some(channel) = channel {
            row.channel = channel;
        }
        if let Some(matching) = matching {
            row.keywords = to_json_text(&trimmed(matching.keywords));
            row.referral = matching.r#ref;
            row.url_prefix = matching.url_prefix;
        }
        if let Some(priority) = priority {
            row.priority = priority;
        }
        if let Some(enabled) = enabled {
            row.enabled = enabled;
        }
        row.updated_at = self.clock.now();
        row.clone().into_active_model().reset_all().update(&txn).await?;
        txn.commit().await?;
        Ok(row)
    }
}

fn trimmed(keywords: Vec<String>) -> Vec<String> {
    keywords.into_iter().map(|k| k.trim().to_owned()).collect()
}

#[tonic::async_trait]
impl EntryPoints for EntryPointsService {
    async fn list_entry_points(
        &self,
        request: Request<ListEntryPointsRequest>,
    ) -> Result<Response<EntryPointList>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let page = Page::checked(r.limit, &r.cursor, crate::ids::Kind::EntryPoint.prefix())?;
        let mut select = entry_points::Entity::find().filter(entry_points::Column::AccountId.eq(&account_id));
        if !r.agent_id.is_empty() {
            // Another account's agent is as unknown as a missing one, under /v1/agents/{id} and as a filter.
            let agent = agents::find(&self.db, &account_id, &r.agent_id).await?;
            select = select.filter(entry_points::Column::AgentId.eq(agent.id));
        }
        if !r.channel.is_empty() {
            select = select.filter(entry_points::Column::Channel.eq(&r.channel));
        }
        let (rows, more) = paging::fetch(
            &self.db,
            select,
            &page,
            entry_points::Column::CreatedAt,
            entry_points::Column::Id,
        )
        .await
        .map_err(ApiError::from)?;
        let (entry_points, next_cursor) = paging::render(&rows, more, |e| (e.created_at, e.id.as_str()), message);
        Ok(Response::new(EntryPointList {
            success: true,
            next_cursor,
            entry_points,
        }))
    }

    async fn create_entry_point(
        &self,
        request: Request<CreateEntryPointRequest>,
    ) -> Result<Response<EntryPointAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(answer(&self.create(&account_id, request.into_inner()).await?))
    }

    async fn get_entry_point(
        &self,
        request: Request<GetEntryPointRequest>,
    ) -> Result<Response<EntryPointAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(answer(
            &find(&self.db, &account_id, &request.get_ref().entry_point_id).await?,
        ))
    }

    async fn update_entry_point(
        &self,
        request: Request<UpdateEntryPointRequest>,
    ) -> Result<Response<EntryPointAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(answer(&self.update(&account_id, request.into_inner()).await?))
    }

    async fn delete_entry_point(&self, request: Request<DeleteEntryPointRequest>) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let row = find(&self.db, &account_id, &r.entry_point_id).await?;
        if !r.agent_id.is_empty() && r.agent_id != row.agent_id {
            return Err(ApiError::not_found("entry point").into());
        }
        entry_points::Entity::delete_by_id(&row.id)
            .exec(&self.db)
            .await
            .map_err(ApiError::from)?;
        Ok(deleted(row.id))
    }

    async fn set_channel_default(
        &self,
        request: Request<SetChannelDefaultRequest>,
    ) -> Result<Response<ChannelDefaultAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let txn = crate::store::begin_write(&self.db).await.map_err(ApiError::from)?;
        let row = set_default(&txn, &account_id, &r.channel, &r.agent_id, self.clock.now()).await?;
        txn.commit().await.map_err(ApiError::from)?;
        Ok(Response::new(ChannelDefaultAnswer {
            success: true,
            channel_default: Some(default_message(&row)),
        }))
    }

    async fn list_channel_defaults(
        &self,
        request: Request<ListChannelDefaultsRequest>,
    ) -> Result<Response<ChannelDefaultList>, Status> {
        let account_id = account_of(&request)?;
        let rows = channel_defaults::Entity::find()
            .filter(channel_defaults::Column::AccountId.eq(&account_id))
            .order_by_asc(channel_defaults::Column::Channel)
            .all(&self.db)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(ChannelDefaultList {
            success: true,
            channel_defaults: rows.iter().map(default_message).collect(),
        }))
    }

    async fn resolve(&self, request: Request<ResolveRequest>) -> Result<Response<Resolution>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        if r.channel.is_empty() {
            return Err(ApiError::field("channel", "is required").into());
        }
        if connected(&self.db, &account_id, &r.channel).await?.is_none() {
            return Ok(Response::new(Resolution {
                success: true,
                agent_id: None,
                entry_point_id: None,
                reason: "channel_not_connected".to_owned(),
            }));
        }
        let inbound = Inbound {
            text: &r.text,
            referral: &r.r#ref,
            url: &r.url,
        };
        let route = route(&self.db, &account_id, &r.channel, &inbound).await?;
        let reason = route.reason().to_owned();
        let (agent_id, entry_point_id) = match route {
            Route::EntryPoint {
                agent_id,
                entry_point_id,
            } => (Some(agent_id), Some(entry_point_id)),
            Route::ChannelDefault { agent_id } => (Some(agent_id), None),
            Route::NoRoute => (None, None),
        };
        Ok(Response::new(Resolution {
            success: true,
            agent_id,
            entry_point_id,
            reason,
        }))
    }
}
