//! What an outsider can do to web chat, tried from outside as an attacker would: another account pushing into
//! a visitor's chat, a visitor capturing the business's sends with a typed e-mail, floods of sessions,
//! messages, reads and frames, sockets that pile up or never read, and bodies sent to the edge before any
//! credential, or too slowly; on SQLite and on PostgreSQL + Redis.

use std::time::Duration;

use frontdesk_tests::{
    Answer, Db, Server,
    admin::clock_at,
    on_both_databases,
    platform::{Platform, assert_invalid},
    server::sample,
    webchat::{Channel, Socket, Visitor, WAIT, call, list_messages, message_when, reply, start},
};
use serde_json::json;

/// How long a socket is watched for a frame that must not come.
const QUIET: Duration = Duration::from_millis(1500);

/// Asserts that nothing reaches `socket` within `QUIET`.
async fn stays_quiet(socket: &mut Socket, case: &str) {
    if let Some(next) = socket.next(QUIET).await {
        panic!("{case}: the visitor's socket got {next:?}");
    }
}

// A session id is no secret (it is in webhooks and identities): knowing one must not let another account, or
// another channel of the same account, speak to that visitor or learn whether they are online.
on_both_databases!(another_account_cannot_reach_a_visitor, |db: Db| async move {
    let server = start(&db, &[]).await;
    let business = Platform::new(&server).await;
    let attacker = Platform::new(&server).await;
    let site = Channel::connect(&business, "site", json!({})).await;
    let other = Channel::connect(&business, "other", json!({})).await;
    Channel::connect(&attacker, "mine", json!({})).await;
    let visitor = Visitor::start(&server, &site, json!({})).await;
    let mut socket = visitor.socket(&server, "", "").await;

    // Addressed by the session id on the attacker's own channel: refused, and nothing is pushed.
    let by_id = json!({"channel": "mine", "external_id": visitor.session_id, "text": "Your card was blocked"});
    let refused = attacker.send("POST", "/v1/contacts/send", Some(by_id)).await;
    assert_invalid(&refused, "external_id", "another account's session");
    // The same through a contact that claims the session as its identity: the message cannot go out.
    let claimed = json!({"name": "x", "identities": [{"type": "webchat", "external_id": visitor.session_id}]});
    let contact = attacker.ok("POST", "/v1/contacts", Some(claimed)).await["contact"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/v1/contacts/{contact}/send-message");
    let sent = attacker
        .send("POST", &path, Some(json!({"text": "Pay here", "channel": "mine"})))
        .await;
    assert_eq!(sent.status, 202, "{}", sent.body);
    let id = sent.body["message_id"].as_str().unwrap().to_owned();
    let failed = message_when(&attacker, &id, |m| m["status"] != "queued").await;
    assert_eq!(
        (failed["status"].as_str(), failed["error"]["code"].as_str()),
        (Some("failed"), Some("cancelled")),
        "whether the visitor is online is not told: {failed}"
    );
    // Another channel of the visitor's own business names it in vain too.
    let elsewhere = json!({"channel": "other", "external_id": visitor.session_id, "text": "hi"});
    let refused = business.send("POST", "/v1/contacts/send", Some(elsewhere)).await;
    assert_invalid(&refused, "external_id", "a session of another channel");
    assert_eq!(other.name, "other");
    stays_quiet(&mut socket, "pushes addressed by a stranger").await;

    // The visitor's own business still reaches it, by contact and by session id on its channel.
    let answer = reply(&business, &visitor, "Hello from the shop").await;
    assert_eq!(socket.frame_of("message").await["message"]["id"], answer.as_str());
    let by_session = json!({"channel": "site", "external_id": visitor.session_id, "text": "And again"});
    let again = business.send("POST", "/v1/contacts/send", Some(by_session)).await;
    assert_eq!(again.status, 202, "{}", again.body);
    assert_eq!(again.body["contact_id"], visitor.contact_id.as_str());
    assert_eq!(socket.frame_of("message").await["message"]["text"], "And again");
});

// A visitor types someone else's e-mail address with only the public widget key: the business's later send
// to that address must not land in the visitor's chat.
on_both_databases!(a_typed_email_is_a_claim_not_an_address, |db: Db| async move {
    let server = start(&db, &[]).await;
    let business = Platform::new(&server).await;
    let site = Channel::connect(&business, "site", json!({})).await;
    let claim = json!({"visitor": {"name": "Mallory", "email": "ceo@victim.example"}});
    let visitor = Visitor::start(&server, &site, claim).await;
    let mut socket = visitor.socket(&server, "", "").await;
    visitor.post(&server, "hello", "c-1").await;
    socket.frame_of("message").await;

    let contact = business
        .ok("GET", &format!("/v1/contacts/{}", visitor.contact_id), None)
        .await["contact"]
        .clone();
    assert_eq!(contact["email"], "", "{contact}");
    // The business sees what the visitor typed, on the session.
    let session = business
        .ok("GET", &format!("/v1/chat-sessions/{}", visitor.session_id), None)
        .await;
    assert_eq!(
        session["chat_session"]["visitor"],
        json!({"name": "Mallory", "email": "ceo@victim.example"})
    );

    for (case, body) in [
        (
            "by e-mail",
            json!({"email": "ceo@victim.example", "text": "Your invoice"}),
        ),
        (
            "by e-mail on the web chat channel",
            json!({"email": "CEO@victim.example", "text": "Your invoice", "channel": "site"}),
        ),
    ] {
        let refused = business.send("POST", "/v1/contacts/send", Some(body)).await;
        assert_eq!(
            (refused.status, refused.code()),
            (400, "no_channel"),
            "{case}: the address is nobody's chat: {}",
            refused.body
        );
    }
    stays_quiet(&mut socket, "a send by e-mail").await;
});

/// `POST /webchat/v1/sessions` on `channel` from the client address `from` (the test's proxy writes it).
async fn session_from(server: &Server, channel: &Channel, from: &str) -> Answer {
    let body = json!({"widget_key": channel.widget_key});
    call(
        server,
        "POST",
        "/webchat/v1/sessions",
        &[("x-forwarded-for", from)],
        Some(body),
    )
    .await
}

/// A 429 `rate_limited` whose message names `what`, with `Retry-After`.
fn assert_limited(answer: &Answer, what: &str, case: &str) {
    assert_eq!(
        (answer.status, answer.code()),
        (429, "rate_limited"),
        "{case}: {}",
        answer.body
    );
    let message = answer.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(what), "{case}: {message}");
    assert!(answer.header("retry-after").is_some(), "{case}: no Retry-After");
}

