//! The team's tasks, on SQLite and PostgreSQL + Redis: a handoff (by the API or by the AI) opens a task for a
//! person to answer the contact, the conversation's resume closes it, and `PATCH /v1/tasks/{id}` marks any
//! task done or open again; lists page newest first and filter by status; another account's task is 404; the
//! section is `summaries`.

use frontdesk_tests::{
    Db, admin, on_both_databases,
    platform::{Platform, assert_insufficient_scope, assert_invalid, assert_not_found},
    sms::{self, SmsChannel},
    twilio::{FakeTwilio, new_message_sid},
};
use serde_json::{Value, json};

async fn tasks(platform: &Platform<'_>, query: &str) -> Vec<Value> {
    platform.get(&format!("/v1/tasks{query}")).await["tasks"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

on_both_databases!(handoffs_open_tasks_and_resumes_close_them, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[("FRONTDESK_REPLY_DEBOUNCE_MS", "0")]).await;
    let platform = Platform::new(&server).await;
    let channel = SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let agent = platform.agent("Front desk").await;
    platform
        .ok(
            "PUT",
            "/v1/entry-points/channel-defaults",
            Some(json!({"channel": "sms", "agent_id": agent})),
        )
        .await;

    // The AI hands off a question it cannot answer: a task for a person, with the reason.
    assert_eq!(
        channel
            .inbound(&new_message_sid(), "+14155550101", "Can I pay in gold bars?")
            .await
            .status,
        200
    );
    let conversation = platform
        .poll("/v1/conversations?handoff=true", |list| {
            !list["conversations"].as_array().is_none_or(Vec::is_empty)
        })
        .await["conversations"][0]
        .clone();
    let conversation_id = conversation["id"].as_str().unwrap().to_owned();
    let open = tasks(&platform, "?status=open").await;
    assert_eq!(open.len(), 1, "{open:#?}");
    let task = &open[0];
    assert_eq!(
        (
            task["kind"].clone(),
            task["status"].clone(),
            task["conversation_id"].clone()
        ),
        (json!("handoff"), json!("open"), json!(conversation_id))
    );
    assert_eq!(task["contact_id"], conversation["contact_id"]);
    assert!(
        task["title"]
            .as_str()
            .unwrap()
            .contains(conversation["handoff_reason"].as_str().unwrap()),
        "{task}"
    );
    assert!(task["id"].as_str().unwrap().starts_with("task_"));

    // Resuming the conversation closes it; a second handoff by the API opens another.
    platform
        .ok("POST", &format!("/v1/conversations/{conversation_id}/resume"), None)
        .await;
    assert_eq!(tasks(&platform, "?status=open").await, Vec::<Value>::new());
    assert_eq!(tasks(&platform, "?status=done").await.len(), 1);
    let body = json!({"reason": "asked for the manager"});
    for _ in 0..2 {
        platform
            .ok(
                "POST",
                &format!("/v1/conversations/{conversation_id}/handoff"),
                Some(body.clone()),
            )
            .await;
    }
    let open = tasks(&platform, "?status=open").await;
    assert_eq!(open.len(), 1, "a repeated handoff opens no second task: {open:#?}");
    assert!(open[0]["title"].as_str().unwrap().contains("asked for the manager"));

    // A person marks it done, then open again; both are listed newest first.
    let id = open[0]["id"].as_str().unwrap().to_owned();
    let done = platform
        .ok("PATCH", &format!("/v1/tasks/{id}"), Some(json!({"done": true})))
        .await["task"]
        .clone();
    assert_eq!(done["status"], "done");
    let again = platform
        .ok("PATCH", &format!("/v1/tasks/{id}"), Some(json!({"done": false})))
        .await["task"]
        .clone();
    assert_eq!(again["status"], "open");
    let all = tasks(&platform, "").await;
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["id"], id, "newest first");
    let first_page = platform.get("/v1/tasks?limit=1").await;
    let cursor = first_page["next_cursor"].as_str().unwrap().to_owned();
    let second_page = tasks(&platform, &format!("?limit=1&cursor={cursor}")).await;
    assert_eq!(second_page[0]["id"], all[1]["id"]);
});

on_both_databases!(tasks_refuse_bad_input_and_other_accounts, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let message = sms::send(&platform, "sms", "+14155550102", "Hello").await;
    let conversation = platform.get(&format!("/v1/messages/{message}")).await["message"]["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    platform
        .ok(
            "POST",
            &format!("/v1/conversations/{conversation}/handoff"),
            Some(json!({"reason": "VIP"})),
        )
        .await;
    let id = tasks(&platform, "").await[0]["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/tasks/{id}");

    for (body, field) in [(json!({}), "done"), (json!({"done": "yes"}), "done")] {
        let answer = platform.send("PATCH", &path, Some(body.clone())).await;
        assert_eq!(answer.status, 400, "{body}: {}", answer.body);
        if answer.code() == "invalid_argument" && !answer.fields().is_empty() {
            assert_invalid(&answer, field, &body.to_string());
        }
    }
    for query in ["?status=later", "?limit=0", "?cursor=nonsense"] {
        let answer = platform.send("GET", &format!("/v1/tasks{query}"), None).await;
        assert_eq!(answer.status, 400, "{query}: {}", answer.body);
    }
    let other = Platform::new(&server).await;
    assert_not_found(
        &other.send("PATCH", &path, Some(json!({"done": true}))).await,
        "another account's task",
    );
    assert_eq!(tasks(&other, "").await, Vec::<Value>::new());
    assert_not_found(
        &platform
            .send("PATCH", "/v1/tasks/task_0000000000000000", Some(json!({"done": true})))
            .await,
        "no such task",
    );

    let deals_only = admin::issue_key(&server, &platform.account_id, &["deals"]).await;
    let scoped = Platform::of(&server, &platform.account_id, &deals_only);
    assert_insufficient_scope(&scoped.send("GET", "/v1/tasks", None).await, "GET /v1/tasks");
    let summaries = admin::issue_key(&server, &platform.account_id, &["summaries"]).await;
    let allowed = Platform::of(&server, &platform.account_id, &summaries);
    assert_eq!(tasks(&allowed, "").await.len(), 1);
});
