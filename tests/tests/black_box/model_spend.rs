//! What a model may cost and write, end to end against a local server that speaks Anthropic's Messages API:
//! at 0 credits no request reaches the model and no tool is called (a reply, a follow-up, an import with a
//! model, a summary); twenty summaries at once with one recap's credit make one recap and one charge; a model
//! that floods tools writes at most 10 rows a reply and 100 a conversation a day, books only within the
//! booking window, and still answers; an MCP server whose list pages on without end is read five pages deep,
//! 64 tools at most; the tier decides the Claude model on the server's key.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use frontdesk_api::admin::v1::CreditsRequest;
use frontdesk_tests::{
    Db, Server, admin,
    admin::clock_at,
    knowledge::{Part, finished, upload},
    mcp_server::McpServer,
    model_server::{FakeModel, Recorded, Reply},
    on_both_databases,
    platform::{Platform, assert_invalid},
    sms::{self, Desk},
    tls,
    twilio::{FakeTwilio, new_message_sid},
};
use serde_json::{Value, json};

const HANDOFF: &str = "Thanks for your message. A member of our team will get back to you shortly.";

async fn start(db: &Db, twilio: &FakeTwilio, model: &FakeModel, extra: &[(&str, &str)]) -> Server {
    let trust = tls::trust_env();
    let mut env = vec![
        ("FRONTDESK_REPLY_DEBOUNCE_MS", "0"),
        ("FRONTDESK_MODEL_PROVIDER", "anthropic"),
        ("ANTHROPIC_BASE_URL", model.base_url.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-server-key"),
        (trust.0, trust.1.as_str()),
    ];
    env.extend_from_slice(extra);
    sms::start(db, twilio, &env).await
}

async fn desk<'a>(server: &'a Server, twilio: &FakeTwilio, agent: Value) -> Desk<'a> {
    let mut body = json!({"name": "Ava"});
    body.as_object_mut().unwrap().extend(agent.as_object().unwrap().clone());
    Desk::open(server, twilio, body, ("What are your opening hours?", "Nine to five.")).await
}

/// Debits the account down to `credits`.
async fn set_balance(server: &Server, platform: &Platform<'_>, credits: f64) {
    let debit = platform.balance().await - credits;
    if debit <= 0.0 {
        return;
    }
    let request = CreditsRequest {
        account_id: platform.account_id.clone(),
        credits: format!("{debit:.3}"),
        reason: "spent elsewhere".into(),
    };
    admin::client(server).await.debit_credits(request).await.unwrap();
    assert!((platform.balance().await - credits).abs() < 1e-9);
}

/// Credit holds not settled or released.
async fn live_holds(db: &Db, account_id: &str) -> i64 {
    let count = db
        .scalar("SELECT COUNT(*) FROM credit_holds WHERE account_id = $1", account_id)
        .await;
    count.unwrap_or_default().parse().unwrap()
}

fn asks_nudge(request: &Recorded) -> bool {
    request.system().contains("has not answered your last message")
}

fn asks_pairs(request: &Recorded) -> bool {
    request.system().contains("questions its customers would ask")
}

fn asks_recap(request: &Recorded) -> bool {
    request.system().contains("short recap")
}

/// An HTTPS custom function that counts its calls.
async fn counting_function() -> (String, Arc<AtomicUsize>) {
    use axum::{Json, Router, extract::State, routing::post};
    let calls = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route(
            "/slots",
            post(|State(calls): State<Arc<AtomicUsize>>| async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Json(json!({"slots": ["10:00"]}))
            }),
        )
        .with_state(calls.clone());
    (format!("{}/slots", tls::serve(app).await), calls)
}

