//! The local provider's decisions on small businesses' knowledge (bench/eval/small-business.json): each
//! business's handful of FAQs, paraphrases of what they answer and questions they do not, decided as a reply
//! would be (the passages found, then the provider's rule), with the sentence-embedding model and by words
//! alone. Prints the figures per split and holds what must not get worse: no paraphrase answered with another
//! FAQ and at most one unknown question in ten answered, in both modes and on both splits (the split the
//! constants were tuned on and the held-out one), and the paraphrases answered right with the model.

use std::{path::Path, sync::Arc};

use sea_orm::EntityTrait;
use serde::Deserialize;

use super::{
    local::LocalModel,
    passages,
    provider::{Basis, Context, Decision},
    reply::profile,
};
use crate::{
    access::AccountId,
    agents::{faqs::new_faq, fields::AgentFields},
    clock::SystemClock,
    jobs::Wake,
    knowledge::{
        embeddings::{Embedder, LocalModel as Embeddings},
        retrieval::{DENSE_WEIGHT, Retrieval},
    },
    store::{
        entities::{agent_faqs, agents},
        test_databases::{Kind, TestDb},
    },
};

#[derive(Deserialize)]
struct Set {
    businesses: Vec<Business>,
}

#[derive(Deserialize)]
struct Business {
    name: String,
    split: String,
    faqs: Vec<(String, String)>,
    paraphrases: Vec<(String, usize)>,
    unknown: Vec<String>,
}

/// What the decisions of one split came to.
#[derive(Debug, Default)]
struct Tally {
    paraphrases: usize,
    right: usize,
    wrong: Vec<String>,
    handed_off: Vec<String>,
    unknown: usize,
    answered: Vec<String>,
}

async fn decide(
    retrieval: &Retrieval,
    db: &sea_orm::DatabaseConnection,
    agent: &agents::Model,
    question: &str,
) -> Decision {
    let passages = passages::for_messages(retrieval, db, agent, &[question]).await.unwrap();

    let context = Context {
        agent: profile(agent),
        question: question.to_owned(),
        passages,
        semantic: retrieval.embedder().is_some(),
        ..Context::default()
    };
    LocalModel::default().decide_now(&context)
}

/// Each split's tally, by split name.
async fn run(embedder: Option<Arc<dyn Embedder>>) -> Vec<(String, Tally)> {
    let set: Set = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/eval/small-business.json"))
            .unwrap(),
    )
    .unwrap();
    let test = TestDb::new(Kind::Sqlite, 2).await;
    let db = &test.db;
    let retrieval = Retrieval::new(embedder, DENSE_WEIGHT, Arc::new(SystemClock), Wake::default());
    let account = AccountId::of_row("acc_quality");
    let now = chrono::Utc::now();
    let mut tallies: Vec<(String, Tally)> = Vec::new();
    for business in &set.businesses {
        let fields = AgentFields {
            name: Some(business.name.clone()),
            ..AgentFields::default()
        };
        let agent = fields.into_new(format!("agt_{}", crate::ids::base62(16)), &account, now);
        agents::Entity::insert(agents::ActiveModel::from(agent.clone()))
            .exec_without_returning(db)
            .await
            .unwrap();
        let mut ids = Vec::new();
        for (question, answer) in &business.faqs {
            let faq = new_faq(&account, &agent.id, question, answer, None, now);
            ids.push(faq.id.clone());
            agent_faqs::Entity::insert(agent_faqs::ActiveModel::from(faq))
                .exec_without_returning(db)
                .await
                .unwrap();
        }
        if !tallies.iter().any(|(split, _)| *split == business.split) {
            tallies.push((business.split.clone(), Tally::default()));
        }
        let tally = &mut tallies
            .iter_mut()
            .find(|(split, _)| *split == business.split)
            .unwrap()
            .1;
        for (question, faq) in &business.paraphrases {
            tally.paraphrases += 1;
            match decide(&retrieval, db, &agent, question).await {
                Decision::Answer {
                    basis: Basis::Faq(id), ..
                } if id == ids[*faq] => tally.right += 1,
                Decision::Answer { .. } => tally.wrong.push(question.clone()),
                _ => tally.handed_off.push(question.clone()),
            }
        }
        for question in &business.unknown {
            tally.unknown += 1;
            if let Decision::Answer { .. } = decide(&retrieval, db, &agent, question).await {
                tally.answered.push(question.clone());
            }
        }
    }
    test.remove().await;
    tallies
}

fn report(mode: &str, tallies: &[(String, Tally)]) {
    for (split, t) in tallies {
        println!(
            "{mode} {split}: paraphrases right {}/{} (wrong {:?}, handed off {:?}); unknown answered {}/{} {:?}",
            t.right,
            t.paraphrases,
            t.wrong,
            t.handed_off,
            t.answered.len(),
            t.unknown,
            t.answered
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_business_knowledge_is_answered_and_never_guessed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/all-MiniLM-L6-v2");
    let Ok(model) = Embeddings::load(&dir) else {
        panic!("no model in models/: run scripts/test-prereqs");
    };
    let with_model = run(Some(Arc::new(model))).await;
    report("with the model", &with_model);
    let words = run(None).await;
    report("words alone", &words);
    // Never confidently wrong, in either mode: no paraphrase answered with another FAQ, at most one unknown
    // question in ten answered.
    for (mode, tallies) in [("with the model", &with_model), ("words alone", &words)] {
        for (split, t) in tallies {
            assert!(
                t.wrong.is_empty(),
                "{mode}, {split}: answered with another FAQ: {:?}",
                t.wrong
            );
            assert!(
                t.answered.len() * 10 <= t.unknown,
                "{mode}, {split}: unknown questions answered: {:?}",
                t.answered
            );
        }
    }
    // What the paraphrases come to today with the model (docs/ai-replies.md has the figures): a floor, so
    // that a change that answers fewer of them fails here.
    let floor = |split: &str| if split == "train" { 12 } else { 7 };
    for (split, t) in &with_model {
        assert!(
            t.right >= floor(split),
            "{split}: paraphrases answered right {}/{}, handed off {:?}",
            t.right,
            t.paraphrases,
            t.handed_off
        );
    }
}
