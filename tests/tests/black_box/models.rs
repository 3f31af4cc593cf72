//! Model-written replies end to end over signed Twilio inbound, against a local server that speaks
//! Anthropic's Messages API and OpenAI's Chat Completions: the request's headers, model, instructions and
//! tools schema; scripted tool rounds (a booking that emits `appointment.booked`, a deal, a task); bad tool
//! calls answered as tool errors; a model that loops on tools, one that fails (retried, honouring
//! `retry-after`, then a handoff with `model_unavailable`) and one that hangs without delaying other
//! conversations; the account's own key (`/v1/model-provider`) and its free pro replies.

use std::time::{Duration, Instant};

use frontdesk_tests::{
    Db, Server,
    mcp_server::McpServer,
    model_server::{FakeModel, Protocol, Recorded, Reply},
    on_both_databases,
    platform::{Platform, assert_invalid, assert_not_found},
    server::sample,
    sms::{self, Desk},
    tls,
    twilio::{FakeTwilio, new_message_sid},
    webhook_receiver::Receiver,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const HANDOFF: &str = "Thanks for your message. A member of our team will get back to you shortly.";

async fn start(db: &Db, twilio: &FakeTwilio, model: &FakeModel, provider: &str, extra: &[(&str, &str)]) -> Server {
    let openai = model.openai_base_url();
    let mut env = vec![
        ("FRONTDESK_REPLY_DEBOUNCE_MS", "0"),
        ("FRONTDESK_MODEL_PROVIDER", provider),
        ("ANTHROPIC_BASE_URL", model.base_url.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-server-key"),
        ("OPENAI_BASE_URL", openai.as_str()),
        ("OPENAI_API_KEY", "sk-openai-server-key"),
        ("FRONTDESK_OPENAI_MODEL", "gpt-test"),
    ];
    env.extend_from_slice(extra);
    sms::start(db, twilio, &env).await
}

/// An sms channel whose default agent knows its opening hours; `agent` is merged into the agent's fields.
async fn desk<'a>(server: &'a Server, twilio: &FakeTwilio, agent: Value) -> Desk<'a> {
    let mut body = json!({"name": "Ava", "instructions": "Sell the spa day.", "rules": ["Never promise discounts."]});
    body.as_object_mut().unwrap().extend(agent.as_object().unwrap().clone());
    let faq = ("What are your opening hours?", "Nine to five, Monday to Friday.");
    Desk::open(server, twilio, body, faq).await
}

/// Whether the request carries tool results already (the model's second round).
fn answered_tools(request: &Recorded) -> bool {
    !request.tool_results().is_empty()
}

on_both_databases!(anthropic_answers_with_the_agents_context, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let model = FakeModel::start().await;
    model.script(|_| (Reply::text("We open at nine, see you soon!"), Duration::ZERO));
    let models = [("FRONTDESK_MODELS_PRO", "claude-sonnet-4-5,claude-test-1")];
    let server = start(&db, &twilio, &model, "anthropic", &models).await;
    let desk = desk(&server, &twilio, json!({"anthropic_model": "claude-test-1"})).await;
    let before = desk.platform.balance().await;

    desk.channel
        .inbound(&new_message_sid(), "+15557000001", "When do you open?")
        .await;
    let reply = twilio.wait_for_sent("+15557000001", 1).await;
    assert_eq!(reply[0].body(), "We open at nine, see you soon!");

    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.protocol, Protocol::Anthropic);
    assert_eq!(request.headers["x-api-key"], "sk-ant-server-key");
    assert_eq!(request.headers["anthropic-version"], "2023-06-01");
    assert_eq!(request.body["model"], "claude-test-1", "the agent's model");
    assert!(request.body["max_tokens"].as_u64().unwrap() > 0);
    let system = request.system();
    for part in [
        "Sell the spa day.",
        "- Never promise discounts.",
        "Nine to five, Monday to Friday.",
    ] {
        assert!(system.contains(part), "{part} in {system}");
    }
    assert_eq!(request.last_user_text(), "When do you open?");
    assert_eq!(
        request.tool_names(),
        ["handoff_to_human", "create_deal", "create_task"],
        "no booking tool while booking is off"
    );
    let schema = &request.body["tools"][0]["input_schema"];
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["required"], json!(["reason"]));

    let thread = desk.platform.conversation_with("+15557000001").await;
    assert_eq!(thread["messages"][1]["author"], "agent");
    let after = desk.platform.ok("GET", "/v1/credits", None).await;
    assert!(
        (before - after["credits"]["balance"].as_f64().unwrap() - 1.0).abs() < 1e-9,
        "pro costs 1"
    );
    assert_eq!(after["credits"]["entries"][0]["reason"], "ai_reply: model");
});

