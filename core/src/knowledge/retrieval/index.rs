//! Keeps the lexical index (`faq_index_docs`, `faq_index_terms`) in step with the FAQ tables, for one
//! agent's scope, before that scope is searched.
//!
//! Why here and not in each FAQ write: FAQs are written by several hands (the FAQ endpoints, knowledge
//! group applies, agent deletion, source imports and source deletion still to come, a future bulk tool),
//! and a writer that forgot the index would leave search silently wrong. Instead every index row records
//! the `updated_at` of the FAQ it was made from, and a search first compares the scope's FAQ versions with
//! the indexed ones (two narrow reads of ids and timestamps), re-indexes what changed and drops what is
//! gone, in one write transaction under the account lock, and only then scores. So an edit, a create or a
//! delete is searchable by the very next search, whoever made it; a search with nothing changed writes
//! nothing. A FAQ writer only has to move `updated_at` when it changes the text, as every one does.
//! Deleting an agent or a source removes its index rows by foreign-key cascade.
//!
//! The index is kept per analysis language (rows keyed by FAQ and language): a source shared by agents
//! of two languages is indexed once for each; an agent whose language changed has its old rows dropped.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QuerySelect,
};

use super::scope::{Owner, Scope};
use crate::{
    error::ApiResult,
    store::entities::{agent_faqs, faq_index_docs, faq_index_terms, source_faqs},
};

/// Rows per insert statement: well under both databases' bound-parameter limits.
const INSERT_BATCH: usize = 500;

/// A FAQ of the scope as stored: its owner and version.
struct Stored {
    owner: Owner,
    updated_at: DateTime<Utc>,
}

/// What the index lacks for the scope: FAQs to (re-)index and index rows to drop, as (faq_id, language).
#[derive(Default)]
struct Changes {
    index: BTreeMap<String, Owner>,
    drop: Vec<(String, String)>,
}

impl Changes {
    fn is_empty(&self) -> bool {
        self.index.is_empty() && self.drop.is_empty()
    }
}

/// Brings the scope's index rows up to date with its FAQs.
pub async fn reconcile(db: &DatabaseConnection, scope: &Scope) -> ApiResult<()> {
    if changes(db, scope).await?.is_empty() {
        return Ok(());
    }
    let txn = crate::store::begin_write(db).await?;
    // Under the account lock, so that two searches do not index the same FAQ at once; what changed is
    // read again inside, as another search may have done the work meanwhile.
    crate::accounts::store::lock(&txn, &scope.account_id).await?;
    let changes = changes(&txn, scope).await?;
    apply(&txn, scope, changes).await?;
    txn.commit().await?;
    Ok(())
}

/// The scope's FAQs by id, with owner and version.
async fn stored(db: &impl ConnectionTrait, scope: &Scope) -> ApiResult<HashMap<String, Stored>> {
    let own = agent_faqs::Entity::find()
        .select_only()
        .columns([agent_faqs::Column::Id, agent_faqs::Column::UpdatedAt])
        .filter(agent_faqs::Column::AccountId.eq(&scope.account_id))
        .filter(agent_faqs::Column::AgentId.eq(&scope.agent_id))
        .into_tuple::<(String, DateTime<Utc>)>()
        .all(db)
        .await?;
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
    let own = own.into_iter().map(|(id, updated_at)| {
        let owner = Owner::Agent(scope.agent_id.clone());
        (id, Stored { owner, updated_at })
    });
    let from_sources = from_sources.into_iter().map(|(id, source, updated_at)| {
        let owner = Owner::Source(source);
        (id, Stored { owner, updated_at })
    });
    Ok(own.chain(from_sources).collect())
}

async fn changes(db: &impl ConnectionTrait, scope: &Scope) -> ApiResult<Changes> {
    let mut unindexed = stored(db, scope).await?;
    // The scope's rows in its language, and the agent's rows in any other (left by a language change).
    let in_scope = scope.rows(
        faq_index_docs::Column::Language,
        faq_index_docs::Column::AgentId,
        faq_index_docs::Column::SourceId,
    );
    let indexed = faq_index_docs::Entity::find()
        .select_only()
        .columns([
            faq_index_docs::Column::FaqId,
            faq_index_docs::Column::Language,
            faq_index_docs::Column::FaqUpdatedAt,
        ])
        .filter(
            Condition::any()
                .add(in_scope)
                .add(faq_index_docs::Column::AgentId.eq(&scope.agent_id)),
        )
        .into_tuple::<(String, String, DateTime<Utc>)>()
        .all(db)
        .await?;
    let mut changes = Changes::default();
    for (faq_id, language, version) in indexed {
        let current = language == scope.analyzer.language()
            && unindexed.get(&faq_id).is_some_and(|faq| faq.updated_at == version);
        if current {
            unindexed.remove(&faq_id);
        } else {
            changes.drop.push((faq_id, language));
        }
    }
    changes.index = unindexed.into_iter().map(|(id, faq)| (id, faq.owner)).collect();
    Ok(changes)
}

