//! `/v1/campaigns` (deprecated): a facade over agents, channel defaults and broadcasts. A campaign's id is
//! its agent's (Incoming, Combined) or its broadcast's (Outgoing); the `campaigns` table records what a
//! campaign made through this facade is, and every other agent or broadcast reads as a campaign too.

pub mod sunset;

use std::{collections::HashMap, sync::Arc};

use chrono::{DateTime, Utc};
use frontdesk_api::v1::{
    Campaign, CampaignAnswer, CampaignList, CreateCampaignRequest, GetCampaignRequest, ListCampaignsRequest,
    UpdateCampaignRequest, campaigns_server::Campaigns,
};
use sea_orm::{
    ActiveEnum, ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder,
};
use tonic::{Request, Response, Status};

use crate::{
    access::AccountId,
    accounts,
    agents::{self, fields::AgentFields, service as agent_ops},
    broadcasts::{self, AudienceSpec, BroadcastFields},
    clock::Clock,
    error::{ApiError, ApiResult},
    paging::{self, Page},
    platform_calls::{account_of, apply_mask},
    routing::{channels::require_connected, entry_points::set_default},
    store::{
        entities::{
            agents as agent_rows, broadcasts as broadcast_rows,
            campaigns::{self, CampaignType},
            channel_defaults,
        },
        from_json_text,
    },
    timestamps,
    validate::Violations,
};

/// What a campaign is made of.
struct Parts {
    id: String,
    kind: CampaignType,
    agent: Option<agent_rows::Model>,
    broadcast: Option<broadcast_rows::Model>,
    /// The first channel (by name) whose default is the agent; "" when none.
    default_channel: String,
    created_at: DateTime<Utc>,
}

#[derive(Clone)]
pub struct CampaignsService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
}

impl CampaignsService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>) -> Self {
        Self { db, clock }
    }
}

/// The account's rows of `E` whose id is in `ids`, by id.
async fn by_id<E: EntityTrait>(
    db: &impl ConnectionTrait,
    [id_column, account_column]: [E::Column; 2],
    account_id: &AccountId,
    ids: impl IntoIterator<Item = String>,
    id_of: impl Fn(&E::Model) -> String,
) -> ApiResult<HashMap<String, E::Model>> {
    Ok(E::find()
        .filter(account_column.eq(account_id))
        .filter(id_column.is_in(ids))
        .all(db)
        .await?
        .into_iter()
        .map(|row| (id_of(&row), row))
        .collect())
}

/// The campaigns with these ids, in their order (unknown ids left out), read with a fixed number of
/// queries however many there are. Each id is a facade record, else an agent (Incoming), else a broadcast
/// (Outgoing).
async fn load(db: &impl ConnectionTrait, account_id: &AccountId, ids: &[String]) -> ApiResult<Vec<Parts>> {
    let records = by_id::<campaigns::Entity>(
        db,
        [campaigns::Column::Id, campaigns::Column::AccountId],
        account_id,
        ids.iter().cloned(),
        |r| r.id.clone(),
    )
    .await?;
    let agent_ids = ids
        .iter()
        .cloned()
        .chain(records.values().map(|r| r.agent_id.to_string()));
    let mut agents = by_id::<agent_rows::Entity>(
        db,
        [agent_rows::Column::Id, agent_rows::Column::AccountId],
        account_id,
        agent_ids,
        |a| a.id.to_string(),
    )
    .await?;
    let broadcast_ids = ids.iter().cloned().chain(
        records
            .values()
            .filter_map(|r| r.broadcast_id.as_ref().map(String::from)),
    );
    let broadcasts = by_id::<broadcast_rows::Entity>(
        db,
        [broadcast_rows::Column::Id, broadcast_rows::Column::AccountId],
        account_id,
        broadcast_ids,
        |b| b.id.to_string(),
    )
    .await?;
    // The agents answering broadcasts that came without their campaign record.
    let answering: Vec<String> = broadcasts
        .values()
        .map(|b| b.agent_id.to_string())
        .filter(|id| !agents.contains_key(id))
        .collect();
    if !answering.is_empty() {
        agents.extend(
            by_id::<agent_rows::Entity>(
                db,
                [agent_rows::Column::Id, agent_rows::Column::AccountId],
                account_id,
                answering,
                |a| a.id.to_string(),
            )
            .await?,
        );
    }
    let mut defaults: HashMap<String, String> = HashMap::new();
    for default in channel_defaults::Entity::find()
        .filter(channel_defaults::Column::AccountId.eq(account_id))
        .filter(channel_defaults::Column::AgentId.is_in(agents.keys().cloned()))
        .order_by_asc(channel_defaults::Column::Channel)
        .all(db)
        .await?
    {
        defaults.entry(default.agent_id.into()).or_insert(default.channel);
    }
    let parts = |id: &String| {
        let (kind, created_at, agent_id, broadcast_id) = if let Some(r) = records.get(id) {
            (r.kind, r.created_at, Some(r.agent_id.clone()), r.broadcast_id.clone())
        } else if let Some(a) = agents.get(id) {
            (CampaignType::Incoming, a.created_at, Some(a.id.clone()), None)
        } else {
            let b = broadcasts.get(id)?;
            (
                CampaignType::Outgoing,
                b.created_at,
                Some(b.agent_id.clone()),
                Some(b.id.clone()),
            )
        };
        let agent = agent_id.and_then(|a| agents.get(a.as_str()).cloned());
        Some(Parts {
            id: id.clone(),
            kind,
            default_channel: agent
                .as_ref()
                .and_then(|a| defaults.get(a.id.as_str()).cloned())
                .unwrap_or_default(),
            agent,
            broadcast: broadcast_id.and_then(|b| broadcasts.get(b.as_str()).cloned()),
            created_at,
        })
    };
    Ok(ids.iter().filter_map(parts).collect())
}

