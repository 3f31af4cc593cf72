//! Channels and routing over REST and gRPC against the real binary, on SQLite and PostgreSQL: connecting
//! channels (credentials sealed and never answered), entry points and channel defaults with their validation,
//! the resolver's precedence rules one by one, the published rule that a new agent answers nothing until a
//! rule or a default points at it, and tenant isolation with agencies acting on their sub-accounts.

use std::collections::HashMap;

use frontdesk_api::v1::{
    ConnectChannelRequest, CreateAgentRequest, CreateEntryPointRequest, EntryPointMatch, ListChannelDefaultsRequest,
    ListChannelsRequest, ListEntryPointsRequest, ResolveRequest, SetChannelDefaultRequest, agents_client::AgentsClient,
    channels_client::ChannelsClient, entry_points_client::EntryPointsClient,
};
use frontdesk_tests::{
    Db, Server, admin, call_with, on_both_databases,
    platform::{
        Platform, agency_and_child, assert_id, assert_insufficient_scope, assert_invalid, assert_not_found,
        assert_timestamp, authed,
    },
};
use serde_json::{Value, json};
use tonic::Code;

const TWILIO_TOKEN: &str = "tok_SECRET_123";

/// What the resolver answered: (agent_id, entry_point_id, reason).
type Route = (Option<String>, Option<String>, String);