on_both_databases!(openai_tool_rounds_book_an_appointment, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let model = FakeModel::start().await;
    let start_time = (chrono::Utc::now() + chrono::Duration::days(3))
        .format("%Y-%m-%dT10:00:00Z")
        .to_string();
    let at = start_time.clone();
    model.script(move |request| {
        let reply = if answered_tools(request) {
            Reply::text("You're booked. See you then!")
        } else {
            Reply::call(
                "call_1",
                "book_appointment",
                json!({"start_time": at, "name": "Maya", "notes": "first visit"}),
            )
        };
        (reply, Duration::ZERO)
    });
    let server = start(&db, &twilio, &model, "openai", &[]).await;
    let booking =
        json!({"booking": {"enabled": true, "link": "https://cal.example/ava", "instructions": "30 minutes"}});
    let desk = desk(&server, &twilio, booking).await;
    let receiver = Receiver::start().await;
    desk.platform.subscribe(&receiver.url, &["appointment.booked"]).await;

    desk.channel
        .inbound(&new_message_sid(), "+15557000002", "Can I come in on Thursday at 10?")
        .await;
    let reply = twilio.wait_for_sent("+15557000002", 1).await;
    assert_eq!(reply[0].body(), "You're booked. See you then!");

    let requests = model.requests();
    assert_eq!(requests.len(), 2, "one tool round");
    assert_eq!(requests[0].protocol, Protocol::OpenAi);
    assert_eq!(requests[0].headers["authorization"], "Bearer sk-openai-server-key");
    assert_eq!(requests[0].body["model"], "gpt-test");
    assert_eq!(requests[0].body["messages"][0]["role"], "system");
    assert_eq!(requests[0].tool_names()[0], "book_appointment");
    assert_eq!(requests[0].body["tools"][0]["type"], "function");
    let results = requests[1].tool_results();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].0, "call_1");
    assert!(results[0].1.starts_with("booked: appointment apt_"), "{results:?}");

    let delivered = receiver.wait_for(1, WAIT).await;
    let event = &delivered[0].json;
    assert_eq!(event["type"], "appointment.booked");
    let thread = desk.platform.conversation_with("+15557000002").await;
    let appointment = &event["data"]["appointment"];
    assert_eq!(appointment["conversation_id"], thread["conversation"]["id"]);
    assert_eq!(appointment["contact_id"], thread["conversation"]["contact_id"]);
    assert_eq!(appointment["agent_id"], desk.agent.as_str());
    assert_eq!(appointment["start_time"], start_time.as_str());
    assert_eq!(appointment["name"], "Maya");
});

on_both_databases!(a_deal_and_a_task_are_created_by_the_model, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let model = FakeModel::start().await;
    model.script(|request| {
        let reply = if answered_tools(request) {
            Reply::text("Noted, our team will call you.")
        } else {
            Reply::Calls(vec![
                (
                    "toolu_1".into(),
                    "create_deal".into(),
                    json!({"title": "Spa day for 12", "value": 1200}).to_string(),
                ),
                (
                    "toolu_2".into(),
                    "create_task".into(),
                    json!({"title": "Call Maya back"}).to_string(),
                ),
            ])
        };
        (reply, Duration::ZERO)
    });
    let server = start(&db, &twilio, &model, "anthropic", &[]).await;
    let desk = desk(&server, &twilio, json!({})).await;

    desk.channel
        .inbound(&new_message_sid(), "+15557000003", "We'd like a spa day for 12 people")
        .await;
    twilio.wait_for_sent("+15557000003", 1).await;
    let results = model.requests()[1].tool_results();
    assert!(results.iter().all(|(_, _, error)| !error), "{results:?}");
    let deals = desk.platform.ok("GET", "/v1/deals?source=ai_agent", None).await;
    let deal = &deals["deals"][0];
    assert_eq!(deal["title"], "Spa day for 12");
    assert_eq!(deal["value"], 1200.0);
    let thread = desk.platform.conversation_with("+15557000003").await;
    assert_eq!(deal["contact_id"], thread["conversation"]["contact_id"]);
    assert!(results[1].1.starts_with("created: task task_"), "{results:?}");
});

