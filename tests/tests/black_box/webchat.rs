//! Web chat through the real binary, as a visitor's browser and the business speak it: the visitor API over
//! HTTP, the live socket over a real WebSocket client (frames, replay on reconnect, pings, close codes),
//! CORS, tokens and their revocation, rate limits, routing by page, presence, and the business's view; on
//! SQLite and on PostgreSQL + Redis. Two core processes sharing PostgreSQL and Redis show replies and
//! changes made on one reaching a socket held by the other, in order.

use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use frontdesk_api::v1::{GetChatSessionRequest, chat_sessions_client::ChatSessionsClient};
use frontdesk_tests::{
    Db, Server,
    admin::clock_at,
    on_both_databases,
    platform::{Platform, assert_invalid, assert_not_found},
    redis_server,
    server::base_env,
    webchat::{Channel, FRAME_WAIT, Socket, Visitor, WAIT, call, list_messages, message_when, reply, start},
    webhook_receiver::Receiver,
};
use serde_json::{Value, json};

const SHOP: &str = "https://shop.example";

async fn session_of(platform: &Platform<'_>, visitor: &Visitor) -> Value {
    platform
        .ok("GET", &format!("/v1/chat-sessions/{}", visitor.session_id), None)
        .await
}

/// A timestamp as the APIs write it (RFC 3339).
fn instant(value: &Value) -> DateTime<Utc> {
    let text = value.as_str().unwrap_or_else(|| panic!("no timestamp: {value}"));
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|err| panic!("{text}: {err}"))
        .to_utc()
}

/// Waits for the first whole second after `at` (at most a second): the APIs write times to the second, so
/// what happens from then on reads as later than `at`.
async fn past_the_second_of(at: DateTime<Utc>) {
    let next = at.trunc_subsecs(0) + chrono::Duration::seconds(1);
    if let Ok(wait) = (next - Utc::now()).to_std() {
        tokio::time::sleep(wait).await;
    }
}

on_both_databases!(a_visitor_and_the_business_talk_live, |db: Db| async move {
    let server = start(&db, &[]).await;
    let platform = Platform::new(&server).await;
    let receiver = Receiver::start().await;
    let secret = platform.subscribe(&receiver.url, &["*"]).await;
    let config = json!({"title": "Shop support", "greeting": "Hi!", "color": "#0F766E"});
    let channel = Channel::connect(&platform, "site", config).await;
    assert!(channel.widget_key.starts_with("wk_") && channel.widget_key.len() == 27);

    let look = call(
        &server,
        "GET",
        &format!("/webchat/v1/widget?key={}", channel.widget_key),
        &[],
        None,
    )
    .await;
    assert_eq!(look.status, 200);
    assert_eq!(
        look.body["widget"],
        json!({"title": "Shop support", "greeting": "Hi!", "color": "#0f766e", "position": "right"})
    );

    let visitor = Visitor::start(
        &server,
        &channel,
        json!({"visitor": {"name": "Ada", "email": "ada@example.com"}}),
    )
    .await;
    assert!(visitor.session_id.starts_with("cs_") && visitor.token.starts_with("wst_"));
    assert_eq!(visitor.started["messages"], json!([]));
    let contact = platform
        .ok("GET", &format!("/v1/contacts/{}", visitor.contact_id), None)
        .await["contact"]
        .clone();
    assert_eq!(contact["name"], "Ada");
    assert_eq!(
        contact["email"], "",
        "a typed e-mail is the session's claim, not the contact's"
    );
    assert_eq!(
        contact["identities"],
        json!([{"channel": "site", "type": "webchat", "external_id": visitor.session_id}])
    );

    let mut socket = visitor.socket(&server, "", "").await;
    socket
        .send(json!({"type": "message", "text": "Do you ship to Canada?", "client_message_id": "c-1"}))
        .await;
    let echo = socket.frame_of("message").await;
    assert_eq!(echo["client_message_id"], "c-1");
    assert_eq!(echo["message"]["text"], "Do you ship to Canada?");
    assert_eq!(echo["message"]["direction"], "inbound");
    let received = receiver
        .wait_until(WAIT, |d| d.iter().any(|d| d.json["type"] == "message.received"))
        .await;
    let event = received.iter().find(|d| d.json["type"] == "message.received").unwrap();
    assert!(event.verifies(&secret));
    assert_eq!(event.json["data"]["id"], echo["message"]["id"]);

    // The business answers through the platform API; the visitor has it at once, so it is delivered.
    let answer_id = reply(&platform, &visitor, "Yes, in 3 days.").await;
    let pushed = socket.frame_of("message").await;
    assert_eq!(pushed["message"]["id"], answer_id.as_str());
    assert_eq!(pushed["message"]["text"], "Yes, in 3 days.");
    assert_eq!(pushed["message"]["author"], "api");
    message_when(&platform, &answer_id, |m| m["status"] == "delivered").await;

    // Corrections, reactions and removals change the visitor's thread in place.
    let patched = platform
        .send(
            "PATCH",
            &format!("/v1/messages/{answer_id}"),
            Some(json!({"text": "Yes, in 2 days."})),
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    let updated = socket.frame_of("message_updated").await;
    assert_eq!(updated["message"]["text"], "Yes, in 2 days.");
    assert_eq!(updated["message"]["edited"], true);
    platform
        .ok(
            "POST",
            &format!("/v1/messages/{answer_id}/reactions"),
            Some(json!({"emoji": "👍"})),
        )
        .await;
    let reaction = socket.frame_of("reaction").await;
    assert_eq!(reaction["message"]["reactions"][0]["emoji"], "👍");
    platform
        .ok(
            "POST",
            &format!("/v1/conversations/{}/typing", visitor.conversation_id),
            Some(json!({"on": true})),
        )
        .await;
    assert_eq!(socket.frame_of("typing").await, json!({"type": "typing", "on": true}));

    // The visitor read it: `read`, with the event, and the socket is told.
    socket.send(json!({"type": "seen", "message_id": answer_id})).await;
    let status = socket.frame_of("status").await;
    assert_eq!(status["message"]["status"], "read");
    message_when(&platform, &answer_id, |m| m["status"] == "read").await;
    receiver
        .wait_until(WAIT, |d| d.iter().any(|d| d.json["type"] == "message.read"))
        .await;

    platform.ok("DELETE", &format!("/v1/messages/{answer_id}"), None).await;
    let removed = socket.frame_of("message_removed").await;
    assert_eq!(removed["message"]["removed"], true);
    assert_eq!(removed["message"]["text"], "");

    // The widget's own ping is answered; the business sees the session and its thread.
    socket.send(json!({"type": "ping"})).await;
    assert_eq!(socket.frame_of("pong").await, json!({"type": "pong"}));
    let seen = session_of(&platform, &visitor).await;
    let session = &seen["chat_session"];
    assert_eq!(session["channel"], "site");
    assert_eq!(session["visitor"], json!({"name": "Ada", "email": "ada@example.com"}));
    assert_eq!(session["conversation_id"], visitor.conversation_id.as_str());
    let texts: Vec<&str> = seen["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Do you ship to Canada?", ""]);
    socket.close().await;
});