/// A rule for `agent`; its id.
async fn create_rule(api: &Platform<'_>, agent: &str, body: Value) -> String {
    api.ok("POST", &format!("/v1/agents/{agent}/entry-points"), Some(body))
        .await["entry_point"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn set_default(api: &Platform<'_>, channel: &str, agent: &str) -> Value {
    api.ok(
        "PUT",
        "/v1/entry-points/channel-defaults",
        Some(json!({"channel": channel, "agent_id": agent})),
    )
    .await
}

async fn resolve(api: &Platform<'_>, body: Value) -> Route {
    let answer = api.ok("POST", "/v1/entry-points/resolve", Some(body.clone())).await;
    for key in ["agent_id", "entry_point_id", "reason"] {
        assert!(
            answer.as_object().unwrap().contains_key(key),
            "{body}: the answer always has {key}: {answer}"
        );
    }
    (
        answer["agent_id"].as_str().map(str::to_owned),
        answer["entry_point_id"].as_str().map(str::to_owned),
        answer["reason"].as_str().unwrap().to_owned(),
    )
}

fn by_rule(agent: &str, rule: &str) -> Route {
    (Some(agent.to_owned()), Some(rule.to_owned()), "entry_point".to_owned())
}

fn by_default(agent: &str) -> Route {
    (Some(agent.to_owned()), None, "channel_default".to_owned())
}

fn no_route() -> Route {
    (None, None, "no_route".to_owned())
}

fn not_connected() -> Route {
    (None, None, "channel_not_connected".to_owned())
}

on_both_databases!(channels_are_connected_listed_and_disconnected, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    let mut bodies = Vec::new();

    let sms = api
        .send(
            "POST",
            "/v1/channels",
            Some(json!({
                "name": "sms-main",
                "type": "sms",
                "config": {"from_number": "+15550001111", "auth_token": TWILIO_TOKEN, "account_sid": "AC0123456789"}
            })),
        )
        .await;
    assert_eq!(sms.status, 200, "{}", sms.body);
    bodies.push(sms.body.to_string());
    let channel = &sms.body["channel"];
    assert_eq!(
        (
            channel["name"].clone(),
            channel["type"].clone(),
            channel["provider"].clone(),
            channel["configured_keys"].clone()
        ),
        (
            json!("sms-main"),
            json!("sms"),
            json!("twilio"),
            json!(["account_sid", "auth_token", "from_number"])
        ),
        "the provider defaults by type; configured keys are sorted names"
    );
    assert_timestamp(&channel["created_at"], "created_at");

    for (name, kind, provider, config) in [
        ("web", "webchat", "builtin", json!({})),
        (
            "wa",
            "whatsapp",
            "whatsapp_cloud",
            json!({"phone_number_id": "1234567890", "access_token": "EAAG_WA_SECRET", "app_secret": "s1"}),
        ),
        (
            "ig",
            "instagram",
            "meta",
            json!({"page_id": "99887766", "access_token": "EAAG_IG_SECRET", "app_secret": "s2"}),
        ),
        (
            "fb_page",
            "messenger",
            "meta",
            json!({"page_id": "99887766", "access_token": "EAAG_FB_SECRET", "app_secret": "s3"}),
        ),
    ] {
        let answer = api
            .send(
                "POST",
                "/v1/channels",
                Some(json!({"name": name, "type": kind, "config": config})),
            )
            .await;
        assert_eq!(answer.status, 200, "{name}: {}", answer.body);
        bodies.push(answer.body.to_string());
        assert_eq!(answer.body["channel"]["provider"], provider, "{name}");
    }
    let explicit = api
        .send(
            "POST",
            "/v1/channels",
            Some(json!({"name": "web2", "type": "webchat", "provider": "builtin"})),
        )
        .await;
    assert_eq!(explicit.status, 200, "{}", explicit.body);
    assert_eq!(explicit.body["channel"]["configured_keys"], json!([]));

    // Bad connections.
    for (body, field) in [
        (json!({"name": "Web Chat", "type": "webchat"}), "name"),
        (json!({"name": "1web", "type": "webchat"}), "name"),
        (json!({"name": "", "type": "webchat"}), "name"),
        (json!({"name": "fax", "type": "fax"}), "type"),
        (json!({"type": "webchat"}), "name"),
        (json!({"name": "notype"}), "type"),
        (json!({"name": "wrong", "type": "sms", "provider": "meta"}), "provider"),
    ] {
        let answer = api.send("POST", "/v1/channels", Some(body.clone())).await;
        assert_invalid(&answer, field, &body.to_string());
    }
    for body in [
        json!({"name": "wa2", "type": "whatsapp", "config": {"phone_number_id": "123"}}),
        json!({"name": "sms2", "type": "sms", "config": {"account_sid": "AC1", "auth_token": "t"}}),
        json!({"name": "ig2", "type": "instagram", "config": {"access_token": "t"}}),
    ] {
        let answer = api.send("POST", "/v1/channels", Some(body.clone())).await;
        assert_eq!(
            (answer.status, answer.code()),
            (400, "invalid_argument"),
            "{body}: {}",
            answer.body
        );
        assert!(
            answer.fields().iter().any(|f| f.starts_with("config")),
            "{body}: a missing key names config.<key>: {}",
            answer.body
        );
        bodies.push(answer.body.to_string());
    }
    let missing = api
        .send(
            "POST",
            "/v1/channels",
            Some(json!({"name": "wa3", "type": "whatsapp", "config": {"phone_number_id": "123"}})),
        )
        .await;
    assert!(
        missing.fields().contains(&"config.access_token".to_owned()),
        "{}",
        missing.body
    );
    let duplicate = api
        .send(
            "POST",
            "/v1/channels",
            Some(json!({"name": "sms-main", "type": "webchat"})),
        )
        .await;
    assert_eq!(
        (duplicate.status, duplicate.code()),
        (409, "already_exists"),
        "{}",
        duplicate.body
    );
    let unknown = api
        .send(
            "POST",
            "/v1/channels",
            Some(json!({"name": "web3", "type": "webchat", "colour": "red"})),
        )
        .await;
    assert_eq!(unknown.status, 400, "{}", unknown.body);

    // Listed newest first, credentials never shown.
    let listed = api.ok("GET", "/v1/channels", None).await;
    bodies.push(listed.to_string());
    let names: Vec<&str> = listed["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web2", "fb_page", "ig", "wa", "web", "sms-main"]);
    assert_eq!(listed["next_cursor"], Value::Null);
    let page = api.ok("GET", "/v1/channels?limit=2", None).await;
    assert_eq!(page["channels"].as_array().unwrap().len(), 2);
    let cursor = page["next_cursor"].as_str().unwrap();
    let next = api
        .ok("GET", &format!("/v1/channels?limit=2&cursor={cursor}"), None)
        .await;
    assert_eq!(next["channels"][0]["name"], "ig");
    for secret in [TWILIO_TOKEN, "EAAG_WA_SECRET", "EAAG_IG_SECRET", "EAAG_FB_SECRET"] {
        for body in &bodies {
            assert!(!body.contains(secret), "{secret} in a response: {body}");
        }
        assert_eq!(
            db.scalar(
                "SELECT COUNT(*) FROM channels WHERE config LIKE $1",
                &format!("%{secret}%")
            )
            .await
            .as_deref(),
            Some("0"),
            "{secret} is stored sealed"
        );
    }
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM channels WHERE name = $1", "sms-main")
            .await
            .as_deref(),
        Some("1")
    );
    assert!(
        !server.logs().contains(TWILIO_TOKEN),
        "credentials never reach the logs"
    );

    // Disconnect.
    let deleted = api.send("DELETE", "/v1/channels/sms-main", None).await;
    assert_eq!(
        (deleted.status, deleted.body.clone()),
        (200, json!({"success": true, "id": "sms-main"}))
    );
    assert_not_found(
        &api.send("DELETE", "/v1/channels/sms-main", None).await,
        "disconnected twice",
    );
    assert!(
        !api.ids("/v1/channels", "channels", "name")
            .await
            .contains(&"sms-main".to_owned())
    );
    let reconnected = api
        .send(
            "POST",
            "/v1/channels",
            Some(json!({"name": "sms-main", "type": "webchat"})),
        )
        .await;
    assert_eq!(reconnected.status, 200, "the name is free again: {}", reconnected.body);

    // A key without the entry_points section.
    let agents_only = admin::issue_key(&server, &api.account_id, &["agents"]).await;
    let answer = call_with("GET", &server.url("/v1/channels"), &[("x-api-key", &agents_only)], None).await;
    assert_insufficient_scope(&answer, "an agents-only key on channels");
    let answer = call_with(
        "GET",
        &server.url("/v1/entry-points"),
        &[("x-api-key", &agents_only)],
        None,
    )
    .await;
    assert_insufficient_scope(&answer, "an agents-only key on entry points");
});

