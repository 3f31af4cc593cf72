//! The guard over verified keys kept in memory, on both databases with the tests' Redis: served without
//! the database, stale the moment another replica changes the account, bounded, and never filled by keys
//! that do not exist.
//!
//! The made-up keys' test takes `FRONTDESK_TEST_MADE_UP_KEYS` keys (20,000 unless set):
//! `FRONTDESK_TEST_MADE_UP_KEYS=100000 cargo test -p frontdesk-domain cache_tests` is its full form.

use std::{sync::Arc, time::Duration};

use axum::{body::Body, extract::Request};
use futures_util::{StreamExt, stream};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, Statement};

use super::Guard;
use crate::{
    access::{
        AccountId,
        api_key::ApiKey,
        key_store,
        rate_limit::{RateLimiter, RedisWindows},
        scopes::Scopes,
        stamps::AccessStamps,
        verified_keys::{CacheBounds, VerifiedKeys},
    },
    accounts::store::{self as account_store, AccountChanges, NewAccount},
    clock::{Clock, SystemClock},
    plan::Plan,
    store::{
        entities::api_keys,
        test_databases::{Kind, TestDb},
    },
};

const SERVICE: &str = "frontdesk.v1.Deals";

fn redis_url() -> String {
    std::env::var("FRONTDESK_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A replica's guard on `db` with the tests' Redis, keeping at most `entries` keys.
fn replica(db: &DatabaseConnection, entries: usize) -> (Guard, Arc<VerifiedKeys>) {
    let url = redis_url();
    let limiter = RateLimiter::new(Some(RedisWindows::new(&url).unwrap()), Duration::from_secs(60));
    let bounds = CacheBounds {
        entries,
        ttl: Duration::from_secs(60),
    };
    let keys = Arc::new(VerifiedKeys::new(
        Some(Arc::new(AccessStamps::new(&url).unwrap())),
        bounds,
    ));
    (Guard::new(db.clone(), limiter, keys.clone()).unwrap(), keys)
}

async fn account(db: &DatabaseConnection, rate_limit: u32) -> (AccountId, String) {
    let new = NewAccount {
        name: "cache".into(),
        plan: Plan::Growth,
        credit_milli: 0,
        rate_limit,
        parent_account_id: None,
    };
    let (account, key) = crate::onboarding::create(db, new, SystemClock.now()).await.unwrap();
    (AccountId::of_row(account.id), key.reveal().to_owned())
}

/// "admitted", or the reason of the refusal.
async fn outcome(guard: &Guard, key: &str) -> String {
    let request = Request::builder().header("x-api-key", key).body(Body::empty()).unwrap();
    match guard.admit(request.headers(), SERVICE).await {
        Ok(_) => "admitted".to_owned(),
        Err((error, _)) => error.reason.as_str().to_owned(),
    }
}

/// A key deleted behind the guard's back is still served from memory, which proves the database is not
/// read; a change on another replica makes the very next call read it again.
async fn served_from_memory_until_another_replica_changes_the_account(kind: Kind) {
    let test = TestDb::new(kind, 4).await;
    let db = test.db.clone();
    let ((a, a_keys), (b, _)) = (replica(&db, 100), replica(&db, 100));
    let (account_id, key) = account(&db, 1_000).await;
    assert_eq!(outcome(&b, &key).await, "admitted");
    let hash = ApiKey::parse(&key).unwrap().hash();
    let row = api_keys::Entity::find().all(&db).await.unwrap();
    let row = row.into_iter().find(|r| r.key_hash == hash).unwrap();
    api_keys::Entity::delete_by_id(row.id.clone()).exec(&db).await.unwrap();
    assert_eq!(outcome(&b, &key).await, "admitted", "served from memory");

    // The account's change, made on replica a, reaches b's next call.
    a_keys.changed(account_id.as_str()).await;
    assert_eq!(outcome(&b, &key).await, "unauthenticated");
    assert_eq!(outcome(&a, &key).await, "unauthenticated");
    test.remove().await;
}

/// Revocation, rotation and API access turned off, each made on replica a, refuse b's next call.
async fn changes_on_one_replica_refuse_the_next_call_on_another(kind: Kind) {
    let test = TestDb::new(kind, 4).await;
    let db = test.db.clone();
    let ((_, a_keys), (b, _)) = (replica(&db, 100), replica(&db, 100));
    let (account_id, key) = account(&db, 1_000).await;
    let now = SystemClock.now();
    let issue = || async {
        let (key, row) = key_store::issue(&db, &account_id, &Scopes::All, now).await.unwrap();
        (key.reveal().to_owned(), row)
    };

    let (revoked, row) = issue().await;
    assert_eq!(outcome(&b, &revoked).await, "admitted");
    assert!(key_store::revoke(&db, &row.id, now).await.unwrap());
    a_keys.changed(account_id.as_str()).await;
    assert_eq!(outcome(&b, &revoked).await, "unauthenticated", "revoked");

    let (rotated, row) = issue().await;
    assert_eq!(outcome(&b, &rotated).await, "admitted");
    let (fresh, _) = key_store::rotate(&db, &row, now).await.unwrap().unwrap();
    a_keys.changed(account_id.as_str()).await;
    assert_eq!(outcome(&b, &rotated).await, "unauthenticated", "rotated");
    assert_eq!(outcome(&b, fresh.reveal()).await, "admitted");

    assert_eq!(outcome(&b, &key).await, "admitted");
    let access_off = AccountChanges {
        api_access: Some(false),
        ..Default::default()
    };
    account_store::update(&db, account_id.as_str(), access_off, now)
        .await
        .unwrap();
    a_keys.changed(account_id.as_str()).await;
    assert_eq!(outcome(&b, &key).await, "api_access_disabled");
    test.remove().await;
}

/// `count` keys of one account, stored in bulk.
async fn many_keys(db: &DatabaseConnection, account_id: &AccountId, count: usize) -> Vec<String> {
    let now = SystemClock.now();
    let keys: Vec<ApiKey> = (0..count).map(|_| ApiKey::generate()).collect();
    for chunk in keys.chunks(2_000) {
        let rows = chunk.iter().map(|key| api_keys::ActiveModel {
            id: sea_orm::Set(crate::ids::new_id(crate::ids::Kind::ApiKey)),
            account_id: sea_orm::Set(account_id.clone()),
            key_hash: sea_orm::Set(key.hash()),
            masked: sea_orm::Set(key.masked()),
            scopes: sea_orm::Set(Scopes::All.to_stored()),
            created_at: sea_orm::Set(now),
            revoked_at: sea_orm::Set(None),
        });
        api_keys::Entity::insert_many(rows)
            .exec_without_returning(db)
            .await
            .unwrap();
    }
    keys.iter().map(|k| k.reveal().to_owned()).collect()
}

/// Each key once, 16 at a time; how many calls were admitted, and the most entries seen held meanwhile.
async fn call_each(guard: &Guard, keys: &Arc<VerifiedKeys>, presented: &[String]) -> (usize, usize) {
    let outcomes: Vec<(bool, usize)> = stream::iter(presented)
        .map(|key| async move { (outcome(guard, key).await == "admitted", keys.held()) })
        .buffer_unordered(16)
        .collect()
        .await;
    let admitted = outcomes.iter().filter(|(admitted, _)| *admitted).count();
    (admitted, outcomes.iter().map(|(_, held)| *held).max().unwrap_or(0))
}

/// 3,000 distinct live keys through a cache of 300: every call admitted, never more than its bound held.
/// (100,000 keys against the bound alone: `verified_keys::tests`.)
async fn a_cache_stays_within_its_bound_under_many_keys(kind: Kind) {
    let test = TestDb::new(kind, 8).await;
    let db = test.db.clone();
    let (guard, keys) = replica(&db, 300);
    let (account_id, _) = account(&db, 1_000_000).await;
    let presented = many_keys(&db, &account_id, 3_000).await;
    let (admitted, most) = call_each(&guard, &keys, &presented).await;
    assert_eq!(admitted, 3_000);
    assert!(most <= 300, "{most} entries held, bound 300");
    assert_eq!(keys.held(), 300, "full once 3,000 keys went through");
    test.remove().await;
}

/// Index and table scans of `api_keys` so far (PostgreSQL's statistics, flushed first).
async fn api_key_reads(db: &DatabaseConnection) -> i64 {
    db.execute_unprepared("SELECT pg_stat_force_next_flush()")
        .await
        .unwrap();
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT (coalesce(idx_scan, 0) + coalesce(seq_scan, 0))::bigint AS reads \
             FROM pg_stat_user_tables WHERE relname = 'api_keys'",
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get::<i64>("", "reads").unwrap()
}

/// Made-up keys (`FRONTDESK_TEST_MADE_UP_KEYS`, 20,000 unless set; the full drill sets 100,000): all refused,
/// nothing kept, and on PostgreSQL one read of `api_keys` each.
async fn made_up_keys_are_read_once_each_and_never_kept(kind: Kind) {
    let count: usize = std::env::var("FRONTDESK_TEST_MADE_UP_KEYS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let test = TestDb::new(kind, 8).await;
    let db = test.db.clone();
    let (guard, keys) = replica(&db, 1_000);
    let presented: Vec<String> = (0..count).map(|_| ApiKey::generate().reveal().to_owned()).collect();
    let before = if kind == Kind::Postgres {
        api_key_reads(&db).await
    } else {
        0
    };
    let (admitted, most) = call_each(&guard, &keys, &presented).await;
    assert_eq!(
        (admitted, most, keys.held()),
        (0, 0, 0),
        "nothing admitted, nothing kept"
    );
    if kind == Kind::Postgres {
        // Statistics reach the shared view at each session's next flush: wait for all of them.
        let mut reads = 0;
        for _ in 0..200 {
            reads = api_key_reads(&db).await - before;
            if reads >= count as i64 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let count = count as i64;
        assert!(
            (count..=count + 10).contains(&reads),
            "{reads} reads of api_keys for {count} made-up keys"
        );
    }
    test.remove().await;
}

frontdesk_kernel::on_both_kinds!(
    served_from_memory_until_another_replica_changes_the_account,
    changes_on_one_replica_refuse_the_next_call_on_another,
    a_cache_stays_within_its_bound_under_many_keys,
    made_up_keys_are_read_once_each_and_never_kept,
);
