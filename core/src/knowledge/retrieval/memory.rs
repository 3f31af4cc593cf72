//! One agent's searchable knowledge held in memory: every FAQ of its scope, analysed (term frequencies per
//! field, field lengths), with its embedding vector when it has a current one, and the postings that map a
//! term to the FAQs holding it. Built from the FAQ tables themselves, so there is no index to keep in step
//! on disk; rebuilt when the scope's versions (`versions`) say something changed, reusing every FAQ whose
//! `updated_at` did not move.
//!
//! Everything here is plain Rust arithmetic over the stored texts and vectors, in FAQ-id order, so SQLite
//! and PostgreSQL give the same scores to the last bit.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
};

use chrono::{DateTime, Utc};
use frontdesk_api::v1::Faq;
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect};

use super::{
    analyzer::Analyzer,
    bm25::{Collection, Posting},
    scope::{Owner, Scope},
    versions::Key,
};
use crate::{
    knowledge::{agent_faqs::faq_message, embeddings, source_faqs as source_faq_messages},
    store::entities::{agent_faqs, faq_vectors, source_faqs},
};

/// Ids per `IN (...)` list: well under both databases' bound-parameter limits.
const BATCH: usize = 500;

/// One FAQ as searched.
pub struct Doc {
    pub faq: Faq,
    pub owner: Owner,
    pub updated_at: DateTime<Utc>,
    /// Distinct terms with their frequency in the question and in the answer.
    terms: Vec<(String, u32, u32)>,
    question_len: u32,
    answer_len: u32,
    /// Its embedding under the scope's model, made from this very version of the FAQ.
    pub vector: Option<Arc<[f32]>>,
}

/// Text of a FAQ that its vector is made from: the question, then the start of the answer (what the FAQ
/// is about is said early; the model reads at most a few hundred tokens anyway).
pub fn embedding_text(question: &str, answer: &str) -> String {
    const ANSWER_CHARS: usize = 300;
    let cut = answer.char_indices().nth(ANSWER_CHARS).map_or(answer.len(), |(i, _)| i);
    format!("{question}\n{}", &answer[..cut])
}

pub struct ScopeIndex {
    pub key: Key,
    pub docs: Vec<Arc<Doc>>,
    postings: HashMap<String, Vec<(u32, u32, u32)>>,
    collection: Collection,
    /// Every doc's vector in doc order, one after the other (zeros for a doc without one): the dense
    /// scores read one block of memory in order.
    vectors: Vec<f32>,
    dimension: usize,
}

impl ScopeIndex {
    /// The FAQs of `scope` as stored now, reusing `previous`'s analysis of those that did not change.
    pub async fn build(
        db: &impl ConnectionTrait,
        scope: &Scope,
        key: Key,
        previous: Option<&ScopeIndex>,
    ) -> Result<Self, DbErr> {
        let reusable: HashMap<&str, &Arc<Doc>> = previous
            .filter(|p| p.key.language == key.language)
            .map(|p| p.docs.iter().map(|d| (d.faq.id.as_str(), d)).collect())
            .unwrap_or_default();
        let stored = stored(db, scope).await?;
        let mut docs: BTreeMap<String, Arc<Doc>> = BTreeMap::new();
        let mut to_load = Vec::new();
        for (id, (owner, updated_at)) in stored {
            match reusable.get(id.as_str()) {
                Some(doc) if doc.updated_at == updated_at && doc.owner == owner => {
                    docs.insert(id, Arc::clone(doc));
                }
                _ => to_load.push(id),
            }
        }
        for doc in load(db, &scope.analyzer, &to_load).await? {
            docs.insert(doc.faq.id.clone(), Arc::new(doc));
        }
        if let Some(model) = &key.model {
            attach_vectors(db, model, &mut docs).await?;
        }
        let docs: Vec<Arc<Doc>> = docs.into_values().collect();
        let mut postings: HashMap<String, Vec<(u32, u32, u32)>> = HashMap::new();
        let (mut question_terms, mut answer_terms) = (0_u64, 0_u64);
        for (i, doc) in docs.iter().enumerate() {
            question_terms += u64::from(doc.question_len);
            answer_terms += u64::from(doc.answer_len);
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            for (term, question_tf, answer_tf) in &doc.terms {
                postings
                    .entry(term.clone())
                    .or_default()
                    .push((i, *question_tf, *answer_tf));
            }
        }
        let collection = Collection::new(docs.len() as u64, question_terms, answer_terms);
        let dimension = docs.iter().find_map(|d| d.vector.as_ref()).map_or(0, |v| v.len());
        let mut vectors = vec![0.0; docs.len() * dimension];
        for (doc, row) in docs.iter().zip(vectors.chunks_exact_mut(dimension.max(1))) {
            if let Some(vector) = doc.vector.as_deref().filter(|v| v.len() == dimension) {
                row.copy_from_slice(vector);
            }
        }
        Ok(Self {
            key,
            docs,
            postings,
            collection,
            vectors,
            dimension,
        })
    }

