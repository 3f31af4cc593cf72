//! A broadcast to 100,000 contacts by tag (1,000 in a smoke run), on a channel paced above the pipeline's
//! capacity, against the send pipeline's capacity measured just before on the same `serve`: how long the
//! audience takes to expand into recipients (send_at to the last recipient written), how fast the
//! broadcast reaches the Twilio receiver (send_at to its last receipt), and, while it drains, another
//! tenant's sends and the broadcasting tenant's own API sends (10 a second each), accept to provider, and
//! the broadcasting tenant's AI replies (2 questions a second to an agent of FAQs, the local model, no
//! debounce), question stored to reply taken by the provider.

use std::{net::SocketAddr, time::Duration};

use frontdesk_api::v1::{Audience, CreateBroadcastRequest, broadcasts_client::BroadcastsClient};
use sea_orm::{ConnectionTrait, Statement};
use tonic::{metadata::MetadataValue, transport::Channel};

use super::{Engine, fairness, keyed, pipeline, replies};
use crate::{
    load::{self, Outcome, Pace, Shape},
    process::ServerProcess,
    receiver,
    scenarios::{Measured, epoch_ms, measure},
};

pub const BASELINE: &str =
    "engine: pipeline capacity, the broadcast's baseline (API sends, first accept to last receipt)";
pub const EXPANSION: &str = "engine: broadcast audience of 100,000 contacts by tag, send_at to every recipient written";
pub const RATE: &str = "engine: broadcast of 100,000 recipients, send_at to the last receipt at the Twilio receiver";
pub const BESIDE: &str = "engine: another tenant's and the broadcasting tenant's own API sends (10/s each), accept to \
     provider, while the broadcast drains";
pub const BESIDE_REPLIES: &str = "engine: the broadcasting tenant's AI replies (2 questions/s, local model, debounce 0), \
     question stored to reply at the provider, while the broadcast drains";

/// The tag the audience is.
const TAG: &str = "bench_audience";

pub async fn run(
    busy: &Engine,
    quiet: &Engine,
    serve: &ServerProcess,
    receiver_addr: SocketAddr,
    postgres: &str,
    shape: Shape,
) -> anyhow::Result<Vec<Measured>> {
    let smoke = shape.smoke();
    let audience: u64 = if smoke { 1_000 } else { 100_000 };
    let baseline = pipeline::capacity(busy, serve, receiver_addr, shape, BASELINE).await?;
    busy.drained().await?;
    tagged_contacts(busy, audience).await?;
    replies::desk(busy, postgres, if smoke { 300 } else { 1_000 }).await?;
    let grpc = Channel::from_shared(format!("http://{}", busy.grpc))?.connect().await?;
    let key: MetadataValue<_> = busy.key.parse()?;
    let agent = busy.plain_agent("Offers").await?;
    receiver::reset(receiver_addr).await?;
    let started_ms = epoch_ms();
    let broadcast = BroadcastsClient::new(grpc)
        .create_broadcast(keyed(
            &key,
            CreateBroadcastRequest {
                name: "bench".into(),
                agent_id: agent,
                channel: "sms".into(),
                audience: Some(Audience {
                    tags: vec![TAG.into()],
                    ..Default::default()
                }),
                opener: "Hi {{first_name}}, 20% off this week.".into(),
                send_at: "now".into(),
                template: None,
            },
        ))
        .await?
        .into_inner()
        .broadcast
        .map(|b| b.id)
        .unwrap_or_default();
    let expansion = measure(EXPANSION, &[serve], async {
        let expanded = expanded(busy, &broadcast, audience).await?;
        Ok(Outcome {
            requests: audience,
            elapsed: Duration::from_millis(expanded.saturating_sub(started_ms)),
            latency_us: hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3)?,
            errors: Default::default(),
        })
    })
    .await?;
    // The drain, timed from send_at to the broadcast's last receipt; the interactive sends start once it
    // flows, and the receiver times them alone (only their texts carry their due time).
    let mut interactive = None;
    let mut replied = None;
    let rate = measure(RATE, &[serve], async {
        while receiver::count(receiver_addr).await? < audience / 20 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let paced = Shape {
            concurrency: 4,
            duration: shape.duration.min(Duration::from_secs(5)),
            warmup: Duration::ZERO,
        };
        let asked_at = chrono::Utc::now();
        let (other, own, asked) = tokio::try_join!(
            fairness::paced_sends(quiet, paced, 10.0),
            fairness::paced_sends(busy, paced, 10.0),
            load::http_sends(
                busy.http,
                replies::questions(busy),
                Pace::Open { per_second: 2.0 },
                paced
            )
        )?;
        anyhow::ensure!(asked.error_count() == 0, "questions refused: {:?}", asked.errors);
        let answered = replies_settled(busy, asked_at).await?;
        let left = audience.saturating_sub(receiver::count(receiver_addr).await?);
        eprintln!(
            "broadcast: {} other-tenant and {} own sends and {} questions ({answered} replies sent) while it \
             drained; {left} of {audience} broadcast sends still undelivered after them",
            other.requests, own.requests, asked.requests
        );
        let sent = other.requests + own.requests;
        let all = receiver::receipts(receiver_addr, audience + sent + answered, started_ms).await?;
        replied = Some(replies::reply_latency(postgres, asked_at, "sent_at", asked).await?);
        interactive = Some(Outcome {
            requests: sent,
            elapsed: other.elapsed.max(own.elapsed),
            latency_us: all.latency_us.clone(),
            errors: Default::default(),
        });
        Ok(Outcome {
            requests: audience,
            latency_us: hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3)?,
            ..all
        })
    })
    .await?;
    // The same run's costs: the interactive sends and the replies are a part of it.
    let part_of_rate = |name, outcome: Option<Outcome>| {
        Ok::<_, anyhow::Error>(Measured {
            name,
            outcome: outcome.ok_or_else(|| anyhow::anyhow!("`{name}` was not timed"))?,
            server_cpu: rate.server_cpu,
            database_cpu: rate.database_cpu,
            machine_cpu: rate.machine_cpu,
            busy: rate.busy,
            server_peak_rss: rate.server_peak_rss,
        })
    };
    let beside = part_of_rate(BESIDE, interactive)?;
    let replies = part_of_rate(BESIDE_REPLIES, replied)?;
    eprintln!(
        "broadcast: {audience} recipients expanded in {:.2} s, sent at {:.0}/s against the pipeline's {:.0}/s ({:.0}%)",
        expansion.outcome.elapsed.as_secs_f64(),
        rate.outcome.per_second(),
        baseline.outcome.per_second(),
        rate.outcome.per_second() / baseline.outcome.per_second().max(1e-9) * 100.0
    );
    Ok(vec![baseline, expansion, rate, beside, replies])
}

