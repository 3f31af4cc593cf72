//! One claim: the fair plan of `fair`, taken from the table in one transaction. It reads the due queues
//! from the ready queues (`ready`: one index read, however many queues wait for later), takes the turns
//! of the accounts it will serve (a transaction-scoped advisory lock per account on PostgreSQL, tried and
//! never waited for: an account another replica is claiming now is left to it, and claims of different
//! accounts run side by side), reads what those accounts run now across replicas (claimed rows whose
//! lease has not ended), plans who gets the free slots, takes each planned queue's oldest due rows (their
//! due time moves to the end of a lease and they get a fresh claim token) and settles the queues it
//! planned in the ready queues. The caps are per account, so the account's lock makes them hold across
//! replicas; SQLite has one writer at a time. Due times and leases are read and written on the database's
//! clock, which every replica shares, so a replica whose clock runs ahead takes nothing still held. The
//! try count does not move: a row whose worker died is claimed again when its lease ends, as the same try;
//! the claim counts the run instead (`Table::unfinished_runs`), so a job whose runs keep killing their
//! worker ends after a few.

use std::collections::{HashMap, HashSet};

use rand::Rng;
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, QueryResult, Statement, Value};

use super::{
    fair::{self, BULK, Budget, Caps, Head, Loads},
    queue::{QueueKey, Table},
    ready::{self, Seen},
};
use crate::store::sql::{among, locking, one_of_text};

/// Accounts one round of a claim locks at most (each lock is held until the claim commits), and rounds
/// per claim.
const MAX_ACCOUNTS: usize = 64;
const MAX_ROUNDS: usize = 3;

/// What one claim took.
pub struct Taken {
    /// The rows, each with its queue: the key columns, then `id`, then the table's `returning` columns.
    pub rows: Vec<(QueueKey, QueryResult)>,
    pub token: i64,
    /// Fewer rows than the budget allowed: the due work is taken, or what is left waits for a cap.
    pub idle: bool,
    /// Due work was left behind (its queues at a cap, or its accounts claimed by another replica), so
    /// looking again soon may find room.
    pub waiting: bool,
    /// How long until the earliest queue not yet due is ready.
    pub next_in_ms: Option<i64>,
    /// The database's clock (steered) the claim read its queues at.
    pub now_ms: i64,
}

/// What a claim may take: the queues of the kinds this process runs (`None`: a table without kinds), none
/// that rests, under `caps`, within `budget`.
pub struct Wanted<'a> {
    pub kinds: Option<&'a [String]>,
    pub resting: &'a HashSet<QueueKey>,
    pub caps: Caps,
    pub budget: Budget,
    /// This process's rows whose runs ended and whose outcomes wait for the recorder (ids): claimed in the
    /// table until then, but holding no provider and no worker, so the loads leave them out.
    pub finished: Vec<String>,
}