    /// The FAQs that lack a current vector.
    pub fn without_vectors(&self) -> Vec<&Arc<Doc>> {
        self.docs.iter().filter(|d| d.vector.is_none()).collect()
    }

    /// Each FAQ's lexical match with the query, in doc order: BM25F over the most the query's terms could
    /// score (`bm25 / Σ idf`, in [0, 1)), which is comparable across queries; none for a FAQ sharing no
    /// term with it.
    pub fn lexical(&self, analyzer: &Analyzer, query: &str) -> Vec<Option<f64>> {
        let terms: BTreeSet<String> = analyzer.terms(query).into_iter().collect();
        let mut sums: Vec<Option<f64>> = vec![None; self.docs.len()];
        let mut most = 0.0;
        for term in &terms {
            let list = self.postings.get(term).map(Vec::as_slice).unwrap_or_default();
            let idf = self.collection.idf(list.len() as u64);
            most += idf;
            for &(doc, question_tf, answer_tf) in list {
                let d = &self.docs[doc as usize];
                let posting = Posting {
                    question_tf,
                    answer_tf,
                    question_len: d.question_len,
                    answer_len: d.answer_len,
                };
                *sums[doc as usize].get_or_insert(0.0) += self.collection.term_score(idf, &posting);
            }
        }
        for sum in sums.iter_mut().flatten() {
            *sum = if most > 0.0 { *sum / most } else { 0.0 };
        }
        sums
    }

    /// The cosine of every FAQ with a vector to the query's vector (`None` for those without).
    pub fn dense(&self, query: &[f32]) -> Vec<Option<f32>> {
        if self.dimension == 0 || query.len() != self.dimension {
            return vec![None; self.docs.len()];
        }
        self.docs
            .iter()
            .zip(self.vectors.chunks_exact(self.dimension))
            .map(|(d, row)| {
                // A stored vector of another length was left out of the block (zeros): no score either.
                let stored = d.vector.as_ref().is_some_and(|v| v.len() == self.dimension);
                stored.then(|| embeddings::dot(row, query))
            })
            .collect()
    }

    pub fn has_vectors(&self) -> bool {
        self.docs.iter().any(|d| d.vector.is_some())
    }
}

/// The scope's FAQs by id, with owner and version.
async fn stored(db: &impl ConnectionTrait, scope: &Scope) -> Result<BTreeMap<String, (Owner, DateTime<Utc>)>, DbErr> {
    let own = agent_faqs::Entity::find()
        .select_only()
        .columns([agent_faqs::Column::Id, agent_faqs::Column::UpdatedAt])
        .filter(agent_faqs::Column::AccountId.eq(&scope.account_id))
        .filter(agent_faqs::Column::AgentId.eq(&scope.agent_id))
        .into_tuple::<(String, DateTime<Utc>)>()
        .all(db)
        .await?;
    let mut stored: BTreeMap<String, (Owner, DateTime<Utc>)> = own
        .into_iter()
        .map(|(id, at)| (id, (Owner::Agent(scope.agent_id.clone()), at)))
        .collect();
    if !scope.source_ids.is_empty() {
        let from_sources = source_faqs::Entity::find()
            .select_only()
            .columns([
                source_faqs::Column::Id,
                source_faqs::Column::SourceId,
                source_faqs::Column::UpdatedAt,
            ])
            .filter(source_faqs::Column::AccountId.eq(&scope.account_id))
            .filter(source_faqs::Column::SourceId.is_in(scope.source_ids.iter().cloned()))
            .into_tuple::<(String, String, DateTime<Utc>)>()
            .all(db)
            .await?;
        stored.extend(
            from_sources
                .into_iter()
                .map(|(id, source, at)| (id, (Owner::Source(source), at))),
        );
    }
    Ok(stored)
}