/// The first address of a random /64 of the documentation prefix: a client no other test is.
fn fresh_address() -> String {
    format!("{}::1", fresh_64())
}

fn fresh_64() -> String {
    let [a, b] = rand::random::<[u16; 2]>();
    format!("2001:db8:{a:x}:{b:x}")
}

// With only the widget key, from many addresses: new sessions are counted per address (an IPv6 /64 as
// one), per channel and per account; messages per channel and account too; and reads, resumes and
// socket frames per session.
on_both_databases!(
    visitor_budgets_hold_per_64_channel_account_and_session,
    |db: Db| async move {
        let budgets = [
            ("FRONTDESK_TRUSTED_PROXY_HOPS", "1"),
            ("FRONTDESK_WEBCHAT_SESSIONS_PER_MINUTE", "2"),
            ("FRONTDESK_WEBCHAT_CHANNEL_SESSIONS_PER_MINUTE", "4"),
            ("FRONTDESK_WEBCHAT_ACCOUNT_SESSIONS_PER_MINUTE", "6"),
            ("FRONTDESK_WEBCHAT_CHANNEL_MESSAGES_PER_MINUTE", "5"),
            ("FRONTDESK_WEBCHAT_ACCOUNT_MESSAGES_PER_MINUTE", "8"),
            ("FRONTDESK_WEBCHAT_READS_PER_MINUTE", "3"),
            ("FRONTDESK_WEBCHAT_SIGNALS_PER_MINUTE", "3"),
        ];
        let server = start(&db, &budgets).await;
        let business = Platform::new(&server).await;
        let site = Channel::connect(&business, "site", json!({})).await;
        let shop = Channel::connect(&business, "shop", json!({})).await;

        // One IPv6 client owns its /64: a new address in it is the same client.
        let net = fresh_64();
        let v1 = Visitor::started(session_from(&server, &site, &format!("{net}:0:0:0:1")).await);
        let v2 = Visitor::started(session_from(&server, &site, &format!("{net}:0:0:0:2")).await);
        let same_64 = session_from(&server, &site, &format!("{net}:ffff:ffff:ffff:ffff")).await;
        assert_limited(&same_64, "address", "a third session from the same /64");

        // Fresh addresses, one channel: its own budget.
        let v3 = Visitor::started(session_from(&server, &site, &fresh_address()).await);
        let v4 = Visitor::started(session_from(&server, &site, &fresh_address()).await);
        assert_limited(
            &session_from(&server, &site, &fresh_address()).await,
            "channel",
            "a fifth on the channel",
        );
        // Another channel of the account: the account's budget.
        let v5 = Visitor::started(session_from(&server, &shop, &fresh_address()).await);
        Visitor::started(session_from(&server, &shop, &fresh_address()).await);
        assert_limited(
            &session_from(&server, &shop, &fresh_address()).await,
            "account",
            "a seventh on the account",
        );

        // Messages: five on the site channel, from two sessions; then the account's eight.
        for (n, visitor) in [&v1, &v1, &v1, &v2, &v2].into_iter().enumerate() {
            assert_eq!(visitor.post(&server, "hi", &format!("c-{n}")).await.status, 201);
        }
        assert_limited(
            &v3.post(&server, "hi", "c-9").await,
            "channel",
            "a sixth message on the channel",
        );
        for n in 0..3 {
            assert_eq!(v5.post(&server, "hi", &format!("s-{n}")).await.status, 201);
        }
        assert_limited(
            &v5.post(&server, "hi", "s-9").await,
            "account",
            "a ninth message on the account",
        );

        // Reads and resumes of one session.
        for _ in 0..3 {
            assert_eq!(list_messages(&server, &v4.token, "").await.status, 200);
        }
        assert_limited(
            &list_messages(&server, &v4.token, "").await,
            "reads",
            "a fourth thread read",
        );
        let resume = json!({"widget_key": site.widget_key, "token": v3.token});
        for _ in 0..3 {
            let resumed = call(&server, "POST", "/webchat/v1/sessions", &[], Some(resume.clone())).await;
            assert_eq!(resumed.status, 200, "{}", resumed.body);
        }
        let resumed = call(&server, "POST", "/webchat/v1/sessions", &[], Some(resume)).await;
        assert_limited(&resumed, "reads", "a fourth resume");

        // Frames other than messages on one socket.
        let mut socket = v2.socket(&server, "", "").await;
        for _ in 0..3 {
            socket.send(json!({"type": "typing"})).await;
        }
        socket
            .send(json!({"type": "seen", "message_id": "msg_0000000000000000"}))
            .await;
        let refused = socket.frame_of("error").await;
        assert_eq!(refused["code"], "rate_limited", "{refused}");
        assert!(refused["retry_after"].as_u64().unwrap() >= 1, "{refused}");
    }
);