on_both_databases!(
    bad_tool_calls_go_back_to_the_model_and_loops_are_bounded,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let model = FakeModel::start().await;
        model.script(|request| {
            let reply = match (request.last_user_text().as_str(), request.tool_results().len()) {
                ("loop forever", _) => Reply::call("toolu_x", "create_task", json!({})),
                (_, 0) => Reply::Calls(vec![
                    ("toolu_a".into(), "launch_rocket".into(), "{}".into()),
                    ("toolu_b".into(), "create_task".into(), "{not json".into()),
                    (
                        "toolu_c".into(),
                        "book_appointment".into(),
                        json!({"start_time": "soon"}).to_string(),
                    ),
                ]),
                _ => Reply::text("Sorry, let me try that differently."),
            };
            (reply, Duration::ZERO)
        });
        let server = start(&db, &twilio, &model, "openai", &[]).await;
        let desk = desk(&server, &twilio, json!({})).await;

        desk.channel
            .inbound(&new_message_sid(), "+15557000004", "Do something odd")
            .await;
        let reply = twilio.wait_for_sent("+15557000004", 1).await;
        assert_eq!(reply[0].body(), "Sorry, let me try that differently.");
        let results = model.requests()[1].tool_results();
        assert_eq!(results.len(), 3);
        assert!(results.iter().all(|(_, _, error)| *error), "{results:?}");
        assert!(results[0].1.contains("there is no tool `launch_rocket`"), "{results:?}");
        assert!(results[1].1.contains("not valid JSON"), "{results:?}");
        assert!(
            results[2].1.contains("no tool `book_appointment`"),
            "booking is off: {results:?}"
        );

        desk.channel
            .inbound(&new_message_sid(), "+15557000005", "loop forever")
            .await;
        let reply = twilio.wait_for_sent("+15557000005", 1).await;
        assert_eq!(reply[0].body(), HANDOFF);
        let thread = desk.platform.conversation_with("+15557000005").await;
        assert_eq!(thread["conversation"]["handoff_reason"], "tool_rounds");
        let asked = model
            .requests()
            .iter()
            .filter(|r| r.last_user_text() == "loop forever")
            .count();
        assert_eq!(asked, 6, "five tool rounds and the answer that still called tools");
    }
);

on_both_databases!(a_failing_provider_is_retried_then_hands_off, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let model = FakeModel::start().await;
    let first = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    model.script(move |request| {
        let reply = match request.last_user_text().as_str() {
            "busy?" if first.swap(false, std::sync::atomic::Ordering::SeqCst) => Reply::Status(429, Some(2)),
            "busy?" => Reply::text("Not any more."),
            "refused" => Reply::Status(401, None),
            _ => Reply::Status(503, None),
        };
        (reply, Duration::ZERO)
    });
    let server = start(&db, &twilio, &model, "anthropic", &[]).await;
    let desk = desk(&server, &twilio, json!({})).await;

    let asked = Instant::now();
    desk.channel.inbound(&new_message_sid(), "+15557000006", "busy?").await;
    let reply = twilio.wait_for_sent("+15557000006", 1).await;
    assert_eq!(reply[0].body(), "Not any more.");
    // The first wait is 1 s +-20%; a `Retry-After` lengthens it up to twice that.
    assert!(
        asked.elapsed() >= Duration::from_secs(2),
        "retry-after honoured (the backoff alone is ~1 s)"
    );

    desk.channel
        .inbound(&new_message_sid(), "+15557000007", "refused")
        .await;
    assert_eq!(twilio.wait_for_sent("+15557000007", 1).await[0].body(), HANDOFF);
    let thread = desk.platform.conversation_with("+15557000007").await;
    assert_eq!(thread["conversation"]["handoff_reason"], "model_unavailable");
    let count = |text: &str| model.requests().iter().filter(|r| r.last_user_text() == text).count();
    assert_eq!(count("refused"), 1, "a refused key is not tried again");

    desk.channel.inbound(&new_message_sid(), "+15557000008", "down").await;
    assert_eq!(twilio.wait_for_sent("+15557000008", 1).await[0].body(), HANDOFF);
    assert_eq!(count("down"), 4, "four tries");
    let logs = server.logs();
    assert!(
        logs.contains("the model gave no answer") && logs.contains("401: scripted"),
        "the failure is logged"
    );
    assert!(!logs.contains("sk-ant-server-key"), "never the key");
});

on_both_databases!(
    a_hanging_provider_does_not_delay_other_conversations,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let model = FakeModel::start().await;
        model.script(|request| {
            let text = request.last_user_text();
            // Every other answer waits a little, in no fixed order, so the two conversations' calls interleave.
            let jitter = Duration::from_millis(rand::random::<u64>() % 150);
            let reply = if text.contains("hang") {
                Reply::Hang
            } else {
                Reply::text(&format!("re: {text}"))
            };
            (reply, jitter)
        });
        let extra = [("FRONTDESK_MODEL_TIMEOUT", "5s"), ("FRONTDESK_REPLY_TIME_LIMIT", "10s")];
        let server = start(&db, &twilio, &model, "openai", &extra).await;
        let desk = desk(&server, &twilio, json!({})).await;

        desk.channel
            .inbound(&new_message_sid(), "+15557000009", "please hang")
            .await;
        // Wait until the hanging call is in the air.
        let started = Instant::now();
        while model.requests().is_empty() {
            assert!(started.elapsed() < WAIT);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let asked = Instant::now();
        for i in 0..5 {
            let phone = format!("+1555700002{i}");
            desk.channel
                .inbound(&new_message_sid(), &phone, &format!("question {i}"))
                .await;
        }
        for i in 0..5 {
            let phone = format!("+1555700002{i}");
            assert_eq!(
                twilio.wait_for_sent(&phone, 1).await[0].body(),
                format!("re: question {i}")
            );
        }
        assert!(
            twilio.sent_to("+15557000009").is_empty(),
            "the others were answered while the first call still hung ({:?} after they were asked)",
            asked.elapsed()
        );
        assert_eq!(twilio.wait_for_sent("+15557000009", 1).await[0].body(), HANDOFF);
        let thread = desk.platform.conversation_with("+15557000009").await;
        assert_eq!(thread["conversation"]["handoff_reason"], "model_unavailable");
    }
);

