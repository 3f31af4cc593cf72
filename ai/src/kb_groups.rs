//! `/v1/kb-groups`: named bundles of FAQs, applied to an agent (or the agent behind a campaign) in one
//! idempotent call.

use std::{collections::HashMap, sync::Arc};

use frontdesk_api::v1::{
    AppliedKbGroup, ApplyKbGroupRequest, CreateKbGroupRequest, DeleteKbGroupRequest, Deleted, GetKbGroupRequest,
    GroupFaq, KbGroup, KbGroupAnswer, KbGroupList, ListKbGroupsRequest, UpdateKbGroupRequest,
    kb_groups_server::KbGroups,
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, IntoActiveModel, QueryFilter,
};
use serde::{Deserialize, Serialize};
use tonic::{Request, Response, Status};

use crate::{
    access::AccountId,
    accounts,
    agents::{
        self,
        faqs::{self, MAX_ANSWER, MAX_QUESTION},
    },
    campaigns,
    clock::Clock,
    error::{ApiError, ApiResult, FieldViolation},
    paging::{self, Page},
    platform_calls::{account_of, apply_mask, deleted},
    store::{
        self,
        entities::{agent_faqs, kb_groups},
        from_json_text, to_json_text,
    },
    timestamps,
    validate::Violations,
};

const MAX_FAQS: usize = 500;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct StoredFaq {
    question: String,
    answer: String,
}

#[derive(Clone)]
pub struct KbGroupsService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
}

impl KbGroupsService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>) -> Self {
        Self { db, clock }
    }
}

fn message(m: &kb_groups::Model) -> KbGroup {
    KbGroup {
        id: m.id.to_string(),
        name: m.name.clone(),
        description: m.description.clone(),
        faqs: from_json_text::<Vec<StoredFaq>>(&m.faqs)
            .into_iter()
            .map(|f| GroupFaq {
                question: f.question,
                answer: f.answer,
            })
            .collect(),
        created_at: Some(timestamps::to_proto(m.created_at)),
        updated_at: Some(timestamps::to_proto(m.updated_at)),
    }
}

fn answer(m: &kb_groups::Model) -> Response<KbGroupAnswer> {
    Response::new(KbGroupAnswer {
        success: true,
        kb_group: Some(message(m)),
    })
}

/// The FAQs checked and trimmed: questions required and unique within the group.
fn checked_faqs(v: &mut Violations, faqs: Vec<GroupFaq>) -> Vec<StoredFaq> {
    v.check(
        faqs.len() <= MAX_FAQS,
        "faqs",
        format!("must hold at most {MAX_FAQS} FAQs"),
    );
    let mut seen = std::collections::HashSet::new();
    faqs.into_iter()
        .enumerate()
        .map(|(i, faq)| {
            v.text(&format!("faqs[{i}].question"), &faq.question, true, MAX_QUESTION);
            v.text(&format!("faqs[{i}].answer"), &faq.answer, true, MAX_ANSWER);
            let question = faq.question.trim().to_owned();
            v.check(
                seen.insert(question.to_lowercase()),
                &format!("faqs[{i}].question"),
                "repeats an earlier question of the group",
            );
            StoredFaq {
                question,
                answer: faq.answer.trim().to_owned(),
            }
        })
        .collect()
}

async fn find(db: &impl ConnectionTrait, account_id: &AccountId, id: &str) -> ApiResult<kb_groups::Model> {
    store::owned::<kb_groups::Entity>(db, kb_groups::Column::AccountId, account_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("knowledge group"))
}

/// What one apply did.
#[derive(Debug, Default, PartialEq, Eq)]
struct Applied {
    added: i32,
    updated: i32,
    unchanged: i32,
}

impl KbGroupsService {
    async fn create(&self, account_id: &AccountId, r: CreateKbGroupRequest) -> ApiResult<kb_groups::Model> {
        let mut v = Violations::new();
        v.text("name", &r.name, true, 200);
        v.text("description", &r.description, false, 2_000);
        let faqs = checked_faqs(&mut v, r.faqs);
        v.finish()?;
        let now = self.clock.now();
        let row = kb_groups::Model {
            id: crate::ids::new_id(crate::ids::Kind::KbGroup).into(),
            account_id: account_id.clone(),
            name: r.name.trim().to_owned(),
            description: r.description,
            faqs: to_json_text(&faqs),
            created_at: now,
            updated_at: now,
        };
        kb_groups::Entity::insert(kb_groups::ActiveModel::from(row.clone()).reset_all())
            .exec_without_returning(&self.db)
            .await?;
        Ok(row)
    }

    async fn update(&self, account_id: &AccountId, r: UpdateKbGroupRequest) -> ApiResult<kb_groups::Model> {
        let (mut name, mut description, mut faqs) = (None, None, None);
        apply_mask(r.update_mask.as_ref(), "a knowledge group", |path| {
            match path {
                "name" => name = Some(r.name.trim().to_owned()),
                "description" => description = Some(r.description.clone()),
                "faqs" => faqs = Some(r.faqs.clone()),
                "group_id" => {}
                _ => return false,
            }
            true
        })?;
        let mut v = Violations::new();
        if let Some(name) = &name {
            v.text("name", name, true, 200);
        }
        if let Some(description) = &description {
            v.text("description", description, false, 2_000);
        }
        let faqs = faqs.map(|faqs| checked_faqs(&mut v, faqs));
        v.finish()?;
        let txn = crate::store::begin_write(&self.db).await?;
        // Under the account lock: an apply running meanwhile sees the group before or after, never half.
        accounts::store::lock(&txn, account_id).await?;
        let mut row = find(&txn, account_id, &r.group_id).await?;
        if let Some(name) = name {
            row.name = name;
        }
        if let Some(description) = description {
            row.description = description;
        }
        if let Some(faqs) = faqs {
            row.faqs = to_json_text(&faqs);
        }
        row.updated_at = self.clock.now();
        row.clone().into_active_model().reset_all().update(&txn).await?;
        txn.commit().await?;
        Ok(row)
    }

