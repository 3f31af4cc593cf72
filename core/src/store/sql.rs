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

/// A condition on `column` that holds for the rows `select` picks, locked for this transaction: rows another
/// transaction holds are skipped (`FOR UPDATE SKIP LOCKED`), so replicas take disjoint work instead of queueing
/// behind each other. SQLite has one writer at a time and no row locks.
///
/// On PostgreSQL the selection runs once, as an array: `column IN (select)` may be planned as a nested-loop
/// semi join that runs the locking selection again for every row of the table when the statistics are stale
/// (seen: after a `VACUUM ANALYZE` of an empty queue, claims over 16,000 queued jobs whose lane was at its cap
/// ran into the 30 s statement timeout, one after another, and nothing was delivered).
pub fn picked(backend: DbBackend, column: &str, select: &str) -> String {
    match backend {
        DbBackend::Postgres => format!("{column} = ANY(ARRAY({select} FOR UPDATE SKIP LOCKED))"),
        _ => format!("{column} IN ({select})"),
    }
}
