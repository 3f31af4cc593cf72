//! Leases of claimed rows. A claim stamps its rows with a token and moves their due time to the end of a
//! lease, kept on the database's own clock; while the work runs and until its outcome is committed the
//! lease is renewed, so a lease can be short (work whose worker died runs again soon) without slow work
//! letting another worker claim it.
//! Renewal says which rows it still holds: a row it no longer finds was taken over (its lease ended while
//! this process was paused or cut off from the database) or cancelled, and its run is stopped. At shutdown
//! the claims still held are released, due at once, once their runs have stopped.

use std::collections::HashSet;

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, Statement, Value};

use super::queue::{STILL_PENDING, Table};
use crate::store::sql::{in_id_order, now_ms, placeholders};

/// Tokens per statement.
const CHUNK: usize = 500;

/// Moves the end of the lease of every pending row claimed with one of `tokens` to `lease_ms` from now on
/// the database's own clock, which a test clock's steering leaves alone: moving a test's clock forward
/// makes scheduled work due but never ends a lease a live worker holds. The ids of the rows it renewed.
pub async fn renew(
    db: &DatabaseConnection,
    table: &Table,
    tokens: &[i64],
    lease_ms: i64,
) -> Result<HashSet<String>, DbErr> {
    let mut held = HashSet::new();
    for chunk in tokens.chunks(CHUNK) {
        let (sql, values) = set_due(db.get_database_backend(), table, chunk, lease_ms, "");
        let rows = db
            .query_all_raw(Statement::from_sql_and_values(
                db.get_database_backend(),
                format!("{sql} RETURNING id"),
                values,
            ))
            .await?;
        for row in rows {
            held.insert(row.try_get_by_index(0)?);
        }
    }
    Ok(held)
}

/// Gives up the claims of `tokens`: their rows are due now (on the database's clock moved by `steer_ms`),
/// with no try spent and their runs not counted as cut short.
pub async fn release(db: &DatabaseConnection, table: &Table, tokens: &[i64], steer_ms: i64) -> Result<(), DbErr> {
    let clear = match table.unfinished_runs {
        Some(c) => format!(", claim_token = NULL, {c} = {c} - 1"),
        None => ", claim_token = NULL".to_owned(),
    };
    for chunk in tokens.chunks(CHUNK) {
        let (sql, values) = set_due(db.get_database_backend(), table, chunk, steer_ms, &clear);
        db.execute_raw(Statement::from_sql_and_values(db.get_database_backend(), sql, values))
            .await?;
    }
    Ok(())
}

/// Makes the rows due `from_now_ms` after the database's clock now. Only pending rows: one settled, parked
/// or cancelled while its work runs keeps no due time. The rows are locked in id order (`in_id_order`).
pub(super) fn set_due(
    backend: DbBackend,
    table: &Table,
    tokens: &[i64],
    from_now_ms: i64,
    clear: &str,
) -> (String, Vec<Value>) {
    let rows = format!("claim_token IN ({}) AND {STILL_PENDING}", placeholders(2, tokens.len()));
    let which = in_id_order(backend, table.name, &rows);
    let sql = format!(
        "UPDATE {} SET {} = {} + $1{clear} WHERE {which}",
        table.name,
        table.due,
        now_ms(backend)
    );
    let mut values: Vec<Value> = vec![from_now_ms.into()];
    values.extend(tokens.iter().map(|t| Value::from(*t)));
    (sql, values)
}
