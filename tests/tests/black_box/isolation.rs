//! Tenant isolation swept over the published interface, on SQLite and PostgreSQL. Account A makes one of
//! everything; then, for every operation of the OpenAPI document:
//!
//! - whose path names a resource, account B (and an agency naming A as its sub-account) gets 404 for A's;
//! - that lists, B's answer names none of A's ids, also when B filters it by one of A's ids;
//! - whose body names another resource (an agent, a contact, a stage, a channel, a knowledge source, a
//!   campaign), B naming A's is refused, or answered without a trace of A;
//!
//! and A's resources read the same afterwards. The document drives it: a new route whose path names a
//! resource this file cannot make, or a new body field that names one, fails the sweep until it is covered.
//! Every method of the public gRPC services has a REST binding (checked below), so the sweep reaches each
//! of them with the same key; web chat visitors are kept to their own session.

use std::collections::{BTreeMap, BTreeSet};

use frontdesk_tests::{
    Answer, Db, Server, admin,
    knowledge::{Part, upload},
    on_both_databases,
    platform::{Platform, agency_and_child},
    sms::SmsChannel,
    twilio::FakeTwilio,
    webchat::{self, Channel, Visitor, list_messages},
    webhook_receiver::Receiver,
};
use prost_reflect::DescriptorPool;
use serde_json::{Value, json};

/// Body fields that name another resource of the account (a contact also by its phone or e-mail), as the
/// document spells them.
const REFERENCES: [&str; 10] = [
    "agent_id",
    "campaign_id",
    "channel",
    "contact_id",
    "contact_ids",
    "email",
    "phone",
    "phone_number",
    "source_id",
    "stage",
];

/// A's contact known by phone and e-mail.
const A_PHONE: &str = "+14155550111";
const A_EMAIL: &str = "known-to-a@example.com";

/// One resource of each kind, by the name of the path parameter that names it.
pub(crate) struct World {
    pub(crate) ids: BTreeMap<&'static str, String>,
}

impl World {
    fn id(&self, parameter: &str) -> &str {
        self.ids.get(parameter).unwrap_or_else(|| panic!("no {parameter} made"))
    }

    /// `template` with every `{parameter}` filled in; `None` when one names a resource not made.
    fn fill(&self, template: &str) -> Option<String> {
        let mut path = String::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            let close = rest[open..].find('}')? + open;
            path.push_str(&rest[..open]);
            path.push_str(self.ids.get(&rest[open + 1..close])?);
            rest = &rest[close + 1..];
        }
        path.push_str(rest);
        Some(path)
    }

    /// The resources `text` names. Ids of a few characters (a webhook's position) are left out: any text
    /// would contain them.
    fn named_in(&self, text: &str) -> Vec<&str> {
        self.ids
            .values()
            .filter(|id| id.len() >= 6 && text.contains(id.as_str()))
            .map(String::as_str)
            .collect()
    }
}

fn id_of(value: &Value, key: &str) -> String {
    value[key]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no {key}.id in {value}"))
        .to_owned()
}

