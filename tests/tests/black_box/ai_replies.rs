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
    sms::{self, Desk, SmsChannel},
    twilio::{FakeTwilio, new_message_sid},
    webchat,
    webhook_receiver::Receiver,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const HOURS: &str = "We are open from nine to five, Monday to Friday.";
const PARKING: &str = "Yes, parking behind the shop is free for customers.";
const HANDOFF: &str = "Thanks for your message. A member of our team will get back to you shortly.";

/// An sms channel whose default agent has two FAQs.
async fn desk<'a>(server: &'a Server, twilio: &FakeTwilio) -> Desk<'a> {
    let desk = Desk::open(
        server,
        twilio,
        json!({"name": "Front desk"}),
        ("What are your opening hours?", HOURS),
    )
    .await;
    desk.platform
        .faq(&desk.agent, "Do you offer free parking?", PARKING)
        .await;
    desk
}

async fn start(db: &Db, twilio: &FakeTwilio) -> Server {
    sms::start(db, twilio, &[("FRONTDESK_REPLY_DEBOUNCE_MS", "300")]).await
}

/// Waits past the reply debounce of `start` (300 ms), then until the service is quiet: a reply that was
/// going to come has come.
async fn settle(server: &Server) {
    settle_past(server, Duration::from_millis(300)).await;
}

/// Waits until a reply debounced by `debounce` from now is due, then until the service is quiet: a reply
/// that was going to come has come (quiet means nothing due or running; a reply still waiting for its
/// debounce is neither).
async fn settle_past(server: &Server, debounce: Duration) {
    tokio::time::sleep(debounce + Duration::from_millis(100)).await;
    frontdesk_tests::admin::quiesce(server).await;
}

async fn credits(platform: &Platform<'_>) -> Value {
    platform.ok("GET", "/v1/credits?limit=200", None).await["credits"].clone()
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
        let reply = twilio.wait_for_sent("+15556000001", 1).await;
        assert_eq!(reply[0].body(), HOURS);

        let thread = desk.platform.conversation_with("+15556000001").await;
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
            (before - balance - 1.0).abs() < 1e-9,
            "a pro reply (the default tier) costs 1: {before} -> {balance}"
        );
        let entry = &after["entries"][0];
        assert_eq!(entry["amount"], -1.0);
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
    let reply = twilio.wait_for_sent("+15556000002", 1).await;
    assert_eq!(reply[0].body(), HANDOFF);
    let thread = desk.platform.conversation_with("+15556000002").await;
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
    settle(&server).await;
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
    // A debounce far longer than an inbound request takes on a loaded machine: the three messages are one
    // burst however slowly each is stored.
    let server = sms::start(&db, &twilio, &[("FRONTDESK_REPLY_DEBOUNCE_MS", "3000")]).await;
    let desk = desk(&server, &twilio).await;
    for text in ["Hi", "I have a question", "When are you open?"] {
        desk.channel.inbound(&new_message_sid(), "+15556000003", text).await;
    }
    let reply = twilio.wait_for_sent("+15556000003", 1).await;
    assert_eq!(reply[0].body(), HOURS, "the burst's question is answered");
    frontdesk_tests::admin::quiesce(&server).await;
    assert_eq!(twilio.sent_to("+15556000003").len(), 1, "one reply for the burst");

    // A burst that asks two things gets both answers in one reply, in the order asked.
    for text in ["Hello", "When are you open?", "Do you offer free parking?"] {
        desk.channel.inbound(&new_message_sid(), "+15556000013", text).await;
    }
    let reply = twilio.wait_for_sent("+15556000013", 1).await;
    assert_eq!(reply[0].body(), format!("{HOURS}\n\n{PARKING}"));
    frontdesk_tests::admin::quiesce(&server).await;
    assert_eq!(twilio.sent_to("+15556000013").len(), 1, "one reply for the burst");
    let charges = credits(&desk.platform).await["entries"].clone();
    let reasons: Vec<&str> = charges
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["reason"].as_str())
        .filter(|r| r.starts_with("ai_reply: faqs "))
        .collect();
    assert_eq!(reasons.len(), 1, "one charge names both FAQs: {charges}");
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
        settle_past(&server, Duration::from_secs(2)).await;
        let sent = twilio.sent_to("+15556000004");
        assert_eq!(sent.len(), 1, "the person's answer, no AI reply: {sent:?}");
        assert_eq!(sent[0].body(), "Hi! We open at nine.");

        // Handed off by hand: silent; resumed: the next message is answered.
        let id = desk.platform.conversation_with("+15556000004").await["conversation"]["id"]
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
        settle_past(&server, Duration::from_secs(2)).await;
        assert_eq!(twilio.sent_to("+15556000004").len(), 1, "handed off: silent");
        desk.platform
            .ok("POST", &format!("/v1/conversations/{id}/resume"), Some(json!({})))
            .await;
        desk.channel
            .inbound(&new_message_sid(), "+15556000004", "When are you open?")
            .await;
        let sent = twilio.wait_for_sent("+15556000004", 2).await;
        assert_eq!(
            sent[1].body(),
            HOURS,
            "resumed: the AI answers the next message, not the older ones"
        );
        settle_past(&server, Duration::from_secs(2)).await;
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
    let reply = twilio.wait_for_sent("+15556000005", 1).await;
    assert_eq!(reply[0].body(), HANDOFF);
    let thread = desk.platform.conversation_with("+15556000005").await;
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
    settle(&server).await;
    assert!(twilio.sent_to("+15556000006").is_empty());
    let thread = platform.conversation_with("+15556000006").await;
    assert_eq!(thread["conversation"]["agent_id"], "");
});

