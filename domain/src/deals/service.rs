//! `/v1/deals`: create, read, partial update, delete, move and the filtered list. Every change writes its
//! event to the outbox in the same transaction.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use frontdesk_api::v1::{
    CreateDealRequest, Deal, DealAnswer, DealList, DeleteDealRequest, Deleted, GetDealRequest, ListDealsRequest,
    MoveDealRequest, UpdateDealRequest, deals_server::Deals,
};
use sea_orm::{ActiveModelTrait, DatabaseConnection, DatabaseTransaction, EntityTrait, IntoActiveModel};
use tonic::{Request, Response, Status};

use super::{
    fields::{DealFields, PRIORITIES, SOURCES, STATUSES, check_filter},
    store::{self, Filters},
};
use crate::{
    access::AccountId,
    accounts,
    clock::Clock,
    error::{ApiError, ApiResult, FieldViolation},
    events::{self, EventType},
    paging::{self, Page},
    platform_calls::{account_of, apply_mask, deleted},
    store::entities::{deals, stages},
    timestamps,
};

#[derive(Clone)]
pub struct DealsService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
}

/// Creates a deal in `txn` (the API's `POST /deals`, an agent's `create_deal`), with its `deal.created` event,
/// stamped with `now()` read once the account's write lock is held: deals made at once take their times in
/// the order they are written (and of their positions), and an event's time is not earlier than the wait.
pub async fn create_in(
    txn: &DatabaseTransaction,
    account_id: &AccountId,
    fields: DealFields,
    now: impl FnOnce() -> DateTime<Utc>,
) -> ApiResult<deals::Model> {
    fields.validate(true)?;
    accounts::store::lock(txn, account_id).await?;
    let now = now();
    let stage_id = fields.stage.clone().unwrap_or_default();
    let stage = existing_stage(txn, account_id, &stage_id).await?;
    let position = store::stage_size(txn, account_id, &stage.id).await?;
    let deal = deals::Model {
        id: crate::ids::new_id(crate::ids::Kind::Deal),
        account_id: account_id.clone(),
        title: fields.title.unwrap_or_default().trim().to_owned(),
        description: fields.description.unwrap_or_default(),
        company: fields.company.unwrap_or_default(),
        stage: stage.id,
        pipeline_id: Some(stage.pipeline_id),
        value: fields.value.unwrap_or(0.0),
        probability: fields.probability.unwrap_or(0.0),
        priority: fields.priority.unwrap_or_else(|| "medium".into()),
        status: fields.status.unwrap_or_else(|| "open".into()),
        source: fields.source.unwrap_or_else(|| "api".into()),
        position,
        contact_id: fields.contact_id.unwrap_or_default(),
        assigned_to: fields.assigned_to.unwrap_or_default(),
        tags: serde_json::to_string(&fields.tags.unwrap_or_default()).unwrap_or_else(|_| "[]".into()),
        close_date: fields.close_date.flatten(),
        created_at: now,
        updated_at: now,
        stage_entered_at: now,
    };
    deals::Entity::insert(deals::ActiveModel::from(deal.clone()).reset_all())
        .exec_without_returning(txn)
        .await?;
    record_change(txn, None, &deal, now).await?;
    Ok(deal)
}

impl DealsService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>) -> Self {
        Self { db, clock }
    }
}

pub fn deal_message(m: deals::Model) -> Deal {
    Deal {
        id: m.id,
        title: m.title,
        description: m.description,
        company: m.company,
        stage: m.stage,
        pipeline_id: m.pipeline_id.map(String::from),
        value: m.value,
        probability: m.probability,
        priority: m.priority,
        status: m.status,
        source: m.source,
        position: m.position,
        contact_id: m.contact_id,
        assigned_to: m.assigned_to,
        tags: serde_json::from_str(&m.tags).unwrap_or_default(),
        close_date: m.close_date.map(timestamps::to_proto),
        created_at: Some(timestamps::to_proto(m.created_at)),
        updated_at: Some(timestamps::to_proto(m.updated_at)),
        stage_entered_at: Some(timestamps::to_proto(m.stage_entered_at)),
    }
}

fn answer(m: deals::Model) -> Response<DealAnswer> {
    Response::new(DealAnswer {
        success: true,
        deal: Some(deal_message(m)),
    })
}

fn not_found() -> ApiError {
    ApiError::not_found("deal")
}

fn unknown_stage(id: &str) -> ApiError {
    ApiError::field("stage", format!("no stage `{id}` on this account"))
}

/// The stage, or 400 naming `stage` when the account has no such stage.
async fn existing_stage(
    db: &impl sea_orm::ConnectionTrait,
    account_id: &AccountId,
    id: &str,
) -> ApiResult<stages::Model> {
    store::stage(db, account_id, id).await?.ok_or_else(|| unknown_stage(id))
}