/// A's world: channels `a-chat` (web chat, its agent the default), `a-walkins` and `a-sms`; an agent with an
/// FAQ, a custom function, an MCP server, a rule, an evaluation and a knowledge source; a visitor's session
/// whose question was handed off (a contact, a conversation, messages, a task and a knowledge gap); a
/// pipeline with a stage and a deal; a broadcast, a campaign, a knowledge group and a webhook.
pub(crate) async fn make_world(server: &Server, a: &Platform<'_>, twilio: &FakeTwilio, hook: &Receiver) -> World {
    let mut ids = BTreeMap::new();
    let chat = Channel::connect(a, "a-chat", json!({})).await;
    ids.insert("name", chat.name.clone());
    SmsChannel::connect(a, twilio, "a-sms", None).await;
    let agent = a.agent("A's agent").await;
    a.ok(
        "PUT",
        "/v1/entry-points/channel-defaults",
        Some(json!({"channel": "a-chat", "agent_id": agent})),
    )
    .await;
    let faq = a.faq(&agent, "When are you open?", "From 9am to 6pm.").await;
    let agent_path = format!("/v1/agents/{agent}");
    let function = a
        .ok(
            "POST",
            &format!("{agent_path}/custom-functions"),
            Some(json!({"name": "book_slot", "description": "Books", "url": "https://api.example.com/hook"})),
        )
        .await;
    let mcp = a
        .ok(
            "POST",
            &format!("{agent_path}/mcp-servers"),
            Some(json!({"name": "crm", "url": "https://mcp.example.com/crm"})),
        )
        .await;
    let rule = a
        .ok(
            "POST",
            &format!("{agent_path}/entry-points"),
            Some(json!({"channel": "a-chat", "priority": 5})),
        )
        .await;
    let cases = json!({"cases": [{"question": "When are you open?", "expect": "answer"}]});
    let evaluation = a.ok("POST", &format!("{agent_path}/evaluations"), Some(cases)).await;
    let uploaded = upload(
        server,
        &a.key,
        &[Part::file(
            "file",
            "parking.txt",
            "text/plain",
            b"Parking is free behind the building.".to_vec(),
        )],
    )
    .await;
    assert_eq!(uploaded.status, 200, "{}", uploaded.body);
    let source = uploaded.body["source_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no source_id in {}", uploaded.body))
        .to_owned();
    a.ok(
        "POST",
        &format!("{agent_path}/kb-sources"),
        Some(json!({"source_id": source})),
    )
    .await;

    let visitor = Visitor::start(server, &chat, json!({})).await;
    let posted = visitor.post(server, "Can I pay in gold bars?", "q-1").await;
    assert!(posted.status < 300, "{}", posted.body);
    let task = a
        .poll("/v1/tasks", |list| !list["tasks"].as_array().is_none_or(Vec::is_empty))
        .await["tasks"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let gap = a.get(&format!("{agent_path}/knowledge-gaps")).await["gaps"][0]["id"]
        .as_str()
        .expect("a knowledge gap")
        .to_owned();
    let message = webchat::reply(a, &visitor, "Let me check.").await;

    let pipeline = a
        .ok(
            "POST",
            "/v1/pipelines",
            Some(json!({"name": "A only", "stages": [{"id": "a-stage", "name": "A's stage"}]})),
        )
        .await;
    let deal = a
        .ok(
            "POST",
            "/v1/deals",
            Some(json!({"title": "A's deal", "stage": "a-stage", "contact_id": visitor.contact_id})),
        )
        .await;
    let broadcast = a
        .ok(
            "POST",
            "/v1/broadcasts",
            Some(json!({"name": "A's offer", "agent_id": agent, "channel": "a-sms",
                "audience": {"phones": ["+14155550100"]}, "opener": "Hi"})),
        )
        .await;
    let campaign = a
        .ok(
            "POST",
            "/v1/campaigns",
            Some(json!({"name": "Walk-ins", "type": "Incoming", "channel": "a-chat", "instructions": "Greet."})),
        )
        .await;
    let group = a
        .ok(
            "POST",
            "/v1/kb-groups",
            Some(json!({"name": "A's group", "faqs": [{"question": "Q?", "answer": "A."}]})),
        )
        .await;
    let known = a
        .ok(
            "POST",
            "/v1/contacts",
            Some(json!({"name": "Known to A", "phone": A_PHONE, "email": A_EMAIL})),
        )
        .await;
    let webhook = a
        .ok(
            "POST",
            "/v1/webhooks",
            Some(json!({"url": hook.url, "events": ["deal.updated"]})),
        )
        .await;
    a.poll(
        &format!("{agent_path}/evaluations/{}", id_of(&evaluation, "evaluation")),
        |e| e["evaluation"]["status"] == "completed",
    )
    .await;

    ids.extend([
        ("agent_id", agent),
        ("faq_id", faq),
        ("function_id", id_of(&function, "custom_function")),
        ("server_id", id_of(&mcp, "mcp_server")),
        ("entry_point_id", id_of(&rule, "entry_point")),
        ("evaluation_id", id_of(&evaluation, "evaluation")),
        ("source_id", source),
        ("session_id", visitor.session_id.clone()),
        ("contact_id", visitor.contact_id.clone()),
        ("conversation_id", visitor.conversation_id.clone()),
        ("task_id", task),
        ("gap_id", gap),
        ("message_id", message),
        ("pipeline_id", id_of(&pipeline, "pipeline")),
        ("stage_id", "a-stage".to_owned()),
        ("deal_id", id_of(&deal, "deal")),
        ("broadcast_id", id_of(&broadcast, "broadcast")),
        ("campaign_id", id_of(&campaign, "campaign")),
        ("group_id", id_of(&group, "kb_group")),
        ("webhook_id", id_of(&webhook, "webhook")),
        ("known_contact", id_of(&known, "contact")),
    ]);
    World { ids }
}

