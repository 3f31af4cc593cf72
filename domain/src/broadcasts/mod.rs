//! `/v1/broadcasts`: an opener sent to an audience on a channel, replies answered by the broadcast's agent.
//! Draft (no `send_at`) or scheduled until sending starts, changeable until then; cancellable until it
//! ends. `sending` sends it, `stats` counts it.

pub mod audience;
mod opener;
pub mod sending;
pub mod stats;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use frontdesk_api::v1::{
    Broadcast, BroadcastAnswer, BroadcastList, BroadcastStats, CancelBroadcastRequest, CreateBroadcastRequest,
    GetBroadcastRequest, ListBroadcastsRequest, UpdateBroadcastRequest, broadcasts_server::Broadcasts,
};
use sea_orm::{
    ActiveEnum, ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter,
    sea_query::Expr,
};
use tonic::{Code, Request, Response, Status};

use crate::{
    access::AccountId,
    accounts, agents,
    channels::Template,
    clock::Clock,
    error::{ApiError, ApiResult, Reason},
    jobs::{
        self, Handlers, Wake,
        cancel::{Selector, cancel},
    },
    messaging::outgoing::max_chars,
    paging::{self, Page},
    platform_calls::{account_of, apply_mask},
    routing::channels::connected,
    store::{
        self,
        entities::{
            broadcasts::{self, BroadcastStatus},
            channels::ChannelKind,
        },
        from_json_text, to_json_text,
    },
    timestamps,
    validate::Violations,
};
pub use audience::AudienceSpec;

/// Statuses in which a broadcast can still be changed.
/// A template's parameters, at most.
const MAX_TEMPLATE_PARAMETERS: usize = 20;

/// The fields a request sets; `None` leaves a field as it is. `send_at: Some(None)` makes a draft;
/// `template: Some(None)` removes the template.
#[derive(Clone, Debug, Default)]
pub struct BroadcastFields {
    pub name: Option<String>,
    pub agent_id: Option<String>,
    pub channel: Option<String>,
    pub audience: Option<AudienceSpec>,
    pub opener: Option<String>,
    pub send_at: Option<Option<DateTime<Utc>>>,
    pub template: Option<Option<Template>>,
}

/// A request's `send_at`: empty for none (a draft), `now`, or an RFC 3339 time.
fn send_at(text: &str, now: DateTime<Utc>) -> ApiResult<Option<DateTime<Utc>>> {
    match text.trim() {
        "" => Ok(None),
        "now" => Ok(Some(now)),
        text => DateTime::parse_from_rfc3339(text)
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|_| {
                ApiError::field(
                    "send_at",
                    "must be an RFC 3339 time, e.g. 2026-12-01T09:30:00Z, or \"now\"",
                )
            }),
    }
}

fn template_of(t: frontdesk_api::v1::Template) -> Template {
    Template {
        name: t.name,
        language: t.language,
        parameters: t.parameters,
    }
}

