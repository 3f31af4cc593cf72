//! Webhook subscriptions, their deliveries and every delivery attempt; the outbox learns which events have
//! been fanned out to deliveries.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Webhooks::Table)
                    .col(string(Webhooks::Id).primary_key())
                    .col(string(Webhooks::AccountId))
                    .col(string_null(Webhooks::Name))
                    .col(text(Webhooks::Url))
                    .col(text(Webhooks::Description))
                    .col(text(Webhooks::Events))
                    .col(string(Webhooks::Secret))
                    .col(string(Webhooks::Status))
                    .col(string_null(Webhooks::DisabledReason))
                    .col(timestamp_with_time_zone_null(Webhooks::DisabledAt))
                    .col(integer(Webhooks::ConsecutiveFailures))
                    .col(timestamp_with_time_zone_null(Webhooks::FailingSince))
                    .col(timestamp_with_time_zone_null(Webhooks::LastSuccessAt))
                    .col(timestamp_with_time_zone_null(Webhooks::LastFailureAt))
                    .col(text_null(Webhooks::LastError))
                    .col(timestamp_with_time_zone(Webhooks::CreatedAt))
                    .col(timestamp_with_time_zone(Webhooks::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(WebhookDeliveries::Table)
                    .col(string(WebhookDeliveries::Id).primary_key())
                    .col(string(WebhookDeliveries::AccountId))
                    .col(string(WebhookDeliveries::WebhookId))
                    .col(string(WebhookDeliveries::EventId))
                    .col(string(WebhookDeliveries::EventType))
                    .col(string(WebhookDeliveries::Status))
                    .col(integer(WebhookDeliveries::AttemptCount))
                    .col(big_integer_null(WebhookDeliveries::NextAttemptMs))
                    .col(timestamp_with_time_zone(WebhookDeliveries::CreatedAt))
                    .col(timestamp_with_time_zone_null(WebhookDeliveries::DeliveredAt))
                    .col(timestamp_with_time_zone_null(WebhookDeliveries::SettledAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(WebhookAttempts::Table)
                    .col(big_pk_auto(WebhookAttempts::Seq))
                    .col(string(WebhookAttempts::DeliveryId))
                    .col(string(WebhookAttempts::WebhookId))
                    .col(integer(WebhookAttempts::Attempt))
                    .col(timestamp_with_time_zone(WebhookAttempts::StartedAt))
                    .col(integer_null(WebhookAttempts::StatusCode))
                    .col(integer(WebhookAttempts::DurationMs))
                    .col(text_null(WebhookAttempts::Error))
                    .col(timestamp_with_time_zone_null(WebhookAttempts::NextAttemptAt))
                    .col(boolean(WebhookAttempts::Succeeded))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(EventOutbox::Table)
                    .add_column(timestamp_with_time_zone_null(EventOutbox::DispatchedAt))
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        // Partial indexes (the same SQL on SQLite and PostgreSQL) keep the work queues small however much
        // history accumulates: workers only ever scan what is waiting.
        for sql in [
            "CREATE UNIQUE INDEX webhooks_account_name ON webhooks (account_id, name)",
            "CREATE INDEX webhooks_account_created ON webhooks (account_id, created_at, id)",
            "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_ms) WHERE status = 'pending'",
            "CREATE INDEX webhook_deliveries_webhook_created ON webhook_deliveries (webhook_id, created_at, id)",
            "CREATE INDEX webhook_deliveries_webhook_status ON webhook_deliveries (webhook_id, status, settled_at)",
            "CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id)",
            "CREATE INDEX webhook_attempts_webhook_started ON webhook_attempts (webhook_id, started_at)",
            "CREATE INDEX event_outbox_undispatched ON event_outbox (seq) WHERE dispatched_at IS NULL",
        ] {
            db.execute_unprepared(sql).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("DROP INDEX event_outbox_undispatched")
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(EventOutbox::Table)
                    .drop_column(EventOutbox::DispatchedAt)
                    .to_owned(),
            )
            .await?;
        for table in [
            WebhookAttempts::Table.into_iden(),
            WebhookDeliveries::Table.into_iden(),
            Webhooks::Table.into_iden(),
        ] {
            manager.drop_table(Table::drop().table(table).to_owned()).await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Webhooks {
    Table,
    Id,
    AccountId,
    Name,
    Url,
    Description,
    Events,
    Secret,
    Status,
    DisabledReason,
    DisabledAt,
    ConsecutiveFailures,
    FailingSince,
    LastSuccessAt,
    LastFailureAt,
    LastError,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum WebhookDeliveries {
    Table,
    Id,
    AccountId,
    WebhookId,
    EventId,
    EventType,
    Status,
    AttemptCount,
    NextAttemptMs,
    CreatedAt,
    DeliveredAt,
    SettledAt,
}

#[derive(DeriveIden)]
enum WebhookAttempts {
    Table,
    Seq,
    DeliveryId,
    WebhookId,
    Attempt,
    StartedAt,
    StatusCode,
    DurationMs,
    Error,
    NextAttemptAt,
    Succeeded,
}

#[derive(DeriveIden)]
enum EventOutbox {
    Table,
    DispatchedAt,
}
