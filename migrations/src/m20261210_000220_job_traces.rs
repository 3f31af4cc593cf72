//! The trace a job continues: the W3C `traceparent` of the work that enqueued it, when traces are
//! exported, so one trace follows a message from its arrival through the jobs that answer and deliver it.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("ALTER TABLE jobs ADD COLUMN trace_parent TEXT")
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("ALTER TABLE jobs DROP COLUMN trace_parent")
            .await?;
        Ok(())
    }
}
