//! The durable job engine as users see it, on SQLite and PostgreSQL + Redis: a provider that hangs holds
//! only its channel's lane; a send that used up its tries leaves a failed job with its last error for
//! operators (admin gRPC and `frontdesk admin jobs --failed`), which an operator can queue again; the
//! recurring housekeeping job closes idle conversations; at SIGTERM the sends on the wire finish and are
//! recorded, one that outlasts the grace is released, and the next start sends the rest at once; and
//! `/metrics` counts runs by outcome and shows the backlog.

use std::time::Duration;

use frontdesk_api::admin::v1::{ListJobsRequest, RetryJobRequest};
use frontdesk_tests::{
    Db, Server, admin, binary, on_both_databases,
    platform::Platform,
    server::sample,
    sms::{self, SmsChannel, message_when, send},
    twilio::{FakeTwilio, new_message_sid},
    webhook_receiver::Receiver,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

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
    let released = sample(&metrics, "frontdesk_jobs_released_total", &[]).unwrap_or(0.0);
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
            ..Default::default()
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
                ..Default::default()
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

/// A server whose claims last a minute unless released or renewed (so a job left claimed at exit would wait
/// that long after a restart), with lanes of 4 and a provider timeout longer than any test.
async fn with_long_lease(db: &Db, twilio: &FakeTwilio) -> Server {
    let env = [
        ("FRONTDESK_JOB_LEASE", "60s"),
        ("FRONTDESK_JOB_LANE_CONCURRENCY", "4"),
        ("FRONTDESK_PROVIDER_TIMEOUT", "60s"),
    ];
    sms::start(db, twilio, &env).await
}

/// An account with an sms channel that is never paced; its id and key, so the test can outlive the server.
async fn account_with_sms(server: &Server, twilio: &FakeTwilio) -> (String, String) {
    let platform = Platform::new(server).await;
    SmsChannel::connect(&platform, twilio, "sms", Some(100_000)).await;
    (platform.account_id, platform.key)
}

// A SIGTERM during a burst: the sends on the wire finish and show `sent` (each text reached Twilio once), no
// new one starts, the process exits well within the grace, and after a restart the rest go out at once.
on_both_databases!(
    sigterm_lets_sends_on_the_wire_finish_and_leaves_the_rest_to_the_next_start,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        // Three seconds per answer: at the signal four sends (the lane's cap) are on the wire, eight wait.
        twilio.answer_after(Duration::from_secs(3), 201);
        let mut server = with_long_lease(&db, &twilio).await;
        let (account_id, key) = account_with_sms(&server, &twilio).await;
        let mut ids = Vec::new();
        {
            let platform = Platform::of(&server, &account_id, &key);
            for n in 0..12 {
                ids.push(send(&platform, "sms", &format!("+1555080{n:04}"), &format!("shutdown {n}")).await);
            }
        }
        let on_the_wire: Vec<String> = twilio
            .wait_for(4, WAIT)
            .await
            .iter()
            .map(|m| m.body().to_owned())
            .collect();

        let took = server.terminate(WAIT).await;
        assert!(
            took < Duration::from_secs(8),
            "the process exits once its running sends are recorded, not after the whole grace: {took:?}"
        );
        let stopped = chrono::Utc::now();
        assert_eq!(twilio.arrived(), 4, "no send starts after the signal");
        assert_eq!(
            twilio.created(),
            4,
            "the sends on the wire got their answers before the exit"
        );

        let restarted = std::time::Instant::now();
        let server = server.restart().await;
        let platform = Platform::of(&server, &account_id, &key);
        for id in &ids {
            let message = message_when(&platform, id, |m| m["status"] != "queued").await;
            assert_eq!(message["status"], "sent", "{message}");
            let sent_at = chrono::DateTime::parse_from_rfc3339(message["sent_at"].as_str().unwrap()).unwrap();
            if on_the_wire.iter().any(|text| *text == message["text"]) {
                assert!(sent_at <= stopped, "recorded before the exit: {message}");
            }
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(20),
            "the eight never claimed go out at once after the restart, not after a lease: {:?}",
            restarted.elapsed()
        );
        for n in 0..12 {
            let text = format!("shutdown {n}");
            assert_eq!(twilio.sent_with_body(&text).len(), 1, "{text} reached Twilio once");
        }
    }
);

