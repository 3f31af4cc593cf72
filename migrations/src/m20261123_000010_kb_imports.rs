//! Knowledge imports: where a source was imported from (`kb_sources.origin_url`: the page, or the sitemap of
//! a bulk import), and its pages (`kb_source_pages`), one row per page to read, so an import that stopped
//! resumes at its first page still `pending`, and each page's error and charge are kept.

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
                    .add_column(text_null(c("origin_url")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(c("kb_source_pages"))
                    .col(string(c("id")).primary_key())
                    .col(string(c("source_id")))
                    .col(integer(c("position")))
                    .col(text(c("url")))
                    // pending | done | failed
                    .col(string(c("status")))
                    .col(string_null(c("error_code")))
                    .col(text_null(c("error_message")))
                    .col(integer(c("characters")))
                    .col(big_integer(c("credits_milli")))
                    .col(timestamp_with_time_zone(c("updated_at")))
                    .foreign_key(
                        ForeignKey::create()
                            .from(c("kb_source_pages"), c("source_id"))
                            .to(c("kb_sources"), c("id"))
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .get_connection()
            .execute_unprepared("CREATE UNIQUE INDEX kb_source_pages_order ON kb_source_pages (source_id, position)")
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(c("kb_source_pages")).to_owned())
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(c("kb_sources"))
                    .drop_column(c("origin_url"))
                    .to_owned(),
            )
            .await
    }
}
