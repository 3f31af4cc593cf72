//! Agents over REST and gRPC against the real binary, on SQLite and PostgreSQL: the agent itself (defaults,
//! partial updates, bot configuration, paging, validation) and tenant isolation with agencies acting on their
//! sub-accounts. An agent's knowledge, its tools and knowledge groups have files of their own.

use std::collections::HashMap;

use frontdesk_api::v1::{
    ApplyKbGroupRequest, CreateAgentRequest, CreateCustomFunctionRequest, CreateFaqRequest, CreateKbGroupRequest,
    GetAgentRequest, GroupFaq, ListAgentsRequest, ListFaqsRequest, agents_client::AgentsClient,
    kb_groups_client::KbGroupsClient,
};
use frontdesk_tests::{
    Db, Server, admin, call_with, on_both_databases,
    platform::{
        Platform, agency_and_child, assert_id, assert_insufficient_scope, assert_invalid, assert_invalid_under,
        assert_not_found, assert_timestamp, authed, to_struct,
    },
};
use serde_json::{Value, json};
use tonic::Code;

on_both_databases!(agents_are_created_read_updated_and_deleted, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;

    // Only the name is required; every field comes back, defaults included.
    let created = api.ok("POST", "/v1/agents", Some(json!({"name": "Front desk"}))).await;
    let agent = &created["agent"];
    assert_id(&agent["id"], "agt_");
    assert_eq!(agent["name"], "Front desk");
    assert_eq!(
        (
            agent["instructions"].clone(),
            agent["rules"].clone(),
            agent["goal"].clone(),
            agent["personality"].clone()
        ),
        (json!(""), json!([]), json!(""), json!(""))
    );
    assert_eq!(
        (
            agent["language"].clone(),
            agent["ai_tier"].clone(),
            agent["anthropic_model"].clone(),
            agent["status"].clone()
        ),
        (json!("en"), json!("pro"), json!(""), json!("active"))
    );
    assert_eq!(
        agent["booking"],
        json!({"enabled": false, "link": "", "instructions": "", "max_days_ahead": 60})
    );
    assert_eq!(
        agent["follow_ups"],
        json!({"enabled": false, "delay_minutes": 60, "max_count": 1, "message": ""})
    );
    assert_timestamp(&agent["created_at"], "created_at");
    assert_timestamp(&agent["updated_at"], "updated_at");
    let id = agent["id"].as_str().unwrap().to_owned();
    assert_eq!(api.ok("GET", &format!("/v1/agents/{id}"), None).await["agent"], *agent);

    // Every field set at creation is kept.
    let full = api
        .ok(
            "POST",
            "/v1/agents",
            Some(json!({
                "name": "Implant desk",
                "instructions": "Answer questions about implants.",
                "rules": ["Never quote prices", "Offer a consultation"],
                "goal": "Book consultations",
                "personality": "Warm and brief",
                "language": "hi-IN",
                "ai_tier": "max",
                "anthropic_model": "claude-sonnet-4-5",
                "booking": {"enabled": true, "link": "https://cal.example.com/implants", "instructions": "Weekdays"},
                "follow_ups": {"enabled": true, "delay_minutes": 120, "max_count": 3, "message": "Still there?"},
                "status": "paused"
            })),
        )
        .await["agent"]
        .clone();
    assert_eq!(full["rules"], json!(["Never quote prices", "Offer a consultation"]));
    assert_eq!(
        (
            full["language"].clone(),
            full["ai_tier"].clone(),
            full["anthropic_model"].clone(),
            full["status"].clone()
        ),
        (
            json!("hi-IN"),
            json!("max"),
            json!("claude-sonnet-4-5"),
            json!("paused")
        )
    );
    assert_eq!(
        full["booking"],
        json!({"enabled": true, "link": "https://cal.example.com/implants", "instructions": "Weekdays", "max_days_ahead": 60})
    );
    assert_eq!(
        full["follow_ups"],
        json!({"enabled": true, "delay_minutes": 120, "max_count": 3, "message": "Still there?"})
    );
    let partial_follow_ups = api
        .ok(
            "POST",
            "/v1/agents",
            Some(json!({"name": "Follow-up defaults", "follow_ups": {"enabled": true, "delay_minutes": 30}})),
        )
        .await;
    assert_eq!(
        partial_follow_ups["agent"]["follow_ups"],
        json!({"enabled": true, "delay_minutes": 30, "max_count": 1, "message": ""}),
        "max_count defaults to 1"
    );
    for language in ["en", "hi-IN", "pt-BR", "zh-Hant-TW"] {
        let answer = api
            .send(
                "POST",
                "/v1/agents",
                Some(json!({"name": "Lang", "language": language})),
            )
            .await;
        assert_eq!(answer.status, 200, "{language}: {}", answer.body);
        assert_eq!(answer.body["agent"]["language"], language);
    }

    // PUT changes only the keys in the body.
    let full_id = full["id"].as_str().unwrap().to_owned();
    let put = api
        .ok(
            "PUT",
            &format!("/v1/agents/{full_id}"),
            Some(json!({"goal": "Fill the calendar", "status": "active"})),
        )
        .await["agent"]
        .clone();
    assert_eq!(
        (put["goal"].clone(), put["status"].clone()),
        (json!("Fill the calendar"), json!("active"))
    );
    for kept in [
        "name",
        "instructions",
        "rules",
        "personality",
        "language",
        "ai_tier",
        "anthropic_model",
        "booking",
        "follow_ups",
        "created_at",
    ] {
        assert_eq!(put[kept], full[kept], "PUT kept {kept}");
    }
    let renamed = api
        .ok(
            "PUT",
            &format!("/v1/agents/{full_id}"),
            Some(
                json!({"name": "Implants", "rules": [], "booking": {"enabled": false, "link": "", "instructions": ""}}),
            ),
        )
        .await["agent"]
        .clone();
    assert_eq!(
        (
            renamed["name"].clone(),
            renamed["rules"].clone(),
            renamed["booking"]["enabled"].clone()
        ),
        (json!("Implants"), json!([]), json!(false))
    );
    assert_eq!(renamed["goal"], "Fill the calendar");
    assert_eq!(
        api.ok("GET", &format!("/v1/agents/{full_id}"), None).await["agent"],
        renamed,
        "GET shows the update"
    );

    // The bot configuration is the narrower view of the same agent. A tier that may not name the agent's
    // model on the server's key is refused until the model is cleared.
    let too_cheap = api
        .send(
            "PUT",
            &format!("/v1/agents/{full_id}/bot-config"),
            Some(json!({"ai_tier": "mini"})),
        )
        .await;
    assert_invalid(&too_cheap, "anthropic_model", "mini with claude-sonnet-4-5");
    api.ok(
        "PUT",
        &format!("/v1/agents/{full_id}"),
        Some(json!({"anthropic_model": ""})),
    )
    .await;
    let bot = api
        .ok(
            "PUT",
            &format!("/v1/agents/{full_id}/bot-config"),
            Some(json!({"instructions": "Only implants.", "rules": ["Be brief"], "ai_tier": "mini"})),
        )
        .await;
    assert_eq!(
        bot["bot_config"],
        json!({
            "agent_id": full_id,
            "instructions": "Only implants.",
            "rules": ["Be brief"],
            "goal": "Fill the calendar",
            "personality": "Warm and brief",
            "language": "hi-IN",
            "ai_tier": "mini"
        })
    );
    let after = api.ok("GET", &format!("/v1/agents/{full_id}"), None).await["agent"].clone();
    assert_eq!(
        (
            after["instructions"].clone(),
            after["rules"].clone(),
            after["ai_tier"].clone(),
            after["name"].clone()
        ),
        (
            json!("Only implants."),
            json!(["Be brief"]),
            json!("mini"),
            json!("Implants")
        )
    );
    let bad_tier = api
        .send(
            "PUT",
            &format!("/v1/agents/{full_id}/bot-config"),
            Some(json!({"ai_tier": "ultra"})),
        )
        .await;
    assert_invalid(&bad_tier, "ai_tier", "bot-config ai_tier");
    let not_bot = api
        .send(
            "PUT",
            &format!("/v1/agents/{full_id}/bot-config"),
            Some(json!({"status": "paused"})),
        )
        .await;
    assert_eq!(
        not_bot.status, 400,
        "status is not a bot-config field: {}",
        not_bot.body
    );
    assert_not_found(
        &api.send(
            "PUT",
            "/v1/agents/agt_0000000000000000/bot-config",
            Some(json!({"goal": "x"})),
        )
        .await,
        "bot-config of an unknown agent",
    );

    // Lists: newest first, paged by cursor.
    let listed = api.ids("/v1/agents", "agents", "id").await;
    assert_eq!(listed.len(), 7);
    assert_eq!(listed.last(), Some(&id), "oldest last");
    assert_eq!(listed[listed.len() - 2], full_id);
    let first = api.ok("GET", "/v1/agents?limit=4", None).await;
    assert_eq!(first["agents"].as_array().unwrap().len(), 4);
    let cursor = first["next_cursor"].as_str().expect("a next page").to_owned();
    let second = api
        .ok("GET", &format!("/v1/agents?limit=4&cursor={cursor}"), None)
        .await;
    assert_eq!(second["next_cursor"], Value::Null, "last page");
    let paged: Vec<String> = first["agents"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["agents"].as_array().unwrap())
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(paged, listed);
    assert_eq!(api.ok("GET", "/v1/agents", None).await["next_cursor"], Value::Null);
    for query in ["limit=0", "limit=201", "cursor=garbage"] {
        let answer = api.send("GET", &format!("/v1/agents?{query}"), None).await;
        assert_eq!(answer.status, 400, "{query}: {}", answer.body);
    }

    // Delete answers the id; the agent is gone after.
    let deleted = api.send("DELETE", &format!("/v1/agents/{id}"), None).await;
    assert_eq!(
        (deleted.status, deleted.body.clone()),
        (200, json!({"success": true, "id": id}))
    );
    assert_not_found(&api.send("GET", &format!("/v1/agents/{id}"), None).await, "deleted");
    assert_not_found(
        &api.send("DELETE", &format!("/v1/agents/{id}"), None).await,
        "deleted twice",
    );
    assert_not_found(
        &api.send("PUT", &format!("/v1/agents/{id}"), Some(json!({"goal": "x"})))
            .await,
        "update a deleted agent",
    );
    assert!(!api.ids("/v1/agents", "agents", "id").await.contains(&id));

    // A key without the `agents` section.
    let deals_only = admin::issue_key(&server, &api.account_id, &["deals"]).await;
    for (method, path) in [
        ("GET", "/v1/agents".to_owned()),
        ("POST", "/v1/agents".to_owned()),
        ("GET", format!("/v1/agents/{full_id}")),
        ("GET", "/v1/kb-groups".to_owned()),
    ] {
        let answer = call_with(
            method,
            &server.url(&path),
            &[("x-api-key", &deals_only)],
            (method == "POST").then_some(r#"{"name": "x"}"#),
        )
        .await;
        assert_insufficient_scope(&answer, &format!("{method} {path}"));
    }
    let agents_only = admin::issue_key(&server, &api.account_id, &["agents"]).await;
    let answer = call_with("GET", &server.url("/v1/agents"), &[("x-api-key", &agents_only)], None).await;
    assert_eq!(answer.status, 200, "the agents section is enough: {}", answer.body);
});