on_both_databases!(at_zero_credits_no_model_and_no_tool_is_asked, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let model = FakeModel::start().await;
    // A model that calls the function whenever it is asked about slots.
    model.script(|request| {
        let reply = if asks_nudge(request) {
            Reply::text("Still thinking about it?")
        } else if asks_pairs(request) {
            Reply::text("{\"pairs\": [{\"question\": \"When?\", \"answer\": \"At nine.\"}]}")
        } else if asks_recap(request) {
            Reply::text("They asked about spa days.")
        } else if request.last_user_text().contains("slots") && request.tool_results().is_empty() {
            Reply::call("call_1", "free_slots", json!({"day": "friday"}))
        } else {
            Reply::text("We have spa days every weekday.")
        };
        (reply, Duration::ZERO)
    });
    let server = start(&db, &twilio, &model, &[("FRONTDESK_TEST_CLOCK", "true")]).await;
    let follow_ups = json!({"follow_ups": {"enabled": true, "delay_minutes": 10, "max_count": 2}});
    let desk = desk(&server, &twilio, follow_ups).await;
    let (function_url, function_calls) = counting_function().await;
    let function = json!({"name": "free_slots", "description": "Free slots on a day", "url": function_url,
        "parameters": {"type": "object", "properties": {"day": {"type": "string"}}}});
    desk.platform
        .ok(
            "POST",
            &format!("/v1/agents/{}/custom-functions", desk.agent),
            Some(function),
        )
        .await;
    let start = chrono::Utc::now();
    clock_at(&server, start).await;

    // With credits: the model answers, and the follow-up is due in ten minutes.
    desk.channel
        .inbound(&new_message_sid(), "+15559000001", "Spa days?")
        .await;
    twilio.wait_for_sent("+15559000001", 1).await;
    assert_eq!(model.requests().len(), 1);

    set_balance(&server, &desk.platform, 0.0).await;

    // The follow-up at 0 credits: no nudge asked of the model, nothing sent.
    clock_at(&server, start + chrono::Duration::minutes(11)).await;
    admin::quiesce(&server).await;
    assert_eq!(twilio.sent_to("+15559000001").len(), 1, "no follow-up");

    // A reply at 0 credits: the handoff sentence, no model call and so no function call.
    desk.channel
        .inbound(&new_message_sid(), "+15559000002", "Any free slots on Friday?")
        .await;
    assert_eq!(twilio.wait_for_sent("+15559000002", 1).await[0].body(), HANDOFF);
    let thread = desk.platform.conversation_with("+15559000002").await;
    assert_eq!(thread["conversation"]["handoff_reason"], "insufficient_credits");

    // An import with a model at 0 credits: no section is sent to the model.
    let document = "# Opening hours\n\nWe open at nine.\n\n# Parking\n\nBehind the shop.\n";
    let parts = [Part::file(
        "file",
        "desk.md",
        "text/markdown",
        document.as_bytes().to_vec(),
    )];
    let answer = upload(&server, &desk.platform.key, &parts).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let source = finished(&desk.platform, answer.body["source_id"].as_str().unwrap()).await;
    assert_eq!(source["status"], "failed", "{source}");
    assert_eq!(source["error"], "insufficient_credits", "{source}");

    // A summary at 0 credits: 402, no recap asked.
    let refused = desk
        .platform
        .send("POST", "/v1/summaries", Some(json!({"phoneNumber": "+15559000001"})))
        .await;
    assert_eq!(refused.status, 402, "{}", refused.body);
    assert_eq!(refused.code(), "insufficient_credits");

    admin::quiesce(&server).await;
    let asked: Vec<String> = model.requests().iter().map(|r| r.system()).collect();
    assert_eq!(asked.len(), 1, "only the first reply reached the model: {asked:#?}");
    assert_eq!(function_calls.load(Ordering::SeqCst), 0, "no custom function called");
    assert_eq!(desk.platform.balance().await, 0.0);
    assert_eq!(live_holds(&db, &desk.platform.account_id).await, 0);
});

