//! The ready queues (`job_queues`): a row per queue of a work-queue table that may have pending rows, with
//! when it is next ready (`ready_ms`). The database keeps them from every write that makes a row due (see
//! the migration that made them): on PostgreSQL writers append wakes that a claim folds in here, so no
//! writer waits for another or for a claim; on SQLite the write updates the row itself. A claim reads the
//! due queues straight from the index, oldest first, so queues that wait for later cost it nothing;
//! after taking work it settles each queue it planned: a queue it served goes to the back of the line
//! (ready now, or at its next due row when that is later), one with no waiting rows left is deleted, and
//! one whose row a wake changed meanwhile is left as the wake made it. Running rows keep no queue ready:
//! a run whose worker died is found by a look at the claimed rows for leases that ended, made at most
//! once every [`EXPIRED_EVERY_MS`] per process.

use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, QueryResult, Statement, Value,
};

use super::{
    fair::Head,
    queue::{QueueKey, Table},
};
use crate::store::sql::{now_ms, one_of_text};

/// Due queues of each class read per claim at most: the ones ready longest; the rest come next time.
const MAX_PER_CLASS: usize = 1_000;
/// A random 64-bit number, on PostgreSQL: a queue's `tie`, drawn whenever it is made ready.
const RANDOM: &str = "((random() - 0.5) * 1.8e19)::int8";
/// How often (database clock) a process looks for runs whose lease ended: the look reads every running
/// row, and a dead worker's runs wait for their lease's end anyway, so a second more costs little.
pub const EXPIRED_EVERY_MS: i64 = 1_000;

/// A due queue as a claim read it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub head: Head,
    /// The row's fold count when read: a claim settles the row only if no wake came since.
    woken: i64,
    /// Its place among queues ready at the same moment.
    tie: i64,
}

/// What one read of the ready queues found.
pub struct Due {
    pub queues: Vec<Seen>,
    /// How long until the next queue not yet due is ready.
    pub next_in_ms: Option<i64>,
    /// The database's clock, moved by the claim's steering.
    pub now_ms: i64,
}

/// Where a read of the due queues stands on the clock: the database's, moved by `steer_ms` (a test
/// clock's steering); runs whose lease ended are looked for only once it reads `expired_from_ms` or later.
#[derive(Clone, Copy, Debug)]
pub struct Reading {
    pub steer_ms: i64,
    pub expired_from_ms: i64,
}

/// Folds the waiting wakes in (PostgreSQL) and reads the due queues of `kinds` (every queue when `None`),
/// ready longest first.
pub async fn due(
    db: &DatabaseConnection,
    table: &Table,
    kinds: Option<&[String]>,
    reading: Reading,
) -> Result<Due, DbErr> {
    match db.get_database_backend() {
        DbBackend::Postgres => due_postgres(db, table, kinds, reading).await,
        backend => due_sqlite(db, backend, table, kinds, reading).await,
    }
}

/// ` AND kind IN (...)` for `kinds`, its placeholders from `first` on, with their values; nothing for `None`.
fn of_kinds(backend: DbBackend, kinds: Option<&[String]>, first: usize) -> (String, Vec<Value>) {
    match kinds {
        Some(kinds) => {
            let (condition, values) = one_of_text(backend, "kind", first, kinds.to_vec());
            (format!(" AND {condition}"), values)
        }
        None => (String::new(), Vec::new()),
    }
}

/// One statement: the wakes deleted and folded into their queues (in key order, so two claims folding at
/// once lock rows in the same order), then the due queues of the table as it was plus those the fold
/// changed, and one last row (no key) with the next ready time and the clock.
async fn due_postgres(
    db: &DatabaseConnection,
    table: &Table,
    kinds: Option<&[String]>,
    reading: Reading,
) -> Result<Due, DbErr> {
    let rows = db.query_all_raw(due_postgres_statement(table, kinds, reading)).await?;
    let mut due = Due {
        queues: Vec::with_capacity(rows.len()),
        next_in_ms: None,
        now_ms: 0,
    };
    for row in rows {
        let account: Option<String> = row.try_get_by_index(1)?;
        if account.is_none() {
            let next: Option<i64> = row.try_get_by_index(4)?;
            due.now_ms = row.try_get_by_index(7)?;
            due.next_in_ms = next.map(|ready_ms| ready_ms - due.now_ms);
        } else {
            due.queues.push(seen(&row)?);
        }
    }
    // The longest ready first: the order the plan's turns start from.
    due.queues.sort_by_key(|q| (q.head.ready_ms, q.tie));
    Ok(due)
}

