//! WhatsApp, Messenger and Instagram on Meta's wire protocols, end to end on SQLite and PostgreSQL + Redis:
//! the console's URL check, signed webhooks in Meta's documented shapes (fixtures) and in batches, sends,
//! templates and the 24-hour window, statuses in every order, reactions and read marks both ways, entry
//! points from `m.me` refs and `wa.me` prefilled text, and AI replies. A local server speaks the Graph API.

use std::time::Duration;

use chrono::Utc;
use frontdesk_tests::{
    Db, admin,
    meta::{
        self, FakeGraph, GraphCall, MetaChannel, PAGE_ID, PHONE_NUMBER_ID, PSID, fixture, messaging, whatsapp_batch,
        whatsapp_status, whatsapp_text,
    },
    on_both_databases,
    platform::Platform,
    sms,
    webhook_receiver::Receiver,
};
use serde_json::{Value, json};

/// The documented samples' WhatsApp contact.
const WA_ID: &str = "16505551234";
const WA_PHONE: &str = "+16505551234";
/// The message the documented reactions react to.
const REACTED_WAMID: &str = "wamid.HBgLMTQxMjU1NTA4MjkVAgASGBQzQUNCNjk5RDUwNUZGMUZEM0VBRAA=";
const DOCUMENTED_WAMID: &str = "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=";

