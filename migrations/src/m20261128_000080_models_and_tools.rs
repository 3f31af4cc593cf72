//! Models and tools. An account may connect its own model provider (`model_providers`, one row per account,
//! the API key sealed like channel credentials). An agent's built-in tools store appointments on the contact
//! (`appointments`) and tasks for the team (`tasks`, shown in the daily summary); `tool_effects` keys each such
//! write, so that a reply run again after a failure does not make it twice. A conversation counts the
//! follow-ups sent since the agent's last reply (`follow_ups_sent`) and the contact's message count that reply
//! answered (`follow_up_seq`): a message from the contact since then moves `inbound_seq` past it, which ends
//! the follow-ups.

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
            .alter_table(
                Table::alter()
                    .table(c("conversations"))
                    .add_column(big_integer(c("follow_up_seq")).default(0))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(c("conversations"))
                    .add_column(integer(c("follow_ups_sent")).default(0))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(c("model_providers"))
                    .col(string(c("account_id")).primary_key())
                    // anthropic | openai
                    .col(string(c("provider")))
                    // The API key, sealed with the account id as context.
                    .col(text(c("sealed_key")))
                    .col(text(c("base_url")))
                    .col(text(c("model")))
                    .col(timestamp_with_time_zone(c("created_at")))
                    .col(timestamp_with_time_zone(c("updated_at")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(c("appointments"))
                    .col(string(c("id")).primary_key())
                    .col(string(c("account_id")))
                    .col(string(c("contact_id")))
                    .col(string(c("conversation_id")))
                    .col(string(c("agent_id")))
                    .col(timestamp_with_time_zone(c("start_time")))
                    .col(text(c("name")))
                    .col(text(c("email")))
                    .col(text(c("notes")))
                    .col(timestamp_with_time_zone(c("created_at")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("appointments_contact")
                    .table(c("appointments"))
                    .col(c("account_id"))
                    .col(c("contact_id"))
                    .col(c("start_time"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(c("tasks"))
                    .col(string(c("id")).primary_key())
                    .col(string(c("account_id")))
                    .col(text(c("title")))
                    .col(timestamp_with_time_zone_null(c("due")))
                    // open | done
                    .col(string(c("status")))
                    .col(string(c("contact_id")))
                    .col(string(c("conversation_id")))
                    .col(string(c("agent_id")))
                    .col(timestamp_with_time_zone(c("created_at")))
                    .col(timestamp_with_time_zone(c("updated_at")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(c("tool_effects"))
                    .col(string(c("key")).primary_key())
                    .col(string(c("account_id")))
                    .col(text(c("result")))
                    .col(timestamp_with_time_zone(c("created_at")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("tool_effects_created")
                    .table(c("tool_effects"))
                    .col(c("created_at"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("tasks_account_created")
                    .table(c("tasks"))
                    .col(c("account_id"))
                    .col(c("created_at"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in ["tool_effects", "tasks", "appointments", "model_providers"] {
            manager.drop_table(Table::drop().table(c(table)).to_owned()).await?;
        }
        for column in ["follow_ups_sent", "follow_up_seq"] {
            manager
                .alter_table(
                    Table::alter()
                        .table(c("conversations"))
                        .drop_column(c(column))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
