//! Persistence: the SeaORM connection (SQLite or PostgreSQL by URL), migrations, and the entities.

pub mod entities;
pub mod settings;

use std::time::Duration;

use frontdesk_migrations::{Migrator, MigratorTrait};
use sea_orm::{ConnectOptions, Database, DatabaseConnection};

/// Opens a pool on `url`. Start-up needs the database (migrations run first), so an unreachable database at
/// start is an error that names it; an outage after start is reported by the health check instead.
pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<DatabaseConnection> {
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .max_connections(max_connections)
        .min_connections(0)
        .connect_timeout(Duration::from_secs(5))
        .acquire_timeout(Duration::from_secs(5))
        .sqlx_logging(false);
    Database::connect(options)
        .await
        .map_err(|e| anyhow::anyhow!("cannot open database {}: {e}", redact(url)))
}

/// Applies every pending migration.
pub async fn migrate(db: &DatabaseConnection) -> anyhow::Result<()> {
    Migrator::up(db, None)
        .await
        .map_err(|e| anyhow::anyhow!("migration failed: {e}"))
}

/// True when the database answers within two seconds.
pub async fn is_reachable(db: &DatabaseConnection) -> bool {
    matches!(
        tokio::time::timeout(Duration::from_secs(2), db.ping()).await,
        Ok(Ok(()))
    )
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let credentials = &url[scheme_end + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_redacted() {
        assert_eq!(super::redact("postgres://u:pw@h/db"), "postgres://u:***@h/db");
        assert_eq!(super::redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(super::redact("sqlite://x.db?mode=rwc"), "sqlite://x.db?mode=rwc");
    }
}
