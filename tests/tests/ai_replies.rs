//! AI replies end to end, on SQLite and PostgreSQL + Redis, with the local provider (words only, as the
//! test servers run without the embedding model): a question the agent's FAQs answer gets that answer over
//! sms, charged to the account's credits; an off-topic one gets the handoff sentence and the conversation goes
//! to a person (`conversation.handoff`); a burst is answered once; a person's send and a handoff silence the
//! AI, and a resume brings it back; insufficient credits hand off; an agent without routing answers nothing.

use std::time::{Duration, Instant};

use frontdesk_api::admin::v1::CreditsRequest;
use frontdesk_tests::{
    Db, Server, admin, on_both_databases,
    platform::Platform,
    sms::{self, SmsChannel},
    twilio::{FakeTwilio, SentMessage, new_message_sid},
    webhook_receiver::Receiver,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const HOURS: &str = "We are open from nine to five, Monday to Friday.";
const HANDOFF: &str = "Thanks for your message. A member of our team will get back to you shortly.";

/// A server replying after 300 ms of quiet, an sms channel whose default agent has two FAQs.
struct Desk<'a> {
    platform: Platform<'a>,
    channel: SmsChannel,
    agent: String,
}

async fn desk<'a>(server: &'a Server, twilio: &FakeTwilio) -> Desk<'a> {
    let platform = Platform::new(server).await;
    let channel = SmsChannel::connect(&platform, twilio, "sms", None).await;
    let agent = platform.agent("Front desk").await;
    for (question, answer) in [
        ("What are your opening hours?", HOURS),
        (
            "Do you offer free parking?",
            "Yes, parking behind the shop is free for customers.",
        ),
    ] {
        let body = json!({"question": question, "answer": answer});
        platform
            .ok("POST", &format!("/v1/agents/{agent}/faqs"), Some(body))
            .await;
    }
    let default = json!({"channel": "sms", "agent_id": agent});
    platform
        .ok("PUT", "/v1/entry-points/channel-defaults", Some(default))
        .await;
    Desk {
        platform,
        channel,
        agent,
    }
}

async fn start(db: &Db, twilio: &FakeTwilio) -> Server {
    sms::start(db, twilio, &[("FRONTDESK_REPLY_DEBOUNCE_MS", "300")]).await
}