/// Claims what is due now on the clock `reading` stands on, for leases of `lease_ms`.
pub async fn claim(
    db: &sea_orm::DatabaseConnection,
    table: &'static Table,
    wanted: Wanted<'_>,
    reading: ready::Reading,
    lease_ms: i64,
) -> Result<Taken, DbErr> {
    let (token, draw) = {
        let mut rng = rand::rng();
        (rng.random::<i64>(), rng.random::<u64>())
    };
    // The due queues are read outside the claim's transaction: an idle poll costs that one read.
    let found = ready::due(db, table, wanted.kinds, reading).await?;
    let now_ms = found.now_ms;
    let due: Vec<Seen> = found
        .queues
        .into_iter()
        .filter(|q| !wanted.resting.contains(&q.head.key))
        .collect();
    if due.is_empty() {
        metrics::counter!("frontdesk_job_claims_total", "table" => table.name, "result" => "empty").increment(1);
        return Ok(Taken {
            rows: Vec::new(),
            token,
            idle: true,
            waiting: false,
            next_in_ms: found.next_in_ms,
            now_ms,
        });
    }
    // The accounts ready longest first (the queues come oldest first).
    let mut accounts: Vec<String> = Vec::new();
    let mut listed: HashSet<&str> = HashSet::new();
    for queue in &due {
        if listed.insert(queue.head.key.account.as_str()) {
            accounts.push(queue.head.key.account.clone());
        }
    }
    let txn = crate::store::begin_write(db).await?;
    let mut claiming = Claiming {
        txn: &txn,
        table,
        token,
        now_ms,
        steer_ms: reading.steer_ms,
        lease_ms,
        draw,
        caps: wanted.caps,
        budget: wanted.budget,
        loads: Loads::default(),
        rows: Vec::new(),
        planned: HashMap::new(),
    };
    let mut served_from: Vec<&Seen> = Vec::new();
    let mut full: Vec<Head> = Vec::new();
    let mut passed_over = accounts.len() > MAX_ACCOUNTS * MAX_ROUNDS;
    // Rounds of accounts, so that queues found with nothing left to take (their work finished since they
    // were last settled) cannot leave the slots to the few accounts that came with them.
    for batch in accounts.chunks(MAX_ACCOUNTS).take(MAX_ROUNDS) {
        let mine: HashSet<String> = lock_accounts(&txn, table, batch.to_vec()).await?.into_iter().collect();
        passed_over |= mine.len() < batch.len();
        claiming
            .loads
            .extend(loads(&txn, table, now_ms, wanted.finished.clone(), &mine).await?);
        let round: Vec<&Seen> = due.iter().filter(|q| mine.contains(&q.head.key.account)).collect();
        let heads: Vec<Head> = round.iter().map(|q| q.head.clone()).collect();
        // Bulk queues ready past the age without a turn go first for their share.
        let aged: Vec<Head> = heads
            .iter()
            .filter(|head| head.key.class == BULK && head.ready_ms <= now_ms - fair::BULK_AGE_MS)
            .cloned()
            .collect();
        let filled = claiming.take(&heads, &aged).await?;
        full.extend(heads.into_iter().filter(|head| filled.contains(&head.key)));
        served_from.extend(round);
        if claiming.budget.free == 0 {
            break;
        }
    }
    // The slots that drained queues left unused go to the queues that had more.
    if claiming.budget.free > 0 && !full.is_empty() {
        claiming.take(&full, &[]).await?;
    }
    let Claiming {
        rows, planned, budget, ..
    } = claiming;
    let settled: Vec<(&Seen, bool)> = served_from
        .into_iter()
        .filter_map(|q| planned.get(&q.head.key).map(|served| (q, *served)))
        .collect();
    ready::settle(&txn, table, settled, now_ms).await?;
    txn.commit().await?;
    metrics::counter!("frontdesk_job_claims_total", "table" => table.name, "result" => if rows.is_empty() { "empty" } else { "taken" })
        .increment(1);
    Ok(Taken {
        idle: budget.free > 0,
        waiting: budget.free > 0 || passed_over,
        rows,
        token,
        next_in_ms: found.next_in_ms,
        now_ms,
    })
}

/// A claim under way, in its transaction.
struct Claiming<'a> {
    txn: &'a DatabaseTransaction,
    table: &'static Table,
    token: i64,
    now_ms: i64,
    steer_ms: i64,
    lease_ms: i64,
    draw: u64,
    caps: Caps,
    budget: Budget,
    loads: Loads,
    rows: Vec<(QueueKey, QueryResult)>,
    /// The queues planned, and whether each gave a row.
    planned: HashMap<QueueKey, bool>,
}

impl Claiming<'_> {
    /// Plans the free slots among `heads` (`aged` first) and takes the plan; the queues that gave every
    /// row planned, which may have more.
    async fn take(&mut self, heads: &[Head], aged: &[Head]) -> Result<HashSet<QueueKey>, DbErr> {
        let plan = fair::plan(heads, aged, &mut self.loads, self.caps, self.budget, self.draw);
        if plan.is_empty() {
            return Ok(HashSet::new());
        }
        let taken = take(
            self.txn,
            self.table,
            &plan,
            self.token,
            self.now_ms,
            self.steer_ms,
            self.lease_ms,
        )
        .await?;
        let mut got: HashMap<&QueueKey, u32> = HashMap::new();
        for (key, _) in &taken {
            *got.entry(key).or_default() += 1;
        }
        let mut full = HashSet::new();
        for (key, wanted) in &plan {
            let n = got.get(key).copied().unwrap_or(0);
            self.loads.remove(key, wanted - n);
            *self.planned.entry(key.clone()).or_default() |= n > 0;
            if n == *wanted {
                full.insert(key.clone());
            }
        }
        let bulk = taken.iter().filter(|(key, _)| key.class == BULK).count();
        self.budget.free -= taken.len();
        self.budget.bulk = self.budget.bulk.saturating_sub(bulk);
        self.rows.extend(taken);
        Ok(full)
    }
}

