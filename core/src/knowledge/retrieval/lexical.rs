//! The lexical score of every FAQ in a scope that shares a term with the query: the collection statistics
//! (FAQ count, average field lengths) and the query terms' postings are read from the index, and BM25F
//! (`bm25`) is computed here. Each FAQ's sum runs over the query terms in a fixed order, so the result does
//! not depend on the order the database returns rows in.

use std::collections::{BTreeMap, BTreeSet};

use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect,
    sea_query::{Expr, ExprTrait},
};

use super::{
    bm25::{Collection, Posting},
    scope::{Owner, Scope},
};
use crate::{
    error::ApiResult,
    store::entities::{faq_index_docs, faq_index_terms},
};

/// A FAQ's lexical score.
#[derive(Clone, Debug, PartialEq)]
pub struct Scored {
    pub faq_id: String,
    pub owner: Owner,
    pub score: f64,
}

async fn collection(db: &impl ConnectionTrait, scope: &Scope) -> ApiResult<Collection> {
    let in_scope = scope.rows(
        faq_index_docs::Column::Language,
        faq_index_docs::Column::AgentId,
        faq_index_docs::Column::SourceId,
    );
    let sum = |column| Expr::expr(Expr::col(column).sum()).cast_as("bigint");
    let (faqs, question_terms, answer_terms) = faq_index_docs::Entity::find()
        .select_only()
        .column_as(Expr::col(faq_index_docs::Column::FaqId).count(), "faqs")
        .column_as(sum(faq_index_docs::Column::QuestionLen), "question_terms")
        .column_as(sum(faq_index_docs::Column::AnswerLen), "answer_terms")
        .filter(in_scope)
        .into_tuple::<(i64, Option<i64>, Option<i64>)>()
        .one(db)
        .await?
        .unwrap_or_default();
    let count = |n: Option<i64>| u64::try_from(n.unwrap_or_default()).unwrap_or_default();
    Ok(Collection::new(
        count(Some(faqs)),
        count(question_terms),
        count(answer_terms),
    ))
}

/// Every FAQ of the scope holding a term of `query`, with its score, in no particular order.
pub async fn scores(db: &impl ConnectionTrait, scope: &Scope, query: &str) -> ApiResult<Vec<Scored>> {
    let terms: BTreeSet<String> = scope.analyzer.terms(query).into_iter().collect();
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    let in_scope = scope.rows(
        faq_index_terms::Column::Language,
        faq_index_terms::Column::AgentId,
        faq_index_terms::Column::SourceId,
    );
    let rows = faq_index_terms::Entity::find()
        .filter(in_scope)
        .filter(faq_index_terms::Column::Term.is_in(terms.iter().cloned()))
        .all(db)
        .await?;
    let collection = collection(db, scope).await?;
    let mut postings: BTreeMap<&str, Vec<&faq_index_terms::Model>> = BTreeMap::new();
    for row in &rows {
        postings.entry(row.term.as_str()).or_default().push(row);
    }
    let mut sums: BTreeMap<&str, (Owner, f64)> = BTreeMap::new();
    for list in postings.into_values() {
        let idf = collection.idf(list.len() as u64);
        for row in list {
            let posting = Posting {
                question_tf: non_negative(row.question_tf),
                answer_tf: non_negative(row.answer_tf),
                question_len: non_negative(row.question_len),
                answer_len: non_negative(row.answer_len),
            };
            let Some(owner) = Owner::of(row.agent_id.clone(), row.source_id.clone()) else {
                continue;
            };
            sums.entry(row.faq_id.as_str()).or_insert((owner, 0.0)).1 += collection.term_score(idf, &posting);
        }
    }
    Ok(sums
        .into_iter()
        .map(|(faq_id, (owner, score))| Scored {
            faq_id: faq_id.to_owned(),
            owner,
            score,
        })
        .collect())
}

fn non_negative(n: i32) -> u32 {
    u32::try_from(n).unwrap_or_default()
}
