//! Small pieces of SQL text that read the same on SQLite and PostgreSQL, shared by the work queues (webhook
//! deliveries, jobs).

use sea_orm::DbBackend;

/// `$first, $first+1, ...` (`count` of them): numbered placeholders, which both SQLite and PostgreSQL read.
pub fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The suffix that makes a subquery's row selection skip rows another transaction holds: replicas then take
/// disjoint work instead of queueing behind each other. SQLite has one writer at a time and no row locks.
pub fn skip_locked(backend: DbBackend) -> &'static str {
    match backend {
        DbBackend::Postgres => " FOR UPDATE SKIP LOCKED",
        _ => "",
    }
}
