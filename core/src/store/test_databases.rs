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