on_both_databases!(
    an_accounts_own_key_answers_and_pro_replies_are_free,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let model = FakeModel::start().await;
        model.script(|_| (Reply::text("From your own Claude."), Duration::ZERO));
        // The server's provider is the local one; the account brings its own.
        let server = start(&db, &twilio, &model, "local", &[]).await;
        let desk = desk(&server, &twilio, json!({})).await;
        let platform = &desk.platform;

        assert_not_found(
            &platform.send("GET", "/v1/model-provider", None).await,
            "nothing connected",
        );
        let bad = platform
            .send(
                "PUT",
                "/v1/model-provider",
                Some(json!({"provider": "gemini", "api_key": "k"})),
            )
            .await;
        assert_invalid(&bad, "provider", "an unknown provider");
        let keyless = platform
            .send("PUT", "/v1/model-provider", Some(json!({"provider": "anthropic"})))
            .await;
        assert_invalid(&keyless, "api_key", "anthropic without a key");
        let ftp = json!({"provider": "openai", "api_key": "k", "base_url": "ftp://llm.example"});
        assert_invalid(
            &platform.send("PUT", "/v1/model-provider", Some(ftp)).await,
            "base_url",
            "not http(s)",
        );

        let own = json!({"provider": "anthropic", "api_key": "sk-ant-own-key-0042", "base_url": model.base_url, "model": "claude-own"});
        let connected = platform.ok("PUT", "/v1/model-provider", Some(own)).await;
        assert_eq!(connected["model_provider"]["api_key"], "****0042");
        let read = platform.ok("GET", "/v1/model-provider", None).await;
        assert_eq!(read["model_provider"]["provider"], "anthropic");
        assert_eq!(read["model_provider"]["api_key"], "****0042", "masked on read");
        assert!(!read.to_string().contains("sk-ant-own"), "{read}");

        let before = platform.balance().await;
        desk.channel.inbound(&new_message_sid(), "+15557000030", "Hello?").await;
        assert_eq!(
            twilio.wait_for_sent("+15557000030", 1).await[0].body(),
            "From your own Claude."
        );
        let request = &model.requests()[0];
        assert_eq!(request.headers["x-api-key"], "sk-ant-own-key-0042");
        assert_eq!(request.body["model"], "claude-own");
        assert_eq!(
            platform.balance().await,
            before,
            "pro replies are free with the account's own key"
        );

        // A max-tier agent still pays its tier.
        platform
            .ok(
                "PUT",
                &format!("/v1/agents/{}", desk.agent),
                Some(json!({"ai_tier": "max"})),
            )
            .await;
        desk.channel
            .inbound(&new_message_sid(), "+15557000031", "Hello again")
            .await;
        twilio.wait_for_sent("+15557000031", 1).await;
        assert!((before - platform.balance().await - 0.25).abs() < 1e-9);

        platform.ok("DELETE", "/v1/model-provider", None).await;
        assert_not_found(
            &platform.send("DELETE", "/v1/model-provider", None).await,
            "deleted twice",
        );
        // The local provider answers again, from the FAQ.
        desk.channel
            .inbound(&new_message_sid(), "+15557000032", "What are your opening hours?")
            .await;
        assert_eq!(
            twilio.wait_for_sent("+15557000032", 1).await[0].body(),
            "Nine to five, Monday to Friday."
        );
        assert_eq!(model.requests().len(), 2);
    }
);

/// An HTTPS custom-function receiver: it records each request's headers and JSON body and answers free slots.
async fn slots_function() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(axum::http::HeaderMap, Value)>>>,
) {
    use axum::{Json, Router, extract::State, http::HeaderMap, routing::post};
    type Seen = std::sync::Arc<std::sync::Mutex<Vec<(HeaderMap, Value)>>>;
    let seen: Seen = Default::default();
    let app = Router::new()
        .route(
            "/slots",
            post(
                |State(seen): State<Seen>, headers: HeaderMap, Json(body): Json<Value>| async move {
                    seen.lock().unwrap().push((headers, body));
                    Json(json!({"slots": ["10:00", "11:30"]}))
                },
            ),
        )
        .with_state(seen.clone());
    (format!("{}/slots", tls::serve(app).await), seen)
}

