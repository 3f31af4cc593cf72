//! The site API over HTTP against the real binary (`serve`), on SQLite and on PostgreSQL.

use frontdesk_tests::{Db, Server, call, checkout_signature, join_all, on_both_databases, razorpay::TEST_KEY_SECRET};
use serde_json::json;

async fn create_order(server: &Server, body: serde_json::Value) -> frontdesk_tests::Answer {
    call("POST", &server.url("/payments/create-order"), Some(&body.to_string())).await
}

async fn verify(server: &Server, order_id: &str, payment_id: &str, signature: &str) -> frontdesk_tests::Answer {
    let body = json!({"orderId": order_id, "paymentId": payment_id, "signature": signature});
    call("POST", &server.url("/payments/verify"), Some(&body.to_string())).await
}

fn growth_inr() -> serde_json::Value {
    json!({"plan": "growth", "currency": "INR", "phone": "+919812345678", "name": "Asha Rao",
           "email": "asha@example.in", "businessName": "Rao Dental"})
}

on_both_databases!(health_is_ok_and_echoes_request_ids, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let answer = call("GET", &server.url("/healthz"), None).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, json!({"status": "ok", "version": "0.1.0"}));
    assert!(answer.header("x-request-id").unwrap().starts_with("req_"));

    let echoed = frontdesk_tests::http_client()
        .get(server.url("/healthz"))
        .header("x-request-id", "trace-42.a")
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.headers()["x-request-id"], "trace-42.a");
});

on_both_databases!(create_order_prices_every_plan_and_currency, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    for (plan, currency, amount) in [
        ("growth", "INR", 799_900),
        ("launch", "USD", 3_900),
        ("scale", "AED", 91_900),
    ] {
        let answer = create_order(
            &server,
            json!({"plan": plan, "currency": currency, "phone": "+14155550123"}),
        )
        .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let order_id = answer.body["orderId"].as_str().unwrap();
        assert!(order_id.starts_with("order_") && order_id.len() == 20, "{order_id}");
        assert!(order_id[6..].bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(answer.body["amount"], amount);
        assert_eq!(answer.body["currency"], currency);
        assert_eq!(answer.body["keyId"], "rzp_test_local");
        let status = db.scalar("SELECT status FROM orders WHERE id = $1", order_id).await;
        assert_eq!(status.as_deref(), Some("created"));
    }
});

on_both_databases!(the_price_table_is_configurable, |db: Db| async move {
    let server = Server::start(&db, &[("FRONTDESK_PRICES", "growth.INR=123456")]).await;
    let answer = create_order(&server, growth_inr()).await;
    assert_eq!(answer.body["amount"], 123_456);
    let answer = create_order(
        &server,
        json!({"plan": "scale", "currency": "INR", "phone": "+919812345678"}),
    )
    .await;
    assert_eq!(answer.body["amount"], 1_999_900);
});

on_both_databases!(bad_create_order_input_is_a_precise_400, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let valid = growth_inr();
    let with = |key: &str, value: serde_json::Value| {
        let mut body = valid.clone();
        body[key] = value;
        body.to_string()
    };
    let without_plan = {
        let mut body = valid.clone();
        body.as_object_mut().unwrap().remove("plan");
        body.to_string()
    };
    let cases: Vec<(String, &str)> = vec![
        (without_plan, "plan"),
        (with("plan", json!("gold")), "plan"),
        (with("currency", json!("EUR")), "currency"),
        (with("phone", json!("98123")), "phone"),
        (with("phone", json!("+0123456789")), "phone"),
        (with("email", json!("x@")), "email"),
        (with("plan", json!(5)), "plan"),
        (with("phone", json!(["+919812345678"])), "phone"),
        (with("businessName", json!({"a": 1})), "businessName"),
        (with("coupon", json!("FREE")), "coupon"),
        (with("name", json!("n".repeat(201))), "name"),
        (with("businessName", json!("b".repeat(201))), "businessName"),
    ];
    for (body, field) in cases {
        let answer = call("POST", &server.url("/payments/create-order"), Some(&body)).await;
        assert_eq!(answer.status, 400, "{body} -> {}", answer.body);
        assert_eq!(answer.body["success"], false);
        assert_eq!(answer.code(), "invalid_argument", "{body}");
        assert!(answer.fields().contains(&field.to_owned()), "{body} -> {}", answer.body);
        assert_eq!(
            answer.body["error"]["request_id"].as_str(),
            answer.header("x-request-id"),
            "the error names the request"
        );
    }
    for (body, needle) in [
        ("{\"plan\": \"growth\",", "malformed JSON"),
        ("not json", "malformed JSON"),
        ("[{\"plan\": \"growth\"}]", "must be a JSON object"),
        ("\"growth\"", "must be a JSON object"),
    ] {
        let answer = call("POST", &server.url("/payments/create-order"), Some(body)).await;
        assert_eq!(answer.status, 400, "{body}");
        assert_eq!(answer.fields(), ["body"], "{body}");
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{body} -> {message}");
    }
    let malformed = call(
        "POST",
        &server.url("/payments/create-order"),
        Some("{\n \"plan\": growth}"),
    )
    .await;
    assert!(
        malformed.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("line 2 column")
    );

    let oversize = format!("{{\"name\": \"{}\"}}", "x".repeat(1_100_000));
    let answer = call("POST", &server.url("/payments/create-order"), Some(&oversize)).await;
    assert_eq!((answer.status, answer.code()), (413, "payload_too_large"));

    let answer = call(
        "POST",
        &server.url("/payments/create-order?plan=growth"),
        Some(&valid.to_string()),
    )
    .await;
    assert_eq!((answer.status, answer.fields()), (400, vec!["plan".to_owned()]));
    let answer = call("GET", &server.url("/payments/create-order"), None).await;
    assert_eq!((answer.status, answer.code()), (405, "method_not_allowed"));
    let answer = call("GET", &server.url("/payments/nothing"), None).await;
    assert_eq!((answer.status, answer.code()), (404, "not_found"));
    assert!(!server.logs().contains("panicked"));
});

