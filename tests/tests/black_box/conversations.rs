//! Conversations and message edits against the real binary, on SQLite and on PostgreSQL + Redis, with every
//! message made through the real pipeline: API sends delivered to a fake Twilio, and inbound SMS played as
//! Twilio's signed callbacks. The inbox list (each filter, latest activity first, paging), a conversation
//! with its latest messages and older pages, closing (its event; the next message opens a new
//! conversation), read and unread, handoff and resume (its event), transcripts in three formats (REST and
//! gRPC), corrections (a `Correction:` SMS unless `resend` is false), removals, reactions, tenant isolation
//! and scopes, a contact's erasure with its conversations and messages, and the agent routing gives a
//! conversation an inbound SMS opens.

use std::time::{Duration, Instant};

use chrono::{Datelike, TimeZone, Utc};

use frontdesk_api::v1::{TranscriptRequest, conversations_client::ConversationsClient};
use frontdesk_tests::{
    Answer, Db, Server,
    admin::{self, Jobs},
    on_both_databases,
    platform::{Platform, assert_id, assert_insufficient_scope, assert_invalid, assert_not_found, assert_timestamp},
    sms::{self, SmsChannel},
    twilio::{self, FakeTwilio, new_message_sid},
    webhook_receiver::{Delivery, Receiver},
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// An account with an sms channel `sms-main`.
struct Inbox<'a> {
    api: Platform<'a>,
    sms: SmsChannel,
}

impl<'a> Inbox<'a> {
    async fn new(server: &'a Server, twilio: &FakeTwilio) -> Inbox<'a> {
        let api = Platform::new(server).await;
        let sms = SmsChannel::connect(&api, twilio, "sms-main", None).await;
        Inbox { api, sms }
    }

    /// `POST /v1/contacts/send` (202); the message.
    async fn send(&self, body: Value) -> Value {
        let answer = self.api.send("POST", "/v1/contacts/send", Some(body)).await;
        assert_eq!(answer.status, 202, "{}", answer.body);
        self.message(answer.body["message_id"].as_str().unwrap()).await
    }

    /// Sends `text` to `phone`; the message.
    async fn text(&self, phone: &str, text: &str) -> Value {
        self.send(json!({"phone": phone, "text": text})).await
    }

    /// Plays Twilio delivering an SMS `text` from `phone`; the conversation it landed in (the one with the
    /// latest activity).
    async fn inbound(&self, phone: &str, text: &str) -> Value {
        let answer = self.sms.inbound(&new_message_sid(), phone, text).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        self.api.ok("GET", "/v1/conversations?limit=1", None).await["conversations"][0].clone()
    }

    async fn message(&self, id: &str) -> Value {
        self.api.ok("GET", &format!("/v1/messages/{id}"), None).await["message"].clone()
    }

    async fn conversation(&self, id: &str) -> Value {
        self.api.ok("GET", &format!("/v1/conversations/{id}"), None).await
    }

    /// `POST /v1/conversations/{id}/{action}`; the conversation.
    async fn act(&self, id: &str, action: &str, body: Option<Value>) -> Value {
        let path = format!("/v1/conversations/{id}/{action}");
        self.api.ok("POST", &path, body).await["conversation"].clone()
    }

    /// The ids the conversation list answers for `query`.
    async fn listed(&self, query: &str) -> Vec<String> {
        self.api
            .ids(&format!("/v1/conversations?{query}"), "conversations", "id")
            .await
    }

    /// Every conversation of the list, read `limit` at a time by following its cursors.
    async fn paged(&self, limit: usize) -> Vec<String> {
        let mut paged = Vec::new();
        let mut path = format!("/v1/conversations?limit={limit}");
        loop {
            let page = self.api.ok("GET", &path, None).await;
            let ids: Vec<String> = page["conversations"].as_array().unwrap().iter().map(id).collect();
            assert!(ids.len() <= limit, "{page}");
            paged.extend(ids);
            match page["next_cursor"].as_str() {
                Some(cursor) => path = format!("/v1/conversations?limit={limit}&cursor={cursor}"),
                None => return paged,
            }
        }
    }

    /// A message call (`PATCH`, `DELETE` or `POST .../reactions`) that answers 200; the message.
    async fn edit(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.api.ok(method, path, body).await["message"].clone()
    }

    /// Subscribes `receiver` to `events`; the signing secret.
    async fn subscribe(&self, receiver: &Receiver, events: &[&str]) -> String {
        let body = json!({"url": receiver.url, "events": events});
        let answer = self.api.ok("POST", "/v1/webhooks", Some(body)).await;
        answer["secret"].as_str().unwrap().to_owned()
    }
}

fn id(value: &Value) -> String {
    value["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {value}"))
        .to_owned()
}

fn texts(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap().to_owned())
        .collect()
}

/// The deliveries of event `kind`, each checked against the subscription's secret.
fn of_type(deliveries: &[Delivery], kind: &str, secret: &str) -> Vec<Value> {
    deliveries
        .iter()
        .filter(|d| d.json["type"] == kind)
        .map(|d| {
            assert!(
                d.verifies(secret),
                "a {kind} delivery is signed with the subscription's secret"
            );
            d.json["data"].clone()
        })
        .collect()
}

/// `GET path` with the account's key: status, content type and body as text.
async fn raw(api: &Platform<'_>, path: &str) -> (u16, String, String) {
    let response = frontdesk_tests::http_client()
        .get(api.server.url(path))
        .header("x-api-key", &api.key)
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (status, content_type, response.text().await.expect("body"))
}

