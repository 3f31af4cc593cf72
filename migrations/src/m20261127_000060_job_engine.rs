//! The one job engine: fair claims, classes, keys, groups, cancel and dedup windows.
//!
//! - `jobs.class` (0 interactive, 1 bulk): interactive work is claimed before bulk work.
//! - The due index becomes the queues' index, `(class, account_id, lane, kind, run_at_ms)` over pending jobs:
//!   a claim hops from one queue to the next (a loose index scan) and takes each queue's oldest due jobs, so
//!   one queue's backlog can never fill the claim's window; `webhook_deliveries` gets the same shape
//!   (`account_id, webhook_id, next_attempt_ms`).
//! - `jobs.group_key` names a group cancelled in bulk (a broadcast); `jobs.rerun_at_ms` marks a running job
//!   to run once more after this run (an enqueue-or-reschedule that found it running).
//! - A job's `unique_key` binds only while the job is pending: a failed or cancelled job no longer holds it.
//! - `job_dedup`: keys that stay taken until a time, after their job is gone ("once per account per day").
//! - `jobs_settled` serves the retention of failed and cancelled jobs and the operators' list of them.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// One transaction on SQLite too: indexes are dropped and made again under their names.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Jobs::Table)
                    .add_column(integer(Jobs::Class).default(0))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Jobs::Table)
                    .add_column(string_null(Jobs::GroupKey))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Jobs::Table)
                    .add_column(big_integer_null(Jobs::RerunAtMs))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(JobDedup::Table)
                    .col(string(JobDedup::Key).primary_key())
                    .col(big_integer(JobDedup::UntilMs))
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        for sql in [
            "DROP INDEX jobs_due",
            "CREATE INDEX jobs_queues ON jobs (class, account_id, lane, kind, run_at_ms) WHERE status = 'pending'",
            "DROP INDEX jobs_unique_key",
            "CREATE UNIQUE INDEX jobs_unique_key ON jobs (unique_key) \
             WHERE unique_key IS NOT NULL AND status = 'pending'",
            "CREATE INDEX jobs_group ON jobs (group_key) WHERE group_key IS NOT NULL AND status = 'pending'",
            "DROP INDEX jobs_failed",
            "CREATE INDEX jobs_settled ON jobs (updated_at, id) WHERE status <> 'pending'",
            "CREATE INDEX job_dedup_until ON job_dedup (until_ms)",
            "DROP INDEX webhook_deliveries_due_by_endpoint",
            "CREATE INDEX webhook_deliveries_queues ON webhook_deliveries (account_id, webhook_id, next_attempt_ms) \
             WHERE status = 'pending'",
        ] {
            db.execute_unprepared(sql).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for sql in [
            "DROP INDEX webhook_deliveries_queues",
            "CREATE INDEX webhook_deliveries_due_by_endpoint ON webhook_deliveries \
             (next_attempt_ms, webhook_id, account_id) WHERE status = 'pending'",
            "DROP INDEX jobs_settled",
            "DELETE FROM jobs WHERE status = 'cancelled'",
            "CREATE INDEX jobs_failed ON jobs (updated_at, id) WHERE status = 'failed'",
            "DROP INDEX jobs_group",
            "DROP INDEX jobs_unique_key",
            "CREATE UNIQUE INDEX jobs_unique_key ON jobs (unique_key) WHERE unique_key IS NOT NULL",
            "DROP INDEX jobs_queues",
            "CREATE INDEX jobs_due ON jobs (run_at_ms, lane) WHERE status = 'pending'",
        ] {
            db.execute_unprepared(sql).await?;
        }
        manager
            .drop_table(Table::drop().table(JobDedup::Table).to_owned())
            .await?;
        for column in [Jobs::RerunAtMs, Jobs::GroupKey, Jobs::Class] {
            manager
                .alter_table(Table::alter().table(Jobs::Table).drop_column(column).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Jobs {
    Table,
    Class,
    GroupKey,
    RerunAtMs,
}

#[derive(DeriveIden)]
enum JobDedup {
    Table,
    Key,
    UntilMs,
}
