//! A stage of a pipeline; its id is unique across all of the account's pipelines.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "stages")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub account_id: crate::tenant::AccountId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub pipeline_id: crate::resource_id::PipelineId,
    pub name: String,
    pub position: i32,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
