//! Many queues and many accounts: a queue that becomes due is found as fast beside 30,000 queues that wait
//! for later as alone, and beside 1,500 due queues of a kind no one runs; 200 busy accounts among 2,000
//! share the slots whatever their ids; and a claim of one account does not wait for another replica's claim
//! of another; and statements that name their rows by id read no backlog whatever the statistics say.

use std::collections::HashMap;

use sea_orm::DbBackend;

use super::*;
use crate::jobs::{
    claim::{self, Wanted},
    fair::{Budget, Caps},
    ready::Reading,
    runner::JOBS,
};

/// The database's clock as it is, runs with ended leases looked for.
const READING: Reading = Reading {
    steer_ms: 0,
    expired_from_ms: 0,
};

/// Records which account each run was for and when it started.
#[derive(Default)]
struct Starts(Mutex<Vec<(String, String, Instant)>>);

#[async_trait::async_trait]
impl Handler for Starts {
    async fn run(&self, job: &Job) -> Outcome {
        self.0
            .lock()
            .unwrap()
            .push((job.account_id.clone(), job.lane.clone(), Instant::now()));
        tokio::time::sleep(Duration::from_millis(2)).await;
        Outcome::Done(None)
    }
}

impl Starts {
    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    async fn started(&self, lane: &str) -> Instant {
        let since = Instant::now();
        loop {
            if let Some((_, _, at)) = self.0.lock().unwrap().iter().find(|(_, l, _)| l == lane) {
                return *at;
            }
            assert!(since.elapsed() < WAIT, "the job of {lane} never started");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

fn of_account(kind: &'static str, account: String, lane: String, run_at_ms: i64) -> NewJob {
    NewJob {
        account_id: account,
        kind,
        lane,
        payload: serde_json::json!({}),
        run_at_ms,
        max_attempts: 3,
        ..NewJob::default()
    }
}

async fn enqueue_in_chunks(db: &DatabaseConnection, jobs: Vec<NewJob>) {
    for chunk in jobs.chunks(1_000) {
        enqueue_all(db, chunk.to_vec(), Utc::now()).await.unwrap();
    }
}

/// How long each of `n` fresh queues, enqueued one at a time and woken as a commit wakes, takes to start.
async fn fresh_latencies(
    db: &DatabaseConnection,
    engine: &Running,
    starts: &Starts,
    tag: &str,
    n: usize,
) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(n);
    for at in 0..n {
        let lane = format!("ch_{tag}_{at}");
        let enqueued = Instant::now();
        let job = of_account(
            "fresh",
            format!("acc_{tag}_{at}"),
            lane.clone(),
            Utc::now().timestamp_millis(),
        );
        enqueue(db, job, Utc::now()).await.unwrap();
        engine.wake.notify();
        latencies.push(starts.started(&lane).await - enqueued);
    }
    latencies
}

// Claims read queue heads from a window of 1,000 queues that moved on each claim, so a queue that became
// due waited for the window to come round to it: beside 30,000 queues waiting for later, some thirty
// claims.
on_both_databases!(
    a_fresh_queue_starts_as_fast_beside_30000_queues_waiting_for_later,
    |db: DatabaseConnection| async move {
        let starts = Arc::new(Starts::default());
        let handlers = Handlers::default()
            .with::<FreshJob>(starts.clone())
            .with::<LaterJob>(starts.clone());
        let engine = Running::start(&db, config(8, 8), handlers);
        let alone = fresh_latencies(&db, &engine, &starts, "alone", 10).await;
        let in_an_hour = Utc::now().timestamp_millis() + 3_600_000;
        let waiting: Vec<NewJob> = (0..30_000)
            .map(|n| of_account("later", format!("acc_{n:05}"), format!("ch_{n:05}"), in_an_hour))
            .collect();
        enqueue_in_chunks(&db, waiting).await;
        let beside = fresh_latencies(&db, &engine, &starts, "beside", 10).await;
        let (alone, beside) = (alone.iter().max().unwrap(), beside.iter().max().unwrap());
        assert!(
            *beside < Duration::from_millis(500) && *beside < *alone * 4 + Duration::from_millis(150),
            "a fresh queue's start: {beside:?} beside 30,000 queues, {alone:?} alone"
        );
        assert_eq!(starts.count(), 20, "nothing waiting for later ran");
        engine.stop().await;
    }
);

// Queues of a kind no replica runs (a kind from a newer release, say) that were due first filled the read of
// due queues, so the kinds this process runs were never read.
on_both_databases!(
    due_queues_of_kinds_no_one_runs_hide_no_other_queue,
    |db: DatabaseConnection| async move {
        let now = Utc::now().timestamp_millis();
        let unknown: Vec<NewJob> = (0..1_500)
            .map(|n| of_account("unknown_kind", format!("acc_{n:05}"), format!("ch_{n:05}"), now))
            .collect();
        enqueue_in_chunks(&db, unknown).await;
        let starts = Arc::new(Starts::default());
        let engine = Running::start(&db, config(8, 8), Handlers::default().with::<FreshJob>(starts.clone()));
        let latencies = fresh_latencies(&db, &engine, &starts, "known", 3).await;
        let slowest = latencies.iter().max().unwrap();
        assert!(
            *slowest < Duration::from_millis(500),
            "a fresh queue started after {slowest:?}"
        );
        engine.stop().await;
    }
);

// The look for the next ready time filtered on the kinds this process runs, so the index could not stop at the
// first queue waiting for later: every claim walked past each queue of a kind no replica runs (20,000 of
// them cost each claim 2.5 ms here, and made a broadcast drain at a third of its speed). Read from the
// statement's own plan: the rows PostgreSQL read and threw away.
#[tokio::test]
async fn the_next_ready_time_walks_past_no_queue_of_a_kind_not_run() {
    let test = TestDb::new(Kind::Postgres, 2).await;
    let db = &test.db;
    let in_an_hour = Utc::now().timestamp_millis() + 3_600_000;
    let unknown: Vec<NewJob> = (0..20_000)
        .map(|n| of_account("unknown_kind", format!("acc_{n:05}"), format!("ch_{n:05}"), in_an_hour))
        .collect();
    enqueue_in_chunks(db, unknown).await;
    let kinds = vec!["fresh".to_owned()];
    // The first read folds the enqueues' wakes into the ready queues; the second is the one looked at.
    crate::jobs::ready::due(db, &JOBS, Some(&kinds), READING).await.unwrap();
    let statement = crate::jobs::ready::due_postgres_statement(&JOBS, Some(&kinds), READING);
    let removed = thrown_away(&plan_of(db, statement).await);
    assert!(removed < 100, "the read threw away {removed} rows");
    let due = crate::jobs::ready::due(db, &JOBS, Some(&kinds), READING).await.unwrap();
    assert!(due.queues.is_empty(), "nothing of a kind run here is due");
    assert!(due.next_in_ms.is_some(), "the next ready time is of any kind");
    test.remove().await;
}

// Statistics taken while no row was pending make the partial indexes of pending rows look empty, so a
// statement that found its rows by id or claim token and also said `status = 'pending'` walked one of those
// indexes whole: every claim confirmation, recording and lease renewal read the whole backlog (a broadcast's
// 100,000 jobs) for a batch of a few rows. Read from each statement's own plan.
#[tokio::test]
async fn statements_by_id_read_no_backlog_under_statistics_taken_while_none_was_pending() {
    let test = TestDb::new(Kind::Postgres, 2).await;
    let db = &test.db;
    db.execute_unprepared(
        "INSERT INTO jobs (id, account_id, kind, class, lane, payload, status, attempts, max_attempts, run_at_ms, \
         created_at, updated_at) SELECT 'job_settled_' || n, 'acc_settled', 'work', 1, 'ch', '{}', 'failed', 3, 3, \
         0, now(), now() FROM generate_series(1, 20000) AS n",
    )
    .await
    .unwrap();
    db.execute_unprepared("VACUUM ANALYZE jobs").await.unwrap();
    let now = Utc::now().timestamp_millis();
    let backlog: Vec<NewJob> = (0..20_000)
        .map(|n| of_account("work", format!("acc_{:03}", n % 100), "ch".into(), now))
        .collect();
    enqueue_in_chunks(db, backlog).await;
    let ids: Vec<String> = db
        .query_all_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT 3",
        ))
        .await
        .unwrap()
        .iter()
        .map(|row| row.try_get_by_index(0).unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    let (renew, renew_values) = crate::jobs::lease::set_due(DbBackend::Postgres, &JOBS, &[1, 2, 3], 30_000, "");
    let statements = [
        (
            "claim confirmation",
            crate::jobs::guard::confirm_statement(DbBackend::Postgres, &JOBS, ids.clone()),
        ),
        (
            "recording",
            crate::jobs::complete::still_held_statement(DbBackend::Postgres, ids),
        ),
        (
            "lease renewal",
            Statement::from_sql_and_values(DbBackend::Postgres, renew, renew_values),
        ),
    ];
    for (what, statement) in statements {
        let plan = plan_of(db, statement).await;
        let removed = thrown_away(&plan);
        assert!(removed < 100, "the {what} threw away {removed} rows: {plan:#}");
    }
    test.remove().await;
}

/// `statement` run under `EXPLAIN (ANALYZE, FORMAT JSON)`: its plan with what each node read.
async fn plan_of(db: &DatabaseConnection, statement: Statement) -> serde_json::Value {
    let explained = Statement {
        sql: format!("EXPLAIN (ANALYZE, FORMAT JSON) {}", statement.sql),
        ..statement
    };
    let row = db.query_one_raw(explained).await.unwrap().unwrap();
    row.try_get_by_index(0).unwrap()
}

/// Rows a plan's nodes read and removed by a filter, over the whole plan.
fn thrown_away(plan: &serde_json::Value) -> u64 {
    match plan {
        serde_json::Value::Object(node) => node
            .iter()
            .map(|(key, value)| match key.as_str() {
                "Rows Removed by Filter" => value.as_u64().unwrap_or(0),
                _ => thrown_away(value),
            })
            .sum(),
        serde_json::Value::Array(nodes) => nodes.iter().map(thrown_away).sum(),
        _ => 0,
    }
}

/// Pearson's correlation of `xs` and `ys` (0 when either does not vary).
fn correlation(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let cov: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let (vx, vy) = (
        xs.iter().map(|x| (x - mx).powi(2)).sum::<f64>(),
        ys.iter().map(|y| (y - my).powi(2)).sum::<f64>(),
    );
    if vx == 0.0 || vy == 0.0 {
        0.0
    } else {
        cov / (vx * vy).sqrt()
    }
}

// Ties between accounts went to the lowest ids once the per-process turn memory was lost (past ~30 windows
// of queues), so with many accounts the low ids ran first and most; and queues whose work had finished
// stayed ready until their leases' end, so the accounts claimed beside them took the slots they left.
on_both_databases!(
    two_hundred_busy_accounts_among_two_thousand_share_the_slots_whatever_their_ids,
    |db: DatabaseConnection| async move {
        let now = Utc::now().timestamp_millis();
        // Every tenth account is busy (40 jobs due now), the others have one job each; they arrive in no
        // order of their ids, all due at the same moment.
        let mut jobs: Vec<NewJob> = (0..2_000)
            .flat_map(|n| {
                let count = if n % 10 == 0 { 40 } else { 1 };
                (0..count).map(move |_| of_account("work", format!("acc_{n:04}"), "ch".into(), now))
            })
            .collect();
        rand::seq::SliceRandom::shuffle(jobs.as_mut_slice(), &mut rand::rng());
        enqueue_in_chunks(&db, jobs).await;
        let starts = Arc::new(Starts::default());
        let engine = Running::start(&db, config(16, 64), Handlers::default().with::<WorkJob>(starts.clone()));
        // The one-job accounts (1,800 runs) and about eight turns of each busy account.
        let since = Instant::now();
        while starts.count() < 3_400 {
            assert!(since.elapsed() < Duration::from_secs(120), "{} runs", starts.count());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        engine.stop().await;
        let mut per_account: HashMap<String, f64> = HashMap::new();
        for (account, _, _) in starts.0.lock().unwrap().iter() {
            *per_account.entry(account.clone()).or_default() += 1.0;
        }
        let busy: Vec<(f64, f64)> = (0..2_000)
            .step_by(10)
            .map(|n| {
                (
                    f64::from(n),
                    per_account.get(&format!("acc_{n:04}")).copied().unwrap_or(0.0),
                )
            })
            .collect();
        let (ids, runs): (Vec<f64>, Vec<f64>) = busy.iter().copied().unzip();
        let mean = runs.iter().sum::<f64>() / runs.len() as f64;
        let r = correlation(&ids, &runs);
        assert!(
            r.abs() < 0.3,
            "runs per busy account follow its id (r = {r:.2}): {busy:?}"
        );
        let (least, most) = runs
            .iter()
            .fold((f64::MAX, 0.0_f64), |(l, m), n| (l.min(*n), m.max(*n)));
        assert!(
            most - least <= 3.0,
            "busy accounts took turns unevenly ({least} to {most} runs, mean {mean:.1}): {busy:?}"
        );
    }
);

// Every claim of every replica took one lock per table, so a claim waited for any other replica's claim,
// whatever the accounts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_passes_over_an_account_another_replica_is_claiming_and_takes_the_others() {
    let test = TestDb::new(Kind::Postgres, 8).await;
    let db = test.db.clone();
    let now = Utc::now().timestamp_millis();
    let jobs: Vec<NewJob> = ["acc_a", "acc_b"]
        .into_iter()
        .flat_map(|account| (0..3).map(move |_| of_account("work", account.into(), "ch".into(), now)))
        .collect();
    enqueue_all(&db, jobs, Utc::now()).await.unwrap();
    // Another replica's claim of acc_a, still open.
    let other = crate::store::begin_write(&db).await.unwrap();
    other
        .execute_unprepared("SELECT pg_advisory_xact_lock(hashtextextended('jobs:acc_a', 0))")
        .await
        .unwrap();
    let kinds = ["work".to_owned()];
    let resting = std::collections::HashSet::new();
    let wanted = || Wanted {
        kinds: Some(&kinds),
        resting: &resting,
        caps: Caps { lane: 8, account: 8 },
        budget: Budget { free: 8, bulk: 8 },
        finished: Vec::new(),
    };
    let taken = tokio::time::timeout(
        Duration::from_secs(5),
        claim::claim(&db, &JOBS, wanted(), READING, 30_000),
    )
    .await
    .expect("the claim waited for the other replica's")
    .unwrap();
    let accounts: Vec<&str> = taken.rows.iter().map(|(key, _)| key.account.as_str()).collect();
    assert_eq!(accounts, ["acc_b"; 3], "only the account no one else is claiming");
    assert!(taken.waiting, "work was left for a look soon after");
    other.rollback().await.unwrap();
    let taken = claim::claim(&db, &JOBS, wanted(), READING, 30_000).await.unwrap();
    let accounts: Vec<&str> = taken.rows.iter().map(|(key, _)| key.account.as_str()).collect();
    assert_eq!(accounts, ["acc_a"; 3], "its turn once the other claim ended");
    test.remove().await;
}
