//! `POST /v1/agents/{agentId}/search`: the retrieval index, exposed for operators and tests.

use frontdesk_api::v1::{SearchFaqsAnswer, SearchFaqsRequest, SearchResult};
use sea_orm::DatabaseConnection;

use crate::knowledge::retrieval::Retrieval;

use super::find;
use crate::{access::AccountId, error::ApiResult, validate::Violations};

/// Longest query, in characters (a FAQ question's own bound).
const MAX_QUERY: usize = super::faqs::MAX_QUESTION;
const DEFAULT_LIMIT: i32 = 5;
const MAX_LIMIT: i32 = 50;

pub async fn search(
    db: &DatabaseConnection,
    retrieval: &Retrieval,
    account_id: &AccountId,
    r: SearchFaqsRequest,
) -> ApiResult<SearchFaqsAnswer> {
    let mut v = Violations::new();
    v.text("query", &r.query, true, MAX_QUERY);
    let limit = r.limit.unwrap_or(DEFAULT_LIMIT);
    v.check(
        (1..=MAX_LIMIT).contains(&limit),
        "limit",
        format!("must be between 1 and {MAX_LIMIT}"),
    );
    v.finish()?;
    let agent = find(db, account_id, &r.agent_id).await?;
    let hits = retrieval
        .search(db, &agent, &r.query, usize::try_from(limit).unwrap_or_default())
        .await?;
    Ok(SearchFaqsAnswer {
        success: true,
        results: hits
            .into_iter()
            .map(|hit| SearchResult {
                faq: Some(hit.faq),
                score: hit.score,
            })
            .collect(),
    })
}
