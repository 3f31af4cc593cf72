//! Broadcasts and the deprecated campaigns facade over REST and gRPC against the real binary, on SQLite and
//! PostgreSQL: the broadcast lifecycle (draft, scheduled, cancelled) and its validation; campaigns made and
//! read as agents, channel defaults and broadcasts; the deprecation headers on every campaign answer, errors
//! included; the sunset (410 `gone`) driven by the admin test clock; and tenant isolation with agencies acting
//! on their sub-accounts.

use chrono::{SecondsFormat, TimeZone, Utc};
use frontdesk_api::{
    admin::v1::SetTestClockRequest,
    v1::{
        Audience, CancelBroadcastRequest, CreateBroadcastRequest, GetCampaignRequest, ListBroadcastsRequest,
        ListCampaignsRequest, broadcasts_client::BroadcastsClient, campaigns_client::CampaignsClient,
    },
};
use frontdesk_tests::{
    Answer, Db, Server, admin, call_with, on_both_databases,
    platform::{
        Platform, agency_and_child, assert_id, assert_insufficient_scope, assert_invalid, assert_not_found,
        assert_timestamp, authed,
    },
};
use serde_json::{Value, json};
use tonic::Code;

const SUNSET: &str = "Thu, 31 Dec 2026 23:59:59 GMT";

const PHONE: &str = "+919812345678";

/// A campaign call: whatever it answers carries the deprecation headers.
async fn facade(api: &Platform<'_>, method: &str, path: &str, body: Option<Value>) -> Answer {
    let answer = api.send(method, path, body).await;
    assert_deprecated(&answer, &format!("{method} {path}"));
    answer
}

/// A campaign call that must answer 200; the campaign (or the list's body).
async fn facade_ok(api: &Platform<'_>, method: &str, path: &str, body: Option<Value>) -> Value {
    let answer = facade(api, method, path, body).await;
    assert_eq!(answer.status, 200, "{method} {path}: {}", answer.body);
    assert_eq!(answer.body["success"], true);
    answer.body
}

/// An SMS channel on Twilio.
async fn sms(api: &Platform<'_>, name: &str) {
    api.ok(
        "POST",
        "/v1/channels",
        Some(json!({"name": name, "type": "sms", "config": {
            "account_sid": "AC0123456789", "auth_token": "tok_twilio", "from_number": "+15550001111"
        }})),
    )
    .await;
}

async fn create_broadcast(api: &Platform<'_>, body: Value) -> Value {
    api.ok("POST", "/v1/broadcasts", Some(body)).await["broadcast"].clone()
}

