//! Knowledge gaps: the questions an agent handed off for want of an answer (`no_confident_answer`, or a
//! model's own `handoff_to_human`), one per conversation, grouped by meaning as they are asked. A question
//! joins the open gap of its agent it is most like (its vector at least `JOIN_COSINE` close to the gap's mean
//! vector; without a model, its subject terms sharing at least `JOIN_TERMS` with the gap's), else starts one;
//! a gap's question is its most central one (the closest to its mean). Recorded in the reply's transaction,
//! so a handoff and its question are stored together. `service` lists, resolves and dismisses them; the daily
//! summary names the day's largest (`top_between`).

pub mod service;

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect, sea_query::Expr,
};

use crate::{
    knowledge::embeddings::{self, dot},
    resource_id::GapId,
    store::{
        entities::{conversations, gap_questions, knowledge_gaps},
        from_json_text, to_json_text,
    },
};

/// A question joins a gap whose mean vector is at least this close to its own.
const JOIN_COSINE: f32 = 0.6;
/// Without a model, a question joins a gap whose terms it shares this much of (Jaccard).
const JOIN_TERMS: f64 = 0.5;
/// The open gaps of an agent a new question is compared with: the most recently joined.
const CANDIDATES: u64 = 500;
/// The most of a question kept.
const QUESTION_CHARS: usize = 500;

/// A handed-off question and what groups it.
pub struct Asked {
    pub question: String,
    pub vector: Option<Vec<f32>>,
    pub terms: Vec<String>,
}

