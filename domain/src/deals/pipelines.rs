//! `/v1/pipelines` and `/v1/stages`: pipelines with ordered stages. Stage positions stay dense (0..n) within a
//! pipeline. Deleting a stage (or a pipeline) leaves its deals' `stage` as it was with `pipeline_id` null;
//! a stage created again under the same id takes those deals back.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use frontdesk_api::v1::{
    CreatePipelineRequest, CreateStageRequest, DeletePipelineRequest, DeleteStageRequest, Deleted,
    ListPipelinesRequest, Pipeline, PipelineAnswer, PipelineList, Stage, StageAnswer, UpdatePipelineRequest,
    UpdateStageRequest, pipelines_server::Pipelines,
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, IntoActiveModel,
    QueryFilter, QueryOrder, Set,
    sea_query::{Expr, ExprTrait},
};
use tonic::{Code, Request, Response, Status};

use super::service::deal_message;
use crate::accounts::store::lock as lock_account;
use crate::error::Reason;
use crate::resource_id::PipelineId;
use crate::{
    access::AccountId,
    clock::Clock,
    error::{ApiError, ApiResult, FieldViolation},
    events::{self, EventType},
    platform_calls::{account_of, deleted},
    store::entities::{deals, pipelines, stages},
    timestamps,
};

/// Id of the main pipeline every account has.
pub const DEFAULT_PIPELINE: &str = "default";
const DEFAULT_STAGES: [(&str, &str); 6] = [
    ("new", "New"),
    ("qualified", "Qualified"),
    ("proposal", "Proposal"),
    ("negotiation", "Negotiation"),
    ("won", "Won"),
    ("lost", "Lost"),
];

/// Creates the main pipeline and its stages for a new account.
pub async fn create_default(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    pipelines::Entity::insert(pipelines::ActiveModel {
        account_id: Set(account_id.clone()),
        id: Set(DEFAULT_PIPELINE.into()),
        name: Set("Main pipeline".to_owned()),
        created_at: Set(now),
    })
    .exec_without_returning(db)
    .await?;
    let rows = DEFAULT_STAGES
        .iter()
        .zip(0..)
        .map(|((id, name), position)| stages::ActiveModel {
            account_id: Set(account_id.clone()),
            id: Set((*id).to_owned()),
            pipeline_id: Set(DEFAULT_PIPELINE.into()),
            name: Set((*name).to_owned()),
            position: Set(position),
        });
    stages::Entity::insert_many(rows).exec_without_returning(db).await?;
    Ok(())
}

#[derive(Clone)]
pub struct PipelinesService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
}

impl PipelinesService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>) -> Self {
        Self { db, clock }
    }
}

/// `^[a-z][a-z0-9_-]{0,63}$`: given, or made from the name.
fn id_for(given: &str, name: &str, field: &str) -> ApiResult<String> {
    let id = if given.is_empty() {
        let slug: String = name
            .trim()
            .to_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let slug = slug.trim_matches('_').chars().take(60).collect::<String>();
        if slug.starts_with(|c: char| c.is_ascii_lowercase()) {
            slug
        } else {
            format!("s_{slug}")
        }
    } else {
        given.to_owned()
    };
    let valid = id.len() <= 64
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if valid {
        Ok(id)
    } else {
        Err(ApiError::invalid(vec![FieldViolation::new(
            field,
            "must match ^[a-z][a-z0-9_-]{0,63}$",
        )]))
    }
}

fn name_of(name: &str, field: &str) -> ApiResult<String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(ApiError::invalid(vec![FieldViolation::new(
            field,
            "must be 1 to 100 characters",
        )]));
    }
    Ok(name.to_owned())
}

fn taken(what: &str, id: &str) -> ApiError {
    ApiError::already_exists(format!("a {what} with id `{id}` already exists"))
}

fn stage_message(s: &stages::Model) -> Stage {
    Stage {
        id: s.id.clone(),
        name: s.name.clone(),
        position: s.position,
        pipeline_id: s.pipeline_id.to_string(),
    }
}

