//! Broadcasts going out, against the real binary and a fake Twilio, on SQLite and PostgreSQL: the audience
//! expanded into one recipient per person (ids, tags and phones overlapping, opted-out contacts left out),
//! the opener rendered per recipient, stats kept exactly from receipts and replies arriving together,
//! `completed` once every message left `queued`; scheduling on the test clock; a cancel in the middle;
//! pacing; two replicas sharing one broadcast; a crash in the middle; a WhatsApp template; the checks of
//! what a broadcast may be.

use std::time::{Duration, Instant};

use frontdesk_tests::{
    Db,
    admin::{self, Jobs},
    meta::{self, FakeGraph, MetaChannel},
    on_both_databases,
    platform::{Platform, assert_invalid},
    sms::{self, SmsChannel},
    twilio::FakeTwilio,
};
use serde_json::{Value, json};

const ASHA: &str = "+14155550101";
const BEN: &str = "+14155550102";
const CHEN: &str = "+14155550103";
const DIVYA: &str = "+14155550104";

/// A contact; its id.
async fn contact(platform: &Platform<'_>, body: Value) -> String {
    platform.ok("POST", "/v1/contacts", Some(body)).await["contact"]["id"]
        .as_str()
        .expect("the contact's id")
        .to_owned()
}

/// A broadcast made of `body`, which must be accepted; its id.
async fn create(platform: &Platform<'_>, body: Value) -> String {
    platform.ok("POST", "/v1/broadcasts", Some(body)).await["broadcast"]["id"]
        .as_str()
        .expect("the broadcast's id")
        .to_owned()
}

