//! An agent's FAQs: questions and answers it answers from, written directly or applied from a knowledge
//! group (then `group_id` says which).

use chrono::{DateTime, Utc};
use frontdesk_api::v1::{CreateFaqRequest, FaqAnswer, FaqList, ListFaqsRequest, UpdateFaqRequest};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter};

use super::find;
use crate::resource_id::{AgentId, FaqId};
use crate::{
    access::AccountId,
    error::{ApiError, ApiResult},
    knowledge::agent_faqs::faq_message,
    paging::{self, Page},
    platform_calls::apply_mask,
    store::{self, entities::agent_faqs},
    validate::Violations,
};

pub const MAX_QUESTION: usize = 1_000;
pub const MAX_ANSWER: usize = 10_000;

fn answer(m: &agent_faqs::Model) -> FaqAnswer {
    FaqAnswer {
        success: true,
        faq: Some(faq_message(m)),
    }
}

/// Checks a question and answer (required, bounded).
pub fn check(v: &mut Violations, question: &str, answer: &str) {
    v.text("question", question, true, MAX_QUESTION);
    v.text("answer", answer, true, MAX_ANSWER);
}

/// A new FAQ row on `agent_id`.
pub fn new_faq(
    account_id: &AccountId,
    agent_id: &str,
    question: &str,
    answer: &str,
    group_id: Option<String>,
    now: DateTime<Utc>,
) -> agent_faqs::Model {
    agent_faqs::Model {
        id: crate::ids::new_id(crate::ids::Kind::Faq).into(),
        account_id: account_id.clone(),
        agent_id: agent_id.into(),
        question: question.trim().to_owned(),
        answer: answer.trim().to_owned(),
        group_id: group_id.map(Into::into),
        created_at: now,
        updated_at: now,
    }
}

async fn find_faq(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    agent: &AgentId,
    faq: &FaqId,
) -> ApiResult<agent_faqs::Model> {
    store::owned::<agent_faqs::Entity>(db, agent_faqs::Column::AccountId, account_id, faq.as_str())
        .await?
        .filter(|found| *agent == *found.agent_id)
        .ok_or_else(|| ApiError::not_found("FAQ"))
}

pub async fn list(db: &impl ConnectionTrait, account_id: &AccountId, r: ListFaqsRequest) -> ApiResult<FaqList> {
    let page = Page::checked(r.limit, &r.cursor, crate::ids::Kind::Faq.prefix())?;
    let agent = find(db, account_id, &r.agent_id).await?;
    let select = agent_faqs::Entity::find().filter(agent_faqs::Column::AgentId.eq(&agent.id));
    let (rows, more) = paging::fetch(db, select, &page, agent_faqs::Column::CreatedAt, agent_faqs::Column::Id).await?;
    let (faqs, next_cursor) = paging::render(&rows, more, |f| (f.created_at, f.id.as_str()), faq_message);
    Ok(FaqList {
        success: true,
        next_cursor,
        faqs,
    })
}

pub async fn create(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    r: CreateFaqRequest,
    now: DateTime<Utc>,
) -> ApiResult<FaqAnswer> {
    let mut v = Violations::new();
    check(&mut v, &r.question, &r.answer);
    v.finish()?;
    // Under the account lock, as agent deletion: nothing is added to an agent being deleted.
    crate::accounts::store::lock(db, account_id).await?;
    let agent = find(db, account_id, &r.agent_id).await?;
    let faq = new_faq(account_id, &agent.id, &r.question, &r.answer, None, now);
    agent_faqs::Entity::insert(agent_faqs::ActiveModel::from(faq.clone()).reset_all())
        .exec_without_returning(db)
        .await?;
    Ok(answer(&faq))
}

pub async fn update(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    r: UpdateFaqRequest,
    now: DateTime<Utc>,
) -> ApiResult<FaqAnswer> {
    let mut question = None;
    let mut answer_text = None;
    apply_mask(r.update_mask.as_ref(), "a FAQ", |path| {
        match path {
            "question" => question = Some(r.question.clone()),
            "answer" => answer_text = Some(r.answer.clone()),
            "agent_id" | "faq_id" => {}
            _ => return false,
        }
        true
    })?;
    let mut v = Violations::new();
    if let Some(q) = &question {
        v.text("question", q, true, MAX_QUESTION);
    }
    if let Some(a) = &answer_text {
        v.text("answer", a, true, MAX_ANSWER);
    }
    v.finish()?;
    // Under the account lock, as agent deletion: nothing is added to an agent being deleted.
    crate::accounts::store::lock(db, account_id).await?;
    let mut faq = find_faq(db, account_id, &AgentId::new(r.agent_id), &FaqId::new(r.faq_id)).await?;
    if let Some(q) = question {
        faq.question = q.trim().to_owned();
    }
    if let Some(a) = answer_text {
        faq.answer = a.trim().to_owned();
    }
    faq.updated_at = now;
    faq.clone().into_active_model().reset_all().update(db).await?;
    Ok(answer(&faq))
}

pub async fn delete(db: &impl ConnectionTrait, account_id: &AccountId, agent: &AgentId, faq: &FaqId) -> ApiResult<()> {
    let faq = find_faq(db, account_id, agent, faq).await?;
    agent_faqs::Entity::delete_by_id(faq.id).exec(db).await?;
    Ok(())
}
