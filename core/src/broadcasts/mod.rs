//! `/v1/broadcasts`: an opener sent to an audience on a channel, replies answered by the broadcast's agent.
//! Draft (no `send_at`) or scheduled until sending starts; changeable and cancellable until then. Sending
//! itself belongs to messaging.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use frontdesk_api::v1::{
    Audience, Broadcast, BroadcastAnswer, BroadcastList, BroadcastStats, CancelBroadcastRequest,
    CreateBroadcastRequest, GetBroadcastRequest, ListBroadcastsRequest, UpdateBroadcastRequest,
    broadcasts_server::Broadcasts,
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, sea_query::Expr,
};
use serde::{Deserialize, Serialize};
use tonic::{Request, Response, Status};

use crate::{
    access::AccountId,
    accounts, agents,
    clock::Clock,
    contacts::E164Phone,
    error::{ApiError, ApiResult},
    paging::{self, Page},
    requests::{account_of, apply_mask},
    routing::channels::require_connected,
    store::{self, entities::broadcasts, from_json_text, to_json_text},
    timestamps,
    validate::Violations,
};

pub const STATUSES: &[&str] = &["draft", "scheduled", "sending", "completed", "cancelled", "failed"];
/// Statuses in which a broadcast can still be changed.
const CHANGEABLE: &[&str] = &["draft", "scheduled"];
const MAX_RECIPIENTS: usize = 10_000;
const MAX_TAGS: usize = 50;

/// The audience as stored (JSON).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AudienceSpec {
    pub contact_ids: Vec<String>,
    pub tags: Vec<String>,
    pub phones: Vec<String>,
}

impl From<Audience> for AudienceSpec {
    fn from(a: Audience) -> Self {
        Self {
            contact_ids: a.contact_ids,
            tags: a.tags,
            phones: a.phones,
        }
    }
}

impl AudienceSpec {
    pub fn message(&self) -> Audience {
        Audience {
            contact_ids: self.contact_ids.clone(),
            tags: self.tags.clone(),
            phones: self.phones.clone(),
        }
    }

    fn is_empty(&self) -> bool {
        self.contact_ids.is_empty() && self.tags.is_empty() && self.phones.is_empty()
    }
}

/// Counters kept as the broadcast is sent (JSON).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct Stats {
    total: i32,
    sent: i32,
    delivered: i32,
    read: i32,
    failed: i32,
    replied: i32,
}

/// The fields a request sets; `None` leaves a field as it is. `send_at: Some(None)` makes a draft.
#[derive(Clone, Debug, Default)]
pub struct BroadcastFields {
    pub name: Option<String>,
    pub agent_id: Option<String>,
    pub channel: Option<String>,
    pub audience: Option<AudienceSpec>,
    pub opener: Option<String>,
    pub send_at: Option<Option<DateTime<Utc>>>,
}

impl BroadcastFields {
    /// Checks the set fields (`creating` also requires audience and opener), then that the agent and the
    /// channel exist on the account.
    pub async fn check(
        &self,
        db: &impl ConnectionTrait,
        account_id: &AccountId,
        creating: bool,
        now: DateTime<Utc>,
    ) -> ApiResult<()> {
        let mut v = Violations::new();
        if let Some(name) = &self.name {
            v.text("name", name, false, 200);
        }
        if creating || self.opener.is_some() {
            v.text("opener", self.opener.as_deref().unwrap_or_default(), true, 4_096);
        }
        if creating || self.audience.is_some() {
            check_audience(&mut v, &self.audience.clone().unwrap_or_default());
        }
        if let Some(Some(send_at)) = self.send_at {
            v.check(send_at > now, "send_at", "must be in the future");
        }
        if creating || self.agent_id.is_some() {
            v.check(
                self.agent_id.as_deref().is_some_and(|a| !a.is_empty()),
                "agent_id",
                "is required",
            );
        }
        v.finish()?;
        if let Some(agent_id) = &self.agent_id {
            agents::require(db, account_id, agent_id, "agent_id").await?;
        }
        if creating || self.channel.is_some() {
            require_connected(db, account_id, self.channel.as_deref().unwrap_or_default(), "channel").await?;
        }
        Ok(())
    }

    fn apply(self, row: &mut broadcasts::Model) {
        if let Some(name) = self.name {
            row.name = name.trim().to_owned();
        }
        if let Some(agent_id) = self.agent_id {
            row.agent_id = agent_id;
        }
        if let Some(channel) = self.channel {
            row.channel = channel;
        }
        if let Some(audience) = self.audience {
            row.audience = to_json_text(&audience);
        }
        if let Some(opener) = self.opener {
            row.opener = opener;
        }
        if let Some(send_at) = self.send_at {
            row.send_at = send_at;
            row.status = if send_at.is_some() { "scheduled" } else { "draft" }.to_owned();
        }
        if row.name.is_empty() {
            row.name = row.opener.split_whitespace().take(6).collect::<Vec<_>>().join(" ");
        }
    }
}

