//! FAQ vectors: made by the embedder from a FAQ's question with the start of its answer and with each
//! further passage of a long one (`memory::embedding_texts`), stored one after the other in one row with the
//! FAQ version they were made from (`faq_vectors`).
//!
//! Who makes them, so that every FAQ gets one without any FAQ writer having to remember:
//! - the import job, for its source's FAQs, while it reads the next pages and before the source is `ready`;
//! - a search whose scope holds a few FAQs without a current vector (an API create or edit, a small group
//!   applied): it makes them itself before ranking, so an edit is searchable at once by meaning too;
//! - for more than that (a large group applied, a model changed), the search enqueues the durable
//!   `faq_embed` job for the agent and ranks those FAQs lexically until the job has stored their vectors.
//!
//! Storing a vector moves its owner's version (trigger), so every replica's in-memory index takes it up.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QuerySelect, sea_query::OnConflict,
};
use serde::{Deserialize, Serialize};

use super::{memory::embedding_texts, scope::Owner};
use crate::{
    access::AccountId,
    jobs::{Handler, Job, NewJob, Outcome},
    knowledge::embeddings::{self, Embedder},
    store::entities::{agent_faqs, faq_vectors, source_faqs},
};

pub const KIND: &str = "faq_embed";
/// FAQs embedded and stored at once.
const EMBED_BATCH: usize = 16;
/// Texts in one padded batch of the model (of similar length: they pad little).
const EMBED_TEXTS: usize = 16;

/// A FAQ version to embed.
pub struct Pending {
    pub faq_id: String,
    pub owner: Owner,
    pub updated_at: DateTime<Utc>,
    pub texts: Vec<String>,
}

/// Embeds `pending` and stores the vectors, a batch at a time (each batch kept if a later one fails).
pub async fn embed_and_store(
    db: &impl ConnectionTrait,
    embedder: &Arc<dyn Embedder>,
    account_id: &AccountId,
    mut pending: Vec<Pending>,
) -> anyhow::Result<()> {
    // Similar lengths together: less padding.
    pending.sort_by_key(|p| p.texts.iter().map(String::len).sum::<usize>());
    for batch in pending.chunks(EMBED_BATCH) {
        let texts: Vec<String> = batch.iter().flat_map(|p| p.texts.iter().cloned()).collect();
        let model = Arc::clone(embedder);
        let mut vectors = tokio::task::spawn_blocking(move || embed_by_length(model.as_ref(), &texts))
            .await??
            .into_iter();
        let rows = batch.iter().map(|p| {
            let vector: Vec<f32> = vectors.by_ref().take(p.texts.len()).flatten().collect();
            let (agent_id, source_id) = p.owner.columns();
            let row = faq_vectors::Model {
                faq_id: p.faq_id.as_str().into(),
                model: embedder.name().to_owned(),
                account_id: account_id.clone(),
                agent_id: agent_id.map(Into::into),
                source_id: source_id.map(Into::into),
                faq_updated_at: p.updated_at,
                vector: embeddings::to_bytes(&vector),
            };
            faq_vectors::ActiveModel::from(row)
        });
        faq_vectors::Entity::insert_many(rows)
            .on_conflict(
                OnConflict::columns([faq_vectors::Column::FaqId, faq_vectors::Column::Model])
                    .update_columns([faq_vectors::Column::FaqUpdatedAt, faq_vectors::Column::Vector])
                    .to_owned(),
            )
            .exec_without_returning(db)
            .await?;
    }
    Ok(())
}

/// The vectors of `texts`, in their order, made in padded batches of texts of similar length (a FAQ's lead
/// and its passages differ in length).
fn embed_by_length(model: &dyn Embedder, texts: &[String]) -> anyhow::Result<Vec<Vec<f32>>> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let mut vectors = vec![Vec::new(); texts.len()];
    for chunk in order.chunks(EMBED_TEXTS) {
        let batch: Vec<&str> = chunk.iter().map(|&i| texts[i].as_str()).collect();
        for (&i, vector) in chunk.iter().zip(model.embed(&batch)?) {
            vectors[i] = vector;
        }
    }
    Ok(vectors)
}

/// How many of the FAQs lacking a vector `embed_owner` embeds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Take {
    All,
    /// Whole batches only: while an import still adds FAQs, a page's few sections wait for the next ones
    /// rather than make a small batch of their own.
    WholeBatches,
}

