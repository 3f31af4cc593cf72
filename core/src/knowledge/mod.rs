//! Knowledge an agent answers from beyond its own FAQs: the FAQs of knowledge sources, and the retrieval
//! index that ranks every FAQ an agent has for a question.

pub mod retrieval;
pub mod source_faqs;
