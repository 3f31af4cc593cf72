//! Claim fencing for webhook deliveries. `claim_token` names the claim that holds a delivery (null when none
//! does): a result is written only while the delivery still carries the token of the claim that produced it,
//! and the worker renews the lease of the tokens it holds. The due index carries the subscription and the
//! account, so the claim can pass over those at their in-flight cap without reading the rows.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookDeliveries::Table)
                    .add_column(big_integer_null(WebhookDeliveries::ClaimToken))
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        for sql in [
            "CREATE INDEX webhook_deliveries_due_by_endpoint ON webhook_deliveries \
             (next_attempt_ms, webhook_id, account_id) WHERE status = 'pending'",
            "DROP INDEX webhook_deliveries_due",
            "CREATE INDEX webhook_deliveries_claimed ON webhook_deliveries (claim_token) \
             WHERE claim_token IS NOT NULL",
        ] {
            db.execute_unprepared(sql).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for sql in [
            "DROP INDEX webhook_deliveries_claimed",
            "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_ms) WHERE status = 'pending'",
            "DROP INDEX webhook_deliveries_due_by_endpoint",
        ] {
            db.execute_unprepared(sql).await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookDeliveries::Table)
                    .drop_column(WebhookDeliveries::ClaimToken)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum WebhookDeliveries {
    Table,
    ClaimToken,
}
