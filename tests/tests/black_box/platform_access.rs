//! Platform access over REST and gRPC against the real binary: the four key presentations, every 401/403
//! case, rotation and revocation (one process and two sharing PostgreSQL and Redis), rate limits in Redis
//! and in process, Redis failing mid-way, sub-accounts, the admin CLI, the first-account bootstrap and the
//! rule that a full key never shows in logs, error bodies or metrics.

use std::time::Duration;

use base64::Engine;
use frontdesk_api::v1::{GetCurrentApiKeyRequest, api_keys_client::ApiKeysClient};
use frontdesk_tests::{
    Answer, Db, Server, admin, binary,
    blackhole::Blackhole,
    call, call_with, on_both_databases,
    redis_server::{PrivateRedis, shared_url},
};
use tonic::{Code, metadata::MetadataValue};

async fn current(server: &Server, headers: &[(&str, &str)]) -> Answer {
    call_with("GET", &server.url("/v1/api-keys/current"), headers, None).await
}

async fn current_with(server: &Server, key: &str) -> Answer {
    current(server, &[("x-api-key", key)]).await
}

fn assert_unauthenticated(answer: &Answer, case: &str) {
    assert_eq!(
        (answer.status, answer.code()),
        (401, "unauthenticated"),
        "{case}: {}",
        answer.body
    );
    assert_eq!(answer.header("www-authenticate"), Some("Bearer"), "{case}");
}

on_both_databases!(all_four_presentations_are_accepted, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let (_, key) = admin::account(&server, "growth", 0).await;
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{key}:"))
    );
    let bearer = format!("Bearer {key}");
    for headers in [
        vec![("x-api-key", key.as_str())],
        vec![("authorization", bearer.as_str())],
        vec![("authorization", basic.as_str())],
    ] {
        let answer = current(&server, &headers).await;
        assert_eq!(answer.status, 200, "{headers:?}: {}", answer.body);
    }
    let answer = call("GET", &server.url(&format!("/v1/api-keys/current?apiKey={key}")), None).await;
    assert_eq!(answer.status, 200);
    let same_twice = current(
        &server,
        &[("x-api-key", key.as_str()), ("authorization", bearer.as_str())],
    )
    .await;
    assert_eq!(same_twice.status, 200, "the same key twice is fine");

    let body = &answer.body;
    assert_eq!(body["success"], true);
    assert_eq!(
        body["api_key_masked"],
        format!("{}...{}", &key[..4], &key[key.len() - 4..])
    );
    assert!(body["created_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(body["scopes"], serde_json::json!(["*"]));
    let rate = &body["rate_limit"];
    assert_eq!(
        (rate["limit"].as_i64(), rate["window_seconds"].as_i64()),
        (Some(600), Some(60))
    );
    assert_eq!(
        rate["used"].as_i64().unwrap() + rate["remaining"].as_i64().unwrap(),
        600
    );
    assert_eq!(answer.header("ratelimit-policy"), Some("\"default\";q=600;w=60"));
    assert!(answer.header("ratelimit").unwrap().starts_with("\"default\";r="));
});

