//! Summaries end to end, on SQLite and PostgreSQL + Redis: a contact's recap (the latest closed conversation,
//! else the open one; stored on the contact; `summary.created`; charged at the agent's tier, free for pro on
//! the account's own key, refused with 402 before anything is written when the balance is short), a model's
//! prose read from long conversations in chunks, bad input, and the daily summary's counts over a scripted
//! day in two time zones.

use std::time::Duration;

use chrono::{DateTime, Utc};
use frontdesk_api::admin::v1::CreditsRequest;
use frontdesk_tests::{
    Db, Server, admin,
    admin::clock_at,
    model_server::{FakeModel, Recorded, Reply},
    on_both_databases,
    platform::{Platform, assert_insufficient_scope, assert_invalid, assert_not_found},
    sms::{self, Desk},
    twilio::{FakeTwilio, new_message_sid},
    webhook_receiver::Receiver,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const HOURS: &str = "We are open from nine to five, Monday to Friday.";

/// An sms channel whose default agent knows the opening hours; `agent` is merged into the agent's fields.
async fn desk<'a>(server: &'a Server, twilio: &FakeTwilio, agent: Value) -> Desk<'a> {
    let mut body = json!({"name": "Ava"});
    body.as_object_mut().unwrap().extend(agent.as_object().unwrap().clone());
    Desk::open(server, twilio, body, ("What are your opening hours?", HOURS)).await
}

/// The contact writes `text` and the service has done all it does about it.
async fn inbound(server: &Server, desk: &Desk<'_>, from: &str, text: &str) {
    assert_eq!(desk.channel.inbound(&new_message_sid(), from, text).await.status, 200);
    admin::quiesce(server).await;
}

async fn summarise(platform: &Platform<'_>, body: Value) -> Value {
    platform.ok("POST", "/v1/summaries", Some(body)).await["summary"].clone()
}

on_both_databases!(
    the_latest_closed_conversation_is_recapped_and_stored_on_the_contact,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[("FRONTDESK_REPLY_DEBOUNCE_MS", "0")]).await;
        let desk = desk(&server, &twilio, json!({})).await;
        let platform = &desk.platform;
        let receiver = Receiver::start().await;
        platform.subscribe(&receiver.url, &["summary.created"]).await;
        let created = platform
            .ok(
                "POST",
                "/v1/contacts",
                Some(json!({"name": "Ana", "phone": "+15558000001", "email": "ana@example.com"})),
            )
            .await;
        let contact = created["contact"]["id"].as_str().unwrap().to_owned();

        // A first conversation, answered and closed; a second one, still open, that the AI handed off.
        inbound(&server, &desk, "+15558000001", "What are your opening hours?").await;
        let first = platform.conversation_with("+15558000001").await["conversation"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        platform
            .ok("POST", &format!("/v1/conversations/{first}/close"), None)
            .await;
        inbound(&server, &desk, "+15558000001", "Can I pay in gold bars?").await;

        let before = platform.balance().await;
        let summary = summarise(platform, json!({"email": "ANA@example.com"})).await;
        assert_eq!(summary["contact_id"], contact.as_str());
        assert_eq!(summary["conversation_id"], first.as_str());
        assert_eq!(summary["conversation_status"], "closed");
        assert_eq!(summary["credits_used"], 1.0, "a pro agent: one credit");
        let recap = summary["recap"].as_str().unwrap();
        assert!(recap.starts_with("Conversation on sms (closed): 2 messages"), "{recap}");
        assert!(
            recap.contains(&format!(
                "The contact asked:\n- \"What are your opening hours?\"\n  Answer: \"{HOURS}\""
            )),
            "{recap}"
        );
        assert!(!recap.contains("gold bars"), "only the closed conversation: {recap}");
        assert!((before - platform.balance().await - 1.0).abs() < 1e-9);
        let ledger = platform.ok("GET", "/v1/credits", None).await["credits"]["entries"][0].clone();
        assert_eq!(
            (ledger["reason"].as_str(), ledger["amount"].as_f64()),
            (Some("summary"), Some(-1.0))
        );
        assert_eq!(ledger["conversation_id"], first.as_str());

        let stored = platform.ok("GET", &format!("/v1/contacts/{contact}"), None).await["contact"].clone();
        assert_eq!(stored["recap"], summary["recap"]);
        assert_eq!(stored["recap_at"], summary["generated_at"]);
        let event = &receiver.wait_for(1, WAIT).await[0].json;
        assert_eq!(event["type"], "summary.created");
        assert_eq!(event["data"]["summary"], summary, "{event}");

        // A contact whose only conversation is open: that one, handoff and all.
        inbound(&server, &desk, "+15558000002", "Hello").await;
        inbound(&server, &desk, "+15558000002", "Can I speak to a person please?").await;
        let open = summarise(platform, json!({"phoneNumber": "+15558000002"})).await;
        assert_eq!(open["conversation_status"], "open");
        let recap = open["recap"].as_str().unwrap();
        assert!(recap.contains("- \"Can I speak to a person please?\""), "{recap}");
        assert!(!recap.contains("\"Hello\""), "a greeting is no question: {recap}");
        assert!(
            recap.contains("Handed to a person:\n- asked_for_person (") && recap.contains("waiting for a person)"),
            "{recap}"
        );
    }
);