/// Every operation of the document: (method in capitals, path template, the operation).
fn operations(document: &Value) -> Vec<(String, String, Value)> {
    let mut all = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            all.push((method.to_uppercase(), path.clone(), operation.clone()));
        }
    }
    all
}

/// The schema `$ref` points at (or that of the first `$ref` of an `anyOf`).
fn referenced<'a>(document: &'a Value, schema: &Value) -> Option<&'a Value> {
    let reference = schema["$ref"].as_str().or_else(|| {
        schema["anyOf"]
            .as_array()?
            .iter()
            .find_map(|s| s["$ref"].as_str().or(s["items"]["$ref"].as_str()))
    })?;
    let name = reference.strip_prefix("#/components/schemas/")?;
    document["components"]["schemas"].get(name)
}

/// The names of the fields of `schema` that name another resource, nested messages included.
fn reference_fields(document: &Value, schema: &Value, depth: usize, found: &mut BTreeSet<String>) {
    let Some(properties) = schema["properties"].as_object() else {
        return;
    };
    for (name, property) in properties {
        if REFERENCES.contains(&name.as_str()) {
            found.insert(name.clone());
        }
        let nested = referenced(document, property).or_else(|| referenced(document, &property["items"]));
        if let (Some(nested), true) = (nested, depth < 3) {
            reference_fields(document, nested, depth + 1, found);
        }
    }
}

