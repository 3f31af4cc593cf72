//! The retrieval index: given an agent and a question, the FAQs that answer it best, with scores. It
//! searches the agent's own FAQs (applied knowledge groups included) and those of its knowledge sources
//! (`scope`), held in memory per agent and rebuilt when the database says the scope changed (`versions`,
//! `memory`), ranked by one fused score of meaning and words:
//!
//! ```text
//! score = w · max(cos(query, faq), 0) + (1 − w) · bm25(query, faq) / Σ_t idf(t)
//! ```
//!
//! `cos` is the cosine of the sentence-embedding vectors (`embeddings`, `vectors`); the lexical part is
//! BM25F with the question weighted up (`bm25`) over terms analysed in the agent's language (`analyzer`),
//! divided by the most the query's terms could score, so both parts lie in [0, 1] and mean the same for
//! every query (a score above the handoff threshold is a confident answer, whatever the question). The
//! weight and the threshold were tuned on the Python FAQ evaluation set (docs/knowledge.md,
//! bench/eval/python-faq.toml). Without a model, or for a FAQ whose vector is still being made, the
//! score is the lexical part alone.
//!
//! The results are the FAQs sharing a term with the query or, with a model, close enough in meaning
//! (`MIN_COSINE`); best first, equal scores by FAQ id, so both databases rank alike.

mod analyzer;
mod bm25;
pub mod excerpt;
mod memory;
mod question_words;
mod scope;
pub mod vectors;
mod versions;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use frontdesk_api::v1::Faq;
use sea_orm::{DatabaseConnection, DbErr};

use self::{memory::ScopeIndex, question_words::QuestionWords, scope::Scope, vectors::Pending};
use crate::{
    clock::Clock,
    error::ApiResult,
    jobs::{self, Wake},
    knowledge::embeddings::Embedder,
    store::entities::agents,
};

pub use memory::embedding_texts;
pub use scope::Owner;

/// Weight of the dense (meaning) part of the fused score; the lexical part weighs the rest.
pub const DENSE_WEIGHT: f64 = 0.7;
/// A FAQ sharing no term with the query is a result only when at least this close in meaning.
const MIN_COSINE: f32 = 0.25;
/// The fused score from which the best FAQ answers the question; below it, hand off to a person. On the
/// evaluation set (w = 0.7) every unanswerable question scored at most 0.273 and every right answer at least
/// 0.299: this is about the middle of that gap.
pub const CONFIDENT: f64 = 0.28;
/// FAQs without a current vector that a search embeds itself before ranking; more go to the job.
const INLINE_EMBED: usize = 32;
/// Agents whose index is held in memory; past it the one used least recently is dropped.
const MAX_SCOPES: usize = 256;
/// A word of the question is said by a FAQ in meaning when its vector is at least this close to one of the
/// FAQ's: "sundays" to an opening-hours FAQ (0.44), not "dog" or "wheelchair" to a clinic's location (0.17).
const TERM_COVERED: f32 = 0.3;
/// Words whose vectors are kept; past it the whole set is dropped and made anew.
const MAX_WORD_VECTORS: usize = 20_000;

/// The fused score of a FAQ with this cosine (none: no current vector) and normalised lexical score (none:
/// no query term); none when it is no result.
fn fuse(w: f64, cosine: Option<f32>, lexical: Option<f64>) -> Option<f64> {
    match (cosine, lexical) {
        (Some(c), Some(l)) => Some(w * f64::from(c.max(0.0)) + (1.0 - w) * l),
        (Some(c), None) if c >= MIN_COSINE => Some(w * f64::from(c)),
        (None, Some(l)) => Some((1.0 - w) * l),
        _ => None,
    }
}

/// A FAQ found for a query, and how well it matched (higher is better, in [0, 1]).
pub struct Hit {
    pub faq: Faq,
    pub score: f64,
    /// The cosine of its closest vector to the query's (none without a model or a vector).
    pub cosine: Option<f32>,
    pub coverage: Coverage,
    /// The byte range of its answer whose vector was closest to the query's (none without a model), for
    /// `excerpt`.
    pub closest: Option<std::ops::Range<usize>>,
}