async fn pipeline_message(db: &impl ConnectionTrait, p: pipelines::Model) -> ApiResult<Pipeline> {
    let stages = stages::Entity::find()
        .filter(stages::Column::AccountId.eq(&p.account_id))
        .filter(stages::Column::PipelineId.eq(&p.id))
        .order_by_asc(stages::Column::Position)
        .all(db)
        .await?;
    Ok(Pipeline {
        id: p.id.into(),
        name: p.name,
        stages: stages.iter().map(stage_message).collect(),
        created_at: Some(timestamps::to_proto(p.created_at)),
    })
}

async fn find_pipeline(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    id: &PipelineId,
) -> ApiResult<pipelines::Model> {
    pipelines::Entity::find_by_id((account_id.clone(), id.clone()))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found("pipeline"))
}

async fn find_stage(db: &impl ConnectionTrait, account_id: &AccountId, id: &str) -> ApiResult<stages::Model> {
    stages::Entity::find_by_id((account_id.clone(), id.to_owned()))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found("stage"))
}

/// Shifts the stage positions at or after `from` in a pipeline by `delta`.
async fn shift_stages(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    pipeline_id: &PipelineId,
    from: i32,
    delta: i32,
) -> ApiResult<()> {
    stages::Entity::update_many()
        .col_expr(stages::Column::Position, Expr::col(stages::Column::Position).add(delta))
        .filter(stages::Column::AccountId.eq(account_id))
        .filter(stages::Column::PipelineId.eq(pipeline_id))
        .filter(stages::Column::Position.gte(from))
        .exec(db)
        .await?;
    Ok(())
}

async fn stage_count(db: &impl ConnectionTrait, account_id: &AccountId, pipeline_id: &PipelineId) -> ApiResult<i32> {
    use sea_orm::PaginatorTrait;
    let n = stages::Entity::find()
        .filter(stages::Column::AccountId.eq(account_id))
        .filter(stages::Column::PipelineId.eq(pipeline_id))
        .count(db)
        .await?;
    Ok(i32::try_from(n).unwrap_or(i32::MAX))
}

/// Points the deals sitting in `stage_id` at `pipeline_id` (or at none), writing `deal.updated` for each
/// deal whose `pipeline_id` changes.
async fn relink_deals(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    stage_id: &str,
    pipeline_id: Option<&PipelineId>,
    now: DateTime<Utc>,
) -> ApiResult<()> {
    let affected = deals::Entity::find()
        .filter(deals::Column::AccountId.eq(account_id))
        .filter(deals::Column::Stage.eq(stage_id))
        .all(db)
        .await?;
    deals::Entity::update_many()
        .col_expr(deals::Column::PipelineId, Expr::value(pipeline_id.cloned()))
        .filter(deals::Column::AccountId.eq(account_id))
        .filter(deals::Column::Stage.eq(stage_id))
        .exec(db)
        .await?;
    for mut deal in affected.into_iter().filter(|d| d.pipeline_id.as_ref() != pipeline_id) {
        deal.pipeline_id = pipeline_id.cloned();
        let data = events::payload(&deal_message(deal), "frontdesk.v1.Deal");
        events::record(db, account_id, EventType::DealUpdated, data, now).await?;
    }
    Ok(())
}

async fn insert_stage(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    pipeline: &PipelineId,
    id: String,
    name: String,
    position: i32,
    now: DateTime<Utc>,
) -> ApiResult<stages::Model> {
    if stages::Entity::find_by_id((account_id.clone(), id.clone()))
        .one(db)
        .await?
        .is_some()
    {
        return Err(taken("stage", &id));
    }
    let stage = stages::Model {
        account_id: account_id.clone(),
        id,
        pipeline_id: pipeline.clone(),
        name,
        position,
    };
    stages::Entity::insert(stages::ActiveModel::from(stage.clone()).reset_all())
        .exec_without_returning(db)
        .await?;
    relink_deals(db, account_id, &stage.id, Some(pipeline), now).await?;
    Ok(stage)
}