    /// Adds the group's FAQs to the agent in one transaction (under the account lock, so two applies of the
    /// same group cannot both add a FAQ).
    async fn apply(&self, account_id: &AccountId, r: ApplyKbGroupRequest) -> ApiResult<(String, Applied)> {
        if r.agent_id.is_empty() == r.campaign_id.is_empty() {
            return Err(ApiError::invalid(vec![
                FieldViolation::new("agent_id", "give exactly one of agent_id and campaign_id"),
                FieldViolation::new("campaign_id", "give exactly one of agent_id and campaign_id"),
            ]));
        }
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        accounts::store::lock(&txn, account_id).await?;
        let group = find(&txn, account_id, &r.group_id).await?;
        let agent_id = if r.campaign_id.is_empty() {
            agents::find(&txn, account_id, &r.agent_id).await?.id
        } else {
            campaigns::agent_of(&txn, account_id, &r.campaign_id).await?
        };
        // One FAQ per question; when the agent has several, the one this group applied counts.
        let mut existing: HashMap<String, agent_faqs::Model> = HashMap::new();
        for faq in agent_faqs::Entity::find()
            .filter(agent_faqs::Column::AgentId.eq(&agent_id))
            .all(&txn)
            .await?
        {
            let ours = faq.group_id.as_deref() == Some(group.id.as_str());
            let key = faq.question.to_lowercase();
            if ours || !existing.contains_key(&key) {
                existing.insert(key, faq);
            }
        }
        let mut applied = Applied::default();
        let mut new_rows = Vec::new();
        for faq in from_json_text::<Vec<StoredFaq>>(&group.faqs) {
            match existing.get(&faq.question.to_lowercase()) {
                None => {
                    applied.added += 1;
                    new_rows.push(faqs::new_faq(
                        account_id,
                        &agent_id,
                        &faq.question,
                        &faq.answer,
                        Some(group.id.to_string()),
                        now,
                    ));
                }
                // The agent's own FAQ (or another group's) for this question is left as it is.
                Some(current)
                    if current.group_id.as_deref() != Some(group.id.as_str()) || current.answer == faq.answer =>
                {
                    applied.unchanged += 1;
                }
                Some(current) => {
                    applied.updated += 1;
                    let mut changed = current.clone();
                    changed.answer = faq.answer;
                    changed.updated_at = now;
                    changed.into_active_model().reset_all().update(&txn).await?;
                }
            }
        }
        if !new_rows.is_empty() {
            agent_faqs::Entity::insert_many(
                new_rows
                    .into_iter()
                    .map(|f| agent_faqs::ActiveModel::from(f).reset_all()),
            )
            .exec_without_returning(&txn)
            .await?;
        }
        txn.commit().await?;
        Ok((agent_id.into(), applied))
    }
}

#[tonic::async_trait]
impl KbGroups for KbGroupsService {
    async fn list_kb_groups(&self, request: Request<ListKbGroupsRequest>) -> Result<Response<KbGroupList>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let page = Page::checked(r.limit, &r.cursor, crate::ids::Kind::KbGroup.prefix())?;
        let select = kb_groups::Entity::find().filter(kb_groups::Column::AccountId.eq(&account_id));
        let (rows, more) = paging::fetch(
            &self.db,
            select,
            &page,
            kb_groups::Column::CreatedAt,
            kb_groups::Column::Id,
        )
        .await
        .map_err(ApiError::from)?;
        let (kb_groups, next_cursor) = paging::render(&rows, more, |g| (g.created_at, g.id.as_str()), message);
        Ok(Response::new(KbGroupList {
            success: true,
            next_cursor,
            kb_groups,
        }))
    }

    async fn create_kb_group(&self, request: Request<CreateKbGroupRequest>) -> Result<Response<KbGroupAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(answer(&self.create(&account_id, request.into_inner()).await?))
    }

    async fn get_kb_group(&self, request: Request<GetKbGroupRequest>) -> Result<Response<KbGroupAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(answer(&find(&self.db, &account_id, &request.get_ref().group_id).await?))
    }

    async fn update_kb_group(&self, request: Request<UpdateKbGroupRequest>) -> Result<Response<KbGroupAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(answer(&self.update(&account_id, request.into_inner()).await?))
    }

    async fn delete_kb_group(&self, request: Request<DeleteKbGroupRequest>) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let group = find(&self.db, &account_id, &request.get_ref().group_id).await?;
        kb_groups::Entity::delete_by_id(group.id.clone())
            .exec(&self.db)
            .await
            .map_err(ApiError::from)?;
        Ok(deleted(group.id.into()))
    }

    async fn apply_kb_group(&self, request: Request<ApplyKbGroupRequest>) -> Result<Response<AppliedKbGroup>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let group_id = r.group_id.clone();
        let (agent_id, applied) = self.apply(&account_id, r).await?;
        Ok(Response::new(AppliedKbGroup {
            success: true,
            group_id,
            agent_id,
            added: applied.added,
            updated: applied.updated,
            unchanged: applied.unchanged,
        }))
    }
}