on_both_databases!(every_bad_credential_is_a_precise_4xx, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let (account_id, key) = admin::account(&server, "growth", 0).await;
    let (_, other) = admin::account(&server, "growth", 0).await;
    let long = "k".repeat(10 * 1024);
    let spaced = format!("{} {}", &key[..10], &key[10..]);
    for (case, headers) in [
        ("no key", vec![]),
        ("empty key", vec![("x-api-key", "")]),
        ("key with spaces", vec![("x-api-key", spaced.as_str())]),
        ("10 KB key", vec![("x-api-key", long.as_str())]),
        (
            "Basic that is not base64",
            vec![("authorization", "Basic %%%not-base64%%%")],
        ),
        ("unknown scheme", vec![("authorization", "Token abc")]),
        (
            "unknown key",
            vec![("x-api-key", "fdk_00000000000000000000000000000000")],
        ),
    ] {
        assert_unauthenticated(&current(&server, &headers).await, case);
    }
    let two = current(
        &server,
        &[
            ("x-api-key", key.as_str()),
            ("authorization", &format!("Bearer {other}")),
        ],
    )
    .await;
    assert_eq!((two.status, two.code()), (400, "invalid_argument"), "{}", two.body);

    let revoked = admin::issue_key(&server, &account_id, &[]).await;
    let answer = call_with(
        "POST",
        &server.url("/v1/api-keys/revoke"),
        &[("x-api-key", &revoked)],
        None,
    )
    .await;
    assert_eq!(
        (answer.status, &answer.body),
        (200, &serde_json::json!({"success": true, "revoked": true}))
    );
    assert_unauthenticated(&current_with(&server, &revoked).await, "revoked key");

    let (doomed_account, doomed_key) = admin::account(&server, "scale", 0).await;
    admin::client(&server)
        .await
        .delete_account(frontdesk_api::admin::v1::DeleteAccountRequest {
            account_id: doomed_account,
        })
        .await
        .unwrap();
    assert_unauthenticated(&current_with(&server, &doomed_key).await, "key of a deleted account");

    let (launch_account, launch_key) = admin::account(&server, "launch", 0).await;
    let answer = current_with(&server, &launch_key).await;
    assert_eq!((answer.status, answer.code()), (403, "api_access_disabled"));
    assert!(
        answer.header("ratelimit").is_some(),
        "403 answers carry the rate-limit headers"
    );
    admin::set_api_access(&server, &launch_account, true).await;
    assert_eq!(
        current_with(&server, &launch_key).await.status,
        200,
        "the operator can grant access"
    );

    // Secrets never leave: not in error bodies, logs or metrics.
    let metrics = server.metrics().await;
    assert!(metrics.contains("frontdesk_"), "{metrics}");
    for secret in [&key, &other, &revoked, &doomed_key] {
        assert!(!server.logs().contains(secret.as_str()), "a key is in the logs");
        assert!(!two.body.to_string().contains(secret.as_str()));
        assert!(!metrics.contains(secret.as_str()));
    }
    assert!(!server.logs().contains("panicked"));
});

