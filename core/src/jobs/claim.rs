//! One claim: the fair plan of `fair`, taken from the table in one transaction. It reads what runs now across
//! replicas (claimed rows whose lease has not ended), the head of every queue (a loose index scan: one index
//! probe per queue, however long each queue is), plans who gets the free slots, and takes each planned
//! queue's oldest due rows: their due time moves to the end of a lease and they get a fresh claim token. On
//! PostgreSQL claims take turns across replicas (a transaction-scoped advisory lock per table), so the caps,
//! read from the table, hold across replicas; SQLite has one writer at a time. Due times and leases are
//! read and written on the database's clock, which every replica shares, so a replica whose clock runs
//! ahead takes nothing still held. The try count does not move: a row whose worker died is claimed again
//! when its lease ends, as the same try; the claim counts the run instead (`Table::unfinished_runs`), so a
//! job whose runs keep killing their worker ends after a few.

use std::collections::{HashMap, HashSet};

use rand::Rng;
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, QueryResult, Statement, Value};

use super::{
    fair::{self, BULK, Budget, Caps, Loads, Rotation},
    queue::{QueueKey, Table},
};
use crate::store::sql::{among, locking, now_ms, one_of_text, placeholders};

/// Queues read per claim at most; past it, the next claim reads on from where this one stopped.
const MAX_QUEUES: usize = 1_000;

/// What one claim took.
pub struct Taken {
    /// The rows, each with its queue: the key columns, then `id`, then the table's `returning` columns.
    pub rows: Vec<(QueueKey, QueryResult)>,
    pub token: i64,
    /// Fewer rows than the budget allowed: the due work is taken, or what is left waits for a cap.
    pub idle: bool,
    /// Due work was left behind (its queues at a cap), so looking again soon may find room.
    pub waiting: bool,
    /// How long until the earliest queue head not yet due, among the queues read.
    pub next_in_ms: Option<i64>,
}

/// The claimer's state between claims (in this process): the turn order and where the queue scan resumes.
#[derive(Default)]
pub struct Claimer {
    pub rotation: Rotation,
    cursor: Option<QueueKey>,
}

/// What a claim may take: the queues this process runs (`runs`), none that rests, under `caps`, within
/// `budget`.
pub struct Wanted<'a> {
    pub runs: &'a (dyn Fn(&QueueKey) -> bool + Sync),
    pub resting: &'a HashSet<QueueKey>,
    pub caps: Caps,
    pub budget: Budget,
    /// This process's rows whose runs ended and whose outcomes wait for the recorder (ids): claimed in the
    /// table until then, but holding no provider and no worker, so the loads leave them out.
    pub finished: Vec<String>,
}

