//! The delivery engine under trouble, black box: a slow result writer, a dead endpoint beside live ones, a
//! worker killed mid-attempt, a re-enable while an attempt runs, parked deliveries and the retention, a
//! subscription deleted mid-attempt or mid-test, an account whose webhooks are switched off, and signing
//! secrets sealed at rest.

use std::time::{Duration, Instant};

use frontdesk_tests::{
    Db, Server, admin, blackhole::Blackhole, db::hold, on_both_databases, platform::Platform,
    webhook_receiver::Receiver,
};
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

const FAST: &[(&str, &str)] = &[
    ("FRONTDESK_ALLOW_PRIVATE_URLS", "true"),
    ("FRONTDESK_WEBHOOK_RETRY_SCHEDULE", "1s,1s,1s,1s,1s,1s,1s,1s"),
    ("FRONTDESK_WEBHOOK_TIMEOUT", "5s"),
    ("FRONTDESK_WEBHOOK_LEASE", "6s"),
    ("FRONTDESK_WEBHOOK_POLL_INTERVAL", "20ms"),
];

const WAIT: Duration = Duration::from_secs(30);

fn env<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut env: Vec<_> = FAST
        .iter()
        .copied()
        .filter(|(name, _)| !extra.iter().any(|(n, _)| n == name))
        .collect();
    env.extend_from_slice(extra);
    env
}

/// Delivered (2xx) requests per deal id.
fn delivered(receiver: &Receiver) -> std::collections::HashMap<String, usize> {
    let mut counts = std::collections::HashMap::new();
    for d in receiver.deliveries().iter().filter(|d| d.answered < 300) {
        *counts
            .entry(d.json["data"]["id"].as_str().unwrap_or_default().to_owned())
            .or_default() += 1;
    }
    counts
}