fn check_audience(v: &mut Violations, audience: &AudienceSpec) {
    v.check(
        !audience.is_empty(),
        "audience",
        "must name at least one contact, tag or phone",
    );
    v.list("audience.contact_ids", &audience.contact_ids, MAX_RECIPIENTS, 64);
    v.list("audience.tags", &audience.tags, MAX_TAGS, 64);
    v.check(
        audience.phones.len() <= MAX_RECIPIENTS,
        "audience.phones",
        format!("must hold at most {MAX_RECIPIENTS} entries"),
    );
    if let Some(bad) = audience.phones.iter().find(|p| E164Phone::parse(p).is_none()) {
        v.check(
            false,
            "audience.phones",
            format!("`{bad}` is not in E.164 format, e.g. +919812345678"),
        );
    }
}

pub fn message(m: &broadcasts::Model) -> Broadcast {
    let stats: Stats = from_json_text(&m.stats);
    Broadcast {
        id: m.id.clone(),
        name: m.name.clone(),
        agent_id: m.agent_id.clone(),
        channel: m.channel.clone(),
        audience: Some(from_json_text::<AudienceSpec>(&m.audience).message()),
        opener: m.opener.clone(),
        send_at: m.send_at.map(timestamps::to_proto),
        status: m.status.clone(),
        stats: Some(BroadcastStats {
            total: stats.total,
            sent: stats.sent,
            delivered: stats.delivered,
            read: stats.read,
            failed: stats.failed,
            replied: stats.replied,
        }),
        created_at: Some(timestamps::to_proto(m.created_at)),
        updated_at: Some(timestamps::to_proto(m.updated_at)),
    }
}

pub async fn find(db: &impl ConnectionTrait, account_id: &AccountId, id: &str) -> ApiResult<broadcasts::Model> {
    store::owned::<broadcasts::Entity>(db, broadcasts::Column::AccountId, account_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("broadcast"))
}

/// Creates a broadcast (fields checked here). Shared with the campaigns facade.
pub async fn create(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    fields: BroadcastFields,
    now: DateTime<Utc>,
) -> ApiResult<broadcasts::Model> {
    fields.check(db, account_id, true, now).await?;
    let mut row = broadcasts::Model {
        id: format!("brd_{}", crate::ids::base62(16)),
        account_id: account_id.to_string(),
        name: String::new(),
        agent_id: String::new(),
        channel: String::new(),
        audience: to_json_text(&AudienceSpec::default()),
        opener: String::new(),
        send_at: None,
        status: "draft".to_owned(),
        stats: to_json_text(&Stats::default()),
        created_at: now,
        updated_at: now,
    };
    let send_at = fields.send_at.unwrap_or(None);
    BroadcastFields {
        send_at: Some(send_at),
        ..fields
    }
    .apply(&mut row);
    broadcasts::Entity::insert(broadcasts::ActiveModel::from(row.clone()).reset_all())
        .exec_without_returning(db)
        .await?;
    Ok(row)
}

/// Changes a draft or scheduled broadcast. Shared with the campaigns facade.
pub async fn update(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    id: &str,
    fields: BroadcastFields,
    now: DateTime<Utc>,
) -> ApiResult<broadcasts::Model> {
    fields.check(db, account_id, false, now).await?;
    let mut row = find(db, account_id, id).await?;
    if !CHANGEABLE.contains(&row.status.as_str()) {
        return Err(ApiError::failed_precondition(format!(
            "a {} broadcast can no longer be changed",
            row.status
        )));
    }
    let read_status = row.status.clone();
    fields.apply(&mut row);
    row.updated_at = now;
    write_if_still(db, &row, &read_status).await?;
    Ok(row)
}

/// Writes the broadcast's settings and status (never its stats) only while its status is still `read_status`:
/// a change racing a cancel, or a cancel racing the start of sending, loses instead of undoing the other.
async fn write_if_still(db: &impl ConnectionTrait, row: &broadcasts::Model, read_status: &str) -> ApiResult<()> {
    let changed = broadcasts::Entity::update_many()
        .col_expr(broadcasts::Column::Name, Expr::value(row.name.clone()))
        .col_expr(broadcasts::Column::AgentId, Expr::value(row.agent_id.clone()))
        .col_expr(broadcasts::Column::Channel, Expr::value(row.channel.clone()))
        .col_expr(broadcasts::Column::Audience, Expr::value(row.audience.clone()))
        .col_expr(broadcasts::Column::Opener, Expr::value(row.opener.clone()))
        .col_expr(broadcasts::Column::SendAt, Expr::value(row.send_at))
        .col_expr(broadcasts::Column::Status, Expr::value(row.status.clone()))
        .col_expr(broadcasts::Column::UpdatedAt, Expr::value(row.updated_at))
        .filter(broadcasts::Column::Id.eq(&row.id))
        .filter(broadcasts::Column::Status.eq(read_status))
        .exec(db)
        .await?;
    if changed.rows_affected == 0 {
        return Err(ApiError::failed_precondition(
            "the broadcast changed meanwhile; read it and retry",
        ));
    }
    Ok(())
}

