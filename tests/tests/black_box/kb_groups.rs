//! Knowledge groups over REST and gRPC, on SQLite and PostgreSQL: named bundles of FAQs applied to an agent
//! (or the agent behind a campaign) idempotently.

use std::collections::HashMap;

use frontdesk_tests::{
    Db, Server, on_both_databases,
    platform::{Platform, assert_id, assert_invalid_under, assert_not_found, assert_timestamp},
};
use serde_json::{Value, json};

on_both_databases!(knowledge_groups_apply_idempotently, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;

    let group = api
        .ok(
            "POST",
            "/v1/kb-groups",
            Some(json!({
                "name": "Clinic basics",
                "description": "Hours, parking, insurance",
                "faqs": [
                    {"question": "Where do I park?", "answer": "Behind the building."},
                    {"question": "What are your hours?", "answer": "9 to 6."},
                    {"question": "Do you take insurance?", "answer": "Most plans."}
                ]
            })),
        )
        .await["kb_group"]
        .clone();
    assert_id(&group["id"], "kbg_");
    assert_eq!(
        (
            group["name"].clone(),
            group["description"].clone(),
            group["faqs"].as_array().unwrap().len()
        ),
        (json!("Clinic basics"), json!("Hours, parking, insurance"), 3)
    );
    assert_eq!(
        group["faqs"][0],
        json!({"question": "Where do I park?", "answer": "Behind the building."})
    );
    assert_timestamp(&group["created_at"], "created_at");
    let group_id = group["id"].as_str().unwrap().to_owned();
    assert_eq!(
        api.ok("GET", &format!("/v1/kb-groups/{group_id}"), None).await["kb_group"],
        group
    );
    let empty = api.ok("POST", "/v1/kb-groups", Some(json!({"name": "Empty"}))).await["kb_group"].clone();
    assert_eq!(
        (empty["description"].clone(), empty["faqs"].clone()),
        (json!(""), json!([]))
    );
    let empty_id = empty["id"].as_str().unwrap().to_owned();
    assert_eq!(
        api.ids("/v1/kb-groups", "kb_groups", "id").await,
        vec![empty_id.clone(), group_id.clone()],
        "newest first"
    );
    for (body, prefix) in [
        (json!({"name": ""}), "name"),
        (json!({"description": "no name"}), "name"),
        (json!({"name": "G", "faqs": [{"question": "Q?", "answer": ""}]}), "faqs"),
        (json!({"name": "G", "faqs": [{"question": "", "answer": "A"}]}), "faqs"),
    ] {
        let answer = api.send("POST", "/v1/kb-groups", Some(body.clone())).await;
        assert_invalid_under(&answer, prefix, &body.to_string());
    }
    let renamed = api
        .ok(
            "PUT",
            &format!("/v1/kb-groups/{empty_id}"),
            Some(json!({"name": "Renamed"})),
        )
        .await["kb_group"]
        .clone();
    assert_eq!(
        (renamed["name"].clone(), renamed["faqs"].clone()),
        (json!("Renamed"), json!([]))
    );

    // The agent already answers one of the questions its own way.
    let agent = api.agent("Reception").await;
    let faqs = format!("/v1/agents/{agent}/faqs");
    let own = api
        .ok(
            "POST",
            &faqs,
            Some(json!({"question": "Do you take insurance?", "answer": "Call us to check."})),
        )
        .await["faq"]
        .clone();
    let apply = format!("/v1/kb-groups/{group_id}/apply");
    let applied = api.ok("POST", &apply, Some(json!({"agent_id": agent}))).await;
    assert_eq!(
        applied,
        json!({"success": true, "group_id": group_id, "agent_id": agent, "added": 2, "updated": 0, "unchanged": 1})
    );
    let listed = api.ok("GET", &faqs, None).await["faqs"].clone();
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 3);
    let by_question: HashMap<&str, &Value> = listed.iter().map(|f| (f["question"].as_str().unwrap(), f)).collect();
    assert_eq!(by_question.len(), 3, "no duplicate questions");
    assert_eq!(by_question["Where do I park?"]["group_id"], json!(group_id));
    assert_eq!(by_question["What are your hours?"]["answer"], "9 to 6.");
    assert_eq!(
        *by_question["Do you take insurance?"], own,
        "a question the agent already had is left alone"
    );

    let again = api.ok("POST", &apply, Some(json!({"agent_id": agent}))).await;
    assert_eq!(
        (
            again["added"].clone(),
            again["updated"].clone(),
            again["unchanged"].clone()
        ),
        (json!(0), json!(0), json!(3))
    );
    assert_eq!(
        api.ok("GET", &faqs, None).await["faqs"].as_array().unwrap().len(),
        3,
        "applying twice adds nothing"
    );

    // A changed answer is updated in place on the next apply; a new question is added.
    api.ok(
        "PUT",
        &format!("/v1/kb-groups/{group_id}"),
        Some(json!({"faqs": [
            {"question": "Where do I park?", "answer": "In the garage on 5th."},
            {"question": "What are your hours?", "answer": "9 to 6."},
            {"question": "Do you take insurance?", "answer": "Most plans."}
        ]})),
    )
    .await;
    let changed = api.ok("POST", &apply, Some(json!({"agent_id": agent}))).await;
    assert_eq!(
        (
            changed["added"].clone(),
            changed["updated"].clone(),
            changed["unchanged"].clone()
        ),
        (json!(0), json!(1), json!(2))
    );
    let parking: Vec<Value> = api.ok("GET", &faqs, None).await["faqs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["question"] == "Where do I park?")
        .cloned()
        .collect();
    assert_eq!(parking.len(), 1);
    assert_eq!(
        (parking[0]["answer"].clone(), parking[0]["id"].clone()),
        (
            json!("In the garage on 5th."),
            by_question["Where do I park?"]["id"].clone()
        ),
        "updated in place"
    );
    let kept = api.ok("GET", &format!("/v1/kb-groups/{group_id}"), None).await["kb_group"].clone();
    assert_eq!(kept["name"], "Clinic basics", "a PUT of faqs keeps the name");
    api.ok(
        "PUT",
        &format!("/v1/kb-groups/{group_id}"),
        Some(json!({"faqs": [
            {"question": "Where do I park?", "answer": "In the garage on 5th."},
            {"question": "What are your hours?", "answer": "9 to 6."},
            {"question": "Do you take insurance?", "answer": "Most plans."},
            {"question": "Is there wifi?", "answer": "Yes."}
        ]})),
    )
    .await;
    let added = api.ok("POST", &apply, Some(json!({"agent_id": agent}))).await;
    assert_eq!(
        (
            added["added"].clone(),
            added["updated"].clone(),
            added["unchanged"].clone()
        ),
        (json!(1), json!(0), json!(3))
    );

    // Bad applies.
    for body in [json!({}), json!({"agent_id": agent, "campaign_id": agent})] {
        let answer = api.send("POST", &apply, Some(body.clone())).await;
        assert_eq!(
            (answer.status, answer.code()),
            (400, "invalid_argument"),
            "{body}: {}",
            answer.body
        );
    }
    assert_not_found(
        &api.send("POST", &apply, Some(json!({"agent_id": "agt_0000000000000000"})))
            .await,
        "apply to an unknown agent",
    );
    assert_not_found(
        &api.send(
            "POST",
            "/v1/kb-groups/kbg_0000000000000000/apply",
            Some(json!({"agent_id": agent})),
        )
        .await,
        "apply an unknown group",
    );
    let other = Platform::new(&server).await;
    let foreign_agent = other.agent("Not yours").await;
    assert_not_found(
        &api.send("POST", &apply, Some(json!({"agent_id": foreign_agent}))).await,
        "apply to another account's agent",
    );

    // Deleting the group leaves the FAQs it applied.
    let deleted = api.send("DELETE", &format!("/v1/kb-groups/{group_id}"), None).await;
    assert_eq!(
        (deleted.status, deleted.body.clone()),
        (200, json!({"success": true, "id": group_id}))
    );
    assert_not_found(
        &api.send("GET", &format!("/v1/kb-groups/{group_id}"), None).await,
        "deleted group",
    );
    assert_eq!(api.ok("GET", &faqs, None).await["faqs"].as_array().unwrap().len(), 4);
});
