//! Evaluations end to end, on SQLite and PostgreSQL: a business's questions run through its agent as replies
//! would be decided, with the local provider: each case's outcome, reply, FAQ, score and pass, and the
//! summary; nothing sent, no conversation made, nothing charged; bad input is a 400 naming the field, and
//! another account's agent or evaluation a 404.

use frontdesk_tests::{
    Db, admin, on_both_databases,
    platform::{Platform, assert_invalid, assert_not_found},
    sms::{self, Desk},
    twilio::FakeTwilio,
};
use serde_json::{Value, json};

on_both_databases!(an_evaluation_reports_each_case_and_sends_nothing, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let hours = (
        "What are your opening hours?",
        "We are open 9am to 6pm, Monday to Saturday.",
    );
    let desk = Desk::open(&server, &twilio, json!({"name": "Clinic desk"}), hours).await;
    let platform = &desk.platform;
    platform
        .faq(
            &desk.agent,
            "Is there parking?",
            "Yes, free parking is available behind the building.",
        )
        .await;
    let before = platform.balance().await;

    let cases = json!({"cases": [
        {"question": "What are your opening hours?", "expect": "answer", "answer_contains": ["9AM", "saturday"]},
        {"question": "Can I bring my dog to the clinic?", "expect": "handoff"},
        {"question": "Is there parking?", "expect": "handoff"},
    ]});
    let path = format!("/v1/agents/{}/evaluations", desk.agent);
    let created = platform.ok("POST", &path, Some(cases)).await["evaluation"].clone();
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("ev_") && id.len() == 19, "{id}");
    assert!(["queued", "running", "completed"].contains(&created["status"].as_str().unwrap()));
    let done = platform
        .poll(&format!("{path}/{id}"), |b| b["evaluation"]["status"] == "completed")
        .await["evaluation"]
        .clone();
    assert_eq!(
        done["summary"],
        json!({"cases": 3, "passed": 2, "failed": 1, "answered": 2, "handed_off": 1})
    );
    let results = done["cases"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    let case = |n: usize, key: &str| results[n][key].clone();
    assert_eq!(case(0, "outcome"), "answered");
    assert_eq!(case(0, "reply"), hours.1);
    assert_eq!(case(0, "pass"), true);
    assert!(case(0, "faq_id").as_str().unwrap().starts_with("faq_"));
    assert!(case(0, "score").as_f64().unwrap() > 0.0);
    assert_eq!(case(1, "outcome"), "handed_off");
    assert_eq!(case(1, "faq_id"), "");
    assert_eq!(case(1, "pass"), true);
    assert_eq!(
        (case(2, "outcome"), case(2, "expect"), case(2, "pass")),
        (json!("answered"), json!("handoff"), json!(false))
    );
    assert!(done["completed_at"].is_string(), "{done}");

    admin::quiesce(&server).await;
    assert!(twilio.sent().is_empty(), "nothing sent");
    let conversations = platform.get("/v1/conversations").await;
    assert_eq!(conversations["conversations"], json!([]), "no conversation made");
    assert_eq!(platform.balance().await, before, "free with the local provider");
});

on_both_databases!(bad_evaluations_are_refused, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let desk = Desk::open(&server, &twilio, json!({"name": "Desk"}), ("Hours?", "Nine to five.")).await;
    let platform = &desk.platform;
    let path = format!("/v1/agents/{}/evaluations", desk.agent);
    let case = json!({"question": "Hours?", "expect": "answer"});
    let many: Vec<Value> = (0..501).map(|_| case.clone()).collect();
    for (body, field) in [
        (json!({"cases": []}), "cases"),
        (json!({"cases": many}), "cases"),
        (
            json!({"cases": [{"question": " ", "expect": "answer"}]}),
            "cases[0].question",
        ),
        (
            json!({"cases": [case.clone(), {"question": "Hours?", "expect": "maybe"}]}),
            "cases[1].expect",
        ),
    ] {
        assert_invalid(&platform.send("POST", &path, Some(body)).await, field, field);
    }
    let five_hundred: Vec<Value> = (0..500).map(|_| case.clone()).collect();
    let created = platform.ok("POST", &path, Some(json!({"cases": five_hundred}))).await;
    let id = created["evaluation"]["id"].as_str().unwrap().to_owned();

    // Another account sees neither the agent nor the evaluation.
    let other = Platform::new(&server).await;
    assert_not_found(
        &other.send("POST", &path, Some(json!({"cases": [case]}))).await,
        "another's agent",
    );
    assert_not_found(
        &other.send("GET", &format!("{path}/{id}"), None).await,
        "another's evaluation",
    );
    let done = platform
        .poll(&format!("{path}/{id}"), |b| b["evaluation"]["status"] == "completed")
        .await;
    assert_eq!(done["evaluation"]["summary"]["passed"], 500);
});
