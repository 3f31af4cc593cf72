//! Closes conversations with no message for `FRONTDESK_CONVERSATION_IDLE_HOURS` (`conversation.closed`; the
//! contact's next message opens a new one), and forgets idempotency keys past their 24 hours. One recurring
//! housekeeping job does both, on whichever replica claims it, once a minute (at once again while it finds
//! full batches).

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, Condition, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use super::{
    activity,
    state::{self, Change},
};
use crate::{
    clock::Clock,
    jobs::{Handler, Job, NewJob, Outcome},
    messaging::idempotency,
    recurring,
    store::entities::conversations,
};

pub const KIND: &str = "housekeeping";
/// Conversations closed, and keys forgotten, per transaction.
const BATCH: u64 = 200;
/// How often the job runs when it finds nothing more to do.
const INTERVAL: Duration = Duration::from_secs(60);

/// The recurring job (`recurring`).
pub fn job(now: DateTime<Utc>) -> NewJob {
    recurring::job(KIND, now)
}

pub struct Housekeeping {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    idle: chrono::Duration,
}

impl Housekeeping {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, idle_hours: u32) -> Self {
        Self {
            db,
            clock,
            idle: chrono::Duration::hours(i64::from(idle_hours)),
        }
    }

    /// Closes up to `BATCH` idle conversations; returns how many.
    async fn close_idle(&self, now: DateTime<Utc>) -> Result<u64, DbErr> {
        let cutoff = now - self.idle;
        let txn = crate::store::begin_write(&self.db).await?;
        let idle: Vec<String> = conversations::Entity::find()
            .select_only()
            .column(conversations::Column::Id)
            .filter(conversations::Column::Status.eq("open"))
            // The window bounds the index scan; the exact time decides within the cutoff's window.
            .filter(conversations::Column::ActivityBucket.lte(activity::bucket(cutoff)))
            .filter(conversations::Column::LastMessageAt.lt(cutoff))
            .order_by_asc(conversations::Column::ActivityBucket)
            .limit(BATCH)
            .into_tuple()
            .all(&txn)
            .await?;
        if idle.is_empty() {
            return Ok(0);
        }
        let which = Condition::all().add(conversations::Column::Id.is_in(idle));
        let closed = state::apply(&txn, which, Change::close(), now).await?;
        txn.commit().await?;
        Ok(closed.len() as u64)
    }
}

#[async_trait::async_trait]
impl Handler for Housekeeping {
    async fn run(&self, _job: &Job) -> Outcome {
        let now = self.clock.now();
        let work = async {
            let closed = self.close_idle(now).await?;
            let forgotten = idempotency::prune(&self.db, now, BATCH).await?;
            Ok::<_, DbErr>(closed == BATCH || forgotten == BATCH)
        };
        recurring::next_turn(now, work.await, INTERVAL)
    }
}