/// Waits until Twilio was asked to send `body`; those requests.
async fn twilio_sent(twilio: &FakeTwilio, body: &str) -> Vec<twilio::SentMessage> {
    let started = Instant::now();
    loop {
        let sent = twilio.sent_with_body(body);
        if !sent.is_empty() {
            return sent;
        }
        assert!(started.elapsed() < WAIT, "twilio never got {body:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

on_both_databases!(
    the_inbox_filters_orders_by_latest_activity_and_pages,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let inbox = Inbox::new(&server, &twilio).await;
        SmsChannel::connect(&inbox.api, &twilio, "sms-two", None).await;
        let agent = inbox.api.agent("Night shift").await;
        inbox
            .api
            .ok(
                "PUT",
                "/v1/entry-points/channel-defaults",
                Some(json!({"channel": "sms-two", "agent_id": agent})),
            )
            .await;

        // a: an API send only; b: the contact wrote; c: wrote, then handed off and read; d: a send on sms-two,
        // answered by its default agent; e: wrote, then closed.
        let a_phone = "+14155550101";
        let a = inbox.text(a_phone, "Your order shipped").await["conversation_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let b = id(&inbox.inbound("+14155550102", "Hello?").await);
        let c = id(&inbox.inbound("+14155550103", "I need a person").await);
        inbox
            .act(&c, "handoff", Some(json!({"reason": "asked for a person"})))
            .await;
        inbox.act(&c, "read", None).await;
        let d = inbox
            .send(json!({"phone": "+14155550104", "text": "Welcome", "channel": "sms-two"}))
            .await["conversation_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let e = id(&inbox.inbound("+14155550105", "Bye").await);
        inbox.act(&e, "close", None).await;
        let (a, b, c, d, e) = (a.as_str(), b.as_str(), c.as_str(), d.as_str(), e.as_str());

        assert_eq!(inbox.listed("").await, [e, d, c, b, a]);
        let listed = inbox.api.ok("GET", "/v1/conversations", None).await;
        assert_eq!(listed["next_cursor"], Value::Null);
        let first = &listed["conversations"][4];
        assert_id(&first["id"], "cv_");
        assert_id(&first["contact_id"], "ct_");
        for (field, expected) in [
            ("channel", json!("sms-main")),
            ("channel_type", json!("sms")),
            ("agent_id", json!("")),
            ("status", json!("open")),
            ("handoff", json!(false)),
            ("handoff_reason", json!("")),
            ("unread_count", json!(0)),
            ("broadcast_id", json!("")),
            ("closed_at", Value::Null),
        ] {
            assert_eq!(first[field], expected, "{field} of {first}");
        }
        assert_timestamp(&first["last_message_at"], "last_message_at");
        assert_timestamp(&first["created_at"], "created_at");

        // A new message brings a conversation back to the top.
        inbox.inbound(a_phone, "Thanks!").await;
        assert_eq!(inbox.listed("").await, [a, e, d, c, b]);

        assert_eq!(inbox.listed("status=open").await, [a, d, c, b]);
        assert_eq!(inbox.listed("status=closed").await, [e]);
        assert_eq!(inbox.listed("channel=sms-two").await, [d]);
        assert_eq!(inbox.listed("channel=sms-main").await, [a, e, c, b]);
        assert_eq!(inbox.listed(&format!("agent_id={agent}")).await, [d]);
        let b_contact = inbox.conversation(b).await["conversation"]["contact_id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(inbox.listed(&format!("contact_id={b_contact}")).await, [b]);
        assert_eq!(inbox.listed("unread=true").await, [a, e, b]);
        assert_eq!(inbox.listed("unread=false").await, [d, c]);
        assert_eq!(inbox.listed("handoff=true").await, [c]);
        assert_eq!(inbox.listed("handoff=false").await, [a, e, d, b]);
        assert_eq!(inbox.listed("status=open&unread=true&channel=sms-main").await, [a, b]);
        assert!(inbox.listed("contact_id=ct_nobody").await.is_empty());

        // Paging follows the same order, each conversation once.
        assert_eq!(inbox.paged(2).await, [a, e, d, c, b]);

        // A send to the contact's open conversation brings it to the top too, its unread count kept.
        let path = format!("/v1/contacts/{b_contact}/send-message");
        let sent = inbox
            .api
            .send("POST", &path, Some(json!({"text": "We are on it"})))
            .await;
        assert_eq!(sent.status, 202, "{}", sent.body);
        assert_eq!(inbox.listed("").await, [b, a, e, d, c]);
        assert_eq!(inbox.conversation(b).await["conversation"]["unread_count"], 1);

        for (query, field) in [
            ("status=archived", "status"),
            ("limit=0", "limit"),
            ("limit=201", "limit"),
            ("cursor=not-a-cursor", "cursor"),
        ] {
            let answer = inbox.api.send("GET", &format!("/v1/conversations?{query}"), None).await;
            assert_invalid(&answer, field, query);
        }
    }
);

// The index orders conversations by five-minute activity window only (so that a message's touch writes no
// index entry); the exact time must still order the rows within a window, for the list, its cursors and the
// idle sweep.
on_both_databases!(
    the_inbox_order_and_the_idle_cutoff_are_exact_within_an_activity_window,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let env = [
            ("FRONTDESK_TEST_CLOCK", "true"),
            ("FRONTDESK_CONVERSATION_IDLE_HOURS", "1"),
        ];
        let server = sms::start(&db, &twilio, &env).await;
        let inbox = Inbox::new(&server, &twilio).await;
        // A window's first second (10:00 is a multiple of five minutes since the epoch), a year ahead.
        let window = Utc.with_ymd_and_hms(Utc::now().year() + 1, 3, 1, 10, 0, 0).unwrap();
        // Plays `phone` writing at `seconds` into the window; its conversation.
        let at = async |seconds: i64, phone: &str| {
            admin::clock_at(&server, window + chrono::Duration::seconds(seconds)).await;
            id(&inbox.inbound(phone, "hello").await)
        };
        // Window 0: a at 0:10, b at 3:20, c at 4:40. Window 1: d at 5:10, then a again at 5:30. Window 4: e.
        let a = at(10, "+14155550201").await;
        let b = at(200, "+14155550202").await;
        let c = at(280, "+14155550203").await;
        let d = at(310, "+14155550204").await;
        assert_eq!(at(330, "+14155550201").await, a, "a's conversation goes on");
        let e = at(1_200, "+14155550205").await;
        let (a, b, c, d, e) = (a.as_str(), b.as_str(), c.as_str(), d.as_str(), e.as_str());

        assert_eq!(inbox.listed("").await, [e, a, d, c, b]);
        for limit in [1, 2, 3] {
            assert_eq!(inbox.paged(limit).await, [e, a, d, c, b], "pages of {limit}");
        }
        assert_eq!(inbox.listed("status=open").await, [e, a, d, c, b]);

        // An hour and four minutes after the window opened: b (3:20) is idle, c (4:40, the same window) not.
        admin::clock_at(&server, window + chrono::Duration::seconds(3_600 + 240)).await;
        let started = Instant::now();
        while inbox.conversation(b).await["conversation"]["status"] != "closed" {
            assert!(started.elapsed() < WAIT, "the idle conversation was never closed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(inbox.listed("status=open").await, [e, a, d, c]);
        assert_eq!(inbox.listed("status=closed").await, [b]);
        assert_eq!(inbox.listed("").await, [e, a, d, c, b], "closing moves nothing");
    }
);

on_both_databases!(
    a_conversation_comes_with_its_latest_messages_and_older_pages,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let inbox = Inbox::new(&server, &twilio).await;
        let phone = "+14155550111";

        // 103 messages: the contact's m0, our m1, then the contact's m2..m102.
        let conversation = id(&inbox.inbound(phone, "m0").await);
        let reply = inbox.text(phone, "m1").await;
        assert_eq!(
            reply["conversation_id"],
            json!(conversation),
            "the reply joins the open conversation"
        );
        for n in 2..103 {
            inbox.inbound(phone, &format!("m{n}")).await;
        }
        let all: Vec<String> = (0..103).map(|n| format!("m{n}")).collect();

        let thread = inbox.conversation(&conversation).await;
        assert_eq!(thread["conversation"]["id"], json!(conversation));
        assert_eq!(thread["conversation"]["unread_count"], json!(102));
        assert_eq!(texts(&thread["messages"]), all[3..], "the latest 100, oldest first");
        let oldest_shown = id(&thread["messages"][0]);

        let older = inbox
            .api
            .ok(
                "GET",
                &format!("/v1/conversations/{conversation}/messages?before={oldest_shown}"),
                None,
            )
            .await;
        assert_eq!(texts(&older["messages"]), all[..3]);
        assert_eq!(older["next_cursor"], Value::Null);
        let ours = &older["messages"][1];
        assert_eq!(
            (ours["direction"].clone(), ours["author"].clone(), ours["id"].clone()),
            (json!("outbound"), json!("api"), reply["id"].clone())
        );
        assert_eq!(
            (
                older["messages"][0]["direction"].clone(),
                older["messages"][0]["author"].clone()
            ),
            (json!("inbound"), json!("contact"))
        );

        // Page back from the latest, 40 at a time: each page oldest first, `next_cursor` the `before` of the
        // page preceding it.
        let mut pages = Vec::new();
        let mut path = format!("/v1/conversations/{conversation}/messages?limit=40");
        loop {
            let page = inbox.api.ok("GET", &path, None).await;
            pages.push(texts(&page["messages"]));
            let Some(before) = page["next_cursor"].as_str() else {
                break;
            };
            assert_eq!(
                before,
                id(&page["messages"][0]),
                "the cursor is the page's oldest message"
            );
            path = format!("/v1/conversations/{conversation}/messages?limit=40&before={before}");
        }
        assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [40, 40, 23]);
        pages.reverse();
        assert_eq!(pages.concat(), all);
        let default_page = inbox
            .api
            .ok("GET", &format!("/v1/conversations/{conversation}/messages"), None)
            .await;
        assert_eq!(texts(&default_page["messages"]), all[53..], "50 by default");

        let elsewhere = id(&inbox.inbound("+14155550112", "another thread").await);
        let foreign = id(&inbox.conversation(&elsewhere).await["messages"][0]);
        let answer = inbox
            .api
            .send(
                "GET",
                &format!("/v1/conversations/{conversation}/messages?before={foreign}"),
                None,
            )
            .await;
        assert_invalid(&answer, "before", "a message of another conversation");
        for limit in ["0", "201"] {
            let path = format!("/v1/conversations/{conversation}/messages?limit={limit}");
            assert_invalid(&inbox.api.send("GET", &path, None).await, "limit", limit);
        }
    }
);

on_both_databases!(
    closing_announces_once_and_the_next_message_opens_a_new_conversation,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let inbox = Inbox::new(&server, &twilio).await;
        let receiver = Receiver::start().await;
        let secret = inbox.subscribe(&receiver, &["conversation.closed"]).await;
        let phone = "+14155550121";

        let first = id(&inbox.inbound(phone, "Is my order ready?").await);
        let closed = inbox.act(&first, "close", None).await;
        assert_eq!(closed["status"], "closed");
        assert_timestamp(&closed["closed_at"], "closed_at");
        let again = inbox.act(&first, "close", None).await;
        assert_eq!(again, closed, "closing a closed conversation changes nothing");

        let deliveries = receiver.wait_for(1, WAIT).await;
        let events = of_type(&deliveries, "conversation.closed", &secret);
        assert_eq!(events.len(), 1);
        assert_eq!(
            events[0], closed,
            "the event carries the conversation as the API shows it"
        );

        // The contact writes again: a new conversation opens; the closed one stays closed.
        let second = id(&inbox.inbound(phone, "Hello again").await);
        assert_ne!(second, first);
        let contact = closed["contact_id"].as_str().unwrap();
        assert_eq!(
            inbox.listed(&format!("contact_id={contact}")).await,
            [second.clone(), first.clone()]
        );
        let reopened = inbox.conversation(&second).await;
        assert_eq!(reopened["conversation"]["status"], "open");
        assert_eq!(texts(&reopened["messages"]), ["Hello again"]);
        assert_eq!(inbox.conversation(&first).await["conversation"], closed);

        // Closing the new one announces it; the repeat above announced nothing.
        inbox.act(&second, "close", None).await;
        let deliveries = receiver.wait_for(2, WAIT).await;
        let events = of_type(&deliveries, "conversation.closed", &secret);
        assert_eq!(
            events.iter().map(id).collect::<Vec<_>>(),
            [first.clone(), second.clone()]
        );
    }
);

on_both_databases!(
    concurrent_arrivals_are_stored_once_and_counted_each,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let inbox = Inbox::new(&server, &twilio).await;
        let receiver = Receiver::start().await;
        let body = json!({"name": "hooks", "url": receiver.url, "events": ["message.received"]});
        inbox.api.ok("POST", "/v1/webhooks", Some(body)).await;

        // Five numbers write six messages each, all at once, and Twilio sends every one of them twice.
        let mut arrivals = Vec::new();
        for n in 0..30 {
            let (sid, phone) = (new_message_sid(), format!("+1555040{:04}", n % 5));
            for _ in 0..2 {
                arrivals.push((sid.clone(), phone.clone(), format!("Message {n}")));
            }
        }
        let answers = frontdesk_tests::join_all(arrivals.into_iter().map(|(sid, phone, text)| {
            let sms = inbox.sms.clone();
            async move { sms.inbound(&sid, &phone, &text).await }
        }))
        .await;
        assert!(answers.iter().all(|a| a.status == 200), "{answers:?}");

        let listed = inbox.api.ok("GET", "/v1/conversations?limit=100", None).await;
        let conversations = listed["conversations"].as_array().unwrap();
        assert_eq!(conversations.len(), 5, "one conversation per number: {listed}");
        for conversation in conversations {
            assert_eq!(conversation["unread_count"], json!(6), "{conversation}");
            let thread = inbox.conversation(conversation["id"].as_str().unwrap()).await;
            assert_eq!(thread["messages"].as_array().unwrap().len(), 6, "each message once");
        }
        let contacts = inbox.api.ok("GET", "/v1/contacts?limit=100", None).await;
        assert_eq!(contacts["contacts"].as_array().unwrap().len(), 5);
        let events = receiver.wait_until(WAIT, |d| d.len() >= 30).await;
        admin::quiesce(&server).await;
        assert_eq!(
            receiver.deliveries().len(),
            30,
            "one message.received per message: {}",
            events.len()
        );

        let count = |name: &'static str| server.metric(name, "kind=\"inbound\"");
        assert_eq!(count("frontdesk_write_batch_items_total").await, 60.0);
        let batches = count("frontdesk_write_batches_total").await;
        assert!(batches < 60.0, "arrivals shared write transactions: {batches} batches");
    }
);

on_both_databases!(
    unread_counts_follow_inbound_messages_read_and_unread,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let inbox = Inbox::new(&server, &twilio).await;
        let phone = "+14155550131";
        let unread = |conversation: &Value| conversation["unread_count"].as_i64().unwrap();

        inbox.inbound(phone, "One").await;
        let conversation = inbox.inbound(phone, "Two").await;
        let cv = id(&conversation);
        assert_eq!(unread(&conversation), 2, "each inbound message counts");
        inbox.text(phone, "On it").await;
        assert_eq!(
            unread(&inbox.conversation(&cv).await["conversation"]),
            2,
            "our own messages do not"
        );

        assert_eq!(unread(&inbox.act(&cv, "read", None).await), 0);
        assert_eq!(unread(&inbox.act(&cv, "read", None).await), 0);
        assert_eq!(unread(&inbox.act(&cv, "unread", None).await), 1);
        assert_eq!(
            unread(&inbox.act(&cv, "unread", None).await),
            1,
            "at least one, not one more"
        );
        assert_eq!(unread(&inbox.inbound(phone, "Three").await), 2);
        assert_eq!(
            unread(&inbox.act(&cv, "unread", None).await),
            2,
            "a count above one stays"
        );
        assert_eq!(unread(&inbox.act(&cv, "read", None).await), 0);
        assert_eq!(inbox.listed("unread=true").await, Vec::<String>::new());
    }
);

on_both_databases!(handoff_and_resume_with_the_handoff_event, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let inbox = Inbox::new(&server, &twilio).await;
    let receiver = Receiver::start().await;
    let secret = inbox.subscribe(&receiver, &["conversation.handoff"]).await;
    let cv = id(&inbox.inbound("+14155550141", "I want a refund").await);

    let handed = inbox
        .act(&cv, "handoff", Some(json!({"reason": "asks for a refund"})))
        .await;
    assert_eq!(
        (handed["handoff"].clone(), handed["handoff_reason"].clone()),
        (json!(true), json!("asks for a refund"))
    );
    let events = of_type(&receiver.wait_for(1, WAIT).await, "conversation.handoff", &secret);
    assert_eq!(
        events,
        std::slice::from_ref(&handed),
        "the event carries the conversation"
    );

    let repeated = inbox
        .act(&cv, "handoff", Some(json!({"reason": "something else"})))
        .await;
    assert_eq!(repeated, handed, "a conversation handed off stays as it was");

    let long = "x".repeat(501);
    let answer = inbox
        .api
        .send(
            "POST",
            &format!("/v1/conversations/{cv}/handoff"),
            Some(json!({"reason": long})),
        )
        .await;
    assert_invalid(&answer, "reason", "a reason over 500 characters");

    let resumed = inbox.act(&cv, "resume", None).await;
    assert_eq!(
        (resumed["handoff"].clone(), resumed["handoff_reason"].clone()),
        (json!(false), json!(""))
    );
    assert_eq!(inbox.act(&cv, "resume", None).await, resumed);
    assert_eq!(inbox.conversation(&cv).await["conversation"], resumed);

    // A handoff without a reason, after the resume, is a new handoff with its own event.
    let again = inbox.act(&cv, "handoff", None).await;
    assert_eq!(
        (again["handoff"].clone(), again["handoff_reason"].clone()),
        (json!(true), json!(""))
    );
    let events = of_type(&receiver.wait_for(2, WAIT).await, "conversation.handoff", &secret);
    assert_eq!(events, [handed, again]);
});

