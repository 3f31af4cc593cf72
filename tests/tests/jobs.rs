//! The durable job engine as users see it, on SQLite and PostgreSQL + Redis: a provider that hangs holds
//! only its channel's lane; a send that used up its tries leaves a failed job with its last error for
//! operators (admin gRPC and `frontdesk admin jobs --failed`), which an operator can queue again; and the
//! recurring housekeeping job closes idle conversations.

use std::time::Duration;

use frontdesk_api::admin::v1::{ListJobsRequest, RetryJobRequest};
use frontdesk_tests::{
    Db, Server, admin, binary, on_both_databases,
    platform::Platform,
    sms::{self, SmsChannel, message_when},
    twilio::{FakeTwilio, new_message_sid},
    webhook_receiver::Receiver,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

async fn send(platform: &Platform<'_>, channel: &str, phone: &str, text: &str) -> String {
    let body = json!({"phone": phone, "text": text, "channel": channel});
    let answer = platform.send("POST", "/v1/contacts/send", Some(body)).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    answer.body["message_id"].as_str().unwrap().to_owned()
}

/// A server whose lanes each run at most `cap` jobs at once, with a provider timeout longer than any test.
async fn with_lane_cap(db: &Db, twilio: &FakeTwilio, cap: &str) -> Server {
    let env = [
        ("FRONTDESK_JOB_LANE_CONCURRENCY", cap),
        ("FRONTDESK_PROVIDER_TIMEOUT", "60s"),
    ];
    sms::start(db, twilio, &env).await
}

/// Two sms channels, so two lanes: "slow" and "fast".
async fn slow_and_fast(platform: &Platform<'_>, twilio: &FakeTwilio) {
    SmsChannel::connect(platform, twilio, "slow", None).await;
    SmsChannel::connect(platform, twilio, "fast", None).await;
}

on_both_databases!(a_hung_provider_holds_only_its_lane, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = with_lane_cap(&db, &twilio, "4").await;
    let platform = Platform::new(&server).await;
    slow_and_fast(&platform, &twilio).await;
    // Every request that arrives now hangs: the slow channel's lane fills with 4 sends on the wire.
    twilio.answer_after(Duration::from_secs(50), 201);
    let mut stuck = Vec::new();
    for n in 0..10 {
        stuck.push(send(&platform, "slow", &format!("+1555040{n:04}"), &format!("stuck {n}")).await);
    }
    twilio.wait_for(4, WAIT).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(twilio.arrived(), 4, "the slow lane holds no more than its cap");
    // The provider answers again: the other channel's send goes out at once, the slow lane stays held.
    twilio.answer(201);
    let started = std::time::Instant::now();
    let fast = send(&platform, "fast", "+15550409999", "fast one").await;
    message_when(&platform, &fast, |m| m["status"] == "sent").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let queued = platform.ok("GET", &format!("/v1/messages/{}", stuck[9]), None).await;
    assert_eq!(queued["message"]["status"], "queued");
});

// A lane that comes back under its cap takes only the room it has. The claim used to take as many due jobs as
// the process had free slots (252 here) and give back all but the lane's room at once: two writes of every
// queued job per delivery, with the queue behind one busy channel.
on_both_databases!(a_lane_back_under_its_cap_takes_only_its_room, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = with_lane_cap(&db, &twilio, "4").await;
    let platform = Platform::new(&server).await;
    SmsChannel::connect(&platform, &twilio, "sms", None).await;
    twilio.answer_after(Duration::from_millis(300), 201);
    let mut sent = Vec::new();
    for n in 0..40 {
        sent.push(send(&platform, "sms", &format!("+1555070{n:04}"), &format!("queued {n}")).await);
    }
    for id in &sent {
        message_when(&platform, id, |m| m["status"] == "sent").await;
    }
    assert_eq!(twilio.created(), 40);
    let metrics = server.metrics().await;
    let released: f64 = metrics
        .lines()
        .find(|line| line.starts_with("frontdesk_jobs_released_total"))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0);
    assert_eq!(released, 0.0, "no claim took more than its lane's room:\n{metrics}");
    assert!(
        server.metric("frontdesk_job_claims_total", "taken").await >= 10.0,
        "one claim per freed slot or so"
    );
});

