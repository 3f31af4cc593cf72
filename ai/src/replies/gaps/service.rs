//! `GET /v1/agents/{agentId}/knowledge-gaps?days=` (the open gaps with questions in the window, largest
//! first, at most 50), `POST .../knowledge-gaps/{gapId}/resolve` (the FAQ that answers it, on the agent) and
//! `POST .../dismiss`. Another account's agent or gap is 404.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use frontdesk_api::v1::{
    CreateFaqRequest, DismissKnowledgeGapRequest, FaqAnswer, KnowledgeGap, KnowledgeGapAnswer, KnowledgeGapList,
    ListKnowledgeGapsRequest, ResolveKnowledgeGapRequest, knowledge_gaps_server,
};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    sea_query::Expr,
};
use tonic::{Request, Response, Status};

use crate::{
    access::AccountId,
    clock::Clock,
    error::{ApiError, ApiResult},
    platform_calls::account_of,
    resource_id::{AgentId, GapId},
    store::entities::{gap_questions, knowledge_gaps},
    timestamps,
};

const DEFAULT_DAYS: i32 = 30;
const MAX_DAYS: i32 = 90;
/// Gaps listed at most.
const LISTED: u64 = 50;
const EXAMPLES: usize = 5;
const CONVERSATIONS: u64 = 20;

pub struct KnowledgeGapsService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
}

impl KnowledgeGapsService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>) -> Self {
        Self { db, clock }
    }

    async fn list(&self, account_id: &AccountId, r: &ListKnowledgeGapsRequest) -> ApiResult<Vec<KnowledgeGap>> {
        let days = r.days.unwrap_or(DEFAULT_DAYS);
        if !(1..=MAX_DAYS).contains(&days) {
            return Err(ApiError::field("days", format!("must be between 1 and {MAX_DAYS}")));
        }
        let agent = crate::agents::find(&self.db, account_id, &r.agent_id).await?;
        let since = self.clock.now() - chrono::Duration::days(i64::from(days));
        // Until a day ahead: every question recorded so far counts, this very instant's too.
        let until = self.clock.now() + chrono::Duration::days(1);
        let counted = super::largest(&self.db, super::Whose::Agent(&agent.id), (since, until), LISTED).await?;
        let mut gaps = Vec::with_capacity(counted.len());
        for (gap, counted) in super::gaps_of(&self.db, counted).await? {
            gaps.push(render(&self.db, &gap, &counted, since).await?);
        }
        Ok(gaps)
    }

    /// The account's gap `gap` of the agent, open.
    async fn open_gap(
        &self,
        db: &impl ConnectionTrait,
        account_id: &AccountId,
        agent: &AgentId,
        gap: &GapId,
    ) -> ApiResult<knowledge_gaps::Model> {
        knowledge_gaps::Entity::find_by_id(gap.as_str().to_owned())
            .filter(knowledge_gaps::Column::AccountId.eq(account_id))
            .filter(knowledge_gaps::Column::AgentId.eq(agent.as_str()))
            .filter(knowledge_gaps::Column::Status.eq(knowledge_gaps::GapStatus::Open))
            .one(db)
            .await?
            .ok_or_else(|| ApiError::not_found("open knowledge gap"))
    }

    async fn resolve(&self, account_id: &AccountId, r: ResolveKnowledgeGapRequest) -> ApiResult<FaqAnswer> {
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        let gap = self
            .open_gap(&txn, account_id, &AgentId::new(&r.agent_id), &GapId::new(&r.gap_id))
            .await?;
        let question = if r.question.trim().is_empty() {
            gap.question.clone()
        } else {
            r.question
        };
        let faq = crate::agents::faqs::create(
            &txn,
            account_id,
            CreateFaqRequest {
                agent_id: r.agent_id,
                question,
                answer: r.answer,
            },
            now,
        )
        .await?;
        let faq_id = faq.faq.as_ref().map(|f| f.id.clone()).unwrap_or_default();
        close(&txn, &gap, knowledge_gaps::GapStatus::Resolved, &faq_id, now).await?;
        txn.commit().await?;
        Ok(faq)
    }

    async fn dismiss(&self, account_id: &AccountId, r: &DismissKnowledgeGapRequest) -> ApiResult<KnowledgeGap> {
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        let gap = self
            .open_gap(&txn, account_id, &AgentId::new(&r.agent_id), &GapId::new(&r.gap_id))
            .await?;
        close(&txn, &gap, knowledge_gaps::GapStatus::Dismissed, "", now).await?;
        // All its questions: none is older than the gap.
        use sea_orm::sea_query::ExprTrait;
        let since = gap.created_at;
        let (count, first, last): (i64, Option<DateTime<Utc>>, Option<DateTime<Utc>>) = gap_questions::Entity::find()
            .select_only()
            .column_as(Expr::col(gap_questions::Column::ConversationId).count(), "n")
            .column_as(Expr::col(gap_questions::Column::AskedAt).min(), "first")
            .column_as(Expr::col(gap_questions::Column::AskedAt).max(), "last")
            .filter(gap_questions::Column::GapId.eq(gap.id.as_str()))
            .into_tuple()
            .one(&txn)
            .await?
            .unwrap_or((0, None, None));
        let counted = super::Counted {
            gap_id: gap.id.clone(),
            count,
            first_asked_at: first.unwrap_or(since),
            last_asked_at: last.unwrap_or(since),
        };
        let shown = render(&txn, &gap, &counted, since).await?;
        txn.commit().await?;
        Ok(shown)
    }
}

