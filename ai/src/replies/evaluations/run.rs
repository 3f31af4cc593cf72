//! The `agent_evaluation` job: decides an evaluation's cases in order, as the agent's replies would be
//! decided, and stores their results as it goes (every `BATCH` cases; with every case when a model is paid
//! for it, its charge in the same transaction), so a run that dies resumes after the last stored case and
//! charges no case twice. With a model each case's price is held before the model is asked; when a hold
//! fails the evaluation ends `failed` with `insufficient_credits`, the cases run so far kept.

use std::{sync::Arc, time::Duration};

use chrono::Utc;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, sea_query::Expr};
use serde::{Deserialize, Serialize};

use super::{Case, Outcome};
use crate::{
    access::AccountId,
    accounts::holds,
    agents::tier::reply_cost,
    clock::Clock,
    error::{ApiError, ApiResult, Reason},
    jobs::{Class, Handler, Job, JobArgs, NewJob},
    knowledge::retrieval::Retrieval,
    replies::{
        passages,
        provider::{Basis, Context, Decision, ModelProvider, NoTools},
        provider_choice::Providers,
        reply::profile,
    },
    store::{
        entities::{
            agents,
            evaluations::{self, EvaluationStatus},
        },
        from_json_text, to_json_text,
    },
};

pub const KIND: &str = "agent_evaluation";
/// Free cases decided between two stores of the results.
const BATCH: usize = 25;

#[derive(Serialize, Deserialize)]
pub struct EvaluationArgs {
    evaluation_id: String,
}

impl JobArgs for EvaluationArgs {
    const KIND: &'static str = KIND;
    const CLASS: Class = Class::Bulk;
    const MAX_ATTEMPTS: i32 = 10;
}

pub fn job(account_id: &AccountId, evaluation_id: &str, now: chrono::DateTime<Utc>) -> NewJob {
    let args = EvaluationArgs {
        evaluation_id: evaluation_id.to_owned(),
    };
    NewJob {
        run_at_ms: now.timestamp_millis(),
        unique_key: Some(format!("{KIND}:{evaluation_id}")),
        ..NewJob::new(account_id, &args)
    }
}

/// What becomes of a case's hold when its result is stored.
enum Settle<'a> {
    Nothing,
    /// The model's work is charged.
    Charge {
        key: &'a str,
        cost: i64,
    },
    /// The model gave no decision (`model_unavailable`): nothing is charged.
    Release {
        key: &'a str,
    },
}

pub struct Evaluate {
    pub db: DatabaseConnection,
    pub clock: Arc<dyn Clock>,
    pub retrieval: Arc<Retrieval>,
    pub providers: Arc<Providers>,
}

#[async_trait::async_trait]
impl Handler for Evaluate {
    /// Up to 500 cases, each within a reply's time when a model decides them.
    fn deadline(&self) -> Duration {
        Duration::from_secs(3600)
    }

    async fn run(&self, job: &Job) -> crate::jobs::Outcome {
        let payload: EvaluationArgs = match job.args() {
            Ok(payload) => payload,
            Err(unreadable) => return unreadable,
        };
        match self.evaluate(&job.account(), &payload.evaluation_id).await {
            Ok(()) => crate::jobs::Outcome::Done(None),
            Err(err) if job.is_last_attempt() => {
                if let Err(also) = self
                    .end(&payload.evaluation_id, EvaluationStatus::Failed, "internal")
                    .await
                {
                    tracing::error!(evaluation = payload.evaluation_id, error = %also.message, "an evaluation that used up its tries could not be marked failed");
                }
                crate::jobs::Outcome::Fail {
                    error: err.message,
                    effect: None,
                }
            }
            Err(err) => crate::jobs::Outcome::Retry {
                error: err.message,
                after: Duration::from_secs(5),
            },
        }
    }
}