on_both_databases!(each_tier_costs_its_price, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = start(&db, &twilio).await;
    let desk = desk(&server, &twilio).await;
    for (n, (tier, cost)) in [("mini", 0.15), ("max", 0.25), ("pro", 1.0)].into_iter().enumerate() {
        let body = json!({"ai_tier": tier});
        desk.platform
            .ok("PUT", &format!("/v1/agents/{}", desk.agent), Some(body))
            .await;
        let before = credits(&desk.platform).await["balance"].as_f64().unwrap();
        let phone = format!("+1555601000{n}");
        desk.channel
            .inbound(&new_message_sid(), &phone, "When are you open?")
            .await;
        twilio.wait_for_sent(&phone, 1).await;
        let after = credits(&desk.platform).await["balance"].as_f64().unwrap();
        assert!((before - after - cost).abs() < 1e-9, "{tier}: {before} -> {after}");
    }
});

// Fifty conversations ask at once: fifty replies, and the ledger's charges are exactly what left the balance.
on_both_databases!(
    the_ledger_and_the_balance_agree_under_concurrent_replies,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = start(&db, &twilio).await;
        let desk = desk(&server, &twilio).await;
        let grant = CreditsRequest {
            account_id: desk.platform.account_id.clone(),
            credits: "100".into(),
            reason: "top-up".into(),
        };
        admin::client(&server).await.grant_credits(grant).await.unwrap();
        let before = credits(&desk.platform).await["balance"].as_f64().unwrap();
        let phones: Vec<String> = (0..50).map(|n| format!("+155560200{n:02}")).collect();
        let asks = phones.iter().map(|phone| {
            let (channel, phone) = (desk.channel.clone(), phone.clone());
            async move { channel.inbound(&new_message_sid(), &phone, "When are you open?").await }
        });
        frontdesk_tests::join_all(asks).await;
        for phone in &phones {
            let reply = twilio.wait_for_sent(phone, 1).await;
            assert_eq!(reply[0].body(), HOURS);
        }
        let after = credits(&desk.platform).await;
        let balance = after["balance"].as_f64().unwrap();
        let charged: f64 = after["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["reason"].as_str().unwrap_or_default().starts_with("ai_reply"))
            .map(|e| -e["amount"].as_f64().unwrap())
            .sum();
        assert!(
            (charged - 50.0).abs() < 1e-9,
            "fifty pro replies in the ledger: {charged}"
        );
        assert!(
            (before - balance - charged).abs() < 1e-9,
            "{before} - {charged} != {balance}"
        );
    }
);