on_both_databases!(
    a_summary_costs_the_agents_tier_and_a_short_balance_refuses_it,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let model = FakeModel::start().await;
        model.script(|_| {
            (
                Reply::text("Ana asked about opening hours and was told."),
                Duration::ZERO,
            )
        });
        let server = sms::start(&db, &twilio, &[("FRONTDESK_REPLY_DEBOUNCE_MS", "0")]).await;
        let desk = desk(&server, &twilio, json!({})).await;
        let platform = &desk.platform;
        inbound(&server, &desk, "+15558000003", "What are your opening hours?").await;
        let phone = json!({"phoneNumber": "+15558000003"});
        let agent_path = format!("/v1/agents/{}", desk.agent);

        for (tier, cost) in [("max", 0.25), ("mini", 0.15), ("pro", 1.0)] {
            platform.ok("PUT", &agent_path, Some(json!({"ai_tier": tier}))).await;
            let before = platform.balance().await;
            let summary = summarise(platform, phone.clone()).await;
            assert_eq!(summary["credits_used"], cost, "{tier}");
            assert!((before - platform.balance().await - cost).abs() < 1e-9, "{tier}");
        }

        // The account's own key: a pro summary is free, and the model writes it.
        let own = json!({"provider": "anthropic", "api_key": "sk-ant-own-0001", "base_url": model.base_url});
        platform.ok("PUT", "/v1/model-provider", Some(own)).await;
        let before = platform.balance().await;
        let summary = summarise(platform, phone.clone()).await;
        assert_eq!(summary["credits_used"], 0.0);
        assert_eq!(summary["recap"], "Ana asked about opening hours and was told.");
        assert_eq!(platform.balance().await, before);
        platform.ok("PUT", &agent_path, Some(json!({"ai_tier": "max"}))).await;
        assert_eq!(summarise(platform, phone.clone()).await["credits_used"], 0.25);

        // A balance below the cost (max, still on the account's own model): 402 before the model is asked,
        // nothing charged, nothing stored.
        let left = platform.balance().await;
        let debit = CreditsRequest {
            account_id: platform.account_id.clone(),
            credits: format!("{:.3}", left - 0.2),
            reason: "spent elsewhere".into(),
        };
        admin::client(&server).await.debit_credits(debit).await.unwrap();
        let contact_before = platform.get("/v1/contacts?q=%2B15558000003").await["contacts"][0].clone();
        let calls_before = model.requests().len();
        let refused = platform.send("POST", "/v1/summaries", Some(phone.clone())).await;
        assert_eq!(refused.status, 402, "{}", refused.body);
        assert_eq!(refused.code(), "insufficient_credits");
        assert!((platform.balance().await - 0.2).abs() < 1e-9);
        let contact_after = platform.get("/v1/contacts?q=%2B15558000003").await["contacts"][0].clone();
        assert_eq!(contact_after, contact_before);
        assert_eq!(model.requests().len(), calls_before);
        // Mini still fits, and the model writes it.
        platform.ok("PUT", &agent_path, Some(json!({"ai_tier": "mini"}))).await;
        assert_eq!(summarise(platform, phone).await["credits_used"], 0.15);
        assert_eq!(model.requests().len(), calls_before + 1);
    }
);

/// Whether the request asks for a recap (not a reply, not notes).
fn asks_recap(request: &Recorded) -> bool {
    request.system().contains("short recap")
}

fn asks_notes(request: &Recorded) -> bool {
    request.system().contains("brief notes")
}

