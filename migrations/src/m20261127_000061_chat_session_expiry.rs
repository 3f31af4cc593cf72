//! Web chat sessions in which nothing was written expire some time after their visitor was last seen
//! (`webchat::empty_sessions`): an index on `last_seen_at` lets the sweep find the oldest without reading
//! every session.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("CREATE INDEX chat_sessions_last_seen ON chat_sessions (last_seen_at)")
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("DROP INDEX chat_sessions_last_seen")
            .await?;
        Ok(())
    }
}