/// Polls broadcast `id` until `done` holds for it; the broadcast.
async fn broadcast_when(platform: &Platform<'_>, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let broadcast = platform.get(&format!("/v1/broadcasts/{id}")).await["broadcast"].clone();
        if done(&broadcast) {
            return broadcast;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "broadcast {id} never got there: {} {}",
            broadcast["status"],
            broadcast["stats"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn stats(broadcast: &Value) -> [i64; 6] {
    ["total", "sent", "delivered", "read", "failed", "replied"].map(|s| broadcast["stats"][s].as_i64().unwrap_or(-1))
}

on_both_databases!(
    a_broadcast_reaches_each_person_once_and_counts_what_follows,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start(&db, &twilio, &[]).await;
        let platform = Platform::new(&server).await;
        let channel = SmsChannel::connect(&platform, &twilio, "sms", None).await;
        let agent = platform.agent("Offers").await;
        let asha = contact(
            &platform,
            json!({"name": "Asha Rao", "phone": ASHA, "tags": ["vip"], "attributes": {"city": "Pune"}}),
        )
        .await;
        let ben = contact(&platform, json!({"name": "Ben", "phone": BEN, "tags": ["vip", "new"]})).await;
        contact(&platform, json!({"name": "Chen", "phone": CHEN, "tags": ["vip"]})).await;
        // Chen opts out with STOP.
        assert_eq!(
            channel
                .inbound("SMstop000000000000000000000000001", CHEN, "STOP")
                .await
                .status,
            200
        );
        admin::quiesce(&server).await;

        let created = platform
            .ok(
                "POST",
                "/v1/broadcasts",
                Some(json!({
                    "agent_id": agent,
                    "channel": "sms",
                    // Asha three times (id, tag, phone), Ben twice (two tags), Divya only by phone.
                    "audience": {"contact_ids": [asha, ben], "tags": ["vip", "new"], "phones": [ASHA, DIVYA]},
                    "opener": "Hi {{first_name}}{{attributes.city}}! 20% off this week.",
                    "send_at": "now",
                })),
            )
            .await["broadcast"]
            .clone();
        let id = created["id"].as_str().unwrap().to_owned();
        assert_eq!(created["status"], "scheduled");
        let done = broadcast_when(&platform, &id, |b| b["status"] == "completed").await;
        assert_eq!(stats(&done), [3, 3, 0, 0, 0, 0], "{done}");

        let mut bodies: Vec<(String, String)> = twilio
            .sent()
            .iter()
            .map(|m| (m.to().to_owned(), m.body().to_owned()))
            .collect();
        bodies.sort();
        assert_eq!(
            bodies,
            [
                (ASHA.to_owned(), "Hi AshaPune! 20% off this week.".to_owned()),
                (BEN.to_owned(), "Hi Ben! 20% off this week.".to_owned()),
                (DIVYA.to_owned(), "Hi ! 20% off this week.".to_owned()),
            ],
            "each person once, the opted-out contact not at all, a missing value rendered empty"
        );
        let conversation = platform.conversation_with(DIVYA).await;
        assert_eq!(
            conversation["conversation"]["agent_id"],
            json!(agent),
            "answered by the broadcast's agent"
        );

        // Receipts and replies arriving together, some of them twice.
        let sid = |to: &str| twilio.sent_to(to)[0].sid.clone().expect("a created message");
        let (asha_sid, ben_sid, divya_sid) = (sid(ASHA), sid(BEN), sid(DIVYA));
        let mut arriving = Vec::new();
        for _ in 0..2 {
            arriving.push(channel.status(&asha_sid, "delivered", None));
            arriving.push(channel.status(&ben_sid, "read", None));
            arriving.push(channel.status(&divya_sid, "failed", Some("30006")));
        }
        let replies = [
            channel.inbound("SMreply00000000000000000000000001", ASHA, "Interested!"),
            channel.inbound("SMreply00000000000000000000000002", ASHA, "Is it for cleanings?"),
            channel.inbound("SMreply00000000000000000000000003", BEN, "No thanks"),
        ];
        let (receipts, replies) = tokio::join!(
            futures_util::future::join_all(arriving),
            futures_util::future::join_all(replies)
        );
        assert!(receipts.iter().chain(&replies).all(|a| a.status == 200));
        let counted = broadcast_when(&platform, &id, |b| stats(b)[5] == 2 && stats(b)[4] == 1).await;
        assert_eq!(
            stats(&counted),
            [3, 2, 2, 1, 1, 2],
            "sent: now sent or beyond; delivered: delivered or read; each replier once: {counted}"
        );
        admin::quiesce(&server).await;
        let settled = platform.get(&format!("/v1/broadcasts/{id}")).await["broadcast"].clone();
        assert_eq!(
            stats(&settled),
            [3, 2, 2, 1, 1, 2],
            "folded, the counts stay: {settled}"
        );

        // The day's summary counts the broadcast and puts its replies under "Needs attention".
        let today = platform.get("/v1/summaries/daily").await["daily_summary"].clone();
        let section = |title: &str| {
            today["sections"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["title"] == title)
                .map(|s| s["markdown"].as_str().unwrap().to_owned())
                .unwrap_or_default()
        };
        let name = settled["name"].as_str().unwrap();
        assert!(
            section("Overview").contains(&format!(
                "- {name}: 2 sent of 3, 2 delivered, 1 read, 1 failed, 2 replied"
            )),
            "{today}"
        );
        assert!(
            section("Needs attention").contains("**2** people replied to the day's broadcasts"),
            "{today}"
        );
    }
);

// The channel removed while the broadcast goes out: the broadcast fails, saying so, and sends no more.
on_both_databases!(a_broadcast_whose_channel_goes_fails, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    SmsChannel::connect(&platform, &twilio, "sms", Some(2)).await;
    let agent = platform.agent("Offers").await;
    let id = send_now(&platform, &agent, &phones(20)).await;
    twilio.wait_for(2, Duration::from_secs(20)).await;
    platform.ok("DELETE", "/v1/channels/sms", None).await;
    let failed = broadcast_when(&platform, &id, |b| b["status"] == "failed").await;
    assert!(
        failed["error"].as_str().unwrap().contains("`sms` was removed"),
        "{failed}"
    );
    let sent = twilio.arrived();
    admin::until_done(&server, Jobs::Group(&id)).await;
    admin::quiesce(&server).await;
    assert_eq!(twilio.arrived(), sent, "nothing more went out");
    assert!(sent < 20);
});

// The deprecated campaigns' Outgoing type drives the same sending.
on_both_databases!(an_outgoing_campaign_is_sent_as_its_broadcast, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[("FRONTDESK_TEST_CLOCK", "true")]).await;
    let platform = Platform::new(&server).await;
    SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let send_at = chrono::Utc::now() + chrono::Duration::hours(1);
    let campaign = platform
        .ok(
            "POST",
            "/v1/campaigns",
            Some(json!({
                "name": "Recall", "type": "Outgoing", "channel": "sms", "instructions": "Book checkups.",
                "opener": "Hi {{first_name}}, time for a checkup.", "audience": {"phones": [ASHA]},
                "send_at": send_at.to_rfc3339(),
            })),
        )
        .await["campaign"]
        .clone();
    let id = campaign["broadcast_id"]
        .as_str()
        .expect("the campaign's broadcast")
        .to_owned();
    admin::set_test_clock(
        &server,
        Some(prost_types::Timestamp {
            seconds: (send_at + chrono::Duration::minutes(1)).timestamp(),
            nanos: 0,
        }),
    )
    .await
    .expect("the clock moves");
    let done = broadcast_when(&platform, &id, |b| b["status"] == "completed").await;
    assert_eq!(stats(&done)[..2], [1, 1]);
    assert_eq!(twilio.sent_to(ASHA)[0].body(), "Hi , time for a checkup.");
});