on_both_databases!(custom_functions_and_mcp_tools_are_called, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let model = FakeModel::start().await;
    let mcp = McpServer::start().await;
    let (function_url, function_seen) = slots_function().await;
    model.script(|request| {
        let reply = match request.tool_results().as_slice() {
            [] => Reply::Calls(vec![
                (
                    "call_f".into(),
                    "free_slots".into(),
                    json!({"day": "friday"}).to_string(),
                ),
                (
                    "call_m".into(),
                    "order_status".into(),
                    json!({"order_id": "A-1001"}).to_string(),
                ),
            ]),
            results => Reply::Text(
                results
                    .iter()
                    .map(|(_, content, _)| content.as_str())
                    .collect::<Vec<_>>()
                    .join(" | "),
            ),
        };
        (reply, Duration::ZERO)
    });
    let trust = tls::trust_env();
    let server = start(&db, &twilio, &model, "openai", &[(trust.0, trust.1.as_str())]).await;
    let desk = desk(&server, &twilio, json!({})).await;
    let function = json!({
        "name": "free_slots", "description": "Free appointment slots on a day", "url": function_url,
        "headers": {"X-Api-Token": "tok-123"},
        "parameters": {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]}
    });
    desk.platform
        .ok(
            "POST",
            &format!("/v1/agents/{}/custom-functions", desk.agent),
            Some(function),
        )
        .await;
    let server_body = json!({"name": "orders", "url": mcp.url, "headers": {"Authorization": "Bearer mcp-secret"}});
    desk.platform
        .ok(
            "POST",
            &format!("/v1/agents/{}/mcp-servers", desk.agent),
            Some(server_body),
        )
        .await;

    desk.channel
        .inbound(
            &new_message_sid(),
            "+15557000040",
            "Any slots on Friday? And where is my order A-1001?",
        )
        .await;
    let reply = twilio.wait_for_sent("+15557000040", 1).await;
    assert_eq!(
        reply[0].body(),
        "{\"slots\":[\"10:00\",\"11:30\"]} | order A-1001: shipped on Monday, arriving Thursday"
    );
    let first = &model.requests()[0];
    let names = first.tool_names();
    assert!(
        names.contains(&"free_slots".to_owned()) && names.contains(&"order_status".to_owned()),
        "{names:?}"
    );
    let mcp_tool = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "order_status")
        .unwrap()
        .clone();
    assert_eq!(
        mcp_tool["function"]["parameters"]["required"],
        json!(["order_id"]),
        "the server's schema"
    );
    let seen = function_seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].1, json!({"day": "friday"}));
    assert_eq!(seen[0].0["x-api-token"], "tok-123", "the declared header, opened");
    assert!(mcp.authorizations().iter().all(|a| a == "Bearer mcp-secret") && !mcp.authorizations().is_empty());

    // A server that answers garbage drops its tools from the reply, and nothing else. (Connected again under a
    // new id, so no list of it is kept from before.)
    mcp.answer_garbage();
    let servers = desk
        .platform
        .ok("GET", &format!("/v1/agents/{}/mcp-servers", desk.agent), None)
        .await;
    let old = servers["mcp_servers"][0]["id"].as_str().unwrap().to_owned();
    desk.platform
        .ok("DELETE", &format!("/v1/agents/{}/mcp-servers/{old}", desk.agent), None)
        .await;
    let again = json!({"name": "orders", "url": mcp.url, "headers": {"Authorization": "Bearer mcp-secret"}});
    desk.platform
        .ok("POST", &format!("/v1/agents/{}/mcp-servers", desk.agent), Some(again))
        .await;
    let asked_before = model.requests().len();
    desk.channel
        .inbound(&new_message_sid(), "+15557000041", "Slots on Friday?")
        .await;
    let reply = twilio.wait_for_sent("+15557000041", 1).await;
    let requests = model.requests();
    assert!(!requests[asked_before].tool_names().contains(&"order_status".to_owned()));
    assert!(requests[asked_before].tool_names().contains(&"free_slots".to_owned()));
    let results = requests.last().unwrap().tool_results();
    assert!(!results[0].2 && results[0].1.contains("10:00"), "{results:?}");
    assert!(
        results[1].2 && results[1].1.contains("there is no tool `order_status`"),
        "{results:?}"
    );
    assert!(reply[0].body().contains("10:00"), "{}", reply[0].body());
    let logs = server.logs();
    assert!(
        logs.contains("an MCP server's tools are left out of this reply"),
        "the garbage is logged"
    );
    assert!(
        !logs.contains("tok-123") && !logs.contains("mcp-secret"),
        "never a header's value"
    );
});

/// Moves the service's clock to `minutes` after `start`.
async fn at_minute(server: &Server, start: chrono::DateTime<chrono::Utc>, minutes: i64) {
    frontdesk_tests::admin::clock_at(server, start + chrono::Duration::minutes(minutes)).await;
}