/// The statement `due_postgres` runs.
pub(super) fn due_postgres_statement(table: &Table, kinds: Option<&[String]>, reading: Reading) -> Statement {
    let key = "class, account_id, lane, kind";
    let (runs, kind_values) = of_kinds(DbBackend::Postgres, kinds, 4);
    let known = |class: i32| {
        format!(
            "(SELECT {key}, ready_ms, woken, tie FROM job_queues WHERE tbl = $1 AND class = {class} \
             AND ready_ms <= (SELECT ms FROM clock){runs} ORDER BY ready_ms, tie LIMIT {MAX_PER_CLASS})"
        )
    };
    // The next ready time is of any kind: a queue of a kind this process does not run wakes it once, early,
    // where a filter on the kind made every claim walk past all such queues waiting for later.
    let later = |class: i32| {
        format!(
            "(SELECT min(ready_ms) FROM job_queues WHERE tbl = $1 AND class = {class} \
             AND ready_ms > (SELECT ms FROM clock))"
        )
    };
    let sql = format!(
        "WITH clock AS (SELECT db + $2::int8 AS ms, db FROM (SELECT {now} AS db) AS n), \
         woken AS (DELETE FROM job_queue_wakes WHERE tbl = $1 RETURNING {key}, due_ms), \
         folded AS (INSERT INTO job_queues AS q (tbl, {key}, ready_ms, woken, tie) \
           SELECT $1, {key}, min(due_ms), 0, {RANDOM} FROM woken GROUP BY {key} ORDER BY {key} \
           ON CONFLICT (tbl, {key}) DO UPDATE SET ready_ms = LEAST(q.ready_ms, excluded.ready_ms), \
           woken = q.woken + 1 RETURNING {key}, ready_ms, woken, tie), \
         due AS (SELECT DISTINCT ON ({key}) {key}, ready_ms, woken, tie \
           FROM (SELECT * FROM folded UNION ALL {known0} UNION ALL {known1} UNION ALL ({expired})) AS a \
           WHERE ready_ms <= (SELECT ms FROM clock){runs} ORDER BY {key}, woken DESC) \
         SELECT {key}, ready_ms, woken, tie, (SELECT ms FROM clock) FROM due \
         UNION ALL SELECT NULL, NULL, NULL, NULL, LEAST({later0}, {later1}, \
           (SELECT min(ready_ms) FROM folded WHERE ready_ms > (SELECT ms FROM clock))), NULL, NULL, \
           (SELECT ms FROM clock)",
        now = now_ms(DbBackend::Postgres),
        known0 = known(0),
        known1 = known(1),
        later0 = later(0),
        later1 = later(1),
        // A condition on the clock alone: PostgreSQL evaluates it once and skips the look when false.
        expired = expired(
            table,
            DbBackend::Postgres,
            Lease {
                now: "(SELECT db FROM clock)",
                steer: "$2::int8",
            },
            &format!(" AND (SELECT ms FROM clock) >= $3{runs}"),
        ),
    );
    let mut values: Vec<Value> = vec![
        table.name.into(),
        reading.steer_ms.into(),
        reading.expired_from_ms.into(),
    ];
    values.extend(kind_values);
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// Where leases stand: `now`, the database's own clock, which a lease's end is kept on (a test clock's
/// steering moves when scheduled work is due, never how long a claim holds); `steer`, the steering, which
/// turns a lease's end into a ready time on the steered clock the queues are read on.
struct Lease<'a> {
    now: &'a str,
    steer: &'a str,
}