impl BroadcastFields {
    /// Checks the fields as `row` would have them (`creating` checks every one): their shape, then the
    /// agent, the channel and the audience against the account.
    async fn check(
        &self,
        db: &impl ConnectionTrait,
        account_id: &AccountId,
        row: &broadcasts::Model,
        creating: bool,
        now: DateTime<Utc>,
    ) -> ApiResult<()> {
        let mut v = Violations::new();
        if let Some(name) = &self.name {
            v.text("name", name, false, 200);
        }
        if creating || self.opener.is_some() {
            let opener = self.opener.as_deref().unwrap_or_default();
            v.text("opener", opener, true, 4_096);
            if let Err(why) = opener::check(opener) {
                v.check(false, "opener", why);
            }
        }
        if let Some(Some(template)) = &self.template {
            v.text("template.name", &template.name, true, 512);
            v.text("template.language", &template.language, true, 16);
            v.list(
                "template.parameters",
                &template.parameters,
                MAX_TEMPLATE_PARAMETERS,
                1_024,
            );
            if let Some(why) = template.parameters.iter().find_map(|p| opener::check(p).err()) {
                v.check(false, "template.parameters", why);
            }
        }
        if creating || self.audience.is_some() {
            self.audience.clone().unwrap_or_default().check_shape(&mut v);
        }
        if let Some(Some(send_at)) = self.send_at {
            v.check(send_at >= now, "send_at", "must be in the future, or \"now\"");
        }
        if creating || self.agent_id.is_some() {
            v.check(
                self.agent_id.as_deref().is_some_and(|a| !a.is_empty()),
                "agent_id",
                "is required",
            );
        }
        if creating || self.channel.is_some() {
            v.check(
                self.channel.as_deref().is_some_and(|c| !c.is_empty()),
                "channel",
                "is required",
            );
        }
        v.finish()?;
        if let Some(agent_id) = &self.agent_id {
            agents::require(db, account_id, agent_id, "agent_id").await?;
        }
        if let Some(audience) = &self.audience {
            audience.check_known(db, account_id).await?;
        }
        // The channel, the template and the opener's length go together: checked as the row will be.
        if creating || self.channel.is_some() || self.template.is_some() || self.opener.is_some() {
            let name = self.channel.as_deref().unwrap_or(&row.channel);
            let channel = connected(db, account_id, name)
                .await?
                .ok_or_else(|| ApiError::field("channel", format!("no connected channel named `{name}`")))?;
            let has_template = match &self.template {
                Some(template) => template.is_some(),
                None => !row.template.is_empty(),
            };
            if channel.kind == ChannelKind::Whatsapp && !has_template {
                return Err(ApiError::field(
                    "template",
                    "a WhatsApp broadcast names an approved template: it reaches people outside the 24-hour window",
                ));
            }
            if channel.kind != ChannelKind::Whatsapp && has_template {
                return Err(ApiError::field(
                    "template",
                    "only a WhatsApp broadcast sends a template",
                ));
            }
            let opener = self.opener.as_deref().unwrap_or(&row.opener);
            let max = max_chars(channel.kind);
            if opener.chars().count() > max {
                return Err(ApiError::field(
                    "opener",
                    format!("must be at most {max} characters on a {} channel", channel.kind),
                ));
            }
        }
        Ok(())
    }