on_both_databases!(a_model_recaps_a_long_conversation_chunk_by_chunk, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let model = FakeModel::start().await;
    model.script(|request| {
        let text = if asks_recap(request) {
            "She asked about every product; nothing is open."
        } else if asks_notes(request) {
            "Asked about products."
        } else {
            "Sure."
        };
        (Reply::text(text), Duration::ZERO)
    });
    let env = [
        ("FRONTDESK_REPLY_DEBOUNCE_MS", "0"),
        ("FRONTDESK_MODEL_PROVIDER", "anthropic"),
        ("ANTHROPIC_BASE_URL", model.base_url.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-server"),
    ];
    let server = sms::start(&db, &twilio, &env).await;
    let desk = desk(&server, &twilio, json!({"language": "de"})).await;
    let long = |n: usize| format!("Question {n} about product {n}? {}", "details ".repeat(120));
    // The agent answers the first message, then is paused: the rest are the contact's 59 long messages.
    inbound(&server, &desk, "+15558000004", &long(0)).await;
    desk.platform
        .ok(
            "PUT",
            &format!("/v1/agents/{}", desk.agent),
            Some(json!({"status": "paused"})),
        )
        .await;
    for n in 1..60 {
        desk.channel.inbound(&new_message_sid(), "+15558000004", &long(n)).await;
    }
    admin::quiesce(&server).await;

    let summary = summarise(&desk.platform, json!({"phoneNumber": "+15558000004"})).await;
    assert_eq!(summary["recap"], "She asked about every product; nothing is open.");
    let requests = model.requests();
    let notes: Vec<&Recorded> = requests.iter().filter(|r| asks_notes(r)).collect();
    let recaps: Vec<&Recorded> = requests.iter().filter(|r| asks_recap(r)).collect();
    assert!(
        notes.len() >= 4,
        "61 messages of ~1,000 characters: {} chunks",
        notes.len()
    );
    for chunk in &notes {
        assert!(
            chunk.last_user_text().len() <= 12_100,
            "{}",
            chunk.last_user_text().len()
        );
    }
    assert!(notes[0].system().contains(&format!("part 1 of {}", notes.len())));
    assert!(
        notes
            .last()
            .unwrap()
            .last_user_text()
            .contains("Question 59 about product 59?")
    );
    assert_eq!(recaps.len(), 1);
    let prompt = recaps[0].last_user_text();
    assert!(recaps[0].system().contains("German (de)"), "{}", recaps[0].system());
    // The facts, with the local provider's labels in the agent's language, and the chunks' notes.
    assert!(
        prompt.contains("Unterhaltung über sms (offen): 61 Nachrichten"),
        "{prompt}"
    );
    assert!(prompt.contains("Part 1: Asked about products."), "{prompt}");

    // A model that fails: the facts written out instead.
    model.script(|_| (Reply::Status(400, None), Duration::ZERO));
    let fallback = summarise(&desk.platform, json!({"phoneNumber": "+15558000004"})).await;
    let recap = fallback["recap"].as_str().unwrap();
    assert!(
        recap.starts_with("Unterhaltung über sms (offen): 61 Nachrichten"),
        "{recap}"
    );
    assert!(
        recap.ends_with("Noch offen:\n- Die letzte Nachricht des Kontakts ist noch unbeantwortet."),
        "{recap}"
    );
});