/// `count` contacts of the busy tenant carrying the audience's tag, written in one statement (their phones,
/// `+1999...`, are no other scenario's).
async fn tagged_contacts(busy: &Engine, count: u64) -> anyhow::Result<()> {
    let sql = format!(
        "INSERT INTO contacts (id, account_id, name, phone, email, tags, attributes, opted_out, recap, recap_at, \
         created_at, updated_at) SELECT 'ct_bench' || lpad(n::text, 8, '0'), c.account_id, 'Customer ' || n, \
         '+1999' || lpad(n::text, 7, '0'), NULL, '[\"{TAG}\"]', '{{}}', false, '', NULL, now(), now() \
         FROM generate_series(1, {count}) AS n, (SELECT account_id FROM channels WHERE id = $1) AS c"
    );
    let statement =
        Statement::from_sql_and_values(busy.db.get_database_backend(), sql, [busy.channel_id.clone().into()]);
    busy.db.execute_raw(statement).await?;
    busy.db.execute_unprepared("VACUUM ANALYZE contacts").await?;
    Ok(())
}

/// Waits (at most a minute) until the AI replies to questions asked since `since` are decided and out of
/// `queued`; how many went to the provider.
async fn replies_settled(busy: &Engine, since: chrono::DateTime<chrono::Utc>) -> anyhow::Result<u64> {
    let started = std::time::Instant::now();
    loop {
        let waiting = busy
            .count(
                "SELECT (SELECT count(*) FROM jobs WHERE kind = 'agent_reply' AND status = 'pending') + \
                 (SELECT count(*) FROM messages WHERE author = 'agent' AND status = 'queued' AND created_at >= $1)",
                vec![since.into()],
            )
            .await?;
        if waiting == 0 {
            let sent = busy
                .count(
                    "SELECT count(*) FROM messages WHERE author = 'agent' AND sent_at IS NOT NULL AND created_at >= $1",
                    vec![since.into()],
                )
                .await?;
            return Ok(u64::try_from(sent)?);
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(60),
            "the AI replies never settled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// When (epoch ms) broadcast `id` had all `count` recipients written and its expansion done.
async fn expanded(busy: &Engine, id: &str, count: u64) -> anyhow::Result<u64> {
    let started = std::time::Instant::now();
    loop {
        let total = busy
            .count(
                "SELECT total FROM broadcasts WHERE id = $1 AND expanded",
                vec![id.to_owned().into()],
            )
            .await?;
        if total >= count as i64 {
            return Ok(epoch_ms());
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "the audience never expanded"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