/// Takes the turns of `accounts` for this claim and says which it got: on PostgreSQL a transaction-scoped
/// advisory lock per account and table, tried without waiting (an account another replica is claiming now
/// is its), in one round trip that also keeps the index order for the take (a bitmap scan would read and
/// sort a whole backlog to keep its first few rows); SQLite has one writer at a time, so all of them.
async fn lock_accounts(txn: &DatabaseTransaction, table: &Table, accounts: Vec<String>) -> Result<Vec<String>, DbErr> {
    if txn.get_database_backend() != DbBackend::Postgres {
        return Ok(accounts);
    }
    let sql = "SELECT set_config('enable_bitmapscan', 'off', true), ARRAY(SELECT a FROM unnest($1::text[]) AS a \
               WHERE pg_try_advisory_xact_lock(hashtextextended($2 || a, 0)))";
    let prefix = format!("{}:", table.name);
    let row = txn
        .query_one_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            sql,
            [accounts.into(), prefix.into()],
        ))
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("the accounts' locks".into()))?;
    row.try_get_by_index(1)
}

/// Running rows of `accounts` by lane and by account and class, across replicas: claimed, lease not over,
/// and not among this process's `finished` ones.
async fn loads(
    txn: &DatabaseTransaction,
    table: &Table,
    now_ms: i64,
    finished: Vec<String>,
    accounts: &HashSet<String>,
) -> Result<Loads, DbErr> {
    let backend = txn.get_database_backend();
    let class = table.class.unwrap_or("0");
    let group = match table.class {
        Some(class) => format!("{class}, account_id, {}", table.lane),
        None => format!("account_id, {}", table.lane),
    };
    let mut values: Vec<Value> = vec![now_ms.into()];
    let (of_accounts, ids) = one_of_text(backend, "account_id", 2, accounts.iter().cloned().collect());
    values.extend(ids);
    let mut skip = format!(" AND {of_accounts}");
    if !finished.is_empty() {
        let (which, ids) = one_of_text(backend, "id", values.len() + 1, finished);
        skip.push_str(&format!(" AND NOT ({which})"));
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

/// Takes the planned number of each queue's oldest due rows.
async fn take(
    txn: &DatabaseTransaction,
    table: &Table,
    plan: &[(QueueKey, u32)],
    token: i64,
    now_ms: i64,
    steer_ms: i64,
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
    // A lease ends on the database's own clock (see `lease`); scheduled rows are due on the steered one.
    let own_ms = now_ms - steer_ms;
    let mut values: Vec<Value> = vec![
        (own_ms + lease_ms).into(),
        token.into(),
        now_ms.max(own_ms).into(),
        now_ms.into(),
        own_ms.into(),
    ];
    let is_due = format!(
        "{due} <= $3 AND {due} <= CASE WHEN claim_token IS NULL THEN $4 ELSE $5 END",
        due = table.due
    );
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
                "SELECT id FROM {t} WHERE status = 'pending' AND {m} AND {is_due} ORDER BY {due} LIMIT q.n",
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
            .map(|(at, column)| format!("{column} = ${}", at + 6))
            .collect();
        let sql = format!(
            "UPDATE {t} SET {due} = $1, claim_token = $2{counted} WHERE id IN (SELECT id FROM {t} WHERE \
             status = 'pending' AND {m} AND {is_due} ORDER BY {due} LIMIT ${limit}) RETURNING {returning}",
            t = table.name,
            due = table.due,
            m = matches.join(" AND "),
            limit = columns.len() + 6
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