on_both_databases!(a_scheduled_broadcast_waits_for_its_time, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[("FRONTDESK_TEST_CLOCK", "true")]).await;
    let platform = Platform::new(&server).await;
    SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let agent = platform.agent("Reminders").await;
    let send_at = chrono::Utc::now() + chrono::Duration::hours(2);
    let id = create(
        &platform,
        json!({
            "agent_id": agent,
            "channel": "sms",
            "audience": {"phones": [ASHA, BEN]},
            "opener": "Your checkup is due.",
            "send_at": send_at.to_rfc3339(),
        }),
    )
    .await;
    admin::quiesce(&server).await;
    assert_eq!(twilio.arrived(), 0, "nothing before send_at");
    let later = send_at + chrono::Duration::minutes(1);
    admin::set_test_clock(
        &server,
        Some(prost_types::Timestamp {
            seconds: later.timestamp(),
            nanos: 0,
        }),
    )
    .await
    .expect("the clock moves");
    let done = broadcast_when(&platform, &id, |b| b["status"] == "completed").await;
    assert_eq!(stats(&done)[..2], [2, 2]);
    assert_eq!(twilio.sent().len(), 2);
});

on_both_databases!(a_cancel_stops_what_is_not_sent, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    // Two a second: 20 recipients take ten seconds.
    SmsChannel::connect(&platform, &twilio, "sms", Some(2)).await;
    let agent = platform.agent("Offers").await;
    let phones: Vec<String> = (0..20).map(|n| format!("+1415555{n:04}")).collect();
    let id = create(
        &platform,
        json!({
            "agent_id": agent,
            "channel": "sms",
            "audience": {"phones": phones},
            "opener": "Flash sale!",
            "send_at": "now",
        }),
    )
    .await;
    twilio.wait_for(3, Duration::from_secs(20)).await;
    let cancelled = platform.ok("POST", &format!("/v1/broadcasts/{id}/cancel"), None).await["broadcast"].clone();
    let sent_at_cancel = twilio.arrived();
    assert_eq!(cancelled["status"], "cancelled");
    // No send of the broadcast is left to run, paced ones included.
    admin::until_done(&server, Jobs::Group(&id)).await;
    admin::quiesce(&server).await;
    assert_eq!(
        twilio.arrived(),
        sent_at_cancel,
        "nothing sent after the cancel returned"
    );
    assert!(sent_at_cancel < 20, "the cancel came in the middle");
    let after = platform.get(&format!("/v1/broadcasts/{id}")).await["broadcast"].clone();
    assert_eq!(after["status"], "cancelled");
    assert_eq!(
        stats(&after)[1],
        sent_at_cancel as i64,
        "sent: exactly what reached the provider: {after}"
    );
    let refused = platform
        .send(
            "PATCH",
            &format!("/v1/broadcasts/{id}"),
            Some(json!({"opener": "Too late"})),
        )
        .await;
    assert_eq!((refused.status, refused.code()), (409, "aborted"), "{}", refused.body);
});

