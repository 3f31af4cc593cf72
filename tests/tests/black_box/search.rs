//! `POST /v1/agents/{agentId}/search`, the retrieval index, against the real binary on SQLite and
//! PostgreSQL: BM25 ranking with the question weighted up, stemming and stop words of the agent's language,
//! the FAQs searched (the agent's own, applied knowledge groups, attached sources; nobody else's), changes
//! searchable at once, the same scores on both databases, and bad input.

use frontdesk_tests::{
    Db, Server,
    knowledge::{delete_kb_source, seed_kb_source, seed_source_faq},
    on_both_databases,
    platform::{Platform, assert_invalid, assert_not_found},
};
use serde_json::{Value, json};

/// The questions of a search's results, best first.
async fn questions(api: &Platform<'_>, agent: &str, query: &str) -> Vec<String> {
    api.search(agent, query, 50)
        .await
        .iter()
        .map(|r| r["faq"]["question"].as_str().unwrap().to_owned())
        .collect()
}

/// A front desk's FAQs: "refund" in one question, in another's answer, and nowhere else.
async fn front_desk(api: &Platform<'_>) -> String {
    let agent = api.agent("Front desk").await;
    api.faq(
        &agent,
        "How do I get a refund?",
        "Write to us within 30 days of your purchase.",
    )
    .await;
    api.faq(
        &agent,
        "What are your opening hours?",
        "Nine to five. A refund is handled at the front desk.",
    )
    .await;
    api.faq(&agent, "Where can I park?", "Behind the building, free of charge.")
        .await;
    agent
}

on_both_databases!(results_are_ranked_with_the_question_weighted_up, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    let agent = front_desk(&api).await;

    let results = api.search(&agent, "refund", 5).await;
    let found: Vec<&str> = results.iter().map(|r| r["faq"]["question"].as_str().unwrap()).collect();
    assert_eq!(found, ["How do I get a refund?", "What are your opening hours?"]);
    let scores: Vec<f64> = results.iter().map(|r| r["score"].as_f64().unwrap()).collect();
    assert!(scores[0] > scores[1] && scores[1] > 0.0, "{scores:?}");
    // The FAQ comes whole.
    let first = &results[0]["faq"];
    assert_eq!(first["agent_id"], json!(agent));
    assert_eq!(first["answer"], "Write to us within 30 days of your purchase.");
    assert_eq!(
        (first["group_id"].clone(), first["source_id"].clone()),
        (Value::Null, Value::Null)
    );

    // At most `limit`, and 5 without one.
    assert_eq!(api.search(&agent, "refund", 1).await.len(), 1);
    for n in 0..6 {
        api.faq(&agent, &format!("Refund rule {n}?"), "See the desk.").await;
    }
    let path = format!("/v1/agents/{agent}/search");
    let default = api.ok("POST", &path, Some(json!({"query": "refund"}))).await;
    assert_eq!(default["results"].as_array().unwrap().len(), 5);
});

on_both_databases!(words_are_stemmed_and_stop_words_ignored, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    let agent = front_desk(&api).await;

    let refund = questions(&api, &agent, "refund").await;
    for form in ["refunds", "Refunding", "REFUNDED"] {
        assert_eq!(questions(&api, &agent, form).await, refund, "{form}");
    }
    // "where", "are", "your" and "the" are English stop words: were they searched, "Where can I park?"
    // and "What are your opening hours?" would match them.
    assert_eq!(
        questions(&api, &agent, "where are your refunds").await,
        refund,
        "stop words matched nothing"
    );
    assert!(questions(&api, &agent, "where are the").await.is_empty());
    assert!(questions(&api, &agent, "lunch menu").await.is_empty());

    // The agent's language picks the stemmer: in German, "Rückerstattungen" finds "Rückerstattung".
    let path = format!("/v1/agents/{agent}");
    api.ok("PUT", &path, Some(json!({"language": "de-DE"}))).await;
    api.faq(&agent, "Wie bekomme ich eine Rückerstattung?", "Schreiben Sie uns.")
        .await;
    assert_eq!(
        questions(&api, &agent, "die Rückerstattungen").await,
        ["Wie bekomme ich eine Rückerstattung?"]
    );
});