/// A FAQ's text and version, whichever table holds it.
struct Text {
    question: String,
    answer: String,
    updated_at: DateTime<Utc>,
}

async fn texts(db: &impl ConnectionTrait, changes: &Changes) -> ApiResult<HashMap<String, Text>> {
    let ids = || changes.index.keys().cloned();
    let own = agent_faqs::Entity::find()
        .filter(agent_faqs::Column::Id.is_in(ids()))
        .all(db)
        .await?
        .into_iter()
        .map(|f| (f.id, f.question, f.answer, f.updated_at));
    let from_sources = source_faqs::Entity::find()
        .filter(source_faqs::Column::Id.is_in(ids()))
        .all(db)
        .await?
        .into_iter()
        .map(|f| (f.id, f.question, f.answer, f.updated_at));
    Ok(own
        .chain(from_sources)
        .map(|(id, question, answer, updated_at)| {
            let text = Text {
                question,
                answer,
                updated_at,
            };
            (id, text)
        })
        .collect())
}

/// Term frequencies per field of one FAQ, and the field lengths in terms.
fn frequencies(scope: &Scope, text: &Text) -> (BTreeMap<String, (i32, i32)>, i32, i32) {
    let question = scope.analyzer.terms(&text.question);
    let answer = scope.analyzer.terms(&text.answer);
    let mut counts: BTreeMap<String, (i32, i32)> = BTreeMap::new();
    for term in &question {
        counts.entry(term.clone()).or_default().0 += 1;
    }
    for term in &answer {
        counts.entry(term.clone()).or_default().1 += 1;
    }
    let len = |terms: &[String]| i32::try_from(terms.len()).unwrap_or(i32::MAX);
    (counts, len(&question), len(&answer))
}

async fn apply(db: &impl ConnectionTrait, scope: &Scope, changes: Changes) -> ApiResult<()> {
    // Their term rows go with them (foreign key, ON DELETE CASCADE).
    for batch in changes.drop.chunks(INSERT_BATCH) {
        let rows = batch.iter().fold(Condition::any(), |any, (faq_id, language)| {
            any.add(
                Condition::all()
                    .add(faq_index_docs::Column::FaqId.eq(faq_id))
                    .add(faq_index_docs::Column::Language.eq(language)),
            )
        });
        faq_index_docs::Entity::delete_many().filter(rows).exec(db).await?;
    }
    let texts = texts(db, &changes).await?;
    let language = scope.analyzer.language().to_owned();
    let mut docs = Vec::new();
    let mut terms = Vec::new();
    for (faq_id, owner) in &changes.index {
        let Some(text) = texts.get(faq_id) else { continue };
        let (counts, question_len, answer_len) = frequencies(scope, text);
        let (agent_id, source_id) = owner.columns();
        docs.push(faq_index_docs::Model {
            faq_id: faq_id.clone(),
            language: language.clone(),
            account_id: scope.account_id.clone(),
            agent_id: agent_id.clone(),
            source_id: source_id.clone(),
            faq_updated_at: text.updated_at,
            question_len,
            answer_len,
        });
        terms.extend(
            counts
                .into_iter()
                .map(|(term, (question_tf, answer_tf))| faq_index_terms::Model {
                    faq_id: faq_id.clone(),
                    language: language.clone(),
                    term,
                    agent_id: agent_id.clone(),
                    source_id: source_id.clone(),
                    question_tf,
                    answer_tf,
                    question_len,
                    answer_len,
                }),
        );
    }
    insert::<faq_index_docs::Entity, _>(db, docs).await?;
    insert::<faq_index_terms::Entity, _>(db, terms).await?;
    Ok(())
}

/// Inserts `rows`, `INSERT_BATCH` a statement.
async fn insert<E, M>(db: &impl ConnectionTrait, rows: Vec<M>) -> ApiResult<()>
where
    E: EntityTrait,
    E::ActiveModel: From<M>,
{
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let batch = rows
            .by_ref()
            .take(INSERT_BATCH)
            .map(|row| E::ActiveModel::from(row).reset_all());
        E::insert_many(batch).exec_without_returning(db).await?;
    }
    Ok(())
}
