//! The knowledge passages a provider reads for a customer's messages: the agent's FAQs that the retrieval
//! index ranks best for them, with their scores, closeness in meaning and how much of the question's subject
//! each says. A burst of messages is searched whole and message by message ("Hi" / "I have a question" /
//! "When are you open?": the question is in one of them), each FAQ keeping its best search; each message's
//! own passages are kept too, for a burst that asks two things ("When are you open?" / "Can I park?").

use std::ops::Range;

use sea_orm::DatabaseConnection;

use super::provider::{Passage, Question};
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

/// What the knowledge holds for a burst of messages.
pub struct Found {
    /// The best passages for the burst, best first: each FAQ scored by its best search.
    pub passages: Vec<Passage>,
    /// The latest messages of a burst of several, oldest first, each with the passages found for it alone.
    pub questions: Vec<Question>,
}

/// A passage with where its answer was closest to the query that found it.
#[derive(Clone)]
struct Ranked {
    passage: Passage,
    closest: Option<Range<usize>>,
    query: String,
}

/// The best passages of `agent`'s knowledge for the messages `texts` (oldest first).
pub async fn for_messages(
    retrieval: &Retrieval,
    db: &DatabaseConnection,
    agent: &agents::Model,
    texts: &[&str],
) -> ApiResult<Found> {
    let mut best = search(retrieval, db, agent, &texts.join("\n")).await?;
    let latest = if texts.len() > 1 {
        &texts[texts.len().saturating_sub(BURST_SEARCHES)..]
    } else {
        &[]
    };
    let mut questions = Vec::with_capacity(latest.len());
    for text in latest {
        let found = search(retrieval, db, agent, text).await?;
        for hit in &found {
            match best.iter_mut().find(|seen| seen.passage.faq_id == hit.passage.faq_id) {
                Some(seen) if seen.passage.score >= hit.passage.score => {}
                Some(seen) => *seen = hit.clone(),
                None => best.push(hit.clone()),
            }
        }
        questions.push(Question {
            text: (*text).to_owned(),
            passages: with_excerpts(found, &agent.language),
        });
    }
    Ok(Found {
        passages: with_excerpts(best, &agent.language),
        questions,
    })
}

/// One search of the knowledge for `text` (its words once greetings and thanks are taken out).
async fn search(
    retrieval: &Retrieval,
    db: &DatabaseConnection,
    agent: &agents::Model,
    text: &str,
) -> ApiResult<Vec<Ranked>> {
    let query: String = super::intent::read(text).question.chars().take(QUERY_CHARS).collect();
    if query.trim().is_empty() {
        return Ok(Vec::new());
    }
    // Without a model the index scales the words' score by their weight; the provider reads it whole.
    let scale = if retrieval.embedder().is_some() {
        1.0
    } else {
        1.0 / (1.0 - retrieval.dense_weight()).max(1e-9)
    };
    let hits = retrieval.search(db, agent, &query, PASSAGES).await?;
    Ok(hits
        .into_iter()
        .map(|hit| Ranked {
            passage: Passage {
                score: (hit.score * scale).min(1.0),
                cosine: hit.cosine.map(f64::from),
                coverage: hit.coverage,
                excerpt: String::new(),
                faq_id: hit.faq.id,
                question: hit.faq.question,
                answer: hit.faq.answer,
            },
            closest: hit.closest,
            query: query.clone(),
        })
        .collect())
}

/// The best `PASSAGES` of `ranked`, best first, each with its excerpt (made for those kept only).
fn with_excerpts(mut ranked: Vec<Ranked>, language: &str) -> Vec<Passage> {
    ranked.sort_by(|a, b| b.passage.score.total_cmp(&a.passage.score));
    ranked.truncate(PASSAGES);
    ranked
        .into_iter()
        .map(
            |Ranked {
                 mut passage,
                 closest,
                 query,
             }| {
                passage.excerpt = excerpt_of(&passage.answer, closest, language, &query);
                passage
            },
        )
        .collect()
}
