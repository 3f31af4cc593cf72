//! One replica at a time does the database's housekeeping (the retention of jobs, deliveries and events, and
//! the queue gauges), however many run: on PostgreSQL the leader is the replica whose own connection holds
//! a session advisory lock, which the database frees the moment that connection or its process dies, so
//! another replica takes over within a turn. Each replica tries for the lock, and checks that it still holds
//! it, every few seconds. On SQLite every process leads (replicas share one machine and one file, and the
//! housekeeping's statements are safe to run side by side).

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use sea_orm::{
    DatabaseConnection, DbBackend,
    sqlx::{Connection, PgConnection, Row},
};

/// The advisory lock's number ("FDLEADER" in ASCII).
const LOCK: i64 = 0x4644_4c45_4144_4552;
/// How often the lock is tried for, and held, checked.
const TURN: Duration = Duration::from_secs(5);

/// Whether this process leads now.
#[derive(Clone)]
pub struct Leader(Arc<AtomicBool>);

impl Leader {
    /// Starts taking part in the election on PostgreSQL (`url` is the database's); on SQLite, leads.
    pub fn start(db: &DatabaseConnection, url: &str) -> Self {
        if db.get_database_backend() != DbBackend::Postgres {
            return Self::always();
        }
        let leads = Arc::new(AtomicBool::new(false));
        tokio::spawn(elect_loop(url.to_owned(), leads.clone()));
        Self(leads)
    }

    /// A process that always leads (SQLite, tests).
    pub fn always() -> Self {
        Self(Arc::new(AtomicBool::new(true)))
    }

    pub fn leads(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

async fn elect_loop(url: String, leads: Arc<AtomicBool>) {
    let mut held: Option<PgConnection> = None;
    loop {
        let holds = match held.as_mut() {
            // Still connected, the lock is still this session's.
            Some(connection) => connection.ping().await.is_ok(),
            None => match try_lock(&url).await {
                Ok(Some(connection)) => {
                    held = Some(connection);
                    true
                }
                Ok(None) => false,
                Err(err) => {
                    tracing::debug!(error = %err, "cannot take part in the housekeeping election; trying again");
                    false
                }
            },
        };
        if !holds {
            held = None;
        }
        if holds != leads.swap(holds, Ordering::Relaxed) {
            tracing::info!(leads = holds, "housekeeping leadership changed");
        }
        tokio::time::sleep(TURN).await;
    }
}

/// A connection holding the lock, or `None` when another replica's does.
async fn try_lock(url: &str) -> Result<Option<PgConnection>, sea_orm::sqlx::Error> {
    let mut connection = PgConnection::connect(url).await?;
    let row = sea_orm::sqlx::query("SELECT pg_try_advisory_lock($1)")
        .bind(LOCK)
        .fetch_one(&mut connection)
        .await?;
    Ok(row.try_get::<bool, _>(0)?.then_some(connection))
}