/// Claims what is due now on the database's clock, moved by `steer_ms` (a test clock's steering), for
/// leases of `lease_ms`.
pub async fn claim(
    db: &sea_orm::DatabaseConnection,
    table: &'static Table,
    claimer: &mut Claimer,
    wanted: Wanted<'_>,
    steer_ms: i64,
    lease_ms: i64,
) -> Result<Taken, DbErr> {
    let token = rand::rng().random::<i64>();
    // The heads are read outside the claim's transaction: an idle poll costs that one read.
    let (seen, db_now_ms) = heads(db, table, &mut claimer.cursor).await?;
    let now_ms = match db_now_ms {
        Some(now_ms) => now_ms,
        None if seen.is_empty() => 0,
        None => db_now(db).await?,
    } + steer_ms;
    let runnable = |key: &QueueKey| (wanted.runs)(key) && !wanted.resting.contains(key);
    let mut due: Vec<QueueKey> = seen
        .iter()
        .filter(|(key, head_ms)| *head_ms <= now_ms && runnable(key))
        .map(|(key, _)| key.clone())
        .collect();
    let next_in_ms = seen
        .iter()
        .filter(|(key, head_ms)| *head_ms > now_ms && runnable(key))
        .map(|(_, head_ms)| head_ms - now_ms)
        .min();
    if due.is_empty() {
        metrics::counter!("frontdesk_job_claims_total", "table" => table.name, "result" => "empty").increment(1);
        return Ok(Taken {
            rows: Vec::new(),
            token,
            idle: true,
            waiting: false,
            next_in_ms,
        });
    }
    let txn = crate::store::begin_write(db).await?;
    if txn.get_database_backend() == DbBackend::Postgres {
        // Claims take turns across replicas, so the loads they read hold until they commit; each queue's rows
        // come in due order from the index, whatever the statistics say (a bitmap scan would read and sort a
        // whole backlog to keep its first few). One round trip for both.
        txn.execute_unprepared(&format!(
            "SET LOCAL enable_bitmapscan = off; SELECT pg_advisory_xact_lock({})",
            lock_key(table.name)
        ))
        .await?;
    }
    let mut loads = loads(&txn, table, now_ms, wanted.finished).await?;
    let mut budget = wanted.budget;
    let mut rows = Vec::new();
    let mut served: HashSet<QueueKey> = HashSet::new();
    // Bulk queues whose head waited past the age go first for their share.
    let aged: Vec<QueueKey> = seen
        .iter()
        .filter(|(key, head_ms)| key.class == BULK && *head_ms <= now_ms - fair::BULK_AGE_MS && runnable(key))
        .map(|(key, _)| key.clone())
        .collect();
    // A second pass hands the slots that drained queues left unused to the queues that had more.
    for pass in 0..2 {
        let aged: &[QueueKey] = if pass == 0 { &aged } else { &[] };
        let plan = fair::plan(&due, aged, &mut loads, wanted.caps, budget, &claimer.rotation);
        if plan.is_empty() {
            break;
        }
        let taken = take(&txn, table, &plan, token, now_ms, lease_ms).await?;
        let mut got: HashMap<&QueueKey, u32> = HashMap::new();
        for (key, _) in &taken {
            *got.entry(key).or_default() += 1;
        }
        let mut full = Vec::new();
        for (key, planned) in &plan {
            let n = got.get(key).copied().unwrap_or(0);
            loads.remove(key, planned - n);
            if n > 0 {
                served.insert(key.clone());
            }
            if n == *planned {
                full.push(key.clone());
            }
        }
        let bulk = taken.iter().filter(|(key, _)| key.class == BULK).count();
        budget.free -= taken.len();
        budget.bulk = budget.bulk.saturating_sub(bulk);
        rows.extend(taken);
        if full.len() == plan.len() || budget.free == 0 {
            break;
        }
        due = full;
    }
    txn.commit().await?;
    let seen_keys: Vec<QueueKey> = seen.into_iter().map(|(key, _)| key).collect();
    claimer.rotation.served(&served, &seen_keys);
    metrics::counter!("frontdesk_job_claims_total", "table" => table.name, "result" => if rows.is_empty() { "empty" } else { "taken" })
        .increment(1);
    Ok(Taken {
        idle: budget.free > 0,
        waiting: budget.free > 0,
        rows,
        token,
        next_in_ms,
    })
}

/// A stable advisory-lock number per table.
fn lock_key(table: &str) -> i64 {
    // FNV-1a: the same number in every process and release.
    let hash = table.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    i64::from_ne_bytes(hash.to_ne_bytes())
}

/// Running rows by lane and by account and class, across replicas: claimed, lease not over, and not among
/// this process's `finished` ones.
async fn loads(txn: &DatabaseTransaction, table: &Table, now_ms: i64, finished: Vec<String>) -> Result<Loads, DbErr> {
    let backend = txn.get_database_backend();
    let class = table.class.unwrap_or("0");
    let group = match table.class {
        Some(class) => format!("{class}, account_id, {}", table.lane),
        None => format!("account_id, {}", table.lane),
    };
    let mut values: Vec<Value> = vec![now_ms.into()];
    let mut skip = String::new();
    if !finished.is_empty() {
        let (which, ids) = one_of_text(backend, "id", 2, finished);
        skip = format!(" AND NOT ({which})");
        values.extend(ids);
    }
    let sql = format!(
        "SELECT {class}, account_id, {}, COUNT(*) FROM {} WHERE claim_token IS NOT NULL AND status = 'pending' \
         AND {} > $1{skip} GROUP BY {group}",
        table.lane, table.name, table.due
    );
    let rows = txn
        .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?;
    let mut loads = Loads::default();
    for row in rows {
        let key = QueueKey {
            class: row.try_get_by_index(0)?,
            account: row.try_get_by_index(1)?,
            lane: row.try_get_by_index(2)?,
            kind: String::new(),
        };
        let n: i64 = row.try_get_by_index(3)?;
        loads.add(&key, u32::try_from(n).unwrap_or(u32::MAX));
    }
    Ok(loads)
}

