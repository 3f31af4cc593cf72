//! One agent's searchable knowledge held in memory: every FAQ of its scope, analysed (term frequencies per
//! field, field lengths), with its embedding vector when it has a current one, and the postings that map a
//! term to the FAQs holding it. Built from the FAQ tables themselves, so there is no index to keep in step
//! on disk; rebuilt when the scope's versions (`versions`) say something changed, reusing every FAQ whose
//! `updated_at` did not move.
//!
//! Everything here is plain Rust arithmetic over the stored texts and vectors, in FAQ-id order, so SQLite
//! and PostgreSQL give the same scores to the last bit.

use std::{
    collections::{BTreeMap, HashMap},
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
    /// Its embeddings under the scope's model, made from this very version of the FAQ: one per text of
    /// `embedding_texts`, one after the other.
    pub vector: Option<Arc<[f32]>>,
}

/// Characters of the answer read with the question for the FAQ's first vector: what a FAQ is about is said
/// early.
const LEAD_CHARS: usize = 300;
/// Characters of each further passage of a longer answer.
const PASSAGE_CHARS: usize = 500;
/// A shorter last passage is not a vector of its own: a few words alone say little. After the lead it is
/// left to the words (most imported sections are a little over the lead, and every character embedded
/// costs import time); after a passage it is read with that passage.
const MIN_PASSAGE_CHARS: usize = 200;
/// What a further passage's cosine gives up against the lead's: a passage wins only when it is clearly the
/// closer (a long section's many passages otherwise outbid the right FAQ's lead on general questions).
const PASSAGE_DISCOUNT: f32 = 0.05;
/// Vectors a FAQ gets at most (a section is cut at 2,000 characters; an agent's own answer may be longer).
const MAX_VECTORS: usize = 8;

/// Texts of a FAQ that its vectors are made from: the question with the start of the answer, then the
/// question with each further passage of a longer answer, so that a detail deep in a long section is found
/// by its meaning too (a FAQ's dense score is its best vector's). The question leads each text: a passage
/// alone often does not say what it is about.
pub fn embedding_texts(question: &str, answer: &str) -> Vec<String> {
    passages(answer)
        .into_iter()
        .map(|passage| format!("{question}\n{passage}"))
        .collect()
}

/// How many vectors a FAQ with this answer has.
fn vector_count(answer: &str) -> usize {
    passages(answer).len()
}

/// The start of the answer, then its further passages.
fn passages(answer: &str) -> Vec<&str> {
    let (lead, mut rest) = split_at_chars(answer, LEAD_CHARS);
    let mut passages = vec![lead];
    while !rest.trim().is_empty() && passages.len() < MAX_VECTORS {
        let (passage, after) = split_at_chars(rest, PASSAGE_CHARS);
        passages.push(passage.trim());
        rest = after;
    }
    if passages.len() > 1
        && let Some(tail) = passages.pop_if(|tail| tail.chars().count() < MIN_PASSAGE_CHARS)
        && passages.len() > 1
        && let Some(previous) = passages.pop()
    {
        // Both are slices of `answer`: the one that spans them.
        let start = previous.as_ptr() as usize - answer.as_ptr() as usize;
        let end = tail.as_ptr() as usize - answer.as_ptr() as usize + tail.len();
        passages.push(&answer[start..end]);
    }
    passages
}

/// `text` cut after at most `chars` characters, at the last line or word break within them when there is
/// one (and the text goes on).
fn split_at_chars(text: &str, chars: usize) -> (&str, &str) {
    let Some((limit, _)) = text.char_indices().nth(chars) else {
        return (text, "");
    };
    let window = &text[..limit];
    let cut = window
        .rfind('\n')
        .or_else(|| window.rfind(' '))
        .filter(|&i| i > chars / 2)
        .unwrap_or(limit);
    (&text[..cut], &text[cut..])
}

pub struct ScopeIndex {
    pub key: Key,
    pub docs: Vec<Arc<Doc>>,
    postings: HashMap<String, Vec<(u32, u32, u32)>>,
    collection: Collection,
    /// Every doc's vectors in doc order, one after the other: the dense scores read one block of memory in
    /// order. `spans[doc]` is where the doc's are (empty for a doc without).
    vectors: Vec<f32>,
    spans: Vec<std::ops::Range<usize>>,
}