on_both_databases!(follow_ups_go_out_on_time_up_to_their_count, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let model = FakeModel::start().await;
    let server = start(&db, &twilio, &model, "local", &[("FRONTDESK_TEST_CLOCK", "true")]).await;
    let follow_ups = json!({"follow_ups": {"enabled": true, "delay_minutes": 30, "max_count": 2, "message": "Still there? Reply any time."}});
    let desk = desk(&server, &twilio, follow_ups).await;
    let start = chrono::Utc::now();
    at_minute(&server, start, 0).await;

    desk.channel
        .inbound(&new_message_sid(), "+15557000050", "What are your opening hours?")
        .await;
    twilio.wait_for_sent("+15557000050", 1).await;
    // The other contact writes again after the answer (asking for a person): its follow-ups end.
    desk.channel
        .inbound(&new_message_sid(), "+15557000051", "What are your opening hours?")
        .await;
    twilio.wait_for_sent("+15557000051", 1).await;
    desk.channel
        .inbound(&new_message_sid(), "+15557000051", "I want to talk to a person")
        .await;
    assert_eq!(twilio.wait_for_sent("+15557000051", 2).await[1].body(), HANDOFF);

    // A third: a person of the team writes after the agent's answer, and follows up themselves.
    desk.channel
        .inbound(&new_message_sid(), "+15557000052", "What are your opening hours?")
        .await;
    twilio.wait_for_sent("+15557000052", 1).await;
    let thread = desk.platform.conversation_with("+15557000052").await;
    let contact = thread["conversation"]["contact_id"].as_str().unwrap();
    let person = json!({"text": "Hi, Sam from the team here."});
    let sent = desk
        .platform
        .send("POST", &format!("/v1/contacts/{contact}/send-message"), Some(person))
        .await;
    assert_eq!(sent.status, 202, "{}", sent.body);
    twilio.wait_for_sent("+15557000052", 2).await;

    at_minute(&server, start, 29).await;
    frontdesk_tests::admin::quiesce(&server).await;
    assert_eq!(twilio.sent_to("+15557000050").len(), 1, "not before the delay");

    at_minute(&server, start, 31).await;
    let sent = twilio.wait_for_sent("+15557000050", 2).await;
    assert_eq!(sent[1].body(), "Still there? Reply any time.");
    at_minute(&server, start, 62).await;
    assert_eq!(
        twilio.wait_for_sent("+15557000050", 3).await[2].body(),
        "Still there? Reply any time."
    );
    at_minute(&server, start, 200).await;
    frontdesk_tests::admin::quiesce(&server).await;
    assert_eq!(twilio.sent_to("+15557000050").len(), 3, "at most max_count");
    assert_eq!(
        twilio.sent_to("+15557000051").len(),
        2,
        "the other's message and handoff ended its follow-ups"
    );
    assert_eq!(
        twilio.sent_to("+15557000052").len(),
        2,
        "a person's message ends the agent's follow-ups"
    );
    let thread = desk.platform.conversation_with("+15557000050").await;
    assert_eq!(thread["messages"][2]["author"], "agent");
    assert!(model.requests().is_empty(), "the local provider wrote everything");
});

