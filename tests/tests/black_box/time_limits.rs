//! Time limits against the real binary: a client that never finishes its headers is disconnected, a call
//! waiting on a row another transaction holds locked in PostgreSQL ends with 503 `unavailable` after the
//! lock timeout, and a call past the request timeout answers 504 `deadline_exceeded`, in one process and
//! with the core and the edge apart.

use std::time::{Duration, Instant};

use frontdesk_tests::{Answer, Db, Server, admin, call, call_with, db, platform::Platform, server::base_env};
use sea_orm::{DatabaseConnection, DatabaseTransaction};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a test waits for an answer before it calls the service hung.
const HUNG: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[("FRONTDESK_HTTP_HEADER_TIMEOUT", "1s")]).await;
    let mut slow = tokio::net::TcpStream::connect(server.http.trim_start_matches("http://"))
        .await
        .unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        .await
        .unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(HUNG, slow.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the connection is still open after {HUNG:?}");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(900),
        "closed after the header timeout, not before: {elapsed:?}"
    );
    let healthy = call("GET", &server.url("/healthz"), None).await;
    assert_eq!(healthy.status, 200, "a client that sends its headers is served");
}

/// A 504 `deadline_exceeded`, soon after the 1 s request timeout.
fn assert_past_the_request_timeout(answer: &Answer, took: Duration) {
    assert_eq!(
        (answer.status, answer.code()),
        (504, "deadline_exceeded"),
        "{}",
        answer.body
    );
    assert!(
        took < Duration::from_secs(5),
        "answered after the 1 s request timeout: {took:?}"
    );
}

/// A transaction of the test's own that holds the deal's row locked until it ends.
async fn hold_row_lock(conn: &DatabaseConnection, deal_id: &str) -> DatabaseTransaction {
    db::hold(
        conn,
        "SELECT id FROM deals WHERE id = $1 FOR UPDATE",
        vec![deal_id.into()],
    )
    .await
}

/// `PATCH /v1/deals/{id}` at `base` with `key`, which must answer within `HUNG`; the answer and its time.
async fn patch(base: &str, key: &str, deal_id: &str, title: &str) -> (Answer, Duration) {
    let started = Instant::now();
    let body = json!({"title": title}).to_string();
    let url = format!("{base}/v1/deals/{deal_id}");
    let answer = tokio::time::timeout(HUNG, call_with("PATCH", &url, &[("x-api-key", key)], Some(&body)))
        .await
        .unwrap_or_else(|_| panic!("PATCH still waiting after {HUNG:?}"));
    (answer, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_on_a_locked_row_ends_after_the_lock_timeout() {
    let db = Db::postgres().await;
    let server = Server::start(&db, &[("FRONTDESK_DB_LOCK_TIMEOUT", "1s")]).await;
    let api = Platform::new(&server).await;
    let deal_id = api.deal("Contended").await;
    let conn = db.connect().await;
    let lock = hold_row_lock(&conn, &deal_id).await;
    let (answer, took) = patch(&server.http, &api.key, &deal_id, "Changed").await;
    assert_eq!((answer.status, answer.code()), (503, "unavailable"), "{}", answer.body);
    let message = answer.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("locked"), "{message}");
    assert!(
        !message.contains("55P03") && !message.contains("lock_timeout"),
        "no internals: {message}"
    );
    assert!(
        took < Duration::from_secs(5),
        "answered after the 1 s lock timeout: {took:?}"
    );
    lock.rollback().await.unwrap();

    let (answer, _) = patch(&server.http, &api.key, &deal_id, "Changed").await;
    assert_eq!(
        answer.status, 200,
        "once the lock is released the change goes through: {}",
        answer.body
    );
    assert_eq!(answer.body["deal"]["title"], "Changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_the_request_timeout_answers_504() {
    let db = Db::postgres().await;
    // The lock timeout (default 10 s) is longer than the request timeout.
    let server = Server::start(&db, &[("FRONTDESK_REQUEST_TIMEOUT", "1s")]).await;
    let api = Platform::new(&server).await;
    let deal_id = api.deal("Contended").await;
    let conn = db.connect().await;
    let lock = hold_row_lock(&conn, &deal_id).await;
    let (answer, took) = patch(&server.http, &api.key, &deal_id, "Late").await;
    assert_past_the_request_timeout(&answer, took);
    lock.rollback().await.unwrap();
    let (answer, _) = patch(&server.http, &api.key, &deal_id, "On time").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_the_request_timeout_answers_504_with_the_core_apart() {
    let db = Db::postgres().await;
    let mut env = base_env();
    env.insert("DATABASE_URL".into(), db.url());
    let core = Server::spawn(None, vec!["core".into()], env).await;
    let mut edge_env = base_env();
    edge_env.insert("FRONTDESK_REQUEST_TIMEOUT".into(), "1s".into());
    let edge = Server::spawn(None, vec!["edge".into(), "--core".into(), core.grpc.clone()], edge_env).await;
    let (_, key) = admin::account(&core, "growth", 0).await;
    let created = call_with(
        "POST",
        &edge.url("/v1/deals"),
        &[("x-api-key", &key)],
        Some(&json!({"title": "Contended", "stage": "new"}).to_string()),
    )
    .await;
    assert_eq!(created.status, 200, "{}", created.body);
    let deal_id = created.body["deal"]["id"].as_str().unwrap().to_owned();
    let conn = db.connect().await;
    let lock = hold_row_lock(&conn, &deal_id).await;
    let (answer, took) = patch(&edge.http, &key, &deal_id, "Late").await;
    assert_past_the_request_timeout(&answer, took);
    lock.rollback().await.unwrap();
}

/// A gRPC caller's own deadline (`grpc-timeout`) ends a call waiting on a locked row with
/// DEADLINE_EXCEEDED, every time. The call is made with a plain HTTP/2 client: tonic's client starts a
/// timer of its own for the same deadline and answers CANCELLED when it fires first, which would hide
/// what the core answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_call_past_its_deadline_answers_deadline_exceeded() {
    use prost::Message;

    let db = Db::postgres().await;
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    let deal_id = api.deal("Contended").await;
    let conn = db.connect().await;
    let lock = hold_row_lock(&conn, &deal_id).await;
    let client = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let url = format!("{}/frontdesk.v1.Deals/UpdateDeal", server.grpc);
    // Several calls: the core's timers for one deadline fire in the same millisecond or in different ones.
    for attempt in 0..8 {
        let message = frontdesk_api::v1::UpdateDealRequest {
            deal_id: deal_id.clone(),
            title: format!("Late {attempt}"),
            ..Default::default()
        }
        .encode_to_vec();
        let mut frame = vec![0u8];
        frame.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
        frame.extend_from_slice(&message);
        let started = Instant::now();
        let answer = tokio::time::timeout(
            HUNG,
            client
                .post(&url)
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .header("grpc-timeout", "300m")
                .header("x-api-key", &api.key)
                .body(frame)
                .send(),
        )
        .await
        .unwrap_or_else(|_| panic!("still waiting after {HUNG:?}"))
        .unwrap();
        let status = answer
            .headers()
            .get("grpc-status")
            .map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(
            status.as_deref(),
            Some("4"),
            "call {attempt}: DEADLINE_EXCEEDED, not {:?}",
            answer.headers()
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "answered long after the deadline: {:?}",
            started.elapsed()
        );
    }
    lock.rollback().await.unwrap();
}