/// A claim passes over lanes at their cap. On PostgreSQL, statistics taken while the queue was empty (a
/// vacuum between bursts that could not shrink the file) say the table holds no rows over many pages, and
/// `id IN (subquery)` was then planned as a nested-loop semi join that ran the locking subquery again for
/// every row: with thousands of jobs waiting behind a full lane, each claim took seconds (the 30 s statement
/// timeout at 16,000) and every other lane's jobs waited for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_statistics_do_not_stall_the_claim_behind_a_full_lane() {
    use sea_orm::ConnectionTrait;

    let db = Db::postgres().await;
    let twilio = FakeTwilio::start().await;
    let server = with_lane_cap(&db, &twilio, "1").await;
    let platform = Platform::new(&server).await;
    slow_and_fast(&platform, &twilio).await;
    let conn = db.connect().await;
    let run = |sql: String| {
        let conn = &conn;
        async move {
            conn.execute_unprepared(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    };
    let jobs = |select: &str| {
        format!(
            "INSERT INTO jobs (id, account_id, kind, lane, payload, status, attempts, max_attempts, run_at_ms, \
             created_at, updated_at) {select}"
        )
    };
    // An emptied queue, vacuumed without giving its pages back: no rows, as the statistics say, over many pages.
    run("ALTER TABLE jobs SET (autovacuum_enabled = false, vacuum_truncate = false)".into()).await;
    run(jobs(
        "SELECT 'filler_' || g, 'filler', 'filler', '', '{}', 'failed', 0, 5, 1, now(), now() \
         FROM generate_series(1, 20000) g",
    ))
    .await;
    run("DELETE FROM jobs WHERE kind = 'filler'".into()).await;
    run("VACUUM ANALYZE jobs".into()).await;

    // One send held on the wire fills the slow lane; 8,000 due jobs queue behind it.
    twilio.answer_after(Duration::from_secs(50), 201);
    send(&platform, "slow", "+15550600000", "held").await;
    twilio.wait_for(1, WAIT).await;
    run(jobs(
        "SELECT 'queued_' || g, account_id, kind, lane, '{}', 'pending', 0, 5, 1, now(), now() \
         FROM (SELECT account_id, kind, lane FROM jobs WHERE kind = 'deliver_message' LIMIT 1) held \
         CROSS JOIN generate_series(1, 8000) g",
    ))
    .await;

    twilio.answer(201);
    let started = std::time::Instant::now();
    let other = send(&platform, "fast", "+15550609999", "another lane").await;
    message_when(&platform, &other, |m| m["status"] == "sent").await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the other lane's send took {:?}",
        started.elapsed()
    );
}

on_both_databases!(
    an_api_only_replica_leaves_its_jobs_to_a_worker_replica,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let api = sms::start(&db, &twilio, &[("FRONTDESK_JOB_CONCURRENCY", "0")]).await;
        let platform = Platform::new(&api).await;
        SmsChannel::connect(&platform, &twilio, "sms", None).await;
        let mut sent = Vec::new();
        for n in 0..5 {
            sent.push(send(&platform, "sms", &format!("+1555050{n:04}"), &format!("later {n}")).await);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(twilio.arrived(), 0, "the API replica runs no jobs");
        assert!(api.logs().contains("runs no jobs"), "its log says so");
        let queued = platform.ok("GET", &format!("/v1/messages/{}", sent[0]), None).await;
        assert_eq!(queued["message"]["status"], "queued");

        // A replica with workers, on the same database, sends them.
        let _worker = sms::start(&db, &twilio, &[]).await;
        for id in &sent {
            message_when(&platform, id, |m| m["status"] == "sent").await;
        }
        assert_eq!(twilio.created(), 5);
    }
);