on_both_databases!(
    an_import_with_a_model_writes_question_answer_pairs,
    |db: Db| async move {
        use frontdesk_tests::knowledge::{Part, finished, upload};
        let twilio = FakeTwilio::start().await;
        let model = FakeModel::start().await;
        model.script(|request| {
        let reply = if request.system().contains("questions its customers would ask") {
            let text = request.last_user_text();
            if text.contains("Opening hours") {
                Reply::text(
                    "```json\n{\"pairs\": [{\"question\": \"When do you open?\", \"answer\": \"At nine, Monday to Friday.\"}, \
                     {\"question\": \"Are you open on Sundays?\", \"answer\": \"No, we close on weekends.\"}]}\n```",
                )
            } else {
                Reply::text("I cannot help with that.")
            }
        } else {
            Reply::text("unused")
        };
        (reply, Duration::ZERO)
    });
        let server = start(&db, &twilio, &model, "anthropic", &[]).await;
        let platform = Platform::new(&server).await;
        let document = "# Opening hours\n\nWe open at nine, Monday to Friday, and close on weekends.\n\n\
                    # Parking\n\nParking behind the shop is free for customers.\n";
        let before = platform.balance().await;
        let answer = upload(
            &server,
            &platform.key,
            &[Part::file(
                "file",
                "desk.md",
                "text/markdown",
                document.as_bytes().to_vec(),
            )],
        )
        .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let source = answer.body["source_id"].as_str().unwrap().to_owned();
        let done = finished(&platform, &source).await;
        assert_eq!(done["status"], "ready", "{done}");
        let faqs = platform.ok("GET", &format!("/v1/kb-sources/{source}/faqs"), None).await;
        let pairs: Vec<(String, String)> = faqs["faqs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["question"].as_str().unwrap().to_owned(),
                    f["answer"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            pairs,
            [
                ("When do you open?".to_owned(), "At nine, Monday to Friday.".to_owned()),
                (
                    "Are you open on Sundays?".to_owned(),
                    "No, we close on weekends.".to_owned()
                ),
                (
                    "Parking".to_owned(),
                    "Parking behind the shop is free for customers.".to_owned()
                ),
            ],
            "the model's pairs, and the section it gave none for as it is"
        );
        assert_eq!(model.requests().len(), 2, "one request per section");
        assert!(
            (before - platform.balance().await - 0.05).abs() < 1e-9,
            "the import's own price"
        );
    }
);

// The process dies (SIGKILL) after the model's tool call wrote its deal and before the reply was stored, between
// the reply's credit hold and its settle: the reply runs again after the restart, the model calls the same tool
// with the same arguments, the deal is not made twice, and the reply is charged once with its hold settled.
on_both_databases!(
    a_reply_run_again_does_not_repeat_its_tools_writes,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let model = FakeModel::start().await;
        // The second round of the first run hangs (the process is killed meanwhile); every later one answers.
        let hang_once = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        model.script(move |request| {
            let reply = if request.tool_results().is_empty() {
                Reply::call(
                    "toolu_d",
                    "create_deal",
                    // Worded differently each run, as a real model would.
                    json!({"title": format!("Wedding party ({} guests)", 40 + rand::random::<u8>() % 10), "value": 900}),
                )
            } else if hang_once.swap(false, std::sync::atomic::Ordering::SeqCst) {
                Reply::Hang
            } else {
                Reply::text("Noted, our team will call you.")
            };
            (reply, Duration::ZERO)
        });
        let mut server = start(&db, &twilio, &model, "anthropic", &[]).await;
        let (account_id, key, channel, before) = {
            let desk = desk(&server, &twilio, json!({})).await;
            (
                desk.platform.account_id.clone(),
                desk.platform.key.clone(),
                desk.channel.clone(),
                desk.platform.balance().await,
            )
        };
        channel
            .inbound(
                &new_message_sid(),
                "+15557000060",
                "A wedding party for 40, can you help?",
            )
            .await;
        let asked = Instant::now();
        while model.requests().len() < 2 {
            assert!(asked.elapsed() < WAIT, "the model's second round");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        server = server.restart().await;
        let platform = Platform::of(&server, &account_id, &key);
        let reply = twilio.wait_for_sent("+15557000060", 1).await;
        assert_eq!(reply[0].body(), "Noted, our team will call you.");
        let deals = platform.ok("GET", "/v1/deals?source=ai_agent", None).await;
        assert_eq!(deals["deals"].as_array().unwrap().len(), 1, "one deal: {deals}");
        let deal = deals["deals"][0]["id"].as_str().unwrap();
        let results = model.requests().last().unwrap().tool_results();
        assert!(
            results[0].1.contains(deal),
            "the first run's deal, answered again: {results:?}"
        );
        frontdesk_tests::admin::quiesce(&server).await;
        assert_eq!(twilio.sent_to("+15557000060").len(), 1, "one reply");
        // The first run's hold was taken again by the second, which settled it: one charge, no hold left.
        assert!(
            (before - platform.balance().await - 1.0).abs() < 1e-9,
            "charged once for the reply run twice"
        );
        let charges = platform.ok("GET", "/v1/credits", None).await["credits"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["reason"] == "ai_reply: model")
            .count();
        assert_eq!(charges, 1);
        let holds = db
            .scalar("SELECT COUNT(*) FROM credit_holds WHERE account_id = $1", &account_id)
            .await;
        assert_eq!(holds.as_deref(), Some("0"), "the hold is settled");
    }
);

on_both_databases!(a_model_writes_the_follow_up_and_charges_it, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let model = FakeModel::start().await;
    model.script(|request| {
        let reply = if request.system().contains("has not answered your last message") {
            Reply::text("Still thinking about that spa day? I can hold a slot for you.")
        } else {
            Reply::text("We have spa days every weekday.")
        };
        (reply, Duration::ZERO)
    });
    let server = start(&db, &twilio, &model, "anthropic", &[("FRONTDESK_TEST_CLOCK", "true")]).await;
    let follow_ups = json!({"ai_tier": "max", "follow_ups": {"enabled": true, "delay_minutes": 10, "max_count": 1}});
    let desk = desk(&server, &twilio, follow_ups).await;
    let start = chrono::Utc::now();
    at_minute(&server, start, 0).await;

    desk.channel
        .inbound(&new_message_sid(), "+15557000070", "Spa days?")
        .await;
    twilio.wait_for_sent("+15557000070", 1).await;
    let before = desk.platform.balance().await;
    at_minute(&server, start, 11).await;
    let sent = twilio.wait_for_sent("+15557000070", 2).await;
    assert_eq!(
        sent[1].body(),
        "Still thinking about that spa day? I can hold a slot for you."
    );
    let nudge = model.requests().last().unwrap().clone();
    assert_eq!(nudge.last_user_text(), "(no answer from the customer)");
    assert!(nudge.tool_names().is_empty(), "a nudge calls no tools");
    let credits = desk.platform.ok("GET", "/v1/credits", None).await;
    assert!(
        (before - desk.platform.balance().await - 0.25).abs() < 1e-9,
        "a written follow-up costs the tier"
    );
    assert_eq!(credits["credits"]["entries"][0]["reason"], "ai_reply: follow-up");
    at_minute(&server, start, 30).await;
    frontdesk_tests::admin::quiesce(&server).await;
    assert_eq!(twilio.sent_to("+15557000070").len(), 2, "max_count 1");
});

