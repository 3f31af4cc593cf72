//! Deals and pipelines, and the event outbox every change writes to in its own transaction. Existing
//! accounts get the main pipeline (`default`) with its six stages.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The main pipeline's stages: (id, name).
const DEFAULT_STAGES: [(&str, &str); 6] = [
    ("new", "New"),
    ("qualified", "Qualified"),
    ("proposal", "Proposal"),
    ("negotiation", "Negotiation"),
    ("won", "Won"),
    ("lost", "Lost"),
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Pipelines::Table)
                    .col(string(Pipelines::AccountId))
                    .col(string(Pipelines::Id))
                    .col(string(Pipelines::Name))
                    .col(timestamp_with_time_zone(Pipelines::CreatedAt))
                    .primary_key(Index::create().col(Pipelines::AccountId).col(Pipelines::Id))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Stages::Table)
                    .col(string(Stages::AccountId))
                    .col(string(Stages::Id))
                    .col(string(Stages::PipelineId))
                    .col(string(Stages::Name))
                    .col(integer(Stages::Position))
                    .primary_key(Index::create().col(Stages::AccountId).col(Stages::Id))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Deals::Table)
                    .col(string(Deals::Id).primary_key())
                    .col(string(Deals::AccountId))
                    .col(string(Deals::Title))
                    .col(text(Deals::Description))
                    .col(string(Deals::Company))
                    .col(string(Deals::Stage))
                    .col(string_null(Deals::PipelineId))
                    .col(double(Deals::Value))
                    .col(double(Deals::Probability))
                    .col(string(Deals::Priority))
                    .col(string(Deals::Status))
                    .col(string(Deals::Source))
                    .col(integer(Deals::Position))
                    .col(string(Deals::ContactId))
                    .col(string(Deals::AssignedTo))
                    .col(text(Deals::Tags))
                    .col(timestamp_with_time_zone_null(Deals::CloseDate))
                    .col(timestamp_with_time_zone(Deals::CreatedAt))
                    .col(timestamp_with_time_zone(Deals::UpdatedAt))
                    .col(timestamp_with_time_zone(Deals::StageEnteredAt))
                    .to_owned(),
            )
            .await?;
        for (name, columns) in [
            ("deals_newest", vec![Deals::AccountId, Deals::CreatedAt, Deals::Id]),
            (
                "deals_stage_position",
                vec![Deals::AccountId, Deals::Stage, Deals::Position],
            ),
        ] {
            let mut index = Index::create();
            index.name(name).table(Deals::Table);
            for column in columns {
                index.col(column);
            }
            manager.create_index(index.to_owned()).await?;
        }
        manager
            .create_table(
                Table::create()
                    .table(EventOutbox::Table)
                    .col(big_pk_auto(EventOutbox::Seq))
                    .col(string_uniq(EventOutbox::Id))
                    .col(string(EventOutbox::AccountId))
                    .col(string(EventOutbox::EventType))
                    .col(text(EventOutbox::Payload))
                    .col(timestamp_with_time_zone(EventOutbox::CreatedAt))
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        db.execute_unprepared(
            "INSERT INTO pipelines (account_id, id, name, created_at) \
             SELECT id, 'default', 'Main pipeline', created_at FROM accounts",
        )
        .await?;
        for (position, (id, name)) in DEFAULT_STAGES.iter().enumerate() {
            db.execute_unprepared(&format!(
                "INSERT INTO stages (account_id, id, pipeline_id, name, position) \
                 SELECT id, '{id}', 'default', '{name}', {position} FROM accounts"
            ))
            .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            EventOutbox::Table.into_iden(),
            Deals::Table.into_iden(),
            Stages::Table.into_iden(),
            Pipelines::Table.into_iden(),
        ] {
            manager.drop_table(Table::drop().table(table).to_owned()).await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Pipelines {
    Table,
    AccountId,
    Id,
    Name,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Stages {
    Table,
    AccountId,
    Id,
    PipelineId,
    Name,
    Position,
}

#[derive(DeriveIden)]
enum Deals {
    Table,
    Id,
    AccountId,
    Title,
    Description,
    Company,
    Stage,
    PipelineId,
    Value,
    Probability,
    Priority,
    Status,
    Source,
    Position,
    ContactId,
    AssignedTo,
    Tags,
    CloseDate,
    CreatedAt,
    UpdatedAt,
    StageEnteredAt,
}

#[derive(DeriveIden)]
enum EventOutbox {
    Table,
    Seq,
    Id,
    AccountId,
    EventType,
    Payload,
    CreatedAt,
}