#[tonic::async_trait]
impl Pipelines for PipelinesService {
    async fn list_pipelines(&self, request: Request<ListPipelinesRequest>) -> Result<Response<PipelineList>, Status> {
        let account_id = account_of(&request)?;
        let rows = pipelines::Entity::find()
            .filter(pipelines::Column::AccountId.eq(&account_id))
            .order_by_asc(pipelines::Column::CreatedAt)
            .order_by_asc(pipelines::Column::Id)
            .all(&self.db)
            .await
            .map_err(ApiError::from)?;
        let mut list = Vec::new();
        for row in rows {
            list.push(pipeline_message(&self.db, row).await?);
        }
        Ok(Response::new(PipelineList {
            success: true,
            pipelines: list,
        }))
    }

    async fn create_pipeline(
        &self,
        request: Request<CreatePipelineRequest>,
    ) -> Result<Response<PipelineAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let name = name_of(&r.name, "name")?;
        let id = PipelineId::new(id_for(&r.id, &name, "id")?);
        let mut new_stages = Vec::new();
        for (i, stage) in r.stages.iter().enumerate() {
            let field = format!("stages[{i}]");
            let stage_name = name_of(&stage.name, &format!("{field}.name"))?;
            new_stages.push((id_for(&stage.id, &stage_name, &format!("{field}.id"))?, stage_name));
        }
        let txn = crate::store::begin_write(&self.db).await.map_err(ApiError::from)?;
        lock_account(&txn, &account_id).await.map_err(ApiError::from)?;
        if pipelines::Entity::find_by_id((account_id.clone(), id.clone()))
            .one(&txn)
            .await
            .map_err(ApiError::from)?
            .is_some()
        {
            return Err(taken("pipeline", id.as_str()).into());
        }
        let pipeline = pipelines::Model {
            account_id: account_id.clone(),
            id: id.clone(),
            name,
            created_at: self.clock.now(),
        };
        pipelines::Entity::insert(pipelines::ActiveModel::from(pipeline.clone()).reset_all())
            .exec_without_returning(&txn)
            .await
            .map_err(ApiError::from)?;
        for ((stage_id, stage_name), position) in new_stages.into_iter().zip(0..) {
            insert_stage(
                &txn,
                &account_id,
                &id,
                stage_id,
                stage_name,
                position,
                pipeline.created_at,
            )
            .await?;
        }
        let message = pipeline_message(&txn, pipeline).await?;
        txn.commit().await.map_err(ApiError::from)?;
        Ok(Response::new(PipelineAnswer {
            success: true,
            pipeline: Some(message),
        }))
    }

    async fn update_pipeline(
        &self,
        request: Request<UpdatePipelineRequest>,
    ) -> Result<Response<PipelineAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let name = name_of(&r.name, "name")?;
        let pipeline = find_pipeline(&self.db, &account_id, &r.pipeline_id.into()).await?;
        let mut active = pipeline.into_active_model();
        active.name = Set(name);
        let updated = active.update(&self.db).await.map_err(ApiError::from)?;
        Ok(Response::new(PipelineAnswer {
            success: true,
            pipeline: Some(pipeline_message(&self.db, updated).await?),
        }))
    }

    async fn delete_pipeline(&self, request: Request<DeletePipelineRequest>) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let id = PipelineId::new(request.into_inner().pipeline_id);
        if id == *DEFAULT_PIPELINE {
            return Err(ApiError::new(
                Code::FailedPrecondition,
                Reason::InvalidArgument,
                "the main pipeline cannot be deleted",
            )
            .into());
        }
        let txn = crate::store::begin_write(&self.db).await.map_err(ApiError::from)?;
        lock_account(&txn, &account_id).await.map_err(ApiError::from)?;
        find_pipeline(&txn, &account_id, &id).await?;
        let now = self.clock.now();
        let doomed = stages::Entity::find()
            .filter(stages::Column::AccountId.eq(&account_id))
            .filter(stages::Column::PipelineId.eq(&id))
            .all(&txn)
            .await
            .map_err(ApiError::from)?;
        for stage in doomed {
            relink_deals(&txn, &account_id, &stage.id, None, now).await?;
        }
        stages::Entity::delete_many()
            .filter(stages::Column::AccountId.eq(&account_id))
            .filter(stages::Column::PipelineId.eq(&id))
            .exec(&txn)
            .await
            .map_err(ApiError::from)?;
        pipelines::Entity::delete_by_id((account_id.clone(), id.clone()))
            .exec(&txn)
            .await
            .map_err(ApiError::from)?;
        txn.commit().await.map_err(ApiError::from)?;
        Ok(deleted(id.into()))
    }

    async fn create_stage(&self, request: Request<CreateStageRequest>) -> Result<Response<StageAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let name = name_of(&r.name, "name")?;
        let id = id_for(&r.id, &name, "id")?;
        let txn = crate::store::begin_write(&self.db).await.map_err(ApiError::from)?;
        lock_account(&txn, &account_id).await.map_err(ApiError::from)?;
        let pipeline = PipelineId::new(r.pipeline_id);
        find_pipeline(&txn, &account_id, &pipeline).await?;
        let count = stage_count(&txn, &account_id, &pipeline).await?;
        let position = r.position.map_or(count, |p| p.clamp(0, count));
        shift_stages(&txn, &account_id, &pipeline, position, 1).await?;
        let stage = insert_stage(&txn, &account_id, &pipeline, id, name, position, self.clock.now()).await?;
        txn.commit().await.map_err(ApiError::from)?;
        Ok(Response::new(StageAnswer {
            success: true,
            stage: Some(stage_message(&stage)),
        }))
    }

    async fn update_stage(&self, request: Request<UpdateStageRequest>) -> Result<Response<StageAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let name = r.name.as_deref().map(|n| name_of(n, "name")).transpose()?;
        let txn = crate::store::begin_write(&self.db).await.map_err(ApiError::from)?;
        lock_account(&txn, &account_id).await.map_err(ApiError::from)?;
        let stage = find_stage(&txn, &account_id, &r.stage_id).await?;
        let mut updated = stage.clone();
        if let Some(position) = r.position {
            let last = stage_count(&txn, &account_id, &stage.pipeline_id).await? - 1;
            let target = position.clamp(0, Ord::max(last, 0));
            shift_stages(&txn, &account_id, &stage.pipeline_id, stage.position + 1, -1).await?;
            shift_stages(&txn, &account_id, &stage.pipeline_id, target, 1).await?;
            updated.position = target;
        }
        if let Some(name) = name {
            updated.name = name;
        }
        // The shifts above also moved this stage's own row; write its final state over them.
        stages::ActiveModel::from(updated.clone())
            .reset_all()
            .update(&txn)
            .await
            .map_err(ApiError::from)?;
        txn.commit().await.map_err(ApiError::from)?;
        Ok(Response::new(StageAnswer {
            success: true,
            stage: Some(stage_message(&updated)),
        }))
    }

    async fn delete_stage(&self, request: Request<DeleteStageRequest>) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let id = request.into_inner().stage_id;
        let txn = crate::store::begin_write(&self.db).await.map_err(ApiError::from)?;
        lock_account(&txn, &account_id).await.map_err(ApiError::from)?;
        let stage = find_stage(&txn, &account_id, &id).await?;
        stages::Entity::delete_by_id((account_id.clone(), id.clone()))
            .exec(&txn)
            .await
            .map_err(ApiError::from)?;
        shift_stages(&txn, &account_id, &stage.pipeline_id, stage.position + 1, -1).await?;
        relink_deals(&txn, &account_id, &id, None, self.clock.now()).await?;
        txn.commit().await.map_err(ApiError::from)?;
        Ok(deleted(id))
    }
}