/// The queues of runs whose lease ended before `lease.now` (their worker died, or was paused past it), from
/// the index of claimed rows, which holds the rows running now and no others. Their `woken` matches no row,
/// so a claim that takes them settles nothing for them.
fn expired(table: &Table, backend: DbBackend, lease: Lease<'_>, runs: &str) -> String {
    let no_row = if backend == DbBackend::Postgres {
        "-1::int8"
    } else {
        "-1"
    };
    format!(
        "SELECT {class}, account_id, {lane}, {kind}, min({due}) + {steer}, {no_row}, 0 FROM {name} \
         WHERE status = 'pending' AND claim_token IS NOT NULL AND {due} <= {now}{runs} GROUP BY 1, 2, 3, 4",
        now = lease.now,
        steer = lease.steer,
        class = table.class.unwrap_or("0"),
        lane = table.lane,
        kind = table.kind.unwrap_or("''"),
        due = table.due,
        name = table.name,
    )
}

/// SQLite: the same reads, one statement each (it runs in this process); its trigger wrote the rows.
async fn due_sqlite(
    db: &DatabaseConnection,
    backend: DbBackend,
    table: &Table,
    kinds: Option<&[String]>,
    reading: Reading,
) -> Result<Due, DbErr> {
    let clock = db
        .query_one_raw(Statement::from_string(backend, format!("SELECT {}", now_ms(backend))))
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("the database's clock".into()))?;
    let now_ms = clock.try_get_by_index::<i64>(0)? + reading.steer_ms;
    let mut queues = Vec::new();
    for class in [0, 1] {
        let (runs, kind_values) = of_kinds(backend, kinds, 4);
        let sql = format!(
            "SELECT class, account_id, lane, kind, ready_ms, woken, tie FROM job_queues WHERE tbl = $1 \
             AND class = $2 AND ready_ms <= $3{runs} ORDER BY ready_ms, tie LIMIT {MAX_PER_CLASS}"
        );
        let mut values: Vec<Value> = vec![table.name.into(), class.into(), now_ms.into()];
        values.extend(kind_values);
        for row in db
            .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?
        {
            queues.push(seen(&row)?);
        }
    }
    if now_ms >= reading.expired_from_ms {
        let (runs, kind_values) = of_kinds(backend, kinds, 3);
        let sql = expired(table, backend, Lease { now: "$1", steer: "$2" }, &runs);
        let known: std::collections::HashSet<QueueKey> = queues.iter().map(|q| q.head.key.clone()).collect();
        let mut values: Vec<Value> = vec![(now_ms - reading.steer_ms).into(), reading.steer_ms.into()];
        values.extend(kind_values);
        for row in db
            .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?
        {
            let expired = seen(&row)?;
            if !known.contains(&expired.head.key) {
                queues.push(expired);
            }
        }
    }
    queues.sort_by_key(|q| (q.head.ready_ms, q.tie));
    // Of any kind, as on PostgreSQL.
    let sql = "SELECT min(ready_ms) FROM job_queues WHERE tbl = $1 AND ready_ms > $2";
    let values: [Value; 2] = [table.name.into(), now_ms.into()];
    let next = db
        .query_one_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?;
    let next_in_ms = match next {
        Some(row) => row
            .try_get_by_index::<Option<i64>>(0)?
            .map(|ready_ms| ready_ms - now_ms),
        None => None,
    };
    Ok(Due {
        queues,
        next_in_ms,
        now_ms,
    })
}

fn seen(row: &QueryResult) -> Result<Seen, DbErr> {
    Ok(Seen {
        head: Head {
            key: QueueKey {
                class: row.try_get_by_index(0)?,
                account: row.try_get_by_index(1)?,
                lane: row.try_get_by_index(2)?,
                kind: row.try_get_by_index(3)?,
            },
            ready_ms: row.try_get_by_index(4)?,
        },
        woken: row.try_get_by_index(5)?,
        tie: row.try_get_by_index(6)?,
    })
}

