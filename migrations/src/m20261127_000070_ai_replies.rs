//! AI replies. A conversation counts the messages its contact sent (`inbound_seq`, moved with the unread count
//! in the same statement) and how many of them are answered (`ai_answered_seq`: by an AI reply, or by a
//! person's send); an AI reply answers the difference and is stored only while the count it answered is still
//! the conversation's, so a reply is never written twice and a message is never left without one. Ledger
//! entries name the conversation a charge was for.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [Conversations::InboundSeq, Conversations::AiAnsweredSeq] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Conversations::Table)
                        .add_column(big_integer(column).default(0))
                        .to_owned(),
                )
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(CreditLedger::Table)
                    .add_column(string_null(CreditLedger::ConversationId))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(CreditLedger::Table)
                    .drop_column(CreditLedger::ConversationId)
                    .to_owned(),
            )
            .await?;
        for column in [Conversations::AiAnsweredSeq, Conversations::InboundSeq] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Conversations::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Conversations {
    Table,
    InboundSeq,
    AiAnsweredSeq,
}

#[derive(DeriveIden)]
enum CreditLedger {
    Table,
    ConversationId,
}