// One token, or one address, cannot open sockets without end: past the caps the handshake is refused,
// and a closed socket frees its place.
on_both_databases!(sockets_are_capped_per_session_and_per_address, |db: Db| async move {
    let caps = [
        ("FRONTDESK_WEBCHAT_SOCKETS_PER_SESSION", "2"),
        ("FRONTDESK_WEBCHAT_SOCKETS_PER_ADDRESS", "3"),
    ];
    let server = start(&db, &caps).await;
    let business = Platform::new(&server).await;
    let site = Channel::connect(&business, "site", json!({})).await;
    let (a, b, c) = (
        Visitor::start(&server, &site, json!({})).await,
        Visitor::start(&server, &site, json!({})).await,
        Visitor::start(&server, &site, json!({})).await,
    );
    let first = a.socket(&server, "", "").await;
    let _second = a.socket(&server, "", "").await;
    assert_eq!(
        Socket::open(&server, &a.token, "", "").await.err(),
        Some(429),
        "a third of one session"
    );
    let _other = b.socket(&server, "", "").await;
    assert_eq!(
        Socket::open(&server, &c.token, "", "").await.err(),
        Some(429),
        "a fourth of one address"
    );
    first.close().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while Socket::open(&server, &c.token, "", "").await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a closed socket's place was never freed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
});