on_both_databases!(rotation_replaces_the_key_at_once, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let (_, key) = admin::account(&server, "growth", 0).await;
    let rotated = call_with(
        "POST",
        &server.url("/v1/api-keys/rotate"),
        &[("x-api-key", &key)],
        Some("{}"),
    )
    .await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let new_key = rotated.body["api_key"].as_str().unwrap().to_owned();
    assert!(new_key.starts_with("fdk_") && new_key.len() == 36 && new_key != key);
    assert_eq!(rotated.body["api_key_masked"], format!("fdk_...{}", &new_key[32..]));
    assert_unauthenticated(&current_with(&server, &key).await, "rotated key");
    assert_eq!(current_with(&server, &new_key).await.status, 200);
    let again = call_with("POST", &server.url("/v1/api-keys/rotate"), &[("x-api-key", &key)], None).await;
    assert_unauthenticated(&again, "rotating a rotated key");
    assert!(!server.logs().contains(&new_key), "the new key is not logged");
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_and_revocation_hold_on_every_replica() {
    let db = Db::postgres().await;
    let redis = shared_url();
    let env = [("REDIS_URL", redis.as_str())];
    let a = Server::start(&db, &env).await;
    let b = Server::start(&db, &env).await;
    let (account_id, key) = admin::account(&a, "growth", 0).await;
    assert_eq!(current_with(&b, &key).await.status, 200, "replica b knows the key");

    let rotated = call_with("POST", &a.url("/v1/api-keys/rotate"), &[("x-api-key", &key)], None).await;
    let new_key = rotated.body["api_key"].as_str().unwrap().to_owned();
    assert_unauthenticated(&current_with(&b, &key).await, "old key on the other replica");
    assert_eq!(current_with(&b, &new_key).await.status, 200);

    let second = admin::issue_key(&a, &account_id, &[]).await;
    assert_eq!(current_with(&b, &second).await.status, 200);
    call_with("POST", &a.url("/v1/api-keys/revoke"), &[("x-api-key", &second)], None).await;
    assert_unauthenticated(&current_with(&b, &second).await, "revoked key on the other replica");

    // Over gRPC directly, against the other replica's core.
    let mut grpc = ApiKeysClient::connect(b.grpc.clone()).await.unwrap();
    let mut request = tonic::Request::new(GetCurrentApiKeyRequest {});
    request
        .metadata_mut()
        .insert("x-api-key", MetadataValue::try_from(key.as_str()).unwrap());
    assert_eq!(
        grpc.get_current_api_key(request).await.unwrap_err().code(),
        Code::Unauthenticated
    );
}

on_both_databases!(grpc_calls_authenticate_with_metadata, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let (_, key) = admin::account(&server, "scale", 0).await;
    let mut grpc = ApiKeysClient::connect(server.grpc.clone()).await.unwrap();
    for (name, value) in [("x-api-key", key.clone()), ("authorization", format!("Bearer {key}"))] {
        let mut request = tonic::Request::new(GetCurrentApiKeyRequest {});
        request
            .metadata_mut()
            .insert(name, MetadataValue::try_from(value.as_str()).unwrap());
        let answer = grpc.get_current_api_key(request).await.unwrap();
        assert!(answer.metadata().get("ratelimit").is_some());
        let current = answer.into_inner();
        assert!(current.success && current.api_key_masked.starts_with("fdk_..."));
        assert_eq!(current.rate_limit.unwrap().limit, 600);
    }
    let status = grpc.get_current_api_key(GetCurrentApiKeyRequest {}).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    assert_eq!(status.metadata().get("www-authenticate").unwrap(), "Bearer");
});