on_both_databases!(transcripts_in_text_markdown_and_json, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let inbox = Inbox::new(&server, &twilio).await;
    let phone = "+14155550151";

    let cv = id(&inbox.inbound(phone, "Is the shop open today?").await);
    let answer = inbox.text(phone, "Yes, until 6pm").await;
    sms::message_when(&inbox.api, &id(&answer), |m| m["status"] == "sent").await;
    inbox
        .edit(
            "PATCH",
            &format!("/v1/messages/{}", id(&answer)),
            Some(json!({"text": "Yes, until *7pm*", "resend": false})),
        )
        .await;
    inbox.inbound(phone, "My card is 4111 1111 1111 1111").await;
    let card = id(&inbox.conversation(&cv).await["messages"][2]);
    inbox.edit("DELETE", &format!("/v1/messages/{card}"), None).await;

    let (status, content_type, text) = raw(&inbox.api, &format!("/v1/conversations/{cv}/transcript")).await;
    assert_eq!(
        (status, content_type.as_str()),
        (200, "text/plain; charset=utf-8"),
        "{text}"
    );
    let lines: Vec<(String, String)> = text
        .lines()
        .map(|line| {
            let (time, rest) = line.split_once(' ').expect("time, then the rest");
            assert_timestamp(&json!(time), "a transcript line's time");
            (time.to_owned(), rest.to_owned())
        })
        .collect();
    assert_eq!(
        lines.iter().map(|(_, rest)| rest.as_str()).collect::<Vec<_>>(),
        [
            "contact: Is the shop open today?",
            "api: Yes, until *7pm* (edited)",
            "contact: (message removed)"
        ]
    );
    assert!(!text.contains("4111") && !text.contains("6pm"), "{text}");
    let (_, _, explicit) = raw(&inbox.api, &format!("/v1/conversations/{cv}/transcript?format=text")).await;
    assert_eq!(explicit, text);

    let (status, content_type, markdown) = raw(
        &inbox.api,
        &format!("/v1/conversations/{cv}/transcript?format=markdown"),
    )
    .await;
    assert_eq!((status, content_type.as_str()), (200, "text/markdown; charset=utf-8"));
    assert!(markdown.starts_with(&format!("# Conversation {cv}\n")), "{markdown}");
    let items: Vec<&str> = markdown.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(items.len(), 3, "{markdown}");
    assert!(
        items[0].starts_with(&format!("- **{}** contact: Is the shop open today?", lines[0].0)),
        "{markdown}"
    );
    assert!(items[1].ends_with(r"api: Yes, until \*7pm\* _(edited)_"), "{markdown}");
    assert!(items[2].ends_with("contact: _(message removed)_"), "{markdown}");
    assert!(!markdown.contains("4111"));

    let (status, content_type, json_text) =
        raw(&inbox.api, &format!("/v1/conversations/{cv}/transcript?format=json")).await;
    assert_eq!((status, content_type.as_str()), (200, "application/json"));
    let document: Value = serde_json::from_str(&json_text).expect("a JSON transcript");
    let thread = inbox.conversation(&cv).await;
    assert_eq!(document["conversation"], thread["conversation"]);
    assert_eq!(
        document["messages"], thread["messages"],
        "the messages as the API shows them"
    );
    assert_eq!(document["messages"][1]["edited"], true);
    assert_eq!(document["messages"][1]["edits"][0]["text"], "Yes, until 6pm");
    assert_eq!(
        (
            document["messages"][2]["removed"].clone(),
            document["messages"][2]["text"].clone()
        ),
        (json!(true), json!(""))
    );

    let answer = inbox
        .api
        .send("GET", &format!("/v1/conversations/{cv}/transcript?format=pdf"), None)
        .await;
    assert_invalid(&answer, "format", "an unknown format");

    // Over gRPC the transcript is a google.api.HttpBody.
    let mut client = ConversationsClient::connect(server.grpc.clone()).await.unwrap();
    let body = client
        .get_transcript(inbox.api.grpc(TranscriptRequest {
            conversation_id: cv.clone(),
            format: "markdown".into(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(body.content_type, "text/markdown; charset=utf-8");
    assert_eq!(String::from_utf8(body.data).unwrap(), markdown);
});

on_both_databases!(
    a_correction_keeps_the_old_text_and_follows_by_sms_unless_told_not_to,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let inbox = Inbox::new(&server, &twilio).await;
        let phone = "+14155550161";
        let booked = inbox.text(phone, "Your table is booked for 7pm").await;
        let booked_id = id(&booked);
        let path = format!("/v1/messages/{booked_id}");
        sms::message_when(&inbox.api, &booked_id, |m| m["status"] == "sent").await;

        let corrected = inbox
            .edit("PATCH", &path, Some(json!({"text": "Your table is booked for 8pm"})))
            .await;
        assert_eq!(corrected["text"], "Your table is booked for 8pm");
        assert_eq!(corrected["edited"], true);
        assert_eq!(corrected["edits"].as_array().unwrap().len(), 1);
        assert_eq!(corrected["edits"][0]["text"], "Your table is booked for 7pm");
        assert_timestamp(&corrected["edits"][0]["edited_at"], "edited_at");
        assert_eq!(inbox.message(&booked_id).await, corrected);

        let sent = twilio_sent(&twilio, "Correction: Your table is booked for 8pm").await;
        assert_eq!((sent.len(), sent[0].to()), (1, phone));
        let thread = inbox.conversation(booked["conversation_id"].as_str().unwrap()).await;
        let messages = thread["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2);
        let correction = &messages[1];
        assert_eq!(
            (
                correction["direction"].clone(),
                correction["author"].clone(),
                correction["text"].clone(),
                correction["reply_to"].clone()
            ),
            (
                json!("outbound"),
                json!("api"),
                json!("Correction: Your table is booked for 8pm"),
                json!(booked_id)
            )
        );

        // `resend: false` corrects the record only.
        let quiet = inbox
            .edit(
                "PATCH",
                &path,
                Some(json!({"text": "Your table is booked for 9pm", "resend": false})),
            )
            .await;
        assert_eq!(
            texts(&quiet["edits"]),
            ["Your table is booked for 7pm", "Your table is booked for 8pm"]
        );
        assert_eq!(quiet["text"], "Your table is booked for 9pm");
        let same = inbox
            .edit("PATCH", &path, Some(json!({"text": "Your table is booked for 9pm"})))
            .await;
        assert_eq!(same, quiet, "the same text again changes nothing and sends nothing");
        assert_eq!(
            inbox.conversation(booked["conversation_id"].as_str().unwrap()).await["messages"]
                .as_array()
                .unwrap()
                .len(),
            2,
            "no message was sent for either"
        );
        admin::quiesce(&server).await;
        assert!(
            twilio
                .sent_with_body("Correction: Your table is booked for 9pm")
                .is_empty()
        );

        // What cannot be corrected.
        let cases = [
            (json!({"text": ""}), "text", "empty text"),
            (
                json!({"text": "x".repeat(1_601)}),
                "text",
                "over 1,600 characters on sms",
            ),
            (
                json!({"text": "x".repeat(1_595)}),
                "text",
                "too long once `Correction: ` is before it",
            ),
        ];
        for (body, field, case) in cases {
            assert_invalid(&inbox.api.send("PATCH", &path, Some(body)).await, field, case);
        }
        let long = inbox
            .edit(
                "PATCH",
                &path,
                Some(json!({"text": "x".repeat(1_595), "resend": false})),
            )
            .await;
        assert_eq!(
            long["text"].as_str().unwrap().len(),
            1_595,
            "fits without the correction message"
        );
        let cv = id(&inbox.inbound(phone, "Thanks!").await);
        let theirs = id(&inbox.conversation(&cv).await["messages"][2]);
        let answer = inbox
            .api
            .send(
                "PATCH",
                &format!("/v1/messages/{theirs}"),
                Some(json!({"text": "Thanks?"})),
            )
            .await;
        assert_invalid(&answer, "message_id", "an inbound message");
        inbox.edit("DELETE", &path, None).await;
        let answer = inbox
            .api
            .send("PATCH", &path, Some(json!({"text": "Back again"})))
            .await;
        assert_invalid(&answer, "message_id", "a removed message");
        let answer = inbox
            .api
            .send(
                "PATCH",
                "/v1/messages/msg_0000000000000000",
                Some(json!({"text": "hi"})),
            )
            .await;
        assert_not_found(&answer, "an unknown message");
    }
);

on_both_databases!(
    a_removed_message_is_erased_and_a_queued_one_is_not_sent,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let inbox = Inbox::new(&server, &twilio).await;
        let phone = "+14155550171";

        // An MMS a customer should not have sent.
        let form = twilio::inbound_message(
            &new_message_sid(),
            phone,
            twilio::FROM_NUMBER,
            "My card: 4111 1111 1111 1111",
            &[("https://media.example/card.jpg", "image/jpeg")],
        );
        let hook = twilio::post_signed(inbox.sms.local_url(), &inbox.sms.webhook_url, &twilio.auth_token, &form).await;
        assert_eq!(hook.status, 200, "{hook:?}");
        let cv = id(&inbox.api.ok("GET", "/v1/conversations", None).await["conversations"][0]);
        let card = inbox.conversation(&cv).await["messages"][0].clone();
        assert_eq!(card["attachments"].as_array().unwrap().len(), 1, "{card}");
        let path = format!("/v1/messages/{}", id(&card));

        let removed = inbox.edit("DELETE", &path, None).await;
        assert_eq!(
            (
                removed["removed"].clone(),
                removed["text"].clone(),
                removed["attachments"].clone()
            ),
            (json!(true), json!(""), json!([]))
        );
        assert_eq!(inbox.message(&id(&card)).await, removed);
        assert_eq!(
            inbox.edit("DELETE", &path, None).await,
            removed,
            "removing again changes nothing"
        );
        let stored = |column: &str| format!("SELECT {column} FROM messages WHERE id = $1");
        assert_eq!(db.scalar(&stored("text"), &id(&card)).await.as_deref(), Some(""));
        assert_eq!(
            db.scalar(&stored("attachments"), &id(&card)).await.as_deref(),
            Some("[]")
        );

        // Outbound messages can be removed too; one still waiting for its turn is never sent. The channel sends
        // one message every four seconds, so the second waits in the queue.
        let mut config = twilio.channel_config();
        config["max_per_second"] = json!("0.25");
        let slow = json!({"name": "sms-slow", "type": "sms", "config": config});
        let slow = inbox.api.ok("POST", "/v1/channels", Some(slow)).await;
        let slow_phone = "+14155550172";
        inbox
            .send(json!({"phone": slow_phone, "text": "First", "channel": "sms-slow"}))
            .await;
        twilio_sent(&twilio, "First").await;
        let second = inbox
            .send(json!({"phone": slow_phone, "text": "Second, by mistake", "channel": "sms-slow"}))
            .await;
        let removed = inbox
            .edit("DELETE", &format!("/v1/messages/{}", id(&second)), None)
            .await;
        assert_eq!(
            (
                removed["removed"].clone(),
                removed["text"].clone(),
                removed["status"].clone(),
                removed["error"]["code"].clone()
            ),
            (json!(true), json!(""), json!("failed"), json!("cancelled"))
        );
        // Its turn comes about three seconds later, and passes.
        admin::until_done(&server, Jobs::Lane(&id(&slow["channel"]))).await;
        let sent: Vec<String> = twilio.sent_to(slow_phone).iter().map(|m| m.body().to_owned()).collect();
        assert_eq!(sent, ["First"], "the removed message never went out");
    }
);

on_both_databases!(one_reaction_per_author_replaced_and_removed, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let inbox = Inbox::new(&server, &twilio).await;
    let phone = "+14155550181";
    let ours = id(&inbox.text(phone, "See you at 7").await);
    sms::message_when(&inbox.api, &ours, |m| m["status"] == "sent").await;
    let path = format!("/v1/messages/{ours}/reactions");
    let react = |emoji: &str| json!({ "emoji": emoji });

    let thumbs = inbox.edit("POST", &path, Some(react("👍"))).await;
    let reactions = thumbs["reactions"].as_array().unwrap();
    assert_eq!(reactions.len(), 1);
    assert_eq!(
        (reactions[0]["emoji"].clone(), reactions[0]["author"].clone()),
        (json!("👍"), json!("api"))
    );
    assert_timestamp(&reactions[0]["created_at"], "created_at");

    let heart = inbox.edit("POST", &path, Some(react("❤️"))).await;
    assert_eq!(
        heart["reactions"].as_array().unwrap().len(),
        1,
        "a new emoji replaces the caller's"
    );
    assert_eq!(heart["reactions"][0]["emoji"], "❤️");
    assert_eq!(
        inbox.edit("POST", &path, Some(react("❤️"))).await,
        heart,
        "the same one changes nothing"
    );
    let family = inbox.edit("POST", &path, Some(react("👨‍👩‍👧"))).await;
    assert_eq!(
        family["reactions"][0]["emoji"], "👨‍👩‍👧",
        "one grapheme of several code points"
    );
    assert_eq!(inbox.message(&ours).await, family);

    let cleared = inbox.edit("POST", &path, Some(react(""))).await;
    assert_eq!(cleared["reactions"], json!([]));
    assert_eq!(inbox.edit("POST", &path, Some(react(""))).await, cleared);

    for bad in ["ab", "👍👍", "a", "1", "👍 "] {
        assert_invalid(&inbox.api.send("POST", &path, Some(react(bad))).await, "emoji", bad);
    }

    let cv = id(&inbox.inbound(phone, "Great, thanks").await);
    let theirs = id(&inbox.conversation(&cv).await["messages"][1]);
    let thanked = inbox
        .edit("POST", &format!("/v1/messages/{theirs}/reactions"), Some(react("🙏")))
        .await;
    assert_eq!(
        thanked["reactions"][0]["emoji"], "🙏",
        "inbound messages take reactions too"
    );
    let answer = inbox
        .api
        .send("POST", "/v1/messages/msg_0000000000000000/reactions", Some(react("👍")))
        .await;
    assert_not_found(&answer, "an unknown message");
});

on_both_databases!(
    another_accounts_ids_are_not_found_and_scopes_are_enforced,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let inbox = Inbox::new(&server, &twilio).await;
        let phone = "+14155550191";
        inbox.inbound(phone, "Hello").await;
        let ours = inbox.text(phone, "Hi there").await;
        let cv = ours["conversation_id"].as_str().unwrap().to_owned();
        let message = id(&ours);
        sms::message_when(&inbox.api, &message, |m| m["status"] == "sent").await;
        let before = inbox.conversation(&cv).await;

        let other = Platform::new(&server).await;
        let routes: Vec<(&str, String, Option<Value>)> = vec![
            ("GET", format!("/v1/conversations/{cv}"), None),
            ("GET", format!("/v1/conversations/{cv}/messages"), None),
            ("POST", format!("/v1/conversations/{cv}/close"), None),
            ("POST", format!("/v1/conversations/{cv}/read"), None),
            ("POST", format!("/v1/conversations/{cv}/unread"), None),
            (
                "POST",
                format!("/v1/conversations/{cv}/handoff"),
                Some(json!({"reason": "x"})),
            ),
            ("POST", format!("/v1/conversations/{cv}/resume"), None),
            ("GET", format!("/v1/conversations/{cv}/transcript"), None),
            ("GET", format!("/v1/conversations/{cv}/transcript?format=json"), None),
            ("GET", format!("/v1/messages/{message}"), None),
            (
                "PATCH",
                format!("/v1/messages/{message}"),
                Some(json!({"text": "Hijacked"})),
            ),
            (
                "POST",
                format!("/v1/messages/{message}/reactions"),
                Some(json!({"emoji": "👎"})),
            ),
            ("DELETE", format!("/v1/messages/{message}"), None),
        ];
        for (method, path, body) in &routes {
            let answer: Answer = other.send(method, path, body.clone()).await;
            assert_not_found(&answer, &format!("{method} {path}"));
        }
        assert_eq!(
            other.ok("GET", "/v1/conversations", None).await["conversations"],
            json!([])
        );
        assert_eq!(inbox.conversation(&cv).await, before, "nothing changed for the owner");

        let deals_only = admin::issue_key(&server, &inbox.api.account_id, &["deals"]).await;
        let conversations_only = admin::issue_key(&server, &inbox.api.account_id, &["conversations"]).await;
        let messages_only = admin::issue_key(&server, &inbox.api.account_id, &["messages"]).await;
        let as_key = |key: &str| Platform::of(&server, &inbox.api.account_id, key);
        let (deals_only, conversations_only, messages_only) =
            (as_key(&deals_only), as_key(&conversations_only), as_key(&messages_only));
        for (method, path, body) in &routes {
            let answer = deals_only.send(method, path, body.clone()).await;
            assert_insufficient_scope(&answer, &format!("{method} {path} with a deals key"));
        }
        assert_insufficient_scope(
            &deals_only.send("GET", "/v1/conversations", None).await,
            "the list with a deals key",
        );
        conversations_only
            .ok("GET", &format!("/v1/conversations/{cv}"), None)
            .await;
        assert_insufficient_scope(
            &conversations_only
                .send(
                    "POST",
                    &format!("/v1/messages/{message}/reactions"),
                    Some(json!({"emoji": "👍"})),
                )
                .await,
            "a reaction with a conversations key",
        );
        messages_only
            .ok(
                "POST",
                &format!("/v1/messages/{message}/reactions"),
                Some(json!({"emoji": "👍"})),
            )
            .await;
        assert_insufficient_scope(
            &messages_only
                .send("POST", &format!("/v1/conversations/{cv}/read"), None)
                .await,
            "marking read with a messages key",
        );
    }
);

