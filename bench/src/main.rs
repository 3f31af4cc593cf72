//! `frontdesk-bench`: every hot path of the service measured the same way, against the physical limit of this
//! stack on the same machine, in one run. `frontdesk-bench` (or `run`) prints the results table and the
//! targets; `--smoke` runs a few seconds at tiny concurrency (the test suite does, so the harness cannot rot).

mod answers;
mod bare;
mod daily;
mod drill;
mod engine;
mod faults;
mod import_drill;
mod knowledge;
mod large;
mod load;
mod process;
mod receiver;
mod report;
mod scenarios;
mod webchat;

use std::{path::PathBuf, time::Duration};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "frontdesk-bench",
    about = "Load scenarios against the bare-axum limit, one run"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// The baseline server (started by `run`; not for direct use).
    BareServer {
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: String,
        /// Redis for `GET /limited`, the bare answer after the service's rate-limit call.
        #[arg(long)]
        redis: Option<String>,
    },
    /// The receiver of the fan-out and pipeline scenarios, webhooks and Twilio's Messages API (started by `run`;
    /// not for direct use).
    WebhookReceiver {
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: String,
    },
    /// SIGKILLs `serve` (or `--fault`: Redis or PostgreSQL down, the provider failing) while clients create
    /// deals with a webhook subscription (`--path deals`) or send 10,000 messages to an sms channel (`--path
    /// sends`); reports what was lost, delayed and duplicated, and how long the service took to recover.
    CrashDrill(drill::DrillArgs),
    /// The full drill: every `crash-drill` path through every fault it can have, on PostgreSQL and Redis and
    /// on SQLite, each with its defaults; ends with one row per drill and fails if any drill did.
    Drills,
    /// The local provider's decision over 10,000 FAQs and the knowledge gaps of 100,000 handed-off questions,
    /// each against its floor in the same run.
    Answers(answers::AnswersArgs),
    /// Contact search and conversation lists on an account of 1,000,000 contacts and 10,000,000 messages,
    /// beside an account a tenth its size.
    LargeAccount(large::LargeArgs),
    /// What idle replicas cost PostgreSQL (1 and 8, now and polling as before) and how fast 4 worker
    /// replicas are woken for sends accepted on an API-only replica.
    Replicas(engine::ReplicasArgs),
    /// The embedding model's speed in this process, as JSON (started by `run` on one core; not for direct use).
    EmbedSpeed {
        #[arg(long)]
        model: PathBuf,
        #[arg(long, default_value_t = 256)]
        sections: usize,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Concurrent connections (HTTP) or in-flight calls (gRPC).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Measured seconds per scenario.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// A few seconds at concurrency 2: checks the harness, measures nothing worth recording.
    #[arg(long)]
    smoke: bool,
    /// Run only the scenarios whose name contains this text, or one of its `|`-separated parts (the limit always
    /// runs, as the baseline).
    #[arg(long)]
    only: Option<String>,
    /// The `frontdesk` binary; default: next to this one.
    #[arg(long)]
    frontdesk: Option<PathBuf>,
    /// A previous build's `frontdesk`: the webhook fan-out and the send pipeline's capacity are then also
    /// measured for both builds, alternately, in this run (`--only compared` runs just those).
    #[arg(long)]
    previous: Option<PathBuf>,
    /// Events per second for the webhook fan-out at half capacity (default: a tenth of the deliveries per
    /// second the backlog just measured, so half of them); a fixed pace makes runs of different builds alike.
    #[arg(long)]
    fan_out_pace: Option<f64>,
    /// PostgreSQL server (a database is created per run); a query after it stays, e.g.
    /// `postgres://postgres@localhost?host=/var/run/postgresql` for the Unix socket.
    #[arg(
        long,
        env = "FRONTDESK_TEST_POSTGRES",
        default_value = "postgres://postgres@127.0.0.1:5432"
    )]
    postgres: String,
    /// Redis server.
    #[arg(long, env = "FRONTDESK_TEST_REDIS", default_value = "redis://127.0.0.1:6379")]
    redis: String,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match cli.command {
        Some(Command::BareServer { addr, redis }) => runtime.block_on(bare::serve(&addr, redis.as_deref())),
        Some(Command::WebhookReceiver { addr }) => runtime.block_on(receiver::serve(&addr)),
        Some(Command::EmbedSpeed { model, sections }) => knowledge::embed_speed(&model, sections),
        Some(Command::Answers(args)) => {
            runtime.block_on(with_setup(&cli.run, async |setup| answers::run(setup, args).await))
        }
        Some(Command::Replicas(args)) => {
            runtime.block_on(with_setup(&cli.run, async |setup| engine::replicas(setup, args).await))
        }
        Some(Command::LargeAccount(args)) => {
            runtime.block_on(with_setup(&cli.run, async |setup| large::run(setup, args).await))
        }
        Some(Command::CrashDrill(drill)) => runtime.block_on(with_setup(&cli.run, async |setup| {
            drill::crash_drill(setup, drill).await
        })),
        Some(Command::Drills) => runtime.block_on(with_setup(&cli.run, async |setup| drill::every_drill(setup).await)),
        None => runtime.block_on(run(cli.run)),
    }
}