// Whatever the gap between two questions, the second is answered by the last reply: it arrives before the
// first's reply starts (one reply answers both), while it is written or after.
on_both_databases!(a_question_during_a_reply_gets_its_own_answer, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[("FRONTDESK_REPLY_DEBOUNCE_MS", "0")]).await;
    let desk = desk(&server, &twilio).await;
    for (n, gap) in [0u64, 15, 40, 80, 150].into_iter().enumerate() {
        let phone = format!("+155560300{n:02}");
        desk.channel
            .inbound(&new_message_sid(), &phone, "When are you open?")
            .await;
        tokio::time::sleep(Duration::from_millis(gap)).await;
        desk.channel
            .inbound(&new_message_sid(), &phone, "Do you offer free parking?")
            .await;
        let started = Instant::now();
        loop {
            let sent = twilio.sent_to(&phone);
            if sent.last().is_some_and(|m| m.body().ends_with(PARKING)) {
                break;
            }
            assert!(
                started.elapsed() < WAIT,
                "the parking question got no answer ({gap} ms): {sent:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
});

on_both_databases!(empty_long_and_attachment_only_messages, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = start(&db, &twilio).await;
    let desk = desk(&server, &twilio).await;
    // A photo alone: a person looks at it.
    desk.channel
        .inbound_with_media(
            &new_message_sid(),
            "+15556040001",
            "",
            &[("https://media.example/1.jpg", "image/jpeg")],
        )
        .await;
    let reply = twilio.wait_for_sent("+15556040001", 1).await;
    assert_eq!(reply[0].body(), HANDOFF);
    let thread = desk.platform.conversation_with("+15556040001").await;
    assert_eq!(thread["conversation"]["handoff_reason"], "attachment");
    // Spaces alone: nothing to answer, no reply to nothing.
    desk.channel.inbound(&new_message_sid(), "+15556040002", "   ").await;
    // 4,000 characters around the question: answered or handed off, never a failure.
    let long = format!("{} When are you open? {}", "so ".repeat(1_300), "thanks ".repeat(40));
    desk.channel.inbound(&new_message_sid(), "+15556040003", &long).await;
    let reply = twilio.wait_for_sent("+15556040003", 1).await;
    assert!([HOURS, HANDOFF].contains(&reply[0].body()), "{}", reply[0].body());
    settle(&server).await;
    assert!(twilio.sent_to("+15556040002").is_empty(), "no reply to nothing");
});

on_both_databases!(a_paused_or_deleted_agent_answers_nothing, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = start(&db, &twilio).await;
    let desk = desk(&server, &twilio).await;
    // A conversation opened with the agent, then the agent paused.
    desk.channel
        .inbound(&new_message_sid(), "+15556050001", "When are you open?")
        .await;
    twilio.wait_for_sent("+15556050001", 1).await;
    let pause = json!({"status": "paused"});
    desk.platform
        .ok("PUT", &format!("/v1/agents/{}", desk.agent), Some(pause))
        .await;
    desk.channel
        .inbound(&new_message_sid(), "+15556050001", "Do you offer free parking?")
        .await;
    settle(&server).await;
    assert_eq!(twilio.sent_to("+15556050001").len(), 1, "paused: silent");
    desk.platform
        .ok("DELETE", &format!("/v1/agents/{}", desk.agent), None)
        .await;
    desk.channel.inbound(&new_message_sid(), "+15556050001", "Hello?").await;
    settle(&server).await;
    assert_eq!(twilio.sent_to("+15556050001").len(), 1, "deleted: silent");
});

