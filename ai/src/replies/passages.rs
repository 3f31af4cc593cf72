//! The knowledge passages a provider reads for a customer's messages: the agent's FAQs that the retrieval
//! index ranks best for them, with their scores, closeness in meaning and how much of the question's subject
//! each says. A burst of messages is searched whole and message by message ("Hi" / "I have a question" /
//! "When are you open?": the question is in one of them), each FAQ keeping its best search.

use std::ops::Range;

use sea_orm::DatabaseConnection;

use super::provider::Passage;
use crate::{
    error::ApiResult,
    knowledge::retrieval::{Retrieval, excerpt_of},
    store::entities::agents,
};

/// FAQs found for the question that a provider sees.
pub const PASSAGES: usize = 5;
/// The most of the question the knowledge is searched with (a 4,000-character message is searched by its
/// beginning).
const QUERY_CHARS: usize = 2_000;
/// The latest messages of a burst that are searched one by one as well as together.
const BURST_SEARCHES: usize = 5;

/// The best passages of `agent`'s knowledge for the messages `texts` (oldest first), best first.
pub async fn for_messages(
    retrieval: &Retrieval,
    db: &DatabaseConnection,
    agent: &agents::Model,
    texts: &[&str],
) -> ApiResult<Vec<Passage>> {
    // Without a model the index scales the words' score by their weight; the provider reads it whole.
    let scale = if retrieval.embedder().is_some() {
        1.0
    } else {
        1.0 / (1.0 - retrieval.dense_weight()).max(1e-9)
    };
    let question = texts.join("\n");
    let whole = std::iter::once(question.as_str());
    let each = texts
        .iter()
        .rev()
        .take(BURST_SEARCHES)
        .copied()
        .filter(|_| texts.len() > 1);
    // Each FAQ's best search: its passage, and where its answer was closest and to which query.
    let mut found: Vec<(Passage, Option<Range<usize>>, String)> = Vec::new();
    for text in whole.chain(each) {
        let query: String = super::intent::read(text).question.chars().take(QUERY_CHARS).collect();
        if query.trim().is_empty() {
            continue;
        }
        for hit in retrieval.search(db, agent, &query, PASSAGES).await? {
            let passage = Passage {
                score: (hit.score * scale).min(1.0),
                cosine: hit.cosine.map(f64::from),
                coverage: hit.coverage,
                excerpt: String::new(),
                faq_id: hit.faq.id,
                question: hit.faq.question,
                answer: hit.faq.answer,
            };
            let best = (passage, hit.closest, query.clone());
            match found.iter_mut().find(|(p, _, _)| p.faq_id == best.0.faq_id) {
                Some(seen) if seen.0.score >= best.0.score => {}
                Some(seen) => *seen = best,
                None => found.push(best),
            }
        }
    }
    found.sort_by(|a, b| b.0.score.total_cmp(&a.0.score));
    found.truncate(PASSAGES);
    // The excerpts of those kept only.
    let found = found
        .into_iter()
        .map(|(mut passage, closest, query)| {
            passage.excerpt = excerpt_of(&passage.answer, closest, &agent.language, &query);
            passage
        })
        .collect();
    Ok(found)
}
