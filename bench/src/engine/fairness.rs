//! Fairness across tenants: a quiet tenant's sends, paced at 20 a second, timed accept to provider (the
//! Twilio receiver reads each send's due time from its text), first on an idle engine, then beside 20,000
//! other tenants' queues (a job each, due in an hour, written straight to the table) while another
//! tenant's backlog of 20,000 sends (200 in a smoke run), accepted as fast as the service takes them, drains
//! at the pipeline's full rate on the same `serve`. The goal is that the backlog and the queues barely move
//! the quiet tenant's p99 (under 1 s).

use std::{net::SocketAddr, time::Duration};

use bytes::Bytes;
use sea_orm::ConnectionTrait;

use super::Engine;
use crate::{
    load::{self, Outcome, Pace, Requests, Shape},
    process::ServerProcess,
    receiver,
    scenarios::{Measured, epoch_ms, measure},
};

pub const QUIET_ALONE: &str = "engine: a quiet tenant's sends (20/s), accept to provider, idle engine";
pub const QUIET_BESIDE_BACKLOG: &str = "engine: a quiet tenant's sends (20/s), accept to provider, beside 20,000 other \
     tenants' queues and another tenant's 20,000-send backlog";

/// The kind of the other tenants' jobs: no replica runs it, and they are due in an hour.
const LATER_KIND: &str = "bench_later";

/// The quiet tenant's pace.
pub(super) const QUIET_PER_SECOND: f64 = 20.0;

pub async fn run(
    busy: &Engine,
    quiet: &Engine,
    serve: &ServerProcess,
    receiver_addr: SocketAddr,
    shape: Shape,
) -> anyhow::Result<Vec<Measured>> {
    let backlog: u64 = if shape.smoke() { 200 } else { 20_000 };
    let quiet_shape = Shape {
        concurrency: 4,
        duration: shape.duration.min(Duration::from_secs(5)),
        warmup: Duration::ZERO,
    };
    receiver::reset(receiver_addr).await?;
    let alone = measure(QUIET_ALONE, &[serve], async {
        let started_ms = epoch_ms();
        let accepted = paced_sends(quiet, quiet_shape, QUIET_PER_SECOND).await?;
        receiver::receipts(receiver_addr, accepted.requests, started_ms).await
    })
    .await?;
    busy.drained().await?;
    other_tenants_queues(busy, backlog).await?;
    receiver::reset(receiver_addr).await?;
    let beside = measure(QUIET_BESIDE_BACKLOG, &[serve], async {
        let started_ms = epoch_ms();
        // The backlog is accepted by closed-loop senders; the quiet sends start once it flows.
        let bounded = Shape {
            duration: Duration::from_secs(600),
            warmup: Duration::ZERO,
            ..shape
        };
        let sends = backlog_sends(busy, backlog);
        let (http, flowing) = (busy.http, backlog / 20);
        let accepting = tokio::spawn(async move { load::http_sends(http, sends, Pace::Closed, bounded).await });
        while receiver::count(receiver_addr).await? < flowing {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let accepted = paced_sends(quiet, quiet_shape, QUIET_PER_SECOND).await?;
        let left = backlog.saturating_sub(receiver::count(receiver_addr).await?);
        let backlog_accepted = accepting.await??;
        anyhow::ensure!(backlog_accepted.error_count() == 0, "backlog sends refused");
        eprintln!(
            "fairness: {} quiet sends while the backlog drained; {left} of {backlog} backlog sends still undelivered \
             when the last quiet send was made",
            accepted.requests
        );
        receiver::receipts(receiver_addr, accepted.requests + backlog, started_ms).await
    })
    .await?;
    busy.drained().await?;
    // The planted jobs go with the ready queues and wakes they made, so the next scenario starts on an
    // engine that holds only its own work.
    for table in ["jobs", "job_queues", "job_queue_wakes"] {
        busy.db
            .execute_unprepared(&format!("DELETE FROM {table} WHERE kind = '{LATER_KIND}'"))
            .await?;
    }
    Ok(vec![alone, beside])
}

/// `count` other tenants' queues, each one job due in an hour, written in one statement.
async fn other_tenants_queues(busy: &Engine, count: u64) -> anyhow::Result<()> {
    let sql = format!(
        "INSERT INTO jobs (id, account_id, kind, class, lane, payload, status, attempts, max_attempts, run_at_ms, \
         created_at, updated_at) SELECT 'job_later_' || n, 'acc_later_' || n, '{LATER_KIND}', 0, 'ch_later_' || n, \
         '{{}}', 'pending', 0, 3, (EXTRACT(EPOCH FROM now()) * 1000)::int8 + 3600000, now(), now() \
         FROM generate_series(1, {count}) AS n"
    );
    busy.db.execute_unprepared(&sql).await?;
    Ok(())
}

/// A tenant's sends, `per_second`, each text its due time (`t=<epoch ms>`), over its contacts.
pub(super) async fn paced_sends(tenant: &Engine, shape: Shape, per_second: f64) -> anyhow::Result<Outcome> {
    let made: Vec<_> = tenant.contact_ids.iter().map(|id| tenant.send(id, "")).collect();
    let requests = Requests::each(move |turn| {
        let mut request = made[(turn.number % made.len() as u64) as usize].clone();
        let due_ms = turn
            .due
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        request.body = Bytes::from(format!(r#"{{"text":"t={due_ms}"}}"#));
        Some(request)
    });
    let pace = Pace::Open { per_second };
    let accepted = load::http_sends(tenant.http, requests, pace, shape).await?;
    anyhow::ensure!(
        accepted.error_count() == 0,
        "paced sends refused: {:?}",
        accepted.errors
    );
    Ok(accepted)
}

/// `count` sends of the busy tenant over its contacts, with no time in their text (the receiver times only
/// the quiet ones).
fn backlog_sends(busy: &Engine, count: u64) -> Requests {
    let made: Vec<_> = busy.contact_ids.iter().map(|id| busy.send(id, "backlog")).collect();
    Requests::each(move |turn| (turn.number < count).then(|| made[(turn.number % made.len() as u64) as usize].clone()))
}