/// The part of `answer` that answers `query` (`excerpt`), for an agent of `language`; `closest` is the
/// answer's passage a search found closest (`Hit::closest`).
pub fn excerpt_of(answer: &str, closest: Option<std::ops::Range<usize>>, language: &str, query: &str) -> String {
    let analyzer = analyzer::Analyzer::for_language(language);
    let groups = QuestionWords::for_analyzer(&analyzer).groups(&analyzer.terms(query));
    excerpt::excerpt(answer, &analyzer, &groups, closest)
}

/// How much of what the question is about a FAQ says (`question_words`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// The question's subject terms.
    pub subject: usize,
    /// Those the FAQ says neither in its words (or their synonyms) nor, with a model, in meaning.
    pub unsaid: usize,
    /// The question asks a price and the FAQ's answer states none.
    pub price_unstated: bool,
}

/// The retrieval index of this process: the embedder, if any, and the scopes held in memory.
pub struct Retrieval {
    embedder: Option<Arc<dyn Embedder>>,
    dense_weight: f64,
    clock: Arc<dyn Clock>,
    wake: Wake,
    scopes: Mutex<HashMap<String, (u64, Arc<ScopeIndex>)>>,
    uses: std::sync::atomic::AtomicU64,
    /// Vectors of single words of questions, by word.
    word_vectors: Mutex<HashMap<String, Arc<[f32]>>>,
}

