//! With a model provider, an imported section becomes the question-answer pairs a model writes from it (the
//! questions customers would ask, answered from the section alone) instead of one FAQ of heading and text. The
//! writer is the AI room's, handed in at start-up: knowledge does not reach up to the models itself. A section
//! the model gives no usable pairs for stays one FAQ. The import costs the same either way.
//!
//! The model is paid by the operator, so a page's price is held before each of its sections is sent (the
//! hold grows with the sections asked, `progress::cost_milli` of their characters); the page's record
//! settles it. When a hold fails the model is asked no more, and the page is then refused for want of
//! credits as it would be without a model: at 0 credits no section reaches the model.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::DatabaseConnection;

use super::{
    extract::{Extracted, Section},
    progress::cost_milli,
};
use crate::{access::AccountId, accounts::holds};

/// The most pairs kept of one section.
pub const MAX_PAIRS: usize = 5;
const MAX_QUESTION_CHARS: usize = 300;
const MAX_ANSWER_CHARS: usize = 2_000;

#[async_trait::async_trait]
pub trait PairWriter: Send + Sync {
    /// Whether a model writes pairs for `account_id` (it has a model provider, which costs the operator).
    async fn writes_for(&self, account_id: &AccountId) -> bool;

    /// How long writing one section's pairs may take.
    fn time_limit(&self) -> Duration;

    /// The pairs a model of `account_id` writes from a section; `None` when the account has no model provider
    /// or the model gave none.
    async fn pairs(&self, account_id: &AccountId, heading: &str, text: &str) -> Option<Vec<(String, String)>>;
}

/// The key of a page's hold.
pub fn hold_key(page_id: &str) -> String {
    format!("import:{page_id}")
}

/// `extracted` with each section replaced by its written pairs where the writer gives some, each section's
/// price held (under `hold_key(page_id)`) before it is sent.
pub async fn rewrite(
    writer: &dyn PairWriter,
    db: &DatabaseConnection,
    account_id: &AccountId,
    page_id: &str,
    extracted: Extracted,
    now: DateTime<Utc>,
) -> Extracted {
    if !writer.writes_for(account_id).await {
        return extracted;
    }
    let key = hold_key(page_id);
    let mut asked_chars = 0;
    let mut asking = true;
    let mut sections = Vec::with_capacity(extracted.sections.len());
    for section in extracted.sections {
        asked_chars += section.question.chars().count() + section.answer.chars().count();
        if asking {
            let hold = holds::Hold {
                account_id,
                key: &key,
                amount_milli: cost_milli(asked_chars),
                purpose: holds::Purpose::Import,
                lasts: writer.time_limit(),
                at_once: None,
            };
            if let Err(err) = holds::hold(db, &hold, now).await {
                tracing::info!(account = %account_id, page = page_id, reason = err.reason.as_str(), "an import's section could not be held; the model is asked no more for this page");
                asking = false;
            }
        }
        let written = if asking {
            writer.pairs(account_id, &section.question, &section.answer).await
        } else {
            None
        };
        let usable: Vec<Section> = written
            .unwrap_or_default()
            .into_iter()
            .map(|(question, answer)| Section {
                question: question.trim().chars().take(MAX_QUESTION_CHARS).collect(),
                answer: answer.trim().chars().take(MAX_ANSWER_CHARS).collect(),
            })
            .filter(|pair| !pair.question.is_empty() && !pair.answer.is_empty())
            .take(MAX_PAIRS)
            .collect();
        if usable.is_empty() {
            sections.push(section);
        } else {
            sections.extend(usable);
        }
    }
    Extracted {
        sections,
        characters: extracted.characters,
    }
}