fn analyse(analyzer: &Analyzer, faq: Faq, owner: Owner, updated_at: DateTime<Utc>) -> Doc {
    let question = analyzer.terms(&faq.question);
    let answer = analyzer.terms(&faq.answer);
    let mut counts: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for term in &question {
        counts.entry(term.clone()).or_default().0 += 1;
    }
    for term in &answer {
        counts.entry(term.clone()).or_default().1 += 1;
    }
    let len = |terms: &[String]| u32::try_from(terms.len()).unwrap_or(u32::MAX);
    Doc {
        question_len: len(&question),
        answer_len: len(&answer),
        terms: counts.into_iter().map(|(t, (q, a))| (t, q, a)).collect(),
        faq,
        owner,
        updated_at,
        vector: None,
    }
}

/// The FAQs `ids`, read and analysed (one deleted meanwhile is left out).
async fn load(db: &impl ConnectionTrait, analyzer: &Analyzer, ids: &[String]) -> Result<Vec<Doc>, DbErr> {
    let mut docs = Vec::with_capacity(ids.len());
    for batch in ids.chunks(BATCH) {
        let own = agent_faqs::Entity::find()
            .filter(agent_faqs::Column::Id.is_in(batch.iter().cloned()))
            .all(db)
            .await?;
        docs.extend(own.into_iter().map(|f| {
            let owner = Owner::Agent(f.agent_id.clone());
            analyse(analyzer, faq_message(&f), owner, f.updated_at)
        }));
        let from_sources = source_faqs::Entity::find()
            .filter(source_faqs::Column::Id.is_in(batch.iter().cloned()))
            .all(db)
            .await?;
        docs.extend(from_sources.into_iter().map(|f| {
            let owner = Owner::Source(f.source_id.clone());
            analyse(analyzer, source_faq_messages::faq_message(&f), owner, f.updated_at)
        }));
    }
    Ok(docs)
}

/// Gives the FAQs without a vector the stored one of `model`, when it was made from their current version.
async fn attach_vectors(
    db: &impl ConnectionTrait,
    model: &str,
    docs: &mut BTreeMap<String, Arc<Doc>>,
) -> Result<(), DbErr> {
    let lacking: Vec<String> = docs
        .values()
        .filter(|d| d.vector.is_none())
        .map(|d| d.faq.id.clone())
        .collect();
    for batch in lacking.chunks(BATCH) {
        let rows = faq_vectors::Entity::find()
            .select_only()
            .columns([
                faq_vectors::Column::FaqId,
                faq_vectors::Column::FaqUpdatedAt,
                faq_vectors::Column::Vector,
            ])
            .filter(faq_vectors::Column::Model.eq(model))
            .filter(faq_vectors::Column::FaqId.is_in(batch.iter().cloned()))
            .into_tuple::<(String, DateTime<Utc>, Vec<u8>)>()
            .all(db)
            .await?;
        for (id, version, bytes) in rows {
            let Some(doc) = docs.get_mut(&id) else { continue };
            if doc.updated_at != version {
                continue;
            }
            let Some(vector) = embeddings::from_bytes(&bytes) else {
                continue;
            };
            *doc = Arc::new(Doc {
                faq: doc.faq.clone(),
                owner: doc.owner.clone(),
                updated_at: doc.updated_at,
                terms: doc.terms.clone(),
                question_len: doc.question_len,
                answer_len: doc.answer_len,
                vector: Some(vector.into()),
            });
        }
    }
    Ok(())
}
