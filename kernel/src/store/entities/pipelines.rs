//! A pipeline of an account; its id is unique within the account (`default` is the main one).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "pipelines")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub account_id: crate::tenant::AccountId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: crate::resource_id::PipelineId,
    pub name: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
