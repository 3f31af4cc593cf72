//! The recurring housekeeping job: closes idle conversations (`conversations::idle`), forgets idempotency
//! keys past their 24 hours (`messaging::idempotency`), agents' tool-write keys past their week (`replies::tools`)
//! and credit holds that expired unsettled (`accounts::holds`), on whichever replica claims it, once a minute
//! (at once again while it finds full batches).

use std::{sync::Arc, time::Duration};

use sea_orm::{DatabaseConnection, DbErr};

use crate::{
    clock::Clock,
    conversations::idle,
    jobs::{Handler, Job, Outcome, recurring::Recurring},
    messaging::idempotency,
};

/// Conversations closed, and keys forgotten, per transaction.
const BATCH: u64 = 200;
/// How often the job runs when it finds nothing more to do.
const INTERVAL: Duration = Duration::from_secs(60);

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
}

impl Recurring for Housekeeping {
    const KIND: &'static str = "housekeeping";
}

#[async_trait::async_trait]
impl Handler for Housekeeping {
    async fn run(&self, _job: &Job) -> Outcome {
        let now = self.clock.now();
        let work = async {
            let closed = idle::close_idle(&self.db, self.idle, now, BATCH).await?;
            let forgotten = idempotency::prune(&self.db, now, BATCH).await?;
            let effects = crate::replies::tools::prune_effects(&self.db, now, BATCH).await?;
            let holds = crate::accounts::holds::prune(&self.db, now, BATCH).await?;
            Ok::<_, DbErr>([closed, forgotten, effects, holds].contains(&BATCH))
        };
        crate::jobs::recurring::next_turn(now, work.await, INTERVAL)
    }
}