on_both_databases!(bad_agent_faq_and_tool_input_is_a_precise_400, |db: Db| async move {
    // No FRONTDESK_ALLOW_PRIVATE_URLS: tools must point at public hosts.
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    for (body, field) in [
        (json!({}), "name"),
        (json!({"name": ""}), "name"),
        (json!({"name": "   "}), "name"),
        (json!({"name": "x".repeat(201)}), "name"),
        (json!({"name": "A", "ai_tier": "ultra"}), "ai_tier"),
        (json!({"name": "A", "language": "english!"}), "language"),
        (json!({"name": "A", "language": "e"}), "language"),
        (json!({"name": "A", "status": "deleted"}), "status"),
        (
            json!({"name": "A", "anthropic_model": "Claude Sonnet!"}),
            "anthropic_model",
        ),
    ] {
        let answer = api.send("POST", "/v1/agents", Some(body.clone())).await;
        assert_invalid(&answer, field, &body.to_string());
    }
    for (body, prefix) in [
        (
            json!({"name": "A", "booking": {"enabled": true, "link": "http://cal.example.com/x"}}),
            "booking",
        ),
        (json!({"name": "A", "booking": {"enabled": true}}), "booking"),
        (json!({"name": "A", "booking": {"max_days_ahead": 366}}), "booking"),
        (json!({"name": "A", "booking": {"max_days_ahead": -1}}), "booking"),
        (
            json!({"name": "A", "follow_ups": {"enabled": true, "delay_minutes": 10081}}),
            "follow_ups",
        ),
        (
            json!({"name": "A", "follow_ups": {"enabled": true, "delay_minutes": -1}}),
            "follow_ups",
        ),
        (
            json!({"name": "A", "follow_ups": {"enabled": true, "max_count": 11}}),
            "follow_ups",
        ),
    ] {
        let answer = api.send("POST", "/v1/agents", Some(body.clone())).await;
        assert_invalid_under(&answer, prefix, &body.to_string());
    }
    let unknown = api
        .send("POST", "/v1/agents", Some(json!({"name": "A", "colour": "red"})))
        .await;
    assert_eq!(unknown.status, 400, "unknown field: {}", unknown.body);
    assert!(
        api.ok("GET", "/v1/agents", None).await["agents"]
            .as_array()
            .unwrap()
            .is_empty(),
        "no refused agent was stored"
    );

    let id = api.agent("Valid").await;
    let path = format!("/v1/agents/{id}");
    for (body, field) in [
        (json!({"name": ""}), "name"),
        (json!({"ai_tier": "ultra"}), "ai_tier"),
        (json!({"language": "english!"}), "language"),
        (json!({"status": "archived"}), "status"),
    ] {
        let answer = api.send("PUT", &path, Some(body.clone())).await;
        assert_invalid(&answer, field, &format!("PUT {body}"));
    }
    let answer = api.send("PUT", &path, Some(json!({"colour": "red"}))).await;
    assert_eq!(answer.status, 400, "unknown field on PUT: {}", answer.body);
    let unchanged = api.ok("GET", &path, None).await["agent"].clone();
    assert_eq!(
        (
            unchanged["name"].clone(),
            unchanged["ai_tier"].clone(),
            unchanged["status"].clone()
        ),
        (json!("Valid"), json!("pro"), json!("active")),
        "a refused PUT changed nothing"
    );
    assert_not_found(
        &api.send("GET", "/v1/agents/agt_0000000000000000", None).await,
        "unknown agent",
    );

    // FAQs need a question and an answer.
    let faqs = format!("/v1/agents/{id}/faqs");
    for (body, field) in [
        (json!({"question": "", "answer": "Yes"}), "question"),
        (json!({"answer": "Yes"}), "question"),
        (json!({"question": "Open on Sunday?", "answer": ""}), "answer"),
        (json!({"question": "Open on Sunday?"}), "answer"),
    ] {
        let answer = api.send("POST", &faqs, Some(body.clone())).await;
        assert_invalid(&answer, field, &format!("FAQ {body}"));
    }
    assert_not_found(
        &api.send(
            "POST",
            "/v1/agents/agt_0000000000000000/faqs",
            Some(json!({"question": "Q", "answer": "A"})),
        )
        .await,
        "a FAQ on an unknown agent",
    );

    // Tools must call public HTTPS endpoints.
    let functions = format!("/v1/agents/{id}/custom-functions");
    for url in [
        "https://127.0.0.1/x",
        "https://10.0.0.7/hook",
        "https://localhost/hook",
        "https://[::1]/x",
    ] {
        let answer = api
            .send(
                "POST",
                &functions,
                Some(json!({"name": "lookup", "description": "Looks up", "url": url})),
            )
            .await;
        assert_invalid(&answer, "url", url);
    }
    let mcp = format!("/v1/agents/{id}/mcp-servers");
    let answer = api
        .send(
            "POST",
            &mcp,
            Some(json!({"name": "calendar", "url": "https://192.168.1.10/mcp"})),
        )
        .await;
    assert_invalid(&answer, "url", "private MCP server");
    assert!(
        api.ok("GET", &functions, None).await["custom_functions"]
            .as_array()
            .unwrap()
            .is_empty()
    );
});