    fn apply(self, row: &mut broadcasts::Model) {
        if let Some(name) = self.name {
            row.name = name.trim().to_owned();
        }
        if let Some(agent_id) = self.agent_id {
            row.agent_id = agent_id.into();
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
        if let Some(template) = self.template {
            row.template = template.as_ref().map(to_json_text).unwrap_or_default();
        }
        if let Some(send_at) = self.send_at {
            row.send_at = send_at;
            row.status = if send_at.is_some() {
                BroadcastStatus::Scheduled
            } else {
                BroadcastStatus::Draft
            };
        }
        if row.name.is_empty() {
            row.name = row.opener.split_whitespace().take(6).collect::<Vec<_>>().join(" ");
        }
    }
}

/// The broadcast as the API shows it, with its counts as they stand.
pub fn message(m: &broadcasts::Model, counts: stats::Counts) -> Broadcast {
    let template: Option<Template> = (!m.template.is_empty()).then(|| from_json_text(&m.template));
    let count = |n: i64| i32::try_from(n).unwrap_or(i32::MAX);
    Broadcast {
        id: m.id.to_string(),
        name: m.name.clone(),
        agent_id: m.agent_id.to_string(),
        channel: m.channel.clone(),
        audience: Some(from_json_text::<AudienceSpec>(&m.audience).message()),
        opener: m.opener.clone(),
        send_at: m.send_at.map(timestamps::to_proto),
        status: m.status.to_value(),
        stats: Some(BroadcastStats {
            total: count(counts.total),
            sent: count(counts.sent),
            delivered: count(counts.delivered),
            read: count(counts.read),
            failed: count(counts.failed),
            replied: count(counts.replied),
        }),
        created_at: Some(timestamps::to_proto(m.created_at)),
        updated_at: Some(timestamps::to_proto(m.updated_at)),
        template: template.map(|t| frontdesk_api::v1::Template {
            name: t.name,
            language: t.language,
            parameters: t.parameters,
        }),
        error: m.error.clone(),
    }
}

/// `message` for one broadcast, its counts read.
pub async fn shown(db: &impl ConnectionTrait, m: &broadcasts::Model) -> ApiResult<Broadcast> {
    let counts = stats::of(db, &[m]).await?;
    Ok(message(m, counts.get(&m.id).copied().unwrap_or_default()))
}

/// The data of a broadcast's events: the broadcast as the API renders it.
fn event_data(m: &broadcasts::Model, c: stats::Counts) -> serde_json::Value {
    crate::events::payload(&message(m, c), "frontdesk.v1.Broadcast")
}

/// The account's broadcast `id`, if it has it.
async fn owned(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    id: &str,
) -> Result<Option<broadcasts::Model>, DbErr> {
    store::owned::<broadcasts::Entity>(db, broadcasts::Column::AccountId, account_id, id).await
}

pub async fn find(db: &impl ConnectionTrait, account_id: &AccountId, id: &str) -> ApiResult<broadcasts::Model> {
    owned(db, account_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("broadcast"))
}

/// Creates a broadcast (fields checked here), with the job that starts it when it is scheduled. Shared
/// with the campaigns facade.
pub async fn create(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    fields: BroadcastFields,
    now: DateTime<Utc>,
) -> ApiResult<broadcasts::Model> {
    let mut row = broadcasts::Model {
        id: crate::ids::new_id(crate::ids::Kind::Broadcast).into(),
        account_id: account_id.clone(),
        name: String::new(),
        // Filled in from `fields` below, whose check requires an agent when creating.
        agent_id: String::new().into(),
        channel: String::new(),
        audience: to_json_text(&AudienceSpec::default()),
        opener: String::new(),
        send_at: None,
        status: BroadcastStatus::Draft,
        template: String::new(),
        error: String::new(),
        expansion: String::new(),
        expanded: false,
        started_at: None,
        completed_at: None,
        total: 0,
        sent: 0,
        delivered: 0,
        read: 0,
        failed: 0,
        replied: 0,
        settled: 0,
        created_at: now,
        updated_at: now,
    };
    fields.check(db, account_id, &row, true, now).await?;
    let send_at = fields.send_at.unwrap_or(None);
    BroadcastFields {
        send_at: Some(send_at),
        ..fields
    }
    .apply(&mut row);
    broadcasts::Entity::insert(broadcasts::ActiveModel::from(row.clone()).reset_all())
        .exec_without_returning(db)
        .await?;
    schedule(db, &row, now).await?;
    Ok(row)
}

/// Changes a draft or scheduled broadcast (a scheduled one's start moves with its `send_at`). Shared with
/// the campaigns facade.
pub async fn update(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    id: &str,
    fields: BroadcastFields,
    now: DateTime<Utc>,
) -> ApiResult<broadcasts::Model> {
    let mut row = find(db, account_id, id).await?;
    if !BroadcastStatus::CHANGEABLE.contains(&row.status) {
        return Err(not_changeable(row.status));
    }
    fields.check(db, account_id, &row, false, now).await?;
    let read_status = row.status;
    fields.apply(&mut row);
    row.updated_at = now;
    write_if_still(db, &row, read_status).await?;
    schedule(db, &row, now).await?;
    Ok(row)
}

/// 409: the broadcast went out (or ended) and its settings are what it was sent with.
fn not_changeable(status: BroadcastStatus) -> ApiError {
    ApiError::new(
        Code::Aborted,
        Reason::Aborted,
        format!(
            "a {} broadcast can no longer be changed; cancel it, or create another",
            status.to_value()
        ),
    )
}

/// The start of a scheduled broadcast, at its `send_at` (a draft's start, if it had one, finds it a draft
/// and ends).
async fn schedule(db: &impl ConnectionTrait, row: &broadcasts::Model, now: DateTime<Utc>) -> ApiResult<()> {
    if let Some(job) = sending::start_job(row) {
        jobs::enqueue(db, job, now).await?;
    }
    Ok(())
}

/// Writes the broadcast's settings and status (never its counts) only while its status is still `read_status`:
/// a change racing a cancel, or a cancel racing the start of sending, loses instead of undoing the other.
async fn write_if_still(
    db: &impl ConnectionTrait,
    row: &broadcasts::Model,
    read_status: BroadcastStatus,
) -> ApiResult<()> {
    let changed = broadcasts::Entity::update_many()
        .col_expr(broadcasts::Column::Name, Expr::value(row.name.clone()))
        .col_expr(broadcasts::Column::AgentId, Expr::value(row.agent_id.clone()))
        .col_expr(broadcasts::Column::Channel, Expr::value(row.channel.clone()))
        .col_expr(broadcasts::Column::Audience, Expr::value(row.audience.clone()))
        .col_expr(broadcasts::Column::Opener, Expr::value(row.opener.clone()))
        .col_expr(broadcasts::Column::Template, Expr::value(row.template.clone()))
        .col_expr(broadcasts::Column::SendAt, Expr::value(row.send_at))
        .col_expr(broadcasts::Column::Status, Expr::value(row.status))
        .col_expr(broadcasts::Column::UpdatedAt, Expr::value(row.updated_at))
        .filter(broadcasts::Column::Id.eq(&row.id))
        .filter(broadcasts::Column::Status.eq(read_status))
        .exec(db)
        .await?;
    if changed.rows_affected == 0 {
        return Err(ApiError::new(
            Code::Aborted,
            Reason::Aborted,
            "the broadcast changed meanwhile (it started sending, or was cancelled); read it and retry",
        ));
    }
    Ok(())
}

fn update_fields(r: UpdateBroadcastRequest, now: DateTime<Utc>) -> ApiResult<BroadcastFields> {
    let mut fields = BroadcastFields::default();
    // Read only when the mask names it: a field outside the mask is ignored, however it is filled.
    let mut when = None;
    apply_mask(r.update_mask.as_ref(), "a broadcast", |path| {
        match path {
            "name" => fields.name = Some(r.name.clone()),
            "agent_id" => fields.agent_id = Some(r.agent_id.clone()),
            "channel" => fields.channel = Some(r.channel.clone()),
            "audience" => fields.audience = Some(r.audience.clone().unwrap_or_default().into()),
            "opener" => fields.opener = Some(r.opener.clone()),
            "template" => fields.template = Some(r.template.clone().map(template_of)),
            "send_at" => when = Some(send_at(&r.send_at, now)),
            "broadcast_id" => {}
            _ => return false,
        }
        true
    })?;
    fields.send_at = when.transpose()?;
    Ok(fields)
}

#[derive(Clone)]
pub struct BroadcastsService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    /// The job handlers, for a cancel to settle what its cancelled sends stood for.
    handlers: Handlers,
    wake: Wake,
}