/// A body B may send to a route of A's resource: what the route needs to get past its checks of the body
/// (naming B's own resources where it names any), so that only the lookup of A's resource can refuse it.
fn body_for(method: &str, template: &str, b: &World) -> Option<Value> {
    let body = match (method, template) {
        ("PUT", "/v1/agents/{agent_id}") => json!({"name": "Taken"}),
        ("PUT", "/v1/agents/{agent_id}/bot-config") => json!({"goal": "Taken"}),
        ("POST", "/v1/agents/{agent_id}/custom-functions") => {
            json!({"name": "taken", "description": "Taken", "url": "https://api.example.com/taken"})
        }
        ("POST", "/v1/agents/{agent_id}/entry-points") => json!({"channel": "b-chat", "priority": 1}),
        ("POST", "/v1/agents/{agent_id}/kb-sources") => json!({"source_id": b.id("source_id")}),
        ("POST", "/v1/kb-groups/{group_id}/apply") => json!({"agent_id": b.id("agent_id")}),
        ("POST", "/v1/agents/{agent_id}/evaluations") => {
            json!({"cases": [{"question": "Open?", "expect": "answer"}]})
        }
        ("POST", "/v1/agents/{agent_id}/faqs") => json!({"question": "Q?", "answer": "Taken"}),
        ("PUT", "/v1/agents/{agent_id}/faqs/{faq_id}") => json!({"answer": "Taken"}),
        ("POST", "/v1/agents/{agent_id}/mcp-servers") => {
            json!({"name": "taken", "url": "https://mcp.example.com/taken"})
        }
        ("POST", "/v1/agents/{agent_id}/search") => json!({"query": "open"}),
        ("POST", "/v1/agents/{agent_id}/knowledge-gaps/{gap_id}/resolve") => json!({"answer": "Taken"}),
        ("PATCH", "/v1/broadcasts/{broadcast_id}") => json!({"opener": "Taken"}),
        ("PUT", "/v1/campaigns/{campaign_id}") => json!({"name": "Taken"}),
        ("PATCH", "/v1/contacts/{contact_id}") => json!({"name": "Taken"}),
        ("POST", "/v1/contacts/{contact_id}/send-message") => json!({"text": "Taken"}),
        ("PATCH", "/v1/deals/{deal_id}") => json!({"title": "Taken"}),
        ("POST", "/v1/deals/{deal_id}/move") => json!({"stage": "new"}),
        ("PUT", "/v1/entry-points/{entry_point_id}") => json!({"priority": 9}),
        ("PUT", "/v1/kb-groups/{group_id}") => json!({"name": "Taken"}),
        ("PATCH", "/v1/messages/{message_id}") => json!({"text": "Taken"}),
        ("POST", "/v1/messages/{message_id}/reactions") => json!({"emoji": "👍"}),
        ("PATCH", "/v1/pipelines/{pipeline_id}") => json!({"name": "Taken"}),
        ("POST", "/v1/pipelines/{pipeline_id}/stages") => json!({"name": "Taken"}),
        ("PATCH", "/v1/stages/{stage_id}") => json!({"name": "Taken"}),
        ("PATCH", "/v1/tasks/{task_id}") => json!({"done": true}),
        ("PATCH", "/v1/webhooks/{webhook_id}") => json!({"events": ["deal.created"]}),
        _ => return None,
    };
    Some(body)
}