on_both_databases!(entry_points_and_channel_defaults_are_managed, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    api.webchat("web").await;
    api.webchat("landing").await;
    let first = api.agent("First").await;
    let second = api.agent("Second").await;

    let full_match = json!({
        "keywords": ["implant", "dental implant"],
        "ref": "spring-ad",
        "url_prefix": "https://clinic.example.com/"
    });
    let created = api
        .ok(
            "POST",
            &format!("/v1/agents/{first}/entry-points"),
            Some(json!({"channel": "web", "match": full_match, "priority": 10})),
        )
        .await["entry_point"]
        .clone();
    assert_id(&created["id"], "ep_");
    assert_eq!(
        (
            created["agent_id"].clone(),
            created["channel"].clone(),
            created["priority"].clone(),
            created["enabled"].clone()
        ),
        (json!(first), json!("web"), json!(10), json!(true)),
        "enabled by default"
    );
    assert_eq!(created["match"], full_match);
    assert_timestamp(&created["created_at"], "created_at");
    assert_timestamp(&created["updated_at"], "updated_at");
    let rule = created["id"].as_str().unwrap().to_owned();
    assert_eq!(
        api.ok("GET", &format!("/v1/entry-points/{rule}"), None).await["entry_point"],
        created
    );
    let catch_all = api
        .ok(
            "POST",
            &format!("/v1/agents/{second}/entry-points"),
            Some(json!({"channel": "landing", "enabled": false})),
        )
        .await["entry_point"]
        .clone();
    assert_eq!(
        (catch_all["priority"].clone(), catch_all["enabled"].clone()),
        (json!(0), json!(false))
    );
    let catch_all = catch_all["id"].as_str().unwrap().to_owned();
    let third = create_rule(&api, &second, json!({"channel": "web", "priority": -5})).await;

    // Lists and filters.
    assert_eq!(
        api.ids("/v1/entry-points", "entry_points", "id").await,
        vec![third.clone(), catch_all.clone(), rule.clone()],
        "newest first"
    );
    assert_eq!(
        api.ids(&format!("/v1/entry-points?agent_id={second}"), "entry_points", "id")
            .await,
        vec![third.clone(), catch_all.clone()]
    );
    assert_eq!(
        api.ids("/v1/entry-points?channel=web", "entry_points", "id").await,
        vec![third.clone(), rule.clone()]
    );
    assert_eq!(
        api.ids(
            &format!("/v1/entry-points?channel=web&agent_id={second}"),
            "entry_points",
            "id"
        )
        .await,
        vec![third.clone()]
    );
    assert_eq!(
        api.ids(&format!("/v1/agents/{first}/entry-points"), "entry_points", "id")
            .await,
        vec![rule.clone()]
    );
    let page = api.ok("GET", "/v1/entry-points?limit=2", None).await;
    let cursor = page["next_cursor"].as_str().expect("a second page");
    let rest = api
        .ids(
            &format!("/v1/entry-points?limit=2&cursor={cursor}"),
            "entry_points",
            "id",
        )
        .await;
    assert_eq!(rest, vec![rule.clone()]);

    // PUT is partial; agent_id moves the rule.
    let updated = api
        .ok(
            "PUT",
            &format!("/v1/entry-points/{rule}"),
            Some(json!({"priority": 50})),
        )
        .await["entry_point"]
        .clone();
    assert_eq!(updated["priority"], 50);
    for kept in ["agent_id", "channel", "match", "enabled", "created_at"] {
        assert_eq!(updated[kept], created[kept], "PUT kept {kept}");
    }
    let disabled = api
        .ok(
            "PUT",
            &format!("/v1/entry-points/{rule}"),
            Some(json!({"enabled": false})),
        )
        .await["entry_point"]
        .clone();
    assert_eq!(
        (disabled["enabled"].clone(), disabled["priority"].clone()),
        (json!(false), json!(50))
    );
    let rematched = api
        .ok(
            "PUT",
            &format!("/v1/entry-points/{rule}"),
            Some(json!({"match": {"keywords": ["crown"]}, "enabled": true, "channel": "landing"})),
        )
        .await["entry_point"]
        .clone();
    assert_eq!(
        (rematched["match"].clone(), rematched["channel"].clone()),
        (
            json!({"keywords": ["crown"], "ref": "", "url_prefix": ""}),
            json!("landing")
        )
    );
    let moved = api
        .ok(
            "PUT",
            &format!("/v1/entry-points/{rule}"),
            Some(json!({"agent_id": second})),
        )
        .await["entry_point"]
        .clone();
    assert_eq!(moved["agent_id"], json!(second));
    assert_eq!(
        api.ids(&format!("/v1/agents/{first}/entry-points"), "entry_points", "id")
            .await,
        Vec::<String>::new()
    );

    // Bad rules.
    let path = format!("/v1/agents/{first}/entry-points");
    for (body, field) in [
        (json!({"channel": "nowhere"}), "channel"),
        (json!({}), "channel"),
        (json!({"channel": "web", "priority": 1001}), "priority"),
        (json!({"channel": "web", "priority": -1001}), "priority"),
    ] {
        let answer = api.send("POST", &path, Some(body.clone())).await;
        assert_invalid(&answer, field, &body.to_string());
    }
    let answer = api
        .send("POST", &path, Some(json!({"channel": "web", "colour": "red"})))
        .await;
    assert_eq!(answer.status, 400, "unknown field: {}", answer.body);
    assert_not_found(
        &api.send(
            "POST",
            "/v1/agents/agt_0000000000000000/entry-points",
            Some(json!({"channel": "web"})),
        )
        .await,
        "a rule for an unknown agent",
    );
    for (body, field) in [
        (json!({"agent_id": "agt_0000000000000000"}), "agent_id"),
        (json!({"channel": "nowhere"}), "channel"),
        (json!({"priority": 5000}), "priority"),
    ] {
        let answer = api
            .send("PUT", &format!("/v1/entry-points/{rule}"), Some(body.clone()))
            .await;
        assert_invalid(&answer, field, &format!("PUT {body}"));
    }
    assert_eq!(
        api.ok("GET", &format!("/v1/entry-points/{rule}"), None).await["entry_point"]["agent_id"],
        json!(second),
        "a refused PUT changed nothing"
    );
    assert_not_found(
        &api.send("GET", "/v1/entry-points/ep_0000000000000000", None).await,
        "unknown rule",
    );
    assert_not_found(
        &api.send(
            "PUT",
            "/v1/entry-points/ep_0000000000000000",
            Some(json!({"priority": 1})),
        )
        .await,
        "update an unknown rule",
    );

    // Deletes, by either path; the agent-scoped one checks the agent.
    assert_not_found(
        &api.send("DELETE", &format!("/v1/agents/{first}/entry-points/{third}"), None)
            .await,
        "another agent's rule",
    );
    let deleted = api
        .send("DELETE", &format!("/v1/agents/{second}/entry-points/{third}"), None)
        .await;
    assert_eq!(
        (deleted.status, deleted.body.clone()),
        (200, json!({"success": true, "id": third}))
    );
    let deleted = api.send("DELETE", &format!("/v1/entry-points/{catch_all}"), None).await;
    assert_eq!(
        (deleted.status, deleted.body.clone()),
        (200, json!({"success": true, "id": catch_all}))
    );
    assert_not_found(
        &api.send("DELETE", &format!("/v1/entry-points/{catch_all}"), None).await,
        "deleted twice",
    );
    assert_eq!(
        api.ids("/v1/entry-points", "entry_points", "id").await,
        vec![rule.clone()]
    );

    // Channel defaults.
    assert_eq!(
        api.ok("GET", "/v1/entry-points/channel-defaults", None).await["channel_defaults"],
        json!([])
    );
    let set = set_default(&api, "web", &first).await["channel_default"].clone();
    assert_eq!(
        (set["channel"].clone(), set["agent_id"].clone()),
        (json!("web"), json!(first))
    );
    assert_timestamp(&set["updated_at"], "updated_at");
    set_default(&api, "landing", &first).await;
    let replaced = set_default(&api, "web", &second).await;
    assert_eq!(replaced["channel_default"]["agent_id"], json!(second));
    let defaults = api.ok("GET", "/v1/entry-points/channel-defaults", None).await["channel_defaults"].clone();
    let mut pairs: Vec<(String, String)> = defaults
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["channel"].as_str().unwrap().to_owned(),
                d["agent_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    pairs.sort();
    assert_eq!(
        pairs,
        vec![
            ("landing".to_owned(), first.clone()),
            ("web".to_owned(), second.clone())
        ],
        "one default per channel"
    );
    for (body, field) in [
        (json!({"channel": "nowhere", "agent_id": first}), "channel"),
        (
            json!({"channel": "web", "agent_id": "agt_0000000000000000"}),
            "agent_id",
        ),
        (json!({"channel": "web"}), "agent_id"),
        (json!({"agent_id": first}), "channel"),
    ] {
        let answer = api
            .send("PUT", "/v1/entry-points/channel-defaults", Some(body.clone()))
            .await;
        assert_invalid(&answer, field, &format!("default {body}"));
    }

    // Deleting an agent takes its rules and defaults with it; disconnecting a channel its default.
    api.ok("DELETE", &format!("/v1/agents/{second}"), None).await;
    assert!(api.ids("/v1/entry-points", "entry_points", "id").await.is_empty());
    assert_eq!(
        api.ids("/v1/entry-points/channel-defaults", "channel_defaults", "channel")
            .await,
        vec!["landing".to_owned()]
    );
    api.ok("DELETE", "/v1/channels/landing", None).await;
    assert_eq!(
        api.ok("GET", "/v1/entry-points/channel-defaults", None).await["channel_defaults"],
        json!([])
    );
});