on_both_databases!(
    an_agents_group_and_source_faqs_are_searched_and_nobody_elses,
    |db: Db| async move {
        let server = Server::start(&db, &[]).await;
        let api = Platform::new(&server).await;
        let other_account = Platform::new(&server).await;
        let agent = api.agent("Front desk").await;
        api.faq(&agent, "Where can I park?", "Behind the building.").await;

        // Another agent's FAQ, and another account's agent's FAQ, with the very words searched for.
        let sibling = api.agent("Sales desk").await;
        api.faq(&sibling, "Refund policy for sales?", "Refund within a week.")
            .await;
        let stranger = other_account.agent("Their desk").await;
        other_account
            .faq(&stranger, "Refund policy?", "Refund within a year.")
            .await;

        // A knowledge group applied to the agent.
        let group = api
        .ok(
            "POST",
            "/v1/kb-groups",
            Some(json!({"name": "Sale", "faqs": [{"question": "Refund on sale items?", "answer": "No refund on sale items."}]})),
        )
        .await["kb_group"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
        api.ok(
            "POST",
            &format!("/v1/kb-groups/{group}/apply"),
            Some(json!({"agent_id": agent})),
        )
        .await;

        // A source attached to the agent, and one that is not.
        for (source, faq_id, question) in [
            ("src_A000000000000001", "faq_A000000000000001", "Refund window"),
            (
                "src_B000000000000001",
                "faq_B000000000000001",
                "Refund by bank transfer",
            ),
        ] {
            seed_kb_source(&db, &api.account_id, source).await;
            seed_source_faq(&db, &api.account_id, source, faq_id, question, "Thirty days.").await;
        }
        let attach = format!("/v1/agents/{agent}/kb-sources");
        api.ok("POST", &attach, Some(json!({"source_id": "src_A000000000000001"})))
            .await;

        let results = api.search(&agent, "refund", 50).await;
        let mut found: Vec<(String, Value, Value, Value)> = results
            .iter()
            .map(|r| {
                let faq = &r["faq"];
                let question = faq["question"].as_str().unwrap().to_owned();
                (
                    question,
                    faq["agent_id"].clone(),
                    faq["group_id"].clone(),
                    faq["source_id"].clone(),
                )
            })
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            found,
            [
                (
                    "Refund on sale items?".to_owned(),
                    json!(agent),
                    json!(group),
                    Value::Null
                ),
                (
                    "Refund window".to_owned(),
                    json!(""),
                    Value::Null,
                    json!("src_A000000000000001")
                ),
            ]
        );

        // Attached later, a source is searched at once; detached or deleted, it is not.
        api.ok("POST", &attach, Some(json!({"source_id": "src_B000000000000001"})))
            .await;
        assert_eq!(
            questions(&api, &agent, "bank transfer").await,
            ["Refund by bank transfer"]
        );
        api.ok("DELETE", &format!("{attach}/src_A000000000000001"), None).await;
        assert!(questions(&api, &agent, "window").await.is_empty());
        delete_kb_source(&db, "src_B000000000000001").await;
        assert!(questions(&api, &agent, "bank transfer").await.is_empty());
    }
);

on_both_databases!(
    a_created_edited_or_deleted_faq_is_searched_as_it_is_now,
    |db: Db| async move {
        let server = Server::start(&db, &[]).await;
        let api = Platform::new(&server).await;
        let agent = front_desk(&api).await;
        assert!(questions(&api, &agent, "wifi").await.is_empty());

        let id = api
            .faq(&agent, "Is there wifi?", "Yes, ask the desk for the password.")
            .await;
        assert_eq!(questions(&api, &agent, "wifi").await, ["Is there wifi?"]);

        let path = format!("/v1/agents/{agent}/faqs/{id}");
        api.ok("PUT", &path, Some(json!({"question": "Is there internet access?"})))
            .await;
        assert!(questions(&api, &agent, "wifi").await.is_empty());
        assert_eq!(questions(&api, &agent, "internet").await, ["Is there internet access?"]);
        // The answer too: its words are searched from the moment it changes.
        api.ok(
            "PUT",
            &path,
            Some(json!({"answer": "Yes, the network is Lobby-Guest."})),
        )
        .await;
        assert!(questions(&api, &agent, "password").await.is_empty());
        assert_eq!(
            questions(&api, &agent, "lobby network").await,
            ["Is there internet access?"]
        );

        api.ok("DELETE", &path, None).await;
        assert!(questions(&api, &agent, "internet").await.is_empty());
        assert_eq!(
            questions(&api, &agent, "refund").await,
            ["How do I get a refund?", "What are your opening hours?"],
            "the other FAQs stay searched"
        );

        // An agent whose FAQs are indexed is deleted with its index.
        api.ok("DELETE", &format!("/v1/agents/{agent}"), None).await;
        let body = json!({"query": "refund"});
        assert_not_found(
            &api.send("POST", &format!("/v1/agents/{agent}/search"), Some(body))
                .await,
            "deleted agent",
        );
    }
);