/// Sends requests until one is refused; returns how many were allowed and the refusal.
async fn exhaust(server: &Server, key: &str, at_most: usize) -> (usize, Answer) {
    for allowed in 0..at_most {
        let answer = current_with(server, key).await;
        if answer.status == 429 {
            return (allowed, answer);
        }
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    panic!("no 429 within {at_most} requests");
}

async fn limit_then_recover(server: &Server, key: &str) {
    let (allowed, refused) = exhaust(server, key, 10).await;
    assert_eq!(allowed, 3, "a limit of 3 allows 3");
    assert_eq!(refused.code(), "rate_limited");
    let retry_after: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=4).contains(&retry_after), "Retry-After {retry_after}");
    assert!(refused.header("ratelimit").unwrap().contains("r=0"));
    assert_eq!(refused.header("ratelimit-policy"), Some("\"default\";q=3;w=2"));
    tokio::time::sleep(Duration::from_secs(retry_after)).await;
    let answer = current_with(server, key).await;
    assert_eq!(answer.status, 200, "allowed again after Retry-After: {}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rate_limit_throttles_and_recovers_with_the_documented_keys() {
    let db = Db::postgres().await;
    let redis_url = shared_url();
    let server = Server::start(&db, &[("REDIS_URL", &redis_url), ("FRONTDESK_RATE_WINDOW_SECS", "2")]).await;
    let (account_id, key) = admin::account(&server, "growth", 3).await;
    let client = redis::Client::open(redis_url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    // The day's usage hash is shared: without its time to live, only a request that makes a field sets it again.
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let _: i64 = redis::cmd("PERSIST")
        .arg(format!("frontdesk:usage:{today}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    limit_then_recover(&server, &key).await;

    let windows: Vec<String> = redis::cmd("KEYS")
        .arg(format!("frontdesk:rl:{account_id}:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        !windows.is_empty(),
        "window counters under frontdesk:rl:{{account}}:{{window_start}}"
    );
    let start: u64 = windows[0].rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(start % 2, 0, "window starts are multiples of the window");
    let ttl: i64 = redis::cmd("TTL").arg(&windows[0]).query_async(&mut conn).await.unwrap();
    assert!((1..=4).contains(&ttl), "counters expire after two windows, TTL {ttl}");
    let usage: std::collections::HashMap<String, i64> = redis::cmd("HGETALL")
        .arg(format!("frontdesk:usage:{today}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(usage[&account_id] >= 5, "requests counted: {usage:?}");
    assert!(usage[&format!("{account_id}:throttled")] >= 1, "429s counted");
    let ttl: i64 = redis::cmd("TTL")
        .arg(format!("frontdesk:usage:{today}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        (1..=8 * 86_400).contains(&ttl),
        "usage hashes expire after eight days, TTL {ttl}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_process_limiter_works_without_redis() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[("FRONTDESK_RATE_WINDOW_SECS", "2")]).await;
    let (_, key) = admin::account(&server, "growth", 3).await;
    limit_then_recover(&server, &key).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_one_redis_budget() {
    let db = Db::postgres().await;
    let redis_url = shared_url();
    let env = [("REDIS_URL", redis_url.as_str()), ("FRONTDESK_RATE_WINDOW_SECS", "30")];
    let a = Server::start(&db, &env).await;
    let b = Server::start(&db, &env).await;
    let (_, key) = admin::account(&a, "growth", 4).await;
    for server in [&a, &b, &a, &b] {
        assert_eq!(current_with(server, &key).await.status, 200);
    }
    assert_eq!(current_with(&a, &key).await.status, 429);
    assert_eq!(current_with(&b, &key).await.status, 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_served_when_redis_stops() {
    let db = Db::sqlite();
    let mut redis = PrivateRedis::start();
    let server = Server::start(&db, &[("REDIS_URL", &redis.url)]).await;
    let (_, key) = admin::account(&server, "growth", 0).await;
    assert_eq!(current_with(&server, &key).await.status, 200);
    redis.stop();
    for _ in 0..5 {
        let started = std::time::Instant::now();
        let answer = current_with(&server, &key).await;
        assert_eq!(answer.status, 200, "served while Redis is down: {}", answer.body);
        assert!(answer.header("ratelimit").is_some());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "no long stall on a dead Redis"
        );
    }
    let text = server.metrics().await;
    assert!(text.contains("frontdesk_ratelimit_redis_fallbacks_total"), "{text}");
    assert!(
        text.contains("store=\"local\""),
        "decisions fell back to the in-process store"
    );
    assert!(server.logs().contains("Redis unreachable"), "a warning is logged");
}

on_both_databases!(sub_accounts_act_for_their_agency_only, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let (agency, agency_key) = admin::account(&server, "scale", 0).await;
    let (child, _) = admin::account_under(&server, "growth", 0, &agency).await;
    let (stranger, _) = admin::account(&server, "growth", 0).await;

    let acting = call(
        "GET",
        &server.url(&format!("/v1/api-keys/current?sub_account_id={child}")),
        None,
    )
    .await;
    assert_unauthenticated(&acting, "sub_account_id does not replace a key");
    let path = format!("/v1/api-keys/current?sub_account_id={child}");
    assert_eq!(
        call_with("GET", &server.url(&path), &[("x-api-key", &agency_key)], None)
            .await
            .status,
        200
    );
    for other in [stranger.as_str(), "acc_doesnotexist00"] {
        let path = format!("/v1/api-keys/current?sub_account_id={other}");
        let answer = call_with("GET", &server.url(&path), &[("x-api-key", &agency_key)], None).await;
        assert_eq!((answer.status, answer.code()), (403, "insufficient_scope"), "{other}");
    }
    let body = format!("{{\"sub_account_id\": \"{stranger}\"}}");
    let answer = call_with(
        "POST",
        &server.url("/v1/api-keys/rotate"),
        &[("x-api-key", &agency_key)],
        Some(&body),
    )
    .await;
    assert_eq!(
        (answer.status, answer.code()),
        (403, "insufficient_scope"),
        "body sub_account_id is checked too"
    );
    assert_eq!(
        current_with(&server, &agency_key).await.status,
        200,
        "a refused rotate changed nothing"
    );

    let nested = admin::client(&server)
        .await
        .create_account(frontdesk_api::admin::v1::CreateAccountRequest {
            name: "grandchild".into(),
            plan: "growth".into(),
            parent_account_id: child.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        nested.code(),
        Code::FailedPrecondition,
        "sub-accounts have no sub-accounts"
    );
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_cli_manages_accounts_and_the_token_guards_it() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[]).await;
    let cli = |args: &[&str], token: Option<&str>| {
        let mut command = std::process::Command::new(binary::path());
        command
            .arg("admin")
            .arg("--core")
            .arg(&server.grpc)
            .arg("--json")
            .args(args)
            .env_remove("FRONTDESK_ADMIN_TOKEN");
        if let Some(token) = token {
            command.env("FRONTDESK_ADMIN_TOKEN", token);
        }
        let output = command.output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        (
            output.status.success(),
            serde_json::from_str::<serde_json::Value>(&stdout).unwrap_or_default(),
            output,
        )
    };
    let token = Some(admin::TEST_ADMIN_TOKEN);
    let (ok, created, _) = cli(
        &[
            "create-account",
            "--name",
            "Acme",
            "--plan",
            "growth",
            "--credits",
            "100",
        ],
        token,
    );
    assert!(ok);
    let account = created["account_id"].as_str().unwrap().to_owned();
    let key = created["api_key"].as_str().unwrap().to_owned();
    assert_eq!(
        (created["credit_balance"].as_f64(), created["plan"].as_str()),
        (Some(100.0), Some("growth"))
    );
    assert_eq!(current_with(&server, &key).await.status, 200, "the printed key works");

    let (ok, granted, _) = cli(&["grant-credits", "--account", &account, "--credits", "0.15"], token);
    assert!(ok);
    assert_eq!(granted["credit_balance"].as_f64(), Some(100.15));
    let (ok, _, output) = cli(&["debit-credits", "--account", &account, "--credits", "1000"], token);
    assert!(!ok);
    assert!(String::from_utf8_lossy(&output.stderr).contains("insufficient_credits"));
    let ledger = db
        .scalar("SELECT COUNT(*) FROM credit_ledger WHERE account_id = $1", &account)
        .await;
    assert_eq!(
        ledger.as_deref(),
        Some("2"),
        "opening balance and grant, not the refused debit"
    );

    let (ok, plan, _) = cli(&["set-plan", "--account", &account, "--plan", "launch"], token);
    assert!(ok);
    assert_eq!(plan["plan"], "launch");
    let (ok, updated, _) = cli(
        &[
            "update-account",
            "--account",
            &account,
            "--api-access",
            "false",
            "--rate-limit",
            "7",
        ],
        token,
    );
    assert!(ok);
    assert_eq!(
        (updated["api_access"].as_bool(), updated["rate_limit"].as_i64()),
        (Some(false), Some(7))
    );
    assert_eq!(current_with(&server, &key).await.code(), "api_access_disabled");

    let (ok, issued, _) = cli(&["issue-key", "--account", &account, "--scopes", "deals,agents"], token);
    assert!(ok);
    assert_eq!(issued["scopes"], serde_json::json!(["agents", "deals"]));
    let (ok, _, output) = cli(&["issue-key", "--account", &account, "--scopes", "dealz"], token);
    assert!(!ok);
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown section"));

    let (ok, _, output) = cli(&["get-account", "--account", &account], Some("wrong-token"));
    assert!(!ok);
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .to_lowercase()
            .contains("admin token")
    );
    let (ok, _, output) = cli(&["get-account", "--account", &account], None);
    assert!(!ok);
    assert!(String::from_utf8_lossy(&output.stderr).contains("FRONTDESK_ADMIN_TOKEN"));
    assert!(!server.logs().contains(&key));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_admin_token_every_admin_call_is_refused() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[("FRONTDESK_ADMIN_TOKEN", "")]).await;
    let status = admin::client(&server)
        .await
        .get_account(frontdesk_api::admin::v1::GetAccountRequest {
            account_id: "acc_x".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_embedded_database_gets_a_first_account_whose_key_is_printed_once() {
    use std::io::{BufRead, BufReader};
    let db = Db::sqlite();
    let start = || {
        let mut env = frontdesk_tests::server::base_env();
        env.insert("DATABASE_URL".into(), db.url());
        std::process::Command::new(binary::path())
            .arg("serve")
            .env_clear()
            .envs(env)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut first = start();
    let stdout = BufReader::new(first.stdout.take().unwrap());
    let key = stdout
        .lines()
        .map_while(Result::ok)
        .take(20)
        .find_map(|line| {
            line.split_whitespace()
                .find(|w| w.starts_with("fdk_") && w.len() == 36)
                .map(str::to_owned)
        })
        .expect("the first key is printed");
    first.kill().unwrap();
    let stderr = std::io::read_to_string(first.stderr.take().unwrap()).unwrap();
    assert!(!stderr.contains(&key), "the key is printed, not logged");
    first.wait().unwrap();

    let server = Server::start(&db, &[]).await;
    assert_eq!(current_with(&server, &key).await.status, 200, "the printed key works");
    drop(server);
    // The bootstrap runs before the listeners open: once the second process listens, it has decided.
    let mut second = start();
    let listening = BufReader::new(second.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .any(|line| line.contains(" listening"));
    assert!(listening, "the second process starts serving");
    second.kill().unwrap();
    let out = std::io::read_to_string(second.stdout.take().unwrap()).unwrap();
    assert!(
        !out.contains("fdk_"),
        "no second account or key on a database that has one"
    );
    second.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_latency_and_rate_limit_decisions() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[]).await;
    let (_, key) = admin::account(&server, "growth", 0).await;
    current_with(&server, &key).await;
    current(&server, &[]).await;
    let text = server.metrics().await;
    assert!(
        text.contains("frontdesk_http_requests_total{method=\"GET\",route=\"/v1/api-keys/current\",status=\"200\"}"),
        "{text}"
    );
    assert!(text.contains("status=\"401\""));
    assert!(text.contains("frontdesk_http_request_duration_seconds_bucket"));
    assert!(text.contains("frontdesk_ratelimit_decisions_total{outcome=\"allowed\",store=\"local\"}"));
}

/// Requests with made-up methods, which need no credentials, share one `other` label: a client cannot
/// create metric series at will.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_methods_do_not_create_metric_series() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[]).await;
    for n in 0..20 {
        let method = format!("FOOBAR{n}");
        let unrouted = call(&method, &server.url("/x"), None).await;
        assert_eq!(unrouted.status, 404, "{method} /x");
        let wrong_method = call(&method, &server.url("/v1/deals"), None).await;
        assert_eq!(wrong_method.status, 405, "{method} /v1/deals");
    }
    current(&server, &[]).await;
    let text = server.metrics().await;
    let label = |line: &str, name: &str| {
        let start = line.find(&format!("{name}=\""))? + name.len() + 2;
        let end = line[start..].find('"')? + start;
        Some(line[start..end].to_owned())
    };
    let series: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("frontdesk_http_request"))
        .collect();
    let methods: std::collections::BTreeSet<String> = series.iter().filter_map(|l| label(l, "method")).collect();
    assert!(
        methods.contains("other"),
        "made-up methods are labelled other: {methods:?}"
    );
    assert!(methods.contains("GET"), "{methods:?}");
    assert!(
        methods.len() <= 9 + 1,
        "the standard methods and `other` at most: {methods:?}"
    );
    assert!(!text.contains("FOOBAR"), "no made-up method is a label value");
}

// An agency acting on a sub-account is held to the sub-account's own flags: its `api_access` on every
// call, its `webhooks_enabled` on webhook calls.
on_both_databases!(
    a_sub_accounts_flags_hold_when_its_agency_acts_on_it,
    |db: Db| async move {
        let server = Server::start(&db, &[]).await;
        let (agency, agency_key) = admin::account(&server, "scale", 0).await;
        let (child, _) = admin::account_under(&server, "growth", 0, &agency).await;
        let as_child = |method: &'static str, path: &str| {
            let url = server.url(&format!("{path}?sub_account_id={child}"));
            let key = agency_key.clone();
            async move { call_with(method, &url, &[("x-api-key", &key)], None).await }
        };
        assert_eq!(as_child("GET", "/v1/webhooks").await.status, 200);
        assert_eq!(as_child("GET", "/v1/deals").await.status, 200);

        admin::set_webhooks(&server, &child, false).await;
        let webhooks = as_child("GET", "/v1/webhooks").await;
        assert_eq!(
            (webhooks.status, webhooks.code()),
            (403, "webhooks_disabled"),
            "{}",
            webhooks.body
        );
        assert_eq!(as_child("GET", "/v1/deals").await.status, 200, "only webhook calls");
        let own = call_with("GET", &server.url("/v1/webhooks"), &[("x-api-key", &agency_key)], None).await;
        assert_eq!(own.status, 200, "the agency's own webhooks are on: {}", own.body);

        admin::set_api_access(&server, &child, false).await;
        for path in ["/v1/deals", "/v1/agents", "/v1/webhooks"] {
            let answer = as_child("GET", path).await;
            assert_eq!(
                (answer.status, answer.code()),
                (403, "api_access_disabled"),
                "{path}: {}",
                answer.body
            );
        }
        assert_eq!(
            current_with(&server, &agency_key).await.status,
            200,
            "the agency's own calls are not affected"
        );
    }
);

/// How long 50 calls may take while Redis cannot answer: queued behind one Redis attempt (300 ms) after another
/// they would take 15 s; served from the in-process counters, well under a second on an idle machine, and the
/// bound leaves room for a loaded one.
const BURST_BOUND: Duration = Duration::from_secs(6);

/// 50 concurrent calls, the first a server makes after start; each must answer 200, all within `BURST_BOUND`.
async fn burst_is_served(server: &Server, key: &str) {
    let bound = BURST_BOUND;
    let started = std::time::Instant::now();
    let calls: Vec<_> = (0..50)
        .map(|_| {
            let (url, key) = (server.url("/v1/api-keys/current"), key.to_owned());
            tokio::spawn(async move { call_with("GET", &url, &[("x-api-key", &key)], None).await })
        })
        .collect();
    for call in calls {
        let answer = tokio::time::timeout(bound, call)
            .await
            .expect("answered within the bound")
            .unwrap();
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(answer.header("ratelimit").is_some());
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed < bound,
        "50 calls answered in {elapsed:?}, not queued behind Redis"
    );
}

/// A Redis that accepts connections and never answers, from the start: the calls are served at once from
/// the in-process counters, not queued behind one connection attempt after another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_never_answers_does_not_hold_up_requests() {
    let db = Db::sqlite();
    let blackhole = Blackhole::start().await;
    let server = Server::start(&db, &[("REDIS_URL", &format!("redis://{}", blackhole.addr))]).await;
    let (_, key) = admin::account(&server, "growth", 0).await;
    burst_is_served(&server, &key).await;
    let text = server.metrics().await;
    assert!(
        text.contains("store=\"local\""),
        "decisions fell back to the in-process store"
    );
}

/// The same with nothing listening on Redis's port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_port_with_nothing_listening_does_not_hold_up_requests() {
    let db = Db::sqlite();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = Server::start(&db, &[("REDIS_URL", &format!("redis://127.0.0.1:{port}"))]).await;
    let (_, key) = admin::account(&server, "growth", 0).await;
    burst_is_served(&server, &key).await;
}
