//! What an idle visitor socket costs: 10,000 sockets (200 in a smoke run) opened on `serve` (SQLite, the
//! embedded default), one per session, and left idle; the growth of the server's resident memory divided by
//! the sockets. The same count of sockets on the bare axum server, configured as the edge configures
//! visitors' sockets, is the limit: what a socket costs with nothing of the service around it.

use std::{collections::BTreeMap, time::Duration};

use futures_util::StreamExt;

use super::{Site, socket_url};
use crate::{load::Shape, process::ServerProcess, scenarios::Setup};

pub const IDLE: &str = "webchat: 10,000 idle visitor sockets, serve (SQLite)";
/// Handshakes in flight at once while the sockets open.
const OPENING: usize = 256;
/// How long the sockets sit idle before the memory is read.
const SETTLE: Duration = Duration::from_secs(5);

/// Resident memory per idle socket, the service's and the limit's.
pub struct IdleSockets {
    pub sockets: usize,
    pub service_kib: f64,
    pub limit_kib: f64,
    pub service_cpu_while_idle: f64,
}

pub async fn run(setup: &Setup, shape: Shape) -> anyhow::Result<IdleSockets> {
    let count = if shape.smoke() { 200 } else { 10_000 };
    let bare = ServerProcess::spawn(&setup.bench, &["bare-server"], &BTreeMap::new(), 1)?;
    let addr = bare.http.expect("bare server address");
    let urls = vec![format!("ws://{addr}/ws"); count];
    let (limit_kib, _) = per_socket(&bare, urls).await?;
    drop(bare);

    let sqlite = setup.sqlite_database()?;
    let mut env = setup.env(&sqlite, false);
    super::crowd_budgets(&mut env);
    let serve = ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2)?;
    let site = Site::prepare(&serve, count).await?;
    eprintln!("webchat: {count} sessions started; opening their sockets");
    let urls = site.visitors.iter().map(|v| socket_url(site.http, &v.token)).collect();
    let (service_kib, service_cpu_while_idle) = per_socket(&serve, urls).await?;
    Ok(IdleSockets {
        sockets: count,
        service_kib,
        limit_kib,
        service_cpu_while_idle,
    })
}

/// Opens a socket to each URL, lets them sit idle, and reads the server's memory: KiB per socket, and the
/// CPU seconds the server spent while they sat idle.
async fn per_socket(server: &ServerProcess, urls: Vec<String>) -> anyhow::Result<(f64, f64)> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = server.rss_mib().0;
    let count = urls.len();
    let mut opening = futures_util::stream::iter(urls)
        .map(|url| async move { tokio_tungstenite::connect_async(url).await })
        .buffer_unordered(OPENING);
    let mut held = tokio::task::JoinSet::new();
    while let Some(opened) = opening.next().await {
        let (mut socket, _) = opened?;
        // Read (so the server's pings are answered), never write: idle.
        held.spawn(async move { while let Some(Ok(_)) = socket.next().await {} });
    }
    anyhow::ensure!(held.len() == count, "only {} sockets opened", held.len());
    let cpu = server.cpu_seconds();
    tokio::time::sleep(SETTLE).await;
    let after = server.rss_mib().0;
    let idle_cpu = server.cpu_seconds() - cpu;
    anyhow::ensure!(held.try_join_next().is_none(), "a socket closed while idle");
    held.abort_all();
    Ok(((after - before) * 1024.0 / count as f64, idle_cpu))
}
