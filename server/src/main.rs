//! `frontdesk`: one binary, four modes. `serve` (the default) runs core and edge in one process, the edge
//! calling the core in-process; `core` and `edge` run them apart; `migrate` applies schema migrations.

use std::{sync::Arc, time::Duration};

use clap::{Parser, Subcommand};
use frontdesk_edge::Transport;
use frontdesk_kernel::{shutdown::Shutdown, store, telemetry, telemetry::LogFormat};
use frontdesk_server::{
    app,
    config::{CoreConfig, EdgeListenConfig, UploadConfig},
    operator_cli::{self, AdminArgs},
};
use tokio::net::TcpListener;

/// glibc's malloc took about 15% of the service's CPU on list answers; mimalloc serves the many small,
/// short-lived allocations of a request far more cheaply (docs/benchmarks/api-and-keys.md, "Deals list").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
        #[command(flatten)]
        uploads: UploadConfig,
    },
    /// Operator commands over the admin gRPC service (needs FRONTDESK_ADMIN_TOKEN).
    Admin(AdminArgs),
    /// Internal: extract one document read on stdin (the knowledge import's child process).
    #[command(name = "extract-document", hide = true)]
    ExtractDocument {
        format: String,
        memory_bytes: u64,
        /// The document's name, after `--`: a name that starts with `-` is no flag.
        #[arg(last = true)]
        title: String,
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
    // The document extractor's child process: no runtime, no logs, one answer on stdout.
    if let Some(Command::ExtractDocument {
        format,
        memory_bytes,
        title,
    }) = &cli.command
    {
        return frontdesk_domain::knowledge::import::documents::child_main(format, title, *memory_bytes);
    }
    let command = match cli.command {
        Some(command) => command,
        // No subcommand: `serve`, with its settings from the environment and defaults.
        None => match Cli::parse_from(["frontdesk", "serve"]).command {
            Some(command) => command,
            None => unreachable!("`serve` parses as a subcommand"),
        },
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("frontdesk: cannot start the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // The span exporter batches on the runtime: it starts, and at the end flushes, inside it.
    let _inside = runtime.enter();
    let traces = match telemetry::init(cli.log_format) {
        Ok(traces) => traces,
        Err(err) => {
            eprintln!("frontdesk: cannot export traces: {err:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let ended = runtime.block_on(run(command));
    traces.shutdown();
    match ended {
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
            let app::Core {
                routes,
                db,
                dispatcher,
                jobs,
                live,
            } = app::build_core(&core).await?;
            close_sockets_on(shutdown.clone(), live);
            app::bootstrap_first_account(&db, &core.database_url).await?;
            let router = frontdesk_edge::router(
                Transport::in_process(routes.clone()),
                metrics(),
                edge_limits(&edge, core.uploads),
            )?;
            release_start_up_memory();
            let grpc_listener = TcpListener::bind(core.grpc_addr).await?;
            let http_listener = TcpListener::bind(edge.http_addr).await?;
            let deliveries = dispatcher.spawn(shutdown.clone())?;
            let workers = jobs.spawn(shutdown.clone())?;
            tokio::try_join!(
                serve_grpc(routes, grpc_listener, shutdown.clone().wait()),
                frontdesk_edge::serve(router, http_listener, http_protocol(&edge), shutdown.wait()),
            )?;
            let _ = tokio::join!(deliveries, workers);
        }
        Command::Core { core } => {
            let app::Core {
                routes,
                dispatcher,
                jobs,
                live,
                ..
            } = app::build_core(&core).await?;
            close_sockets_on(shutdown.clone(), live);
            let listener = TcpListener::bind(core.grpc_addr).await?;
            let deliveries = dispatcher.spawn(shutdown.clone())?;
            let workers = jobs.spawn(shutdown.clone())?;
            serve_grpc(routes, listener, shutdown.wait()).await?;
            let _ = tokio::join!(deliveries, workers);
        }
        Command::Edge {
            core_url,
            edge,
            uploads,
        } => {
            let router = frontdesk_edge::router(
                Transport::connect_lazy(&core_url)?,
                metrics(),
                edge_limits(&edge, uploads),
            )?;
            release_start_up_memory();
            let listener = TcpListener::bind(edge.http_addr).await?;
            frontdesk_edge::serve(router, listener, http_protocol(&edge), shutdown.wait()).await?;
        }
        Command::Admin(args) => operator_cli::run(args).await?,
        Command::ExtractDocument { .. } => anyhow::bail!("extract-document runs before the runtime starts"),
        Command::Migrate { database_url } => {
            store::migrate_at(&database_url).await?;
            tracing::info!(database = store::redact(&database_url), "migrations applied");
        }
    }
    Ok(())
}

/// Hands back to the system the memory start-up needed only once (the OpenAPI document is built as a tree of
/// values some megabytes large, then kept as its bytes): mimalloc purges freed pages only on later allocations
/// of the same thread, so an idle replica would otherwise keep them resident.
fn release_start_up_memory() {
    // SAFETY: `mi_collect` takes no pointers; it only returns this thread's free pages to the system.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

/// When the process stops, its web chat sockets are closed with 1012 (their widgets reconnect to another
/// replica, or to this one once it is back), so that the servers' drains do not wait for them.
fn close_sockets_on(shutdown: Shutdown, live: frontdesk_domain::webchat::live::Live) {
    tokio::spawn(async move {
        shutdown.wait().await;
        live.close_all(
            frontdesk_domain::webchat::live::close::RESTART,
            "the server is restarting; reconnect",
        );
    });
}

/// Installs the process's Prometheus recorder and returns what renders it for `GET /metrics`.
/// The edge's limits as its knobs set them.
fn edge_limits(edge: &EdgeListenConfig, uploads: UploadConfig) -> frontdesk_edge::Limits {
    frontdesk_edge::Limits {
        call_timeout: edge.request_timeout,
        max_upload_bytes: uploads.max_bytes(),
        body_read_timeout: edge.body_read_timeout,
        body_memory_bytes: usize::try_from(edge.body_memory_mb)
            .unwrap_or(usize::MAX)
            .saturating_mul(1024 * 1024),
        webchat_send_timeout: edge.webchat_send_timeout,
    }
}

fn http_protocol(edge: &EdgeListenConfig) -> frontdesk_edge::Protocol {
    frontdesk_edge::Protocol::Http(frontdesk_edge::ServeOptions {
        header_timeout: edge.header_timeout,
        trusted_proxy_hops: edge.trusted_proxy_hops as usize,
    })
}

/// Serves the core's gRPC routes on `listener` until `shutdown` resolves, then drains in-flight calls.
async fn serve_grpc(
    routes: tonic::service::Routes,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    frontdesk_edge::serve(
        routes.into_axum_router(),
        listener,
        frontdesk_edge::Protocol::Grpc,
        shutdown,
    )
    .await
}

fn metrics() -> Option<frontdesk_edge::MetricsRender> {
    let buckets = [
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    ];
    let builder = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets(&buckets)
        .ok()?;
    let handle = match builder.install_recorder() {
        Ok(handle) => handle,
        Err(err) => {
            tracing::warn!(error = %err, "metrics disabled");
            return None;
        }
    };
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Some(Arc::new(move || handle.render()))
}

#[cfg(test)]
mod tests {
    /// Every subcommand's arguments are well formed (unique names, no clashing flags): clap checks them
    /// only when a command is parsed, so a clash would otherwise surface as a panic at start-up.
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
