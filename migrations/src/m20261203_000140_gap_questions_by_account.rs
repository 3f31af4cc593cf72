//! An account's handed-off questions of a day, read by its daily summary's "needs attention" (the day's
//! largest knowledge gaps), from an index rather than a scan of every account's questions.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const INDEX: &str = "gap_questions_account_asked";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name(INDEX)
                    .table(Alias::new("gap_questions"))
                    .col(Alias::new("account_id"))
                    .col(Alias::new("asked_at"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(Index::drop().name(INDEX).table(Alias::new("gap_questions")).to_owned())
            .await
    }
}
