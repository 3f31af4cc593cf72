//! Deployment modes and start-up: the zero-configuration default, split core/edge, `migrate`, and the
//! OpenAPI document the edge serves.

use std::collections::BTreeMap;

use frontdesk_tests::{Db, Server, binary, call, server::base_env};
use sea_orm::{ConnectionTrait, DbBackend, Statement};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_runs_on_an_embedded_sqlite_file() {
    let dir = std::env::temp_dir().join(format!("frontdesk-default-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // No subcommand and no DATABASE_URL: `serve` on ./frontdesk.db.
    let mut env = base_env();
    env.remove("RAZORPAY_KEY_SECRET");
    let started = std::time::Instant::now();
    let server = Server::spawn(Some(dir.clone()), vec![], env).await;
    let answer = call("GET", &server.url("/healthz"), None).await;
    assert_eq!(
        (answer.status, &answer.body),
        (200, &json!({"status": "ok", "version": "0.1.0"}))
    );
    assert!(started.elapsed().as_secs() < 10, "healthy within seconds");
    assert!(
        dir.join("frontdesk.db").exists(),
        "the database file is created in the working directory"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_and_edge_run_apart() {
    let db = Db::postgres().await;
    let mut env = base_env();
    env.insert("DATABASE_URL".into(), db.url());
    let core = Server::spawn(None, vec!["core".into()], env).await;
    let edge = Server::spawn(
        None,
        vec!["edge".into(), "--core".into(), core.grpc.clone()],
        base_env(),
    )
    .await;
    let health = call("GET", &edge.url("/healthz"), None).await;
    assert_eq!((health.status, health.body["status"].as_str()), (200, Some("ok")));
    // The core warns when PostgreSQL will not vacuum its queue tables by itself (and only then).
    let setting = db
        .connect()
        .await
        .query_one_raw(Statement::from_string(DbBackend::Postgres, "SHOW autovacuum"))
        .await
        .unwrap()
        .map(|row| row.try_get_by_index::<String>(0).unwrap());
    assert_eq!(
        core.logs().contains("autovacuum is off"),
        setting.as_deref() == Some("off"),
        "autovacuum {setting:?}"
    );
    let body = json!({"plan": "growth", "currency": "AED", "phone": "+971501234567"}).to_string();
    let order = call("POST", &edge.url("/payments/create-order"), Some(&body)).await;
    assert_eq!((order.status, order.body["amount"].as_i64()), (200, Some(36_900)));
    let bad = call(
        "POST",
        &edge.url("/payments/create-order"),
        Some("{\"plan\": \"gold\"}"),
    )
    .await;
    assert_eq!(bad.status, 400);
    assert!(bad.fields().contains(&"plan".to_owned()));

    // The core goes away: the edge answers 503 without internals, and recovers when it is back.
    let core = {
        let mut core = core;
        core.kill();
        core
    };
    let down = call("POST", &edge.url("/payments/create-order"), Some(&body)).await;
    assert_eq!((down.status, down.code()), (503, "unavailable"), "{}", down.body);
    drop(core);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_creates_the_schema_and_is_repeatable() {
    for db in [Db::empty_sqlite(), Db::empty_postgres().await] {
        for _ in 0..2 {
            let status = std::process::Command::new(binary::path())
                .arg("migrate")
                .env("DATABASE_URL", db.url())
                .status()
                .unwrap();
            assert!(status.success());
        }
        let count = db.scalar("SELECT COUNT(*) FROM orders WHERE id = $1", "none").await;
        assert_eq!(count.as_deref(), Some("0"), "the orders table exists");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_configuration_stops_start_up_with_a_reason() {
    let mut env: BTreeMap<String, String> = base_env();
    env.insert("FRONTDESK_PRICES".into(), "gold.INR=5".into());
    let stderr = refused_start(&env);
    assert!(stderr.contains("unknown plan `gold`"), "{stderr}");

    let db = Db::sqlite();
    env.remove("FRONTDESK_PRICES");
    env.insert("DATABASE_URL".into(), db.url());
    env.insert("FRONTDESK_PAYMENT_PROVIDER".into(), "razorpay".into());
    let stderr = refused_start(&env);
    assert!(stderr.contains("RAZORPAY_KEY_ID"), "{stderr}");
}

/// Starts `serve` with exactly `env` and expects it to exit with an error within 20 seconds; its stderr.
fn refused_start(env: &BTreeMap<String, String>) -> String {
    let mut child = std::process::Command::new(binary::path())
        .arg("serve")
        .env_clear()
        .envs(env)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve kept running with a bad configuration");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(!status.success());
    std::io::read_to_string(child.stderr.take().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_is_valid_openapi_3_1_and_covers_every_route() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[]).await;
    let answer = call("GET", &server.url("/openapi.json"), None).await;
    assert_eq!(answer.status, 200);
    let doc = answer.body;
    assert_eq!(doc["openapi"], "3.1.0");
    for (path, method) in [
        ("/healthz", "get"),
        ("/payments/create-order", "post"),
        ("/payments/verify", "post"),
    ] {
        let operation = &doc["paths"][path][method];
        assert!(operation.is_object(), "{method} {path} documented");
        assert!(operation["responses"]["200"]["content"]["application/json"]["schema"].is_object());
        assert!(operation["responses"]["400"].is_object());
    }
    // Every documented operation is a live route (the router's own 404 says "no operation"), and the
    // document lists the platform routes too.
    let mut operations = 0;
    for (path, methods) in doc["paths"].as_object().unwrap() {
        let concrete = path
            .split('/')
            .map(|segment| if segment.starts_with('{') { "x" } else { segment })
            .collect::<Vec<_>>()
            .join("/");
        for method in methods.as_object().unwrap().keys() {
            let answer = call(&method.to_uppercase(), &server.url(&concrete), None).await;
            let message = answer.body["error"]["message"].as_str().unwrap_or_default();
            assert!(
                !message.starts_with("no operation"),
                "{method} {path} is documented but not routed"
            );
            operations += 1;
        }
    }
    assert!(operations >= 19, "{operations} operations documented");
    for path in [
        "/v1/api-keys/current",
        "/v1/deals",
        "/v1/deals/{deal_id}/move",
        "/v1/pipelines",
        "/v1/stages/{stage_id}",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} documented");
    }
    // An upload takes multipart/form-data: the file as a binary part, its other fields as text parts.
    let upload = &doc["paths"]["/v1/kb-sources/file"]["post"]["requestBody"]["content"]["multipart/form-data"];
    assert_eq!(
        upload["schema"]["properties"]["file"]["contentMediaType"], "application/octet-stream",
        "{upload}"
    );
    assert!(upload["schema"]["properties"]["agent_id"].is_object(), "{upload}");
    assert!(doc["paths"]["/v1/kb-sources/file"]["post"]["responses"]["413"].is_object());
    assert!(doc["paths"]["/v1/kb-sources/estimate"]["post"].is_object());
    let create = &doc["paths"]["/payments/create-order"]["post"];
    assert!(create["requestBody"]["content"]["application/json"]["schema"]["$ref"].is_string());
    let request_schema = &doc["components"]["schemas"]["CreateOrderRequest"];
    assert!(
        request_schema["properties"]["businessName"].is_object(),
        "site schemas use camelCase"
    );

    // Names a client generator can use, what the service requires, the errors each operation answers,
    // links to what can be done next, and the retired calls marked.
    let create_deal = &doc["paths"]["/v1/deals"]["post"];
    assert_eq!(create_deal["operationId"], "createDeal");
    let deal_request = &doc["components"]["schemas"]["CreateDealRequest"];
    assert_eq!(deal_request["required"], json!(["title", "stage"]), "{deal_request}");
    assert_eq!(deal_request["properties"]["probability"]["maximum"], 100);
    assert_eq!(
        deal_request["properties"]["probability"]["type"],
        json!(["number", "null"]),
        "a request may send null for what it need not send"
    );
    // A closed set of values is an enum schema of its own, named after its message and field.
    assert_eq!(
        doc["components"]["schemas"]["Deal"]["properties"]["status"]["$ref"],
        "#/components/schemas/DealStatus"
    );
    assert_eq!(
        doc["components"]["schemas"]["DealStatus"]["enum"],
        json!(["open", "won", "lost"])
    );
    // An answer's resource is always there.
    assert_eq!(
        doc["components"]["schemas"]["DealAnswer"]["properties"]["deal"]["$ref"],
        "#/components/schemas/Deal"
    );
    assert_eq!(
        create_deal["responses"]["200"]["links"]["GetDeal"]["parameters"]["deal_id"],
        "$response.body#/deal/id"
    );
    let statuses = |path: &str, method: &str| -> Vec<String> {
        doc["paths"][path][method]["responses"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(
        statuses("/v1/pipelines", "post"),
        ["200", "400", "401", "403", "409", "413", "429", "503", "504"]
    );
    assert!(statuses("/v1/summaries", "post").contains(&"402".to_owned()));
    assert!(
        !statuses("/v1/deals", "get").contains(&"500".to_owned()),
        "500 only where it can happen"
    );
    assert!(statuses("/payments/create-order", "post").contains(&"500".to_owned()));
    let conflict = &doc["paths"]["/v1/pipelines"]["post"]["responses"]["409"]["content"]["application/json"];
    assert_eq!(
        conflict["examples"]["already_exists"]["value"]["error"]["code"],
        "already_exists"
    );
    let campaigns = &doc["paths"]["/v1/campaigns"]["get"];
    assert_eq!(campaigns["deprecated"], true);
    assert!(campaigns["responses"]["410"].is_object());
    let transcript = &doc["paths"]["/v1/conversations/{conversation_id}/transcript"]["get"]["responses"]["200"];
    let media_types: Vec<&String> = transcript["content"].as_object().unwrap().keys().collect();
    assert_eq!(media_types, ["application/json", "text/markdown", "text/plain"]);

    let file = std::env::temp_dir().join(format!("frontdesk-openapi-{}.json", std::process::id()));
    std::fs::write(&file, doc.to_string()).unwrap();
    let output = std::process::Command::new("python3")
        .args(["-m", "openapi_spec_validator", "--schema", "3.1"])
        .arg(&file)
        .output()
        .expect("python3 runs (pip install -r tests/requirements.txt)");
    let _ = std::fs::remove_file(&file);
    assert!(
        output.status.success(),
        "openapi-spec-validator: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
