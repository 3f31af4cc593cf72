//! A channel's `max_per_second`: its sends reach the provider no faster than that, on one replica (SQLite and
//! PostgreSQL + Redis), on two replicas of one PostgreSQL and Redis, which take their slots from one shared
//! schedule (each replica pacing alone would let the channel send twice as fast), and on a replica whose
//! Redis is gone, which keeps the pace on its own.

use std::time::Duration;

use frontdesk_tests::{
    Db, Server, on_both_databases,
    platform::Platform,
    redis_server::PrivateRedis,
    sms::{self, SmsChannel},
    twilio::FakeTwilio,
};
use serde_json::json;

/// The channel's `max_per_second`, and the sends made at once.
const RATE: u32 = 4;
const SENDS: usize = 12;
/// What a replica logs when it paces on its own because Redis did not answer.
const FALLBACK_LOG: &str = "channels' sends are paced in each process";

/// The least time `SENDS` sends may span at `RATE` (one interval between each two), less a tenth for timers.
fn least_span() -> Duration {
    Duration::from_secs_f64((SENDS - 1) as f64 / f64::from(RATE) * 0.9)
}

/// The time from the first arrival of a `burst` to the last.
async fn span_of_a_burst(servers: &[&Server], key: &str, twilio: &FakeTwilio) -> Duration {
    let arrivals = burst(servers, key, twilio).await;
    arrivals[arrivals.len() - 1] - arrivals[0]
}

/// The shortest time any five consecutive arrivals span: four intervals at `RATE` when one schedule paces
/// them, half that if each of two replicas paced alone.
fn shortest_four_intervals(arrivals: &[Duration]) -> Duration {
    arrivals.windows(5).map(|five| five[4] - five[0]).min().unwrap()
}

/// Sends `SENDS` texts at once, alternating over `servers`, to new numbers; then waits until the provider has
/// them all and answers their arrivals, in order, as times from the first.
async fn burst(servers: &[&Server], key: &str, twilio: &FakeTwilio) -> Vec<Duration> {
    let sends = (0..SENDS).map(|n| {
        let (url, key) = (servers[n % servers.len()].url("/v1/contacts/send"), key.to_owned());
        tokio::spawn(async move {
            frontdesk_tests::http_client()
                .post(url)
                .header("x-api-key", key)
                .json(&json!({"phone": format!("+1555030{n:04}"), "text": format!("paced {n}")}))
                .send()
                .await
                .expect("send answered")
                .status()
                .as_u16()
        })
    });
    for send in sends.collect::<Vec<_>>() {
        assert_eq!(send.await.unwrap(), 202);
    }
    let sent = twilio.wait_for_created(SENDS, Duration::from_secs(60)).await;
    let mut arrivals: Vec<_> = sent.iter().map(|s| s.received_at).collect();
    arrivals.sort_unstable();
    arrivals
        .iter()
        .map(|at| (*at - arrivals[0]).to_std().unwrap())
        .collect()
}

on_both_databases!(a_channel_sends_no_faster_than_its_max_per_second, |db: Db| async move {
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[]).await;
    let platform = Platform::new(&server).await;
    SmsChannel::connect(&platform, &twilio, "sms", Some(RATE)).await;
    let span = span_of_a_burst(&[&server], &platform.key, &twilio).await;
    assert!(span >= least_span(), "{SENDS} sends at {RATE}/s took {span:?}");
    assert!(
        span < least_span() * 3,
        "the pace is kept, not exceeded many times over: {span:?}"
    );
});

/// Both replicas run deliveries (each runs one job at a time, the channel two across both), each send once,
/// and together they keep the channel's one pace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_keep_one_pace_per_channel() {
    let db = Db::postgres().await;
    let twilio = FakeTwilio::start().await;
    let env = [
        ("FRONTDESK_JOB_CONCURRENCY", "1"),
        ("FRONTDESK_JOB_LANE_CONCURRENCY", "2"),
    ];
    let first = sms::start(&db, &twilio, &env).await;
    let second = sms::start(&db, &twilio, &env).await;
    let platform = Platform::new(&first).await;
    SmsChannel::connect(&platform, &twilio, "sms", Some(RATE)).await;
    let arrivals = burst(&[&first, &second], &platform.key, &twilio).await;
    for server in [&first, &second] {
        let ran = server
            .metric(
                "frontdesk_job_runs_total",
                "kind=\"deliver_message\",class=\"interactive\",outcome=\"done\"",
            )
            .await;
        assert!(ran > 0.0, "each replica delivered some of the sends");
    }
    // However the replicas split the sends: four intervals of 250 ms, less timers' jitter.
    let shortest = shortest_four_intervals(&arrivals);
    let fell_back = [&first, &second].map(|server| server.logs().contains(FALLBACK_LOG));
    assert!(
        shortest >= Duration::from_millis(750),
        "five of the sends at {RATE}/s over two replicas arrived within {shortest:?}: {arrivals:?} \
         (replicas that fell back to their own pace: {fell_back:?})"
    );
    // Both claimed from one queue: no send ran twice.
    frontdesk_tests::admin::quiesce(&first).await;
    let texts: std::collections::HashSet<String> = twilio.sent().iter().map(|s| s.body().to_owned()).collect();
    assert_eq!(
        (twilio.arrived(), texts.len()),
        (SENDS, SENDS),
        "each send reached Twilio once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_redis_is_gone_keeps_the_pace_itself() {
    let db = Db::postgres().await;
    let mut redis = PrivateRedis::start();
    let twilio = FakeTwilio::start().await;
    let server = sms::start(&db, &twilio, &[("REDIS_URL", &redis.url)]).await;
    let platform = Platform::new(&server).await;
    SmsChannel::connect(&platform, &twilio, "sms", Some(RATE)).await;
    redis.stop();
    let span = span_of_a_burst(&[&server], &platform.key, &twilio).await;
    assert!(
        span >= least_span(),
        "{SENDS} sends at {RATE}/s without Redis took {span:?}"
    );
    assert!(server.logs().contains(FALLBACK_LOG), "the fallback is logged");
}
