//! `frontdesk`: one binary, four modes. `serve` (the default) runs core and edge in one process, the edge
//! calling the core in-process; `core` and `edge` run them apart; `migrate` applies schema migrations.

use clap::{Parser, Subcommand};
use frontdesk_core::{
    app,
    config::{CoreConfig, EdgeListenConfig, LogFormat},
    grpc,
    shutdown::Shutdown,
    store, telemetry,
};
use frontdesk_edge::Transport;
use tokio::net::TcpListener;

#[derive(Parser)]
#[command(
    name = "frontdesk",
    version,
    about = "Front Desk: a self-hostable AI front desk for chat channels"
)]
struct Cli {
    /// Log output: `text` or `json` (one object per line). The filter is `RUST_LOG` (default `info`).
    #[arg(long, env = "FRONTDESK_LOG_FORMAT", default_value = "text", global = true)]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Core and REST edge in one process (the default): gRPC on FRONTDESK_GRPC_ADDR, REST on FRONTDESK_HTTP_ADDR.
    Serve {
        #[command(flatten)]
        core: CoreConfig,
        #[command(flatten)]
        edge: EdgeListenConfig,
    },
    /// The gRPC core alone.
    Core {
        #[command(flatten)]
        core: CoreConfig,
    },
    /// The REST edge alone, calling a core over gRPC.
    Edge {
        /// gRPC address of the core.
        #[arg(long = "core", env = "FRONTDESK_CORE_URL", default_value = "http://127.0.0.1:50051")]
        core_url: String,
        #[command(flatten)]
        edge: EdgeListenConfig,
    },
    /// Apply pending database migrations and exit.
    Migrate {
        /// SQLite file or PostgreSQL URL.
        #[arg(long, env = "DATABASE_URL", default_value = "sqlite://frontdesk.db?mode=rwc")]
        database_url: String,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let command = match cli.command {
        Some(command) => command,
        // No subcommand: `serve`, with its settings from the environment and defaults.
        None => match Cli::parse_from(["frontdesk", "serve"]).command {
            Some(command) => command,
            None => unreachable!("`serve` parses as a subcommand"),
        },
    };
    telemetry::init(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("cannot start the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(command)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = format!("{err:#}"), "frontdesk stopped");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    let shutdown = Shutdown::on_signals();
    match command {
        Command::Serve { core, edge } => {
            let routes = app::build_core(&core).await?;
            let router = frontdesk_edge::router(Transport::in_process(routes.clone()))?;
            let grpc_listener = TcpListener::bind(core.grpc_addr).await?;
            let http_listener = TcpListener::bind(edge.http_addr).await?;
            tokio::try_join!(grpc::serve(routes, grpc_listener, shutdown.clone().wait()), async {
                Ok(frontdesk_edge::serve(router, http_listener, shutdown.wait()).await?)
            },)?;
        }
        Command::Core { core } => {
            let routes = app::build_core(&core).await?;
            let listener = TcpListener::bind(core.grpc_addr).await?;
            grpc::serve(routes, listener, shutdown.wait()).await?;
        }
        Command::Edge { core_url, edge } => {
            let router = frontdesk_edge::router(Transport::connect_lazy(&core_url)?)?;
            let listener = TcpListener::bind(edge.http_addr).await?;
            frontdesk_edge::serve(router, listener, shutdown.wait()).await?;
        }
        Command::Migrate { database_url } => {
            let db = store::connect(&database_url, 1).await?;
            store::migrate(&db).await?;
            tracing::info!(database = store::redact(&database_url), "migrations applied");
        }
    }
    Ok(())
}