/// Ends the gap `status` (`resolved`, naming its FAQ, or `dismissed`).
async fn close(
    db: &impl ConnectionTrait,
    gap: &knowledge_gaps::Model,
    status: knowledge_gaps::GapStatus,
    faq_id: &str,
    now: DateTime<Utc>,
) -> ApiResult<()> {
    knowledge_gaps::Entity::update_many()
        .col_expr(knowledge_gaps::Column::Status, Expr::value(status))
        .col_expr(knowledge_gaps::Column::FaqId, Expr::value(faq_id))
        .col_expr(knowledge_gaps::Column::UpdatedAt, Expr::value(now))
        .filter(knowledge_gaps::Column::Id.eq(gap.id.as_str()))
        .exec(db)
        .await?;
    Ok(())
}

/// The gap as the API shows it, with its questions asked since `since` (`counted`).
async fn render(
    db: &impl ConnectionTrait,
    gap: &knowledge_gaps::Model,
    counted: &super::Counted,
    since: DateTime<Utc>,
) -> ApiResult<KnowledgeGap> {
    let latest = gap_questions::Entity::find()
        .filter(gap_questions::Column::GapId.eq(gap.id.as_str()))
        .filter(gap_questions::Column::AskedAt.gte(since))
        .order_by_desc(gap_questions::Column::AskedAt)
        .limit(CONVERSATIONS)
        .all(db)
        .await?;
    let mut examples: Vec<String> = Vec::new();
    for question in latest.iter().map(|q| q.question.clone()) {
        if examples.len() < EXAMPLES && !examples.contains(&question) {
            examples.push(question);
        }
    }
    Ok(KnowledgeGap {
        id: gap.id.to_string(),
        question: gap.question.clone(),
        count: i32::try_from(counted.count).unwrap_or(i32::MAX),
        examples,
        conversation_ids: latest.iter().map(|q| q.conversation_id.to_string()).collect(),
        first_asked_at: Some(timestamps::to_proto(counted.first_asked_at)),
        last_asked_at: Some(timestamps::to_proto(counted.last_asked_at)),
    })
}

#[tonic::async_trait]
impl knowledge_gaps_server::KnowledgeGaps for KnowledgeGapsService {
    async fn list_knowledge_gaps(
        &self,
        request: Request<ListKnowledgeGapsRequest>,
    ) -> Result<Response<KnowledgeGapList>, Status> {
        let account_id = account_of(&request)?;
        let gaps = self.list(&account_id, request.get_ref()).await?;
        Ok(Response::new(KnowledgeGapList { success: true, gaps }))
    }

    async fn resolve_knowledge_gap(
        &self,
        request: Request<ResolveKnowledgeGapRequest>,
    ) -> Result<Response<FaqAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(self.resolve(&account_id, request.into_inner()).await?))
    }

    async fn dismiss_knowledge_gap(
        &self,
        request: Request<DismissKnowledgeGapRequest>,
    ) -> Result<Response<KnowledgeGapAnswer>, Status> {
        let account_id = account_of(&request)?;
        let gap = self.dismiss(&account_id, request.get_ref()).await?;
        Ok(Response::new(KnowledgeGapAnswer {
            success: true,
            gap: Some(gap),
        }))
    }
}