on_both_databases!(the_resolver_applies_rules_by_precedence, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    api.webchat("web").await;
    api.webchat("landing").await;
    let general = api.agent("General").await;
    let implants = api.agent("Implants").await;
    let vip = api.agent("VIP").await;
    let other = api.agent("Other").await;
    let whitening = api.agent("Whitening").await;
    let offers = api.agent("Offers").await;
    let ortho = api.agent("Ortho").await;
    let endo = api.agent("Endo").await;
    set_default(&api, "web", &general).await;

    let implant_rule = create_rule(
        &api,
        &implants,
        json!({"channel": "web", "match": {"keywords": ["implant"]}, "priority": 10}),
    )
    .await;
    let vip_rule = create_rule(
        &api,
        &vip,
        json!({"channel": "web", "match": {"ref": "vip-ad"}, "priority": 20}),
    )
    .await;
    let tied_rule = create_rule(
        &api,
        &other,
        json!({"channel": "web", "match": {"keywords": ["implant"]}, "priority": 10}),
    )
    .await;
    create_rule(
        &api,
        &other,
        json!({"channel": "web", "match": {"keywords": ["price"]}, "priority": 100, "enabled": false}),
    )
    .await;
    let whitening_rule = create_rule(
        &api,
        &whitening,
        json!({"channel": "web", "match": {"keywords": ["whitening"]}, "priority": 50}),
    )
    .await;
    let offers_rule = create_rule(
        &api,
        &offers,
        json!({"channel": "web", "match": {"url_prefix": "https://clinic.example.com/offers"}, "priority": 5}),
    )
    .await;
    let ortho_rule = create_rule(
        &api,
        &ortho,
        json!({"channel": "web", "match": {"keywords": ["braces"], "ref": "ig"}, "priority": 30}),
    )
    .await;
    let endo_rule = create_rule(
        &api,
        &endo,
        json!({"channel": "web", "match": {"keywords": ["root canal"]}, "priority": 40}),
    )
    .await;
    let landing_rule = create_rule(&api, &other, json!({"channel": "landing"})).await;

    let web = |text: &str| json!({"channel": "web", "text": text});
    for (body, expected, case) in [
        (
            web("I need an Implant."),
            by_rule(&implants, &implant_rule),
            "keyword, any case; the older of two tied rules",
        ),
        (web("IMPLANT"), by_rule(&implants, &implant_rule), "upper case"),
        (
            web("Do you do implants?"),
            by_default(&general),
            "keywords are whole words",
        ),
        (web("hello"), by_default(&general), "no rule matches: the default"),
        (
            json!({"channel": "web", "text": "an implant please", "ref": "vip-ad"}),
            by_rule(&vip, &vip_rule),
            "the higher priority wins",
        ),
        (
            json!({"channel": "web", "text": "hi", "ref": "vip-ad"}),
            by_rule(&vip, &vip_rule),
            "ref equal",
        ),
        (
            json!({"channel": "web", "text": "hi", "ref": "vip-ad-2"}),
            by_default(&general),
            "ref is not a prefix",
        ),
        (
            web("what is the price?"),
            by_default(&general),
            "a disabled rule is skipped",
        ),
        (
            web("Teeth whitening, please"),
            by_rule(&whitening, &whitening_rule),
            "an active agent's rule",
        ),
        (
            json!({"channel": "web", "text": "hi", "url": "https://clinic.example.com/offers/spring"}),
            by_rule(&offers, &offers_rule),
            "url prefix",
        ),
        (
            json!({"channel": "web", "text": "hi", "url": "https://clinic.example.com/about"}),
            by_default(&general),
            "url outside the prefix",
        ),
        (
            web("braces?"),
            by_default(&general),
            "every criterion must hold: keyword without ref",
        ),
        (
            json!({"channel": "web", "text": "hello", "ref": "ig"}),
            by_default(&general),
            "every criterion must hold: ref without keyword",
        ),
        (
            json!({"channel": "web", "text": "Braces for my son", "ref": "ig"}),
            by_rule(&ortho, &ortho_rule),
            "both criteria",
        ),
        (
            web("I think I need a ROOT CANAL"),
            by_rule(&endo, &endo_rule),
            "a phrase",
        ),
        (
            web("root and canal"),
            by_default(&general),
            "a phrase matches only as a phrase",
        ),
        (
            json!({"channel": "landing", "text": "anything at all"}),
            by_rule(&other, &landing_rule),
            "a rule without criteria takes its whole channel",
        ),
        (
            json!({"channel": "landing"}),
            by_rule(&other, &landing_rule),
            "even with no text",
        ),
        (
            json!({"channel": "nowhere", "text": "implant"}),
            not_connected(),
            "unknown channel",
        ),
    ] {
        assert_eq!(resolve(&api, body.clone()).await, expected, "{case}: {body}");
    }

    // Precedence follows updates.
    api.ok(
        "PUT",
        &format!("/v1/entry-points/{tied_rule}"),
        Some(json!({"priority": 11})),
    )
    .await;
    assert_eq!(
        resolve(&api, web("implant")).await,
        by_rule(&other, &tied_rule),
        "raised above the older rule"
    );
    api.ok(
        "PUT",
        &format!("/v1/entry-points/{tied_rule}"),
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(
        resolve(&api, web("implant")).await,
        by_rule(&implants, &implant_rule),
        "disabled: the next rule"
    );

    // A paused agent's rules are skipped; active again, they match again.
    api.ok(
        "PUT",
        &format!("/v1/agents/{whitening}"),
        Some(json!({"status": "paused"})),
    )
    .await;
    assert_eq!(resolve(&api, web("whitening")).await, by_default(&general));
    api.ok(
        "PUT",
        &format!("/v1/agents/{whitening}"),
        Some(json!({"status": "active"})),
    )
    .await;
    assert_eq!(
        resolve(&api, web("whitening")).await,
        by_rule(&whitening, &whitening_rule)
    );

    // A deleted rule no longer matches.
    api.ok("DELETE", &format!("/v1/entry-points/{endo_rule}"), None).await;
    assert_eq!(resolve(&api, web("root canal")).await, by_default(&general));

    // Without the default (its agent deleted), what no rule takes has no route.
    api.ok("DELETE", &format!("/v1/agents/{general}"), None).await;
    assert_eq!(resolve(&api, web("hello")).await, no_route());
    assert_eq!(
        resolve(&api, web("implant")).await,
        by_rule(&implants, &implant_rule),
        "rules still apply"
    );
    set_default(&api, "web", &vip).await;
    assert_eq!(resolve(&api, web("hello")).await, by_default(&vip));

    // A disconnected channel routes nothing; its rules match again when it is connected again.
    api.ok("DELETE", "/v1/channels/landing", None).await;
    assert_eq!(
        resolve(&api, json!({"channel": "landing", "text": "hi"})).await,
        not_connected()
    );
    api.webchat("landing").await;
    assert_eq!(
        resolve(&api, json!({"channel": "landing", "text": "hi"})).await,
        by_rule(&other, &landing_rule)
    );

    // Another account's rules and defaults play no part.
    let stranger = Platform::new(&server).await;
    assert_eq!(resolve(&stranger, web("implant")).await, not_connected());
    stranger.webchat("web").await;
    assert_eq!(resolve(&stranger, web("implant")).await, no_route());
});