/// Writes the deal events for a change from `before` to `after`.
async fn record_change(
    db: &impl sea_orm::ConnectionTrait,
    before: Option<&deals::Model>,
    after: &deals::Model,
    now: DateTime<Utc>,
) -> ApiResult<()> {
    let data = events::payload(&deal_message(after.clone()), "frontdesk.v1.Deal");
    let event = match before {
        None => EventType::DealCreated,
        Some(_) => EventType::DealUpdated,
    };
    let account_id = after.account_id.clone();
    events::record(db, &account_id, event, data.clone(), now).await?;
    if let Some(before) = before
        && before.stage != after.stage
    {
        let moved = serde_json::json!({"deal": data, "from_stage": before.stage, "to_stage": after.stage});
        events::record(db, &account_id, EventType::DealStageChanged, moved, now).await?;
    }
    Ok(())
}

impl DealsService {
    async fn create(&self, account_id: &AccountId, fields: DealFields) -> ApiResult<deals::Model> {
        // A bad request is refused before it takes the write lock.
        fields.validate(true)?;
        let txn = crate::store::begin_write(&self.db).await?;
        let deal = create_in(&txn, account_id, fields, || self.clock.now()).await?;
        txn.commit().await?;
        Ok(deal)
    }

    /// Applies `fields` and moves the deal when `explicit` names a stage (and optionally a position) or when
    /// `fields` names a stage other than its own (to the end of it).
    async fn change(
        &self,
        account_id: &AccountId,
        deal_id: &str,
        fields: DealFields,
        explicit: Option<(String, Option<i32>)>,
    ) -> ApiResult<deals::Model> {
        fields.validate(false)?;
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        // Lock first, then read: concurrent changes serialise and each sees the last one's result.
        accounts::store::lock(&txn, account_id).await?;
        let before = store::deal(&txn, account_id, deal_id).await?.ok_or_else(not_found)?;
        let target = explicit.or_else(|| fields.stage.clone().filter(|s| *s != before.stage).map(|s| (s, None)));
        let mut after = before.clone();
        if let Some((stage_id, position)) = &target {
            let stage = existing_stage(&txn, account_id, stage_id).await?;
            // Take the deal out of its place, then put it at the asked one (the end by default).
            store::shift(&txn, account_id, &before.stage, before.position + 1, -1).await?;
            let size = store::stage_size(&txn, account_id, &stage.id).await?;
            let size = if stage.id == before.stage { size - 1 } else { size }.max(0);
            let place = position.map_or(size, |p| p.clamp(0, size));
            store::shift(&txn, account_id, &stage.id, place, 1).await?;
            if stage.id != before.stage {
                after.stage_entered_at = now;
            }
            after.stage = stage.id;
            after.pipeline_id = Some(stage.pipeline_id);
            after.position = place;
        }
        apply(&mut after, fields);
        after.updated_at = now;
        after.clone().into_active_model().reset_all().update(&txn).await?;
        record_change(&txn, Some(&before), &after, now).await?;
        txn.commit().await?;
        Ok(after)
    }

    async fn delete(&self, account_id: &AccountId, deal_id: &str) -> ApiResult<()> {
        let txn = crate::store::begin_write(&self.db).await?;
        accounts::store::lock(&txn, account_id).await?;
        let deal = store::deal(&txn, account_id, deal_id).await?.ok_or_else(not_found)?;
        deals::Entity::delete_by_id(&deal.id).exec(&txn).await?;
        store::shift(&txn, account_id, &deal.stage, deal.position + 1, -1).await?;
        txn.commit().await?;
        Ok(())
    }
}

/// Copies the set fields other than the stage (moves handle that) onto the deal.
fn apply(deal: &mut deals::Model, fields: DealFields) {
    let DealFields {
        title,
        description,
        company,
        stage: _,
        value,
        probability,
        priority,
        status,
        source,
        contact_id,
        assigned_to,
        tags,
        close_date,
    } = fields;
    let set = |target: &mut String, value: Option<String>| {
        if let Some(value) = value {
            *target = value;
        }
    };
    set(&mut deal.title, title.map(|t| t.trim().to_owned()));
    set(&mut deal.description, description);
    set(&mut deal.company, company);
    set(&mut deal.priority, priority);
    set(&mut deal.status, status);
    set(&mut deal.source, source);
    set(&mut deal.contact_id, contact_id);
    set(&mut deal.assigned_to, assigned_to);
    set(
        &mut deal.tags,
        tags.map(|t| serde_json::to_string(&t).unwrap_or_else(|_| "[]".into())),
    );
    if let Some(value) = value {
        deal.value = value;
    }
    if let Some(probability) = probability {
        deal.probability = probability;
    }
    if let Some(close_date) = close_date {
        deal.close_date = close_date;
    }
}