on_both_databases!(
    twenty_summaries_with_one_recaps_credit_make_one_recap,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let model = FakeModel::start().await;
        model.script(|request| {
            // Recaps take a while, so the twenty overlap.
            if asks_recap(request) {
                (Reply::text("They asked about spa days."), Duration::from_millis(400))
            } else {
                (Reply::text("We have spa days every weekday."), Duration::ZERO)
            }
        });
        let server = start(&db, &twilio, &model, &[]).await;
        let desk = desk(&server, &twilio, json!({})).await;
        desk.channel
            .inbound(&new_message_sid(), "+15559000010", "Spa days?")
            .await;
        twilio.wait_for_sent("+15559000010", 1).await;
        admin::quiesce(&server).await;
        // Exactly one pro recap's credit.
        set_balance(&server, &desk.platform, 1.0).await;

        let platform = &desk.platform;
        let asks =
            (0..20).map(|_| platform.send("POST", "/v1/summaries", Some(json!({"phoneNumber": "+15559000010"}))));
        let answers = futures_util::future::join_all(asks).await;
        let mut statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
        statuses.sort_unstable();
        assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 1, "{statuses:?}");
        assert!(statuses.iter().all(|s| [200, 402, 429].contains(s)), "{statuses:?}");
        let busy = answers.iter().find(|a| a.status == 429);
        if let Some(busy) = busy {
            assert_eq!(busy.code(), "rate_limited");
            assert_eq!(busy.header("retry-after"), Some("5"));
        }
        assert_eq!(
            model.requests().iter().filter(|r| asks_recap(r)).count(),
            1,
            "one recap's model calls"
        );
        assert_eq!(platform.balance().await, 0.0, "charged once");
        let credits = platform.ok("GET", "/v1/credits", None).await;
        let summaries = credits["credits"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["reason"] == "summary")
            .count();
        assert_eq!(summaries, 1);
        assert_eq!(
            live_holds(&db, &platform.account_id).await,
            0,
            "every hold settled or released"
        );
    }
);

/// Tasks the model wrote in the conversation with `phone`.
async fn tasks_of(platform: &Platform<'_>, phone: &str) -> usize {
    let conversation = platform.conversation_with(phone).await["conversation"]["id"].clone();
    let mut count = 0;
    let mut cursor = String::new();
    loop {
        let page = platform.get(&format!("/v1/tasks?limit=200&cursor={cursor}")).await;
        count += page["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["conversation_id"] == conversation && t["kind"] != "handoff")
            .count();
        match page["next_cursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = next.to_owned(),
            _ => return count,
        }
    }
}

on_both_databases!(a_model_that_floods_tools_writes_a_bounded_number, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let model = FakeModel::start().await;
    let in_window = (chrono::Utc::now() + chrono::Duration::days(30))
        .format("%Y-%m-%dT10:00:00Z")
        .to_string();
    let past_window = (chrono::Utc::now() + chrono::Duration::days(90))
        .format("%Y-%m-%dT10:00:00Z")
        .to_string();
    model.script(move |request| {
        let results = request.tool_results().len();
        let reply = if request.last_user_text().starts_with("book") {
            match results {
                0 => Reply::Calls(vec![
                    (
                        "b1".into(),
                        "book_appointment".into(),
                        json!({"start_time": past_window}).to_string(),
                    ),
                    (
                        "b2".into(),
                        "book_appointment".into(),
                        json!({"start_time": in_window}).to_string(),
                    ),
                ]),
                _ => Reply::text("Booked what I could."),
            }
        } else if results < 80 {
            // Forty tasks every round, for two rounds.
            let calls = (0..40)
                .map(|n| {
                    (
                        format!("t{results}_{n}"),
                        "create_task".to_owned(),
                        json!({"title": format!("task {n}")}).to_string(),
                    )
                })
                .collect();
            Reply::Calls(calls)
        } else {
            Reply::text("Done.")
        };
        (reply, Duration::ZERO)
    });
    let server = start(&db, &twilio, &model, &[]).await;
    // Mini: the account's 10 credits pay for the fourteen replies.
    let booking = json!({"ai_tier": "mini", "booking": {"enabled": true, "link": "https://cal.example/ava"}});
    let desk = desk(&server, &twilio, booking).await;
    let platform = &desk.platform;

    desk.channel
        .inbound(&new_message_sid(), "+15559000020", "flood the tasks")
        .await;
    assert_eq!(
        twilio.wait_for_sent("+15559000020", 1).await[0].body(),
        "Done.",
        "the reply still completes"
    );
    assert_eq!(tasks_of(platform, "+15559000020").await, 10, "ten writes a reply");
    let requests = model.requests();
    let first_round = requests[1].tool_results();
    assert_eq!(first_round.len(), 40);
    assert_eq!(
        first_round.iter().filter(|(_, _, error)| !error).count(),
        8,
        "eight calls made of a round"
    );
    assert!(first_round[8].1.contains("limit_reached"), "{:?}", first_round[8]);
    let second_round = &requests[2].tool_results()[40..];
    assert_eq!(second_round.iter().filter(|(_, _, error)| !error).count(), 2);
    assert!(second_round[2].1.contains("limit_reached"), "{:?}", second_round[2]);

    // The booking window: 90 days ahead is refused to the model, 30 days ahead is booked.
    desk.channel
        .inbound(&new_message_sid(), "+15559000021", "book me in")
        .await;
    twilio.wait_for_sent("+15559000021", 1).await;
    let results = model.requests().last().unwrap().tool_results();
    assert!(results[0].2 && results[0].1.contains("booking window"), "{results:?}");
    assert!(
        !results[1].2 && results[1].1.starts_with("booked: appointment"),
        "{results:?}"
    );

    // A hundred writes a conversation a day: ten replies of ten, then none.
    for n in 0..11 {
        desk.channel
            .inbound(&new_message_sid(), "+15559000022", &format!("flood {n}"))
            .await;
        twilio.wait_for_sent("+15559000022", n + 1).await;
    }
    assert_eq!(tasks_of(platform, "+15559000022").await, 100);
    let last = model.requests().last().unwrap().tool_results();
    assert!(
        last.iter().all(|(_, _, error)| *error),
        "the eleventh reply wrote nothing"
    );
    assert!(
        last.iter()
            .any(|(_, content, _)| content.contains("per conversation a day")),
        "{last:?}"
    );
});