// After `DELETE /v1/contacts/{id}` the contact, its conversations (open and closed, their messages and
// transcripts) and its messages answer 404 and are in no list; another contact's are untouched.
on_both_databases!(
    erasing_a_contact_erases_its_conversations_and_messages,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let inbox = Inbox::new(&server, &twilio).await;
        let (phone, bystander) = ("+14155550301", "+14155550302");

        // Two conversations of the contact (one closed) with messages both ways, and another contact's.
        let first = id(&inbox.inbound(phone, "Please forget me").await);
        let reply = id(&inbox.text(phone, "Sorry to see you go").await);
        sms::message_when(&inbox.api, &reply, |m| m["status"] == "sent").await;
        inbox.act(&first, "close", None).await;
        let second = id(&inbox.inbound(phone, "Really, all of it").await);
        assert_ne!(first, second);
        let mut messages = vec![reply];
        for conversation in [&first, &second] {
            let thread = inbox.conversation(conversation).await;
            messages.extend(thread["messages"].as_array().unwrap().iter().map(id));
        }
        messages.sort();
        messages.dedup();
        assert_eq!(messages.len(), 3, "{messages:?}");
        let other = id(&inbox.inbound(bystander, "I stay").await);
        let contact = inbox.conversation(&second).await["conversation"]["contact_id"]
            .as_str()
            .unwrap()
            .to_owned();

        inbox.api.ok("DELETE", &format!("/v1/contacts/{contact}"), None).await;

        let mut gone = vec![format!("/v1/contacts/{contact}")];
        for conversation in [&first, &second] {
            gone.push(format!("/v1/conversations/{conversation}"));
            gone.push(format!("/v1/conversations/{conversation}/messages"));
            gone.push(format!("/v1/conversations/{conversation}/transcript"));
        }
        gone.extend(messages.iter().map(|m| format!("/v1/messages/{m}")));
        for path in &gone {
            assert_not_found(&inbox.api.send("GET", path, None).await, path);
        }
        assert_eq!(
            inbox.listed("").await,
            [other.as_str()],
            "only the other contact's conversation is listed"
        );
        assert!(inbox.listed(&format!("contact_id={contact}")).await.is_empty());
        let contacts = inbox.api.ids("/v1/contacts", "contacts", "id").await;
        assert_eq!(contacts.len(), 1, "{contacts:?}");
        assert!(!contacts.contains(&contact));
        assert!(
            inbox
                .api
                .ids("/v1/contacts?q=4155550301", "contacts", "id")
                .await
                .is_empty()
        );
        let kept = inbox.conversation(&other).await;
        assert_eq!(
            texts(&kept["messages"]),
            ["I stay"],
            "the other contact keeps everything"
        );
    }
);