/// The fields an update sets, from its mask (REST fills the mask from the body's keys).
fn update_fields(r: UpdateDealRequest) -> ApiResult<DealFields> {
    let mut fields = DealFields::default();
    // Read only when the mask names it: a field outside the mask is ignored, however it is filled.
    let mut close_date = None;
    apply_mask(r.update_mask.as_ref(), "a deal", |path| {
        match path {
            "title" => fields.title = Some(r.title.clone()),
            "description" => fields.description = Some(r.description.clone()),
            "company" => fields.company = Some(r.company.clone()),
            "stage" => fields.stage = Some(r.stage.clone()),
            "value" => fields.value = Some(r.value),
            "probability" => fields.probability = Some(r.probability),
            "priority" => fields.priority = Some(r.priority.clone()),
            "status" => fields.status = Some(r.status.clone()),
            "source" => fields.source = Some(r.source.clone()),
            "contact_id" => fields.contact_id = Some(r.contact_id.clone()),
            "assigned_to" => fields.assigned_to = Some(r.assigned_to.clone()),
            "tags" => fields.tags = Some(r.tags.clone()),
            "close_date" => close_date = Some(timestamps::from_proto("close_date", r.close_date)),
            "deal_id" => {}
            _ => return false,
        }
        true
    })?;
    fields.close_date = close_date.transpose()?;
    Ok(fields)
}

fn list_filters(r: &ListDealsRequest) -> ApiResult<(Filters, Page)> {
    let mut violations: Vec<FieldViolation> = [
        check_filter("status", &r.status, STATUSES),
        check_filter("priority", &r.priority, PRIORITIES),
        check_filter("source", &r.source, SOURCES),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect();
    let page = Page::parse(r.limit, &r.cursor, crate::ids::Kind::Deal.prefix(), &mut violations);
    let created_after = timestamps::from_proto_noting("created_after", r.created_after, &mut violations);
    let created_before = timestamps::from_proto_noting("created_before", r.created_before, &mut violations);
    if !violations.is_empty() {
        return Err(ApiError::invalid(violations));
    }
    let filters = Filters {
        stage: r.stage.clone(),
        pipeline_id: r.pipeline_id.clone(),
        status: r.status.clone(),
        priority: r.priority.clone(),
        source: r.source.clone(),
        contact_id: r.contact_id.clone(),
        assigned_to: r.assigned_to.clone(),
        tag: r.tag.clone(),
        q: r.q.clone(),
        created_after,
        created_before,
    };
    Ok((filters, page))
}

#[tonic::async_trait]
impl Deals for DealsService {
    async fn list_deals(&self, request: Request<ListDealsRequest>) -> Result<Response<DealList>, Status> {
        let account_id = account_of(&request)?;
        let (filters, page) = list_filters(request.get_ref())?;
        let (rows, more) = store::list(&self.db, &account_id, &filters, &page)
            .await
            .map_err(ApiError::from)?;
        let (deals, next_cursor) = paging::render(rows, more, |d| (d.created_at, d.id.as_str()), deal_message);
        Ok(Response::new(DealList {
            success: true,
            deals,
            next_cursor,
        }))
    }

    async fn create_deal(&self, request: Request<CreateDealRequest>) -> Result<Response<DealAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let fields = DealFields {
            title: Some(r.title),
            description: Some(r.description),
            company: Some(r.company),
            stage: Some(r.stage),
            value: Some(r.value),
            probability: Some(r.probability),
            priority: Some(r.priority).filter(|p| !p.is_empty()),
            status: Some(r.status).filter(|s| !s.is_empty()),
            source: Some(r.source).filter(|s| !s.is_empty()),
            contact_id: Some(r.contact_id),
            assigned_to: Some(r.assigned_to),
            tags: Some(r.tags),
            close_date: Some(timestamps::from_proto("close_date", r.close_date)?),
        };
        Ok(answer(self.create(&account_id, fields).await?))
    }

    async fn get_deal(&self, request: Request<GetDealRequest>) -> Result<Response<DealAnswer>, Status> {
        let account_id = account_of(&request)?;
        let deal = store::deal(&self.db, &account_id, &request.get_ref().deal_id)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(not_found)?;
        Ok(answer(deal))
    }

    async fn update_deal(&self, request: Request<UpdateDealRequest>) -> Result<Response<DealAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let deal_id = r.deal_id.clone();
        let fields = update_fields(r)?;
        Ok(answer(self.change(&account_id, &deal_id, fields, None).await?))
    }

    async fn delete_deal(&self, request: Request<DeleteDealRequest>) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let deal_id = request.into_inner().deal_id;
        self.delete(&account_id, &deal_id).await?;
        Ok(deleted(deal_id))
    }

    async fn move_deal(&self, request: Request<MoveDealRequest>) -> Result<Response<DealAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        if r.stage.is_empty() {
            return Err(ApiError::invalid(vec![FieldViolation::new("stage", "is required")]).into());
        }
        if r.position.is_some_and(|p| p < 0) {
            return Err(ApiError::invalid(vec![FieldViolation::new("position", "must be 0 or more")]).into());
        }
        let deal = self
            .change(
                &account_id,
                &r.deal_id,
                DealFields::default(),
                Some((r.stage, r.position)),
            )
            .await?;
        Ok(answer(deal))
    }
}