on_both_databases!(agents_over_grpc, |db: Db| async move {
    let server = Server::start(&db, &[("FRONTDESK_ALLOW_PRIVATE_URLS", "true")]).await;
    let (_, key) = admin::account(&server, "growth", 10_000).await;
    let mut agents = AgentsClient::connect(server.grpc.clone()).await.unwrap();
    let mut groups = KbGroupsClient::connect(server.grpc.clone()).await.unwrap();

    let created = agents
        .create_agent(authed(
            &key,
            CreateAgentRequest {
                name: "gRPC agent".into(),
                instructions: "Be helpful.".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(created.success);
    let agent = created.agent.unwrap();
    assert!(agent.id.starts_with("agt_"), "{}", agent.id);
    assert_eq!(
        (agent.language.as_str(), agent.ai_tier.as_str(), agent.status.as_str()),
        ("en", "pro", "active")
    );
    assert_eq!(
        agent.follow_ups.as_ref().map(|f| (f.delay_minutes, f.max_count)),
        Some((60, 1))
    );
    let got = agents
        .get_agent(authed(
            &key,
            GetAgentRequest {
                agent_id: agent.id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .agent
        .unwrap();
    assert_eq!(got, agent);
    let listed = agents
        .list_agents(authed(&key, ListAgentsRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        listed.agents.iter().map(|a| a.id.clone()).collect::<Vec<_>>(),
        vec![agent.id.clone()]
    );
    assert_eq!(listed.next_cursor, None);
    let refused = agents
        .create_agent(authed(
            &key,
            CreateAgentRequest {
                name: "Tiered".into(),
                ai_tier: "ultra".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    let missing = agents
        .get_agent(authed(
            &key,
            GetAgentRequest {
                agent_id: "agt_0000000000000000".into(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    let anonymous = agents
        .get_agent(GetAgentRequest {
            agent_id: agent.id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(anonymous.code(), Code::Unauthenticated);

    let faq = agents
        .create_faq(authed(
            &key,
            CreateFaqRequest {
                agent_id: agent.id.clone(),
                question: "Parking?".into(),
                answer: "Behind the building.".into(),
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .faq
        .unwrap();
    assert!(faq.id.starts_with("faq_"));
    assert_eq!(
        (faq.agent_id.as_str(), faq.group_id.as_deref()),
        (agent.id.as_str(), None)
    );

    let parameters = to_struct(json!({
        "type": "object",
        "properties": {"date": {"type": "string"}},
        "required": ["date"]
    }));
    let function = agents
        .create_custom_function(authed(
            &key,
            CreateCustomFunctionRequest {
                agent_id: agent.id.clone(),
                name: "book_slot".into(),
                description: "Books a slot".into(),
                url: "https://api.example.com/hook".into(),
                method: String::new(),
                headers: HashMap::from([("x-api-token".to_owned(), "sk_GRPC_SECRET".to_owned())]),
                parameters: Some(parameters.clone()),
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .custom_function
        .unwrap();
    assert!(function.id.starts_with("fn_"));
    assert_eq!(function.method, "POST");
    assert_eq!(function.parameters, Some(parameters));
    assert_eq!(
        function.headers,
        HashMap::from([("x-api-token".to_owned(), "[redacted]".to_owned())])
    );
    let bad_schema = agents
        .create_custom_function(authed(
            &key,
            CreateCustomFunctionRequest {
                agent_id: agent.id.clone(),
                name: "broken".into(),
                description: "Broken schema".into(),
                url: "https://api.example.com/hook".into(),
                parameters: Some(to_struct(json!({"type": 5}))),
                ..Default::default()
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(bad_schema.code(), Code::InvalidArgument);

    let group = groups
        .create_kb_group(authed(
            &key,
            CreateKbGroupRequest {
                name: "Basics".into(),
                description: String::new(),
                faqs: vec![
                    GroupFaq {
                        question: "Hours?".into(),
                        answer: "9 to 6.".into(),
                    },
                    GroupFaq {
                        question: "Parking?".into(),
                        answer: "In the garage.".into(),
                    },
                ],
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .kb_group
        .unwrap();
    assert!(group.id.starts_with("kbg_"));
    let applied = groups
        .apply_kb_group(authed(
            &key,
            ApplyKbGroupRequest {
                group_id: group.id.clone(),
                agent_id: agent.id.clone(),
                campaign_id: String::new(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            applied.added,
            applied.updated,
            applied.unchanged,
            applied.agent_id.as_str()
        ),
        (1, 0, 1, agent.id.as_str()),
        "the agent's own Parking? stays"
    );
    let faqs = agents
        .list_faqs(authed(
            &key,
            ListFaqsRequest {
                agent_id: agent.id.clone(),
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .faqs;
    assert_eq!(faqs.len(), 2);
    let hours = faqs.iter().find(|f| f.question == "Hours?").unwrap();
    assert_eq!(hours.group_id.as_deref(), Some(group.id.as_str()));
});

on_both_databases!(
    agents_are_isolated_and_agencies_act_on_sub_accounts,
    |db: Db| async move {
        let server = Server::start(&db, &[]).await;
        let a = Platform::new(&server).await;
        let b = Platform::new(&server).await;
        let agent = a.agent("A's agent").await;
        let faq = a
            .ok(
                "POST",
                &format!("/v1/agents/{agent}/faqs"),
                Some(json!({"question": "Q?", "answer": "A."})),
            )
            .await["faq"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let group = a
            .ok(
                "POST",
                "/v1/kb-groups",
                Some(json!({"name": "A's group", "faqs": [{"question": "Q2?", "answer": "A2."}]})),
            )
            .await["kb_group"]["id"]
            .as_str()
            .unwrap()
            .to_owned();

        for (method, path, body) in [
            ("GET", format!("/v1/agents/{agent}"), None),
            ("PUT", format!("/v1/agents/{agent}"), Some(json!({"name": "Taken"}))),
            (
                "PUT",
                format!("/v1/agents/{agent}/bot-config"),
                Some(json!({"goal": "Taken"})),
            ),
            ("DELETE", format!("/v1/agents/{agent}"), None),
            ("GET", format!("/v1/agents/{agent}/faqs"), None),
            (
                "POST",
                format!("/v1/agents/{agent}/faqs"),
                Some(json!({"question": "Q?", "answer": "A."})),
            ),
            (
                "PUT",
                format!("/v1/agents/{agent}/faqs/{faq}"),
                Some(json!({"answer": "Taken"})),
            ),
            ("DELETE", format!("/v1/agents/{agent}/faqs/{faq}"), None),
            ("GET", format!("/v1/agents/{agent}/custom-functions"), None),
            ("GET", format!("/v1/agents/{agent}/mcp-servers"), None),
            ("GET", format!("/v1/agents/{agent}/kb-sources"), None),
            ("GET", format!("/v1/kb-groups/{group}"), None),
            ("PUT", format!("/v1/kb-groups/{group}"), Some(json!({"name": "Taken"}))),
            ("DELETE", format!("/v1/kb-groups/{group}"), None),
        ] {
            let answer = b.send(method, &path, body).await;
            assert_not_found(&answer, &format!("B {method} {path}"));
        }
        let b_agent = b.agent("B's agent").await;
        assert_not_found(
            &b.send(
                "POST",
                &format!("/v1/kb-groups/{group}/apply"),
                Some(json!({"agent_id": b_agent})),
            )
            .await,
            "B applies A's group",
        );
        assert_eq!(b.ids("/v1/agents", "agents", "id").await, vec![b_agent.clone()]);
        assert!(b.ids("/v1/kb-groups", "kb_groups", "id").await.is_empty());
        let unchanged = a.ok("GET", &format!("/v1/agents/{agent}"), None).await;
        assert_eq!(unchanged["agent"]["name"], "A's agent", "B changed nothing");
        assert_eq!(
            a.ids(&format!("/v1/agents/{agent}/faqs"), "faqs", "answer").await,
            vec!["A.".to_owned()]
        );

        // An agency acts on its own sub-accounts only.
        let (agency, child) = agency_and_child(&server).await;
        let child_id = child.account_id.clone();
        let by_query = agency
            .ok(
                "POST",
                &format!("/v1/agents?sub_account_id={child_id}"),
                Some(json!({"name": "Clinic bot"})),
            )
            .await["agent"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(child.ids("/v1/agents", "agents", "id").await, vec![by_query.clone()]);
        assert!(
            agency.ids("/v1/agents", "agents", "id").await.is_empty(),
            "not the agency's own"
        );
        let by_body = agency
            .ok(
                "POST",
                "/v1/agents",
                Some(json!({"name": "Second bot", "sub_account_id": child_id})),
            )
            .await["agent"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            child.ids("/v1/agents", "agents", "id").await,
            vec![by_body.clone(), by_query.clone()]
        );
        assert_eq!(
            agency
                .ids(&format!("/v1/agents?sub_account_id={child_id}"), "agents", "id")
                .await
                .len(),
            2
        );
        let faq = agency
            .send(
                "POST",
                &format!("/v1/agents/{by_query}/faqs?sub_account_id={child_id}"),
                Some(json!({"question": "Q?", "answer": "A."})),
            )
            .await;
        assert_eq!(faq.status, 200, "{}", faq.body);
        assert_not_found(
            &agency.send("GET", &format!("/v1/agents/{by_query}"), None).await,
            "without sub_account_id the agency sees only its own",
        );
        for stranger in [a.account_id.clone(), "acc_0000000000000000".to_owned()] {
            let answer = agency
                .send("GET", &format!("/v1/agents?sub_account_id={stranger}"), None)
                .await;
            assert_insufficient_scope(&answer, &stranger);
            let answer = agency
                .send(
                    "POST",
                    "/v1/agents",
                    Some(json!({"name": "Intruder", "sub_account_id": stranger})),
                )
                .await;
            assert_insufficient_scope(&answer, "sub_account_id in the body names a non-child");
        }
        let answer = child
            .send("GET", &format!("/v1/agents?sub_account_id={}", a.account_id), None)
            .await;
        assert_insufficient_scope(&answer, "a sub-account is no agency");
        let kb = agency
            .send("GET", &format!("/v1/kb-groups?sub_account_id={child_id}"), None)
            .await;
        assert_eq!(kb.status, 200, "{}", kb.body);
    }
);

/// Agents as large as their limits allow, in 4-byte characters: 30 of them pass the 4 MiB a gRPC message
/// may have by default. Every page answers 200, pages are cut by size as well as by `limit`, and following
/// `next_cursor` lists every agent exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_large_agents_are_cut_by_size_and_page_through_completely() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    let wide = |chars: usize| "😀".repeat(chars);
    let mut created = std::collections::BTreeSet::new();
    for n in 0..30 {
        let body = json!({
            "name": format!("Large {n}"),
            "instructions": wide(20_000),
            "rules": vec![wide(1_000); 50],
            "goal": wide(2_000),
            "personality": wide(2_000),
        });
        let answer = api.send("POST", "/v1/agents", Some(body)).await;
        assert_eq!(answer.status, 200, "{}", answer.body["error"]);
        created.insert(answer.body["agent"]["id"].as_str().unwrap().to_owned());
    }
    let mut seen = Vec::new();
    let mut pages = 0;
    let mut path = "/v1/agents?limit=200".to_owned();
    loop {
        let answer = api.send("GET", &path, None).await;
        assert_eq!(answer.status, 200, "page {pages}: {}", answer.body["error"]);
        pages += 1;
        let agents = answer.body["agents"].as_array().unwrap();
        assert!(!agents.is_empty(), "page {pages} is not empty");
        seen.extend(agents.iter().map(|a| a["id"].as_str().unwrap().to_owned()));
        match answer.body["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/agents?limit=200&cursor={cursor}"),
            None => break,
        }
    }
    assert!(pages > 1, "30 agents of ~300 KB do not fit one page");
    assert_eq!(seen.len(), 30, "each agent once");
    assert_eq!(seen.into_iter().collect::<std::collections::BTreeSet<_>>(), created);
}
