//! Sending and receiving over SMS through the real binary, with a local server speaking Twilio's REST
//! protocol (Basic auth and form fields checked) and Twilio's callbacks signed as Twilio signs them; on
//! SQLite and PostgreSQL + Redis. The round trip send -> sent -> delivered -> read with its signed webhook
//! events, late callbacks, idempotency under concurrency, provider errors and retries, inbound messages
//! stored once, bad signatures (inbound and status callbacks), bad input, tenant isolation, the channel a send
//! goes out on (the contact's latest conversation's), sends by contact id or channel identity, STOP / START
//! as `contact.updated`, and a SIGKILL with 400 accepted sends in flight.

use std::time::Duration;

use frontdesk_api::v1::{GetMessageRequest, SendToContactRequest, messages_client::MessagesClient};
use frontdesk_tests::{
    Db, on_both_databases,
    platform::{Platform, assert_invalid, assert_not_found},
    sms::{self, SmsChannel, message_when},
    twilio::{self, FakeTwilio, new_message_sid},
    webchat::{Channel, Visitor},
    webhook_receiver::{Delivery, Receiver},
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// `(type, data.id, data.status)` of each delivery.
fn summary(deliveries: &[Delivery]) -> Vec<(String, String, String)> {
    deliveries
        .iter()
        .map(|d| {
            (
                d.json["type"].as_str().unwrap_or_default().to_owned(),
                d.json["data"]["id"].as_str().unwrap_or_default().to_owned(),
                d.json["data"]["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

async fn send(platform: &Platform<'_>, body: Value) -> Value {
    let answer = platform.send("POST", "/v1/contacts/send", Some(body)).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    assert_eq!(answer.body["status"], "queued");
    answer.body
}

on_both_databases!(round_trip_with_signed_events, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = SmsChannel::connect(&platform, &twilio, "sms", None).await;
    assert!(
        channel.id.starts_with("ch_") && channel.id.len() == 23,
        "{}",
        channel.id
    );
    assert_eq!(
        channel.webhook_url,
        format!("{}/hooks/twilio/{}", sms::PUBLIC_URL, channel.id)
    );
    let receiver = Receiver::start().await;
    let secret = platform.subscribe(&receiver.url, &["*"]).await;

    let accepted = send(
        &platform,
        json!({"phone": "+15550100001", "text": "Hello from the desk"}),
    )
    .await;
    let id = accepted["message_id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("msg_") && accepted["contact_id"].as_str().unwrap().starts_with("ct_"));

    // Twilio's Messages API got it, with Basic auth and the form fields of its protocol.
    let sent = twilio.wait_for_created(1, WAIT).await;
    let request = &sent[0];
    assert!(request.authorized);
    assert_eq!(request.account_sid, twilio::ACCOUNT_SID);
    assert_eq!(request.to(), "+15550100001");
    assert_eq!(request.field("From"), Some(twilio::FROM_NUMBER));
    assert_eq!(request.body(), "Hello from the desk");
    assert_eq!(
        request.field("StatusCallback"),
        Some(format!("{}/status", channel.webhook_url).as_str())
    );
    let sid = request.sid.clone().expect("created");

    let message = message_when(&platform, &id, |m| m["status"] == "sent").await;
    assert_eq!(message["provider_message_id"], sid.as_str());
    assert_eq!(message["direction"], "outbound");
    assert_eq!(message["author"], "api");
    assert!(message["sent_at"].is_string() && message["delivered_at"].is_null());

    for status in ["delivered", "read"] {
        let answer = channel.status(&sid, status, None).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(answer.content_type.starts_with("text/xml"), "{}", answer.content_type);
        assert!(answer.body.contains("<Response/>"));
    }
    let message = message_when(&platform, &id, |m| m["status"] == "read").await;
    assert!(message["delivered_at"].is_string() && message["read_at"].is_string());

    // Deliveries run concurrently, so they may arrive in any order: wait for all the expected ones.
    let expected = ["contact.created", "conversation.created", "message.read"];
    let events = receiver
        .wait_until(WAIT, |d| {
            let summary = summary(d);
            summary.iter().filter(|(_, data_id, _)| *data_id == id).count() >= 3
                && expected.iter().all(|kind| summary.iter().any(|(t, _, _)| t == kind))
        })
        .await;
    assert!(events.iter().all(|d| d.verifies(&secret)), "every delivery is signed");
    let of_message: Vec<(String, String, String)> = summary(&events)
        .into_iter()
        .filter(|(_, data_id, _)| *data_id == id)
        .collect();
    let mut kinds: Vec<(&str, &str)> = of_message.iter().map(|(t, _, s)| (t.as_str(), s.as_str())).collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            ("message.delivered", "delivered"),
            ("message.read", "read"),
            ("message.sent", "sent")
        ],
        "every state passed has its event, with the message as it was then"
    );

    // A late callback changes nothing and emits nothing.
    let before = receiver.deliveries().len();
    assert_eq!(channel.status(&sid, "delivered", None).await.status, 200);
    assert_eq!(channel.status(&sid, "sent", None).await.status, 200);
    frontdesk_tests::admin::quiesce(&server).await;
    assert_eq!(
        platform.ok("GET", &format!("/v1/messages/{id}"), None).await["message"]["status"],
        "read"
    );
    assert_eq!(receiver.deliveries().len(), before, "no event for a late callback");

    // A report that skips a state passes through it: read straight after sent emits delivered, then read.
    let second = send(&platform, json!({"phone": "+15550100001", "text": "Second"})).await;
    let second_id = second["message_id"].as_str().unwrap().to_owned();
    let sid2 = twilio.wait_for_created(2, WAIT).await[1].sid.clone().unwrap();
    message_when(&platform, &second_id, |m| m["status"] == "sent").await;
    channel.status(&sid2, "read", None).await;
    let events = receiver
        .wait_until(WAIT, |d| {
            summary(d)
                .iter()
                .filter(|(_, data_id, _)| *data_id == second_id)
                .count()
                >= 3
        })
        .await;
    // Both events, each with the message as it stood at its step (deliveries to one endpoint run side by
    // side, so their arrival order is not the events' order).
    let mut kinds: Vec<(String, String)> = summary(&events)
        .into_iter()
        .filter(|(_, data_id, _)| *data_id == second_id)
        .map(|(t, _, status)| (t, status))
        .collect();
    kinds.sort();
    let expected = [
        ("message.delivered", "delivered"),
        ("message.read", "read"),
        ("message.sent", "sent"),
    ];
    assert_eq!(kinds, expected.map(|(t, s)| (t.to_owned(), s.to_owned())));
    let delivered = events
        .iter()
        .find(|d| d.json["type"] == "message.delivered" && d.json["data"]["id"] == second_id.as_str())
        .unwrap();
    assert!(delivered.json["data"]["read_at"].is_null() && delivered.json["data"]["delivered_at"].is_string());

    // The same through gRPC: the message as the API shows it.
    let mut grpc = MessagesClient::connect(server.grpc.clone()).await.unwrap();
    let read = grpc
        .get_message(platform.grpc(GetMessageRequest { message_id: id.clone() }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.message.unwrap().status, "read");
});

on_both_databases!(idempotent_sends_go_out_once, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let body = json!({"phone": "+15550100002", "text": "Only once"}).to_string();
    let url = server.url("/v1/contacts/send");
    let calls = (0..20).map(|_| {
        let (url, body, key) = (url.clone(), body.clone(), platform.key.clone());
        tokio::spawn(async move {
            frontdesk_tests::call_with(
                "POST",
                &url,
                &[("x-api-key", &key), ("idempotency-key", "order-42")],
                Some(&body),
            )
            .await
        })
    });
    let answers = futures_join(calls).await;
    let ids: std::collections::HashSet<String> = answers
        .iter()
        .map(|a| {
            assert_eq!(a.status, 202, "{}", a.body);
            a.body["message_id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 1, "every repeat answers the first message: {ids:?}");
    twilio.wait_for_created(1, WAIT).await;
    frontdesk_tests::admin::quiesce(&server).await;
    assert_eq!(twilio.created(), 1, "sent once");

    // The key in the body works the same; another request under the key is a conflict.
    let again = send(
        &platform,
        json!({"phone": "+15550100002", "text": "Only once", "idempotency_key": "order-42"}),
    )
    .await;
    assert!(ids.contains(again["message_id"].as_str().unwrap()));
    let other = platform
        .send(
            "POST",
            "/v1/contacts/send",
            Some(json!({"phone": "+15550100002", "text": "Something else", "idempotency_key": "order-42"})),
        )
        .await;
    assert_eq!(
        (other.status, other.code()),
        (409, "idempotency_conflict"),
        "{}",
        other.body
    );

    // Erasing the contact forgets its keys: a replay sends anew rather than answer an erased message.
    let contact_id = again["contact_id"].as_str().unwrap();
    platform.ok("DELETE", &format!("/v1/contacts/{contact_id}"), None).await;
    let body = json!({"phone": "+15550100002", "text": "Only once", "idempotency_key": "order-42"});
    let replay = send(&platform, body).await;
    assert!(!ids.contains(replay["message_id"].as_str().unwrap()));
    assert_ne!(replay["contact_id"], contact_id);
});

on_both_databases!(
    concurrent_sends_share_batches_and_are_answered_each_on_its_own,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let platform = Platform::new(&server).await;
        let other = Platform::new(&server).await;
        SmsChannel::connect(&platform, &twilio, "sms", None).await;
        let mut contacts = Vec::new();
        for n in 0..10 {
            let body = json!({"name": format!("Customer {n}"), "phone": format!("+1555020{n:04}")});
            contacts.push(
                platform.ok("POST", "/v1/contacts", Some(body)).await["contact"]["id"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
        }
        let body = json!({"name": "Gone quiet", "phone": "+15550209999"});
        let opted_out = platform.ok("POST", "/v1/contacts", Some(body)).await["contact"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let patched = json!({"opted_out": true});
        platform
            .ok("PATCH", &format!("/v1/contacts/{opted_out}"), Some(patched))
            .await;
        let body = json!({"name": "Not yours", "phone": "+15550208888"});
        let foreign = other.ok("POST", "/v1/contacts", Some(body)).await["contact"]["id"]
            .as_str()
            .unwrap()
            .to_owned();

        // 60 sends at once: to known contacts, to new numbers, and some that must be refused on their own.
        let mut sends = Vec::new();
        for n in 0..40 {
            sends.push((
                format!("/v1/contacts/{}/send-message", contacts[n % 10]),
                json!({"text": format!("Hello {n}")}),
                202,
            ));
        }
        for n in 0..10 {
            sends.push((
                "/v1/contacts/send".to_owned(),
                json!({"phone": format!("+1555030{n:04}"), "text": "Welcome"}),
                202,
            ));
        }
        for _ in 0..5 {
            sends.push((
                format!("/v1/contacts/{opted_out}/send-message"),
                json!({"text": "Anyone there?"}),
                400,
            ));
            sends.push((
                format!("/v1/contacts/{foreign}/send-message"),
                json!({"text": "Not mine"}),
                404,
            ));
        }
        let calls = sends.iter().map(|(path, body, _)| {
            let (url, body, key) = (server.url(path), body.to_string(), platform.key.clone());
            tokio::spawn(
                async move { frontdesk_tests::call_with("POST", &url, &[("x-api-key", &key)], Some(&body)).await },
            )
        });
        let answers = futures_join(calls).await;
        let mut accepted = std::collections::HashSet::new();
        for ((path, body, status), answer) in sends.iter().zip(&answers) {
            assert_eq!(answer.status, *status, "{path} {body}: {}", answer.body);
            match status {
                202 => assert!(accepted.insert(answer.body["message_id"].as_str().unwrap().to_owned())),
                400 => assert_eq!(answer.code(), "opted_out"),
                _ => {}
            }
        }
        assert_eq!(accepted.len(), 50, "each accepted send is its own message");
        let created = twilio.wait_for_created(50, WAIT).await;
        frontdesk_tests::admin::quiesce(&server).await;
        // A text made twice is a run stopped or retried while its call was on the wire: the counters say which.
        let engine: Vec<String> = server
            .metrics()
            .await
            .lines()
            .filter(|l| {
                ["frontdesk_job_runs", "frontdesk_job_outcomes_dropped"]
                    .iter()
                    .any(|m| l.starts_with(m))
            })
            .map(str::to_owned)
            .collect();
        assert_eq!(
            twilio.created(),
            50,
            "the refused sends sent nothing; engine: {engine:?}"
        );

        // Outcomes are recorded in batches too: each message is `sent` with the sid Twilio gave its own text.
        let sid_of: std::collections::HashMap<String, String> = created
            .iter()
            .map(|r| (r.body().to_owned(), r.sid.clone().expect("created")))
            .collect();
        for ((_, body, status), answer) in sends.iter().zip(&answers).take(40) {
            assert_eq!(*status, 202);
            let id = answer.body["message_id"].as_str().unwrap();
            let message = message_when(&platform, id, |m| m["status"] == "sent").await;
            let text = body["text"].as_str().unwrap();
            assert_eq!(
                message["provider_message_id"].as_str(),
                sid_of.get(text).map(String::as_str),
                "{text}"
            );
        }

        // Each contact's messages are in one conversation, in the order they were accepted.
        let conversations = platform
            .ok("GET", &format!("/v1/conversations?contact_id={}", contacts[3]), None)
            .await;
        assert_eq!(
            conversations["conversations"].as_array().unwrap().len(),
            1,
            "{conversations}"
        );

        // The sends shared write transactions: fewer batches than sends.
        let count = |name: &'static str| server.metric(name, "kind=\"send\"");
        let (batches, items) = (
            count("frontdesk_write_batches_total").await,
            count("frontdesk_write_batch_items_total").await,
        );
        assert_eq!(items, sends.len() as f64, "every send went through a batch");
        assert!(batches < items, "{batches} batches for {items} sends");
    }
);

/// Awaits every task, in order.
async fn futures_join<T>(tasks: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for task in tasks.collect::<Vec<_>>() {
        out.push(task.await.expect("task"));
    }
    out
}

on_both_databases!(provider_errors_retry_or_fail, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let receiver = Receiver::start().await;
    let secret = platform.subscribe(&receiver.url, &["message.failed"]).await;

    // A 500 is retried; the next answer creates the message.
    twilio.then(&[500]);
    let retried = send(&platform, json!({"phone": "+15550100003", "text": "Try again"})).await;
    let retried_id = retried["message_id"].as_str().unwrap();
    message_when(&platform, retried_id, |m| m["status"] == "sent").await;
    assert_eq!(twilio.sent_with_body("Try again").len(), 2);

    // A 400 fails the message at once with Twilio's own code.
    twilio.then_error(400, 21211, "The 'To' number +15550100004 is not a valid phone number.");
    let refused = send(&platform, json!({"phone": "+15550100004", "text": "Nope"})).await;
    let refused_id = refused["message_id"].as_str().unwrap();
    let message = message_when(&platform, refused_id, |m| m["status"] == "failed").await;
    assert_eq!(message["error"]["code"], "21211");
    assert!(
        message["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a valid phone number")
    );
    assert_eq!(twilio.sent_with_body("Nope").len(), 1, "a 4xx is not retried");
    let failed = receiver.wait_for(1, WAIT).await;
    assert!(failed[0].verifies(&secret));
    assert_eq!(failed[0].json["data"]["id"], refused_id);
    assert_eq!(failed[0].json["data"]["error"]["code"], "21211");

    // A provider that keeps failing: every retry is used, then `provider_unavailable`.
    twilio.answer(503);
    let down = send(&platform, json!({"phone": "+15550100005", "text": "Down"})).await;
    let message = message_when(&platform, down["message_id"].as_str().unwrap(), |m| {
        m["status"] == "failed"
    })
    .await;
    assert_eq!(message["error"]["code"], "provider_unavailable");
    assert_eq!(
        twilio.sent_with_body("Down").len(),
        4,
        "the first try and three retries"
    );
    twilio.answer(201);

    // Garbage in a 2xx is retried too, never a crash.
    twilio.then_raw(200, "<html>not json</html>");
    let garbled = send(&platform, json!({"phone": "+15550100006", "text": "Garbled"})).await;
    message_when(&platform, garbled["message_id"].as_str().unwrap(), |m| {
        m["status"] == "sent"
    })
    .await;

    // A failed report from Twilio fails a sent message with its error code; nothing moves it after.
    let sid = twilio.sent_with_body("Try again")[1].sid.clone().unwrap();
    let channel_id = platform.ok("GET", "/v1/channels", None).await["channels"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let form = twilio::status_callback(&sid, "undelivered", Some("30003"));
    let local = server.url(&format!("/hooks/twilio/{channel_id}/status"));
    let public = format!("{}/hooks/twilio/{channel_id}/status", sms::PUBLIC_URL);
    assert_eq!(
        twilio::post_signed(&local, &public, &twilio.auth_token, &form)
            .await
            .status,
        200
    );
    let message = message_when(&platform, retried_id, |m| m["status"] == "failed").await;
    assert_eq!(message["error"]["code"], "30003");
});

on_both_databases!(inbound_is_verified_and_stored_once, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let receiver = Receiver::start().await;
    let secret = platform.subscribe(&receiver.url, &["*"]).await;

    let sid = new_message_sid();
    let answer = channel.inbound(&sid, "+15550100010", "Do you open on Sundays?").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.content_type.starts_with("text/xml"));
    // Twilio retries a message it got no answer for: the retry stores nothing new.
    assert_eq!(
        channel
            .inbound(&sid, "+15550100010", "Do you open on Sundays?")
            .await
            .status,
        200
    );

    receiver
        .wait_until(WAIT, |d| summary(d).iter().any(|(t, _, _)| t == "message.received"))
        .await;
    frontdesk_tests::admin::quiesce(&server).await;
    let events = receiver.deliveries();
    assert!(events.iter().all(|d| d.verifies(&secret)));
    let received: Vec<&Delivery> = events.iter().filter(|d| d.json["type"] == "message.received").collect();
    assert_eq!(received.len(), 1, "stored once");
    let data = &received[0].json["data"];
    assert_eq!(data["text"], "Do you open on Sundays?");
    assert_eq!(
        (
            data["direction"].as_str(),
            data["author"].as_str(),
            data["status"].as_str()
        ),
        (Some("inbound"), Some("contact"), Some("received"))
    );
    assert_eq!(data["provider_message_id"], sid.as_str());
    let created: Vec<&Delivery> = events.iter().filter(|d| d.json["type"] == "contact.created").collect();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].json["data"]["phone"], "+15550100010");
    let message_id = data["id"].as_str().unwrap().to_owned();
    let stored = platform.ok("GET", &format!("/v1/messages/{message_id}"), None).await;
    assert_eq!(stored["message"]["contact_id"], created[0].json["data"]["id"]);

    // A reply goes back on the same channel without naming it.
    let reply = send(&platform, json!({"phone": "+15550100010", "text": "Yes, 10 to 4."})).await;
    assert_eq!(reply["contact_id"], created[0].json["data"]["id"]);
    assert_eq!(twilio.wait_for_created(1, WAIT).await[0].to(), "+15550100010");

    let reply_id = reply["message_id"].as_str().unwrap().to_owned();
    receiver
        .wait_until(WAIT, |d| {
            summary(d)
                .iter()
                .any(|(t, data_id, _)| t == "message.sent" && *data_id == reply_id)
        })
        .await;

    // Missing or wrong signatures: 401, nothing stored.
    let before = receiver.deliveries().len();
    let form = twilio::inbound_message(&new_message_sid(), "+15550100011", twilio::FROM_NUMBER, "forged", &[]);
    let unsigned = twilio::post_form(channel.local_url(), None, &form).await;
    assert_eq!(unsigned.status, 401, "{}", unsigned.body);
    let forged = twilio::post_signed(channel.local_url(), &channel.webhook_url, "not-the-token", &form).await;
    assert_eq!(forged.status, 401);
    let wrong_url = twilio::post_signed(
        channel.local_url(),
        "https://elsewhere.test/hooks",
        &twilio.auth_token,
        &form,
    )
    .await;
    assert_eq!(wrong_url.status, 401);
    let unknown = twilio::post_signed(
        &server.url("/hooks/twilio/ch_00000000000000000000"),
        &channel.webhook_url,
        &twilio.auth_token,
        &form,
    )
    .await;
    assert_eq!(unknown.status, 404);
    frontdesk_tests::admin::quiesce(&server).await;
    assert_eq!(receiver.deliveries().len(), before, "nothing stored, nothing emitted");
    assert!(!server.logs().contains("forged"), "the refused body is never logged");

    // STOP opts the contact out of sms; START opts back in.
    channel.inbound(&new_message_sid(), "+15550100010", "STOP").await;
    let refused = platform
        .send(
            "POST",
            "/v1/contacts/send",
            Some(json!({"phone": "+15550100010", "text": "Hi"})),
        )
        .await;
    assert_eq!((refused.status, refused.code()), (400, "opted_out"), "{}", refused.body);
    channel.inbound(&new_message_sid(), "+15550100010", "start").await;
    send(&platform, json!({"phone": "+15550100010", "text": "Welcome back"})).await;
});

on_both_databases!(bad_input_and_tenancy, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;

    // No channel can reach a phone yet.
    let none = platform
        .send(
            "POST",
            "/v1/contacts/send",
            Some(json!({"phone": "+15550100020", "text": "Hi"})),
        )
        .await;
    assert_eq!((none.status, none.code()), (400, "no_channel"), "{}", none.body);
    SmsChannel::connect(&platform, &twilio, "sms", None).await;

    let cases = [
        (json!({"phone": "+15550100020", "text": ""}), "text", "empty text"),
        (
            json!({"phone": "+15550100020", "text": "x".repeat(1_601)}),
            "text",
            "over sms's 1,600",
        ),
        (
            json!({"phone": "+15550100020", "text": "x".repeat(4_097)}),
            "text",
            "over 4,096",
        ),
        (
            json!({"phone": "+15550100020", "email": "a@example.com", "text": "Hi"}),
            "contact_id",
            "two identities",
        ),
        (json!({"text": "Hi"}), "contact_id", "no identity"),
        (json!({"phone": "5550100020", "text": "Hi"}), "phone", "not E.164"),
        (
            json!({"email": "not-an-email", "text": "Hi"}),
            "email",
            "malformed e-mail",
        ),
        (
            json!({"phone": "+15550100020", "text": "Hi", "channel": "fax"}),
            "channel",
            "unknown channel",
        ),
        (
            json!({"phone": "+15550100020", "text": "Hi", "attachments": [{"url": "ftp://example.com/a.png"}]}),
            "attachments[0].url",
            "attachment not http(s)",
        ),
        (
            json!({"phone": "+15550100020", "text": "Hi", "colour": "red"}),
            "colour",
            "unknown field",
        ),
    ];
    for (body, field, case) in cases {
        let answer = platform.send("POST", "/v1/contacts/send", Some(body)).await;
        assert_invalid(&answer, field, case);
    }
    assert_eq!(twilio.arrived(), 0, "nothing refused reached the provider");

    let sent = send(&platform, json!({"phone": "+15550100020", "text": "Hi"})).await;
    let (message_id, contact_id) = (
        sent["message_id"].as_str().unwrap(),
        sent["contact_id"].as_str().unwrap(),
    );
    let by_id = platform
        .send(
            "POST",
            &format!("/v1/contacts/{contact_id}/send-message"),
            Some(json!({"text": "By id"})),
        )
        .await;
    assert_eq!(by_id.status, 202, "{}", by_id.body);

    // Another account sees none of it.
    let other = Platform::new(&server).await;
    assert_not_found(
        &other.send("GET", &format!("/v1/messages/{message_id}"), None).await,
        "message",
    );
    assert_not_found(
        &other
            .send(
                "POST",
                &format!("/v1/contacts/{contact_id}/send-message"),
                Some(json!({"text": "x"})),
            )
            .await,
        "contact",
    );
    assert_not_found(
        &platform.send("GET", "/v1/messages/msg_0000000000000000", None).await,
        "unknown",
    );

    // gRPC refuses the same way.
    let mut grpc = MessagesClient::connect(server.grpc.clone()).await.unwrap();
    let status = grpc
        .send_to_contact(platform.grpc(SendToContactRequest {
            phone: "+15550100020".into(),
            ..SendToContactRequest::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
});

/// Sends `burst {n}` to its own number with idempotency key `burst-{n}`; the answer, or `None` when the
/// service could not be reached or did not answer.
async fn burst_send(url: String, key: String, n: usize) -> Option<frontdesk_tests::Answer> {
    let body = json!({"phone": format!("+1555020{n:04}"), "text": format!("burst {n}")}).to_string();
    let request = frontdesk_tests::http_client()
        .post(url)
        .header("x-api-key", key)
        .header("idempotency-key", format!("burst-{n}"))
        .header("content-type", "application/json")
        .body(body)
        .send();
    let response = tokio::time::timeout(Duration::from_secs(10), request)
        .await
        .ok()?
        .ok()?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.json().await.ok()?;
    Some(frontdesk_tests::Answer { status, headers, body })
}

/// Sends `burst 0` .. `burst {BURST - 1}`, 50 at a time, each under its idempotency key; the message id each was
/// answered with (`None` when it was not accepted).
async fn burst(url: &str, key: &str) -> Vec<Option<String>> {
    let mut ids = Vec::new();
    for chunk in (0..BURST).collect::<Vec<_>>().chunks(50) {
        let calls: Vec<_> = chunk
            .iter()
            .map(|n| tokio::spawn(burst_send(url.to_owned(), key.to_owned(), *n)))
            .collect();
        for call in calls {
            let accepted = call.await.unwrap().filter(|a| a.status == 202);
            ids.push(accepted.map(|a| a.body["message_id"].as_str().unwrap().to_owned()));
        }
    }
    ids
}

/// Sends in flight when the core is killed.
const BURST: usize = 400;

// A core killed (SIGKILL) after accepting 400 sends, most still undelivered, loses none: after a restart
// each retry answers its first message id, every message is `sent` and every text reached Twilio.
on_both_databases!(a_killed_core_loses_no_send, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    // Until the kill Twilio answers slowly: the channel's lane of 8 sends about four a second, so most of the
    // burst is still queued or on the wire when the core is killed.
    twilio.answer_after(Duration::from_secs(2), 201);
    let env = [
        ("FRONTDESK_JOB_LANE_CONCURRENCY", "8"),
        // A loaded test machine may be slow; no send may run out of tries here.
        ("FRONTDESK_PROVIDER_TIMEOUT", "10s"),
        ("FRONTDESK_SEND_RETRY_SCHEDULE", "500ms,1s,2s,2s,5s,5s,5s"),
    ];
    let mut server = sms::start(&db, &twilio, &env).await;
    let (account_id, key) = {
        let platform = Platform::new(&server).await;
        SmsChannel::connect(&platform, &twilio, "sms", Some(100_000)).await;
        (platform.account_id, platform.key)
    };
    // Clients send the burst; every one is accepted (202) before the core is killed (SIGKILL), while most
    // are queued or on the wire to the provider.
    let first = burst(&server.url("/v1/contacts/send"), &key).await;
    assert!(
        first.iter().all(Option::is_some),
        "every send was accepted before the kill"
    );
    let distinct: std::collections::HashSet<&String> = first.iter().flatten().collect();
    assert_eq!(distinct.len(), BURST, "one message per send");
    server.kill();
    let delivered_before = twilio.created();
    let server = server.restart().await;
    assert!(
        delivered_before <= BURST / 2,
        "the kill must land with most sends undelivered: {delivered_before} of {BURST} were sent"
    );

    // After the restart the clients retry every send under its idempotency key: each answers its first message.
    twilio.answer(201);
    let platform = Platform::of(&server, &account_id, &key);
    let again = burst(&server.url("/v1/contacts/send"), &key).await;
    assert_eq!(again, first, "a retry answers the message its first try made");
    twilio.wait_for_created(BURST, Duration::from_secs(120)).await;
    for id in first.iter().flatten() {
        let message = message_when(&platform, id, |m| m["status"] != "queued").await;
        assert_eq!(message["status"], "sent", "{message}");
    }
    let distinct: std::collections::HashSet<String> = twilio.sent().iter().map(|s| s.body().to_owned()).collect();
    assert_eq!(distinct.len(), BURST, "every send reached the provider");
});

on_both_databases!(a_callback_that_outruns_its_send_applies_after_it, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = SmsChannel::connect(&platform, &twilio, "sms", None).await;
    // Twilio takes the message at once but answers our request only two seconds later, and its status
    // callback arrives in between: before we know the message's sid.
    twilio.then_after(Duration::from_secs(2), 201);
    let accepted = send(&platform, json!({"phone": "+15550100030", "text": "Quick"})).await;
    let id = accepted["message_id"].as_str().unwrap();
    let sid = twilio.wait_for(1, WAIT).await[0].sid.clone().unwrap();
    assert_eq!(channel.status(&sid, "delivered", None).await.status, 200);
    assert_eq!(
        platform.ok("GET", &format!("/v1/messages/{id}"), None).await["message"]["status"],
        "queued"
    );
    let message = message_when(&platform, id, |m| m["status"] == "delivered").await;
    assert_eq!(message["provider_message_id"], sid.as_str());
    assert!(message["sent_at"].is_string() && message["delivered_at"].is_string());
});

/// Waits until Twilio was asked to send `text`; the name of the channel among `channels` it went out on
/// (the one whose status callback the request carried).
async fn sent_on(twilio: &FakeTwilio, channels: &[&SmsChannel], text: &str) -> String {
    let started = std::time::Instant::now();
    let request = loop {
        if let Some(request) = twilio.sent_with_body(text).pop() {
            break request;
        }
        assert!(started.elapsed() < WAIT, "twilio never got {text:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let callback = request.field("StatusCallback").unwrap_or_default();
    channels
        .iter()
        .find(|c| callback == format!("{}/status", c.webhook_url))
        .unwrap_or_else(|| panic!("{text:?} named no channel's status callback: {callback}"))
        .name
        .clone()
}

/// The conversation message `id` is in.
async fn conversation_of(platform: &Platform<'_>, id: &str) -> Value {
    let message = platform.ok("GET", &format!("/v1/messages/{id}"), None).await;
    let conversation = message["message"]["conversation_id"].as_str().unwrap();
    platform
        .ok("GET", &format!("/v1/conversations/{conversation}"), None)
        .await["conversation"]
        .clone()
}

// A send without `channel` goes out on the channel of the contact's latest conversation (a reply goes back on
// the number the contact wrote to), one naming `channel` on that one, a new contact's on the oldest channel.
on_both_databases!(
    a_send_without_a_channel_follows_the_contacts_latest_conversation,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let platform = Platform::new(&server).await;
        let first = SmsChannel::connect(&platform, &twilio, "first", None).await;
        let second = SmsChannel::connect(&platform, &twilio, "second", None).await;
        let channels = [&first, &second];

        // The contact writes in on the second channel: the reply goes back there, into the same conversation,
        // though the first channel is the oldest.
        let phone = "+15550100040";
        assert_eq!(second.inbound(&new_message_sid(), phone, "Hello?").await.status, 200);
        let written = platform.ok("GET", "/v1/conversations", None).await["conversations"][0].clone();
        assert_eq!(written["channel"], "second");
        let reply = send(&platform, json!({"phone": phone, "text": "Hi, how can we help?"})).await;
        assert_eq!(sent_on(&twilio, &channels, "Hi, how can we help?").await, "second");
        let reply = conversation_of(&platform, reply["message_id"].as_str().unwrap()).await;
        assert_eq!(reply["id"], written["id"]);

        // A named channel wins, and opens the contact's latest conversation there.
        let named = json!({"phone": phone, "text": "Our new number", "channel": "first"});
        let named = send(&platform, named).await;
        assert_eq!(sent_on(&twilio, &channels, "Our new number").await, "first");
        let named = conversation_of(&platform, named["message_id"].as_str().unwrap()).await;
        assert_eq!(named["channel"], "first");
        assert_ne!(named["id"], written["id"]);

        // The next send without a channel follows that latest conversation, though the one on the second
        // channel is still open.
        send(&platform, json!({"phone": phone, "text": "See you"})).await;
        assert_eq!(sent_on(&twilio, &channels, "See you").await, "first");
        assert_eq!(
            platform
                .ok(
                    "GET",
                    &format!("/v1/conversations/{}", written["id"].as_str().unwrap()),
                    None
                )
                .await["conversation"]["status"],
            "open"
        );

        // A contact with no conversation gets the oldest channel that reaches it.
        send(&platform, json!({"phone": "+15550100041", "text": "Welcome"})).await;
        assert_eq!(sent_on(&twilio, &channels, "Welcome").await, "first");
    }
);

// `POST /v1/contacts/send` by `contact_id` (404 for an unknown or another account's) and by `channel` +
// `external_id` (a web chat visitor's session, found again by the same id; 400 for an id that is no session of
// the channel, on an sms channel or without a channel).
on_both_databases!(
    a_send_names_its_contact_by_id_or_by_channel_identity,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let platform = Platform::new(&server).await;
        SmsChannel::connect(&platform, &twilio, "sms", None).await;
        let site = Channel::connect(&platform, "site", json!({})).await;

        // By id: the contact's phone is dialled.
        let body = json!({"name": "Asha", "phone": "+15550100050"});
        let contact = platform.ok("POST", "/v1/contacts", Some(body)).await["contact"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let by_id = send(&platform, json!({"contact_id": contact, "text": "By id"})).await;
        assert_eq!(by_id["contact_id"], contact.as_str());
        let message = message_when(&platform, by_id["message_id"].as_str().unwrap(), |m| {
            m["status"] == "sent"
        })
        .await;
        assert_eq!(message["contact_id"], contact.as_str());
        assert_eq!(twilio.sent_with_body("By id")[0].to(), "+15550100050");
        let other = Platform::new(&server).await;
        let theirs = other
            .ok("POST", "/v1/contacts", Some(json!({"name": "Not yours"})))
            .await["contact"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        for unknown in ["ct_0000000000000000", theirs.as_str()] {
            let answer = platform
                .send(
                    "POST",
                    "/v1/contacts/send",
                    Some(json!({"contact_id": unknown, "text": "Hi"})),
                )
                .await;
            assert_not_found(&answer, unknown);
        }

        // By a channel identity: a web chat visitor's session names its contact, found again by the same id.
        let visitor = Visitor::start(&server, &site, json!({})).await;
        let session = visitor.session_id.as_str();
        let body = json!({"channel": "site", "external_id": session, "name": "Visitor", "text": "Hello visitor"});
        let by_identity = send(&platform, body).await;
        assert_eq!(by_identity["contact_id"], visitor.contact_id.as_str());
        let shown = platform
            .ok("GET", &format!("/v1/contacts/{}", visitor.contact_id), None)
            .await["contact"]
            .clone();
        assert_eq!(
            shown["identities"],
            json!([{"channel": "site", "type": "webchat", "external_id": session}])
        );
        let id = by_identity["message_id"].as_str().unwrap();
        let message = message_when(&platform, id, |m| m["status"] != "queued").await;
        assert_eq!(message["status"], "sent", "{message}");
        assert_eq!(conversation_of(&platform, id).await["channel"], "site");
        let again = json!({"channel": "site", "external_id": session, "text": "Still there?"});
        assert_eq!(send(&platform, again).await["contact_id"], visitor.contact_id.as_str());
        assert!(twilio.sent_with_body("Hello visitor").is_empty());
        // An id that is no session of the channel names nobody.
        let made_up = json!({"channel": "site", "external_id": "visitor-7", "text": "Hi"});
        let answer = platform.send("POST", "/v1/contacts/send", Some(made_up)).await;
        assert_invalid(&answer, "external_id", "a made-up visitor id");

        // An sms channel reaches contacts by phone, not by id; an id needs its channel.
        for (body, field, case) in [
            (
                json!({"channel": "sms", "external_id": "visitor-7", "text": "Hi"}),
                "external_id",
                "an id on an sms channel",
            ),
            (
                json!({"external_id": "visitor-7", "text": "Hi"}),
                "channel",
                "an id without its channel",
            ),
            (
                json!({"channel": "fax", "external_id": "visitor-7", "text": "Hi"}),
                "channel",
                "an id on an unknown channel",
            ),
        ] {
            let answer = platform.send("POST", "/v1/contacts/send", Some(body)).await;
            assert_invalid(&answer, field, case);
        }
    }
);

// A status callback without Twilio's valid signature is 401: the message and the webhook feed are unchanged;
// Twilio's own callback for it then applies.
on_both_databases!(
    a_forged_status_callback_is_refused_and_changes_nothing,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let platform = Platform::new(&server).await;
        let channel = SmsChannel::connect(&platform, &twilio, "sms", None).await;
        let receiver = Receiver::start().await;
        platform
            .subscribe(&receiver.url, &["message.delivered", "message.failed"])
            .await;
        let accepted = send(&platform, json!({"phone": "+15550100060", "text": "Guarded"})).await;
        let id = accepted["message_id"].as_str().unwrap();
        let sent = message_when(&platform, id, |m| m["status"] == "sent").await;
        let sid = sent["provider_message_id"].as_str().unwrap();

        let status_url = format!("{}/status", channel.local_url());
        let public_url = format!("{}/status", channel.webhook_url);
        let form = twilio::status_callback(sid, "undelivered", Some("30003"));
        let refusals = [
            ("unsigned", twilio::post_form(&status_url, None, &form).await),
            (
                "another token",
                twilio::post_signed(&status_url, &public_url, "not-the-token", &form).await,
            ),
            (
                "signed for another URL",
                twilio::post_signed(&status_url, &channel.webhook_url, &twilio.auth_token, &form).await,
            ),
            (
                "a garbled signature",
                twilio::post_form(&status_url, Some("bm90IGEgc2lnbmF0dXJl"), &form).await,
            ),
        ];
        for (case, answer) in refusals {
            assert_eq!(answer.status, 401, "{case}: {}", answer.body);
        }
        frontdesk_tests::admin::quiesce(&server).await;
        assert_eq!(
            platform.ok("GET", &format!("/v1/messages/{id}"), None).await["message"],
            sent
        );
        assert!(receiver.deliveries().is_empty(), "no event for a refused callback");

        // Twilio's own callback for the same message applies.
        assert_eq!(channel.status(sid, "delivered", None).await.status, 200);
        message_when(&platform, id, |m| m["status"] == "delivered").await;
        let events = receiver.wait_for(1, WAIT).await;
        assert_eq!(events[0].json["type"], "message.delivered");
    }
);

// STOP and START by sms each change `opted_out` and emit one signed `contact.updated`; a repeated STOP emits
// nothing.
on_both_databases!(stop_and_start_emit_contact_updated, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let receiver = Receiver::start().await;
    let secret = platform
        .subscribe(&receiver.url, &["contact.created", "contact.updated"])
        .await;
    let phone = "+15550100070";
    channel.inbound(&new_message_sid(), phone, "Hi").await;
    let created = receiver.wait_for(1, WAIT).await;
    assert_eq!(created[0].json["type"], "contact.created");
    let contact = created[0].json["data"]["id"].as_str().unwrap().to_owned();

    // STOP opts the contact out, START back in: each a `contact.updated` with the contact as it became.
    // A second STOP while opted out changes nothing and emits nothing.
    for (text, opted_out) in [("STOP", true), ("Stop", true), ("START", false)] {
        assert_eq!(channel.inbound(&new_message_sid(), phone, text).await.status, 200);
        let shown = platform.ok("GET", &format!("/v1/contacts/{contact}"), None).await;
        assert_eq!(shown["contact"]["opted_out"], opted_out, "after {text}");
    }
    receiver.wait_for(3, WAIT).await;
    frontdesk_tests::admin::quiesce(&server).await;
    let events = receiver.deliveries();
    assert_eq!(events.len(), 3, "one event per change: {:?}", summary(&events));
    assert!(events.iter().all(|d| d.verifies(&secret)));
    // Deliveries to one endpoint run side by side: their arrival order is not the events' order.
    let mut flags: Vec<bool> = events
        .iter()
        .filter(|d| d.json["type"] == "contact.updated")
        .map(|d| {
            assert_eq!(d.json["data"]["id"], contact.as_str());
            assert_eq!(d.json["data"]["phone"], phone);
            d.json["data"]["opted_out"].as_bool().unwrap()
        })
        .collect();
    flags.sort_unstable();
    assert_eq!(flags, [false, true], "one update opted out, one opted back in");
});

// A message's attachments travel both ways: an outbound one's URLs reach Twilio as repeated `MediaUrl` fields,
// in order, and an inbound MMS's `MediaUrl0..` (with their content types) become the message's attachments.
on_both_databases!(attachments_travel_as_media_urls, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = SmsChannel::connect(&platform, &twilio, "sms", None).await;

    let urls = [
        "https://cdn.example/receipt.pdf",
        "https://cdn.example/photo.jpg?size=large&v=2",
    ];
    let attachments = json!([
        {"url": urls[0], "content_type": "application/pdf", "filename": "receipt.pdf"},
        {"url": urls[1]},
    ]);
    let accepted = send(
        &platform,
        json!({"phone": "+15550100090", "text": "Your receipt", "attachments": attachments}),
    )
    .await;
    let request = twilio.wait_for_created(1, WAIT).await.remove(0);
    assert_eq!(request.fields("MediaUrl"), urls, "{request:?}");
    assert_eq!(request.body(), "Your receipt");
    let id = accepted["message_id"].as_str().unwrap();
    let sent = message_when(&platform, id, |m| m["status"] == "sent").await;
    assert_eq!(sent["attachments"][0]["filename"], "receipt.pdf", "{sent}");
    assert_eq!(sent["attachments"][1]["url"], urls[1], "{sent}");

    let media = [
        ("https://api.twilio.com/media/ME1", "image/jpeg"),
        ("https://api.twilio.com/media/ME2", "image/png"),
    ];
    let form = twilio::inbound_message(&new_message_sid(), "+15550100091", twilio::FROM_NUMBER, "", &media);
    let answer = twilio::post_signed(channel.local_url(), &channel.webhook_url, &twilio.auth_token, &form).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let conversations = platform.ok("GET", "/v1/conversations?limit=1", None).await;
    let conversation_id = conversations["conversations"][0]["id"].as_str().unwrap().to_owned();
    let thread = platform
        .ok("GET", &format!("/v1/conversations/{conversation_id}"), None)
        .await;
    let received = &thread["messages"][0];
    assert_eq!(received["direction"], "inbound", "{thread}");
    let stored: Vec<(&str, &str)> = received["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["url"].as_str().unwrap(), a["content_type"].as_str().unwrap()))
        .collect();
    assert_eq!(stored, media, "{received}");
});