fn update_fields(r: UpdateBroadcastRequest) -> ApiResult<BroadcastFields> {
    let mut fields = BroadcastFields::default();
    // Read only when the mask names it: a field outside the mask is ignored, however it is filled.
    let mut send_at = None;
    apply_mask(r.update_mask.as_ref(), "a broadcast", |path| {
        match path {
            "name" => fields.name = Some(r.name.clone()),
            "agent_id" => fields.agent_id = Some(r.agent_id.clone()),
            "channel" => fields.channel = Some(r.channel.clone()),
            "audience" => fields.audience = Some(r.audience.clone().unwrap_or_default().into()),
            "opener" => fields.opener = Some(r.opener.clone()),
            "send_at" => send_at = Some(timestamps::from_proto("send_at", r.send_at)),
            "broadcast_id" => {}
            _ => return false,
        }
        true
    })?;
    fields.send_at = send_at.transpose()?;
    Ok(fields)
}

#[derive(Clone)]
pub struct BroadcastsService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
}

impl BroadcastsService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>) -> Self {
        Self { db, clock }
    }

    async fn cancel(&self, account_id: &AccountId, id: &str) -> ApiResult<broadcasts::Model> {
        let mut row = find(&self.db, account_id, id).await?;
        if row.status == "cancelled" {
            return Ok(row);
        }
        if !broadcasts::UNFINISHED.contains(&row.status.as_str()) {
            return Err(ApiError::failed_precondition(format!(
                "a {} broadcast cannot be cancelled",
                row.status
            )));
        }
        let read_status = row.status.clone();
        row.status = "cancelled".to_owned();
        row.updated_at = self.clock.now();
        write_if_still(&self.db, &row, &read_status).await?;
        Ok(row)
    }
}

fn answer(m: &broadcasts::Model) -> Response<BroadcastAnswer> {
    Response::new(BroadcastAnswer {
        success: true,
        broadcast: Some(message(m)),
    })
}

#[tonic::async_trait]
impl Broadcasts for BroadcastsService {
    async fn list_broadcasts(
        &self,
        request: Request<ListBroadcastsRequest>,
    ) -> Result<Response<BroadcastList>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let page = Page::checked(r.limit, &r.cursor, "brd_")?;
        let mut select = broadcasts::Entity::find().filter(broadcasts::Column::AccountId.eq(&account_id));
        if !r.status.is_empty() {
            let mut v = Violations::new();
            v.one_of("status", &r.status, STATUSES);
            v.finish()?;
            select = select.filter(broadcasts::Column::Status.eq(&r.status));
        }
        let (rows, more) = paging::fetch(
            &self.db,
            select,
            &page,
            broadcasts::Column::CreatedAt,
            broadcasts::Column::Id,
        )
        .await
        .map_err(ApiError::from)?;
        let (broadcasts, next_cursor) = paging::render(&rows, more, |b| (b.created_at, b.id.as_str()), message);
        Ok(Response::new(BroadcastList {
            success: true,
            next_cursor,
            broadcasts,
        }))
    }

    async fn get_broadcast(&self, request: Request<GetBroadcastRequest>) -> Result<Response<BroadcastAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(answer(
            &find(&self.db, &account_id, &request.get_ref().broadcast_id).await?,
        ))
    }

    async fn create_broadcast(
        &self,
        request: Request<CreateBroadcastRequest>,
    ) -> Result<Response<BroadcastAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let fields = BroadcastFields {
            name: Some(r.name),
            agent_id: Some(r.agent_id),
            channel: Some(r.channel),
            audience: Some(r.audience.unwrap_or_default().into()),
            opener: Some(r.opener),
            send_at: Some(timestamps::from_proto("send_at", r.send_at)?),
        };
        // Under the account lock, as agent deletion, so a broadcast never outlives its agent.
        let txn = crate::store::begin_write(&self.db).await.map_err(ApiError::from)?;
        accounts::store::lock(&txn, &account_id).await.map_err(ApiError::from)?;
        let broadcast = create(&txn, &account_id, fields, self.clock.now()).await?;
        txn.commit().await.map_err(ApiError::from)?;
        Ok(answer(&broadcast))
    }

    async fn update_broadcast(
        &self,
        request: Request<UpdateBroadcastRequest>,
    ) -> Result<Response<BroadcastAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let id = r.broadcast_id.clone();
        let fields = update_fields(r)?;
        Ok(answer(
            &update(&self.db, &account_id, &id, fields, self.clock.now()).await?,
        ))
    }

    async fn cancel_broadcast(
        &self,
        request: Request<CancelBroadcastRequest>,
    ) -> Result<Response<BroadcastAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(answer(
            &self.cancel(&account_id, &request.get_ref().broadcast_id).await?,
        ))
    }
}