on_both_databases!(summaries_refuse_bad_input, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let desk = desk(&server, &twilio, json!({})).await;
    let platform = &desk.platform;
    for (body, field) in [
        (json!({}), "phoneNumber"),
        (json!({"phoneNumber": "", "email": " "}), "phoneNumber"),
        (
            json!({"phoneNumber": "+15558000005", "email": "a@example.com"}),
            "email",
        ),
        (json!({"phoneNumber": "9812345678"}), "phoneNumber"),
        (json!({"phoneNumber": "+0123456789"}), "phoneNumber"),
        (json!({"email": "not-an-address"}), "email"),
    ] {
        let answer = platform.send("POST", "/v1/summaries", Some(body.clone())).await;
        assert_invalid(&answer, field, &body.to_string());
    }
    assert_not_found(
        &platform
            .send("POST", "/v1/summaries", Some(json!({"phoneNumber": "+15558000006"})))
            .await,
        "no such contact",
    );
    platform
        .ok("POST", "/v1/contacts", Some(json!({"phone": "+15558000007"})))
        .await;
    let none = platform
        .send("POST", "/v1/summaries", Some(json!({"phoneNumber": "+15558000007"})))
        .await;
    assert_not_found(&none, "a contact without a conversation");
    assert!(none.body.to_string().contains("no conversation"), "{}", none.body);
    // Another account's contact is no contact.
    inbound(&server, &desk, "+15558000008", "What are your opening hours?").await;
    let other = Platform::new(&server).await;
    assert_not_found(
        &other
            .send("POST", "/v1/summaries", Some(json!({"phoneNumber": "+15558000008"})))
            .await,
        "another account's contact",
    );

    for (query, field) in [
        ("?date=2026-13-01", "date"),
        ("?date=20261101", "date"),
        ("?date=tomorrow", "date"),
        ("?date=2999-01-01", "date"),
        ("?tz=Mars/Olympus_Mons", "tz"),
        ("?date=2026-11-01&tz=UTC%2B2", "tz"),
    ] {
        let answer = platform.send("GET", &format!("/v1/summaries/daily{query}"), None).await;
        assert_invalid(&answer, field, query);
    }
    let today = platform.get("/v1/summaries/daily").await["daily_summary"].clone();
    assert_eq!(today["date"], Utc::now().date_naive().to_string());
    assert_eq!(today["tz"], "UTC");

    let deals_only = admin::issue_key(&server, &platform.account_id, &["deals"]).await;
    let scoped = Platform::of(&server, &platform.account_id, &deals_only);
    let phone = json!({"phoneNumber": "+15558000008"});
    assert_insufficient_scope(
        &scoped.send("POST", "/v1/summaries", Some(phone.clone())).await,
        "POST /v1/summaries",
    );
    assert_insufficient_scope(
        &scoped.send("GET", "/v1/summaries/daily", None).await,
        "GET /v1/summaries/daily",
    );
    let summaries = admin::issue_key(&server, &platform.account_id, &["summaries"]).await;
    let allowed = Platform::of(&server, &platform.account_id, &summaries);
    assert_eq!(summarise(&allowed, phone).await["conversation_status"], "open");
});

fn at(rfc3339: &str) -> DateTime<Utc> {
    rfc3339.parse().unwrap()
}

async fn daily(platform: &Platform<'_>, query: &str) -> Value {
    platform.get(&format!("/v1/summaries/daily?{query}")).await["daily_summary"].clone()
}