impl BroadcastsService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, handlers: Handlers, wake: Wake) -> Self {
        Self {
            db,
            clock,
            handlers,
            wake,
        }
    }

    /// Cancels the broadcast: its status first (so no new send starts), then every pending job of its
    /// group; a send already running makes no call after this returns (the claim guard finds it
    /// cancelled).
    async fn cancel(&self, account_id: &AccountId, id: &str) -> ApiResult<broadcasts::Model> {
        let mut row = find(&self.db, account_id, id).await?;
        if row.status == BroadcastStatus::Cancelled {
            return Ok(row);
        }
        if !BroadcastStatus::UNFINISHED.contains(&row.status) {
            return Err(ApiError::failed_precondition(format!(
                "a {} broadcast cannot be cancelled",
                row.status.to_value()
            )));
        }
        let read_status = row.status;
        row.status = BroadcastStatus::Cancelled;
        row.updated_at = self.clock.now();
        write_if_still(&self.db, &row, read_status).await?;
        cancel(
            &self.db,
            &self.handlers,
            &Selector::Group(row.id.to_string()),
            Some(account_id.as_str()),
            self.clock.now(),
        )
        .await?;
        Ok(row)
    }

    async fn answer(&self, m: &broadcasts::Model) -> Result<Response<BroadcastAnswer>, Status> {
        Ok(Response::new(BroadcastAnswer {
            success: true,
            broadcast: Some(shown(&self.db, m).await?),
        }))
    }

    /// Writes a created or changed broadcast and its start together, then wakes the workers when it is due.
    async fn written(
        &self,
        account_id: &AccountId,
        write: impl AsyncFnOnce(&sea_orm::DatabaseTransaction, DateTime<Utc>) -> ApiResult<broadcasts::Model>,
    ) -> Result<Response<BroadcastAnswer>, Status> {
        let now = self.clock.now();
        // Under the account lock, as agent deletion, so a broadcast never outlives its agent.
        let txn = crate::store::begin_write(&self.db).await.map_err(ApiError::from)?;
        accounts::store::lock(&txn, account_id).await.map_err(ApiError::from)?;
        let broadcast = write(&txn, now).await?;
        txn.commit().await.map_err(ApiError::from)?;
        if broadcast.send_at.is_some_and(|at| at <= now) {
            self.wake.notify();
        }
        self.answer(&broadcast).await
    }
}

