//! The conversation engine: durable jobs, contacts with their channel identities, conversations, messages and
//! the idempotency keys of sends. Uniqueness that the contract promises (one contact per phone, e-mail or
//! identity; one open conversation per contact and channel; one inbound message per provider id) is held by
//! unique indexes, so concurrent requests on any replica cannot break it.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Jobs::Table)
                    .col(string(Jobs::Id).primary_key())
                    .col(string(Jobs::AccountId))
                    .col(string(Jobs::Kind))
                    .col(string(Jobs::Lane))
                    .col(text(Jobs::Payload))
                    .col(string(Jobs::Status))
                    .col(integer(Jobs::Attempts))
                    .col(integer(Jobs::MaxAttempts))
                    .col(big_integer(Jobs::RunAtMs))
                    .col(big_integer_null(Jobs::ClaimToken))
                    .col(text_null(Jobs::LastError))
                    .col(string_null(Jobs::UniqueKey))
                    .col(timestamp_with_time_zone(Jobs::CreatedAt))
                    .col(timestamp_with_time_zone(Jobs::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Contacts::Table)
                    .col(string(Contacts::Id).primary_key())
                    .col(string(Contacts::AccountId))
                    .col(string(Contacts::Name))
                    .col(string_null(Contacts::Phone))
                    .col(string_null(Contacts::Email))
                    .col(text(Contacts::Tags))
                    .col(text(Contacts::Attributes))
                    .col(boolean(Contacts::OptedOut))
                    .col(text(Contacts::Recap))
                    .col(timestamp_with_time_zone_null(Contacts::RecapAt))
                    .col(timestamp_with_time_zone(Contacts::CreatedAt))
                    .col(timestamp_with_time_zone(Contacts::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ContactIdentities::Table)
                    .col(string(ContactIdentities::AccountId))
                    .col(string(ContactIdentities::Kind))
                    .col(string(ContactIdentities::ExternalId))
                    .col(string(ContactIdentities::ContactId))
                    .col(string(ContactIdentities::Channel))
                    .col(timestamp_with_time_zone(ContactIdentities::CreatedAt))
                    .primary_key(
                        Index::create()
                            .col(ContactIdentities::AccountId)
                            .col(ContactIdentities::Kind)
                            .col(ContactIdentities::ExternalId),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Conversations::Table)
                    .col(string(Conversations::Id).primary_key())
                    .col(string(Conversations::AccountId))
                    .col(string(Conversations::ContactId))
                    .col(string(Conversations::Channel))
                    .col(string(Conversations::ChannelId))
                    .col(string(Conversations::ChannelType))
                    .col(string(Conversations::AgentId))
                    .col(string(Conversations::Status))
                    .col(boolean(Conversations::Handoff))
                    .col(string(Conversations::HandoffReason))
                    .col(integer(Conversations::UnreadCount))
                    .col(timestamp_with_time_zone(Conversations::LastMessageAt))
                    .col(string(Conversations::BroadcastId))
                    .col(timestamp_with_time_zone(Conversations::CreatedAt))
                    .col(timestamp_with_time_zone_null(Conversations::ClosedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Messages::Table)
                    .col(big_pk_auto(Messages::Seq))
                    .col(string_uniq(Messages::Id))
                    .col(string(Messages::AccountId))
                    .col(string(Messages::ConversationId))
                    .col(string(Messages::ContactId))
                    .col(string(Messages::ChannelId))
                    .col(string(Messages::Direction))
                    .col(string(Messages::Author))
                    .col(text(Messages::Text))
                    .col(text(Messages::Attachments))
                    .col(string(Messages::Status))
                    .col(string_null(Messages::ErrorCode))
                    .col(text_null(Messages::ErrorMessage))
                    .col(string_null(Messages::ProviderMessageId))
                    .col(text(Messages::Reactions))
                    .col(boolean(Messages::Edited))
                    .col(text(Messages::Edits))
                    .col(boolean(Messages::Removed))
                    .col(string(Messages::ReplyTo))
                    .col(string(Messages::BroadcastId))
                    .col(timestamp_with_time_zone(Messages::CreatedAt))
                    .col(timestamp_with_time_zone_null(Messages::SentAt))
                    .col(timestamp_with_time_zone_null(Messages::DeliveredAt))
                    .col(timestamp_with_time_zone_null(Messages::ReadAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdempotencyKeys::Table)
                    .col(string(IdempotencyKeys::AccountId))
                    .col(string(IdempotencyKeys::Key))
                    .col(string(IdempotencyKeys::Fingerprint))
                    .col(string(IdempotencyKeys::MessageId))
                    .col(string(IdempotencyKeys::ContactId))
                    .col(timestamp_with_time_zone(IdempotencyKeys::CreatedAt))
                    .primary_key(
                        Index::create()
                            .col(IdempotencyKeys::AccountId)
                            .col(IdempotencyKeys::Key),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Channels::Table)
                    .add_column(string(Channels::VerifyToken).default(""))
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        // Partial indexes (the same SQL on SQLite and PostgreSQL): the job queue index holds only waiting
        // jobs, and "one open conversation per contact and channel" is a unique index over open ones.
        for sql in [
            "CREATE INDEX jobs_due ON jobs (run_at_ms, lane) WHERE status = 'pending'",
            "CREATE INDEX jobs_claimed ON jobs (claim_token) WHERE claim_token IS NOT NULL",
            "CREATE UNIQUE INDEX jobs_unique_key ON jobs (unique_key)",
            "CREATE INDEX jobs_failed ON jobs (updated_at, id) WHERE status = 'failed'",
            "CREATE UNIQUE INDEX contacts_account_phone ON contacts (account_id, phone)",
            "CREATE UNIQUE INDEX contacts_account_email ON contacts (account_id, email)",
            "CREATE INDEX contacts_account_created ON contacts (account_id, created_at, id)",
            "CREATE INDEX contact_identities_contact ON contact_identities (contact_id)",
            "CREATE UNIQUE INDEX conversations_one_open ON conversations (account_id, contact_id, channel) \
             WHERE status = 'open'",
            "CREATE INDEX conversations_account_activity ON conversations (account_id, last_message_at, id)",
            "CREATE INDEX conversations_contact ON conversations (contact_id, created_at)",
            "CREATE INDEX conversations_idle ON conversations (last_message_at) WHERE status = 'open'",
            "CREATE INDEX messages_conversation ON messages (conversation_id, seq)",
            "CREATE INDEX messages_contact ON messages (contact_id)",
            "CREATE UNIQUE INDEX messages_provider_id ON messages (channel_id, provider_message_id)",
            "CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at)",
        ] {
            db.execute_unprepared(sql).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Channels::Table)
                    .drop_column(Channels::VerifyToken)
                    .to_owned(),
            )
            .await?;
        for table in [
            IdempotencyKeys::Table.into_iden(),
            Messages::Table.into_iden(),
            Conversations::Table.into_iden(),
            ContactIdentities::Table.into_iden(),
            Contacts::Table.into_iden(),
            Jobs::Table.into_iden(),
        ] {
            manager.drop_table(Table::drop().table(table).to_owned()).await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Jobs {
    Table,
    Id,
    AccountId,
    Kind,
    Lane,
    Payload,
    Status,
    Attempts,
    MaxAttempts,
    RunAtMs,
    ClaimToken,
    LastError,
    UniqueKey,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Contacts {
    Table,
    Id,
    AccountId,
    Name,
    Phone,
    Email,
    Tags,
    Attributes,
    OptedOut,
    Recap,
    RecapAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ContactIdentities {
    Table,
    AccountId,
    Kind,
    ExternalId,
    ContactId,
    Channel,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Conversations {
    Table,
    Id,
    AccountId,
    ContactId,
    Channel,
    ChannelId,
    ChannelType,
    AgentId,
    Status,
    Handoff,
    HandoffReason,
    UnreadCount,
    LastMessageAt,
    BroadcastId,
    CreatedAt,
    ClosedAt,
}

#[derive(DeriveIden)]
enum Messages {
    Table,
    Seq,
    Id,
    AccountId,
    ConversationId,
    ContactId,
    ChannelId,
    Direction,
    Author,
    Text,
    Attachments,
    Status,
    ErrorCode,
    ErrorMessage,
    ProviderMessageId,
    Reactions,
    Edited,
    Edits,
    Removed,
    ReplyTo,
    BroadcastId,
    CreatedAt,
    SentAt,
    DeliveredAt,
    ReadAt,
}

#[derive(DeriveIden)]
enum IdempotencyKeys {
    Table,
    AccountId,
    Key,
    Fingerprint,
    MessageId,
    ContactId,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Channels {
    Table,
    VerifyToken,
}
