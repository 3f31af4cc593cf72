//! Small pieces of SQL shared by the batched writers and the work queues (webhook deliveries, jobs): text that
//! reads the same on SQLite and PostgreSQL, or the form each reads best.

use sea_orm::{
    DbBackend, Statement, Value,
    sea_query::{Expr, ExprTrait, IntoColumnRef, extension::postgres::PgFunc},
};

/// The database's clock now, in Unix milliseconds, as an SQL expression: the one clock every replica shares.
/// SQLite runs in this process, on its clock.
pub fn now_ms(backend: DbBackend) -> &'static str {
    match backend {
        DbBackend::Postgres => "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::int8",
        _ => "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
    }
}

/// `$first, $first+1, ...` (`count` of them): numbered placeholders, which both SQLite and PostgreSQL read.
pub fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A condition that holds for the rows of work table `table` that `condition` picks, with those rows locked
/// first in id order on PostgreSQL: the order every statement that locks rows of a work table keeps (lease
/// renewals and releases, the recorders, cancels, disables), so two of them never wait for each other in a
/// circle. A lock order left to the plan (an update joined with its batch, a scan of another index) met a
/// renewal of the same rows in the opposite order: PostgreSQL ended one of them after its deadlock timeout,
/// a second in which nothing of either was written. SQLite has one writer at a time: `condition` itself.
pub fn in_id_order(backend: DbBackend, table: &str, condition: &str) -> String {
    match backend {
        DbBackend::Postgres => {
            format!("id = ANY(ARRAY(SELECT id FROM {table} WHERE {condition} ORDER BY id FOR UPDATE))")
        }
        _ => condition.to_owned(),
    }
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
    among(backend, column, &locking(backend, select))
}

/// `select` with the rows it reads locked for this transaction, skipping rows another transaction holds
/// (PostgreSQL; SQLite has one writer at a time and no row locks).
pub fn locking(backend: DbBackend, select: &str) -> String {
    match backend {
        DbBackend::Postgres => format!("{select} FOR UPDATE SKIP LOCKED"),
        _ => select.to_owned(),
    }
}

/// A condition that `column` is one of the values `select` gives, the selection run once on PostgreSQL (as an
/// array; see `picked`).
pub fn among(backend: DbBackend, column: &str, select: &str) -> String {
    match backend {
        DbBackend::Postgres => format!("{column} = ANY(ARRAY({select}))"),
        _ => format!("{column} IN ({select})"),
    }
}

/// `column` is one of `values`. On PostgreSQL the list is one array parameter (`column = ANY($1)`), so a
/// statement over a batch reads the same whatever the batch's size and its prepared plan is reused: group
/// commit's batches vary in size, and with one text per size PostgreSQL parsed and planned most executions
/// again (more planning time than execution, for some of the accept's reads). Elsewhere `column IN (...)`.
pub fn one_of<C, V>(backend: DbBackend, column: C, values: impl IntoIterator<Item = V>) -> Expr
where
    C: IntoColumnRef,
    V: Into<String>,
{
    let values: Vec<String> = values.into_iter().map(Into::into).collect();
    match backend {
        DbBackend::Postgres => Expr::col(column).eq(PgFunc::any(Expr::val(values))),
        _ => Expr::col(column).is_in(values),
    }
}

/// `one_of` for statements written as text: the condition, with placeholders from `$first`, and its values.
pub fn one_of_text(backend: DbBackend, column: &str, first: usize, values: Vec<String>) -> (String, Vec<Value>) {
    match backend {
        DbBackend::Postgres => (format!("{column} = ANY(${first})"), vec![Value::from(values)]),
        _ => (
            format!("{column} IN ({})", placeholders(first, values.len())),
            values.into_iter().map(Value::from).collect(),
        ),
    }
}

/// PostgreSQL: `writes` (statements that return nothing, each with its own `$1...` placeholders) as one
/// statement, each a data-modifying `WITH` part: one round trip for all of them, and atomic without a
/// transaction. The parts run on one snapshot and cannot see each other's rows, so they must not depend on
/// each other (an insert and an update of other rows, say).
pub fn together(writes: Vec<Statement>) -> Statement {
    let mut parts = Vec::with_capacity(writes.len());
    let mut values: Vec<Value> = Vec::new();
    for (n, write) in writes.into_iter().enumerate() {
        parts.push(format!("w{n} AS ({})", renumbered(&write.sql, values.len())));
        values.extend(write.values.map(|v| v.0).unwrap_or_default());
    }
    let sql = format!("WITH {} SELECT 1", parts.join(", "));
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// `sql` with every placeholder `$n` moved to `$(n + offset)`.
fn renumbered(sql: &str, offset: usize) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        match rest[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&(n + offset).to_string()),
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_keep_their_own_values_under_one_numbering() {
        let first = Statement::from_sql_and_values(
            DbBackend::Postgres,
            "INSERT INTO a (x, y) SELECT * FROM unnest($1::text[], $2::int4[])",
            [Value::from(vec!["a".to_owned()]), Value::from(vec![1])],
        );
        let second = Statement::from_sql_and_values(
            DbBackend::Postgres,
            "UPDATE b SET at = $1 WHERE id = ANY($2) AND n = $10",
            [
                1.into(),
                2.into(),
                3.into(),
                4.into(),
                5.into(),
                6.into(),
                7.into(),
                8.into(),
                9.into(),
                10.into(),
            ],
        );
        let together = together(vec![first, second]);
        assert_eq!(
            together.sql,
            "WITH w0 AS (INSERT INTO a (x, y) SELECT * FROM unnest($1::text[], $2::int4[])), \
             w1 AS (UPDATE b SET at = $3 WHERE id = ANY($4) AND n = $12) SELECT 1"
        );
        let values = together.values.expect("values").0;
        assert_eq!(values.len(), 12);
        assert_eq!(values[2], Value::from(1));
        assert_eq!(values[11], Value::from(10));
    }
}
