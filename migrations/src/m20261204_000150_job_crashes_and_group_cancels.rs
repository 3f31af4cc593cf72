//! Jobs count their runs that were claimed and never recorded (`jobs.unfinished_runs`: the worker died,
//! or was paused past its lease), so a job that kills every process that runs it fails after a few instead
//! of being claimed for ever. A cancelled group leaves a tombstone (`job_group_cancels`), so a job enqueued
//! into it afterwards is cancelled instead of run (`account_id` "" when the cancel named no account).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

fn c(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::column::add(manager, "jobs", integer(c("unfinished_runs")).default(0)).await?;
        manager
            .create_table(
                Table::create()
                    .table(c("job_group_cancels"))
                    .col(string(c("group_key")))
                    .col(string(c("account_id")))
                    .col(timestamp_with_time_zone(c("cancelled_at")))
                    .primary_key(Index::create().col(c("group_key")).col(c("account_id")))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(c("job_group_cancels")).to_owned())
            .await?;
        crate::column::drop(manager, "jobs", "unfinished_runs").await
    }
}