on_both_databases!(bad_input_is_refused_naming_the_field, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    let other_account = Platform::new(&server).await;
    let agent = api.agent("Front desk").await;
    let path = format!("/v1/agents/{agent}/search");

    for (body, field, case) in [
        (json!({}), "query", "no query"),
        (json!({"query": "  "}), "query", "blank query"),
        (
            json!({"query": "x".repeat(1_001)}),
            "query",
            "query over 1,000 characters",
        ),
        (json!({"query": "refund", "limit": 0}), "limit", "limit 0"),
        (json!({"query": "refund", "limit": 51}), "limit", "limit 51"),
        (
            json!({"query": "refund", "limit": "many"}),
            "limit",
            "limit not a number",
        ),
        (json!({"query": "refund", "sort": "score"}), "sort", "unknown field"),
    ] {
        assert_invalid(&api.send("POST", &path, Some(body)).await, field, case);
    }
    assert_eq!(api.search(&agent, &"x".repeat(1_000), 50).await, Vec::<Value>::new());

    // Another account's agent is as absent as a missing one.
    let body = json!({"query": "refund"});
    assert_not_found(
        &other_account.send("POST", &path, Some(body.clone())).await,
        "another account's agent",
    );
    assert_not_found(
        &api.send("POST", "/v1/agents/agt_0000000000000000/search", Some(body))
            .await,
        "no such agent",
    );
});

/// A corpus of FAQs of many lengths, so that length normalisation, document frequencies and field weights
/// all shape the scores.
const CORPUS: &[(&str, &str)] = &[
    (
        "How do I get a refund?",
        "Write to us within 30 days of your purchase with the order number.",
    ),
    (
        "Can I return an opened item?",
        "Opened items can be returned within 14 days for store credit, not a refund.",
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
        "We ship to the EU and the UK. Shipping abroad takes five to ten days.",
    ),
    (
        "How long does shipping take?",
        "Two days within the country; refunds for late parcels are automatic.",
    ),
    (
        "Can I change my order?",
        "Orders can be changed until they ship. Write to us with the order number.",
    ),
    (
        "Do you have gift cards?",
        "Gift cards from 10 to 200 euros, valid for two years, never refunded.",
    ),
];

async fn seeded_scores(db: &Db) -> Vec<Vec<(String, f64)>> {
    let server = Server::start(db, &[]).await;
    let api = Platform::new(&server).await;
    let agent = api.agent("Shop").await;
    for (question, answer) in CORPUS {
        api.faq(&agent, question, answer).await;
    }
    let mut rankings = Vec::new();
    for query in [
        "refund",
        "refunds for an order",
        "shipping abroad",
        "opening hours saturday",
        "two days",
    ] {
        let results = api.search(&agent, query, 50).await;
        assert!(!results.is_empty(), "{query}: nothing found");
        let key = |r: &Value| {
            (
                r["score"].as_f64().unwrap(),
                r["faq"]["id"].as_str().unwrap().to_owned(),
            )
        };
        for pair in results.windows(2) {
            let ((score_a, id_a), (score_b, id_b)) = (key(&pair[0]), key(&pair[1]));
            assert!(
                score_a > score_b || (score_a == score_b && id_a < id_b),
                "{query}: best first, equal scores by id: {results:?}"
            );
        }
        // Ids are random, so FAQs of equal score are compared across databases in question order.
        let mut ranking: Vec<(String, f64)> = results
            .iter()
            .map(|r| {
                (
                    r["faq"]["question"].as_str().unwrap().to_owned(),
                    r["score"].as_f64().unwrap(),
                )
            })
            .collect();
        ranking.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        rankings.push(ranking);
    }
    rankings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_and_postgres_rank_alike_with_the_same_scores() {
    let sqlite = seeded_scores(&Db::sqlite()).await;
    let postgres = seeded_scores(&Db::postgres().await).await;
    assert_eq!(sqlite, postgres);
}