impl Retrieval {
    pub fn new(embedder: Option<Arc<dyn Embedder>>, dense_weight: f64, clock: Arc<dyn Clock>, wake: Wake) -> Self {
        Self {
            embedder,
            dense_weight,
            clock,
            wake,
            scopes: Mutex::new(HashMap::new()),
            uses: std::sync::atomic::AtomicU64::new(0),
            word_vectors: Mutex::new(HashMap::new()),
        }
    }

    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.embedder.as_ref()
    }

    /// The weight of meaning in the fused score: without a model a result's score is its words' alone, times
    /// one less this.
    pub fn dense_weight(&self) -> f64 {
        self.dense_weight
    }

    /// The `limit` best FAQs of `agent` (the account's own, found already) for `query`, best first.
    pub async fn search(
        &self,
        db: &DatabaseConnection,
        agent: &agents::Model,
        query: &str,
        limit: usize,
    ) -> ApiResult<Vec<Hit>> {
        let scope = Scope::of(db, agent).await?;
        let analysed = scope.analyzer.words(query);
        let terms: Vec<String> = analysed.iter().map(|(_, term)| term.clone()).collect();
        let groups = scope.words.groups(&terms);
        // The query's vector is made (on a blocking thread) while the index is checked and the words scored.
        let words = async {
            let index = self.index(db, &scope).await?;
            let lexical = index.lexical(&groups);
            Ok::<_, DbErr>((index, lexical))
        };
        let (words, vector) = tokio::join!(words, self.embed_query(query));
        let (index, lexical) = words?;
        let dense = vector.as_ref().filter(|_| index.has_vectors()).map(|v| index.dense(v));
        let w = self.dense_weight;
        let mut ranked: Vec<(usize, f64)> = lexical
            .into_iter()
            .enumerate()
            .filter_map(|(doc, lexical)| {
                let score = match dense.as_ref().map(|d| d[doc]) {
                    None => lexical,
                    Some(cosine) => fuse(w, cosine, lexical),
                };
                score.map(|s| (doc, s))
            })
            .collect();
        let best_first = |a: &(usize, f64), b: &(usize, f64)| {
            b.1.total_cmp(&a.1)
                .then_with(|| index.docs[a.0].faq.id.cmp(&index.docs[b.0].faq.id))
        };
        if limit == 0 {
            return Ok(Vec::new());
        }
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, best_first);
            ranked.truncate(limit);
        }
        ranked.sort_by(best_first);
        let subject: Vec<(String, String)> = scope
            .words
            .subject(&terms)
            .into_iter()
            .filter_map(|term| analysed.iter().find(|(_, t)| *t == term).cloned())
            .collect();
        let docs: Vec<usize> = ranked.iter().map(|(doc, _)| *doc).collect();
        let mut coverage = self.coverage(&index, &scope.words, &subject, &docs).await;
        if scope.words.asks_price(&terms) {
            for (found, &doc) in coverage.iter_mut().zip(&docs) {
                found.price_unstated = !QuestionWords::states_price(&index.docs[doc].faq.answer);
            }
        }
        Ok(ranked
            .into_iter()
            .zip(coverage)
            .map(|((doc, score), coverage)| Hit {
                faq: index.docs[doc].faq.clone(),
                score,
                cosine: dense.as_ref().and_then(|d| d[doc]),
                coverage,
                closest: vector.as_deref().and_then(|v| index.closest_passage(doc, v)),
            })
            .collect())
    }

    /// How much of the question's `subject` (each term with the word it came from) each FAQ of `docs` says:
    /// in its words or their synonyms, else (with a model) in meaning, the word's vector at least
    /// `TERM_COVERED` close to one of the FAQ's.
    async fn coverage(
        &self,
        index: &ScopeIndex,
        words: &QuestionWords,
        subject: &[(String, String)],
        docs: &[usize],
    ) -> Vec<Coverage> {
        let unsaid: Vec<Vec<&(String, String)>> = docs
            .iter()
            .map(|&doc| {
                subject
                    .iter()
                    .filter(|(_, term)| !words.said(term, |t| index.holds(doc, t)))
                    .collect()
            })
            .collect();
        let mut wanted: Vec<&str> = unsaid.iter().flatten().map(|(word, _)| word.as_str()).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let vectors = if index.has_vectors() {
            self.word_vectors(&wanted).await
        } else {
            HashMap::new()
        };
        docs.iter()
            .zip(unsaid)
            .map(|(&doc, unsaid)| {
                let meant = |word: &str| {
                    vectors
                        .get(word)
                        .and_then(|v| index.closeness(doc, v))
                        .is_some_and(|c| c >= TERM_COVERED)
                };
                Coverage {
                    subject: subject.len(),
                    unsaid: unsaid.iter().filter(|(word, _)| !meant(word)).count(),
                    price_unstated: false,
                }
            })
            .collect()
    }

    /// The vectors of single words (kept, as the same words come back), by word; none without a model.
    async fn word_vectors(&self, words: &[&str]) -> HashMap<String, Arc<[f32]>> {
        let mut found = HashMap::new();
        let Some(embedder) = self.embedder.as_ref() else {
            return found;
        };
        let mut missing: Vec<String> = Vec::new();
        {
            let kept = self
                .word_vectors
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for word in words {
                match kept.get(*word) {
                    Some(vector) => {
                        found.insert((*word).to_owned(), Arc::clone(vector));
                    }
                    None => missing.push((*word).to_owned()),
                }
            }
        }
        if missing.is_empty() {
            return found;
        }
        let embedder = Arc::clone(embedder);
        let texts = missing.clone();
        let made = tokio::task::spawn_blocking(move || {
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            embedder.embed(&texts)
        })
        .await;
        let vectors = match made {
            Ok(Ok(vectors)) => vectors,
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "the question's words could not be embedded; they are judged by their words");
                return found;
            }
            Err(err) => {
                tracing::warn!(error = %err, "the question's words could not be embedded; they are judged by their words");
                return found;
            }
        };
        let mut kept = self
            .word_vectors
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if kept.len() + missing.len() > MAX_WORD_VECTORS {
            kept.clear();
        }
        for (word, vector) in missing.into_iter().zip(vectors) {
            let vector: Arc<[f32]> = vector.into();
            kept.insert(word.clone(), Arc::clone(&vector));
            found.insert(word, vector);
        }
        found
    }

    /// What groups a question with others like it: its vector (none without a model) and its subject terms
    /// in `language`.
    pub async fn question_signals(&self, language: &str, question: &str) -> (Option<Vec<f32>>, Vec<String>) {
        let analyzer = analyzer::Analyzer::for_language(language);
        let terms = QuestionWords::for_analyzer(&analyzer).subject(&analyzer.terms(question));
        (self.embed_query(question).await, terms)
    }

    async fn embed_query(&self, query: &str) -> Option<Vec<f32>> {
        let embedder = Arc::clone(self.embedder.as_ref()?);
        let query = query.to_owned();
        match tokio::task::spawn_blocking(move || embedder.embed(&[query.as_str()])).await {
            Ok(Ok(mut vectors)) => vectors.pop(),
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "the query could not be embedded; ranked by its words only");
                None
            }
            Err(err) => {
                tracing::warn!(error = %err, "the query could not be embedded; ranked by its words only");
                None
            }
        }
    }

    /// The scope's index as stored now: the one held if its key is current, else one rebuilt (and
    /// missing vectors made or asked for).
    async fn index(&self, db: &DatabaseConnection, scope: &Scope) -> Result<Arc<ScopeIndex>, DbErr> {
        let model = self.embedder.as_ref().map(|e| e.name().to_owned());
        let mut embedded_inline = false;
        loop {
            let key = versions::key(db, scope, model.as_deref()).await?;
            let held = self.held(&scope.agent_id);
            if let Some(held) = &held
                && held.key == key
            {
                return Ok(Arc::clone(held));
            }
            let dimension = self.embedder.as_ref().map(|e| e.dimension());
            let index = Arc::new(ScopeIndex::build(db, scope, key, dimension, held.as_deref()).await?);
            let missing = index.without_vectors();
            if let Some(embedder) = self.embedder.as_ref().filter(|_| !missing.is_empty()) {
                if missing.len() <= INLINE_EMBED && !embedded_inline {
                    let pending = missing
                        .iter()
                        .map(|d| Pending {
                            faq_id: d.faq.id.clone(),
                            owner: d.owner.clone(),
                            updated_at: d.updated_at,
                            texts: embedding_texts(&d.faq.question, &d.faq.answer),
                        })
                        .collect();
                    match vectors::embed_and_store(db, embedder, &scope.account_id, pending).await {
                        Ok(()) => {
                            // Stored, the vectors moved the versions: read again, reusing what was built.
                            embedded_inline = true;
                            self.hold(&scope.agent_id, index);
                            continue;
                        }
                        Err(err) => tracing::warn!(error = %err, "FAQ vectors could not be made"),
                    }
                } else if missing.len() > INLINE_EMBED {
                    self.ask_for_vectors(db, scope, &missing).await?;
                }
            }
            self.hold(&scope.agent_id, Arc::clone(&index));
            return Ok(index);
        }
    }

    /// Enqueues the embedding job of each owner with FAQs lacking a vector (once while one is pending).
    async fn ask_for_vectors(
        &self,
        db: &DatabaseConnection,
        scope: &Scope,
        missing: &[&Arc<memory::Doc>],
    ) -> Result<(), DbErr> {
        let mut owners: Vec<&Owner> = missing.iter().map(|d| &d.owner).collect();
        owners.sort();
        owners.dedup();
        let now = self.clock.now();
        let jobs = owners
            .into_iter()
            .map(|owner| vectors::job(&scope.account_id, owner, now))
            .collect();
        jobs::enqueue_all(db, jobs, now).await?;
        self.wake.notify();
        Ok(())
    }

    fn held(&self, agent_id: &str) -> Option<Arc<ScopeIndex>> {
        let mut scopes = self.scopes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let tick = self.uses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        scopes.get_mut(agent_id).map(|(used, index)| {
            *used = tick;
            Arc::clone(index)
        })
    }

    fn hold(&self, agent_id: &str, index: Arc<ScopeIndex>) {
        let mut scopes = self.scopes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if scopes.len() >= MAX_SCOPES && !scopes.contains_key(agent_id) {
            let oldest = scopes
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                scopes.remove(&oldest);
            }
        }
        let tick = self.uses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        scopes.insert(agent_id.to_owned(), (tick, index));
    }
}