/// Settles the queues a claim planned, in its transaction after it took its rows: each `(queue, served)`
/// gets its next ready time from its earliest waiting row (pending and not claimed: running rows, those
/// just taken included, keep no queue ready), served ones no sooner than `now_ms`; a queue with no waiting
/// row is deleted. A row folded since the claim read it (or, on PostgreSQL, locked by a fold now) is left
/// alone: the wake's time stands.
pub async fn settle(
    txn: &DatabaseTransaction,
    table: &Table,
    planned: Vec<(&Seen, bool)>,
    now_ms: i64,
) -> Result<(), DbErr> {
    if planned.is_empty() {
        return Ok(());
    }
    let backend = txn.get_database_backend();
    if backend != DbBackend::Postgres {
        return settle_sqlite(txn, backend, table, planned, now_ms).await;
    }
    let mut matches = vec![
        "t.account_id = h.account_id".to_owned(),
        format!("t.{} = h.lane", table.lane),
    ];
    matches.extend(table.class.map(|c| format!("t.{c} = h.class")));
    matches.extend(table.kind.map(|k| format!("t.{k} = h.kind")));
    let same = "q.tbl = $1 AND (q.class, q.account_id, q.lane, q.kind) = (h.class, h.account_id, h.lane, h.kind)";
    let sql = format!(
        "WITH k AS (SELECT * FROM unnest($3::int4[], $4::text[], $5::text[], $6::text[], $7::int8[], $8::bool[]) \
           AS k(class, account_id, lane, kind, woken, served)), \
         held AS (SELECT q.class, q.account_id, q.lane, q.kind, k.served FROM job_queues AS q \
           JOIN k USING (class, account_id, lane, kind) WHERE q.tbl = $1 AND q.woken = k.woken \
           FOR UPDATE OF q SKIP LOCKED), \
         heads AS (SELECT h.*, (SELECT min(t.{due}) FROM {name} AS t WHERE t.status = 'pending' \
           AND t.claim_token IS NULL AND {m}) AS head \
           FROM held AS h), \
         gone AS (DELETE FROM job_queues AS q USING heads AS h WHERE {same} AND h.head IS NULL) \
         UPDATE job_queues AS q SET ready_ms = CASE WHEN h.served THEN GREATEST(h.head, $2) \
           WHEN h.head > $2 THEN h.head ELSE q.ready_ms END, tie = CASE WHEN h.served THEN {RANDOM} \
           ELSE q.tie END FROM heads AS h WHERE {same} AND h.head IS NOT NULL",
        due = table.due,
        name = table.name,
        m = matches.join(" AND "),
    );
    let n = planned.len();
    let (mut classes, mut accounts, mut lanes, mut kinds, mut woken, mut served) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for (seen, was_served) in planned {
        let key = &seen.head.key;
        classes.push(key.class);
        accounts.push(key.account.clone());
        lanes.push(key.lane.clone());
        kinds.push(key.kind.clone());
        woken.push(seen.woken);
        served.push(was_served);
    }
    let values: Vec<Value> = vec![
        table.name.into(),
        now_ms.into(),
        classes.into(),
        accounts.into(),
        lanes.into(),
        kinds.into(),
        woken.into(),
        served.into(),
    ];
    txn.execute_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?;
    Ok(())
}

