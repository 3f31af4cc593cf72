//! Claims due deliveries for this worker, fairly. One statement claims the oldest due deliveries, passing
//! over the subscriptions and accounts already at their in-flight cap (`FOR UPDATE SKIP LOCKED` on
//! PostgreSQL, so replicas claim disjoint rows, and so the planner walks the due index in order however
//! stale its statistics): it moves `next_attempt_ms` to the end of a lease and stamps a fresh claim token.
//! Of what it took, those within the caps are kept, taken one per account in turn; the rest are released at
//! once, due now (behind what was already waiting). The attempt count does not move: a delivery whose worker
//! died is claimed again when its lease ends, as the same attempt, so a crash of ours never spends a retry
//! step.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rand::Rng;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Statement, Value};

use super::{
    in_flight::{Caps, Full, InFlight},
    placeholders,
};
use crate::secrets::Sealer;

/// One claimed delivery with everything its attempt needs.
#[derive(Clone, Debug)]
pub struct Claimed {
    pub delivery_id: String,
    pub webhook_id: String,
    pub account_id: String,
    /// The claim's token: the result is written only while the delivery still carries it.
    pub token: i64,
    /// This attempt's number (attempts recorded so far, plus one).
    pub attempt: i32,
    pub url: String,
    pub secret: String,
    pub event_id: String,
    pub event_type: String,
    pub payload: String,
    pub event_at: DateTime<Utc>,
}

/// A delivery the claim took, before the caps are applied.
#[derive(Debug)]
pub struct Candidate {
    pub id: String,
    pub webhook_id: String,
    pub account_id: String,
}

/// What one claim took.
#[derive(Default)]
pub struct Claim {
    pub claimed: Vec<Claimed>,
    /// Claimed deliveries of disabled subscriptions, or of accounts whose webhooks are off (or that were
    /// deleted): parked as failed, not attempted.
    pub parked: u64,
    /// Fewer due deliveries than wanted were found: the queue is drained, or what is left waits for a
    /// subscription or account to come back under its cap (whose answer wakes the claim loop).
    pub idle: bool,
}

pub async fn claim(
    db: &DatabaseConnection,
    sealer: &Sealer,
    in_flight: &InFlight,
    free: usize,
    now_ms: i64,
    lease_ms: i64,
) -> Result<Claim, DbErr> {
    let caps = in_flight.caps();
    // No one account may take more than its cap, so a claim never needs more.
    let limit = free.min(caps.account as usize);
    let token = rand::rng().random::<i64>();
    let taken = take(db, &in_flight.full(), limit, token, now_ms, lease_ms).await?;
    let idle = taken.len() < limit;
    let (picked, excess) = pick(taken, limit, caps, |webhook, account| in_flight.load(webhook, account));
    if !excess.is_empty() {
        release(db, &excess, token, now_ms).await?;
    }
    if picked.is_empty() {
        return Ok(Claim {
            idle,
            ..Claim::default()
        });
    }
    let ids: Vec<String> = picked.into_iter().map(|c| c.id).collect();
    let (claimed, parked) = read_claimed(db, sealer, &ids, token).await?;
    let parked_count = parked.len() as u64;
    if !parked.is_empty() {
        park(db, &parked, token).await?;
    }
    Ok(Claim {
        claimed,
        parked: parked_count,
        idle,
    })
}

/// Claims up to `limit` due deliveries, oldest first, except those of subscriptions and accounts at their
/// cap.
async fn take(
    db: &DatabaseConnection,
    full: &Full,
    limit: usize,
    token: i64,
    now_ms: i64,
    lease_ms: i64,
) -> Result<Vec<Candidate>, DbErr> {
    let backend = db.get_database_backend();
    let mut values: Vec<Value> = vec![(now_ms + lease_ms).into(), token.into(), now_ms.into()];
    let mut exclude = String::new();
    for (column, ids) in [("webhook_id", &full.webhooks), ("account_id", &full.accounts)] {
        if !ids.is_empty() {
            exclude.push_str(&format!(
                " AND {column} NOT IN ({})",
                placeholders(values.len() + 1, ids.len())
            ));
            values.extend(ids.iter().map(|id| Value::from(id.as_str())));
        }
    }
    let due = super::picked(
        backend,
        "id",
        &format!(
            "SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_ms <= $3{exclude} \
             ORDER BY next_attempt_ms LIMIT {limit}"
        ),
    );
    let sql = format!(
        "UPDATE webhook_deliveries SET next_attempt_ms = $1, claim_token = $2 WHERE {due} \
         RETURNING id, webhook_id, account_id"
    );
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?;
    // RETURNING keeps no particular order; fairness comes from taking accounts in turn.
    rows.iter()
        .map(|row| {
            Ok(Candidate {
                id: row.try_get_by_index(0)?,
                webhook_id: row.try_get_by_index(1)?,
                account_id: row.try_get_by_index(2)?,
            })
        })
        .collect()
}