// A SIGTERM while the provider hangs: the process exits after the ten-second grace (not the provider's
// timeout), and after a restart the send goes out again at once, not after its lease.
on_both_databases!(
    sigterm_releases_a_send_that_outlasts_the_grace_for_the_next_start,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        // The first request is never answered (until the 60 s provider timeout); the rest are at once.
        twilio.then_hang();
        let mut server = with_long_lease(&db, &twilio).await;
        let (account_id, key) = account_with_sms(&server, &twilio).await;
        let id = {
            let platform = Platform::of(&server, &account_id, &key);
            send(&platform, "sms", "+15550810001", "held at shutdown").await
        };
        twilio.wait_for(1, WAIT).await;

        // The process waits out the ten-second grace for the hung send, then gives its claim back and exits.
        let took = server.terminate(Duration::from_secs(50)).await;
        assert!(
            (Duration::from_secs(9)..Duration::from_secs(20)).contains(&took),
            "exited {took:?} after SIGTERM"
        );
        assert!(
            server.logs().contains("stopped unfinished runs and released them"),
            "{}",
            server.logs()
        );

        // After the restart the released send goes out again at once, long before its minute's lease ends.
        let restarted = std::time::Instant::now();
        let server = server.restart().await;
        let platform = Platform::of(&server, &account_id, &key);
        let message = message_when(&platform, &id, |m| m["status"] != "queued").await;
        assert!(
            restarted.elapsed() < Duration::from_secs(15),
            "sent {:?} after the restart",
            restarted.elapsed()
        );
        assert_eq!(message["status"], "sent", "{message}");
        let tries = twilio.sent_with_body("held at shutdown");
        assert_eq!(tries.len(), 2, "the hung try and the one after the restart");
        assert_eq!(message["provider_message_id"].as_str(), tries[1].sid.as_deref());
    }
);

/// `frontdesk_job_runs_total` of the sends that ended with `outcome`.
async fn send_runs(server: &Server, outcome: &str) -> f64 {
    let outcome = format!(r#"outcome="{outcome}""#);
    let labels = [r#"kind="deliver_message""#, outcome.as_str()];
    sample(&server.metrics().await, "frontdesk_job_runs_total", &labels).unwrap_or(0.0)
}

/// Polls `/metrics` until `holds` is true of the sends' queue gauges `(pending, due, failed, oldest due age)`
/// (pending, due and the age are refreshed every five seconds; failed is the count of sends that ended
/// failed); those figures (from one reading).
async fn gauges_when(server: &Server, holds: impl Fn((f64, f64, f64, f64)) -> bool) -> (f64, f64, f64, f64) {
    let started = std::time::Instant::now();
    loop {
        let metrics = server.metrics().await;
        let sends = [r#"kind="deliver_message""#, r#"class="interactive""#];
        let gauges = (
            sample(&metrics, "frontdesk_jobs_pending", &sends).unwrap_or(0.0),
            sample(&metrics, "frontdesk_jobs_due", &sends).unwrap_or(0.0),
            sample(&metrics, "frontdesk_jobs_failed_total", &sends).unwrap_or(0.0),
            sample(&metrics, "frontdesk_jobs_oldest_due_age_seconds", &sends).unwrap_or(0.0),
        );
        if holds(gauges) {
            return gauges;
        }
        assert!(
            started.elapsed() < WAIT,
            "the queue gauges stayed at {gauges:?}:\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// An operator's `/metrics`: runs of sends by outcome (done, failed, retry), the failed job, and while sends
// queue behind a slow provider, the due jobs and how late the oldest is, back to zero once drained.
on_both_databases!(
    metrics_count_runs_by_outcome_and_show_the_backlog,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = with_lane_cap(&db, &twilio, "1").await;
        let platform = Platform::new(&server).await;
        SmsChannel::connect(&platform, &twilio, "sms", Some(100_000)).await;

        // Three sends go out; one is refused for good (a 400); one is retried after a 500, then goes out.
        for n in 0..3 {
            let id = send(&platform, "sms", &format!("+1555090{n:04}"), "fine").await;
            message_when(&platform, &id, |m| m["status"] == "sent").await;
        }
        twilio.then_error(400, 21211, "Invalid 'To' Phone Number");
        let refused = send(&platform, "sms", "+15550900010", "refused").await;
        message_when(&platform, &refused, |m| m["status"] == "failed").await;
        twilio.then(&[500]);
        let retried = send(&platform, "sms", "+15550900011", "retried").await;
        message_when(&platform, &retried, |m| m["status"] == "sent").await;
        for (outcome, runs) in [("done", 4.0), ("failed", 1.0), ("retry", 1.0)] {
            assert_eq!(send_runs(&server, outcome).await, runs, "{outcome}");
        }
        gauges_when(&server, |(_, _, failed, _)| failed == 1.0).await;

        // A backlog: one send at a time on the wire for three seconds, the rest due and waiting.
        twilio.answer_after(Duration::from_secs(3), 201);
        let mut backlog = Vec::new();
        for n in 0..6 {
            backlog.push(send(&platform, "sms", &format!("+1555091{n:04}"), &format!("backlog {n}")).await);
        }
        let (pending, due, _, age) = gauges_when(&server, |(_, due, _, age)| due >= 3.0 && age > 0.0).await;
        assert!(
            pending > due,
            "the send on the wire is pending too: {pending} pending, {due} due"
        );
        assert!(age < 30.0, "the oldest waited {age} s");

        // Drained, nothing is due any more.
        twilio.answer(201);
        for id in &backlog {
            message_when(&platform, id, |m| m["status"] == "sent").await;
        }
        gauges_when(&server, |(_, due, _, age)| due == 0.0 && age == 0.0).await;
        assert_eq!(send_runs(&server, "done").await, 10.0);
    }
);