on_both_databases!(a_new_agent_answers_nothing_until_routed, |db: Db| async move {
    let server = Server::start(&db, &[]).await;

    // Through a channel default.
    let api = Platform::new(&server).await;
    api.webchat("web").await;
    let agent = api.agent("Brand new").await;
    let hello = json!({"channel": "web", "text": "Hello, are you open today?"});
    assert_eq!(resolve(&api, hello.clone()).await, no_route());
    set_default(&api, "web", &agent).await;
    assert_eq!(resolve(&api, hello.clone()).await, by_default(&agent));

    // Through an entry point, on a fresh account.
    let fresh = Platform::new(&server).await;
    fresh.webchat("web").await;
    let agent = fresh.agent("Brand new too").await;
    assert_eq!(resolve(&fresh, hello.clone()).await, no_route());
    let rule = create_rule(&fresh, &agent, json!({"channel": "web"})).await;
    assert_eq!(resolve(&fresh, hello.clone()).await, by_rule(&agent, &rule));

    // A channel that is not connected says so, whatever the agents.
    assert_eq!(
        resolve(&fresh, json!({"channel": "sms", "text": "hi"})).await,
        not_connected()
    );
});

on_both_databases!(routing_over_grpc, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let (_, key) = admin::account(&server, "growth", 10_000).await;
    let mut agents = AgentsClient::connect(server.grpc.clone()).await.unwrap();
    let mut channels = ChannelsClient::connect(server.grpc.clone()).await.unwrap();
    let mut entry_points = EntryPointsClient::connect(server.grpc.clone()).await.unwrap();

    let connected = channels
        .connect_channel(authed(
            &key,
            ConnectChannelRequest {
                name: "sms".into(),
                r#type: "sms".into(),
                provider: String::new(),
                config: HashMap::from([
                    ("account_sid".to_owned(), "AC0123".to_owned()),
                    ("auth_token".to_owned(), TWILIO_TOKEN.to_owned()),
                    ("from_number".to_owned(), "+15550001111".to_owned()),
                ]),
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .channel
        .unwrap();
    assert_eq!(
        (connected.provider.as_str(), connected.configured_keys.clone()),
        (
            "twilio",
            vec![
                "account_sid".to_owned(),
                "auth_token".to_owned(),
                "from_number".to_owned()
            ]
        )
    );
    assert!(!format!("{connected:?}").contains(TWILIO_TOKEN));
    let missing_key = channels
        .connect_channel(authed(
            &key,
            ConnectChannelRequest {
                name: "wa".into(),
                r#type: "whatsapp".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(missing_key.code(), Code::InvalidArgument);
    let listed = channels
        .list_channels(authed(&key, ListChannelsRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        listed.channels.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["sms"]
    );
    assert!(!format!("{listed:?}").contains(TWILIO_TOKEN));

    let new_agent = |name: &str| CreateAgentRequest {
        name: name.to_owned(),
        ..Default::default()
    };
    let keyword_agent = agents
        .create_agent(authed(&key, new_agent("Keywords")))
        .await
        .unwrap()
        .into_inner()
        .agent
        .unwrap()
        .id;
    let default_agent = agents
        .create_agent(authed(&key, new_agent("Default")))
        .await
        .unwrap()
        .into_inner()
        .agent
        .unwrap()
        .id;

    let rule = entry_points
        .create_entry_point(authed(
            &key,
            CreateEntryPointRequest {
                agent_id: keyword_agent.clone(),
                channel: "sms".into(),
                r#match: Some(EntryPointMatch {
                    keywords: vec!["book".into()],
                    ..Default::default()
                }),
                priority: 3,
                enabled: None,
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .entry_point
        .unwrap();
    assert!(rule.id.starts_with("ep_"));
    assert!(rule.enabled, "enabled by default");
    let unknown_channel = entry_points
        .create_entry_point(authed(
            &key,
            CreateEntryPointRequest {
                agent_id: keyword_agent.clone(),
                channel: "nowhere".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(unknown_channel.code(), Code::InvalidArgument);
    let listed = entry_points
        .list_entry_points(authed(
            &key,
            ListEntryPointsRequest {
                agent_id: keyword_agent.clone(),
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.entry_points, vec![rule.clone()]);

    let resolve = |text: &str| ResolveRequest {
        channel: "sms".into(),
        text: text.to_owned(),
        ..Default::default()
    };
    let resolved = entry_points
        .resolve(authed(&key, resolve("I want to book a visit")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            resolved.agent_id.as_deref(),
            resolved.entry_point_id.as_deref(),
            resolved.reason.as_str()
        ),
        (Some(keyword_agent.as_str()), Some(rule.id.as_str()), "entry_point")
    );
    let unrouted = entry_points
        .resolve(authed(&key, resolve("hello")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (unrouted.agent_id, unrouted.entry_point_id, unrouted.reason.as_str()),
        (None, None, "no_route")
    );

    let set = entry_points
        .set_channel_default(authed(
            &key,
            SetChannelDefaultRequest {
                channel: "sms".into(),
                agent_id: default_agent.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .channel_default
        .unwrap();
    assert_eq!(
        (set.channel.as_str(), set.agent_id.as_str()),
        ("sms", default_agent.as_str())
    );
    let bad_default = entry_points
        .set_channel_default(authed(
            &key,
            SetChannelDefaultRequest {
                channel: "sms".into(),
                agent_id: "agt_0000000000000000".into(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(bad_default.code(), Code::InvalidArgument);
    let defaults = entry_points
        .list_channel_defaults(authed(&key, ListChannelDefaultsRequest {}))
        .await
        .unwrap()
        .into_inner()
        .channel_defaults;
    assert_eq!(defaults.len(), 1);
    let defaulted = entry_points
        .resolve(authed(&key, resolve("hello")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            defaulted.agent_id.as_deref(),
            defaulted.entry_point_id,
            defaulted.reason.as_str()
        ),
        (Some(default_agent.as_str()), None, "channel_default")
    );
    let unauthenticated = entry_points.resolve(resolve("hello")).await.unwrap_err();
    assert_eq!(unauthenticated.code(), Code::Unauthenticated);
});

on_both_databases!(
    routing_is_isolated_and_agencies_act_on_sub_accounts,
    |db: Db| async move {
        let server = Server::start(&db, &[]).await;
        let a = Platform::new(&server).await;
        let b = Platform::new(&server).await;
        a.webchat("web").await;
        b.webchat("web").await;
        let a_agent = a.agent("A").await;
        let b_agent = b.agent("B").await;
        let a_rule = create_rule(&a, &a_agent, json!({"channel": "web"})).await;
        set_default(&a, "web", &a_agent).await;

        for (method, path, body) in [
            ("GET", format!("/v1/entry-points/{a_rule}"), None),
            (
                "PUT",
                format!("/v1/entry-points/{a_rule}"),
                Some(json!({"priority": 9})),
            ),
            ("DELETE", format!("/v1/entry-points/{a_rule}"), None),
            ("DELETE", format!("/v1/agents/{a_agent}/entry-points/{a_rule}"), None),
            ("GET", format!("/v1/agents/{a_agent}/entry-points"), None),
            (
                "POST",
                format!("/v1/agents/{a_agent}/entry-points"),
                Some(json!({"channel": "web"})),
            ),
        ] {
            assert_not_found(&b.send(method, &path, body).await, &format!("B {method} {path}"));
        }
        let answer = b
            .send(
                "PUT",
                "/v1/entry-points/channel-defaults",
                Some(json!({"channel": "web", "agent_id": a_agent})),
            )
            .await;
        assert_invalid(&answer, "agent_id", "B's default pointing at A's agent");
        let answer = b
            .send(
                "PUT",
                &format!("/v1/entry-points/{a_rule}"),
                Some(json!({"agent_id": b_agent})),
            )
            .await;
        assert_not_found(&answer, "B moving A's rule");
        assert!(b.ids("/v1/entry-points", "entry_points", "id").await.is_empty());
        assert!(
            b.ok("GET", "/v1/entry-points/channel-defaults", None).await["channel_defaults"]
                .as_array()
                .unwrap()
                .is_empty()
        );
        assert_eq!(b.ids("/v1/channels", "channels", "name").await, vec!["web".to_owned()]);
        assert_eq!(
            resolve(&b, json!({"channel": "web", "text": "hi"})).await,
            no_route(),
            "A's routing is A's"
        );
        assert_eq!(
            resolve(&a, json!({"channel": "web", "text": "hi"})).await,
            by_rule(&a_agent, &a_rule)
        );
        assert_not_found(&b.send("DELETE", "/v1/channels/ig", None).await, "no such channel");

        // An agency routes for its sub-account.
        let (agency, child) = agency_and_child(&server).await;
        let child_id = child.account_id.clone();
        agency
            .ok(
                "POST",
                &format!("/v1/channels?sub_account_id={child_id}"),
                Some(json!({"name": "clinic-web", "type": "webchat"})),
            )
            .await;
        let clinic_agent = agency
            .ok(
                "POST",
                "/v1/agents",
                Some(json!({"name": "Clinic", "sub_account_id": child_id})),
            )
            .await["agent"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        agency
            .ok(
                "PUT",
                "/v1/entry-points/channel-defaults",
                Some(json!({"channel": "clinic-web", "agent_id": clinic_agent, "sub_account_id": child_id})),
            )
            .await;
        assert_eq!(
            child.ids("/v1/channels", "channels", "name").await,
            vec!["clinic-web".to_owned()]
        );
        assert_eq!(
            resolve(&child, json!({"channel": "clinic-web", "text": "hi"})).await,
            by_default(&clinic_agent)
        );
        assert!(
            agency.ids("/v1/channels", "channels", "name").await.is_empty(),
            "not the agency's own"
        );
        let via_agency = agency
            .ok(
                "POST",
                &format!("/v1/entry-points/resolve?sub_account_id={child_id}"),
                Some(json!({"channel": "clinic-web", "text": "hi"})),
            )
            .await;
        assert_eq!(via_agency["agent_id"], json!(clinic_agent));
        let answer = agency
            .send(
                "GET",
                &format!("/v1/entry-points?sub_account_id={}", a.account_id),
                None,
            )
            .await;
        assert_insufficient_scope(&answer, "not its child");
    }
);