// An sms from a new number opens a conversation with the agent routing picks (a keyword entry point over the
// channel default; nobody before either exists), in `conversation.created` and on the conversation.
on_both_databases!(
    an_sms_from_a_new_number_opens_a_conversation_with_the_routed_agent,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let inbox = Inbox::new(&server, &twilio).await;
        let receiver = Receiver::start().await;
        let secret = inbox.subscribe(&receiver, &["conversation.created"]).await;
        // Plays a new number writing `text`; its conversation as `conversation.created` showed it.
        let opened = async |phone: &str, text: &str| {
            let before = receiver.deliveries().len();
            let answer = inbox.sms.inbound(&new_message_sid(), phone, text).await;
            assert_eq!(answer.status, 200, "{answer:?}");
            let events = receiver.wait_for(before + 1, WAIT).await;
            of_type(&events, "conversation.created", &secret)[before].clone()
        };

        // Nothing routes yet: nobody answers.
        let unrouted = opened("+14155550311", "Hello").await;
        assert_eq!(unrouted["agent_id"], "");

        // A channel default, and an entry point for bookings that outranks it.
        let front = inbox.api.agent("Front inbox").await;
        let bookings = inbox.api.agent("Bookings").await;
        let body = json!({"channel": "sms-main", "agent_id": front});
        inbox
            .api
            .ok("PUT", "/v1/entry-points/channel-defaults", Some(body))
            .await;
        let rule = json!({"channel": "sms-main", "match": {"keywords": ["book"]}, "priority": 10});
        inbox
            .api
            .ok("POST", &format!("/v1/agents/{bookings}/entry-points"), Some(rule))
            .await;

        for (phone, text, agent) in [
            ("+14155550312", "Can I book a table for two?", &bookings),
            ("+14155550313", "Are you open today?", &front),
        ] {
            let event = opened(phone, text).await;
            assert_eq!(event["agent_id"], agent.as_str(), "{text}: {event}");
            assert_eq!(event["channel"], "sms-main");
            let shown = inbox.conversation(&id(&event)).await["conversation"].clone();
            assert_eq!(shown["agent_id"], agent.as_str(), "{text}: {shown}");
        }
        let shown = inbox.conversation(&id(&unrouted)).await["conversation"].clone();
        assert_eq!(shown["agent_id"], "", "a conversation keeps the agent it opened with");
    }
);
