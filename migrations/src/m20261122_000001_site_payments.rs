//! Site API storage: payment orders, subscribers (keyed by phone) and service settings (generated secrets).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Orders::Table)
                    .col(string(Orders::Id).primary_key())
                    .col(string(Orders::Provider))
                    .col(string(Orders::Plan))
                    .col(string(Orders::Currency))
                    .col(big_integer(Orders::Amount))
                    .col(string(Orders::Phone))
                    .col(string(Orders::Name))
                    .col(string(Orders::Email))
                    .col(string(Orders::BusinessName))
                    .col(string(Orders::Status))
                    .col(string_null(Orders::PaymentId))
                    .col(timestamp_with_time_zone(Orders::CreatedAt))
                    .col(timestamp_with_time_zone_null(Orders::PaidAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Subscribers::Table)
                    .col(string(Subscribers::Phone).primary_key())
                    .col(string(Subscribers::Name))
                    .col(string(Subscribers::Email))
                    .col(string(Subscribers::BusinessName))
                    .col(string(Subscribers::Plan))
                    .col(string(Subscribers::Status))
                    .col(string(Subscribers::LastOrderId))
                    .col(timestamp_with_time_zone(Subscribers::ActivatedAt))
                    .col(timestamp_with_time_zone(Subscribers::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Settings::Table)
                    .col(string(Settings::Key).primary_key())
                    .col(text(Settings::Value))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            Orders::Table.into_iden(),
            Subscribers::Table.into_iden(),
            Settings::Table.into_iden(),
        ] {
            manager.drop_table(Table::drop().table(table).to_owned()).await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Orders {
    Table,
    Id,
    Provider,
    Plan,
    Currency,
    Amount,
    Phone,
    Name,
    Email,
    BusinessName,
    Status,
    PaymentId,
    CreatedAt,
    PaidAt,
}

#[derive(DeriveIden)]
enum Subscribers {
    Table,
    Phone,
    Name,
    Email,
    BusinessName,
    Plan,
    Status,
    LastOrderId,
    ActivatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Settings {
    Table,
    Key,
    Value,
}