/// Waits until the first request reaches the receiver (its answer may still be pending); returns when the
/// wait began.
async fn first_arrival(receiver: &Receiver) -> Instant {
    let started = Instant::now();
    while receiver.arrived() == 0 {
        assert!(started.elapsed() < WAIT, "the attempt never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started
}

async fn count(db: &Db, sql: &str, arg: &str) -> u64 {
    db.scalar(sql, arg).await.unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_is_free_only_once_its_result_is_committed() {
    // The result writer is held up (the test holds a share lock on the subscription row, which the writer
    // must update); sends must stop at the concurrency instead of running on ahead of their records.
    let db = Db::postgres().await;
    let server = Server::start(&db, &env(&[("FRONTDESK_WEBHOOK_CONCURRENCY", "4")])).await;
    let receiver = Receiver::start().await;
    let api = Platform::new(&server).await;
    api.subscribe(&receiver.url, &["deal.created"]).await;
    let conn = db.connect().await;
    let held = hold(
        &conn,
        "SELECT id FROM webhooks WHERE account_id = $1 FOR SHARE",
        vec![api.account_id.clone().into()],
    )
    .await;
    for n in 0..30 {
        api.deal(&format!("deal {n}")).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sent = receiver.arrived();
    assert!(
        sent <= 4,
        "{sent} sends while no result could be written (concurrency 4)"
    );
    held.commit().await.unwrap();
    receiver.wait_until(WAIT, |_| delivered(&receiver).len() == 30).await;
    frontdesk_tests::admin::quiesce(&server).await;
    let twice: Vec<_> = delivered(&receiver).into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(twice.is_empty(), "sent again though in hand: {twice:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_go_on_while_requests_waiting_on_a_lock_hold_every_request_connection() {
    // Requests of one account queue on its row lock (the test holds it), each on a pooled connection; with
    // two request connections and four such requests none is left. A retry due meanwhile is still made: the
    // engines claim and record on connections of their own.
    let db = Db::postgres().await;
    let server = Server::start(
        &db,
        &env(&[
            ("FRONTDESK_DB_MAX_CONNECTIONS", "2"),
            ("FRONTDESK_WEBHOOK_RETRY_SCHEDULE", "2s,1s,1s,1s,1s,1s,1s,1s"),
        ]),
    )
    .await;
    let receiver = Receiver::start().await;
    let api = Platform::new(&server).await;
    api.subscribe(&receiver.url, &["deal.created"]).await;
    receiver.then(&[500]);
    let id = api.deal("retried under the lock").await;
    first_arrival(&receiver).await;
    let conn = db.connect().await;
    let held = hold(
        &conn,
        "SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE",
        vec![api.account_id.clone().into()],
    )
    .await;
    let queued = futures_util::future::join_all((0..4).map(|n| {
        let body = json!({"title": format!("queued {n}"), "stage": "new"});
        api.send("POST", "/v1/deals", Some(body))
    }));
    let retried = async {
        // Under the 5 s a request waits for a pooled connection, so every queued request is answered.
        let locked = Instant::now();
        while !delivered(&receiver).contains_key(&id) && locked.elapsed() < Duration::from_millis(4_500) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let waiting = count(
            &db,
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'",
            db.name(),
        )
        .await;
        let retried = delivered(&receiver).contains_key(&id);
        held.commit().await.unwrap();
        (retried, waiting, locked.elapsed())
    };
    let (deals, (retried, waiting, took)) = tokio::join!(queued, retried);
    assert!(waiting >= 2, "{waiting} requests were waiting on the lock");
    assert!(retried, "no retry made in {took:?} while the requests held their pool");
    let statuses: Vec<u16> = deals.iter().map(|answer| answer.status).collect();
    assert_eq!(statuses, [200; 4], "the queued requests succeed once the lock is gone");
}

on_both_databases!(a_dead_endpoint_holds_only_its_share, |db: Db| async move {
    let server = Server::start(
        &db,
        &env(&[
            ("FRONTDESK_WEBHOOK_CONCURRENCY", "8"),
            ("FRONTDESK_WEBHOOK_ENDPOINT_CONCURRENCY", "2"),
        ]),
    )
    .await;
    let hole = Blackhole::start().await;
    let stuck = Platform::new(&server).await;
    stuck
        .subscribe(&format!("http://{}/hook", hole.addr), &["deal.created"])
        .await;
    for n in 0..20 {
        stuck.deal(&format!("backlog {n}")).await;
    }
    let (live, receiver) = (Platform::new(&server).await, Receiver::start().await);
    live.subscribe(&receiver.url, &["deal.created"]).await;
    // The backlog is due first and its attempts each wait out the 5 s timeout.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let id = live.deal("another tenant").await;
    receiver
        .wait_until(Duration::from_secs(5), |_| delivered(&receiver).contains_key(&id))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
});

on_both_databases!(a_killed_worker_costs_no_retry_step, |db: Db| async move {
    let server = Server::start(&db, FAST).await;
    let receiver = Receiver::start().await;
    let api = Platform::new(&server).await;
    api.subscribe(&receiver.url, &["deal.created"]).await;
    receiver.then_after(Duration::from_secs(30), 200);
    let id = api.deal("in flight at the kill").await;
    first_arrival(&receiver).await;
    let (account_id, key) = (api.account_id.clone(), api.key.clone());
    drop(api);
    let server = server.restart().await;
    let restarted = Instant::now();
    receiver
        .wait_until(WAIT, |_| delivered(&receiver).contains_key(&id))
        .await;
    // Due again once the 6 s lease ends.
    assert!(
        restarted.elapsed() < Duration::from_secs(9),
        "took {:?}",
        restarted.elapsed()
    );
    let api = Platform::of(&server, &account_id, &key);
    let log = api
        .poll("/v1/webhooks/hooks/deliveries", |b| {
            b["deliveries"][0]["status"] == "succeeded"
        })
        .await;
    let attempts = log["deliveries"][0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "one attempt on record: {attempts:?}");
    assert_eq!(attempts[0]["attempt"], 1, "the crash spent no attempt");
    let health = api.ok("GET", "/v1/webhooks/hooks/health", None).await["health"].clone();
    assert_eq!(health["consecutive_failures"], 0);
    assert_eq!(health["failing_since"], Value::Null);
});

on_both_databases!(a_re_enable_never_overlaps_a_running_attempt, |db: Db| async move {
    let server = Server::start(&db, FAST).await;
    let receiver = Receiver::start().await;
    let api = Platform::new(&server).await;
    api.subscribe(&receiver.url, &["deal.created"]).await;
    // The first delivery's attempt runs for 3 s; meanwhile a 410 disables the subscription, which parks it,
    // and a re-enable queues it again.
    receiver.then_after(Duration::from_secs(3), 200);
    let slow = api.deal("slow").await;
    let started = first_arrival(&receiver).await;
    receiver.then(&[410]);
    api.deal("gone").await;
    api.poll("/v1/webhooks/hooks", |b| b["webhook"]["status"] == "disabled")
        .await;
    let answer = api.ok("POST", "/v1/webhooks/hooks/re-enable", None).await;
    assert_eq!(answer["requeued"], 2, "{answer}");
    receiver.wait_until(WAIT, |_| delivered(&receiver).len() == 2).await;
    // Every request that arrived has its answer (the slow one's comes 3 s after it arrived).
    receiver
        .wait_until(WAIT, |d| {
            d.len() == receiver.arrived() && started.elapsed() > Duration::from_secs(3)
        })
        .await;
    let sends = receiver
        .deliveries()
        .iter()
        .filter(|d| d.json["data"]["id"] == slow.as_str())
        .count();
    assert_eq!(sends, 1, "the running attempt was not sent again");
});

on_both_databases!(parked_deliveries_outlive_the_retention, |db: Db| async move {
    let server = Server::start(
        &db,
        &env(&[
            ("FRONTDESK_WEBHOOK_TIMEOUT", "1s"),
            ("FRONTDESK_WEBHOOK_LEASE", "2s"),
            ("FRONTDESK_WEBHOOK_RETENTION", "3s"),
            ("FRONTDESK_TEST_CLOCK", "true"),
        ]),
    )
    .await;
    let receiver = Receiver::start().await;
    let api = Platform::new(&server).await;
    api.subscribe(&receiver.url, &["deal.created"]).await;
    receiver.then(&[410]);
    let mut deals = vec![api.deal("gone").await];
    api.poll("/v1/webhooks/hooks", |b| b["webhook"]["status"] == "disabled")
        .await;
    let since = chrono::Utc::now().to_rfc3339();
    for n in 0..3 {
        deals.push(api.deal(&format!("parked {n}")).await);
    }
    // Everything grows older than the retention (3 s), then the retention runs a turn.
    frontdesk_tests::admin::clock_at(&server, chrono::Utc::now() + chrono::Duration::minutes(1)).await;
    db.recurring_turn("webhook_retention").await;
    let answer = api
        .ok("POST", "/v1/webhooks/hooks/re-enable", Some(json!({"since": since})))
        .await;
    assert_eq!(
        answer["requeued"], 3,
        "what was parked while disabled is still there: {answer}"
    );
    receiver.wait_until(WAIT, |_| delivered(&receiver).len() == 3).await;
    assert!(deals[1..].iter().all(|id| delivered(&receiver).contains_key(id)));
});

const ORPHAN_ATTEMPTS: &str = "SELECT COUNT(*) FROM webhook_attempts a WHERE $1 <> '' AND NOT EXISTS \
     (SELECT 1 FROM webhook_deliveries d WHERE d.id = a.delivery_id)";
const ORPHAN_DELIVERIES: &str = "SELECT COUNT(*) FROM webhook_deliveries d WHERE d.account_id = $1 AND NOT EXISTS \
     (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id)";

on_both_databases!(a_deleted_subscription_leaves_no_rows, |db: Db| async move {
    let server = Server::start(&db, FAST).await;
    let receiver = Receiver::start().await;
    let api = Platform::new(&server).await;
    // An attempt in flight when its subscription is deleted.
    api.subscribe(&receiver.url, &["deal.created"]).await;
    receiver.then_after(Duration::from_millis(1500), 200);
    api.ok("POST", "/v1/webhooks/hooks/test", None).await;
    first_arrival(&receiver).await;
    api.ok("DELETE", "/v1/webhooks/hooks", None).await;
    receiver.wait_for(1, WAIT).await;
    frontdesk_tests::admin::quiesce(&server).await;
    assert_eq!(
        count(&db, ORPHAN_ATTEMPTS, "x").await,
        0,
        "an attempt row outlived its delivery"
    );
    // Test events racing the deletes of their subscriptions.
    for round in 0..20 {
        let name = format!("race{round}");
        api.ok("POST", "/v1/webhooks", Some(json!({"name": name, "url": receiver.url})))
            .await;
        let (test_path, delete_path) = (format!("/v1/webhooks/{name}/test"), format!("/v1/webhooks/{name}"));
        let (test, delete) = tokio::join!(
            api.send("POST", &test_path, None),
            api.send("DELETE", &delete_path, None)
        );
        assert!(matches!(test.status, 200 | 404), "{}", test.body);
        assert_eq!(delete.status, 200, "{}", delete.body);
    }
    assert_eq!(count(&db, ORPHAN_DELIVERIES, &api.account_id).await, 0);
});

on_both_databases!(an_account_without_webhooks_gets_no_deliveries, |db: Db| async move {
    let server = Server::start(&db, FAST).await;
    let mut receiver = Receiver::start().await;
    let api = Platform::new(&server).await;
    api.subscribe(&receiver.url, &["deal.created"]).await;
    receiver.down().await;
    for n in 0..3 {
        api.deal(&format!("while off {n}")).await;
    }
    api.poll("/v1/webhooks/hooks/health", |b| b["health"]["pending"] == 3)
        .await;
    admin::set_webhooks(&server, &api.account_id, false).await;
    // Stopped by the switch itself: an attempt claimed before it finds its row failed at the claim guard.
    const PARKED: &str = "SELECT COUNT(*) FROM webhook_deliveries WHERE account_id = $1 AND status = 'failed'";
    assert_eq!(count(&db, PARKED, &api.account_id).await, 3);
    receiver.up().await;
    frontdesk_tests::admin::quiesce(&server).await;
    assert_eq!(
        receiver.arrived(),
        0,
        "nothing is sent for an account whose webhooks are off"
    );
    admin::set_webhooks(&server, &api.account_id, true).await;
    let answer = api
        .ok(
            "POST",
            "/v1/webhooks/hooks/re-enable",
            Some(json!({"since": "2020-01-01T00:00:00Z"})),
        )
        .await;
    assert_eq!(answer["requeued"], 3, "{answer}");
    receiver.wait_until(WAIT, |_| delivered(&receiver).len() == 3).await;
});

on_both_databases!(signing_secrets_are_sealed_at_rest, |db: Db| async move {
    let server = Server::start(&db, FAST).await;
    let receiver = Receiver::start().await;
    let api = Platform::new(&server).await;
    let secret = api.subscribe(&receiver.url, &["deal.created"]).await;
    const STORED: &str = "SELECT secret FROM webhooks WHERE account_id = $1";
    let stored = db.scalar(STORED, &api.account_id).await.unwrap();
    assert!(
        !stored.contains(&secret[6..]) && !stored.starts_with("whsec_"),
        "{stored}"
    );
    api.deal("signed").await;
    let deliveries = receiver.wait_for(1, WAIT).await;
    assert!(deliveries[0].verifies(&secret));

    // A secret an earlier version stored in plaintext is sealed at the next start, and still signs.
    let conn = db.connect().await;
    let plaintext = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    conn.execute_unprepared(&format!(
        "UPDATE webhooks SET secret = '{plaintext}' WHERE account_id = '{}'",
        api.account_id
    ))
    .await
    .unwrap();
    let (account_id, key) = (api.account_id.clone(), api.key.clone());
    drop(api);
    let server = server.restart().await;
    let stored = db.scalar(STORED, &account_id).await.unwrap();
    assert!(!stored.starts_with("whsec_"), "sealed at start-up: {stored}");
    let api = Platform::of(&server, &account_id, &key);
    api.deal("signed again").await;
    let deliveries = receiver.wait_for(2, WAIT).await;
    assert!(deliveries[1].verifies(plaintext));
});