impl ScopeIndex {
    /// The FAQs of `scope` as stored now, reusing `previous`'s analysis of those that did not change; their
    /// vectors when the key names a model (whose vectors have `dimension`).
    pub async fn build(
        db: &impl ConnectionTrait,
        scope: &Scope,
        key: Key,
        dimension: Option<usize>,
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
        if let (Some(model), Some(dimension)) = (&key.model, dimension) {
            attach_vectors(db, (model, dimension), &mut docs).await?;
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
        let mut vectors = Vec::with_capacity(docs.iter().filter_map(|d| d.vector.as_ref()).map(|v| v.len()).sum());
        let spans = docs
            .iter()
            .map(|doc| {
                let start = vectors.len();
                vectors.extend_from_slice(doc.vector.as_deref().unwrap_or_default());
                start..vectors.len()
            })
            .collect();
        Ok(Self {
            key,
            docs,
            postings,
            collection,
            vectors,
            spans,
        })
    }

    /// The FAQs that lack a current vector.
    pub fn without_vectors(&self) -> Vec<&Arc<Doc>> {
        self.docs.iter().filter(|d| d.vector.is_none()).collect()
    }

    /// Each FAQ's lexical match with the query, in doc order: BM25F over the most the query's terms could
    /// score (`bm25 / Σ idf`, in [0, 1)), which is comparable across queries; none for a FAQ sharing no
    /// term with it. Each of `groups` is one term of the query, then its synonyms: a FAQ scores the best of
    /// them, at most what the query's own term could score, and that is the most the group adds (a synonym no
    /// FAQ holds changes nothing).
    pub fn lexical(&self, groups: &[Vec<String>]) -> Vec<Option<f64>> {
        let mut sums: Vec<Option<f64>> = vec![None; self.docs.len()];
        let mut most = 0.0;
        for group in groups {
            let mut best: HashMap<u32, f64> = HashMap::new();
            let own = |term: &String| self.postings.get(term).map_or(0, Vec::len) as u64;
            let ceiling = group.first().map_or(0.0, |term| self.collection.idf(own(term)));
            for term in group {
                let list = self.postings.get(term).map(Vec::as_slice).unwrap_or_default();
                let idf = self.collection.idf(list.len() as u64);
                for &(doc, question_tf, answer_tf) in list {
                    let d = &self.docs[doc as usize];
                    let posting = Posting {
                        question_tf,
                        answer_tf,
                        question_len: d.question_len,
                        answer_len: d.answer_len,
                    };
                    let score = self.collection.term_score(idf, &posting).min(ceiling);
                    let kept = best.entry(doc).or_insert(0.0);
                    *kept = kept.max(score);
                }
            }
            most += ceiling;
            for (doc, score) in best {
                *sums[doc as usize].get_or_insert(0.0) += score;
            }
        }
        for sum in sums.iter_mut().flatten() {
            *sum = if most > 0.0 { *sum / most } else { 0.0 };
        }
        sums
    }

    /// Whether the FAQ `doc` holds `term` in its question or its answer.
    pub fn holds(&self, doc: usize, term: &str) -> bool {
        self.docs[doc]
            .terms
            .binary_search_by(|(t, _, _)| t.as_str().cmp(term))
            .is_ok()
    }

    /// The byte range of the FAQ `doc`'s answer whose vector is closest to the query's `vector` (as `dense`
    /// ranks them: a further passage gives up `PASSAGE_DISCOUNT`); none without vectors.
    pub fn closest_passage(&self, doc: usize, vector: &[f32]) -> Option<std::ops::Range<usize>> {
        let vectors = &self.vectors[self.spans[doc].clone()];
        if vector.is_empty() || vectors.is_empty() || !vectors.len().is_multiple_of(vector.len()) {
            return None;
        }
        let (best, _) = vectors
            .chunks_exact(vector.len())
            .enumerate()
            .map(|(i, v)| {
                let discount = if i == 0 { 0.0 } else { PASSAGE_DISCOUNT };
                (i, embeddings::dot(v, vector) - discount)
            })
            .reduce(|a, b| if b.1 > a.1 { b } else { a })?;
        let answer = &self.docs[doc].faq.answer;
        let passage = *passages(answer).get(best)?;
        let start = passage.as_ptr() as usize - answer.as_ptr() as usize;
        Some(start..start + passage.len())
    }

    /// The best cosine of the FAQ `doc`'s vectors to `vector` (none when it has no vector of that dimension).
    pub fn closeness(&self, doc: usize, vector: &[f32]) -> Option<f32> {
        let vectors = &self.vectors[self.spans[doc].clone()];
        if vector.is_empty() || vectors.is_empty() || !vectors.len().is_multiple_of(vector.len()) {
            return None;
        }
        vectors
            .chunks_exact(vector.len())
            .map(|v| embeddings::dot(v, vector))
            .reduce(f32::max)
    }

    /// The best cosine of each FAQ's vectors to the query's vector (`None` for a FAQ without, or with
    /// vectors of another dimension).
    pub fn dense(&self, query: &[f32]) -> Vec<Option<f32>> {
        let dimension = query.len();
        self.spans
            .iter()
            .map(|span| {
                let vectors = &self.vectors[span.clone()];
                if dimension == 0 || vectors.is_empty() || !vectors.len().is_multiple_of(dimension) {
                    return None;
                }
                let mut cosines = vectors
                    .chunks_exact(dimension)
                    .map(|vector| embeddings::dot(vector, query));
                let lead = cosines.next()?;
                Some(cosines.fold(lead, |best, passage| best.max(passage - PASSAGE_DISCOUNT)))
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
            let owner = Owner::Agent(f.agent_id.to_string());
            analyse(analyzer, faq_message(&f), owner, f.updated_at)
        }));
        let from_sources = source_faqs::Entity::find()
            .filter(source_faqs::Column::Id.is_in(batch.iter().cloned()))
            .all(db)
            .await?;
        docs.extend(from_sources.into_iter().map(|f| {
            let owner = Owner::Source(f.source_id.to_string());
            analyse(analyzer, source_faq_messages::faq_message(&f), owner, f.updated_at)
        }));
    }
    Ok(docs)
}