/// The one campaign with this id, or 404.
async fn parts(db: &impl ConnectionTrait, account_id: &AccountId, id: &str) -> ApiResult<Parts> {
    load(db, account_id, &[id.to_owned()])
        .await?
        .pop()
        .ok_or_else(|| ApiError::not_found("campaign"))
}

/// The agent behind a campaign (for knowledge groups' `apply`).
pub async fn agent_of(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    campaign_id: &str,
) -> ApiResult<crate::resource_id::AgentId> {
    parts(db, account_id, campaign_id)
        .await?
        .agent
        .map(|a| a.id)
        .ok_or_else(|| ApiError::not_found("campaign"))
}

fn render(p: Parts) -> Campaign {
    let outgoing = p.kind == CampaignType::Outgoing;
    let (name, channel, status) = match (&p.broadcast, &p.agent) {
        (Some(b), _) if outgoing => (b.name.clone(), b.channel.clone(), b.status.to_value()),
        (_, Some(a)) => (a.name.clone(), p.default_channel.clone(), a.status.to_value()),
        (Some(b), None) => (String::new(), String::new(), b.status.to_value()),
        (None, None) => Default::default(),
    };
    Campaign {
        id: p.id,
        name,
        r#type: p.kind.to_value(),
        agent_id: p.agent.as_ref().map(|a| a.id.to_string()).unwrap_or_default(),
        broadcast_id: p.broadcast.as_ref().map(|b| b.id.to_string()),
        channel,
        instructions: p.agent.as_ref().map(|a| a.instructions.clone()).unwrap_or_default(),
        opener: p.broadcast.as_ref().map(|b| b.opener.clone()).unwrap_or_default(),
        audience: Some(
            p.broadcast
                .as_ref()
                .map(|b| from_json_text::<AudienceSpec>(&b.audience))
                .unwrap_or_default()
                .message(),
        ),
        send_at: p.broadcast.as_ref().and_then(|b| b.send_at).map(timestamps::to_proto),
        status,
        created_at: Some(timestamps::to_proto(p.created_at)),
    }
}

