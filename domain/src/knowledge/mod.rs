//! Knowledge an agent answers from beyond its own FAQs: knowledge sources imported from the web or uploaded (the
//! `/v1/kb-sources` service and the import job), their FAQs, and the retrieval index that ranks every FAQ
//! an agent has for a question.

pub mod agent_faqs;
pub mod attachments;
pub mod embeddings;
pub mod estimate;
pub mod import;
pub mod retrieval;
pub mod service;
pub mod source_faqs;
pub mod sources;