async fn messages_of(platform: &Platform<'_>, conversation: &str) -> Vec<Value> {
    platform.get(&format!("/v1/conversations/{conversation}")).await["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The account's only conversation on `channel`, once there is one.
async fn conversation_on(platform: &Platform<'_>, channel: &str) -> Value {
    platform
        .poll(&format!("/v1/conversations?channel={channel}"), |list| {
            !list["conversations"].as_array().is_none_or(Vec::is_empty)
        })
        .await["conversations"][0]
        .clone()
}

async fn contact_by(platform: &Platform<'_>, query: &str) -> Value {
    let list = platform.get(&format!("/v1/contacts?q={}", urlencoding(query))).await;
    list["contacts"][0].clone()
}

fn urlencoding(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// Sends `text` to the documented WhatsApp contact, the only message Meta gets; its id and wamid once sent.
async fn sent_to_whatsapp(platform: &Platform<'_>, graph: &FakeGraph, text: &str) -> (String, String) {
    let sent = sms::send(platform, "wa", WA_PHONE, text).await;
    let calls = graph
        .wait_for("the send", |calls| calls.iter().any(GraphCall::is_message))
        .await;
    let wamid = calls.iter().find_map(|c| c.answered_id.clone()).unwrap();
    sms::message_when(platform, &sent, |m| m["status"] == "sent").await;
    (sent, wamid)
}

/// `POST /v1/contacts/send` with `body`, which must be accepted; the message's id.
async fn accepted(platform: &Platform<'_>, body: Value) -> String {
    let answer = platform.send("POST", "/v1/contacts/send", Some(body)).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    answer.body["message_id"].as_str().unwrap().to_owned()
}

on_both_databases!(whatsapp_checks_receives_and_sends, |db: Db| async move {
    let graph = FakeGraph::start().await;
    let server = meta::start(&db, &graph, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = MetaChannel::whatsapp(&platform, "wa").await;
    assert_eq!(
        channel.webhook_url,
        format!("{}/hooks/meta/{}", meta::PUBLIC_URL, channel.id)
    );
    assert!(
        channel.verify_token.len() >= 20,
        "a verify token is generated: {}",
        channel.verify_token
    );

    // The console's check of the URL.
    let check = |token: &str| {
        format!(
            "{}?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token={}",
            channel.local_url,
            urlencoding(token)
        )
    };
    let ok = reqwest::get(check(&channel.verify_token)).await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.text().await.unwrap(), "1158201444");
    assert_eq!(reqwest::get(check("wrong")).await.unwrap().status(), 403);

    // Meta's documented text message, delivered twice: stored once, with the profile's name.
    let body = fixture("whatsapp_text");
    for _ in 0..2 {
        let answer = channel.post(&body).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let conversation = conversation_on(&platform, "wa").await;
    let thread = messages_of(&platform, conversation["id"].as_str().unwrap()).await;
    assert_eq!(thread.len(), 1, "{thread:#?}");
    assert_eq!(conversation["channel_type"], "whatsapp");
    assert_eq!(
        (thread[0]["text"].clone(), thread[0]["provider_message_id"].clone()),
        (json!("Does it come in another color?"), json!(DOCUMENTED_WAMID))
    );
    let contact = contact_by(&platform, WA_PHONE).await;
    assert_eq!(contact["name"], "Sheena Nelson");
    assert_eq!(contact["phone"], WA_PHONE);
    assert_eq!(
        contact["identities"],
        json!([{"channel": "wa", "type": "whatsapp", "external_id": WA_ID}])
    );

    // A reply goes to the Cloud API with the channel's token.
    let sent = sms::send(&platform, "wa", WA_PHONE, "Yes, in blue and green.").await;
    let calls = graph
        .wait_for("a send", |calls| calls.iter().any(GraphCall::is_message))
        .await;
    assert_eq!(calls[0].path, format!("{PHONE_NUMBER_ID}/messages"));
    assert_eq!(calls[0].authorization, format!("Bearer {}", meta::WHATSAPP_TOKEN));
    assert_eq!(
        calls[0].body,
        json!({"messaging_product": "whatsapp", "recipient_type": "individual", "to": WA_ID, "type": "text",
            "text": {"preview_url": false, "body": "Yes, in blue and green."}})
    );
    let wamid = calls[0].answered_id.clone().unwrap();
    sms::message_when(&platform, &sent, |m| m["status"] == "sent").await;
    assert_eq!(
        platform.get(&format!("/v1/messages/{sent}")).await["message"]["provider_message_id"],
        wamid
    );

    // Statuses out of order and repeated: read first sets both times; a late delivered and repeats change
    // nothing.
    for status in ["read", "delivered", "read", "sent"] {
        assert_eq!(channel.post(&whatsapp_status(&wamid, status, WA_ID)).await.status, 200);
    }
    let message = sms::message_when(&platform, &sent, |m| m["status"] == "read").await;
    assert!(
        message["delivered_at"].is_string() && message["read_at"].is_string(),
        "{message}"
    );
    admin::quiesce(&server).await;
    assert_eq!(
        platform.get(&format!("/v1/messages/{sent}")).await["message"]["status"],
        "read"
    );
});

on_both_databases!(statuses_emit_each_event_once_in_order, |db: Db| async move {
    let graph = FakeGraph::start().await;
    let server = meta::start(&db, &graph, &[]).await;
    let platform = Platform::new(&server).await;
    let receiver = Receiver::start().await;
    platform
        .subscribe(&receiver.url, &["message.delivered", "message.read", "message.failed"])
        .await;
    let channel = MetaChannel::whatsapp(&platform, "wa").await;
    channel.post(&fixture("whatsapp_text")).await;
    let first = sms::send(&platform, "wa", WA_PHONE, "one").await;
    let second = sms::send(&platform, "wa", WA_PHONE, "two").await;
    let calls = graph
        .wait_for("two sends", |calls| {
            calls.iter().filter(|c| c.is_message()).count() == 2
        })
        .await;
    for id in [&first, &second] {
        sms::message_when(&platform, id, |m| m["status"] == "sent").await;
    }
    let wamid = |text: &str| {
        calls
            .iter()
            .find(|c| c.body["text"]["body"] == text)
            .and_then(|c| c.answered_id.clone())
            .unwrap()
    };
    // Both statuses of the first in one batch, read before delivered, then a duplicate delivery of the
    // whole batch; the second fails.
    let batch = meta::whatsapp_value(json!({"statuses": [
        {"id": wamid("one"), "status": "read", "timestamp": "2", "recipient_id": WA_ID},
        {"id": wamid("one"), "status": "delivered", "timestamp": "1", "recipient_id": WA_ID},
    ]}));
    for _ in 0..2 {
        assert_eq!(channel.post(&batch).await.status, 200);
    }
    channel.post(&whatsapp_status(&wamid("two"), "failed", WA_ID)).await;
    let failed = sms::message_when(&platform, &second, |m| m["status"] == "failed").await;
    assert_eq!(failed["error"]["code"], "131026", "{failed}");
    receiver.wait_until(Duration::from_secs(30), |d| d.len() >= 3).await;
    admin::quiesce(&server).await;
    // Each state once, with the message as it stood at that state (deliveries may arrive in any order).
    let mut events: Vec<(String, String, String)> = receiver
        .deliveries()
        .iter()
        .map(|d| {
            let field = |value: &Value| value.as_str().unwrap_or_default().to_owned();
            (
                field(&d.json["type"]),
                field(&d.json["data"]["id"]),
                field(&d.json["data"]["status"]),
            )
        })
        .collect();
    events.sort();
    let event = |kind: &str, id: &str, status: &str| (kind.to_owned(), id.to_owned(), status.to_owned());
    assert_eq!(
        events,
        [
            event("message.delivered", &first, "delivered"),
            event("message.failed", &second, "failed"),
            event("message.read", &first, "read"),
        ]
    );
});

on_both_databases!(templates_and_the_24_hour_window, |db: Db| async move {
    let graph = FakeGraph::start().await;
    let server = meta::start(&db, &graph, &[("FRONTDESK_TEST_CLOCK", "true")]).await;
    let start = Utc::now() + chrono::Duration::days(1);
    admin::clock_at(&server, start).await;
    let platform = Platform::new(&server).await;
    let channel = MetaChannel::whatsapp(&platform, "wa").await;

    // No message from the contact yet: free-form text fails before any call to Meta; a template goes.
    let cold = sms::send(&platform, "wa", "+16505550199", "Your order shipped").await;
    let failed = sms::message_when(&platform, &cold, |m| m["status"] == "failed").await;
    assert_eq!(failed["error"]["code"], "outside_window", "{failed}");
    let template = json!({"name": "order_update", "language": "en_US", "parameters": ["4417", "Friday"]});
    let body = json!({"phone": "+16505550199", "channel": "wa", "template": template});
    let answer = platform.send("POST", "/v1/contacts/send", Some(body)).await;
    assert_eq!(answer.status, 202, "a template needs no text: {}", answer.body);
    let templated = answer.body["message_id"].as_str().unwrap().to_owned();
    let calls = graph.wait_for("the template", |calls| !calls.is_empty()).await;
    assert_eq!(calls.len(), 1, "the free-form text never reached Meta: {calls:#?}");
    assert_eq!(
        calls[0].body,
        json!({"messaging_product": "whatsapp", "recipient_type": "individual", "to": "16505550199", "type": "template",
            "template": {"name": "order_update", "language": {"code": "en_US"},
                "components": [{"type": "body", "parameters": [{"type": "text", "text": "4417"}, {"type": "text", "text": "Friday"}]}]}})
    );
    let stored = sms::message_when(&platform, &templated, |m| m["status"] == "sent").await;
    assert_eq!(stored["text"], "[template order_update (en_US): 4417, Friday]");

    // The contact writes: free-form text goes for 24 hours, then fails again; templates still go.
    channel
        .post(&whatsapp_batch(&[whatsapp_text("16505550199", "wamid.IN1", "Thanks!")]))
        .await;
    admin::clock_at(&server, start + chrono::Duration::hours(23)).await;
    let inside = sms::send(&platform, "wa", "+16505550199", "You are welcome").await;
    sms::message_when(&platform, &inside, |m| m["status"] == "sent").await;
    admin::clock_at(&server, start + chrono::Duration::hours(25)).await;
    let outside = sms::send(&platform, "wa", "+16505550199", "Still there?").await;
    let late = sms::message_when(&platform, &outside, |m| m["status"] == "failed").await;
    assert_eq!(late["error"]["code"], "outside_window");
    let body = json!({"phone": "+16505550199", "channel": "wa", "text": "Checking in", "template": template});
    let again = accepted(&platform, body).await;
    sms::message_when(&platform, &again, |m| m["status"] == "sent").await;
    let sent_texts: Vec<Value> = graph
        .calls()
        .iter()
        .filter(|c| c.is_message())
        .map(|c| c.body["type"].clone())
        .collect();
    assert_eq!(sent_texts, [json!("template"), json!("text"), json!("template")]);

    // Templates are WhatsApp's only.
    let sms_template = json!({"phone": "+16505550199", "text": "x", "template": template, "channel": "nope"});
    assert_eq!(
        platform
            .send("POST", "/v1/contacts/send", Some(sms_template))
            .await
            .status,
        400
    );
});

on_both_databases!(bad_callbacks_store_nothing, |db: Db| async move {
    let graph = FakeGraph::start().await;
    let server = meta::start(&db, &graph, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = MetaChannel::whatsapp(&platform, "wa").await;
    let body = fixture("whatsapp_text");
    let wrong = meta::signature("not-the-secret", body.as_bytes());
    for (signature, case) in [(None, "missing"), (Some(wrong.as_str()), "wrong")] {
        let answer = channel.post_with(&body, signature).await;
        assert_eq!(answer.status, 401, "{case}: {}", answer.body);
    }
    let tampered = body.replace("another color", "a discount");
    let answer = channel
        .post_with(&tampered, Some(&meta::signature(meta::APP_SECRET, body.as_bytes())))
        .await;
    assert_eq!(answer.status, 401, "a signature over another body");
    for (malformed, case) in [
        ("{\"object\": ", "not JSON"),
        ("{\"entry\": []}", "no object"),
        (
            r#"{"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages", "value": {"metadata": {"phone_number_id": "106540352242922"}, "messages": [{"from": "1", "type": "text"}]}}]}]}"#,
            "a message without its id",
        ),
    ] {
        let answer = channel.post(malformed).await;
        assert_eq!(answer.status, 400, "{case}: {}", answer.body);
        let error: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(error["error"]["code"], "invalid_argument", "{case}");
    }
    // Half of a batch malformed: the whole batch is refused, nothing of it stored.
    let mut half =
        serde_json::from_str::<Value>(&whatsapp_batch(&[whatsapp_text("15550001111", "wamid.A", "fine")])).unwrap();
    half["entry"][0]["changes"][0]["value"]["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"from": "15550002222", "type": "text"}));
    assert_eq!(channel.post(&half.to_string()).await.status, 400);
    let other_number = body.replace(PHONE_NUMBER_ID, "999999");
    assert_eq!(
        channel.post(&other_number).await.status,
        404,
        "another number's payload"
    );
    let unknown = format!("{}/hooks/meta/ch_{}", server.url(""), "0".repeat(20));
    assert_eq!(
        meta::post_to(
            &unknown,
            &body,
            Some(&meta::signature(meta::APP_SECRET, body.as_bytes()))
        )
        .await
        .status,
        404
    );
    // Refused while it arrives: the answer may come before the body is all sent.
    let huge = format!("{{\"object\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let signed = meta::signature(meta::APP_SECRET, huge.as_bytes());
    let headers = [
        ("Content-Type", "application/json"),
        ("X-Hub-Signature-256", signed.as_str()),
    ];
    let path = channel.local_url.trim_start_matches(&server.url(""));
    let status = frontdesk_tests::raw_post::status(&server.http, path, &headers, huge.into_bytes(), false).await;
    assert_eq!(status, 413);
    let list = platform.get("/v1/conversations").await;
    assert_eq!(list["conversations"], json!([]), "nothing was stored: {list}");
    assert_eq!(platform.get("/v1/contacts").await["contacts"], json!([]));
    assert!(!server.logs().contains("another color"), "bodies are not logged");
});

on_both_databases!(a_batch_of_fifty_stores_fifty, |db: Db| async move {
    let graph = FakeGraph::start().await;
    let server = meta::start(&db, &graph, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = MetaChannel::whatsapp(&platform, "wa").await;
    let messages: Vec<Value> = (0..50)
        .map(|i| {
            whatsapp_text(
                &format!("1555000{:04}", i % 25),
                &format!("wamid.batch{i}"),
                &format!("question {i}"),
            )
        })
        .collect();
    let batch = whatsapp_batch(&messages);
    for _ in 0..2 {
        let answer = channel.post(&batch).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let conversations = platform.get("/v1/conversations?limit=100").await["conversations"]
        .as_array()
        .cloned()
        .unwrap();
    assert_eq!(conversations.len(), 25, "two messages from each of 25 contacts");
    let mut stored = 0;
    for conversation in &conversations {
        let thread = messages_of(&platform, conversation["id"].as_str().unwrap()).await;
        assert_eq!(thread.len(), 2, "{thread:#?}");
        assert!(thread[0]["text"].as_str().unwrap().starts_with("question "));
        stored += thread.len();
    }
    assert_eq!(stored, 50);
    let contacts = platform.get("/v1/contacts?limit=100").await["contacts"]
        .as_array()
        .cloned()
        .unwrap();
    assert_eq!(contacts.len(), 25);
    assert!(
        contacts
            .iter()
            .all(|c| c["name"].as_str().unwrap().starts_with("Contact 1555000"))
    );
});

on_both_databases!(reactions_and_read_marks_go_both_ways, |db: Db| async move {
    let graph = FakeGraph::start().await;
    let server = meta::start(&db, &graph, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = MetaChannel::whatsapp(&platform, "wa").await;
    channel.post(&fixture("whatsapp_text")).await;
    let conversation = conversation_on(&platform, "wa").await;
    let conversation_id = conversation["id"].as_str().unwrap();
    assert_eq!(conversation["unread_count"], 1);

    // Marking the conversation read tells WhatsApp, once, naming the contact's latest message.
    for _ in 0..2 {
        platform
            .ok("POST", &format!("/v1/conversations/{conversation_id}/read"), None)
            .await;
    }
    let calls = graph.wait_for("a read mark", |calls| !calls.is_empty()).await;
    assert_eq!(
        calls[0].body,
        json!({"messaging_product": "whatsapp", "status": "read", "message_id": DOCUMENTED_WAMID})
    );

    // The business reacts to the contact's message; then takes it back.
    let inbound = messages_of(&platform, conversation_id).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let react = |emoji: &str| json!({"emoji": emoji});
    platform
        .ok(
            "POST",
            &format!("/v1/messages/{inbound}/reactions"),
            Some(react("\u{1F44D}")),
        )
        .await;
    platform
        .ok("POST", &format!("/v1/messages/{inbound}/reactions"), Some(react("")))
        .await;
    // The reaction's job runs with the message's reaction as it stands: the 👍 is sent and taken back, or,
    // when the removal came before the job ran, only the removal is; a run that read the removal while the
    // removal's own change asked for one more run sends it twice. Never a 👍 after it.
    let taken_back = json!({"message_id": DOCUMENTED_WAMID, "emoji": ""});
    let calls = graph
        .wait_for("the reaction taken back", |calls| {
            calls.last().is_some_and(|c| c.body["reaction"] == taken_back)
        })
        .await;
    let reactions: Vec<Value> = calls[1..].iter().map(|c| c.body["reaction"].clone()).collect();
    let thumbs = json!({"message_id": DOCUMENTED_WAMID, "emoji": "\u{1F44D}"});
    assert!(
        reactions == [thumbs.clone(), taken_back.clone()]
            || reactions == [taken_back.clone()]
            || reactions == [taken_back.clone(), taken_back],
        "{reactions:?}"
    );
    admin::quiesce(&server).await;
    let reads = graph.calls().iter().filter(|c| c.body["status"] == "read").count();
    assert_eq!(reads, 1, "one read mark however often the conversation is marked read");

    // The contact reacts to our message, then takes it back: the documented reaction bodies.
    let (sent, wamid) = sent_to_whatsapp(&platform, &graph, "Blue or green?").await;
    let reaction = fixture("whatsapp_reaction").replace(REACTED_WAMID, &wamid);
    assert_eq!(channel.post(&reaction).await.status, 200);
    let message = sms::message_when(&platform, &sent, |m| {
        m["reactions"].as_array().is_some_and(|r| !r.is_empty())
    })
    .await;
    assert_eq!(message["reactions"][0]["emoji"], "\u{1F44D}");
    assert_eq!(message["reactions"][0]["author"], "contact");
    let removed = fixture("whatsapp_reaction_removed").replace(REACTED_WAMID, &wamid);
    channel.post(&removed).await;
    sms::message_when(&platform, &sent, |m| m["reactions"] == json!([])).await;
    assert_eq!(
        messages_of(&platform, conversation_id).await.len(),
        2,
        "reactions are not messages"
    );
});

on_both_databases!(meta_errors_fail_or_retry_the_send, |db: Db| async move {
    let graph = FakeGraph::start().await;
    let server = meta::start(&db, &graph, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = MetaChannel::whatsapp(&platform, "wa").await;
    channel.post(&fixture("whatsapp_text")).await;
    graph.then_error(400, 131047, "(#131047) Re-engagement message");
    let refused = sms::send(&platform, "wa", WA_PHONE, "refused").await;
    let failed = sms::message_when(&platform, &refused, |m| m["status"] == "failed").await;
    assert_eq!(failed["error"]["code"], "131047");
    assert_eq!(failed["error"]["message"], "(#131047) Re-engagement message");
    graph.then_error(400, 130429, "(#130429) Rate limit hit");
    graph.then_error(503, 1, "temporarily unavailable");
    let retried = sms::send(&platform, "wa", WA_PHONE, "retried").await;
    sms::message_when(&platform, &retried, |m| m["status"] == "sent").await;
    let tries = graph
        .calls()
        .iter()
        .filter(|c| c.body["text"]["body"] == "retried")
        .count();
    assert_eq!(tries, 3);
});

on_both_databases!(messenger_and_instagram_send_and_receive, |db: Db| async move {
    let graph = FakeGraph::start().await;
    let server = meta::start(&db, &graph, &[("FRONTDESK_TEST_CLOCK", "true")]).await;
    let platform = Platform::new(&server).await;
    let page = MetaChannel::messenger(&platform, "fb").await;
    let instagram = MetaChannel::instagram(&platform, "ig").await;
    let check = format!(
        "{}?hub.mode=subscribe&hub.challenge=abc&hub.verify_token={}",
        page.local_url, page.verify_token
    );
    assert_eq!(reqwest::get(check).await.unwrap().text().await.unwrap(), "abc");

    let answer = page.post(&fixture("messenger_message")).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "EVENT_RECEIVED"));
    let conversation = conversation_on(&platform, "fb").await;
    let conversation_id = conversation["id"].as_str().unwrap().to_owned();
    assert_eq!(
        messages_of(&platform, &conversation_id).await[0]["text"],
        "hello, world!"
    );
    let contact = platform
        .get(&format!(
            "/v1/contacts/{}",
            conversation["contact_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        contact["contact"]["identities"],
        json!([{"channel": "fb", "type": "messenger", "external_id": PSID}])
    );

    // Our reply, then delivery and read by watermark: Meta stamps the watermark as it took our message; a
    // message sent well after it is not covered.
    let body = json!({"channel": "fb", "external_id": PSID, "text": "Hi! How can we help?"});
    let sent = accepted(&platform, body).await;
    let calls = graph
        .wait_for("a send", |calls| calls.iter().any(GraphCall::is_message))
        .await;
    assert_eq!(calls[0].path, "me/messages");
    assert_eq!(calls[0].authorization, format!("Bearer {}", meta::PAGE_TOKEN));
    assert_eq!(
        calls[0].body,
        json!({"recipient": {"id": PSID}, "messaging_type": "RESPONSE", "message": {"text": "Hi! How can we help?"}})
    );
    sms::message_when(&platform, &sent, |m| m["status"] == "sent").await;
    let now_ms = Utc::now().timestamp_millis();
    // The next message goes out past the watermark's second of slack.
    admin::clock_at(&server, Utc::now() + chrono::Duration::seconds(2)).await;
    let body = json!({"channel": "fb", "external_id": PSID, "text": "Are you still there?"});
    let later = accepted(&platform, body).await;
    sms::message_when(&platform, &later, |m| m["status"] == "sent").await;
    let event = |kind: &str, report: Value| {
        let mut event = json!({"sender": {"id": PSID}, "recipient": {"id": PAGE_ID}, "timestamp": now_ms});
        event[kind] = report;
        event
    };
    // Read arrives before delivered; the delivery then changes nothing.
    let read = messaging("page", PAGE_ID, &[event("read", json!({"watermark": now_ms}))]);
    let delivered = messaging("page", PAGE_ID, &[event("delivery", json!({"watermark": now_ms}))]);
    for body in [&read, &delivered, &read] {
        assert_eq!(page.post(body).await.status, 200);
    }
    let message = sms::message_when(&platform, &sent, |m| m["status"] == "read").await;
    assert!(message["delivered_at"].is_string(), "{message}");
    let after = platform.get(&format!("/v1/messages/{later}")).await["message"].clone();
    assert_eq!(after["status"], "sent", "sent after the watermark: {after}");

    // The contact reacts; the business marks the conversation read (mark_seen).
    let reaction = messaging(
        "page",
        PAGE_ID,
        &[event(
            "reaction",
            json!({"reaction": "love", "emoji": "\u{2764}\u{FE0F}", "action": "react", "mid": message["provider_message_id"]}),
        )],
    );
    page.post(&reaction).await;
    sms::message_when(&platform, &sent, |m| m["reactions"][0]["author"] == "contact").await;
    platform
        .ok("POST", &format!("/v1/conversations/{conversation_id}/read"), None)
        .await;
    let calls = graph
        .wait_for("mark_seen", |calls| {
            calls.iter().any(|c| c.body["sender_action"] == "mark_seen")
        })
        .await;
    assert!(
        calls
            .iter()
            .any(|c| c.body == json!({"recipient": {"id": PSID}, "sender_action": "mark_seen"}))
    );

    // Instagram: its own identities, the same send path, and its events are not the page's.
    assert_eq!(page.post(&fixture("instagram_message")).await.status, 404);
    assert_eq!(instagram.post(&fixture("instagram_message")).await.status, 200);
    let ig = conversation_on(&platform, "ig").await;
    let ig_contact = platform
        .get(&format!("/v1/contacts/{}", ig["contact_id"].as_str().unwrap()))
        .await;
    assert_eq!(ig_contact["contact"]["identities"][0]["type"], "instagram");
    let body = json!({"channel": "ig", "external_id": "7654321098765432", "text": "Yes, 10 to 4."});
    accepted(&platform, body).await;
    graph
        .wait_for("the instagram send", |calls| {
            calls
                .iter()
                .any(|c| c.body["recipient"]["id"] == "7654321098765432" && c.is_message())
        })
        .await;
});

on_both_databases!(entry_points_follow_refs_and_ai_replies_answer, |db: Db| async move {
    let graph = FakeGraph::start().await;
    let server = meta::start(&db, &graph, &[("FRONTDESK_REPLY_DEBOUNCE_MS", "200")]).await;
    let platform = Platform::new(&server).await;
    let whatsapp = MetaChannel::whatsapp(&platform, "wa").await;
    let page = MetaChannel::connect(
        &platform,
        "fb2",
        "messenger",
        json!({"page_id": "5550001", "access_token": meta::PAGE_TOKEN, "app_secret": meta::APP_SECRET}),
    )
    .await;
    let general = platform.agent("General").await;
    let promo = platform.agent("Promo").await;
    for channel in ["fb2", "wa"] {
        platform
            .ok(
                "PUT",
                "/v1/entry-points/channel-defaults",
                Some(json!({"channel": channel, "agent_id": general})),
            )
            .await;
        let rule = json!({"channel": channel, "match": {"ref": "spring_promo"}, "priority": 10});
        platform
            .ok("POST", &format!("/v1/agents/{promo}/entry-points"), Some(rule))
            .await;
    }
    platform
        .faq(
            &promo,
            "What is in the spring promotion?",
            "Twenty percent off every plant until May.",
        )
        .await;

    // An m.me link with a ref opens the thread: the conversation goes to the promotion's agent, and the
    // referral itself asks nothing.
    let referral = fixture("messenger_referral").replace(PAGE_ID, "5550001");
    assert_eq!(page.post(&referral).await.status, 200);
    let conversation = conversation_on(&platform, "fb2").await;
    assert_eq!(conversation["agent_id"], promo);
    let question = messaging(
        "page",
        "5550001",
        &[json!({"sender": {"id": PSID}, "recipient": {"id": "5550001"},
        "timestamp": 1, "message": {"mid": "m_q1", "text": "What is in the spring promotion?"}})],
    );
    page.post(&question).await;
    let calls = graph
        .wait_for("the AI reply on messenger", |calls| {
            calls.iter().any(GraphCall::is_message)
        })
        .await;
    assert_eq!(
        calls.iter().filter(|c| c.is_message()).count(),
        1,
        "one reply: the referral asked nothing: {calls:#?}"
    );
    assert_eq!(
        calls[0].body["message"]["text"],
        "Twenty percent off every plant until May."
    );

    // A wa.me link's prefilled text carries the ref; a sticker that follows is stored and not answered.
    let prefilled = whatsapp_text(
        WA_ID,
        "wamid.Q1",
        "Hi! (ref:spring_promo) What is in the spring promotion?",
    );
    whatsapp.post(&whatsapp_batch(&[prefilled])).await;
    let wa = conversation_on(&platform, "wa").await;
    assert_eq!(wa["agent_id"], promo);
    let calls = graph
        .wait_for("the AI reply on whatsapp", |calls| {
            calls.iter().filter(|c| c.is_message()).count() == 2
        })
        .await;
    let reply = calls.iter().filter(|c| c.is_message()).nth(1).unwrap();
    assert_eq!(reply.body["to"], WA_ID);
    assert_eq!(reply.body["text"]["body"], "Twenty percent off every plant until May.");
    let sticker = fixture("whatsapp_sticker");
    whatsapp.post(&sticker).await;
    // Past the 200 ms debounce a reply would have waited for, then quiet: none came.
    tokio::time::sleep(Duration::from_millis(300)).await;
    admin::quiesce(&server).await;
    assert_eq!(
        graph.calls().iter().filter(|c| c.is_message()).count(),
        2,
        "a sticker asks nothing"
    );
    let thread = messages_of(&platform, wa["id"].as_str().unwrap()).await;
    assert_eq!(thread.last().unwrap()["text"], "[sticker]");
});

// Lookups by a provider's message id are the channel's own: another account's channel that is handed the
// same ids changes nothing of ours.
on_both_databases!(another_channel_s_reports_touch_nothing_of_ours, |db: Db| async move {
    let graph = FakeGraph::start().await;
    let server = meta::start(&db, &graph, &[]).await;
    let ours = Platform::new(&server).await;
    let theirs = Platform::new(&server).await;
    let channel = MetaChannel::whatsapp(&ours, "wa").await;
    let config = json!({"phone_number_id": "222", "access_token": "EAAG-other", "app_secret": meta::APP_SECRET});
    let other = MetaChannel::connect(&theirs, "wa", "whatsapp", config).await;
    channel.post(&fixture("whatsapp_text")).await;
    let (sent, wamid) = sent_to_whatsapp(&ours, &graph, "Yes, in blue.").await;
    let for_other = |body: String| body.replace(PHONE_NUMBER_ID, "222");
    let reaction = fixture("whatsapp_reaction").replace(REACTED_WAMID, &wamid);
    for body in [whatsapp_status(&wamid, "read", WA_ID), reaction] {
        assert_eq!(other.post(&for_other(body)).await.status, 200);
    }
    admin::quiesce(&server).await;
    let message = ours.get(&format!("/v1/messages/{sent}")).await["message"].clone();
    assert_eq!(
        (message["status"].clone(), message["reactions"].clone()),
        (json!("sent"), json!([]))
    );
});

// The business's reactions and the contact's land on one message at once: neither overwrites the other.
on_both_databases!(concurrent_reactions_keep_both_authors, |db: Db| async move {
    let graph = FakeGraph::start().await;
    let server = meta::start(&db, &graph, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = MetaChannel::whatsapp(&platform, "wa").await;
    channel.post(&fixture("whatsapp_text")).await;
    let (sent, wamid) = sent_to_whatsapp(&platform, &graph, "Blue or green?").await;
    let emojis = ["\u{1F600}", "\u{1F44D}", "\u{2764}\u{FE0F}", "\u{1F389}", "\u{1F64F}"];
    let business = {
        let key = platform.key.clone();
        let url = server.url(&format!("/v1/messages/{sent}/reactions"));
        tokio::spawn(async move {
            for round in 0..20 {
                let body = json!({"emoji": emojis[round % emojis.len()]}).to_string();
                let answer = frontdesk_tests::call_with("POST", &url, &[("x-api-key", &key)], Some(&body)).await;
                assert_eq!(answer.status, 200, "{}", answer.body);
            }
        })
    };
    for round in 0..20 {
        let emoji = emojis[(round + 2) % emojis.len()];
        let body = meta::whatsapp_value(json!({"messages": [{"from": WA_ID, "id": format!("wamid.react{round}"),
            "timestamp": "1", "type": "reaction", "reaction": {"message_id": wamid, "emoji": emoji}}]}));
        assert_eq!(channel.post(&body).await.status, 200);
    }
    business.await.unwrap();
    let message = platform.get(&format!("/v1/messages/{sent}")).await["message"].clone();
    let mut reactions: Vec<(String, String)> = message["reactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["author"].as_str().unwrap().to_owned(),
                r["emoji"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    reactions.sort();
    let last = |round: usize| emojis[round % emojis.len()].to_owned();
    assert_eq!(
        reactions,
        [("api".to_owned(), last(19)), ("contact".to_owned(), last(19 + 2))],
        "each author's last reaction"
    );
});

// The business reacts and takes the reaction back 50 times in a row, then reacts once more, while the Graph
// API takes each call in after a random wait of up to 50 ms. Reactions used to be one job per change, run
// side by side: the customer's phone kept whichever landed last. The provider's state must end as the
// message's: 👍.
on_both_databases!(
    fifty_reactions_in_a_row_leave_the_providers_state_as_the_last,
    |db: Db| async move {
        let graph = FakeGraph::start().await;
        let server = meta::start(&db, &graph, &[]).await;
        let platform = Platform::new(&server).await;
        let channel = MetaChannel::whatsapp(&platform, "wa").await;
        channel.post(&fixture("whatsapp_text")).await;
        let conversation = conversation_on(&platform, "wa").await;
        let conversation_id = conversation["id"].as_str().unwrap();
        let inbound = messages_of(&platform, conversation_id).await[0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        graph.jitter(Duration::from_millis(50));
        let path = format!("/v1/messages/{inbound}/reactions");
        for _ in 0..50 {
            for emoji in ["\u{1F44D}", ""] {
                platform.ok("POST", &path, Some(json!({"emoji": emoji}))).await;
            }
        }
        platform.ok("POST", &path, Some(json!({"emoji": "\u{1F44D}"}))).await;
        let last_reaction = |calls: &[meta::GraphCall]| {
            calls
                .iter()
                .rev()
                .find(|c| c.body["type"] == "reaction")
                .map(|c| c.body["reaction"]["emoji"].clone())
        };
        let started = std::time::Instant::now();
        let mut quiet_since = (graph.calls().len(), std::time::Instant::now());
        loop {
            let calls = graph.calls();
            if calls.len() != quiet_since.0 {
                quiet_since = (calls.len(), std::time::Instant::now());
            } else if quiet_since.1.elapsed() > Duration::from_secs(2) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the reactions never settled"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let calls = graph.calls();
        assert_eq!(
            last_reaction(&calls),
            Some(json!("\u{1F44D}")),
            "the provider's last reaction is the message's; {} reaction calls",
            calls.len()
        );
    }
);
