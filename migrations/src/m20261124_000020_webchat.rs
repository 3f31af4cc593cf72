//! Web chat: a channel's public widget key (`channels.widget_key`, unique, null for other channels), visitor
//! sessions (`chat_sessions`: one per visitor and channel, its token kept only as a SHA-256 hash, deleted with
//! its channel, which revokes it, and with its contact, which erases it), and when a message was last
//! corrected, removed or reacted to (`messages.revised_at`), so a reconnecting visitor is sent what changed
//! while it was away.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

fn c(name: &str) -> Alias {
    Alias::new(name)
}

/// A foreign key from `chat_sessions.column` to `target.id` that deletes the session with its target.
fn cascade(column: &str, target: &str) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .from(c("chat_sessions"), c(column))
        .to(c(target), c("id"))
        .on_delete(ForeignKeyAction::Cascade)
        .to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(c("channels"))
                    .add_column(string_null(c("widget_key")))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(c("messages"))
                    .add_column(timestamp_with_time_zone_null(c("revised_at")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(c("chat_sessions"))
                    .col(string(c("id")).primary_key())
                    .col(string(c("account_id")))
                    .col(string(c("channel_id")))
                    .col(string(c("contact_id")))
                    .col(string(c("visitor_name")))
                    .col(string(c("visitor_email")))
                    .col(text(c("page_url")))
                    .col(string(c("token_hash")))
                    .col(timestamp_with_time_zone(c("expires_at")))
                    .col(timestamp_with_time_zone(c("started_at")))
                    .col(timestamp_with_time_zone(c("last_seen_at")))
                    // Online until then: refreshed while a socket of the session is open.
                    .col(timestamp_with_time_zone(c("present_until")))
                    .foreign_key(&mut cascade("channel_id", "channels"))
                    .foreign_key(&mut cascade("contact_id", "contacts"))
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        for sql in [
            "CREATE UNIQUE INDEX channels_widget_key ON channels (widget_key)",
            "CREATE UNIQUE INDEX chat_sessions_token ON chat_sessions (token_hash)",
            "CREATE INDEX chat_sessions_channel ON chat_sessions (channel_id)",
            "CREATE INDEX chat_sessions_contact ON chat_sessions (contact_id)",
            // A visitor's thread is the contact's messages on one channel, in order; the index also serves
            // what `messages_contact` served (a contact's messages), so it replaces it: one index more per
            // message stored would cost every send.
            "CREATE INDEX messages_contact_thread ON messages (contact_id, channel_id, seq)",
            "DROP INDEX messages_contact",
        ] {
            db.execute_unprepared(sql).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for sql in [
            "CREATE INDEX messages_contact ON messages (contact_id)",
            "DROP INDEX messages_contact_thread",
            "DROP INDEX channels_widget_key",
        ] {
            db.execute_unprepared(sql).await?;
        }
        manager
            .drop_table(Table::drop().table(c("chat_sessions")).to_owned())
            .await?;
        for (table, column) in [("messages", "revised_at"), ("channels", "widget_key")] {
            manager
                .alter_table(Table::alter().table(c(table)).drop_column(c(column)).to_owned())
                .await?;
        }
        Ok(())
    }
}
