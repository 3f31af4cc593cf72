//! Webhooks over REST and gRPC against the real binary, on SQLite and PostgreSQL, with a local receiver:
//! subscriptions and positional ids, bad input, signed deal deliveries (checked by our verifier and by the
//! official `standardwebhooks` library), retries, an endpoint down then up, 410 and continuous-failure
//! disabling, re-enable, a SIGKILL with 1,000 deliveries pending, and two core processes sharing the work.

use std::{collections::HashMap, collections::HashSet, time::Duration};

use frontdesk_api::v1::{
    CreateDealRequest, GetWebhookRequest, ListWebhooksRequest, deals_client::DealsClient,
    webhooks_client::WebhooksClient,
};
use frontdesk_tests::{
    Db, Server, admin, call_with, on_both_databases, platform::Platform, server::base_env, webhook_receiver::Receiver,
};
use serde_json::{Value, json};
use tonic::{Code, metadata::MetadataValue};

/// A fast engine: short retries, timeout and lease, quick polling; the receiver is on loopback.
const FAST: &[(&str, &str)] = &[
    ("FRONTDESK_ALLOW_PRIVATE_URLS", "true"),
    ("FRONTDESK_WEBHOOK_RETRY_SCHEDULE", "1s,1s,1s,1s,1s,1s,1s,1s"),
    ("FRONTDESK_WEBHOOK_TIMEOUT", "2s"),
    ("FRONTDESK_WEBHOOK_LEASE", "4s"),
    ("FRONTDESK_WEBHOOK_POLL_INTERVAL", "20ms"),
];

const WAIT: Duration = Duration::from_secs(30);

