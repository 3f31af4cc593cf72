//! Keys verified from memory, revocation still immediate: replica b serves a key from its cache under load
//! while replica a revokes it, rotates it, or turns the account's API access off; no call that b began after
//! a's call returned is accepted. Then the same with Redis stopped, where b must ask the database.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use frontdesk_tests::{
    Db, Server, admin, call_with, http_client, on_both_databases,
    redis_server::{PrivateRedis, shared_url},
};

/// Calls on one replica with one key, from several workers at once, until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    workers: Vec<tokio::task::JoinHandle<Vec<(Instant, u16)>>>,
}

impl Load {
    fn start(server: &Server, key: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let url = server.url("/v1/api-keys/current");
        let workers = (0..4)
            .map(|_| {
                let (stop, url, key) = (stop.clone(), url.clone(), key.to_owned());
                tokio::spawn(async move {
                    let client = http_client();
                    let mut calls = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let started = Instant::now();
                        let answer = client.get(&url).header("x-api-key", &key).send().await;
                        calls.push((started, answer.map_or(0, |a| a.status().as_u16())));
                    }
                    calls
                })
            })
            .collect();
        Self { stop, workers }
    }

    /// Every call made: when it began and its status.
    async fn finish(self) -> Vec<(Instant, u16)> {
        self.stop.store(true, Ordering::Relaxed);
        let mut calls = Vec::new();
        for worker in self.workers {
            calls.extend(worker.await.unwrap());
        }
        calls
    }
}

/// Runs `change` on replica a while b is under load with `key`; every call b began after the change
/// returned must answer `refused`, and b must have served the key before.
async fn refused_on_b_from_the_moment_a_returns(
    b: &Server,
    key: &str,
    change: impl Future<Output = ()>,
    refused: u16,
    case: &str,
) {
    let load = Load::start(b, key);
    tokio::time::sleep(Duration::from_millis(400)).await;
    change.await;
    let returned = Instant::now();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let calls = load.finish().await;
    let (before, after): (Vec<_>, Vec<_>) = calls.iter().partition(|(started, _)| *started < returned);
    assert!(
        before.iter().filter(|(_, status)| *status == 200).count() >= 20,
        "{case}: b served the key under load before the change"
    );
    assert!(
        after.len() >= 20,
        "{case}: b was called after the change ({})",
        after.len()
    );
    let accepted: Vec<_> = after.iter().filter(|(_, status)| *status != refused).collect();
    assert!(
        accepted.is_empty(),
        "{case}: {} of {} calls begun after the change were not refused with {refused}: {:?}",
        accepted.len(),
        after.len(),
        accepted.iter().map(|(_, s)| s).collect::<Vec<_>>()
    );
}

async fn post(server: &Server, path: &str, key: &str) {
    let answer = call_with("POST", &server.url(path), &[("x-api-key", key)], None).await;
    assert_eq!(answer.status, 200, "{path}: {}", answer.body);
}

/// Revocation, rotation and API access turned off, each on replica a under load on replica b.
async fn every_change_holds_on_the_other_replica(a: &Server, b: &Server) {
    let (account, key) = admin::account(a, "growth", 1_000_000).await;
    refused_on_b_from_the_moment_a_returns(b, &key, post(a, "/v1/api-keys/revoke", &key), 401, "revoked").await;

    let key = admin::issue_key(a, &account, &[]).await;
    refused_on_b_from_the_moment_a_returns(b, &key, post(a, "/v1/api-keys/rotate", &key), 401, "rotated").await;

    let key = admin::issue_key(a, &account, &[]).await;
    let access_off = admin::set_api_access(a, &account, false);
    refused_on_b_from_the_moment_a_returns(b, &key, access_off, 403, "API access off").await;

    let hits = b.metric("frontdesk_api_key_cache_hits_total", "").await;
    assert!(hits > 100.0, "b served the key from memory ({hits} hits)");
}

on_both_databases!(
    changes_on_one_replica_refuse_the_next_call_on_another,
    |db: Db| async move {
        let redis = shared_url();
        let env = [("REDIS_URL", redis.as_str())];
        let (a, b) = (Server::start(&db, &env).await, Server::start(&db, &env).await);
        every_change_holds_on_the_other_replica(&a, &b).await;
    }
);

on_both_databases!(with_redis_stopped_the_database_decides, |db: Db| async move {
    let mut redis = PrivateRedis::start();
    let env = [("REDIS_URL", redis.url.as_str())];
    let (a, b) = (Server::start(&db, &env).await, Server::start(&db, &env).await);
    let (_, key) = admin::account(&a, "growth", 1_000_000).await;
    for _ in 0..3 {
        assert_eq!(
            call_with("GET", &b.url("/v1/api-keys/current"), &[("x-api-key", &key)], None)
                .await
                .status,
            200
        );
    }
    let revoke = async {
        redis.stop();
        post(&a, "/v1/api-keys/revoke", &key).await;
    };
    refused_on_b_from_the_moment_a_returns(&b, &key, revoke, 401, "revoked with Redis stopped").await;
});
