//! A broadcast's recipients whose messages are not written yet, in contact order: once its audience is
//! expanded, the broadcast's messages are written batch after batch along this index, and a row leaves it
//! when its message is written.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE INDEX broadcast_recipients_unwritten ON broadcast_recipients (broadcast_id, contact_id) \
                 WHERE message_id = ''",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("DROP INDEX broadcast_recipients_unwritten")
            .await?;
        Ok(())
    }
}
