//! Unique indexes over present values only. Most jobs carry no `unique_key` and no outbound message has a
//! `provider_message_id` until the provider answers, yet both indexes took an entry for every such row: one
//! index write more per queued send and per job claim, for entries no lookup can find (a NULL is never a
//! conflict and never searched for). A conflict target on these columns names the same condition
//! (`ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL`).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// One transaction on SQLite too: each index is dropped and made again under its name, and on a pool
    /// the second statement may run on another connection that still sees the index (seen: "index
    /// jobs_unique_key already exists" at the start of `serve` on SQLite).
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run(
            manager,
            [
                "DROP INDEX jobs_unique_key",
                "CREATE UNIQUE INDEX jobs_unique_key ON jobs (unique_key) WHERE unique_key IS NOT NULL",
                "DROP INDEX messages_provider_id",
                "CREATE UNIQUE INDEX messages_provider_id ON messages (channel_id, provider_message_id) \
                 WHERE provider_message_id IS NOT NULL",
            ],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run(
            manager,
            [
                "DROP INDEX jobs_unique_key",
                "CREATE UNIQUE INDEX jobs_unique_key ON jobs (unique_key)",
                "DROP INDEX messages_provider_id",
                "CREATE UNIQUE INDEX messages_provider_id ON messages (channel_id, provider_message_id)",
            ],
        )
        .await
    }
}

async fn run(manager: &SchemaManager<'_>, statements: [&str; 4]) -> Result<(), DbErr> {
    let db = manager.get_connection();
    for sql in statements {
        db.execute_unprepared(sql).await?;
    }
    Ok(())
}
