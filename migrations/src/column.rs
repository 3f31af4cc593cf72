//! Adding a column to a table and dropping it again: what a migration that only widens a table does.

use sea_orm_migration::prelude::*;

pub async fn add(manager: &SchemaManager<'_>, table: &str, column: &mut ColumnDef) -> Result<(), DbErr> {
    manager
        .alter_table(Table::alter().table(Alias::new(table)).add_column(column).to_owned())
        .await
}

pub async fn drop(manager: &SchemaManager<'_>, table: &str, column: &str) -> Result<(), DbErr> {
    manager
        .alter_table(
            Table::alter()
                .table(Alias::new(table))
                .drop_column(Alias::new(column))
                .to_owned(),
        )
        .await
}