/// Runs `work` with the run's setup, then removes the run's scratch directory.
async fn with_setup(
    args: &RunArgs,
    work: impl AsyncFnOnce(&scenarios::Setup) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let (setup, work_dir) = setup(args)?;
    let outcome = work(&setup).await;
    let _ = std::fs::remove_dir_all(&work_dir);
    outcome
}

/// Where the binaries, the database servers and the run's scratch directory are.
fn setup(args: &RunArgs) -> anyhow::Result<(scenarios::Setup, PathBuf)> {
    let bench = std::env::current_exe()?;
    let frontdesk = args
        .frontdesk
        .clone()
        .unwrap_or_else(|| bench.parent().map(|d| d.join("frontdesk")).unwrap_or_default());
    anyhow::ensure!(
        frontdesk.exists(),
        "no frontdesk binary at {} (build it first)",
        frontdesk.display()
    );
    let work_dir = std::env::temp_dir().join(format!("frontdesk-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work_dir)?;
    if let Some(previous) = &args.previous {
        anyhow::ensure!(
            previous.exists(),
            "no previous frontdesk binary at {}",
            previous.display()
        );
    }
    let setup = scenarios::Setup {
        frontdesk,
        previous: args.previous.clone(),
        bench,
        postgres: args.postgres.clone(),
        redis: args.redis.clone(),
        work_dir: work_dir.clone(),
        traces: None,
        fan_out_pace: args.fan_out_pace,
    };
    Ok((setup, work_dir))
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    process::progress("started");
    let (setup, work_dir) = setup(&args)?;
    let shape = if args.smoke {
        // Long enough that a request started in the window exists even when the first ones of a cold debug
        // server on a busy machine take most of a second (the window counts requests started in it).
        load::Shape {
            concurrency: 2,
            duration: Duration::from_millis(1_500),
            warmup: Duration::from_millis(200),
        }
    } else {
        load::Shape {
            concurrency: args.concurrency,
            duration: Duration::from_secs(args.seconds),
            warmup: Duration::from_secs(2).min(Duration::from_secs(args.seconds) / 5),
        }
    };
    println!(
        "frontdesk-bench: {} concurrent, {:?} per scenario (+{:?} warm-up), {} cores",
        shape.concurrency,
        shape.duration,
        shape.warmup,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let outcome = scenarios::run_all(&setup, shape, args.only.as_deref()).await;
    let _ = std::fs::remove_dir_all(&work_dir);
    let (results, footprint) = outcome?;
    println!("\n{}", report::table(&results));
    println!("{}", report::targets(&results, &footprint));
    if let Some(knowledge) = &footprint.knowledge {
        println!("{}", knowledge::targets(&results, knowledge));
    }
    if let Some(plan) = &footprint.deals_plan {
        println!("Plan of the deals list query:\n{plan}");
    }
    if let Some(plan) = &footprint.daily_plan {
        println!("Plan of the daily summary's message count:\n{plan}");
    }
    Ok(())
}