/// The database's clock now, Unix milliseconds.
async fn db_now(db: &sea_orm::DatabaseConnection) -> Result<i64, DbErr> {
    let backend = db.get_database_backend();
    let sql = format!("SELECT {}", now_ms(backend));
    let row = db
        .query_one_raw(Statement::from_string(backend, sql))
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("the database's clock".into()))?;
    row.try_get_by_index(0)
}

/// Every queue with pending rows and its head (its earliest due time), from the cursor on and round to it,
/// `MAX_QUEUES` at most; the cursor moves on when that many were read. With them, the database's clock
/// when PostgreSQL read them.
async fn heads(
    db: &sea_orm::DatabaseConnection,
    table: &Table,
    cursor: &mut Option<QueueKey>,
) -> Result<(Vec<(QueueKey, i64)>, Option<i64>), DbErr> {
    let (mut found, mut db_now_ms) = read_heads(db, table, cursor.as_ref(), MAX_QUEUES).await?;
    if found.len() < MAX_QUEUES && cursor.is_some() {
        let known: HashSet<QueueKey> = found.iter().map(|(key, _)| key.clone()).collect();
        let (wrapped, now_ms) = read_heads(db, table, None, MAX_QUEUES - found.len()).await?;
        db_now_ms = db_now_ms.or(now_ms);
        found.extend(wrapped.into_iter().filter(|(key, _)| !known.contains(key)));
    }
    *cursor = if found.len() >= MAX_QUEUES {
        found.last().map(|(key, _)| key.clone())
    } else {
        None
    };
    Ok((found, db_now_ms))
}