impl CampaignsService {
    /// Agents (but those answering an Outgoing campaign, which its broadcast shows) and broadcasts (but
    /// those inside a Combined campaign), merged newest first.
    async fn list(&self, account_id: &AccountId, page: &Page) -> ApiResult<(Vec<Campaign>, Option<String>)> {
        let records = campaigns::Entity::find()
            .filter(campaigns::Column::AccountId.eq(account_id))
            .all(&self.db)
            .await?;
        let hidden_agents = records
            .iter()
            .filter(|r| r.kind == CampaignType::Outgoing && r.owns_agent)
            .map(|r| r.agent_id.clone());
        let hidden_broadcasts = records
            .iter()
            .filter(|r| r.kind != CampaignType::Outgoing)
            .filter_map(|r| r.broadcast_id.clone());
        let agents = agent_rows::Entity::find()
            .filter(agent_rows::Column::AccountId.eq(account_id))
            .filter(agent_rows::Column::Id.is_not_in(hidden_agents));
        let broadcasts = broadcast_rows::Entity::find()
            .filter(broadcast_rows::Column::AccountId.eq(account_id))
            .filter(broadcast_rows::Column::Id.is_not_in(hidden_broadcasts));
        let (agents, more_agents) = paging::fetch(
            &self.db,
            agents,
            page,
            agent_rows::Column::CreatedAt,
            agent_rows::Column::Id,
        )
        .await?;
        let (broadcasts, more_broadcasts) = paging::fetch(
            &self.db,
            broadcasts,
            page,
            broadcast_rows::Column::CreatedAt,
            broadcast_rows::Column::Id,
        )
        .await?;
        let mut items: Vec<(DateTime<Utc>, String)> = agents
            .iter()
            .map(|a| (a.created_at, a.id.to_string()))
            .chain(broadcasts.iter().map(|b| (b.created_at, b.id.to_string())))
            .collect();
        items.sort_by(|a, b| b.cmp(a));
        let more = more_agents || more_broadcasts || items.len() as u64 > page.limit;
        items.truncate(page.limit as usize);
        let ids: Vec<String> = items.iter().map(|(_, id)| id.clone()).collect();
        // `load` keeps the order of `ids` (leaving out any deleted meanwhile); each campaign pages at the
        // position of the row it was listed by.
        let mut loaded = load(&self.db, account_id, &ids).await?.into_iter().peekable();
        let rows = items
            .into_iter()
            .filter_map(|(at, id)| loaded.next_if(|p| p.id == id).map(|p| (at, p)));
        Ok(paging::render(
            rows,
            more,
            |(at, p)| (*at, p.id.as_str()),
            |(_, p)| render(p),
        ))
    }