// A visitor that reconnects with a long backlog and never reads: the edge gives up on it once a frame
// cannot be sent within FRONTDESK_WEBCHAT_SEND_TIMEOUT, instead of holding the socket (and what it
// queued) for as long as the connection stays up.
on_both_databases!(a_visitor_that_never_reads_is_dropped, |db: Db| async move {
    let server = start(&db, &[("FRONTDESK_WEBCHAT_SEND_TIMEOUT", "1s")]).await;
    let business = Platform::new(&server).await;
    let site = Channel::connect(&business, "site", json!({})).await;
    let visitor = Visitor::start(&server, &site, json!({})).await;
    let first = reply(&business, &visitor, "first").await;
    // About 6 MB of replay: more than the connection can hold for a reader that takes nothing.
    const BACKLOG: usize = 500;
    let large = "€".repeat(4_000);
    let mut last = String::new();
    for _ in 0..BACKLOG / 25 {
        let sends = (0..25).map(|_| {
            let (http, key, contact, text) = (
                server.url("/v1/contacts/send"),
                business.key.clone(),
                visitor.contact_id.clone(),
                large.clone(),
            );
            async move {
                let body = json!({"contact_id": contact, "text": text}).to_string();
                let answer = frontdesk_tests::call_with("POST", &http, &[("x-api-key", &key)], Some(&body)).await;
                assert_eq!(answer.status, 202, "{}", answer.body);
                answer.body["message_id"].as_str().unwrap().to_owned()
            }
        });
        last = frontdesk_tests::join_all(sends).await.pop().unwrap();
    }
    message_when(&business, &last, |m| m["status"] == "sent").await;

    // Nothing is read until the edge has filled the connection and given up on it (its counter of timed-out
    // sends says when): a reader that came back sooner would drain it and hide the time limit.
    let mut stalled = Socket::open_small(&server, &visitor.token, &first, 4096).await;
    server
        .metrics_when(|m| sample(m, "frontdesk_webchat_sends_timed_out_total", &[]).is_some_and(|n| n >= 1.0))
        .await;
    let mut received = 0;
    let closed = loop {
        match stalled.next(Duration::from_secs(5)).await {
            Some(Ok(_)) => received += 1,
            Some(Err(closed)) => break closed,
            None => panic!("the socket stayed open after {received} frames"),
        }
    };
    assert!(received < BACKLOG, "{received} frames came before {closed:?}");
    // The visitor's next socket is served as usual.
    let mut socket = visitor.socket(&server, "", "").await;
    reply(&business, &visitor, "still here").await;
    assert_eq!(socket.frame_of("message").await["message"]["text"], "still here");
});