/// Gives the FAQs without a vector the stored one of `model`, when it was made from their current version.
async fn attach_vectors(
    db: &impl ConnectionTrait,
    (model, dimension): (&str, usize),
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
            // Vectors made under another layout (one per FAQ, before passages had theirs) are made again.
            if vector.len() != vector_count(&doc.faq.answer) * dimension {
                continue;
            }
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

#[cfg(test)]
mod tests {
    use super::{MAX_VECTORS, embedding_texts, vector_count};

    #[test]
    fn a_short_answer_is_one_text_and_a_long_one_gets_its_passages() {
        assert_eq!(embedding_texts("Hours?", "Nine to five."), ["Hours?\nNine to five."]);
        // Just over the lead: the lead alone, the short tail left to the words.
        let just_over = "word ".repeat(70); // 350 characters
        let texts = embedding_texts("Q", &just_over);
        assert_eq!(texts.len(), 1);
        assert!(
            texts[0].len() < 2 + 300 && just_over.starts_with(&texts[0][2..]),
            "{}",
            texts[0]
        );
        // A short tail after a passage is read with that passage.
        let lead_passage_tail = "word ".repeat(180); // 900 characters: 300, 500, 100
        let texts = embedding_texts("Q", &lead_passage_tail);
        assert_eq!(texts.len(), 2);
        assert!(texts[1].len() > 2 + 500, "{}", texts[1].len());

        let sentence = "Parking is behind the building and free for customers. ";
        let answer = sentence.repeat(30); // 1,680 characters
        let texts = embedding_texts("Parking", &answer);
        assert_eq!(texts.len(), vector_count(&answer));
        assert!((4..=5).contains(&texts.len()), "{}", texts.len());
        for text in &texts {
            assert!(text.starts_with("Parking\n"), "{text}");
            // Cut at word breaks: no passage starts or ends inside a word.
            let passage = text.trim_start_matches("Parking\n");
            assert!(
                passage.starts_with("Parking is")
                    || passage.starts_with("is")
                    || passage.starts_with(char::is_alphabetic)
            );
            assert!(passage.chars().count() <= 500, "{}", passage.len());
        }
        let joined: String = texts
            .iter()
            .map(|t| t.trim_start_matches("Parking\n"))
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(
            joined.split_whitespace().collect::<Vec<_>>(),
            answer.split_whitespace().collect::<Vec<_>>(),
            "the passages hold the whole answer, each word once"
        );

        let endless = "word ".repeat(10_000);
        assert_eq!(embedding_texts("Q", &endless).len(), MAX_VECTORS);
    }
}