// An arrived message wakes its process's webhook fan-out when it commits: its `message.received` goes out
// at once, though the fan-out's idle poll is 30 s.
on_both_databases!(an_arrived_message_is_fanned_out_at_once, |db: Db| async move {
    let server = start(&db, &[("FRONTDESK_WEBHOOK_POLL_INTERVAL", "30s")]).await;
    let platform = Platform::new(&server).await;
    let receiver = Receiver::start().await;
    platform.subscribe(&receiver.url, &["*"]).await;
    let channel = Channel::connect(&platform, "site", json!({})).await;
    let visitor = Visitor::start(&server, &channel, json!({})).await;
    let mut socket = visitor.socket(&server, "", "").await;
    socket
        .send(json!({"type": "message", "text": "Anyone there?", "client_message_id": "c-1"}))
        .await;
    let echo = socket.frame_of("message").await;
    let received = receiver
        .wait_until(Duration::from_secs(5), |d| {
            d.iter().any(|d| d.json["type"] == "message.received")
        })
        .await;
    let event = received.iter().find(|d| d.json["type"] == "message.received").unwrap();
    assert_eq!(event.json["data"]["id"], echo["message"]["id"]);
});

on_both_databases!(a_reconnecting_socket_gets_what_it_missed_once, |db: Db| async move {
    let server = start(&db, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = Channel::connect(&platform, "site", json!({})).await;
    let visitor = Visitor::start(&server, &channel, json!({})).await;
    let first = reply(&platform, &visitor, "first").await;
    let socket = visitor.socket(&server, "", "").await;
    let _ = message_when(&platform, &first, |m| {
        m["status"] == "sent" || m["status"] == "delivered"
    })
    .await;
    socket.close().await;

    // While the visitor is away: two replies, and a correction of the one it had.
    let second = reply(&platform, &visitor, "second").await;
    let third = reply(&platform, &visitor, "third").await;
    message_when(&platform, &third, |m| m["status"] == "sent").await;
    platform
        .ok(
            "PATCH",
            &format!("/v1/messages/{first}"),
            Some(json!({"text": "first, corrected"})),
        )
        .await;

    let mut socket = visitor.socket(&server, &first, "").await;
    let corrected = socket.frame().await;
    assert_eq!(corrected["type"], "message_updated");
    assert_eq!(corrected["message"]["text"], "first, corrected");
    let replayed: Vec<String> = [socket.frame().await, socket.frame().await]
        .iter()
        .map(|f| {
            assert_eq!(f["type"], "message");
            f["message"]["id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(replayed, [second.clone(), third.clone()]);
    assert!(
        socket.next(Duration::from_millis(500)).await.is_none(),
        "nothing is replayed twice"
    );
    // Replayed is delivered: the visitor has them now.
    message_when(&platform, &third, |m| m["status"] == "delivered").await;
    // The same through the API, for a widget whose socket cannot open.
    let thread = visitor.thread(&server, &second).await;
    let ids: Vec<&str> = thread.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [third.as_str()]);

    // A reply made now arrives live, once.
    let fourth = reply(&platform, &visitor, "fourth").await;
    let live = socket.frame_of("message").await;
    assert_eq!(live["message"]["id"], fourth.as_str());
    let unknown = Socket::open(&server, &visitor.token, "msg_0000000000000000", "").await;
    assert_eq!(unknown.err(), Some(400), "an `after` outside the thread is refused");
});

// A reconnecting socket's replay is read a page at a time as the socket takes it: a backlog of several
// pages, and corrections of several pages of what the visitor had, arrive whole, in order, once.
on_both_databases!(a_long_backlog_replays_whole_and_in_order, |db: Db| async move {
    let server = start(&db, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = Channel::connect(&platform, "site", json!({})).await;
    let visitor = Visitor::start(&server, &channel, json!({})).await;
    let mut had = Vec::new();
    for n in 0..60 {
        had.push(reply(&platform, &visitor, &format!("had {n}")).await);
    }
    let last_had = had.last().unwrap().clone();
    message_when(&platform, &last_had, |m| m["status"] == "sent").await;
    let mut missed = Vec::new();
    for n in 0..120 {
        missed.push(reply(&platform, &visitor, &format!("missed {n}")).await);
    }
    message_when(&platform, missed.last().unwrap(), |m| m["status"] == "sent").await;
    for id in &had {
        let path = format!("/v1/messages/{id}");
        platform.ok("PATCH", &path, Some(json!({"text": "corrected"}))).await;
    }

    let mut socket = visitor.socket(&server, &last_had, "").await;
    let mut frames = Vec::new();
    while frames.len() < had.len() + missed.len() {
        let frame = socket.frame().await;
        frames.push((
            frame["type"].as_str().unwrap().to_owned(),
            frame["message"]["id"].as_str().unwrap().to_owned(),
        ));
    }
    let expected: Vec<(String, String)> = had
        .iter()
        .map(|id| ("message_updated".to_owned(), id.clone()))
        .chain(missed.iter().map(|id| ("message".to_owned(), id.clone())))
        .collect();
    assert_eq!(frames, expected);
    assert!(socket.next(Duration::from_millis(500)).await.is_none(), "nothing twice");
    message_when(&platform, missed.last().unwrap(), |m| m["status"] == "delivered").await;
});

on_both_databases!(
    a_reply_read_before_its_delivery_is_recorded_is_read,
    |db: Db| async move {
        // No job runs here: the reply stays queued, as it is for the instant between its push and the commit
        // of its send's outcome. The visitor has it (from the thread) and says so.
        let server = start(&db, &[("FRONTDESK_JOB_CONCURRENCY", "0")]).await;
        let platform = Platform::new(&server).await;
        let receiver = Receiver::start().await;
        platform.subscribe(&receiver.url, &["*"]).await;
        let channel = Channel::connect(&platform, "site", json!({})).await;
        let visitor = Visitor::start(&server, &channel, json!({})).await;
        let answer = reply(&platform, &visitor, "We open at nine.").await;
        let thread = visitor.thread(&server, "").await;
        assert_eq!(
            (thread[0]["id"].as_str(), thread[0]["status"].as_str()),
            (Some(answer.as_str()), Some("queued"))
        );
        let mut socket = visitor.socket(&server, "", "").await;
        socket.send(json!({"type": "seen", "message_id": answer})).await;
        let read = socket.frame_of("status").await;
        assert_eq!(read["message"]["status"], "read");
        let message = message_when(&platform, &answer, |m| m["status"] == "read").await;
        assert_eq!(
            message["provider_message_id"],
            answer.as_str(),
            "web chat's messages are their own provider ids"
        );
        let events = receiver
            .wait_until(WAIT, |d| {
                d.iter().filter(|d| d.json["data"]["id"] == answer.as_str()).count() >= 3
            })
            .await;
        // Deliveries run concurrently, so they may arrive in any order; each state passed has its event.
        let mut passed: Vec<&str> = events
            .iter()
            .filter(|d| d.json["data"]["id"] == answer.as_str())
            .map(|d| d.json["type"].as_str().unwrap())
            .collect();
        passed.sort_unstable();
        assert_eq!(
            passed,
            ["message.delivered", "message.read", "message.sent"],
            "every state passed has its event"
        );
    }
);

on_both_databases!(
    sessions_resume_and_tokens_stay_with_their_channel,
    |db: Db| async move {
        let server = start(&db, &[]).await;
        let platform = Platform::new(&server).await;
        let channel = Channel::connect(&platform, "site", json!({})).await;
        let other = Channel::connect(&platform, "other", json!({})).await;
        let visitor = Visitor::start(&server, &channel, json!({"page_url": "https://shop.example/a"})).await;
        visitor.post(&server, "hello", "c-1").await;

        let resume =
            json!({"widget_key": channel.widget_key, "token": visitor.token, "page_url": "https://shop.example/b"});
        let resumed = call(&server, "POST", "/webchat/v1/sessions", &[], Some(resume)).await;
        assert_eq!(resumed.status, 200, "{}", resumed.body);
        assert_eq!(resumed.body["session_id"], visitor.session_id.as_str());
        assert_eq!(resumed.body["messages"][0]["text"], "hello");
        assert_eq!(
            session_of(&platform, &visitor).await["chat_session"]["page_url"],
            "https://shop.example/b"
        );

        let elsewhere = json!({"widget_key": other.widget_key, "token": visitor.token});
        let refused = call(&server, "POST", "/webchat/v1/sessions", &[], Some(elsewhere)).await;
        assert_eq!((refused.status, refused.code()), (401, "unauthenticated"));
        for token in ["wst_forged00000000000000000000000000", "nonsense", ""] {
            let answer = list_messages(&server, token, "").await;
            assert_eq!(answer.status, 401, "{token}");
            assert_eq!(Socket::open(&server, token, "", "").await.err(), Some(401), "{token}");
        }

        // A repeat of a client message id stores nothing new.
        let again = visitor.post(&server, "hello", "c-1").await;
        assert_eq!(again.status, 200);
        assert_eq!(visitor.thread(&server, "").await.len(), 1);

        // Disconnecting the channel revokes everything at once.
        let mut socket = visitor.socket(&server, "", "").await;
        platform.ok("DELETE", "/v1/channels/site", None).await;
        assert_eq!(socket.closed().await.code, 4401);
        let look = call(
            &server,
            "GET",
            &format!("/webchat/v1/widget?key={}", channel.widget_key),
            &[],
            None,
        )
        .await;
        assert_eq!(look.status, 404);
        let gone = visitor.post(&server, "still there?", "c-2").await;
        assert_eq!(gone.status, 401);
    }
);

// A token lasts `FRONTDESK_WEBCHAT_SESSION_TTL` from the session's last resume; past that it is refused as a
// forged one is, on every route. A socket opened before lives as long as the token: a resume renews it, and
// past the token's instant the next push closes it (4401) instead of reaching the visitor. The test clock
// crosses the hours.
on_both_databases!(an_expired_session_token_is_refused, |db: Db| async move {
    let env = [
        ("FRONTDESK_WEBCHAT_SESSION_TTL", "1h"),
        ("FRONTDESK_TEST_CLOCK", "true"),
    ];
    let server = start(&db, &env).await;
    let platform = Platform::new(&server).await;
    let channel = Channel::connect(&platform, "site", json!({})).await;
    let minutes = chrono::Duration::minutes;
    let before = Utc::now();
    let visitor = Visitor::start(&server, &channel, json!({})).await;
    let mut first_socket = visitor.socket(&server, "", "").await;
    // `expires_at` is written to the second.
    let expires = instant(&visitor.started["expires_at"]);
    assert!(
        (before + minutes(60)).trunc_subsecs(0) <= expires && expires <= Utc::now() + minutes(60),
        "the token lasts the TTL: {expires}"
    );
    let resume = json!({"widget_key": channel.widget_key, "token": visitor.token});
    let resume = || call(&server, "POST", "/webchat/v1/sessions", &[], Some(resume.clone()));

    // Resumed at 50 minutes, the token lasts an hour from then: past its first hour, it still works.
    clock_at(&server, before + minutes(50)).await;
    let resumed = resume().await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    let renewed = instant(&resumed.body["expires_at"]);
    assert!(
        renewed >= (before + minutes(110)).trunc_subsecs(0),
        "a resume renews the token: {renewed}"
    );
    clock_at(&server, before + minutes(70)).await;
    assert_eq!(visitor.post(&server, "still here", "c-1").await.status, 201);
    let mut socket = visitor.socket(&server, "", "").await;
    // The socket opened in the token's first hour still gets pushes: the resume renewed its token too.
    let renewed_reply = reply(&platform, &visitor, "we are here").await;
    for open in [&mut first_socket, &mut socket] {
        while open.frame_of("message").await["message"]["id"] != renewed_reply.as_str() {}
    }

    // More than an hour after the last resume: 401 everywhere, and the open socket closes as revoked.
    clock_at(&server, before + minutes(125)).await;
    let refused = resume().await;
    assert_eq!(
        (refused.status, refused.code()),
        (401, "unauthenticated"),
        "{}",
        refused.body
    );
    let posted = visitor.post(&server, "hello?", "c-2").await;
    assert_eq!(
        (posted.status, posted.code()),
        (401, "unauthenticated"),
        "{}",
        posted.body
    );
    let thread = list_messages(&server, &visitor.token, "").await;
    assert_eq!(thread.status, 401, "{}", thread.body);
    assert_eq!(Socket::open(&server, &visitor.token, "", "").await.err(), Some(401));
    // The business's next message is not pushed to the expired token's sockets: they close.
    reply(&platform, &visitor, "for a token that expired").await;
    for open in [&mut first_socket, &mut socket] {
        loop {
            match open.next(FRAME_WAIT).await {
                Some(Ok(frame)) => assert_ne!(
                    frame["message"]["text"], "for a token that expired",
                    "pushed on an expired token's socket"
                ),
                Some(Err(closed)) => break assert_eq!(closed.code, 4401, "{closed:?}"),
                None => panic!("an expired token's socket stayed open"),
            }
        }
    }
    let texts: Vec<Value> = session_of(&platform, &visitor).await["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].clone())
        .collect();
    assert_eq!(
        texts,
        [
            json!("still here"),
            json!("we are here"),
            json!("for a token that expired")
        ],
        "nothing an expired token sent is stored"
    );
});

// An idle socket closes (4401) when its token expires, on the timer: nothing needs to be pushed or sent.
on_both_databases!(an_idle_socket_closes_when_its_token_expires, |db: Db| async move {
    let server = start(&db, &[("FRONTDESK_WEBCHAT_SESSION_TTL", "3s")]).await;
    let platform = Platform::new(&server).await;
    let channel = Channel::connect(&platform, "site", json!({})).await;
    let visitor = Visitor::start(&server, &channel, json!({})).await;
    let expires = instant(&visitor.started["expires_at"]);
    let mut socket = visitor.socket(&server, "", "").await;
    let closed = socket.closed().await;
    assert_eq!(closed.code, 4401, "{closed:?}");
    assert!(
        Utc::now() >= expires,
        "closed at {}, before the token's {expires}",
        Utc::now()
    );
});

on_both_databases!(only_allowed_origins_get_a_grant, |db: Db| async move {
    let server = start(&db, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = Channel::connect(&platform, "site", json!({"allowed_origins": SHOP})).await;
    let key = channel.widget_key.clone();
    let preflight = |origin: &'static str| {
        let path = format!("/webchat/v1/sessions?key={key}");
        let server = &server;
        async move {
            call(
                server,
                "OPTIONS",
                &path,
                &[("origin", origin), ("access-control-request-method", "POST")],
                None,
            )
            .await
        }
    };
    let granted = preflight(SHOP).await;
    assert_eq!(granted.status, 204);
    assert_eq!(granted.header("access-control-allow-origin"), Some(SHOP));
    assert!(
        granted
            .header("access-control-allow-headers")
            .unwrap()
            .contains("authorization")
    );
    let refused = preflight("https://evil.example").await;
    assert_eq!(refused.header("access-control-allow-origin"), None);

    let start = json!({"widget_key": key});
    let evil = call(
        &server,
        "POST",
        "/webchat/v1/sessions",
        &[("origin", "https://evil.example")],
        Some(start.clone()),
    )
    .await;
    assert_eq!((evil.status, evil.code()), (403, "origin_not_allowed"));
    assert_eq!(evil.header("access-control-allow-origin"), None);
    let shop = call(
        &server,
        "POST",
        "/webchat/v1/sessions",
        &[("origin", SHOP)],
        Some(start),
    )
    .await;
    assert_eq!(shop.status, 201);
    assert_eq!(shop.header("access-control-allow-origin"), Some(SHOP));
    assert_eq!(shop.header("access-control-expose-headers"), Some("Retry-After"));
    // The server's own pages (the demo page) are no foreign origin.
    let own = call(
        &server,
        "POST",
        "/webchat/v1/sessions",
        &[("origin", &server.http)],
        Some(json!({"widget_key": key})),
    )
    .await;
    assert_eq!(own.status, 201, "{}", own.body);
    assert_eq!(own.header("access-control-allow-origin"), Some(server.http.as_str()));
    let token = shop.body["token"].as_str().unwrap();
    assert!(Socket::open(&server, token, "", SHOP).await.is_ok());
    assert_eq!(
        Socket::open(&server, token, "", "https://evil.example").await.err(),
        Some(403)
    );
    // A refusal before the channel is known is readable by the page when the URL names the channel.
    let path = format!("/webchat/v1/messages?key={}", channel.widget_key);
    let stale = call(
        &server,
        "GET",
        &path,
        &[("origin", SHOP), ("authorization", "Bearer wst_x")],
        None,
    )
    .await;
    assert_eq!(
        (stale.status, stale.header("access-control-allow-origin")),
        (401, Some(SHOP))
    );
});

on_both_databases!(bad_input_is_refused_and_the_socket_says_why, |db: Db| async move {
    let server = start(&db, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = Channel::connect(&platform, "site", json!({})).await;
    let bad_channel = platform
        .send(
            "POST",
            "/v1/channels",
            Some(json!({"name": "x", "type": "webchat", "config": {"color": "red", "allowed_origins": "shop"}})),
        )
        .await;
    assert_invalid(&bad_channel, "config.color", "a colour that is no #rrggbb");
    assert!(bad_channel.fields().contains(&"config.allowed_origins".to_owned()));

    let start = |body: Value| call(&server, "POST", "/webchat/v1/sessions", &[], Some(body));
    let key = channel.widget_key.as_str();
    assert_eq!(
        start(json!({"widget_key": "wk_000000000000000000000000"})).await.status,
        404
    );
    assert_invalid(
        &start(json!({"widget_key": key, "page_url": "ftp://x"})).await,
        "page_url",
        "ftp page",
    );
    assert_invalid(
        &start(json!({"widget_key": key, "visitor": {"email": "nope"}})).await,
        "visitor.email",
        "bad e-mail",
    );
    assert_invalid(
        &start(json!({"widget_key": key, "colour": "x"})).await,
        "colour",
        "unknown field",
    );

    let visitor = Visitor::start(&server, &channel, json!({})).await;
    assert_invalid(
        &visitor.post(&server, &"x".repeat(4_001), "c").await,
        "text",
        "4,001 characters",
    );
    assert_invalid(&visitor.post(&server, "  ", "c").await, "text", "blank");
    let html = visitor.post(&server, "<script>alert(1)</script>", "c-html").await;
    assert_eq!(html.status, 201);
    assert_eq!(
        html.body["message"]["text"], "<script>alert(1)</script>",
        "stored as text, as sent"
    );

    // Frame-level refusals keep the socket open; broken frames close it with a code that says why.
    let mut socket = visitor.socket(&server, "", "").await;
    socket
        .send(json!({"type": "message", "text": "x".repeat(4_001), "client_message_id": "long"}))
        .await;
    let error = socket.frame_of("error").await;
    assert_eq!(
        (error["code"].as_str(), error["client_message_id"].as_str()),
        (Some("invalid_argument"), Some("long"))
    );
    socket.send(json!({"type": "dance"})).await;
    assert_eq!(socket.frame_of("error").await["code"], "invalid_frame");
    socket.send_text("not json").await;
    assert_eq!(socket.closed().await.code, 1007);
    let mut socket = visitor.socket(&server, "", "").await;
    socket
        .send_text(&json!({"type": "typing", "pad": "x".repeat(70 * 1024)}).to_string())
        .await;
    assert_eq!(socket.closed().await.code, 1009);
    let mut socket = visitor.socket(&server, "", "").await;
    socket.send_binary(vec![1, 2, 3]).await;
    assert_eq!(socket.closed().await.code, 1003);
    // The server is fine.
    assert_eq!(visitor.post(&server, "still here", "c-2").await.status, 201);
    let plain = call(&server, "GET", "/webchat/v1/ws", &[], None).await;
    assert_eq!(plain.status, 426, "a plain GET of the socket route: {}", plain.body);
});

on_both_databases!(floods_are_refused_with_when_to_retry, |db: Db| async move {
    let limits = [
        ("FRONTDESK_WEBCHAT_MESSAGES_PER_MINUTE", "5"),
        ("FRONTDESK_WEBCHAT_SESSIONS_PER_MINUTE", "3"),
        // Behind a proxy of one's own: the client address is the one it forwards (here, this test's own, so
        // that tests sharing one Redis do not share a budget).
        ("FRONTDESK_TRUSTED_PROXY_HOPS", "1"),
    ];
    let server = start(&db, &limits).await;
    let platform = Platform::new(&server).await;
    let channel = Channel::connect(&platform, "site", json!({})).await;
    let client = format!("198.51.100.{}", rand::random_range(1..250));
    let forwarded = [("x-forwarded-for", client.as_str())];
    let body = json!({"widget_key": channel.widget_key});
    let new_session = || call(&server, "POST", "/webchat/v1/sessions", &forwarded, Some(body.clone()));

    let visitor = Visitor::started(new_session().await);
    for n in 0..5 {
        assert_eq!(visitor.post(&server, "hi", &format!("c-{n}")).await.status, 201);
    }
    let flooded = visitor.post(&server, "hi", "c-5").await;
    assert_eq!((flooded.status, flooded.code()), (429, "rate_limited"));
    assert!(flooded.header("retry-after").unwrap().parse::<u32>().unwrap() >= 1);
    let mut socket = visitor.socket(&server, "", "").await;
    socket
        .send(json!({"type": "message", "text": "hi", "client_message_id": "c-6"}))
        .await;
    let error = socket.frame_of("error").await;
    assert_eq!(error["code"], "rate_limited");
    assert!(error["retry_after"].as_u64().unwrap() >= 1);

    for _ in 0..2 {
        assert_eq!(new_session().await.status, 201);
    }
    let too_many = new_session().await;
    assert_eq!((too_many.status, too_many.code()), (429, "rate_limited"));
    assert!(too_many.header("retry-after").is_some());
    let elsewhere = [("x-forwarded-for", "203.0.113.9, 198.51.100.250")];
    let other_client = call(&server, "POST", "/webchat/v1/sessions", &elsewhere, Some(body.clone())).await;
    assert_eq!(other_client.status, 201, "another address has its own budget");
});

on_both_databases!(pages_route_sessions_to_their_agents, |db: Db| async move {
    let server = start(&db, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = Channel::connect(&platform, "site", json!({})).await;
    let pricing = platform.agent("Pricing").await;
    let campaign = platform.agent("Campaign").await;
    let support = platform.agent("Support").await;
    for (agent, matcher) in [
        (&pricing, json!({"url_prefix": "https://shop.example/pricing"})),
        (&campaign, json!({"ref": "spring"})),
    ] {
        let body = json!({"channel": "site", "match": matcher, "priority": 1});
        platform
            .ok("POST", &format!("/v1/agents/{agent}/entry-points"), Some(body))
            .await;
    }
    platform
        .ok(
            "PUT",
            "/v1/entry-points/channel-defaults",
            Some(json!({"channel": "site", "agent_id": support})),
        )
        .await;
    for (page, agent) in [
        ("https://shop.example/pricing/teams", &pricing),
        ("https://shop.example/?ref=spring", &campaign),
        ("https://shop.example/about", &support),
    ] {
        let visitor = Visitor::start(&server, &channel, json!({"page_url": page})).await;
        let path = format!("/v1/conversations/{}", visitor.conversation_id);
        let conversation = platform.ok("GET", &path, None).await["conversation"].clone();
        assert_eq!(conversation["agent_id"], agent.as_str(), "{page}");
        assert_eq!(conversation["channel_type"], "webchat");
    }
});

// `online` while a socket is open; `last_seen_at` is the last time the visitor was seen, a socket opening or
// closing included (docs/webchat.md), written with `online` in one statement.
on_both_databases!(presence_follows_the_socket, |db: Db| async move {
    let server = start(&db, &[]).await;
    let platform = Platform::new(&server).await;
    let channel = Channel::connect(&platform, "site", json!({})).await;
    let visitor = Visitor::start(&server, &channel, json!({})).await;
    let session = || {
        let (platform, visitor) = (&platform, &visitor);
        async move { session_of(platform, visitor).await["chat_session"].clone() }
    };
    // The session as it is once `online` reads `want` (or a panic after `WAIT`).
    let when_online = |want: bool| {
        let session = &session;
        async move {
            let deadline = tokio::time::Instant::now() + WAIT;
            loop {
                let seen = session().await;
                if seen["online"].as_bool().unwrap() == want {
                    return seen;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "online never became {want}: {seen}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let started = session().await;
    assert_eq!(started["online"], false);
    let seen_at_start = instant(&started["last_seen_at"]);
    assert!(seen_at_start >= instant(&started["started_at"]));

    // Times read to the second: each step waits for a second of its own, so that a `last_seen_at` left
    // where it was reads as earlier than the step.
    past_the_second_of(seen_at_start).await;
    let opened = Utc::now().trunc_subsecs(0);
    let socket = visitor.socket(&server, "", "").await;
    let open = when_online(true).await;
    let seen_open = instant(&open["last_seen_at"]);
    assert!(
        opened <= seen_open && seen_open <= Utc::now(),
        "seen when the socket opened: {seen_open}, opened at {opened}"
    );

    past_the_second_of(seen_open).await;
    let closing = Utc::now().trunc_subsecs(0);
    socket.close().await;
    let left = when_online(false).await;
    let seen_left = instant(&left["last_seen_at"]);
    assert!(
        seen_left >= seen_open,
        "last_seen_at went back: {seen_open} then {seen_left}"
    );
    assert!(
        closing <= seen_left && seen_left <= Utc::now(),
        "seen when the socket closed: {seen_left}, closed at {closing}"
    );
    // Later writes (a flush is every 250 ms) leave it where it is: nothing moves it back.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let later = session().await;
    assert_eq!(later["online"], false);
    assert!(instant(&later["last_seen_at"]) >= seen_left, "{later}");
    assert_eq!(later["started_at"], started["started_at"]);
});

on_both_databases!(
    sessions_belong_to_their_account_and_erasure_ends_them,
    |db: Db| async move {
        let server = start(&db, &[]).await;
        let platform = Platform::new(&server).await;
        let stranger = Platform::new(&server).await;
        let channel = Channel::connect(&platform, "site", json!({})).await;
        let visitor = Visitor::start(&server, &channel, json!({})).await;
        let path = format!("/v1/chat-sessions/{}", visitor.session_id);
        assert_not_found(&stranger.send("GET", &path, None).await, "another account's session");
        let mut grpc = ChatSessionsClient::connect(server.grpc.clone()).await.unwrap();
        let request = GetChatSessionRequest {
            session_id: visitor.session_id.clone(),
        };
        let thread = grpc
            .get_chat_session(platform.grpc(request.clone()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(thread.chat_session.unwrap().contact_id, visitor.contact_id);
        let refused = grpc.get_chat_session(stranger.grpc(request)).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::NotFound);

        let mut socket = visitor.socket(&server, "", "").await;
        platform
            .ok("DELETE", &format!("/v1/contacts/{}", visitor.contact_id), None)
            .await;
        assert_eq!(socket.closed().await.code, 4401);
        assert_not_found(&platform.send("GET", &path, None).await, "an erased session");
    }
);

/// Two replicas on one PostgreSQL and Redis: the visitor's socket is held by an edge process whose core
/// (a process of its own) runs no jobs; the business's calls are made on the other replica (`serve`), whose
/// workers also run the delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_made_on_another_replica_reaches_the_socket_in_order() {
    let db = Db::postgres().await;
    let redis = redis_server::shared_url();
    let mut core_env = base_env();
    for (name, value) in [
        ("DATABASE_URL", db.url().as_str()),
        ("REDIS_URL", redis.as_str()),
        ("FRONTDESK_JOB_CONCURRENCY", "0"),
    ] {
        core_env.insert(name.into(), value.into());
    }
    let core = Server::spawn(None, vec!["core".into()], core_env).await;
    let sockets = Server::spawn(
        None,
        vec!["edge".into(), "--core".into(), core.grpc.clone()],
        base_env(),
    )
    .await;
    let calls = start(&db, &[("REDIS_URL", &redis)]).await;
    let platform = Platform::new(&calls).await;
    let channel = Channel::connect(&platform, "site", json!({})).await;
    let visitor = Visitor::start(&sockets, &channel, json!({})).await;
    let mut socket = visitor.socket(&sockets, "", "").await;
    let first = reply(&platform, &visitor, "one").await;
    let pushed = socket.frame_of("message").await;
    assert_eq!(pushed["message"]["id"], first.as_str());
    let mut sent = Vec::new();
    for n in 0..5 {
        sent.push(reply(&platform, &visitor, &format!("reply {n}")).await);
        message_when(&platform, sent.last().unwrap(), |m| m["status"] != "queued").await;
    }
    platform
        .ok(
            "PATCH",
            &format!("/v1/messages/{first}"),
            Some(json!({"text": "one, corrected"})),
        )
        .await;
    platform
        .ok(
            "POST",
            &format!("/v1/messages/{}/reactions", sent[0]),
            Some(json!({"emoji": "👍"})),
        )
        .await;
    platform.ok("DELETE", &format!("/v1/messages/{}", sent[1]), None).await;
    let mut frames = Vec::new();
    while frames.len() < 8 {
        frames.push(socket.frame().await);
    }
    let arrived: Vec<(String, String)> = frames
        .iter()
        .map(|frame| {
            (
                frame["type"].as_str().unwrap().to_owned(),
                frame["message"]["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = sent
        .iter()
        .map(|id| ("message".to_owned(), id.clone()))
        .chain([
            ("message_updated".to_owned(), first.clone()),
            ("reaction".to_owned(), sent[0].clone()),
            ("message_removed".to_owned(), sent[1].clone()),
        ])
        .collect();
    assert_eq!(arrived, expected, "every change arrives, in the order it was made");
    assert_eq!(frames[5]["message"]["text"], "one, corrected");
    assert_eq!(frames[6]["message"]["reactions"][0]["emoji"], "👍");
    assert_eq!(
        (&frames[7]["message"]["removed"], &frames[7]["message"]["text"]),
        (&json!(true), &json!(""))
    );
    message_when(&platform, &sent[4], |m| m["status"] == "delivered").await;

    // Disconnecting on one replica closes the socket on the other.
    platform.ok("DELETE", "/v1/channels/site", None).await;
    assert_eq!(socket.closed().await.code, 4401);
}
