//! `POST /v1/agents/{agentId}/evaluations` (1..500 cases, queued as a job) and
//! `GET /v1/agents/{agentId}/evaluations/{evaluationId}`. Another account's agent or evaluation is 404.

use std::sync::Arc;

use frontdesk_api::v1::{CreateEvaluationRequest, EvaluationAnswer, GetEvaluationRequest, evaluations_server};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use tonic::{Request, Response, Status};

use super::{Case, MAX_CASES, message, run};
use crate::{
    access::AccountId,
    clock::Clock,
    error::{ApiError, ApiResult},
    jobs::{self, Wake},
    platform_calls::account_of,
    store::{entities::evaluations, to_json_text},
    validate::Violations,
};

const EXPECTS: &[&str] = &["answer", "handoff"];
const MAX_QUESTION_CHARS: usize = 2_000;
const MAX_CONTAINS: usize = 10;
const MAX_CONTAINS_CHARS: usize = 200;

pub struct EvaluationsService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    wake: Wake,
}

impl EvaluationsService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, wake: Wake) -> Self {
        Self { db, clock, wake }
    }

    async fn create(&self, account_id: &AccountId, r: CreateEvaluationRequest) -> ApiResult<evaluations::Model> {
        let cases = checked(&r)?;
        let agent = crate::agents::find(&self.db, account_id, &r.agent_id).await?;
        let now = self.clock.now();
        let row = evaluations::Model {
            id: crate::ids::new_id(crate::ids::Kind::Evaluation),
            account_id: account_id.clone(),
            agent_id: agent.id,
            status: evaluations::EvaluationStatus::Queued,
            cases: to_json_text(&cases),
            results: "[]".to_owned(),
            error: String::new(),
            created_at: now,
            completed_at: None,
        };
        let txn = crate::store::begin_write(&self.db).await?;
        evaluations::Entity::insert(evaluations::ActiveModel::from(row.clone()))
            .exec_without_returning(&txn)
            .await?;
        jobs::enqueue(&txn, run::job(account_id, &row.id, now), now).await?;
        txn.commit().await?;
        self.wake.notify();
        Ok(row)
    }

    async fn get(&self, account_id: &AccountId, r: &GetEvaluationRequest) -> ApiResult<evaluations::Model> {
        evaluations::Entity::find_by_id(r.evaluation_id.clone())
            .filter(evaluations::Column::AccountId.eq(account_id))
            .filter(evaluations::Column::AgentId.eq(r.agent_id.as_str()))
            .one(&self.db)
            .await?
            .ok_or_else(|| ApiError::not_found("evaluation"))
    }
}

/// The request's cases, or 400 naming the first field at fault.
fn checked(r: &CreateEvaluationRequest) -> ApiResult<Vec<Case>> {
    let mut v = Violations::new();
    v.check(
        (1..=MAX_CASES).contains(&r.cases.len()),
        "cases",
        format!("must hold 1 to {MAX_CASES} cases"),
    );
    for (n, case) in r.cases.iter().enumerate() {
        v.text(
            &format!("cases[{n}].question"),
            &case.question,
            true,
            MAX_QUESTION_CHARS,
        );
        v.one_of(&format!("cases[{n}].expect"), &case.expect, EXPECTS);
        v.list(
            &format!("cases[{n}].answer_contains"),
            &case.answer_contains,
            MAX_CONTAINS,
            MAX_CONTAINS_CHARS,
        );
        if !v.is_empty() {
            break;
        }
    }
    v.finish()?;
    Ok(r.cases
        .iter()
        .map(|c| Case {
            question: c.question.trim().to_owned(),
            expect: c.expect.clone(),
            answer_contains: c.answer_contains.clone(),
        })
        .collect())
}

#[tonic::async_trait]
impl evaluations_server::Evaluations for EvaluationsService {
    async fn create_evaluation(
        &self,
        request: Request<CreateEvaluationRequest>,
    ) -> Result<Response<EvaluationAnswer>, Status> {
        let account_id = account_of(&request)?;
        let row = self.create(&account_id, request.into_inner()).await?;
        Ok(Response::new(EvaluationAnswer {
            success: true,
            evaluation: Some(message(&row)),
        }))
    }

    async fn get_evaluation(
        &self,
        request: Request<GetEvaluationRequest>,
    ) -> Result<Response<EvaluationAnswer>, Status> {
        let account_id = account_of(&request)?;
        let row = self.get(&account_id, request.get_ref()).await?;
        Ok(Response::new(EvaluationAnswer {
            success: true,
            evaluation: Some(message(&row)),
        }))
    }
}