/// Embeds the FAQs of `owner` without a current vector (all, or as many as fill whole batches), and drops
/// the vectors of its deleted FAQs. Returns how many it embedded.
pub async fn embed_owner(
    db: &DatabaseConnection,
    embedder: &Arc<dyn Embedder>,
    account_id: &AccountId,
    owner: &Owner,
    take: Take,
) -> anyhow::Result<usize> {
    let faqs: Vec<(String, String, String, DateTime<Utc>)> = match owner {
        Owner::Agent(agent) => {
            agent_faqs::Entity::find()
                .select_only()
                .columns([
                    agent_faqs::Column::Id,
                    agent_faqs::Column::Question,
                    agent_faqs::Column::Answer,
                    agent_faqs::Column::UpdatedAt,
                ])
                .filter(agent_faqs::Column::AccountId.eq(account_id))
                .filter(agent_faqs::Column::AgentId.eq(agent))
                .into_tuple()
                .all(db)
                .await?
        }
        Owner::Source(source) => {
            source_faqs::Entity::find()
                .select_only()
                .columns([
                    source_faqs::Column::Id,
                    source_faqs::Column::Question,
                    source_faqs::Column::Answer,
                    source_faqs::Column::UpdatedAt,
                ])
                .filter(source_faqs::Column::AccountId.eq(account_id))
                .filter(source_faqs::Column::SourceId.eq(source))
                .into_tuple()
                .all(db)
                .await?
        }
    };
    let owned = match owner {
        Owner::Agent(agent) => faq_vectors::Column::AgentId.eq(agent),
        Owner::Source(source) => faq_vectors::Column::SourceId.eq(source),
    };
    let stored: std::collections::HashMap<String, DateTime<Utc>> = faq_vectors::Entity::find()
        .select_only()
        .columns([faq_vectors::Column::FaqId, faq_vectors::Column::FaqUpdatedAt])
        .filter(faq_vectors::Column::Model.eq(embedder.name()))
        .filter(owned.clone())
        .into_tuple::<(String, DateTime<Utc>)>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    let current: std::collections::HashSet<&str> = faqs.iter().map(|f| f.0.as_str()).collect();
    let gone: Vec<String> = stored
        .keys()
        .filter(|id| !current.contains(id.as_str()))
        .cloned()
        .collect();
    for batch in gone.chunks(500) {
        faq_vectors::Entity::delete_many()
            .filter(faq_vectors::Column::FaqId.is_in(batch.iter().cloned()))
            .filter(owned.clone())
            .exec(db)
            .await?;
    }
    let mut pending: Vec<Pending> = faqs
        .into_iter()
        .filter(|(id, _, _, at)| stored.get(id) != Some(at))
        .map(|(faq_id, question, answer, updated_at)| Pending {
            texts: embedding_texts(&question, &answer),
            faq_id,
            owner: owner.clone(),
            updated_at,
        })
        .collect();
    if take == Take::WholeBatches {
        pending.truncate(pending.len() / EMBED_BATCH * EMBED_BATCH);
    }
    let count = pending.len();
    embed_and_store(db, embedder, account_id, pending).await?;
    Ok(count)
}

#[derive(Serialize, Deserialize)]
pub struct EmbedArgs {
    agent_id: Option<String>,
    source_id: Option<String>,
}

impl crate::jobs::JobArgs for EmbedArgs {
    const KIND: &'static str = KIND;
    const CLASS: crate::jobs::Class = crate::jobs::Class::Bulk;
}

/// The job that embeds an owner's FAQs lacking a vector (one pending job per owner).
pub fn job(account_id: &AccountId, owner: &Owner, now: DateTime<Utc>) -> NewJob {
    let (agent_id, source_id) = owner.columns();
    let key = match owner {
        Owner::Agent(agent) => format!("{KIND}:a:{agent}"),
        Owner::Source(source) => format!("{KIND}:s:{source}"),
    };
    NewJob {
        run_at_ms: now.timestamp_millis(),
        unique_key: Some(key),
        // Vectors written while a run embeds the owner's others are embedded by a run after it.
        on_conflict: crate::jobs::OnConflict::Reschedule,
        ..NewJob::new(account_id, &EmbedArgs { agent_id, source_id })
    }
}

pub struct EmbedJob {
    pub db: DatabaseConnection,
    pub embedder: Option<Arc<dyn Embedder>>,
}

#[async_trait::async_trait]
impl Handler for EmbedJob {
    /// An owner's thousands of sections, embedded on the CPU.
    fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1800)
    }

    async fn run(&self, job: &Job) -> Outcome {
        let owner = match job.args::<EmbedArgs>() {
            Ok(EmbedArgs {
                agent_id: Some(agent), ..
            }) => Owner::Agent(agent),
            Ok(EmbedArgs {
                source_id: Some(source),
                ..
            }) => Owner::Source(source),
            _ => {
                return Outcome::Fail {
                    error: "unreadable payload".to_owned(),
                    effect: None,
                };
            }
        };
        // Enqueued by a process with a model, claimed by one without (replicas configured differently):
        // nothing it can do; the FAQs rank by their words until a search with a model asks again.
        let Some(embedder) = &self.embedder else {
            tracing::warn!("a faq_embed job reached a process without an embedding model");
            return Outcome::Done(None);
        };
        match embed_owner(&self.db, embedder, &job.account(), &owner, Take::All).await {
            Ok(count) => {
                tracing::info!(count, "FAQ vectors made");
                Outcome::Done(None)
            }
            Err(err) => Outcome::Retry {
                error: format!("embedding: {err}"),
                after: std::time::Duration::from_secs(5),
            },
        }
    }
}
