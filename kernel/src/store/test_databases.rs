//! Databases for the core's own tests: a SQLite file in a fresh directory, and the PostgreSQL server the tests
//! use (`FRONTDESK_TEST_POSTGRES`, as in the black-box tests).

use std::path::PathBuf;

use sea_orm::DatabaseConnection;

use super::SessionLimits;

/// A new SQLite database file with `connections` pooled connections, and its directory (the test removes it).
pub async fn sqlite_file(connections: u32) -> (DatabaseConnection, PathBuf) {
    let dir = std::env::temp_dir().join(format!("fd-store-{}", crate::ids::base62(8)));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.join("x.db").display());
    let db = super::connect(&url, connections, SessionLimits::default())
        .await
        .unwrap();
    (db, dir)
}

/// The URL of database `name` on the tests' PostgreSQL server, with the server URL's query and `extra` (more
/// query parameters, or "").
pub fn postgres_url(name: &str, extra: &str) -> String {
    let server =
        std::env::var("FRONTDESK_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
    let (base, query) = server.split_once('?').unwrap_or((server.as_str(), ""));
    let query: Vec<&str> = [query, extra].into_iter().filter(|q| !q.is_empty()).collect();
    if query.is_empty() {
        format!("{base}/{name}")
    } else {
        format!("{base}/{name}?{}", query.join("&"))
    }
}

/// Applies every migration before the one named `migration`, for a test of what that one does to rows
/// written before it.
pub async fn migrate_before(db: &DatabaseConnection, migration: &str) {
    use frontdesk_migrations::{Migrator, MigratorTrait};
    let before = Migrator::migrations()
        .iter()
        .position(|m| m.name() == migration)
        .and_then(|at| u32::try_from(at).ok())
        .unwrap_or_else(|| panic!("no migration {migration}"));
    Migrator::up(db, Some(before)).await.unwrap();
}

/// Which database a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

/// A fresh database of either kind for one test (migrated, unless made `unmigrated`); `remove` deletes it.
pub struct TestDb {
    pub db: DatabaseConnection,
    place: Place,
}

enum Place {
    Dir(PathBuf),
    Postgres(String),
}

impl TestDb {
    pub async fn new(kind: Kind, connections: u32) -> Self {
        let test = Self::unmigrated(kind, connections).await;
        super::migrate(&test.db).await.unwrap();
        test
    }

    /// An empty database, for a test that migrates it in steps.
    pub async fn unmigrated(kind: Kind, connections: u32) -> Self {
        let (db, place) = match kind {
            Kind::Sqlite => {
                let (db, dir) = sqlite_file(connections).await;
                (db, Place::Dir(dir))
            }
            Kind::Postgres => {
                let name = format!("fd_core_{}", crate::ids::base62(10).to_lowercase());
                let admin = sea_orm::Database::connect(postgres_url("postgres", "")).await.unwrap();
                sea_orm::ConnectionTrait::execute_unprepared(&admin, &format!("CREATE DATABASE {name}"))
                    .await
                    .unwrap();
                let db = super::connect(&postgres_url(&name, ""), connections, SessionLimits::default())
                    .await
                    .unwrap();
                (db, Place::Postgres(name))
            }
        };
        Self { db, place }
    }

    pub async fn remove(self) {
        let _ = self.db.close().await;
        match self.place {
            Place::Dir(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Place::Postgres(name) => {
                if let Ok(admin) = sea_orm::Database::connect(postgres_url("postgres", "")).await {
                    let drop = format!("DROP DATABASE {name} WITH (FORCE)");
                    let _ = sea_orm::ConnectionTrait::execute_unprepared(&admin, &drop).await;
                }
            }
        }
    }
}

/// Makes each `async fn name(kind: Kind)` of the calling module two tests, `name::sqlite` and
/// `name::postgres`.
#[macro_export]
macro_rules! on_both_kinds {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::store::test_databases::Kind::Sqlite).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::store::test_databases::Kind::Postgres).await;
            }
        }
    )*};
}

/// Waits until `sessions` sessions of this PostgreSQL database wait for a lock (at most 10 s), for a test
/// that forces statements into a given interleaving.
async fn until_waiting_for_locks(db: &DatabaseConnection, sessions: i64) {
    use sea_orm::{ConnectionTrait, Statement};
    let sql = "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() \
               AND wait_event_type = 'Lock'";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let row = db
            .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
            .await
            .unwrap()
            .unwrap();
        if row.try_get_by_index::<i64>(0).unwrap() >= sessions {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{sessions} sessions never waited for a lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// Runs one statement of a test's own, which must succeed.
pub async fn execute(db: &impl sea_orm::ConnectionTrait, sql: &str) {
    db.execute_raw(sea_orm::Statement::from_string(db.get_database_backend(), sql))
        .await
        .unwrap();
}

/// Runs `first` and `second` in the interleaving that deadlocks when two statements lock the same rows in
/// different orders: `first` queues for the row that `held` (a statement taking its lock) locks in a
/// transaction of the test's, then `second` queues too, and then the test lets go. Their results, for the
/// test to check that neither was ended as a deadlock's victim.
pub async fn queued_behind_a_lock<A, B>(
    db: &DatabaseConnection,
    held: &str,
    first: impl std::future::Future<Output = A> + Send + 'static,
    second: impl std::future::Future<Output = B> + Send + 'static,
) -> (A, B)
where
    A: Send + 'static,
    B: Send + 'static,
{
    use sea_orm::TransactionTrait;
    #[allow(clippy::disallowed_methods)] // the test's own lock
    let holder = db.begin().await.unwrap();
    execute(&holder, held).await;
    let first = tokio::spawn(first);
    until_waiting_for_locks(db, 1).await;
    let second = tokio::spawn(second);
    until_waiting_for_locks(db, 2).await;
    holder.commit().await.unwrap();
    (first.await.unwrap(), second.await.unwrap())
}
