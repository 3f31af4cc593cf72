//! Persistence: the SeaORM connection (SQLite or PostgreSQL by URL), migrations, and the entities.

pub mod entities;
pub mod group_commit;
pub mod leader;
pub mod redis_script;
pub mod search;
pub mod settings;
pub mod sql;
#[cfg(any(test, feature = "testing"))]
pub mod test_databases;
pub mod wakeups;

use std::time::Duration;

use frontdesk_migrations::{Migrator, MigratorTrait};
use sea_orm::{
    ColumnTrait, ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr,
    EntityTrait, PrimaryKeyTrait, QueryFilter, QueryResult, SqliteTransactionMode, TransactionOptions,
    TransactionTrait, TryGetable, sqlx,
};

use crate::tenant::AccountId;

/// Time limits of every PostgreSQL session of a pool, so that a call waiting on a lock another transaction
/// holds, or a runaway statement, ends with an error instead of holding its request (and connection)
/// forever. Zero is no limit. SQLite has neither: its writers wait at most the busy timeout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionLimits {
    /// `lock_timeout`: the longest a statement waits for a lock.
    pub lock_timeout: Duration,
    /// `statement_timeout`: the longest a statement runs.
    pub statement_timeout: Duration,
}

/// Opens a pool on `url`, every PostgreSQL session under `limits`. Start-up needs the database (migrations
/// run first), so an unreachable database at start is an error that names it; an outage after start is
/// reported by the health check instead.
pub async fn connect(url: &str, max_connections: u32, limits: SessionLimits) -> anyhow::Result<DatabaseConnection> {
    let statement_cache = statement_cache_capacity(url);
    let planner = planner_settings(url);
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
        .sqlx_logging(false)
        // Write-ahead logging: readers never wait for the writer nor the writer for readers, where the rollback
        // journal made a commit wait until every open read had finished. Commits still sync (FULL), so a
        // committed write survives a power loss. An in-memory database keeps its own journal.
        .map_sqlx_sqlite_opts(move |sqlite| {
            sqlite
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                .statement_cache_capacity(statement_cache)
        })
        // Session settings sent when each connection starts, in milliseconds (PostgreSQL's unit for both).
        .map_sqlx_postgres_opts(move |pg| {
            let pg = pg
                .options([
                    ("lock_timeout", limits.lock_timeout.as_millis()),
                    ("statement_timeout", limits.statement_timeout.as_millis()),
                ])
                .statement_cache_capacity(statement_cache);
            pg.options(planner.iter().copied())
        });
    Database::connect(options)
        .await
        .map_err(|e| anyhow::anyhow!("cannot open database {}: {e}", redact(url)))
}

/// Prepared statements each pooled connection keeps: `statement-cache-capacity` in the URL, else 1,024. On
/// SQLite the batched writes and reads still have one statement text per batch size (a multi-row insert, an
/// `IN` list of the batch's ids), a few hundred texts in all, as do the claims whose limit is written into the
/// SQL; with sqlx's default of 100 they pushed each other out and were prepared again on every batch (on
/// PostgreSQL, before its batches took arrays, a quarter of its time while accepting sends; 1,024 took an API
/// replica's accepted sends from ~6,800/s to ~7,800/s).
fn statement_cache_capacity(url: &str) -> usize {
    let query = url.split_once('?').map_or("", |(_, query)| query);
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "statement-cache-capacity")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(1024)
}

/// Planner settings for the service's PostgreSQL sessions, each unless the URL's `options` set it. The hot
/// statements are prepared once per connection and, after a few runs, keep one generic plan, which is not
/// planned again as a table grows. A plan made while a table looked empty (a queue just drained and
/// vacuumed, a new deployment) is a sequential scan, and it went on scanning as the table filled: the
/// delivery's status update scanned 13,000 messages per batch a few seconds into a run, and the job claim's
/// bitmap scan read every dead entry of its index on each claim (a bitmap scan never marks them dead, as an
/// index scan does). Every hot statement has an index to use, so:
/// - `enable_seqscan = off`: a sequential scan only where no index applies;
/// - `random_page_cost = 1.1`: the usual setting for data on SSD or in memory (PostgreSQL's 4.0 is a
///   spinning disk's ratio), which prefers a plain index scan to a bitmap scan for a few rows;
/// - `jit = off`: a statement that must scan (a gauge's count) is costed past every JIT threshold once
///   sequential scans are off, and was compiled by LLVM on each run: most of what eight idle replicas cost
///   the database (24% of a core, 6% without it). The service's statements are short; JIT never pays.
fn planner_settings(url: &str) -> Vec<(&'static str, &'static str)> {
    [("enable_seqscan", "off"), ("random_page_cost", "1.1"), ("jit", "off")]
        .into_iter()
        .filter(|(name, _)| !url.contains(name))
        .collect()
}