/// Records the conversation's handed-off question in its agent's gaps, unless the conversation has one
/// already; in the caller's transaction.
pub async fn record(
    txn: &impl ConnectionTrait,
    conversation: &conversations::Model,
    asked: &Asked,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let question: String = asked.question.trim().chars().take(QUESTION_CHARS).collect();
    if question.is_empty()
        || gap_questions::Entity::find_by_id(conversation.id.as_str())
            .one(txn)
            .await?
            .is_some()
    {
        return Ok(());
    }
    let open = knowledge_gaps::Entity::find()
        .filter(knowledge_gaps::Column::AgentId.eq(conversation.agent_id.as_str()))
        .filter(knowledge_gaps::Column::Status.eq(knowledge_gaps::GapStatus::Open))
        .order_by_desc(knowledge_gaps::Column::UpdatedAt)
        .limit(CANDIDATES)
        .all(txn)
        .await?;
    let joined = match open
        .iter()
        .filter_map(|gap| Some((gap, likeness(gap, asked)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
    {
        Some((gap, _)) => join(txn, gap, &question, asked, now).await?,
        None => start(txn, conversation, &question, asked, now).await?,
    };
    let row = gap_questions::Model {
        conversation_id: conversation.id.clone(),
        account_id: conversation.account_id.clone(),
        agent_id: conversation.agent_id.clone().into(),
        gap_id: joined,
        question,
        asked_at: now,
    };
    gap_questions::Entity::insert(gap_questions::ActiveModel::from(row))
        .exec_without_returning(txn)
        .await?;
    Ok(())
}

/// Whose gaps are counted.
#[derive(Clone, Copy)]
pub enum Whose<'a> {
    Agent(&'a str),
    Account(&'a crate::access::AccountId),
}

/// An open gap's questions asked in a window: how many, the first and the latest.
pub struct Counted {
    pub gap_id: GapId,
    pub count: i64,
    pub first_asked_at: DateTime<Utc>,
    pub last_asked_at: DateTime<Utc>,
}

/// The open gaps (`whose`) with the most questions asked in `[start, end)`, at most `limit`, largest first.
pub async fn largest(
    db: &impl ConnectionTrait,
    whose: Whose<'_>,
    (start, end): (DateTime<Utc>, DateTime<Utc>),
    limit: u64,
) -> Result<Vec<Counted>, DbErr> {
    use sea_orm::sea_query::{ExprTrait, Query};
    let (question_owner, gap_owner, owner) = match whose {
        Whose::Agent(agent_id) => (
            gap_questions::Column::AgentId,
            knowledge_gaps::Column::AgentId,
            agent_id.to_owned(),
        ),
        Whose::Account(account_id) => (
            gap_questions::Column::AccountId,
            knowledge_gaps::Column::AccountId,
            account_id.to_string(),
        ),
    };
    let open = Query::select()
        .column(knowledge_gaps::Column::Id)
        .from(knowledge_gaps::Entity)
        .and_where(gap_owner.eq(owner.as_str()))
        .and_where(knowledge_gaps::Column::Status.eq(knowledge_gaps::GapStatus::Open))
        .to_owned();
    let rows: Vec<(GapId, i64, DateTime<Utc>, DateTime<Utc>)> = gap_questions::Entity::find()
        .select_only()
        .column(gap_questions::Column::GapId)
        .column_as(Expr::col(gap_questions::Column::ConversationId).count(), "n")
        .column_as(Expr::col(gap_questions::Column::AskedAt).min(), "first")
        .column_as(Expr::col(gap_questions::Column::AskedAt).max(), "last")
        .filter(question_owner.eq(owner.as_str()))
        .filter(gap_questions::Column::AskedAt.gte(start))
        .filter(gap_questions::Column::AskedAt.lt(end))
        .filter(gap_questions::Column::GapId.in_subquery(open))
        .group_by(gap_questions::Column::GapId)
        .order_by_desc(Expr::col(gap_questions::Column::ConversationId).count())
        .order_by_asc(gap_questions::Column::GapId)
        .limit(limit)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(gap_id, count, first_asked_at, last_asked_at)| Counted {
            gap_id,
            count,
            first_asked_at,
            last_asked_at,
        })
        .collect())
}

/// The gaps of `counted`, in its order (one closed meanwhile left out), read in one query.
pub async fn gaps_of(
    db: &impl ConnectionTrait,
    counted: Vec<Counted>,
) -> Result<Vec<(knowledge_gaps::Model, Counted)>, DbErr> {
    let ids: Vec<&str> = counted.iter().map(|c| c.gap_id.as_str()).collect();
    let mut gaps: std::collections::HashMap<GapId, knowledge_gaps::Model> = knowledge_gaps::Entity::find()
        .filter(knowledge_gaps::Column::Id.is_in(ids))
        .all(db)
        .await?
        .into_iter()
        .map(|gap| (gap.id.clone(), gap))
        .collect();
    Ok(counted
        .into_iter()
        .filter_map(|c| Some((gaps.remove(&c.gap_id)?, c)))
        .collect())
}

/// The account's open gaps with the most questions asked in `[start, end)`: their questions and those
/// counts, at most `limit`, largest first.
pub async fn top_between(
    db: &impl ConnectionTrait,
    account_id: &crate::access::AccountId,
    window: (DateTime<Utc>, DateTime<Utc>),
    limit: u64,
) -> Result<Vec<(String, i64)>, DbErr> {
    let counted = largest(db, Whose::Account(account_id), window, limit).await?;
    Ok(gaps_of(db, counted)
        .await?
        .into_iter()
        .map(|(gap, c)| (gap.question, c.count))
        .collect())
}

/// How like the gap the question is, when like enough to join it.
fn likeness(gap: &knowledge_gaps::Model, asked: &Asked) -> Option<f64> {
    let centroid = gap.centroid.as_deref().and_then(embeddings::from_bytes);
    match (&asked.vector, centroid) {
        (Some(vector), Some(centroid)) if vector.len() == centroid.len() => {
            let cosine = dot(vector, &unit(&centroid));
            (cosine >= JOIN_COSINE).then_some(f64::from(cosine))
        }
        _ => {
            let terms: Vec<String> = from_json_text(&gap.terms);
            let shared = asked.terms.iter().filter(|t| terms.contains(t)).count();
            let all = asked.terms.len() + terms.len() - shared;
            let jaccard = if all == 0 { 0.0 } else { shared as f64 / all as f64 };
            (jaccard >= JOIN_TERMS).then_some(jaccard)
        }
    }
}

/// Adds the question to the gap: its mean moves, and the question becomes the gap's when it is the closer
/// to the new mean. The gap's id.
async fn join(
    txn: &impl ConnectionTrait,
    gap: &knowledge_gaps::Model,
    question: &str,
    asked: &Asked,
    now: DateTime<Utc>,
) -> Result<GapId, DbErr> {
    let mut update = knowledge_gaps::Entity::update_many()
        .col_expr(knowledge_gaps::Column::Members, Expr::value(gap.members + 1))
        .col_expr(knowledge_gaps::Column::UpdatedAt, Expr::value(now));
    let centroid = gap.centroid.as_deref().and_then(embeddings::from_bytes);
    if let (Some(vector), Some(centroid)) = (&asked.vector, centroid)
        && vector.len() == centroid.len()
    {
        let n = gap.members.max(1) as f32;
        let moved: Vec<f32> = centroid
            .iter()
            .zip(vector)
            .map(|(c, v)| (c * n + v) / (n + 1.0))
            .collect();
        let mean = unit(&moved);
        let held = gap.question_vector.as_deref().and_then(embeddings::from_bytes);
        let closer = held.is_none_or(|held| dot(vector, &mean) > dot(&held, &mean));
        update = update.col_expr(
            knowledge_gaps::Column::Centroid,
            Expr::value(embeddings::to_bytes(&moved)),
        );
        if closer {
            update = update
                .col_expr(knowledge_gaps::Column::Question, Expr::value(question))
                .col_expr(
                    knowledge_gaps::Column::QuestionVector,
                    Expr::value(embeddings::to_bytes(vector)),
                );
        }
    }
    update
        .filter(knowledge_gaps::Column::Id.eq(gap.id.as_str()))
        .exec(txn)
        .await?;
    Ok(gap.id.clone())
}

/// A new gap of this one question; its id.
async fn start(
    txn: &impl ConnectionTrait,
    conversation: &conversations::Model,
    question: &str,
    asked: &Asked,
    now: DateTime<Utc>,
) -> Result<GapId, DbErr> {
    let gap = knowledge_gaps::Model {
        id: crate::ids::new_id(crate::ids::Kind::KnowledgeGap).into(),
        account_id: conversation.account_id.clone(),
        agent_id: conversation.agent_id.clone().into(),
        question: question.to_owned(),
        centroid: asked.vector.as_deref().map(embeddings::to_bytes),
        question_vector: asked.vector.as_deref().map(embeddings::to_bytes),
        members: 1,
        terms: to_json_text(&asked.terms),
        status: knowledge_gaps::GapStatus::Open,
        faq_id: String::new(),
        created_at: now,
        updated_at: now,
    };
    let id = gap.id.clone();
    knowledge_gaps::Entity::insert(knowledge_gaps::ActiveModel::from(gap))
        .exec_without_returning(txn)
        .await?;
    Ok(id)
}

/// `v` scaled to unit length (a mean of unit vectors is shorter).
fn unit(v: &[f32]) -> Vec<f32> {
    let norm = dot(v, v).sqrt();
    if norm == 0.0 {
        return v.to_vec();
    }
    v.iter().map(|x| x / norm).collect()
}
