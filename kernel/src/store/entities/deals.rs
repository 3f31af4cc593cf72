//! A deal. `pipeline_id` follows its stage and is null once the stage is gone; `tags` is a JSON array.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "deals")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub account_id: crate::tenant::AccountId,
    pub title: String,
    pub description: String,
    pub company: String,
    pub stage: String,
    pub pipeline_id: Option<crate::resource_id::PipelineId>,
    pub value: f64,
    pub probability: f64,
    pub priority: String,
    pub status: String,
    pub source: String,
    pub position: i32,
    pub contact_id: String,
    pub assigned_to: String,
    pub tags: String,
    pub close_date: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub stage_entered_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