/// Opens a transaction that will write. On SQLite it takes the write lock at `BEGIN` (waiting up to the busy
/// timeout for another writer): a deferred transaction that reads first and then writes cannot wait for the
/// lock, and fails at once with "database is locked" whenever another connection wrote meanwhile. PostgreSQL
/// ignores the SQLite mode.
pub async fn begin_write(db: &DatabaseConnection) -> Result<DatabaseTransaction, DbErr> {
    let options = TransactionOptions {
        sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
        ..TransactionOptions::default()
    };
    #[allow(clippy::disallowed_methods)] // the one place that opens a transaction
    db.begin_with_options(options).await
}

/// Warns when PostgreSQL's autovacuum is off: the job queue, the event outbox and conversation touches leave
/// dead rows at the rate messages flow, and without vacuum their scans slow down as the day goes on.
pub async fn warn_without_autovacuum(db: &DatabaseConnection) -> Result<(), DbErr> {
    if db.get_database_backend() != DbBackend::Postgres {
        return Ok(());
    }
    let statement = sea_orm::Statement::from_string(DbBackend::Postgres, "SHOW autovacuum");
    let setting: Option<String> = db
        .query_one_raw(statement)
        .await?
        .map(|row| row.try_get_by_index(0))
        .transpose()?;
    if setting.as_deref() == Some("off") {
        tracing::warn!(
            "PostgreSQL's autovacuum is off: the jobs, event_outbox and conversations tables will bloat and slow \
             down; turn it on, or VACUUM them regularly"
        );
    }
    Ok(())
}

/// A savepoint in `txn`: work that may fail on its own (a send of a batch) rolls back to it and the batch's
/// transaction goes on.
pub async fn savepoint(txn: &DatabaseTransaction) -> Result<DatabaseTransaction, DbErr> {
    #[allow(clippy::disallowed_methods)] // nested in a write transaction, which holds SQLite's lock already
    txn.begin().await
}

