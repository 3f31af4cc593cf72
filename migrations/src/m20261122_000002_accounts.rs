//! Platform access: accounts (plan, feature flags, credits, rate limit, agency parent), API keys (SHA-256
//! hashes only) and the credit ledger.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Accounts::Table)
                    .col(string(Accounts::Id).primary_key())
                    .col(string(Accounts::Name))
                    .col(string(Accounts::Plan))
                    .col(boolean(Accounts::ApiAccess))
                    .col(boolean(Accounts::WebhooksEnabled))
                    .col(big_integer(Accounts::CreditMilli))
                    .col(integer(Accounts::RateLimit))
                    .col(string_null(Accounts::ParentAccountId))
                    .col(timestamp_with_time_zone(Accounts::CreatedAt))
                    .col(timestamp_with_time_zone(Accounts::UpdatedAt))
                    .col(timestamp_with_time_zone_null(Accounts::DeletedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("accounts_parent")
                    .table(Accounts::Table)
                    .col(Accounts::ParentAccountId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ApiKeys::Table)
                    .col(string(ApiKeys::Id).primary_key())
                    .col(string(ApiKeys::AccountId))
                    .col(string_uniq(ApiKeys::KeyHash))
                    .col(string(ApiKeys::Masked))
                    .col(string(ApiKeys::Scopes))
                    .col(timestamp_with_time_zone(ApiKeys::CreatedAt))
                    .col(timestamp_with_time_zone_null(ApiKeys::RevokedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(ApiKeys::Table, ApiKeys::AccountId)
                            .to(Accounts::Table, Accounts::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("api_keys_account")
                    .table(ApiKeys::Table)
                    .col(ApiKeys::AccountId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(CreditLedger::Table)
                    .col(string(CreditLedger::Id).primary_key())
                    .col(string(CreditLedger::AccountId))
                    .col(big_integer(CreditLedger::DeltaMilli))
                    .col(big_integer(CreditLedger::BalanceAfterMilli))
                    .col(string(CreditLedger::Reason))
                    .col(timestamp_with_time_zone(CreditLedger::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(CreditLedger::Table, CreditLedger::AccountId)
                            .to(Accounts::Table, Accounts::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("credit_ledger_account")
                    .table(CreditLedger::Table)
                    .col(CreditLedger::AccountId)
                    .col(CreditLedger::CreatedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            CreditLedger::Table.into_iden(),
            ApiKeys::Table.into_iden(),
            Accounts::Table.into_iden(),
        ] {
            manager.drop_table(Table::drop().table(table).to_owned()).await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Accounts {
    Table,
    Id,
    Name,
    Plan,
    ApiAccess,
    WebhooksEnabled,
    CreditMilli,
    RateLimit,
    ParentAccountId,
    CreatedAt,
    UpdatedAt,
    DeletedAt,
}

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Id,
    AccountId,
    KeyHash,
    Masked,
    Scopes,
    CreatedAt,
    RevokedAt,
}

#[derive(DeriveIden)]
enum CreditLedger {
    Table,
    Id,
    AccountId,
    DeltaMilli,
    BalanceAfterMilli,
    Reason,
    CreatedAt,
}
