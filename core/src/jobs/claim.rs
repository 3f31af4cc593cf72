//! Claims due jobs for this worker. One statement takes the oldest due jobs of the kinds this process runs,
//! passing over lanes already at their cap (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so replicas claim
//! disjoint rows), and of each lane no more than the room its cap leaves: it moves `run_at_ms` to the end of a
//! lease and stamps a fresh claim token. What it took beyond a cap all the same (the lanes' loads are read
//! just before the statement) is released at once, due now. The try count does not move: a job whose worker
//! died is claimed again when its lease ends, as the same try, so a crash of ours never spends one.

use std::collections::HashMap;

use rand::Rng;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, QueryResult, Statement, Value};

use super::{Job, in_flight::InFlight};
use crate::store::sql::{among, locking, one_of_text, placeholders};

/// What one claim took.
#[derive(Default)]
pub struct Claim {
    pub jobs: Vec<Job>,
    /// Fewer due jobs than wanted were found, or none fit: the queue is drained, or what is left waits for a
    /// lane to come back under its cap (which wakes the claim loop) or to end its rest.
    pub idle: bool,
}

pub async fn claim(
    db: &DatabaseConnection,
    in_flight: &InFlight,
    kinds: &[&'static str],
    limit: usize,
    now_ms: i64,
    lease_ms: i64,
) -> Result<Claim, DbErr> {
    let token = rand::rng().random::<i64>();
    let lanes = Lanes {
        closed: in_flight.closed_lanes(now_ms),
        room: in_flight.room(),
        cap: in_flight.lane_cap(),
    };
    let taken = take(db, &lanes, kinds, limit, token, now_ms, lease_ms).await?;
    let (jobs, excess) = within_caps(taken, lanes.cap, |lane| in_flight.load(lane));
    metrics::counter!("frontdesk_job_claims_total", "result" => if jobs.is_empty() { "empty" } else { "taken" })
        .increment(1);
    // Everything taken went back (its lanes are full): claiming again at once would take it again.
    let idle = excess.len() + jobs.len() < limit || jobs.is_empty();
    if !excess.is_empty() {
        metrics::counter!("frontdesk_jobs_released_total").increment(excess.len() as u64);
        release(db, &excess, token, now_ms).await?;
    }
    Ok(Claim { jobs, idle })
}

/// What the claim knows of the lanes from what this process runs.
struct Lanes {
    /// At their cap or resting: passed over.
    closed: Vec<String>,
    /// Lanes running some jobs, and how many more each may take.
    room: Vec<(String, u32)>,
    /// What a lane running nothing may take.
    cap: u32,
}

async fn take(
    db: &DatabaseConnection,
    lanes: &Lanes,
    kinds: &[&'static str],
    limit: usize,
    token: i64,
    now_ms: i64,
    lease_ms: i64,
) -> Result<Vec<Job>, DbErr> {
    let backend = db.get_database_backend();
    let mut values: Vec<Value> = vec![(now_ms + lease_ms).into(), token.into(), now_ms.into()];
    let kind_list = placeholders(values.len() + 1, kinds.len());
    values.extend(kinds.iter().map(|k| Value::from(*k)));
    let mut exclude = String::new();
    if !lanes.closed.is_empty() {
        exclude = format!(
            " AND lane NOT IN ({})",
            placeholders(values.len() + 1, lanes.closed.len())
        );
        values.extend(lanes.closed.iter().map(|lane| Value::from(lane.as_str())));
    }
    // Each lane's room: a lane with jobs running has less than its cap.
    let mut room = lanes.cap.to_string();
    if !lanes.room.is_empty() {
        let mut cases = String::from("CASE lane");
        for (lane, left) in &lanes.room {
            cases.push_str(&format!(" WHEN ${} THEN ${}", values.len() + 1, values.len() + 2));
            values.extend([Value::from(lane.as_str()), Value::from(i64::from(*left))]);
        }
        room = format!("{cases} ELSE {} END", lanes.cap);
    }
    // The oldest due jobs (locked), then of each lane only as many as its room: a lane come back under its cap
    // with one free slot takes one job, not one and `limit - 1` more to give back.
    let due = locking(
        backend,
        &format!(
            "SELECT id, lane, run_at_ms FROM jobs WHERE status = 'pending' AND run_at_ms <= $3 \
             AND kind IN ({kind_list}){exclude} ORDER BY run_at_ms LIMIT {limit}"
        ),
    );
    let fitting = among(
        backend,
        "id",
        &format!(
            "SELECT id FROM (SELECT id, lane, row_number() OVER (PARTITION BY lane ORDER BY run_at_ms, id) AS n \
             FROM ({due}) AS due) AS ranked WHERE lane = '' OR n <= {room}"
        ),
    );
    let sql = format!(
        "UPDATE jobs SET run_at_ms = $1, claim_token = $2 WHERE {fitting} \
         RETURNING id, account_id, kind, lane, payload, attempts, max_attempts"
    );
    let rows = taken_in_due_order(db, Statement::from_sql_and_values(backend, sql, values)).await?;
    rows.iter()
        .map(|row| {
            let attempts: i32 = row.try_get_by_index(5)?;
            Ok(Job {
                id: row.try_get_by_index(0)?,
                account_id: row.try_get_by_index(1)?,
                kind: row.try_get_by_index(2)?,
                lane: row.try_get_by_index(3)?,
                payload: row.try_get_by_index(4)?,
                attempt: attempts + 1,
                max_attempts: row.try_get_by_index(6)?,
                token,
            })
        })
        .collect()
}

/// Runs the claim. On PostgreSQL the due jobs are read from `jobs_due` in `run_at_ms` order, whatever the
/// statistics say: when they were taken on a drained queue (a few rows), the planner chose a bitmap scan that
/// read every due job, sorted them all and kept the first few (56,000 jobs read and sorted on disk per claim,
/// 30-40 ms, with the queue full), where the index scan stops at the limit and marks dead entries as it
/// passes them. `SET LOCAL` keeps the setting to the claim's own transaction.
async fn taken_in_due_order(db: &DatabaseConnection, claim: Statement) -> Result<Vec<QueryResult>, DbErr> {
    if db.get_database_backend() != DbBackend::Postgres {
        return db.query_all_raw(claim).await;
    }
    let txn = crate::store::begin_write(db).await?;
    txn.execute_unprepared("SET LOCAL enable_bitmapscan = off").await?;
    let rows = txn.query_all_raw(claim).await?;
    txn.commit().await?;
    Ok(rows)
}

/// Gives up claimed jobs beyond the caps: due at once, with no try spent.
async fn release(db: &DatabaseConnection, excess: &[Job], token: i64, now_ms: i64) -> Result<(), DbErr> {
    let backend = db.get_database_backend();
    let ids = excess.iter().map(|job| job.id.clone()).collect();
    let (which, ids) = one_of_text(backend, "id", 3, ids);
    let sql = format!("UPDATE jobs SET run_at_ms = $1, claim_token = NULL WHERE claim_token = $2 AND {which}");
    let mut values: Vec<Value> = vec![now_ms.into(), token.into()];
    values.extend(ids);
    db.execute_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?;
    Ok(())
}

/// The jobs that fit their lane's cap given what `load` says is running; and the rest.
pub fn within_caps(mut jobs: Vec<Job>, cap: u32, load: impl Fn(&str) -> u32) -> (Vec<Job>, Vec<Job>) {
    // RETURNING keeps no particular order.
    jobs.sort_by(|a, b| a.id.cmp(&b.id));
    let mut taken: HashMap<String, u32> = HashMap::new();
    jobs.into_iter().partition(|job| {
        if job.lane.is_empty() {
            return true;
        }
        let count = taken.entry(job.lane.clone()).or_insert_with(|| load(&job.lane));
        *count += 1;
        *count <= cap
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str, lane: &str) -> Job {
        Job {
            id: id.into(),
            account_id: "acc".into(),
            kind: "k".into(),
            lane: lane.into(),
            payload: "{}".into(),
            attempt: 1,
            max_attempts: 3,
            token: 7,
        }
    }

    #[test]
    fn a_lane_takes_no_more_than_its_cap_counting_what_runs() {
        let jobs = vec![
            job("a", "slow"),
            job("b", "slow"),
            job("c", "fast"),
            job("d", ""),
            job("e", "slow"),
        ];
        let (kept, rest) = within_caps(jobs, 2, |lane| u32::from(lane == "slow"));
        let ids = |v: &[Job]| v.iter().map(|j| j.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&kept), ["a", "c", "d"]);
        assert_eq!(ids(&rest), ["b", "e"]);
    }
}
