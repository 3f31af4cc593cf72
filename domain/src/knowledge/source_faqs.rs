//! The FAQs of a knowledge source: made by its import (a section becomes a FAQ, `position` keeps their
//! order) and answered from by every agent the source is attached to. Deleting the source deletes them
//! (foreign key, ON DELETE CASCADE). A writer moves `updated_at` whenever it changes a FAQ's text: that is
//! how the retrieval index sees the change.

use frontdesk_api::v1::Faq;

use crate::{store::entities::source_faqs, timestamps};

pub fn faq_message(m: &source_faqs::Model) -> Faq {
    Faq {
        id: m.id.clone(),
        agent_id: String::new(),
        question: m.question.clone(),
        answer: m.answer.clone(),
        group_id: None,
        source_id: Some(m.source_id.to_string()),
        created_at: Some(timestamps::to_proto(m.created_at)),
        updated_at: Some(timestamps::to_proto(m.updated_at)),
    }
}
