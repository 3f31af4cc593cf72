//! A database of the test's own: an SQLite file in a temporary directory, or a PostgreSQL database created
//! for the test (server from `FRONTDESK_TEST_POSTGRES`, default `postgres://postgres@127.0.0.1:5432`) and
//! dropped when the test ends.

use std::path::PathBuf;

use sea_orm::{ConnectionTrait, Database, DatabaseConnection, Statement};

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

impl Db {
    pub fn sqlite() -> Self {
        let dir = std::env::temp_dir().join(unique("frontdesk-test"));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self::Sqlite { dir }
    }

    pub async fn postgres() -> Self {
        let server = postgres_server();
        let name = unique("fd_test");
        let admin = Database::connect(format!("{server}/postgres"))
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {server} is needed for this test: {e}"));
        admin
            .execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create test database");
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

    /// One column of one row, as text (`None` when no row matches). `$1` binds `arg`.
    pub async fn scalar(&self, sql: &str, arg: &str) -> Option<String> {
        let conn = self.connect().await;
        let backend = conn.get_database_backend();
        let sql = if self.is_postgres() {
            sql.to_owned()
        } else {
            sql.replace("$1", "?")
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
                // Drop runs inside the test's runtime; a thread of its own may block on a runtime of its own.
                let _ = std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .ok()?;
                    runtime.block_on(async {
                        let admin = Database::connect(format!("{server}/postgres")).await.ok()?;
                        admin
                            .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                            .await
                            .ok()
                    })
                })
                .join();
            }
        }
    }
}
