//! Tasks say what made them (`kind`: an agent's `tool`, or a `handoff` a person is to answer); the lists read
//! them by account, newest first, on the index `tasks_account_created` they already have.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::column::add(manager, "tasks", string(Alias::new("kind")).default("tool")).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::column::drop(manager, "tasks", "kind").await
    }
}
