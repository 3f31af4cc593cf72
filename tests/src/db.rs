//! A database of the test's own: an SQLite file in a temporary directory, or a PostgreSQL database created
//! for the test (server from `FRONTDESK_TEST_POSTGRES`, default `postgres://postgres@127.0.0.1:5432`) and
//! dropped when the test ends.
//!
//! Each starts as a copy of a database migrated once per test process by `frontdesk migrate` (a file copy,
//! or a clone of a PostgreSQL template): migrating every test's database cost more than half a second of
//! start-up each. `Db::empty_sqlite` and `Db::empty_postgres` give a database that was never migrated.

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
};

use sea_orm::{ConnectionTrait, Database, DatabaseConnection, DatabaseTransaction, Statement, TransactionTrait, Value};

pub enum Db {
    Sqlite { dir: PathBuf },
    Postgres { server: String, name: String },
}

fn postgres_server() -> String {
    std::env::var("FRONTDESK_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned())
}

fn unique(prefix: &str) -> String {
    use rand::Rng;
    let n: u64 = rand::rng().random();
    format!("{prefix}_{}_{n:016x}", std::process::id())
}

/// Runs `work` to completion on a runtime of its own, on a thread of its own: callers may be inside a test's
/// runtime, which cannot block on another. A panic in it is returned, for the caller to pass on or (in a
/// drop, which must not panic) to ignore.
fn on_own_runtime<T: Send + 'static, F: Future<Output = T> + 'static>(
    work: impl FnOnce() -> F + Send + 'static,
) -> std::thread::Result<T> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(work())
    })
    .join()
}

/// Applies every migration to the database at `url` as an operator would.
fn migrate(url: &str) {
    let output = std::process::Command::new(crate::binary::path())
        .arg("migrate")
        .env("DATABASE_URL", url)
        .output()
        .expect("frontdesk migrate runs");
    assert!(
        output.status.success(),
        "frontdesk migrate failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Whether the test process that named something after its pid (`<prefix>_<pid>...`) is gone.
fn of_a_process_gone(name: &str, prefix: &str) -> bool {
    let pid = name.strip_prefix(prefix).and_then(|rest| rest.split('_').next());
    pid.is_some_and(|pid| pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists())
}

/// The migrated SQLite file every SQLite test's database is copied from.
fn sqlite_template() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let temp = std::env::temp_dir();
        for entry in std::fs::read_dir(&temp).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if of_a_process_gone(&name, "frontdesk-template_") {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let dir = temp.join(format!("frontdesk-template_{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("template dir");
        let file = dir.join("frontdesk.db");
        migrate(&format!("sqlite://{}?mode=rwc", file.display()));
        file
    })
}

/// The migrated PostgreSQL database every PostgreSQL test's database is cloned from. Databases left by test
/// processes that are gone (killed before their drops ran) are dropped on the way.
fn postgres_template(server: &str) -> &'static str {
    static TEMPLATE: OnceLock<String> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let name = format!("fd_template_{}", std::process::id());
        let (admin_url, template) = (format!("{server}/postgres"), name.clone());
        on_own_runtime(move || async move {
            let admin = Database::connect(&admin_url)
                .await
                .unwrap_or_else(|e| panic!("PostgreSQL at {admin_url} is needed for this test: {e}"));
            let backend = admin.get_database_backend();
            let rows = admin
                .query_all_raw(Statement::from_string(
                    backend,
                    "SELECT datname FROM pg_database WHERE datname LIKE 'fd\\_%'",
                ))
                .await
                .expect("list databases");
            for row in rows {
                let existing: String = row.try_get_by_index(0).expect("a name");
                if of_a_process_gone(&existing, "fd_template_") || of_a_process_gone(&existing, "fd_test_") {
                    let _ = admin
                        .execute_unprepared(&format!("DROP DATABASE IF EXISTS {existing} WITH (FORCE)"))
                        .await;
                }
            }
            admin
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS {template} WITH (FORCE)"))
                .await
                .expect("drop an old template");
            admin
                .execute_unprepared(&format!("CREATE DATABASE {template}"))
                .await
                .expect("create the template database");
        })
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        migrate(&format!("{server}/{name}"));
        name
    })
}

impl Db {
    /// A migrated SQLite database.
    pub fn sqlite() -> Self {
        let db = Self::empty_sqlite();
        if let Self::Sqlite { dir } = &db {
            std::fs::copy(sqlite_template(), dir.join("frontdesk.db")).expect("copy the migrated database");
        }
        db
    }

    /// An SQLite database that was never migrated (its file does not exist yet).
    pub fn empty_sqlite() -> Self {
        let dir = std::env::temp_dir().join(unique("frontdesk-test"));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self::Sqlite { dir }
    }

    /// A migrated PostgreSQL database.
    pub async fn postgres() -> Self {
        let template = postgres_template(&postgres_server());
        Self::create_postgres(&format!("TEMPLATE {template}")).await
    }

    /// A PostgreSQL database that was never migrated.
    pub async fn empty_postgres() -> Self {
        Self::create_postgres("").await
    }