/// B's own world, for the bodies that name A's resources in an otherwise valid call: (method, path, body,
/// the field it names A's resource in).
fn naming_a(a: &World, b: &World) -> Vec<(&'static str, String, Value, &'static str)> {
    let (a_agent, a_contact, a_source, a_campaign) = (
        a.id("agent_id"),
        a.id("contact_id"),
        a.id("source_id"),
        a.id("campaign_id"),
    );
    let (b_agent, b_contact) = (b.id("agent_id"), b.id("contact_id"));
    let b_path = |template: &str| b.fill(template).expect("B's path");
    let broadcast = |agent: &str, channel: &str, audience: Value| json!({"name": "B's", "agent_id": agent, "channel": channel, "audience": audience, "opener": "Hi"});
    let phones = json!({"phones": ["+14155550199"]});
    vec![
        (
            "POST",
            b_path("/v1/agents/{agent_id}/entry-points"),
            json!({"channel": "a-chat"}),
            "channel",
        ),
        (
            "POST",
            b_path("/v1/agents/{agent_id}/kb-sources"),
            json!({"source_id": a_source}),
            "source_id",
        ),
        (
            "POST",
            "/v1/broadcasts".into(),
            broadcast(a_agent, "b-sms", phones.clone()),
            "agent_id",
        ),
        (
            "POST",
            "/v1/broadcasts".into(),
            broadcast(b_agent, "a-sms", phones.clone()),
            "channel",
        ),
        (
            "POST",
            "/v1/broadcasts".into(),
            broadcast(b_agent, "b-sms", json!({"contact_ids": [a_contact]})),
            "contact_ids",
        ),
        (
            "PATCH",
            b_path("/v1/broadcasts/{broadcast_id}"),
            json!({"agent_id": a_agent}),
            "agent_id",
        ),
        (
            "PATCH",
            b_path("/v1/broadcasts/{broadcast_id}"),
            json!({"channel": "a-sms"}),
            "channel",
        ),
        (
            "PATCH",
            b_path("/v1/broadcasts/{broadcast_id}"),
            json!({"audience": {"contact_ids": [a_contact]}}),
            "contact_ids",
        ),
        (
            "POST",
            "/v1/campaigns".into(),
            json!({"name": "B's", "type": "Outgoing", "agent_id": a_agent, "channel": "b-sms",
                "audience": phones.clone(), "instructions": "Hi"}),
            "agent_id",
        ),
        (
            "POST",
            "/v1/campaigns".into(),
            json!({"name": "B's", "type": "Incoming", "channel": "a-chat", "instructions": "Hi"}),
            "channel",
        ),
        (
            "PUT",
            b_path("/v1/campaigns/{campaign_id}"),
            json!({"channel": "a-chat"}),
            "channel",
        ),
        (
            "POST",
            "/v1/contacts/send".into(),
            json!({"contact_id": a_contact, "text": "Hi"}),
            "contact_id",
        ),
        (
            "POST",
            "/v1/contacts/send".into(),
            json!({"contact_id": b_contact, "channel": "a-chat", "text": "Hi"}),
            "channel",
        ),
        (
            "POST",
            b_path("/v1/contacts/{contact_id}/send-message"),
            json!({"channel": "a-chat", "text": "Hi"}),
            "channel",
        ),
        (
            "POST",
            "/v1/campaigns".into(),
            json!({"name": "B's", "type": "Outgoing", "agent_id": b_agent, "channel": "b-sms",
                "audience": {"contact_ids": [a_contact]}, "instructions": "Hi"}),
            "contact_ids",
        ),
        (
            "PUT",
            b_path("/v1/campaigns/{campaign_id}"),
            json!({"audience": {"contact_ids": [a_contact]}}),
            "contact_ids",
        ),
        (
            "POST",
            "/v1/contacts".into(),
            json!({"name": "B's", "phone": A_PHONE}),
            "phone",
        ),
        (
            "POST",
            "/v1/contacts".into(),
            json!({"name": "B's", "identities": [{"channel": "a-chat", "external_id": "visitor-1"}]}),
            "channel",
        ),
        (
            "PATCH",
            b_path("/v1/contacts/{contact_id}"),
            json!({"identities": [{"channel": "a-chat", "external_id": "visitor-2"}]}),
            "channel",
        ),
        (
            "POST",
            "/v1/contacts/send".into(),
            json!({"email": A_EMAIL, "channel": "b-chat", "text": "Hi"}),
            "email",
        ),
        (
            "POST",
            "/v1/contacts".into(),
            json!({"name": "B's", "email": A_EMAIL}),
            "email",
        ),
        (
            "PATCH",
            b_path("/v1/contacts/{contact_id}"),
            json!({"phone": A_PHONE}),
            "phone",
        ),
        (
            "PATCH",
            b_path("/v1/contacts/{contact_id}"),
            json!({"email": A_EMAIL}),
            "email",
        ),
        (
            "POST",
            "/v1/contacts/send".into(),
            json!({"phone": A_PHONE, "channel": "b-sms", "text": "Hi"}),
            "phone",
        ),
        (
            "POST",
            "/v1/summaries".into(),
            json!({"phone_number": A_PHONE}),
            "phone_number",
        ),
        ("POST", "/v1/summaries".into(), json!({"email": A_EMAIL}), "email"),
        (
            "POST",
            "/v1/deals".into(),
            json!({"title": "B's", "stage": "a-stage"}),
            "stage",
        ),
        (
            "POST",
            "/v1/deals".into(),
            json!({"title": "B's", "stage": "new", "contact_id": a_contact}),
            "contact_id",
        ),
        (
            "PATCH",
            b_path("/v1/deals/{deal_id}"),
            json!({"contact_id": a_contact}),
            "contact_id",
        ),
        (
            "PATCH",
            b_path("/v1/deals/{deal_id}"),
            json!({"stage": "a-stage"}),
            "stage",
        ),
        (
            "POST",
            b_path("/v1/deals/{deal_id}/move"),
            json!({"stage": "a-stage"}),
            "stage",
        ),
        (
            "PUT",
            "/v1/entry-points/channel-defaults".into(),
            json!({"channel": "b-chat", "agent_id": a_agent}),
            "agent_id",
        ),
        (
            "PUT",
            "/v1/entry-points/channel-defaults".into(),
            json!({"channel": "a-chat", "agent_id": b_agent}),
            "channel",
        ),
        (
            "POST",
            "/v1/entry-points/resolve".into(),
            json!({"channel": "a-chat", "text": "Hi"}),
            "channel",
        ),
        (
            "PUT",
            b_path("/v1/entry-points/{entry_point_id}"),
            json!({"agent_id": a_agent}),
            "agent_id",
        ),
        (
            "PUT",
            b_path("/v1/entry-points/{entry_point_id}"),
            json!({"channel": "a-chat"}),
            "channel",
        ),
        (
            "POST",
            b_path("/v1/kb-groups/{group_id}/apply"),
            json!({"agent_id": a_agent}),
            "agent_id",
        ),
        (
            "POST",
            b_path("/v1/kb-groups/{group_id}/apply"),
            json!({"campaign_id": a_campaign}),
            "campaign_id",
        ),
        (
            "POST",
            "/v1/kb-sources/bulk-import".into(),
            json!({"urls": ["https://example.com/a"], "agent_id": a_agent}),
            "agent_id",
        ),
        (
            "POST",
            "/v1/kb-sources/url".into(),
            json!({"url": "https://example.com/a", "agent_id": a_agent}),
            "agent_id",
        ),
    ]
}

