//! Semantic retrieval through `POST /v1/agents/{agentId}/search`, with the sentence-embedding model
//! (`scripts/fetch-model`) run by the real binary on SQLite and PostgreSQL: a question in other words
//! finds its FAQ, edits are searchable by meaning at once (on another replica too), source FAQs get
//! vectors, both databases give the same fused scores, and the start-up log says which retrieval runs.

use frontdesk_tests::{
    Db, Server,
    knowledge::{seed_kb_source, seed_source_faq},
    on_both_databases,
    platform::Platform,
    server::embedding_model,
};
use serde_json::json;

async fn with_model(db: &Db) -> Server {
    let model = embedding_model();
    Server::start(db, &[("FRONTDESK_EMBEDDING_MODEL", model.as_str())]).await
}

async fn top(api: &Platform<'_>, agent: &str, query: &str) -> String {
    let results = api.search(agent, query, 10).await;
    results
        .first()
        .map_or_else(String::new, |r| r["faq"]["question"].as_str().unwrap().to_owned())
}

const SHOP: &[(&str, &str)] = &[
    (
        "How do I get a refund?",
        "Write to us within 30 days of your purchase with the order number.",
    ),
    (
        "What are your opening hours?",
        "Nine to five on weekdays, ten to two on Saturdays.",
    ),
    (
        "Where can I park?",
        "Behind the building. Parking is free for customers for two hours.",
    ),
    (
        "Do you ship abroad?",
        "We ship to the EU and the UK. Delivery abroad takes five to ten days.",
    ),
    (
        "Do you have gift cards?",
        "Gift cards from 10 to 200 euros, valid for two years.",
    ),
];

async fn shop(api: &Platform<'_>) -> String {
    let agent = api.agent("Shop").await;
    for (question, answer) in SHOP {
        api.faq(&agent, question, answer).await;
    }
    agent
}

on_both_databases!(a_question_in_other_words_finds_its_faq, |db: Db| async move {
    let server = with_model(&db).await;
    // The folder is checked at start; its weights are read by the first embedding (the FAQs' own).
    let logs = server.logs();
    assert!(logs.contains("semantic retrieval: embedding model found"), "{logs}");
    assert!(!logs.contains("embedding model loaded on first use"), "{logs}");
    let api = Platform::new(&server).await;
    let agent = shop(&api).await;

    // No word in common with the FAQ that answers them (stop words aside).
    for (query, expected) in [
        ("I want my money back", "How do I get a refund?"),
        ("when is the store open", "What are your opening hours?"),
        ("is there somewhere to leave my car", "Where can I park?"),
        ("can you deliver to another country", "Do you ship abroad?"),
        ("a present voucher for a friend", "Do you have gift cards?"),
    ] {
        assert_eq!(top(&api, &agent, query).await, expected, "{query}");
    }
    // Scores are fused into [0, 1], best first; a question nothing answers scores low.
    let results = api.search(&agent, "I want my money back", 10).await;
    let scores: Vec<f64> = results.iter().map(|r| r["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    assert!(scores[0] <= 1.0 && scores[0] > 0.3, "{scores:?}");
    let unrelated = api.search(&agent, "what is the capital of Mongolia", 10).await;
    let best = unrelated.first().map_or(0.0, |r| r["score"].as_f64().unwrap());
    assert!(best < scores[0] / 2.0, "{unrelated:?}");
    assert!(server.logs().contains("embedding model loaded on first use"));
});

on_both_databases!(an_edit_is_searchable_by_meaning_at_once, |db: Db| async move {
    let server = with_model(&db).await;
    let api = Platform::new(&server).await;
    let agent = shop(&api).await;
    assert_eq!(
        top(&api, &agent, "I want my money back").await,
        "How do I get a refund?"
    );

    let id = api
        .faq(&agent, "Can I bring my dog?", "Pets on a lead are welcome.")
        .await;
    assert_eq!(
        top(&api, &agent, "are animals allowed inside").await,
        "Can I bring my dog?"
    );
    let path = format!("/v1/agents/{agent}/faqs/{id}");
    api.ok(
        "PUT",
        &path,
        Some(json!({"question": "Is there wifi?", "answer": "Free wireless internet in the whole shop."})),
    )
    .await;
    assert_eq!(
        top(&api, &agent, "can I get online on my laptop").await,
        "Is there wifi?"
    );
    assert_ne!(top(&api, &agent, "are animals allowed inside").await, "Is there wifi?");
    api.ok("DELETE", &path, None).await;
    assert_ne!(
        top(&api, &agent, "can I get online on my laptop").await,
        "Is there wifi?"
    );
});

on_both_databases!(source_faqs_are_searched_by_meaning, |db: Db| async move {
    let server = with_model(&db).await;
    let api = Platform::new(&server).await;
    let agent = shop(&api).await;
    // Written straight into the tables, as a writer that knows nothing of vectors would: the search
    // embeds them.
    let source = "src_S000000000000001";
    seed_kb_source(&db, &api.account_id, source).await;
    seed_source_faq(
        &db,
        &api.account_id,
        source,
        "faq_S000000000000001",
        "Warranty",
        "Every appliance is covered for two years against defects.",
    )
    .await;
    let attach = format!("/v1/agents/{agent}/kb-sources");
    api.ok("POST", &attach, Some(json!({"source_id": source}))).await;
    assert_eq!(
        top(&api, &agent, "my toaster broke after a year, will you fix it").await,
        "Warranty"
    );
});

/// Two core replicas on one PostgreSQL database, each holding the agent's index in memory: an edit made
/// through one is searched by the other at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_replicas_edit_is_seen_at_once() {
    let db = Db::postgres().await;
    let first = with_model(&db).await;
    let second = with_model(&db).await;
    let api = Platform::new(&first).await;
    let agent = shop(&api).await;
    let other = Platform::of(&second, &api.account_id, &api.key);
    assert_eq!(
        top(&other, &agent, "I want my money back").await,
        "How do I get a refund?"
    );
    let id = api
        .faq(&agent, "Can I bring my dog?", "Pets on a lead are welcome.")
        .await;
    assert_eq!(
        top(&other, &agent, "are animals allowed inside").await,
        "Can I bring my dog?"
    );
    api.ok("DELETE", &format!("/v1/agents/{agent}/faqs/{id}"), None).await;
    assert_ne!(
        top(&other, &agent, "are animals allowed inside").await,
        "Can I bring my dog?"
    );
}

async fn fused_scores(db: &Db) -> Vec<Vec<(String, f64)>> {
    let server = with_model(db).await;
    let api = Platform::new(&server).await;
    let agent = shop(&api).await;
    let mut rankings = Vec::new();
    for query in [
        "refund",
        "I want my money back",
        "parking for two hours",
        "weekend hours",
    ] {
        let mut ranking: Vec<(String, f64)> = api
            .search(&agent, query, 10)
            .await
            .iter()
            .map(|r| {
                (
                    r["faq"]["question"].as_str().unwrap().to_owned(),
                    r["score"].as_f64().unwrap(),
                )
            })
            .collect();
        assert!(!ranking.is_empty(), "{query}");
        ranking.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        rankings.push(ranking);
    }
    rankings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_and_postgres_give_the_same_fused_scores() {
    let sqlite = fused_scores(&Db::sqlite()).await;
    let postgres = fused_scores(&Db::postgres().await).await;
    assert_eq!(sqlite, postgres);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_the_log_says_retrieval_is_lexical() {
    let server = Server::start(&Db::sqlite(), &[]).await;
    assert!(server.logs().contains("retrieval is lexical only"), "{}", server.logs());
}
