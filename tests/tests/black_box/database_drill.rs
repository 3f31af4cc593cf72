//! The database restarts under send load. PostgreSQL ends the service's connections (an administrator's
//! termination, then every connection dropped and new ones refused for 2.5 s, as a restart looks from the
//! client) while eight clients send: every answer is an accept or a 503 `unavailable` with `Retry-After`, never
//! a 500, and once the clients have retried with their idempotency keys, every message exists and goes out
//! exactly once (the outcomes of sends answered during the cut wait for the database instead of running
//! again).

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use frontdesk_tests::{
    Db,
    platform::Platform,
    sms::{self, SmsChannel},
    tcp_proxy::TcpProxy,
    twilio::FakeTwilio,
};
use serde_json::json;

const CLIENTS: usize = 8;

/// One client's sends until `until`: each with its own idempotency key, retried after a 503 as its
/// `Retry-After` allows (shortened: the test has no second to spare); the statuses it saw and its keys.
async fn client(api: &Platform<'_>, n: usize, until: Instant) -> (Vec<u16>, Vec<String>) {
    let (mut statuses, mut keys) = (Vec::new(), Vec::new());
    let mut i = 0;
    while Instant::now() < until {
        let key = format!("drill-{n}-{i}");
        let body = json!({"phone": format!("+1555010{n:04}"), "text": key, "channel": "sms", "idempotency_key": key});
        loop {
            let answer = api.send("POST", "/v1/contacts/send", Some(body.clone())).await;
            statuses.push(answer.status);
            match answer.status {
                202 => break,
                503 => {
                    assert_eq!(answer.code(), "unavailable", "{}", answer.body);
                    assert!(answer.header("retry-after").is_some(), "a 503 says when to retry");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                _ => panic!("{key}: {} {}", answer.status, answer.body),
            }
        }
        keys.push(key);
        i += 1;
    }
    (statuses, keys)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_restart_under_load_answers_503_and_loses_nothing() {
    let db = Db::postgres().await;
    let proxy = TcpProxy::start(&db.postgres_addr()).await;
    let twilio = FakeTwilio::start().await;
    let url = db.url_via(&proxy.addr);
    // The default lease (the suite's other tests shorten it): outcomes the cut kept from being written wait
    // for the database for up to a lease, so a restart shorter than that calls no provider twice.
    let server = sms::start(&db, &twilio, &[("DATABASE_URL", &url), ("FRONTDESK_JOB_LEASE", "5s")]).await;
    let api = Platform::new(&server).await;
    SmsChannel::connect(&api, &twilio, "sms", None).await;

    let until = Instant::now() + Duration::from_secs(6);
    let drill = async {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let name = db.name().to_owned();
        db.admin(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
        ))
        .await;
        proxy.cut();
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        proxy.restore();
    };
    let clients = futures_util::future::join_all((0..CLIENTS).map(|n| client(&api, n, until)));
    let (results, ()) = tokio::join!(clients, drill);

    let mut seen: HashMap<u16, usize> = HashMap::new();
    for status in results.iter().flat_map(|(statuses, _)| statuses) {
        *seen.entry(*status).or_default() += 1;
    }
    assert!(
        seen.get(&503).is_some_and(|n| *n > 0),
        "the restart reached the service: {seen:?}"
    );
    let keys: Vec<&String> = results.iter().flat_map(|(_, keys)| keys).collect();
    let sent = twilio.wait_for(keys.len(), Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut bodies: Vec<String> = twilio.sent().iter().map(|m| m.body().to_owned()).collect();
    bodies.sort();
    let mut expected: Vec<String> = keys.iter().map(|k| (*k).clone()).collect();
    expected.sort();
    assert_eq!(
        bodies,
        expected,
        "every accepted send went out once ({} sent)",
        sent.len()
    );
    drop(server);
}