/// The template of a path B's world filled (its ids put back as parameters).
fn template_of(path: &str, world: &World) -> String {
    let mut template = path.to_owned();
    for (parameter, id) in &world.ids {
        let segment = format!("/{id}");
        if let Some(at) = template.find(&segment)
            && template[at + segment.len()..].chars().next().is_none_or(|c| c == '/')
        {
            template.replace_range(at..at + segment.len(), &format!("/{{{parameter}}}"));
        }
    }
    template
}

/// B's world: channels `b-chat` and `b-sms`, an agent, a visitor's contact, a deal, a broadcast, a campaign,
/// a rule, a knowledge group and a knowledge source.
async fn make_b(server: &Server, b: &Platform<'_>, twilio: &FakeTwilio) -> World {
    let chat = Channel::connect(b, "b-chat", json!({})).await;
    SmsChannel::connect(b, twilio, "b-sms", None).await;
    let agent = b.agent("B's agent").await;
    let visitor = Visitor::start(server, &chat, json!({})).await;
    let deal = b.deal("B's deal").await;
    let broadcast = b
        .ok(
            "POST",
            "/v1/broadcasts",
            Some(json!({"name": "B's", "agent_id": agent, "channel": "b-sms",
                "audience": {"phones": ["+14155550198"]}, "opener": "Hi"})),
        )
        .await;
    let campaign = b
        .ok(
            "POST",
            "/v1/campaigns",
            Some(json!({"name": "B walk-ins", "type": "Incoming", "channel": "b-chat", "instructions": "Hi"})),
        )
        .await;
    let rule = b
        .ok(
            "POST",
            &format!("/v1/agents/{agent}/entry-points"),
            Some(json!({"channel": "b-chat"})),
        )
        .await;
    let group = b
        .ok("POST", "/v1/kb-groups", Some(json!({"name": "B's group", "faqs": []})))
        .await;
    let uploaded = upload(
        server,
        &b.key,
        &[Part::file("file", "b.txt", "text/plain", b"B's own words.".to_vec())],
    )
    .await;
    assert_eq!(uploaded.status, 200, "{}", uploaded.body);
    World {
        ids: BTreeMap::from([
            ("agent_id", agent),
            ("contact_id", visitor.contact_id),
            ("deal_id", deal),
            ("broadcast_id", id_of(&broadcast, "broadcast")),
            ("campaign_id", id_of(&campaign, "campaign")),
            ("entry_point_id", id_of(&rule, "entry_point")),
            ("group_id", id_of(&group, "kb_group")),
            ("source_id", uploaded.body["source_id"].as_str().unwrap().to_owned()),
        ]),
    }
}

