//! Credits held before work that costs the operator money (a model call): `credit_holds`, one row per piece of
//! work by its key, counted against the balance until it is settled (the ledger entry) or released, or until
//! `expires_at` passes (a process that died between hold and settle). A built-in tool's write names its
//! conversation (`tool_effects.conversation_id`), so a conversation's writes of a day are counted from an index.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

fn c(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(c("credit_holds"))
                    .col(string(c("key")).primary_key())
                    .col(string(c("account_id")))
                    .col(big_integer(c("amount_milli")))
                    // reply | follow_up | summary | import | evaluation
                    .col(string(c("purpose")))
                    .col(timestamp_with_time_zone(c("expires_at")))
                    .col(timestamp_with_time_zone(c("created_at")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("credit_holds_account_expires")
                    .table(c("credit_holds"))
                    .col(c("account_id"))
                    .col(c("expires_at"))
                    .to_owned(),
            )
            .await?;
        crate::column::add(manager, "tool_effects", string(c("conversation_id")).default("")).await?;
        manager
            .create_index(
                Index::create()
                    .name("tool_effects_conversation_created")
                    .table(c("tool_effects"))
                    .col(c("conversation_id"))
                    .col(c("created_at"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name("tool_effects_conversation_created")
                    .table(c("tool_effects"))
                    .to_owned(),
            )
            .await?;
        crate::column::drop(manager, "tool_effects", "conversation_id").await?;
        manager
            .drop_table(Table::drop().table(c("credit_holds")).to_owned())
            .await
    }
}
