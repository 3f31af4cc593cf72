//! A handoff's task keeps the handoff's reason (`tasks.reason`), which a conversation's recap lists.
//!
//! The daily summary's ranges: each of its counts reads one account's rows of one day from an index, never
//! a table scan. `messages_account_created` carries the columns the message counts read, so they are
//! answered from the index alone. `IF NOT EXISTS`: an operator with a large PostgreSQL database may build them
//! beforehand with `CREATE INDEX CONCURRENTLY` under the same names, and the migration then leaves them be.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

const INDEXES: &[(&str, &str)] = &[
    (
        "conversations_account_created",
        "conversations (account_id, created_at)",
    ),
    (
        "conversations_account_closed",
        "conversations (account_id, closed_at) WHERE closed_at IS NOT NULL",
    ),
    (
        "messages_account_created",
        "messages (account_id, created_at, direction, author, status)",
    ),
    ("appointments_account_created", "appointments (account_id, created_at)"),
    ("tasks_account_status", "tasks (account_id, status, created_at)"),
    // A recap lists the contact's deals and the conversation's tasks.
    ("deals_contact", "deals (contact_id, created_at)"),
    ("tasks_conversation", "tasks (conversation_id, created_at)"),
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::column::add(manager, "tasks", text(Alias::new("reason")).default("")).await?;
        let db = manager.get_connection();
        for (name, definition) in INDEXES {
            db.execute_unprepared(&format!("CREATE INDEX IF NOT EXISTS {name} ON {definition}"))
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (name, _) in INDEXES {
            db.execute_unprepared(&format!("DROP INDEX IF EXISTS {name}")).await?;
        }
        crate::column::drop(manager, "tasks", "reason").await
    }
}
