//! With a model provider, an imported section becomes the question-answer pairs a model writes from it (the
//! questions customers would ask, answered from the section alone) instead of one FAQ of heading and text. The
//! writer is the AI room's, handed in at start-up: knowledge does not reach up to the models itself. A section
//! the model gives no usable pairs for stays one FAQ. The import costs the same either way.

use super::extract::{Extracted, Section};
use crate::access::AccountId;

/// The most pairs kept of one section.
pub const MAX_PAIRS: usize = 5;
const MAX_QUESTION_CHARS: usize = 300;
const MAX_ANSWER_CHARS: usize = 2_000;

#[async_trait::async_trait]
pub trait PairWriter: Send + Sync {
    /// The pairs a model of `account_id` writes from a section; `None` when the account has no model provider
    /// or the model gave none.
    async fn pairs(&self, account_id: &AccountId, heading: &str, text: &str) -> Option<Vec<(String, String)>>;
}

/// `extracted` with each section replaced by its written pairs where the writer gives some.
pub async fn rewrite(writer: &dyn PairWriter, account_id: &AccountId, extracted: Extracted) -> Extracted {
    let mut sections = Vec::with_capacity(extracted.sections.len());
    for section in extracted.sections {
        let written = writer.pairs(account_id, &section.question, &section.answer).await;
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
