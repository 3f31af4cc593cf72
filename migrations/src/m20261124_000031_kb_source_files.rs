//! Document imports: an uploaded document is kept (`kb_source_files`, one row per source, written in the
//! same transaction as the source and its job) until its import ends, so an import that stopped reads it
//! again after a restart; `kb_sources.file_name` keeps its name for the API after the bytes are gone.

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
                    .table(c("kb_sources"))
                    .add_column(text_null(c("file_name")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(c("kb_source_files"))
                    .col(string(c("source_id")).primary_key())
                    .col(text(c("file_name")))
                    .col(text(c("content_type")))
                    // html | text | markdown | pdf | docx | csv
                    .col(string(c("format")))
                    .col(blob(c("data")))
                    .col(timestamp_with_time_zone(c("created_at")))
                    .foreign_key(
                        ForeignKey::create()
                            .from(c("kb_source_files"), c("source_id"))
                            .to(c("kb_sources"), c("id"))
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(c("kb_source_files")).to_owned())
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(c("kb_sources"))
                    .drop_column(c("file_name"))
                    .to_owned(),
            )
            .await
    }
}