on_both_databases!(the_agent_speaks_its_language, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = start(&db, &twilio).await;
    let desk = desk(&server, &twilio).await;
    let spanish = json!({"language": "es"});
    desk.platform
        .ok("PUT", &format!("/v1/agents/{}", desk.agent), Some(spanish))
        .await;
    desk.channel.inbound(&new_message_sid(), "+15556060001", "¡Hola!").await;
    let reply = twilio.wait_for_sent("+15556060001", 1).await;
    assert_eq!(reply[0].body(), "¡Hola! ¿En qué puedo ayudarte hoy?");
    desk.channel
        .inbound(&new_message_sid(), "+15556060002", "¿Reparan motores de helicóptero?")
        .await;
    let reply = twilio.wait_for_sent("+15556060002", 1).await;
    assert_eq!(
        reply[0].body(),
        "Gracias por tu mensaje. Una persona de nuestro equipo te responderá en breve."
    );
});

// The process dies at points around the reply (before its job ran, while it ran, after it was stored and
// before or while it was delivered): after the restart there is one reply, delivered, never two, never none.
on_both_databases!(a_sigkill_around_the_reply_leaves_one_reply, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let mut server = start(&db, &twilio).await;
    let (account_id, key, mut channel) = {
        let desk = desk(&server, &twilio).await;
        (
            desk.platform.account_id.clone(),
            desk.platform.key.clone(),
            desk.channel.clone(),
        )
    };
    for (n, after) in [0u64, 250, 350, 500, 900].into_iter().enumerate() {
        let phone = format!("+155560700{n:02}");
        channel.inbound(&new_message_sid(), &phone, "When are you open?").await;
        tokio::time::sleep(Duration::from_millis(after)).await;
        server = server.restart().await;
        channel = channel.at(&server);
        let platform = Platform::of(&server, &account_id, &key);
        twilio.wait_for_sent(&phone, 1).await;
        settle(&server).await;
        let thread = platform.conversation_with(&phone).await;
        let replies: Vec<&Value> = thread["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["author"] == "agent")
            .collect();
        assert_eq!(replies.len(), 1, "killed {after} ms after the question: {thread}");
        assert_eq!(replies[0]["text"], HOURS);
        let body_sent = twilio.sent_to(&phone);
        assert!(body_sent.iter().all(|m| m.body() == HOURS), "{body_sent:?}");
    }
});

on_both_databases!(a_web_chat_visitor_is_answered_on_the_socket, |db: Db| async move {
    let server = webchat::start(&db, &[("FRONTDESK_REPLY_DEBOUNCE_MS", "300")]).await;
    let platform = Platform::new(&server).await;
    let site = webchat::Channel::connect(&platform, "site", json!({})).await;
    let agent = platform.agent("Front desk").await;
    let body = json!({"question": "What are your opening hours?", "answer": HOURS});
    platform
        .ok("POST", &format!("/v1/agents/{agent}/faqs"), Some(body))
        .await;
    let default = json!({"channel": "site", "agent_id": agent});
    platform
        .ok("PUT", "/v1/entry-points/channel-defaults", Some(default))
        .await;

    let visitor = webchat::Visitor::start(&server, &site, json!({})).await;
    let mut socket = visitor.socket(&server, "", "").await;
    socket
        .send(json!({"type": "message", "text": "When are you open?", "client_message_id": "q-1"}))
        .await;
    let echo = socket.frame_of("message").await;
    assert_eq!(echo["message"]["direction"], "inbound");
    let reply = socket.frame_of("message").await;
    assert_eq!(reply["message"]["direction"], "outbound");
    assert_eq!(reply["message"]["author"], "agent");
    assert_eq!(reply["message"]["text"], HOURS);

    socket
        .send(json!({"type": "message", "text": "Can you fix my helicopter?", "client_message_id": "q-2"}))
        .await;
    socket.frame_of("message").await;
    let handoff = socket.frame_of("message").await;
    assert_eq!(handoff["message"]["text"], HANDOFF);
});

/// A dental clinic's four FAQs, as a small business starts.
const CLINIC: &[(&str, &str)] = &[
    (
        "Is there parking?",
        "Yes, free parking is available behind the building.",
    ),
    (
        "What are your opening hours?",
        "We are open 9am to 6pm, Monday to Saturday.",
    ),
    (
        "How much does teeth whitening cost?",
        "Teeth whitening costs 8,000 rupees per session.",
    ),
    (
        "Where is the clinic located?",
        "The clinic is at 12 MG Road, Pune, next to the metro station.",
    ),
];