on_both_databases!(verify_activates_the_subscriber_idempotently, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let order = create_order(&server, growth_inr()).await;
    let order_id = order.body["orderId"].as_str().unwrap();
    let signature = checkout_signature(TEST_KEY_SECRET, order_id, "pay_29QQoUBi66xm2f");

    let tampered = format!(
        "{}{}",
        &signature[..63],
        if signature.ends_with('0') { '1' } else { '0' }
    );
    let answer = verify(&server, order_id, "pay_29QQoUBi66xm2f", &tampered).await;
    assert_eq!((answer.status, answer.code()), (400, "invalid_signature"));
    let answer = verify(&server, order_id, "pay_29QQoUBi66xm2f", &signature.to_uppercase()).await;
    assert_eq!((answer.status, answer.code()), (400, "invalid_signature"));
    assert_eq!(
        db.scalar("SELECT status FROM subscribers WHERE phone = $1", "+919812345678")
            .await,
        None
    );

    let expected = json!({"success": true, "status": "active", "orderId": order_id,
                          "paymentId": "pay_29QQoUBi66xm2f", "plan": "growth"});
    let answer = verify(&server, order_id, "pay_29QQoUBi66xm2f", &signature).await;
    assert_eq!((answer.status, &answer.body), (200, &expected));
    let again = verify(&server, order_id, "pay_29QQoUBi66xm2f", &signature).await;
    assert_eq!((again.status, &again.body), (200, &expected), "verify is idempotent");

    let other = checkout_signature(TEST_KEY_SECRET, order_id, "pay_other");
    let answer = verify(&server, order_id, "pay_other", &other).await;
    assert_eq!((answer.status, answer.code()), (400, "order_already_paid"));

    assert_eq!(
        db.scalar("SELECT status FROM orders WHERE id = $1", order_id)
            .await
            .as_deref(),
        Some("paid")
    );
    let phone = "+919812345678";
    assert_eq!(
        db.scalar("SELECT status FROM subscribers WHERE phone = $1", phone)
            .await
            .as_deref(),
        Some("active")
    );
    assert_eq!(
        db.scalar("SELECT plan FROM subscribers WHERE phone = $1", phone)
            .await
            .as_deref(),
        Some("growth")
    );
    assert_eq!(
        db.scalar("SELECT business_name FROM subscribers WHERE phone = $1", phone)
            .await
            .as_deref(),
        Some("Rao Dental")
    );

    let answer = call("POST", &server.url("/payments/verify"), Some("{\"orderId\": \"\"}")).await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.fields(), ["orderId", "paymentId", "signature"]);
});

on_both_databases!(an_order_from_another_run_is_unknown, |db: Db| async move {
    let elsewhere = Db::sqlite();
    let other_server = Server::start(&elsewhere, &[]).await;
    let foreign = create_order(&other_server, growth_inr()).await;
    let foreign_id = foreign.body["orderId"].as_str().unwrap().to_owned();
    drop(other_server);

    let server = Server::start(&db, &[]).await;
    let signature = checkout_signature(TEST_KEY_SECRET, &foreign_id, "pay_1");
    let answer = verify(&server, &foreign_id, "pay_1", &signature).await;
    assert_eq!((answer.status, answer.code()), (400, "unknown_order"));
});

on_both_databases!(orders_survive_a_restart, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let order = create_order(&server, growth_inr()).await;
    let order_id = order.body["orderId"].as_str().unwrap().to_owned();
    let server = server.restart().await;
    let signature = checkout_signature(TEST_KEY_SECRET, &order_id, "pay_after_restart");
    let answer = verify(&server, &order_id, "pay_after_restart", &signature).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["plan"], "growth");
});