    async fn create(&self, account_id: &AccountId, r: CreateCampaignRequest) -> ApiResult<Campaign> {
        let mut v = Violations::new();
        let kind = v.one_of_variants::<CampaignType>("type", &r.r#type);
        v.text("name", &r.name, true, 200);
        let wants_broadcast = !r.opener.is_empty() || r.audience.is_some();
        v.check(
            kind != Some(CampaignType::Outgoing) || !r.opener.trim().is_empty(),
            "opener",
            "is required for an Outgoing campaign",
        );
        v.check(
            kind != Some(CampaignType::Outgoing) || r.audience.is_some(),
            "audience",
            "is required for an Outgoing campaign",
        );
        v.check(
            kind != Some(CampaignType::Incoming) || !wants_broadcast,
            if r.opener.is_empty() { "audience" } else { "opener" },
            "an Incoming campaign sends nothing: use Combined or Outgoing",
        );
        let send_at = v.timestamp("send_at", r.send_at);
        let Some(kind) = kind else {
            return Err(v.into_error());
        };
        v.finish()?;
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        accounts::store::lock(&txn, account_id).await?;
        require_connected(&txn, account_id, &r.channel, "channel").await?;
        let agent_fields = AgentFields {
            name: Some(r.name.clone()),
            instructions: Some(r.instructions.clone()),
            ..AgentFields::default()
        };
        let owns_agent = kind != CampaignType::Outgoing || r.agent_id.is_empty();
        let agent = if owns_agent {
            agent_ops::create(&txn, account_id, agent_fields, now).await?
        } else {
            agents::require(&txn, account_id, &r.agent_id, "agent_id").await?
        };
        if kind != CampaignType::Outgoing {
            set_default(&txn, account_id, &r.channel, &agent.id, now).await?;
        }
        let broadcast = if kind == CampaignType::Outgoing || wants_broadcast {
            let fields = BroadcastFields {
                name: Some(r.name.clone()),
                agent_id: Some(agent.id.to_string()),
                channel: Some(r.channel.clone()),
                audience: Some(r.audience.clone().unwrap_or_default().into()),
                opener: Some(r.opener.clone()),
                send_at: Some(send_at),
                template: None,
            };
            Some(broadcasts::create(&txn, account_id, fields, now).await?)
        } else {
            None
        };
        let record = campaigns::Model {
            id: match (&broadcast, kind) {
                (Some(b), CampaignType::Outgoing) => b.id.to_string(),
                _ => agent.id.to_string(),
            },
            account_id: account_id.clone(),
            kind,
            agent_id: agent.id.clone(),
            owns_agent,
            broadcast_id: broadcast.as_ref().map(|b| b.id.clone()),
            created_at: now,
        };
        campaigns::ActiveModel::from(record.clone())
            .reset_all()
            .insert(&txn)
            .await?;
        let campaign = render(parts(&txn, account_id, &record.id).await?);
        txn.commit().await?;
        Ok(campaign)
    }

    async fn update(&self, account_id: &AccountId, r: UpdateCampaignRequest) -> ApiResult<Campaign> {
        let (mut name, mut channel, mut instructions) = (None, None, None);
        let mut send_fields = BroadcastFields::default();
        // Read only when the mask names it: a field outside the mask is ignored, however it is filled.
        let mut send_at = None;
        apply_mask(r.update_mask.as_ref(), "a campaign", |path| {
            match path {
                "name" => name = Some(r.name.clone()),
                "channel" => channel = Some(r.channel.clone()),
                "instructions" => instructions = Some(r.instructions.clone()),
                "opener" => send_fields.opener = Some(r.opener.clone()),
                "audience" => send_fields.audience = Some(r.audience.clone().unwrap_or_default().into()),
                "send_at" => send_at = Some(timestamps::from_proto("send_at", r.send_at)),
                "campaign_id" => {}
                _ => return false,
            }
            true
        })?;
        send_fields.send_at = send_at.transpose()?;
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        accounts::store::lock(&txn, account_id).await?;
        let p = parts(&txn, account_id, &r.campaign_id).await?;
        let outgoing = p.kind == CampaignType::Outgoing;
        // The name is the agent's (and its broadcast's) for Incoming and Combined, the broadcast's for
        // Outgoing; the channel is the agent's default channel or the broadcast's.
        let agent_fields = AgentFields {
            name: name.clone().filter(|_| !outgoing),
            instructions,
            ..AgentFields::default()
        };
        send_fields.name = name.filter(|_| outgoing || p.broadcast.is_some());
        let new_channel = if outgoing {
            send_fields.channel = channel;
            None
        } else {
            channel
        };
        if agent_fields != AgentFields::default() {
            let agent = p
                .agent
                .as_ref()
                .ok_or_else(|| ApiError::failed_precondition("this campaign has no agent"))?;
            agent_ops::update(&txn, account_id, &agent.id, agent_fields, now).await?;
        }
        if let Some(channel) = new_channel {
            let agent = p
                .agent
                .as_ref()
                .ok_or_else(|| ApiError::failed_precondition("this campaign has no agent"))?;
            set_default(&txn, account_id, &channel, &agent.id, now).await?;
            // The campaign moves: the agent stops being the default of its other channels.
            channel_defaults::Entity::delete_many()
                .filter(channel_defaults::Column::AccountId.eq(account_id))
                .filter(channel_defaults::Column::AgentId.eq(&agent.id))
                .filter(channel_defaults::Column::Channel.ne(&channel))
                .exec(&txn)
                .await?;
        }
        let changes_sending = send_fields.name.is_some()
            || send_fields.channel.is_some()
            || send_fields.opener.is_some()
            || send_fields.audience.is_some()
            || send_fields.send_at.is_some();
        if changes_sending {
            let broadcast = p.broadcast.as_ref().ok_or_else(|| {
                ApiError::failed_precondition("this campaign sends nothing: opener, audience and send_at do not apply")
            })?;
            broadcasts::update(&txn, account_id, &broadcast.id, send_fields, now).await?;
        }
        let campaign = render(parts(&txn, account_id, &p.id).await?);
        txn.commit().await?;
        Ok(campaign)
    }
}

fn answer(campaign: Campaign) -> Response<CampaignAnswer> {
    Response::new(CampaignAnswer {
        success: true,
        campaign: Some(campaign),
    })
}

#[tonic::async_trait]
impl Campaigns for CampaignsService {
    async fn list_campaigns(&self, request: Request<ListCampaignsRequest>) -> Result<Response<CampaignList>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        // Agent and broadcast ids share one cursor, so any id prefix is accepted.
        let page = Page::checked(r.limit, &r.cursor, "")?;
        let (campaigns, next_cursor) = self.list(&account_id, &page).await?;
        Ok(Response::new(CampaignList {
            success: true,
            campaigns,
            next_cursor,
        }))
    }

    async fn get_campaign(&self, request: Request<GetCampaignRequest>) -> Result<Response<CampaignAnswer>, Status> {
        let account_id = account_of(&request)?;
        let p = parts(&self.db, &account_id, &request.get_ref().campaign_id).await?;
        Ok(answer(render(p)))
    }

    async fn create_campaign(
        &self,
        request: Request<CreateCampaignRequest>,
    ) -> Result<Response<CampaignAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(answer(self.create(&account_id, request.into_inner()).await?))
    }

    async fn update_campaign(
        &self,
        request: Request<UpdateCampaignRequest>,
    ) -> Result<Response<CampaignAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(answer(self.update(&account_id, request.into_inner()).await?))
    }
}