on_both_databases!(
    the_daily_summary_counts_a_scripted_day_in_its_time_zone,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let model = FakeModel::start().await;
        model.script(|request| {
            let reply = if asks_recap(request) {
                Reply::text("Ravi booked Friday at 10 and waits for a person.")
            } else if !request.tool_results().is_empty() {
                Reply::text("Booked.")
            } else if request.last_user_text().contains("book") {
                let booking = json!({"start_time": "2026-11-27T04:30:00Z", "name": "Ravi", "notes": "Friday"});
                Reply::call("call_1", "book_appointment", booking)
            } else {
                Reply::text("Happy to help.")
            };
            (reply, Duration::ZERO)
        });
        // Conversations stay open past the script's two days (the idle sweep runs whenever the clock is
        // moved, and a conversation idle a whole day at 18:40 on the 20th would close on the edge of it).
        let env = [
            ("FRONTDESK_REPLY_DEBOUNCE_MS", "0"),
            ("FRONTDESK_TEST_CLOCK", "true"),
            ("FRONTDESK_CONVERSATION_IDLE_HOURS", "72"),
            ("FRONTDESK_MODEL_PROVIDER", "openai"),
            ("OPENAI_BASE_URL", &model.openai_base_url()),
            ("OPENAI_API_KEY", "sk-openai-server"),
        ];
        let server = sms::start(&db, &twilio, &env).await;
        let booking = json!({"booking": {"enabled": true, "link": "https://cal.example/ava"}});
        let desk = desk(&server, &twilio, booking).await;
        let platform = &desk.platform;
        let other = Platform::new(&server).await;

        // 23:50 on the 19th in Kolkata (UTC+5:30): a question, answered.
        clock_at(&server, at("2026-11-19T18:20:00Z")).await;
        inbound(&server, &desk, "+15558000011", "Do you have parking?").await;
        // 00:10 on the 20th there, still the 19th in UTC: a booking.
        clock_at(&server, at("2026-11-19T18:40:00Z")).await;
        inbound(&server, &desk, "+15558000012", "Can I book Friday at 10?").await;
        // The 20th in both: a deal, a send that fails, a handoff, the first conversation closed; and another
        // account's deal, which counts only for it.
        clock_at(&server, at("2026-11-20T09:00:00Z")).await;
        platform.deal("Wedding package").await;
        other.deal("Not ours").await;
        twilio.then_error(400, 21211, "Invalid 'To' Phone Number");
        let failed = sms::send(platform, "sms", "+15558000011", "Your order shipped").await;
        sms::message_when(platform, &failed, |m| m["status"] == "failed").await;
        let booked = platform.conversation_with("+15558000012").await["conversation"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let asked = platform.conversation_with("+15558000011").await["conversation"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        platform
            .ok(
                "POST",
                &format!("/v1/conversations/{booked}/handoff"),
                Some(json!({"reason": "VIP"})),
            )
            .await;
        platform
            .ok("POST", &format!("/v1/conversations/{asked}/close"), None)
            .await;
        // A summary is charged that day; an operator's debit is no charge of the service.
        summarise(platform, json!({"phoneNumber": "+15558000012"})).await;
        let debit = CreditsRequest {
            account_id: platform.account_id.clone(),
            credits: "5".into(),
            reason: "correction".into(),
        };
        admin::client(&server).await.debit_credits(debit).await.unwrap();
        // 00:10 on the 21st in Kolkata, the 20th in UTC: a third contact.
        clock_at(&server, at("2026-11-20T18:40:00Z")).await;
        inbound(&server, &desk, "+15558000013", "Any news?").await;
        clock_at(&server, at("2026-11-21T12:00:00Z")).await;

        let kolkata = daily(platform, "date=2026-11-20&tz=Asia/Kolkata").await;
        assert_eq!(
            (kolkata["date"].as_str(), kolkata["tz"].as_str()),
            (Some("2026-11-20"), Some("Asia/Kolkata"))
        );
        assert_eq!(
            kolkata["stats"],
            json!({
                "conversations_started": 1, "conversations_closed": 1, "messages_received": 1,
                "messages_sent": 1, "new_contacts": 1, "ai_replies": 1, "handoffs": 1,
                "appointments_booked": 1, "deals_created": 1, "messages_failed": 1, "credits_used": 2.0,
            }),
            "the 20th in Kolkata: {kolkata:#}"
        );
        let utc = daily(platform, "date=2026-11-20").await;
        assert_eq!(
            utc["stats"],
            json!({
                "conversations_started": 1, "conversations_closed": 1, "messages_received": 1,
                "messages_sent": 1, "new_contacts": 1, "ai_replies": 1, "handoffs": 1,
                "appointments_booked": 0, "deals_created": 1, "messages_failed": 1, "credits_used": 2.0,
            }),
            "the 20th in UTC: {utc:#}"
        );
        let before = daily(platform, "date=2026-11-19&tz=UTC").await;
        assert_eq!(
            before["stats"],
            json!({
                "conversations_started": 2, "conversations_closed": 0, "messages_received": 2,
                "messages_sent": 2, "new_contacts": 2, "ai_replies": 2, "handoffs": 0,
                "appointments_booked": 1, "deals_created": 0, "messages_failed": 0, "credits_used": 2.0,
            }),
            "the 19th in UTC: {before:#}"
        );

        let titles: Vec<&str> = kolkata["sections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["title"].as_str().unwrap())
            .collect();
        assert_eq!(titles, ["Overview", "Needs attention", "Appointments", "Deals"]);
        let markdown = |title: &str| {
            kolkata["sections"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["title"] == title)
                .unwrap()["markdown"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert!(
            markdown("Overview").starts_with("**1** conversation started, 1 closed."),
            "{}",
            markdown("Overview")
        );
        let attention = markdown("Needs attention");
        assert!(attention.contains("- **1** conversation waiting for a person:\n  - Answer the contact on sms (VIP) (since 2026-11-20 14:30)"), "{attention}");
        assert!(
            attention.contains("- **1** message could not be delivered."),
            "{attention}"
        );
        assert_eq!(markdown("Appointments"), "- 2026-11-27 10:00, Ravi, Friday");
        assert!(
            markdown("Deals").starts_with("- Wedding package: "),
            "{}",
            markdown("Deals")
        );
        let tasks = kolkata["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), 1, "{tasks:?}");
        assert_eq!(
            (tasks[0]["kind"].as_str(), tasks[0]["reason"].as_str()),
            (Some("handoff"), Some("VIP"))
        );

        let theirs = daily(&other, "date=2026-11-20").await;
        assert_eq!(theirs["stats"]["deals_created"], 1);
        assert_eq!(theirs["stats"]["messages_received"], 0);
        assert_eq!(theirs["tasks"], json!([]));
    }
);