// The contact writes while the model is still writing the follow-up: the nudge, late, is not sent (the new
// message and its reply commit first, whatever the timing, because the nudge waits 4 s at the model).
on_both_databases!(
    a_nudge_written_while_the_contact_wrote_is_not_sent,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let model = FakeModel::start().await;
        model.script(|request| {
            if request.system().contains("has not answered your last message") {
                (Reply::text("Still there?"), Duration::from_secs(4))
            } else {
                (
                    Reply::text(&format!("re: {}", request.last_user_text())),
                    Duration::ZERO,
                )
            }
        });
        let server = start(&db, &twilio, &model, "anthropic", &[("FRONTDESK_TEST_CLOCK", "true")]).await;
        let follow_ups = json!({"follow_ups": {"enabled": true, "delay_minutes": 10, "max_count": 3}});
        let desk = desk(&server, &twilio, follow_ups).await;
        let start = chrono::Utc::now();
        at_minute(&server, start, 0).await;

        desk.channel
            .inbound(&new_message_sid(), "+15557000080", "Spa days?")
            .await;
        twilio.wait_for_sent("+15557000080", 1).await;
        at_minute(&server, start, 11).await;
        let asked = Instant::now();
        while !model.requests().iter().any(|r| r.system().contains("has not answered")) {
            assert!(asked.elapsed() < WAIT, "the nudge is asked for");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        desk.channel
            .inbound(&new_message_sid(), "+15557000080", "Saturday?")
            .await;
        let sent = twilio.wait_for_sent("+15557000080", 2).await;
        assert_eq!(sent[1].body(), "re: Saturday?");
        // The nudge's job is still running (its model answers after 4 s): quiet means it ended.
        frontdesk_tests::admin::quiesce(&server).await;
        let bodies: Vec<String> = twilio
            .sent_to("+15557000080")
            .iter()
            .map(|m| m.body().to_owned())
            .collect();
        assert_eq!(bodies, ["re: Spa days?", "re: Saturday?"], "no late nudge");
    }
);

// A worker is paused (SIGSTOP) while the model it asked takes three seconds to answer; past its one-second
// lease another worker takes the reply over, asks the model, runs the tool it asks for and replies. When
// the paused worker resumes, the answer to its own question asks for the same tool: the claim guard stops
// its run there, so no second task is written and the model is not asked again.
on_both_databases!(
    a_worker_paused_during_a_model_call_makes_no_call_after_it_resumes,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let model = FakeModel::start().await;
        let first = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        model.script(move |request| {
            let reply = if answered_tools(request) {
                Reply::text("Noted, we will call you back.")
            } else {
                Reply::call("toolu_1", "create_task", json!({"title": "Call back"}))
            };
            let slow = first.swap(false, std::sync::atomic::Ordering::SeqCst);
            (reply, if slow { Duration::from_secs(3) } else { Duration::ZERO })
        });
        // Long polls: a paused process on SQLite must not be caught holding the file's write lock.
        let env = [
            ("FRONTDESK_JOB_LEASE", "1s"),
            ("FRONTDESK_JOB_POLL_INTERVAL", "1s"),
            ("FRONTDESK_WEBHOOK_POLL_INTERVAL", "1s"),
        ];
        let paused = start(&db, &twilio, &model, "anthropic", &env).await;
        let desk = desk(&paused, &twilio, json!({})).await;
        desk.channel
            .inbound(&new_message_sid(), "+15557000009", "Please call me back")
            .await;
        let started = Instant::now();
        while model.requests().is_empty() {
            assert!(started.elapsed() < WAIT, "the model was never asked");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        paused.signal("STOP");

        let other = start(&db, &twilio, &model, "anthropic", &env).await;
        twilio.wait_for_sent("+15557000009", 1).await;
        assert_eq!(
            model.requests().len(),
            3,
            "the paused question and the other worker's two"
        );
        paused.signal("CONT");
        // The resumed worker's run ends stopped: by its lost lease, or by the claim guard at the tool call.
        paused
            .metrics_when(|m| sample(m, "frontdesk_job_runs_stopped_total", &[]).is_some())
            .await;
        assert_eq!(model.requests().len(), 3, "no model call after the resume");
        let tasks = desk.platform.get("/v1/tasks").await["tasks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(tasks.len(), 1, "one task: {tasks:?}");
        assert_eq!(twilio.sent_to("+15557000009").len(), 1, "one reply");
        drop(other);
    }
);