/// The row with this id when it belongs to the account (another account's row is as absent as a missing
/// one).
pub async fn owned<E>(
    db: &impl ConnectionTrait,
    account: E::Column,
    account_id: &AccountId,
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

/// Applies every pending migration to the database at `url` over a connection of its own, without the
/// serving pool's session limits: building an index on a large table may rightly take longer than any
/// request.
pub async fn migrate_at(url: &str) -> anyhow::Result<()> {
    let db = connect(url, 1, SessionLimits::default()).await?;
    let migrated = migrate(&db).await;
    db.close().await.ok();
    migrated
}

/// Migrates the database of `pool` (opened on `url`) without its session limits: on PostgreSQL over a
/// connection of its own; SQLite has no such limits, and an in-memory database exists only in its pool.
pub async fn migrate_unbounded(pool: &DatabaseConnection, url: &str) -> anyhow::Result<()> {
    match pool.get_database_backend() {
        DbBackend::Postgres => migrate_at(url).await,
        _ => migrate(pool).await,
    }
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
    use std::time::Duration;

    use sea_orm::{ConnectionTrait, DatabaseConnection, SqliteTransactionMode, TransactionOptions, TransactionTrait};

    /// A pool on a new SQLite file with a one-column table, and the directory to remove afterwards.
    /// A SQLite file with one table `t`.
    async fn sqlite_file(connections: u32) -> (DatabaseConnection, std::path::PathBuf) {
        let (db, dir) = super::test_databases::sqlite_file(connections).await;
        db.execute_unprepared("CREATE TABLE t (n INTEGER NOT NULL)")
            .await
            .unwrap();
        (db, dir)
    }

    async fn count(db: &impl ConnectionTrait) -> i64 {
        let row = db.query_one_raw(sea_orm::Statement::from_string(
            db.get_database_backend(),
            "SELECT count(*) FROM t",
        ));
        row.await.unwrap().unwrap().try_get_by_index(0).unwrap()
    }

    #[test]
    fn the_statement_cache_is_large_unless_the_url_names_its_own() {
        assert_eq!(super::statement_cache_capacity("postgres://u@h/db"), 1024);
        assert_eq!(super::statement_cache_capacity("sqlite://x.db?mode=rwc"), 1024);
        let own = "postgres://u@h/db?host=/run/pg&statement-cache-capacity=50";
        assert_eq!(super::statement_cache_capacity(own), 50);
    }

    /// The service's PostgreSQL sessions plan with index scans and `random_page_cost` 1.1, each unless the URL's
    /// `options` set it.
    #[tokio::test]
    async fn postgres_sessions_plan_with_indexes_unless_the_url_says_otherwise() {
        let with = |extra: &str| super::test_databases::postgres_url("postgres", extra);
        for (url, expected) in [
            (with(""), ("off", "1.1")),
            (with("options=-c%20random_page_cost%3D2"), ("off", "2")),
            (with("options=-c%20enable_seqscan%3Don"), ("on", "1.1")),
        ] {
            let db = super::connect(&url, 1, super::SessionLimits::default()).await.unwrap();
            let sql = "SELECT current_setting('enable_seqscan'), current_setting('random_page_cost')";
            let row = db
                .query_one_raw(sea_orm::Statement::from_string(sea_orm::DbBackend::Postgres, sql))
                .await
                .unwrap()
                .unwrap();
            let settings: (String, String) = (row.try_get_by_index(0).unwrap(), row.try_get_by_index(1).unwrap());
            assert_eq!((settings.0.as_str(), settings.1.as_str()), expected, "{url}");
            db.close().await.unwrap();
        }
    }

    /// Transactions that read before they write, on several connections at once, all commit: a deferred
    /// transaction would fail with "database is locked" as soon as another one wrote after its read.
    #[tokio::test]
    async fn read_then_write_transactions_on_sqlite_all_commit() {
        let (db, dir) = sqlite_file(8).await;
        let writers = (0..24).map(|_| {
            let db = db.clone();
            tokio::spawn(async move {
                let txn = super::begin_write(&db).await?;
                let seen = count(&txn).await;
                tokio::time::sleep(Duration::from_millis(2)).await;
                txn.execute_unprepared(&format!("INSERT INTO t (n) VALUES ({seen})"))
                    .await?;
                txn.commit().await
            })
        });
        for writer in writers.collect::<Vec<_>>() {
            writer.await.unwrap().expect("every writer commits");
        }
        assert_eq!(count(&db).await, 24);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// An open read does not hold up another connection's commit (write-ahead logging; with the rollback
    /// journal the commit waited for the reader, and failed after the busy timeout).
    #[tokio::test]
    async fn a_commit_on_sqlite_does_not_wait_for_an_open_read() {
        let (db, dir) = sqlite_file(2).await;
        let deferred = TransactionOptions {
            sqlite_transaction_mode: Some(SqliteTransactionMode::Deferred),
            ..TransactionOptions::default()
        };
        #[allow(clippy::disallowed_methods)] // a read that begins deferred, as the rollback journal's readers did
        let reader = db.begin_with_options(deferred).await.unwrap();
        assert_eq!(count(&reader).await, 0);
        let write = async {
            let txn = super::begin_write(&db).await?;
            txn.execute_unprepared("INSERT INTO t (n) VALUES (1)").await?;
            txn.commit().await
        };
        tokio::time::timeout(Duration::from_secs(2), write)
            .await
            .expect("the commit does not wait for the reader")
            .unwrap();
        assert_eq!(count(&reader).await, 0, "the reader keeps its snapshot");
        reader.commit().await.unwrap();
        assert_eq!(count(&db).await, 1);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(super::redact("postgres://u:pw@h/db"), "postgres://u:***@h/db");
        assert_eq!(super::redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(super::redact("sqlite://x.db?mode=rwc"), "sqlite://x.db?mode=rwc");
    }
}