on_both_databases!(what_a_broadcast_may_be, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let agent = platform.agent("Offers").await;
    let known = contact(&platform, json!({"name": "Asha", "phone": ASHA, "tags": ["vip"]})).await;
    let valid = json!({"agent_id": agent, "channel": "sms", "audience": {"contact_ids": [known]}, "opener": "Hi"});
    let with = |key: &str, value: Value| {
        let mut body = valid.clone();
        body[key] = value;
        body
    };
    for (body, field) in [
        (with("audience", json!({})), "audience"),
        (
            with("audience", json!({"contact_ids": ["ct_0000000000000000"]})),
            "audience.contact_ids",
        ),
        (with("audience", json!({"tags": ["nobody-has-this"]})), "audience.tags"),
        (with("send_at", json!("2020-01-01T00:00:00Z")), "send_at"),
        (with("send_at", json!("tomorrow")), "send_at"),
        (with("channel", json!("nowhere")), "channel"),
        (with("opener", json!("Hi {{first_name")), "opener"),
        (with("opener", json!("Hi {{email}}")), "opener"),
        (with("opener", json!("x".repeat(1_601))), "opener"),
        (
            with("template", json!({"name": "offer", "language": "en_US"})),
            "template",
        ),
    ] {
        let answer = platform.send("POST", "/v1/broadcasts", Some(body.clone())).await;
        assert_invalid(&answer, field, &body.to_string());
    }
    // A draft is sent when PATCH gives it a time: `now`.
    let draft = platform.ok("POST", "/v1/broadcasts", Some(valid.clone())).await["broadcast"].clone();
    assert_eq!(draft["status"], "draft");
    let id = draft["id"].as_str().unwrap();
    admin::quiesce(&server).await;
    assert_eq!(twilio.arrived(), 0);
    let patched = platform
        .ok(
            "PATCH",
            &format!("/v1/broadcasts/{id}"),
            Some(json!({"send_at": "now"})),
        )
        .await["broadcast"]
        .clone();
    assert_eq!(patched["status"], "scheduled");
    broadcast_when(&platform, id, |b| b["status"] == "completed").await;
    assert_eq!(twilio.sent_to(ASHA).len(), 1);
});

/// A channel rate that paces nothing here (the default is 10 a second).
const UNPACED: u32 = 100_000;

/// `count` distinct phone numbers.
fn phones(count: usize) -> Vec<String> {
    (0..count).map(|n| format!("+1415666{n:04}")).collect()
}

/// A broadcast of the opener "Offer" to `phones` on channel `sms`, sent now; its id.
async fn send_now(platform: &Platform<'_>, agent: &str, phones: &[String]) -> String {
    create(
        platform,
        json!({
            "agent_id": agent, "channel": "sms", "audience": {"phones": phones},
            "opener": "Offer", "send_at": "now",
        }),
    )
    .await
}

/// How many requests each phone got at the provider.
fn arrivals(twilio: &FakeTwilio) -> std::collections::HashMap<String, usize> {
    let mut got = std::collections::HashMap::new();
    for m in twilio.sent() {
        *got.entry(m.to().to_owned()).or_insert(0) += 1;
    }
    got
}

on_both_databases!(a_channel_paces_a_broadcast, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    SmsChannel::connect(&platform, &twilio, "sms", Some(10)).await;
    let agent = platform.agent("Offers").await;
    let to = phones(30);
    let id = send_now(&platform, &agent, &to).await;
    broadcast_when(&platform, &id, |b| b["status"] == "completed").await;
    let times: Vec<_> = twilio.sent().iter().map(|m| m.received_at).collect();
    let span = *times.iter().max().unwrap() - *times.iter().min().unwrap();
    // 30 sends at 10 a second: the last leaves about 2.9 s after the first.
    assert!(
        (2_500..6_000).contains(&span.num_milliseconds()),
        "30 sends took {span} on a 10/s channel"
    );
    assert_eq!(arrivals(&twilio).len(), 30);
});

// Two worker replicas share one broadcast, the provider answering after a jittered delay: every recipient
// once, none twice.
on_both_databases!(
    two_replicas_share_a_broadcast_and_send_no_one_twice,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        twilio.answer_between(Duration::from_millis(2), Duration::from_millis(25), 201);
        let first = sms::start(&db, &twilio, &[]).await;
        let second = sms::start(&db, &twilio, &[]).await;
        let platform = Platform::new(&first).await;
        SmsChannel::connect(&platform, &twilio, "sms", Some(UNPACED)).await;
        let agent = platform.agent("Offers").await;
        let to = phones(300);
        let id = send_now(&platform, &agent, &to).await;
        let on_second = Platform::of(&second, &platform.account_id, &platform.key);
        let done = broadcast_when(&on_second, &id, |b| b["status"] == "completed").await;
        assert_eq!(stats(&done)[..2], [300, 300], "{done}");
        let got = arrivals(&twilio);
        assert_eq!(got.len(), 300);
        assert!(got.values().all(|n| *n == 1), "someone got it twice");
        drop(second);
    }
);