#[tonic::async_trait]
impl Broadcasts for BroadcastsService {
    async fn list_broadcasts(
        &self,
        request: Request<ListBroadcastsRequest>,
    ) -> Result<Response<BroadcastList>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let page = Page::checked(r.limit, &r.cursor, crate::ids::Kind::Broadcast.prefix())?;
        let mut select = broadcasts::Entity::find().filter(broadcasts::Column::AccountId.eq(&account_id));
        if !r.status.is_empty() {
            let mut v = Violations::new();
            v.one_of_variants::<BroadcastStatus>("status", &r.status);
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
        let counts = stats::of(&self.db, &rows.iter().collect::<Vec<_>>())
            .await
            .map_err(ApiError::from)?;
        let (broadcasts, next_cursor) = paging::render(
            &rows,
            more,
            |b| (b.created_at, b.id.as_str()),
            |b| message(b, counts.get(&b.id).copied().unwrap_or_default()),
        );
        Ok(Response::new(BroadcastList {
            success: true,
            next_cursor,
            broadcasts,
        }))
    }

    async fn get_broadcast(&self, request: Request<GetBroadcastRequest>) -> Result<Response<BroadcastAnswer>, Status> {
        let account_id = account_of(&request)?;
        let broadcast = find(&self.db, &account_id, &request.get_ref().broadcast_id).await?;
        self.answer(&broadcast).await
    }

    async fn create_broadcast(
        &self,
        request: Request<CreateBroadcastRequest>,
    ) -> Result<Response<BroadcastAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        self.written(&account_id, async |txn, now| {
            let fields = BroadcastFields {
                name: Some(r.name),
                agent_id: Some(r.agent_id),
                channel: Some(r.channel),
                audience: Some(r.audience.unwrap_or_default().into()),
                opener: Some(r.opener),
                send_at: Some(send_at(&r.send_at, now)?),
                template: Some(r.template.map(template_of)),
            };
            create(txn, &account_id, fields, now).await
        })
        .await
    }

    async fn update_broadcast(
        &self,
        request: Request<UpdateBroadcastRequest>,
    ) -> Result<Response<BroadcastAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let id = r.broadcast_id.clone();
        self.written(&account_id, async |txn, now| {
            update(txn, &account_id, &id, update_fields(r, now)?, now).await
        })
        .await
    }

    async fn cancel_broadcast(
        &self,
        request: Request<CancelBroadcastRequest>,
    ) -> Result<Response<BroadcastAnswer>, Status> {
        let account_id = account_of(&request)?;
        let broadcast = self.cancel(&account_id, &request.get_ref().broadcast_id).await?;
        self.answer(&broadcast).await
    }
}