fn describe(method: &str, path: &str, answer: &Answer) -> String {
    format!("{method} {path} -> {} {}", answer.status, answer.body)
}

on_both_databases!(no_route_reaches_another_accounts_resources, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let hook = Receiver::start().await;
    let server = webchat::start(&db, &[("FRONTDESK_REPLY_DEBOUNCE_MS", "0")]).await;
    let a = Platform::new(&server).await;
    let b = Platform::new(&server).await;
    let a_world = make_world(&server, &a, &twilio, &hook).await;
    let b_world = make_b(&server, &b, &twilio).await;
    let (agency, _child) = agency_and_child(&server).await;
    admin::quiesce(&server).await;

    let document = server.openapi().await;
    let operations = operations(&document);
    let named: Vec<&(String, String, Value)> = operations.iter().filter(|(_, path, _)| path.contains('{')).collect();
    let a_reads = |path: String| {
        let a = &a;
        async move { a.send("GET", &path, None).await }
    };
    let mut before = BTreeMap::new();
    for (method, template, _) in &named {
        if method == "GET"
            && let Some(path) = a_world.fill(template)
        {
            let answer = a_reads(path.clone()).await;
            assert_eq!(answer.status, 200, "A reads its own {path}: {}", answer.body);
            before.insert(path, answer.body);
        }
    }

    // Every route that names a resource: 404 for A's, to B and to an agency naming A.
    let (mut unmade, mut leaks) = (Vec::new(), Vec::new());
    for (method, template, operation) in &named {
        let Some(path) = a_world.fill(template) else {
            unmade.push(format!("{method} {template}"));
            continue;
        };
        let body = operation
            .get("requestBody")
            .map(|_| body_for(method, template, &b_world).unwrap_or_else(|| json!({})));
        let answer = b.send(method, &path, body.clone()).await;
        if answer.status != 404 {
            leaks.push(describe(method, &path, &answer));
        }
        let separator = if path.contains('?') { '&' } else { '?' };
        let as_agency = format!("{path}{separator}sub_account_id={}", a.account_id);
        let answer = agency.send(method, &as_agency, body).await;
        if !(answer.status == 404 || answer.status == 403) {
            leaks.push(format!("agency: {}", describe(method, &as_agency, &answer)));
        }
    }
    assert!(
        unmade.is_empty(),
        "routes naming a resource the sweep cannot make: {unmade:#?}"
    );
    assert!(leaks.is_empty(), "A's resources reached by another account: {leaks:#?}");

    // Every list, plain and filtered by A's ids: nothing of A's.
    for (method, path, operation) in &operations {
        if method != "GET" || path.contains('{') || !path.starts_with("/v1/") {
            continue;
        }
        let mut queries = vec![String::new()];
        for parameter in operation["parameters"].as_array().into_iter().flatten() {
            let name = parameter["name"].as_str().unwrap_or_default();
            if parameter["in"] == "query"
                && let Some(id) = a_world.ids.get(name)
            {
                queries.push(format!("?{name}={id}"));
            }
        }
        for query in queries {
            let answer = b.send("GET", &format!("{path}{query}"), None).await;
            let named = a_world.named_in(&answer.body.to_string());
            assert!(
                named.is_empty(),
                "B's {path}{query} names A's {named:?}: {}",
                answer.body
            );
        }
    }

    // Bodies that name A's resources, in calls otherwise valid for B: refused, or answered without A.
    let cases = naming_a(&a_world, &b_world);
    let mut covered = BTreeSet::new();
    for (method, path, body, field) in &cases {
        covered.insert(format!("{method} {} {field}", template_of(path, &b_world)));
        let answer = b.send(method, path, Some(body.clone())).await;
        let mut named = a_world.named_in(&answer.body.to_string());
        if path.starts_with("/v1/deals") && *field == "contact_id" {
            // A deal's contact is the caller's own reference, stored as given and never followed: B's
            // deal may carry the id it was given, and nothing more of A's.
            named.retain(|id| *id != a_world.id("contact_id"));
        }
        assert!(
            answer.status >= 400 && answer.status < 500 || named.is_empty(),
            "B named A's {field}: {}",
            describe(method, path, &answer)
        );
        assert!(answer.status < 500, "{}", describe(method, path, &answer));
    }
    let a_contact = a_world.id("contact_id");
    assert_eq!(
        a.ids(&format!("/v1/deals?contact_id={a_contact}"), "deals", "id").await,
        vec![a_world.id("deal_id").to_owned()],
        "B's deals naming A's contact are not A's"
    );
    let uploaded = upload(
        &server,
        &b.key,
        &[
            Part::text("agent_id", a_world.id("agent_id")),
            Part::file("file", "b.txt", "text/plain", b"B's words.".to_vec()),
        ],
    )
    .await;
    assert!(
        (400..500).contains(&uploaded.status),
        "B attached its upload to A's agent: {} {}",
        uploaded.status,
        uploaded.body
    );
    let mut in_document = BTreeSet::new();
    for (method, template, operation) in operations.iter().filter(|(_, path, _)| path.starts_with("/v1/")) {
        let schema = &operation["requestBody"]["content"]["application/json"]["schema"];
        let Some(schema) = referenced(&document, schema) else {
            continue;
        };
        let mut found = BTreeSet::new();
        reference_fields(&document, schema, 0, &mut found);
        for field in found {
            if !template.contains(&format!("{{{field}}}")) {
                in_document.insert(format!("{method} {template} {field}"));
            }
        }
    }
    assert_eq!(
        in_document.difference(&covered).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "body fields naming a resource that the sweep does not try with A's"
    );

    // A's resources read as before.
    admin::quiesce(&server).await;
    for (path, was) in before {
        let now = a_reads(path.clone()).await;
        assert_eq!(now.status, 200, "{path}: {}", now.body);
        assert_eq!(now.body, was, "{path} changed");
    }

    // A visitor's token reads its own session only.
    let b_chat = Channel::connect(&b, "b-chat-2", json!({})).await;
    let b_visitor = Visitor::start(&server, &b_chat, json!({})).await;
    let thread = list_messages(&server, &b_visitor.token, "").await;
    assert_eq!(thread.status, 200, "{}", thread.body);
    assert!(a_world.named_in(&thread.body.to_string()).is_empty(), "{}", thread.body);
});

// Every method of the public gRPC services is reachable over REST, so the sweep above calls each of them.
#[test]
fn every_public_grpc_method_has_a_rest_binding() {
    let pool = DescriptorPool::decode(frontdesk_api::FILE_DESCRIPTOR_SET).expect("descriptor set");
    let http = pool.get_extension_by_name("google.api.http").expect("google.api.http");
    let unbound: Vec<String> = pool
        .services()
        .filter(|service| service.package_name() == "frontdesk.v1")
        .flat_map(|service| service.methods().collect::<Vec<_>>())
        .filter(|method| !method.options().has_extension(&http))
        .map(|method| method.full_name().to_owned())
        .collect();
    assert!(unbound.is_empty(), "gRPC methods without a REST binding: {unbound:?}");
}
