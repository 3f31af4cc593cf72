//! An agent's own knowledge over REST, on SQLite and PostgreSQL: its FAQs and the knowledge sources attached
//! to it.

use frontdesk_tests::{
    Db, Server,
    knowledge::seed_kb_source,
    on_both_databases,
    platform::{Platform, assert_id, assert_invalid, assert_not_found, assert_timestamp},
};
use serde_json::{Value, json};

on_both_databases!(faqs_and_knowledge_sources_of_an_agent, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    let other = Platform::new(&server).await;
    let id = api.agent("Knowledgeable").await;
    let faqs = format!("/v1/agents/{id}/faqs");

    let first = api
        .ok(
            "POST",
            &faqs,
            Some(json!({"question": "Open on Sunday?", "answer": "No, Monday to Saturday."})),
        )
        .await["faq"]
        .clone();
    assert_id(&first["id"], "faq_");
    assert_eq!(
        (
            first["agent_id"].clone(),
            first["question"].clone(),
            first["answer"].clone(),
            first["group_id"].clone()
        ),
        (
            json!(id),
            json!("Open on Sunday?"),
            json!("No, Monday to Saturday."),
            Value::Null
        )
    );
    assert_timestamp(&first["created_at"], "created_at");
    assert_timestamp(&first["updated_at"], "updated_at");
    let second = api
        .ok(
            "POST",
            &faqs,
            Some(json!({"question": "Do you take insurance?", "answer": "Most plans."})),
        )
        .await["faq"]
        .clone();
    let (first_id, second_id) = (
        first["id"].as_str().unwrap().to_owned(),
        second["id"].as_str().unwrap().to_owned(),
    );
    assert_eq!(
        api.ids(&faqs, "faqs", "id").await,
        vec![second_id.clone(), first_id.clone()],
        "newest first"
    );
    let page = api.ok("GET", &format!("{faqs}?limit=1"), None).await;
    assert_eq!(page["faqs"].as_array().unwrap().len(), 1);
    assert!(page["next_cursor"].is_string());

    // PUT is partial.
    let updated = api
        .ok(
            "PUT",
            &format!("{faqs}/{first_id}"),
            Some(json!({"answer": "Only in December."})),
        )
        .await["faq"]
        .clone();
    assert_eq!(
        (updated["question"].clone(), updated["answer"].clone()),
        (json!("Open on Sunday?"), json!("Only in December."))
    );
    let answer = api
        .send("PUT", &format!("{faqs}/{first_id}"), Some(json!({"question": ""})))
        .await;
    assert_invalid(&answer, "question", "blank question on PUT");
    assert_not_found(
        &api.send(
            "PUT",
            &format!("{faqs}/faq_0000000000000000"),
            Some(json!({"answer": "x"})),
        )
        .await,
        "unknown FAQ",
    );
    let deleted = api.send("DELETE", &format!("{faqs}/{second_id}"), None).await;
    assert_eq!(
        (deleted.status, deleted.body.clone()),
        (200, json!({"success": true, "id": second_id}))
    );
    assert_not_found(
        &api.send("DELETE", &format!("{faqs}/{second_id}"), None).await,
        "FAQ deleted twice",
    );
    assert_eq!(api.ids(&faqs, "faqs", "id").await, vec![first_id.clone()]);

    // A FAQ is reached only through its own agent.
    let elsewhere = api.agent("Elsewhere").await;
    assert_not_found(
        &api.send(
            "PUT",
            &format!("/v1/agents/{elsewhere}/faqs/{first_id}"),
            Some(json!({"answer": "x"})),
        )
        .await,
        "a FAQ through another agent",
    );

    // Knowledge sources: attach (idempotent), list, detach.
    seed_kb_source(&db, &api.account_id, "src_A000000000000001").await;
    seed_kb_source(&db, &other.account_id, "src_B000000000000001").await;
    let sources = format!("/v1/agents/{id}/kb-sources");
    let attached = api
        .ok("POST", &sources, Some(json!({"source_id": "src_A000000000000001"})))
        .await["kb_source"]
        .clone();
    assert_eq!(
        (
            attached["source_id"].clone(),
            attached["agent_id"].clone(),
            attached["kind"].clone(),
            attached["status"].clone()
        ),
        (json!("src_A000000000000001"), json!(id), json!("url"), json!("ready"))
    );
    assert_timestamp(&attached["attached_at"], "attached_at");
    let again = api
        .ok("POST", &sources, Some(json!({"source_id": "src_A000000000000001"})))
        .await;
    assert_eq!(again["kb_source"]["source_id"], "src_A000000000000001");
    assert_eq!(
        api.ids(&sources, "kb_sources", "source_id").await,
        vec!["src_A000000000000001".to_owned()],
        "attaching twice keeps one attachment"
    );
    assert_not_found(
        &api.send("POST", &sources, Some(json!({"source_id": "src_0000000000000000"})))
            .await,
        "unknown source",
    );
    assert_not_found(
        &api.send("POST", &sources, Some(json!({"source_id": "src_B000000000000001"})))
            .await,
        "another account's source",
    );
    assert_not_found(
        &other
            .send("POST", &sources, Some(json!({"source_id": "src_B000000000000001"})))
            .await,
        "another account's agent",
    );
    let detached = api
        .send("DELETE", &format!("{sources}/src_A000000000000001"), None)
        .await;
    assert_eq!(detached.status, 200, "{}", detached.body);
    assert_eq!(detached.body["success"], true);
    assert!(api.ids(&sources, "kb_sources", "source_id").await.is_empty());
    assert_not_found(
        &api.send("DELETE", &format!("{sources}/src_A000000000000001"), None)
            .await,
        "detached twice",
    );
    let reattached = api
        .send("POST", &sources, Some(json!({"source_id": "src_A000000000000001"})))
        .await;
    assert_eq!(reattached.status, 200, "the source itself stays: {}", reattached.body);

    // Deleting the agent takes its FAQs and attachments with it.
    api.ok("DELETE", &format!("/v1/agents/{id}"), None).await;
    assert_not_found(&api.send("GET", &faqs, None).await, "FAQs of a deleted agent");
    assert_not_found(&api.send("GET", &sources, None).await, "sources of a deleted agent");
});