/// Gives up claimed deliveries beyond the caps: due at once, behind those already waiting.
async fn release(db: &DatabaseConnection, excess: &[Candidate], token: i64, now_ms: i64) -> Result<(), DbErr> {
    let sql = format!(
        "UPDATE webhook_deliveries SET next_attempt_ms = $1, claim_token = NULL WHERE claim_token = $2 AND id IN ({})",
        placeholders(3, excess.len())
    );
    let mut values: Vec<Value> = vec![now_ms.into(), token.into()];
    values.extend(excess.iter().map(|c| Value::from(c.id.as_str())));
    db.execute_raw(Statement::from_sql_and_values(db.get_database_backend(), sql, values))
        .await?;
    Ok(())
}

/// Up to `limit` of the candidates, taken one per account in turn, each account in the order of its first
/// candidate, within the caps given what `load` says is already on the wire; and the rest.
pub fn pick(
    candidates: Vec<Candidate>,
    limit: usize,
    caps: Caps,
    load: impl Fn(&str, &str) -> (u32, u32),
) -> (Vec<Candidate>, Vec<Candidate>) {
    let mut order: Vec<String> = Vec::new();
    let mut queues: HashMap<String, std::collections::VecDeque<Candidate>> = HashMap::new();
    for candidate in candidates {
        if !queues.contains_key(&candidate.account_id) {
            order.push(candidate.account_id.clone());
        }
        queues
            .entry(candidate.account_id.clone())
            .or_default()
            .push_back(candidate);
    }
    let mut taken_by_webhook: HashMap<String, u32> = HashMap::new();
    let mut taken_by_account: HashMap<String, u32> = HashMap::new();
    let (mut picked, mut rest) = (Vec::new(), Vec::new());
    while picked.len() < limit && !order.is_empty() {
        order.retain(|account| {
            if picked.len() >= limit {
                return true;
            }
            let Some(queue) = queues.get_mut(account) else {
                return false;
            };
            while let Some(candidate) = queue.pop_front() {
                let (webhook_load, account_load) = load(&candidate.webhook_id, account);
                let account_taken = taken_by_account.get(account).copied().unwrap_or(0);
                if account_load + account_taken >= caps.account {
                    rest.push(candidate);
                    return false;
                }
                let webhook_taken = taken_by_webhook.entry(candidate.webhook_id.clone()).or_default();
                if webhook_load + *webhook_taken >= caps.endpoint {
                    rest.push(candidate);
                    continue;
                }
                *webhook_taken += 1;
                *taken_by_account.entry(account.clone()).or_default() += 1;
                picked.push(candidate);
                return !queue.is_empty();
            }
            false
        });
    }
    rest.extend(queues.into_values().flatten());
    (picked, rest)
}