/// SQLite: one queue at a time, in the claim's transaction (its only writer).
async fn settle_sqlite(
    txn: &DatabaseTransaction,
    backend: DbBackend,
    table: &Table,
    planned: Vec<(&Seen, bool)>,
    now_ms: i64,
) -> Result<(), DbErr> {
    let matches: Vec<String> = table
        .key_columns()
        .iter()
        .enumerate()
        .map(|(at, column)| format!("{column} = ${}", at + 1))
        .collect();
    let head_sql = format!(
        "SELECT min({}) FROM {} WHERE status = 'pending' AND claim_token IS NULL AND {}",
        table.due,
        table.name,
        matches.join(" AND ")
    );
    let row_of = |first: usize| {
        format!(
            "tbl = ${} AND class = ${} AND account_id = ${} AND lane = ${} AND kind = ${} AND woken = ${}",
            first,
            first + 1,
            first + 2,
            first + 3,
            first + 4,
            first + 5
        )
    };
    for (seen, served) in planned {
        let key = &seen.head.key;
        let head = txn
            .query_one_raw(Statement::from_sql_and_values(
                backend,
                head_sql.clone(),
                table.key_values(key),
            ))
            .await?
            .map(|row| row.try_get_by_index::<Option<i64>>(0))
            .transpose()?
            .flatten();
        let mut values: Vec<Value> = Vec::with_capacity(7);
        let sql = match head {
            Some(head) if served || head > now_ms => {
                values.push(head.max(now_ms).into());
                format!(
                    "UPDATE job_queues SET ready_ms = $1, tie = random() WHERE {}",
                    row_of(2)
                )
            }
            // Due rows it could not take: the queue keeps its place in line.
            Some(_) => continue,
            None => format!("DELETE FROM job_queues WHERE {}", row_of(1)),
        };
        values.extend([
            table.name.into(),
            key.class.into(),
            key.account.clone().into(),
            key.lane.clone().into(),
            key.kind.clone().into(),
            seen.woken.into(),
        ]);
        txn.execute_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};

    use super::{due, settle};
    use crate::{
        jobs::{NewJob, enqueue, runner::JOBS},
        store::test_databases::{Kind, TestDb},
    };

    async fn enqueue_one(db: &DatabaseConnection) {
        let job = NewJob {
            account_id: "acc_a".into(),
            kind: "work",
            lane: "ch".into(),
            payload: serde_json::json!({}),
            run_at_ms: Utc::now().timestamp_millis(),
            max_attempts: 3,
            ..NewJob::default()
        };
        enqueue(db, job, Utc::now()).await.unwrap();
    }

    /// The database's clock as it is.
    const NOW: super::Reading = super::Reading {
        steer_ms: 0,
        expired_from_ms: 0,
    };

    async fn ready_and_tie(db: &DatabaseConnection) -> (i64, i64) {
        let sql = "SELECT ready_ms, tie FROM job_queues WHERE tbl = 'jobs' AND account_id = 'acc_a'";
        let row = db
            .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
            .await
            .unwrap()
            .unwrap();
        (row.try_get_by_index(0).unwrap(), row.try_get_by_index(1).unwrap())
    }

    /// A claim that read a queue, then settles it after a wake arrived for it, leaves the row as the wake
    /// made it: its read may predate the woken job, and moving the queue on would hide that job.
    async fn a_settle_leaves_a_queue_woken_since_it_was_read(kind: Kind) {
        let test = TestDb::new(kind, 4).await;
        let db = &test.db;
        let kinds = ["work".to_owned()];
        enqueue_one(db).await;
        let read = due(db, &JOBS, Some(&kinds), NOW).await.unwrap();
        enqueue_one(db).await;
        let woken = due(db, &JOBS, Some(&kinds), NOW).await.unwrap();
        let before = ready_and_tie(db).await;
        let later = read.now_ms + 60_000;

        let txn = crate::store::begin_write(db).await.unwrap();
        settle(&txn, &JOBS, vec![(&read.queues[0], true)], later).await.unwrap();
        txn.commit().await.unwrap();
        assert_eq!(ready_and_tie(db).await, before, "the stale read settled nothing");

        let txn = crate::store::begin_write(db).await.unwrap();
        settle(&txn, &JOBS, vec![(&woken.queues[0], true)], later)
            .await
            .unwrap();
        txn.commit().await.unwrap();
        assert_eq!(
            ready_and_tie(db).await.0,
            later,
            "a read after the wake settles the queue"
        );
        test.remove().await;
    }

    #[tokio::test]
    async fn a_settle_leaves_a_queue_woken_since_it_was_read_postgres() {
        a_settle_leaves_a_queue_woken_since_it_was_read(Kind::Postgres).await;
    }

    #[tokio::test]
    async fn a_settle_leaves_a_queue_woken_since_it_was_read_sqlite() {
        a_settle_leaves_a_queue_woken_since_it_was_read(Kind::Sqlite).await;
    }
}
