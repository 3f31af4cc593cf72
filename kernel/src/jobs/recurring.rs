//! Recurring jobs (the engine's retention, closing idle conversations, expiring empty web chat sessions,
//! pruning webhook deliveries, broadcasts' progress): each kind is
//! one durable job, enqueued by every replica at start-up and stored once (its kind is its unique key),
//! which runs, works through a batch, and puts itself off to its next turn: at once while it finds full
//! batches, else after its interval; a failed turn is tried again after the interval.

use std::{marker::PhantomData, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbErr, Statement};

use super::{Class, JobArgs, NewJob, Outcome};

/// A recurring kind, named by the handler that runs its turns.
pub trait Recurring {
    const KIND: &'static str;
}

/// The arguments of a recurring kind's one job: none. Its handler is registered as
/// `Handlers::with::<Turn<H>>`.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(bound = "")]
pub struct Turn<H> {
    #[serde(skip)]
    kind: PhantomData<H>,
}

impl<H: Recurring> JobArgs for Turn<H> {
    const KIND: &'static str = H::KIND;
    const CLASS: Class = Class::Bulk;
    /// A failed turn is tried again after the interval, for as long as the service runs.
    const MAX_ATTEMPTS: i32 = i32::MAX;
}

/// The job of the recurring kind `H`, due `now`.
pub fn job<H: Recurring>(now: DateTime<Utc>) -> NewJob {
    NewJob {
        run_at_ms: now.timestamp_millis(),
        unique_key: Some(H::KIND.to_owned()),
        ..NewJob::of_account(String::new(), &Turn::<H> { kind: PhantomData })
    }
}

/// The outcome of a turn that ran at `now`: whether it left more to do, or why it failed.
pub fn next_turn(now: DateTime<Utc>, turn: Result<bool, DbErr>, interval: Duration) -> Outcome {
    match turn {
        Ok(more) => {
            let wait = if more { Duration::ZERO } else { interval };
            Outcome::Defer {
                until_ms: now.timestamp_millis() + i64::try_from(wait.as_millis()).unwrap_or(0),
            }
        }
        Err(err) => Outcome::Retry {
            error: err.to_string(),
            after: interval,
        },
    }
}

/// Makes every recurring job waiting for its next turn due at `now_ms`: when the service's clock is
/// steered (a test clock), the next turns were timed on the clock as it was, and one moved back would hold
/// them off for as long. The number of jobs made due.
pub async fn due_now(db: &impl ConnectionTrait, now_ms: i64) -> Result<u64, DbErr> {
    let sql = "UPDATE jobs SET run_at_ms = $1 WHERE account_id = '' AND unique_key = kind \
               AND status = 'pending' AND claim_token IS NULL AND run_at_ms > $1";
    let statement = Statement::from_sql_and_values(db.get_database_backend(), sql, [now_ms.into()]);
    Ok(db.execute_raw(statement).await?.rows_affected())
}