/// Up to `limit` queues after `after` (from the first when `None`) in key order, with their heads; on
/// PostgreSQL, with the database's clock as the same statement read it.
async fn read_heads(
    db: &sea_orm::DatabaseConnection,
    table: &Table,
    after: Option<&QueueKey>,
    limit: usize,
) -> Result<(Vec<(QueueKey, i64)>, Option<i64>), DbErr> {
    let backend = db.get_database_backend();
    let columns = table.key_columns().join(", ");
    let next_after = |previous: &str| -> String {
        let tuple = table
            .key_columns()
            .iter()
            .map(|c| format!("{previous}{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!("AND ({columns}) > ({tuple})")
    };
    let first = |condition: &str| {
        format!(
            "SELECT {columns}, {due} AS head FROM {name} WHERE status = 'pending' {condition} \
             ORDER BY {columns}, {due} LIMIT 1",
            due = table.due,
            name = table.name
        )
    };
    let mut values: Vec<Value> = Vec::new();
    let anchor = match after {
        Some(key) => {
            values = table.key_values(key);
            first(&format!("AND ({columns}) > ({})", placeholders(1, values.len())))
        }
        None => first(""),
    };
    if backend == DbBackend::Postgres {
        // A loose index scan: each step is one probe of the queues' index for the next key.
        let step = first(&next_after("q."));
        let sql = format!(
            "WITH RECURSIVE q AS (({anchor}) UNION ALL SELECT n.* FROM q CROSS JOIN LATERAL ({step}) AS n) \
             SELECT q.*, {now} FROM q LIMIT {limit}",
            now = now_ms(backend)
        );
        let rows = db
            .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?;
        let db_now_ms = match rows.last() {
            Some(row) => Some(row.try_get_by_index(table.key_columns().len() + 1)?),
            None => None,
        };
        let found = rows.iter().map(|row| head_of(table, row)).collect::<Result<_, _>>()?;
        return Ok((found, db_now_ms));
    }
    // SQLite runs in process: one probe per statement costs about what a step of the recursion would.
    let mut found = Vec::new();
    let mut statement = Statement::from_sql_and_values(backend, anchor, values);
    let key_count = table.key_columns().len();
    while found.len() < limit {
        let Some(row) = db.query_one_raw(statement).await? else {
            break;
        };
        let (key, head) = head_of(table, &row)?;
        let values = table.key_values(&key);
        statement = Statement::from_sql_and_values(
            backend,
            first(&format!("AND ({columns}) > ({})", placeholders(1, key_count))),
            values,
        );
        found.push((key, head));
    }
    Ok((found, None))
}

fn head_of(table: &Table, row: &QueryResult) -> Result<(QueueKey, i64), DbErr> {
    Ok((table.key_of(row)?, row.try_get_by_index(table.key_columns().len())?))
}

/// Takes the planned number of each queue's oldest due rows.
async fn take(
    txn: &DatabaseTransaction,
    table: &Table,
    plan: &[(QueueKey, u32)],
    token: i64,
    now_ms: i64,
    lease_ms: i64,
) -> Result<Vec<(QueueKey, QueryResult)>, DbErr> {
    let backend = txn.get_database_backend();
    let columns = table.key_columns();
    let returning = format!("{}, id, {}", columns.join(", "), table.returning);
    // A crash of the run is counted now: only its outcome or its release takes the count back.
    let counted = table
        .unfinished_runs
        .map(|c| format!(", {c} = {c} + 1"))
        .unwrap_or_default();
    let mut values: Vec<Value> = vec![(now_ms + lease_ms).into(), token.into(), now_ms.into()];
    let rows = if backend == DbBackend::Postgres {
        // One statement for the whole plan: a queue's rows per element of the arrays.
        let mut arrays = Vec::new();
        for (at, column) in columns.iter().enumerate() {
            let cast = if Some(*column) == table.class { "int4" } else { "text" };
            arrays.push(format!("${}::{cast}[]", values.len() + 1));
            values.push(match at {
                _ if Some(*column) == table.class => plan.iter().map(|(k, _)| k.class).collect::<Vec<_>>().into(),
                _ if *column == "account_id" => plan.iter().map(|(k, _)| k.account.clone()).collect::<Vec<_>>().into(),
                _ if *column == table.lane => plan.iter().map(|(k, _)| k.lane.clone()).collect::<Vec<_>>().into(),
                _ => plan.iter().map(|(k, _)| k.kind.clone()).collect::<Vec<_>>().into(),
            });
        }
        arrays.push(format!("${}::int8[]", values.len() + 1));
        values.push(plan.iter().map(|(_, n)| i64::from(*n)).collect::<Vec<_>>().into());
        let names: Vec<String> = (0..columns.len()).map(|n| format!("k{n}")).collect();
        let matches: Vec<String> = columns
            .iter()
            .zip(&names)
            .map(|(column, name)| format!("{column} = q.{name}"))
            .collect();
        let oldest = locking(
            backend,
            &format!(
                "SELECT id FROM {t} WHERE status = 'pending' AND {m} AND {due} <= $3 ORDER BY {due} LIMIT q.n",
                t = table.name,
                m = matches.join(" AND "),
                due = table.due
            ),
        );
        let picked = among(
            backend,
            "id",
            &format!(
                "SELECT c.id FROM unnest({}) AS q({}, n) CROSS JOIN LATERAL ({oldest}) AS c",
                arrays.join(", "),
                names.join(", ")
            ),
        );
        let sql = format!(
            "UPDATE {t} SET {due} = $1, claim_token = $2{counted} WHERE {picked} RETURNING {returning}",
            t = table.name,
            due = table.due
        );
        txn.query_all_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?
    } else {
        let matches: Vec<String> = columns
            .iter()
            .enumerate()
            .map(|(at, column)| format!("{column} = ${}", at + 4))
            .collect();
        let sql = format!(
            "UPDATE {t} SET {due} = $1, claim_token = $2{counted} WHERE id IN (SELECT id FROM {t} WHERE \
             status = 'pending' AND {m} AND {due} <= $3 ORDER BY {due} LIMIT ${limit}) RETURNING {returning}",
            t = table.name,
            due = table.due,
            m = matches.join(" AND "),
            limit = columns.len() + 4
        );
        let mut rows = Vec::new();
        for (key, n) in plan {
            let mut values = values.clone();
            values.extend(table.key_values(key));
            values.push(i64::from(*n).into());
            rows.extend(
                txn.query_all_raw(Statement::from_sql_and_values(backend, sql.clone(), values))
                    .await?,
            );
        }
        rows
    };
    rows.into_iter().map(|row| Ok((table.key_of(&row)?, row))).collect()
}