// SIGKILL of the worker in the middle of a 2,000-recipient broadcast, then a restart: everyone gets the
// opener; a second copy only for a send that was at the provider at the kill; each recipient counted once.
on_both_databases!(a_crash_in_the_middle_skips_no_one, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    twilio.answer_between(Duration::from_millis(1), Duration::from_millis(10), 201);
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    let (account_id, key) = (platform.account_id.clone(), platform.key.clone());
    SmsChannel::connect(&platform, &twilio, "sms", Some(UNPACED)).await;
    let agent = platform.agent("Offers").await;
    let to = phones(2_000);
    let id = send_now(&platform, &agent, &to).await;
    let started = Instant::now();
    while twilio.arrived() < 500 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the broadcast never got going"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut server = server;
    server.kill();
    let at_kill = twilio.arrived_when_settled().await;
    let server = server.restart().await;
    let platform = Platform::of(&server, &account_id, &key);
    let done = broadcast_when(&platform, &id, |b| b["status"] == "completed").await;
    let got = arrivals(&twilio);
    assert_eq!(got.len(), 2_000, "no one skipped");
    assert!(got.values().all(|n| *n <= 2), "no one more than twice");
    // A second copy only for a send that had reached the provider before the kill, whose outcome the dead
    // worker had not recorded yet.
    let twice: Vec<String> = got.iter().filter(|(_, n)| **n > 1).map(|(to, _)| to.clone()).collect();
    for to in &twice {
        let requests = twilio.sent_to(to);
        assert!(
            requests[0].seq < at_kill && requests[1].seq >= at_kill,
            "{to}: a copy before the kill and one after: {requests:?}"
        );
    }
    let twice = twice.len();
    eprintln!(
        "crash drill: {at_kill} requests at the kill, {twice} of 2,000 recipients sent twice ({:.2}%)",
        twice as f64 / 20.0
    );
    assert_eq!(stats(&done)[..2], [2_000, 2_000], "each recipient counted once: {done}");
});

// A WhatsApp broadcast sends its template, parameters rendered per recipient, to people who never wrote:
// the 24-hour window does not apply to it.
on_both_databases!(a_whatsapp_broadcast_sends_its_template, |db: Db| async move {
    let graph = FakeGraph::start().await;
    let server = meta::start(&db, &graph, &[]).await;
    let platform = Platform::new(&server).await;
    MetaChannel::whatsapp(&platform, "wa").await;
    let agent = platform.agent("Offers").await;
    let asha = contact(&platform, json!({"name": "Asha Rao", "phone": "+16505550199"})).await;
    let body = json!({
        "agent_id": agent, "channel": "wa", "audience": {"contact_ids": [asha]},
        "opener": "Hi {{first_name}}, your offer is ready.", "send_at": "now",
    });
    let refused = platform.send("POST", "/v1/broadcasts", Some(body.clone())).await;
    assert_invalid(&refused, "template", "a WhatsApp broadcast without a template");
    let mut with_template = body;
    with_template["template"] =
        json!({"name": "offer_ready", "language": "en_US", "parameters": ["{{first_name}}", "20%"]});
    let id = create(&platform, with_template).await;
    let done = broadcast_when(&platform, &id, |b| b["status"] == "completed").await;
    assert_eq!(stats(&done)[..2], [1, 1], "{done}");
    assert_eq!(done["template"]["name"], "offer_ready");
    let calls = graph.calls();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(
        calls[0].body,
        json!({"messaging_product": "whatsapp", "recipient_type": "individual", "to": "16505550199", "type": "template",
            "template": {"name": "offer_ready", "language": {"code": "en_US"},
                "components": [{"type": "body", "parameters": [{"type": "text", "text": "Asha"}, {"type": "text", "text": "20%"}]}]}})
    );
});
