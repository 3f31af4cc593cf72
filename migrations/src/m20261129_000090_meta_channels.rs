//! Meta channels. A WhatsApp template message keeps its template (`messages.template`, JSON
//! `{name, language, parameters}`, `""` for any other message) until the deliver job sends it.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::column::add(manager, "messages", text(Alias::new("template")).default("")).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::column::drop(manager, "messages", "template").await
    }
}
