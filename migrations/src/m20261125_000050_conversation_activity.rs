//! The inbox's order without indexing a conversation's exact last activity. Every message sets
//! `conversations.last_message_at`; while two indexes held that column, no such update could be a heap-only
//! (HOT) update on PostgreSQL, so each message wrote a new entry into all five of the table's indexes. The
//! indexes now hold `activity_bucket`, the five-minute window `last_message_at` falls in (unix seconds / 300,
//! the core's `conversations::activity`), which changes at most once per window per conversation; the exact
//! time orders the rows within a window. `conversations` also leaves a fifth of each page free on PostgreSQL,
//! room for the new version of a row to stay on its page.

use sea_orm_migration::{prelude::*, schema::*, sea_orm::DatabaseBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Conversations {
    Table,
    ActivityBucket,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// One transaction on SQLite too, as for `partial_keys`: the indexes are dropped and made again under
    /// their names.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Conversations::Table)
                    .add_column(big_integer(Conversations::ActivityBucket).default(0))
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        let backfill = match manager.get_database_backend() {
            DatabaseBackend::Postgres => {
                "UPDATE conversations SET activity_bucket = floor(extract(epoch FROM last_message_at) / 300)::bigint"
            }
            _ => "UPDATE conversations SET activity_bucket = CAST(strftime('%s', last_message_at) AS INTEGER) / 300",
        };
        db.execute_unprepared(backfill).await?;
        for sql in [
            "DROP INDEX conversations_account_activity",
            "CREATE INDEX conversations_account_activity ON conversations (account_id, activity_bucket)",
            "DROP INDEX conversations_idle",
            "CREATE INDEX conversations_idle ON conversations (activity_bucket) WHERE status = 'open'",
        ] {
            db.execute_unprepared(sql).await?;
        }
        if manager.get_database_backend() == DatabaseBackend::Postgres {
            db.execute_unprepared("ALTER TABLE conversations SET (fillfactor = 80)")
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        if manager.get_database_backend() == DatabaseBackend::Postgres {
            db.execute_unprepared("ALTER TABLE conversations RESET (fillfactor)")
                .await?;
        }
        for sql in [
            "DROP INDEX conversations_account_activity",
            "CREATE INDEX conversations_account_activity ON conversations (account_id, last_message_at, id)",
            "DROP INDEX conversations_idle",
            "CREATE INDEX conversations_idle ON conversations (last_message_at) WHERE status = 'open'",
        ] {
            db.execute_unprepared(sql).await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(Conversations::Table)
                    .drop_column(Conversations::ActivityBucket)
                    .to_owned(),
            )
            .await
    }
}
