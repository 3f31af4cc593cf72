//! The undispatched events of each account in order, so the fan-out can take a share from each account
//! with events waiting instead of the oldest events of whichever account wrote most.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE INDEX event_outbox_undispatched_by_account ON event_outbox (account_id, seq) \
                 WHERE dispatched_at IS NULL",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("DROP INDEX event_outbox_undispatched_by_account")
            .await?;
        Ok(())
    }
}