on_both_databases!(
    the_generated_local_secret_is_kept_across_restarts,
    |db: Db| async move {
        // No RAZORPAY_KEY_SECRET: the local provider generates one and keeps it in the database.
        let server = Server::start(&db, &[("RAZORPAY_KEY_SECRET", "")]).await;
        let order = create_order(&server, growth_inr()).await;
        let order_id = order.body["orderId"].as_str().unwrap().to_owned();
        let secret = db
            .scalar("SELECT value FROM settings WHERE key = $1", "local_payment_key_secret")
            .await
            .expect("a generated secret is stored");
        assert_eq!(secret.len(), 24);
        let server = server.restart().await;
        let answer = verify(
            &server,
            &order_id,
            "pay_1",
            &checkout_signature(&secret, &order_id, "pay_1"),
        )
        .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_degraded_while_postgres_is_unreachable() {
    let db = Db::postgres().await;
    let server = Server::start(&db, &[]).await;
    assert_eq!(call("GET", &server.url("/healthz"), None).await.status, 200);

    let name = db.name().to_owned();
    db.admin(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false"))
        .await;
    db.admin(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
    ))
    .await;
    let answer = call("GET", &server.url("/healthz"), None).await;
    assert_eq!(answer.status, 503);
    assert_eq!(answer.body, json!({"status": "degraded", "version": "0.1.0"}));
    let order = create_order(&server, growth_inr()).await;
    // A database that cannot be reached is a moment's unavailability: 503 with Retry-After, so clients retry.
    assert_eq!((order.status, order.code()), (503, "unavailable"), "{}", order.body);
    assert!(order.header("retry-after").is_some(), "a 503 says when to retry");
    let message = order.body["error"]["message"].as_str().unwrap();
    assert!(
        !message.contains(&name) && !message.contains("connect"),
        "no internals: {message}"
    );

    let mut grpc = frontdesk_api::site::v0::site_client::SiteClient::connect(server.grpc.clone())
        .await
        .unwrap();
    let health = grpc
        .health(frontdesk_api::site::v0::HealthRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(health.status, "degraded", "gRPC answers OK with the degraded status");

    db.admin(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true")).await;
    // The pool's background workers were retrying their connects while the database was away, so the first
    // check after its return may still queue behind them: recovery is expected within seconds, not at once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let answer = call("GET", &server.url("/healthz"), None).await;
        if (answer.status, answer.body["status"].as_str()) == (200, Some("ok")) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still {} {} after 15 s",
            answer.status,
            answer.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

on_both_databases!(
    requests_accept_snake_case_and_the_order_keeps_the_subscriber,
    |db: Db| async move {
        let server = Server::start(&db, &[]).await;
        let body = json!({"plan": "scale", "currency": "USD", "phone": "+14155550123", "name": "Lee Chan",
                      "email": "lee@example.com", "business_name": "Chan Clinic"});
        let order = create_order(&server, body).await;
        assert_eq!(order.status, 200, "{}", order.body);
        let order_id = order.body["orderId"].as_str().unwrap();
        for (column, expected) in [
            ("name", "Lee Chan"),
            ("email", "lee@example.com"),
            ("business_name", "Chan Clinic"),
            ("phone", "+14155550123"),
            ("plan", "scale"),
            ("currency", "USD"),
        ] {
            let sql = format!("SELECT {column} FROM orders WHERE id = $1");
            assert_eq!(db.scalar(&sql, order_id).await.as_deref(), Some(expected), "{column}");
        }
        let signature = checkout_signature(TEST_KEY_SECRET, order_id, "pay_snake");
        let verify = json!({"order_id": order_id, "payment_id": "pay_snake", "signature": signature}).to_string();
        let answer = call("POST", &server.url("/payments/verify"), Some(&verify)).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let email = db
            .scalar("SELECT email FROM subscribers WHERE phone = $1", "+14155550123")
            .await;
        assert_eq!(email.as_deref(), Some("lee@example.com"));
    }
);

on_both_databases!(concurrent_verifies_settle_one_payment, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let order = create_order(&server, growth_inr()).await;
    let order_id = order.body["orderId"].as_str().unwrap().to_owned();
    let attempts = (0..8).map(|i| {
        let payment = if i % 2 == 0 {
            "pay_even".to_owned()
        } else {
            "pay_odd".to_owned()
        };
        let signature = checkout_signature(TEST_KEY_SECRET, &order_id, &payment);
        let url = server.url("/payments/verify");
        let body = json!({"orderId": order_id, "paymentId": payment, "signature": signature}).to_string();
        async move { (payment, call("POST", &url, Some(&body)).await) }
    });
    let results = join_all(attempts).await;
    let winners: std::collections::HashSet<_> = results
        .iter()
        .filter(|(_, a)| a.status == 200)
        .map(|(p, _)| p.clone())
        .collect();
    assert_eq!(winners.len(), 1, "exactly one payment settles the order");
    for (payment, answer) in &results {
        if !winners.contains(payment) {
            assert_eq!(
                (answer.status, answer.code()),
                (400, "order_already_paid"),
                "{}",
                answer.body
            );
        }
    }
    let paid_with = db
        .scalar("SELECT payment_id FROM orders WHERE id = $1", &order_id)
        .await;
    assert!(winners.contains(paid_with.as_deref().unwrap()));
});