on_both_databases!(an_mcp_server_that_lists_without_end_is_bounded, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let model = FakeModel::start().await;
    model.script(|_| (Reply::text("Fine."), Duration::ZERO));
    // A budget large enough that the tools' own bounds are what stops them.
    let server = start(&db, &twilio, &model, &[("FRONTDESK_MODEL_CONTEXT_TOKENS", "1000000")]).await;
    let desk = desk(&server, &twilio, json!({})).await;
    let mcp_tools = |request: &Recorded| request.tool_names().iter().filter(|n| n.starts_with("tool_")).count();

    // Pages of five tools without end: five pages are read.
    let (small, pages) = McpServer::catalog(5, 10).await;
    let path = format!("/v1/agents/{}/mcp-servers", desk.agent);
    let server_row = platform_mcp(&desk.platform, &path, &small.url).await;
    desk.channel.inbound(&new_message_sid(), "+15559000030", "Hello").await;
    twilio.wait_for_sent("+15559000030", 1).await;
    assert_eq!(pages.load(Ordering::SeqCst), 5, "five pages, no more");
    assert_eq!(mcp_tools(&model.requests()[0]), 25);
    desk.platform.ok("DELETE", &format!("{path}/{server_row}"), None).await;

    // Pages of a hundred: sixty-four tools are kept.
    let (wide, _) = McpServer::catalog(100, 10).await;
    let server_row = platform_mcp(&desk.platform, &path, &wide.url).await;
    desk.channel.inbound(&new_message_sid(), "+15559000031", "Hello").await;
    twilio.wait_for_sent("+15559000031", 1).await;
    assert_eq!(mcp_tools(model.requests().last().unwrap()), 64);
    desk.platform.ok("DELETE", &format!("{path}/{server_row}"), None).await;

    // Long declarations: 64 KiB of them at most.
    let (heavy, _) = McpServer::catalog(100, 4_000).await;
    platform_mcp(&desk.platform, &path, &heavy.url).await;
    desk.channel.inbound(&new_message_sid(), "+15559000032", "Hello").await;
    twilio.wait_for_sent("+15559000032", 1).await;
    let request = model.requests().last().unwrap().clone();
    let kept = mcp_tools(&request);
    assert!((10..=16).contains(&kept), "about 64 KiB of 4 KB declarations: {kept}");
    let bytes: usize = request.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"].as_str().unwrap().starts_with("tool_"))
        .map(|t| t["description"].as_str().unwrap().len() + t["input_schema"].to_string().len())
        .sum();
    assert!(bytes <= 64 * 1024, "{bytes}");
    assert!(
        server
            .logs()
            .contains("an MCP server lists more tools than an agent takes")
    );
});

