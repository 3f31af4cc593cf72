//! The job engine's fairness and its guarantees under shutdown and pauses, as users see them, on SQLite and
//! PostgreSQL + Redis: one tenant's backlog never holds back another tenant's send, its retry, or the busy
//! tenant's own interactive work (also when sends are accepted on an API-only replica and run on a worker
//! replica); one tenant's imports cannot take every worker; a SIGTERM during a slow send never lets it run
//! in two places at once; a worker paused past its lease (SIGSTOP) does not call the provider once another
//! worker took its job over; and an operator's cancel stops a send on the wire.

use std::time::{Duration, Instant};

use frontdesk_tests::{
    Db, Server, admin, binary, join_all, on_both_databases,
    platform::Platform,
    server::sample,
    sms::{self, SmsChannel, message_when, send},
    twilio::FakeTwilio,
    webhook_receiver::Receiver,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// Waits until the fake has had `count` requests with `body`; them.
async fn requests_with_body(
    twilio: &FakeTwilio,
    body: &str,
    count: usize,
    within: Duration,
) -> Vec<frontdesk_tests::twilio::SentMessage> {
    let started = Instant::now();
    loop {
        let seen = twilio.sent_with_body(body);
        if seen.len() >= count {
            return seen;
        }
        assert!(
            started.elapsed() < within,
            "{} of {count} requests with body {body:?} within {within:?}",
            seen.len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Seconds between two instants of the fake's clock.
fn seconds(from: chrono::DateTime<chrono::Utc>, to: chrono::DateTime<chrono::Utc>) -> f64 {
    (to - from).num_milliseconds() as f64 / 1000.0
}

/// A busy tenant with 1,000 sends queued on one channel, built up while the provider takes nothing and then
/// drained by a provider answering in 0.1-0.7 s (jittered, so completions never come in waves; 64 at a time, the
/// channel's rate not the limit), and a quiet tenant with one send whose first try gets a 500. The quiet send,
/// its retry and the busy tenant's own send on another channel (interactive work in its own lane, as an AI
/// reply is) each reach the provider within 2 s of being due. With `split`, sends are accepted on an API-only
/// replica and run on a worker replica. The claim used to read only the oldest due jobs, all of them the
/// backlog's, whenever the busy lane was just under its cap, as it is after each completion: the retry, due a
/// second later, waited until most of the backlog had gone.
async fn a_backlog_holds_back_no_other_work(db: Db, split: bool) {
    // Drained at about 160 a second, it outlasts the retry's 3 s several times over.
    const BACKLOG: u32 = 1_000;
    let twilio = FakeTwilio::start().await;
    twilio.answer_between(Duration::from_millis(100), Duration::from_millis(700), 201);
    twilio.close();
    // The default lane cap and poll interval; the sends held while the backlog builds up wait past any timeout.
    let env = [
        ("FRONTDESK_SEND_RETRY_SCHEDULE", "1s,1s"),
        ("FRONTDESK_PROVIDER_TIMEOUT", "300s"),
        ("FRONTDESK_JOB_POLL_INTERVAL", "50ms"),
    ];
    let worker = sms::start(&db, &twilio, &env).await;
    let api = if split {
        let mut api_env = env.to_vec();
        api_env.push(("FRONTDESK_JOB_CONCURRENCY", "0"));
        Some(sms::start(&db, &twilio, &api_env).await)
    } else {
        None
    };
    let front = api.as_ref().unwrap_or(&worker);
    let busy = Platform::new(front).await;
    let quiet = Platform::new(front).await;
    SmsChannel::connect(&busy, &twilio, "bulk", Some(100_000)).await;
    SmsChannel::connect(&busy, &twilio, "replies", Some(100_000)).await;
    SmsChannel::connect(&quiet, &twilio, "sms", Some(100_000)).await;

    for chunk in (0..BACKLOG).collect::<Vec<u32>>().chunks(50) {
        let sends = chunk.iter().map(|n| {
            let (http, key) = (front.http.clone(), busy.key.clone());
            let n = *n;
            async move {
                let body = json!({"phone": format!("+1555100{n:04}"), "text": "backlog", "channel": "bulk"});
                let answer = frontdesk_tests::call_with(
                    "POST",
                    &format!("{http}/v1/contacts/send"),
                    &[("x-api-key", &key)],
                    Some(&body.to_string()),
                )
                .await;
                assert_eq!(answer.status, 202, "{}", answer.body);
            }
        });
        join_all(sends).await;
    }
    // The backlog is queued behind the 64 sends the provider holds; it now starts draining.
    twilio.then_for_body("quiet one", &[500]);
    twilio.open();
    let accepted = chrono::Utc::now();
    let quiet_id = send(&quiet, "sms", "+15552000001", "quiet one").await;
    let reply_accepted = chrono::Utc::now();
    send(&busy, "replies", "+15552000002", "busy reply").await;
    let tries = requests_with_body(&twilio, "quiet one", 2, WAIT).await;
    let reply = requests_with_body(&twilio, "busy reply", 1, WAIT).await;
    message_when(&quiet, &quiet_id, |m| m["status"] == "sent").await;

    let first = seconds(accepted, tries[0].received_at);
    assert!(
        first < 2.0,
        "the quiet send reached the provider {first} s after it was accepted"
    );
    // The retry is due 1 s after the first try (+-20%).
    let retry = seconds(tries[0].received_at, tries[1].received_at);
    assert!(
        retry < 1.2 + 2.0,
        "the retry reached the provider {retry} s after the first try"
    );
    let own = seconds(reply_accepted, reply[0].received_at);
    assert!(own < 2.0, "the busy tenant's own send on another lane waited {own} s");
    let before = twilio
        .sent_where(|m| m.body() == "backlog" && m.received_at <= tries[1].received_at)
        .len();
    assert!(
        before <= BACKLOG as usize * 9 / 10,
        "the backlog was still there at the retry ({before} of {BACKLOG} sent)"
    );
}

on_both_databases!(a_backlog_holds_back_no_other_tenant_or_lane, |db: Db| async move {
    a_backlog_holds_back_no_other_work(db, false).await;
});

on_both_databases!(
    a_backlog_holds_back_no_other_tenant_across_replicas,
    |db: Db| async move {
        a_backlog_holds_back_no_other_work(db, true).await;
    }
);

/// A web site whose every page takes a minute.
async fn hanging_site(host: &str) -> String {
    let listener = tokio::net::TcpListener::bind(format!("{host}:0")).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route(
            "/{page}",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                "late"
            }),
        )
        .route(
            "/robots.txt",
            axum::routing::get(|| async { "User-agent: *\nAllow: /\n" }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// A web site with one page of opening hours.
async fn quick_site(host: &str) -> String {
    let listener = tokio::net::TcpListener::bind(format!("{host}:0")).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let page = "<html><body><h2>Opening hours</h2><p>We are open from nine to five.</p></body></html>";
    let app = axum::Router::new().route(
        "/hours",
        axum::routing::get(move || async move { ([("content-type", "text/html")], page) }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

// Four workers; one tenant starts four imports of a site that never answers. Jobs without a lane had no cap,
// so they took every worker and another tenant's import waited a minute.
on_both_databases!(one_tenants_imports_cannot_take_every_worker, |db: Db| async move {
    let env = [
        ("FRONTDESK_ALLOW_PRIVATE_URLS", "true"),
        ("FRONTDESK_IMPORT_TIMEOUT", "60s"),
        ("FRONTDESK_JOB_CONCURRENCY", "4"),
        ("FRONTDESK_JOB_LANE_CONCURRENCY", "2"),
        ("FRONTDESK_JOB_POLL_INTERVAL", "20ms"),
    ];
    let server = Server::start(&db, &env).await;
    let (hogging, other) = (Platform::new(&server).await, Platform::new(&server).await);
    let slow = hanging_site("127.0.0.1").await;
    let quick = quick_site("127.0.0.2").await;
    for n in 0..4 {
        let body = json!({"url": format!("{slow}/page{n}")});
        hogging.ok("POST", "/v1/kb-sources/url", Some(body)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let body = json!({"url": format!("{quick}/hours")});
    let source = other.ok("POST", "/v1/kb-sources/url", Some(body)).await["source_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = frontdesk_tests::knowledge::finished(&other, &source).await;
    assert_eq!(done["status"], "ready", "{done}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the other tenant's import took {:?}",
        started.elapsed()
    );
});

// Two worker replicas. The send on the wire at the first one's SIGTERM outlasts the ten-second grace: it
// is stopped (its request dropped) before its claim is released, and the other replica sends it then. A
// webhook delivery on the wire as well (to an endpoint that answers after a minute) keeps the first process
// up past the jobs' grace, as the deliveries' own grace runs on: claims used to be released while their runs
// went on, so the released send ran on two replicas at once.
on_both_databases!(a_sigterm_during_a_slow_send_never_runs_it_twice, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    twilio.then_after(Duration::from_secs(25), 201);
    let mut first = sms::start(&db, &twilio, &[("FRONTDESK_PROVIDER_TIMEOUT", "60s")]).await;
    let platform = Platform::new(&first).await;
    let (account_id, key) = (platform.account_id.clone(), platform.key.clone());
    SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let endpoint = Receiver::start().await;
    endpoint.delay(Duration::from_secs(60));
    let body = json!({"name": "slow-endpoint", "url": endpoint.url, "events": ["contact.created"]});
    platform.ok("POST", "/v1/webhooks", Some(body)).await;
    let id = send(&platform, "sms", "+15553000001", "slow one").await;
    twilio.wait_for(1, WAIT).await;
    let started = Instant::now();
    while endpoint.arrived() == 0 {
        assert!(started.elapsed() < WAIT, "the webhook delivery never went out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = sms::start(&db, &twilio, &[("FRONTDESK_PROVIDER_TIMEOUT", "60s")]).await;

    let took = first.terminate(Duration::from_secs(60)).await;
    assert!(took < Duration::from_secs(40), "exited {took:?} after SIGTERM");
    let platform = Platform::of(&second, &account_id, &key);
    let message = message_when(&platform, &id, |m| m["status"] == "sent").await;
    let tries = twilio.sent_with_body("slow one");
    assert_eq!(tries.len(), 2, "the stopped try and the other replica's");
    let stopped = twilio
        .ended_at(tries[0].seq)
        .expect("the first try's request was closed");
    assert!(
        stopped <= tries[1].received_at,
        "the first try was still on the wire when the other replica sent ({stopped} > {})",
        tries[1].received_at
    );
    assert_eq!(message["provider_message_id"].as_str(), tries[1].sid.as_deref());
    assert_eq!(twilio.created(), 1, "the provider created the message once");
});

// A worker waiting for its channel's pacing slot is paused (SIGSTOP) past its one-second lease; another
// worker takes the job over and tries it (the provider answers 500, so the job waits for its retry). When
// the paused worker resumes, it must not call the provider: its claim is gone.
on_both_databases!(
    a_worker_paused_past_its_lease_does_not_send_what_another_took_over,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        twilio.then_for_body("taken over", &[500, 500, 500]);
        // Long polls: a paused process on SQLite must not be caught holding the file's write lock.
        let env = [
            ("FRONTDESK_JOB_LEASE", "1s"),
            ("FRONTDESK_SEND_RETRY_SCHEDULE", "60s"),
            ("FRONTDESK_JOB_POLL_INTERVAL", "1s"),
            ("FRONTDESK_WEBHOOK_POLL_INTERVAL", "1s"),
        ];
        let paused = sms::start(&db, &twilio, &env).await;
        let platform = Platform::new(&paused).await;
        let mut config = twilio.channel_config();
        // One send every two seconds: the second send waits in its job for its slot.
        config["max_per_second"] = json!("0.5");
        platform
            .ok(
                "POST",
                "/v1/channels",
                Some(json!({"name": "sms", "type": "sms", "config": config})),
            )
            .await;
        send(&platform, "sms", "+15554000001", "first").await;
        requests_with_body(&twilio, "first", 1, WAIT).await;
        send(&platform, "sms", "+15554000002", "taken over").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        paused.signal("STOP");

        let other = sms::start(&db, &twilio, &env).await;
        requests_with_body(&twilio, "taken over", 1, WAIT).await;
        paused.signal("CONT");
        // The resumed worker knows its claim is gone: its run is stopped, or its outcome dropped.
        paused
            .metrics_when(|m| {
                [
                    "frontdesk_job_runs_stopped_total",
                    "frontdesk_job_outcomes_dropped_total",
                ]
                .iter()
                .any(|name| sample(m, name, &[r#"kind="deliver_message""#]).is_some())
            })
            .await;
        let tries = twilio.sent_with_body("taken over");
        assert_eq!(
            tries.len(),
            1,
            "only the worker holding the job called the provider: {tries:?}"
        );
        drop(other);
    }
);

// An operator cancels a send whose provider hangs: its run is stopped within a third of the lease, the
// message fails with `cancelled`, and nothing else is sent for it.
on_both_databases!(an_operator_cancels_a_send_on_the_wire, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    twilio.then_hang();
    let server = sms::start(&db, &twilio, &[("FRONTDESK_PROVIDER_TIMEOUT", "60s")]).await;
    let platform = Platform::new(&server).await;
    SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let id = send(&platform, "sms", "+15555000001", "never mind").await;
    let tries = requests_with_body(&twilio, "never mind", 1, WAIT).await;
    let mut admin_client = admin::client(&server).await;
    let listed = admin_client
        .list_jobs(frontdesk_api::admin::v1::ListJobsRequest {
            account_id: platform.account_id.clone(),
            kind: "deliver_message".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.jobs.len(), 1, "{listed:?}");
    let job = &listed.jobs[0];
    assert_eq!((job.status.as_str(), job.class.as_str()), ("running", "interactive"));
    assert!(!job.lane.is_empty());

    let output = std::process::Command::new(binary::path())
        .args([
            "admin",
            "--core",
            &server.grpc,
            "--json",
            "jobs",
            "cancel",
            "--id",
            &job.id,
        ])
        .env("FRONTDESK_ADMIN_TOKEN", admin::TEST_ADMIN_TOKEN)
        .output()
        .expect("run the CLI");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(printed["cancelled"], 1);
    let cancelled_at = chrono::Utc::now();

    let message = message_when(&platform, &id, |m| m["status"] == "failed").await;
    assert_eq!(message["error"]["code"], "cancelled");
    let started = Instant::now();
    let stopped = loop {
        if let Some(at) = twilio.ended_at(tries[0].seq) {
            break at;
        }
        assert!(started.elapsed() < WAIT, "the cancelled send stayed on the wire");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        seconds(cancelled_at, stopped) < 2.0,
        "stopped {} s after the cancel",
        seconds(cancelled_at, stopped)
    );
    frontdesk_tests::admin::quiesce(&server).await;
    assert_eq!(twilio.sent_with_body("never mind").len(), 1);
});

// A send whose every run is cut by the death of its worker (SIGKILL as its request reaches the provider,
// then a restart, five times): the sixth claim fails it as `crashed` instead of running it, and its message
// fails with that error. Such a run spends no try, so the job used to be claimed for ever.
on_both_databases!(a_send_that_kills_every_worker_fails_as_crashed, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    for _ in 0..6 {
        twilio.then_hang();
    }
    let env = [("FRONTDESK_JOB_LEASE", "1s"), ("FRONTDESK_JOB_MAX_CRASHES", "5")];
    let mut server = sms::start(&db, &twilio, &env).await;
    let (account_id, key, id) = {
        let platform = Platform::new(&server).await;
        SmsChannel::connect(&platform, &twilio, "sms", None).await;
        let id = send(&platform, "sms", "+15556000001", "deadly").await;
        (platform.account_id.clone(), platform.key.clone(), id)
    };
    for kills in 1..=5 {
        requests_with_body(&twilio, "deadly", kills, WAIT).await;
        server = server.restart().await;
    }
    let platform = Platform::of(&server, &account_id, &key);
    let message = message_when(&platform, &id, |m| m["status"] == "failed").await;
    assert_eq!(message["error"]["code"], "crashed", "{message}");
    assert_eq!(twilio.sent_with_body("deadly").len(), 5, "no sixth run");
    let mut admin_client = admin::client(&server).await;
    let failed = admin_client
        .list_jobs(frontdesk_api::admin::v1::ListJobsRequest {
            account_id: account_id.clone(),
            failed: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(failed.jobs.len(), 1, "{failed:?}");
    assert_eq!(failed.jobs[0].last_error, "crashed");
    let metrics = server.metrics().await;
    assert_eq!(
        frontdesk_tests::server::sample(&metrics, "frontdesk_jobs_crashed_total", &[]),
        Some(1.0),
        "{metrics}"
    );
});

/// libfaketime (Debian's `libfaketime`), which shifts a process's clock.
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

// Two worker replicas on one PostgreSQL, the second with its clock 3 s ahead (libfaketime shifts the whole
// process's clock). The first holds a send the provider answers after 8 s, its 4 s lease renewed every
// 1.3 s. Leases used to be written and compared on each replica's clock: the second took the row whenever
// its clock passed the lease's end, a second or so after each renewal, and sent the message again. On the
// database's clock it takes nothing still held. (SQLite replicas share one machine, hence one clock.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_clock_runs_ahead_takes_nothing_still_held() {
    assert!(
        std::path::Path::new(FAKETIME).exists(),
        "{FAKETIME} is missing: run scripts/test-prereqs"
    );
    let db = Db::postgres().await;
    let twilio = FakeTwilio::start().await;
    twilio.then_after(Duration::from_secs(8), 201);
    let env = [("FRONTDESK_JOB_LEASE", "4s"), ("FRONTDESK_PROVIDER_TIMEOUT", "30s")];
    let holder = sms::start(&db, &twilio, &env).await;
    let platform = Platform::new(&holder).await;
    SmsChannel::connect(&platform, &twilio, "sms", None).await;
    let id = send(&platform, "sms", "+15556100001", "held").await;
    requests_with_body(&twilio, "held", 1, WAIT).await;

    let mut ahead = env.to_vec();
    ahead.extend([
        ("LD_PRELOAD", FAKETIME),
        ("FAKETIME", "+3s"),
        ("DONT_FAKE_MONOTONIC", "1"),
    ]);
    let skewed = sms::start(&db, &twilio, &ahead).await;
    let message = message_when(&platform, &id, |m| m["status"] == "sent").await;
    frontdesk_tests::admin::quiesce(&skewed).await;
    assert_eq!(
        twilio.sent_with_body("held").len(),
        1,
        "only the replica holding the send made it"
    );
    assert!(message["provider_message_id"].is_string(), "{message}");
    let skew = skewed.logs();
    assert!(!skew.is_empty(), "the replica ahead ran");
    drop(skewed);
}

// An API-only replica accepts a send while the worker replica sleeps with a 30 s idle poll: the accept's
// wake-up (LISTEN/NOTIFY) reaches the worker, which sends within milliseconds (5 s allowed for a loaded
// machine; its next look was 30 s away). (SQLite replicas poll.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_replica_is_woken_for_a_send_accepted_elsewhere() {
    let db = Db::postgres().await;
    let twilio = FakeTwilio::start().await;
    let env = [("FRONTDESK_IDLE_POLL_INTERVAL", "30s")];
    let worker = sms::start(&db, &twilio, &env).await;
    let mut api_env = env.to_vec();
    api_env.push(("FRONTDESK_JOB_CONCURRENCY", "0"));
    let api = sms::start(&db, &twilio, &api_env).await;
    let platform = Platform::new(&api).await;
    SmsChannel::connect(&platform, &twilio, "sms", None).await;
    // Both replicas have looked for work and gone to sleep.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = Instant::now();
    send(&platform, "sms", "+15556200001", "wake up").await;
    requests_with_body(&twilio, "wake up", 1, WAIT).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the worker sent {:?} after the accept",
        started.elapsed()
    );
    drop(worker);
}

// Two replicas on one PostgreSQL: exactly one leads the housekeeping (retention, gauges); when it dies the
// other takes over, as the database frees the leader's lock with its connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_leads_the_housekeeping_and_another_takes_over_when_it_dies() {
    let db = Db::postgres().await;
    let twilio = FakeTwilio::start().await;
    let leads = |server: &Server| {
        server
            .logs()
            .lines()
            .rev()
            .find(|line| line.contains("housekeeping leadership changed"))
            .is_some_and(|line| line.contains("\"leads\":true"))
    };
    let mut first = sms::start(&db, &twilio, &[]).await;
    let started = Instant::now();
    while !leads(&first) {
        assert!(
            started.elapsed() < WAIT,
            "the only replica never led:\n{}",
            first.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = sms::start(&db, &twilio, &[]).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(!leads(&second), "two replicas led at once");
    first.kill();
    let killed = Instant::now();
    while !leads(&second) {
        assert!(killed.elapsed() < WAIT, "no replica took over:\n{}", second.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        killed.elapsed() < Duration::from_secs(12),
        "took over after {:?}",
        killed.elapsed()
    );
}

// A worker claims webhook deliveries due for their retry and is held between the claim and the attempts
// (a table its claim's read needs is locked), then paused (SIGSTOP) past its one-second lease. Another replica
// takes the deliveries over and delivers them. When the paused worker resumes, its read completes and its
// attempts would go out: the claim guard stops each before it leaves, so nothing arrives after the resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_paused_before_its_webhook_attempts_makes_none_after_it_resumes() {
    use sea_orm::{
        ConnectionTrait,
        sqlx::{Connection, raw_sql},
    };

    let db = Db::postgres().await;
    let twilio = FakeTwilio::start().await;
    let env = [
        ("FRONTDESK_WEBHOOK_LEASE", "1s"),
        ("FRONTDESK_WEBHOOK_RETRY_SCHEDULE", "3s"),
    ];
    let paused = sms::start(&db, &twilio, &env).await;
    let platform = Platform::new(&paused).await;
    let endpoint = Receiver::start().await;
    endpoint.answer(500);
    let body = json!({"name": "hooks", "url": endpoint.url, "events": ["contact.created"]});
    platform.ok("POST", "/v1/webhooks", Some(body)).await;
    for n in 0..5 {
        let contact = json!({"phone": format!("+1555630000{n}")});
        platform.ok("POST", "/v1/contacts", Some(contact)).await;
    }
    endpoint.wait_for(5, WAIT).await;

    // While the retries wait, the worker's read of what it claims is held up.
    let sql = sea_orm::Database::connect(db.url()).await.unwrap();
    let mut lock = sea_orm::sqlx::PgConnection::connect(&db.url()).await.unwrap();
    raw_sql("BEGIN; LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE")
        .execute(&mut lock)
        .await
        .unwrap();
    let claimed = "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending' AND claim_token IS NOT NULL";
    let started = Instant::now();
    loop {
        let row = sql
            .query_one_raw(sea_orm::Statement::from_string(sql.get_database_backend(), claimed))
            .await
            .unwrap()
            .unwrap();
        if row.try_get_by_index::<i64>(0).unwrap() == 5 {
            break;
        }
        assert!(started.elapsed() < WAIT, "the retries were never claimed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    paused.signal("STOP");
    raw_sql("ROLLBACK").execute(&mut lock).await.unwrap();
    endpoint.answer(200);

    let other = sms::start(&db, &twilio, &env).await;
    endpoint
        .wait_until(WAIT, |d| d.iter().filter(|d| d.answered == 200).count() == 5)
        .await;
    let before = endpoint.arrived();
    paused.signal("CONT");
    // Each of the five attempts is refused at the guard, whatever the reason label.
    let refused = |metrics: &str| -> f64 {
        metrics
            .lines()
            .filter(|line| line.starts_with("frontdesk_job_effects_refused_total{"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    paused.metrics_when(|m| refused(m) >= 5.0).await;
    assert_eq!(
        endpoint.arrived(),
        before,
        "the resumed worker made attempts for deliveries another replica holds"
    );
    drop(other);
}

// A replica starts while another transaction holds the recurring jobs' rows locked, as a replica paused in the
// middle of a claim does: putting the recurring jobs in place waits in the background, never the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_starts_while_another_holds_the_recurring_jobs_locked() {
    use sea_orm::sqlx::{Connection, raw_sql};

    let db = Db::postgres().await;
    let twilio = FakeTwilio::start().await;
    let first = sms::start(&db, &twilio, &[]).await;
    let mut lock = sea_orm::sqlx::PgConnection::connect(&db.url()).await.unwrap();
    let recurring = "SELECT COUNT(*) FROM jobs WHERE unique_key IS NOT NULL AND account_id = ''";
    let started = Instant::now();
    loop {
        let row: (i64,) = sea_orm::sqlx::query_as(recurring).fetch_one(&mut lock).await.unwrap();
        if row.0 >= 5 {
            break;
        }
        assert!(started.elapsed() < WAIT, "the recurring jobs never came");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Changed and not committed, as a claim in progress leaves them.
    raw_sql("BEGIN; UPDATE jobs SET updated_at = updated_at WHERE unique_key IS NOT NULL AND account_id = ''")
        .execute(&mut lock)
        .await
        .unwrap();
    let started = Instant::now();
    let second = sms::start(&db, &twilio, &[("FRONTDESK_DB_LOCK_TIMEOUT", "1s")]).await;
    let platform = Platform::new(&second).await;
    platform.ok("GET", "/v1/api-keys/current", None).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the second replica took {:?} to serve",
        started.elapsed()
    );
    raw_sql("ROLLBACK").execute(&mut lock).await.unwrap();
    drop(first);
}