on_both_databases!(failed_jobs_are_kept_for_operators, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    twilio.answer(503);
    let server = sms::start(&db, &twilio, &[("FRONTDESK_SEND_RETRY_SCHEDULE", "100ms,100ms")]).await;
    let platform = Platform::new(&server).await;
    SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let id = send(&platform, "sms", "+15550410001", "into the void").await;
    let message = message_when(&platform, &id, |m| m["status"] == "failed").await;
    assert_eq!(message["error"]["code"], "provider_unavailable");

    let mut admin = admin::client(&server).await;
    let list = admin
        .list_jobs(ListJobsRequest {
            failed: true,
            kind: "deliver_message".into(),
            limit: 10,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((list.jobs.len(), list.failed), (1, 1), "{list:?}");
    let job = &list.jobs[0];
    assert_eq!((job.status.as_str(), job.attempts, job.max_attempts), ("failed", 3, 3));
    assert!(job.last_error.contains("503"), "{}", job.last_error);
    assert_eq!(job.account_id, platform.account_id);

    // The operator's command line shows it too.
    let output = std::process::Command::new(binary::path())
        .args(["admin", "--core", &server.grpc, "jobs", "--failed", "--json"])
        .env("FRONTDESK_ADMIN_TOKEN", admin::TEST_ADMIN_TOKEN)
        .output()
        .expect("run the CLI");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(printed["failed"], 1);
    assert_eq!(printed["jobs"][0]["id"], job.id.as_str());

    // Queued again by an operator, it runs (and finds its message failed already: nothing is sent twice).
    let arrived = twilio.arrived();
    let retried = admin
        .retry_job(RetryJobRequest { id: job.id.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((retried.status.as_str(), retried.attempts), ("pending", 0));
    let started = std::time::Instant::now();
    loop {
        let list = admin
            .list_jobs(ListJobsRequest {
                failed: false,
                kind: "deliver_message".into(),
                limit: 10,
            })
            .await
            .unwrap()
            .into_inner();
        if list.jobs.is_empty() {
            break;
        }
        assert!(started.elapsed() < WAIT, "the retried job never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(twilio.arrived(), arrived);
    let unknown = admin
        .retry_job(RetryJobRequest {
            id: "job_0000000000000000".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
});

on_both_databases!(idle_conversations_close_by_themselves, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let env = [
        ("FRONTDESK_TEST_CLOCK", "true"),
        ("FRONTDESK_CONVERSATION_IDLE_HOURS", "1"),
    ];
    let server = sms::start(&db, &twilio, &env).await;
    let platform = Platform::new(&server).await;
    let channel = SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let receiver = Receiver::start().await;
    let body = json!({"name": "hooks", "url": receiver.url, "events": ["conversation.created", "conversation.closed"]});
    platform.ok("POST", "/v1/webhooks", Some(body)).await;

    assert_eq!(
        channel
            .inbound(&new_message_sid(), "+15550420001", "hello")
            .await
            .status,
        200
    );
    let opened = receiver.wait_for(1, WAIT).await;
    let first = opened[0].json["data"]["id"].as_str().unwrap().to_owned();
    assert_eq!(opened[0].json["data"]["status"], "open");

    // Two hours on, with no message in between, the conversation closes by itself.
    let later = chrono::Utc::now() + chrono::Duration::hours(2);
    let now = prost_types::Timestamp {
        seconds: later.timestamp(),
        nanos: 0,
    };
    admin::set_test_clock(&server, Some(now)).await.unwrap();
    let events = receiver.wait_for(2, WAIT).await;
    assert_eq!(events[1].json["type"], "conversation.closed");
    assert_eq!(events[1].json["data"]["id"], first.as_str());
    assert_eq!(events[1].json["data"]["status"], "closed");
    assert!(events[1].json["data"]["closed_at"].is_string());

    // The contact's next message opens a new one.
    channel.inbound(&new_message_sid(), "+15550420001", "me again").await;
    let events = receiver.wait_for(3, WAIT).await;
    assert_eq!(events[2].json["type"], "conversation.created");
    assert_ne!(events[2].json["data"]["id"], first.as_str());
});
