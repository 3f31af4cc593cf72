//! Persistence: the SeaORM connection (SQLite or PostgreSQL by URL), migrations, and the entities.

pub mod entities;
pub mod settings;

use std::time::Duration;

use frontdesk_migrations::{Migrator, MigratorTrait};
use sea_orm::{
    ColumnTrait, ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbErr, EntityTrait, PrimaryKeyTrait,
    QueryFilter, QueryResult, TryGetable, sqlx,
};

/// Opens a pool on `url`. Start-up needs the database (migrations run first), so an unreachable database at
/// start is an error that names it; an outage after start is reported by the health check instead.
pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<DatabaseConnection> {
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .max_connections(max_connections)
        .min_connections(0)
        .connect_timeout(Duration::from_secs(5))
        .acquire_timeout(Duration::from_secs(5))
        // sqlx pings every connection as it goes back to the pool; pinging again on every checkout doubled
        // the round trips of a read. Like HikariCP's 500 ms bypass window, only a connection idle longer
        // than that (which the server or a proxy may have dropped meanwhile) is checked before use.
        .test_before_acquire_if_idle_for(Duration::from_millis(500))
        .sqlx_logging(false);
    Database::connect(options)
        .await
        .map_err(|e| anyhow::anyhow!("cannot open database {}: {e}", redact(url)))
}

/// The row with this id when it belongs to the account (another account's row is as absent as a missing
/// one).
pub async fn owned<E>(
    db: &impl ConnectionTrait,
    account: E::Column,
    account_id: &str,
    id: &str,
) -> Result<Option<E::Model>, sea_orm::DbErr>
where
    E: EntityTrait,
    <E::PrimaryKey as PrimaryKeyTrait>::ValueType: From<String>,
{
    E::find_by_id(id.to_owned())
        .filter(account.eq(account_id))
        .one(db)
        .await
}

/// Column `index` of a row selected by a statement of ours. On PostgreSQL the value is decoded without
/// sqlx's per-value type check, which was a third of a list's row-decoding cost: the column types are the
/// ones our migrations create. A NULL read as a non-`Option` type is still an error, as is a short row.
pub fn column<T>(row: &QueryResult, index: usize) -> Result<T, DbErr>
where
    T: TryGetable + for<'r> sqlx::Decode<'r, sqlx::Postgres>,
{
    match row.try_as_pg_row() {
        Some(pg) => sqlx::Row::try_get_unchecked(pg, index).map_err(|e| DbErr::Type(format!("column {index}: {e}"))),
        None => row.try_get_by_index(index),
    }
}

/// A value as the JSON text stored in a text column.
pub fn to_json_text<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

/// A JSON text column read back; a value this version cannot read falls back to the default.
pub fn from_json_text<T: serde::de::DeserializeOwned + Default>(text: &str) -> T {
    serde_json::from_str(text).unwrap_or_default()
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