/// Creates a subscription; returns (webhook, secret).
async fn subscription(api: &Platform<'_>, body: Value) -> (Value, String) {
    let answer = api.send("POST", "/v1/webhooks", Some(body)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let secret = answer.body["secret"].as_str().unwrap().to_owned();
    (answer.body["webhook"].clone(), secret)
}

fn ids_and_names(list: &Value) -> Vec<(String, Value)> {
    list["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["id"].as_str().unwrap().to_owned(), w["name"].clone()))
        .collect()
}

on_both_databases!(subscriptions_by_position_and_name, |db: Db| async move {
    let server = Server::start(&db, FAST).await;
    let api = Platform::new(&server).await;
    let (first, secret) = subscription(
        &api,
        json!({"name": "crm", "url": "http://127.0.0.1:9/a", "events": ["deal.created"],
                          "description": "CRM sync"}),
    )
    .await;
    assert_eq!(first["id"], "1");
    assert_eq!(first["status"], "active");
    assert_eq!(first["events"], json!(["deal.created"]));
    assert_eq!(first["disabled_reason"], Value::Null);
    assert!(secret.starts_with("whsec_") && secret.len() == 6 + 32, "{secret}");
    let (second, _) = subscription(&api, json!({"url": "http://127.0.0.1:9/b"})).await;
    assert_eq!(
        (second["id"].clone(), second["name"].clone()),
        (json!("2"), Value::Null)
    );
    assert_eq!(second["events"], json!(["*"]), "no events means all");
    subscription(
        &api,
        json!({"name": "audit", "url": "http://127.0.0.1:9/c", "events": ["*"]}),
    )
    .await;

    let list = api.get("/v1/webhooks").await;
    assert_eq!(list["success"], true);
    assert_eq!(
        ids_and_names(&list),
        vec![
            ("1".to_owned(), json!("crm")),
            ("2".to_owned(), Value::Null),
            ("3".to_owned(), json!("audit"))
        ]
    );
    assert!(
        list.to_string().find("whsec_").is_none(),
        "the secret is shown only once"
    );
    assert_eq!(api.get("/v1/webhooks/crm").await["webhook"]["id"], "1");
    assert_eq!(api.get("/v1/webhooks/3").await["webhook"]["name"], "audit");

    // PATCH: only the fields given change.
    let patched = api
        .send(
            "PATCH",
            "/v1/webhooks/crm",
            Some(json!({"events": ["deal.created", "deal.updated"]})),
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    assert_eq!(
        patched.body["webhook"]["events"],
        json!(["deal.created", "deal.updated"])
    );
    assert_eq!(patched.body["webhook"]["description"], "CRM sync");
    let renamed = api
        .send("PATCH", "/v1/webhooks/2", Some(json!({"name": "billing"})))
        .await;
    assert_eq!(renamed.body["webhook"]["name"], "billing");
    let clash = api
        .send("PATCH", "/v1/webhooks/billing", Some(json!({"name": "crm"})))
        .await;
    assert_eq!((clash.status, clash.code()), (409, "already_exists"));
    let duplicate = api
        .send(
            "POST",
            "/v1/webhooks",
            Some(json!({"name": "crm", "url": "http://127.0.0.1:9/d"})),
        )
        .await;
    assert_eq!((duplicate.status, duplicate.code()), (409, "already_exists"));

    // Delete the first: positions shift, names do not.
    let deleted = api.send("DELETE", "/v1/webhooks/1", None).await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    assert_eq!(
        ids_and_names(&api.get("/v1/webhooks").await),
        vec![("1".to_owned(), json!("billing")), ("2".to_owned(), json!("audit"))]
    );
    assert_eq!(api.get("/v1/webhooks/audit").await["webhook"]["id"], "2");
    for missing in ["3", "0", "crm", "nope"] {
        let answer = api.send("GET", &format!("/v1/webhooks/{missing}"), None).await;
        assert_eq!((answer.status, answer.code()), (404, "not_found"), "{missing}");
    }

    // gRPC: the same subscriptions.
    let channel = tonic::transport::Channel::from_shared(server.grpc.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = WebhooksClient::new(channel);
    let key: MetadataValue<_> = api.key.parse().unwrap();
    let mut request = tonic::Request::new(ListWebhooksRequest {});
    request.metadata_mut().insert("x-api-key", key.clone());
    let listed = grpc.list_webhooks(request).await.unwrap().into_inner();
    assert_eq!(listed.webhooks.len(), 2);
    let mut request = tonic::Request::new(GetWebhookRequest {
        webhook_id: "billing".into(),
    });
    request.metadata_mut().insert("x-api-key", key.clone());
    assert_eq!(
        grpc.get_webhook(request)
            .await
            .unwrap()
            .into_inner()
            .webhook
            .unwrap()
            .id,
        "1"
    );
    let mut request = tonic::Request::new(GetWebhookRequest { webhook_id: "9".into() });
    request.metadata_mut().insert("x-api-key", key);
    assert_eq!(grpc.get_webhook(request).await.unwrap_err().code(), Code::NotFound);

    // Another account sees none of them.
    let other = Platform::new(&server).await;
    assert_eq!(other.get("/v1/webhooks").await["webhooks"], json!([]));
    assert_eq!(other.send("GET", "/v1/webhooks/billing", None).await.status, 404);
});

/// Every event type of the API, `conversation.handoff` included, is a subscription filter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_contract_event_type_can_be_subscribed_to() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    let contract = [
        "contact.created",
        "contact.updated",
        "conversation.created",
        "conversation.closed",
        "message.received",
        "message.sent",
        "message.delivered",
        "message.read",
        "message.failed",
        "appointment.booked",
        "deal.created",
        "deal.updated",
        "deal.stage_changed",
        "kb_source.ready",
        "kb_source.failed",
        "summary.created",
        "broadcast.completed",
        "conversation.handoff",
        "webhook.test",
    ];
    let (handoff, _) = subscription(
        &api,
        json!({"url": "https://93.184.215.14/handoff", "events": ["conversation.handoff"]}),
    )
    .await;
    assert_eq!(handoff["events"], json!(["conversation.handoff"]));
    let (all, _) = subscription(&api, json!({"url": "https://93.184.215.14/all", "events": contract})).await;
    assert_eq!(all["events"], json!(contract));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_and_access() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    for (body, field) in [
        (json!({"url": "ftp://example.com/hook"}), "url"),
        (json!({"url": "https://user:secret@example.com/hook"}), "url"),
        (json!({"url": ""}), "url"),
        (
            json!({"url": "https://example.com/hook", "events": ["deal.deleted"]}),
            "events",
        ),
        (json!({"url": "https://example.com/hook", "name": "123"}), "name"),
        (json!({"url": "https://example.com/hook", "name": "Crm"}), "name"),
        (json!({"url": "https://example.com/hook", "name": "crm sync"}), "name"),
        // Private and loopback targets need FRONTDESK_ALLOW_PRIVATE_URLS=true.
        (json!({"url": "http://127.0.0.1:8080/hook"}), "url"),
        (json!({"url": "http://10.0.0.7/hook"}), "url"),
        (json!({"url": "http://localhost/hook"}), "url"),
        (json!({"url": "http://[::1]/hook"}), "url"),
    ] {
        let answer = api.send("POST", "/v1/webhooks", Some(body.clone())).await;
        assert_eq!(
            (answer.status, answer.code()),
            (400, "invalid_argument"),
            "{body}: {}",
            answer.body
        );
        assert_eq!(answer.fields(), vec![field], "{body}");
    }
    let unknown = api
        .send(
            "POST",
            "/v1/webhooks",
            Some(json!({"url": "https://example.com/h", "colour": "red"})),
        )
        .await;
    assert_eq!(unknown.status, 400);

    // At most 50 subscriptions, and the message says so.
    for n in 0..50 {
        let answer = api
            .send(
                "POST",
                "/v1/webhooks",
                Some(json!({"url": format!("https://93.184.215.14/{n}")})),
            )
            .await;
        assert_eq!(answer.status, 200, "{n}: {}", answer.body);
    }
    let over = api
        .send("POST", "/v1/webhooks", Some(json!({"url": "https://93.184.215.14/51"})))
        .await;
    assert_eq!(over.status, 400);
    assert!(
        over.body["error"]["message"].as_str().unwrap().contains("50"),
        "{}",
        over.body
    );
    let past_end = api.send("GET", "/v1/webhooks/51", None).await;
    assert_eq!(past_end.status, 404);

    // A key without the webhooks scope, then an account without webhooks.
    let deals_only = admin::issue_key(&server, &api.account_id, &["deals"]).await;
    let scoped = call_with("GET", &server.url("/v1/webhooks"), &[("x-api-key", &deals_only)], None).await;
    assert_eq!((scoped.status, scoped.code()), (403, "insufficient_scope"));
    admin::set_webhooks(&server, &api.account_id, false).await;
    for (method, path) in [
        ("GET", "/v1/webhooks"),
        ("POST", "/v1/webhooks/1/test"),
        ("GET", "/v1/webhooks/1/health"),
    ] {
        let answer = api.send(method, path, None).await;
        assert_eq!(
            (answer.status, answer.code()),
            (403, "webhooks_disabled"),
            "{method} {path}"
        );
    }
}

/// The signatures verify with the official Python library too.
fn verify_with_standardwebhooks(secret: &str, deliveries: &[frontdesk_tests::webhook_receiver::Delivery]) {
    let cases: Vec<Value> = deliveries
        .iter()
        .map(|d| json!({"body": d.body, "headers": d.headers}))
        .collect();
    let script = r#"
import json, sys
from standardwebhooks import Webhook
secret, cases = sys.argv[1], json.load(sys.stdin)
wh = Webhook(secret)
for case in cases:
    wh.verify(case["body"], case["headers"])
print(len(cases))
"#;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script, secret])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs (pip install -r tests/requirements.txt)");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(Value::from(cases).to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "standardwebhooks rejected a delivery: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        deliveries.len().to_string()
    );
}

on_both_databases!(deal_events_are_delivered_signed, |db: Db| async move {
    let server = Server::start(&db, FAST).await;
    let receiver = Receiver::start().await;
    let api = Platform::new(&server).await;
    let (_, secret) = subscription(
        &api,
        json!({"name": "crm", "url": receiver.url, "events": ["deal.created", "deal.stage_changed"]}),
    )
    .await;
    // Another account's subscription to every event, made before the events happen: fan-out must not give it
    // this account's events.
    let other = Platform::new(&server).await;
    subscription(&other, json!({"url": receiver.url.clone() + "?other"})).await;
    let deal = api.deal("Acme renewal").await;
    let moved = api
        .send("POST", &format!("/v1/deals/{deal}/move"), Some(json!({"stage": "won"})))
        .await;
    assert_eq!(moved.status, 200);
    let renamed = api
        .send("PATCH", &format!("/v1/deals/{deal}"), Some(json!({"title": "Acme"})))
        .await;
    assert_eq!(renamed.status, 200);

    receiver.wait_for(2, WAIT).await;
    frontdesk_tests::admin::quiesce(&server).await;
    let deliveries: Vec<_> = receiver.deliveries();
    assert_eq!(deliveries.len(), 2, "deal.updated is not subscribed: {deliveries:?}");
    let types: HashSet<&str> = deliveries.iter().map(|d| d.json["type"].as_str().unwrap()).collect();
    assert_eq!(types, HashSet::from(["deal.created", "deal.stage_changed"]));
    for delivery in &deliveries {
        assert!(delivery.verifies(&secret), "signature: {delivery:?}");
        assert!(delivery.header("webhook-id").starts_with("evt_"));
        assert_eq!(delivery.header("content-type"), "application/json");
        let timestamp: i64 = delivery.header("webhook-timestamp").parse().unwrap();
        assert!((chrono::Utc::now().timestamp() - timestamp).abs() < 60);
        assert!(delivery.json["timestamp"].as_str().unwrap().ends_with('Z'));
    }
    let created = deliveries.iter().find(|d| d.json["type"] == "deal.created").unwrap();
    assert_eq!(created.json["data"]["id"], deal.as_str());
    assert_eq!(created.json["data"]["title"], "Acme renewal");
    let stage_changed = deliveries
        .iter()
        .find(|d| d.json["type"] == "deal.stage_changed")
        .unwrap();
    assert_eq!(stage_changed.json["data"]["to_stage"], "won");
    verify_with_standardwebhooks(&secret, &deliveries);

    // The delivery log and health say the same.
    let log = api
        .poll("/v1/webhooks/crm/deliveries", |b| {
            b["deliveries"]
                .as_array()
                .unwrap()
                .iter()
                .all(|d| d["status"] == "succeeded")
        })
        .await;
    let log = log["deliveries"].as_array().unwrap();
    assert_eq!(log.len(), 2);
    for entry in log {
        assert_eq!(entry["attempts"][0]["status_code"], 200);
        assert_eq!(entry["attempts"][0]["error"], Value::Null);
        assert_eq!(entry["next_attempt_at"], Value::Null);
        assert!(entry["delivered_at"].is_string());
    }
    let health = api.get("/v1/webhooks/crm/health").await["health"].clone();
    assert_eq!(health["status"], "active");
    assert_eq!(health["consecutive_failures"], 0);
    assert_eq!(health["pending"], 0);
    assert_eq!(health["attempts_24h"], 2);
    assert_eq!(health["success_rate_24h"], 1.0);
    assert!(health["last_success_at"].is_string());
    let page = api.get("/v1/webhooks/crm/deliveries?limit=1").await;
    let rest = api
        .get(&format!(
            "/v1/webhooks/crm/deliveries?limit=1&cursor={}",
            page["next_cursor"].as_str().unwrap()
        ))
        .await;
    assert_ne!(page["deliveries"][0]["id"], rest["deliveries"][0]["id"]);
    assert_eq!(rest["next_cursor"], Value::Null);
    let garbage = api.send("GET", "/v1/webhooks/crm/deliveries?cursor=xyz", None).await;
    assert_eq!(garbage.status, 400);
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_attempts() {
    let db = Db::sqlite();
    let server = Server::start(&db, FAST).await;
    let receiver = Receiver::start().await;
    let api = Platform::new(&server).await;
    subscription(&api, json!({"name": "m", "url": receiver.url})).await;
    api.send("POST", "/v1/webhooks/m/test", None).await;
    receiver.wait_for(1, WAIT).await;
    let client = frontdesk_tests::http_client();
    let started = std::time::Instant::now();
    loop {
        let text = client
            .get(server.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if text.contains("frontdesk_webhook_attempts_total{outcome=\"delivered\"} 1")
            && text.contains("frontdesk_webhook_delivery_latency_seconds")
        {
            break;
        }
        assert!(started.elapsed() < WAIT, "metrics never showed the attempt:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

on_both_databases!(test_event_retries_on_schedule, |db: Db| async move {
    let server = Server::start(&db, FAST).await;
    let receiver = Receiver::start().await;
    receiver.then(&[500, 503]);
    let api = Platform::new(&server).await;
    let (_, secret) = subscription(&api, json!({"name": "ops", "url": receiver.url})).await;
    let test = api.send("POST", "/v1/webhooks/ops/test", None).await;
    assert_eq!(test.status, 200, "{}", test.body);
    assert_eq!(test.body["delivery"]["event_type"], "webhook.test");
    assert_eq!(test.body["delivery"]["status"], "pending");
    let deliveries = receiver.wait_for(3, WAIT).await;
    assert_eq!(
        deliveries.iter().map(|d| d.answered).collect::<Vec<_>>(),
        vec![500, 503, 200]
    );
    // Every retry carries the same event id, a fresh signature, and came about 1 s (+-20%) later.
    for pair in deliveries.windows(2) {
        assert_eq!(pair[0].header("webhook-id"), pair[1].header("webhook-id"));
        let gap = (pair[1].received_at - pair[0].received_at).to_std().unwrap();
        assert!(gap >= Duration::from_millis(750), "retried after {gap:?}");
    }
    assert!(deliveries.iter().all(|d| d.verifies(&secret)));
    assert_eq!(deliveries[0].json["type"], "webhook.test");
    let log = api
        .poll("/v1/webhooks/ops/deliveries", |b| {
            b["deliveries"][0]["status"] == "succeeded"
        })
        .await;
    let attempts = log["deliveries"][0]["attempts"].as_array().unwrap().clone();
    let codes: Vec<i64> = attempts.iter().map(|a| a["status_code"].as_i64().unwrap()).collect();
    assert_eq!(codes, vec![500, 503, 200]);
    assert_eq!(attempts[0]["error"], "the endpoint answered 500");
    assert!(attempts[0]["next_attempt_at"].is_string());
    assert_eq!(attempts[2]["next_attempt_at"], Value::Null);
    assert_eq!(
        attempts
            .iter()
            .map(|a| a["attempt"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    let health = api.get("/v1/webhooks/ops/health").await["health"].clone();
    assert_eq!(health["consecutive_failures"], 0);
    assert_eq!(health["last_error"], "the endpoint answered 503");
    assert!(health["last_failure_at"].is_string());
    let rate = health["success_rate_24h"].as_f64().unwrap();
    assert!((rate - 1.0 / 3.0).abs() < 1e-9, "{rate}");
});

on_both_databases!(receiver_down_then_up_loses_nothing, |db: Db| async move {
    let server = Server::start(&db, FAST).await;
    let mut receiver = Receiver::start().await;
    let api = Platform::new(&server).await;
    let (_, secret) = subscription(
        &api,
        json!({"name": "crm", "url": receiver.url, "events": ["deal.created"]}),
    )
    .await;
    receiver.down().await;
    let mut deals = HashSet::new();
    for n in 0..5 {
        deals.insert(api.deal(&format!("deal {n}")).await);
    }
    let health = api
        .poll("/v1/webhooks/crm/health", |b| {
            b["health"]["consecutive_failures"].as_i64() >= Some(5)
        })
        .await;
    assert!(
        health["health"]["last_error"]
            .as_str()
            .unwrap()
            .contains("could not reach"),
        "{health}"
    );
    assert_eq!(health["health"]["pending"], 5);
    receiver.up().await;
    let deliveries = receiver
        .wait_until(WAIT, |d| {
            d.iter()
                .map(|d| d.json["data"]["id"].as_str().unwrap_or_default().to_owned())
                .collect::<HashSet<_>>()
                == deals
        })
        .await;
    assert!(deliveries.iter().all(|d| d.verifies(&secret)));
    api.poll("/v1/webhooks/crm/health", |b| {
        b["health"]["pending"] == 0 && b["health"]["consecutive_failures"] == 0
    })
    .await;
});

on_both_databases!(gone_disables_and_re_enable_redelivers, |db: Db| async move {
    let server = Server::start(&db, FAST).await;
    let receiver = Receiver::start().await;
    receiver.answer(410);
    let api = Platform::new(&server).await;
    subscription(
        &api,
        json!({"name": "old", "url": receiver.url, "events": ["deal.created"]}),
    )
    .await;
    let first = api.deal("first").await;
    let disabled = api
        .poll("/v1/webhooks/old", |b| b["webhook"]["status"] == "disabled")
        .await;
    assert_eq!(disabled["webhook"]["disabled_reason"], "gone");
    assert!(disabled["webhook"]["disabled_at"].is_string());
    assert_eq!(receiver.deliveries().len(), 1, "410 is not retried");
    let test = api.send("POST", "/v1/webhooks/old/test", None).await;
    assert_eq!(test.status, 400, "{}", test.body);

    // Events while disabled are kept, not attempted.
    let second = api.deal("second").await;
    api.poll("/v1/webhooks/old/deliveries", |b| {
        b["deliveries"].as_array().unwrap().len() == 2
    })
    .await;
    frontdesk_tests::admin::quiesce(&server).await;
    assert_eq!(receiver.deliveries().len(), 1);

    receiver.answer(200);
    let enabled = api.send("POST", "/v1/webhooks/old/re-enable", None).await;
    assert_eq!(enabled.status, 200, "{}", enabled.body);
    assert_eq!(enabled.body["webhook"]["status"], "active");
    assert_eq!(enabled.body["webhook"]["disabled_reason"], Value::Null);
    assert_eq!(enabled.body["requeued"], 2);
    let deliveries = receiver
        .wait_until(WAIT, |d| d.iter().filter(|d| d.answered == 200).count() == 2)
        .await;
    let delivered: HashSet<&str> = deliveries
        .iter()
        .filter(|d| d.answered == 200)
        .map(|d| d.json["data"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(delivered, HashSet::from([first.as_str(), second.as_str()]));
});

/// Rows of the account's webhook history, as the retention test counts them.
const SETTLED: &str = "SELECT COUNT(*) FROM webhook_deliveries WHERE account_id = $1 AND status <> 'pending'";
const PENDING: &str = "SELECT COUNT(*) FROM webhook_deliveries WHERE account_id = $1 AND status = 'pending'";
/// Attempts as a delivery's log lists them: the rows of those that did not deliver, and the one that did,
/// kept in its delivery's row.
const SETTLED_ATTEMPTS: &str = "SELECT (SELECT COUNT(*) FROM webhook_attempts WHERE webhook_id IN \
     (SELECT id FROM webhooks WHERE account_id = $1 AND name <> 'later')) + (SELECT COUNT(*) FROM webhook_deliveries \
     WHERE account_id = $1 AND delivered_attempt IS NOT NULL)";
const PENDING_ATTEMPTS: &str = "SELECT COUNT(*) FROM webhook_attempts WHERE webhook_id IN \
     (SELECT id FROM webhooks WHERE account_id = $1 AND name = 'later')";
const OTHER_EVENTS: &str = "SELECT COUNT(*) FROM event_outbox WHERE account_id = $1 AND event_type <> 'deal.updated'";
const UPDATED_EVENTS: &str = "SELECT COUNT(*) FROM event_outbox WHERE account_id = $1 AND event_type = 'deal.updated'";

on_both_databases!(
    retention_deletes_what_settled_and_keeps_what_is_pending,
    |db: Db| async move {
        // Retries an hour apart keep a failing delivery pending; what settled goes 10 s after it settled. Once
        // everything has settled, the service's clock is moved an hour back, so the retention's cutoff is before
        // every row until it is reset. (With the clock moved back before anything was written, every row was
        // stamped an hour back too, and a retention pass 10 s later could take them: the test depended on
        // when the passes fell.)
        let mut env: Vec<_> = FAST
            .iter()
            .copied()
            .filter(|(name, _)| *name != "FRONTDESK_WEBHOOK_RETRY_SCHEDULE")
            .collect();
        env.extend([
            ("FRONTDESK_WEBHOOK_RETRY_SCHEDULE", "1h"),
            ("FRONTDESK_WEBHOOK_RETENTION", "10s"),
            ("FRONTDESK_TEST_CLOCK", "true"),
        ]);
        let server = Server::start(&db, &env).await;
        let (ok, gone, later) = (
            Receiver::start().await,
            Receiver::start().await,
            Receiver::start().await,
        );
        gone.answer(410);
        later.answer(500);
        let api = Platform::new(&server).await;
        for (name, receiver, event) in [
            ("ok", &ok, "deal.created"),
            ("gone", &gone, "deal.created"),
            ("later", &later, "deal.updated"),
        ] {
            subscription(&api, json!({"name": name, "url": receiver.url, "events": [event]})).await;
        }
        let deal = api.deal("Kept while pending").await;
        for (method, path, body) in [
            ("PATCH", format!("/v1/deals/{deal}"), json!({"title": "Renamed"})),
            // deal.updated again, and deal.stage_changed, which no subscriber wants: it never gets a delivery.
            ("POST", format!("/v1/deals/{deal}/move"), json!({"stage": "won"})),
        ] {
            let answer = api.send(method, &path, Some(body)).await;
            assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        }

        let (db, account) = (&db, api.account_id.as_str());
        let count = |sql: &'static str| async move { db.scalar(sql, account).await.unwrap().parse::<u64>().unwrap() };
        let started = std::time::Instant::now();
        // Both deal.updated deliveries have had their first attempt (their one retry is an hour later): one
        // whose first attempt came after the clock moved back would be due again when it is reset.
        while count(SETTLED).await < 2 || later.deliveries().len() < 2 {
            assert!(started.elapsed() < WAIT, "the deliveries never settled");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let behind = prost_types::Timestamp {
            seconds: chrono::Utc::now().timestamp() - 3600,
            nanos: 0,
        };
        admin::set_test_clock(&server, Some(behind))
            .await
            .expect("the clock moves");
        // A turn of the retention later: with the cutoff an hour back, nothing is gone.
        db.recurring_turn("webhook_retention").await;
        let pending = count(PENDING).await;
        assert!(pending >= 1);
        assert_eq!(count(SETTLED).await, 2, "settled after the cutoff: kept");
        assert!(count(SETTLED_ATTEMPTS).await >= 2);
        assert!(
            count(OTHER_EVENTS).await >= 2,
            "deal.created and deal.stage_changed are kept"
        );

        admin::set_test_clock(&server, None).await.expect("the clock resets");
        let started = std::time::Instant::now();
        // The disabled subscription's delivery stays, for a re-enable to queue again.
        while count(SETTLED).await > 1 {
            assert!(started.elapsed() < WAIT, "settled deliveries were never deleted");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // One more turn of the retention: deal.stage_changed, written just after deal.created, may come of age
        // a moment after the turn that took the delivered one.
        db.recurring_turn("webhook_retention").await;
        assert_eq!(count(SETTLED).await, 1, "the disabled subscription's delivery is kept");
        assert_eq!(
            count(SETTLED_ATTEMPTS).await,
            1,
            "the delivered one's attempt went with it; the disabled one's stays"
        );
        assert_eq!(
            count(OTHER_EVENTS).await,
            1,
            "deal.created stays with the kept delivery, deal.stage_changed (never delivered) went with its age"
        );
        assert_eq!((ok.deliveries().len(), gone.deliveries().len()), (1, 1));
        assert_eq!(count(PENDING).await, pending, "pending deliveries are kept however old");
        assert_eq!(count(PENDING_ATTEMPTS).await, later.deliveries().len() as u64);
        assert!(
            count(UPDATED_EVENTS).await >= 1,
            "deal.updated is still to be delivered"
        );
        let log = api.get("/v1/webhooks/ok/deliveries").await;
        assert_eq!(log["deliveries"], json!([]));
        let log = api.get("/v1/webhooks/gone/deliveries").await;
        assert_eq!(log["deliveries"].as_array().unwrap().len(), 1);
    }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuous_failure_disables() {
    let db = Db::sqlite();
    let mut env = FAST.to_vec();
    env.push(("FRONTDESK_WEBHOOK_DISABLE_AFTER", "2s"));
    let server = Server::start(&db, &env).await;
    let receiver = Receiver::start().await;
    receiver.answer(500);
    let api = Platform::new(&server).await;
    subscription(&api, json!({"name": "flaky", "url": receiver.url})).await;
    api.send("POST", "/v1/webhooks/flaky/test", None).await;
    let disabled = api
        .poll("/v1/webhooks/flaky/health", |b| b["health"]["status"] == "disabled")
        .await;
    assert_eq!(disabled["health"]["disabled_reason"], "failing");
    assert!(disabled["health"]["consecutive_failures"].as_i64().unwrap() >= 2);
    assert_eq!(disabled["health"]["pending"], 0);
    let attempts = receiver.deliveries().len();
    frontdesk_tests::admin::quiesce(&server).await;
    assert_eq!(receiver.deliveries().len(), attempts, "no attempts once disabled");
    // The state is in the database: a restart keeps it.
    let (account_id, key) = (api.account_id.clone(), api.key.clone());
    let server = server.restart().await;
    let api = Platform::of(&server, &account_id, &key);
    assert_eq!(api.get("/v1/webhooks/flaky").await["webhook"]["status"], "disabled");
}

/// Creates `count` deals over gRPC, 16 at a time; returns their ids.
async fn create_deals(grpc_url: &str, key: &str, count: usize) -> HashSet<String> {
    let channel = tonic::transport::Channel::from_shared(grpc_url.to_owned())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..16 {
        let (channel, key) = (channel.clone(), key.to_owned());
        tasks.spawn(async move {
            let mut client = DealsClient::new(channel);
            let mut ids = Vec::new();
            for n in (worker..count).step_by(16) {
                let mut request = tonic::Request::new(CreateDealRequest {
                    title: format!("deal {n}"),
                    stage: "new".into(),
                    ..Default::default()
                });
                request.metadata_mut().insert("x-api-key", key.parse().unwrap());
                ids.push(client.create_deal(request).await.unwrap().into_inner().deal.unwrap().id);
            }
            ids
        });
    }
    tasks.join_all().await.into_iter().flatten().collect()
}

fn delivered_deals(deliveries: &[frontdesk_tests::webhook_receiver::Delivery]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for delivery in deliveries.iter().filter(|d| d.answered == 200) {
        *counts
            .entry(delivery.json["data"]["id"].as_str().unwrap_or_default().to_owned())
            .or_default() += 1;
    }
    counts
}

on_both_databases!(sigkill_with_1000_pending_loses_nothing, |db: Db| async move {
    // Retries every second for a minute, so no delivery runs out of attempts while the endpoint is down.
    let schedule = vec!["1s"; 60].join(",");
    let mut env = FAST.to_vec();
    env.push(("FRONTDESK_WEBHOOK_RETRY_SCHEDULE", &schedule));
    let server = Server::start(&db, &env).await;
    let mut receiver = Receiver::start().await;
    let api = Platform::new(&server).await;
    subscription(&api, json!({"url": receiver.url, "events": ["deal.created"]})).await;
    // The endpoint is down while the events are made, so all 1,000 are pending; then it comes back slowly
    // and the process is killed in the middle of delivering them.
    receiver.down().await;
    let deals = create_deals(&server.grpc, &api.key, 1_000).await;
    assert_eq!(deals.len(), 1_000);
    api.poll("/v1/webhooks/1/health", |b| b["health"]["pending"] == 1_000)
        .await;
    receiver.delay(Duration::from_millis(50));
    receiver.up().await;
    receiver.wait_until(WAIT, |d| d.iter().any(|d| d.answered == 200)).await;
    let server = server.restart().await;
    let delivered_before = delivered_deals(&receiver.deliveries()).len();
    assert!(delivered_before < 1_000, "killed while deliveries were pending");
    receiver.delay(Duration::ZERO);
    let deliveries = receiver
        .wait_until(Duration::from_secs(120), |d| delivered_deals(d).len() == 1_000)
        .await;
    let counts = delivered_deals(&deliveries);
    assert!(deals.iter().all(|id| counts.contains_key(id)), "every event delivered");
    drop(server);
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_core_processes_deliver_each_event_once() {
    let db = Db::postgres().await;
    let mut env = base_env();
    env.insert("DATABASE_URL".into(), db.url());
    for (k, v) in FAST {
        env.insert((*k).to_owned(), (*v).to_owned());
    }
    let first = Server::spawn(None, vec!["core".into()], env.clone()).await;
    let second = Server::spawn(None, vec!["core".into()], env).await;
    let receiver = Receiver::start().await;
    receiver.delay(Duration::from_millis(5));
    let (account_id, key) = admin::account(&first, "growth", 10_000).await;
    let mut client = WebhooksClient::new(
        tonic::transport::Channel::from_shared(second.grpc.clone())
            .unwrap()
            .connect()
            .await
            .unwrap(),
    );
    let mut request = tonic::Request::new(frontdesk_api::v1::CreateWebhookRequest {
        url: receiver.url.clone(),
        events: vec!["deal.created".into()],
        ..Default::default()
    });
    request.metadata_mut().insert("x-api-key", key.parse().unwrap());
    client.create_webhook(request).await.unwrap();
    let (a, b) = tokio::join!(
        create_deals(&first.grpc, &key, 200),
        create_deals(&second.grpc, &key, 200)
    );
    let deals: HashSet<String> = a.union(&b).cloned().collect();
    assert_eq!(deals.len(), 400);
    let deliveries = receiver.wait_until(WAIT, |d| delivered_deals(d).len() == 400).await;
    frontdesk_tests::admin::quiesce(&first).await;
    let counts = delivered_deals(&receiver.deliveries());
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    assert_eq!(deliveries.len(), 400);
    let _ = account_id;
}