/// The claimed deliveries with their subscription and event; those whose subscription is disabled (or
/// gone), or whose account no longer sends webhooks, come back apart.
async fn read_claimed(
    db: &DatabaseConnection,
    sealer: &Sealer,
    ids: &[String],
    token: i64,
) -> Result<(Vec<Claimed>, Vec<String>), DbErr> {
    let sql = format!(
        "SELECT d.id, d.webhook_id, d.account_id, d.attempt_count, w.url, w.secret, e.id, e.event_type, e.payload, \
         e.created_at, COALESCE(w.status = 'active' AND e.id IS NOT NULL AND a.webhooks_enabled = TRUE \
         AND a.deleted_at IS NULL, FALSE) \
         FROM webhook_deliveries d LEFT JOIN webhooks w ON w.id = d.webhook_id \
         LEFT JOIN event_outbox e ON e.id = d.event_id LEFT JOIN accounts a ON a.id = d.account_id \
         WHERE d.id IN ({})",
        placeholders(1, ids.len())
    );
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            sql,
            ids.iter().map(|id| Value::from(id.as_str())),
        ))
        .await?;
    let (mut claimed, mut parked) = (Vec::new(), Vec::new());
    for row in &rows {
        let delivery_id: String = row.try_get_by_index(0)?;
        let live: bool = row.try_get_by_index(10)?;
        if !live {
            parked.push(delivery_id);
            continue;
        }
        let webhook_id: String = row.try_get_by_index(1)?;
        let stored: String = row.try_get_by_index(5)?;
        let Some(secret) = crate::webhooks::secret::open(sealer, &webhook_id, &stored) else {
            tracing::error!(
                webhook = webhook_id,
                "a webhook signing secret cannot be opened with this FRONTDESK_SECRET_KEY"
            );
            parked.push(delivery_id);
            continue;
        };
        let attempts: i32 = row.try_get_by_index(3)?;
        claimed.push(Claimed {
            delivery_id,
            webhook_id,
            account_id: row.try_get_by_index(2)?,
            token,
            attempt: attempts + 1,
            url: row.try_get_by_index(4)?,
            secret,
            event_id: row.try_get_by_index(6)?,
            event_type: row.try_get_by_index(7)?,
            payload: row.try_get_by_index(8)?,
            event_at: row.try_get_by_index(9)?,
        });
    }
    Ok((claimed, parked))
}

/// Settles claimed deliveries that must not be sent as failed, so they stop being claimed; a re-enable of
/// their subscription can queue them again.
async fn park(db: &DatabaseConnection, ids: &[String], token: i64) -> Result<(), DbErr> {
    let sql = format!(
        "UPDATE webhook_deliveries SET status = 'failed', next_attempt_ms = NULL, claim_token = NULL, \
         settled_at = $1 WHERE claim_token = $2 AND id IN ({})",
        placeholders(3, ids.len())
    );
    let mut values: Vec<Value> = vec![Utc::now().into(), token.into()];
    values.extend(ids.iter().map(|id| Value::from(id.as_str())));
    db.execute_raw(Statement::from_sql_and_values(db.get_database_backend(), sql, values))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Candidate, Caps, pick};

    fn candidate(id: &str, webhook: &str, account: &str) -> Candidate {
        Candidate {
            id: id.into(),
            webhook_id: webhook.into(),
            account_id: account.into(),
        }
    }

    fn ids(picked: &[Candidate]) -> Vec<&str> {
        picked.iter().map(|c| c.id.as_str()).collect()
    }

    #[test]
    fn accounts_take_turns_and_endpoints_stay_under_their_cap() {
        // Account a's dead endpoint has the oldest backlog; b and c have one delivery each.
        let mut candidates: Vec<_> = (0..10).map(|n| candidate(&format!("a{n}"), "dead", "a")).collect();
        candidates.push(candidate("b0", "wb", "b"));
        candidates.push(candidate("c0", "wc", "c"));
        let caps = Caps::new(8, 2);
        let (picked, rest) = pick(candidates, 8, caps, |_, _| (0, 0));
        assert_eq!(ids(&picked), ["a0", "b0", "c0", "a1"]);
        assert_eq!(rest.len(), 8, "the dead endpoint's other eight are released");
    }

    #[test]
    fn what_is_on_the_wire_counts_against_the_caps() {
        let candidates = vec![
            candidate("a0", "wa", "a"),
            candidate("a1", "wa2", "a"),
            candidate("b0", "wb", "b"),
        ];
        // wa is at its cap already; account a has room for one more (cap 4).
        let caps = Caps::new(8, 2);
        let load = |webhook: &str, account: &str| match (webhook, account) {
            ("wa", _) => (2, 3),
            (_, "a") => (0, 3),
            _ => (0, 0),
        };
        let (picked, rest) = pick(candidates, 8, caps, load);
        assert_eq!(ids(&picked), ["a1", "b0"]);
        assert_eq!(ids(&rest), ["a0"]);
    }

    #[test]
    fn the_limit_is_kept() {
        let candidates: Vec<_> = (0..10)
            .map(|n| candidate(&format!("x{n}"), &format!("w{n}"), &format!("acct{n}")))
            .collect();
        let (picked, rest) = pick(candidates, 3, Caps::new(128, 32), |_, _| (0, 0));
        assert_eq!((picked.len(), rest.len()), (3, 7));
    }
}