    async fn create_postgres(options: &str) -> Self {
        let server = postgres_server();
        let name = unique("fd_test");
        let admin = Database::connect(format!("{server}/postgres"))
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {server} is needed for this test: {e}"));
        // A clone waits for the template's last session to end; the migration's may still be closing.
        let mut tries = 0;
        while let Err(err) = admin
            .execute_unprepared(&format!("CREATE DATABASE {name} {options}"))
            .await
        {
            tries += 1;
            assert!(
                tries < 20 && err.to_string().contains("being accessed by other users"),
                "create test database: {err}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        admin.close().await.ok();
        Self::Postgres { server, name }
    }

    pub fn url(&self) -> String {
        match self {
            Self::Sqlite { dir } => format!("sqlite://{}?mode=rwc", dir.join("frontdesk.db").display()),
            Self::Postgres { server, name } => format!("{server}/{name}"),
        }
    }

    /// The PostgreSQL server's `host:port`.
    pub fn postgres_addr(&self) -> String {
        let server = postgres_server();
        let rest = server.rsplit_once('@').map_or(server.as_str(), |(_, rest)| rest);
        rest.trim_end_matches('/').to_owned()
    }

    /// The URL of this PostgreSQL database reached through `addr` (a proxy) instead of the server's own.
    pub fn url_via(&self, addr: &str) -> String {
        match self {
            Self::Postgres { server, name } => {
                let credentials = server.rsplit_once('@').map_or("postgres://", |(c, _)| c);
                format!("{credentials}@{addr}/{name}")
            }
            Self::Sqlite { .. } => panic!("an SQLite database is a file, not reached over TCP"),
        }
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, Self::Postgres { .. })
    }

    /// A direct connection, for checking what the service stored.
    pub async fn connect(&self) -> DatabaseConnection {
        Database::connect(self.url())
            .await
            .expect("connect to the test database")
    }

    /// Waits until the recurring job `kind` has run a whole turn that began after this call. Its row gets a
    /// new `updated_at` as each turn ends (and is claimed meanwhile), so the second ended turn seen began
    /// after the first one ended, hence after the call.
    pub async fn recurring_turn(&self, kind: &str) {
        const ENDED_TURN: &str =
            "SELECT CASE WHEN claim_token IS NULL THEN CAST(updated_at AS TEXT) ELSE '' END FROM jobs WHERE kind = $1";
        let started = std::time::Instant::now();
        let mut last = self.scalar(ENDED_TURN, kind).await;
        let mut ended = 0;
        while ended < 2 {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "{kind} ran no turn"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let now = self.scalar(ENDED_TURN, kind).await;
            if now != last && now.as_deref().is_some_and(|at| !at.is_empty()) {
                ended += 1;
            }
            last = now;
        }
    }

    /// One column of one row, as text (`None` when no row matches). `$1` binds `arg`.
    pub async fn scalar(&self, sql: &str, arg: &str) -> Option<String> {
        let conn = self.connect().await;
        let backend = conn.get_database_backend();
        // SQLite's numbered form, so the argument may be used more than once.
        let sql = if self.is_postgres() {
            sql.to_owned()
        } else {
            sql.replace("$1", "?1")
        };
        let row = conn
            .query_one_raw(Statement::from_sql_and_values(backend, sql, [arg.into()]))
            .await
            .expect("query");
        let value = row.map(|row| {
            row.try_get_by_index::<String>(0)
                .or_else(|_| row.try_get_by_index::<i64>(0).map(|n| n.to_string()))
                .expect("a text or integer column")
        });
        conn.close().await.ok();
        value
    }

    /// Admin statements on the PostgreSQL server (to make the test database unreachable, say).
    pub async fn admin(&self, sql: &str) {
        let conn = Database::connect(format!("{}/postgres", postgres_server()))
            .await
            .expect("admin");
        conn.execute_unprepared(sql).await.expect("admin statement");
    }

    pub fn name(&self) -> &str {
        match self {
            Self::Sqlite { .. } => "sqlite",
            Self::Postgres { name, .. } => name,
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        match self {
            Self::Sqlite { dir } => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Self::Postgres { server, name } => {
                let (server, name) = (server.clone(), name.clone());
                let _ = on_own_runtime(move || async move {
                    let admin = Database::connect(format!("{server}/postgres")).await.ok()?;
                    admin
                        .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .await
                        .ok()
                });
            }
        }
    }
}

/// A transaction of the test's own, outside the service, that has run `locking` (with `values`): it holds the
/// locks that statement took until the test commits it or drops it.
pub async fn hold(conn: &DatabaseConnection, locking: &str, values: Vec<Value>) -> DatabaseTransaction {
    #[allow(clippy::disallowed_methods)] // the test's own transaction, not the service's
    let held = conn.begin().await.unwrap();
    held.execute_raw(Statement::from_sql_and_values(
        held.get_database_backend(),
        locking,
        values,
    ))
    .await
    .unwrap();
    held
}
