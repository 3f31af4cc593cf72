//! The attempt that delivered is kept in its delivery's row (`delivered_*`), written by the same update that
//! settles the delivery, so a delivery that succeeds at its first try is three row versions instead of
//! four; `webhook_attempts` keeps the attempts that did not deliver. A delivery succeeds at most once (a
//! settled delivery carries no claim, so no later result is written to it), so one set of columns holds it.
//! Deliveries by event are indexed only while they may still be attempted (not succeeded): that index
//! answers whether an event must be kept, and a succeeded delivery no longer reads its event.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum WebhookDeliveries {
    Table,
    DeliveredAttempt,
    DeliveredStartedAt,
    DeliveredStatusCode,
    DeliveredDurationMs,
}

#[derive(DeriveIden)]
enum WebhookAttempts {
    Table,
    Succeeded,
}

fn delivered_columns() -> [ColumnDef; 4] {
    [
        integer_null(WebhookDeliveries::DeliveredAttempt),
        timestamp_with_time_zone_null(WebhookDeliveries::DeliveredStartedAt),
        integer_null(WebhookDeliveries::DeliveredStatusCode),
        integer_null(WebhookDeliveries::DeliveredDurationMs),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters one at a time.
        for mut column in delivered_columns() {
            manager
                .alter_table(
                    Table::alter()
                        .table(WebhookDeliveries::Table)
                        .add_column(&mut column)
                        .to_owned(),
                )
                .await?;
        }
        let db = manager.get_connection();
        for sql in [
            "UPDATE webhook_deliveries SET delivered_attempt = a.attempt, delivered_started_at = a.started_at, \
             delivered_status_code = a.status_code, delivered_duration_ms = a.duration_ms \
             FROM webhook_attempts AS a WHERE a.delivery_id = webhook_deliveries.id AND a.succeeded",
            "DELETE FROM webhook_attempts WHERE succeeded",
            "CREATE INDEX webhook_deliveries_undelivered_event ON webhook_deliveries (event_id) \
             WHERE status <> 'succeeded'",
            "DROP INDEX webhook_deliveries_event",
        ] {
            db.execute_unprepared(sql).await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookAttempts::Table)
                    .drop_column(WebhookAttempts::Succeeded)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookAttempts::Table)
                    .add_column(boolean(WebhookAttempts::Succeeded).default(false))
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        for sql in [
            "INSERT INTO webhook_attempts (delivery_id, webhook_id, attempt, started_at, status_code, duration_ms, \
             succeeded) SELECT id, webhook_id, delivered_attempt, delivered_started_at, delivered_status_code, \
             delivered_duration_ms, TRUE FROM webhook_deliveries WHERE delivered_attempt IS NOT NULL",
            "CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id)",
            "DROP INDEX webhook_deliveries_undelivered_event",
        ] {
            db.execute_unprepared(sql).await?;
        }
        for column in [
            WebhookDeliveries::DeliveredAttempt,
            WebhookDeliveries::DeliveredStartedAt,
            WebhookDeliveries::DeliveredStatusCode,
            WebhookDeliveries::DeliveredDurationMs,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(WebhookDeliveries::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