/// Connects the MCP server at `url` to the agent; its id.
async fn platform_mcp(platform: &Platform<'_>, path: &str, url: &str) -> String {
    let created = platform
        .ok("POST", path, Some(json!({"name": "catalog", "url": url})))
        .await;
    created["mcp_server"]["id"].as_str().unwrap().to_owned()
}

on_both_databases!(the_tier_decides_the_model_on_the_servers_key, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let model = FakeModel::start().await;
    model.script(|_| (Reply::text("Hello!"), Duration::ZERO));
    let server = start(&db, &twilio, &model, &[]).await;
    let desk = desk(&server, &twilio, json!({"ai_tier": "mini"})).await;
    let platform = &desk.platform;

    // A mini agent answers with the mini tier's model, whatever the server's default.
    desk.channel
        .inbound(&new_message_sid(), "+15559000040", "Hi there")
        .await;
    twilio.wait_for_sent("+15559000040", 1).await;
    assert_eq!(model.requests()[0].body["model"], "claude-haiku-4-5");

    // Naming a model the tier may not: 400 on create and on patch, naming the field.
    let opus = json!({"name": "Big", "ai_tier": "mini", "anthropic_model": "claude-opus-4-5"});
    assert_invalid(
        &platform.send("POST", "/v1/agents", Some(opus)).await,
        "anthropic_model",
        "mini names opus",
    );
    let agent_path = format!("/v1/agents/{}", desk.agent);
    let patch = json!({"anthropic_model": "claude-opus-4-5"});
    assert_invalid(
        &platform.send("PUT", &agent_path, Some(patch)).await,
        "anthropic_model",
        "mini names opus",
    );
    platform
        .ok(
            "PUT",
            &agent_path,
            Some(json!({"ai_tier": "pro", "anthropic_model": "claude-opus-4-5"})),
        )
        .await;
    let back = json!({"ai_tier": "mini"});
    assert_invalid(
        &platform.send("PUT", &agent_path, Some(back)).await,
        "anthropic_model",
        "back to mini with opus",
    );
    let unchanged = platform.get(&agent_path).await;
    assert_eq!(unchanged["agent"]["ai_tier"], "pro", "a refused patch changes nothing");

    // On the account's own key any model may be named.
    let own = json!({"provider": "anthropic", "api_key": "sk-ant-own", "base_url": model.base_url});
    platform.ok("PUT", "/v1/model-provider", Some(own)).await;
    platform.ok("PUT", &agent_path, Some(json!({"ai_tier": "mini"}))).await;
    desk.channel
        .inbound(&new_message_sid(), "+15559000041", "Hi again")
        .await;
    twilio.wait_for_sent("+15559000041", 1).await;
    assert_eq!(model.requests().last().unwrap().body["model"], "claude-opus-4-5");

    // The own key gone, the agent's model no longer fits its tier: the tier's model answers.
    platform.ok("DELETE", "/v1/model-provider", None).await;
    desk.channel
        .inbound(&new_message_sid(), "+15559000042", "Hi once more")
        .await;
    twilio.wait_for_sent("+15559000042", 1).await;
    let last = model.requests().last().unwrap().clone();
    assert_eq!(last.body["model"], "claude-haiku-4-5");
    assert_eq!(last.headers["x-api-key"], "sk-ant-server-key");
});
