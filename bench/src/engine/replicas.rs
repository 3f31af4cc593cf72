//! What replicas cost the database and how fast they wake, on one PostgreSQL (`frontdesk-bench replicas`):
//!
//! - idle cost: 1 and 8 `serve` replicas with nothing to do, the PostgreSQL server's CPU over the window as a
//!   share of one core (its floor is 0), now and with the engine as it was configured before wake-ups
//!   (50 ms polls, JIT on);
//! - wake: an API-only replica accepts a quiet tenant's sends (20 a second) while 4 worker replicas run
//!   them; accept to provider, which the workers reach only by being woken (no poll is due that soon).

use std::{collections::BTreeMap, time::Duration};

use super::{Engine, fairness};
use crate::{
    load::Shape,
    process::{ServerProcess, database_cpu_seconds},
    receiver,
    scenarios::{Setup, epoch_ms},
};

#[derive(clap::Args)]
pub struct ReplicasArgs {
    /// Seconds each idle figure is measured over.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
}

/// How idle replicas used to look for work: every 50 ms, with PostgreSQL compiling the scans it costs past
/// every threshold.
const POLLING: [(&str, &str); 1] = [("FRONTDESK_IDLE_POLL_INTERVAL", "50ms")];

pub async fn run(setup: &Setup, args: ReplicasArgs) -> anyhow::Result<()> {
    let window = Duration::from_secs(args.seconds);
    println!("Idle replicas: PostgreSQL's CPU as a share of one core over {window:?} (goal: 8 replicas under 5%)");
    for (label, polling) in [("now", false), ("50 ms polls, JIT on (before)", true)] {
        for replicas in [1, 8] {
            let share = idle_share(setup, replicas, polling, window).await?;
            println!("  {replicas} replicas, {label}: {:.1}% of a core", share * 100.0);
        }
    }
    let p99 = wake_p99(setup).await?;
    println!(
        "Wake: a quiet tenant's sends accepted on an API-only replica, run by 4 worker replicas: accept to \
         provider p99 {p99:.1} ms (goal: under 50 ms)"
    );
    Ok(())
}

/// PostgreSQL's CPU share of one core while `replicas` idle `serve` processes run for `window`.
async fn idle_share(setup: &Setup, replicas: usize, polling: bool, window: Duration) -> anyhow::Result<f64> {
    let mut database = setup.postgres_database().await?;
    if polling {
        database.push_str(if database.contains('?') { "&" } else { "?" });
        database.push_str("options=-c%20jit%3Don");
    }
    let mut env = setup.env(&database, false);
    if polling {
        env.extend(POLLING.map(|(k, v)| (k.to_owned(), v.to_owned())));
    }
    let mut running = Vec::with_capacity(replicas);
    for _ in 0..replicas {
        running.push(ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2)?);
    }
    // Past start-up (migrations, first claims, the listeners' connections).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = database_cpu_seconds();
    tokio::time::sleep(window).await;
    let spent = database_cpu_seconds() - before;
    drop(running);
    setup.drop_database(&database).await?;
    Ok(spent / window.as_secs_f64())
}

/// The p99 of accept to provider, in milliseconds, of 20 sends a second for 5 s accepted on an API-only
/// replica beside 4 worker replicas.
async fn wake_p99(setup: &Setup) -> anyhow::Result<f64> {
    let receiver = ServerProcess::spawn(&setup.bench, &["webhook-receiver"], &BTreeMap::new(), 1)?;
    let receiver_addr = receiver.http.expect("receiver address");
    let postgres = setup.postgres_database().await?;
    let mut env = setup.env(&postgres, true);
    env.insert("FRONTDESK_TWILIO_BASE_URL".into(), format!("http://{receiver_addr}"));
    env.insert("FRONTDESK_PUBLIC_URL".into(), super::PUBLIC_URL.into());
    let mut api_env = env.clone();
    api_env.insert("FRONTDESK_JOB_CONCURRENCY".into(), "0".into());
    let api = ServerProcess::spawn(&setup.frontdesk, &["serve"], &api_env, 2)?;
    let workers = (0..4)
        .map(|_| ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let quiet = Engine::prepare(&api, &postgres, 20).await?;
    // Idle first: every worker has looked for work and gone to sleep.
    tokio::time::sleep(Duration::from_secs(3)).await;
    receiver::reset(receiver_addr).await?;
    let shape = Shape {
        concurrency: 4,
        duration: Duration::from_secs(5),
        warmup: Duration::ZERO,
    };
    let started_ms = epoch_ms();
    let accepted = fairness::paced_sends(&quiet, shape, fairness::QUIET_PER_SECOND).await?;
    let receipts = receiver::receipts(receiver_addr, accepted.requests, started_ms).await?;
    quiet.db.close().await?;
    drop(workers);
    drop(api);
    setup.drop_database(&postgres).await?;
    Ok(receipts.latency_us.value_at_quantile(0.99) as f64 / 1000.0)
}
