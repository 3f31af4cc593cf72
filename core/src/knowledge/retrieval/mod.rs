//! The retrieval index: given an agent and a question, the FAQs that answer it best, with scores. It
//! searches the agent's own FAQs (applied knowledge groups included) and those of its knowledge sources
//! (`scope`), over an index kept in step with them by the search itself (`index`), analysed in the agent's
//! language (`analyzer`) and ranked by BM25F with the question weighted up (`lexical`, `bm25`).
//!
//! A search is: reconcile the index, score every FAQ that shares a term with the query, keep the best
//! `limit` (ties broken by FAQ id, so both databases rank alike), read those FAQs. Scoring yields every
//! candidate with its score rather than a cut list, so that a dense (embedding) score can later be fused
//! with it before the cut.

mod analyzer;
mod bm25;
mod index;
mod lexical;
mod scope;

use std::cmp::Ordering;

use frontdesk_api::v1::Faq;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};

use self::{lexical::Scored, scope::Owner};
use crate::{
    agents::faqs::faq_message,
    error::ApiResult,
    knowledge::source_faqs,
    store::entities::{agent_faqs, agents, source_faqs as source_faq_rows},
};

/// A FAQ found for a query, and how well it matched (higher is better; comparable within one search).
pub struct Hit {
    pub faq: Faq,
    pub score: f64,
}

/// The `limit` best FAQs of `agent` (the account's own, found already) for `query`, best first.
pub async fn search(db: &DatabaseConnection, agent: &agents::Model, query: &str, limit: usize) -> ApiResult<Vec<Hit>> {
    let scope = scope::Scope::of(db, agent).await?;
    index::reconcile(db, &scope).await?;
    let mut scored = lexical::scores(db, &scope, query).await?;
    scored.sort_by(best_first);
    scored.truncate(limit);
    faqs(db, &scope.account_id, scored).await
}

/// Higher score first; equal scores by FAQ id.
fn best_first(a: &Scored, b: &Scored) -> Ordering {
    b.score.total_cmp(&a.score).then_with(|| a.faq_id.cmp(&b.faq_id))
}

/// The scored FAQs read, in the order given (one deleted meanwhile is left out).
async fn faqs(db: &DatabaseConnection, account_id: &str, scored: Vec<Scored>) -> ApiResult<Vec<Hit>> {
    let ids = |agent: bool| {
        scored
            .iter()
            .filter(move |s| matches!(s.owner, Owner::Agent(_)) == agent)
            .map(|s| s.faq_id.clone())
            .collect::<Vec<_>>()
    };
    let own = agent_faqs::Entity::find()
        .filter(agent_faqs::Column::AccountId.eq(account_id))
        .filter(agent_faqs::Column::Id.is_in(ids(true)))
        .all(db)
        .await?;
    let from_sources = source_faq_rows::Entity::find()
        .filter(source_faq_rows::Column::AccountId.eq(account_id))
        .filter(source_faq_rows::Column::Id.is_in(ids(false)))
        .all(db)
        .await?;
    let faq = |id: &str| {
        own.iter()
            .find(|f| f.id == id)
            .map(faq_message)
            .or_else(|| from_sources.iter().find(|f| f.id == id).map(source_faqs::faq_message))
    };
    Ok(scored
        .iter()
        .filter_map(|s| faq(&s.faq_id).map(|faq| Hit { faq, score: s.score }))
        .collect())
}