// With the embedding model, on a handful of FAQs: what the clinic knows, asked in its customers' words, is
// answered with the right FAQ; what it does not, though asked with its words ("clinic", "how much ...
// cost"), goes to a person.
on_both_databases!(
    a_small_clinic_answers_what_it_knows_and_hands_off_the_rest,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start_with_model(&db, &twilio).await;
        let desk = Desk::open(&server, &twilio, json!({"name": "Clinic desk"}), CLINIC[0]).await;
        for (question, answer) in &CLINIC[1..] {
            desk.platform.faq(&desk.agent, question, answer).await;
        }
        let known = [
            ("Where can I park my car?", 0),
            ("Is parking free?", 0),
            ("What time do you open?", 1),
            ("Are you open on Sundays?", 1),
            ("How much is teeth whitening?", 2),
            ("how do I get to the clinic", 3),
        ];
        let unknown = [
            "Can I bring my dog to the clinic?",
            "Can I pay by credit card at the clinic?",
            "Is the clinic wheelchair accessible?",
            "How much does a root canal cost?",
            "How much does a cleaning cost?",
            "Is the clinic open on public holidays?",
            "Does the clinic accept insurance?",
        ];
        let questions = known.iter().map(|(q, _)| *q).chain(unknown.iter().copied());
        for (n, question) in questions.enumerate() {
            let phone = format!("+1555910{n:04}");
            desk.channel.inbound(&new_message_sid(), &phone, question).await;
        }
        for (n, (question, faq)) in known.iter().enumerate() {
            let phone = format!("+1555910{n:04}");
            let reply = twilio.wait_for_sent(&phone, 1).await;
            assert_eq!(reply[0].body(), CLINIC[*faq].1, "{question}");
        }
        for (n, question) in unknown.iter().enumerate() {
            let phone = format!("+1555910{:04}", known.len() + n);
            let reply = twilio.wait_for_sent(&phone, 1).await;
            assert_eq!(reply[0].body(), HANDOFF, "{question}");
            let thread = desk.platform.conversation_with(&phone).await;
            assert_eq!(thread["conversation"]["handoff_reason"], "no_confident_answer");
        }
    }
);

// A long FAQ answers a question about its last paragraph with that paragraph's sentences, not its first
// paragraph, within one sms.
on_both_databases!(
    a_long_faq_answers_with_the_passage_that_holds_the_answer,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start_with_model(&db, &twilio).await;
        let care = [
            "Your implant needs a few weeks to settle into the bone after surgery.",
            "Eat soft food for the first days and avoid chewing on the side of the implant.",
            "Some swelling is normal; a cold pack on the cheek for ten minutes at a time helps.",
            "Take the painkillers the dentist prescribed, and call us if the pain grows after three days.",
            "Brush the crown gently with a soft brush twice a day, as you brush your other teeth.",
            "Do not smoke for at least two weeks: smoking slows healing and can make an implant fail.",
            "Come back for a check-up after one week, and again after three months.",
            "A water flosser cleans around the implant where a brush cannot reach; use it once a day on a low setting.",
            "Ask us before you use any mouthwash with alcohol in the first month.",
        ];
        let answer = care.join(" ");
        assert!(answer.len() > 600);
        let desk = Desk::open(
            &server,
            &twilio,
            json!({"name": "Clinic desk"}),
            ("How do I look after my dental implant?", &answer),
        )
        .await;
        desk.channel
            .inbound(
                &new_message_sid(),
                "+15559200001",
                "Should I use a water flosser on my implant?",
            )
            .await;
        let reply = twilio.wait_for_sent("+15559200001", 1).await[0].body().to_owned();
        assert!(reply.contains(care[7]), "the sentence that answers: {reply}");
        assert!(!reply.contains(care[0]), "not the first paragraph: {reply}");
        assert!(reply.chars().count() <= 400, "{} characters", reply.chars().count());
    }
);