impl Evaluate {
    async fn evaluate(&self, account_id: &AccountId, id: &str) -> ApiResult<()> {
        let Some(row) = evaluations::Entity::find_by_id(id.to_owned())
            .filter(evaluations::Column::AccountId.eq(account_id))
            .one(&self.db)
            .await?
        else {
            return Ok(());
        };
        if matches!(row.status, EvaluationStatus::Completed | EvaluationStatus::Failed) {
            return Ok(());
        }
        let agent = match crate::agents::find(&self.db, account_id, &row.agent_id).await {
            Ok(agent) => agent,
            Err(err) if err.reason == Reason::NotFound => {
                return self.end(id, EvaluationStatus::Failed, "agent_deleted").await;
            }
            Err(err) => return Err(err),
        };
        self.set_status(id, EvaluationStatus::Running).await?;
        let cases: Vec<Case> = from_json_text(&row.cases);
        let mut outcomes: Vec<Outcome> = from_json_text(&row.results);
        let chosen = self.providers.for_reply(account_id, &agent).await?;
        let provider = chosen.provider.as_ref();
        let cost = if provider.is_model() {
            reply_cost(agent.ai_tier, chosen.own_key)
        } else {
            0
        };
        let mut stored = outcomes.len();
        for (n, case) in cases.iter().enumerate().skip(outcomes.len()) {
            let key = format!("evaluation:{id}:{n}");
            if cost > 0 {
                let hold = holds::Hold {
                    account_id,
                    key: &key,
                    amount_milli: cost,
                    purpose: holds::Purpose::Evaluation,
                    lasts: self.providers.hold_time(),
                    at_once: None,
                };
                match holds::hold(&self.db, &hold, self.clock.now()).await {
                    Ok(()) => {}
                    Err(err) if err.reason == Reason::InsufficientCredits => {
                        self.store(id, &outcomes, Settle::Nothing).await?;
                        return self.end(id, EvaluationStatus::Failed, "insufficient_credits").await;
                    }
                    Err(err) => return Err(err),
                }
            }
            let (outcome, billable) = self.decide(provider, &agent, case).await?;
            outcomes.push(outcome);
            if cost > 0 {
                let settle = if billable {
                    Settle::Charge { key: &key, cost }
                } else {
                    Settle::Release { key: &key }
                };
                self.store(id, &outcomes, settle).await?;
                stored = outcomes.len();
            } else if outcomes.len() - stored >= BATCH {
                self.store(id, &outcomes, Settle::Nothing).await?;
                stored = outcomes.len();
            }
        }
        self.store(id, &outcomes, Settle::Nothing).await?;
        self.end(id, EvaluationStatus::Completed, "").await
    }

    /// The case's outcome as a reply would decide it, and whether it costs what a reply does (an answer, or
    /// a handoff a model chose).
    async fn decide(
        &self,
        provider: &dyn ModelProvider,
        agent: &agents::Model,
        case: &Case,
    ) -> ApiResult<(Outcome, bool)> {
        let passages = passages::for_messages(&self.retrieval, &self.db, agent, &[case.question.as_str()])
            .await?
            .passages;
        let score = passages.first().map_or(0.0, |p| p.score);
        let context = Context {
            agent: profile(agent),
            question: case.question.clone(),
            passages,
            semantic: self.retrieval.embedder().is_some(),
            ..Context::default()
        };
        Ok(match provider.decide(&context, &NoTools).await {
            Decision::Answer { text, basis } => {
                let faq_id = match basis {
                    Basis::Faq(id) => id,
                    _ => String::new(),
                };
                let outcome = Outcome {
                    outcome: "answered".into(),
                    reply: text,
                    faq_id,
                    score,
                };
                (outcome, true)
            }
            Decision::Handoff { text, reason } => {
                let outcome = Outcome {
                    outcome: "handed_off".into(),
                    reply: text,
                    faq_id: String::new(),
                    score,
                };
                (outcome, provider.is_model() && reason.is_models_choice())
            }
            Decision::Silent => (
                Outcome {
                    outcome: "handed_off".into(),
                    score,
                    ..Outcome::default()
                },
                false,
            ),
        })
    }

    /// Stores the results so far, settling the last case's hold as `settle` says in the same transaction.
    async fn store(&self, id: &str, outcomes: &[Outcome], settle: Settle<'_>) -> ApiResult<()> {
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        let row = evaluations::Entity::find_by_id(id.to_owned())
            .one(&txn)
            .await?
            .ok_or_else(|| ApiError::not_found("evaluation"))?;
        let account_id = row.account_id.clone();
        match settle {
            Settle::Charge { key, cost } => {
                let reason = format!("evaluation {id}");
                holds::settle(&txn, &account_id, key, cost, &reason, None, now).await?;
            }
            Settle::Release { key } => holds::release(&txn, key).await?,
            Settle::Nothing => {}
        }
        evaluations::Entity::update_many()
            .col_expr(evaluations::Column::Results, Expr::value(to_json_text(&outcomes)))
            .filter(evaluations::Column::Id.eq(id))
            .exec(&txn)
            .await?;
        txn.commit().await?;
        Ok(())
    }

    async fn set_status(&self, id: &str, status: EvaluationStatus) -> ApiResult<()> {
        evaluations::Entity::update_many()
            .col_expr(evaluations::Column::Status, Expr::value(status))
            .filter(evaluations::Column::Id.eq(id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Ends the evaluation `status` (completed or failed) with `error` ("" when none).
    async fn end(&self, id: &str, status: EvaluationStatus, error: &str) -> ApiResult<()> {
        evaluations::Entity::update_many()
            .col_expr(evaluations::Column::Status, Expr::value(status))
            .col_expr(evaluations::Column::Error, Expr::value(error))
            .col_expr(evaluations::Column::CompletedAt, Expr::value(self.clock.now()))
            .filter(evaluations::Column::Id.eq(id))
            .exec(&self.db)
            .await?;
        Ok(())
    }
}
