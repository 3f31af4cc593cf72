//! An agent's own FAQ as the API shows it, in a list of the agent's FAQs and among search results.

use frontdesk_api::v1::Faq;

use crate::{store::entities::agent_faqs, timestamps};

pub fn faq_message(m: &agent_faqs::Model) -> Faq {
    Faq {
        id: m.id.to_string(),
        agent_id: m.agent_id.to_string(),
        question: m.question.clone(),
        answer: m.answer.clone(),
        group_id: m.group_id.as_ref().map(String::from),
        source_id: None,
        created_at: Some(timestamps::to_proto(m.created_at)),
        updated_at: Some(timestamps::to_proto(m.updated_at)),
    }
}