async fn listed_ids(api: &Platform<'_>, path: &str, key: &str) -> Vec<String> {
    api.ok("GET", path, None).await[key]
        .as_array()
        .unwrap_or_else(|| panic!("{path}: no {key}"))
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The first page of campaigns (every test here has fewer than 50).
async fn campaigns(api: &Platform<'_>, query: &str) -> Vec<Value> {
    facade_ok(api, "GET", &format!("/v1/campaigns{query}"), None).await["campaigns"]
        .as_array()
        .unwrap()
        .clone()
}

/// `Deprecation`, `Sunset` and a successor `Link`.
fn assert_deprecated(answer: &Answer, case: &str) {
    assert_eq!(
        answer.header("deprecation"),
        Some("true"),
        "{case}: {:?}",
        answer.headers
    );
    assert_eq!(answer.header("sunset"), Some(SUNSET), "{case}");
    let link = answer
        .header("link")
        .unwrap_or_else(|| panic!("{case}: a Link header: {:?}", answer.headers));
    assert!(link.contains(r#"rel="successor-version""#), "{case}: {link}");
}

/// Now plus `days`, RFC 3339 to the second with `Z` (as the service answers it).
fn in_days(days: i64) -> String {
    (Utc::now() + chrono::Duration::days(days)).to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn audience_with_defaults(phones: &[&str]) -> Value {
    json!({"contact_ids": [], "tags": [], "phones": phones})
}

on_both_databases!(
    broadcasts_are_drafted_scheduled_changed_and_cancelled,
    |db: Db| async move {
        let server = Server::start(&db, &[]).await;
        let api = Platform::new(&server).await;
        sms(&api, "sms").await;
        let agent = api.agent("Replies").await;
        let vip = api
            .ok("POST", "/v1/contacts", Some(json!({"name": "Vip", "tags": ["vip"]})))
            .await["contact"]["id"]
            .clone();
        let audience = json!({"contact_ids": [vip], "tags": ["vip"], "phones": [PHONE]});

        let draft = create_broadcast(
            &api,
            json!({
                "name": "Diwali offer",
                "agent_id": agent,
                "channel": "sms",
                "audience": audience,
                "opener": "Happy Diwali! 20% off cleanings this week."
            }),
        )
        .await;
        assert_id(&draft["id"], "brd_");
        assert_eq!(
            (
                draft["name"].clone(),
                draft["agent_id"].clone(),
                draft["channel"].clone(),
                draft["audience"].clone(),
                draft["opener"].clone()
            ),
            (
                json!("Diwali offer"),
                json!(agent),
                json!("sms"),
                audience.clone(),
                json!("Happy Diwali! 20% off cleanings this week.")
            )
        );
        assert_eq!(
            (draft["send_at"].clone(), draft["status"].clone()),
            (Value::Null, json!("draft")),
            "no send_at: a draft"
        );
        for stat in ["total", "sent", "delivered", "read", "failed", "replied"] {
            assert!(
                draft["stats"][stat].is_i64(),
                "stats.{stat} is a number: {}",
                draft["stats"]
            );
        }
        assert_eq!(draft["stats"]["sent"], 0);
        assert_timestamp(&draft["created_at"], "created_at");
        assert_timestamp(&draft["updated_at"], "updated_at");
        let draft_id = draft["id"].as_str().unwrap().to_owned();
        assert_eq!(
            api.ok("GET", &format!("/v1/broadcasts/{draft_id}"), None).await["broadcast"],
            draft
        );

        let send_at = in_days(7);
        let scheduled = create_broadcast(
            &api,
            json!({
                "name": "Recall",
                "agent_id": agent,
                "channel": "sms",
                "audience": {"phones": [PHONE, "+14155550100"]},
                "opener": "Time for your checkup!",
                "send_at": send_at
            }),
        )
        .await;
        assert_eq!(
            (scheduled["status"].clone(), scheduled["send_at"].clone()),
            (json!("scheduled"), json!(send_at))
        );
        assert_eq!(scheduled["audience"], audience_with_defaults(&[PHONE, "+14155550100"]));
        let scheduled_id = scheduled["id"].as_str().unwrap().to_owned();

        // Validation.
        let valid =
            json!({"name": "V", "agent_id": agent, "channel": "sms", "audience": {"phones": [PHONE]}, "opener": "Hi"});
        let with = |key: &str, value: Value| {
            let mut body = valid.clone();
            body[key] = value;
            body
        };
        let without = |key: &str| {
            let mut body = valid.clone();
            body.as_object_mut().unwrap().remove(key);
            body
        };
        for (body, field) in [
            (with("send_at", json!(in_days(-1))), "send_at"),
            (with("audience", json!({})), "audience"),
            (
                with("audience", json!({"contact_ids": [], "tags": [], "phones": []})),
                "audience",
            ),
            (without("audience"), "audience"),
            (with("opener", json!("")), "opener"),
            (without("opener"), "opener"),
            (with("agent_id", json!("agt_0000000000000000")), "agent_id"),
            (without("agent_id"), "agent_id"),
            (with("channel", json!("nowhere")), "channel"),
            (without("channel"), "channel"),
        ] {
            let answer = api.send("POST", "/v1/broadcasts", Some(body.clone())).await;
            assert_invalid(&answer, field, &body.to_string());
        }
        for body in [
            with("audience", json!({"phones": ["98123"]})),
            with("audience", json!({"phones": ["+91 98123 45678"]})),
            with("send_at", json!("next tuesday")),
            with("colour", json!("red")),
        ] {
            let answer = api.send("POST", "/v1/broadcasts", Some(body.clone())).await;
            assert_eq!(answer.status, 400, "{body}: {}", answer.body);
        }

        // Lists, newest first, filtered by status.
        assert_eq!(
            listed_ids(&api, "/v1/broadcasts", "broadcasts").await,
            vec![scheduled_id.clone(), draft_id.clone()],
            "refused broadcasts are not stored"
        );
        assert_eq!(
            listed_ids(&api, "/v1/broadcasts?status=draft", "broadcasts").await,
            vec![draft_id.clone()]
        );
        assert_eq!(
            listed_ids(&api, "/v1/broadcasts?status=scheduled", "broadcasts").await,
            vec![scheduled_id.clone()]
        );
        let page = api.ok("GET", "/v1/broadcasts?limit=1", None).await;
        let cursor = page["next_cursor"].as_str().expect("a second page");
        assert_eq!(
            listed_ids(&api, &format!("/v1/broadcasts?limit=1&cursor={cursor}"), "broadcasts").await,
            vec![draft_id.clone()]
        );

        // PATCH is partial; a send_at schedules a draft.
        let later = in_days(3);
        let patched = api
            .ok(
                "PATCH",
                &format!("/v1/broadcasts/{draft_id}"),
                Some(json!({"send_at": later})),
            )
            .await["broadcast"]
            .clone();
        assert_eq!(
            (patched["status"].clone(), patched["send_at"].clone()),
            (json!("scheduled"), json!(later))
        );
        for kept in ["name", "agent_id", "channel", "audience", "opener", "created_at"] {
            assert_eq!(patched[kept], draft[kept], "PATCH kept {kept}");
        }
        let reworded = api
            .ok(
                "PATCH",
                &format!("/v1/broadcasts/{draft_id}"),
                Some(json!({"opener": "Happy Diwali! 25% off."})),
            )
            .await["broadcast"]
            .clone();
        assert_eq!(
            (
                reworded["opener"].clone(),
                reworded["send_at"].clone(),
                reworded["status"].clone()
            ),
            (json!("Happy Diwali! 25% off."), json!(later), json!("scheduled"))
        );
        for (body, field) in [
            (json!({"send_at": in_days(-2)}), "send_at"),
            (json!({"opener": ""}), "opener"),
            (json!({"agent_id": "agt_0000000000000000"}), "agent_id"),
            (json!({"channel": "nowhere"}), "channel"),
        ] {
            let answer = api
                .send("PATCH", &format!("/v1/broadcasts/{draft_id}"), Some(body.clone()))
                .await;
            assert_invalid(&answer, field, &format!("PATCH {body}"));
        }
        assert_not_found(
            &api.send(
                "PATCH",
                "/v1/broadcasts/brd_0000000000000000",
                Some(json!({"opener": "x"})),
            )
            .await,
            "PATCH an unknown broadcast",
        );
        assert_not_found(
            &api.send("GET", "/v1/broadcasts/brd_0000000000000000", None).await,
            "GET an unknown broadcast",
        );

        // Cancel; a cancelled broadcast cannot change, and cancelling it again answers it as it is.
        let cancelled = api
            .ok("POST", &format!("/v1/broadcasts/{scheduled_id}/cancel"), None)
            .await["broadcast"]
            .clone();
        assert_eq!(cancelled["status"], "cancelled");
        assert_eq!(cancelled["opener"], "Time for your checkup!");
        let refused = api
            .send(
                "PATCH",
                &format!("/v1/broadcasts/{scheduled_id}"),
                Some(json!({"opener": "Too late"})),
            )
            .await;
        assert_eq!((refused.status, refused.code()), (409, "aborted"), "{}", refused.body);
        let again = api
            .ok(
                "POST",
                &format!("/v1/broadcasts/{scheduled_id}/cancel"),
                Some(json!({})),
            )
            .await["broadcast"]
            .clone();
        assert_eq!(
            (again["status"].clone(), again["opener"].clone()),
            (json!("cancelled"), json!("Time for your checkup!"))
        );
        assert_eq!(
            listed_ids(&api, "/v1/broadcasts?status=cancelled", "broadcasts").await,
            vec![scheduled_id.clone()]
        );
        assert_not_found(
            &api.send("POST", "/v1/broadcasts/brd_0000000000000000/cancel", None)
                .await,
            "cancel an unknown broadcast",
        );

        // An agent with an unfinished broadcast cannot be deleted.
        let busy = api.send("DELETE", &format!("/v1/agents/{agent}"), None).await;
        assert_eq!(
            (busy.status, busy.code()),
            (400, "failed_precondition"),
            "{}",
            busy.body
        );
        assert_eq!(
            api.ok("GET", &format!("/v1/agents/{agent}"), None).await["agent"]["id"],
            json!(agent)
        );
        api.ok("POST", &format!("/v1/broadcasts/{draft_id}/cancel"), None).await;
        let freed = api.send("DELETE", &format!("/v1/agents/{agent}"), None).await;
        assert_eq!(
            freed.status, 200,
            "only cancelled broadcasts use it now: {}",
            freed.body
        );
        assert!(
            freed.header("deprecation").is_none(),
            "only campaign calls are deprecated"
        );

        // A key without the broadcasts section; the test clock without FRONTDESK_TEST_CLOCK.
        let deals_only = admin::issue_key(&server, &api.account_id, &["deals"]).await;
        let answer = call_with(
            "GET",
            &server.url("/v1/broadcasts"),
            &[("x-api-key", &deals_only)],
            None,
        )
        .await;
        assert_insufficient_scope(&answer, "a key without the broadcasts section");
        let refused = admin::set_test_clock(
            &server,
            Some(prost_types::Timestamp {
                seconds: Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap().timestamp(),
                nanos: 0,
            }),
        )
        .await
        .unwrap_err();
        assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    }
);

on_both_databases!(campaigns_are_a_facade_over_agents_and_broadcasts, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    api.webchat("web").await;
    sms(&api, "sms").await;

    // Incoming: an agent that is the channel's default.
    let incoming = facade_ok(
        &api,
        "POST",
        "/v1/campaigns",
        Some(json!({"name": "Walk-ins", "type": "Incoming", "channel": "web", "instructions": "Greet walk-ins."})),
    )
    .await["campaign"]
        .clone();
    assert_id(&incoming["id"], "agt_");
    assert_eq!(
        incoming["agent_id"], incoming["id"],
        "an Incoming campaign is its agent"
    );
    assert_eq!(
        (
            incoming["name"].clone(),
            incoming["type"].clone(),
            incoming["broadcast_id"].clone(),
            incoming["channel"].clone(),
            incoming["instructions"].clone(),
            incoming["opener"].clone(),
            incoming["status"].clone()
        ),
        (
            json!("Walk-ins"),
            json!("Incoming"),
            Value::Null,
            json!("web"),
            json!("Greet walk-ins."),
            json!(""),
            json!("active")
        )
    );
    assert_timestamp(&incoming["created_at"], "created_at");
    let incoming_id = incoming["id"].as_str().unwrap().to_owned();
    let agent = api.ok("GET", &format!("/v1/agents/{incoming_id}"), None).await;
    assert_eq!(
        (agent["agent"]["name"].clone(), agent["agent"]["instructions"].clone()),
        (json!("Walk-ins"), json!("Greet walk-ins."))
    );
    let resolved = api
        .ok(
            "POST",
            "/v1/entry-points/resolve",
            Some(json!({"channel": "web", "text": "hello"})),
        )
        .await;
    assert_eq!(
        (resolved["agent_id"].clone(), resolved["reason"].clone()),
        (json!(incoming_id), json!("channel_default"))
    );

    // Outgoing: a broadcast with a new agent to answer replies.
    let send_at = in_days(5);
    let outgoing = facade_ok(
        &api,
        "POST",
        "/v1/campaigns",
        Some(json!({
            "name": "Recall",
            "type": "Outgoing",
            "channel": "sms",
            "instructions": "Book checkups.",
            "opener": "Time for your checkup!",
            "audience": {"phones": [PHONE]},
            "send_at": send_at
        })),
    )
    .await["campaign"]
        .clone();
    assert_id(&outgoing["id"], "brd_");
    assert_eq!(
        outgoing["broadcast_id"], outgoing["id"],
        "an Outgoing campaign is its broadcast"
    );
    assert_id(&outgoing["agent_id"], "agt_");
    assert_eq!(
        (
            outgoing["type"].clone(),
            outgoing["channel"].clone(),
            outgoing["opener"].clone(),
            outgoing["audience"].clone(),
            outgoing["send_at"].clone(),
            outgoing["status"].clone()
        ),
        (
            json!("Outgoing"),
            json!("sms"),
            json!("Time for your checkup!"),
            audience_with_defaults(&[PHONE]),
            json!(send_at),
            json!("scheduled")
        )
    );
    let outgoing_id = outgoing["id"].as_str().unwrap().to_owned();
    let outgoing_agent = outgoing["agent_id"].as_str().unwrap().to_owned();
    let broadcast = api.ok("GET", &format!("/v1/broadcasts/{outgoing_id}"), None).await["broadcast"].clone();
    assert_eq!(
        (
            broadcast["agent_id"].clone(),
            broadcast["channel"].clone(),
            broadcast["opener"].clone(),
            broadcast["status"].clone()
        ),
        (
            json!(outgoing_agent),
            json!("sms"),
            json!("Time for your checkup!"),
            json!("scheduled")
        )
    );
    assert_eq!(
        api.ok("GET", &format!("/v1/agents/{outgoing_agent}"), None).await["agent"]["instructions"],
        "Book checkups."
    );

    // Outgoing with an existing agent, no send_at: a draft.
    let own_agent = api.agent("Reply desk").await;
    api.ok(
        "POST",
        "/v1/contacts",
        Some(json!({"name": "Reader", "tags": ["newsletter"]})),
    )
    .await;
    let drafted = facade_ok(
        &api,
        "POST",
        "/v1/campaigns",
        Some(json!({
            "name": "Newsletter", "type": "Outgoing", "channel": "sms", "agent_id": own_agent,
            "opener": "News!", "audience": {"tags": ["newsletter"]}
        })),
    )
    .await["campaign"]
        .clone();
    assert_eq!(
        (
            drafted["agent_id"].clone(),
            drafted["status"].clone(),
            drafted["send_at"].clone()
        ),
        (json!(own_agent), json!("draft"), Value::Null)
    );

    // Combined: the channel's default agent, with a broadcast.
    let combined = facade_ok(
        &api,
        "POST",
        "/v1/campaigns",
        Some(json!({
            "name": "Both ways", "type": "Combined", "channel": "sms", "instructions": "Help.",
            "opener": "Hello from the clinic", "audience": {"phones": [PHONE]}
        })),
    )
    .await["campaign"]
        .clone();
    assert_eq!(combined["agent_id"], combined["id"]);
    assert_eq!(combined["type"], "Combined");
    let combined_broadcast = combined["broadcast_id"]
        .as_str()
        .expect("a Combined campaign with an audience has a broadcast");
    assert_eq!(
        api.ok("GET", &format!("/v1/broadcasts/{combined_broadcast}"), None)
            .await["broadcast"]["agent_id"],
        combined["id"]
    );

    // Bad campaigns: every error still carries the deprecation headers.
    for (body, field) in [
        (json!({"name": "X", "type": "Inbound", "channel": "web"}), "type"),
        (json!({"name": "X", "channel": "web"}), "type"),
        (json!({"type": "Incoming", "channel": "web"}), "name"),
        (json!({"name": "X", "type": "Incoming"}), "channel"),
        (
            json!({"name": "X", "type": "Incoming", "channel": "nowhere"}),
            "channel",
        ),
        (
            json!({"name": "X", "type": "Outgoing", "channel": "sms", "audience": {"phones": [PHONE]}}),
            "opener",
        ),
        (
            json!({"name": "X", "type": "Outgoing", "channel": "sms", "opener": "Hi"}),
            "audience",
        ),
        (
            json!({"name": "X", "type": "Outgoing", "channel": "sms", "opener": "Hi",
                   "audience": {"phones": [PHONE]}, "send_at": in_days(-1)}),
            "send_at",
        ),
    ] {
        let answer = facade(&api, "POST", "/v1/campaigns", Some(body.clone())).await;
        assert_invalid(&answer, field, &body.to_string());
    }
    let unknown = facade(
        &api,
        "POST",
        "/v1/campaigns",
        Some(json!({"name": "X", "type": "Incoming", "channel": "web", "colour": "red"})),
    )
    .await;
    assert_eq!(unknown.status, 400);
    assert_not_found(
        &facade(&api, "GET", "/v1/campaigns/agt_0000000000000000", None).await,
        "unknown campaign",
    );
    assert_not_found(
        &facade(
            &api,
            "PUT",
            "/v1/campaigns/brd_0000000000000000",
            Some(json!({"instructions": "x"})),
        )
        .await,
        "update an unknown campaign",
    );
    let anonymous = call_with("GET", &server.url("/v1/campaigns"), &[], None).await;
    assert_eq!((anonymous.status, anonymous.code()), (401, "unauthenticated"));
    assert_deprecated(&anonymous, "401");
    let deals_only = admin::issue_key(&server, &api.account_id, &["deals"]).await;
    let forbidden = call_with("GET", &server.url("/v1/campaigns"), &[("x-api-key", &deals_only)], None).await;
    assert_insufficient_scope(&forbidden, "a deals-only key on the campaigns facade");
    assert_deprecated(&forbidden, "403");

    // Reads show what the new APIs made, too.
    let direct_agent = api.agent("Made directly").await;
    let direct_broadcast = create_broadcast(
        &api,
        json!({"agent_id": direct_agent, "channel": "sms", "audience": {"phones": [PHONE]}, "opener": "Hi there"}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let listed = campaigns(&api, "").await;
    let find = |id: &str| {
        listed
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("{id} is listed as a campaign: {listed:?}"))
            .clone()
    };
    for id in [&incoming_id, &outgoing_id, &direct_agent, &direct_broadcast] {
        find(id);
    }
    // An agent that an Outgoing campaign only reuses stays a campaign of its own; the agent the facade made for
    // an Outgoing campaign reads as part of it. Nothing is listed twice.
    assert_eq!(find(&own_agent)["type"], "Incoming");
    assert!(
        listed.iter().all(|c| c["id"] != outgoing_agent.as_str()),
        "{outgoing_agent} is part of {outgoing_id}: {listed:?}"
    );
    let mut ids: Vec<&str> = listed.iter().map(|c| c["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    let listed_once = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), listed_once, "{listed:?}");
    let as_campaign = find(&direct_agent);
    assert_eq!(
        (
            as_campaign["type"].clone(),
            as_campaign["agent_id"].clone(),
            as_campaign["broadcast_id"].clone()
        ),
        (json!("Incoming"), json!(direct_agent), Value::Null)
    );
    let as_campaign = find(&direct_broadcast);
    assert_eq!(
        (
            as_campaign["type"].clone(),
            as_campaign["agent_id"].clone(),
            as_campaign["broadcast_id"].clone()
        ),
        (json!("Outgoing"), json!(direct_agent), json!(direct_broadcast))
    );
    assert_eq!(find(&incoming_id)["type"], "Incoming");
    let got = facade_ok(&api, "GET", &format!("/v1/campaigns/{direct_agent}"), None).await["campaign"].clone();
    assert_eq!(
        (got["type"].clone(), got["name"].clone()),
        (json!("Incoming"), json!("Made directly"))
    );
    let got = facade_ok(&api, "GET", &format!("/v1/campaigns/{outgoing_id}"), None).await["campaign"].clone();
    assert_eq!(
        (got["type"].clone(), got["agent_id"].clone(), got["opener"].clone()),
        (
            json!("Outgoing"),
            json!(outgoing_agent),
            json!("Time for your checkup!")
        )
    );
    let page = facade_ok(&api, "GET", "/v1/campaigns?limit=1", None).await;
    assert_eq!(page["campaigns"].as_array().unwrap().len(), 1);
    assert!(page["next_cursor"].is_string(), "{}", page);

    // Updates land on the agent and the broadcast.
    let updated = facade_ok(
        &api,
        "PUT",
        &format!("/v1/campaigns/{incoming_id}"),
        Some(json!({"instructions": "Greet walk-ins warmly."})),
    )
    .await["campaign"]
        .clone();
    assert_eq!(
        (
            updated["instructions"].clone(),
            updated["name"].clone(),
            updated["channel"].clone()
        ),
        (json!("Greet walk-ins warmly."), json!("Walk-ins"), json!("web"))
    );
    let agent = api.ok("GET", &format!("/v1/agents/{incoming_id}"), None).await["agent"].clone();
    assert_eq!(
        (agent["instructions"].clone(), agent["name"].clone()),
        (json!("Greet walk-ins warmly."), json!("Walk-ins"))
    );
    facade_ok(
        &api,
        "PUT",
        &format!("/v1/campaigns/{outgoing_id}"),
        Some(json!({"opener": "Your checkup is due!"})),
    )
    .await;
    assert_eq!(
        api.ok("GET", &format!("/v1/broadcasts/{outgoing_id}"), None).await["broadcast"]["opener"],
        "Your checkup is due!"
    );

    // Knowledge groups apply to the agent behind a campaign.
    let group = api
        .ok(
            "POST",
            "/v1/kb-groups",
            Some(json!({"name": "Basics", "faqs": [{"question": "Hours?", "answer": "9 to 6."}]})),
        )
        .await["kb_group"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let applied = api
        .ok(
            "POST",
            &format!("/v1/kb-groups/{group}/apply"),
            Some(json!({"campaign_id": outgoing_id})),
        )
        .await;
    assert_eq!(
        (applied["agent_id"].clone(), applied["added"].clone()),
        (json!(outgoing_agent), json!(1))
    );
    let applied = api
        .ok(
            "POST",
            &format!("/v1/kb-groups/{group}/apply"),
            Some(json!({"campaign_id": incoming_id})),
        )
        .await;
    assert_eq!(applied["agent_id"], json!(incoming_id));
    assert_not_found(
        &api.send(
            "POST",
            &format!("/v1/kb-groups/{group}/apply"),
            Some(json!({"campaign_id": "brd_0000000000000000"})),
        )
        .await,
        "apply to an unknown campaign",
    );

    // The replacements are not deprecated.
    for path in ["/v1/agents", "/v1/broadcasts", "/v1/channels", "/v1/entry-points"] {
        let answer = api.send("GET", path, None).await;
        assert_eq!(answer.status, 200, "{path}");
        assert!(answer.header("deprecation").is_none(), "{path} is not deprecated");
        assert!(answer.header("sunset").is_none(), "{path} has no sunset");
    }
});

on_both_databases!(campaigns_answer_410_after_the_sunset, |db: Db| async move {
    let server = Server::start(&db, &[("FRONTDESK_TEST_CLOCK", "true")]).await;
    let api = Platform::new(&server).await;
    api.webchat("web").await;
    let incoming = json!({"name": "Walk-ins", "type": "Incoming", "channel": "web", "instructions": "Greet."});
    let id = facade_ok(&api, "POST", "/v1/campaigns", Some(incoming.clone())).await["campaign"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    facade_ok(&api, "GET", "/v1/campaigns", None).await;
    facade_ok(&api, "GET", &format!("/v1/campaigns/{id}"), None).await;
    let agents_before = listed_ids(&api, "/v1/agents", "agents").await;

    let after_sunset = Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap().timestamp();
    let clock = admin::client(&server)
        .await
        .set_test_clock(SetTestClockRequest {
            now: Some(prost_types::Timestamp {
                seconds: after_sunset,
                nanos: 0,
            }),
        })
        .await
        .expect("the test clock moves")
        .into_inner();
    let now = clock.now.expect("the clock's reading").seconds;
    assert!(
        (after_sunset..after_sunset + 60).contains(&now),
        "the clock reads the instant it was set to: {now}"
    );
    assert!(clock.offset_ms > 0, "ahead of the system clock");

    for (method, path, body, replacement) in [
        ("GET", "/v1/campaigns".to_owned(), None, "/v1/agents"),
        ("GET", format!("/v1/campaigns/{id}"), None, "/v1/"),
        ("POST", "/v1/campaigns".to_owned(), Some(incoming.clone()), "/v1/"),
        (
            "PUT",
            format!("/v1/campaigns/{id}"),
            Some(json!({"instructions": "Changed after the sunset"})),
            "/v1/",
        ),
    ] {
        let answer = facade(&api, method, &path, body).await;
        assert_eq!(
            (answer.status, answer.code()),
            (410, "gone"),
            "{method} {path}: {}",
            answer.body
        );
        let message = answer.body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(replacement),
            "{method} {path}: the message names the replacement ({replacement}): {message}"
        );
    }
    let listed = api.send("GET", "/v1/agents", None).await;
    assert_eq!(listed.status, 200, "the replacement still answers: {}", listed.body);
    assert!(listed.header("deprecation").is_none());
    let agent = api.ok("GET", &format!("/v1/agents/{id}"), None).await["agent"].clone();
    assert_eq!(agent["instructions"], "Greet.", "the refused PUT changed nothing");
    assert_eq!(
        listed_ids(&api, "/v1/agents", "agents").await,
        agents_before,
        "the refused POST made nothing"
    );

    // Back to the system clock: the facade answers again.
    admin::set_test_clock(&server, None).await.expect("the clock resets");
    facade_ok(&api, "GET", "/v1/campaigns", None).await;
    let updated = facade_ok(
        &api,
        "PUT",
        &format!("/v1/campaigns/{id}"),
        Some(json!({"instructions": "Greet again."})),
    )
    .await;
    assert_eq!(updated["campaign"]["instructions"], "Greet again.");
});

on_both_databases!(broadcasts_and_campaigns_over_grpc, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    sms(&api, "sms").await;
    let agent = api.agent("Replies").await;
    let mut broadcasts = BroadcastsClient::connect(server.grpc.clone()).await.unwrap();
    let mut campaigns = CampaignsClient::connect(server.grpc.clone()).await.unwrap();

    let next_week = Utc::now().timestamp() + 7 * 86_400;
    let at = |seconds: i64| {
        Utc.timestamp_opt(seconds, 0)
            .unwrap()
            .to_rfc3339_opts(SecondsFormat::Secs, true)
    };
    let request = |send_at: String| CreateBroadcastRequest {
        name: "gRPC recall".into(),
        agent_id: agent.clone(),
        channel: "sms".into(),
        audience: Some(Audience {
            phones: vec![PHONE.into()],
            ..Default::default()
        }),
        opener: "Checkup time!".into(),
        send_at,
        template: None,
    };
    let created = broadcasts
        .create_broadcast(authed(&api.key, request(at(next_week))))
        .await
        .unwrap()
        .into_inner()
        .broadcast
        .unwrap();
    assert!(created.id.starts_with("brd_"), "{}", created.id);
    assert_eq!(created.status, "scheduled");
    assert_eq!(created.send_at.map(|t| t.seconds), Some(next_week));
    let past = broadcasts
        .create_broadcast(authed(&api.key, request(at(Utc::now().timestamp() - 3_600))))
        .await
        .unwrap_err();
    assert_eq!(past.code(), Code::InvalidArgument);
    let draft = broadcasts
        .create_broadcast(authed(&api.key, request(String::new())))
        .await
        .unwrap()
        .into_inner()
        .broadcast
        .unwrap();
    assert_eq!((draft.status.as_str(), draft.send_at), ("draft", None));

    let cancelled = broadcasts
        .cancel_broadcast(authed(
            &api.key,
            CancelBroadcastRequest {
                broadcast_id: created.id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .broadcast
        .unwrap();
    assert_eq!(cancelled.status, "cancelled");
    let listed = broadcasts
        .list_broadcasts(authed(
            &api.key,
            ListBroadcastsRequest {
                status: "cancelled".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        listed.broadcasts.iter().map(|b| b.id.clone()).collect::<Vec<_>>(),
        vec![created.id.clone()]
    );
    assert_eq!(listed.next_cursor, None);

    let response = campaigns
        .list_campaigns(authed(&api.key, ListCampaignsRequest::default()))
        .await
        .unwrap();
    assert_eq!(
        response.metadata().get("deprecation").and_then(|v| v.to_str().ok()),
        Some("true")
    );
    assert!(response.metadata().get("sunset").is_some());
    let listed = response.into_inner().campaigns;
    let as_campaign = listed
        .iter()
        .find(|c| c.id == agent)
        .expect("the agent is listed as a campaign");
    assert_eq!(as_campaign.r#type, "Incoming");
    let outgoing = listed
        .iter()
        .find(|c| c.id == draft.id)
        .expect("the broadcast is listed as a campaign");
    assert_eq!(
        (
            outgoing.r#type.as_str(),
            outgoing.agent_id.as_str(),
            outgoing.broadcast_id.as_deref()
        ),
        ("Outgoing", agent.as_str(), Some(draft.id.as_str()))
    );
    let got = campaigns
        .get_campaign(authed(
            &api.key,
            GetCampaignRequest {
                campaign_id: agent.clone(),
            },
        ))
        .await
        .unwrap();
    assert_eq!(
        got.metadata().get("deprecation").and_then(|v| v.to_str().ok()),
        Some("true")
    );
    let missing = campaigns
        .get_campaign(authed(
            &api.key,
            GetCampaignRequest {
                campaign_id: "agt_0000000000000000".into(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
});

on_both_databases!(
    broadcasts_and_campaigns_are_isolated_and_agencies_act_on_sub_accounts,
    |db: Db| async move {
        let server = Server::start(&db, &[]).await;
        let a = Platform::new(&server).await;
        let b = Platform::new(&server).await;
        sms(&a, "sms").await;
        sms(&b, "sms").await;
        let a_agent = a.agent("A").await;
        let a_broadcast = create_broadcast(
            &a,
            json!({"agent_id": a_agent, "channel": "sms", "audience": {"phones": [PHONE]}, "opener": "Hi"}),
        )
        .await["id"]
            .as_str()
            .unwrap()
            .to_owned();

        for (method, path, body) in [
            ("GET", format!("/v1/broadcasts/{a_broadcast}"), None),
            (
                "PATCH",
                format!("/v1/broadcasts/{a_broadcast}"),
                Some(json!({"opener": "Taken"})),
            ),
            ("POST", format!("/v1/broadcasts/{a_broadcast}/cancel"), None),
        ] {
            assert_not_found(&b.send(method, &path, body).await, &format!("B {method} {path}"));
        }
        for (method, path, body) in [
            ("GET", format!("/v1/campaigns/{a_agent}"), None),
            ("GET", format!("/v1/campaigns/{a_broadcast}"), None),
            (
                "PUT",
                format!("/v1/campaigns/{a_agent}"),
                Some(json!({"instructions": "Taken"})),
            ),
            (
                "PUT",
                format!("/v1/campaigns/{a_broadcast}"),
                Some(json!({"opener": "Taken"})),
            ),
        ] {
            assert_not_found(&facade(&b, method, &path, body).await, &format!("B {method} {path}"));
        }
        let answer = b
            .send(
                "POST",
                "/v1/broadcasts",
                Some(json!({"agent_id": a_agent, "channel": "sms", "audience": {"phones": [PHONE]}, "opener": "Hi"})),
            )
            .await;
        assert_invalid(&answer, "agent_id", "B's broadcast with A's agent");
        assert!(listed_ids(&b, "/v1/broadcasts", "broadcasts").await.is_empty());
        assert!(campaigns(&b, "").await.is_empty(), "B's campaigns are B's");
        let a_broadcast_now = a.ok("GET", &format!("/v1/broadcasts/{a_broadcast}"), None).await;
        assert_eq!(
            (
                a_broadcast_now["broadcast"]["opener"].clone(),
                a_broadcast_now["broadcast"]["status"].clone()
            ),
            (json!("Hi"), json!("draft")),
            "B changed nothing"
        );

        // An agency works on its sub-account's broadcasts and campaigns.
        let (agency, child) = agency_and_child(&server).await;
        let child_id = child.account_id.clone();
        agency
            .ok(
                "POST",
                &format!("/v1/channels?sub_account_id={child_id}"),
                Some(json!({"name": "sms", "type": "sms", "config": {
                    "account_sid": "AC1", "auth_token": "tok", "from_number": "+15550002222"
                }})),
            )
            .await;
        let child_agent = agency
            .ok(
                "POST",
                &format!("/v1/agents?sub_account_id={child_id}"),
                Some(json!({"name": "Clinic"})),
            )
            .await["agent"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let child_broadcast = agency
            .ok(
                "POST",
                "/v1/broadcasts",
                Some(json!({
                    "agent_id": child_agent, "channel": "sms", "audience": {"phones": [PHONE]}, "opener": "Hello",
                    "sub_account_id": child_id
                })),
            )
            .await["broadcast"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            listed_ids(&child, "/v1/broadcasts", "broadcasts").await,
            vec![child_broadcast.clone()]
        );
        assert!(
            listed_ids(&agency, "/v1/broadcasts", "broadcasts").await.is_empty(),
            "not the agency's own"
        );
        assert_eq!(
            listed_ids(
                &agency,
                &format!("/v1/broadcasts?sub_account_id={child_id}"),
                "broadcasts"
            )
            .await,
            vec![child_broadcast.clone()]
        );
        let through_agency = campaigns(&agency, &format!("?sub_account_id={child_id}")).await;
        let ids: Vec<&str> = through_agency.iter().map(|c| c["id"].as_str().unwrap()).collect();
        assert!(
            ids.contains(&child_agent.as_str()) && ids.contains(&child_broadcast.as_str()),
            "{ids:?}"
        );
        assert!(campaigns(&agency, "").await.is_empty(), "the agency itself has none");
        let made = facade_ok(
            &agency,
            "POST",
            &format!("/v1/campaigns?sub_account_id={child_id}"),
            Some(json!({"name": "Walk-ins", "type": "Incoming", "channel": "sms"})),
        )
        .await["campaign"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(listed_ids(&child, "/v1/agents", "agents").await.contains(&made));
        let answer = facade(
            &agency,
            "GET",
            &format!("/v1/campaigns?sub_account_id={}", a.account_id),
            None,
        )
        .await;
        assert_insufficient_scope(&answer, "not its child: campaigns");
        let answer = agency
            .send("GET", &format!("/v1/broadcasts?sub_account_id={}", a.account_id), None)
            .await;
        assert_insufficient_scope(&answer, "not its child: broadcasts");
    }
);