/// Sends `head` (a request's line and headers, without the blank line) and `body` on a new connection, and
/// keeps it open; the connection.
async fn raw_request(server: &Server, head: &str, body: &[u8]) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(server.http.trim_start_matches("http://"))
        .await
        .expect("connect");
    stream
        .write_all(format!("{head}\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .expect("head");
    stream.write_all(body).await.expect("body");
    stream
}

/// The status of the answer on `stream`, or `None` when none came within `wait`.
async fn status_within(stream: &mut tokio::net::TcpStream, wait: Duration) -> Option<u16> {
    use tokio::io::AsyncReadExt;
    let mut head = [0_u8; 12];
    let read = tokio::time::timeout(wait, stream.read_exact(&mut head))
        .await
        .ok()?
        .ok()?;
    assert_eq!(read, 12);
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// The head of a 20 MB upload whose body is still to come.
fn upload_head(key: &str) -> String {
    format!(
        "POST /v1/kb-sources/file HTTP/1.1\r\nx-api-key: {key}\r\n\
         Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 20000000"
    )
}

// The edge holds no body for a stranger, for ever, or beyond its memory budget: an upload with a wrong key
// is refused before its body comes, a body that does not come in time is refused with 408, and bodies
// past the budget are refused with 503 until memory is free again.
on_both_databases!(
    the_edge_holds_bodies_only_for_callers_in_time_and_budget,
    |db: Db| async move {
        let limits = [("FRONTDESK_BODY_READ_TIMEOUT", "2s"), ("FRONTDESK_BODY_MEMORY_MB", "1")];
        let server = start(&db, &limits).await;
        let business = Platform::new(&server).await;
        let part = b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\n";

        let mut stranger = raw_request(&server, &upload_head("fdk_wrong"), part).await;
        let answered = status_within(&mut stranger, Duration::from_secs(1)).await;
        assert_eq!(answered, Some(401), "a wrong key is refused before the body");

        let mut slow = raw_request(&server, &upload_head(&business.key), part).await;
        assert_eq!(
            status_within(&mut slow, Duration::from_secs(6)).await,
            Some(408),
            "a body that never comes"
        );

        // 700 KB held by an upload that is still coming; 700 KB more do not fit in 1 MB.
        let mut held = raw_request(
            &server,
            &upload_head(&business.key),
            &[part.as_slice(), &[b'x'; 700_000]].concat(),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let json = format!("{{\"name\": \"{}\"}}", "x".repeat(700_000));
        let over = frontdesk_tests::call_with(
            "POST",
            &server.url("/v1/contacts"),
            &[("x-api-key", &business.key)],
            Some(&json),
        )
        .await;
        assert_eq!((over.status, over.code()), (503, "unavailable"), "{}", over.body);
        assert!(over.header("retry-after").is_some());
        assert_eq!(status_within(&mut held, Duration::from_secs(6)).await, Some(408));
        let fits = business
            .send("POST", "/v1/contacts", Some(json!({"name": "Ada"})))
            .await;
        assert_eq!(fits.status, 200, "the budget is free again: {}", fits.body);
    }
);

/// Waits until `path` answers 404 (or panics after `WAIT`).
async fn until_gone(business: &Platform<'_>, path: &str, what: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while business.send("GET", path, None).await.status != 404 {
        assert!(tokio::time::Instant::now() < deadline, "{what} never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// Every session start makes a contact: sessions in which nothing was written go some time after their
// visitor was last seen, with their contacts unless the business gave those something.
on_both_databases!(empty_sessions_expire_with_their_empty_contacts, |db: Db| async move {
    let env = [
        ("FRONTDESK_TEST_CLOCK", "true"),
        ("FRONTDESK_WEBCHAT_EMPTY_SESSION_TTL", "1h"),
    ];
    let server = start(&db, &env).await;
    let business = Platform::new(&server).await;
    let site = Channel::connect(&business, "site", json!({})).await;
    let empty = Visitor::start(&server, &site, json!({"visitor": {"name": "Flood"}})).await;
    let wrote = Visitor::start(&server, &site, json!({})).await;
    wrote.post(&server, "hello", "c-1").await;
    let kept = Visitor::start(&server, &site, json!({})).await;
    let path = |visitor: &Visitor| format!("/v1/contacts/{}", visitor.contact_id);
    business.ok("PATCH", &path(&kept), Some(json!({"tags": ["vip"]}))).await;
    clock_at(&server, chrono::Utc::now() + chrono::Duration::minutes(30)).await;
    let recent = Visitor::start(&server, &site, json!({})).await;

    clock_at(&server, chrono::Utc::now() + chrono::Duration::minutes(80)).await;
    let session = |visitor: &Visitor| format!("/v1/chat-sessions/{}", visitor.session_id);
    until_gone(&business, &session(&empty), "the empty session").await;
    assert_eq!(
        business.send("GET", &path(&empty), None).await.status,
        404,
        "its contact went too"
    );
    assert_eq!(list_messages(&server, &empty.token, "").await.status, 401);
    // The business's own contact stays without the session; a chat and a recent visitor stay whole.
    until_gone(&business, &session(&kept), "the edited contact's session").await;
    assert_eq!(business.send("GET", &path(&kept), None).await.status, 200);
    for (visitor, case) in [(&wrote, "a session with a message"), (&recent, "a session seen lately")] {
        assert_eq!(
            business.send("GET", &session(visitor), None).await.status,
            200,
            "{case}"
        );
        assert_eq!(business.send("GET", &path(visitor), None).await.status, 200, "{case}");
    }
    assert_eq!(wrote.thread(&server, "").await.len(), 1);
});

// Pages of this very server need no listing, but only under its own scheme: the same host over another
// scheme is another origin.
on_both_databases!(the_server_s_own_pages_are_its_scheme_and_host, |db: Db| async move {
    let server = start(&db, &[]).await;
    let business = Platform::new(&server).await;
    let site = Channel::connect(&business, "site", json!({"allowed_origins": "https://shop.example"})).await;
    let host = server.http.trim_start_matches("http://").to_owned();
    let body = json!({"widget_key": site.widget_key});
    for (origin, status) in [
        (format!("http://{host}"), 201),
        (format!("https://{host}"), 403),
        ("https://shop.example".to_owned(), 201),
    ] {
        let answer = call(
            &server,
            "POST",
            "/webchat/v1/sessions",
            &[("origin", &origin)],
            Some(body.clone()),
        )
        .await;
        assert_eq!(answer.status, status, "{origin}: {}", answer.body);
    }
});