/// Waits until the fake has `count` requests to `to`; them.
async fn sent_to(twilio: &FakeTwilio, to: &str, count: usize) -> Vec<SentMessage> {
    let started = Instant::now();
    loop {
        let sent = twilio.sent_to(to);
        if sent.len() >= count {
            return sent;
        }
        assert!(
            started.elapsed() < WAIT,
            "{} of {count} messages to {to}: {sent:?}",
            sent.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The only conversation of the contact with this phone.
async fn conversation_of(platform: &Platform<'_>, phone: &str) -> Value {
    let contacts = platform
        .ok("GET", &format!("/v1/contacts?q={}", phone.replace('+', "%2B")), None)
        .await;
    let contact = contacts["contacts"][0]["id"].as_str().expect("the contact").to_owned();
    let list = platform
        .ok("GET", &format!("/v1/conversations?contact_id={contact}"), None)
        .await;
    let id = list["conversations"][0]["id"].as_str().expect("a conversation");
    platform.ok("GET", &format!("/v1/conversations/{id}"), None).await
}

async fn credits(platform: &Platform<'_>) -> Value {
    platform.ok("GET", "/v1/credits", None).await["credits"].clone()
}

on_both_databases!(
    a_question_the_faqs_answer_is_answered_and_charged,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = start(&db, &twilio).await;
        let desk = desk(&server, &twilio).await;
        let before = credits(&desk.platform).await["balance"].as_f64().unwrap();

        desk.channel
            .inbound(&new_message_sid(), "+15556000001", "When are you open?")
            .await;
        let reply = sent_to(&twilio, "+15556000001", 1).await;
        assert_eq!(reply[0].body(), HOURS);

        let thread = conversation_of(&desk.platform, "+15556000001").await;
        let messages = thread["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2, "{thread}");
        assert_eq!(
            (messages[1]["direction"].as_str(), messages[1]["author"].as_str()),
            (Some("outbound"), Some("agent"))
        );
        assert_eq!(thread["conversation"]["agent_id"], desk.agent.as_str());
        assert_eq!(thread["conversation"]["handoff"], false);

        let after = credits(&desk.platform).await;
        let balance = after["balance"].as_f64().unwrap();
        assert!(
            (before - balance - 0.15).abs() < 1e-9,
            "a mini reply costs 0.15: {before} -> {balance}"
        );
        let entry = &after["entries"][0];
        assert_eq!(entry["amount"], -0.15);
        assert_eq!(entry["conversation_id"], thread["conversation"]["id"]);
        assert!(
            entry["reason"].as_str().unwrap().starts_with("ai_reply: faq "),
            "{entry}"
        );
    }
);

on_both_databases!(an_off_topic_question_is_handed_to_a_person, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = start(&db, &twilio).await;
    let desk = desk(&server, &twilio).await;
    let receiver = Receiver::start().await;
    let hook = json!({"name": "handoffs", "url": receiver.url, "events": ["conversation.handoff"]});
    desk.platform.ok("POST", "/v1/webhooks", Some(hook)).await;
    let before = credits(&desk.platform).await["balance"].as_f64().unwrap();

    desk.channel
        .inbound(
            &new_message_sid(),
            "+15556000002",
            "Can you repair my helicopter engine?",
        )
        .await;
    let reply = sent_to(&twilio, "+15556000002", 1).await;
    assert_eq!(reply[0].body(), HANDOFF);
    let thread = conversation_of(&desk.platform, "+15556000002").await;
    assert_eq!(thread["conversation"]["handoff"], true);
    assert_eq!(thread["conversation"]["handoff_reason"], "no_confident_answer");
    let delivered = receiver.wait_for(1, WAIT).await;
    assert_eq!(delivered[0].json["type"], "conversation.handoff");
    assert_eq!(delivered[0].json["data"]["id"], thread["conversation"]["id"]);
    let balance = credits(&desk.platform).await["balance"].as_f64().unwrap();
    assert!((before - balance).abs() < 1e-9, "the handoff sentence is free");

    // The conversation is a person's now: the contact's next message gets no AI reply.
    desk.channel
        .inbound(&new_message_sid(), "+15556000002", "When are you open?")
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(twilio.sent_to("+15556000002").len(), 1);
    let handoffs = desk.platform.ok("GET", "/v1/conversations?handoff=true", None).await;
    assert_eq!(
        handoffs["conversations"].as_array().unwrap().len(),
        1,
        "the human queue"
    );
});

on_both_databases!(a_burst_is_answered_once, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = start(&db, &twilio).await;
    let desk = desk(&server, &twilio).await;
    for text in ["Hi", "I have a question", "When are you open?"] {
        desk.channel.inbound(&new_message_sid(), "+15556000003", text).await;
    }
    let reply = sent_to(&twilio, "+15556000003", 1).await;
    assert_eq!(reply[0].body(), HOURS, "the burst's question is answered");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(twilio.sent_to("+15556000003").len(), 1, "one reply for the burst");
});

on_both_databases!(
    a_person_or_a_handoff_silences_the_ai_and_resume_brings_it_back,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        // A long debounce: the person answers before the AI would.
        let server = sms::start(&db, &twilio, &[("FRONTDESK_REPLY_DEBOUNCE_MS", "2000")]).await;
        let desk = desk(&server, &twilio).await;
        desk.channel
            .inbound(&new_message_sid(), "+15556000004", "When are you open?")
            .await;
        let body = json!({"phone": "+15556000004", "text": "Hi! We open at nine."});
        let answer = desk.platform.send("POST", "/v1/contacts/send", Some(body)).await;
        assert_eq!(answer.status, 202, "{}", answer.body);
        tokio::time::sleep(Duration::from_secs(4)).await;
        let sent = twilio.sent_to("+15556000004");
        assert_eq!(sent.len(), 1, "the person's answer, no AI reply: {sent:?}");
        assert_eq!(sent[0].body(), "Hi! We open at nine.");

        // Handed off by hand: silent; resumed: the next message is answered.
        let id = conversation_of(&desk.platform, "+15556000004").await["conversation"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let reason = json!({"reason": "vip customer"});
        desk.platform
            .ok("POST", &format!("/v1/conversations/{id}/handoff"), Some(reason))
            .await;
        desk.channel
            .inbound(&new_message_sid(), "+15556000004", "Do you have parking?")
            .await;
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(twilio.sent_to("+15556000004").len(), 1, "handed off: silent");
        desk.platform
            .ok("POST", &format!("/v1/conversations/{id}/resume"), Some(json!({})))
            .await;
        desk.channel
            .inbound(&new_message_sid(), "+15556000004", "When are you open?")
            .await;
        let sent = sent_to(&twilio, "+15556000004", 2).await;
        assert_eq!(
            sent[1].body(),
            HOURS,
            "resumed: the AI answers the next message, not the older ones"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(twilio.sent_to("+15556000004").len(), 2);
    }
);

on_both_databases!(without_credits_the_conversation_is_handed_off, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = start(&db, &twilio).await;
    let desk = desk(&server, &twilio).await;
    let balance = credits(&desk.platform).await["balance"].as_f64().unwrap();
    let debit = CreditsRequest {
        account_id: desk.platform.account_id.clone(),
        credits: format!("{balance:.3}"),
        reason: "spent elsewhere".into(),
    };
    admin::client(&server).await.debit_credits(debit).await.unwrap();

    desk.channel
        .inbound(&new_message_sid(), "+15556000005", "When are you open?")
        .await;
    let reply = sent_to(&twilio, "+15556000005", 1).await;
    assert_eq!(reply[0].body(), HANDOFF);
    let thread = conversation_of(&desk.platform, "+15556000005").await;
    assert_eq!(thread["conversation"]["handoff_reason"], "insufficient_credits");
    assert_eq!(credits(&desk.platform).await["balance"], 0.0, "nothing was charged");
});

on_both_databases!(an_agent_without_routing_answers_nothing, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = start(&db, &twilio).await;
    let platform = Platform::new(&server).await;
    let channel = SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let agent = platform.agent("Unrouted").await;
    let body = json!({"question": "What are your opening hours?", "answer": HOURS});
    platform
        .ok("POST", &format!("/v1/agents/{agent}/faqs"), Some(body))
        .await;
    channel
        .inbound(&new_message_sid(), "+15556000006", "When are you open?")
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(twilio.sent_to("+15556000006").is_empty());
    let thread = conversation_of(&platform, "+15556000006").await;
    assert_eq!(thread["conversation"]["agent_id"], "");
});
